"""Frontiers pinned to the planner's output before the speed work of issue #17 item 3.

Speeding the planner up must not change a single plan: these cases (a synthetic
4-stage profile and the published GPT-3 175B / A100 profile; 1F1B, GPipe, both
models, real-time gap plans in full and thinned by ``max_gap_plans``) were
produced by the code at the fork point (``frontier_pinned.json``). Every plan's
clocks must be identical (sha256 of the ``[plan, op]`` int64 matrix, plus the
first and last plan in the clear), and every planned and emulated time and
energy equal within 1e-9 relative (the issue's bound; today they are equal).
"""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import stage_rows  # noqa: E402

from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile, read_profile  # noqa: E402

PINNED = json.loads((Path(__file__).resolve().parent / "frontier_pinned.json").read_text())
REL = 1e-9


@pytest.mark.parametrize("name", sorted(PINNED))
def test_frontier_is_the_pinned_one(name, gpt3_a100):
    case = PINNED[name]
    prof = InstructionProfile.from_rows(stage_rows()) if case["profile"] == "synthetic" else read_profile(gpt3_a100)
    ps = plan_frontier(prof, **case["kwargs"])
    assert len(ps) == case["plans"]
    freqs = np.ascontiguousarray(ps.frequencies, dtype="<i8")
    assert freqs[0].tolist() == case["first_plan"]
    assert freqs[-1].tolist() == case["last_plan"]
    assert hashlib.sha256(freqs.tobytes()).hexdigest() == case["frequencies_sha256"]
    for key in ("time_units", "planned_energy_j", "emulated_time_s", "emulated_energy_j"):
        np.testing.assert_allclose(getattr(ps, key), case[key], rtol=REL, atol=0, err_msg=key)
    np.testing.assert_allclose([ps.max_freq_time_s, ps.max_freq_energy_j], case["max_freq"], rtol=REL, atol=0)
    if "emitted_plans" in case:
        assert len(ps.emitted.time_units) == case["emitted_plans"]
        assert ps.emitted.listed_as.tolist() == case["emitted_listed_as"]
        np.testing.assert_allclose(ps.emitted.emulated_energy_j, case["emitted_emulated_energy_j"], rtol=REL, atol=0)
