"""The ``torch`` process group's transport: two real gloo ranks (spawned processes) on loopback.

A message travels pickled in one fixed tensor; one larger than that tensor follows in a second
message (a broadcast) or a point-to-point send (a gather). Both paths must give every rank the
object rank 0 (or each rank) sent, and a rank that went away must make the other's next collective
fail with what happened rather than wait.
"""

from __future__ import annotations

import os

import torch.multiprocessing as mp

from zeus_plugins_torch.group import SLOT_BYTES

BIG = "x" * (3 * SLOT_BYTES)


def _rank(rank: int, rendezvous: str, results) -> None:
    import torch.distributed as dist

    from zeus_plugins_torch.group import LostContact, TorchProcessGroup

    os.environ["LOCAL_RANK"] = str(rank)
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=2)
    group = TorchProcessGroup(timeout=20)
    got = [
        group.broadcast(("limit", 250.0) if rank == 0 else None),
        group.broadcast(("big", BIG, {"nested": [1, 2.5, None]}) if rank == 0 else None),
        group.gather(("epoch", rank, True)),
        group.gather(("big", rank, BIG * rank)),
        group.broadcast(("end",) if rank == 0 else None),
    ]
    if rank == 1:
        dist.destroy_process_group()  # rank 1 leaves; rank 0's next message finds it gone
        results.put((rank, got))
        return
    try:
        group.broadcast(("epoch", 2, False))
        got.append("no error")
    except LostContact as e:
        got.append(str(e))
    # leave the group before exit, as zeus's own launcher does: a gloo group whose peer is gone,
    # left to the interpreter's exit, can abort this process ("terminate called without an active exception")
    dist.destroy_process_group()
    results.put((rank, got))


def test_small_and_large_messages_reach_every_rank_and_a_rank_gone_is_said(tmp_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, (tmp_path / "rdzv").as_uri(), results)) for r in (0, 1)]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    assert [p.exitcode for p in procs] == [0, 0]
    expected_broadcasts = [("limit", 250.0), ("big", BIG, {"nested": [1, 2.5, None]})]
    assert got[1][:2] == expected_broadcasts and got[0][:2] == expected_broadcasts
    assert got[1][2:4] == [None, None]  # only rank 0 gathers
    assert got[0][2] == [("epoch", 0, True), ("epoch", 1, True)]
    assert got[0][3] == [("big", 0, ""), ("big", 1, BIG)]
    assert got[0][4] == got[1][4] == ("end",)
    assert "rank 0 of 2 lost contact with the other ranks of the job" in got[0][5]
