"""Which rank keeps the job's store: rank 0 decides and writes, every other rank keeps none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from zeus_test_helpers import TOY_JOB, toy_registry, write_job

from zeus_core.engine.assembly import Assembly
from zeus_core.engine.stores.locations import open_store
from zeus_core.engine.validation import load_job


class Rank:
    """Rank ``rank`` of two, its collectives answered as rank 0 would (a ProcessGroup as the contract shows it)."""

    world_size, local_rank = 2, 0

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def broadcast(self, obj):
        return obj

    def gather(self, obj):
        return [obj, obj] if self.rank == 0 else None


def open_files_of(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path`` (Linux's /proc)."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return links.count(str(path))


@pytest.fixture
def reg(toy_plugin):
    return toy_registry(toy_plugin)


def test_a_rank_other_than_0_closes_the_store_it_was_handed_and_keeps_none(reg, tmp_path):
    spec = load_job(write_job(tmp_path / "job.toml", TOY_JOB), reg)
    db = tmp_path / "s.sqlite"
    store = open_store(str(db), reg)
    with store.transaction() as tx:
        tx.set("note", 1)  # the file is made, and held open, at the first write
    assert open_files_of(db) == 1
    assembly = Assembly.for_job(spec, reg, store=store, group=Rank(1))
    assert assembly.store is None and not assembly.leads
    assert open_files_of(db) == 0  # closed: a rank that never writes holds no file of the store
    assert spec.job.processes == 2  # the launcher's world size


def test_rank_0_keeps_the_store_it_was_handed_or_opens_the_jobs(reg, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = load_job(write_job(tmp_path / "job.toml", TOY_JOB), reg)
    db = tmp_path / "s.sqlite"
    with open_store(str(db), reg) as store:
        with store.transaction() as tx:
            tx.set("note", 1)
        assert Assembly.for_job(spec, reg, store=store, group=Rank(0)).store is store
        assert open_files_of(db) == 1  # still open
    opened = Assembly.for_job(spec, reg, group=Rank(0)).store
    assert opened is not None and opened.location.endswith("toyjob.sqlite")
    opened.close()
