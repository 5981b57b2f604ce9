"""Upstream's zeusd client (``zeus.utils.zeusd``, ``zeus.monitor.power_streaming``) against real ``zeus daemon`` processes.

Each daemon is a ``zeus daemon`` process on a simulated NVIDIA driver of two GPUs and one RAPL
package (``http_nodes``), serving upstream zeusd's HTTP API on its Unix socket and a loopback
TCP port; the calls are upstream-shaped (the same names, arguments and return types a script
written for upstream makes).
"""

from __future__ import annotations

import threading
import time

import pytest
from http_nodes import HttpNode
from zeus.device.exception import ZeusdError
from zeus.monitor.power_streaming import PowerReadings, PowerStreamingClient
from zeus.utils.zeusd import (
    CpuEnergyResult,
    GpuPowerSnapshot,
    ZeusdAuthError,
    ZeusdCapabilityError,
    ZeusdClient,
    ZeusdConfig,
    ZeusdConnectionError,
    require_capabilities,
)

from zeus_plugins_nvml import fake_pynvml


@pytest.fixture(scope="module")
def plain():
    """A daemon without tokens (the Unix socket changes; TCP reads)."""
    node = HttpNode().start()
    yield node
    node.remove()


@pytest.fixture(scope="module")
def authed():
    """A daemon that wants a token on every route but /discover and /time."""
    node = HttpNode(auth=True).start()
    yield node
    node.remove()


def _limits(node: HttpNode) -> list[float]:
    return [g["limit_w"] for g in fake_pynvml.read_state(node.driver)["gpus"]]


def test_every_client_call_over_the_unix_socket(plain):
    c = ZeusdClient(ZeusdConfig.uds(str(plain.socket)))
    assert c.gpu_ids == [0, 1] and c.cpu_ids == [0] and c.dram_available == [False]
    assert c.gpus[0].name == "NVIDIA A100-SXM4-40GB" and c.gpus[0].cumulative_energy_available
    assert not c.auth_required and c.auth_error is None and c.can_control_gpu and c.can_read_cpu
    require_capabilities(c, read_gpu=True, control_gpu=True, read_cpu=True, gpu_ids=[0, 1], cpu_ids=[0])

    snap = c.get_gpu_power()
    assert isinstance(snap, GpuPowerSnapshot) and set(snap.power_mw) == {0, 1} and all(v > 0 for v in snap.power_mw.values())
    assert abs(snap.timestamp_ms / 1000 - time.time()) < 60
    assert set(c.get_gpu_energy([1])) == {1}
    c.set_power_limit([0, 1], 175_000, block=True)
    assert _limits(plain) == [175.0, 175.0]
    assert c.get_power_limit() == {0: 175_000, 1: 175_000}
    assert c.get_power_limit_constraints([1]) == {1: (100_000, 400_000)}
    assert c.get_persistence_mode([0]) == {0: True}
    c.set_gpu_locked_clocks([0], 1005, 1410)
    assert fake_pynvml.read_state(plain.driver)["gpus"][0]["locked_clocks"] == [1005, 1410]
    c.reset_locked_clocks([0])
    assert fake_pynvml.read_state(plain.driver)["gpus"][0]["locked_clocks"] is None
    assert c.get_cpu_energy(cpu=True, dram=True) == {0: CpuEnergyResult(cpu_energy_uj=5_000_000, dram_energy_uj=None)}
    assert abs(c.get_time() - time.time()) < 60
    with pytest.raises(ZeusdError, match="set_power_limit.*outside|set_power_limit.*range"):
        c.set_power_limit([0], 5_000)  # below the GPU's range: the daemon's 400 and its reason
    with pytest.raises(ZeusdError, match="get_gpu_power.*GPU 7"):
        c.get_gpu_power([7])


def test_tokens_over_tcp_as_upstream(authed):
    reader = ZeusdConfig.tcp("127.0.0.1", authed.port, token=authed.token("gpu-read", "cpu-read", sub="dash"))
    c = ZeusdClient(reader)
    assert c.auth_required and c.auth_error is None and c.granted_scopes == {"gpu-read", "cpu-read"}
    assert c.can_read_gpu and not c.can_control_gpu
    assert set(c.get_gpu_power().power_mw) == {0, 1}
    with pytest.raises(ZeusdCapabilityError, match="lacks required scope 'gpu-control'"):
        require_capabilities(c, control_gpu=True)
    with pytest.raises(ZeusdError, match="set_power_limit"):
        c.set_power_limit([0], 200_000)  # 403 from the daemon
    assert _limits(authed) == [400.0, 400.0]

    ops = ZeusdClient(ZeusdConfig.tcp("127.0.0.1", authed.port, token=authed.token("gpu-control", "gpu-read", sub="ops")))
    ops.set_power_limit([1], 250_000)
    assert _limits(authed) == [400.0, 250.0]

    nobody = ZeusdClient(ZeusdConfig.tcp("127.0.0.1", authed.port))
    assert nobody.gpu_ids == [0, 1] and "no token was provided" in (nobody.auth_error or "")
    with pytest.raises(ZeusdAuthError):
        require_capabilities(nobody, read_gpu=True)
    forged = ZeusdClient(ZeusdConfig.tcp("127.0.0.1", authed.port, token="not.a.token"))
    assert "Token rejected" in (forged.auth_error or "")


def test_upstream_variables_name_the_daemon_and_the_token(authed, monkeypatch):
    monkeypatch.delenv("ZEUSD_SOCK_PATH", raising=False)
    monkeypatch.setenv("ZEUSD_HOST_PORT", authed.address)
    monkeypatch.setenv("ZEUSD_TOKEN", authed.token("gpu-read", sub="env"))
    c = ZeusdClient()
    assert c.endpoint == authed.address and c._whoami_sub == "env" and c.can_read_gpu
    monkeypatch.setenv("ZEUSD_SOCK_PATH", str(authed.socket))  # the socket wins, as upstream's order says
    assert ZeusdClient().endpoint == str(authed.socket)
    monkeypatch.setenv("ZEUSD_SOCK_PATH", str(authed.root / "no.sock"))
    with pytest.raises(ZeusdConnectionError, match="Cannot reach Zeusd"):
        ZeusdClient()


def _wait(client: PowerStreamingClient, test, timeout_s: float = 30.0) -> dict[str, PowerReadings]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        readings = client.get_power()
        if test(readings):
            return readings
        time.sleep(0.05)
    raise AssertionError(f"the readings never became what the test waits for: {client.get_power()}")


def test_power_streaming_from_two_nodes_reconnects_after_a_restart(authed):
    node = HttpNode()
    try:
        node.start()
        servers = [
            ZeusdConfig.uds(str(node.socket)),
            ZeusdConfig.tcp("127.0.0.1", authed.port, token=authed.token("gpu-read"), gpu_indices=[1]),
        ]
        client = PowerStreamingClient(servers, reconnect_delay_s=0.2)
        try:
            both = _wait(
                client, lambda r: len(r) == 2 and r[str(node.socket)].gpu_power_w.keys() == {0, 1} and r[str(node.socket)].cpu_power_w
            )
            assert both[authed.address].gpu_power_w.keys() == {1}  # gpu_indices honoured
            assert not both[authed.address].cpu_power_w  # the token lacks cpu-read: that stream is skipped
            assert all(w > 0 for w in both[str(node.socket)].gpu_power_w.values())
            assert abs(both[str(node.socket)].timestamp_s - time.time()) < 5

            got: list[dict] = []
            it = threading.Thread(target=lambda: got.extend(r for _, r in zip(range(3), client, strict=False)), daemon=True)
            it.start()
            it.join(30)
            assert len(got) == 3  # the iterator yields as samples arrive

            node.stop()  # the daemon goes away under the stream, and comes back on the same socket
            stopped = time.time()
            node.start()
            _wait(client, lambda r: r[str(node.socket)].timestamp_s > stopped + 0.05)
        finally:
            t0 = time.monotonic()
            client.stop()
            assert time.monotonic() - t0 < 10 and not client._threads
    finally:
        node.remove()


def test_explicit_indices_a_node_lacks_are_refused(plain):
    with pytest.raises(ValueError, match=r"GPU indices \[5\]"):
        PowerStreamingClient([ZeusdConfig.uds(str(plain.socket), gpu_indices=[5])])
    with pytest.raises(ValueError, match="Duplicate"):
        PowerStreamingClient([ZeusdConfig.uds(str(plain.socket)), ZeusdConfig.uds(str(plain.socket))])


def test_the_device_layer_changes_through_the_daemon_zeusd_host_port_names(authed, monkeypatch):
    import zeus.device.gpu
    from zeus.device import get_gpus
    from zeus.device.gpu.common import ZeusGPUInitError

    monkeypatch.setenv("ZEUS_FAKE_NVML", str(authed.driver))  # this process reads the node's (simulated) GPUs itself
    monkeypatch.setenv("ZEUS_GPU_DEVICE", "nvml")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # CUDA's GPU 0 is the node's GPU 1
    monkeypatch.setenv("ZEUSD_HOST_PORT", authed.address)
    monkeypatch.setenv("ZEUSD_TOKEN", authed.token("gpu-read", sub="reader"))
    with pytest.raises(ZeusGPUInitError, match="lacks required scope 'gpu-control'"):
        get_gpus()  # as upstream: a token that cannot change GPUs fails at the start
    zeus.device.gpu._gpus = None
    monkeypatch.setenv("ZEUSD_TOKEN", authed.token("gpu-control", "gpu-read", sub="trainer"))
    gpus = get_gpus()
    before = _limits(authed)
    gpus.set_power_management_limit(0, 220_000)
    assert _limits(authed) == [before[0], 220.0]
    assert gpus.get_power_management_limit(0) == 220_000  # read locally, from the driver the daemon changed
    gpus.set_gpu_locked_clocks(0, 1005, 1410)
    assert fake_pynvml.read_state(authed.driver)["gpus"][1]["locked_clocks"] == [1005, 1410]
    gpus.reset_gpu_locked_clocks(0)
    assert fake_pynvml.read_state(authed.driver)["gpus"][1]["locked_clocks"] is None
    assert "token trainer" in (authed.root / "d.log").read_text()  # the daemon made them, for the token's subject


def test_the_cpus_read_through_the_daemon_zeusd_host_port_names(authed, monkeypatch):
    import zeus.device.cpu
    from zeus.device import get_cpus
    from zeus.device.cpu.common import CpuDramMeasurement, ZeusCPUInitError
    from zeus.device.cpu.rapl import ZeusdRAPLCPU

    monkeypatch.setenv("ZEUSD_HOST_PORT", authed.address)
    monkeypatch.setenv("ZEUSD_TOKEN", authed.token("gpu-read", sub="gpu-only"))
    with pytest.raises(ZeusCPUInitError, match="lacks required scope 'cpu-read'"):
        get_cpus()
    zeus.device.cpu._cpus = None
    monkeypatch.setenv("ZEUSD_TOKEN", authed.token("cpu-read", sub="cpu"))
    cpus = get_cpus()
    assert len(cpus) == 1 and isinstance(cpus.cpus[0], ZeusdRAPLCPU) and not cpus.supports_get_dram_energy_consumption(0)
    assert cpus.get_total_energy_consumption(0) == CpuDramMeasurement(cpu_mj=5000.0, dram_mj=None)  # the node's 5 J counter
    (authed.root / "powercap" / "intel-rapl:0" / "energy_uj").write_text("7500000\n")
    assert cpus.get_total_energy_consumption(0).cpu_mj == 7500.0  # read again through the daemon, not cached
