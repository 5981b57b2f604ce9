"""The ``zeus`` command: run, validate, report, plugins (and what plugins add).

Exit status: 0 success, 1 a failure while running, 2 bad input (job file,
options, plugins that do not fit together): the ``exit_code`` of the
:class:`~zeus_core.ZeusError` that ended the command (:func:`exit_code_of`).
All terminal output goes through rich: a command's result on its results console,
errors on its error console; diagnostics go to the ``zeus`` loggers. ``-q`` / ``-v``
(or ``ZEUS_LOG_LEVEL``) before the command say how much shows
(:func:`~zeus_core.cli.consoles.verbosity_options`).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import sys
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from zeus_core import units
from zeus_core.cli.consoles import make_console, requested_level, verbosity_options
from zeus_core.engine.lifecycle import SIGNAL_EXIT, Interrupts, Terminated, stopped_by
from zeus_core.engine.registry import CORE_PLUGIN, Registry, get_registry
from zeus_core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, PluginError, ZeusError
from zeus_core.files import cannot_write
from zeus_core.journal import journal_path, restore_pending
from zeus_core.parts import Reports
from zeus_core.results import JobSummary, TryRecord

# What only some commands need (the job-file validation, rich's tables, provenance) loads in those
# commands, so that ``zeus --help`` and ``zeus plugins`` start fast.
if TYPE_CHECKING:
    from datetime import datetime

    from rich.console import Console
    from rich.table import Table

    from zeus_core.backends import JobStore
    from zeus_core.engine.runner import Runner
    from zeus_core.engine.validation import JobError
    from zeus_core.job import JobSpec

console = make_console()
err_console = make_console(stderr=True)


def registry() -> Registry:
    return click.get_current_context().obj["registry"]


def fail(message: str, code: int) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    sys.exit(code)


def report_error(e: ZeusError) -> int:
    """Print a :class:`~zeus_core.ZeusError` as the end of a command; its exit status."""
    label = "error" if e.exit_code == EXIT_BAD_INPUT else "run failed"
    err_console.print(f"[bold red]{label}:[/] {escape(str(e))}")
    return e.exit_code


def print_job_errors(e: JobError) -> None:
    n = len(e.problems)
    err_console.print(f"[bold red]{n} error{'s' if n != 1 else ''} in {escape(e.source)}:[/]")
    for line in e.format_lines():
        err_console.print(escape(line), highlight=False, soft_wrap=True)


def _version_text(reg: Registry) -> str:
    lines = [f"zeus-core {reg.distribution_of(CORE_PLUGIN)[1]}", "registered plugins:"]
    for p in reg.plugins():
        lines.append(f"  {p.name}: {p.distribution} {p.version}")
    return "\n".join(lines)


def _print_version(ctx: click.Context, _param: Any, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    console.print(_version_text(ctx.obj["registry"]), highlight=False)
    ctx.exit(0)


#: The core's commands that live in modules of their own, by name: imported when a command line names one.
LAZY_COMMANDS = {
    "env": "zeus_core.cli.env:env_command",
    "monitor": "zeus_core.cli.monitor:monitor_command",
    "store": "zeus_core.cli.store:store_group",
    "daemon": "zeus_core.cli.daemon:daemon_command",
    "slurm": "zeus_core.cli.slurm:slurm_group",
    "profile": "zeus_core.cli.profile:profile_command",
}
#: Registries whose plugins have added their commands (``zeus_register_commands``) to the group.
_commands_added: weakref.WeakSet[Registry] = weakref.WeakSet()


class ZeusGroup(click.Group):
    """The ``zeus`` group. The core's commands of other modules (:data:`LAZY_COMMANDS`) and the
    plugins' commands (``zeus_register_commands``, with the registry of the command line) are added
    when the command line names one of them, or when every command is listed (``zeus --help``):
    ``zeus run`` imports neither ``zeus monitor`` nor a plugin's server."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if cmd_name in LAZY_COMMANDS:
                self._add_lazy(cmd_name)
            else:
                self._add_plugin_commands(ctx)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """The command; Ctrl-C in a command that does not handle it itself ends with the status that
        names SIGINT (130), as ``zeus run`` does, not click's "Aborted!" and 1."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo(err=True)  # ends the terminal's ^C line
            click.echo("zeus: interrupted by SIGINT", err=True)
            ctx.exit(SIGNAL_EXIT[signal.SIGINT])

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name in LAZY_COMMANDS:
            if name not in self.commands:
                self._add_lazy(name)
        self._add_plugin_commands(ctx)
        return super().list_commands(ctx)

    def _add_lazy(self, name: str) -> None:
        module, _, attr = LAZY_COMMANDS[name].partition(":")
        self.add_command(getattr(importlib.import_module(module), attr), name)

    def _add_plugin_commands(self, ctx: click.Context) -> None:
        obj = ctx.find_root().obj
        reg = obj.get("registry") if isinstance(obj, dict) else None
        if reg is None or reg in _commands_added:
            return
        _commands_added.add(reg)
        try:
            reg.pm.hook.zeus_register_commands(cli=self)
        except Exception as e:  # a plugin's command registration failed
            fail(f"a plugin failed to add its commands: {type(e).__name__}: {e}", EXIT_BAD_INPUT)


@click.group(cls=ZeusGroup, context_settings={"help_option_names": ["-h", "--help"]})
@verbosity_options
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version of zeus-core and of every registered plugin.",
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Measure and cut the GPU energy of DNN training, one plugin at a time."""
    _restore_left_behind(ctx.obj["registry"])


def _restore_left_behind(reg: Registry) -> None:
    """Put back the settings a SIGKILLed zeus process left changed, before the command runs (and
    after ``-q`` / ``-v`` configured the ``zeus`` loggers, which say what was restored)."""
    try:
        restore_pending(reg.restorers)
    except Exception as e:  # noqa: BLE001 - never block the command on this
        logging.getLogger("zeus.journal").error(
            "could not check the settings journal %s: %s (the command goes on; if the file is damaged, move it "
            "aside: the settings it records are then not put back by zeus)",
            journal_path(),
            e,
        )


# --------------------------------------------------------------------------- plugins


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_cmd(as_json: bool) -> None:
    """List installed plugins: distribution, version, hooks, and the names each provides."""
    from rich.table import Table

    from zeus_core.daemon.status import privileged_path_note

    infos = registry().plugins()
    if as_json:
        click.echo(json.dumps([p.to_json() for p in infos], indent=2))
        return
    # One column of "label: values" lines, the hooks last, and a rule between plugins: lines of names and of
    # hooks side by side would read as pairs, which they are not (a hook may provide several kinds, or none).
    table = Table(title="zeus plugins", show_lines=True)
    for col in ("plugin", "distribution", "version", "what it provides (kind: names), and the hooks it implements"):
        table.add_column(col)
    for p in infos:
        lines = [f"{k}: {escape(', '.join(v))}" for k, v in p.provides.items()]
        lines.append(f"[dim]hooks: {escape(', '.join(p.hooks)) or '-'}[/]")
        table.add_row(p.name, p.distribution, p.version, "\n".join(lines))
    console.print(table)
    note = privileged_path_note(registry())
    if note:
        console.print(escape(note), highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------- validate


@cli.command("validate")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a value, e.g. job.seed=3.")
def validate_cmd(job_file: Path, sets: tuple[str, ...]) -> None:
    """Check a job file and report every mistake, each with its line and path."""
    from zeus_core.engine.validation import JobError, load_job

    try:
        spec = load_job(job_file, registry(), sets)
    except JobError as e:
        print_job_errors(e)
        sys.exit(EXIT_BAD_INPUT)
    parts = ", ".join(f"{s}={p.plugin}" for s, p in spec.parts.items())
    console.print(f"[green]ok[/] {escape(str(job_file))}: job {spec.job.name!r} ({parts})")
    _print_deferred(spec)


def _print_deferred(spec: JobSpec) -> None:
    """What validation left to the run: files an earlier part writes, a store server that is down,
    a store that learned another job (the run then needs ``--fresh``)."""
    for note in spec.deferred:
        console.print(f"[yellow]deferred[/] {escape(note)}", highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------- run


def _dry_run(spec: JobSpec) -> None:
    from rich.table import Table

    from zeus_core.engine.stores.locations import mask
    from zeus_core.engine.validation import resolved_values

    table = Table(title=f"job {spec.job.name!r}: resolved configuration")
    table.add_column("key")
    table.add_column("value")
    table.add_column("from")
    colors = {"default": "dim", "file": "cyan", "--set": "bold yellow"}
    for path, value, origin, unset in resolved_values(spec):
        shown = mask(value) if isinstance(value, str) else value  # a store URL's password, a token
        table.add_row(path, escape(unset or repr(shown)), f"[{colors[origin]}]{origin}[/]")
    console.print(table)
    console.print(f"store: {escape(mask(spec.store_location()))}")
    _print_deferred(spec)


def _recurrence_line(rec: int, records: list) -> str:
    last = records[-1]
    cost = sum(r.cost for r in records if r.epochs > 0)
    tries = " ".join(f"{r.batch_size}@{'-' if r.power_limit is None else f'{r.power_limit:g}W'}{'' if r.reached else '✗'}" for r in records)
    return (
        f"recurrence {rec}: {tries}  epochs={sum(r.epochs for r in records)} "
        f"cost={units.si(cost, 'J')} {'reached' if last.reached else 'not reached'}"
    )


class RunProgress:
    """The progress of ``zeus run``: on a terminal, one live line (a bar, the count, the time, the last
    recurrence) that is gone when the run ends; with ``full_lines`` (output piped, ``-v``) one line per
    recurrence, kept, and no bar."""

    def __init__(self, console: Console, name: str, total: int, full_lines: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.full_lines = full_lines
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[last]}"),
            console=console,
            transient=True,
            disable=full_lines,
        )
        self.task = self.progress.add_task(name, total=total, last="")

    def __enter__(self) -> RunProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def on_progress(self, kind: str, info: dict[str, Any]) -> None:
        """The runner's progress callback: a recurrence ended."""
        line = _recurrence_line(info["recurrence"], info["records"])
        if self.full_lines:
            self.console.print(escape(line), highlight=False, soft_wrap=True)
        self.advance(last=escape(line))

    def advance(self, last: str = "") -> None:
        self.progress.update(self.task, advance=1, last=last)


def _full_lines() -> bool:
    """Whether ``zeus run`` prints a line per recurrence: output that is not a terminal, or ``-v`` (info or below)."""
    return not console.is_terminal or requested_level(click.get_current_context()) < logging.WARNING


#: Recurrences the closing table shows on a terminal (the latest; the rest are counted in a row above them).
TERMINAL_ROWS = 25


def _closing_table(summary: JobSummary) -> Table:
    from rich.table import Table

    by_rec: dict[int, list] = {}
    for r in summary.records:
        by_rec.setdefault(r.recurrence, []).append(r)
    begun = "" if summary.begun is None or summary.begun == summary.recurrences else f" of {summary.begun} begun"
    table = Table(title=f"job {summary.job!r}: {summary.recurrences} recurrences{begun}, {summary.tries} tries")
    # A job charged against the grid shows its emissions and money next to its energy.
    grid = [(key, label) for key, label in _grid_labels(summary) if key in summary.grid]
    for col in (
        "recurrence",
        "tries",
        "batch size",
        "power limit (W)",
        "epochs",
        "time",
        "energy",
        *(label for _, label in grid),
        "cost (J)",
        "reached",
    ):
        table.add_column(col, justify="right")
    recs = sorted(by_rec)
    shown = recs[-TERMINAL_ROWS:] if console.is_terminal else recs  # piped (CI logs, | tee): whole
    if len(recs) > len(shown):
        table.add_row(f"... {len(recs) - len(shown)} earlier", "", "", "", "", "", "", *("" for _ in grid), "", "")
    for rec in shown:
        rs = by_rec[rec]
        last = rs[-1]
        table.add_row(
            str(rec),
            str(len(rs)),
            str(last.batch_size),
            "-" if last.power_limit is None else f"{last.power_limit:g}",
            str(sum(r.epochs for r in rs)),
            units.duration(sum(r.time_s for r in rs)),
            _energy_cell(rs),
            *(_grid_cell(rs, key) for key, _ in grid),
            units.si(sum(r.cost for r in rs), "J"),
            "yes" if last.reached else "no",
        )
    table.add_section()
    table.add_row(
        "total",
        str(summary.tries),
        "",
        "",
        str(sum(r.epochs for r in summary.records)),
        units.duration(summary.time_s),
        _energy_cell(summary.records, summary.energy_j),
        *(_grid_text(key, summary.grid[key]) for key, _ in grid),
        units.si(summary.cost, "J"),
        "",
    )
    return table


def _energy_cell(records: list[TryRecord], joules: float | None = None) -> str:
    """The tries' energy, with its +/- bound (the sum of theirs: ``4.45 MJ ± 3 kJ``) where every try
    recorded one (issue 37); ``joules`` is their total where the caller has it summed already."""
    text = units.energy(sum(r.energy_j for r in records) if joules is None else joules)
    errors = [e for e in (r.energy_error_j for r in records) if e is not None]
    if records and len(errors) == len(records):
        text += f" ± {units.si(sum(errors), 'J')}"
    return text


def _grid_labels(summary: JobSummary) -> list[tuple[str, str]]:
    """(column, table heading) of the summary's grid totals: emissions, then money."""
    out = [("carbon_g", "carbon")]
    out += [(key, f"cost ({key[len('cost_') :].upper()})") for key in summary.grid if key.startswith("cost_")]
    return out


def _grid_cell(records: list, key: str) -> str:
    """A recurrence's total of grid column ``key`` ("-" when a try of it was not charged)."""
    if not all(key in r.grid for r in records):
        return "-"
    return _grid_text(key, sum(r.grid[key] for r in records))


def _grid_text(key: str, value: float) -> str:
    """Emissions in human units (:func:`zeus_core.units.carbon`), money to the cent."""
    return units.carbon(value) if key == "carbon_g" else f"{value:,.2f}"


#: In the click context's ``obj``: the command runs in the ``zeus`` process itself (:func:`main`), which
#: exits when it returns (not in a caller's process, such as a test's CliRunner).
OWNS_PROCESS = "owns_process"


def _exit_at_once(signum: int, _frame: Any) -> None:
    """A signal once the command's work is done and written (the process is exiting): nothing is left to
    stop, so exit now with the status that names the signal, after restoring any setting still held."""
    from zeus_core.journal import restore_all_guards

    restore_all_guards()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(SIGNAL_EXIT[signal.Signals(signum)])


def _exit_at_once_on_signals() -> None:
    """For the rest of the process's life (its exit: atexit handlers, threads joined), a signal that is
    not ignored exits at once with 128 + its number instead of dying of it or raising where nothing catches."""
    for s in SIGNAL_EXIT:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _exit_at_once)


def _check_output(output: Path | None) -> None:
    """``--output`` must be a folder this process can write, found before any work is done."""
    if output is None:
        return
    try:
        output.mkdir(parents=True, exist_ok=True)
        probe = output / f".zeus-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        fail(f"--output {output}: cannot write there ({e.strerror or e}); choose a folder you can write", EXIT_BAD_INPUT)


def _load(job_file: Path, sets: tuple[str, ...], keep: list[JobStore] | None = None) -> JobSpec:
    """The validated job (every problem printed, exit 2); ``keep``: receives the store its check opened."""
    from zeus_core.engine.validation import JobError, load_job

    try:
        return load_job(job_file, registry(), sets, keep=keep)
    except JobError as e:
        print_job_errors(e)
        sys.exit(EXIT_BAD_INPUT)


def _make_runner(spec: JobSpec, fresh: bool = False, wait: bool = False, store: Any = None) -> Runner:
    from zeus_core.engine.runner import Runner

    try:
        return Runner(spec, registry(), console, store=store, fresh=fresh, wait=wait)
    except ZeusError as e:
        sys.exit(report_error(e))


def _since(t: float | None) -> str:
    from datetime import datetime

    return "" if t is None else f" since {datetime.fromtimestamp(t).astimezone():%Y-%m-%d %H:%M %Z}".rstrip()


def _continuing_line(runner: Runner, fresh: bool) -> str | None:
    """Before a run that continues a job whose store holds recurrences: how many, since when, what this
    run adds, and how to start over (None for a new job, or with --fresh)."""
    from zeus_core.engine.history import ledger

    if fresh or "workload" not in runner.parts or runner.store is None:
        return None
    account = ledger(runner.store)
    if account.begun <= 0:
        return None
    n = runner.spec.job.recurrences
    return (
        f"continuing job {runner.spec.job.name!r}: its store {runner.store.location} holds recurrences 1-{account.begun}"
        f"{_since(account.first_began)}; this run adds {n} more (from {account.begun + 1} on); "
        "`zeus run --fresh` starts the job over"
    )


def _so_far_line(summary: JobSummary) -> str:
    """What this command ran against what the job holds (the table and the files cover the whole job)."""
    so_far = (
        f"the job so far: {summary.recurrences} recurrence{'s' if summary.recurrences != 1 else ''}"
        f"{_since(summary.first_began)}, {summary.tries} {'try' if summary.tries == 1 else 'tries'} (the table and the files "
        "cover all of them)"
    )
    if summary.this_run is None:
        return f"this command ran nothing; {so_far}"
    tries = summary.this_run.tries
    return f"this run: {summary.this_run.describe()}, {tries} {'try' if tries == 1 else 'tries'}; {so_far}"


def _account_lines(summary: JobSummary) -> list[str]:
    """What became of recurrence numbers that have no try that reached the target."""
    lines = []
    if summary.abandoned:
        shown = ", ".join(f"{a['recurrence']} ({a['reason']})" for a in summary.abandoned[-10:])
        more = f" (and {len(summary.abandoned) - 10} earlier)" if len(summary.abandoned) > 10 else ""
        lines.append(f"{len(summary.abandoned)} recurrence{'s' if len(summary.abandoned) != 1 else ''} abandoned{more}: {shown}")
    if summary.open:
        lines.append(
            f"{len(summary.open)} recurrence{'s' if len(summary.open) != 1 else ''} open (begun, not ended: running, "
            f"or its runner was lost on another machine): {', '.join(map(str, summary.open[-10:]))}"
        )
    return lines


def _finish(runner: Runner, summary: JobSummary, output: Path | None, command: str, started: datetime, fresh: bool = False) -> int:
    """The closing table, the parts' reports, and every output file; the exit status: EXIT_FAILED where an
    output could not be written (a full or read-only disk, an I/O error: said per file, the results stay in
    the store, and ``zeus report`` writes them again)."""
    if summary.records:
        console.print(_closing_table(summary))
        console.print(escape(_so_far_line(summary)), highlight=False, soft_wrap=True)
    for line in _account_lines(summary):
        console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)
    for part in runner.parts.values():
        if isinstance(part, Reports):
            part.report(console, summary)
    if output is None:
        _print_verdict(runner, summary, None)
        return EXIT_OK
    from zeus_core.engine.outputs import write_outputs

    try:
        written = write_outputs(runner, summary, output, command=f"zeus {command}", started=started, fresh=fresh)
    except OSError as e:
        failed = [e]  # summary.json is written after another file failed, and may fail too: both are said
        while isinstance(failed[0].__context__, OSError) and len(failed) < 3:
            failed.insert(0, failed[0].__context__)
        again = (
            " (the results are in the job's store: `zeus report JOB_FILE --output DIR` writes them again)"
            if "workload" in runner.parts
            else ""
        )
        named = [f for f in failed if f.filename is not None] or [e]
        said = cannot_write(named[0]) + "".join(f"; {f.filename} could not be written either ({f.strerror or f})" for f in named[1:])
        err_console.print(f"[bold red]error:[/] the outputs are not all written: {escape(said)}{escape(again)}")
        _print_verdict(runner, summary, None)
        return EXIT_FAILED
    for p in written:
        console.print(f"wrote {escape(str(p))}")
    _print_verdict(runner, summary, [p for p in written if p.name in ("summary.json", "recurrences.csv")])
    return EXIT_OK


def _print_verdict(runner: Runner, summary: JobSummary, files: list[Path] | None) -> None:
    """The last thing ``zeus run`` and ``zeus report`` print: the result in human units (:mod:`zeus_core.verdict`),
    and where its exact figures are."""
    from rich.text import Text

    from zeus_core.verdict import verdicts_of

    verdicts = verdicts_of(summary, runner.parts.values(), eta=runner.spec.job.eta_knob)
    if not verdicts:
        return
    for verdict in verdicts:
        console.print()
        console.print(verdict.renderable(unit=verdict is verdicts[-1]))  # what the cost is, said once
    if files:
        console.print(Text(f"(exact figures: {', '.join(map(str, files))})", style="dim"))


@cli.command("run")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a value, e.g. job.recurrences=5.")
@click.option(
    "--output", "-o", type=click.Path(file_okay=False, path_type=Path), help="Write recurrences.csv, summary.json and plugin outputs here."
)
@click.option("--dry-run", is_flag=True, help="Print the resolved configuration and where each value came from; run nothing.")
@click.option(
    "--fresh",
    is_flag=True,
    help="Forget what the job's store learned (in the job's first write) and start over; "
    "in --output, remove the files an earlier zeus command wrote there and this run "
    "did not (only those its summary.json records). Refused while other runners of "
    "the job are in the middle of a recurrence (see --wait).",
)
@click.option(
    "--wait",
    is_flag=True,
    help="With --fresh: instead of refusing while other runners of the job are in the "
    "middle of a recurrence, wait until none is, then start over (those runners "
    "stop at their next step: their history is gone).",
)
def run_cmd(job_file: Path, sets: tuple[str, ...], output: Path | None, dry_run: bool, fresh: bool, wait: bool) -> None:
    """Run a job: compose the chosen plugins and run its recurrences.

    Exit status: 0 done, 1 a part failed while running, 2 bad input (nothing run),
    130 / 143 / 129 stopped by SIGINT / SIGTERM / SIGHUP (devices restored, outputs of
    what finished written; a signal the run was started ignoring, as under nohup, stays ignored).
    """
    from zeus_core.engine.provenance import now

    started = now()
    kept: list[JobStore] = []  # the store the job's validation opened: the run's, opened once
    spec = _load(job_file, sets, keep=kept)
    store = kept[0] if kept else None
    try:
        if dry_run:
            _dry_run(spec)
            return
        _check_output(output)
        if wait and not fresh:
            fail("--wait waits to start the job over: it goes with --fresh", EXIT_BAD_INPUT)
    finally:
        if store is not None and (dry_run or sys.exc_info()[0] is not None):
            store.close()
    runner = _make_runner(spec, fresh=fresh, wait=wait, store=store)
    interrupts = Interrupts().install()
    try:
        _run_and_finish(runner, spec, output, fresh, started, interrupts)
    finally:
        if click.get_current_context().obj.get(OWNS_PROCESS):
            _exit_at_once_on_signals()  # the process ends next: no window where a signal kills it by default
        else:
            interrupts.uninstall()


def _run_and_finish(runner: Runner, spec: JobSpec, output: Path | None, fresh: bool, started: datetime, interrupts: Interrupts) -> None:
    """``zeus run`` once the runner is made, with ``interrupts`` installed throughout (the run's life is
    :func:`~zeus_core.engine.lifecycle.run_to_end`'s; what it says is this command's): a signal while the
    outputs are written stops the writing, summary.json records what was written, and the exit status is
    the signal's; one while the devices are restored waits for them."""
    from zeus_core.engine.lifecycle import run_to_end

    def run() -> JobSummary:
        runner.build()
        line = _continuing_line(runner, fresh)
        if line:
            console.print(escape(line), highlight=False, soft_wrap=True)
        total = spec.job.recurrences if "workload" in runner.parts else 1
        with RunProgress(console, spec.job.name, total, full_lines=_full_lines()) as progress:
            summary = runner.run(progress=progress.on_progress)
            if "workload" not in runner.parts:
                progress.advance()
        return summary

    ending = run_to_end(
        runner,
        run,
        interrupts=interrupts,
        on_error=report_error,
        on_stop=lambda signum: err_console.print(
            f"[bold red]interrupted[/] by {signum.name}: stopping; devices are being restored; outputs of the finished recurrences follow"
        ),
        on_close_error=lambda e: err_console.print(f"[bold red]error while restoring devices:[/] {escape(str(e))}"),
    )
    code = ending.code
    if not runner.leads:  # another rank of a launched job: rank 0 reports and writes the outputs
        sys.exit(code)
    if ending.summary_error is not None:
        err_console.print(f"[bold red]error:[/] cannot read the results back: {escape(str(ending.summary_error))}")
    if ending.summary is None:
        sys.exit(code)
    try:
        finished = _finish(runner, ending.summary, output, "run", started, fresh)
        code = code or finished
    except (KeyboardInterrupt, Terminated) as e:
        signum = stopped_by(e)
        err_console.print(f"[bold red]interrupted[/] by {signum.name} while the outputs were written: summary.json records those written")
        code = SIGNAL_EXIT[signum]
    sys.exit(code)


@cli.command("report")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a value, as for zeus run.")
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write recurrences.csv, summary.json and the parts' outputs here.",
)
def report_cmd(job_file: Path, sets: tuple[str, ...], output: Path | None) -> None:
    """Report what a job's store holds, and write its output files, without running anything.

    The workload, device and policies are built (nothing is trained or changed) so
    that their tables and files come out as after ``zeus run``; planners'
    files (allocations, frequency plans, profiles) are computed by ``zeus run``.

    Exit status: 0 done, 1 an output could not be written, 2 bad input or an empty
    store, 130 / 143 / 129 stopped by SIGINT / SIGTERM / SIGHUP (summary.json records
    the files written before the signal).
    """
    from zeus_core.engine.provenance import now

    started = now()
    spec = _load(job_file, sets)
    from zeus_core.engine.stores.locations import open_store

    try:  # read only: nothing is written to it, and a store on read-only media is read
        opened = open_store(spec.store_location(), registry(), job=spec.job.name, read_only=True)
    except ZeusError as e:
        sys.exit(report_error(e))
    runner = _make_runner(spec, store=opened)
    store = runner.store
    assert store is not None  # zeus report runs one process: rank 0, which opens the store
    if store.info.tries == 0:  # refused before --output is made: nothing left behind
        runner.close()
        fail(
            f"the store {store.location} holds no results of job {spec.job.name!r} yet; run it first (zeus run {job_file})", EXIT_BAD_INPUT
        )
    try:
        _check_output(output)
    except SystemExit:
        runner.close()
        raise
    interrupts = Interrupts().install()
    try:
        sys.exit(_report_and_finish(runner, output, started, interrupts))
    finally:
        if click.get_current_context().obj.get(OWNS_PROCESS):
            _exit_at_once_on_signals()  # the process ends next: no window where a signal kills it by default
        else:
            interrupts.uninstall()


def _report_and_finish(runner: Runner, output: Path | None, started: datetime, interrupts: Interrupts) -> int:
    """``zeus report`` once its store is open, with ``interrupts`` installed: a signal stops it with the
    signal's exit status (128 + its number); one while the outputs are written stops the writing, and
    summary.json records what was written, as for ``zeus run``."""
    writing = False
    try:
        try:
            runner.build(sections=("device", "workload", "batch_size", "power"))
            summary = runner.summary()
        except ZeusError as e:
            return report_error(e)
        finally:
            with interrupts.deferring():
                runner.close()
        writing = output is not None
        code = _finish(runner, summary, output, "report", started)
    except (KeyboardInterrupt, Terminated) as e:
        signum = stopped_by(e)
        during = " while the outputs were written: summary.json records those written" if writing else ""
        err_console.print(f"[bold red]interrupted[/] by {signum.name}{during}")
        return SIGNAL_EXIT[signum]
    if interrupts.pending is not None:  # came while the parts were closed
        return SIGNAL_EXIT[signal.Signals(interrupts.pending)]
    return code


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["daemon"]:  # the root daemon loads only the plugins it serves
        from zeus_core.cli.daemon import main as daemon_main

        daemon_main(args[1:])
        return
    try:
        reg = get_registry()
    except PluginError as e:
        fail(str(e), EXIT_BAD_INPUT)
    try:
        cli.main(args=argv, prog_name="zeus", obj={"registry": reg, OWNS_PROCESS: True})
    finally:
        _exit_at_once_on_signals()


if __name__ == "__main__":  # pragma: no cover
    main()
