"""What a trace folder holds, and finding it from a job's options (numpy-free, for validation)."""

from __future__ import annotations

from zeus_core import FileChecks

#: The files of a trace folder, named as in the public NSDI'23 traces.
TRAIN_FILE = "summary_train.csv"
POWER_PATTERN = "summary_power_{gpu}.csv"


def missing_folder(folder) -> str:
    """What to say about a trace folder that does not exist (validation and loading alike)."""
    return (
        f"trace folder {folder} does not exist; create one with `zeus traces synth --out {folder}` "
        f'or `zeus traces fetch --out {folder}`, or set workload.traces = "synthetic"'
    )


def trace_folder(files: FileChecks, traces: str):
    """The ``traces`` folder to check (None: synthetic, written by an earlier part, or missing,
    which is then reported at the option's path)."""
    if traces == "synthetic":
        return None
    folder = files.path("traces", traces)
    if folder is not None and not folder.is_dir():
        files.problem("traces", missing_folder(folder))
        return None
    return folder
