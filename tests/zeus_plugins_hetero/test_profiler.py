"""The power-sweep profiler on the simulated toy device, and its profile feeding the allocator."""

import json
import textwrap

import pytest
from zeus_test_helpers import run_cli, write_job

from zeus_core.engine import registry as zreg
from zeus_plugins_hetero import plugin as hetero_plugin
from zeus_plugins_hetero.profile import Profile

# One iteration of batch b at limit p takes 1 ms * b * (300 / p) ** 0.5 * SLOW and draws 0.9 p watts.
STEPS = textwrap.dedent("""
    SLOW = {slow}
    CALLS = []

    def make_step(batch_size, devices):
        CALLS.append(batch_size)

        def step():
            limit = devices.power_limit()
            devices.advance(0.001 * batch_size * (300 / limit) ** 0.5 * SLOW, 0.9 * limit)

        return step
""")


def _registry(toy_plugin):
    """The toy device and this plugin only, so another distribution's state cannot break these tests."""
    return zreg.load(entry_points=False, extra_plugins=[("toy", toy_plugin), ("hetero", hetero_plugin)])


def _expected(b, p, slow, steps):
    t = 0.001 * b * (300 / p) ** 0.5 * slow * steps
    return t, t * 0.9 * p


def _sweep_job(tmp_path, name, slow, max_w, extra=""):
    (tmp_path / f"{name}_steps.py").write_text(STEPS.format(slow=slow))
    return write_job(
        tmp_path / f"{name}.toml",
        f'''
        [job]
        name = "{name}"

        [device]
        plugin = "toy"
        max_power_w = {max_w}
        min_power_w = 100

        [profiler]
        plugin = "power-sweep"
        step = "{name}_steps.py:make_step"
        batch_sizes = [64, 16, 32]
        limit_step_w = 50
        warmup_steps = 2
        profile_steps = 4
        save_to = "profiles/{name}.json"
        {extra}
        ''',
    )


def test_sweep_writes_the_published_format(toy_plugin, tmp_path):
    reg = _registry(toy_plugin)
    job = _sweep_job(tmp_path, "fast", 1.0, 300)
    result = run_cli(reg, "run", str(job), "--output", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "power sweep" in result.output
    data = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert list(data) == ["16", "32", "64"]
    assert [r["power_limit"] for r in data["16"]] == [300, 250, 200, 150, 100]
    prof = Profile.load(tmp_path / "profiles" / "fast.json", profile_steps=4)
    for i, b in enumerate(prof.batch_sizes):
        for j, p in enumerate(prof.power_limits):
            t, e = _expected(b, p, 1.0, 4)
            assert prof.time[i, j] == pytest.approx(t, rel=1e-12)
            assert prof.energy[i, j] == pytest.approx(e, rel=1e-12)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["profiler"]["power_limits"] == [300, 250, 200, 150, 100]


def test_explicit_limits_and_an_unknown_device_name(toy_plugin, tmp_path):
    reg = _registry(toy_plugin)
    job = _sweep_job(tmp_path, "a", 1.0, 300, extra="power_limits = [120, 280]")
    assert run_cli(reg, "run", str(job)).exit_code == 0
    assert Profile.load(tmp_path / "profiles" / "a.json", 4).power_limits.tolist() == [280, 120]
    job = _sweep_job(tmp_path, "b", 1.0, 300, extra='devices = ["gpu7"]')
    result = run_cli(reg, "run", str(job))
    assert result.exit_code == 2
    assert "devices ['gpu7'] are not in the device group (it has toy0)" in " ".join(result.output.split())


def test_missing_step_file_is_bad_input(toy_plugin, tmp_path):
    reg = _registry(toy_plugin)
    job = _sweep_job(tmp_path, "c", 1.0, 300)
    (tmp_path / "c_steps.py").unlink()
    result = run_cli(reg, "run", str(job))
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert f"step file {tmp_path / 'c_steps.py'} not found @ $.profiler.step" in out


def test_profiles_from_the_sweep_drive_the_allocator(toy_plugin, tmp_path):
    reg = _registry(toy_plugin)
    for name, slow, max_w in (("big", 1.0, 300), ("small", 2.5, 200)):
        assert run_cli(reg, "run", str(_sweep_job(tmp_path, name, slow, max_w))).exit_code == 0
    job = write_job(
        tmp_path / "alloc.toml",
        """
        [allocation]
        plugin = "hetero"
        global_batch_size = 96
        batch_granularity = 8
        objective = "min-energy"
        max_slowdown = 1.0

        [[allocation.gpus]]
        name = "big"
        count = 1
        profile = "profiles/big.json"
        profile_steps = 4
        idle_power_w = 0

        [[allocation.gpus]]
        name = "small"
        count = 1
        profile = "profiles/small.json"
        profile_steps = 4
        idle_power_w = 0
        """,
    )
    result = run_cli(reg, "run", str(job), "--output", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "o" / "allocation.json").read_text())
    # big takes 1 ms/sample at 300 W; small 2.5 * sqrt(1.5) = 3.06 ms/sample at its 200 W maximum.
    # big's profile ends at 64, so the fastest split is 64 + 32 (small: 98 ms); at max_slowdown 1 that
    # step time is the bound. big then has slack: 150 W (90.5 ms) fits and costs less energy than
    # 300 W (energy per sample grows as sqrt(limit)); 100 W (110.9 ms) would be the straggler.
    big, small = data["gpus"]
    assert (big["local_batch"], small["local_batch"]) == (64, 32)
    assert big["power_limit"] == 150 and small["power_limit"] == 200
    assert data["iteration_time_s"] == pytest.approx(32 * 0.001 * 1.5**0.5 * 2.5)


def test_thermally_stable_sweep_gives_the_same_profile_where_temperature_does_not_matter(toy_plugin, tmp_path):
    # issue 37 item 3: the toy device's power and time do not depend on temperature, so the trials in their
    # balanced order, each after its cooldown and warm-up, give the plain sweep's profile figure for figure
    reg = _registry(toy_plugin)
    job = _sweep_job(tmp_path, "stable", 1.0, 300, extra="thermally_stable = true\ntrials = 2\nseed = 5")
    result = run_cli(reg, "run", str(job), "--output", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    prof = Profile.load(tmp_path / "profiles" / "stable.json", profile_steps=4)
    assert prof.power_limits.tolist() == [300, 250, 200, 150, 100]
    for i, b in enumerate(prof.batch_sizes):
        for j, p in enumerate(prof.power_limits):
            t, e = _expected(b, p, 1.0, 4)
            assert prof.time[i, j] == pytest.approx(t, rel=1e-12)
            assert prof.energy[i, j] == pytest.approx(e, rel=1e-12)
    bad = _sweep_job(tmp_path, "bad", 1.0, 300, extra="thermally_stable = true\ntrials = 0")
    result = run_cli(reg, "run", str(bad))
    assert result.exit_code == 2 and "trials" in result.output
