"""What the plugin registry holds, as the contract names it: one record per registered name
(:class:`Registration` for a part or a privileged service, :class:`StoreBackend`,
:class:`ProcessGroupJoiner`, :class:`GridSource`), what ``zeus plugins`` shows of a plugin
(:class:`PluginInfo`), and the registry as a part sees it (:class:`PluginRegistry`, handed to
factories as ``BuildContext.registry``). The engine's registry (``zeus_core.engine.registry``)
fills and implements them; this module imports nothing of the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs
import pluggy

from zeus_core.errors import PluginError


@attrs.define
class NoOptions:
    """Options class of factories that take no options."""


@attrs.frozen
class Registration:
    """One name registered for one kind by one plugin."""

    kind: str
    name: str
    factory: Callable[..., Any]
    #: the options class, or where it is (``"package.module:Class"``) until it is first used
    _options: type | str
    plugin: str
    distribution: str
    help: str = ""
    default: bool = False
    #: devices: what the plugin measures -> the option that selects devices by index (None: all)
    measures: dict[str, str | None] = attrs.field(factory=dict)

    @property
    def options(self) -> type:
        """The part's options class. One registered as ``"package.module:Class"`` is imported, and
        checked, here: when a job (or ``zeus validate``) first uses the part, not at every start;
        what is wrong with it is a :class:`PluginError` naming the plugin."""
        if isinstance(self._options, str):
            from zeus_core.loading import load_callable

            try:
                found = load_callable(self._options, what=f"the options of {self.kind} {self.name!r}")
            except ValueError as e:
                raise PluginError(f"plugin {self.plugin!r} ({self.distribution}): {e}") from e
            check_options(found, self.kind, self.name, self.measures, f"plugin {self.plugin!r} ({self.distribution})")
            object.__setattr__(self, "_options", found)
        assert not isinstance(self._options, str)
        return self._options


def check_options(opts: Any, kind: str, name: str, measures: dict[str, str | None] | None, who: str) -> None:
    """A part's options class is an attrs class with every option its ``measures`` names."""
    if not attrs.has(opts):
        raise PluginError(f"{who}: the options of {kind} {name!r} must be an attrs class, got {opts!r}")
    if measures:
        fields = {f.name for f in attrs.fields(opts)}
        unknown = sorted(o for o in measures.values() if o is not None and o not in fields)
        if unknown:
            raise PluginError(
                f"{who} registered device {name!r} with measures={measures!r}, but its options have no {', '.join(map(repr, unknown))}"
            )


@attrs.frozen
class ProcessGroupJoiner:
    """One way ranks of a job reach each other: ``join()`` returns a process group or None."""

    name: str
    join: Callable[[], Any]
    plugin: str
    distribution: str
    help: str = ""


@attrs.frozen
class GridSource:
    """One source of grid signals: ``[grid]`` values ``scheme:spec`` (or a path with one of ``suffixes``)
    are opened by ``opener(spec, request)`` (``zeus_register_grid_signals``)."""

    scheme: str
    opener: Callable[..., Any]
    plugin: str
    distribution: str
    help: str = ""
    suffixes: tuple[str, ...] = ()


@attrs.frozen
class StoreBackend:
    """One store backend: ``job.store`` URLs with ``scheme`` are opened by ``opener(location, timeout_s, job=name)``."""

    scheme: str
    opener: Callable[..., Any]
    plugin: str
    distribution: str
    help: str = ""


@attrs.define
class PluginInfo:
    """What ``zeus plugins`` shows for one plugin."""

    name: str
    distribution: str
    version: str
    hooks: list[str]
    provides: dict[str, list[str]]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class PluginRegistry(Protocol):
    """The plugins loaded in this process: the plugin manager (``pm``) and one ``name ->``
    :class:`Registration` table per part kind (``parts``), the restorers, store backends, process
    groups and grid sources by name, and ``zeus daemon``'s privileged services. The engine's
    registry is the one implementation; a part gets it as ``BuildContext.registry`` (to build
    another part the same way, or to name the plugins its other processes must load).

    Example::

        def build(options, context):
            measuring_gpus = [r.name for r in context.registry.measuring("gpu")]
            ...
    """

    pm: pluggy.PluginManager
    parts: dict[str, dict[str, Registration]]
    restorers: dict[str, Callable[[str, Any], Any]]
    stores: dict[str, StoreBackend]
    process_groups: dict[str, ProcessGroupJoiner]
    grid_sources: dict[str, GridSource]

    @property
    def services(self) -> dict[str, Registration]: ...

    def get(self, kind: str, name: str) -> Registration: ...

    def names(self, kind: str) -> list[str]: ...

    def measuring(self, hardware: str) -> list[Registration]: ...

    def default(self, kind: str) -> str | None: ...

    def distribution_of(self, plugin_name: str) -> tuple[str, str]: ...

    def plugins(self) -> list[PluginInfo]: ...
