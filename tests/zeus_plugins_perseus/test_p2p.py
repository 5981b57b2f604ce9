"""The P2P blocking-power job: two gloo ranks on CPU, rank 0 measured on a constant-power fake device."""

import functools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import ConstantPowerDevice  # noqa: E402

from zeus_plugins_perseus import p2p  # noqa: E402


def test_rank0_blocks_for_the_duration_and_reports_its_power():
    pytest.importorskip("torch")
    r = p2p.measure_blocking_power(functools.partial(ConstantPowerDevice, 70.38), duration_s=0.6, backend="gloo",
                                   timeout_s=120)
    assert r.seconds >= 0.6  # the window covered the whole wait for rank 1's send
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
    from click.testing import CliRunner
    from zeus_plugins_perseus.cli import perseus_group

    calls = []

    def fake(make_device, duration, backend, gpus):
        calls.append((make_device.func, make_device.args, make_device.keywords, duration, backend, gpus))
        return p2p.BlockingPower(83.64, 2.0, 167.28, ["gpu3"], backend)

    monkeypatch.setattr(p2p, "measure_blocking_power", fake)
    r = CliRunner().invoke(perseus_group, ["p2p-power", "--set", "gpus=[3]", "--duration", "2", "--gpus", "3,4"])
    assert r.exit_code == 0, r.output
    from zeus_core import open_device  # rank 0 opens the device by name through the core

    assert "83.64 W" in r.output and calls == [(open_device, ("nvml", {"gpus": [3]}), {}, 2.0, "nccl", (3, 4))]
    bad = CliRunner().invoke(perseus_group, ["p2p-power", "--gpus", "0"])
    assert bad.exit_code == 2 and "two CUDA indices" in bad.output
