"""Perseus on PyTorch's own pipeline engine, ``torch.distributed.pipelining``.

One call puts a rank's schedule under a frequency plan::

    schedule = Schedule1F1B(stage, n_microbatches=8, loss_fn=loss_fn)
    with perseus_pipeline(schedule, plan="out/chosen_plan.json",
                          device=functools.partial(open_device, "nvml", {"gpus": [local_rank]})):
        for x, y in batches:
            schedule.step(x, target=y)      # every forward and backward at its planned SM clock

``plan`` is a plan file written by ``zeus run`` (``plans/NNNNN.json``,
``chosen_plan.json``) or the URL of ``zeus perseus serve``: then the pipeline's
first rank registers the job (stages, microbatches and the schedule the engine
runs), shares its id over the stage's process group, and every rank registers
with the clocks its GPU supports and fetches its schedule. ``hooks=`` takes any
object with the hooks' interface instead of a plan, e.g. an
:class:`~zeus_plugins_perseus.runtime.OnlineProfiler` that sweeps the clocks
during these same steps (online profiling).

What the engine will run is derived from the schedule itself before the first
step (its class, stage, stage count and microbatch count: :func:`engine_order`):
the plan's order of (instruction, microbatch) on this rank's stage must be the
same, else :class:`PlanMismatch` says where they part and which planner
schedule fits, instead of a step that runs clocks planned for other
instructions. During steps the hooks check every call again, microbatch
included, so an engine that drifts from the derived order fails its first step.

How it is applied: the stage's ``forward_one_chunk`` / ``backward_one_chunk``
(what every schedule calls per microbatch) and the schedule's ``step`` are
wrapped on these objects only. The clock is locked through a
:class:`~zeus_plugins_perseus.runtime.FrequencyController` process (journaled
by the device plugin), and reset when a step raises, when the wrapper closes
(``with``, ``close()``, interpreter exit), when this process dies (the
controller notices) and, after a SIGKILL of both, at the next ``zeus`` start.

Schedules: ``Schedule1F1B`` (planner schedule ``1f1b``) and ``ScheduleGPipe``
(``gpipe-fifo``: torch runs backwards first microbatch first). A schedule with
several stages per rank (interleaved) or split backwards (zero bubble) is
refused before the first step: a plan here is one ordered list per stage.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_plugins_perseus.runtime.controller import FrequencyController
from zeus_plugins_perseus.runtime.hooks import PerseusHooks, ScheduleError
from zeus_plugins_perseus.schedule import BACKWARD, FORWARD, SCHEDULES

if TYPE_CHECKING:
    from zeus_plugins_perseus.client import PlanClient

#: torch.distributed.pipelining schedule class -> the planner's schedule of the same order
TORCH_SCHEDULES = {"Schedule1F1B": "1f1b", "ScheduleGPipe": "gpipe-fifo"}
_NOTHING = object()


class PlanMismatch(ScheduleError):
    """The plan was made for another pipeline than the one the engine will run; raised before the first step."""


def engine_order(schedule: Any) -> list[tuple[str, int]]:
    """(instruction, microbatch) of every forward and backward this rank's schedule runs per step, in order.

    For the single-stage schedules the order is that of the planner schedule their
    ``_step_microbatches`` follows (``TORCH_SCHEDULES``), for this rank's stage,
    stage count and microbatch count: their ``pipeline_order`` is a drawing, not
    what runs (torch 2.13's Schedule1F1B draws the last stage starting at
    microbatch 1). The hooks hold every call of a step to this order, microbatch
    included, so an engine that drifts from it fails its first step.
    """
    stages = getattr(schedule, "_stages", None)
    name = type(schedule).__name__
    if stages is not None:
        if len(stages) != 1:
            raise PlanMismatch(
                f"{name} runs {len(stages)} stages on this rank; a Perseus plan holds one ordered "
                "list per stage: use Schedule1F1B or ScheduleGPipe"
            )
        raise PlanMismatch(f"{name} is not supported: use Schedule1F1B or ScheduleGPipe")
    planner = TORCH_SCHEDULES.get(name)
    if planner is None:
        raise PlanMismatch(f"{name} is not supported: use one of {', '.join(TORCH_SCHEDULES)}")
    stage = schedule._stage
    return SCHEDULES[planner](stage.num_stages, schedule._n_microbatches, stage.stage_index)


def check_plan(order: list[tuple[str, int]], planned: list[tuple[str, int]], *, stage: int, engine: str, plan_schedule: str | None) -> None:
    """Raise :class:`PlanMismatch` where the engine's (instruction, microbatch) order leaves the plan's."""
    fix = TORCH_SCHEDULES.get(engine)
    hint = (
        f"; plan with schedule = {fix!r}, the order torch's {engine} runs"
        if fix and fix != plan_schedule
        else "; plan for this pipeline's stages and microbatches"
    )
    made_for = f"schedule {plan_schedule!r}" if plan_schedule else "another pipeline"
    if len(order) != len(planned):
        raise PlanMismatch(
            f"stage {stage}: the plan ({made_for}) has {len(planned)} instructions per step, {engine} runs {len(order)} on this rank{hint}"
        )
    for k, (want, got) in enumerate(zip(planned, order)):
        if want != got:
            raise PlanMismatch(
                f"stage {stage}: instruction {k} of a step is the {want[0]} of microbatch {want[1]} in "
                f"the plan ({made_for}), but {engine} runs the {got[0]} of microbatch {got[1]} there{hint}"
            )


def _plan_file(plan: str | Path | dict, stage: int) -> tuple[list[tuple[str, int]], list[int], str | None, int]:
    import json

    data = plan if isinstance(plan, dict) else json.loads(Path(plan).read_text())
    stages = data.get("stages")
    if not isinstance(stages, list) or not 0 <= stage < len(stages):
        raise PlanMismatch(f"the plan has {len(stages) if isinstance(stages, list) else 0} stage(s); this rank runs stage {stage}")
    entry = stages[stage]
    insts, mbs, freqs = entry.get("instructions"), entry.get("microbatches"), entry.get("frequencies")
    if not (isinstance(insts, list) and isinstance(mbs, list) and isinstance(freqs, list) and len(insts) == len(mbs) == len(freqs)):
        raise PlanMismatch(
            f"stage {stage} of the plan needs equally long 'instructions', 'microbatches' and "
            "'frequencies' lists (a plan file written by zeus run)"
        )
    return [(str(i), int(f)) for i, f in zip(insts, freqs)], [int(m) for m in mbs], data.get("schedule"), len(stages)


class PerseusPipeline:
    """A ``torch.distributed.pipelining`` schedule whose steps run under Perseus hooks; see the module."""

    def __init__(
        self,
        schedule: Any,
        plan: str | Path | dict | None = None,
        *,
        device: Callable[[], Any] | None = None,
        controller: FrequencyController | None = None,
        hooks: Any = None,
        token: str | None = None,
        job_id: str | None = None,
        deadline_s: float | None = None,
        max_slowdown: float | None = None,
        synchronize: Callable[[], Any] | None = None,
    ) -> None:
        if (plan is None) == (hooks is None):
            raise ValueError("give a plan (a plan file or the plan server's URL) or hooks (e.g. an OnlineProfiler)")
        self.schedule = schedule
        self.stage = schedule._stages[0] if getattr(schedule, "_stages", None) else schedule._stage
        self.engine = type(schedule).__name__
        self.order = engine_order(schedule)  # before anything is started: a refused schedule leaves nothing behind
        self.client: PlanClient | None = None
        self.job_id = job_id
        self.controller = controller
        self._own_controller = False
        self._in_step = False
        self._patched: list[tuple[Any, str, Any]] = []
        if synchronize is None and getattr(self.stage.device, "type", "cpu") == "cuda":
            import torch

            where = self.stage.device
            synchronize = lambda: torch.cuda.synchronize(where)  # noqa: E731 - kernels end at their own clock
        try:
            if hooks is None:
                planned, microbatches = self._fetch_plan(plan, device, token, deadline_s, max_slowdown)
                assert self.controller is not None  # _fetch_plan started it
                hooks = PerseusHooks(planned, self.controller.set_frequency, synchronize=synchronize, microbatches=microbatches)
            self.hooks = hooks
            self._patch()
        except BaseException:
            self.close()
            raise

    # -- the plan --

    def _start_controller(self, device: Callable[[], Any] | None) -> FrequencyController:
        if self.controller is None:
            if device is None:
                raise ValueError(
                    "give device= (a picklable factory of the clock device, e.g. "
                    "functools.partial(open_device, 'nvml', {'gpus': [local_rank]})) or controller="
                )
            self.controller = FrequencyController(device)
            self._own_controller = True
        return self.controller

    def _fetch_plan(self, plan, device, token, deadline_s, max_slowdown):
        stage = self.stage.stage_index
        text = str(plan) if not isinstance(plan, dict) else ""
        if text.startswith(("http://", "https://")):
            controller = self._start_controller(device)
            info = self._from_server(text, token, deadline_s, max_slowdown, controller.supported_clocks or [])
            planned = [(str(i), int(f)) for i, f in info["schedule"]]
            microbatches, plan_schedule = [int(m) for m in info["microbatches"]], info.get("schedule_name")
            stages = int(info["stages_count"])
        else:
            planned, microbatches, plan_schedule, stages = _plan_file(plan, stage)
        if stages != self.stage.num_stages:  # other stages' orders may match, but the clocks were planned for another pipeline
            raise PlanMismatch(f"the plan is for {stages} stages; this pipeline has {self.stage.num_stages}")
        check_plan(
            self.order, list(zip((i for i, _ in planned), microbatches)), stage=stage, engine=self.engine, plan_schedule=plan_schedule
        )
        self._start_controller(device)
        return planned, microbatches

    def _from_server(self, url, token, deadline_s, max_slowdown, clocks) -> dict:
        import torch.distributed as dist

        from zeus_plugins_perseus.client import PlanClient

        name = TORCH_SCHEDULES.get(self.engine)
        if name is None:
            raise PlanMismatch(
                f"the plan server plans {sorted(SCHEDULES)}; {self.engine} is none of them (supported: {', '.join(TORCH_SCHEDULES)})"
            )
        st = self.stage
        client = self.client = PlanClient(url, token=token)
        if self.job_id is None:
            job = [None]
            if st.group_rank == 0:
                job = [
                    client.register_job(
                        pp_degree=st.num_stages,
                        microbatches=self.schedule._n_microbatches,
                        schedule=name,
                        deadline_s=deadline_s,
                        max_slowdown=max_slowdown,
                        metadata={"engine": f"torch.distributed.pipelining.{self.engine}"},
                    )
                ]
            group = st.group  # None: the default (world) group
            src = 0 if group is None else dist.get_global_rank(group, 0)
            dist.broadcast_object_list(job, src=src, group=group)
            self.job_id = job[0]
        job_id = self.job_id
        assert job_id is not None  # given, or registered by the group's rank 0 and broadcast
        client.register_rank(job_id, rank=st.group_rank, pp_rank=st.stage_index, available_frequencies=clocks)
        return client.schedule_info(job_id, st.group_rank)

    # -- wrapping the engine --

    def _patch(self) -> None:
        stage, schedule = self.stage, self.schedule
        for obj, name, wrapper in (
            (stage, "forward_one_chunk", self._instruction(stage.forward_one_chunk, FORWARD)),
            (stage, "backward_one_chunk", self._instruction(stage.backward_one_chunk, BACKWARD)),
            (schedule, "step", self._step(schedule.step)),
        ):
            self._patched.append((obj, name, vars(obj).get(name, _NOTHING)))  # what close() puts back
            setattr(obj, name, wrapper)

    def _instruction(self, run: Callable, name: str) -> Callable:
        def instruction(chunk_id, *args, **kwargs):
            if not self._in_step:  # schedule.eval() and anything else outside step(): untouched
                return run(chunk_id, *args, **kwargs)
            self.hooks.on_instruction_begin(name, int(chunk_id))
            out = run(chunk_id, *args, **kwargs)
            self.hooks.on_instruction_end(name)
            return out

        return instruction

    def _step(self, run: Callable) -> Callable:
        def step(*args, **kwargs):
            self.hooks.on_step_begin()
            self._in_step = True
            try:
                out = run(*args, **kwargs)
            except BaseException:
                self._in_step = False
                self._abort()
                raise
            self._in_step = False
            self.hooks.on_step_end()
            return out

        return step

    def _abort(self) -> None:
        """A step raised: the hooks forget it and the clocks go back to the driver's default."""
        abort = getattr(self.hooks, "abort_step", None)
        if callable(abort):
            abort()
        if self.controller is not None:
            self.controller.reset()

    def step(self, *args, **kwargs):
        """The schedule's ``step`` (the same as calling ``schedule.step``, which is wrapped)."""
        return self.schedule.step(*args, **kwargs)

    def close(self) -> None:
        """Unwrap the engine, reset the clocks and stop the controller (if this wrapper started it)."""
        for obj, name, before in reversed(self._patched):
            if before is _NOTHING:
                vars(obj).pop(name, None)  # the class's method is back
            else:
                setattr(obj, name, before)
        self._patched = []
        if self.controller is not None and self._own_controller:
            self.controller.close()
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> PerseusPipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def perseus_pipeline(schedule: Any, plan: str | Path | dict | None = None, **kwargs: Any) -> PerseusPipeline:
    """Run ``schedule`` (a ``torch.distributed.pipelining`` schedule of this rank) under a Perseus plan.

    ``plan``: a plan file or the plan server's URL; keyword arguments as
    :class:`PerseusPipeline` (``device``, ``controller``, ``hooks``, ``token``,
    ``job_id``, ``deadline_s``, ``max_slowdown``, ``synchronize``).
    """
    return PerseusPipeline(schedule, plan, **kwargs)
