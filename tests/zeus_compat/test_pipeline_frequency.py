"""``zeus.optimizer.pipeline_frequency`` driven with upstream's call sequence on the simulated NVIDIA driver.

The plan server is ``zeus perseus serve`` on loopback; the GPU's locked clocks are read from the
simulated driver's state at every instruction, so "the clocks follow the plan" is what the driver saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")

REPO = Path(__file__).resolve().parents[2]
CLOCKS = [1410, 1200, 1005, 810]
BASE_S = {"forward": 0.004, "backward": 0.008}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def plan_server(tmp_path_factory):
    """``zeus perseus serve`` with a one-stage profile of its own (what ``profile=False`` plans on)."""
    import httpx

    tmp = tmp_path_factory.mktemp("plan-server")
    profile = tmp / "profile.csv"
    rows = ["stage,instruction,frequency,time,energy"]
    for mhz in CLOCKS:
        slow = (CLOCKS[0] / mhz) ** 0.5
        rows += [
            f"0,forward,{mhz},{0.004 * slow},{0.004 * slow * 300 * mhz / CLOCKS[0]}",
            f"0,backward,{mhz},{0.008 * slow},{0.008 * slow * 300 * mhz / CLOCKS[0]}",
        ]
    profile.write_text("\n".join(rows) + "\n")
    port = _free_port()
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
            str(profile),
            "--blocking-power-w",
            "60",
            "--unit-time-s",
            "0.0005",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 60
    while True:
        assert server.poll() is None, server.communicate()[0]
        try:
            httpx.get(url + "/health", timeout=2)
            break
        except httpx.HTTPError:
            assert time.monotonic() < end, "the plan server did not start"
            time.sleep(0.1)
    yield url
    server.terminate()
    out, _ = server.communicate(timeout=30)
    assert "Traceback" not in out, out


@pytest.fixture
def gpu(driver):
    """One simulated GPU with four SM clocks; ``gpu.clock()`` is its locked SM clock (None: not locked)."""
    from zeus_plugins_nvml import fake_pynvml

    driver(gpus=1, graphics_clocks=CLOCKS)
    path = os.environ["ZEUS_FAKE_NVML"]

    class Gpu:
        @staticmethod
        def clock():
            locked = fake_pynvml.read_state(path)["gpus"][0]["locked_clocks"]
            return locked[1] if locked else None

        @staticmethod
        def memory_clock():
            locked = fake_pynvml.read_state(path)["gpus"][0]["locked_mem_clocks"]
            return locked[1] if locked else None

    return Gpu


@pytest.fixture
def one_rank(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def make_optimizer(url, **kwargs):
    from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer

    return PipelineFrequencyOptimizer(
        rank=0,
        dp_rank=0,
        pp_rank=0,
        tp_rank=0,
        device_id=0,
        dp_degree=1,
        pp_degree=1,
        tp_degree=1,
        world_size=1,
        server_url=url,
        job_metadata="test",
        **kwargs,
    )


def train_step(opt, gpu, microbatches=2, seen=None):
    """One 1F1B iteration of a one-stage pipeline, with upstream's calls around it; the "kernel"
    takes longer at a lower locked clock. Returns what the driver saw: [(instruction, SM clock)]."""
    seen = [] if seen is None else seen
    opt.on_step_begin()
    for _ in range(microbatches):
        for name in ("forward", "backward"):
            opt.on_instruction_begin(name)
            mhz = gpu.clock()
            seen.append((name, mhz))
            time.sleep(BASE_S[name] * (CLOCKS[0] / (mhz or CLOCKS[0])) ** 0.5)
            opt.on_instruction_end(name)
    opt.on_step_end()
    return seen


def test_profiles_every_clock_then_runs_the_servers_plan(plan_server, gpu, one_rank):
    from zeus_plugins_perseus.client import PlanClient

    opt = make_optimizer(plan_server, warmup_steps=1, profile_steps=1, max_slowdown=1.1)
    try:
        assert gpu.clock() == CLOCKS[0]  # as upstream's controller, it starts at the highest clock
        profiling = []
        while not opt.planned:
            profiling.append(train_step(opt, gpu))
            assert len(profiling) <= len(CLOCKS) * 2
        # each clock, highest first, for one warm-up and one measured iteration
        assert [{mhz for _, mhz in step} for step in profiling] == [{c} for c in CLOCKS for _ in range(2)]

        # the job the ranks registered: microbatches and schedule learned from the engine's order
        with PlanClient(plan_server) as client:
            status = client.status(opt.job_id)
            uploaded = client.profile_csv(opt.job_id).strip().splitlines()
        assert status["spec"]["microbatches"] == 2 and status["spec"]["schedule"] == "1f1b"
        assert status["spec"]["metadata"] == {"job_metadata": "test"} and status["ranks"] == [0]
        assert len(uploaded) == 1 + 2 * len(CLOCKS)  # forward and backward at every clock
        assert opt.schedule_info["profile"] == "uploaded"
        assert [i for i, _ in opt.freq_schedule] == ["forward", "backward"] * 2
        assert {f for _, f in opt.freq_schedule} <= set(CLOCKS)

        for _ in range(3):  # every instruction runs at the clock the server planned for it
            assert train_step(opt, gpu) == opt.freq_schedule
            assert gpu.memory_clock() is not None  # the nvml device holds the memory clock at its maximum
    finally:
        opt.close()
    assert gpu.clock() is None and gpu.memory_clock() is None  # reset when the controller ends


def test_without_profiling_the_servers_own_profile_is_planned(plan_server, gpu, one_rank):
    from zeus_plugins_perseus.client import PlanClient

    opt = make_optimizer(plan_server, profile=False, blocking_power_w=50.0, deadline_s=1.0)
    try:
        first = train_step(opt, gpu)  # one iteration at the highest clock tells the order
        assert first == [(i, CLOCKS[0]) for i in ("forward", "backward") * 2]
        assert opt.planned and opt.schedule_info["profile"] == "server"
        with PlanClient(plan_server) as client:
            spec = client.status(opt.job_id)["spec"]
        assert spec["blocking_power_w"] == 50.0 and spec["deadline_s"] == 1.0
        assert {f for _, f in opt.freq_schedule} == {min(CLOCKS)}  # a loose deadline: the least energy
        assert train_step(opt, gpu) == opt.freq_schedule
    finally:
        opt.close()


def test_the_engine_is_held_to_the_schedule_as_upstream(plan_server, gpu, one_rank):
    opt = make_optimizer(plan_server, profile=False)
    try:
        train_step(opt, gpu)
        opt.on_step_begin()
        with pytest.raises(RuntimeError, match="The next expected instruction is not backward"):
            opt.on_instruction_begin("backward")
        opt.freq_schedule_iter = iter(opt.freq_schedule)
        opt.on_instruction_begin("forward")
        opt.on_instruction_end("forward")
        with pytest.raises(RuntimeError, match="more frequencies than expected"):
            opt.on_step_end()  # the iteration ended before the schedule did
        opt.freq_schedule_iter = iter(opt.freq_schedule)  # upstream raises before it starts the schedule again
        for name, _ in opt.freq_schedule:
            opt.on_instruction_begin(name)
        with pytest.raises(RuntimeError, match="fewer frequencies than expected"):
            opt.on_instruction_begin("forward")  # one more than the schedule
    finally:
        opt.close()


def test_an_order_no_schedule_has_is_refused_naming_the_fix(plan_server, gpu, one_rank):
    opt = make_optimizer(plan_server, profile=False)
    try:
        opt.on_step_begin()
        for name in ("backward", "forward"):
            opt.on_instruction_begin(name)
            opt.on_instruction_end(name)
        with pytest.raises(RuntimeError, match="follow none of the schedules.*pass schedule="):
            opt.on_step_end()
    finally:
        opt.close()


def test_upstreams_preconditions(plan_server, gpu):
    import pydantic

    with pytest.raises(RuntimeError, match="after `init_process_group`"):
        make_optimizer(plan_server)
    import torch.distributed as dist
    from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer

    dist.init_process_group("gloo", init_method=f"file://{os.environ['ZEUS_STATE_DIR']}-store", rank=0, world_size=1)
    try:
        with pytest.raises(pydantic.ValidationError, match="world_size"):
            PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 1, 1, plan_server)  # pp 2 x dp 1 x tp 1 != 1
    finally:
        dist.destroy_process_group()


def test_frequency_controller_locks_and_resets(gpu):
    from zeus.optimizer.pipeline_frequency.frequency_controller import FrequencyController

    ctl = FrequencyController(device_id=0)
    try:
        assert ctl.supported_frequencies == CLOCKS and gpu.clock() == CLOCKS[0]
        ctl.set_frequency(1005)
        assert gpu.clock() == 1005
        ctl.set_frequency(0)  # zero: nothing, as upstream
        assert gpu.clock() == 1005
    finally:
        ctl.end()
    assert gpu.clock() is None and gpu.memory_clock() is None


def test_common_models_are_upstreams(tmp_path, monkeypatch):
    import pydantic
    from zeus.optimizer.pipeline_frequency import common as c

    assert (c.REGISTER_JOB_URL, c.REGISTER_RANK_URL, c.GET_FREQUENCY_SCHEDULE_URL, c.REPORT_PROFILING_RESULT_URL) == (
        "/register_job",
        "/register_rank/{job_id}",
        "/schedule/{job_id}",
        "/result/{job_id}",
    )
    job = c.JobInfo(pp_degree=4, dp_degree=2, tp_degree=1, world_size=8, job_metadata="gpt3")
    job.set_job_id("PointSolution")
    assert job.job_id.endswith("+dp2+pp4+tp1+PointSolution+gpt3")
    with pytest.raises(pydantic.ValidationError):
        c.JobInfo(pp_degree=4, dp_degree=2, tp_degree=1, world_size=7)
    with pytest.raises(pydantic.ValidationError):
        c.JobInfo(job_id="mine", pp_degree=1, dp_degree=1, tp_degree=1, world_size=1)
    with pytest.warns(DeprecationWarning):  # pydantic v1's calls, as upstream's code makes them
        sched = c.FrequencySchedule.parse_raw('{"rank": 1, "frequencies": [["forward", 1410], ["backward", 810]]}')
    assert sched.frequencies == [("forward", 1410), ("backward", 810)]
    assert c.RankInfo(rank=0, dp_rank=0, pp_rank=0, tp_rank=0, available_frequencies=[1410]).model_dump()["rank"] == 0
    result = c.ProfilingResult(rank=0, iter_time=[1.0], iter_energy=[2.0])
    assert result.time_breakdown == {} and result.energy_breakdown == {}

    offline = c.InstructionProfilingResult(
        [
            c.OfflineProfilingResult(
                rank=1,
                dp_rank=0,
                pp_rank=1,
                tp_rank=0,
                forward_time={1410: 0.1},
                forward_energy={1410: 20.0},
                backward_time={1410: 0.2},
                backward_energy={1410: 40.0},
            )
        ]
    )
    assert offline.__root__[0].rank == 1
    offline.to_csv(str(tmp_path / "p.csv"))
    assert (tmp_path / "p.csv").read_text().splitlines() == [
        "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy",
        "1,0,1,0,1,forward,1410,0.1,20.0",
        "1,0,1,0,1,backward,1410,0.2,40.0",
    ]
    with pytest.raises(ValueError, match="does not end with '.csv'"):
        offline.to_csv(str(tmp_path / "p.txt"))

    monkeypatch.setenv("ZEUS_PFO_LOG_LEVEL", "info")
    monkeypatch.setenv("ZEUS_PFO_SCHEDULER_ARGS", json.dumps({"solution_path": "x.py"}))
    settings = c.PFOServerSettings()
    assert settings.log_level == "INFO" and settings.scheduler_args == {"solution_path": "x.py"}

    asyncio.run(c.save_sched([sched], str(tmp_path / "d"), 3))
    asyncio.run(c.save_prof([result], str(tmp_path / "d"), 3))
    asyncio.run(c.save_ranks([c.RankInfo(rank=0, dp_rank=0, pp_rank=0, tp_rank=0, available_frequencies=[1])], str(tmp_path / "d")))
    assert c.load_sched(str(tmp_path / "d"), 3) == [sched]
    assert c.load_prof(str(tmp_path / "d"), 3) == [result]
    assert c.load_ranks(str(tmp_path / "d"))[0].available_frequencies == [1]


def test_megatron_style_loop_of_two_stages_and_two_replicas_follows_the_plan(tmp_path):
    """benchmarks/downstream_pipeline_frequency.py: four gloo ranks (2 stages x 2 data-parallel replicas),
    Megatron's 1F1B with the integration's monkey-patched forward_step / backward_step / train_step."""
    out = tmp_path / "result.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "downstream_pipeline_frequency.py"), "--dp", "2", "--steps", "2", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["reset"] == [True] * 4
    records = result["records"]
    assert len({rec["job_id"] for rec in records}) == 1  # one job, registered by rank 0, its id broadcast
    assert [(rec["pp_rank"], rec["dp_rank"]) for rec in records] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # Megatron's 1F1B on 2 stages x 4 microbatches, learned from the engine
    assert [i for i, _ in records[0]["schedule"]] == [
        "forward",
        "forward",
        "backward",
        "forward",
        "backward",
        "forward",
        "backward",
        "backward",
    ]
    assert [i for i, _ in records[2]["schedule"]] == ["forward", "backward"] * 4
    assert records[0]["schedule"] == records[1]["schedule"] and records[2]["schedule"] == records[3]["schedule"]
    for rec in records:
        assert rec["info"]["schedule_name"] == "1f1b" and rec["info"]["profile"] == "uploaded"
        assert rec["profiling_steps"] == 2 * len(CLOCKS)
        planned = [[tuple(x) for x in seen] for is_planned, seen in rec["steps"] if is_planned]
        assert planned == [[tuple(x) for x in rec["schedule"]]] * 2
    assert "every instruction at its planned clock" in done.stdout


def test_upstreams_launch_line_serves_the_perseus_planner(tmp_path, gpu, one_rank):
    """``uvicorn zeus.optimizer.pipeline_frequency.server.router:app``, configured by ``ZEUS_PFO_*``."""
    import httpx

    port = _free_port()
    env = dict(
        os.environ,
        ZEUS_PFO_SCHEDULER_ARGS=json.dumps({"blocking_power_w": 60, "unit_time_s": 0.0005}),
        ZEUS_PFO_DUMP_DIR=str(tmp_path / "dump"),
        ZEUS_PFO_LOG_LEVEL="warning",
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "zeus.optimizer.pipeline_frequency.server.router:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:
                httpx.get(url + "/health", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < end, "uvicorn did not start"
                time.sleep(0.1)
        opt = make_optimizer(url, warmup_steps=0, profile_steps=1)
        try:
            while not opt.planned:
                train_step(opt, gpu)
            assert opt.schedule_info["profile"] == "uploaded"
            assert train_step(opt, gpu) == opt.freq_schedule
        finally:
            opt.close()
        assert list((tmp_path / "dump").iterdir())  # dump_data: the job's folder
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    assert "Traceback" not in out, out


def test_router_settings_refuse_plan_files_and_answer_loopback_only_without_a_token():
    from fastapi.testclient import TestClient
    from zeus.optimizer.pipeline_frequency.common import PFOServerSettings
    from zeus.optimizer.pipeline_frequency.server.router import create_app_from_settings

    with pytest.raises(ValueError, match="does not evaluate plan files"):
        create_app_from_settings(PFOServerSettings(scheduler_args={"solution_path": "freqs_pipeline_00012.py"}))
    with pytest.raises(ValueError, match="unknown key"):
        create_app_from_settings(PFOServerSettings(scheduler_args={"blocking_power": 60}))
    app = create_app_from_settings(PFOServerSettings(dump_data=False))
    assert TestClient(app).get("/health").status_code == 403  # TestClient's address is not loopback
    assert TestClient(app, client=("127.0.0.1", 5000)).get("/health").status_code == 200
    token = "tok-pfo-router-0123456789"
    app = create_app_from_settings(PFOServerSettings(dump_data=False), token)
    assert TestClient(app).get("/health").status_code == 401
    assert TestClient(app, headers={"Authorization": f"Bearer {token}"}).get("/health").status_code == 200
