"""Upstream's ``PipelineFrequencyOptimizer`` on ``zeus-plugins-perseus``: profile, plan, then run the plan.

A training framework constructs it on every rank (upstream's arguments) and calls
``on_step_begin()`` / ``on_step_end()`` around each iteration and
``on_instruction_begin(name)`` / ``on_instruction_end(name)`` around each forward and backward
of a microbatch, as with upstream. What happens behind those calls:

1. **Profiling** (``profile=True``, the default): the rank's GPU sweeps its SM clocks, highest
   first, ``warmup_steps + profile_steps`` iterations each (``OnlineProfiler`` of the perseus
   plugin); each forward and backward of the profiled iterations is one measurement window of
   the core's monitor. The ranks agree after every iteration whether all of them are done (one
   ``all_gather_object``), so they leave profiling at the same iteration. With
   ``profile=False`` one iteration runs at the highest clock instead, and the server plans on
   the profile it was started with (``zeus perseus serve --profile``).
2. **Planning**: from the instruction order the engine ran, the ranks learn the microbatch count
   and the pipeline schedule (``1f1b``, ``gpipe``, ``gpipe-fifo``, unless given); rank 0 registers
   the job with the plan server (``zeus perseus serve``) and broadcasts its id, every rank
   registers with the SM clocks its GPU supports and uploads its (instruction, clock, time,
   energy) means, and every rank fetches its stage's schedule: ``[(instruction, MHz), ...]`` of
   the plan the Perseus planner chose (``max_slowdown`` / ``deadline_s``).
3. **Running the plan**: each ``on_instruction_begin`` synchronises the GPU, checks that the
   engine runs the instruction the schedule expects next (upstream's ``RuntimeError`` otherwise)
   and locks its SM clock through the :class:`FrequencyController` before returning;
   ``on_step_end`` checks the iteration ran the whole schedule and starts it again.
"""

from __future__ import annotations

import os
from typing import Any

from zeus.callback import Callback
from zeus.device import get_gpus
from zeus.optimizer.pipeline_frequency.common import JobInfo, RankInfo
from zeus.optimizer.pipeline_frequency.frequency_controller import FrequencyController
from zeus.utils.framework import sync_execution

__all__ = ["PipelineFrequencyOptimizer"]

TOKEN_ENV = "ZEUS_PERSEUS_TOKEN"


class PipelineFrequencyOptimizer(Callback):
    """Pipeline frequency optimizer (Perseus): per-instruction GPU frequencies from the plan server."""

    def __init__(
        self,
        rank: int,
        dp_rank: int,
        pp_rank: int,
        tp_rank: int,
        device_id: int,
        dp_degree: int,
        pp_degree: int,
        tp_degree: int,
        world_size: int,
        server_url: str,
        job_metadata: str | None = None,
        *,
        profile: bool = True,
        frequencies: list[int] | None = None,
        min_frequency: int = 0,
        warmup_steps: int = 1,
        profile_steps: int = 2,
        stop_after_rises: int = 0,
        schedule: str | None = None,
        max_slowdown: float | None = None,
        deadline_s: float | None = None,
        blocking_power_w: float | None = None,
        token: str | None = None,
    ) -> None:
        """Initialize the optimizer on this rank (upstream's arguments, then this package's keywords).

        Assumes ``torch.distributed`` is initialised (as upstream); ``torch.cuda.set_device(device_id)``
        is called where CUDA is available.

        Args:
            rank: Global rank of the current process.
            dp_rank: Rank in the data parallel group.
            pp_rank: Rank in the pipeline parallel group (the pipeline stage).
            tp_rank: Rank in the tensor parallel group.
            device_id: CUDA device ID that the current process manages.
            dp_degree: Size of the data parallel group.
            pp_degree: Size of the pipeline parallel group.
            tp_degree: Size of the tensor parallel group.
            world_size: Total number of ranks that participate in training.
            server_url: URL of the plan server (``zeus perseus serve``), e.g. ``http://127.0.0.1:7787``.
            job_metadata: An optional string that describes the job (sent as the job's metadata).
            profile: Profile every instruction at each SM clock before planning (else the server's
                own profile is planned on).
            frequencies: SM clocks (MHz) to profile; default: every clock the GPU supports.
            min_frequency: Lowest SM clock (MHz) to profile.
            warmup_steps: Iterations per clock before it is measured.
            profile_steps: Iterations measured per clock.
            stop_after_rises: End a rank's sweep once every instruction's energy rose this many clocks
                in a row (0: sweep every clock).
            schedule: The pipeline schedule the engine runs (``"1f1b"``, ``"gpipe"``, ``"gpipe-fifo"``);
                default: learned from the order of instructions the engine runs.
            max_slowdown: Choose the least-energy plan within this factor of the all-max-clock time.
            deadline_s: Choose the least-energy plan within this iteration time (seconds).
            blocking_power_w: Power (W) a GPU draws while blocked on pipeline communication; default:
                the server's.
            token: The plan server's bearer token; default ``$ZEUS_PERSEUS_TOKEN``.
        """
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("Instantiate `PipelineFrequencyOptimizer` after `init_process_group`.")
        from zeus_plugins_perseus.client import PlanClient
        from zeus_plugins_perseus.runtime.profiler import OnlineProfiler

        # upstream's checks of the degrees (world_size = pp x dp x tp), before anything starts
        self.job_info = JobInfo(
            pp_degree=pp_degree, dp_degree=dp_degree, tp_degree=tp_degree, world_size=world_size, job_metadata=job_metadata
        )
        self.server_url = server_url
        self.rank = rank
        self.dp_rank = dp_rank
        self.pp_rank = pp_rank
        self.tp_rank = tp_rank
        self.device_id = device_id
        self.job_id: str | None = None
        self._schedule_name = schedule
        self._planning = {"max_slowdown": max_slowdown, "deadline_s": deadline_s, "blocking_power_w": blocking_power_w}

        gpus = get_gpus()
        if torch.cuda.is_available():
            torch.cuda.set_device(device_id)
        self.frequency_controller = FrequencyController(device_id=device_id)
        freqs = self.frequency_controller.supported_frequencies
        self.rank_info = RankInfo(rank=rank, dp_rank=dp_rank, pp_rank=pp_rank, tp_rank=tp_rank, available_frequencies=freqs)
        self._client = PlanClient(server_url, token=token if token is not None else os.environ.get(TOKEN_ENV))

        #: the instruction profiler of the sweep (None with ``profile=False``)
        self.profiler: Any = None
        if profile:
            self.profiler = OnlineProfiler(
                gpus._gpu(device_id).group,
                stage=pp_rank,
                frequencies=frequencies or freqs,
                warmup_steps=warmup_steps,
                profile_steps=profile_steps,
                stop_after_rises=stop_after_rises,
                min_frequency=min_frequency,
                set_frequency=self.frequency_controller.set_frequency,
                reset=self.frequency_controller.reset,
            )
        #: (instruction, MHz) of one iteration, from the server; None until planned
        self.freq_schedule: list[tuple[str, int]] | None = None
        self.freq_schedule_iter: Any = None
        #: the plan server's whole answer (the plan's index, planned and emulated time and energy)
        self.schedule_info: dict[str, Any] | None = None
        self._order: list[str] = []
        self._step_order: list[str] = []
        self._in_step = False

    # -- hooks --

    @property
    def planned(self) -> bool:
        """True once the schedule from the plan server is being run."""
        return self.freq_schedule is not None

    def on_step_begin(self) -> None:
        """Mark the beginning of a step."""
        if self.planned or self._in_step:
            return
        self._in_step = True
        self._step_order = []
        if self.profiler is not None:
            self.profiler.on_step_begin()

    def on_step_end(self) -> None:
        """Mark the end of a step: during profiling, the ranks agree whether to plan now; once
        planned, the step must have run the whole schedule (upstream's check)."""
        if self.planned:
            item = next(self.freq_schedule_iter, None)
            if item is not None:
                raise RuntimeError(f"PFO server returned more frequencies than expected. Next expected instruction and frequency is {item}")
            assert self.freq_schedule is not None  # planned
            self.freq_schedule_iter = iter(self.freq_schedule)
            return
        if not self._in_step:
            self.on_step_begin()
        self._in_step = False
        if self.profiler is not None:
            self.profiler.on_step_end()
        if self._order and self._step_order != self._order:
            raise RuntimeError(
                f"rank {self.rank} ran {self._step_order} in this step but {self._order} in the "
                "one before: a pipeline step must run the same instructions each time"
            )
        self._order = self._step_order
        import torch.distributed as dist

        done = [None] * dist.get_world_size()
        dist.all_gather_object(done, self.profiler is None or self.profiler.done)
        if all(done):
            self._plan()

    def on_instruction_begin(self, name: str) -> None:
        """Mark the beginning of an instruction (``"forward"``, ``"backward"``); once planned, lock its clock."""
        if not self.planned:
            if not self._in_step:
                self.on_step_begin()
            self._step_order.append(name)
            if self.profiler is not None:
                self.profiler.on_instruction_begin(name)
            return
        sync_execution([self.device_id], sync_with="torch")
        item = next(self.freq_schedule_iter, None)
        if item is None:
            raise RuntimeError("PFO server returned fewer frequencies than expected")
        instruction, frequency = item
        if instruction != name:
            raise RuntimeError(f"The next expected instruction is not {name}: {instruction}")
        self.frequency_controller.set_frequency(frequency)

    def on_instruction_end(self, name: str) -> None:
        """Mark the end of an instruction."""
        if not self.planned and self.profiler is not None:
            self.profiler.on_instruction_end(name)

    def close(self) -> None:
        """Stop the frequency controller (it resets the clocks) and the server connection."""
        self.frequency_controller.end()
        self._client.close()

    # -- planning --

    def _plan(self) -> None:
        import torch.distributed as dist

        from zeus_plugins_perseus.schedule import SCHEDULES

        world = dist.get_world_size()
        orders: list[Any] = [None] * world
        dist.all_gather_object(orders, (self.pp_rank, self._order))
        microbatches = self._order.count("forward")
        name, problem = self._schedule_name, None
        if name is None:
            fits = [
                s
                for s, order_of in SCHEDULES.items()
                if all(o == [i for i, _ in order_of(self.job_info.pp_degree, microbatches, stage)] for stage, o in orders)
            ]
            if fits:
                name = fits[0]
            else:
                problem = (
                    f"the instructions the ranks ran ({orders[:4]}{'...' if world > 4 else ''}) follow none of the "
                    f"schedules {sorted(SCHEDULES)} with {microbatches} microbatches; pass schedule="
                )
        job_id, error = None, problem
        if self.rank == 0 and problem is None:
            try:
                metadata = {"job_metadata": self.job_info.job_metadata} if self.job_info.job_metadata else None
                job_id = self._client.register_job(
                    pp_degree=self.job_info.pp_degree,
                    dp_degree=self.job_info.dp_degree,
                    tp_degree=self.job_info.tp_degree,
                    world_size=self.job_info.world_size,
                    microbatches=microbatches,
                    schedule=name,
                    metadata=metadata,
                    **self._planning,
                )
            except Exception as e:  # noqa: BLE001 - every rank raises it below
                error = str(e)
        shared = [job_id, error]
        dist.broadcast_object_list(shared, src=0)
        self.job_id, error = shared
        if error is not None or self.job_id is None:
            raise RuntimeError(f"Failed to register the job with the plan server: {error}")
        try:
            self._client.register_rank(
                self.job_id,
                rank=self.rank,
                pp_rank=self.pp_rank,
                dp_rank=self.dp_rank,
                tp_rank=self.tp_rank,
                available_frequencies=self.rank_info.available_frequencies,
            )
            if self.profiler is not None:
                self._client.upload_profile(self.job_id, self.rank, self.profiler.measurements())
            error = None
        except Exception as e:  # noqa: BLE001 - every rank raises it below
            error = f"rank {self.rank}: {e}"
        errors: list[Any] = [None] * world
        dist.all_gather_object(errors, error)  # every upload is in before any rank asks for its plan
        if any(errors):
            raise RuntimeError("; ".join(e for e in errors if e))
        self.schedule_info = self._client.schedule_info(self.job_id, self.rank)
        schedule = [(str(i), int(f)) for i, f in self.schedule_info["schedule"]]
        if [i for i, _ in schedule] != self._order:
            raise RuntimeError(
                f"PFO server returned a schedule of {[i for i, _ in schedule]} for rank {self.rank}, which runs {self._order}"
            )
        self.freq_schedule = schedule
        self.freq_schedule_iter = iter(schedule)
