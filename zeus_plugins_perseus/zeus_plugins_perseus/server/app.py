"""The plan server's HTTP API (FastAPI): what ranks call to get their frequency plan.

    POST /jobs                       JobSpec          -> {"job_id"}
    POST /jobs/{job_id}/ranks        RankInfo         -> {"registered", "world_size"}
    GET  /jobs/{job_id}/schedule?rank=R               -> the rank's (instruction, MHz) list and its plan's numbers
    POST /jobs/{job_id}/profile      ProfileUpload    -> {"rows", "stage", "profile_complete"}
    GET  /jobs/{job_id}/profile.csv                   -> the merged uploads in the profile CSV format
    GET  /jobs/{job_id}                               -> status
    DELETE /jobs/{job_id}                             -> forget a finished job (and its dump folder)
    GET  /health                                      -> {"status": "ok"}

With a token every request, ``/health`` included, needs ``Authorization:
Bearer <token>``. Request bodies are validated by pydantic (422 names the bad
field; NaN, infinities and values no pipeline has are refused); a body larger
than the server's ``max_body_bytes`` is refused unread (413, FastAPI's own
limit); a request beyond the server's other limits answers 422, or 429 when it
holds as many jobs as it may; a request that cannot be served in the job's
state answers 400, 404 or 409 with ``{"detail": message}``. Plain ``def`` endpoints run in FastAPI's
thread pool. A job is planned in a process of its own, within the server's budget of CPU time and
memory per job (422 naming the budget past it), at most ``max_planning`` at once (429 beyond);
the schedule request waits for it without holding a thread, and planning ends when the job is
deleted or every client waiting for it has gone.
"""

from __future__ import annotations

import math
import secrets
from typing import Annotated, Literal, get_args

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from zeus_plugins_perseus.schedule import SCHEDULES
from zeus_plugins_perseus.server.jobs import JobError, JobManager

SCHEDULE_NAMES = tuple(SCHEDULES)
#: The schedules a job may name, spelled out so that type checkers see them (the same as SCHEDULES' keys)
ScheduleName = Literal["1f1b", "gpipe", "gpipe-fifo"]
assert get_args(ScheduleName) == SCHEDULE_NAMES, "ScheduleName must list the schedules of zeus_plugins_perseus.schedule"

API_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not silently ignored


# Bounds of the schema: past them a value cannot be a real pipeline's, and it could make the
# planner allocate or loop without end (a time of 1e300 s, a unit of 1e-300 s). The server's
# configurable limits (ServerLimits) come on top. NaN and infinities are refused everywhere.
_MHZ = Field(gt=0, le=10_000, description="SM clock (MHz)")
_Key = Annotated[str, StringConstraints(min_length=1, max_length=64)]
_Value = Annotated[str, StringConstraints(max_length=256)]
_Rank = Annotated[int, Field(ge=0, le=1 << 20)]
_Degree = Annotated[int, Field(ge=1, le=1 << 20)]


class JobSpec(_Strict):
    pp_degree: int = Field(ge=1, le=1024, description="pipeline stages")
    dp_degree: _Degree = 1
    tp_degree: _Degree = 1
    world_size: int = Field(ge=1, le=1 << 20, description="pp_degree x dp_degree x tp_degree")
    microbatches: int = Field(ge=1, le=1 << 16)
    schedule: ScheduleName = "1f1b"
    deadline_s: float | None = Field(None, gt=0, le=1e5, allow_inf_nan=False)
    max_slowdown: float | None = Field(None, ge=1, le=100, allow_inf_nan=False)
    blocking_power_w: float | None = Field(None, ge=0, le=10_000, allow_inf_nan=False)
    unit_time_s: float | None = Field(None, ge=1e-5, le=1, allow_inf_nan=False)
    model: Literal["measured", "exponential"] | None = None
    metadata: dict[_Key, _Value] = Field(default_factory=dict, max_length=32)


class RankInfo(_Strict):
    rank: _Rank
    pp_rank: _Rank
    dp_rank: _Rank = 0
    tp_rank: _Rank = 0
    available_frequencies: list[Annotated[int, _MHZ]] = Field(
        default_factory=list, max_length=1024, description="SM clocks (MHz) the GPU supports"
    )


class ProfileRow(_Strict):
    instruction: Literal["forward", "backward"]
    frequency: int = _MHZ
    time: float = Field(gt=0, le=60, allow_inf_nan=False, description="seconds per microbatch")
    energy: float = Field(ge=0, le=1e6, allow_inf_nan=False, description="joules per microbatch")


class ProfileUpload(_Strict):
    rank: _Rank
    rows: list[ProfileRow] = Field(min_length=1, max_length=4096)


def _json_safe(value):
    """``value`` with every non-finite float replaced by its name (``"nan"``, ``"inf"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def create_app(manager: JobManager, token: str | None = None) -> FastAPI:
    """The API over ``manager``; with ``token``, every request must carry it as a bearer token."""
    bearer = HTTPBearer(auto_error=False)

    def authorize(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if token is None:
            return
        given = creds.credentials if creds is not None else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(
                status_code=401,
                detail="missing or wrong bearer token (send 'Authorization: Bearer <token>')",
                headers={"WWW-Authenticate": "Bearer"},
            )

    app = FastAPI(
        title="zeus perseus plan server",
        version=str(API_VERSION),
        dependencies=[Depends(authorize)],
        max_body_size=manager.limits.max_body_bytes,
    )
    app.state.manager = manager

    @app.exception_handler(RequestValidationError)
    def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes each bad input back; a NaN or an infinity (which Python's
        # JSON parser accepts) cannot be encoded in the answer, and that made a 422 a 500.
        return JSONResponse(status_code=422, content={"detail": _json_safe(jsonable_encoder(exc.errors()))})

    @app.exception_handler(JobError)
    def job_error(_request: Request, exc: JobError) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content={"detail": str(exc)})

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "api": API_VERSION, "jobs": len(manager)}

    @app.post("/jobs")
    def register_job(spec: JobSpec) -> dict:
        return {"job_id": manager.register_job(spec.model_dump())}

    @app.get("/jobs/{job_id}")
    def job_status(job_id: str) -> dict:
        return manager.status(job_id)

    @app.post("/jobs/{job_id}/ranks")
    def register_rank(job_id: str, info: RankInfo) -> dict:
        return manager.register_rank(job_id, info.model_dump())

    @app.delete("/jobs/{job_id}")
    def delete_job(job_id: str) -> dict:
        return manager.delete_job(job_id)

    @app.get("/jobs/{job_id}/schedule")
    async def schedule(job_id: str, rank: Annotated[int, Query(ge=0, le=1 << 20)], request: Request) -> Response:
        answer = await manager.schedule_async(job_id, rank, request.is_disconnected)
        if answer is None:  # the client left: nobody reads this
            return Response(status_code=499)
        return JSONResponse(answer)

    @app.post("/jobs/{job_id}/profile")
    def upload_profile(job_id: str, upload: ProfileUpload) -> dict:
        return manager.upload_profile(job_id, upload.rank, [r.model_dump() for r in upload.rows])

    @app.get("/jobs/{job_id}/profile.csv", response_class=PlainTextResponse)
    def profile_csv(job_id: str) -> str:
        return manager.profile_csv(job_id)

    return app
