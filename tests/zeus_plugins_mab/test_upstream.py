"""``GlobalPowerLimitOptimizer``: upstream Zeus's constructor and loop calls over ``PowerLimitOptimizer`` + ``jit``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from inloop_helpers import env_with_fake, fake_gpus, limits, spin

from zeus_core import ZeusMonitor
from zeus_plugins_mab.upstream import (  # (the package itself: from outside the checkout, see examples)
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "upstream_power_limit" / "train.py"


def test_upstreams_documented_example_with_only_the_imports_changed_picks_a_limit(tmp_path, monkeypatch):
    driver = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=4)
    text = EXAMPLE.read_text()
    # The example is upstream's, but for its imports (and the model and data upstream leaves out).
    assert "monitor = ZeusMonitor(gpu_indices=[0,1,2,3])\nplo = GlobalPowerLimitOptimizer(monitor)\n" in text
    assert "        plo.on_step_begin()\n" in text and "    plo.on_epoch_end()\n" in text
    p = subprocess.run([sys.executable, str(EXAMPLE)], env=env_with_fake(driver), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    m = re.search(r"GlobalPowerLimitOptimizer holds (\d+) W \(the optimum of 13 profiled limits\)", p.stderr)
    assert m and int(m.group(1)) in range(100, 401, 25), p.stderr
    assert limits(driver) == [400.0] * 4  # put back at exit


def _loop(plo, epochs, steps, seen=None):
    for _ in range(epochs):
        for _ in range(steps):  # no on_epoch_begin: upstream's loops need none
            plo.on_step_begin()
            if seen is not None:
                seen.append(plo.plo.power_limit)
            spin(0.0002)
            plo.on_step_end()
        plo.on_epoch_end()


def test_the_profile_file_is_written_then_loaded_and_held_from_the_first_step(tmp_path, monkeypatch):
    fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1)
    profile = tmp_path / "profile.json"
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        plo = GlobalPowerLimitOptimizer(mon, warmup_steps=1, profile_steps=4, wait_steps=2, profile_path=profile)
        seen: list[float] = []
        _loop(plo, epochs=2, steps=60, seen=seen)
        chosen = plo.optimal_power_limit
        plo.close()
    assert seen[:2] == [400.0, 400.0]  # wait_steps at the epoch's start
    rows = json.loads(profile.read_text())["measurements"]
    assert [r["power_limit"] for r in rows] == list(range(400, 99, -25))
    assert chosen == ZeusCost(0.5).select([PowerLimitMeasurement(**r) for r in rows])  # one GPU: upstream's rule
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        plo = GlobalPowerLimitOptimizer(mon, optimum_selector=Energy(), profile_steps=4, profile_path=profile)
        plo.on_step_begin()
        best = min(rows, key=lambda r: r["energy"])["power_limit"]
        assert plo.plo.power_limit == best and not plo.plo.profiling  # the loaded profile, by this selector
        plo.close()


def test_a_loaded_profile_on_two_gpus_holds_the_limit_profiling_would_choose(tmp_path, monkeypatch):
    """ZeusCost weighs time by the job's maximum power (both GPUs: 800 W), when profiling and when loading."""
    fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)
    profile = tmp_path / "profile.json"
    # eta 0.5: at 800 W, 400 W costs 1200 and 300 W 1205; at one GPU's 400 W it would be 1000 against 965
    profile.write_text(
        json.dumps(
            {"measurements": [{"power_limit": 400, "energy": 1600.0, "time": 1.0}, {"power_limit": 300, "energy": 1450.0, "time": 1.2}]}
        )
    )
    with ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[]) as mon:
        plo = GlobalPowerLimitOptimizer(mon, profile_steps=4, profile_path=profile)
        plo.on_step_begin()
        assert plo.plo.max_power_w == 800.0 and not plo.plo.profiling
        assert plo.plo.power_limit == 400.0
        plo.close()


def test_selectors_map_onto_the_policy_and_a_custom_one_chooses(tmp_path, monkeypatch):
    fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1)

    class Second(OptimumSelector):
        def select(self, measurements):
            self.got = measurements
            return sorted(m.power_limit for m in measurements)[1]

    second = Second()
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        for selector, select in (
            (Energy(), "energy"),
            (Time(), "time"),
            (MaxSlowdownConstraint(1.2), "max-slowdown"),
            (ZeusCost(0.8), "cost"),
        ):
            plo = GlobalPowerLimitOptimizer(mon, optimum_selector=selector, warmup_steps=0, profile_steps=2)
            assert plo.plo.policy.options.select == select and plo.plo.policy.selector is None
            plo.close()
        assert GlobalPowerLimitOptimizer(mon, ZeusCost(0.8)).plo.job.eta_knob == 0.8
        plo = GlobalPowerLimitOptimizer(mon, optimum_selector=second, warmup_steps=0, profile_steps=2, pl_step=100)
        _loop(plo, epochs=1, steps=20)
        assert plo.optimal_power_limit == 200.0 and [m.power_limit for m in second.got] == [400, 300, 200, 100]
        assert all(m.energy > 0 and m.time > 0 for m in second.got)
        plo.close()
        for kwargs, match in (
            ({"profile_steps": 0}, "profile_steps must be positive"),
            ({"warmup_steps": -1}, "warmup_steps must be non-negative"),
            ({"optimum_selector": "energy"}, "optimum_selector must be an OptimumSelector"),
        ):
            with pytest.raises(ValueError, match=match):
                GlobalPowerLimitOptimizer(mon, **kwargs)
    with pytest.raises(ValueError, match="greater than or equal to 1.0"):
        MaxSlowdownConstraint(0.5)
    rows = [PowerLimitMeasurement(300, 30.0, 1.0), PowerLimitMeasurement(200, 22.0, 1.15), PowerLimitMeasurement(100, 15.0, 1.6)]
    assert (Energy().select(rows), Time().select(rows), MaxSlowdownConstraint(1.2).select(rows)) == (100, 300, 200)


@pytest.mark.parametrize(
    "content, expected",
    [
        (
            b'{"measurements": [{"power_limit": 300, "energy": 1\xe9, "time": 1.0}]}',
            r"profile\.json:1: byte 0xe9 at column 51 is not UTF-8",
        ),
        (b"[" * 100_000, r"profile\.json:1: arrays and objects nest more than 4 deep"),
        (b'{"measurements": [{"power_limit": 300, "energy": 1e300, "time": 1.0}]}', r"\$\.measurements\[0\]\.energy: 1e\+300 J is above"),
        (
            b'{"measurements": [{"power_limit": 300, "energy": "0,35", "time": 1.0}]}',
            r"\$\.measurements\[0\]\.energy: expected a number, got '0,35'",
        ),
        (b'{"measurements": [{"power_limit": 300, "energy": 5.0}]}', r"\$\.measurements\[0\]: missing key 'time'"),
        (b'{"measurements": []}', r"\$\.measurements: no measurements"),
        (
            b'{"measurements": [{"power_limit": 300, "energy": 5, "time": 1}, {"power_limit": 300, "energy": 5, "time": 1}]}',
            r"\$\.measurements\[1\]\.power_limit: 300 W appears twice in this list",
        ),
        (b'{"measurements": [{"power_limit": 300.5, "energy": 5, "time": 1}]}', r"300\.5 is not a whole number"),
        (b'{"measurements": [{"power_limit": 300, "energy": 5, "time": 0}]}', r"\$\.measurements\[0\]\.time: must be positive"),
        (b'{"measurements": {"power_limit": 300}}', r"expected an object with a list of measurements"),
    ],
    ids=["not-utf8", "nested", "overflow", "decimal-comma", "missing-cell", "empty", "twice", "fraction", "zero-time", "not-a-list"],
)
def test_a_bad_profile_file_is_refused_naming_the_file_and_the_record(tmp_path, monkeypatch, content, expected):
    """Upstream's profile file is read as every data file is (zeus_core.datafiles), before any GPU is touched."""
    fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1)
    profile = tmp_path / "profile.json"
    profile.write_bytes(content)
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with pytest.raises(ValueError, match=expected) as got:
            GlobalPowerLimitOptimizer(mon, profile_steps=4, profile_path=profile)
    assert str(got.value).startswith("profile_path: ") and "remove the file to profile again" in str(got.value)
    assert "Traceback" not in str(got.value)


def test_a_profile_file_past_its_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1)
    profile = tmp_path / "profile.json"
    row = '{"power_limit": 300, "energy": 5.0, "time": 1.0}, '
    profile.write_text('{"measurements": [' + row * 100_000 + row[:-2] + "]}")  # 5 MB: past the 4 MiB limit
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with pytest.raises(
            ValueError, match=r"more than the 4,194,304 bytes \(4 MiB\) a power-limit profile \(JSON\) may be.*ZEUS_MAX_POWER_PROFILE_MB"
        ):
            GlobalPowerLimitOptimizer(mon, profile_steps=4, profile_path=profile)
        monkeypatch.setenv("ZEUS_MAX_POWER_PROFILE_MB", "8")
        with pytest.raises(ValueError, match=r"300 W appears twice in this list"):  # read now: its records are checked
            GlobalPowerLimitOptimizer(mon, profile_steps=4, profile_path=profile)
