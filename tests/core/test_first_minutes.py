"""The small things a newcomer meets first (issue 38): whole tables in a pipe, a --dry-run that says what
unset defaults stand for, every example's store in ./.zeus/, a plugin table that pairs nothing it should not,
no negative zero in summary.json, and a skipped test that says why under -q."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from terminal import in_terminal

REPO = Path(__file__).resolve().parents[2]
CIFAR = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"


def _zeus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("ZEUS_LOG_LEVEL", None)
    return subprocess.run([sys.executable, "-m", "zeus_core.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def _rows(out: str) -> dict[str, list[str]]:
    """The cells of a rich table's rows, by their first cell."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def test_the_closing_table_is_whole_in_a_pipe_and_shows_the_latest_rows_on_a_terminal(tmp_path):
    r = _zeus("run", str(CIFAR), "--set", "job.recurrences=30", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = _rows(r.stdout)
    assert [str(n) for n in range(1, 31)] == [k for k in rows if k.isdigit()]  # every recurrence, none folded
    assert "earlier" not in r.stdout

    live = in_terminal(["run", str(CIFAR), "--fresh", "--set", "job.recurrences=30"], tmp_path)
    assert "... 5 earlier" in live  # a terminal keeps the latest 25
    assert [k for k in _rows(live) if k.isdigit()] == [str(n) for n in range(6, 31)]


def test_dry_run_says_what_an_unset_default_stands_for(tmp_path):
    r = _zeus("run", str(CIFAR), "--dry-run", "--set", "job.eta_knob=0.25", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = _rows(r.stdout)
    assert rows["$.job.store"][0] == "(unset: .zeus/<job name>.sqlite under the current folder)"
    assert rows["$.workload.default_batch_size"][0] == "(unset: the paper's for the workload)"
    assert rows["$.batch_size.eta_knob"][0] == "0.25 (unset: the same as job.eta_knob)"  # the job's value, resolved
    assert rows["$.power.eta_knob"][0] == "0.25 (unset: the same as job.eta_knob)"
    assert rows["$.batch_size.seed"][0] == "1 (unset: the same as job.seed)"
    assert rows["$.batch_size.horizon"][0] == "(unset: 2 x batch sizes x power limits)"
    assert "store: .zeus/zeus-cifar100.sqlite" in r.stdout
    assert not any(cells[0] in ("''", "0", "None") and key.endswith(("store", "default_batch_size")) for key, cells in rows.items())

    r = _zeus("run", str(CIFAR), "--dry-run", "--set", "workload.default_batch_size=256", "--set", "job.store='s.sqlite'", cwd=tmp_path)
    rows = _rows(r.stdout)
    assert rows["$.workload.default_batch_size"] == ["256", "--set"] and rows["$.job.store"] == ["'s.sqlite'", "--set"]  # set: as it is


def test_every_example_keeps_its_store_in_the_current_folders_zeus():
    """A job that sets no job.store keeps it in ./.zeus/<name>.sqlite; an example that set one relative to
    its job file put it beside the file instead."""
    examples = sorted((REPO / "examples").rglob("*.toml"))
    assert len(examples) > 10
    for path in examples:
        job = tomllib.loads(path.read_text()).get("job", {})
        assert "store" not in job, f"{path.relative_to(REPO)} sets job.store: its store would not be in ./.zeus/"


def test_the_plugin_table_keeps_each_plugins_hooks_on_lines_of_their_own(tmp_path):
    r = _zeus("plugins", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cells = [line.split("│")[4].strip() for line in r.stdout.splitlines() if line.count("│") == 5]
    hooks = [c for c in cells if c.startswith("hooks: ")]
    blocks = [line for line in r.stdout.splitlines() if line.startswith("│") and line.split("│")[1].strip()]
    assert len(hooks) == len(blocks) > 5  # one "hooks:" line a plugin
    assert not [c for c in cells if c.startswith("zeus_") or c.startswith("zeus_register")]  # no hook name alone on a line
    mab = r.stdout[r.stdout.index("│ mab ") :].split("├")[0]
    assert "batch_size_policy: mab" in mab and "hooks: zeus_register_batch_size_policies, zeus_register_power_policies" in mab
    assert "├" in r.stdout  # a rule between plugins


def test_summary_json_has_no_negative_zero_and_batch_sizes_never_tried_are_null(tmp_path):
    r = _zeus("run", str(CIFAR), "--set", "job.recurrences=6", "--output", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "out" / "summary.json").read_text()
    assert not re.search(r"-0\.0(?![0-9])", text)
    summary = json.loads(text)
    costs = summary["batch_size"]["posterior_mean_cost"]
    tried = {str(row.split(",")[2]) for row in (tmp_path / "out" / "recurrences.csv").read_text().splitlines()[1:]}
    assert set(costs) == {"8", "16", "32", "64", "128", "256", "512", "1024", "2048", "4096"}  # the key and every arm kept
    assert {b for b, c in costs.items() if c is not None} == tried
    assert all(c > 0 for c in costs.values() if c is not None)


def test_a_skipped_test_says_why_under_q_and_a_run_without_one_stays_quiet(tmp_path):
    """The project's pytest options (pyproject.toml) show a skip's reason under -q, and nothing more without one."""
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n\n\ndef test_ok():\n    pass\n\n\ndef test_skipped():\n    pytest.skip('needs the moon')\n"
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), "-p", "no:randomly"]
    r = subprocess.run([*cmd, str(tmp_path / "test_skips.py")], capture_output=True, text=True, timeout=120)
    assert "SKIPPED [1]" in r.stdout and "needs the moon" in r.stdout, r.stdout
    r = subprocess.run([*cmd, f"{tmp_path / 'test_skips.py'}::test_ok"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SKIPPED" not in r.stdout and "short test summary" not in r.stdout, r.stdout
