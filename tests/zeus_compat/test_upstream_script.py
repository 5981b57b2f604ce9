"""``benchmarks/upstream_tests.py``: what it rewrites in upstream's tests, and its answer when the index is out of reach."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from benchmark_scripts import BENCHMARKS as BENCH
from benchmark_scripts import load_benchmark

upstream_tests = load_benchmark("upstream_tests")


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


def test_the_service_answers_the_carbon_and_price_tests_read_are_written_in_the_services_formats(tmp_path):
    monitor = tmp_path / "tests" / "monitor"
    monitor.mkdir(parents=True)
    (monitor / "test_carbon.py").write_text("")
    done = upstream_tests.service_answers(monitor)
    assert len(done) == 2
    first, second = (json.loads((monitor / "carbon_history_files" / f"carbon_history_file{i}").read_text())["history"]
                     for i in (1, 2))
    hours = [h["datetime"] for h in first + second]
    assert hours[0] == "2024-11-30T07:00:00.000Z" and hours[-1] == "2024-12-02T06:00:00.000Z"
    assert len(first) == len(second) == 24 and len(set(hours)) == 48  # one answer per day asked, no hour twice
    assert all(isinstance(h["carbonIntensity"], int) and 0 < h["carbonIntensity"] < 1000 for h in first + second)
    rates = json.loads((monitor / "price_output_files" / "ann_arbor.json").read_text())["items"]
    assert rates[0]["energyratestructure"] == [[{"rate": 0.1056, "adj": 0.029681}]]  # the rate upstream's test asserts
    assert json.loads((monitor / "price_output_files" / "invalid.json").read_text()) == {"items": []}
