"""``zeus sweep``: many trace simulations of one job file, one table.

    zeus sweep examples/zeus_nsdi23/cifar100.toml --axis device.gpu=v100,a40 --axis job.seed=1..5 \\
        --axis job.eta_knob=0.3,0.5 --output sweep.csv [--workers 4] [--executor ray --ray-address HOST:PORT]

Each point of the grid (the product of the ``--axis`` values, with every ``--set``)
is the job file with those overrides, validated as ``zeus validate`` would
(every bad point is reported before anything runs) and simulated without the
runner or a store: a ``[workload] plugin = "trace"`` job by the fast single-job
simulator (:func:`zeus_plugins_trace.simulate.simulate`), a ``[profiler] plugin =
"alibaba"`` job by the group replay, one row per in-flight rule. So a group file
is an axis like any other (``--axis profiler.groups=a.csv,b.csv``).

Points run on a local process pool (``--workers``, default: the CPU count) or on a
Ray cluster (``--executor ray``: ``ray.init(address=...)``; without an address Ray
starts a local one). A point is a pure function of its overrides, so the table is
the same whatever ran it, in whatever order. On a cluster, every node must see the
job file and the files it names at the same paths (a shared file system).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import socket
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click

EXECUTORS = ("pool", "ray")
RESULT_COLUMNS = (
    "kind",
    "rule",
    "gpu",
    "workload",
    "recurrences",
    "tries",
    "energy_j",
    "time_s",
    "cost",
    "default_cost",
    "oracle_cost",
    "energy_saved",
    "cost_saved",
    "regret",
)


class SweepError(click.ClickException):
    """A bad axis or point (exit 2, as a bad job file)."""

    exit_code = 2


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``key=v1,v2`` (each value TOML, else a string) or ``key=a..b`` (integers a to b) -> (key, values)."""
    key, sep, spec = text.partition("=")
    key, spec = key.strip(), spec.strip()
    if not sep or not key or not spec:
        raise SweepError(f"--axis {text!r}: expected dotted.key=v1,v2,... or dotted.key=first..last")
    lo, dots, hi = spec.partition("..")
    if dots:
        try:
            a, b = int(lo), int(hi)
        except ValueError:
            raise SweepError(f"--axis {text!r}: a range is two whole numbers, first..last") from None
        if b < a:
            raise SweepError(f"--axis {text!r}: the range {a}..{b} is empty; write first..last with first <= last")
        return key, list(range(a, b + 1))
    values = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            raise SweepError(f"--axis {text!r}: an empty value; separate values by single commas")
        try:
            values.append(tomllib.loads(f"v = {item}")["v"])
        except tomllib.TOMLDecodeError:
            values.append(item)
    return key, values


def toml_value(v: Any) -> str:
    """``v`` as a ``--set`` value (TOML)."""
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def points(axes: list[tuple[str, list[Any]]]) -> Iterator[dict[str, Any]]:
    """Every combination of the axes' values, the first axis slowest."""
    keys = [k for k, _ in axes]
    for combo in itertools.product(*(vals for _, vals in axes)):
        yield dict(zip(keys, combo))


def overrides_of(point: dict[str, Any], sets: tuple[str, ...]) -> list[str]:
    return list(sets) + [f"{k}={toml_value(v)}" for k, v in point.items()]


# --------------------------------------------------------------------------- one point (in a worker)


def run_point(job_file: str, overrides: list[str]) -> list[dict[str, Any]]:
    """The rows of one point: the job file with ``overrides``, simulated. Runs in a worker process."""
    from rich.console import Console

    from zeus_core.engine import Assembly, get_registry, load_job
    from zeus_core.errors import BadInput

    registry = get_registry()
    spec = load_job(Path(job_file), registry, overrides)
    try:
        assembly = Assembly(spec, registry, console=Console(file=io.StringIO(), quiet=True)).build(("device", "workload"))
        profiler = spec.parts.get("profiler")
        if profiler is not None and profiler.plugin == "alibaba":
            return _replay_rows(assembly.build_part("profiler"), assembly.context)
        workload = spec.parts.get("workload")
        if workload is not None and workload.plugin == "trace":
            assembly.parts["batch_size"] = assembly.build_part("batch_size")
            return _single_rows(assembly.context)
    except BadInput as e:  # e.g. a replay that runs past its [grid] series: bad input (exit 2), naming the point
        raise SweepError(f"point {', '.join(overrides) or 'the job as it is'}: {e}") from None
    raise ValueError('zeus sweep simulates trace jobs: the job needs [workload] plugin = "trace" or [profiler] plugin = "alibaba"')


def _row(
    kind: str,
    rule: str,
    gpu: str,
    workload: str,
    recurrences: int,
    tries: int,
    method: dict[str, float],
    default: dict[str, float],
    oracle: dict[str, float],
) -> dict[str, Any]:
    from zeus_core import savings

    against_default = savings(method, default)
    return {
        "kind": kind,
        "rule": rule,
        "gpu": gpu,
        "workload": workload,
        "recurrences": recurrences,
        "tries": tries,
        "energy_j": method["energy_j"],
        "time_s": method["time_s"],
        "cost": method["cost"],
        "default_cost": default["cost"],
        "oracle_cost": oracle["cost"],
        "energy_saved": against_default["energy_saved"],
        "cost_saved": against_default["cost_saved"],
        "regret": savings(method, oracle)["regret"],
    }


def _single_rows(ctx: Any) -> list[dict[str, Any]]:
    from zeus_plugins_trace.report import compare
    from zeus_plugins_trace.simulate import simulate

    spec, workload, policy = ctx.spec, ctx.parts["workload"], ctx.parts["batch_size"]
    result = simulate(
        workload.trace, policy, spec.job, default_batch_size=workload.default_batch_size, batch_sizes=workload.batch_sizes, grid=ctx.grid
    )
    c = compare(workload.trace, SimpleNamespace(records=result.records), spec.job, workload._default_batch_size())
    n = c.recurrences
    base = {k: getattr(c.default, k) * n for k in ("energy_j", "time_s", "cost")}
    best = {k: getattr(c.oracle, k) * n for k in ("energy_j", "time_s", "cost")}
    row = _row("single", "", c.gpu, workload.trace.dataset, n, len(result.records), c.method, base, best)
    if ctx.grid is not None:  # the job's emissions and energy cost, as zeus run's summary.json has them
        from zeus_core.grid import job_totals
        from zeus_plugins_trace.simulate import grid_keys

        totals = job_totals(result.records, c.method["energy_j"], ctx.grid.currency)
        row.update({k: totals[k] for k in grid_keys(ctx.grid)})
    return [row]


def _replay_rows(replay: Any, ctx: Any) -> list[dict[str, Any]]:
    replay.plan(ctx)
    s = replay.summary()
    datasets = "+".join(sorted({g.dataset for g in replay.groups}))
    rows = []
    for rule in replay.options.inflight:
        row = _row(
            "alibaba",
            rule,
            s["gpu"],
            datasets,
            s["jobs"],
            sum(len(r.tries) for r in replay.results if r.rule == rule),
            s["rules"][rule],
            s["default"],
            s["oracle"],
        )
        row.update({k: s["rules"][rule][k] for k in replay.grid_keys})  # carbon_g, cost_<currency> with a [grid]
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- executors


def _run_pool(tasks: list[tuple[str, list[str]]], workers: int, done: Callable[[int, list[dict]], None]) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # Workers are started, not forked: a fork copies this process's threads' locks mid-use (a Ray
    # client's, a monitor's), and a worker that inherits a held one dies or hangs.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_point, *t): i for i, t in enumerate(tasks)}
        for f in as_completed(futures):
            done(futures[f], f.result())


#: How long the check of ``--ray-address`` waits for a connection.
RAY_PROBE_S = 5.0


def check_ray_address(address: str | None, timeout_s: float = RAY_PROBE_S) -> None:
    """SweepError (exit 2) when ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) is malformed or nothing
    accepts a connection there: Ray itself would retry for minutes, printing the address it resolved
    instead of the one given. None (Ray starts a local cluster) and ``auto`` (Ray finds one) are Ray's."""
    if address is None or address == "auto":
        return
    rest = address[len("ray://") :] if address.startswith("ray://") else address
    host, sep, port_text = rest.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
        if not sep or not host or not 0 < port < 65536:
            raise ValueError
    except ValueError:
        raise SweepError(
            f"--ray-address {address!r}: expected HOST:PORT (the head node's GCS address, such as "
            "10.0.0.5:6379), ray://HOST:PORT (Ray Client), or auto"
        ) from None
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        why = f"no answer within {timeout_s:g} s" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
        raise SweepError(
            f"--ray-address {address}: nothing accepts connections at {host}:{port} ({why}). Start "
            f"the cluster there (ray start --head --port {port}), give the address of a running one, or leave "
            "--ray-address out to start a local one"
        ) from None


def _run_ray(tasks: list[tuple[str, list[str]]], address: str | None, done: Callable[[int, list[dict]], None]) -> None:
    import ray

    # ray takes a level's name as logging's setLevel does; its annotation says int only
    ray.init(address=address, log_to_driver=False, include_dashboard=False, logging_level="ERROR")  # type: ignore[arg-type]
    try:
        remote = ray.remote(run_point)
        refs = {remote.remote(*t): i for i, t in enumerate(tasks)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            done(refs[ready[0]], ray.get(ready[0]))
    finally:
        ray.shutdown()


def table_csv(axes: list[tuple[str, list[Any]]], rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """The sweep's table: one row per (point, rule), the axes first, floats at full precision; with a
    ``[grid]``, its columns (``carbon_g``, ``cost_<currency>``, ...) after the others."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    keys = [k for k, _ in axes]
    extra: dict[str, None] = {}
    for _, row in rows:
        extra.update(dict.fromkeys(k for k in row if k not in RESULT_COLUMNS and k != "point"))
    columns = [*RESULT_COLUMNS, *extra]
    w.writerow(["point", *keys, *columns])
    for point, row in rows:
        results = (repr(row[c]) if isinstance(row.get(c), float) else row.get(c, "") for c in columns)
        w.writerow([row["point"], *(point[k] for k in keys), *results])
    return buf.getvalue()


def sweep(
    job_file: Path,
    axes: list[tuple[str, list[Any]]],
    sets: tuple[str, ...] = (),
    *,
    executor: str = "pool",
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> str:
    """Run every point and return the table (CSV text). Raises SweepError for a bad point."""
    from zeus_core.engine import JobError, get_registry, load_job

    job_file = Path(job_file).resolve()
    grid = list(points(axes))
    tasks = [(str(job_file), overrides_of(p, sets)) for p in grid]
    registry = get_registry()
    problems = []
    for p, (_, over) in zip(grid, tasks):
        try:
            load_job(job_file, registry, over)
        except JobError as e:
            where = ", ".join(f"{k}={v!r}" for k, v in p.items()) or "the job as it is"
            problems.append(f"point {where}:\n  " + "\n  ".join(e.format_lines()))
    if problems:
        raise SweepError("\n".join(problems))
    if executor == "ray":
        check_ray_address(ray_address)
    results: list[list[dict] | None] = [None] * len(tasks)

    def done(i: int, rows: list[dict]) -> None:
        results[i] = rows
        if progress:
            progress(i)

    if executor == "ray":
        _run_ray(tasks, ray_address, done)
    else:
        _run_pool(tasks, workers or os.cpu_count() or 1, done)
    flat = [(p, {"point": i + 1, **row}) for i, (p, rows) in enumerate(zip(grid, results)) for row in rows or ()]
    return table_csv(axes, flat)


@click.command("sweep")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--axis",
    "axes",
    multiple=True,
    metavar="KEY=V1,V2|KEY=A..B",
    help="A dimension of the grid: a dotted key of the job file and its values (repeatable).",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a value at every point, as for zeus run.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The table to write (CSV).")
@click.option("--executor", type=click.Choice(EXECUTORS), default="pool", show_default=True, help="A local process pool, or a Ray cluster.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Processes of the local pool (default: the CPU count).")
@click.option("--ray-address", default=None, help="Ray cluster to join (HOST:PORT or auto); none: Ray starts a local one.")
def sweep_cmd(
    job_file: Path, axes: tuple[str, ...], sets: tuple[str, ...], output: Path, executor: str, workers: int | None, ray_address: str | None
) -> None:
    """Simulate a trace job at every point of a grid of overrides; write one table.

    Exit status: 0 done, 1 a point failed while simulating, 2 bad input (nothing run).
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from zeus_core import write_atomic

    console = Console(stderr=True)
    parsed = [parse_axis(a) for a in axes]
    seen = [k for k, _ in parsed]
    if len(set(seen)) != len(seen):
        raise SweepError(f"an axis is given twice: {', '.join(sorted({k for k in seen if seen.count(k) > 1}))}")
    if executor == "pool" and ray_address:
        raise SweepError("--ray-address needs --executor ray")
    n = math.prod(len(v) for _, v in parsed)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(f"sweep ({executor})", total=n)
        try:
            text = sweep(
                job_file, parsed, sets, executor=executor, workers=workers, ray_address=ray_address, progress=lambda _i: bar.advance(task)
            )
        except SweepError:
            raise
        except Exception as e:  # a point that failed while simulating
            raise click.ClickException(f"a point failed: {type(e).__name__}: {e}") from e
    write_atomic(output, text)
    console.print(f"wrote {output} ({n} points)")
