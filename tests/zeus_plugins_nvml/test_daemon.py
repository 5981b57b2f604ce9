"""``zeus daemon`` with the nvml service: a root daemon, unprivileged clients, one simulated driver.

The simulated driver runs in its ``"root"`` mode: setters succeed only in a
process holding CAP_SYS_ADMIN, so the root daemon may change the GPUs and a
client dropped to uid 65534 gets NVML's NoPermission, as on a real node. Both
share the driver's state file, which the tests read to see what the GPUs
really are.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import struct

import pytest
from zeus_daemon_helpers import NOBODY, ZEUS, needs_root, node, root_for_daemon, wait_until  # noqa: F401 - fixtures

from zeus_core.daemon import DaemonClient, DaemonError
from zeus_core.daemon.protocol import MAX_FRAME, decode, encode, read_frame
from zeus_core.engine.stores.sqlite import Store
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_nvml.fake_pynvml import FakeGpu

pytestmark = needs_root

EXAMPLE = "examples/without_root/job.toml"
SERVE_GPU0 = """
[serve.nvml]
gpus = [0]
"""


def uuid(i: int) -> str:
    return fake_pynvml._uuid(i)


def gpus(n) -> list[dict]:
    return fake_pynvml.read_state(n.driver)["gpus"]


def make_node(node, config: str = SERVE_GPU0, gpu_count: int = 2, **kw):
    node.driver = fake_pynvml.create(node.root / "driver.json", [FakeGpu() for _ in range(gpu_count)], privileged="root")
    node.env["ZEUS_FAKE_NVML"] = str(node.driver)
    node.write_config(config, **kw)
    return node


def with_socket(node, **extra):
    return node.client_env(ZEUS_DAEMON_SOCKET=str(node.socket), **extra)


# --------------------------------------------------------------------------- the user's path


def test_unprivileged_zeus_run_sets_and_restores_the_limit_through_the_daemon(node, repo_root):
    """The README's example job as uid 65534: the fixed 200 W limit is set by the daemon for the
    run and is back at 400 W when ``zeus run`` returns; without the daemon it fails with the fix."""
    make_node(node)
    node.start()
    job = str(repo_root / EXAMPLE)
    # No --output: the run writes no figures. Here the user cannot read matplotlib's fonts (the test's Python
    # lives under /root, reached through descriptors, and matplotlib opens fonts by their real path).
    r = node.run_as(ZEUS, "run", job, env=with_socket(node))
    assert r.returncode == 0, r.stdout + r.stderr
    with Store(node.client_dir / ".zeus" / "without-root.sqlite") as store:
        assert [t.power_limit for t in store.tries()] == [200.0]  # the limit the GPU really ran at (read locally)
    assert gpus(node)[0]["limit_w"] == 400.0  # restored when zeus run ended (close, before exit)
    log = node.log.read_text()
    assert f"uid {NOBODY} nobody): nvml.set_power_limit {{'gpu': '{uuid(0)}', 'milliwatts': 200000}}" in log
    assert f"restored nvml gpu:{uuid(0)}:power_limit to 400000" in log

    r = node.run_as(ZEUS, "run", job, "--fresh")  # no ZEUS_DAEMON_SOCKET
    assert r.returncode != 0
    err = " ".join((r.stdout + r.stderr).split())
    assert "Insufficient Permissions" in err and "zeus daemon" in err and "ZEUS_DAEMON_SOCKET" in err
    assert gpus(node)[0]["limit_w"] == 400.0


CLIENT = """
import sys, time
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.options import NvmlOptions
dev = NvmlGpus(NvmlOptions(gpus=[0]))
print(dev.control_paths["gpu0"], flush=True)
dev.set_power_limit(float(sys.argv[1]))
dev.lock_clocks(1005)
print("set", flush=True)
time.sleep(120)
"""


def test_a_sigkilled_client_gets_its_settings_put_back(node):
    make_node(node)
    node.start()
    client = node.popen_as(CLIENT, "150", env=with_socket(node))
    try:
        assert client.stdout.readline().strip() == "daemon"  # no CAP_SYS_ADMIN: straight to the daemon
        assert client.stdout.readline().strip() == "set", client.stderr.read()
        g = gpus(node)[0]
        assert (g["limit_w"], g["locked_clocks"], g["locked_mem_clocks"]) == (150.0, [1005, 1005], [1215, 1215])
        client.kill()
    finally:
        client.kill()
        client.wait()
    settings = lambda: [(g["limit_w"], g["locked_clocks"], g["locked_mem_clocks"]) for g in gpus(node)]  # noqa: E731
    wait_until(lambda: settings() == [(400.0, None, None)] * 2, what="the daemon to put GPU 0 back")
    # the daemon logs the disconnect after it has put the settings back: wait for the line, too
    wait_until(
        lambda: re.search(r"client #\d+ \(pid \d+, uid 65534 nobody\) disconnected", node.log.read_text()),
        what="the daemon to log the client's disconnect",
    )


def test_a_sigkilled_daemon_is_undone_at_its_next_start_and_sigterm_restores(node):
    make_node(node)
    node.start()
    second = node.zeus("daemon", "--config", str(node.config))
    assert second.returncode == 1 and "another zeus daemon is serving" in second.stderr  # and it left the socket alone
    client = node.popen_as(CLIENT, "120", env=with_socket(node))
    try:
        assert client.stdout.readline().strip() == "daemon"
        assert client.stdout.readline().strip() == "set", client.stderr.read()
        node.stop(signal.SIGKILL)
        assert gpus(node)[0]["limit_w"] == 120.0  # nothing could run in the killed daemon
    finally:
        client.kill()
        client.wait()
    assert node.socket.exists()  # stale: the next start must replace it
    node.start()  # restores before it serves
    g = gpus(node)[0]
    assert (g["limit_w"], g["locked_clocks"], g["locked_mem_clocks"]) == (400.0, None, None)
    assert f"restored nvml gpu:{uuid(0)}:power_limit to 400000 (left by a killed process)" in node.log.read_text()

    with DaemonClient(str(node.socket)) as c:  # root is always served
        c.call("nvml.set_power_limit", gpu=uuid(0), milliwatts=300000)
        assert gpus(node)[0]["limit_w"] == 300.0
        assert node.stop(signal.SIGTERM) == 0
    assert gpus(node)[0]["limit_w"] == 400.0 and not node.socket.exists()
    assert "restored nvml gpu:" in node.log.read_text().split("client #1")[-1]


def test_two_clients_on_one_gpu_the_last_to_leave_restores(node):
    make_node(node)
    node.start()
    a, b = DaemonClient(str(node.socket)), DaemonClient(str(node.socket))
    a.call("nvml.set_power_limit", gpu=uuid(0), milliwatts=200000)
    b.call("nvml.set_power_limit", gpu=uuid(0), milliwatts=150000)
    a_session = a.server["session"]
    a.close()
    wait_until(
        lambda: f"client #{a_session} (pid {os.getpid()}, uid 0 root) disconnected" in node.log.read_text(),
        what="the daemon to see the first client leave",
    )
    assert gpus(node)[0]["limit_w"] == 150.0  # b still holds it: a's leaving changes nothing
    with pytest.raises(DaemonError, match=rf"held by client #{b.server['session']} \(pid \d+, uid 0 root\)"):
        call(node.socket, "nvml.reset_power_limit", gpu=uuid(0))  # not its own to reset
    b.call("nvml.reset_power_limit", gpu=uuid(0))
    assert gpus(node)[0]["limit_w"] == 400.0  # the original from before a, not a's 200 W
    b.close()


# --------------------------------------------------------------------------- refusals


def call(sock_path, op, **args):
    with DaemonClient(str(sock_path)) as c:
        return c.call(op, **args)


REFUSED = [
    ("nvml.set_power_limit", {"gpu": uuid(1), "milliwatts": 200000}, "refused", "is not served by this daemon"),
    ("nvml.set_power_limit", {"gpu": uuid(0), "milliwatts": 99999}, "refused", "99.999 W is outside the power-limit range"),
    ("nvml.set_power_limit", {"gpu": uuid(0), "milliwatts": 400001}, "refused", "outside the power-limit range .* 100 to 400 W"),
    ("nvml.set_power_limit", {"gpu": uuid(0), "milliwatts": "200000"}, "invalid_arguments", r"expected int.*\$\.args\.milliwatts"),
    ("nvml.set_power_limit", {"gpu": uuid(0), "watts": 200}, "invalid_arguments", r"unknown key 'watts'.*required key 'milliwatts'"),
    ("nvml.lock_clocks", {"gpu": uuid(0), "min_mhz": 1007, "max_mhz": 1007}, "refused", "not a range of supported clocks"),
    ("nvml.lock_clocks", {"gpu": uuid(0), "min_mhz": 1410, "max_mhz": 1005}, "refused", "min <= max"),
    ("nvml.lock_memory_clocks", {"gpu": uuid(0), "min_mhz": 800, "max_mhz": 800}, "refused", "memory clock 800..800"),
    ("nvml.reset_clocks", {"gpu": "MIG-0000"}, "refused", "not served"),
    (
        "nvml.set_fan_speed",
        {"gpu": uuid(0)},
        "unknown_operation",
        "unknown operation 'nvml.set_fan_speed'; this daemon serves: nvml.lock_clocks",
    ),
    ("rapl.read", {"zone": "intel-rapl:0"}, "refused", r"does not serve 'rapl' .*no \[serve\.rapl\] table"),
]


def test_requests_outside_the_allow_list_or_the_constraints_are_refused(node):
    """Each refused with its own code and reason, as uid 65534; no GPU changes, the daemon keeps serving."""
    make_node(node)
    node.start()
    before = json.dumps(gpus(node))
    code = (
        "import json, sys\nfrom zeus_core.daemon import DaemonClient, DaemonError\nc = DaemonClient(sys.argv[1])\n"
        "for op, args in json.loads(sys.argv[2]):\n    try:\n        print(json.dumps(['ok', c.call(op, **args)]))\n"
        "    except DaemonError as e:\n        print(json.dumps([e.code, str(e)]))"
    )
    r = node.run_as(code, str(node.socket), json.dumps([[op, args] for op, args, _, _ in REFUSED]))
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(got) == len(REFUSED), r.stderr
    for (op, args, code_, message), (got_code, got_message) in zip(REFUSED, got):
        assert got_code == code_ and re.search(message, got_message), (op, args, got_code, got_message)
    assert json.dumps(gpus(node)) == before  # nothing changed
    assert node.serving_pid() == node.proc.pid  # still serving
    assert f"uid {NOBODY} nobody): nvml.set_power_limit {{'gpu': '{uuid(0)}', 'milliwatts': 99999}} refused" in node.log.read_text()


def test_peer_credentials_decide_not_the_socket_mode(node):
    """With a socket anyone may open, a uid outside allow_users is still refused (SO_PEERCRED),
    and the allowed user's supplementary groups count for allow_groups."""
    make_node(node, allow='allow_users = ["nobody"]', mode="0666")
    node.start()
    st = node.socket.stat()
    assert (st.st_mode & 0o777, st.st_gid) == (0o666, NOBODY)
    code = "from zeus_core.daemon import DaemonClient, DaemonError\ntry:\n    DaemonClient(sys.argv[1]).call('nvml.set_power_limit', gpu=sys.argv[2], milliwatts=200000)\nexcept DaemonError as e:\n    print(e.code, e)\nelse:\n    print('ok')"
    stranger = node.run_as("import sys\n" + code, str(node.socket), uuid(0), uid=NOBODY - 1, gid=NOBODY - 1)
    assert stranger.stdout.startswith("forbidden"), stranger.stdout + stranger.stderr
    assert f"uid {NOBODY - 1} ({NOBODY - 1}) may not use this daemon" in stranger.stdout
    assert gpus(node)[0]["limit_w"] == 400.0
    allowed = node.run_as("import sys\n" + code, str(node.socket), uuid(0))
    assert allowed.stdout.strip() == "ok", allowed.stderr
    assert gpus(node)[0]["limit_w"] == 400.0  # its session ended with the process: restored
    assert "refused pid" in node.log.read_text() and f"uid {NOBODY - 1}" in node.log.read_text()


def raw(sock_path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock_path))  # blocking: waits while the daemon's backlog is full
    s.settimeout(20)
    return s


def reply(s: socket.socket) -> dict | None:
    body = read_frame(s, 20)
    return None if body is None else decode(body)


def test_malformed_truncated_oversized_and_fuzzed_frames_never_crash_or_change_anything(node):
    make_node(node)
    node.start()
    before = json.dumps(gpus(node))
    s = raw(node.socket)
    bad = [
        (b"not json", "not JSON"),
        (b"[1, 2]", "must hold a JSON object"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"op": 3}', "op must name an operation"),
        (b'{"op": "nvml.set_power_limit", "args": [1]}', "args must be an object"),
        (b'{"op": "ping", "id": {"x": 1}}', "id must be an integer or a string"),
        (b'{"op": "ping", "sudo": true}', "unknown request keys"),
        (b"[" * 50000 + b"]" * 5000, "not JSON"),
    ]
    for body, message in bad:
        s.sendall(struct.pack(">I", len(body)) + body)
        got = reply(s)
        assert got["ok"] is False and message in got["error"]["message"], got
    s.sendall(struct.pack(">I", 0))
    assert "empty frame" in reply(s)["error"]["message"]
    s.sendall(encode({"id": 9, "op": "ping"}))
    assert reply(s) == {"id": 9, "ok": True, "result": {}}  # the same connection still works
    s.sendall(struct.pack(">I", MAX_FRAME + 1) + b"{}")
    assert "exceeds the maximum" in reply(s)["error"]["message"]
    with pytest.raises((ConnectionResetError, AssertionError)):  # then the daemon hangs up
        assert reply(s) is not None
    s.close()
    t = raw(node.socket)  # truncated: a header promising 100 bytes, then 10, then gone
    t.sendall(struct.pack(">I", 100) + b'{"op": "nv')
    t.close()
    rng = random.Random(18)
    ops = ["nvml.set_power_limit", "nvml.lock_clocks", "nvml.reset_clocks", "hello", "nvml.lock_memory_clocks"]
    for _ in range(150):
        f = raw(node.socket)
        kind = rng.randrange(4)
        if kind == 0:  # random bytes, random length prefix
            blob = rng.randbytes(rng.randrange(1, 200))
            f.sendall(struct.pack(">I", rng.randrange(1, 300)) + blob)
        elif kind == 1:  # a valid frame of random JSON values for an operation's arguments
            junk = [None, True, -1, 2**70, 1.5e308, "x" * rng.randrange(0, 3000), [], {}, uuid(1), "GPU-", -(2**63)]
            args = {k: rng.choice(junk) for k in rng.sample(["gpu", "milliwatts", "min_mhz", "max_mhz", "zz"], rng.randrange(0, 5))}
            f.sendall(encode({"id": rng.randrange(1000), "op": rng.choice(ops), "args": args}))
        elif kind == 2:  # a valid request with one byte flipped
            frame = bytearray(encode({"op": "nvml.set_power_limit", "args": {"gpu": uuid(0), "milliwatts": 100}}))
            frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
            f.sendall(bytes(frame))
        else:  # a truncated valid request
            frame = encode({"op": "nvml.lock_clocks", "args": {"gpu": uuid(0), "min_mhz": 210, "max_mhz": 210}})
            f.sendall(frame[: rng.randrange(1, len(frame))])
        f.close()
    wait_until(lambda: node.serving_pid() == node.proc.pid, what="the daemon to serve after the fuzzing")
    assert json.dumps(gpus(node)) == before
    assert "Traceback" not in node.output()


def test_bad_configuration_exits_2_naming_every_field_and_the_fix(node):
    make_node(node)
    node.config.write_text("""
socket = "run/daemon.sock"
socket_mode = "0999"
allow_users = ["nobody", "no-such-user-xyz"]
allow_groups = [true]
max_clients = 0
jounral_dir = "/var/lib/x"
plugins = ["nvml", "nvlm"]
""")
    r = node.zeus("daemon", "--config", str(node.config), "--check")
    assert r.returncode == 2
    err = " ".join(r.stderr.split())
    for text in [
        "socket must be an absolute path",
        "$.socket",
        "unknown key 'jounral_dir' (did you mean 'journal_dir'?)",
        "max_clients must be between 1 and 4096",
        "no installed zeus plugin named 'nvlm' (did you mean 'nvml'?)",
    ]:
        assert text in err, text
    node.config.write_text(f"""
socket = "{node.socket}"
socket_mode = "0999"
allow_users = ["nobody", "no-such-user-xyz"]
allow_groups = [true]
plugins = ["nvml"]
[serve.nvlm]
""")
    err = " ".join(node.zeus("daemon", "--config", str(node.config)).stderr.split())
    for text in [
        'socket_mode must be octal permissions such as "0660"',
        "$.socket_mode",
        "no user named 'no-such-user-xyz' on this machine",
        "$.allow_users[1]",
        "expected a group name or numeric gid",
        "$.allow_groups[0]",
        "unknown service 'nvlm' (did you mean 'nvml'?)",
        "$.serve.nvlm",
    ]:
        assert text in err, text
    node.write_config("[serve.nvml]\ngpus = [0, 7]\n")
    r = node.zeus("daemon", "--config", str(node.config))
    assert r.returncode == 2
    assert "daemon.toml:" in r.stderr and "no GPU has NVML index 7" in r.stderr and "$.serve.nvml.gpus[1]" in r.stderr
    assert not node.socket.exists()


def test_the_daemon_imports_no_training_stack_and_zeus_shows_the_path(node):
    """The root process maps no torch, scipy or matplotlib; `zeus plugins` and `zeus monitor`
    as uid 65534 say the GPU's settings go through the daemon."""
    make_node(node)
    node.start()
    maps = open(f"/proc/{node.proc.pid}/maps").read()
    assert "numpy" in maps or "_json" in maps or maps  # sanity: the file was read
    for heavy in ("/torch/", "/scipy/", "/matplotlib/"):
        assert heavy not in maps, heavy
    env = with_socket(node, ZEUS_DISABLED_PLUGINS="perseus,mab,hetero,trace,torch")
    r = node.run_as(ZEUS, "plugins", env=env)
    text = " ".join(r.stdout.split())
    assert f"device settings (amdsmi, cpu, nvml): daemon at {node.socket} (pid {node.proc.pid}, serves nvml.lock_clocks" in text, (
        r.stdout + r.stderr
    )
    r = node.run_as(
        ZEUS, "monitor", "-d", "nvml", "--set", "nvml.gpus=[0]", "--duration", "0.2", "--interval", "0.1", env=dict(env, COLUMNS="200")
    )
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if "gpu0" in line)
    assert row.split("│")[4].strip() == "daemon"
    r = node.run_as(ZEUS, "plugins", env=dict(env, ZEUS_DAEMON_SOCKET=""))  # no socket
    assert "local, read-only: this process lacks CAP_SYS_ADMIN and ZEUS_DAEMON_SOCKET is unset" in " ".join(r.stdout.split())
