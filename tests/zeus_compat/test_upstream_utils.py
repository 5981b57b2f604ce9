"""Upstream's ``zeus.utils.framework`` checks and ranks, ``zeus.utils.multiprocessing.warn_if_global_in_subprocess``
and ``zeus.utils.testing.ReplayZeusMonitor`` (replaying a log written on the simulated NVIDIA driver)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import types
import warnings

import pytest
from zeus.monitor import Measurement, ZeusMonitor
from zeus.utils import framework
from zeus.utils import multiprocessing as zmp
from zeus.utils.multiprocessing import warn_if_global_in_subprocess
from zeus.utils.testing import ReplayZeusMonitor


@pytest.fixture(autouse=True)
def fresh_checks():
    """The ``*_is_available`` answers are cached, as upstream: every test starts without them."""
    for check in (framework.torch_is_available, framework.jax_is_available, framework.cupy_is_available):
        check.cache_clear()
    yield
    for check in (framework.torch_is_available, framework.jax_is_available, framework.cupy_is_available):
        check.cache_clear()


def test_torch_is_available_without_cuda_raises_unless_told_not_to():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine's torch has CUDA")
    with pytest.raises(RuntimeError, match="PyTorch is available but does not have CUDA support"):
        framework.torch_is_available()
    assert framework.torch_is_available(ensure_cuda=False) is True
    assert framework.MODULE_CACHE["torch"] is torch


def test_missing_frameworks(monkeypatch):
    for name in ("torch", "jax", "cupy"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails
    assert framework.torch_is_available() is False
    assert framework.jax_is_available() is False
    assert framework.cupy_is_available() is False
    for check, text in (
        (framework.torch_is_available, "Failed to import Pytorch"),
        (framework.jax_is_available, "Failed to import JAX"),
        (framework.cupy_is_available, "Failed to import CuPy"),
    ):
        check.cache_clear()
        with pytest.raises(RuntimeError, match=text):
            check(ensure_available=True)
    assert framework.get_rank() == 0 and framework.get_world_size() == 1


def test_rank_and_world_size_outside_and_inside_a_process_group(monkeypatch):
    assert framework.get_rank() == 0 and framework.get_world_size() == 1  # torch here, no process group
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 3)
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)
    assert framework.get_rank() == 3 and framework.get_world_size() == 4
    assert isinstance(framework.get_rank(), int)


def test_rank_from_jax_where_torch_is_absent(monkeypatch):
    jax = types.SimpleNamespace(__version__="0.4.30", devices=lambda kind: [], process_index=lambda: 1, process_count=lambda: 2)
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "jax", jax)
    assert framework.get_rank() == 1 and framework.get_world_size() == 2
    framework.jax_is_available.cache_clear()
    with pytest.raises(RuntimeError, match="JAX is available but does not have CUDA support"):
        framework.jax_is_available()
    framework.jax_is_available.cache_clear()
    assert framework.jax_is_available(ensure_cuda=False) and framework.MODULE_CACHE["jax"] is jax
    cupy = types.SimpleNamespace(__version__="13.0")
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert framework.cupy_is_available() and framework.MODULE_CACHE["cupy"] is cupy


class FakeMonitor:
    def __init__(self) -> None:
        warn_if_global_in_subprocess(self)


def test_no_warning_in_the_main_process():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FakeMonitor()
    assert caught == []


def test_warning_names_the_class_and_the_fix(monkeypatch):
    monkeypatch.setattr(zmp, "_is_global_in_spawned_child", lambda: True)
    with pytest.warns(UserWarning) as caught:
        FakeMonitor()
    [w] = caught
    text = str(w.message)
    assert "FakeMonitor" in text and "module import" in text and '__name__ == "__main__"' in text


def test_a_global_monitor_warns_in_spawned_children_only(tmp_path):
    script = tmp_path / "global_monitor.py"
    script.write_text(
        textwrap.dedent("""
        import multiprocessing
        from zeus.utils.multiprocessing import warn_if_global_in_subprocess

        class Monitor:
            def __init__(self):
                warn_if_global_in_subprocess(self)

        monitor = Monitor()  # a global: made again when a spawned child re-imports this script

        def work():
            Monitor()  # inside a function: no warning
            return 1

        if __name__ == "__main__":
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                assert pool.apply(work) == 1
    """)
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("Monitor was instantiated during module import in a spawned subprocess") == 1


def test_replay_monitor_replays_a_real_log(driver, tmp_path):
    driver(gpus=2, demand_w=120.0)
    log = tmp_path / "windows.csv"
    real = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[], log_file=log, sync_execution_with=lambda: None)
    recorded = []
    for name in ("step", "epoch"):
        real.begin_window(name)
        time.sleep(0.02)
        recorded.append(real.end_window(name))
    real.close()

    replay = ReplayZeusMonitor(log_file=log, ignore_sync_execution=True)
    assert replay.gpu_indices == [0, 1]  # from the header
    replay.begin_window("step")
    with pytest.raises(RuntimeError, match="Window step is already ongoing"):
        replay.begin_window("step")
    got = replay.end_window("step")
    assert isinstance(got, Measurement)
    assert got.time == recorded[0].time and got.gpu_energy == recorded[0].gpu_energy
    replay.begin_window("other")
    assert replay.end_window("other", cancel=True) == Measurement(time=0.0, gpu_energy={0: 0.0, 1: 0.0})  # no row read
    replay.begin_window("wrong")
    with pytest.raises(RuntimeError, match="Was expecting epoch, not wrong"):
        replay.end_window("wrong")
    with pytest.raises(RuntimeError, match="Window nothing is not ongoing"):
        replay.end_window("nothing")
    replay.begin_window("epoch")
    with pytest.raises(RuntimeError, match="No more lines in the log file"):
        replay.end_window("epoch")
    replay.close()

    loose = ReplayZeusMonitor(gpu_indices=[0, 1], log_file=log, match_window_name=False, ignore_sync_execution=True)
    loose.begin_window("anything")
    assert loose.end_window("anything").gpu_energy == recorded[0].gpu_energy
    loose.close()
    with pytest.raises(ValueError, match="`log_file` cannot be `None`"):
        ReplayZeusMonitor()
    wrong_width = ReplayZeusMonitor(gpu_indices=[0], log_file=log, ignore_sync_execution=True)
    wrong_width.begin_window("step")
    with pytest.raises(RuntimeError, match="unexpected number of energy measurements"):
        wrong_width.end_window("step")
    wrong_width.close()


def test_sync_execution_takes_upstreams_keywords():
    """``sync_execution(gpu_devices=..., sync_with=...)`` as upstream's callers write it; a callable waits."""
    calls = []
    framework.sync_execution(gpu_devices=[0], sync_with=lambda: calls.append("synced"))
    assert calls == ["synced"]
    with pytest.raises(TypeError):
        framework.sync_execution(gpu_indices=[0], sync_with=lambda: None)  # not upstream's name
