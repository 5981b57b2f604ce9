"""What one request can make the plan server spend: the cases of issue #26, each in seconds.

An 8 x 512 job and a profile whose times span 1e-9 s to 60 s are refused before
any planning (422 naming the limit); a job past the CPU or memory budget of its
planning process gets 422 naming the budget; planning ends when its job is
deleted or its client leaves (a real uvicorn server); at most ``max_planning``
jobs plan at once (429); 256 jobs cannot all be held (429 naming the limit);
after planning, the planning process is gone and the job keeps one plan.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from perseus_fakes import free_port  # noqa: E402

from zeus_plugins_perseus.profile import read_profile  # noqa: E402
from zeus_plugins_perseus.server.app import create_app  # noqa: E402
from zeus_plugins_perseus.server.jobs import Conflict, JobManager, PlannerDefaults, ServerLimits  # noqa: E402

fastapi_testclient = pytest.importorskip("fastapi.testclient")

BLOCKING = 83.64


def server(gpt3_a100, **limits):
    manager = JobManager(PlannerDefaults(profile=read_profile(gpt3_a100), blocking_power_w=BLOCKING), limits=ServerLimits(**limits))
    return manager, fastapi_testclient.TestClient(create_app(manager), base_url="http://testserver")


def job(http, stages=8, microbatches=12, **extra):
    r = http.post("/jobs", json={"pp_degree": stages, "world_size": stages, "microbatches": microbatches, "max_slowdown": 1.0, **extra})
    assert r.status_code == 200, r.text
    job_id = r.json()["job_id"]
    assert http.post(f"/jobs/{job_id}/ranks", json={"rank": 0, "pp_rank": 0}).status_code == 200
    return job_id


def test_an_8_x_512_job_is_refused_naming_the_instruction_limit(gpt3_a100):
    manager, http = server(gpt3_a100)
    r = http.post("/jobs", json={"pp_degree": 8, "world_size": 8, "microbatches": 512})
    assert r.status_code == 422 and "8192 instructions" in r.text and "limit of 2048" in r.text
    assert len(manager) == 0


def test_a_profile_spanning_1e_9_to_60_s_is_refused_before_planning(gpt3_a100):
    manager, http = server(gpt3_a100)
    job_id = job(http)
    for stage in range(8):
        rank = stage
        if stage:
            http.post(f"/jobs/{job_id}/ranks", json={"rank": rank, "pp_rank": stage})
        rows = [
            {"instruction": inst, "frequency": f, "time": t, "energy": 1.0}
            for inst in ("forward", "backward")
            for f, t in ((1410, 1e-9), (1200, 0.01), (900, 60.0))
        ]
        assert http.post(f"/jobs/{job_id}/profile", json={"rank": rank, "rows": rows}).status_code == 200
    started = time.monotonic()
    r = http.get(f"/jobs/{job_id}/schedule", params={"rank": 0})
    assert r.status_code == 422 and "max_units_per_instruction" in r.text and "60 s" in r.text
    # refused at once (planning 1e-9..60 s units would take hours; 20 s: a loaded machine's slowest answer)
    assert time.monotonic() - started < 20 and not manager.status(job_id)["planning"]
    # within the units per instruction, the frontier's size is the next limit
    _, small = server(gpt3_a100, max_frontier_cells=100_000)
    r = small.get(f"/jobs/{job(small)}/schedule", params={"rank": 0})
    assert r.status_code == 422 and "max_frontier_cells" in r.text


def test_a_job_past_the_cpu_budget_is_ended_with_422(gpt3_a100):
    manager, http = server(gpt3_a100, plan_cpu_s=1)
    job_id = job(http, microbatches=48)
    started = time.monotonic()
    r = http.get(f"/jobs/{job_id}/schedule", params={"rank": 0})
    assert r.status_code == 422 and "1 CPU-seconds per job (plan_cpu_s)" in r.text
    assert time.monotonic() - started < 20
    st = manager.status(job_id)
    assert not st["planning"] and not st["planned"]


def test_a_job_past_the_memory_budget_is_ended_with_422(gpt3_a100):
    manager, http = server(gpt3_a100, plan_memory_bytes=320 << 20, plan_cpu_s=30)
    job_id = job(http, microbatches=32, unit_time_s=0.0001)  # within every size limit; ~450 MB to plan
    r = http.get(f"/jobs/{job_id}/schedule", params={"rank": 0})
    assert r.status_code == 422 and "320 MiB per job (plan_memory_bytes)" in r.text
    assert not manager.status(job_id)["planning"]


def test_planning_ends_when_its_job_is_deleted_and_plans_at_once_are_bounded(gpt3_a100):
    manager, http = server(gpt3_a100, max_planning=1)
    slow, other = job(http, microbatches=64), job(http, microbatches=4)
    outcome = {}

    def ask():
        try:
            outcome["answer"] = manager.schedule(slow, 0)
        except Conflict as e:
            outcome["error"] = str(e)

    asking = threading.Thread(target=ask)
    asking.start()
    deadline = time.monotonic() + 10
    while manager.job(slow).planning is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    planning = manager.job(slow).planning
    r = http.get(f"/jobs/{other}/schedule", params={"rank": 0})
    assert r.status_code == 429 and "(max_planning)" in r.text
    assert http.delete(f"/jobs/{slow}").status_code == 200
    asking.join(60)
    assert "cancelled" in outcome["error"] and planning.exit_status is not None  # the process is gone
    assert http.get(f"/jobs/{other}/schedule", params={"rank": 0}).status_code == 200  # the slot is free again


def test_after_planning_the_process_is_gone_and_the_job_keeps_one_plan(gpt3_a100):
    manager, http = server(gpt3_a100, inline_frontier_cells=0)  # even a small job in a process of its own
    job_id = job(http, microbatches=4)
    seen = []
    original = manager._finish_planning

    def finish(job, planning, outcome):
        original(job, planning, outcome)
        seen.append(planning)

    manager._finish_planning = finish
    assert http.get(f"/jobs/{job_id}/schedule", params={"rank": 0}).status_code == 200
    assert seen and seen[0].exit_status is not None
    kept = manager.job(job_id).plan
    assert set(kept) >= {"stages", "plan", "plans"} and "frequencies" not in kept  # one plan, not the frontier
    # a job this small is planned in the server's process by default: the same plan
    _, inline = server(gpt3_a100)
    again = job(inline, microbatches=4)
    assert (
        inline.get(f"/jobs/{again}/schedule", params={"rank": 0}).json()["schedule"]
        == http.get(f"/jobs/{job_id}/schedule", params={"rank": 0}).json()["schedule"]
    )


def test_256_jobs_are_not_all_held(gpt3_a100):
    manager, http = server(gpt3_a100, max_total_profile_rows=200)
    answers = [http.post("/jobs", json={"pp_degree": 2, "world_size": 2, "microbatches": 4}) for _ in range(256)]
    codes = [r.status_code for r in answers]
    assert codes.count(200) == 64 and codes.count(429) == 192 and len(manager) == 64
    assert "its limit (max_jobs)" in answers[-1].text
    # uploads over all jobs are bounded too
    rows = [{"instruction": i, "frequency": 1410 - 15 * k, "time": 0.1, "energy": 1.0} for i in ("forward", "backward") for k in range(30)]
    refused = None
    for r in answers[:64]:
        job_id = r.json()["job_id"]
        http.post(f"/jobs/{job_id}/ranks", json={"rank": 0, "pp_rank": 0})
        reply = http.post(f"/jobs/{job_id}/profile", json={"rank": 0, "rows": rows})
        if reply.status_code != 200:
            refused = reply
            break
    assert refused is not None and refused.status_code == 429 and "(max_total_profile_rows)" in refused.text


def test_planning_ends_when_the_client_leaves(tmp_path, gpt3_a100):
    """A real server: the client gives up after half a second; the job's planning process ends soon after."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zeus_core.cli",
            "perseus",
            "serve",
            "--port",
            str(port),
            "--profile",
            str(gpt3_a100),
            "--blocking-power-w",
            str(BLOCKING),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        http = httpx.Client(base_url=url, timeout=5)
        deadline = time.monotonic() + 30
        while True:
            try:
                http.get("/health")
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        job_id = job(http, microbatches=64)
        with pytest.raises(httpx.ReadTimeout):
            http.get(f"/jobs/{job_id}/schedule", params={"rank": 0}, timeout=0.5)
        deadline = time.monotonic() + 30  # a loaded machine's margin: planning on to the end would leave it planned
        while http.get(f"/jobs/{job_id}").json()["planning"]:
            assert time.monotonic() < deadline, "planning went on after its client left"
            time.sleep(0.1)
        st = http.get(f"/jobs/{job_id}").json()
        assert not st["planned"]
        workers = [p for p in os.listdir("/proc") if p.isdigit() and _parent(p) == proc.pid]
        assert workers == [], "a planning process is left"
        http.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert "Traceback" not in out, out


def _parent(pid: str) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
