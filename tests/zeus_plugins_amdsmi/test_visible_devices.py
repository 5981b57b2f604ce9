"""ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES, as the ROCm runtimes read them.

The simulated node numbers its four GPUs differently in PCI order (amdsmi's handles) and in HIP
order (``hip_id``), as MI350X nodes do: a GPU index must always mean torch's.
"""

from __future__ import annotations

import pytest

from zeus_core import DeviceError
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu
from zeus_plugins_amdsmi.options import AmdsmiOptions

HIP_IDS = [2, 0, 3, 1]  # PCI position -> HIP index


@pytest.fixture
def node(fake_amd):
    fake_amd([FakeAmdGpu(hip_id=h, demand_w=300.0 + 10 * h) for h in HIP_IDS])
    state = fake_amdsmi.read_state()
    return {g["hip_id"]: g for g in state["gpus"]}  # HIP index -> GPU


def seen(**options) -> list[str]:
    with AmdGpus(AmdsmiOptions(counter_check_s=0.02, **options)) as dev:
        indices = options.get("gpus") or list(range(len(dev.names)))
        assert dev.names == [f"gpu{i}" for i in indices] and dev.sync_indices == indices  # torch's numbers
        return [g.uuid for g in dev.gpus]


def test_gpus_are_numbered_as_hip_numbers_them_not_in_pci_order(node):
    assert seen() == [node[h]["uuid"] for h in range(4)]
    assert seen(gpus=[1]) == [node[1]["uuid"]]


@pytest.mark.parametrize(
    ("env", "hip"),
    [
        ({"HIP_VISIBLE_DEVICES": "1"}, [1]),
        ({"HIP_VISIBLE_DEVICES": "3,0"}, [3, 0]),
        ({"CUDA_VISIBLE_DEVICES": "2"}, [2]),  # HIP reads CUDA_VISIBLE_DEVICES alike
        ({"ROCR_VISIBLE_DEVICES": "2,3"}, [2, 3]),
        ({"ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "0"}, [1]),  # HIP counts what ROCr left
        ({"ROCR_VISIBLE_DEVICES": "3,1", "HIP_VISIBLE_DEVICES": "1"}, [1]),
        ({"ROCR_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "1"}, [3]),
    ],
)
def test_visibility_variables_select_and_renumber(node, monkeypatch, env, hip):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert seen() == [node[h]["uuid"] for h in hip]


def test_gpus_by_uuid_and_hip_winning_over_cuda(node, monkeypatch):
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", f"{node[3]['hip_uuid']},{node[0]['hip_uuid'].lower()}")
    assert seen() == [node[3]["uuid"], node[0]["uuid"]]
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.warns(UserWarning, match="differ; HIP uses HIP_VISIBLE_DEVICES"):
        assert seen() == [node[2]["uuid"]]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HIP_VISIBLE_DEVICES": ""}, "HIP_VISIBLE_DEVICES is set to an empty string"),
        ({"HIP_VISIBLE_DEVICES": "4"}, r"HIP_VISIBLE_DEVICES='4': entry '4' names no GPU \(the GPUs it may name are 0..3\)"),
        ({"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "2"}, r"entry '2' names no GPU \(the GPUs it may name are 0..1\)"),
        ({"CUDA_VISIBLE_DEVICES": "0,0"}, "entry '0' repeats a GPU"),
        ({"ROCR_VISIBLE_DEVICES": "GPU-deadbeef"}, "no visible GPU has this UUID"),
        ({"HIP_VISIBLE_DEVICES": "first"}, "neither an index nor a GPU-<uuid>"),
    ],
)
def test_visibility_errors_name_the_variable_and_entry(node, monkeypatch, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(DeviceError, match=message):
        seen()


def test_gpus_beyond_the_visible_ones_are_an_error(node, monkeypatch):
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1")
    with pytest.raises(DeviceError, match=r"gpus \[2\] are not HIP-visible: HIP sees 2 GPU\(s\).*HIP_VISIBLE_DEVICES='0,1'"):
        seen(gpus=[0, 2])
