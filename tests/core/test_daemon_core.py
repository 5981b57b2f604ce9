"""The core of ``zeus daemon`` without a device: framing, and privileged services in the registry."""

from __future__ import annotations

import socket
import struct
import threading
import time
import types

import attrs
import pytest

from zeus_core import hookimpl
from zeus_core.daemon import DaemonClient, DaemonError, operation
from zeus_core.daemon.protocol import MAX_FRAME, FrameError, decode, encode, error_reply, read_frame
from zeus_core.engine import registry as zreg


def test_frames_round_trip_and_their_limits_are_enforced():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode({"op": "ping", "id": 1}) + encode({"op": "x" * 100}))
        assert decode(read_frame(b)) == {"op": "ping", "id": 1}
        assert decode(read_frame(b))["op"] == "x" * 100
        with pytest.raises(ValueError, match="exceeds the maximum of 65536"):
            encode({"x": "y" * MAX_FRAME})
        a.sendall(struct.pack(">I", 0))
        with pytest.raises(FrameError, match="empty frame") as e:
            read_frame(b)
        assert not e.value.fatal  # the stream is still in step
        a.sendall(struct.pack(">I", 10) + b"{}")  # 2 of 10 bytes, then nothing: a stalled half frame
        with pytest.raises(FrameError, match="did not arrive within 0.2 s") as e:
            read_frame(b, body_timeout_s=0.2)
        assert e.value.fatal
    a, b = socket.socketpair()
    with b:
        a.sendall(struct.pack(">I", 2**31))
        with pytest.raises(FrameError, match="exceeds the maximum") as e:
            read_frame(b)  # refused from the header alone: nothing of it is allocated
        assert e.value.fatal
        a.sendall(b"\x00\x00")
        a.close()
        with pytest.raises(FrameError, match="ended 2 bytes short of a complete frame"):
            read_frame(b)
    for body, message in [(b"[]", "must hold a JSON object"), (b"\xc3\x28", "not UTF-8"), (b"{", "not JSON")]:
        with pytest.raises(FrameError, match=message):
            decode(body)


@attrs.define
class Opts:
    level: int = 1


@attrs.define
class Args:
    value: int


class GoodService:
    def __init__(self, options, ctx):
        self.options = options

    @operation(Args)
    def set_level(self, args, client):
        """Set the level."""
        return args.value

    @operation(changes=False)
    def read(self, args, client):
        return 0


class NoOperations:
    def __init__(self, options, ctx):
        pass

    def set_level(self, args, client):  # not marked: the daemon must never call it
        return None


def plugin(service):
    @hookimpl
    def zeus_register_privileged_operations(register):
        register("dial", service, options=Opts)

    mod = types.ModuleType("dialplug")
    mod.zeus_register_privileged_operations = zeus_register_privileged_operations
    return mod


def test_privileged_services_are_registered_with_their_marked_operations_only():
    reg = zreg.load(extra_plugins=[("dialplug", plugin(GoodService))], entry_points=False)
    assert reg.services["dial"].factory is GoodService and reg.services["dial"].options is Opts
    info = next(p for p in reg.plugins() if p.name == "dialplug")
    assert info.provides == {"privileged_operation": ["dial.read", "dial.set_level"]}
    bad = zreg.load(extra_plugins=[("dialplug", plugin(NoOperations))], entry_points=False)  # services: on first use
    with pytest.raises(
        zreg.PluginError, match=r"registered privileged service 'dial', whose class has no method marked with @zeus_core.daemon.operation"
    ):
        bad.services  # noqa: B018
    with pytest.raises(TypeError, match="must be an attrs class"):
        operation(dict)


def test_a_refusal_sent_before_the_client_speaks_is_still_read(tmp_path):
    """The daemon answers a forbidden peer at once and hangs up; the client's first send then
    fails (EPIPE), and it must report the daemon's reason, not a lost connection."""
    path = str(tmp_path / "d.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    client = DaemonClient(path, timeout_s=5)

    def refuse():
        conn, _ = server.accept()
        conn.sendall(encode(error_reply(None, "forbidden", "uid 1234 (x) may not use this daemon")))
        conn.close()

    t = threading.Thread(target=refuse)
    t.start()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what DaemonClient._connect does, minus the hello
    s.connect(path)
    t.join()
    time.sleep(0.1)
    client._sock = s
    with pytest.raises(DaemonError, match="may not use this daemon") as e:
        client.call("ping")
    assert e.value.code == "forbidden" and not client.connected
    server.close()
