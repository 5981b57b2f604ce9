"""What a rank calls to get its plan: from the plan server, or from a plan file.

    controller = FrequencyController(functools.partial(open_device, "nvml", {"gpus": [local_rank]}))
    client = PlanClient("http://127.0.0.1:7787", token=os.environ.get("ZEUS_PERSEUS_TOKEN"))
    job_id = client.register_job(pp_degree=4, world_size=4, microbatches=8, max_slowdown=1.0)  # rank 0;
    # broadcast job_id to the other ranks (e.g. torch.distributed.broadcast_object_list)
    client.register_rank(job_id, rank=r, pp_rank=r, available_frequencies=controller.supported_clocks)
    hooks = PerseusHooks(client.schedule(job_id, rank=r), controller.set_frequency)
    ...                                            # train, calling the hooks
    client.upload_profile(job_id, r, rows)         # optional: measured (instruction, MHz, s, J) rows

(``open_device`` is :func:`zeus_core.open_device`; on ``torch.distributed.pipelining``,
:func:`zeus_plugins_perseus.pipelining.perseus_pipeline` does all of this in one call.)

or, without a server, ``rank_schedule("plans/00012.json", stage=r)``. Server
errors raise :class:`PlanServerError` with the server's explanation.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zeus_plugins_perseus.runtime.hooks import load_stage_schedule


class PlanServerError(RuntimeError):
    """The plan server refused a request or could not be reached; the message says why."""


class PlanClient:
    """A thin typed wrapper over the plan server's HTTP API (httpx)."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 120.0, http: Any = None) -> None:
        """``http``: an ``httpx.Client`` to send through instead of a new one (e.g. FastAPI's TestClient)."""
        import httpx

        self.url = url.rstrip("/")
        self._http = http if http is not None else httpx.Client(base_url=self.url, timeout=timeout_s)
        if token:
            self._http.headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, **kwargs) -> Any:
        import httpx

        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise PlanServerError(f"cannot reach the plan server at {self.url}: {e}") from e
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise PlanServerError(f"{method} {path}: HTTP {r.status_code}: {detail}")
        return r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text

    def health(self) -> dict:
        return self._call("GET", "/health")

    def register_job(
        self, *, pp_degree: int, microbatches: int, world_size: int | None = None, dp_degree: int = 1, tp_degree: int = 1, **planning: Any
    ) -> str:
        """Register a job; ``planning`` may hold schedule, deadline_s, max_slowdown, blocking_power_w,
        unit_time_s, model and metadata. Returns the job id every rank uses."""
        body = {
            "pp_degree": pp_degree,
            "dp_degree": dp_degree,
            "tp_degree": tp_degree,
            "world_size": world_size if world_size is not None else pp_degree * dp_degree * tp_degree,
            "microbatches": microbatches,
            **{k: v for k, v in planning.items() if v is not None},
        }
        return self._call("POST", "/jobs", json=body)["job_id"]

    def register_rank(
        self, job_id: str, *, rank: int, pp_rank: int, dp_rank: int = 0, tp_rank: int = 0, available_frequencies: Iterable[int] = ()
    ) -> dict:
        body = {
            "rank": rank,
            "pp_rank": pp_rank,
            "dp_rank": dp_rank,
            "tp_rank": tp_rank,
            "available_frequencies": [int(f) for f in available_frequencies],
        }
        return self._call("POST", f"/jobs/{job_id}/ranks", json=body)

    def schedule_info(self, job_id: str, rank: int) -> dict:
        """The full answer: the schedule plus the chosen plan's index, times and energies."""
        return self._call("GET", f"/jobs/{job_id}/schedule", params={"rank": rank})

    def schedule(self, job_id: str, rank: int) -> list[tuple[str, int]]:
        """The rank's ordered (instruction, MHz) list, ready for :class:`PerseusHooks`."""
        return [(str(i), int(f)) for i, f in self.schedule_info(job_id, rank)["schedule"]]

    def upload_profile(self, job_id: str, rank: int, rows: Iterable[tuple[str, int, float, float]]) -> dict:
        """Send this rank's measured (instruction, MHz, seconds, joules) rows (its stage is its pp_rank)."""
        body = {
            "rank": rank,
            "rows": [{"instruction": i, "frequency": int(f), "time": float(t), "energy": float(e)} for i, f, t, e in rows],
        }
        return self._call("POST", f"/jobs/{job_id}/profile", json=body)

    def profile_csv(self, job_id: str) -> str:
        return self._call("GET", f"/jobs/{job_id}/profile.csv")

    def status(self, job_id: str) -> dict:
        return self._call("GET", f"/jobs/{job_id}")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PlanClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def rank_schedule(
    source: str | Path, *, stage: int, rank: int | None = None, job_id: str | None = None, token: str | None = None
) -> list[tuple[str, int]]:
    """A rank's (instruction, MHz) list from a plan server URL (needs ``job_id`` and ``rank``;
    the rank must be registered) or from a plan JSON file (``plans/NNNNN.json``, ``chosen_plan.json``)."""
    text = str(source)
    if text.startswith(("http://", "https://")):
        if job_id is None or rank is None:
            raise ValueError("fetching a schedule from a plan server needs job_id and rank")
        with PlanClient(text, token=token) as client:
            return client.schedule(job_id, rank)
    return load_stage_schedule(Path(source), stage)
