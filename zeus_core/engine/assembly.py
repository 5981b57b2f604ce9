"""Turning a job into its parts: the one path ``zeus run``, a user's loop, a remote session and the tools take.

A job comes as a validated job file (``zeus run``), as the arguments of an in-loop
object (:class:`~zeus_core.PowerLimitOptimizer`, :class:`~zeus_core.BatchSizeOptimizer`,
:class:`~zeus_core.ZeusMonitor`), as a client's setup (``zeus serve``) or as a tool's
request for one device (``zeus monitor``, :func:`open_device`). Whichever way, its parts
are put together here, in these steps:

1. **structure**: each part's table (a plugin name and its options) becomes a
   :class:`~zeus_core.job.PartSpec` with the plugin's attrs options class; a job file was
   structured when it was validated (:mod:`zeus_core.engine.validation`), any other table
   by :func:`part_spec`, with the same converter and the same field paths;
2. **build**: each factory is called as ``factory(options, context)`` in
   :data:`~zeus_core.job.BUILD_ORDER`, the context holding the parts built before;
3. **fit**: a part that needs device capabilities (:class:`~zeus_core.NeedsDevice`) is
   refused on a device without them (:func:`missing_capabilities`), before anything runs;
4. **ranks**: under a launcher, every rank says whether it built its device and workload,
   so a rank that cannot start stops the job on every rank with its reason;
5. **identity**: the facts the built parts report (:class:`~zeus_core.HasIdentity`) complete
   what the options declare, and the identity is checked against the store once, before
   anything runs (:meth:`Assembly.check_identity`); the job's first write claims it again,
   atomically, against concurrent runners (:class:`~zeus_core.engine.history.History`);
6. **history**: the job's tries are kept here (:class:`~zeus_core.engine.history.History`
   over the store) or by the service the store is (:class:`~zeus_core.engine.remote.ServesHistory`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs
import cattrs
from rich.console import Console

from zeus_core import catalog
from zeus_core.backends import JobStore, ProcessGroup
from zeus_core.contexts import BuildContext
from zeus_core.device import EpochPrediction, NoDevices
from zeus_core.engine.history import History, HistoryService
from zeus_core.engine.ranks import SINGLE, launched_local_rank, process_group
from zeus_core.engine.registry import SECTION_KIND, Registry, get_registry
from zeus_core.engine.remote import WIRE, HistorySetup, ServesHistory, SetupError
from zeus_core.engine.stores.locations import open_store
from zeus_core.engine.validation import Problem, structure, suggest
from zeus_core.errors import BadInput, PartMismatch
from zeus_core.identity import differences, option_identity, refuse_another_job, with_facts
from zeus_core.job import BUILD_ORDER, JobOptions, JobSpec, PartSpec, job_name
from zeus_core.parts import HasIdentity, NeedsDevice, OffersBatchSizes, ServesRanks
from zeus_core.registrations import PluginRegistry

log = logging.getLogger("zeus.engine")

# --------------------------------------------------------------------------- structure


class OptionsError(BadInput):
    """A part's options table that does not structure: ``problems`` lists each, with its path."""

    def __init__(self, what: str, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(f"{what}: " + "; ".join(self.lines()))

    def lines(self) -> list[str]:
        """Each problem as ``"message @ $.path"``."""
        return [f"{p.message} @ {p.jsonpath()}" for p in self.problems]


def part_spec(
    registry: Registry,
    section: str,
    plugin: Any,
    table: Any,
    *,
    what: str,
    root: tuple = ("options",),
    converter: cattrs.Converter | None = None,
) -> PartSpec:
    """The ``section`` part named ``plugin`` with its options ``table`` (a ``job.toml`` table without
    ``plugin``), structured as a job file's would be. ``what`` names the argument in messages
    (``"policy='jit'"``), ``root`` is the path the options' problems are reported under.

    Raises :class:`BadInput` for a plugin this registry does not have (naming the installed ones
    and, where known, the distribution to install) and :class:`OptionsError` for bad options.
    """
    kind = SECTION_KIND[section]
    known = registry.names(kind)
    if not isinstance(plugin, str) or plugin not in known:
        command = catalog.hint(section, plugin) if isinstance(plugin, str) else None
        hint = f" ({command})" if command else ""
        close = suggest(plugin, known) if isinstance(plugin, str) else ""
        kind_words = kind.replace("_policy", " policy") if kind.endswith("_policy") else kind
        raise BadInput(f"{what} is not a registered {kind_words}{close}{hint}; installed: {', '.join(known) or 'none'}")
    if table is not None and not isinstance(table, dict):
        raise BadInput(f"options must be a dict (the [{section}] table of a job file, without plugin), got {type(table).__name__}")
    reg = registry.get(kind, plugin)
    problems: list[Problem] = []
    options = structure(reg.options, dict(table or {}), root, problems, *(() if converter is None else (converter,)))
    if options is None:
        raise OptionsError(what, problems)
    return PartSpec(section, plugin, options, reg)


def script_job(name: str | None, **knobs: Any) -> JobOptions:
    """The ``[job]`` options of a job driven from a script (``job=`` and the knobs it was given)."""
    if name is not None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"job must be the job's name (a non-empty string), got {name!r}")
        job_name(None, None, name)
    return JobOptions(name=name or "", **knobs)


def script_spec(job: JobOptions, parts: dict[str, PartSpec] | None = None) -> JobSpec:
    """A job driven from a script as a :class:`~zeus_core.job.JobSpec`: its folder is the current one."""
    return JobSpec(path=Path.cwd() / "script", job=job, parts=dict(parts or {}), raw={}, overrides={}, lines={})


def open_job_store(spec: JobSpec, registry: PluginRegistry) -> JobStore:
    """The job's store where ``job.store`` says (relative to the job file's folder; a script's is the
    current one), or ``.zeus/<name>.sqlite``."""
    return open_store(spec.store_location(), registry, job=spec.job.name)


# --------------------------------------------------------------------------- fit


def missing_capabilities(part: Any, device: Any) -> list[type]:
    """The device capabilities ``part`` needs (:class:`~zeus_core.NeedsDevice`) that ``device`` lacks."""
    if not isinstance(part, NeedsDevice) or not part.needs_device:
        return []
    return [cap for cap in part.needs_device if not isinstance(device, cap)]


def _methods(protocol: type) -> str:
    """The methods a capability protocol asks for, for error messages."""
    names = [n for n in vars(protocol) if not n.startswith("_") and callable(getattr(protocol, n))]
    return ", ".join(f"{n}()" for n in names) or ", ".join(getattr(protocol, "__annotations__", {}))


# --------------------------------------------------------------------------- the assembly


class Assembly:
    """A job's parts, built in order and checked to fit, its identity, and where its history is kept.

    ``spec``: the validated job (:func:`script_spec` for a script's). ``store``: the job's
    store (None: a job that keeps no state here, such as a sweep's simulations or another
    rank than 0). ``parts``: parts the caller built itself (a script's monitor as the
    ``device``), which the others see as if built here. ``identity``: what the job
    declares it optimises, when not all of it is in ``spec`` (a script declares only
    what it knows; :mod:`zeus_core.identity`). ``group``: the ranks a launcher started
    (one process: :data:`~zeus_core.engine.ranks.SINGLE`). ``fixes``: the ways out an
    identity refusal names (the CLI's ``--fresh``, a script's ``fresh=True``). ``labels``:
    how messages name a section's part where it is not a job file's (``policy='jit'``),
    and ``fit_fix`` the fix they give for a device that lacks what the part needs.
    """

    def __init__(
        self,
        spec: JobSpec,
        registry: PluginRegistry,
        *,
        store: JobStore | None = None,
        console: Console | None = None,
        parts: dict[str, Any] | None = None,
        identity: dict[str, Any] | None = None,
        group: ProcessGroup = SINGLE,
        fresh: bool = False,
        fixes: str | None = None,
        labels: dict[str, str] | None = None,
        fit_fix: str = "",
    ) -> None:
        self.spec = spec
        self.registry = registry
        self.group = group
        self.fresh = fresh
        self.fixes = fixes
        self.labels = dict(labels or {})
        self.fit_fix = fit_fix
        self.context = BuildContext(
            spec,
            store,
            console or Console(stderr=True),
            registry,
            parts=dict(parts or {}),
            group=group if group.world_size > 1 else None,
        )
        #: What this job optimises: declared by the options, plus the built parts' facts.
        self.identity: dict[str, Any] = spec.identity() if identity is None else identity
        self._facts_of: set[str] = set()

    @classmethod
    def for_job(
        cls,
        spec: JobSpec,
        registry: Registry,
        *,
        console: Console | None = None,
        store: JobStore | None = None,
        group: ProcessGroup | None = None,
        fresh: bool = False,
    ) -> Assembly:
        """A job file's assembly: the ranks a launcher started join (``job.processes`` is their
        number) and rank 0 opens the job's store (or takes ``store``, the one the job's validation
        opened); every other rank keeps none (closing ``store``)."""
        joined = join_ranks(spec, registry, group) if "workload" in spec.parts else SINGLE
        if joined.rank != 0 and store is not None:
            store.close()
            store = None
        elif joined.rank == 0 and store is None:
            store = open_job_store(spec, registry)
        return cls(spec, registry, store=store, console=console, group=joined, fresh=fresh)

    # -- what it holds --

    @property
    def parts(self) -> dict[str, Any]:
        """The parts built so far, by section."""
        return self.context.parts

    @property
    def store(self) -> JobStore | None:
        return self.context.store

    @property
    def leads(self) -> bool:
        """Whether this process decides for the job: rank 0, or the only process."""
        return self.group.rank == 0

    @property
    def launched(self) -> bool:
        """Whether several ranks a launcher started run this job."""
        return self.group.world_size > 1

    def plugin_of(self, section: str) -> str:
        part = self.spec.parts.get(section)
        return part.plugin if part is not None else section

    def label(self, section: str) -> str:
        """How messages name the part of ``section``: ``[power] plugin 'jit'`` in a job file."""
        return self.labels.get(section) or f"[{section}] plugin {self.plugin_of(section)!r}"

    # -- building --

    def build(self, sections: tuple[str, ...] = BUILD_ORDER) -> Assembly:
        """Build every part of ``sections`` the job has and was not given, in build order, each
        checked to fit; under a launcher, ranks other than 0 build only the device and the
        workload. Then the parts' facts join the identity."""
        if not self.leads:
            sections = tuple(s for s in sections if s in ("device", "workload"))
        for section in BUILD_ORDER:
            if section not in sections or section not in self.spec.parts or section in self.parts:
                continue
            if self.launched and section in ("device", "workload"):
                self._build_on_every_rank(section)
            else:
                self.parts[section] = self.build_part(section)
            if section == "device" and self.leads:
                self._open_grid()
        self._add_facts()
        return self

    def _open_grid(self) -> None:
        """The job's ``[grid]`` signals, placed on the device's clock: the wall clock, or for a simulated
        one ``[grid].start`` plus the simulated time of the tries the store already holds."""
        options = self.spec.grid
        if options is None or self.context.grid is not None:
            return
        from zeus_core.device import SimulatedClock
        from zeus_core.engine.signals import open_grid

        grid = open_grid(options, self.registry, self.spec.job_dir)
        device = self.parts["device"]
        elapsed = 0.0
        if isinstance(device, SimulatedClock) and self.store is not None and not self.fresh:
            elapsed = float(sum(r.time_s for r in self.store.tries()))
        try:
            grid.bind(device, elapsed)
        except ValueError as e:
            raise PartMismatch(f"[grid]: {e}") from e
        self.context.grid = grid

    def build_part(self, section: str, parts: dict[str, Any] | None = None) -> Any:
        """Call the factory of the job's ``section``, checked to fit the device. ``parts`` (default:
        the parts built so far) is what its context holds: a tool that builds a part again for
        another device (a replay's fresh policy per group) passes that device."""
        ps = self.spec.parts[section]
        context = self.context if parts is None else attrs.evolve(self.context, parts=dict(parts))
        try:
            part = self._call_factory(section, ps, context)
        except (PartMismatch, ValueError, FileNotFoundError) as e:
            raise PartMismatch(f"{self.label(section)}: {e}") from e
        if section == "workload" and self.launched and not isinstance(part, ServesRanks):
            raise PartMismatch(
                f"[workload] plugin {ps.plugin!r} cannot train on ranks a launcher started (it does not serve "
                "rank 0); run zeus once, without the launcher (job.processes for data-parallel workloads)"
            )
        self._check_fit(section, ps.plugin, part, context.parts.get("device"))
        log.debug("[%s] built by plugin %r: %s", section, ps.plugin, type(part).__name__)
        return part

    def _call_factory(self, section: str, ps: PartSpec, context: BuildContext) -> Any:
        """``factory(options, context)``. Under a launcher with several ranks on a machine, a ``[device]``
        that measures GPUs and names none measures this rank's own (``LOCAL_RANK``-th) GPU, by the
        option its registration declares (``measures``), so that the ranks' sum counts each GPU once;
        where that GPU is not visible (the launcher gave each rank one GPU), its table as written."""
        local = launched_local_rank() if section == "device" and self.launched else None
        option = ps.registration.measures.get("gpu") if local is not None else None
        if option is not None and getattr(ps.options, option) is None:
            try:
                return ps.registration.factory(attrs.evolve(ps.options, **{option: [local]}), context)
            except Exception:  # noqa: BLE001 - e.g. CUDA_VISIBLE_DEVICES names one GPU per rank
                pass
        return ps.registration.factory(ps.options, context)

    def _check_fit(self, section: str, plugin: str, part: Any, device: Any) -> None:
        missing = missing_capabilities(part, device)
        if not missing:
            return
        if self.fit_fix:
            names = ", ".join(cap.__name__ for cap in missing)
            raise PartMismatch(f"{self.label(section)} needs a device with {names}, and the monitor's devices have none; {self.fit_fix}")
        if device is None:
            raise PartMismatch(f"[{section}] plugin {plugin!r} needs a [device], and the job has none")
        dev_name = self.plugin_of("device")
        what = ", ".join(f"{cap.__name__} ({_methods(cap)})" for cap in missing)
        fix = "Choose another device plugin"
        default = self.registry.default(SECTION_KIND[section])
        if default is not None and default != plugin:
            fix += f", or the default {section} plugin {default!r}"
        raise PartMismatch(f"[{section}] plugin {plugin!r} needs a device with {what}, but device {dev_name!r} has none. {fix}")

    def _build_on_every_rank(self, section: str) -> None:
        """Build ``section`` on this rank, then learn whether every rank did (and, for the device,
        every rank's maximum power, for the cost metric)."""
        try:
            part = self.build_part(section)
        except Exception as e:
            self._ranks_ready(str(e) if isinstance(e, PartMismatch) else f"{type(e).__name__}: {e}")
            raise
        self.parts[section] = part
        if section == "device":
            self.context.rank_max_power_w = self._ranks_ready(None, float(part.max_power_w))
        else:
            self._ranks_ready(None)

    def _ranks_ready(self, error: str | None, value: Any = None) -> list[Any]:
        """Every rank says whether it built its part (and a value): the values by rank, or
        :class:`PartMismatch` on every rank naming each rank that failed."""
        g = self.group
        got = g.gather((error, value))
        verdict = None
        if g.rank == 0:
            assert got is not None
            bad = [f"rank {r} of {g.world_size} could not start: {e}" for r, (e, _) in enumerate(got) if e]
            verdict = ("error", "; ".join(bad)) if bad else ("ok", [v for _, v in got])
        kind, payload = g.broadcast(verdict)
        if kind == "error":
            raise PartMismatch(payload)
        return payload

    def _add_facts(self) -> None:
        facts = {}
        for section, part in self.parts.items():
            if section not in self._facts_of and isinstance(part, HasIdentity):
                facts[section] = part.identity()
                self._facts_of.add(section)
        if facts:
            self.identity = with_facts(self.identity, facts)

    def open_store(self) -> JobStore:
        """Open the job's store (:func:`open_job_store`), which the assembly then owns."""
        self.context.store = open_job_store(self.spec, self.registry)
        return self.context.store

    # -- identity --

    def check_identity(self) -> None:
        """Refuse (:class:`~zeus_core.identity.IdentityMismatch`) a store that learned another job;
        nothing to check without a store or when starting over (``fresh``)."""
        store = self.store
        if self.fresh or store is None:
            return
        refuse_another_job(store.location, store.identity(), self.identity, self.fixes)

    # -- history --

    def history(self, *, max_power_w: float | None = None, wait: bool = False) -> HistoryService:
        """Where the job's tries are kept: the service the store is, when it runs the batch-size
        policy itself (the power policy stays here, where the device is), else a
        :class:`~zeus_core.engine.history.History` over the store. ``max_power_w``: the cost
        metric's (default: the device's); ``wait``: a ``fresh`` start waits for the job's other
        live runners to end their recurrences instead of refusing (``zeus run --fresh --wait``)."""
        store = self.store
        if isinstance(store, ServesHistory) and "batch_size" in self.spec.parts:
            bs = self.spec.parts["batch_size"]
            setup = HistorySetup.of_parts(
                self.spec.job,
                self.identity,
                bs.plugin,
                bs.options,
                max_power_w=self._max_power_w(max_power_w),
                device=self.parts.get("device"),
                workload=self.parts.get("workload"),
                fresh=self.fresh,
                wait=wait,
            )
            return store.history_service(setup, power_policy=self.parts.get("power"))
        return self.local_history(max_power_w=max_power_w, wait=wait)

    def local_history(self, *, max_power_w: float | None = None, wait: bool = False) -> History:
        """The job's :class:`~zeus_core.engine.history.History` over its store, in this process."""
        store = self.store
        if store is None:
            raise RuntimeError("a job without a store keeps no history")
        workload: Any = self.parts.get("workload")
        offers = isinstance(workload, OffersBatchSizes)
        return History(
            self.spec.job,
            store,
            self.parts.get("batch_size"),
            identity=self.identity,
            max_power_w=self._max_power_w(max_power_w),
            batch_sizes=[int(b) for b in workload.batch_sizes] if offers and workload.batch_sizes is not None else None,
            default_batch_size=workload.default_batch_size if offers else None,
            power_policy=self.parts.get("power"),
            fresh=self.fresh,
            wait=wait,
        )

    def _max_power_w(self, given: float | None) -> float:
        """The cost metric's maximum power: ``given``, else the device's."""
        if given is not None:
            return float(given)
        device = self.parts.get("device")
        if device is None:
            raise RuntimeError("the cost metric needs the devices' maximum power, and this job has no device")
        return float(device.max_power_w)

    # -- lifetime --

    def close_parts(self) -> list[str]:
        """Close the parts built here in reverse build order (devices last: they restore settings),
        however many fail; returns what failed."""
        from zeus_core.parts import Closeable

        errors = []
        for section in reversed(BUILD_ORDER):
            part = self.parts.get(section)
            if isinstance(part, Closeable):
                try:
                    part.close()
                except Exception as e:  # noqa: BLE001 - keep closing the others
                    errors.append(f"[{section}] close failed: {e}")
        return errors


def join_ranks(spec: JobSpec, registry: Registry, group: ProcessGroup | None = None) -> ProcessGroup:
    """The ranks a launcher started (one process: a group of one); ``job.processes`` follows them."""
    try:
        got = process_group(group, registry)
    except (RuntimeError, TypeError) as e:
        raise PartMismatch(str(e)) from e
    job = spec.job
    if got.world_size > 1:
        if job.processes not in (1, got.world_size):
            raise PartMismatch(
                f"job.processes = {job.processes}, but the launcher started {got.world_size} ranks; leave "
                f"job.processes out under a launcher (it is the launcher's world size), or start {job.processes} ranks"
            )
        job.processes = got.world_size
    return got


# --------------------------------------------------------------------------- devices outside a job


class DeviceOpenError(BadInput):
    """A device plugin could not be opened; the message says which and why (unknown name,
    bad options with their field paths, or the plugin's own error such as a missing driver)."""


def build_device(reg: Registry, name: str, table: dict[str, Any], console: Console) -> tuple[Any, dict[str, Any]]:
    """Build device plugin ``name`` from its options table outside a job; returns the group and its
    identity as a job's ``[device]`` section declares it (``plugin``, identity options, facts).

    Raises :class:`OptionsError` for bad options, or whatever the plugin raises.
    """
    ps = part_spec(reg, "device", name, table, what=name, root=(name,))
    group = ps.registration.factory(ps.options, BuildContext.outside_job(console, reg))
    identity = {"plugin": name, **option_identity(ps.options)}
    if isinstance(group, HasIdentity):
        identity = with_facts({"device": identity}, {"device": group.identity()})["device"]
    return group, identity


def open_devices(
    reg: Registry, names: list[str], tables: dict[str, dict], console: Console
) -> tuple[list[tuple[str, Any]], list[tuple[str, str]], list[str]]:
    """Build several device plugins, collecting failures instead of stopping at the first.

    Returns (opened ``[(name, group)]``, unavailable ``[(name, why)]`` for factories
    that raised, e.g. no driver on this machine, option errors ``"name: message @
    path"``). ``tables`` holds each name's options as in its ``[device]`` table.
    Every name must be registered (KeyError otherwise; check ``reg.names("device")``).
    """
    opened, unavailable, errors = [], [], []
    for name in names:
        try:
            group, _ = build_device(reg, name, tables.get(name, {}), console)
        except OptionsError as e:
            errors += [f"{name}: {line}" for line in e.lines()]
        except Exception as e:  # noqa: BLE001 - a device this machine cannot open is reported, not fatal
            unavailable.append((name, str(e) or type(e).__name__))
        else:
            opened.append((name, group))
    return opened, unavailable, errors


def open_device(
    name: str,
    options: dict[str, Any] | None = None,
    registry: Registry | None = None,
    console: Console | None = None,
) -> Any:
    """The device group of plugin ``name`` built with ``options`` (its ``[device]`` table, without ``plugin``).

    Tools that need a device without a job (``zeus monitor``, the Perseus frequency
    controller, which builds its device in a child process from a picklable
    ``functools.partial(open_device, "nvml", {...})``) use this: the same registry, the
    same options class (a misspelt option fails with its name, as in ``job.toml``) and
    the same factory as a job::

        gpus = open_device("nvml", {"gpus": [0]})
        try:
            ...
        finally:
            gpus.close()

    Raises :class:`DeviceOpenError` naming the installed devices for an unknown name,
    every bad option with its path, or the plugin's reason it cannot open here. The
    caller owns the group and must ``close()`` it (that restores any setting it changed).
    """
    reg = registry if registry is not None else get_registry()
    known = reg.names("device")
    if name not in known:
        raise DeviceOpenError(f"no device plugin named {name!r}; installed: {', '.join(known) or 'none'}")
    opened, unavailable, errors = open_devices(reg, [name], {name: dict(options or {})}, console or Console(stderr=True))
    if errors:
        raise DeviceOpenError("bad device options: " + "; ".join(errors))
    if unavailable:
        raise DeviceOpenError(f"device {name!r} cannot be opened: {unavailable[0][1]}")
    return opened[0][1]


# --------------------------------------------------------------------------- a remote session (the service's side)


class _ClientDevice(NoDevices):
    """What a client said about its device: the service measures and steers nothing."""

    names = ["remote"]


class _PredictingClientDevice(_ClientDevice):
    """... and the epoch predictions it gave (:class:`~zeus_core.EpochPredictor`)."""

    def __init__(self, max_power_w: float, predictions: dict[int, list[EpochPrediction]]) -> None:
        super().__init__(max_power_w)
        self._predictions = predictions

    def predict_epoch(self, batch_size: int) -> list[EpochPrediction] | None:
        got = self._predictions.get(int(batch_size))
        return None if got is None else list(got)


@attrs.define
class _ClientWorkload:
    """The batch sizes the client's workload offers (:class:`~zeus_core.OffersBatchSizes`)."""

    batch_sizes: list[int] | None
    default_batch_size: int | None

    def run(self, session: Any) -> None:
        raise RuntimeError("a history service trains nothing")


def build_history(setup: HistorySetup, store: JobStore, registry: Registry | None = None, console: Console | None = None) -> History:
    """The job's :class:`~zeus_core.engine.history.History` over ``store``, with its batch-size policy
    built from ``setup`` as ``zeus run`` builds it, beside stand-ins for the client's device and
    workload (the power policy stays with the client).

    Raises :class:`~zeus_core.engine.remote.SetupError` for a policy this registry does not have,
    options it refuses (each with its path), or a setup whose identity disagrees with what its own
    options say (a client and a service that resolve the job differently), and
    :class:`~zeus_core.identity.IdentityMismatch` when ``store`` learned another job
    (unless the setup starts over).
    """
    registry = registry if registry is not None else get_registry()
    table = dict(setup.batch_size)
    plugin = str(table.pop("plugin"))
    try:
        ps = part_spec(registry, "batch_size", plugin, table, what=f"batch_size.plugin {plugin!r}", root=("batch_size",), converter=WIRE)
    except OptionsError as e:
        raise SetupError([(p.path, p.message) for p in e.problems]) from None
    except BadInput:
        installed = ", ".join(registry.names("batch_size_policy")) or "none"
        why = f"this service has no batch-size policy {plugin!r}; installed: {installed}"
        raise SetupError([(("batch_size", "plugin"), why)]) from None
    resolved = {"job": option_identity(setup.job), "batch_size": {"plugin": plugin, **option_identity(ps.options)}}
    said = {section: setup.identity.get(section, {}) for section in resolved}
    diffs = differences(said, resolved)
    if diffs:
        raise SetupError(
            [
                (
                    ("identity",) + tuple(d.key.split(".")),
                    f"the identity says {d.stored!r} but the options resolve to {d.current!r} "
                    "here (a client and a service with different plugin versions?)",
                )
                for d in diffs
            ]
        )
    device = (
        _PredictingClientDevice(setup.max_power_w, setup.predictions) if setup.predictions is not None else _ClientDevice(setup.max_power_w)
    )
    spec = JobSpec(path=Path(f"{setup.job.name}.toml"), job=setup.job, parts={"batch_size": ps}, raw={}, overrides={}, lines={})
    assembly = Assembly(
        spec,
        registry,
        store=store,
        console=console,
        parts={"device": device, "workload": _ClientWorkload(setup.batch_sizes, setup.default_batch_size)},
        identity=setup.identity,
        fresh=setup.fresh,
        labels={"batch_size": f"plugin {plugin!r} refused the options"},
    )
    assembly.check_identity()
    try:
        assembly.build(("batch_size",))
    except (PartMismatch, TypeError) as e:
        why = str(e) if isinstance(e, PartMismatch) else f"plugin {plugin!r} refused the options: {e}"
        raise SetupError([(("batch_size",), why)]) from e
    return assembly.local_history(max_power_w=setup.max_power_w)
