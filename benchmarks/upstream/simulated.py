"""A pytest plugin for upstream Zeus's tests: their mocks of upstream's private GPU layer, mapped onto zeus's
simulated NVIDIA driver (``zeus_plugins_nvml.fake_pynvml``), and upstream's test-only replay monitor.

Upstream's tests replace ``zeus.device.gpu.nvidia.pynvml`` (upstream's private NVML binding) with an
autospec mock and script it: device count, handles (``"handle0"``...), architectures, energy
counters, power-limit constraints; then they assert the calls the code made. Here the code under
test is zeus's own ``nvml`` device plugin, so the rewritten tests get :func:`simulated_pynvml`
instead: a module with the simulated driver's constants and errors, whose every ``nvml*`` function
is a ``MagicMock`` wrapping the simulated driver's function. What a test scripts
(``return_value``, ``side_effect``) replaces the simulated answer, exactly as on upstream's mock,
and every call is recorded with the test's handles; whatever a test leaves unscripted (UUIDs,
names, power limits, power readings) the simulated driver answers. The plugin process, the power
poller it may start and every setting it changes use that one simulated driver.

Two driver facts the scripted mock leaves out are filled in from the test's own script:
* a GPU older than Volta has no energy counter: ``nvmlDeviceGetTotalEnergyConsumption`` answers
  NotSupported where the scripted architecture is older than Volta (what a real driver does,
  and what upstream's own layer derives from the architecture);
* zeus's plugin reads each counter when it opens a GPU, to learn whether the GPU has one and to
  check it against the power drawn; those reads are answered by the simulated driver, so the
  test's scripted counters advance only at window edges, as its expectations assume.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import zeus_plugins_nvml.fake_pynvml as fake  # the simulated driver (a test helper of the nvml plugin)

NUM_SIMULATED_GPUS = 8


def _translate(proxy: Any, value: Any) -> Any:
    """A test's handle (``"handle3"``) as the simulated driver's handle for that GPU."""
    if isinstance(value, str) and value.startswith("handle") and value[6:].isdigit():
        return fake.nvmlDeviceGetHandleByIndex(int(value[6:]))
    return value


def _wrapping(proxy: Any, fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*(_translate(proxy, a) for a in args), **kwargs)

    return call


class _EnergyCounter(mock.MagicMock):
    """``nvmlDeviceGetTotalEnergyConsumption``: NotSupported before Volta; the open-time probe answered by the driver."""

    def __call__(self, handle: Any, *args: Any, **kwargs: Any) -> Any:
        proxy = _PROXY[0]
        if proxy.nvmlDeviceGetArchitecture(handle) < fake.NVML_DEVICE_ARCH_VOLTA:
            raise fake.NVMLError(fake.NVML_ERROR_NOT_SUPPORTED)
        if proxy._probing:
            return fake.nvmlDeviceGetTotalEnergyConsumption(_translate(proxy, handle))
        return super().__call__(handle, *args, **kwargs)


_PROXY: list[Any] = []


def _opening_probe(proxy: Any, step: str) -> Any:
    """A step of the plugin's open (``NvmlGpus.__init__``: ``_source``, its counter probe, and
    ``_check_counters``, the counter check) with the probe flag up, so that its counter reads reach the
    driver and not the test's scripted counters."""
    from zeus_plugins_nvml import device

    original = getattr(device.NvmlGpus, step)

    def probing(self: Any, *args: Any, **kwargs: Any) -> Any:
        proxy._probing = True
        try:
            return original(self, *args, **kwargs)
        finally:
            proxy._probing = False

    return probing


def simulated_pynvml(mocker: Any) -> Any:
    """The rewritten ``mocker.patch("zeus.device.gpu.nvidia.pynvml", autospec=True)`` (see the module)."""
    proxy = types.ModuleType(fake.__name__)
    proxy.__file__ = fake.__file__
    for name in dir(fake):
        if name.startswith(("NVML_", "NVMLError")) or name == "NVMLError":
            setattr(proxy, name, getattr(fake, name))
    for name in dir(fake):
        fn = getattr(fake, name)
        if name.startswith("nvml") and callable(fn):
            cls = _EnergyCounter if name == "nvmlDeviceGetTotalEnergyConsumption" else mock.MagicMock
            setattr(proxy, name, cls(name=name, wraps=_wrapping(proxy, fn)))
    functions = [getattr(proxy, name) for name in dir(proxy) if name.startswith("nvml")]

    def reset_mock() -> None:
        """Forget the recorded calls of every function (what ``reset_mock`` of upstream's module mock does)."""
        for fn in functions:
            fn.reset_mock()

    proxy.reset_mock = reset_mock
    proxy._probing = False
    _PROXY[:] = [proxy]
    # Only this entry is swapped and put back (patch.dict would also drop every module imported meanwhile).
    sys.modules[fake.__name__] = proxy
    from zeus_plugins_nvml import device

    for step in ("_source", "_check_counters"):
        mocker.patch.object(device.NvmlGpus, step, _opening_probe(proxy, step))
    return proxy


@pytest.fixture(autouse=True)
def _simulated_driver(tmp_path_factory: pytest.TempPathFactory, mocker: Any, monkeypatch: pytest.MonkeyPatch):
    """A fresh simulated driver per test (every GPU privileged, limits 1..1000 W); the devices opened by
    the test are closed (their settings put back) before its mocks are undone."""
    state = tmp_path_factory.mktemp("driver") / "nvml.json"
    gpus = [fake.FakeGpu(min_limit_w=1.0, max_limit_w=1000.0, default_limit_w=1000.0) for _ in range(NUM_SIMULATED_GPUS)]
    fake.create(state, gpus, privileged=True)
    monkeypatch.setenv(fake.ENV, str(state))
    monkeypatch.setenv("ZEUS_STATE_DIR", str(state.parent))
    monkeypatch.setenv("ZEUS_GPU_DEVICE", "nvml")
    yield
    sys.modules[fake.__name__] = fake
    import zeus.device.gpu

    gpus_opened = zeus.device.gpu._gpus
    zeus.device.gpu._gpus = None
    if gpus_opened is not None and hasattr(gpus_opened, "close"):
        try:
            gpus_opened.close()
        except Exception:  # noqa: BLE001 - a mock the test left scripted may refuse; the journal restores
            pass


def _install_judge() -> None:
    """Upstream's ``zeus.utils.testing`` (its replay monitor, which upstream's tests use as the judge of
    the log file format), loaded from the release's sdist named by ``$ZEUS_UPSTREAM_TESTING``."""
    path = os.environ.get("ZEUS_UPSTREAM_TESTING")
    if not path:
        return
    import importlib.util

    import zeus.utils

    spec = importlib.util.spec_from_file_location("zeus.utils.testing", Path(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["zeus.utils.testing"] = module
    spec.loader.exec_module(module)
    zeus.utils.testing = module  # type: ignore[attr-defined]


_install_judge()
