"""A rerun of a job says that it continues it, from where, and how to start over; summaries and
outputs tell this run's recurrences from the job's so far."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from zeus_test_helpers import TOY_JOB, run_cli, toy_registry, write_job


@pytest.fixture
def reg(toy_plugin):
    return toy_registry(toy_plugin)


def _said(output: str) -> str:
    return " ".join(output.split())


def test_a_rerun_says_it_continues_and_the_summary_tells_this_run_from_the_job(reg, tmp_path):
    job = write_job(tmp_path / "job.toml", TOY_JOB)
    r = run_cli(reg, "run", str(job), "--set", "job.recurrences=2", "--output", str(tmp_path / "a"))
    assert r.exit_code == 0, r.output
    assert "continuing job" not in r.output  # a new job: nothing to continue
    first = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert first["this_run"] == {"recurrences": 2, "first_recurrence": 1, "last_recurrence": 2, "tries": 2}
    since = datetime.fromisoformat(first["covers"]["since"])
    assert abs((datetime.now(since.tzinfo) - since).total_seconds()) < 600

    r = run_cli(reg, "run", str(job), "--set", "job.recurrences=3", "--output", str(tmp_path / "b"))
    assert r.exit_code == 0, r.output
    said = _said(r.output)
    assert "continuing job 'toyjob': its store .zeus/toyjob.sqlite holds recurrences 1-2 since" in said
    assert "this run adds 3 more (from 3 on); `zeus run --fresh` starts the job over" in said
    assert said.index("continuing job") < said.index("recurrence 3")  # said before it starts
    assert "this run: recurrences 3-5, 3 tries; the job so far: 5 recurrences since" in said
    second = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert second["recurrences"] == 5 and second["covers"]["first_recurrence"] == 1
    assert second["covers"]["last_recurrence"] == 5 and second["covers"]["since"] == first["covers"]["since"]
    assert second["this_run"] == {"recurrences": 3, "first_recurrence": 3, "last_recurrence": 5, "tries": 3}

    r = run_cli(reg, "report", str(job), "--output", str(tmp_path / "c"))
    assert r.exit_code == 0, r.output
    assert "this command ran nothing; the job so far: 5 recurrences since" in _said(r.output)
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["this_run"] is None

    r = run_cli(reg, "run", str(job), "--fresh", "--set", "job.recurrences=1")
    assert r.exit_code == 0 and "continuing job" not in r.output  # --fresh starts over: nothing continues
    assert "this run: recurrence 1, 1 try; the job so far: 1 recurrence since" in _said(r.output)
