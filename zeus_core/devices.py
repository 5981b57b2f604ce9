"""Opening a device plugin by name outside a job: ``zeus monitor``, helper processes, scripts.

A job's ``[device]`` table is validated and built by ``zeus run``. Tools that
need a device without a job (``zeus monitor``, the Perseus frequency
controller and blocking-power job, which build their device in a child process
from a picklable ``functools.partial(open_device, "nvml", {...})``) use
:func:`open_device`: the same registry, the same options class (so a misspelt
option fails with its name, as in ``job.toml``) and the same factory as a job.

    from zeus_core import open_device
    gpus = open_device("nvml", {"gpus": [0]})
    try:
        ...
    finally:
        gpus.close()
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from zeus_core.contexts import BuildContext
from zeus_core.identity import option_identity, with_facts
from zeus_core.job import Problem, structure
from zeus_core.parts import HasIdentity
from zeus_core.registry import Registry, get_registry


class DeviceOpenError(RuntimeError):
    """A device plugin could not be opened; the message says which and why (unknown name,
    bad options with their field paths, or the plugin's own error such as a missing driver)."""


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
        except DeviceOptionsError as e:
            errors += e.problems
        except Exception as e:  # noqa: BLE001 - a device this machine cannot open is reported, not fatal
            unavailable.append((name, str(e) or type(e).__name__))
        else:
            opened.append((name, group))
    return opened, unavailable, errors


class DeviceOptionsError(ValueError):
    """A device plugin's options are wrong; ``problems`` lists each as ``"name: message @ path"``."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("bad device options: " + "; ".join(problems))


def build_device(reg: Registry, name: str, table: dict[str, Any], console: Console) -> tuple[Any, dict[str, Any]]:
    """Build device plugin ``name`` from its options table outside a job; returns the group and its
    identity as a job's ``[device]`` section declares it (``plugin``, identity options, facts).

    Raises :class:`DeviceOptionsError` for bad options, or whatever the plugin raises.
    """
    r = reg.get("device", name)
    problems: list[Problem] = []
    options = structure(r.options, table, (name,), problems)
    if options is None:
        raise DeviceOptionsError([f"{name}: {p.message} @ {p.jsonpath()}" for p in problems])
    group = r.factory(options, BuildContext.outside_job(console, reg))
    identity = {"plugin": name, **option_identity(options)}
    if isinstance(group, HasIdentity):
        identity = with_facts({"device": identity}, {"device": group.identity()})["device"]
    return group, identity


def open_device(
    name: str,
    options: dict[str, Any] | None = None,
    registry: Registry | None = None,
    console: Console | None = None,
) -> Any:
    """The device group of plugin ``name`` built with ``options`` (its ``[device]`` table, without ``plugin``).

    Raises :class:`DeviceOpenError` naming the installed devices for an unknown
    name, every bad option with its path, or the plugin's reason it cannot open
    here. The caller owns the group and must ``close()`` it (that restores any
    setting it changed).
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
