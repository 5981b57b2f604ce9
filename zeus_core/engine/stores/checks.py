"""What a store's contents must be to be trusted: the checks every backend makes when it opens one.

SQLite's own page check finds a broken file; these find contents no zeus-core wrote, which
a damaged page, a stray ``UPDATE`` or a half-understood tool leave behind: JSON that does not
parse, a recurrence counter that is not a positive whole number, tries whose numbers do not
add up. A backend reads every row of the job when it opens the store and refuses it
(:class:`~zeus_core.backends.StoreError`, exit 2, naming the store) on the first
problems found, so that nothing is ever written into a store that cannot be trusted, and
``zeus store check`` finds exactly what ``zeus run`` would refuse.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from zeus_core.engine.statekeys import ABANDONED_KEY, HISTORY_KEY, OPEN_KEY, RUNNER_KEY

#: What a stored try row holds, in this order (the columns every backend reads).
TRY_FIELDS = (
    "recurrence",
    "try_index",
    "batch_size",
    "power_limit",
    "epochs",
    "time_s",
    "energy_j",
    "cost",
    "reached",
    "stopped",
    "extra",
    "steady_cost",
)
#: Stop after this many problems: enough to say what is wrong.
MAX_PROBLEMS = 5


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON zeus writes")


def parse_json(text: Any) -> Any:
    """A stored JSON text as zeus wrote it (ValueError otherwise: not text, not JSON, NaN or Infinity)."""
    if not isinstance(text, str):
        raise ValueError(f"a {type(text).__name__} where JSON text belongs")
    return json.loads(text, parse_constant=_refuse_constant)


def _whole(v: Any, lo: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _quantity(v: Any, positive: bool = False) -> bool:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    return ok and (v > 0 or not positive)


def _recurrence_map(value: Any, key: str, fields: dict[str, type | tuple[type, ...]]) -> list[str]:
    if not isinstance(value, dict):
        return [f"state {key!r} is not an object"]
    for rec, entry in value.items():
        if not rec.isdigit() or int(rec) < 1:
            return [f"state {key!r} has {rec!r} where a recurrence number belongs"]
        if not isinstance(entry, dict) or any(not isinstance(entry.get(f), t) for f, t in fields.items()):
            return [f"state {key!r}, recurrence {rec}: not {{{', '.join(fields)}}}"]
    return []


def state_problems(state: dict[str, Any]) -> tuple[list[str], int | None]:
    """Problems of the parsed state values the engine owns, and the next recurrence number (None
    without runner state)."""
    problems: list[str] = []
    next_recurrence = None
    runner = state.get(RUNNER_KEY)
    if runner is not None:
        n = runner.get("next_recurrence") if isinstance(runner, dict) else None
        low = runner.get("min_cost") if isinstance(runner, dict) else None
        if not isinstance(runner, dict):
            problems.append(f"state {RUNNER_KEY!r} is not an object")
        elif not _whole(n, 1):
            problems.append(f"state {RUNNER_KEY!r}: next_recurrence is {n!r}, not a whole number >= 1")
        elif low is not None and not _quantity(low):
            problems.append(f"state {RUNNER_KEY!r}: min_cost is {low!r}, not a finite cost >= 0")
        else:
            next_recurrence = n
    mark = state.get(HISTORY_KEY)
    if mark is not None and not (isinstance(mark, dict) and isinstance(mark.get("id"), str)):
        problems.append(f"state {HISTORY_KEY!r} is not {{id, at, by}}")
    shapes: dict[str, dict[str, type | tuple[type, ...]]] = {
        OPEN_KEY: {"owner": dict, "began": (int, float)},
        ABANDONED_KEY: {"reason": str, "at": (int, float)},
    }
    for key, fields in shapes.items():
        if key in state:
            found = _recurrence_map(state[key], key, fields)
            problems += found
            if not found and next_recurrence is not None:
                beyond = [int(r) for r in state[key] if int(r) >= next_recurrence]
                if beyond:
                    problems.append(
                        f"state {key!r} names recurrence {beyond[0]}, which was never begun (next_recurrence is {next_recurrence})"
                    )
    return problems, next_recurrence


def try_problems(rows: Iterable[tuple], next_recurrence: int | None) -> list[str]:
    """Problems of the job's try rows (each in :data:`TRY_FIELDS` order, as the backend stores it)."""
    problems: list[str] = []
    seen: dict[tuple[int, int], bool] = {}
    reached: set[int] = set()
    for row in rows:
        if len(problems) >= MAX_PROBLEMS:
            break
        r = dict(zip(TRY_FIELDS, row))
        where = f"a try row (recurrence {r['recurrence']!r}, try {r['try_index']!r})"
        bad = [k for k, lo in (("recurrence", 1), ("try_index", 1), ("batch_size", 1), ("epochs", 0)) if not _whole(r[k], lo)]
        bad += [k for k in ("time_s", "energy_j", "cost") if not _quantity(r[k])]
        bad += [k for k in ("steady_cost",) if r[k] is not None and not _quantity(r[k])]
        if r["power_limit"] is not None and not _quantity(r["power_limit"], positive=True):
            bad.append("power_limit")
        if r["reached"] not in (0, 1) or isinstance(r["reached"], float):
            bad.append("reached")
        if r["stopped"] is not None and not isinstance(r["stopped"], str):
            bad.append("stopped")
        try:
            if not isinstance(parse_json(r["extra"]), dict):
                bad.append("extra")
        except ValueError:
            bad.append("extra")
        if bad:
            problems.append(f"{where} has {', '.join(bad)} that no zeus-core wrote")
            continue
        key = (r["recurrence"], r["try_index"])
        if key in seen:
            problems.append(f"recurrence {key[0]}, try {key[1]} is stored twice")
        seen[key] = bool(r["reached"])
        if r["reached"]:
            if r["recurrence"] in reached:
                problems.append(f"recurrence {r['recurrence']} has two tries that reached the target")
            reached.add(r["recurrence"])
        if next_recurrence is not None and r["recurrence"] >= next_recurrence:
            problems.append(f"recurrence {r['recurrence']} has a try but was never begun (next_recurrence is {next_recurrence})")
    if not problems:
        tries_of: dict[int, list[int]] = {}
        for rec, index in seen:
            tries_of.setdefault(rec, []).append(index)
        for rec, indexes in sorted(tries_of.items()):
            if sorted(indexes) != list(range(1, len(indexes) + 1)):
                problems.append(f"recurrence {rec} has tries {sorted(indexes)}, not 1..{len(indexes)}")
                break
    return problems[:MAX_PROBLEMS]


def content_problems(identity: Any, state_rows: Iterable[tuple[Any, Any]], try_rows: Iterable[tuple]) -> list[str]:
    """Every check of a job's contents as stored: ``identity`` (JSON text or None), ``state_rows``
    (key, JSON text) and ``try_rows`` (:data:`TRY_FIELDS`). An empty list: nothing wrong found."""
    problems: list[str] = []
    if identity is not None:
        try:
            if not isinstance(parse_json(identity), dict):
                problems.append("the identity is not a JSON object")
        except ValueError as e:
            problems.append(f"the identity is not JSON zeus wrote ({e})")
    state: dict[str, Any] = {}
    for key, text in state_rows:
        if not isinstance(key, str):
            problems.append(f"a state key is a {type(key).__name__}")
            continue
        try:
            state[key] = parse_json(text)
        except ValueError as e:
            problems.append(f"state {key!r} is not JSON zeus wrote ({str(e)[:120]})")
    more, next_recurrence = state_problems(state)
    problems += more
    if not problems:
        problems += try_problems(try_rows, next_recurrence)
    return problems[:MAX_PROBLEMS]
