"""What produced a result: the ``provenance`` of every ``summary.json``.

One place computes it, so that every writer of ``summary.json`` says the same
things in the same words: the distributions that ran (zeus-core's first, then every
registered plugin's, by distribution name), the Python (in ``zeus env``'s shape),
the operating system, the host, the job's devices (the ``[device]`` plugin, its
options, and what the device group says of itself: the model of each device
(:class:`~zeus_core.device.DeviceModels`) and the vendor software it runs on
(:class:`~zeus_core.device.DriverVersions`)), the files zeus wrote in the output
folder, and when the command started and ended (ISO 8601, UTC).

It sits under one key, ``provenance``, after the results: two runs of one job
differ there and nowhere else.
"""

from __future__ import annotations

import platform
import socket
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zeus_core.device import DeviceModels, DriverVersions

if TYPE_CHECKING:
    from zeus_core.engine.registry import Registry
    from zeus_core.job import PartSpec

#: The key of ``summary.json`` that holds :func:`provenance`.
KEY = "provenance"


def now() -> datetime:
    """The current time, as :func:`provenance` takes its ``started`` and ``ended``."""
    return datetime.now(UTC)


def timestamp(t: datetime) -> str:
    """``t`` in ISO 8601, UTC, to the millisecond (``2026-11-24T18:03:04.123+00:00``)."""
    return t.astimezone(UTC).isoformat(timespec="milliseconds")


def python_info() -> dict[str, str]:
    """This Python: version, implementation, executable and platform (``zeus env`` shows the same)."""
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
    }


def versions(registry: Registry) -> dict[str, str]:
    """Version of each distribution that provides a registered plugin, zeus-core's first."""
    out: dict[str, str] = {}
    for info in sorted(registry.plugins(), key=lambda p: (p.distribution != "zeus-core", p.distribution)):
        out.setdefault(info.distribution, info.version)
    return out


def _asked(read: Any) -> dict[str, str]:
    """What a capability's property says, or nothing where asking it fails (a device gone since)."""
    try:
        return {str(k): str(v) for k, v in dict(read()).items()}
    except Exception:  # noqa: BLE001 - provenance describes; it never fails the outputs it is part of
        return {}


def devices(spec: PartSpec | None, group: Any) -> dict[str, Any] | None:
    """The job's ``[device]``: its plugin and options, its device names, each device's model and the
    vendor software it runs on (empty where the group does not say); None for a job without one."""
    if spec is None or group is None:
        return None
    import cattrs

    try:
        options = cattrs.unstructure(spec.options)
    except Exception:  # noqa: BLE001 - an options class cattrs cannot unstructure: the rest says enough
        options = None
    return {
        "plugin": spec.plugin,
        "options": options,
        "names": list(getattr(group, "names", [])),
        "models": _asked(lambda: group.device_models) if isinstance(group, DeviceModels) else {},
        "drivers": _asked(lambda: group.driver_versions) if isinstance(group, DriverVersions) else {},
    }


def provenance(
    registry: Registry,
    *,
    command: str,
    started: datetime,
    ended: datetime | None = None,
    device_spec: PartSpec | None = None,
    device: Any = None,
    outputs: list[str] | None = None,
) -> dict[str, Any]:
    """The ``provenance`` of a ``summary.json`` that ``command`` wrote (``zeus run``, ``zeus report``, a script's
    ``run_job``; ``ended``: now); ``outputs``: the files zeus has written in its folder, relative to it (``zeus run
    --fresh`` removes those it did not write again)."""
    uname = platform.uname()
    return {
        "command": command,
        "versions": versions(registry),
        "python": python_info(),
        "os": {"system": uname.system, "release": uname.release, "machine": uname.machine},
        "host": socket.gethostname(),
        "devices": devices(device_spec, device),
        "started": timestamp(started),
        "ended": timestamp(ended if ended is not None else now()),
        **({} if outputs is None else {"outputs": outputs}),
    }
