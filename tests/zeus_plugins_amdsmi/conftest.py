"""The simulated AMD driver, swapped in for ``amdsmi`` for every test here."""

from __future__ import annotations

import pytest

from zeus_plugins_amdsmi import fake_amdsmi


@pytest.fixture
def fake_amd(tmp_path, monkeypatch):
    """``make(gpus, privileged=False)`` writes a driver state and installs the fake as ``amdsmi``."""
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)

    def make(gpus=1, privileged=False):
        path = fake_amdsmi.create(tmp_path / "amd-driver.json", gpus, privileged=privileged)
        return fake_amdsmi.install(path, monkeypatch)

    return make
