"""examples/perseus/online_profiler runs as written on a machine without a GPU (nvml on the simulated driver):
both stages profiled through `zeus run`, the CSVs checked, and the merged profile planned by plan.toml."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
from zeus_test_helpers import run_cli

from zeus_core.engine import registry as zreg
from zeus_core.journal import Journal, journal_path
from zeus_plugins_nvml import fake_pynvml

CLOCKS = [1410, 1200, 1005, 810, 600]  # the example sweeps down to min_frequency = 800


def read_rows(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        return next(r), list(r)


def test_online_profiler_example_profiles_both_stages_and_feeds_the_planner(repo_root, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    example = repo_root / "examples" / "perseus" / "online_profiler"
    driver = tmp_path / "driver.json"
    # the README's first step, as `python -m zeus_plugins_nvml.fake_pynvml PATH --privileged` runs it
    fake_pynvml.main([str(driver), "--privileged", "--graphics-clocks", ",".join(map(str, CLOCKS))])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ZEUS_FAKE_NVML", str(driver))

    # stage 0 in a fresh process, exactly as a user runs it
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", "run", str(example / "job.toml"), "--output", str(tmp_path / "s0")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    # stage 1 in-process (same CLI, cheaper)
    reg = zreg.load()
    r = run_cli(reg, "run", str(example / "job.toml"), "--set", "profiler.stage=1", "--output", str(tmp_path / "s1"))
    assert r.exit_code == 0, r.output
    assert "perseus-stage: stage 1" in r.output
    assert "measured on a SIMULATED GPU ($ZEUS_FAKE_NVML): the times are this machine's" in " ".join(r.output.split())

    merged = []
    for stage in (0, 1):
        header, rows = read_rows(tmp_path / f"s{stage}" / "profile.csv")
        # measured on the simulated driver: every row says so, after the planner's columns
        assert header == ["stage", "instruction", "frequency", "time", "energy", "simulated"]
        for inst in ("forward", "backward"):
            freqs = [int(f) for s, i, f, _, _, _ in rows if i == inst]
            assert freqs == [1410, 1200, 1005, 810]  # every supported clock down to min_frequency, highest first
        assert all(int(s) == stage and float(t) > 0 and float(e) > 0 and sim == "ZEUS_FAKE_NVML" for s, _, _, t, e, sim in rows)
        summary = json.loads((tmp_path / f"s{stage}" / "summary.json").read_text())
        assert summary["profiler"]["frequencies"] == [1410, 1200, 1005, 810]
        assert summary["profiler"]["simulated"] == ["ZEUS_FAKE_NVML"]
        merged += rows
    # the sweep left the simulated GPU as it found it, with nothing pending in the journal
    g = fake_pynvml.read_state(driver)["gpus"][0]
    assert g["locked_clocks"] is None and g["locked_mem_clocks"] is None
    with Journal(journal_path()) as j:
        assert j.entries() == []

    profile = tmp_path / "profile.csv"
    with profile.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(merged)
    r = run_cli(reg, "run", str(example / "plan.toml"), "--set", f"frequency_plan.profile={profile}", "--output", str(tmp_path / "plans"))
    assert r.exit_code == 0, r.output
    # the saving is the simulated GPU's, and the plan says so
    said = " ".join(r.output.split())
    assert (
        "energy against all max clocks (emulated on a profile measured on a SIMULATED GPU (ZEUS_FAKE_NVML): not a real GPU's saving)"
        in said
    )
    chosen = json.loads((tmp_path / "plans" / "summary.json").read_text())["frequency_plan"]["chosen"]
    assert chosen["profile_simulated"] == ["ZEUS_FAKE_NVML"]
    _, frontier = read_rows(tmp_path / "plans" / "frontier.csv")
    assert len(frontier) >= 1
    plan = json.loads((tmp_path / "plans" / "plans" / "00000.json").read_text())
    assert len(plan["stages"]) == 2
    for st in plan["stages"]:
        assert sorted(st["instructions"]) == ["backward"] * 4 + ["forward"] * 4  # 4 microbatches, as stage.py
        assert set(st["frequencies"]) <= {1410, 1200, 1005, 810}


def test_the_example_step_refuses_a_stage_the_pipeline_lacks(repo_root):
    pytest.importorskip("torch")
    from types import SimpleNamespace

    from zeus_core import load_callable

    make_step = load_callable("stage.py:make_step", repo_root / "examples" / "perseus" / "online_profiler")
    with pytest.raises(ValueError, match="this pipeline has stages 0..1; the profiler asked for stage 2"):
        make_step(SimpleNamespace(stage=2), None)
