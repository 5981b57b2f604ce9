"""What each ``zeus`` command imports at start: what it does not need stays out (``benchmarks/startup.py``
measures the time; this pins the modules, which timing on a busy machine cannot)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JOB = str(REPO / "examples" / "zeus_nsdi23" / "cifar100.toml")

CODE = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.__stderr__))
from zeus_core.cli.main import main
main(sys.argv[1:])
"""

#: Loaded by a command only when it runs: the job file's validation, the other commands' modules,
#: the daemon's configuration, the store, a device's code, the in-loop API.
NOT_FOR_PLUGINS = {
    "zeus_core.engine.validation",
    "zeus_core.engine.assembly",
    "zeus_core.engine.history",
    "zeus_core.engine.stores.sqlite",
    "zeus_core.cli.env",
    "zeus_core.cli.monitor",
    "zeus_core.cli.store",
    "zeus_core.cli.daemon",
    "zeus_core.daemon.config",
    "zeus_core.devicekit.groups",
    "zeus_core.windows",
    "zeus_core.allocation",
    "zeus_core.grid",
    "zeus_core.inloop.monitor",
    "zeus_plugins_cpu.rapl",
    "zeus_plugins_cpu.estimate",
    "zeus_plugins_trace.sweep",
    "zeus_plugins_trace.commands",
    "zeus_plugins_serve.command",
    "cattrs",
}
#: Plugins' options classes load with the first job that uses the part.
OPTIONS = {
    "zeus_plugins_mab.options",
    "zeus_plugins_trace.options",
    "zeus_plugins_hetero.options",
    "zeus_plugins_torch.options",
    "zeus_plugins_cpu.options",
    "zeus_plugins_nvml.options",
}
#: ``zeus daemon``'s services, which zeus plugins lists and the job commands never need.
SERVICES = {"zeus_plugins_nvml.service", "zeus_plugins_amdsmi.service", "zeus_plugins_cpu.service"}


def _modules(*args: str, cwd: Path = REPO) -> set[str]:
    r = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    return set(json.loads(r.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [("plugins",), ("plugins", "--json")])
def test_zeus_plugins_loads_no_job_validation_no_other_command_and_no_device_code(args):
    loaded = _modules(*args)
    assert "zeus_core.engine.registry" in loaded and "zeus_plugins_mab.plugin" in loaded
    assert not loaded & (NOT_FOR_PLUGINS | OPTIONS), sorted(loaded & (NOT_FOR_PLUGINS | OPTIONS))


def test_zeus_validate_loads_validation_but_no_other_command():
    loaded = _modules("validate", JOB)
    assert "zeus_core.engine.validation" in loaded
    assert {"zeus_plugins_mab.options", "zeus_plugins_trace.options"} <= loaded  # the job's parts' options only
    assert not loaded & (
        NOT_FOR_PLUGINS - {"zeus_core.engine.validation", "zeus_core.engine.stores.sqlite", "cattrs"}
        | SERVICES
        | OPTIONS - {"zeus_plugins_mab.options", "zeus_plugins_trace.options"}
    )


def test_the_settings_journal_imports_nothing_of_the_engine():
    code = "import sys, zeus_core.journal; print([m for m in sys.modules if m.startswith('zeus_core.engine')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
