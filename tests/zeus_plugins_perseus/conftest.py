from pathlib import Path

import pytest


@pytest.fixture
def perseus_data(shared_data) -> Path:
    """The published Perseus profiles (read from ../shared, never copied into the repo)."""
    return shared_data / "perseus_sosp24"


@pytest.fixture
def gpt3_a100(perseus_data) -> Path:
    return perseus_data / "gpt3-175b+a100_sxm_bf16.csv"
