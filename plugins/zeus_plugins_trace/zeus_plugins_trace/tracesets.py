"""A job's traces, from a trace folder or from the synthetic model, selected for its workloads.

What the workload, the Alibaba replay and their options' checks (``zeus validate``)
read alike; the options classes are described by the fields read here, so this
module needs none of the plugin's parts.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from zeus_plugins_trace.synth import synthetic_traces
from zeus_plugins_trace.traces import TraceSet, WorkloadTrace, load_traces, select


class WorkloadChoice(Protocol):
    """A workload chosen in a trace: ``[workload]`` options, or one of a replay's ``workloads``."""

    dataset: str
    model: str
    optimizer: str


class TracedWorkload(WorkloadChoice, Protocol):
    """The trace workload's options: where its traces are and what it trains."""

    traces: str
    synthetic_seed: int


class ReplayedWorkload(WorkloadChoice, Protocol):
    """One workload of a replay, with its target."""

    target_metric: float


class ReplaySource(Protocol):
    """The Alibaba replay's options: where its traces are and what each dataset trains."""

    traces: str
    traces_seed: int

    @property
    def workloads(self) -> Iterable[ReplayedWorkload]: ...


def load_trace_set(traces: str, synthetic_seed: int, gpu: str, job_dir: Path) -> TraceSet:
    """``gpu``'s trace pair from the folder ``traces`` (relative to ``job_dir``), or the synthetic model's."""
    if traces == "synthetic":
        return synthetic_traces(gpu, synthetic_seed)
    folder = Path(traces).expanduser()
    return load_traces(folder if folder.is_absolute() else job_dir / folder, gpu)


def load_workload_trace(options: TracedWorkload, gpu: str, target_metric: float, job_dir: Path) -> WorkloadTrace:
    """The arrays of the job, from a folder or from the synthetic model."""
    traces = load_trace_set(options.traces, options.synthetic_seed, gpu, job_dir)
    return select(traces, options.dataset, options.model, options.optimizer, target_metric)


def load_workload_traces(options: ReplaySource, gpu: str, job_dir: Path) -> dict[str, WorkloadTrace]:
    """Each workload's arrays on ``gpu``, from the trace folder or the synthetic model."""
    traces = load_trace_set(options.traces, options.traces_seed, gpu, job_dir)
    return {w.dataset: select(traces, w.dataset, w.model, w.optimizer, w.target_metric) for w in options.workloads}
