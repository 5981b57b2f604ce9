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

Identities are compared section by section. Every part section of a
``job.toml`` is present (``plugin`` is None where the job has none), so adding,
removing or swapping a part is a difference; inside a section with the same
plugin, only keys both sides have are compared, so a plugin upgrade that adds
an option does not orphan every existing store.

A job driven from a user's own script (:class:`zeus_core.BatchSizeOptimizer`,
:class:`zeus_core.PowerLimitOptimizer`) declares only what it knows:

* a section it knows nothing about is **absent** (not compared): a script that
  only steers power declares no ``batch_size``;
* a section it knows only in part has **no** ``plugin`` key and is compared on
  the keys both sides have: the user's loop is no ``[workload]`` plugin, but
  its ``batch_sizes`` and ``default_batch_size`` are the workload's;
* ``job`` holds only the keys the script set (``target_metric`` when it gave one).

So the same job run by ``zeus run`` and driven from a script compare equal
where they mean the same thing, and a store learns the union of what every way
in declared (:func:`merged`): a store written first by a script still refuses
a later ``zeus run`` of another job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from zeus_core.errors import BadInput

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


def merged(stored: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """What a store learns when a run whose identity has no :func:`differences` with
    ``stored`` claims it: every section and key either declared (they agree where both do)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in stored.items()}
    for section, value in current.items():
        if isinstance(value, Mapping) and isinstance(out.get(section), dict):
            out[section] = {**value, **out[section]} if "plugin" not in value else {**out[section], **value}
        else:
            out.setdefault(section, dict(value) if isinstance(value, Mapping) else value)
    return out


@attrs.frozen
class Difference:
    key: str
    stored: Any
    current: Any


def differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[Difference]:
    """Where two identities disagree (see the module docstring for what is compared)."""
    out: list[Difference] = []
    for section in sorted(set(stored) & set(current)):  # a section one side does not declare is not compared
        a, b = stored[section], current[section]
        if not isinstance(a, Mapping) or not isinstance(b, Mapping):
            if a != b:
                out.append(Difference(section, a, b))
            continue
        partial = "plugin" not in a or "plugin" not in b  # declared in part, by a script
        if not partial and a["plugin"] != b["plugin"] and section != "job":
            out.append(Difference(f"{section}.plugin", a.get("plugin"), b.get("plugin")))
            continue
        for key in sorted(set(a) & set(b)):
            if key != "plugin" and a[key] != b[key]:
                out.append(Difference(f"{section}.{key}", a[key], b[key]))
    return out


class IdentityMismatch(BadInput):
    """The store learned another job; the message shows what differs and the fixes."""

    def __init__(self, store: str, diffs: list[Difference], fixes: str | None = None) -> None:
        self.store = store
        self.diffs = diffs
        fixes = fixes or (
            "start this job over with `zeus run --fresh` (forgets what the store learned), or give it its "
            "own store (`--set 'job.store=\"other.sqlite\"'`, or another job.name)"
        )
        width = max(len(d.key) for d in diffs)
        shown = [(d.key, _show(d.stored), _show(d.current)) for d in diffs]
        if all(len(a) <= 28 for _, a, _ in shown):  # side by side
            rows = [f"  {'field'.ljust(width)}  {'in the store':<28}  this run"]
            rows += [f"  {key.ljust(width)}  {a:<28}  {b}" for key, a, b in shown]
        else:  # a long value whole, one under the other, so the difference shows
            rows = [f"  {key}\n    in the store: {a}\n    this run:     {b}" for key, a, b in shown]
        super().__init__(
            f"the store {store} learned a different job, so this run would mix two setups:\n"
            + "\n".join(rows)
            + f"\nFix: {fixes}; options that do not change the problem (job.recurrences, job.seed, job.store, "
            "--output) never block"
        )


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def refuse_another_job(location: str, stored: Mapping[str, Any] | None, current: Mapping[str, Any], fixes: str | None = None) -> None:
    """Raise :class:`IdentityMismatch` when a store at ``location`` learned (``stored``) another job
    than ``current``; a store that learned nothing yet refuses nothing."""
    if stored is None:
        return
    diffs = differences(stored, current)
    if diffs:
        raise IdentityMismatch(location, diffs, fixes=fixes)


__all__ = ["NOT_IDENTITY", "option_identity", "with_facts", "merged", "Difference", "differences", "IdentityMismatch", "refuse_another_job"]
