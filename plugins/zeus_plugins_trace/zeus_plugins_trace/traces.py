"""Reading the Zeus NSDI'23 trace pair, and the arrays one job replays.

A trace folder holds ``summary_train.csv`` (per dataset, network, optimizer,
batch size and seeded run: the epoch at which each target metric was reached)
and one ``summary_power_{gpu}.csv`` per GPU (time per epoch and average power
per batch size and power limit). The format is in the public traces' README.

Every problem in a file is reported with the file, the line and the column,
and what to do about it, because a trace is usually edited by hand or
produced by a script that went wrong; a NaN that slipped through would
otherwise surface as a silently wrong cost hundreds of recurrences later.
The one legitimate NaN is ``target_epoch``: the run never reached the target.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import attrs
import numpy as np

from zeus_core import zeus_cost
from zeus_core.datafiles import csv_table, data_limit, json_document, parse_number, read_data_text
from zeus_plugins_trace.folders import POWER_PATTERN, TRAIN_FILE, missing_folder

SYNTHETIC_MARKER = "synthetic.json"

TRAIN_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "run", "target_metric", "target_epoch")
POWER_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power")


class TraceError(ValueError):
    """A trace file or folder cannot be used; the message names file, line and column."""


@attrs.frozen
class TrainRow:
    dataset: str
    network: str
    batch_size: int
    optimizer: str
    run: int
    target_metric: float
    target_epoch: float  # NaN: this run never reached the target


@attrs.frozen
class PowerRow:
    dataset: str
    network: str
    batch_size: int
    optimizer: str
    power_limit: float
    time_per_epoch: float
    average_power: float


# --------------------------------------------------------------------------- parsing

#: The largest trace CSV (``summary_train.csv``, ``summary_power_{gpu}.csv``) or ``synthetic.json`` read, in
#: bytes, unless :data:`TRACE_LIMIT_ENV` (MiB) raises it: the public ones are at most 0.2 MiB.
TRACE_LIMIT = 16 << 20
TRACE_LIMIT_ENV = "ZEUS_MAX_TRACE_MB"

#: The plausible range of each number of a trace (a value past it is refused, naming the bound, before
#: any arithmetic on it could overflow): (largest, unit, what).
BOUNDS = {
    "batch_size": (1e7, "", "a batch size"),
    "run": (1e9, "", "a run's index"),
    "target_metric": (1e12, "", "a target metric"),
    "target_epoch": (1e6, "epochs", "an epoch count"),
    "power_limit": (1e4, "W", "a GPU's power limit"),
    "time_per_epoch": (1e7, "s", "an epoch's time"),
    "average_power": (1e4, "W", "a GPU's average power"),
    "start_time": (1e11, "s", "a time"),
    "end_time": (1e11, "s", "a time"),
    "runtime_ratio": (1e6, "", "a runtime ratio"),
}


def _where(path: Path, line: int, column: str) -> str:
    return f"{path}:{line}: column '{column}'"


def _number(path: Path, line: int, column: str, text: str, *, integer: bool = False, nan_ok: bool = False) -> float:
    high, unit, what = BOUNDS.get(column, (None, "", "a value"))
    return parse_number(
        text,
        _where(path, line, column),
        integer=integer,
        nan_ok=nan_ok,
        high=high,
        low=None if high is None else -high,
        unit=unit,
        what=what,
        error=TraceError,
    )


def _positive(path: Path, line: int, column: str, value: float) -> float:
    if not value > 0:
        raise TraceError(f"{_where(path, line, column)}: {value:g} must be positive")
    return value


def _text(path: Path, line: int, column: str, text: str) -> str:
    text = text.strip()
    if not text:
        raise TraceError(f"{_where(path, line, column)} is empty; every row needs a value there")
    return text


def read_trace_text(path: Path, what: str = "a trace CSV", limit_env: str = TRACE_LIMIT_ENV, default_limit: int = TRACE_LIMIT) -> str:
    """The text of a trace file: UTF-8, at most its kind's size limit (TraceError naming file and line)."""
    limit = data_limit(default_limit, limit_env, error=TraceError)
    return read_data_text(path, what=what, limit=limit, env=limit_env, error=TraceError)


def _rows(
    path: Path, required: tuple[str, ...], what: str = "a trace CSV", limit_env: str = TRACE_LIMIT_ENV, default_limit: int = TRACE_LIMIT
) -> Iterable[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file, after checking its header; every row as wide as the header."""
    text = read_trace_text(path, what, limit_env, default_limit)
    header, rows = csv_table(text, path, what=what, header_hint=", ".join(required), error=TraceError)
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(
            f"{path}:1: missing column{'s' if len(missing) > 1 else ''} {', '.join(repr(c) for c in missing)}; "
            f"the header must name {', '.join(required)}"
        )
    index = {c: header.index(c) for c in required}
    for line, cells in rows:
        yield line, {c: cells[i] for c, i in index.items()}


def read_train(path: str | Path) -> list[TrainRow]:
    """Rows of a train trace, in file order (the order matters: paths are sampled by index)."""
    path = Path(path)
    out = []
    for line, r in _rows(path, TRAIN_COLUMNS):
        epoch = _number(path, line, "target_epoch", r["target_epoch"], integer=True, nan_ok=True)
        if not math.isnan(epoch):
            _positive(path, line, "target_epoch", epoch)
        out.append(
            TrainRow(
                **_workload_key(path, line, r),
                run=int(_number(path, line, "run", r["run"], integer=True)),
                target_metric=_number(path, line, "target_metric", r["target_metric"]),
                target_epoch=epoch,
            )
        )
    if not out:
        raise TraceError(f"{path}: no data rows after the header")
    return out


def _workload_key(path: Path, line: int, r: dict) -> dict:
    """The columns both traces share: which workload and batch size a row is about."""
    return {
        "dataset": _text(path, line, "dataset", r["dataset"]),
        "network": _text(path, line, "network", r["network"]),
        "batch_size": int(_positive(path, line, "batch_size", _number(path, line, "batch_size", r["batch_size"], integer=True))),
        "optimizer": _text(path, line, "optimizer", r["optimizer"]).lower(),
    }


def read_power(path: str | Path) -> list[PowerRow]:
    """Rows of one GPU's power trace."""
    path = Path(path)
    out = []
    for line, r in _rows(path, POWER_COLUMNS):
        out.append(
            PowerRow(
                **_workload_key(path, line, r),
                power_limit=_positive(path, line, "power_limit", _number(path, line, "power_limit", r["power_limit"])),
                time_per_epoch=_positive(path, line, "time_per_epoch", _number(path, line, "time_per_epoch", r["time_per_epoch"])),
                average_power=_positive(path, line, "average_power", _number(path, line, "average_power", r["average_power"])),
            )
        )
    if not out:
        raise TraceError(f"{path}: no data rows after the header")
    return out


def gpus_in(folder: str | Path) -> list[str]:
    """GPU names that have a power trace in ``folder``."""
    prefix, suffix = POWER_PATTERN.split("{gpu}")
    return sorted(p.name[len(prefix) : -len(suffix)] for p in Path(folder).glob(POWER_PATTERN.format(gpu="*")))


@attrs.frozen
class TraceSet:
    """The train trace and one GPU's power trace, as read from a folder (or synthesised)."""

    source: str
    gpu: str
    train: list[TrainRow] = attrs.field(repr=False)
    power: list[PowerRow] = attrs.field(repr=False)
    synthetic: bool = False
    model: dict = attrs.field(factory=dict, repr=False)


def load_traces(folder: str | Path, gpu: str) -> TraceSet:
    """Read ``folder``'s train trace and the power trace of ``gpu``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TraceError(missing_folder(folder))
    power_path = folder / POWER_PATTERN.format(gpu=gpu)
    if not power_path.exists():
        have = gpus_in(folder)
        raise TraceError(
            f"{power_path}: unknown GPU {gpu!r}: {folder} has power traces for {', '.join(have) or 'no GPU'} (files {POWER_PATTERN})"
        )
    marker = folder / SYNTHETIC_MARKER
    model: dict = {}
    if marker.exists():
        model = json_document(read_trace_text(marker, "a synthetic trace's parameters (JSON)"), marker, error=TraceError)
        if not isinstance(model, dict):
            raise TraceError(f"{marker}:1: expected a JSON object of the synthetic model's parameters, got {type(model).__name__}")
    return TraceSet(str(folder), gpu, read_train(folder / TRAIN_FILE), read_power(power_path), marker.exists(), model)


# --------------------------------------------------------------------------- one job's arrays


@attrs.frozen
class WorkloadTrace:
    """What one job replays: arrays over its batch sizes and power limits.

    ``batch_sizes`` (B) are the batch sizes in both traces for the dataset,
    network and optimizer, whatever the target (as the paper's simulator);
    ``power_limits`` are the union of the limits the power trace has for them,
    high to low as the JIT profiles them; ``time``/``power`` are
    ``[len(B), len(P)]`` with NaN where the trace has no row; ``paths[i]``
    holds the ``target_epoch`` of every train run of ``B[i]`` at this target, in
    file order (NaN: never reached). ``max_power_w`` is the GPU's largest limit
    in the whole power trace (MAXPOWER of the cost).
    """

    dataset: str
    network: str
    optimizer: str
    target_metric: float
    gpu: str
    batch_sizes: np.ndarray
    power_limits: np.ndarray
    time: np.ndarray
    power: np.ndarray
    paths: tuple[np.ndarray, ...]
    max_power_w: float
    synthetic: bool = False
    source: str = ""

    @property
    def energy(self) -> np.ndarray:
        return self.time * self.power

    def index(self, batch_size: int) -> int:
        hits = np.flatnonzero(self.batch_sizes == int(batch_size))
        if not len(hits):
            raise ValueError(
                f"batch size {batch_size} is not in the trace for {self.dataset}/{self.network} on {self.gpu}; "
                f"available: {', '.join(str(int(b)) for b in self.batch_sizes)}"
            )
        return int(hits[0])

    def limits_of(self, batch_size: int) -> np.ndarray:
        """The power limits the trace has for ``batch_size``, high to low."""
        i = self.index(batch_size)
        return self.power_limits[~np.isnan(self.time[i])]

    def epoch_cost(self, eta: float) -> np.ndarray:
        """Cost of one epoch at every (batch size, limit): eta*E + (1-eta)*MAXPOWER*T (NaN where absent)."""
        return zeus_cost(self.energy, self.time, eta, self.max_power_w)

    def recurrences_default(self) -> int:
        """The paper's default number of recurrences, 2 x |B| x |P| at this target."""
        with_runs = sum(1 for p in self.paths if len(p))
        limits = int(np.sum(~np.all(np.isnan(self.time[[i for i, p in enumerate(self.paths) if len(p)]]), axis=0))) if with_runs else 0
        return 2 * with_runs * limits


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def select(traces: TraceSet, dataset: str, network: str, optimizer: str, target_metric: float) -> WorkloadTrace:
    """The arrays of one job; errors list what the traces do have."""
    optimizer = optimizer.lower()
    key = (dataset, network, optimizer)
    train = [r for r in traces.train if (r.dataset, r.network, r.optimizer) == key]
    power = [r for r in traces.power if (r.dataset, r.network, r.optimizer) == key]
    if not train or not power:
        have_t = {(r.dataset, r.network, r.optimizer) for r in traces.train}
        have_p = {(r.dataset, r.network, r.optimizer) for r in traces.power}
        both = sorted(have_t & have_p)
        raise TraceError(
            f"{traces.source}: no {'train' if not train else 'power'} trace rows for dataset={dataset!r} "
            f"network={network!r} optimizer={optimizer!r} on {traces.gpu}; workloads in both traces: "
            + "; ".join(f"{d}/{n}/{o}" for d, n, o in both)
        )
    targets = sorted({r.target_metric for r in train})
    at_target = [r for r in train if _same(r.target_metric, target_metric)]
    if not at_target:
        raise TraceError(
            f"{traces.source}: the train trace has no runs of {dataset}/{network} with target_metric {target_metric:g}; "
            f"its targets are {', '.join(f'{t:g}' for t in targets)}"
        )
    b_all = sorted({r.batch_size for r in train} & {r.batch_size for r in power})
    if not b_all:
        raise TraceError(f"{traces.source}: the train and power traces of {dataset}/{network} share no batch size")
    limits = sorted({r.power_limit for r in power if r.batch_size in set(b_all)}, reverse=True)
    bi = {b: i for i, b in enumerate(b_all)}
    pj = {p: j for j, p in enumerate(limits)}
    time = np.full((len(b_all), len(limits)), np.nan)
    avg = np.full_like(time, np.nan)
    for r in power:
        if r.batch_size in bi:
            time[bi[r.batch_size], pj[r.power_limit]] = r.time_per_epoch
            avg[bi[r.batch_size], pj[r.power_limit]] = r.average_power
    paths = tuple(np.array([r.target_epoch for r in at_target if r.batch_size == b], dtype=float) for b in b_all)
    return WorkloadTrace(
        dataset=dataset,
        network=network,
        optimizer=optimizer,
        target_metric=float(target_metric),
        gpu=traces.gpu,
        batch_sizes=np.array(b_all, dtype=int),
        power_limits=np.array(limits, dtype=float),
        time=time,
        power=avg,
        paths=paths,
        max_power_w=max(r.power_limit for r in traces.power),
        synthetic=traces.synthetic,
        source=traces.source,
    )
