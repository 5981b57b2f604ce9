"""The plan server's HTTP API (FastAPI): what ranks call to get their frequency plan.

    POST /jobs                       JobSpec          -> {"job_id"}
    POST /jobs/{job_id}/ranks        RankInfo         -> {"registered", "world_size"}
    GET  /jobs/{job_id}/schedule?rank=R               -> the rank's (instruction, MHz) list and its plan's numbers
    POST /jobs/{job_id}/profile      ProfileUpload    -> {"rows", "stage", "profile_complete"}
    GET  /jobs/{job_id}/profile.csv                   -> the merged uploads in the profile CSV format
    GET  /jobs/{job_id}                               -> status
    GET  /health                                      -> {"status": "ok"}

With a token every request, ``/health`` included, needs ``Authorization:
Bearer <token>``. Request bodies are validated by pydantic (422 names the bad
field); a request that cannot be served in the job's state answers 400, 404 or
409 with ``{"detail": message}``. Plain ``def`` endpoints run in FastAPI's
thread pool, so planning a large frontier does not stall other requests.
"""

from __future__ import annotations

import secrets
from typing import Literal, Optional

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from zeus_plugins_perseus.server.jobs import JobError, JobManager

API_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not silently ignored


class JobSpec(_Strict):
    pp_degree: int = Field(ge=1, description="pipeline stages")
    dp_degree: int = Field(1, ge=1)
    tp_degree: int = Field(1, ge=1)
    world_size: int = Field(ge=1, description="pp_degree x dp_degree x tp_degree")
    microbatches: int = Field(ge=1)
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    deadline_s: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    max_slowdown: Optional[float] = Field(None, ge=1, allow_inf_nan=False)
    blocking_power_w: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    unit_time_s: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    model: Optional[Literal["measured", "exponential"]] = None
    metadata: dict[str, str] = Field(default_factory=dict)


class RankInfo(_Strict):
    rank: int = Field(ge=0)
    pp_rank: int = Field(ge=0)
    dp_rank: int = Field(0, ge=0)
    tp_rank: int = Field(0, ge=0)
    available_frequencies: list[int] = Field(default_factory=list, description="SM clocks (MHz) the GPU supports")


class ProfileRow(_Strict):
    instruction: str = Field(min_length=1)
    frequency: int = Field(gt=0)
    time: float = Field(gt=0, allow_inf_nan=False)
    energy: float = Field(ge=0, allow_inf_nan=False)


class ProfileUpload(_Strict):
    rank: int = Field(ge=0)
    rows: list[ProfileRow] = Field(min_length=1)


def create_app(manager: JobManager, token: str | None = None) -> FastAPI:
    """The API over ``manager``; with ``token``, every request must carry it as a bearer token."""
    bearer = HTTPBearer(auto_error=False)

    def authorize(creds: Optional[HTTPAuthorizationCredentials] = Depends(bearer)) -> None:
        if token is None:
            return
        given = creds.credentials if creds is not None else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(
                status_code=401,
                detail="missing or wrong bearer token (send 'Authorization: Bearer <token>')",
                headers={"WWW-Authenticate": "Bearer"},
            )

    app = FastAPI(title="zeus perseus plan server", version=str(API_VERSION), dependencies=[Depends(authorize)])
    app.state.manager = manager

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

    @app.get("/jobs/{job_id}/schedule")
    def schedule(job_id: str, rank: int) -> dict:
        return manager.schedule(job_id, rank)

    @app.post("/jobs/{job_id}/profile")
    def upload_profile(job_id: str, upload: ProfileUpload) -> dict:
        return manager.upload_profile(job_id, upload.rank, [r.model_dump() for r in upload.rows])

    @app.get("/jobs/{job_id}/profile.csv", response_class=PlainTextResponse)
    def profile_csv(job_id: str) -> str:
        return manager.profile_csv(job_id)

    return app
