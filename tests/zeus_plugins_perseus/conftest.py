from pathlib import Path

import pytest


@pytest.fixture
def perseus_data(shared_data) -> Path:
    """The published Perseus profiles (read from ../shared, never copied into the repo)."""
    return shared_data / "perseus_sosp24"


@pytest.fixture
def gpt3_a100(perseus_data) -> Path:
    return perseus_data / "gpt3-175b+a100_sxm_bf16.csv"


@pytest.fixture
def nvml_driver(tmp_path, monkeypatch):
    """``make(gpus, privileged=True) -> path``: a simulated NVIDIA driver state for the nvml device.

    The path goes to processes (the frequency controller, pipeline ranks) that install the fake
    themselves (``perseus_fakes.nvml_device``); this process reads the state with ``fake_pynvml.read_state``.
    """
    from zeus_plugins_nvml import fake_pynvml

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)

    def make(gpus=1, privileged=True) -> str:
        return str(fake_pynvml.create(tmp_path / "nvml-driver.json", gpus, privileged=privileged))

    return make
