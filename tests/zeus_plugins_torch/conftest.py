"""Fixtures for the torch workload's tests: the test device plugin and a registry with it."""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture
def torchtest(monkeypatch):
    """The ``wall`` test device plugin, importable by name here and in spawned ranks."""
    monkeypatch.syspath_prepend(str(HERE))
    return importlib.import_module("zeus_torchtest_plugin")


@pytest.fixture
def registry(torchtest):
    from zeus_core.engine.registry import load as load_plugins

    return load_plugins(extra_plugins=[("torchtest", torchtest)])


@pytest.fixture
def module_name():
    """A fresh module name for a training file written by a test (imports are cached by name)."""
    return f"train_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def write_trainer(module_name):
    """Copy ``train_template.py`` next to a job as a fresh module; returns the module's name."""

    def write(folder: Path) -> str:
        (folder / f"{module_name}.py").write_text((HERE / "train_template.py").read_text())
        return module_name

    return write
