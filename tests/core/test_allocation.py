"""``zeus_core.allocation``: reading allocation.json, the contract between allocators and workloads."""

from __future__ import annotations

import json

import pytest

from zeus_core import AllocationPlan, read_allocation
from zeus_core.allocation import AllocationError, RankPlan

RANKS = [
    {"rank": 0, "gpu": "A10", "local_batch": 48, "power_limit": 150},
    {"rank": 1, "gpu": "A10", "local_batch": 48, "power_limit": 150},
    {"rank": 2, "gpu": "T4", "local_batch": 32, "power_limit": 70},
]
GPUS = [
    {"name": "A10", "count": 2, "local_batch": 48, "power_limit": 150},
    {"name": "T4", "count": 1, "local_batch": 32, "power_limit": 70.5},
]


def write(tmp_path, data) -> str:
    path = tmp_path / "allocation.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    "data",
    [
        {"ranks": RANKS},
        {"gpus": GPUS[:1] + [dict(GPUS[1], power_limit=70)]},
        {"ranks": RANKS, "gpus": GPUS[:1] + [dict(GPUS[1], power_limit=70)], "global_batch_size": 128},
    ],
)
def test_ranks_gpus_or_both_give_the_same_plan(tmp_path, data):
    plan = read_allocation(write(tmp_path, data))
    assert isinstance(plan, AllocationPlan) and plan.world_size == 3 and plan.global_batch == 128
    assert plan.local_batches == [48, 48, 32] and plan.power_limits == [150, 150, 70]
    assert [(r.gpu, r.batch_slice, r.share) for r in plan.ranks] == [
        ("A10", slice(0, 48), 0.375),
        ("A10", slice(48, 96), 0.375),
        ("T4", slice(96, 128), 0.25),
    ]
    assert plan.rank(2) == RankPlan.from_allocation(data, 2) == RankPlan(2, "T4", 32, 70.0, 128, 96)
    assert plan.to_json()["ranks"][2] == {"rank": 2, "gpu": "T4", "local_batch": 32, "power_limit": 70.0}


def test_the_hetero_allocator_output_reads(tmp_path):
    # What `zeus run examples/hetero/...` writes: gpus, ranks, global_batch_size and much more.
    data = {
        "method": "optimal",
        "gpus": [dict(GPUS[0], count=1, compute_time_s=0.1), dict(GPUS[1], power_limit=70)],
        "ranks": [RANKS[0], dict(RANKS[2], rank=1)],
        "global_batch_size": 80,
        "baselines": {"even": {"gpus": []}},
        "cost": 3.0,
    }
    plan = read_allocation(write(tmp_path, data))
    assert plan.local_batches == [48, 32] and plan.source.endswith("allocation.json")


def problems(tmp_path, data) -> str:
    with pytest.raises(AllocationError) as e:
        read_allocation(write(tmp_path, data))
    return str(e.value)


def test_a_missing_or_unreadable_file_names_it_and_the_fix(tmp_path):
    with pytest.raises(
        AllocationError,
        match=r"allocation file .*nope\.json does not exist; fix the path, or write it "
        r"with an allocator job \(`zeus run",
    ):
        read_allocation(tmp_path / "nope.json")
    with pytest.raises(AllocationError, match="is a folder, not a file"):
        read_allocation(tmp_path)
    assert "allocation.json: not valid JSON (line 1, column 11" in problems(tmp_path, '{"ranks": ]')
    assert "$: must be a JSON object" in problems(tmp_path, "[1, 2]")
    assert 'has neither "ranks"' in problems(tmp_path, {"cost": 1})


def test_every_bad_field_is_named_at_once(tmp_path):
    msg = problems(
        tmp_path,
        {
            "ranks": [
                {"rank": 0, "local_batch": True, "power_limit": 100},
                {"rank": 2, "local_batch": 8, "power_limit": float("nan")},
                {"local_batch": -1},
                "x",
            ]
        },
    ).replace("NaN", "nan")
    for part in [
        "$.ranks[0].local_batch: must be a positive integer, got True",
        "$.ranks[1].rank: is 2, expected 1: list the ranks in order 0..3",
        "$.ranks[1].power_limit: must be a positive number of watts, got nan",
        "$.ranks[2].local_batch: must be a positive integer, got -1",
        "$.ranks[2]: missing 'power_limit'",
        "$.ranks[3]: must be an object",
    ]:
        assert part in msg, (part, msg)
    assert msg.startswith(str(tmp_path / "allocation.json") + ": ")
    msg = problems(tmp_path, {"gpus": [{"name": 3, "count": 0, "local_batch": 8, "power_limit": 0}]})
    assert all(
        p in msg
        for p in [
            "$.gpus[0].name: must be a GPU name",
            "$.gpus[0].count: must be a positive integer, got 0",
            "$.gpus[0].power_limit: must be a positive number of watts, got 0",
        ]
    )
    assert "$.ranks: must be a non-empty list, got []" in problems(tmp_path, {"ranks": []})


def test_the_global_batch_and_the_two_lists_must_agree(tmp_path):
    assert "$.global_batch_size: is 100 but the ranks' local batches [48, 48, 32] sum to 128" in problems(
        tmp_path, {"ranks": RANKS, "global_batch_size": 100}
    )
    assert "$.global_batch_size: must be a positive integer, got 128.0" in problems(tmp_path, {"ranks": RANKS, "global_batch_size": 128.0})
    assert "$.ranks: lists 3 ranks but $.gpus counts 2 GPUs" in problems(
        tmp_path, {"ranks": RANKS, "gpus": [dict(GPUS[0], count=1), GPUS[1]]}
    )
    assert "$.ranks[2]: is T4 batch 32 at 70 W but $.gpus gives rank 2 T4 batch 32 at 70.5 W" in problems(
        tmp_path, {"ranks": RANKS, "gpus": GPUS}
    )


def test_rank_out_of_range(tmp_path):
    with pytest.raises(AllocationError, match=r"rank 3 is not in the allocation, which has 3 GPUs \(ranks 0..2\)"):
        RankPlan.from_allocation({"ranks": RANKS}, 3)


class Device:
    def __init__(self, lo=60.0, hi=300.0, settable=True):
        self.lo, self.hi, self.limit = lo, hi, None
        if settable:
            self.set_power_limit = self._set

    def power_limit_range(self):
        return (self.lo, self.hi)

    def _set(self, w):
        self.limit = w


def test_check_device_and_apply_power_limit():
    plan = RankPlan.from_allocation({"ranks": RANKS}, 2)
    dev = Device()
    plan.check_device(dev)
    plan.apply_power_limit(dev)
    assert dev.limit == 70
    with pytest.raises(AllocationError, match=r"rank 2 a power limit of 70 W, outside the range \[100, 300\] W of gpu7"):
        plan.check_device(Device(lo=100), "gpu7")
    with pytest.raises(AllocationError, match="the device cannot set power limits; use a device plugin that can"):
        plan.check_device(Device(settable=False))
    with pytest.raises(AllocationError, match="cannot set power limits"):
        plan.apply_power_limit(Device(settable=False))
