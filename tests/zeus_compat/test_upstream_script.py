"""``benchmarks/upstream_tests.py``: what it rewrites in upstream's tests, and its answer when the index is out of reach."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load_script(name: str):
    """The benchmark script as a module, loaded from its file: benchmarks/ is not put on sys.path,
    where its scripts would shadow the test support modules of the same name (serve_faults)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


upstream_tests = _load_script("upstream_tests")


def test_rewrite_swaps_only_the_private_nvml_mock(tmp_path, monkeypatch):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(
        '"""doc"""\nfrom __future__ import annotations\n\nimport pynvml\n\n'
        'def f(mocker):\n    m = mocker.patch("zeus.device.gpu.nvidia.pynvml", autospec=True)\n'
        '    other = mocker.patch("zeus.monitor.energy.time")\n'
    )
    (tests / "test_b.py").write_text("import os\n")
    monkeypatch.setattr(upstream_tests, "PROFILES", tmp_path / "absent")
    done = upstream_tests.rewrite(tmp_path)
    a = (tests / "test_a.py").read_text()
    assert a.splitlines()[1:5] == ["from __future__ import annotations", "", "from upstream.simulated import simulated_pynvml",
                                   "import pynvml"]
    assert "m = simulated_pynvml(mocker)" in a and 'mocker.patch("zeus.monitor.energy.time")' in a
    assert (tests / "test_b.py").read_text() == "import os\n"
    assert done == ["tests/test_a.py: 1 mock(s) of zeus.device.gpu.nvidia.pynvml -> simulated driver"]
    compile(a, "test_a.py", "exec")


def test_offline_is_a_clear_error(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "PIP_NO_INDEX": "1", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, str(BENCH / "upstream_tests.py")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "cannot download zeus==0.16.0's sdist" in done.stderr and "--sdist" in done.stderr


@pytest.mark.parametrize("argv", [["--sdist", "/nonexistent/zeus.tar.gz"]])
def test_a_missing_sdist_is_bad_input(argv, capsys):
    assert upstream_tests.main(argv) == 2
    assert "no such file" in capsys.readouterr().err
