"""``app``: the Perseus plan server (``zeus perseus serve``'s) for upstream's launch line.

    ZEUS_PFO_SCHEDULER_ARGS='{"blocking_power_w": 60}' uvicorn zeus.optimizer.pipeline_frequency.server.router:app --port 7787

Upstream's server runs a scheduler named by ``ZEUS_PFO_SCHEDULER`` (``PointSolution``: a lowtime
plan file, evaluated as Python). Here the server is ``zeus-plugins-perseus``'s: it plans each job with
the Perseus planner on the profile its ranks upload (or on ``profile``, a profile CSV), and
``ZEUS_PFO_SCHEDULER_ARGS`` holds the planner's settings: ``profile``, ``blocking_power_w`` (W),
``unit_time_s``, ``model``. ``ZEUS_PFO_DUMP_DATA`` / ``ZEUS_PFO_DUMP_DIR`` and
``ZEUS_PFO_MAX_JOB_IDLE_TIME`` keep their meaning. A plan file to ``eval`` (``solution_path``) is refused.

Where uvicorn binds is uvicorn's choice, so the exposure rule of ``zeus perseus serve`` is applied
per request: without ``$ZEUS_PERSEUS_TOKEN`` only clients on loopback are answered (403 otherwise);
with it, every request needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import os

from zeus.optimizer.pipeline_frequency.common import PFOServerSettings

__all__ = ["app", "create_app_from_settings", "settings"]

PLANNER_KEYS = ("profile", "blocking_power_w", "unit_time_s", "model")


def create_app_from_settings(settings: PFOServerSettings, token: str | None = None):
    """The plan server's FastAPI app, configured from upstream's settings (see the module's docstring)."""
    from fastapi import Request
    from fastapi.responses import JSONResponse

    from zeus_core.exposure import is_loopback, token_problem
    from zeus_plugins_perseus.profile import read_profile
    from zeus_plugins_perseus.server.app import create_app
    from zeus_plugins_perseus.server.jobs import JobManager, PlannerDefaults, ServerLimits

    args = dict(settings.scheduler_args)
    if "solution_path" in args:
        raise ValueError(
            "solution_path: this server does not evaluate plan files; it plans each job with the "
            "Perseus planner (give 'profile' and 'blocking_power_w' in ZEUS_PFO_SCHEDULER_ARGS)"
        )
    unknown = sorted(set(args) - set(PLANNER_KEYS))
    if unknown:
        raise ValueError(f"ZEUS_PFO_SCHEDULER_ARGS: unknown key(s) {unknown}; known: {list(PLANNER_KEYS)}")
    if token is not None and (problem := token_problem(token)) is not None:
        raise ValueError(f"$ZEUS_PERSEUS_TOKEN: {problem}")
    profile = read_profile(args["profile"]) if args.get("profile") else None
    defaults = PlannerDefaults(
        profile=profile,
        blocking_power_w=args.get("blocking_power_w"),
        unit_time_s=float(args.get("unit_time_s", 0.001)),
        model=args.get("model", "measured"),
    )
    limits = ServerLimits(job_idle_s=float(settings.max_job_idle_time))
    app = create_app(JobManager(defaults, settings.dump_dir if settings.dump_data else None, limits), token)
    if token is None:

        @app.middleware("http")
        async def loopback_only(request: Request, call_next):
            client = request.client.host if request.client is not None else ""
            if not is_loopback(client):
                return JSONResponse(
                    status_code=403,
                    content={
                        "detail": "this plan server has no token, so it answers loopback clients only; "
                        "set $ZEUS_PERSEUS_TOKEN where it starts"
                    },
                )
            return await call_next(request)

    return app


settings = PFOServerSettings()
app = create_app_from_settings(settings, os.environ.get("ZEUS_PERSEUS_TOKEN") or None)
