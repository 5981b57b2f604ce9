"""The P2P blocking-power job: two gloo ranks on CPU, rank 0 measured on a constant-power fake device."""

import functools
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import ConstantPowerDevice  # noqa: E402

from zeus_plugins_perseus import p2p  # noqa: E402


class TimedDevice(ConstantPowerDevice):
    """The constant-power device, noting (in ``record``, when rank 0 closes it) when it was built (before
    rank 0 enters the barrier that starts rank 1's sleep) and its last clock reading (the window's end)."""

    def __init__(self, watts: float, record: str) -> None:
        super().__init__(watts)
        self.record = record
        self.last = self.t0

    def clock(self) -> float:
        self.last = super().clock()
        return self.last

    def close(self) -> None:
        Path(self.record).write_text(json.dumps({"built": self.t0, "window_end": self.last}))


def test_rank0_blocks_for_the_duration_and_reports_its_power(tmp_path):
    """Rank 1 sends only ``duration_s`` after it leaves the barrier, which it cannot leave before rank 0,
    which built its device, enters it: so rank 0's window ends at least ``duration_s`` after the device was
    built, however the two processes are scheduled (the window itself may open late: a busy machine can
    keep rank 0 from opening it until rank 1's sleep has begun)."""
    pytest.importorskip("torch")
    record = tmp_path / "times.json"
    r = p2p.measure_blocking_power(functools.partial(TimedDevice, 70.38, str(record)), duration_s=0.6, backend="gloo", timeout_s=120)
    times = json.loads(record.read_text())
    assert times["window_end"] - times["built"] >= 0.6  # rank 0 waited for rank 1's send
    assert 0 < r.seconds <= times["window_end"] - times["built"]
    assert r.watts == pytest.approx(70.38, rel=1e-3)
    assert r.joules == pytest.approx(70.38 * r.seconds, rel=1e-3) and r.devices == ["gpu0"]


def test_bad_requests():
    with pytest.raises(ValueError, match="backend must be"):
        p2p.measure_blocking_power(dict, 1.0, "mpi")


def test_a_rank_that_cannot_open_its_device_fails_the_job_with_the_reason():
    pytest.importorskip("torch")
    from zeus_core import open_device

    make = functools.partial(open_device, "no-such-device", {})  # picklable, opened in rank 0's process
    with pytest.raises(p2p.P2PError, match="rank 0: DeviceOpenError: no device plugin named 'no-such-device'; installed: .*nvml"):
        p2p.measure_blocking_power(make, duration_s=0.2, backend="gloo", timeout_s=120)


def test_cli(monkeypatch):
    """``zeus perseus p2p-power`` through the ``zeus`` command, as a user runs it (invoking the plugin's group on
    its own would also leave click's cached ``--help``-only option on it for later tests)."""
    from click.testing import CliRunner

    from zeus_core.cli import main as zcli
    from zeus_core.engine.registry import load

    reg = load()
    reg.pm.hook.zeus_register_commands(cli=zcli.cli)

    def zeus(*args):
        return CliRunner().invoke(zcli.cli, ["perseus", *args], obj={"registry": reg})

    calls = []

    def fake(make_device, duration, backend, gpus):
        calls.append((make_device.func, make_device.args, make_device.keywords, duration, backend, gpus))
        return p2p.BlockingPower(83.64, 2.0, 167.28, ["gpu3"], backend)

    monkeypatch.setattr(p2p, "measure_blocking_power", fake)
    r = zeus("p2p-power", "--set", "gpus=[3]", "--duration", "2", "--gpus", "3,4")
    assert r.exit_code == 0, r.output
    from zeus_core import open_device  # rank 0 opens the device by name through the core

    assert "83.64 W" in r.output and calls == [(open_device, ("nvml", {"gpus": [3]}), {}, 2.0, "nccl", (3, 4))]
    bad = zeus("p2p-power", "--gpus", "0")
    assert bad.exit_code == 2 and "two CUDA indices" in bad.output
