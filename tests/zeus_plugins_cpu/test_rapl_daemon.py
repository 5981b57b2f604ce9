"""Root-only RAPL counters read through ``zeus daemon`` by a client dropped to uid 65534.

The fake powercap tree has the modes of Linux >= 5.10: ``energy_uj`` is
0400 root, the rest world-readable. The client's wraparound accounting stays
in the client; the daemon only reads the zones it found at start.
"""

from __future__ import annotations

import json

from zeus_daemon_helpers import needs_root, node, root_for_daemon  # noqa: F401 - fixtures

pytestmark = needs_root

RANGE = 262_143_328_850


def zone(path, name: str, energy: int) -> None:
    path.mkdir(parents=True)
    path.chmod(0o755)
    for fname, text, mode in (
        ("name", name, 0o644),
        ("max_energy_range_uj", RANGE, 0o644),
        ("energy_uj", energy, 0o400),
        ("constraint_0_power_limit_uw", 165_000_000, 0o644),
    ):
        (path / fname).write_text(f"{text}\n")
        (path / fname).chmod(mode)


CLIENT = """
import json, sys
from zeus_plugins_cpu.options import RaplOptions
from zeus_plugins_cpu.rapl import RaplCpus
from zeus_core.daemon import DaemonClient, DaemonError
root, sock = sys.argv[1], sys.argv[2] or None
try:
    dev = RaplCpus(RaplOptions(powercap_root=root, daemon_socket=sock, wrap_check_s=3600))
except Exception as e:
    print(json.dumps({"error": str(e)}))
    raise SystemExit
print(json.dumps({"paths": dev.control_paths, "energy": dev.read_energy()}), flush=True)
sys.stdin.readline()
print(json.dumps({"energy": dev.read_energy()}), flush=True)
refused = []
for z in ("intel-rapl:1", "../../../../etc/shadow", "intel-rapl:0/../intel-rapl:1", "intel-rapl:0/energy_uj"):
    try:
        DaemonClient(sock).call("rapl.read", zone=z)
    except DaemonError as e:
        refused.append([e.code, str(e)])
print(json.dumps({"refused": refused}))
dev.close()
"""


def test_root_only_rapl_counters_are_read_through_the_daemon(node):
    pc = node.root / "powercap"
    pc.mkdir()
    pc.chmod(0o755)
    zone(pc / "intel-rapl:0", "package-0", 5_000_000)
    zone(pc / "intel-rapl:0" / "intel-rapl:0:0", "dram", 2_000_000)
    zone(pc / "intel-rapl:1", "psys", 7)
    node.write_config(f'[serve.rapl]\npowercap_root = "{pc}"\n')
    node.start()
    env = node.client_env()
    client = node.popen_as(CLIENT, str(pc), str(node.socket), env=env)
    first = json.loads(client.stdout.readline())
    assert first == {"paths": {"cpu0-package": "daemon", "cpu0-dram": "daemon"}, "energy": {"cpu0-package": 5.0, "cpu0-dram": 2.0}}, (
        client.stderr.read()
    )
    (pc / "intel-rapl:0" / "energy_uj").write_text("1000000\n")  # wrapped around: a whole range, then 1 J
    client.stdin.write("\n")
    client.stdin.flush()
    second = json.loads(client.stdout.readline())
    assert second["energy"]["cpu0-package"] == (RANGE - 5_000_000 + 1_000_000) / 1e6 + 5.0
    refused = json.loads(client.stdout.readline())["refused"]
    client.wait(30)
    assert [code for code, _ in refused] == ["refused"] * 4
    assert "it serves intel-rapl:0, intel-rapl:0/intel-rapl:0:0" in refused[0][1]

    no_daemon = node.run_as(CLIENT, str(pc), "", env=env)
    error = json.loads(no_daemon.stdout.splitlines()[0])["error"]
    assert "energy_uj: permission denied" in error and "zeus daemon" in error and "[serve.rapl]" in error
