"""Plugin discovery and the name -> factory registries.

Every plugin, first-party or not, arrives through the ``zeus`` entry-point
group, so the built-ins prove the path third parties use. Environment knobs:

* ``ZEUS_DISABLED_PLUGINS=a,b`` blocks those entry points (by entry-point name);
* ``ZEUS_TRACE_PLUGINS=1`` prints every hook call with its arguments and results.

Registering the same name twice for the same kind is an error naming both
distributions; a hook implementation without a matching spec (a typo such as
``zeus_register_device``) is an error naming the plugin.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pluggy

from zeus_core import hookspecs
from zeus_core.errors import PluginError
from zeus_core.privileged import operations_of
from zeus_core.registrations import GridSource, NoOptions, PluginInfo, ProcessGroupJoiner, Registration, StoreBackend, check_options

#: kind -> (registration hook, job.toml section that selects a part of this kind)
KINDS: dict[str, tuple[str, str]] = {kind: (hook, section) for kind, hook, section in hookspecs.PART_KINDS}

SECTION_KIND = {section: kind for kind, (_, section) in KINDS.items()}


#: The name the core's own hook implementations are registered under.
CORE_PLUGIN = "zeus-core"


def _core_version() -> str:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return name_and_version(distribution("zeus-core"))[1]
    except PackageNotFoundError:  # a source tree
        return "0+unknown"


def name_and_version(dist: Any) -> tuple[str, str]:
    """An installed distribution's name and version (an ``importlib.metadata.Distribution``), read from
    its metadata's headers alone: its body, often a whole README, is not parsed at every start."""
    from email.parser import HeaderParser

    headers = HeaderParser().parsestr(dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "")
    name, version = headers["Name"], headers["Version"]
    if name is None or version is None:  # metadata of another shape: as importlib.metadata reads it
        return dist.metadata["Name"], dist.version
    return name, version


class Registry:
    """The plugin manager plus one ``name -> Registration`` table per kind."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self.parts: dict[str, dict[str, Registration]] = {kind: {} for kind in KINDS}
        self.restorers: dict[str, Callable[[str, Any], Any]] = {}
        self.stores: dict[str, StoreBackend] = {}
        #: how ranks started by a launcher join one job (``zeus_register_process_groups``), by name
        self.process_groups: dict[str, ProcessGroupJoiner] = {}
        self._services: dict[str, Registration] | None = None
        #: sources of grid signals (``zeus_register_grid_signals``), by scheme
        self.grid_sources: dict[str, GridSource] = {}
        self._dist: dict[str, tuple[str, str]] = {}

    # -- lookups --

    @property
    def services(self) -> dict[str, Registration]:
        """``zeus daemon``'s privileged services (``zeus_register_privileged_operations``), by name.

        Collected on first use (``zeus daemon``, ``zeus plugins``), so that the commands that serve
        no device import no service's code; a bad registration is a :class:`PluginError` then."""
        if self._services is None:
            services: dict[str, Registration] = {}
            plugins = self._plugins()
            for plugin_name, plugin in plugins:
                caller = self._caller_for("zeus_register_privileged_operations", plugin, plugins)
                if caller is not None:
                    caller(register=self._registrar("privileged_service", plugin_name, services))
            self._services = services
        return self._services

    def get(self, kind: str, name: str) -> Registration:
        return self.parts[kind][name]

    def names(self, kind: str) -> list[str]:
        return sorted(self.parts[kind])

    def measuring(self, hardware: str) -> list[Registration]:
        """The device registrations that declared they measure ``hardware`` (``"gpu"``, ``"cpu"``), by name."""
        return [r for _, r in sorted(self.parts["device"].items()) if hardware in r.measures]

    def default(self, kind: str) -> str | None:
        """The name registered with ``default=True`` for ``kind`` (what a job without that
        section uses, where the core needs one), or None."""
        return next((r.name for r in self.parts[kind].values() if r.default), None)

    def distribution_of(self, plugin_name: str) -> tuple[str, str]:
        """(distribution, version) of a registered plugin, or a description of where it came from."""
        return self._dist.get(plugin_name, ("(not installed; registered directly)", ""))

    def plugins(self) -> list[PluginInfo]:
        out = []
        for name, plugin in sorted(self.pm.list_name_plugin(), key=lambda x: x[0]):
            if plugin is hookspecs or plugin is None:  # None: blocked
                continue
            dist, version = self.distribution_of(name)
            hooks = sorted(c.name for c in self.pm.get_hookcallers(plugin) or [])
            provides: dict[str, list[str]] = {}
            for kind, table in self.parts.items():
                got = sorted(r.name for r in table.values() if r.plugin == name)
                if got:
                    provides[kind] = got
            restorers = sorted(o for o, f in self.restorers.items() if getattr(f, "_zeus_plugin", None) == name)
            if restorers:
                provides["restorer"] = restorers
            stores = sorted(b.scheme for b in self.stores.values() if b.plugin == name)
            if stores:
                provides["store"] = stores
            groups = sorted(g.name for g in self.process_groups.values() if g.plugin == name)
            if groups:
                provides["process_group"] = groups
            grid = sorted(g.scheme for g in self.grid_sources.values() if g.plugin == name)
            if grid:
                provides["grid_signal"] = grid
            ops = privileged_operations({n: r for n, r in self.services.items() if r.plugin == name})
            if ops:
                provides["privileged_operation"] = ops
            out.append(PluginInfo(name, dist, version, hooks, provides))
        return out

    # -- registration --

    def _plugins(self) -> list[tuple[str, object]]:
        return [(n, p) for n, p in self.pm.list_name_plugin() if p is not hookspecs and p is not None]

    def _collect(self) -> None:
        plugins = self._plugins()
        for kind, (hook_name, _) in KINDS.items():
            for plugin_name, plugin in plugins:
                caller = self._caller_for(hook_name, plugin, plugins)
                if caller is None:
                    continue
                caller(register=self._registrar(kind, plugin_name))
        for plugin_name, plugin in plugins:
            caller = self._caller_for("zeus_register_restorers", plugin, plugins)
            if caller is not None:
                caller(register=self._restorer_registrar(plugin_name))
            caller = self._caller_for("zeus_register_stores", plugin, plugins)
            if caller is not None:
                caller(register=self._store_registrar(plugin_name))
            caller = self._caller_for("zeus_register_process_groups", plugin, plugins)
            if caller is not None:
                caller(register=self._group_registrar(plugin_name))
            caller = self._caller_for("zeus_register_grid_signals", plugin, plugins)
            if caller is not None:
                caller(register=self._grid_registrar(plugin_name))

    def _caller_for(self, hook_name: str, plugin: object, plugins: list[tuple[str, object]]) -> pluggy.HookCaller | None:
        impls = getattr(self.pm.hook, hook_name).get_hookimpls()
        if not any(i.plugin is plugin for i in impls):
            return None
        others = [p for _, p in plugins if p is not plugin]
        # Going through a subset hook caller (not the bare function) keeps
        # ZEUS_TRACE_PLUGINS monitoring working for these calls.
        return self.pm.subset_hook_caller(hook_name, remove_plugins=others)

    def _registrar(self, kind: str, plugin_name: str, table: dict[str, Registration] | None = None) -> hookspecs.RegisterPart:
        dist = self.distribution_of(plugin_name)[0]
        table = self.parts[kind] if table is None else table

        def register(
            name: str,
            factory: Callable[..., Any],
            options: type | str | None = None,
            help: str = "",
            default: bool = False,
            measures: dict[str, str | None] | None = None,
        ) -> None:
            if not isinstance(name, str) or not name or name != name.strip():
                raise PluginError(f"plugin {plugin_name!r} ({dist}) registered an invalid {kind} name {name!r}")
            if measures is not None and (
                kind != "device"
                or not isinstance(measures, dict)
                or not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in measures.items())
            ):
                raise PluginError(
                    f"plugin {plugin_name!r} ({dist}) registered {kind} {name!r} with measures={measures!r}: only devices "
                    'declare what they measure, as {"gpu": "<option taking GPU indices>"} (None: no such option)'
                )
            if not callable(factory):
                raise PluginError(f"plugin {plugin_name!r} ({dist}) registered {kind} {name!r} with a non-callable factory")
            opts = options if options is not None else getattr(factory, "Options", None) or NoOptions
            if not isinstance(opts, str):  # "package.module:Class": imported and checked when first used
                check_options(opts, kind, name, measures, f"plugin {plugin_name!r} ({dist})")
            if kind == "privileged_service" and not operations_of(factory):
                raise PluginError(
                    f"plugin {plugin_name!r} ({dist}) registered privileged service {name!r}, whose class has no "
                    "method marked with @zeus_core.daemon.operation"
                )
            if name in table:
                prev = table[name]
                raise PluginError(
                    f"{kind} {name!r} is registered twice: by plugin {prev.plugin!r} (distribution "
                    f"{prev.distribution}) and by plugin {plugin_name!r} (distribution {dist}). "
                    f"Uninstall one, or block one with ZEUS_DISABLED_PLUGINS={plugin_name}"
                )
            if default:
                prev_default = next((r for r in table.values() if r.default), None)
                if prev_default is not None:
                    raise PluginError(
                        f"two {kind} parts declare themselves the default: {prev_default.name!r} (plugin "
                        f"{prev_default.plugin!r}) and {name!r} (plugin {plugin_name!r}); uninstall one, or block one "
                        f"with ZEUS_DISABLED_PLUGINS"
                    )
            doc = help or "".join((factory.__doc__ or "").strip().splitlines()[0:1])
            table[name] = Registration(kind, name, factory, opts, plugin_name, dist, doc, bool(default), dict(measures or {}))

        return register

    def _restorer_registrar(self, plugin_name: str) -> hookspecs.RegisterRestorer:
        def register(owner: str, restore: Callable[[str, Any], Any]) -> None:
            if owner in self.restorers:
                raise PluginError(f"restorer {owner!r} is registered twice (second by plugin {plugin_name!r})")
            try:
                restore._zeus_plugin = plugin_name  # type: ignore[attr-defined]
            except AttributeError:
                pass
            self.restorers[owner] = restore

        return register

    def _store_registrar(self, plugin_name: str) -> hookspecs.RegisterStore:
        dist = self.distribution_of(plugin_name)[0]

        def register(scheme: str, opener: Callable[..., Any], help: str = "") -> None:
            if not isinstance(scheme, str) or not scheme.isascii() or not scheme.replace("+", "").replace("-", "").isalnum():
                raise PluginError(f"plugin {plugin_name!r} ({dist}) registered an invalid store scheme {scheme!r}")
            key = scheme.lower()
            _refuse_twice(self.stores, key, "store scheme", plugin_name, dist)
            self.stores[key] = StoreBackend(key, opener, plugin_name, dist, help)

        return register

    def _group_registrar(self, plugin_name: str) -> hookspecs.RegisterProcessGroup:
        dist = self.distribution_of(plugin_name)[0]

        def register(name: str, join: Callable[[], Any], help: str = "") -> None:
            if not isinstance(name, str) or not name or name != name.strip() or not callable(join):
                raise PluginError(f"plugin {plugin_name!r} ({dist}) registered an invalid process group {name!r} (a name and a callable)")
            _refuse_twice(self.process_groups, name, "process group", plugin_name, dist)
            self.process_groups[name] = ProcessGroupJoiner(name, join, plugin_name, dist, help)

        return register

    def _grid_registrar(self, plugin_name: str) -> hookspecs.RegisterGridSignal:
        dist = self.distribution_of(plugin_name)[0]

        def register(scheme: str, opener: Callable[..., Any], help: str = "", suffixes: Iterable[str] = ()) -> None:
            if not isinstance(scheme, str) or not scheme.isascii() or not scheme.replace("-", "").isalnum() or len(scheme) < 2:
                raise PluginError(
                    f"plugin {plugin_name!r} ({dist}) registered an invalid grid source scheme {scheme!r} "
                    "(letters, digits and '-', at least two)"
                )
            if not callable(opener):
                raise PluginError(f"plugin {plugin_name!r} ({dist}) registered grid source {scheme!r} with a non-callable opener")
            ends = tuple(str(s).lower() for s in suffixes)
            if any(not s.startswith(".") for s in ends):
                raise PluginError(
                    f"plugin {plugin_name!r} ({dist}) registered grid source {scheme!r} with suffixes "
                    f"{list(ends)!r}: each starts with a dot ('.csv')"
                )
            key = scheme.lower()
            _refuse_twice(self.grid_sources, key, "grid source", plugin_name, dist)
            for s in ends:
                other = next((g for g in self.grid_sources.values() if s in g.suffixes), None)
                if other is not None:
                    raise PluginError(
                        f"files ending in {s} are read by two grid sources: {other.scheme!r} (plugin "
                        f"{other.plugin!r}) and {key!r} (plugin {plugin_name!r}); uninstall one, or block "
                        f"one with ZEUS_DISABLED_PLUGINS={plugin_name}"
                    )
            self.grid_sources[key] = GridSource(key, opener, plugin_name, dist, help, ends)

        return register


def _refuse_twice(table: dict[str, Any], key: str, what: str, plugin_name: str, dist: str) -> None:
    """A name registered by two plugins is an error naming both, and the way out."""
    if key in table:
        prev = table[key]
        raise PluginError(
            f"{what} {key!r} is registered twice: by plugin {prev.plugin!r} ({prev.distribution}) and by "
            f"plugin {plugin_name!r} ({dist}); uninstall one, or block one with ZEUS_DISABLED_PLUGINS={plugin_name}"
        )


def _trace(pm: pluggy.PluginManager) -> None:
    from rich.console import Console

    err = Console(stderr=True)

    def before(hook_name: str, hook_impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        err.print(f"[dim]zeus hook[/] {hook_name} -> {[i.plugin_name for i in hook_impls]} kwargs={list(kwargs)}")

    def after(outcome: pluggy.Result[Any], hook_name: str, hook_impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        try:
            result = outcome.get_result()
        except BaseException as e:  # noqa: BLE001 - only reported here
            result = f"raised {e!r}"
        err.print(f"[dim]zeus hook[/] {hook_name} <- {result!r}")

    pm.add_hookcall_monitoring(before, after)


def _split_env(name: str) -> list[str]:
    return [x.strip() for x in os.environ.get(name, "").split(",") if x.strip()]


def privileged_operations(services: dict[str, Registration]) -> list[str]:
    """``<service>.<operation>`` names the given privileged services offer."""
    return sorted(f"{name}.{op}" for name, r in services.items() for op in operations_of(r.factory))


def load(extra_plugins: Iterable[tuple[str, object]] = (), entry_points: bool = True, only: Iterable[str] | None = None) -> Registry:
    """Discover plugins and build the registries.

    ``extra_plugins`` are (name, module-or-object) pairs registered after the
    entry points, for tests and embedding. ``only``: load just these entry
    points (``zeus daemon`` imports nothing it does not serve).
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if os.environ.get("ZEUS_TRACE_PLUGINS", "") not in ("", "0"):
        _trace(pm)
    for blocked in _split_env("ZEUS_DISABLED_PLUGINS"):
        pm.set_blocked(blocked)
    reg = Registry(pm)
    # The core's own parts (the SQLite store) arrive through the same hooks as any plugin's.
    from zeus_core.engine import core_plugin

    pm.register(core_plugin, name=CORE_PLUGIN)
    reg._dist[CORE_PLUGIN] = ("zeus-core", _core_version())
    if entry_points:
        try:
            for name in [None] if only is None else list(only):
                pm.load_setuptools_entrypoints(hookspecs.PROJECT, name=name)
        except Exception as e:  # an entry point that fails to import
            raise PluginError(f"a zeus plugin failed to load: {type(e).__name__}: {e}") from e
        for plugin, dist in pm.list_plugin_distinfo():
            name = pm.get_name(plugin)
            if name is not None:
                reg._dist[name] = name_and_version(dist)
    for name, obj in extra_plugins:
        if pm.is_blocked(name) or pm.get_plugin(name) is obj:  # blocked, or already there (the core's own)
            continue
        pm.register(obj, name=name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        raise PluginError(
            f"plugin {e.plugin!r} implements a hook zeus does not define: {e}. Check the hook's name against zeus_core/hookspecs.py"
        ) from e
    reg._collect()
    return reg


_cached: Registry | None = None


def get_registry(refresh: bool = False) -> Registry:
    """The process-wide registry, loaded once."""
    global _cached
    if _cached is None or refresh:
        _cached = load()
    return _cached
