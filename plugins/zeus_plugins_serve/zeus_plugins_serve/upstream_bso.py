"""Upstream Zeus's batch-size optimizer protocol, answered by ``zeus serve`` next to its own (``/v1``).

Upstream's client (``zeus.optimizer.batch_size`` of ``zeus-compat``, or upstream's own) speaks:

* ``POST /jobs``: register a job (its batch sizes, knobs, target and GPUs); an existing job_id
  must come with the same configuration (409 otherwise);
* ``GET /jobs/batch_size?job_id=``: the batch size of the next trial;
* ``POST /report``: a trial's cumulative time and energy and its metric after an epoch; the answer
  says whether to stop (target reached, ``max_epochs``, or cost past ``beta_knob`` times the best);
* ``PATCH /trials``: the trial's process ended; ``DELETE /jobs?job_id=``: forget the job.

Each job is a zeus job of the service's store: the batch sizes are chosen by the job's registered
``mab`` batch-size policy (Gaussian Thompson sampling with upstream's pruning, its prior, window,
explorations and seed), the trials are the job's tries, recorded with ``zeus serve``'s own
history (:class:`~zeus_core.engine.history.History`), so ``zeus report`` shows them. A trial that
stops short of the target is a failed try of the open recurrence; the next trial continues it,
as ``zeus run`` does. Trials in progress live in memory: a trial begun before a restart of the
service is refused (404) and its process relaunched.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from zeus_core import JobOptions, TryRecord, zeus_cost
from zeus_core.engine import History, HistorySetup, TryPlan

#: The batch-size policy that upstream's protocol drives (Zeus's MAB).
POLICY = "mab"
SPEC_KEY = "serve:upstream:spec"
CLIENT = "upstream-bso"
#: How many ended trials the service remembers, to answer the late reports of their other ranks.
MAX_ENDED = 10_000


class UpstreamJob(BaseModel):
    """A registration (upstream's ``JobSpecFromClient``); ``job_id`` may be left to the service."""

    job_id: str | None = Field(default=None, max_length=100)
    job_id_prefix: str = Field(min_length=1, max_length=60)
    batch_sizes: list[int] = Field(min_length=1, max_length=1000)
    default_batch_size: int = Field(gt=0)
    eta_knob: float = Field(default=0.5, ge=0, le=1)
    beta_knob: float | None = Field(default=2.0, gt=0, allow_inf_nan=False)
    target_metric: float = Field(default=0.5, allow_inf_nan=False)
    higher_is_better_metric: bool = True
    max_epochs: int = Field(default=100, gt=0, le=100_000)
    num_pruning_rounds: int = Field(default=2, ge=0, le=100)
    window_size: int = Field(default=0, ge=0)
    mab_prior_mean: float = Field(default=0.0, allow_inf_nan=False)
    mab_prior_precision: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    mab_num_explorations: int = Field(default=2, ge=0, le=1000)
    mab_seed: int | None = Field(default=None, ge=0, lt=2**63)
    max_power: float = Field(gt=0, le=1e7, allow_inf_nan=False)
    number_of_gpus: int = Field(gt=0, le=100_000)
    gpu_model: str = Field(min_length=1, max_length=200)

    @field_validator("batch_sizes")
    @classmethod
    def _batch_sizes(cls, value: list[int]) -> list[int]:
        if any(b <= 0 for b in value) or len(set(value)) != len(value):
            raise ValueError("batch_sizes must be distinct positive integers")
        return sorted(value)

    @model_validator(mode="after")
    def _consistent(self) -> UpstreamJob:
        if self.default_batch_size not in self.batch_sizes:
            raise ValueError(f"Default BS({self.default_batch_size}) not in batch_sizes({self.batch_sizes}).")
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise ValueError(f"Job_id({self.job_id}) does not start with prefix({self.job_id_prefix}).")
        return self


class UpstreamTrial(BaseModel):
    job_id: str = Field(max_length=100)
    batch_size: int = Field(gt=0)
    trial_number: int = Field(ge=1)


class UpstreamResult(UpstreamTrial):
    time: float = Field(ge=0, le=1e300, allow_inf_nan=False)
    energy: float = Field(ge=0, le=1e300, allow_inf_nan=False)
    metric: float = Field(allow_inf_nan=False)
    current_epoch: int = Field(ge=1)


class UpstreamReport(BaseModel):
    stop_train: bool
    converged: bool
    message: str


def setup_of(job: UpstreamJob) -> HistorySetup:
    """The zeus job an upstream registration describes (its store, policy and identity)."""
    options = JobOptions(
        name=job.job_id or "",
        eta_knob=job.eta_knob,
        beta_knob=math.inf if job.beta_knob is None else max(job.beta_knob, 1.0),
        target_metric=job.target_metric,
        higher_is_better=job.higher_is_better_metric,
        max_epochs=job.max_epochs,
        seed=job.mab_seed or 0,
    )
    policy = {
        "plugin": POLICY,
        "variant": "paper",
        "batch_sizes": job.batch_sizes,
        "default": job.default_batch_size,
        "prior_mean": job.mab_prior_mean,
        "prior_precision": job.mab_prior_precision,
        "window": job.window_size,
        "seed": job.mab_seed,
        "pruning_rounds": max(job.num_pruning_rounds, 1),
        "num_exploration": job.mab_num_explorations,
    }
    identity = {"gpu_model": job.gpu_model, "number_of_gpus": job.number_of_gpus}
    return HistorySetup(options, identity, policy, job.max_power, job.batch_sizes, job.default_batch_size)


async def _body(request: Request, model: type[BaseModel]) -> Any:
    """The request's JSON body as ``model``: upstream's client sends JSON without a content type."""
    raw = await request.body()
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors(include_url=False)]) from None


class _Trial:
    def __init__(self, plan: TryPlan, number: int) -> None:
        self.plan = plan
        self.number = number
        self.last: UpstreamResult | None = None
        self.recorded = False
        #: whether the trial reached its target, once a report ended it (set before it is recorded)
        self.converged: bool | None = None


def add_routes(app: FastAPI, hub: Any, problem: Any, ClientJob: Any, job_name: Any) -> None:  # noqa: N803 - a class
    """Upstream's routes on ``app``, over ``hub``'s job stores (the service's ``Problem``, ``ClientJob`` and ``job_name``
    are passed in: this module is the service's, and imports nothing of it)."""

    trials: dict[tuple[str, int], _Trial] = {}
    # trials that ended (job, trial number) -> reached the target: every rank of a data-parallel trial reports
    # each epoch, and the reports after the one that ended the trial get upstream's answer (stop, and how it ended)
    ended: dict[tuple[str, int], bool] = {}
    # job -> recurrences whose last try failed, each with that try's index: the next trials continue them
    # (concurrent trials of one job each take their own, so a recurrence's tries stay in order)
    open_recurrences: dict[str, list[tuple[int, int]]] = {}

    def session_of(job_id: str) -> Any:
        try:
            return hub.session(job_name(job_id), CLIENT)
        except Exception:
            raise problem(404, f"job {job_id!r} is not registered with this service: POST /jobs first", code="unknown_job") from None

    @app.post("/jobs", response_model=dict, tags=["upstream"])
    async def register_job(request: Request) -> dict:
        """Register a job (upstream's ``JobSpecFromClient``); the same job_id again must bring the same configuration."""
        body: UpstreamJob = await _body(request, UpstreamJob)
        job = body.model_copy(update={"job_id": body.job_id or f"{body.job_id_prefix}-{uuid.uuid4().hex[:12]}"})
        name = job_name(job.job_id)
        setup = setup_of(job)
        wanted = job.model_dump()

        def fn(entry: Any) -> dict:
            store = entry.open()
            with store.transaction() as tx:
                known = tx.get(SPEC_KEY)
                if known is not None and known != wanted:
                    raise problem(409, f"job {name!r} is registered with another configuration: {known}", code="job_mismatch")
                if known is None:
                    tx.set(SPEC_KEY, wanted)
            ClientJob(CLIENT, name, setup).history_for(store, hub.registry)  # the policy can be built, the store fits
            return wanted

        out = await hub.run(name, fn)
        hub.add_session(ClientJob(CLIENT, name, setup))
        return out

    @app.delete("/jobs", tags=["upstream"])
    async def delete_job(job_id: str = Query(max_length=100)) -> dict:
        """Forget the job's registration (its history stays in the store)."""
        hub.sessions.pop((job_name(job_id), CLIENT), None)
        open_recurrences.pop(job_id, None)
        return {"deleted": job_id}

    @app.get("/jobs/batch_size", response_model=UpstreamTrial, tags=["upstream"])
    async def next_batch_size(job_id: str = Query(max_length=100)) -> dict:
        """The next trial's batch size, chosen by the job's policy."""
        session = session_of(job_id)

        def fn(entry: Any) -> dict:
            history: History = session.history_for(entry.open(), hub.registry)
            with entry.store.transaction() as tx:
                waiting = open_recurrences.get(job_id)
                if waiting:
                    recurrence, last = waiting[0]
                    try_index = last + 1
                else:
                    recurrence, try_index = history.begin_recurrence(tx=tx), 1
                plan = history.next_try(recurrence, try_index, tx=tx)
                count = int(tx.get("serve:upstream:trials") or 0) + 1
                tx.set("serve:upstream:trials", count)
            if waiting:  # taken only once the transaction committed
                waiting.pop(0)
            trials[(job_id, count)] = _Trial(plan, count)
            return {"job_id": job_id, "batch_size": plan.batch_size, "trial_number": count}

        return await hub.run(job_name(job_id), fn)

    def _record(entry: Any, session: Any, job_id: str, trial: _Trial, reached: bool, stopped: str | None) -> None:
        history: History = session.history_for(entry.open(), hub.registry)
        last = trial.last
        epochs, time_s, energy_j = (last.current_epoch, last.time, last.energy) if last else (0, 0.0, 0.0)
        spec = session.setup
        cost = float(zeus_cost(energy_j, time_s, spec.job.eta_knob, spec.max_power_w))
        record = TryRecord(
            trial.plan.recurrence, trial.plan.try_index, trial.plan.batch_size, None, epochs, time_s, energy_j, cost, reached, stopped
        )
        previous = sum(r.cost for r in history.history() if r.recurrence == trial.plan.recurrence)
        try:
            history.record(trial.plan, record, recurrence_cost=previous + cost if reached else None)
        except RuntimeError as e:  # the policy cannot learn this try (e.g. pruning goes one batch size at a time)
            session.history = None  # it may hold what was rolled back: built again on the next request
            raise problem(
                409,
                f"the job's batch-size policy cannot take trial {trial.number}'s result: {e}. While it prunes "
                "batch sizes, run the trials of one job one after another",
                code="policy_refused",
            ) from None
        trial.recorded = True
        ended[(job_id, trial.number)] = reached
        while len(ended) > MAX_ENDED:
            del ended[next(iter(ended))]
        if not reached and trial.plan.try_index < spec.job.max_tries:  # at max_tries the history abandons it
            open_recurrences.setdefault(job_id, []).append((trial.plan.recurrence, trial.plan.try_index))

    @app.post("/report", response_model=UpstreamReport, tags=["upstream"])
    async def report(request: Request) -> dict:
        """An epoch's result of a trial (upstream's ``TrainingResult``): go on, or stop (and why)."""
        body: UpstreamResult = await _body(request, UpstreamResult)
        session = session_of(body.job_id)
        trial = trials.get((body.job_id, body.trial_number))
        converged = trial.converged if trial is not None else ended.get((body.job_id, body.trial_number))
        if converged is not None:
            return {
                "stop_train": True,
                "converged": converged,
                "message": f"Result for this trial({body.trial_number}) is already reported.",
            }
        if trial is None or trial.plan.batch_size != body.batch_size:
            raise problem(
                404,
                f"trial {body.trial_number} of job {body.job_id!r} at batch size {body.batch_size} is not in "
                "progress here (begun before a restart of the service?): relaunch the training",
                code="unknown_trial",
            )
        job = session.setup.job
        trial.last = body
        cost = float(zeus_cost(body.energy, body.time, job.eta_knob, session.setup.max_power_w))
        reached = body.metric >= job.target_metric if job.higher_is_better else body.metric <= job.target_metric
        if reached:
            answer = (True, True, f"Target metric {job.target_metric} reached in {body.current_epoch} epoch(s).")
        elif cost > trial.plan.cost_bound:
            answer = (
                True,
                False,
                f"Cost {cost:.6g} exceeded the early-stop threshold {trial.plan.cost_bound:.6g} "
                f"(beta_knob x the cheapest training so far).",
            )
        elif body.current_epoch >= job.max_epochs:
            answer = (True, False, f"Reached max_epochs {job.max_epochs} without reaching the target metric {job.target_metric}.")
        else:
            return {"stop_train": False, "converged": False, "message": "Continue training."}
        stopped = None if reached else ("early-stop" if "Cost" in answer[2] else "max-epochs")
        trial.converged = reached  # before the record: another rank's report meanwhile is answered from it
        try:
            await hub.run(job_name(body.job_id), lambda entry: _record(entry, session, body.job_id, trial, reached, stopped))
        except BaseException:
            trial.converged = None
            raise
        return {"stop_train": answer[0], "converged": answer[1], "message": answer[2]}

    @app.patch("/trials", tags=["upstream"])
    async def end_trial(request: Request) -> dict:
        """The trial's process ended (upstream's ``TrialId``); a trial that did not finish is recorded as a failed try."""
        body: UpstreamTrial = await _body(request, UpstreamTrial)
        trial = trials.pop((body.job_id, body.trial_number), None)
        if trial is not None and not trial.recorded:
            session = session_of(body.job_id)
            await hub.run(
                job_name(body.job_id),
                lambda entry: _record(entry, session, body.job_id, trial, False, "early-stop" if trial.last else "never-ran"),
            )
        return {"ended": body.trial_number}
