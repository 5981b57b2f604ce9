"""Fixtures of the hetero allocator's tests: the public A10/T4 profiles and random small profiles."""

from pathlib import Path

import numpy as np
import pytest

from zeus_plugins_hetero.profile import Profile


@pytest.fixture
def hetero_aws(shared_data) -> Path:
    """Folder of the published A10/T4 profiles (CI has ../shared beside the checkout)."""
    return shared_data / "hetero_aws"


@pytest.fixture
def random_profile():
    """Build a noisy, roughly linear profile: time and energy grow with the batch, limits trade time for energy."""

    def make(rng: np.random.Generator, batches, limits, steps=1, speed=1.0, source="<random>"):
        batches = np.asarray(batches)
        limits = np.asarray(limits, dtype=float)
        top = limits.max()
        slow = 1.0 + 0.6 * (top - limits) / top  # lower limit -> slower
        t = (0.05 + 0.002 * batches[:, None] / speed) * slow[None, :]
        t *= rng.uniform(0.9, 1.1, size=t.shape)
        power = limits[None, :] * rng.uniform(0.6, 0.95, size=t.shape)
        e = t * power
        return Profile(batches, limits, t * steps, e * steps, steps, source=source)

    return make
