"""AMD GPUs over ``zeus daemon``'s HTTP API (upstream zeusd's): the amdsmi service's reads, its power limits, its streams.

A real ``zeus daemon`` process serves two GPUs of the simulated amdsmi driver (``http_nodes``,
``vendor="amdsmi"``) over its Unix socket and a loopback TCP port with tokens; the client is the core's
(upstream's own client against it: tests/zeus_compat/test_zeusd_amd.py).
"""

from __future__ import annotations

import json

import pytest
from http_nodes import HttpNode

from zeus_core.daemon.nodeclient import Endpoint, NodeClient, sse_data


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
