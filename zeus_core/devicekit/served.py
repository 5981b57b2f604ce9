"""The GPUs a ``zeus daemon`` service may change, as its ``[serve.<name>]`` table lists them.

A GPU service (``nvml``, ``amdsmi``) is told ``gpus = "all"`` or a list of
entries (an index as the vendor's tool numbers GPUs, a UUID, ...). At the
daemon's start it resolves them to UUIDs, which mean the same GPU in every
process whatever its visibility variables, so a typo fails the start with the
entry's path (:func:`select_gpus`). Clients then name a GPU by UUID, and a GPU
the table does not list is refused (:class:`ServedGpus`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from zeus_core.daemon import Refused, ServiceConfigError


def all_or_list(example: str) -> Callable[[Any, Any, Any], None]:
    """An attrs validator for a ``gpus`` option: ``"all"`` or a non-empty list (``example``
    says what its entries are, for the message)."""

    def check(_inst: Any, attribute: Any, value: Any) -> None:
        if value == "all":
            return
        if not isinstance(value, list) or not value:
            raise ValueError(f'{attribute.name} must be "all" or a list of {example}, got {value!r}')

    return check


def select_gpus(
    wanted: Any,
    everything: dict[str, tuple[int, Any]],
    lookup: Callable[[Any], str | None],
    missing: Callable[[Any], str],
) -> dict[str, tuple[int, Any]]:
    """The served GPUs, UUID -> (index, handle): every GPU for ``"all"``, else each entry of
    ``wanted`` that ``lookup`` resolves to a UUID of ``everything``. An entry it does not
    resolve, or a GPU listed twice, is a :class:`~zeus_core.daemon.ServiceConfigError` at
    ``("gpus", position)`` (``missing(entry)`` says why)."""
    if wanted == "all":
        return dict(everything)
    out: dict[str, tuple[int, Any]] = {}
    for pos, entry in enumerate(wanted):
        try:
            uuid = None if isinstance(entry, bool) else lookup(entry)
            known = uuid is not None and uuid in everything
        except TypeError:  # an entry of a type no GPU can be named by (a list, a table)
            known = False
        if not known or uuid is None:
            raise ServiceConfigError(missing(entry), ("gpus", pos))
        if uuid in out:
            raise ServiceConfigError(f"GPU {uuid} is listed twice", ("gpus", pos))
        out[uuid] = everything[uuid]
    return out


class ServedGpus:
    """The GPUs one service serves (UUID -> (index, handle)); ``section`` is its table
    (``"serve.nvml"``), named in refusals."""

    def __init__(self, section: str, gpus: dict[str, tuple[int, Any]]) -> None:
        self.section = section
        self.gpus = gpus

    def handle(self, uuid: str) -> Any:
        """The vendor handle of GPU ``uuid``; :class:`~zeus_core.daemon.Refused` if it is not served."""
        got = self.gpus.get(uuid)
        if got is None:
            raise Refused(
                f"GPU {uuid} is not served by this daemon (it serves {', '.join(self.gpus)}); the administrator "
                f"lists it in [{self.section}] gpus"
            )
        return got[1]

    def __str__(self) -> str:
        return ", ".join(f"{i}:{u}" for u, (i, _) in self.gpus.items())


@attrs.define
class GpuArgs:
    """Arguments of an operation that name one GPU (by UUID)."""

    gpu: str


class GpuService:
    """What a ``zeus daemon`` service over GPUs does at its start and its end.

    A subclass sets ``section`` (its table, ``"serve.nvml"``) and defines
    :meth:`start_library` (raise ``RuntimeError`` naming the fix where the library
    cannot start), :meth:`stop_library`, and :meth:`gpu_table` (the served GPUs of a
    ``gpus`` option, as :func:`select_gpus` returns them); its operations look GPUs up
    in :attr:`gpus`. A table that does not resolve lets the library go before the
    error reaches the daemon's start.
    """

    section = "serve.gpus"

    def __init__(self, options: Any, ctx: Any) -> None:
        self.start_library()
        try:
            self.gpus = ServedGpus(self.section, self.gpu_table(options.gpus))
        except BaseException:
            self.stop_library()
            raise
        ctx.log.info("%s: serving %s", self.section.removeprefix("serve."), self.gpus)

    def start_library(self) -> None:  # pragma: no cover - every service defines it
        raise NotImplementedError

    def stop_library(self) -> None:  # pragma: no cover - every service defines it
        raise NotImplementedError

    def gpu_table(self, wanted: Any) -> dict[str, tuple[int, Any]]:  # pragma: no cover - every service defines it
        raise NotImplementedError

    def close(self) -> None:
        self.stop_library()
