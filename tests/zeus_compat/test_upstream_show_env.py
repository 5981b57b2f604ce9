"""``zeus.show_env`` (``show_env()`` and ``python -m zeus.show_env``): upstream's sections, filled from the engine."""

from __future__ import annotations

import os
import subprocess
import sys

from zeus.show_env import show_env

SECTIONS = [
    "## Package availability and versions",
    "## Device availability",
    "## CPU availability",
    "## SoC availability",
    "## Zeusd daemon",
]


def test_show_env_prints_upstreams_sections_with_the_gpus(driver, capsys, monkeypatch):
    driver(gpus=2, name="NVIDIA H100 80GB HBM3")
    monkeypatch.delenv("ZEUS_DAEMON_SOCKET", raising=False)
    show_env()
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("## ")] == SECTIONS
    assert f"  Python version: {sys.version.split()[0]}" in out
    assert "  Zeus: 0.16.0" in out
    assert "  JAX: not available" in out  # not installed here
    assert "  CUDA_VISIBLE_DEVICES=[NOT SET]" in out
    assert "    GPU 0 -> GPU 0 (NVIDIA H100 80GB HBM3)" in out and "    GPU 1 -> GPU 1 (NVIDIA H100 80GB HBM3)" in out
    assert "  No SoC available." in out
    assert "  Not configured" in out


def test_visible_devices_map_physical_to_cuda_indices(driver, capsys, monkeypatch):
    driver(gpus=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    show_env()
    out = capsys.readouterr().out
    assert "  CUDA_VISIBLE_DEVICES=1" in out
    assert "    GPU 1 -> GPU 0 (NVIDIA A100-SXM4-40GB)" in out
    assert "-> GPU 1 " not in out


def test_no_gpu_library(driver, capsys, monkeypatch):
    monkeypatch.delenv("ZEUS_FAKE_NVML", raising=False)
    show_env()
    assert "  No GPUs available." in capsys.readouterr().out


def test_python_m_zeus_show_env(driver):
    driver(gpus=1)
    result = subprocess.run(
        [sys.executable, "-m", "zeus.show_env"], capture_output=True, text=True, timeout=180, env=dict(os.environ, COLUMNS="60")
    )
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("## ")] == SECTIONS
    assert "-" * 60 in result.stdout and "    GPU 0 -> GPU 0 (NVIDIA A100-SXM4-40GB)" in result.stdout
