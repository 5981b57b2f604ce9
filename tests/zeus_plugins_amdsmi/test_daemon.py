"""``zeus daemon`` with the amdsmi service: a root daemon, unprivileged clients, one simulated driver.

The simulated driver runs in its ``"root"`` mode: a cap can be set only by a process holding
CAP_DAC_OVERRIDE (the caps are root-owned sysfs files), so the root daemon may change the GPUs and a
client dropped to uid 65534 gets AMDSMI_STATUS_NO_PERM, as on a real node.
"""

from __future__ import annotations

import json
import re
import textwrap

from zeus_daemon_helpers import NOBODY, ZEUS, needs_root, node, root_for_daemon, wait_until  # noqa: F401 - fixtures

from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu

pytestmark = needs_root


def make_node(node, serve: str = "[serve.amdsmi]\ngpus = [0]\n"):
    node.driver = fake_amdsmi.create(node.root / "amd.json", [FakeAmdGpu(), FakeAmdGpu()], privileged="root")
    node.env["ZEUS_FAKE_AMDSMI"] = str(node.driver)
    node.config.write_text(
        textwrap.dedent(f"""
        socket = "{node.socket}"
        socket_group = "{NOBODY}"
        socket_mode = "0660"
        allow_users = ["nobody"]
        journal_dir = "{node.root / "journal"}"
        log = "{node.log}"
        plugins = ["amdsmi"]
    """)
        + serve
    )
    return node


def caps(n) -> list[float]:
    return [g["cap_w"] for g in fake_amdsmi.read_state(n.driver)["gpus"]]


def uuid(n, i: int) -> str:
    return fake_amdsmi.read_state(n.driver)["gpus"][i]["uuid"]


CLIENT = """
import sys, time
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.options import AmdsmiOptions
dev = AmdGpus(AmdsmiOptions(gpus=[0], counter_check_s=0.05))
print(dev.control_paths["gpu0"], flush=True)
dev.set_power_limit(float(sys.argv[1]))
print("set", flush=True)
time.sleep(120)
"""


def test_an_unprivileged_client_sets_caps_through_the_daemon_and_a_sigkill_puts_them_back(node):
    make_node(node)
    node.start()
    client = node.popen_as(CLIENT, "300", env=node.client_env(ZEUS_DAEMON_SOCKET=str(node.socket)))
    try:
        assert client.stdout.readline().strip() == "daemon"  # no CAP_DAC_OVERRIDE: straight to the daemon
        assert client.stdout.readline().strip() == "set", client.stderr.read()
        assert caps(node) == [300.0, 750.0]
        client.kill()
    finally:
        client.kill()
        client.wait()
    restored = f"restored amdsmi gpu:{uuid(node, 0)}:power_cap to 750000000"
    wait_until(lambda: caps(node) == [750.0, 750.0] and restored in node.log.read_text(), what="the daemon to put GPU 0's cap back")
    assert f"uid {NOBODY} nobody): amdsmi.set_power_cap {{'gpu': '{uuid(node, 0)}', 'microwatts': 300000000}}" in node.log.read_text()


CLOCK_CLIENT = """
import time
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.options import AmdsmiOptions
dev = AmdGpus(AmdsmiOptions(gpus=[0], counter_check_s=0.05))
dev.lock_clocks(1395)
print("locked", dev.supported_clocks()[0], flush=True)
time.sleep(120)
"""


def test_an_unprivileged_client_locks_the_gfx_clock_through_the_daemon_and_a_sigkill_puts_it_back(node):
    """A Perseus plan's lock on an AMD GPU from a training user's process: amdsmi.lock_clocks in the daemon."""
    make_node(node)
    node.start()
    client = node.popen_as(CLOCK_CLIENT, env=node.client_env(ZEUS_DAEMON_SOCKET=str(node.socket)))
    try:
        assert client.stdout.readline().strip() == "locked 2100", client.stderr.read()
        state = fake_amdsmi.read_state(node.driver)["gpus"]
        assert [g["sys_clock_lock_mhz"] for g in state] == [[500, 1395], None]
    finally:
        client.kill()
        client.wait()
    restored = f"restored amdsmi gpu:{uuid(node, 0)}:locked_clocks to [500, 2100]"
    wait_until(
        lambda: fake_amdsmi.read_state(node.driver)["gpus"][0]["sys_clock_lock_mhz"] == [500, 2100] and restored in node.log.read_text(),
        what="the daemon to put GPU 0's GFX clock range back",
    )
    assert f"amdsmi.lock_clocks {{'gpu': '{uuid(node, 0)}', 'min_mhz': 500, 'max_mhz': 1395}}" in node.log.read_text()


def test_without_a_daemon_the_client_is_told_the_fix(node):
    make_node(node)
    r = node.run_as(
        "from zeus_plugins_amdsmi.device import AmdGpus\nfrom zeus_plugins_amdsmi.options import AmdsmiOptions\n"
        "AmdGpus(AmdsmiOptions(counter_check_s=0.05)).set_power_limit(300)"
    )
    err = " ".join(r.stderr.split())
    assert r.returncode != 0 and "AMDSMI_STATUS_NO_PERM" in err and "zeus daemon" in err and "[serve.amdsmi]" in err
    assert caps(node) == [750.0, 750.0]


def test_requests_outside_the_allow_list_or_the_range_are_refused(node):
    make_node(node)
    node.start()
    refused = [
        ("amdsmi.set_power_cap", {"gpu": uuid(node, 1), "microwatts": 300_000_000}, "refused", "is not served by this daemon"),
        (
            "amdsmi.set_power_cap",
            {"gpu": uuid(node, 0), "microwatts": 199_999_999},
            "refused",
            r"199999999 µW is outside the power-cap range .*: 200000000 to 750000000 µW \(200 to 750 W\)",
        ),
        ("amdsmi.set_power_cap", {"gpu": uuid(node, 0), "microwatts": "300"}, "invalid_arguments", r"\$\.args\.microwatts"),
        ("amdsmi.set_power_cap", {"gpu": uuid(node, 0), "watts": 300}, "invalid_arguments", "unknown key 'watts'"),
        ("amdsmi.reset_power_cap", {"gpu": "GPU-0"}, "refused", "not served"),
    ]
    code = (
        "import json, sys\nfrom zeus_core.daemon import DaemonClient, DaemonError\nc = DaemonClient(sys.argv[1])\n"
        "for op, args in json.loads(sys.argv[2]):\n    try:\n        print(json.dumps(['ok', c.call(op, **args)]))\n"
        "    except DaemonError as e:\n        print(json.dumps([e.code, str(e)]))"
    )
    r = node.run_as(code, str(node.socket), json.dumps([[op, args] for op, args, _, _ in refused]))
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(got) == len(refused), r.stderr
    for (op, args, code_, message), (got_code, got_message) in zip(refused, got):
        assert got_code == code_ and re.search(message, got_message), (op, args, got_code, got_message)
    assert caps(node) == [750.0, 750.0]


def test_a_bad_served_gpu_fails_the_daemons_start_naming_the_field(node):
    make_node(node, serve='[serve.amdsmi]\ngpus = ["0000:1C:00.0", 5]\n')
    r = node.zeus("daemon", "--config", str(node.config))
    assert r.returncode == 2
    assert "no AMD GPU here has the amd-smi index 5" in r.stderr and "$.serve.amdsmi.gpus[1]" in r.stderr
