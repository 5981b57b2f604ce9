"""Applying one runner's change of a policy state to the state other runners committed meanwhile.

Several processes may run one job at once. A batch-size policy learns through
``observe``, which the runner replays on the latest committed state inside the
transaction that stores the result. A power policy learns *during* a try (the
JIT settles on a limit mid-epoch), so what it learned is a change of its state:
from ``base`` (the state it loaded when the try began) to ``mine`` (its state
now). :func:`merge` applies that change to ``theirs`` (the latest committed
state) key by key, so a concurrent runner's choices survive: keys this runner
added or changed take its value, keys it removed are removed, everything else
is theirs. Nested objects merge the same way; lists and scalars are values.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


def merge(base: Any, mine: Any, theirs: Any) -> Any:
    """``theirs`` with the change ``base -> mine`` applied (see the module docstring)."""
    if mine == base:
        return theirs
    if not (isinstance(base, dict) and isinstance(mine, dict) and isinstance(theirs, dict)):
        return mine
    out = dict(theirs)
    for key in set(base) | set(mine):
        b, m = base.get(key, _MISSING), mine.get(key, _MISSING)
        if m is _MISSING:
            out.pop(key, None)
        elif b is _MISSING or m != b:
            t = theirs.get(key, _MISSING)
            out[key] = m if (b is _MISSING or t is _MISSING) else merge(b, m, t)
    return out
