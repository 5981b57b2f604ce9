"""The simulated NVIDIA driver, swapped in for ``pynvml`` for every test here."""

from __future__ import annotations

import pytest

from zeus_plugins_nvml import fake_pynvml


@pytest.fixture
def fake_nvml(tmp_path, monkeypatch):
    """``make(gpus, privileged=False)`` writes a driver state and installs the fake as ``pynvml``."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)

    def make(gpus=1, privileged=False):
        path = fake_pynvml.create(tmp_path / "nvml-driver.json", gpus, privileged=privileged)
        return fake_pynvml.install(path, monkeypatch)

    return make
