"""Running a job from the user's own script rather than ``zeus run``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from zeus_core import JobSummary
from zeus_core.engine import Runner, get_registry, load_job, run_to_end, utc_now, write_outputs


def run_job(
    job_file: str | Path,
    train: Callable | None = None,
    *,
    overrides: Sequence[str] = (),
    fresh: bool = False,
    output: str | Path | None = None,
    console: Console | None = None,
) -> JobSummary:
    """Run ``job_file``'s recurrences with ``train(batch_size, zeus)`` as the workload.

    What upstream Zeus's data loader did from inside the training script: the
    script calls this once (``job.recurrences`` recurrences, continuing the
    job's stored history), or once per recurrence with
    ``overrides=["job.recurrences=1"]``. ``train`` must be importable by name
    (a module-level function; ``__main__`` is fine) so that the other ranks of
    a data-parallel job find it; guard the script with
    ``if __name__ == "__main__":``. Without ``train`` the job's
    ``[workload] entry`` is used. ``fresh`` starts the job over as ``zeus run --fresh`` does (in
    the job's first write, refused while other runners are in the middle of a recurrence).
    ``output``: a folder to write what ``zeus run --output`` writes there (``recurrences.csv``,
    ``summary.json``, the parts' files; on rank 0). Raises
    :class:`zeus_core.engine.validation.JobError` for a bad job file and
    :class:`zeus_core.RunFailed` when a try fails.
    """
    sets = list(overrides)
    if train is not None:
        sets += ['workload.plugin="torch"', f'workload.entry="{train.__module__}:{train.__qualname__}"']
    started = utc_now()
    reg = get_registry()
    spec = load_job(job_file, reg, sets)
    runner = Runner(spec, reg, console, fresh=fresh)

    def run() -> JobSummary:
        runner.build()
        return runner.run()

    ending = run_to_end(runner, run)  # the parts are closed (devices restored) whatever happened
    if ending.stopped is not None:  # Ctrl-C in the user's script: theirs to handle
        raise KeyboardInterrupt
    for failure in (ending.error, ending.close_error):
        if failure is not None:
            raise failure
    summary = ending.summary
    assert summary is not None  # a run that raised nothing has its summary
    if output is not None and runner.leads:
        write_outputs(runner, summary, Path(output), command="zeus_plugins_torch.run_job", started=started, fresh=fresh)
    return summary
