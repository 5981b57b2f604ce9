"""Options of the ``trace`` device and workload (what their ``job.toml`` tables take).

Kept apart from the parts themselves so that validating a job (and loading the
plugin at all) needs only attrs, not numpy.
"""

from __future__ import annotations

import attrs

from zeus_core import NOT_IDENTITY, FileChecks
from zeus_core.validators import nonempty, nonnegative, positive


#: The files of a trace folder, named as in the public NSDI'23 traces.
TRAIN_FILE = "summary_train.csv"
POWER_PATTERN = "summary_power_{gpu}.csv"


def missing_folder(folder) -> str:
    """What to say about a trace folder that does not exist (validation and loading alike)."""
    return (f"trace folder {folder} does not exist; create one with `zeus traces synth --out {folder}` "
            f"or `zeus traces fetch --out {folder}`, or set workload.traces = \"synthetic\"")


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
    default_batch_size: int = attrs.field(default=0, validator=nonnegative)
    iterations_per_epoch: int = attrs.field(default=2520, validator=positive, metadata=NOT_IDENTITY)
    synthetic_seed: int = 0

    def check_files(self, files: FileChecks) -> None:
        """The trace folder is read as the workload will read it (``zeus validate``): every
        file, line and column problem is reported with the job's other mistakes."""
        if self.traces == "synthetic":
            return
        folder = files.path("traces", self.traces)
        if folder is None:
            return
        if not folder.is_dir():
            files.problem("traces", missing_folder(folder))
            return
        from zeus_plugins_trace.traces import TraceError
        from zeus_plugins_trace.workload import load_workload_trace

        device, job = files.options("device"), files.options("job")
        if not isinstance(device, TraceDeviceOptions) or job is None or job.target_metric is None:
            return  # the trace device and a target are reported missing elsewhere; the folder itself is there
        try:
            load_workload_trace(self, device.gpu, job.target_metric, files.job_dir)
        except TraceError as e:
            files.problem("traces", str(e))
