"""Energy attribution's split (zeus_core.attribution): idle and active, the active part by SM share."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from zeus_core.attribution import DeviceActivity, ProcessActivity, attribute, attribute_all, charged_to, describe_process


def _sums_to_total(a):
    assert a.idle_j + a.active_j == pytest.approx(a.total_j)
    assert sum(p.energy_j for p in a.processes) + a.unattributed_j == pytest.approx(a.total_j)


def test_two_processes_at_3_to_1_share_the_active_energy_3_to_1_and_sum_with_idle_to_the_total():
    act = DeviceActivity((ProcessActivity(10, sm=60.0), ProcessActivity(11, sm=20.0)), idle_w=50.0, idle_source="configured")
    a = attribute(1000.0, 4.0, act)  # 200 J idle over 4 s at 50 W
    assert (a.idle_j, a.active_j) == (200.0, 800.0)
    by_pid = {p.pid: p for p in a.processes}
    assert by_pid[10].active_j == pytest.approx(600.0) and by_pid[11].active_j == pytest.approx(200.0)
    assert by_pid[10].idle_j == pytest.approx(150.0) and by_pid[11].idle_j == pytest.approx(50.0)
    assert (a.basis, a.scope, a.idle_source, a.estimate) == ("sm", "process", "configured", True)
    assert a.charged_j([10]) == pytest.approx(750.0) and a.charged_j([10, 11]) == pytest.approx(1000.0)
    _sums_to_total(a)


def test_a_lone_process_gets_all_the_active_energy_whatever_its_utilisation():
    a = attribute(500.0, 2.0, DeviceActivity((ProcessActivity(7, sm=5.0),), idle_w=60.0, idle_source="learned"))
    (p,) = a.processes
    assert (p.active_j, p.share, a.active_j) == (pytest.approx(380.0), 1.0, pytest.approx(380.0))
    assert p.energy_j == pytest.approx(500.0) and a.unattributed_j == 0.0
    assert a.idle_source == "learned"


def test_idle_never_exceeds_the_measured_energy():
    a = attribute(50.0, 10.0, DeviceActivity((ProcessActivity(1, sm=10.0),), idle_w=60.0, idle_source="configured"))
    assert (a.idle_j, a.active_j) == (50.0, 0.0)
    _sums_to_total(a)


def test_without_an_idle_power_every_joule_is_active_and_said_so():
    a = attribute(90.0, 3.0, DeviceActivity((ProcessActivity(1, sm=10.0),)))
    assert (a.idle_j, a.active_j, a.idle_source) == (0.0, 90.0, "none")


def test_no_samples_but_processes_holding_the_gpu_share_equally_flagged_equal():
    act = DeviceActivity((ProcessActivity(1), ProcessActivity(2), ProcessActivity(3)), idle_w=10.0, idle_source="configured")
    a = attribute(130.0, 1.0, act)
    assert a.basis == "equal"
    assert [p.active_j for p in a.processes] == [pytest.approx(40.0)] * 3
    _sums_to_total(a)


def test_no_process_at_all_charges_nothing_and_leaves_the_energy_unattributed():
    a = attribute(100.0, 1.0, DeviceActivity((), idle_w=30.0, idle_source="configured"))
    assert (a.basis, a.processes, a.unattributed_j, a.idle_j) == ("none", (), 100.0, 30.0)
    assert a.charged_j([1, 2]) == 0.0


def test_whole_gpu_scope_ignores_sm_weights_and_is_flagged():
    act = DeviceActivity((ProcessActivity(1, sm=90.0), ProcessActivity(2, sm=10.0)), scope="whole-gpu", note="MIG")
    a = attribute(100.0, 1.0, act)
    assert a.whole_gpu and a.basis == "equal"
    assert [p.energy_j for p in a.processes] == [pytest.approx(50.0)] * 2
    assert a.as_json()["scope"] == "whole-gpu" and a.as_json()["estimate"] is True


def test_a_pid_listed_twice_has_its_weights_summed():
    act = DeviceActivity(
        (ProcessActivity(1, sm=10.0, instance="a"), ProcessActivity(1, sm=20.0, instance="b"), ProcessActivity(2, sm=30.0))
    )
    a = attribute(60.0, 1.0, act)
    assert [(p.pid, p.active_j) for p in a.processes] == [(1, pytest.approx(30.0)), (2, pytest.approx(30.0))]


def test_attribute_all_covers_the_measured_devices_only():
    got = attribute_all({"gpu0": 10.0}, 1.0, {"gpu0": DeviceActivity((ProcessActivity(1, sm=1.0),)), "gpu9": DeviceActivity()})
    assert list(got) == ["gpu0"] and got["gpu0"].charged_j([1]) == pytest.approx(10.0)


def test_describe_process_reads_a_real_processs_user_and_command():
    code = "import sys, time; print('ready', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code, "marker-arg"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"  # past exec: its /proc entry is the new program's
        user, command = describe_process(child.pid)
        assert "marker-arg" in command and user  # the uid's name (or the uid where it has none)
        assert user == describe_process(os.getpid())[0]
    finally:
        child.kill()
        child.wait()
    assert describe_process(child.pid) == ("", "")  # gone: nothing to say


def test_charged_to_sums_what_some_processes_were_charged_over_windows_and_is_none_where_unseen():
    w1 = {"gpu0": attribute(100.0, 1.0, DeviceActivity((ProcessActivity(5, sm=30.0), ProcessActivity(6, sm=10.0))))}
    w2 = {"gpu0": attribute(40.0, 1.0, DeviceActivity((ProcessActivity(5), ProcessActivity(6)), scope="whole-gpu"))}
    got = charged_to([w1, w2], [5])
    assert got == {"energy_j": pytest.approx(75.0 + 20.0), "basis": "sm+whole-gpu"}
    assert charged_to([w1, w2], [99]) is None and charged_to([], [5]) is None


def test_a_try_records_its_own_processs_share_after_every_other_column(toy_plugin, tmp_path, monkeypatch):
    """The runner charges each try its own process's share (3 of 4 here: this process at 30 % SM beside
    another at 10 %), in recurrences.csv's last columns and summary.json; without any process seen the
    file is as before (tests/core/test_scheduler_context.py checks that)."""
    from zeus_test_helpers import TOY_JOB, run_cli, toy_registry, write_job

    from zeus_core.results import ATTRIBUTION_COLUMNS, ENERGY_COLUMNS, TRY_COLUMNS

    class SharedToyDevice(toy_plugin.ToyDevice):  # a class of its own: isinstance caches a protocol's answer per class
        def read_process_activity(self, since):
            procs = (ProcessActivity(os.getpid(), sm=30.0, command="zeus run"), ProcessActivity(1, sm=10.0))
            return {"toy0": DeviceActivity(procs, idle_w=None)}

    monkeypatch.setattr(toy_plugin, "ToyDevice", SharedToyDevice)  # what its registration hook registers as "toy"
    job = write_job(tmp_path / "job.toml", TOY_JOB)
    r = run_cli(toy_registry(toy_plugin), "run", str(job), "--output", "out")
    assert r.exit_code == 0, r.output
    with open("out/recurrences.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [*TRY_COLUMNS, *ENERGY_COLUMNS, *ATTRIBUTION_COLUMNS]
    for row in rows:
        assert float(row["energy_attributed_j"]) == pytest.approx(0.75 * float(row["energy_j"]), rel=1e-6)
        assert row["energy_attribution"] == "sm"
    summary = json.loads(Path("out/summary.json").read_text())
    assert summary["energy_attributed_j"] == pytest.approx(sum(float(r["energy_attributed_j"]) for r in rows))
    assert summary["energy_attribution"] == "sm"


def test_a_device_that_fails_to_say_who_ran_warns_once_and_never_costs_the_window():
    from zeus_core import Monitor

    class Failing:
        names = ["gpu0"]
        energy_sources = {"gpu0": "counter"}
        max_power_w = 300.0
        calls = 0

        def clock(self):
            return float(self.calls)

        def read_energy(self):
            self.calls += 1
            return {"gpu0": 100.0 * self.calls}

        def close(self):
            pass

        def read_process_activity(self, since):
            raise RuntimeError("driver gone")

    mon = Monitor(Failing(), sync="none")
    mon.begin_window("a")
    with pytest.warns(UserWarning, match="energy attribution is off.*driver gone"):
        m = mon.end_window("a")
    assert m.energy == {"gpu0": 100.0} and m.attribution == {}
    mon.begin_window("b")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert mon.end_window("b").attribution == {}
    assert not [w for w in seen if "attribution" in str(w.message)]  # off from then on: no second warning


def test_ranks_combined_keep_each_gpus_attribution_under_its_new_name():
    from zeus_core.engine.ranks import combine_measurements
    from zeus_core.measurement import Measurement

    def one(pid):
        att = attribute(10.0, 1.0, DeviceActivity((ProcessActivity(pid, sm=50.0),)))
        return Measurement(1.0, {"gpu0": 10.0}, {"gpu0": "counter"}, attribution={"gpu0": att})

    both = combine_measurements([one(100), one(200)])
    assert set(both.energy) == set(both.attribution) == {"gpu0", "gpu1"}
    assert [p.pid for p in both.attribution["gpu1"].processes] == [200]


def test_a_try_over_ranks_is_charged_every_ranks_process_and_nothing_where_a_rank_could_not_say():
    from zeus_core.engine.ranks import combine_measurements, ranks_charged
    from zeus_core.measurement import Measurement

    def rank(pid, joules, attributed=True):
        att = attribute(joules, 1.0, DeviceActivity((ProcessActivity(pid, sm=30.0), ProcessActivity(1, sm=10.0))), observer=pid)
        return Measurement(1.0, {"gpu0": joules}, {"gpu0": "counter"}, attribution={"gpu0": att} if attributed else {})

    both = combine_measurements([rank(100, 40.0), rank(200, 80.0)])
    assert {a.observer for a in both.attribution.values()} == {100, 200}  # rank 0 knows rank 1's process
    assert ranks_charged([both]) == {"energy_j": pytest.approx(0.75 * 120.0), "basis": "sm"}
    assert ranks_charged([combine_measurements([rank(100, 40.0), rank(200, 80.0, attributed=False)])]) is None


def test_each_ranks_process_is_charged_only_on_the_gpus_its_own_rank_measured():
    """Two ranks on one GPU: each measured it and lists both; each is charged its own share of its own
    window (an observer's PID, matched elsewhere, would charge the GPU twice)."""
    from zeus_core.engine.ranks import combine_measurements, ranks_charged
    from zeus_core.measurement import Measurement

    both_on_one = DeviceActivity((ProcessActivity(100, sm=30.0), ProcessActivity(200, sm=10.0)))

    def rank(pid):
        return Measurement(1.0, {"gpu0": 40.0}, {"gpu0": "counter"}, attribution={"gpu0": attribute(40.0, 1.0, both_on_one, observer=pid)})

    assert ranks_charged([combine_measurements([rank(100), rank(200)])]) == {"energy_j": pytest.approx(30.0 + 10.0), "basis": "sm"}
