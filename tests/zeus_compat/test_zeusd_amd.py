"""AMD GPUs over ``zeus daemon``'s HTTP API through upstream's client (zeus-compat's ``ZeusdClient``): a real
``zeus daemon`` process serves two GPUs of the simulated amdsmi driver (``http_nodes``, ``vendor="amdsmi"``)
over a loopback TCP port with tokens. (The amdsmi plugin's own tests, which run without zeus-compat
installed, drive the same daemon with the core's client: tests/zeus_plugins_amdsmi/test_daemon_http.py.)
"""

from __future__ import annotations

import pytest
from http_nodes import HttpNode
from zeus.device.exception import ZeusdError
from zeus.utils.zeusd import ZeusdClient, ZeusdConfig

from zeus_core.daemon.nodeclient import Endpoint, NodeClient
from zeus_plugins_amdsmi import fake_amdsmi


@pytest.fixture(scope="module")
def amd():
    node = HttpNode(vendor="amdsmi", auth=True).start()
    yield node
    node.remove()


def _caps(node: HttpNode) -> list[float]:
    return [g["cap_w"] for g in fake_amdsmi.read_state(node.driver)["gpus"]]


def test_amd_gpus_are_discovered_read_and_capped_over_http(amd):
    c = ZeusdClient(ZeusdConfig.tcp("127.0.0.1", amd.port, token=amd.token("gpu-read", "gpu-control")))
    assert c.gpu_ids == [0, 1] and c.auth_error is None
    g = c.gpus[1]
    assert (g.name, g.cumulative_energy_available) == ("AMD Instinct MI300X", True)
    assert g.pci_address == fake_amdsmi.read_state(amd.driver)["gpus"][1]["bdf"].lower()
    assert c.get_power_limit_constraints() == {0: (200_000, 750_000), 1: (200_000, 750_000)}
    assert c.get_power_limit([0]) == {0: 750_000}
    power = c.get_gpu_power().power_mw
    assert set(power) == {0, 1} and all(v > 0 for v in power.values())
    e1 = c.get_gpu_energy([0])[0]
    assert c.get_gpu_energy([0])[0] >= e1 > 0

    c.set_power_limit([1], 400_000)  # mW over HTTP, µW in amdsmi
    assert _caps(amd) == [750.0, 400.0]
    assert c.get_power_limit([1]) == {1: 400_000}
    with pytest.raises(ZeusdError, match="outside the power-cap range"):
        c.set_power_limit([0], 100_000)
    with pytest.raises(ZeusdError, match="persistence mode is an NVIDIA"):
        c.get_persistence_mode([0])  # 400, as upstream zeusd answers for AMD GPUs
    NodeClient(Endpoint.parse(amd.address, token=amd.token("gpu-control"))).post("/gpu/reset_power_limit", gpu_ids=[1], block=True)
    assert _caps(amd) == [750.0, 750.0]


def test_amd_clocks_are_locked_and_reset_through_upstreams_client(amd):
    """upstream's ZeusdClient clock setters on AMD GPUs: amdsmi's soft limits, ZeusdError for one frequency."""
    c = ZeusdClient(ZeusdConfig.tcp("127.0.0.1", amd.port, token=amd.token("gpu-read", "gpu-control")))

    def clocks() -> list[tuple]:
        return [(g["sys_clock_lock_mhz"], g["mem_clock_lock_mhz"]) for g in fake_amdsmi.read_state(amd.driver)["gpus"]]

    c.set_gpu_locked_clocks([0], 500, 1500)
    c.set_mem_locked_clocks([0], 900, 1200)
    assert clocks() == [([500, 1500], [900, 1200]), (None, None)]
    with pytest.raises(ZeusdError, match="cannot hold one frequency"):
        c.set_gpu_locked_clocks([1], 1500, 1500)
    c.reset_gpu_locked_clocks([0])
    c.reset_mem_locked_clocks([0])
    assert clocks() == [([500, 2100], [900, 1300]), (None, None)]
