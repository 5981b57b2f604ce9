"""`zeus run` on [allocation] jobs: the published contract, the baselines, and bad input with exit status 2."""

import json

import pytest
from zeus_test_helpers import run_cli, write_job

from zeus_core.engine import registry as zreg
from zeus_plugins_hetero import plugin as hetero_plugin
from zeus_plugins_hetero.model import GpuType, Problem
from zeus_plugins_hetero.profile import Profile
from zeus_plugins_hetero.solver import solve

CONTRACT_GPU_KEYS = {"name", "count", "local_batch", "power_limit"}


@pytest.fixture(scope="module")
def reg():
    """Only this plugin, so that another distribution's state cannot break these tests."""
    return zreg.load(entry_points=False, extra_plugins=[("hetero", hetero_plugin)])


def test_registered_through_the_entry_point():
    full = zreg.load()
    assert {"hetero", "even"} <= set(full.names("allocator"))
    assert full.get("allocator", "hetero").distribution == "zeus-plugins-hetero"
    assert full.get("profiler", "power-sweep").distribution == "zeus-plugins-hetero"


@pytest.mark.parametrize("example, workload, steps", [("cifar100_a10_t4", "cifar", 10), ("imagenet_a10_t4", "imagenet", 40)])
def test_example_jobs_write_the_contract(reg, repo_root, hetero_aws, tmp_path, example, workload, steps):
    job = repo_root / "examples" / "hetero" / example / "job.toml"
    result = run_cli(reg, "run", str(job), "--output", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    for label in ("optimal *", "even,", "heuristic", "step ms", "ratio"):  # rich may wrap longer cells
        assert label in result.output
    data = json.loads((tmp_path / "out" / "allocation.json").read_text())
    assert {"gpus", "iteration_time_s", "iteration_energy_j", "cost"} <= set(data)
    assert [g["name"] for g in data["gpus"]] == ["A10", "T4"]
    for g in data["gpus"]:
        assert CONTRACT_GPU_KEYS <= set(g) and g["count"] == 1
    assert sum(g["count"] * g["local_batch"] for g in data["gpus"]) == data["global_batch_size"]
    # The file agrees with the solver run directly on the same inputs.
    problem = Problem(
        (
            GpuType("A10", 1, Profile.load(hetero_aws / f"{workload}_a10.json", steps), 20.0),
            GpuType("T4", 1, Profile.load(hetero_aws / f"{workload}_t4.json", steps), 10.0),
        ),
        global_batch=data["global_batch_size"],
        granularity=8,
        allreduce_time_s=data["allreduce_time_s"],
        objective=data["objective"],
        eta=0.5,
        max_slowdown=1.1,
    )
    best = solve(problem)
    assert data["cost"] == pytest.approx(best.cost)
    assert data["iteration_energy_j"] == pytest.approx(best.iteration_energy_j)
    assert set(data["baselines"]) == {"even split, max limits", "even split, best limits", "strongest at lowest limit"}
    assert [r["gpu"] for r in data["ranks"]] == ["A10", "T4"]


def _gpu(name, count, profile, idle_power_w, profile_steps=10):
    """One [[allocation.gpus]] table."""
    return f'''
        [[allocation.gpus]]
        name = "{name}"
        count = {count}
        profile = "{profile}"
        profile_steps = {profile_steps}
        idle_power_w = {idle_power_w}
        '''


def _job(tmp_path, hetero_aws, allocation: str, gpus: str | None = None, plugin="hetero"):
    if gpus is None:
        gpus = _gpu("A10", 2, hetero_aws / "cifar_a10.json", 20) + _gpu("T4", 2, hetero_aws / "cifar_t4.json", 10)
    return write_job(
        tmp_path / "job.toml",
        f'''
        [job]
        name = "h"
        eta_knob = 0.3

        [allocation]
        plugin = "{plugin}"
        {allocation}
        {gpus}
        ''',
    )


def test_job_eta_is_the_default_and_even_plugin_chooses_the_even_split(reg, tmp_path, hetero_aws):
    job = _job(tmp_path, hetero_aws, "global_batch_size = 2048\nbatch_granularity = 8", plugin="even")
    result = run_cli(reg, "run", str(job), "--output", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "o" / "allocation.json").read_text())
    assert data["eta_knob"] == 0.3
    assert [g["local_batch"] for g in data["gpus"]] == [512, 512]
    assert data["method"] == "even split, best limits"
    assert data["baselines"]["optimal"]["cost"] <= data["cost"]
    assert len(data["ranks"]) == 4


def test_profile_relative_to_the_job_folder(reg, tmp_path, hetero_aws):
    (tmp_path / "profiles").mkdir()
    for name in ("cifar_a10.json", "cifar_t4.json"):
        (tmp_path / "profiles" / name).write_text((hetero_aws / name).read_text())
    gpus = _gpu("A10", 1, "profiles/cifar_a10.json", 5) + _gpu("T4", 1, "profiles/cifar_t4.json", 5)
    job = _job(tmp_path, hetero_aws, "global_batch_size = 1024\nbatch_granularity = 8", gpus=gpus)
    result = run_cli(reg, "run", str(job))
    assert result.exit_code == 0, result.output


def test_option_errors_name_the_field(reg, tmp_path, hetero_aws):
    gpus = """
        [[allocation.gpus]]
        name = "A10"
        count = 0
        profile = "a.json"
        idle_power_w = -1
        """
    job = _job(tmp_path, hetero_aws, 'global_batch_size = 64\nobjective = "fast"\nmax_slowdown = 0.5', gpus=gpus)
    result = run_cli(reg, "validate", str(job))
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "count must be at least 1, got 0 @ $.allocation.gpus[0].count" in out
    assert "required key 'profile_steps' is missing @ $.allocation.gpus[0].profile_steps" in out
    assert "idle_power_w must be between 0.0 and 10000.0 inclusive" in out
    assert "objective must be one of 'zeus-cost', 'min-energy'; got 'fast' @ $.allocation.objective" in out
    assert "max_slowdown must be at least 1 (1.1 allows 10% slower steps), got 0.5" in out


def test_infeasible_job_exits_2_with_the_reason(reg, tmp_path, hetero_aws):
    job = _job(tmp_path, hetero_aws, "global_batch_size = 8200\nbatch_granularity = 8")
    result = run_cli(reg, "run", str(job), "--output", str(tmp_path / "o"))
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "[allocation] plugin 'hetero': no allocation reaches global_batch_size 8200" in out
    assert "between 128 and 4096; A10 x2: local batch 32..1024" in out
    assert not (tmp_path / "o" / "allocation.json").exists()


def test_nan_profile_exits_2_naming_file_and_key(reg, tmp_path, hetero_aws):
    bad = json.loads((hetero_aws / "cifar_t4.json").read_text())
    bad["128"][2]["time"] = float("nan")
    (tmp_path / "t4.json").write_text(json.dumps(bad))
    gpus = _gpu("T4", 1, "t4.json", 10)
    job = _job(tmp_path, hetero_aws, "global_batch_size = 512\nbatch_granularity = 8", gpus=gpus)
    result = run_cli(reg, "run", str(job))
    assert result.exit_code == 2
    out = "".join(result.output.split())  # rich wraps long lines
    # found by validation, before anything runs: the file, the key, and the option that names it
    assert "".join(f'{tmp_path / "t4.json"}:$["128"][2].time:isnan'.split()) in out
    assert "@$.allocation.gpus[0].profile" in out
