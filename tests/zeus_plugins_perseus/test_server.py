"""The plan server: protocol, validation, profile uploads, bearer-token auth, and one real uvicorn run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from perseus_fakes import free_port, two_stage_rows  # noqa: E402

from zeus_plugins_perseus.client import PlanClient, PlanServerError, rank_schedule  # noqa: E402
from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile, read_profile  # noqa: E402
from zeus_plugins_perseus.runtime import load_stage_schedule  # noqa: E402
from zeus_plugins_perseus.server.jobs import JobManager, PlannerDefaults  # noqa: E402
from zeus_plugins_perseus.server.run import check_exposure, is_loopback, resolve_token  # noqa: E402

fastapi_testclient = pytest.importorskip("fastapi.testclient")
from zeus_plugins_perseus.server.app import create_app  # noqa: E402

BLOCKING = 60.0
MBS = 4


def profile():
    return InstructionProfile.from_rows(two_stage_rows())


def make_client(token=None, default_profile=True, client_token=None, dump_dir=None):
    defaults = PlannerDefaults(profile=profile() if default_profile else None, blocking_power_w=BLOCKING)
    app = create_app(JobManager(defaults, dump_dir), token)
    http = fastapi_testclient.TestClient(app, base_url="http://testserver")
    return PlanClient("http://testserver", token=client_token, http=http)


def test_ranks_get_their_stage_of_the_plan_chosen_by_deadline(tmp_path):
    c = make_client(dump_dir=tmp_path / "dump")
    ps = plan_frontier(profile(), 2, MBS, "1f1b", 0.001, BLOCKING)
    deadline = float(ps.emulated_time_s[len(ps) // 2])
    ps = plan_frontier(profile(), 2, MBS, "1f1b", 0.001, BLOCKING, deadline_s=deadline)  # as the server plans it
    want = ps.choose(deadline_s=deadline)
    job = c.register_job(pp_degree=2, microbatches=MBS, deadline_s=deadline, metadata={"model": "toy"})
    assert "pp2-dp1-tp1" in job
    for r in range(2):
        assert c.register_rank(job, rank=r, pp_rank=r, available_frequencies=[1410, 1200, 1000, 800])["registered"] == r + 1
    for r in range(2):
        info = c.schedule_info(job, r)
        assert info["plan"] == want and info["stage"] == r and info["meets_limit"] and info["profile"] == "server"
        assert info["emulated_time_s"] <= deadline
        assert c.schedule(job, r) == load_stage_schedule(ps.plan_json(want), r)
    st = c.status(job)
    assert st["ranks"] == [0, 1] and st["planned"] and st["spec"]["metadata"] == {"model": "toy"}
    dumped = tmp_path / "dump" / job
    assert load_stage_schedule(dumped / "plan.json", 1) == c.schedule(job, 1)
    assert (dumped / "job.json").is_file()


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"pp_degree": 2, "world_size": 3, "microbatches": 4}, 400, "world_size 3 must equal"),
        ({"pp_degree": 2, "world_size": 2, "microbatches": 0}, 422, "microbatches"),
        ({"pp_degree": 2, "world_size": 2, "microbatches": 4, "stages": 2}, 422, "stages"),  # misspelt field
        ({"pp_degree": 2, "world_size": 2, "microbatches": 4, "schedule": "zb"}, 422, "schedule"),
        ({"pp_degree": 2, "world_size": 2, "microbatches": 4, "deadline_s": 1, "max_slowdown": 1.1}, 400, "not both"),
        ({"pp_degree": 2, "world_size": 2, "microbatches": 4, "max_slowdown": 0.5}, 422, "max_slowdown"),
    ],
)
def test_bad_job_registrations_are_refused_with_the_reason(body, status, message):
    c = make_client()
    r = c._http.post("/jobs", json=body)
    assert r.status_code == status and message in r.text


def test_rank_and_schedule_errors():
    c = make_client()
    with pytest.raises(PlanServerError, match="HTTP 404: no job 'nope'"):
        c.register_rank("nope", rank=0, pp_rank=0)
    job = c.register_job(pp_degree=2, microbatches=MBS, max_slowdown=1.2)
    with pytest.raises(PlanServerError, match="pp_rank 2 is out of range"):
        c.register_rank(job, rank=0, pp_rank=2)
    with pytest.raises(PlanServerError, match="HTTP 404: rank 1 is not registered"):
        c.schedule(job, 1)
    c.register_rank(job, rank=0, pp_rank=0, available_frequencies=[1410])
    c.register_rank(job, rank=0, pp_rank=0, available_frequencies=[1410])  # the same again is fine
    with pytest.raises(PlanServerError, match="HTTP 409: rank 0 is already registered"):
        c.register_rank(job, rank=0, pp_rank=1)
    with pytest.raises(PlanServerError, match="rank 0 already holds"):
        c.register_rank(job, rank=1, pp_rank=0)
    with pytest.raises(PlanServerError, match=r"HTTP 409: the plan needs clocks \[.*\] MHz that rank 0's GPU does not support"):
        c.schedule(job, 0)


def test_uploaded_profiling_results_are_merged_and_planned_on():
    c = make_client(default_profile=False)
    job = c.register_job(pp_degree=2, dp_degree=2, microbatches=MBS, max_slowdown=1.1)
    for rank in range(4):
        c.register_rank(job, rank=rank, pp_rank=rank // 2, dp_rank=rank % 2)
    with pytest.raises(PlanServerError, match="HTTP 409: no profile to plan from"):
        c.schedule(job, 0)
    rows = two_stage_rows()
    for rank in range(4):
        stage = rank // 2
        mine = [(i, f, t * (1.1 if rank % 2 else 1.0), e * (1.2 if rank % 2 else 1.0)) for s, i, f, t, e in rows if s == stage]
        reply = c.upload_profile(job, rank, mine)
        assert reply["stage"] == stage and reply["profile_complete"] == (rank >= 2)  # every stage covered
    merged = c.profile_csv(job).splitlines()
    assert merged[0] == "stage,instruction,frequency,time,energy" and len(merged) == len(rows) + 1
    s, inst, f, t, e = next(r for r in rows if r[0] == 1 and r[1] == "backward" and r[2] == 1000)
    line = next(x for x in merged if x.startswith("1,backward,1000,")).split(",")
    assert float(line[3]) == pytest.approx(t * 1.1) and float(line[4]) == pytest.approx(e * 1.1)  # max time, mean energy
    info = c.schedule_info(job, 3)
    assert info["profile"] == "uploaded" and info["stage"] == 1
    with pytest.raises(PlanServerError, match="422"):
        c.upload_profile(job, 0, [("forward", 1410, -1.0, 1.0)])
    # a new upload invalidates the plan: the next schedule is planned on the new data
    c.upload_profile(job, 0, [("forward", 600, 0.05, 4.0)])
    assert not c.status(job)["planned"]
    assert c.schedule_info(job, 0)["plans"] >= 1


def test_token_is_required_when_set():
    anonymous = make_client(token="s3cret")
    r = anonymous._http.get("/health")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    wrong = make_client(token="s3cret", client_token="guess")
    with pytest.raises(PlanServerError, match="HTTP 401: missing or wrong bearer token"):
        wrong.register_job(pp_degree=2, microbatches=MBS)
    right = make_client(token="s3cret", client_token="s3cret")
    assert right.health()["status"] == "ok"
    assert right.register_job(pp_degree=2, microbatches=MBS)


def test_exposure_rules(tmp_path):
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.3.4.5")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.2")
    assert not is_loopback("example.org")
    check_exposure("127.0.0.1", None)
    check_exposure("0.0.0.0", "tok-0123456789abcdef")
    with pytest.raises(ValueError, match="reachable from other machines"):
        check_exposure("0.0.0.0", None)
    f = tmp_path / "token"
    f.write_text("abc-0123456789abcdef\n")
    assert resolve_token(f) == "abc-0123456789abcdef"
    assert resolve_token(None, {"ZEUS_PERSEUS_TOKEN": "xyz-0123456789abcdef"}) == "xyz-0123456789abcdef"
    assert resolve_token(None, {}) is None
    f.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        resolve_token(f)


@pytest.mark.parametrize("token", ["x", "fifteen-chars-1", "sixteen chars ok", "sixteen-chars-\u00e9\u00e9"])
def test_tokens_follow_zeus_serves_rule(tmp_path, token):
    """zeus serve's rule, from the core (zeus_core.exposure): a token is 16 printable ASCII characters or
    more without spaces, wherever given and on any address (a 1-character one used to be accepted on 0.0.0.0)."""
    from zeus_core.exposure import MIN_TOKEN, token_problem

    assert MIN_TOKEN == 16 and token_problem(token) is not None and token_problem("a" * 16) is None
    for host in ("0.0.0.0", "127.0.0.1"):
        with pytest.raises(ValueError, match="at least 16 printable ASCII characters without spaces"):
            check_exposure(host, token)
    with pytest.raises(ValueError, match=r"^\$ZEUS_PERSEUS_TOKEN: a token is at least 16"):
        resolve_token(None, {"ZEUS_PERSEUS_TOKEN": token})
    f = tmp_path / "token"
    f.write_text(token + "\n")
    with pytest.raises(ValueError, match=f"^--token-file {f}: a token is at least 16"):
        resolve_token(f)


def test_one_rule_for_both_servers():
    """zeus serve and the plan server share the core's definition (a plugin never imports another)."""
    from zeus_core import exposure
    from zeus_plugins_perseus.server import run

    command = pytest.importorskip("zeus_plugins_serve.command")
    assert command.is_loopback is run.is_loopback is exposure.is_loopback
    assert command.token_problem is run.token_problem is exposure.token_problem


def test_a_short_token_on_a_network_address_is_refused_by_the_command():
    r = subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", "perseus", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, ZEUS_PERSEUS_TOKEN="x"),
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "ZEUS_PERSEUS_TOKEN: a token is at least 16 printable ASCII characters" in r.stderr
    assert "Traceback" not in r.stderr and "plan server on" not in r.stdout


def test_port_0_names_the_port_it_listens_on():
    """--port 0: the system chooses; the start line names that port (it used to name port 0), and the
    server answers there."""
    import re

    import httpx

    env = {k: v for k, v in os.environ.items() if k not in ("ZEUS_LOG_LEVEL", "ZEUS_PERSEUS_TOKEN")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "zeus_core.cli", "perseus", "serve", "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        found = re.search(r"plan server on http://127\.0\.0\.1:(\d+) ", line)
        assert found, line
        port = int(found.group(1))
        assert port != 0
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode in (0, -signal.SIGTERM) and "Traceback" not in out, out


def test_zeus_perseus_serve_on_uvicorn(tmp_path):
    prof = profile().to_csv(tmp_path / "profile.csv")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, ZEUS_PERSEUS_TOKEN="tok-0123456789abcdef")
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
            str(prof),
            "--blocking-power-w",
            str(BLOCKING),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        c = PlanClient(url, token="tok-0123456789abcdef", timeout_s=10)
        deadline = time.monotonic() + 30
        while True:
            try:
                assert c.health()["status"] == "ok"
                break
            except PlanServerError:
                assert server.poll() is None and time.monotonic() < deadline, (
                    server.stdout.read() if server.poll() is not None else "no answer in 30 s"
                )
                time.sleep(0.2)
        job = c.register_job(pp_degree=2, microbatches=MBS, max_slowdown=1.0)
        c.register_rank(job, rank=1, pp_rank=1)
        got = rank_schedule(url, stage=1, rank=1, job_id=job, token="tok-0123456789abcdef")
        ps = plan_frontier(read_profile(prof), 2, MBS, "1f1b", 0.001, BLOCKING)
        assert got == load_stage_schedule(ps.plan_json(ps.choose(max_slowdown=1.0)), 1)
        with pytest.raises(PlanServerError, match="401"):
            rank_schedule(url, stage=1, rank=1, job_id=job)
        c.close()
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=20)
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status says what ended it
    assert server.returncode in (0, -signal.SIGTERM) and "Traceback" not in out, out


# -- hardening: limits, NaN, bounded disk, fuzzing --


def limited_client(dump_dir=None, **limits):
    from zeus_plugins_perseus.server.jobs import ServerLimits

    defaults = PlannerDefaults(profile=profile(), blocking_power_w=BLOCKING)
    manager = JobManager(defaults, dump_dir, ServerLimits(**limits))
    return manager, fastapi_testclient.TestClient(create_app(manager), base_url="http://testserver")


JOB = {"pp_degree": 2, "world_size": 2, "microbatches": 4}


def test_bodies_over_the_limit_are_refused_unread_and_nothing_is_kept(tmp_path):
    manager, http = limited_client(tmp_path / "dump", max_body_bytes=4096)
    big = dict(JOB, metadata={f"k{i}": "v" * 200 for i in range(30)})  # valid, but ~7 kB
    r = http.post("/jobs", json=big)
    assert r.status_code == 413 and len(manager) == 0 and not (tmp_path / "dump").exists()
    # declared small, streamed large: still stopped at the limit
    r = http.post(
        "/jobs", content=iter([b'{"pp_degree": 2, "metadata": {"a": "', b"x" * 8192, b'"}}']), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and len(manager) == 0
    assert http.post("/jobs", json=JOB).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        '{"pp_degree": 2, "world_size": 2, "microbatches": 4, "deadline_s": NaN}',
        '{"pp_degree": 2, "world_size": 2, "microbatches": 4, "max_slowdown": Infinity}',
        '{"pp_degree": 2, "world_size": 2, "microbatches": 4, "unit_time_s": 1e-300}',
        '{"pp_degree": 2, "world_size": 2, "microbatches": 4, "blocking_power_w": 1e308}',
        '{"pp_degree": 1e400, "world_size": 2, "microbatches": 4}',
        '{"pp_degree": 2, "world_size": 2, "microbatches": 4, "metadata": {"k": "' + "v" * 300 + '"}}',
    ],
)
def test_nan_infinite_and_out_of_range_values_are_422_naming_the_field(body):
    _, http = limited_client()
    r = http.post("/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    field = body.split(", ")[-1].split('"')[1] if 'pp_degree": 1e400' not in body else "pp_degree"
    assert field in r.text


def test_profile_rows_nan_or_beyond_physics_are_422_and_per_job_rows_are_bounded():
    manager, http = limited_client(max_profile_rows=6)
    job = http.post("/jobs", json=JOB).json()["job_id"]
    http.post(f"/jobs/{job}/ranks", json={"rank": 0, "pp_rank": 0})
    for row in (
        {"instruction": "forward", "frequency": 1410, "time": float("nan"), "energy": 1.0},
        {"instruction": "forward", "frequency": 1410, "time": 1e300, "energy": 1.0},
        {"instruction": "forward", "frequency": 10**12, "time": 0.1, "energy": 1.0},
        {"instruction": "x" * 10, "frequency": 1410, "time": 0.1, "energy": 1.0},
    ):
        r = http.post(f"/jobs/{job}/profile", content=json.dumps({"rank": 0, "rows": [row]}), headers={"content-type": "application/json"})
        assert r.status_code == 422, (row, r.text)
    rows = [{"instruction": i, "frequency": f, "time": 0.1, "energy": 1.0} for i in ("forward", "backward") for f in (1410, 1200, 1000)]
    assert http.post(f"/jobs/{job}/profile", json={"rank": 0, "rows": rows}).status_code == 200
    again = http.post(f"/jobs/{job}/profile", json={"rank": 0, "rows": rows[:2]})  # the same rows: replaced
    assert again.status_code == 200
    more = [{"instruction": "forward", "frequency": 800, "time": 0.2, "energy": 0.9}]
    r = http.post(f"/jobs/{job}/profile", json={"rank": 0, "rows": more})
    assert r.status_code == 422 and "limit of 6" in r.text
    assert manager.status(job)["uploaded_rows"] == 6


def test_job_count_is_bounded_idle_jobs_go_with_their_dump_folders(tmp_path):
    dump = tmp_path / "dump"
    manager, http = limited_client(dump, max_jobs=2, job_idle_s=3600)
    first, second = (http.post("/jobs", json=JOB).json()["job_id"] for _ in range(2))
    r = http.post("/jobs", json=JOB)
    assert r.status_code == 429 and "DELETE /jobs/" in r.text
    manager.job(first).last_seen -= 7200  # idle for two hours: dropped for the next job
    third = http.post("/jobs", json=JOB).json()["job_id"]
    assert sorted(p.name for p in dump.iterdir()) == sorted([second, third])
    assert http.get(f"/jobs/{first}").status_code == 404
    assert http.delete(f"/jobs/{second}").json() == {"deleted": second}
    assert [p.name for p in dump.iterdir()] == [third] and len(manager) == 1
    assert http.delete(f"/jobs/{second}").status_code == 404


def test_planning_size_limits_are_422():
    _, http = limited_client(max_instructions=16, max_units_per_instruction=100)
    r = http.post("/jobs", json=dict(JOB, microbatches=5))
    assert r.status_code == 422 and "20 instructions" in r.text
    job = http.post("/jobs", json=dict(JOB, unit_time_s=0.0001)).json()["job_id"]
    http.post(f"/jobs/{job}/ranks", json={"rank": 0, "pp_rank": 0})
    r = http.get(f"/jobs/{job}/schedule", params={"rank": 0})
    assert r.status_code == 422 and "larger unit_time_s" in r.text
