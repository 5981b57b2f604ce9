"""AMD GPUs over ``zeus daemon``'s HTTP API (upstream zeusd's): the amdsmi service's reads, its power limits, its clocks, its streams.

A real ``zeus daemon`` process serves two GPUs of the simulated amdsmi driver (``http_nodes``,
``vendor="amdsmi"``) over its Unix socket and a loopback TCP port with tokens; the client is the core's
(upstream's own client against it: tests/zeus_compat/test_zeusd_amd.py).
"""

from __future__ import annotations

import json

import pytest
from http_nodes import HttpNode

from zeus_core.daemon.nodeclient import Endpoint, NodeClient, NodeError, sse_data
from zeus_core.devicekit import simulated
from zeus_plugins_amdsmi import fake_amdsmi


@pytest.fixture(scope="module")
def amd():
    node = HttpNode(vendor="amdsmi", auth=True).start()
    yield node
    node.remove()


def test_amd_power_streams_over_the_unix_socket(amd):
    client = NodeClient(Endpoint(socket_path=str(amd.socket), token=amd.token("gpu-read")))
    seen: list[dict] = []
    with client.events("/gpu/stream_power", gpu_ids=[0, 1]) as chunks:
        for data in sse_data(chunks):
            seen.append(json.loads(data))
            if {s["gpu_id"] for s in seen} == {0, 1} and len(seen) >= 6:
                break
    assert all(s["power_mw"] > 0 and s["timestamp_ms"] > 0 for s in seen)


def _clocks(node: HttpNode) -> list[tuple[list[int] | None, list[int] | None]]:
    return [(g["sys_clock_lock_mhz"], g["mem_clock_lock_mhz"]) for g in fake_amdsmi.read_state(node.driver)["gpus"]]


def _privileged(node: HttpNode, mode: bool) -> None:
    state = fake_amdsmi.read_state(node.driver)
    state["privileged"] = mode
    simulated.write_state(node.driver, state)


def test_amd_clocks_are_locked_and_reset_over_the_clock_routes(amd):
    """upstream zeusd's clock routes on an AMD GPU: soft limits in MHz, 400 for a range amdsmi cannot take
    (one frequency, outside the hardware's), 403 where the driver refuses, the limits put back on reset."""
    client = NodeClient(Endpoint.parse(amd.address, token=amd.token("gpu-control")))
    client.post("/gpu/set_gpu_locked_clocks", gpu_ids=[1], min_clock_mhz=500, max_clock_mhz=1400, block=True)
    client.post("/gpu/set_mem_locked_clocks", gpu_ids=[0, 1], min_clock_mhz=1100, max_clock_mhz=1300, block=True)
    assert _clocks(amd) == [(None, [1100, 1300]), ([500, 1400], [1100, 1300])]

    refusals = [
        ("/gpu/set_gpu_locked_clocks", 1400, 1400, "cannot hold one frequency"),  # upstream's lock to one clock: not on AMD
        ("/gpu/set_gpu_locked_clocks", 400, 1400, "within 500..2100 MHz"),
        ("/gpu/set_mem_locked_clocks", 1100, 1500, "within 900..1300 MHz"),
    ]
    for path, lo, hi, why in refusals:
        with pytest.raises(NodeError) as e:
            client.post(path, gpu_ids=[0], min_clock_mhz=lo, max_clock_mhz=hi, block=True)
        assert e.value.status == 400 and why in json.loads(e.value.text)["errors"]["0"]
    _privileged(amd, False)  # the driver refuses every setter now: AMDSMI_STATUS_NO_PERM is 403, as NVML's NoPermission
    try:
        with pytest.raises(NodeError) as e:
            client.post("/gpu/set_gpu_locked_clocks", gpu_ids=[0], min_clock_mhz=500, max_clock_mhz=1000, block=True)
        assert e.value.status == 403 and "AMDSMI_STATUS_NO_PERM" in e.value.text
    finally:
        _privileged(amd, True)
    assert _clocks(amd) == [(None, [1100, 1300]), ([500, 1400], [1100, 1300])]  # refusals changed nothing

    client.post("/gpu/reset_gpu_locked_clocks", gpu_ids=[1], block=True)
    assert _clocks(amd) == [(None, [1100, 1300]), ([500, 2100], [1100, 1300])]  # the memory lock still stands
    client.post("/gpu/reset_locked_clocks", gpu_ids=[0, 1], block=True)
    # GPU 0's GFX clock was not locked by this caller: reset to the hardware range, as NVML resets a lock it did not make
    assert _clocks(amd) == [([500, 2100], [900, 1300]), ([500, 2100], [900, 1300])]


def test_amd_clock_locks_go_back_when_the_daemon_stops():
    node = HttpNode(vendor="amdsmi", gpus=1).start()
    try:
        client = NodeClient(Endpoint(socket_path=str(node.socket)))
        client.post("/gpu/set_gpu_locked_clocks", gpu_ids=[0], min_clock_mhz=500, max_clock_mhz=1200, block=True)
        assert _clocks(node) == [([500, 1200], None)]
        node.stop()  # SIGTERM: the daemon puts back every setting it holds
        assert _clocks(node) == [([500, 2100], None)]
    finally:
        node.remove()
