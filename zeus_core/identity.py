"""A job's identity: everything that changes what it optimises, recorded by its store.

A store learns one problem: a batch size or power limit learned for a V100
means nothing on an A40, and costs measured with ``eta_knob = 0.5`` do not
mix with costs at 0.9. So the store records the identity of the job that
first wrote it, and a run whose identity differs is refused before it touches
the store (:class:`IdentityMismatch`, exit 2), with the differing fields side
by side and the ways out (``--fresh``, another ``job.store``).

What is identity is declared by whoever owns the option:

* every field of an options class counts, unless its attrs metadata says
  otherwise: ``attrs.field(default=..., metadata=NOT_IDENTITY)`` for options
  that do not change the problem (how often to log, how many recurrences to
  run now, a worker count);
* a part may add facts it learns when built (the GPU model behind ``gpus =
  [0]``) with :class:`zeus_core.parts.HasIdentity`.

Identities are compared section by section. Every part section is present
(``plugin`` is None where the job has none), so adding, removing or swapping a
part is a difference; inside a section with the same plugin, only keys both
sides have are compared, so a plugin upgrade that adds an option does not
orphan every existing store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

#: attrs metadata of an option that does not change what a job optimises.
NOT_IDENTITY: Mapping[str, Any] = {"identity": False}


def option_identity(options: Any) -> dict[str, Any]:
    """The identity fields of an attrs options instance, as JSON-able values."""
    if options is None or not attrs.has(type(options)):
        return {}
    out: dict[str, Any] = {}
    for f in attrs.fields(type(options)):
        if f.metadata.get("identity", True) is False:
            continue
        out[f.name] = _plain(getattr(options, f.name))
    return out


def _plain(value: Any) -> Any:
    if attrs.has(type(value)):
        return option_identity(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    return value


def with_facts(identity: dict[str, Any], facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``identity`` plus what built parts report about themselves (section -> facts)."""
    out = {k: dict(v) for k, v in identity.items()}
    for section, got in facts.items():
        out.setdefault(section, {}).update({k: _plain(v) for k, v in got.items()})
    return out


@attrs.frozen
class Difference:
    key: str
    stored: Any
    current: Any


def differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[Difference]:
    """Where two identities disagree (see the module docstring for what is compared)."""
    out: list[Difference] = []
    for section in sorted(set(stored) | set(current)):
        a, b = stored.get(section, {}), current.get(section, {})
        if not isinstance(a, Mapping) or not isinstance(b, Mapping):
            if a != b:
                out.append(Difference(section, a, b))
            continue
        if a.get("plugin", None) != b.get("plugin", None) and section != "job":
            out.append(Difference(f"{section}.plugin", a.get("plugin"), b.get("plugin")))
            continue
        for key in sorted(set(a) & set(b)):
            if key != "plugin" and a[key] != b[key]:
                out.append(Difference(f"{section}.{key}", a[key], b[key]))
    return out


class IdentityMismatch(ValueError):
    """The store learned another job; the message shows what differs and the fixes."""

    def __init__(self, store: str, diffs: list[Difference]) -> None:
        self.store = store
        self.diffs = diffs
        width = max(len(d.key) for d in diffs)
        rows = [f"  {'field'.ljust(width)}  {'in the store':<28}  this run"]
        for d in diffs:
            rows.append(f"  {d.key.ljust(width)}  {_show(d.stored):<28}  {_show(d.current)}")
        super().__init__(
            f"the store {store} learned a different job, so this run would mix two setups:\n"
            + "\n".join(rows)
            + "\nFix: start this job over with `zeus run --fresh` (forgets what the store learned), or give it its "
            "own store (`--set 'job.store=\"other.sqlite\"'`, or another job.name); options that do not change the "
            "problem (recurrences, seed, output, store) never block"
        )


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 28 else text[:25] + "..."
