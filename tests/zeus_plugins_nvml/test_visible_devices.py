"""CUDA_VISIBLE_DEVICES: indices, UUIDs, MIG slices, and CUDA's stop-at-first-invalid rule."""

from __future__ import annotations

import pytest

from zeus_core import DeviceError
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.fake_pynvml import FakeGpu
from zeus_plugins_nvml.options import NvmlOptions


def uuids(dev):
    return [g.uuid[-4:] for g in dev.gpus]


def test_unset_means_every_gpu_in_nvml_order(fake_nvml):
    fake_nvml(3)
    with NvmlGpus() as dev:
        assert dev.names == ["gpu0", "gpu1", "gpu2"]
        assert uuids(dev) == ["a100", "a101", "a102"]
        assert dev.sync_indices == [0, 1, 2]


def test_indices_reorder_and_renumber(fake_nvml, monkeypatch):
    fake_nvml(3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    with NvmlGpus() as dev:
        assert dev.names == ["gpu0", "gpu1"]  # CUDA-visible numbering, as torch sees them
        assert uuids(dev) == ["a102", "a100"]
    with NvmlGpus(NvmlOptions(gpus=[1])) as dev:
        assert dev.names == ["gpu1"] and uuids(dev) == ["a100"]


def test_uuid_and_unique_prefix(fake_nvml, monkeypatch):
    nvml = fake_nvml(3)
    nvml.nvmlInit()
    full = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(1))
    nvml.nvmlShutdown()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{full[:12]},GPU-00000002")
    with NvmlGpus() as dev:
        assert uuids(dev) == ["a101", "a102"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0000")
    with pytest.raises(DeviceError, match=r"the prefix matches 3 GPUs"):
        NvmlGpus()


def test_invalid_entry_ends_the_list_like_cuda(fake_nvml, monkeypatch):
    fake_nvml(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,7,0")
    with pytest.warns(UserWarning, match=r"entry '7' is not a GPU \(this machine has GPUs 0..1\); CUDA ignores '7,0'"):
        dev = NvmlGpus()
    assert uuids(dev) == ["a101"]
    dev.close()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,0")
    with pytest.warns(UserWarning, match="repeats an earlier entry"):
        NvmlGpus().close()


@pytest.mark.parametrize(
    "value,message",
    [
        ("", "set to an empty string"),
        ("-1", "makes no GPU visible: entry '-1'"),
        ("abc", "not an index, GPU-<uuid> or MIG-<uuid>"),
    ],
)
def test_no_visible_gpu_is_an_error_with_the_fix(fake_nvml, monkeypatch, value, message):
    fake_nvml(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    with pytest.raises(DeviceError, match=message):
        NvmlGpus()


def test_gpus_option_out_of_range_names_the_visible_range(fake_nvml, monkeypatch):
    fake_nvml(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    with pytest.raises(
        DeviceError, match=r"gpus \[2\] are not CUDA-visible: CUDA sees 2 GPU\(s\), indices 0..1 \(CUDA_VISIBLE_DEVICES='2,3'\)"
    ):
        NvmlGpus(NvmlOptions(gpus=[0, 2]))


MIG = "MIG-5c9d0e55-1a2b-5c3d-9e8f-0123456789ab"


def test_mig_slice_is_a_clear_error_or_measures_the_parent(fake_nvml, monkeypatch):
    fake_nvml([FakeGpu(), FakeGpu(mig_slices=[MIG, MIG.replace("ab", "cd")])], privileged=True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG)
    with pytest.raises(DeviceError, match=r'CUDA device 0 is MIG slice .* whole GPUs only.*mig = "parent"'):
        NvmlGpus()
    with NvmlGpus(NvmlOptions(mig="parent")) as dev:
        assert dev.names == ["gpu0"] and uuids(dev) == ["a101"]
        assert dev.energy_sources == {"gpu0": "counter"}
        assert dev.read_energy()["gpu0"] > 0
        with pytest.raises(DeviceError, match="shared with the other slices"):
            dev.set_power_limit(200)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{MIG},{MIG.replace('ab', 'cd')}")
    with pytest.raises(DeviceError, match="several visible MIG slices live on GPU"):
        NvmlGpus(NvmlOptions(mig="parent"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-00000000-0000-0000-0000-000000000000")
    with pytest.raises(DeviceError, match="no MIG slice has this UUID"):
        NvmlGpus()


def test_mixed_models_warn_about_device_order(fake_nvml, monkeypatch):
    fake_nvml([FakeGpu(), FakeGpu(name="NVIDIA A40")])
    with pytest.warns(UserWarning, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        NvmlGpus().close()
