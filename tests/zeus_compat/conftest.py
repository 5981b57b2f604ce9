"""The simulated NVIDIA driver for the compatibility package's tests, and a fresh ``get_gpus()`` per test."""

from __future__ import annotations

import pytest

from zeus_plugins_nvml import fake_pynvml


@pytest.fixture
def driver(tmp_path, monkeypatch):
    """``make(gpus=2, privileged=True, **gpu_fields)`` writes a simulated driver state and installs it."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ZEUS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ZEUS_GPU_DEVICE", "nvml")

    def make(gpus=2, privileged=True, **fields):
        path = fake_pynvml.create(tmp_path / "nvml.json", [fake_pynvml.FakeGpu(**fields) for _ in range(gpus)], privileged=privileged)
        return fake_pynvml.install(path, monkeypatch)

    return make


@pytest.fixture(autouse=True)
def fresh_devices():
    import zeus.device.cpu
    import zeus.device.gpu

    zeus.device.gpu._gpus = None
    zeus.device.cpu._cpus = None
    yield
    if zeus.device.gpu._gpus is not None:
        zeus.device.gpu._gpus.close()
    zeus.device.gpu._gpus = None
    zeus.device.cpu._cpus = None
