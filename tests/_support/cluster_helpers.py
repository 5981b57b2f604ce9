"""What the cluster tests (PostgreSQL, zeus serve) share: running the NSDI'23 CIFAR-100 trace job,
and checking that a job's history lost and doubled nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Plugins the CIFAR-100 trace job does not use, left unloaded so that 16 processes start faster on 2 cores.
UNUSED_PLUGINS = "perseus,hetero,torch,nvml,cpu"
CIFAR = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"


def server_missing(reason: str) -> None:
    """A server program a test starts is not installed: skip, or fail where ``ZEUS_REQUIRE_SERVERS=1``
    (``.ci/run`` sets it after installing them, so CI never passes with these tests skipped)."""
    import pytest

    if os.environ.get("ZEUS_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{reason} (ZEUS_REQUIRE_SERVERS=1)")
    pytest.skip(reason)


def run_job(store: str, recurrences: int, cwd: Path, *extra: str, env: dict | None = None, job: Path = CIFAR) -> subprocess.Popen:
    """``zeus run`` of the CIFAR-100 trace job (MAB + JIT) against ``store``, in the background."""
    cmd = [
        sys.executable,
        "-m",
        "zeus_core.cli",
        "run",
        str(job),
        "--set",
        f"job.recurrences={recurrences}",
        "--set",
        f'job.store="{store}"',
        *extra,
    ]
    env = dict(os.environ) if env is None else dict(env)
    env.setdefault("ZEUS_DISABLED_PLUGINS", UNUSED_PLUGINS)
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def check_history(store, unfinished: int = 0) -> list:
    """Recurrence numbers 1..N each taken once (a recurrence with no try is one a killed client
    began), every recurrence with a try but ``unfinished`` of them has exactly one that reached the
    target; each recurrence's tries are numbered 1..k, none stored twice; the batch-size policy
    observed every stored try, once; the power policy kept a choice
    for every batch size that finished an epoch; the next number is N + 1."""
    tries = store.tries()
    runner = store.get("runner")
    taken = runner["next_recurrence"] - 1
    recs = sorted({t.recurrence for t in tries})
    assert set(recs) <= set(range(1, taken + 1)) and len(recs) >= taken - unfinished, (recs, taken)
    open_ = [r for r in recs if [t.reached for t in tries if t.recurrence == r].count(True) != 1]
    assert len(open_) <= unfinished, open_
    for r in recs:
        assert [t.reached for t in tries if t.recurrence == r].count(True) <= 1, r
        # each try stored once: a recurrence's tries are numbered 1..k, none doubled or missing
        assert sorted(t.try_index for t in tries if t.recurrence == r) == list(range(1, 1 + sum(t.recurrence == r for t in tries))), r
    history = store.get("policy:batch_size")["history"]
    assert sorted(b for b, _ in history) == sorted(t.batch_size for t in tries)
    choices = store.get("policy:power")["choices"]
    assert {str(t.batch_size) for t in tries if t.epochs >= 2} <= set(choices)
    return tries
