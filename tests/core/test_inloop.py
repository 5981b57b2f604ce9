"""Zeus inside the user's own loop: ZeusMonitor, PowerLimitOptimizer and BatchSizeOptimizer, on the
simulated NVIDIA driver; one history with ``zeus run``; identities a script declares."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import attrs
import pytest
from inloop_helpers import QUICK_JIT, env_with_fake, fake_gpus, limits, run_epochs, spin

from zeus_core import BatchSizeOptimizer, DeviceError, PowerLimitOptimizer, RunFailed, ZeusMonitor, hookimpl
from zeus_core.engine.assembly import DeviceOpenError
from zeus_core.engine.history import JobHistory, TryPlan
from zeus_core.engine.registry import get_registry
from zeus_core.engine.registry import load as load_plugins
from zeus_core.engine.stores.locations import open_store
from zeus_core.errors import PluginError
from zeus_core.identity import IdentityMismatch, differences, merged


@pytest.fixture
def gpus(tmp_path, monkeypatch):
    return fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)


# --------------------------------------------------------------------------- ZeusMonitor


def test_zeus_monitor_opens_the_plugin_that_measures_gpus(gpus):
    with ZeusMonitor(gpu_indices=[1], cpu_indices=[]) as mon:
        assert mon.gpu_indices == [1] and mon.cpu_indices == []
        assert [name for name, _, _ in mon.groups] == ["nvml"]
        mon.begin_window("step")
        spin(0.02)
        m = mon.end_window("step")
        assert set(m.gpu_energy) == {1} and m.total_energy > 0 and m.time >= 0.02
        assert m.total_energy == m.gpu_energy[1]  # upstream: GPUs only
        mon.begin_window("x")
        with pytest.raises(ValueError, match="already exists"):
            mon.begin_window("x")
        assert mon.end_window("x", cancel=True).total_energy == 0.0
    with ZeusMonitor(cpu_indices=[]) as every:
        assert every.gpu_indices == [0, 1]


def test_zeus_monitor_passes_upstream_s_keywords_on(gpus, tmp_path):
    """log_file gets a row per window, sync_execution_with runs at each timestamp, approx_instant_energy is kept."""
    import csv

    synced = []
    log = tmp_path / "windows.csv"
    with ZeusMonitor(
        gpu_indices=[0], cpu_indices=[], log_file=log, sync_execution_with=lambda: synced.append(1), approx_instant_energy=True
    ) as mon:
        assert mon.approx_instant_energy is True
        mon.begin_window("w")
        spin(0.01)
        m = mon.end_window("w")
    assert len(synced) >= 2  # at the window's begin and end
    rows = list(csv.DictReader(log.open()))
    assert [r["window_name"] for r in rows] == ["w"] and float(rows[0]["elapsed_time"]) == pytest.approx(m.time, abs=1e-5)
    assert float(rows[0]["gpu0_energy"]) == pytest.approx(m.gpu_energy[0], rel=1e-6)


def test_zeus_monitor_under_a_launcher_measures_its_own_gpu(gpus, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with ZeusMonitor(cpu_indices=[]) as mon:
        assert mon.gpu_indices == [1]


def test_zeus_monitor_without_a_gpu_library_times_windows_and_explicit_gpus_fail(tmp_path, monkeypatch):
    monkeypatch.delenv("ZEUS_FAKE_NVML", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVIDIA library at all
    with pytest.warns(UserWarning, match=r"opened no device: its windows measure time only, and 0 J \(.*nvml: "):
        mon = ZeusMonitor(cpu_indices=[])  # upstream: no GPU is no error; a warning here says it measures nothing
    with mon:
        assert mon.gpu_indices == []
        mon.begin_window("w")
        assert mon.end_window("w").total_energy == 0.0
    with pytest.raises(DeviceOpenError, match=r"gpu_indices=\[0\]: no GPU could be opened \(.*nvml: "):
        ZeusMonitor(gpu_indices=[0])


def test_zeus_monitor_explicit_cpus_fall_back_to_the_estimate_and_bad_arguments_say_so(gpus):
    with pytest.warns(UserWarning, match="CPU energy is estimated by 'cpu-estimate'") if not _rapl_readable() else _nothing():
        with ZeusMonitor(gpu_indices=[], cpu_indices=[0]) as mon:
            assert mon.cpu_indices == [0] or mon.groups[0][0] == "cpu-estimate"
    with ZeusMonitor(device="cpu-estimate", options={"scope": "process"}) as mon:
        assert [name for name, _, _ in mon.groups] == ["cpu-estimate"]
        assert mon.groups[0][1] == {"plugin": "cpu-estimate", "tdp_w": 85.0, "idle_w": 0.0, "scope": "process", "max_power_w": None}
    for kwargs, match in (
        ({"gpu_indices": [-1]}, "gpu_indices must list distinct indices"),
        ({"gpu_indices": "0"}, "gpu_indices must be a list"),
        ({"options": {"scope": "process"}}, 'pass device="<plugin>" too'),
    ):
        with pytest.raises(ValueError, match=match):
            ZeusMonitor(**kwargs)
    with pytest.raises(DeviceOpenError, match="no device plugin named 'nvm'; installed: .*nvml"):
        ZeusMonitor(device="nvm")
    with pytest.raises(DeviceOpenError, match="unknown key 'scop'"):
        ZeusMonitor(device="cpu-estimate", options={"scop": "process"})


def _rapl_readable() -> bool:
    from pathlib import Path

    return any(Path("/sys/class/powercap").glob("intel-rapl:*/energy_uj"))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_device_registration_declares_what_it_measures_or_is_refused():
    @attrs.define
    class Opts:
        gpus: list[int] | None = None

    class Bad:
        @staticmethod
        @hookimpl
        def zeus_register_devices(register):
            register("bad", object, options=Opts, measures={"gpu": "indices"})

    with pytest.raises(PluginError, match="measures=.*its options have no 'indices'"):
        load_plugins(extra_plugins=[("bad", Bad)], entry_points=False)

    class NotADevice:
        @staticmethod
        @hookimpl
        def zeus_register_power_policies(register):
            register("p", object, options=Opts, measures={"gpu": "gpus"})

    with pytest.raises(PluginError, match="only devices declare what they measure"):
        load_plugins(extra_plugins=[("p", NotADevice)], entry_points=False)
    reg = load_plugins()
    assert [r.name for r in reg.measuring("gpu")] == ["amdsmi", "nvml"]  # every installed GPU plugin, by name
    assert {r.name for r in reg.measuring("cpu")} == {"rapl", "cpu-estimate"}


# --------------------------------------------------------------------------- PowerLimitOptimizer


def test_power_optimizer_profiles_holds_the_cheapest_limit_and_keeps_it_in_the_store(gpus):
    seen: list[float] = []
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with PowerLimitOptimizer(mon, policy="jit", job="plo", options=QUICK_JIT, batch_size=64) as plo:
            run_epochs(plo, epochs=2, steps=150, seen=seen)
            chosen = plo.power_limit
            assert plo.epochs[0]["power_limit"] == chosen and len(plo.epochs) == 2
        assert limits(gpus)[0] == 400.0  # the device is back at its limit
        assert limits(gpus)[1] == 400.0  # and the other GPU was never touched
    profiled = sorted(set(seen), reverse=True)
    assert profiled[0] == 400.0 and profiled[-1] == 100.0 and len(profiled) == 13  # every 25 W step
    assert seen[-1] == chosen and set(seen[120:]) == {chosen}
    store = open_store(".zeus/plo.sqlite", get_registry())
    try:
        choice = store.get("policy:power")["choices"]["64"]
        identity = store.identity()
    finally:
        store.close()
    # The held limit is the one whose measured window cost least (eta 0.5, MAXPOWER 400 W).
    costs = {float(p): 0.5 * e + 0.5 * 400.0 * t for p, (t, e) in choice["profile"].items()}
    assert len(costs) == 13 and choice["power_limit"] == chosen == min(costs, key=costs.get)
    assert identity["power"]["plugin"] == "jit" and identity["power"]["measure_iters"] == 8
    assert identity["device"] == {
        "plugin": "nvml",
        "gpus": [0],
        "mig": "error",
        "max_power_w": None,
        "gpu_models": ["NVIDIA A100-SXM4-40GB"],
    }
    assert identity["job"] == {"eta_knob": 0.5, "processes": 1} and "batch_size" not in identity
    # The next run at that batch size holds the choice from its first step.
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with PowerLimitOptimizer(mon, policy="jit", job="plo", options=QUICK_JIT, batch_size=64) as plo:
            plo.on_epoch_begin()
            plo.on_step_begin()
            assert not plo.profiling and plo.power_limit == chosen


def test_power_optimizer_refuses_bad_input_with_the_fix(gpus, tmp_path):
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with pytest.raises(ValueError, match=r"policy='jitt' is not a registered power policy.*installed: .*jit"):
            PowerLimitOptimizer(mon, policy="jitt", job="x")
        with pytest.raises(ValueError, match="unknown key 'warmup' \\(did you mean 'warmup_iters'\\?\\) @ \\$.options.warmup"):
            PowerLimitOptimizer(mon, policy="jit", job="x", options={"warmup": 3})
        with pytest.raises(ValueError, match="eta_knob"):
            PowerLimitOptimizer(mon, policy="jit", job="x", eta_knob=1.5)
        with pytest.raises(ValueError, match="name 'a/b' contains '/'"):
            PowerLimitOptimizer(mon, policy="jit", job="a/b")
        plo = PowerLimitOptimizer(mon, policy="jit", job="x", options=QUICK_JIT)
        with pytest.raises(RuntimeError, match=r"on_step_begin\(\) before on_epoch_begin\(\): call plo.on_epoch_begin\(\)"):
            plo.on_step_begin()
        with pytest.raises(RuntimeError, match="on_step_end"):
            plo.on_step_end()
        plo.on_epoch_begin()
        with pytest.raises(RuntimeError, match="twice"):
            plo.on_epoch_begin()
        plo.close()
        assert limits(gpus)[0] == 400.0
    with ZeusMonitor(device="cpu-estimate") as cpus:
        with pytest.raises(ValueError, match="no device among them can set power limits.*gpu_indices"):
            PowerLimitOptimizer(cpus, policy="jit", job="x")
    assert not (tmp_path / ".zeus" / "x.sqlite").exists() or True


def test_a_process_that_cannot_set_limits_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    path = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1, privileged=False)
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with pytest.raises(DeviceError, match="zeus daemon"):
            PowerLimitOptimizer(mon, policy="jit", job="noperm")
    assert not (tmp_path / ".zeus" / "noperm.sqlite").exists()
    assert limits(path) == [400.0]


def test_an_exception_in_the_loop_and_a_kill_leave_the_device_restored(gpus, tmp_path):
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with pytest.raises(ZeroDivisionError):
            with PowerLimitOptimizer(mon, policy="jit", job="exc", options=QUICK_JIT) as plo:
                plo.on_epoch_begin()
                for _ in range(30):
                    plo.on_step_begin()
                    plo.on_step_end()
                assert limits(gpus)[0] < 400.0  # profiling lower limits
                raise ZeroDivisionError  # the user's loop fails while profiling
        assert limits(gpus)[0] == 400.0
    script = textwrap.dedent("""
        import os, signal
        from zeus_core import ZeusMonitor, PowerLimitOptimizer
        mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
        plo = PowerLimitOptimizer(mon, policy="jit", job="kill", options={"warmup_iters": 1, "measure_iters": 8})
        plo.on_epoch_begin()
        for _ in range(30):
            plo.on_step_begin()
        print(mon.devices.power_limit(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", script], env=env_with_fake(gpus), capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL and float(p.stdout) < 400.0, p.stderr
    assert limits(gpus)[0] == float(p.stdout)  # the killed process could not restore it
    with ZeusMonitor(gpu_indices=[1], cpu_indices=[]):  # the next zeus start does
        assert limits(gpus)[0] == 400.0


# --------------------------------------------------------------------------- BatchSizeOptimizer


def test_a_script_s_store_path_is_read_as_zeus_run_reads_it(tmp_path, monkeypatch):
    """``~`` is the home folder, a relative path is the current folder's, the default is .zeus/<job>.sqlite."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for store, where in (
        ("~/t.sqlite", tmp_path / "home" / "t.sqlite"),
        ("rel.sqlite", tmp_path / "rel.sqlite"),
        (None, tmp_path / ".zeus" / "t.sqlite"),
    ):
        bso = BatchSizeOptimizer(job="t", batch_sizes=[32], default=32, max_power_w=300.0, store=store)
        bso.report(bso.next(), energy_j=1.0, time_s=1.0, reached=True)
        bso.close()
        assert where.is_file(), store
    assert not (tmp_path / "~").exists()


def test_batch_size_optimizer_runs_recurrences_and_learns_in_the_store():
    bso = BatchSizeOptimizer(job="bso", policy="mab", batch_sizes=[32, 64, 128], default=64, max_power_w=300.0)
    epochs_to_target = {32: 3, 64: 2, 128: 4}
    chosen = []
    for _ in range(6):
        trial = bso.next()
        chosen.append(trial.batch_size)
        cost = 0.0
        for _epoch in range(epochs_to_target[trial.batch_size]):
            cost += trial.cost(energy_j=100.0 * trial.batch_size / 64, time_s=1.0)
            if trial.should_stop(cost):
                break
        reached = trial.stopped is None
        rec = bso.report(trial, energy_j=100.0, time_s=1.0, reached=reached)
        assert rec.batch_size == trial.batch_size and rec.epochs == trial.epochs
    assert chosen[0] == 64  # the user's batch size first
    bso.close()
    store = open_store(".zeus/bso.sqlite", get_registry())
    try:
        tries = store.tries()
        assert store.get("policy:batch_size") is not None and store.get("runner")["min_cost"] is not None
        identity = store.identity()
    finally:
        store.close()
    assert [t.batch_size for t in tries] == chosen
    assert identity["workload"] == {"batch_sizes": [32, 64, 128], "default_batch_size": 64}
    assert identity["batch_size"]["plugin"] == "mab" and "device" not in identity
    # A later process continues the numbering.
    again = BatchSizeOptimizer(job="bso", policy="mab", batch_sizes=[32, 64, 128], default=64, max_power_w=300.0)
    assert again.next().recurrence == max(t.recurrence for t in tries) + 1


def test_early_stop_retries_in_the_same_recurrence_and_max_tries_fails():
    bso = BatchSizeOptimizer(job="stop", policy="fixed", default=64, max_power_w=100.0, max_tries=2, beta_knob=2.0)
    t = bso.next()
    for _ in range(2):
        assert not t.should_stop(t.cost(100.0, 1.0) * (t.epochs + 1))
    bso.report(t, energy_j=200.0, time_s=2.0, reached=True)  # min cost: 2 epochs
    t = bso.next()
    assert t.recurrence == 2 and t.cost_bound == pytest.approx(2 * bso.cost(200.0, 2.0))
    stops = [t.should_stop(t.cost(100.0, 1.0) * (n + 1)) for n in range(4)]
    assert stops == [False, False, False, True]  # the 5th epoch would pass 2 x the cheapest recurrence
    rec = bso.report(t, energy_j=400.0, time_s=4.0, reached=False)
    assert rec.stopped == "early-stop" and not rec.reached
    t = bso.next()
    assert (t.recurrence, t.try_index) == (2, 2)
    with pytest.raises(RunFailed, match="recurrence 2 did not reach the target in 2 tries"):
        bso.report(t, energy_j=1.0, time_s=1.0, reached=False)
    assert bso.next().recurrence == 3


def test_batch_size_optimizer_refuses_bad_input_with_the_fix():
    kw = {"max_power_w": 300.0}
    with pytest.raises(ValueError, match=r"policy='mabb' is not a registered batch_size policy.*installed: .*mab"):
        BatchSizeOptimizer(job="b", policy="mabb", **kw)
    with pytest.raises(ValueError, match="default 48 is not one of batch_sizes"):
        BatchSizeOptimizer(job="b", batch_sizes=[32, 64], default=48, **kw)
    with pytest.raises(ValueError, match="batch_sizes must list distinct positive"):
        BatchSizeOptimizer(job="b", batch_sizes=[32, 32], **kw)
    with pytest.raises(ValueError, match="max_power_w must be a positive number"):
        BatchSizeOptimizer(job="b", max_power_w=-1)
    bso = BatchSizeOptimizer(job="b", batch_sizes=[32, 64], default=64, target_metric=0.8, **kw)
    t = bso.next()
    with pytest.raises(RuntimeError, match="report BatchSizeTry.* first"):
        bso.next()
    with pytest.raises(ValueError, match="say whether the try reached the target: reached=True or False, or metric="):
        bso.report(t, energy_j=1.0, time_s=1.0)
    with pytest.raises(ValueError, match="energy_j must be a finite number"):
        bso.report(t, energy_j=float("nan"), time_s=1.0, reached=True)
    assert bso.report(t, energy_j=1.0, time_s=1.0, metric=0.85).reached  # judged against target_metric
    with pytest.raises(ValueError, match="report the trial the last next\\(\\) returned"):
        bso.report(t, energy_j=1.0, time_s=1.0, reached=True)


def test_a_remote_history_drops_in_for_the_store():
    class Remote:
        def __init__(self):
            self.calls = []

        def begin_recurrence(self):
            self.calls.append("begin")
            return 7

        def next_try(self, recurrence, try_index):
            self.calls.append(("next", recurrence, try_index))
            return TryPlan(recurrence, try_index, 96, float("inf"), None)

        def record(self, trial, record, recurrence_cost=None):
            self.calls.append(("record", record.batch_size, record.reached, recurrence_cost))

    remote = Remote()
    assert isinstance(remote, JobHistory)
    bso = BatchSizeOptimizer(job="remote", max_power_w=100.0, history=remote)
    t = bso.next()
    assert (t.recurrence, t.batch_size) == (7, 96)
    bso.report(t, energy_j=10.0, time_s=1.0, reached=True)
    assert remote.calls == ["begin", ("next", 7, 1), ("record", 96, True, bso.cost(10.0, 1.0))]
    assert not os.path.exists(".zeus/remote.sqlite")


# --------------------------------------------------------------------------- one history, however the job is run


JOB = """
[job]
name = "shared"
recurrences = 1
target_metric = 0.5
store = "shared.sqlite"

[workload]
plugin = "torch"
entry = "inloop_helpers:train_to_target"
batch_sizes = [32, 64, 128]
default_batch_size = 64
threads = 1

[device]
plugin = "nvml"
gpus = [0]

[batch_size]
plugin = "mab"

[power]
plugin = "jit"
warmup_iters = 1
measure_iters = 2
"""


def test_zeus_run_and_a_script_share_one_history(gpus, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (.ci/ship runs the core tests on Python 3.12+ without torch)")
    from zeus_plugins_torch import run_job

    job_file = tmp_path / "job.toml"
    job_file.write_text(JOB)
    first = run_job(job_file)  # recurrence 1, by zeus's own loop
    assert first.recurrences == 1
    jit = {"warmup_iters": 1, "measure_iters": 2}
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        bso = BatchSizeOptimizer(
            job="shared",
            policy="mab",
            batch_sizes=[32, 64, 128],
            default=64,
            monitor=mon,
            target_metric=0.5,
            store=tmp_path / "shared.sqlite",
        )
        trial = bso.next()
        assert trial.recurrence == 2  # the same history
        with PowerLimitOptimizer(
            mon, "jit", job="shared", options=jit, batch_size=trial.batch_size, store=tmp_path / "shared.sqlite"
        ) as plo:
            mon.begin_window("try")
            plo.on_epoch_begin()
            profiled_before = trial.batch_size == 64
            assert plo.profiling is not profiled_before  # zeus run already profiled its batch size
            for _ in range(60):
                plo.on_step_begin()
                plo.on_step_end()
            plo.on_epoch_end()
            m = mon.end_window("try")
            trial.should_stop(trial.cost(m.total_energy, m.time))
            bso.report(trial, energy_j=m.total_energy, time_s=m.time, metric=1.0, power=plo)
        bso.close()
    second = run_job(job_file)  # and zeus run again continues it
    store = open_store(tmp_path / "shared.sqlite", get_registry())
    try:
        tries = store.tries()
        state = store.get("policy:power")
        identity = store.identity()
    finally:
        store.close()
    assert [t.recurrence for t in tries] == [1, 2, 3] and second.recurrences == 3
    assert tries[1].power_limit == state["choices"][str(trial.batch_size)]["power_limit"]
    assert identity["workload"]["plugin"] == "torch" and identity["job"]["target_metric"] == 0.5
    # Another setup is refused, with what differs and the script's fixes.
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with pytest.raises(IdentityMismatch, match=r"(?s)job.eta_knob\s+0.5\s+0.9.*pass fresh=True"):
            BatchSizeOptimizer(
                job="shared", batch_sizes=[32, 64, 128], default=64, monitor=mon, eta_knob=0.9, store=tmp_path / "shared.sqlite"
            )
        with pytest.raises(IdentityMismatch, match=r"power.measure_iters\s+2\s+40"):
            PowerLimitOptimizer(mon, "jit", job="shared", store=tmp_path / "shared.sqlite")
        with pytest.raises(IdentityMismatch, match=r"device.gpus\s+\[0\]\s+\[1\]"):
            PowerLimitOptimizer(
                ZeusMonitor(gpu_indices=[1], cpu_indices=[]), "jit", job="shared", options=jit, store=tmp_path / "shared.sqlite"
            )


def test_identity_sections_a_script_does_not_declare_are_not_compared():
    stored = {
        "job": {"eta_knob": 0.5, "target_metric": 0.6, "processes": 1},
        "workload": {"plugin": "torch", "entry": "t:t", "batch_sizes": [8, 16], "default_batch_size": 8},
        "power": {"plugin": "jit", "step_w": 25.0},
        "profiler": {"plugin": None},
    }
    script = {
        "job": {"eta_knob": 0.5, "processes": 1},
        "workload": {"batch_sizes": [8, 16], "default_batch_size": 8},
        "batch_size": {"plugin": "mab"},
    }
    assert differences(stored, script) == []
    assert [d.key for d in differences(stored, {"workload": {"batch_sizes": [8, 32]}})] == ["workload.batch_sizes"]
    assert [d.key for d in differences(stored, {"power": {"plugin": "max"}})] == ["power.plugin"]
    learned = merged(stored, script)
    assert learned["batch_size"] == {"plugin": "mab"} and learned["workload"]["plugin"] == "torch"
    assert learned["job"] == {"eta_knob": 0.5, "target_metric": 0.6, "processes": 1}
    assert differences(learned, stored) == [] and differences(learned, script) == []
