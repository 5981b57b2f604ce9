"""Options defaults that mean "not set": what they stand for, said where ``zeus run --dry-run`` shows them.

Several options take ``0``, ``""`` or None as their default to mean "decide for me" (the paper's
batch size, the job's eta, the store under ``.zeus/``). Printed bare, ``default_batch_size 0`` reads as
a batch size of zero; a field declared with :func:`unset` says instead what its default stands for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The key of an options field's metadata that holds what its unset default stands for.
KEY = "zeus_unset"


def unset(meaning: str, *, same_as: str | None = None, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Metadata for an options field whose default means "not set"
    (``attrs.field(default=0, metadata=unset("the paper's batch size"))``): ``meaning`` in words, or
    ``same_as``, the dotted key of ``[job]`` whose value it takes (``"job.eta_knob"``); ``metadata``:
    more of the field's metadata to keep (:data:`~zeus_core.identity.NOT_IDENTITY`)."""
    return {**(metadata or {}), KEY: {"meaning": meaning, "same_as": same_as}}


def describe(field: Any, value: Any, job: Any) -> str | None:
    """What ``value`` of the attrs ``field`` stands for where it is the field's unset default (None otherwise):
    ``(unset: MEANING)``, or ``VALUE (unset: the same as job.KEY)`` with ``job``'s value of that key."""
    said = field.metadata.get(KEY) if field.metadata else None
    if not said or value != field.default:
        return None
    same_as = said.get("same_as")
    if same_as:
        resolved = getattr(job, same_as.split(".", 1)[1])
        return f"{resolved!r} (unset: the same as {same_as})"
    return f"(unset: {said['meaning']})"


__all__ = ["KEY", "unset", "describe"]
