"""What a history service needs to run a job's batch-size policy as ``zeus run`` does.

A service that keeps a job's history for clients elsewhere (``zeus serve``)
builds the job's batch-size policy itself, from the same registry and options
as ``zeus run`` would, and keeps the history with the same :class:`~zeus_core.engine.history.History`.
The client describes the job once with a :class:`HistorySetup`:

* ``job``: the ``[job]`` options (eta, beta, target, ...);
* ``identity``: what the job optimises (:mod:`zeus_core.identity`), checked
  against the store as a local run checks it;
* ``batch_size``: the ``[batch_size]`` table, ``{"plugin": "mab", ...}``, with
  the keys that differ from the plugin's defaults;
* what the policy may ask of the parts the service does not have: the device's
  ``max_power_w`` and, where the device predicts epochs
  (:class:`~zeus_core.EpochPredictor`), its predictions per batch size; the
  workload's ``batch_sizes`` and ``default_batch_size``;
* ``fresh``: forget what the store learned, in the job's first write.

:meth:`HistorySetup.to_json` and :meth:`HistorySetup.from_json` are its wire form
(JSON has no infinity: an infinite number, such as ``beta_knob = inf``, travels
as the string ``"inf"``). :func:`~zeus_core.engine.assembly.build_history` is the service's side: it checks
the setup field by field (:class:`SetupError`, each problem with its path),
builds the policy with the service's registry and returns the job's
:class:`~zeus_core.engine.history.History` over ``store``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import cattrs

from zeus_core.device import EpochPrediction, EpochPredictor
from zeus_core.engine.history import HistoryService
from zeus_core.engine.validation import Problem, make_converter, structure
from zeus_core.errors import BadInput
from zeus_core.job import JobOptions
from zeus_core.parts import OffersBatchSizes

if TYPE_CHECKING:  # annotations only
    from zeus_core.parts import PowerPolicy

#: Batch sizes and other counts on the wire stay below this (a 32-bit signed integer).
MAX_COUNT = 2**31 - 1
#: The most batch sizes (and predicted limits per batch size) a setup may list.
MAX_LIST = 4096
#: The largest maximum power a setup may say its devices have (watts).
MAX_WATTS = 1e7
_KEYS = ("job", "identity", "batch_size", "max_power_w", "batch_sizes", "default_batch_size", "predictions", "fresh")


class SetupError(BadInput):
    """A history setup a service cannot use: every problem, each with its path (``$.job.eta_knob``)."""

    def __init__(self, problems: list[tuple[tuple, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{msg} @ {Problem(path, msg).jsonpath()}" for path, msg in problems))


def _wire_converter() -> cattrs.Converter:
    """The core's strict converter, where a float may also be written ``"inf"`` / ``"-inf"``."""
    conv = make_converter()

    def float_hook(value: Any, _type: Any) -> float:
        if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity", "-inf", "-infinity"):
            return float(value.strip().lower().replace("infinity", "inf"))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"expected float, got {type(value).__name__} {value!r}")
        return float(value)

    conv.register_structure_hook(float, float_hook)
    return conv


#: The converter of the wire form, for the service's structuring of a setup's tables.
WIRE = _wire_converter()


def _jsonable(value: Any) -> Any:
    """``value`` with infinite floats as ``"inf"``/``"-inf"`` (NaN stays NaN, and is refused)."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def part_table(plugin: str, options: Any) -> dict[str, Any]:
    """A part's table as in ``job.toml``: ``plugin`` and the options that differ from their defaults."""
    table: dict[str, Any] = {"plugin": plugin}
    if options is None or not attrs.has(type(options)):
        return table
    plain = cattrs.Converter().unstructure(options)
    for f in attrs.fields(type(options)):
        default = f.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory(options) if default.takes_self else default.factory()
        value = getattr(options, f.name)
        if default is attrs.NOTHING or value != default or type(value) is not type(default):
            table[f.name] = plain[f.name]
    return table


@attrs.define
class HistorySetup:
    """Everything a history service needs to build a job's batch-size policy and keep its
    history as ``zeus run`` does (see the module docstring)."""

    job: JobOptions
    identity: dict[str, Any]
    batch_size: dict[str, Any]
    max_power_w: float
    batch_sizes: list[int] | None = None
    default_batch_size: int | None = None
    #: batch size -> the device's predictions of one epoch at each power limit
    predictions: dict[int, list[EpochPrediction]] | None = None
    fresh: bool = False
    #: A ``fresh`` start that the service refuses while other live runners hold open recurrences is
    #: asked again until it is taken (``zeus run --fresh --wait``): the client's to do, not on the wire.
    wait: bool = False

    @classmethod
    def of_parts(
        cls,
        job: JobOptions,
        identity: dict[str, Any],
        batch_size_plugin: str,
        batch_size_options: Any,
        *,
        max_power_w: float,
        device: Any = None,
        workload: Any = None,
        fresh: bool = False,
        wait: bool = False,
    ) -> HistorySetup:
        """The setup of a job whose parts were built here (the runner's, a script optimizer's)."""
        batch_sizes = default = None
        if isinstance(workload, OffersBatchSizes):
            batch_sizes = None if workload.batch_sizes is None else [int(b) for b in workload.batch_sizes]
            default = workload.default_batch_size
        predictions = None
        if isinstance(device, EpochPredictor):
            candidates = set(batch_sizes or ()) | ({int(default)} if default else set())
            listed = getattr(batch_size_options, "batch_sizes", None)
            if isinstance(listed, list):
                candidates |= {int(b) for b in listed if isinstance(b, int) and not isinstance(b, bool) and b > 0}
            predictions = {}
            for b in sorted(candidates):
                got = device.predict_epoch(b)
                if got is not None:
                    predictions[b] = [EpochPrediction(float(p.power_limit), float(p.time_s), float(p.energy_j)) for p in got]
        return cls(
            job=job,
            identity=identity,
            batch_size=part_table(batch_size_plugin, batch_size_options),
            max_power_w=float(max_power_w),
            batch_sizes=batch_sizes,
            default_batch_size=None if default is None else int(default),
            predictions=predictions,
            fresh=fresh,
            wait=wait,
        )

    def to_json(self) -> dict[str, Any]:
        """The wire form (JSON-able; infinite floats as ``"inf"``)."""
        return {
            # job.store may hold the service's own URL and token: it is not the service's business
            "job": _jsonable({**cattrs.Converter().unstructure(self.job), "store": ""}),
            "identity": _jsonable(self.identity),
            "batch_size": _jsonable(self.batch_size),
            "max_power_w": self.max_power_w,
            "batch_sizes": self.batch_sizes,
            "default_batch_size": self.default_batch_size,
            "predictions": None
            if self.predictions is None
            else {str(b): [[p.power_limit, p.time_s, p.energy_j] for p in preds] for b, preds in sorted(self.predictions.items())},
            "fresh": self.fresh,
        }

    @classmethod
    def from_json(cls, data: Any) -> HistorySetup:
        """Read the wire form, checking every field; raises :class:`SetupError` with every problem."""
        problems: list[Problem] = []

        def bad(path: tuple, msg: str) -> None:
            problems.append(Problem(path, msg))

        if not isinstance(data, dict):
            raise SetupError([((), f"expected an object, got {type(data).__name__}")])
        for key in data:
            if key not in _KEYS:
                bad((key,), f"unknown key {key!r}; allowed keys: {', '.join(_KEYS)}")
        for key in ("job", "identity", "batch_size", "max_power_w"):
            if key not in data:
                bad((key,), f"required key {key!r} is missing")
        job = structure(JobOptions, data["job"], ("job",), problems, WIRE) if "job" in data else None
        if job is not None and not job.name:
            bad(("job", "name"), "a job name is required")
        identity = data.get("identity")
        if "identity" in data and (not isinstance(identity, dict) or not all(isinstance(v, dict) for v in identity.values())):
            bad(("identity",), "expected an object of sections (objects), as zeus_core.identity writes it")
        elif isinstance(identity, dict):
            _check_finite(identity, ("identity",), bad)
            # What the store learns and checks every later client against: never nothing.
            for section in ("job", "batch_size"):
                if not identity.get(section):
                    bad(
                        ("identity", section),
                        f"the identity must declare the job's [{section}] (what it optimises), as zeus_core.identity writes it",
                    )
        table = data.get("batch_size")
        if "batch_size" in data:
            if not isinstance(table, dict):
                bad(("batch_size",), f"expected a table, got {type(table).__name__}")
            elif not isinstance(table.get("plugin"), str) or not table.get("plugin"):
                bad(("batch_size", "plugin"), "required: the name of the batch-size policy plugin")
            else:
                _check_finite(table, ("batch_size",), bad)
                said = identity.get("batch_size") if isinstance(identity, dict) else None
                if isinstance(said, dict) and said and said.get("plugin") != table["plugin"]:
                    bad(
                        ("identity", "batch_size", "plugin"),
                        f"must name the batch-size plugin of the setup, {table['plugin']!r}; got {said.get('plugin')!r}",
                    )
        max_power: Any = data.get("max_power_w")
        if "max_power_w" in data and not (_number(max_power, lo=0.0, strict=True) and max_power <= MAX_WATTS):
            bad(("max_power_w",), f"must be a number of watts in (0, {MAX_WATTS:g}], got {max_power!r}")
        batch_sizes = data.get("batch_sizes")
        if batch_sizes is not None:
            if not isinstance(batch_sizes, list) or not 0 < len(batch_sizes) <= MAX_LIST or not all(_count(b) for b in batch_sizes):
                bad(("batch_sizes",), f"must be null or a list of 1 to {MAX_LIST} whole numbers in 1..{MAX_COUNT}")
            elif len(set(batch_sizes)) != len(batch_sizes):
                bad(("batch_sizes",), "lists a batch size twice")
        default = data.get("default_batch_size")
        if default is not None and not _count(default):
            bad(("default_batch_size",), f"must be null or a whole number in 1..{MAX_COUNT}")
        predictions = _predictions(data.get("predictions"), bad)
        fresh = data.get("fresh", False)
        if not isinstance(fresh, bool):
            bad(("fresh",), "must be true or false")
        if problems:
            raise SetupError([(p.path, p.message) for p in problems])
        assert job is not None and isinstance(identity, dict) and isinstance(table, dict)
        return cls(
            job=job,
            identity=identity,
            batch_size=dict(table),
            max_power_w=float(max_power),
            batch_sizes=None if batch_sizes is None else [int(b) for b in batch_sizes],
            default_batch_size=None if default is None else int(default),
            predictions=predictions,
            fresh=fresh,
        )


def _number(v: Any, lo: float = 0.0, strict: bool = False) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return False
    return v > lo if strict else v >= lo


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_COUNT


def _check_finite(value: Any, path: tuple, bad: Callable[[tuple, str], None], depth: int = 0) -> None:
    """Every number in a JSON value is finite (``"inf"`` strings are how infinity travels)."""
    if depth > 32:
        bad(path, "nested too deeply (more than 32 levels)")
    elif isinstance(value, float) and not math.isfinite(value):
        bad(path, f'must be a finite number, got {value!r} (write infinity as the string "inf")')
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, path + (str(k),), bad, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, path + (i,), bad, depth + 1)


def _predictions(raw: Any, bad: Callable[[tuple, str], None]) -> dict[int, list[EpochPrediction]] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        bad(("predictions",), "must be null or an object: batch size -> [[power_limit, time_s, energy_j], ...]")
        return None
    if len(raw) > MAX_LIST:
        bad(("predictions",), f"predicts more than {MAX_LIST} batch sizes")
        return None
    out: dict[int, list[EpochPrediction]] = {}
    for key, rows in raw.items():
        path = ("predictions", str(key))
        if not (isinstance(key, str) and key.isdigit() and _count(int(key))):
            bad(path, f"a batch size must be a whole number in 1..{MAX_COUNT}")
            continue
        if (
            not isinstance(rows, list)
            or len(rows) > MAX_LIST
            or not all(isinstance(r, list) and len(r) == 3 and _number(r[0], strict=True) and _number(r[1]) and _number(r[2]) for r in rows)
        ):
            bad(path, f"must list up to {MAX_LIST} [power_limit > 0, time_s >= 0, energy_j >= 0] triples of finite numbers")
            continue
        out[int(key)] = [EpochPrediction(float(p), float(t), float(e)) for p, t, e in rows]
    return out


@runtime_checkable
class ServesHistory(Protocol):
    """A :class:`~zeus_core.backends.JobStore` that runs the try bookkeeping itself (a service in
    front of the job's state, such as ``zeus serve``): the runner and the script-level
    optimizers ask it for a :class:`HistoryService` instead of building :class:`History`.

    ``setup`` says everything the service needs to build the job's batch-size
    policy as ``zeus run`` would (:class:`~zeus_core.engine.remote.HistorySetup`); the power
    policy stays in this process, where the device is, and the service keeps its
    state (see the module docstring).

    Example::

        def history_service(self, setup, power_policy=None):
            return MyServiceClient(self.url, setup.to_json(), power_policy)
    """

    def history_service(self, setup: HistorySetup, power_policy: PowerPolicy | None = None) -> HistoryService: ...
