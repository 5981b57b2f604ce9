"""Perseus on torch.distributed.pipelining: real gloo ranks, real PipelineStage / Schedule1F1B / ScheduleGPipe,
the nvml device on the simulated driver, plans from `zeus perseus serve` (uvicorn) and from plan files.

Two runs share their processes between phases (starting torch ranks is what costs):

* 2 ranks, Schedule1F1B, plan server: online profiling through the wrapper, then planned steps (the
  wrapper registers the job and shares its id), the last stage's loss raising in the last step;
* 4 ranks, ScheduleGPipe, plan files: a plan of the wrong order refused before the first step, then
  planned steps until rank 1 is SIGKILLed mid-backward and the others fail on gloo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from perseus_fakes import free_port, journal_keys, nvml_clocks, stage_rows  # noqa: E402

from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile  # noqa: E402
from zeus_plugins_perseus.runtime import load_stage_schedule  # noqa: E402

pytest.importorskip("torch.distributed.pipelining")

CLOCKS = [1410, 1200, 1000, 800]
MEM_MAX = 1215
BLOCKING = 60.0


def driver_for(nvml_driver, ranks):
    from zeus_plugins_nvml.fake_pynvml import FakeGpu

    return nvml_driver([FakeGpu(graphics_clocks=CLOCKS) for _ in range(ranks)])


def start_ranks(tmp_path, world, args, env=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    common = ["--world", str(world), "--store", str(tmp_path / "store"), "--out", str(tmp_path), *args]
    return [
        subprocess.Popen(
            [sys.executable, str(HERE / "pipelining_worker.py"), "--rank", str(r), *common],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]


def finish(procs, timeout=240):
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    return [(p.returncode, out) for p, out in zip(procs, outs)]


def record(tmp_path, rank):
    return json.loads((tmp_path / f"rank{rank}.json").read_text())


def steps_of(seen, per_step):
    return [seen[i : i + per_step] for i in range(0, len(seen), per_step)]


def plan_file(tmp_path, stages, mbs, schedule, name):
    rows = stage_rows((1.0, 0.6, 0.8, 0.5)[:stages])
    ps = plan_frontier(InstructionProfile.from_rows(rows), stages, mbs, schedule, 0.001, BLOCKING)
    path = ps.write_plan(len(ps) // 2, tmp_path / name)
    return path


def test_schedule_1f1b_two_ranks_plan_server_online_profile_and_a_failing_step(tmp_path, nvml_driver):
    from zeus_plugins_perseus.client import PlanClient

    mbs, steps, fail_at = 4, 3, 2
    profile = InstructionProfile.from_rows(stage_rows((1.0, 0.6)))
    ps = plan_frontier(profile, 2, mbs, "1f1b", 0.001, BLOCKING)
    deadline = float(ps.emulated_time_s[len(ps) // 2])
    ps = plan_frontier(profile, 2, mbs, "1f1b", 0.001, BLOCKING, deadline_s=deadline)  # as the server plans it
    want = [load_stage_schedule(ps.plan_json(ps.choose(deadline_s=deadline)), r) for r in range(2)]
    assert len({f for w in want for _, f in w}) > 1  # mixed clocks: a wrong stage, order or step shows
    driver = driver_for(nvml_driver, 2)
    port, token = free_port(), "tok-pipelining-0123456789"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zeus_core.cli",
            "perseus",
            "serve",
            "--port",
            str(port),
            "--profile",
            str(profile.to_csv(tmp_path / "profile.csv")),
            "--blocking-power-w",
            str(BLOCKING),
            "--log-level",
            "warning",
        ],
        env=dict(os.environ, ZEUS_PERSEUS_TOKEN=token),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        procs = start_ranks(
            tmp_path,
            2,
            [
                "--nvml",
                driver,
                "--schedule",
                "1f1b",
                "--microbatches",
                str(mbs),
                "--steps",
                str(steps),
                "--server",
                url,
                "--deadline",
                repr(deadline),
                "--profile-steps",
                str(len(CLOCKS)),
                "--fail-at",
                str(fail_at),
            ],
            env={"ZEUS_PERSEUS_TOKEN": token},
        )
        done = finish(procs)
        assert all(code == 0 for code, _ in done), "\n".join(f"--- rank {r}:\n{out}" for r, (_, out) in enumerate(done))
        got = [record(tmp_path, r) for r in range(2)]
        with PlanClient(url, token=token, timeout_s=10) as c:
            status = c.status(got[0]["job_id"])
    finally:
        server.terminate()
        server_out, _ = server.communicate(timeout=20)
    assert "Traceback" not in server_out, server_out
    assert got[0]["job_id"] == got[1]["job_id"] and status["ranks"] == [0, 1]  # one job, registered by rank 0
    assert status["spec"]["schedule"] == "1f1b" and status["spec"]["microbatches"] == mbs
    for r in range(2):
        g = got[r]
        assert [tuple(x) for x in g["planned"]] == want[r]  # the server's plan for this stage, chosen by deadline
        per_step = 2 * mbs
        seen = steps_of(g["seen"], per_step)
        # every forward and backward of every completed step ran at its planned SM clock, memory clock at max
        expect = [[i, m, f, MEM_MAX] for (i, f), m in zip(want[r], g["microbatches"])]
        assert seen[:fail_at] == [expect] * fail_at
        assert seen[fail_at] == expect[: len(seen[fail_at])]  # the failing step, as far as it got
        assert "injected failure" in g["error"] if r == 1 else g["error"]  # rank 0 fails on gloo
        assert g["after_error"] == [None, None] and g["after_close"] == [None, None]
        # online profiling through the same wrapper: one step per clock, each instruction measured at each
        assert sorted({(i, f) for i, f, _, _ in g["profiled"]}) == sorted({(i, f) for i in ("forward", "backward") for f in CLOCKS})
        assert [tuple(x[2:]) for x in g["profile_seen"]] == [(f, MEM_MAX) for f in CLOCKS for _ in range(per_step)]
        assert g["uploaded"]["stage"] == r
    assert status["profile_complete"] and status["uploaded_rows"] == 2 * 2 * len(CLOCKS)
    assert [nvml_clocks(driver, i) for i in range(2)] == [(None, None)] * 2
    assert journal_keys() == []


def test_schedule_gpipe_four_ranks_plan_file_mismatch_refused_and_a_sigkilled_rank(tmp_path, nvml_driver):
    mbs, kill_at = 3, 1
    right = plan_file(tmp_path, 4, mbs, "gpipe-fifo", "right.json")
    wrong = plan_file(tmp_path, 4, mbs, "gpipe", "wrong.json")  # backwards last microbatch first
    driver = driver_for(nvml_driver, 4)
    procs = start_ranks(
        tmp_path,
        4,
        [
            "--nvml",
            driver,
            "--schedule",
            "gpipe",
            "--microbatches",
            str(mbs),
            "--steps",
            "3",
            "--plan",
            str(right),
            "--wrong-plan",
            str(wrong),
            "--kill-at",
            str(kill_at),
        ],
    )
    done = finish(procs)
    assert done[1][0] == -9, done[1][1]  # rank 1 SIGKILLed itself
    assert all(code == 0 for r, (code, _) in enumerate(done) if r != 1), "\n".join(o for _, o in done)
    assert not (tmp_path / "rank1.json").exists()
    # rank 1's controller saw its training process die and reset the clocks it held
    deadline = time.monotonic() + 20
    while nvml_clocks(driver, 1) != (None, None) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert nvml_clocks(driver, 1) == (None, None)
    for r in (0, 2, 3):
        g = record(tmp_path, r)
        # refused before the first step, naming the place and the planner schedule that fits
        assert "runs the backward of microbatch 0 there; plan with schedule = 'gpipe-fifo'" in g["mismatch"]
        assert f"stage {r}: instruction {mbs} of a step is the backward of microbatch {mbs - 1}" in g["mismatch"]
        assert g["after_mismatch"] == [None, None]  # nothing was locked for a refused plan
        want = load_stage_schedule(right, r)
        expect = [[i, m, f, MEM_MAX] for (i, f), m in zip(want, g["microbatches"])]
        assert [i for i, _, _, _ in expect] == ["forward"] * mbs + ["backward"] * mbs
        assert [m for _, m, _, _ in expect] == list(range(mbs)) * 2  # torch's order: backwards first microbatch first
        seen = steps_of(g["seen"], 2 * mbs)
        assert seen[:kill_at] == [expect] * kill_at
        assert all(s == expect[: len(s)] for s in seen[kill_at:])
        assert g["error"] and g["after_error"] == [None, None] and g["after_close"] == [None, None]
    assert [nvml_clocks(driver, i) for i in range(4)] == [(None, None)] * 4
    assert journal_keys() == []


def test_the_readme_example_runs_as_written_on_the_simulated_driver(repo_root, tmp_path, monkeypatch):
    """examples/perseus/torch_pipelining: online profile through the wrapper, zeus run plans it, train on the plan."""
    import csv

    from zeus_test_helpers import run_cli

    from zeus_core.engine import registry as zreg
    from zeus_plugins_nvml import fake_pynvml

    example = repo_root / "examples" / "perseus" / "torch_pipelining"
    driver = tmp_path / "driver.json"
    fake_pynvml.main([str(driver), "--gpus", "2", "--privileged", "--graphics-clocks", "1410,1200,1005,810"])
    monkeypatch.setenv("ZEUS_FAKE_NVML", str(driver))
    out = tmp_path / "out" / "torch-pipe"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(example / "train.py")]
    p = subprocess.run([*torchrun, "--profile", str(out / "profile.csv")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    with (out / "profile.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted({(int(r["stage"]), r["instruction"], int(r["frequency"])) for r in rows}) == sorted(
        (s, i, f) for s in (0, 1) for i in ("backward", "forward") for f in (1410, 1200, 1005, 810)
    )
    r = run_cli(
        zreg.load(),
        "run",
        str(example / "plan.toml"),
        "--set",
        f"frequency_plan.profile={out / 'profile.csv'}",
        "--output",
        str(out / "plans"),
    )
    assert r.exit_code == 0, r.output
    plan = out / "plans" / "chosen_plan.json"
    p = subprocess.run([*torchrun, "--plan", str(plan)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    for rank in (0, 1):
        clocks = sorted({f for _, f in load_stage_schedule(plan, rank)}, reverse=True)
        assert f"rank {rank}: 5 steps, 8 instructions each at {clocks} MHz as planned" in p.stdout
    assert [nvml_clocks(str(driver), i) for i in range(2)] == [(None, None)] * 2
    assert journal_keys() == []


def test_plans_for_another_pipeline_are_refused_before_anything_starts(tmp_path):
    """The checks a rank makes before its first step, on a real PipelineStage in a 1-rank gloo group."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    from zeus_plugins_perseus.pipelining import PlanMismatch, engine_order, perseus_pipeline

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        stage = PipelineStage(torch.nn.Linear(2, 2), stage_index=0, num_stages=1, device=torch.device("cpu"))
        gpipe = ScheduleGPipe(stage, n_microbatches=3)
        assert engine_order(gpipe) == [("forward", 0), ("forward", 1), ("forward", 2), ("backward", 0), ("backward", 1), ("backward", 2)]
        two = plan_file(tmp_path, 2, 3, "gpipe-fifo", "two.json")  # stage 0's order alone would match
        with pytest.raises(PlanMismatch, match="the plan is for 2 stages; this pipeline has 1"):
            perseus_pipeline(gpipe, two, device=dict)  # refused before the device factory is ever called
        one = plan_frontier(InstructionProfile.from_rows(stage_rows((1.0,))), 1, 4, "1f1b", 0.001, BLOCKING)
        path = one.write_plan(0, tmp_path / "one.json")
        with pytest.raises(PlanMismatch, match="has 8 instructions per step, ScheduleGPipe runs 6"):
            perseus_pipeline(gpipe, path, device=dict)
        with pytest.raises(ValueError, match="give a plan"):
            perseus_pipeline(gpipe)
        stages = [PipelineStage(torch.nn.Linear(2, 2), stage_index=i, num_stages=2, device=torch.device("cpu")) for i in range(2)]
        with pytest.raises(PlanMismatch, match="runs 2 stages on this rank"):
            perseus_pipeline(ScheduleInterleaved1F1B(stages, n_microbatches=2), path, device=dict)
        assert "forward_one_chunk" not in vars(stage) and "step" not in vars(gpipe)  # nothing left wrapped
        assert engine_order(Schedule1F1B(stage, n_microbatches=2)) == [("forward", 0), ("backward", 0), ("forward", 1), ("backward", 1)]
    finally:
        dist.destroy_process_group()
