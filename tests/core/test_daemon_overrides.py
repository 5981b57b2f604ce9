"""``[overrides]``: the daemon's setters run as the commands a site allows, on a driver that refuses them.

The simulated driver here is unprivileged (every library setter answers NoPermission, as
for a daemon that is not root). The override is a stand-in for ``sudo nvidia-smi``: a
Python script written by the test that appends its argv to a file and changes the driver
state as root's nvidia-smi would (or fails, or hangs, when told to). The daemon runs in
this process on its real Unix socket; the clients are httpx (upstream's HTTP API) and the
engine's DaemonClient (the private protocol).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import tomllib
from pathlib import Path

import httpx
import pytest
from zeus_daemon_helpers import ZEUS, serve_in_process, stop_in_process, wait_until

from zeus_core.daemon import DaemonClient
from zeus_core.daemon.config import ConfigError, read_config, resolve
from zeus_core.daemon.overrides import problems
from zeus_core.daemon.server import Daemon
from zeus_core.engine import registry as zreg
from zeus_plugins_nvml import fake_pynvml

STAND_IN = '''
"""A stand-in for `sudo nvidia-smi`: -i INDEX then -pl WATTS, -lgc MIN,MAX or -rgc."""
import json, os, sys, time
from zeus_core.devicekit import simulated
from zeus_plugins_nvml import fake_pynvml

log, args = sys.argv[1], sys.argv[2:]
with open(log, "a") as f:
    f.write(json.dumps(args) + "\\n")
if os.path.exists(log + ".fail"):
    sys.stderr.write("Changing power management limit is not supported in current scope for GPU: 00000000:07:00.0.\\n")
    sys.exit(3)
if os.path.exists(log + ".hang"):
    time.sleep(60)
path = os.environ["ZEUS_FAKE_NVML"]
state = fake_pynvml.read_state(path)
g = state["gpus"][int(args[1])]
if args[2] == "-pl":
    g["limit_w"] = float(args[3])
elif args[2] == "-lgc":
    g["locked_clocks"] = [int(c) for c in args[3].split(",")]
elif args[2] == "-rgc":
    g["locked_clocks"] = None
simulated.write_state(path, state)
'''


SERVE = '\n[serve.nvml]\ngpus = "all"\n'


#: The stand-in's time limit: it starts Python and imports the simulated driver (0.4-0.8 s on a loaded
#: machine, more at worse times), which must never be what a test sees; the test of the limit sets 2 s.
OVERRIDE_TIMEOUT_S = 60


def _overrides(root: Path, timeout_s: float = OVERRIDE_TIMEOUT_S) -> str:
    cmd = f'"{sys.executable}", "{root / "smi.py"}", "{root / "smi.log"}"'
    return textwrap.dedent(f"""
        override_timeout_s = {timeout_s:g}
        [overrides]
        set_power_limit = [{cmd}, "-i", "{{index}}", "-pl", "{{watts}}"]
        set_gpu_locked_clocks = [{cmd}, "-i", "{{index}}", "-lgc", "{{min_mhz}},{{max_mhz}}"]
        reset_gpu_locked_clocks = [{cmd}, "-i", "{{index}}", "-rgc"]
        """)


def _config(root: Path, overrides: str) -> Path:
    """The daemon's TOML in ``root``: the nvml service only, this user allowed, then ``overrides``."""
    paths = {"socket": root / "d.sock", "journal_dir": root / "journal", "log": root / "d.log"}
    head = "".join(f'{key} = "{value}"\n' for key, value in paths.items())
    path = root / "daemon.toml"
    path.write_text(head + f'socket_mode = "0600"\nallow_users = ["{os.getuid()}"]\nplugins = ["nvml"]\n' + overrides + SERVE)
    return path


class Node:
    """One in-process daemon on an unprivileged simulated driver of two GPUs, with the stand-in
    as its overrides (or ``overrides``, TOML, instead)."""

    def __init__(self, monkeypatch, overrides: str | None = None, override_timeout_s: float = OVERRIDE_TIMEOUT_S) -> None:
        self.root = root = Path(tempfile.mkdtemp(prefix="zeus-daemon-overrides-"))
        driver = fake_pynvml.create(root / "driver.json", 2, privileged=False)  # every library setter: NoPermission
        monkeypatch.setenv("ZEUS_FAKE_NVML", str(driver))
        (root / "smi.py").write_text(STAND_IN)
        self.daemon, self.thread = serve_in_process(_config(root, _overrides(root, override_timeout_s) if overrides is None else overrides))

    def http(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(uds=self.daemon.config.raw.socket), base_url="http://localhost", timeout=30)

    def gpus(self) -> list[dict]:
        return fake_pynvml.read_state(self.root / "driver.json")["gpus"]

    def calls(self) -> list[list[str]]:
        """The stand-in's argv, one list per run, without its log path."""
        path = self.root / "smi.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def stop(self) -> None:
        if self.thread.is_alive():
            self.daemon.stop()
            self.thread.join(30)


@pytest.fixture
def start(monkeypatch):
    """``start(overrides=None, override_timeout_s=OVERRIDE_TIMEOUT_S)``: a :class:`Node`, stopped after the test."""
    nodes: list[Node] = []
    yield (
        lambda overrides=None, override_timeout_s=OVERRIDE_TIMEOUT_S: (
            nodes.append(Node(monkeypatch, overrides, override_timeout_s)) or nodes[-1]
        )
    )
    stop_in_process(nodes)


def _post(c: httpx.Client, route: str, **params) -> httpx.Response:
    return c.post(f"/gpu/{route}", params={**params, "block": "true"})


def test_without_overrides_the_unprivileged_library_refuses(start):
    node = start("")
    with node.http() as c:
        r = _post(c, "set_power_limit", gpu_ids="1", power_limit_mw=250000)
    assert r.status_code == 403 and [g["limit_w"] for g in node.gpus()] == [400.0, 400.0]


def test_http_setters_run_the_override_and_resets_put_the_original_back_through_it(start):
    node = start()
    with node.http() as c:
        assert _post(c, "set_power_limit", gpu_ids="1", power_limit_mw=250000).status_code == 200
        assert node.calls() == [["-i", "1", "-pl", "250"]]
        assert [g["limit_w"] for g in node.gpus()] == [400.0, 250.0]
        # still checked against the GPU first (a library read, no privilege): outside the range, no command
        r = _post(c, "set_power_limit", gpu_ids="0", power_limit_mw=50000)
        assert r.status_code == 400 and "outside the power-limit range" in r.text and len(node.calls()) == 1
        assert _post(c, "reset_power_limit", gpu_ids="1").status_code == 200
        assert node.calls()[-1] == ["-i", "1", "-pl", "400"]  # the journaled original, through the override
        assert node.gpus()[1]["limit_w"] == 400.0

        assert _post(c, "set_gpu_locked_clocks", gpu_ids="0", min_clock_mhz=1200, max_clock_mhz=1410).status_code == 200
        assert node.calls()[-1] == ["-i", "0", "-lgc", "1200,1410"] and node.gpus()[0]["locked_clocks"] == [1200, 1410]
        assert _post(c, "reset_gpu_locked_clocks", gpu_ids="0").status_code == 200
        assert node.calls()[-1] == ["-i", "0", "-rgc"] and node.gpus()[0]["locked_clocks"] is None
        # a setter without an override still goes to the library, which refuses without privilege
        r = _post(c, "set_mem_locked_clocks", gpu_ids="0", min_clock_mhz=1215, max_clock_mhz=1215)
        assert r.status_code == 403 and len(node.calls()) == 4


def test_a_private_protocol_client_that_leaves_gets_its_settings_put_back_through_the_override(start):
    node = start()
    uuid = node.gpus()[0]["uuid"]
    with DaemonClient(node.daemon.config.raw.socket) as client:
        client.call("nvml.set_power_limit", gpu=uuid, milliwatts=200500)
        client.call("nvml.lock_clocks", gpu=uuid, min_mhz=1005, max_mhz=1005)
        assert node.calls() == [["-i", "0", "-pl", "200.5"], ["-i", "0", "-lgc", "1005,1005"]]
        assert (node.gpus()[0]["limit_w"], node.gpus()[0]["locked_clocks"]) == (200.5, [1005, 1005])
    deadline = time.monotonic() + 30  # the daemon restores on its device thread once it sees the connection close
    while len(node.calls()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(map(tuple, node.calls()[2:])) == [("-i", "0", "-pl", "400"), ("-i", "0", "-rgc")]
    assert (node.gpus()[0]["limit_w"], node.gpus()[0]["locked_clocks"]) == (400.0, None)


def test_the_daemons_exit_puts_back_what_http_callers_hold_through_the_override(start):
    node = start()
    with node.http() as c:
        assert _post(c, "set_power_limit", gpu_ids="0,1", power_limit_mw=150000).status_code == 200
    node.stop()
    assert sorted(map(tuple, node.calls()[2:])) == [("-i", "0", "-pl", "400"), ("-i", "1", "-pl", "400")]
    assert [g["limit_w"] for g in node.gpus()] == [400.0, 400.0]


def test_a_failing_override_is_an_error_naming_the_command_its_status_and_its_stderr_and_nothing_is_held(start):
    node = start()
    (node.root / "smi.log.fail").touch()
    with node.http() as c:
        r = _post(c, "set_power_limit", gpu_ids="0", power_limit_mw=300000)
        assert r.status_code == 500
        message = r.json()["errors"]["0"]
        assert "set_power_limit override" in message and "-pl 300" in message and "exited with status 3" in message
        assert "not supported in current scope" in message
        (node.root / "smi.log.fail").unlink()
        assert _post(c, "reset_power_limit", gpu_ids="0").status_code == 200  # nothing held: no command runs
    assert node.calls() == [["-i", "0", "-pl", "300"]] and node.gpus()[0]["limit_w"] == 400.0


def test_an_override_that_hangs_is_killed_at_override_timeout_s(start):
    node = start(override_timeout_s=2)
    (node.root / "smi.log.hang").touch()
    with node.http() as c:
        began = time.monotonic()
        r = _post(c, "set_power_limit", gpu_ids="0", power_limit_mw=300000)
    assert r.status_code == 500 and "did not finish within 2 s (override_timeout_s)" in r.text
    assert time.monotonic() - began < 30 and node.gpus()[0]["limit_w"] == 400.0


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ('set_power_limit = ["sudo", "nvidia-smi", "-i", "{gpu}", "-pl", "{watts}"]\n', 3, "unknown placeholder {gpu}"),
        ("set_power_limit = []\n", 3, "must be a command as a list of strings"),
        ('set_power_limit = ["sudo", ""]\n', 3, "must be a non-empty string"),
        ('set_power_limt = ["sudo", "nvidia-smi"]\n', 3, "no setter named 'set_power_limt' (did you mean 'set_power_limit'?)"),
        ('set_power_limit = ["nvidia-smi", "-pl", "{watts"]\n', 3, "'{watts'"),
        (
            'reset_gpu_locked_clocks = ["x"]\nset_gpu_locked_clocks = ["nvidia-smi", "-lgc", "{min_mhz},{max_mhz}", "{watts}"]\n',
            4,
            "{watts}",
        ),
        ('set_gpu_locked_clocks = ["nvidia-smi", "-lgc", "{min_mhz},{max_mhz}"]\n', 3, "reset_gpu_locked_clocks is not"),
    ],
)
def test_a_bad_override_is_a_config_error_naming_its_line(tmp_path, body, line, message):
    path = _config(tmp_path, "\n[overrides]\n" + body)
    text = path.read_text()
    cfg, problems, lines, _ = read_config(path)
    assert cfg is not None, problems
    reg = zreg.load(only=cfg.plugins)
    with pytest.raises(ConfigError) as e:
        resolve(cfg, {n: r.options for n, r in reg.services.items()}, path, lines)
    first = text.splitlines().index("[overrides]") + 1  # the table's header, counted from 1
    assert f"{path}:{first + line - 2}:" in str(e.value) and message in str(e.value), str(e.value)


def test_after_a_sigkill_the_next_start_puts_the_original_back_through_the_override(start, tmp_path):
    """A real ``zeus daemon`` sets a limit through the override and is SIGKILLed; the journal it
    leaves is restored by the next daemon on the same folder, through the override, once its
    services name the GPU's index."""
    first = start()  # writes the folder, the driver and the stand-in; stopped at once, its journal empty
    first.stop()
    root = first.root
    proc = subprocess.Popen(
        [sys.executable, "-c", ZEUS, "daemon", "--config", str(root / "daemon.toml")],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: (root / "d.sock").exists() and _answers(root / "d.sock"), 60, "the daemon's socket")
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(root / "d.sock")), base_url="http://localhost", timeout=30) as c:
            assert _post(c, "set_power_limit", gpu_ids="1", power_limit_mw=180000).status_code == 200
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert first.gpus()[1]["limit_w"] == 180.0 and first.calls()[-1] == ["-i", "1", "-pl", "180"]
    cfg, problems, lines, _ = read_config(root / "daemon.toml")
    assert cfg is not None, problems
    reg = zreg.load(only=cfg.plugins)
    d = Daemon(resolve(cfg, {n: r.options for n, r in reg.services.items()}, root / "daemon.toml", lines), reg)
    assert d.restore_left_behind() == 0  # deferred: the override names the GPU by the index the service knows
    assert first.calls()[-1] == ["-i", "1", "-pl", "180"]
    d.build_services()
    try:
        assert first.calls()[-1] == ["-i", "1", "-pl", "400"] and first.gpus()[1]["limit_w"] == 400.0
    finally:
        d.close_services()
    # the HTTP API's accounting read through the services: it stops with them, not later against closed drivers
    assert [t for t in threading.enumerate() if t.name == "zeus-accounting"] == []


def _answers(path: Path) -> bool:
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://localhost", timeout=5) as c:
            return c.get("/time").status_code == 200
    except httpx.HTTPError:
        return False


def test_the_documented_examples_are_valid_overrides():
    """The commented example in contrib/zeus-daemon.toml, uncommented, and the README's, pass the checks."""
    repo = Path(__file__).resolve().parents[2]
    lines = (repo / "contrib" / "zeus-daemon.toml").read_text().splitlines()
    start = lines.index("# [overrides]")
    table = tomllib.loads("\n".join(line.removeprefix("# ").split("   #")[0] for line in lines[start : start + 4]))["overrides"]
    readme = (repo / "README.md").read_text()
    block = re.search(r"```toml\n(override_timeout_s = .*?)```", readme, re.S).group(1)
    documented = tomllib.loads(block)
    assert set(table) == {"set_power_limit", "set_gpu_locked_clocks", "reset_gpu_locked_clocks"} <= set(documented["overrides"])
    assert problems(table) == [] and problems(documented["overrides"]) == []


def test_overrides_drive_only_their_services_gpus():
    # nvidia-smi drives NVIDIA GPUs only: on a node that serves another vendor's GPUs too, a
    # setting of that service goes through its own library, and its restorer is left as it is.
    from zeus_core.daemon.overrides import Overrides

    ran: list[tuple[str, str, dict]] = []
    ov = Overrides({"set_power_limit": ["true"], "set_gpu_locked_clocks": ["true"], "reset_gpu_locked_clocks": ["true"]}, 2, dict, "nvml")
    ov.run = lambda name, uuid, values: ran.append((name, uuid, values))  # type: ignore[method-assign]

    def library() -> str:
        return "library"

    ov._args = {"milliwatts": 300000}
    ov.setter("nvml", "gpu:GPU-1:power_limit", library)()
    assert ran == [("set_power_limit", "GPU-1", {"milliwatts": 300000, "watts": 300})]
    assert ov.setter("amdsmi", "gpu:GPU-2:power_limit", library) is library
    ov._args = {"min_mhz": 900, "max_mhz": 1500}
    assert ov.setter("amdsmi", "gpu:GPU-2:locked_clocks", library) is library
    assert ov.resetter("amdsmi", "gpu:GPU-2:locked_clocks", library) is library
    ov.resetter("nvml", "gpu:GPU-1:locked_clocks", library)()  # type: ignore[misc]
    assert ran[-1] == ("reset_gpu_locked_clocks", "GPU-1", {})

    def amd_restorer(key: str, original: object) -> str:
        return "amd library"

    wrapped = ov.wrap({"amdsmi": amd_restorer, "nvml": amd_restorer})
    assert wrapped["amdsmi"] is amd_restorer and wrapped["nvml"] is not amd_restorer


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("", 'say whose GPUs its commands drive, e.g. override_service = "amdsmi"'),
        ('override_service = "nvidia"\n', "override_service = 'nvidia' is not served here; the served services are amdsmi, nvml"),
    ],
)
def test_overrides_with_several_services_name_the_one_they_drive(tmp_path, extra, message):
    path = _config(tmp_path, extra + _overrides(tmp_path))
    path.write_text(path.read_text() + '\n[serve.amdsmi]\ngpus = "all"\n')
    cfg, problems, lines, _ = read_config(path)
    assert cfg is not None, problems
    reg = zreg.load(only=["nvml", "amdsmi"])
    with pytest.raises(ConfigError) as e:
        resolve(cfg, {n: r.options for n, r in reg.services.items()}, path, lines)
    assert message in str(e.value), str(e.value)
    # naming it is enough
    path.write_text(path.read_text().replace(extra, "") if extra else path.read_text())
    limit = f"override_timeout_s = {OVERRIDE_TIMEOUT_S:g}"
    text = path.read_text().replace(limit, limit + '\noverride_service = "nvml"', 1)
    path.write_text(text)
    cfg, problems, lines, _ = read_config(path)
    assert resolve(cfg, {n: r.options for n, r in reg.services.items()}, path, lines).raw.override_service == "nvml"
