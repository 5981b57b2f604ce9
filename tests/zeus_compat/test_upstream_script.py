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
    assert a.splitlines()[1:5] == [
        "from __future__ import annotations",
        "",
        "from upstream.simulated import simulated_pynvml",
        "import pynvml",
    ]
    assert "m = simulated_pynvml(mocker)" in a and 'mocker.patch("zeus.monitor.energy.time")' in a
    assert (tests / "test_b.py").read_text() == "import os\n"
    assert done == ["tests/test_a.py: 1 mock(s) of zeus.device.gpu.nvidia.pynvml -> simulated driver"]
    compile(a, "test_a.py", "exec")


def test_offline_is_a_clear_error(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "PIP_NO_INDEX": "1", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, str(BENCH / "upstream_tests.py")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "cannot download zeus==0.16.0's sdist" in done.stderr and "--upstream" in done.stderr


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
    first, second = (json.loads((monitor / "carbon_history_files" / f"carbon_history_file{i}").read_text())["history"] for i in (1, 2))
    hours = [h["datetime"] for h in first + second]
    assert hours[0] == "2024-11-30T07:00:00.000Z" and hours[-1] == "2024-12-02T06:00:00.000Z"
    assert len(first) == len(second) == 24 and len(set(hours)) == 48  # one answer per day asked, no hour twice
    assert all(isinstance(h["carbonIntensity"], int) and 0 < h["carbonIntensity"] < 1000 for h in first + second)
    rates = json.loads((monitor / "price_output_files" / "ann_arbor.json").read_text())["items"]
    assert rates[0]["energyratestructure"] == [[{"rate": 0.1056, "adj": 0.029681}]]  # the rate upstream's test asserts
    assert json.loads((monitor / "price_output_files" / "invalid.json").read_text()) == {"items": []}


def test_upstreams_recorded_service_answers_are_used_as_they_are(tmp_path):
    monitor = tmp_path / "tests" / "monitor"
    (monitor / "carbon_history_files").mkdir(parents=True)
    (monitor / "test_carbon.py").write_text("")
    (monitor / "carbon_history_files" / "carbon_history_file1").write_text("upstream's own")
    assert upstream_tests.service_answers(monitor) == [
        "tests/monitor: upstream's recorded carbon and price answers used as they are (nothing written)"
    ]
    assert (monitor / "carbon_history_files" / "carbon_history_file1").read_text() == "upstream's own"
    assert not (monitor / "price_output_files").exists()


def _tree(root):
    (root / "tests" / "sub").mkdir(parents=True)
    (root / "zeus" / "utils").mkdir(parents=True)
    (root / "zeus" / "utils" / "testing.py").write_text("JUDGE = 1\n")
    (root / "zeus" / "monitor.py").write_text("raise SystemExit('upstream code must not be copied')\n")
    (root / "tests" / "test_ok.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('x', [1, 2])\ndef test_a(x):\n    assert x\n\ndef test_b():\n    assert 0, 'b fails'\n"
    )
    (root / "tests" / "sub" / "test_broken.py").write_text("from zeus.no_such_module import Nothing\n")


def test_a_tree_or_git_directory_is_read_and_one_collection_error_hides_nothing(tmp_path):
    src = tmp_path / "src"
    _tree(src)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(src)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    for i, source in enumerate((src, src / ".git")):
        into = tmp_path / f"copy{i}"
        into.mkdir()
        root, what = upstream_tests.obtain(str(source), into)
        assert (root / "judge" / "testing.py").read_text() == "JUDGE = 1\n" and not (root / "zeus").exists()
        assert sorted(p.name for p in (root / "tests").rglob("test_*.py")) == ["test_broken.py", "test_ok.py"]
        assert ("git tree" in what) == (source.name == ".git")
    rows = {f: upstream_tests.tally(f, upstream_tests.run(root, f, None, 120)) for f in ("tests/test_ok.py", "tests/sub/test_broken.py")}
    ok, broken = rows["tests/test_ok.py"], rows["tests/sub/test_broken.py"]
    assert (ok["passed"], ok["failed"]) == (2, 1)  # run although the other file cannot be collected
    assert ok["functions"] == {"tests/test_ok.py::test_a", "tests/test_ok.py::test_b"}
    assert ok["functions passed"] == {"tests/test_ok.py::test_a"}
    assert ok["failures"] == [("tests/test_ok.py::test_b", "AssertionError: b fails assert 0")]
    assert broken["failed"] == 1 and "no_such_module" in broken["failures"][0][1]


def test_non_passing_cases_of_a_labelled_file_are_counted_under_its_label(monkeypatch):
    monkeypatch.setitem(upstream_tests.LABELS, "tests/t.py", (upstream_tests.NOT_IMPLEMENTED, "why"))
    monkeypatch.setattr(upstream_tests, "DIFFERENCES", [(r"::test_d\b", "documented")])
    row = upstream_tests.tally(
        "tests/t.py",
        {"tests/t.py::test_a[1]": ("passed", ""), "tests/t.py::test_a[2]": ("failed", "x"), "tests/t.py::test_d": ("failed", "y")},
    )
    assert (row["passed"], row["failed"], row[upstream_tests.NOT_IMPLEMENTED], row[upstream_tests.DIFFERENCE]) == (1, 0, 1, 1)
    assert row["functions passed"] == set() and len(row["functions"]) == 2


def test_no_file_is_labelled_that_passes_in_full_upstream():
    assert "tests/utils/test_multiprocessing.py" not in upstream_tests.LABELS
    assert all(label in upstream_tests.KINDS and why for label, why in upstream_tests.LABELS.values())


def test_the_batch_size_conftest_keeps_upstreams_helpers_and_serves_with_zeus_serve():
    import ast
    import importlib

    sys.path.insert(0, str(BENCH))
    try:
        serve = importlib.import_module("upstream.serve")
    finally:
        sys.path.remove(str(BENCH))
    upstream = (
        '"""doc"""\nfrom __future__ import annotations\n\nimport os\nimport pytest\n'
        "from zeus.optimizer.batch_size.server.router import app\n\n\nclass Helpers:\n    X = 1\n\n\n"
        '@pytest.fixture(scope="module")\ndef helpers():\n    return Helpers\n\n\ndef init(db_url):\n    return app\n\n\n'
        '@pytest.fixture\ndef client():\n    yield app\n\n\n@pytest.fixture(scope="module", autouse=True)\n'
        "def session_data(tmp_path_factory, worker_id):\n    return\n"
    )
    text = serve.conftest_for(upstream)
    names = {n.name for n in ast.parse(text).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert names == {"Helpers", "helpers"} and "batch_size.server" not in text
    assert text.startswith("from __future__ import annotations") and '@pytest.fixture(scope="module")\ndef helpers' in text
    assert "from upstream.serve import client, zeus_serve" in text
