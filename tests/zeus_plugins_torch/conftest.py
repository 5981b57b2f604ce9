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
    from zeus_core import registry as zreg

    return zreg.load(extra_plugins=[("torchtest", torchtest)])


@pytest.fixture
def module_name():
    """A fresh module name for a training file written by a test (imports are cached by name)."""
    return f"train_{uuid.uuid4().hex[:10]}"
