"""``show_env()`` and ``python -m zeus.show_env``: upstream's environment report, read from the engine.

The sections are upstream's (package versions; GPUs with the physical -> CUDA index mapping;
CPUs and whether DRAM is read; SoC; the daemon), and what fills them is what ``zeus env``
reads: the GPUs and CPUs this package measures (through the device plugins), the SoC device
plugins (``jetson``, ``apple-silicon``) opened as ``zeus env`` opens them, and the
``zeus daemon`` socket (upstream's zeusd) this process would use. Nothing is changed on any
device. ``zeus env`` prints the engine's fuller report (every plugin, privileges, limits).
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
from typing import Any

import zeus
from zeus.device.cpu.common import EmptyCPUs, ZeusBaseCPUError
from zeus.device.gpu.common import EmptyGPUs, ZeusBaseGPUError, ZeusGPUInitError
from zeus.utils import framework

SECTION_SEPARATOR = "-" * shutil.get_terminal_size().columns

#: the engine's SoC device plugins, and how upstream names each kind of SoC
SOC_PLUGINS = {"jetson": "NVIDIA Jetson SoC", "apple-silicon": "Apple Silicon SoC"}


def _framework_line(label: str, check: Any, module: str, cuda_aware: bool = True) -> str:
    """``  PyTorch: 2.4.0 (with CUDA support)``, ``... (without CUDA support)`` or ``not available``."""
    try:
        found, cuda = check(), True
    except RuntimeError:  # found, without CUDA
        found, cuda = check(ensure_cuda=False), False
    if not found:
        return f"  {label}: not available\n"
    version = getattr(framework.MODULE_CACHE[module], "__version__", "unknown")
    if not cuda_aware:
        return f"  {label}: {version}\n"
    return f"  {label}: {version} ({'with' if cuda else 'without'} CUDA support)\n"


def _packages() -> str:
    from zeus_core.engine import CORE_PLUGIN, get_registry

    core = get_registry().distribution_of(CORE_PLUGIN)[1] or "unknown"
    text = f"  Python version: {platform.python_version()}\n  Zeus: {zeus.__version__} (zeus-compat on zeus-core {core})\n"
    text += _framework_line("PyTorch", framework.torch_is_available, "torch")
    text += _framework_line("JAX", framework.jax_is_available, "jax")
    text += _framework_line("CuPy", framework.cupy_is_available, "cupy", cuda_aware=False)
    return text


def _physical(zeus_index: int) -> str:
    """The index ``nvidia-smi`` shows for CUDA index ``zeus_index`` (the entry of a visibility variable)."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        value = os.environ.get(var)
        if value:
            entries = [e.strip() for e in value.split(",") if e.strip()]
            if zeus_index < len(entries):
                return entries[zeus_index]
    return str(zeus_index)


def _gpus() -> str:
    from zeus.device import get_gpus

    text = ""
    try:
        gpus = get_gpus()
        count = len(gpus)
    except ZeusGPUInitError:
        gpus, count = EmptyGPUs(), 0
    except ZeusBaseGPUError as e:
        text += f"  Error initializing GPUs: {e}\n"
        gpus, count = EmptyGPUs(), 0
    if not count:
        return text + "  No GPUs available.\n"
    text += f"  CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '[NOT SET]')}\n"
    text += f"  HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES', '[NOT SET]')}\n"
    plugins = sorted({g.plugin for g in gpus.gpus})
    text += f"  Device plugin: {', '.join(plugins)}\n"
    text += "  Device index mapping: Physical (e.g., nvidia-smi) -> Zeus (or any CUDA application)\n"
    for gpu in gpus.gpus:
        text += f"    GPU {_physical(gpu.gpu_index)} -> GPU {gpu.gpu_index} ({gpus.get_name(gpu.gpu_index)})\n"
    return text


def _cpus() -> str:
    from zeus.device import get_cpus

    text = ""
    try:
        cpus = get_cpus()
    except ZeusBaseCPUError as e:
        if "RAPL unavailable" not in str(e):
            text += f"  Error initializing CPUs: {e}\n"
        cpus = EmptyCPUs()
    if not cpus.cpus:
        return text + "  No CPUs available.\n"
    for i, cpu in enumerate(cpus.cpus):
        text += f"  CPU {i}:\n    CPU measurements available ({cpu.package})\n"
        text += f"    DRAM measurements available ({cpu.dram})\n" if cpu.dram else "    DRAM measurements unavailable\n"
    return text


def _soc() -> str:
    from rich.console import Console

    from zeus_core.cli.env import close_probes, probe_devices
    from zeus_core.engine import get_registry

    reg = get_registry()
    names = [n for n in SOC_PLUGINS if n in reg.names("device")]
    probes, errors = probe_devices(reg, names, {}, Console(stderr=True))
    text = ""
    try:
        for probe in probes:
            if probe.status == "found":
                text += f"  {SOC_PLUGINS[probe.plugin]} available.\n"
                text += f"  Available metrics: {', '.join(probe.group.names)}\n"
            elif probe.status != "absent":
                text += f"  Error initializing SoC ({probe.plugin}): {probe.reason}\n"
    finally:
        errors += close_probes(probes)
    text += "".join(f"  Error initializing SoC: {e}\n" for e in errors)
    if "available." not in text:
        text += "  No SoC available.\n"
        if platform.system() == "Darwin" and platform.machine() in ("arm64", "aarch64") and "apple-silicon" not in names:
            text += (
                "\nThis appears to be an Apple Silicon device, but it wasn't picked up by Zeus.\n"
                "Have you installed the Apple Silicon device plugin?\n    pip install zeus-plugins-apple-silicon\n"
            )
    return text


def _daemon() -> str:
    from zeus_core.cli.env import daemon_status

    status = daemon_status()
    if not status["socket"]:
        return "  Not configured (set ZEUS_DAEMON_SOCKET to the socket of `zeus daemon` to connect).\n"
    text = f"  Endpoint: {status['socket']}\n"
    if not status["reachable"]:
        return text + f"  Error: {status['error']}\n"
    text += f"  PID: {status['pid']}\n"
    text += f"  Operations: {status['operations']}\n"
    return text


def _section(title: str, collect: Any, logging_output: bool = True) -> None:
    """A section as upstream prints it: what is logged while the section is collected comes under
    ``Logging output:``, then what was found under ``Detected:``."""
    print(SECTION_SEPARATOR)
    print(f"## {title}\n")
    if logging_output:
        print("Logging output:")
        print("\nDetected:\n" + collect())
    else:
        print(collect())


def show_env() -> None:
    """Print what this environment offers: versions, GPUs, CPUs, SoC, the daemon."""
    _section("Package availability and versions", _packages)
    _section("Device availability", _gpus)
    _section("CPU availability", _cpus)
    _section("SoC availability", _soc)
    _section("Zeusd daemon", _daemon, logging_output=False)
    print(SECTION_SEPARATOR)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="  [%(asctime)s] [%(name)s:%(lineno)d] %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    show_env()
