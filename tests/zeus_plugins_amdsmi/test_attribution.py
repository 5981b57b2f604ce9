"""Energy attribution on the amdsmi device: real processes on a simulated AMD GPU, shared by GFX engine time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_helpers import assert_alone, assert_split_3_to_1, measure_window, sleeping_processes

from zeus_core import Monitor
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu
from zeus_plugins_amdsmi.options import AmdsmiOptions

RUN_UNPRIVILEGED = Path(__file__).parents[1] / "_support" / "run_unprivileged.py"


procs = pytest.fixture(sleeping_processes, name="procs")


def opened(**options):
    return AmdGpus(AmdsmiOptions(counter_check_s=0.02, **options))


def window(dev, seconds=0.4):
    return measure_window(dev, seconds, target_error=None)


def test_two_processes_keeping_the_gfx_engine_busy_3_to_1_split_its_active_energy_3_to_1(fake_amd, procs):
    fake_amd([FakeAmdGpu(demand_w=500.0, idle_w=120.0)])
    a, b = procs("job-a"), procs("job-b")
    fake_amdsmi.set_processes(0, [{"pid": a, "gfx": 0.6, "name": "python3"}, {"pid": b, "gfx": 0.2}])
    with opened(idle_power_w=120.0) as dev:
        m = window(dev)
    assert_split_3_to_1(m, a, b, 120.0, "gfx-time")


def test_shares_are_the_gfx_time_within_the_window_not_since_the_processes_began(fake_amd, procs):
    """Back-to-back windows: each one's shares are the engine time it saw, whatever ran before."""
    fake_amd([FakeAmdGpu(demand_w=500.0)])
    a, b = procs("a"), procs("b")
    fake_amdsmi.set_processes(0, [{"pid": a, "gfx": 0.9}, {"pid": b, "gfx": 0.0}])
    with opened(idle_power_w=120.0) as dev:
        mon = Monitor(dev, target_error=None)
        mon.begin_window("first")
        time.sleep(0.4)
        # nothing runs from here until the second window's work is set: however long a loaded machine
        # takes between the first window's end reading and that (0.9 GFX for a would skew the shares)
        fake_amdsmi.set_processes(0, [{"pid": a, "gfx": 0.0}, {"pid": b, "gfx": 0.0}])
        first = mon.end_window("first").attribution["gpu0"]
        fake_amdsmi.set_processes(0, [{"pid": a, "gfx": 0.1}, {"pid": b, "gfx": 0.3}])  # a keeps its running total
        mon.begin_window("second")
        time.sleep(0.4)
        second = mon.end_window("second").attribution["gpu0"]
    assert [p.pid for p in first.processes] == [a]  # b ran no GFX work: charged nothing
    shares = {p.pid: p.share for p in second.processes}
    assert shares[b] == pytest.approx(0.75, abs=1e-6) and shares[a] == pytest.approx(0.25, abs=1e-6)
    assert "window began" not in second.note  # the first window's end is the second's baseline: no older reading used


def test_a_lone_process_gets_all_the_active_energy_and_idle_is_learned_while_the_gpu_was_free(fake_amd, procs):
    fake_amd([FakeAmdGpu(demand_w=120.0, idle_w=120.0)])  # nothing runs: the GPU draws its idle power
    with opened() as dev:
        free = window(dev, 0.2).attribution["gpu0"]
        assert (free.basis, free.unattributed_j, free.idle_source) == ("none", pytest.approx(free.total_j), "learned")
        assert free.processes == ()
        pid = procs("alone")
        fake_amdsmi.set_demand(0, 400.0)
        fake_amdsmi.set_processes(0, [{"pid": pid, "gfx": 0.35}])
        m = window(dev)
    assert_alone(m, pid, 120.0, "gfx-time")


def test_processes_without_gfx_time_share_equally_and_say_so(fake_amd, procs):
    """ROCm compute through /dev/kfd that the kernel leaves out of the DRM engine time: amdsmi says 0 ns."""
    fake_amd([FakeAmdGpu(demand_w=500.0)])
    a, b = procs("a"), procs("b")
    fake_amdsmi.set_processes(0, [{"pid": a, "gfx": 0.0}, {"pid": b, "gfx": 0.0}])
    with opened(idle_power_w=120.0) as dev:
        att = window(dev, 0.2).attribution["gpu0"]
    assert att.basis == "equal" and "no GFX engine time" in att.note
    assert [p.active_j for p in att.processes] == [pytest.approx(att.active_j / 2)] * 2


def test_the_simulated_list_has_amdsmis_shape_and_running_totals(fake_amd, procs):
    smi = fake_amd([FakeAmdGpu()])
    pid = procs("shape")
    fake_amdsmi.set_processes(0, [{"pid": pid, "gfx": 0.5, "name": "train", "vram_mb": 2048}])
    smi.amdsmi_init()
    handle = smi.amdsmi_get_processor_handles()[0]
    (first,) = smi.amdsmi_get_gpu_process_list(handle)
    time.sleep(0.2)
    (later,) = smi.amdsmi_get_gpu_process_list(handle)
    smi.amdsmi_shut_down()
    assert set(first) == {"name", "pid", "mem", "engine_usage", "memory_usage", "cu_occupancy"}
    assert (first["name"], first["pid"], first["memory_usage"]["vram_mem"]) == ("train", pid, 2048 << 20)
    assert later["engine_usage"]["gfx"] - first["engine_usage"]["gfx"] == pytest.approx(0.5 * 0.2e9, rel=0.25)


@pytest.mark.skipif(os.geteuid() != 0, reason="drops a process to uid 65534 (CI runs as root)")
@pytest.mark.parametrize("others", ["hidden", "redacted"])
def test_without_cap_sys_ptrace_another_users_process_is_not_seen_and_the_note_says_so(others, procs, monkeypatch):
    """amdsmi reads /proc/<pid>/fdinfo: a process of root's is out of sight for uid 65534, as on a real node."""
    folder = Path("/tmp") / f"zeus-amd-attr-{os.getpid()}-{others}"
    folder.mkdir(mode=0o755)
    mine = None
    try:
        state = fake_amdsmi.create(folder / "driver.json", [FakeAmdGpu(others_processes=others)])
        fake_amdsmi.install(state, monkeypatch)
        root_pid = procs("root-job")
        mine = subprocess.Popen(["sleep", "60"], user=65534, group=65534, extra_groups=[])
        fake_amdsmi.set_processes(0, [{"pid": root_pid, "gfx": 0.5}, {"pid": mine.pid, "gfx": 0.1}])
        for f in folder.iterdir():
            os.chmod(f, 0o644)
        code = textwrap.dedent("""
            import json, sys, time
            from zeus_plugins_amdsmi import fake_amdsmi
            fake_amdsmi.install(sys.argv[1])
            from zeus_core import Monitor
            from zeus_plugins_amdsmi.device import AmdGpus
            from zeus_plugins_amdsmi.options import AmdsmiOptions
            with AmdGpus(AmdsmiOptions(counter_check_s=0.02, idle_power_w=120.0)) as dev:
                mon = Monitor(dev)
                mon.begin_window("w")
                time.sleep(0.3)
                att = mon.end_window("w").attribution["gpu0"]
            print(json.dumps(att.as_json()))
        """)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        r = subprocess.run(
            [sys.executable, str(RUN_UNPRIVILEGED), "65534", "65534", "", code, str(state)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    finally:
        if mine is not None:
            mine.kill()
            mine.wait()
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    assert r.returncode == 0, r.stderr
    att = json.loads(r.stdout.strip().splitlines()[-1])
    charged = {p["pid"]: p["share"] for p in att["processes"]}
    assert mine is not None and charged == {mine.pid: 1.0}  # root's process is hidden, or listed without usage: charged nothing
    assert "CAP_SYS_PTRACE" in att["note"] and att["basis"] == "gfx-time"


def test_the_daemon_charges_an_amd_gpus_energy_to_its_processes_by_gfx_time(procs, monkeypatch):
    """A real ``zeus daemon`` serving simulated AMD GPUs: its accountant reads the amdsmi service's
    ``read_processes`` each second, and ``/gpu/get_attributed_energy`` splits GPU 1's energy 3:1."""
    from http_nodes import HttpNode

    from zeus_core.daemon.nodeclient import Endpoint, NodeClient

    node = HttpNode(vendor="amdsmi")
    try:
        fake_amdsmi.install(node.driver, monkeypatch)
        a, b = procs("job-a"), procs("job-b")
        fake_amdsmi.set_processes(1, [{"pid": a, "gfx": 0.6}, {"pid": b, "gfx": 0.2}])
        node.start()
        client = NodeClient(Endpoint(socket_path=str(node.socket)))
        try:
            # the accountant's readings, a second apart (later on a loaded machine): until two of them charged both
            deadline = time.monotonic() + 60
            while True:
                got = client.get("/gpu/get_attributed_energy", gpu_ids="1")["1"]
                by_pid = {p["pid"]: p["energy_j"] for p in got["processes"]}
                if min(by_pid.get(a, 0.0), by_pid.get(b, 0.0)) > 0:
                    break
                assert time.monotonic() < deadline, got
                time.sleep(0.2)
        finally:
            client.close()
    finally:
        node.remove()
    assert got["bases"] == ["gfx-time"] and got["estimate"] is True
    assert by_pid[a] == pytest.approx(3 * by_pid[b], rel=0.02) and by_pid[a] > 0
    assert by_pid[a] + by_pid[b] == pytest.approx(got["processes_j"]) and got["processes_j"] == pytest.approx(got["total_j"])
