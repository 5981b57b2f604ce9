"""The plan server fuzzed from its own OpenAPI schema (schemathesis): no request is a server error.

Every route gets generated requests, valid and invalid (types, bounds, NaN,
missing and extra fields); a job a generated request registered is then given
ranks and planned, so planning on fuzzed sizes, deadlines and units must fail
cleanly too. The app's limits are small so that a plan takes milliseconds.
"""

import sys
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
fastapi_testclient = pytest.importorskip("fastapi.testclient")
from hypothesis import HealthCheck, settings  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import two_stage_rows  # noqa: E402

from zeus_plugins_perseus.profile import InstructionProfile  # noqa: E402
from zeus_plugins_perseus.server.app import create_app  # noqa: E402
from zeus_plugins_perseus.server.jobs import JobManager, PlannerDefaults, ServerLimits  # noqa: E402

MANAGER = JobManager(
    PlannerDefaults(profile=InstructionProfile.from_rows(two_stage_rows()), blocking_power_w=60.0),
    limits=ServerLimits(max_instructions=24, max_units_per_instruction=200, max_jobs=32, max_body_bytes=64 * 1024),
)
APP = create_app(MANAGER)
HTTP = fastapi_testclient.TestClient(APP, base_url="http://testserver")
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
SEEN: list[tuple[str, int]] = []


def plan(body: dict) -> None:
    r = HTTP.post("/jobs", json=body)
    if r.status_code != 200:
        assert r.status_code < 500, r.text
        return
    job = r.json()["job_id"]
    for rank in range(min(body["world_size"], 3)):
        r = HTTP.post(f"/jobs/{job}/ranks", json={"rank": rank, "pp_rank": rank % body["pp_degree"]})
        assert r.status_code < 500, r.text
    r = HTTP.get(f"/jobs/{job}/schedule", params={"rank": 0})
    assert r.status_code < 500, (body, r.text)
    SEEN.append(("plan", r.status_code))
    HTTP.delete(f"/jobs/{job}")


def plan_what_was_registered(body: dict, job: str) -> None:
    """Plan the fuzzed job as registered, and its planning options on the server's 2-stage profile."""
    HTTP.delete(f"/jobs/{job}")
    plan(body)
    plan({**body, "pp_degree": 2, "world_size": 2, "dp_degree": 1, "tp_degree": 1, "microbatches": 1 + body["microbatches"] % 6})


@schema.parametrize()
@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_no_generated_request_is_a_server_error(case):
    response = case.call()
    SEEN.append((case.method, response.status_code))
    assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text)
    if case.method == "POST" and case.path == "/jobs" and response.status_code == 200:
        plan_what_was_registered(case.body, response.json()["job_id"])


def test_the_fuzzing_reached_every_kind_of_answer():
    """Runs after the fuzz cases (file order): they must have produced successes and refusals, and plans."""
    codes = {code for _, code in SEEN}
    assert 200 in codes and 422 in codes and 404 in codes
    assert any(kind == "plan" and code == 200 for kind, code in SEEN)
