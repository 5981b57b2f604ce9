"""What produced a result (#23): the ``provenance`` of ``summary.json``, through the real ``zeus run``
and ``zeus report``; and the unit-suffixed columns next to the contract's own."""

from __future__ import annotations

import csv
import json
import os
import platform
import socket
import subprocess
import sys
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

from zeus_core import logs
from zeus_core.engine.provenance import python_info

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"


def zeus(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != logs.ENV}
    return subprocess.run([sys.executable, "-m", "zeus_core.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_summary_says_what_produced_it_and_columns_say_their_units(tmp_path):
    store = f'job.store="{tmp_path / "store.sqlite"}"'
    r = zeus("-q", "run", str(JOB), "--set", "job.recurrences=2", "--set", store, "--output", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    p = summary["provenance"]
    assert list(summary)[-1] == "provenance"  # after every result
    assert list(p) == ["command", "versions", "python", "os", "host", "devices", "started", "ended", "outputs"]
    assert p["outputs"] == sorted(f.name for f in (tmp_path / "out").iterdir())  # the trace workload's plots too
    assert p["command"] == "zeus run"
    assert list(p["versions"])[0] == "zeus-core" and p["versions"]["zeus-core"] == version("zeus-core")
    for dist in ("zeus-plugins-trace", "zeus-plugins-mab"):  # the job's plugins, and every other registered one
        assert p["versions"][dist] == version(dist)
    assert p["python"] == python_info() and p["python"]["version"] == platform.python_version()
    assert p["os"] == {"system": platform.system(), "release": platform.release(), "machine": platform.machine()}
    assert p["host"] == socket.gethostname()
    assert p["devices"] == {
        "plugin": "trace",
        "options": {"gpu": "v100"},
        "names": ["gpu0"],
        "models": {"gpu0": "v100 (replayed trace)"},
        "drivers": {},
    }
    started, ended = datetime.fromisoformat(p["started"]), datetime.fromisoformat(p["ended"])
    assert started.utcoffset().total_seconds() == 0 and started <= ended
    with open(tmp_path / "out" / "recurrences.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "recurrence",
        "try",
        "batch_size",
        "power_limit",
        "epochs",
        "time_s",
        "energy_j",
        "cost",
        "reached",
        "power_limit_w",
        "energy_method",
        "energy_error_j",
    ]
    assert len(rows) == 2 and all(row["power_limit_w"] == row["power_limit"] and float(row["power_limit_w"]) > 0 for row in rows)

    report = zeus("-q", "report", str(JOB), "--set", store, "--output", str(tmp_path / "rep"))
    assert report.returncode == 0 and (report.stdout, report.stderr) == ("", "")
    again = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert again["provenance"]["command"] == "zeus report" and again["provenance"]["started"] >= p["ended"]
    # the same job so far; what each command ran differs (the report ran nothing)
    assert again["this_run"] is None and summary["this_run"]["recurrences"] == 2
    assert {k: v for k, v in again.items() if k not in ("provenance", "this_run")} == {
        k: v for k, v in summary.items() if k not in ("provenance", "this_run")
    }
    assert (tmp_path / "rep" / "recurrences.csv").read_text() == (tmp_path / "out" / "recurrences.csv").read_text()
