"""Options of the ``trace`` device and workload (what their ``job.toml`` tables take).

Kept apart from the parts themselves so that validating a job (and loading the
plugin at all) needs only attrs, not numpy.
"""

from __future__ import annotations

import attrs

from zeus_core import NOT_IDENTITY, FileChecks
from zeus_core.unset import unset
from zeus_core.validators import finite, nonempty, nonnegative, positive
from zeus_plugins_trace.folders import trace_folder


def _gpu_name(_inst, attribute, value):
    if not value or not value.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"{attribute.name} must be a GPU name such as v100, a40, p100 or rtx6000, got {value!r}")


@attrs.define
class TraceDeviceOptions:
    """``[device] plugin = "trace"``: ``gpu`` names the power trace (``summary_power_{gpu}.csv``)."""

    gpu: str = attrs.field(default="v100", validator=_gpu_name)


@attrs.define
class TraceWorkloadOptions:
    """``[workload] plugin = "trace"``.

    ``traces``: a folder holding ``summary_train.csv`` and
    ``summary_power_{gpu}.csv`` (relative to the job file), or ``"synthetic"``
    for the synthetic model's traces made in memory (seed ``synthetic_seed``).
    ``dataset``/``model``/``optimizer`` select the workload in the traces.
    ``default_batch_size``: the user's batch size (0: the paper's for the six
    NSDI'23 workloads). ``iterations_per_epoch``: how finely an epoch is split
    for a power policy that acts between iterations (2520 divides evenly by
    every count of limits from 5 to 10).
    """

    traces: str = attrs.field(default="synthetic", validator=nonempty)
    dataset: str = attrs.field(default="cifar100", validator=nonempty)
    model: str = attrs.field(default="shufflenetv2", validator=nonempty)
    optimizer: str = attrs.field(default="adadelta", validator=nonempty)
    default_batch_size: int = attrs.field(default=0, validator=nonnegative, metadata=unset("the paper's for the workload"))
    iterations_per_epoch: int = attrs.field(default=2520, validator=positive, metadata=NOT_IDENTITY)
    synthetic_seed: int = 0

    def check_files(self, files: FileChecks) -> None:
        """The trace folder is read as the workload will read it (``zeus validate``): every
        file, line and column problem is reported with the job's other mistakes."""
        if trace_folder(files, self.traces) is None:
            return
        from zeus_plugins_trace.traces import TraceError
        from zeus_plugins_trace.tracesets import load_workload_trace

        device, job = files.options("device"), files.options("job")
        if not isinstance(device, TraceDeviceOptions) or job is None or job.target_metric is None:
            return  # the trace device and a target are reported missing elsewhere; the folder itself is there
        try:
            load_workload_trace(self, device.gpu, job.target_metric, files.job_dir)
        except TraceError as e:
            files.problem("traces", str(e))


@attrs.define
class ReplayWorkload:
    """``[[profiler.workloads]]``: what a group of one dataset trains, as the single-job trace
    workload's options (``model``, ``optimizer``, ``default_batch_size``) plus its target and
    epoch cap (one replay holds groups of several datasets, so these are per dataset)."""

    dataset: str = attrs.field(validator=nonempty)
    model: str = attrs.field(validator=nonempty)
    optimizer: str = attrs.field(validator=nonempty)
    target_metric: float = attrs.field(validator=finite)
    max_epochs: int = attrs.field(validator=positive)
    default_batch_size: int = attrs.field(validator=positive)


#: The six NSDI'23 workloads as the published Alibaba replay sets them up (its
#: ``get_job_with_defaults``); a default batch size above a GPU's largest traced one
#: becomes that one.
NSDI23_WORKLOADS = (
    ReplayWorkload("cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024),
    ReplayWorkload("imagenet", "resnet50", "adadelta", 0.65, 100, 256),
    ReplayWorkload("librispeech", "deepspeech2", "adamw", 40.0, 16, 256),
    ReplayWorkload("movielens-1m", "ncf", "adam", 0.41, 100, 1024),
    ReplayWorkload("squad", "bert_base_uncased", "adamw", 84.0, 6, 32),
    ReplayWorkload("sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128),
)

INFLIGHT_RULES = ("paper", "improved")


def _rules(_inst, attribute, value):
    bad = [r for r in value if r not in INFLIGHT_RULES]
    if bad or not value or len(set(value)) != len(value):
        raise ValueError(f"{attribute.name} must list distinct rules among {', '.join(map(repr, INFLIGHT_RULES))}, got {value!r}")


def _distinct_datasets(_inst, attribute, value):
    names = [w.dataset for w in value]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"{attribute.name} must name each dataset once (and at least one), got {names}")


@attrs.define
class AlibabaReplayOptions:
    """``[profiler] plugin = "alibaba"``: replay recurring groups whose jobs overlap in time.

    ``groups``: a group file (CSV ``group, start_time, end_time, dataset,
    runtime_ratio``; relative to the job file) or ``"synthetic"``:
    ``synthetic_groups`` groups from the generator, seeded by ``groups_seed``.
    ``traces``: the train/power trace folder, or ``"synthetic"`` (seed
    ``traces_seed``), as the trace workload's. ``inflight``: the rules for jobs
    submitted while others of their group run, replayed side by side (``paper``:
    the published simulator's; ``improved``: see the plugin's README).
    ``workloads``: what each dataset of the groups trains (default: the six
    NSDI'23 workloads). The batch-size policy is the job's ``[batch_size]`` table,
    one fresh instance per group; the GPU is the ``[device]`` trace device's.
    """

    groups: str = attrs.field(default="synthetic", validator=nonempty)
    synthetic_groups: int = attrs.field(default=100, validator=positive)
    groups_seed: int = 0
    traces: str = attrs.field(default="synthetic", validator=nonempty)
    traces_seed: int = 0
    inflight: list[str] = attrs.field(factory=lambda: list(INFLIGHT_RULES), validator=_rules)
    workloads: list[ReplayWorkload] = attrs.field(factory=lambda: list(NSDI23_WORKLOADS), validator=_distinct_datasets)

    def check_files(self, files: FileChecks) -> None:
        """The group file and the trace folder, read as the replay will (``zeus validate``)."""
        from zeus_plugins_trace.traces import TraceError

        if self.groups != "synthetic":
            path = files.path("groups", self.groups)
            if path is not None:
                from zeus_plugins_trace.groups import read_groups

                try:
                    read_groups(path, [w.dataset for w in self.workloads])
                except TraceError as e:
                    files.problem("groups", str(e))
        if trace_folder(files, self.traces) is None:
            return
        device = files.options("device")
        if isinstance(device, TraceDeviceOptions):
            from zeus_plugins_trace.tracesets import load_workload_traces

            try:
                load_workload_traces(self, device.gpu, files.job_dir)
            except TraceError as e:
                files.problem("traces", str(e))
