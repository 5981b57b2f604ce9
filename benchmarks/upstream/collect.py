"""A pytest plugin writing each test's outcome (and the first line of why it failed) as JSON lines to ``$ZEUS_UPSTREAM_REPORT``."""

from __future__ import annotations

import json
import os

import pytest


def _why(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    lines = [line for line in str(report.longrepr).splitlines() if line.startswith("E ")]
    text = crash.message if crash is not None else (lines[-1][1:] if lines else str(report.longrepr))
    return " ".join(text.split())[:300]


@pytest.hookimpl
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("ZEUS_UPSTREAM_REPORT")
    if not path or (report.when != "call" and report.passed) or (report.when == "teardown" and not report.failed):
        return
    outcome = "skipped" if report.skipped else "failed" if report.failed else "passed"
    with open(path, "a") as f:
        f.write(json.dumps({"id": report.nodeid, "outcome": outcome, "why": _why(report) if report.failed else ""}) + "\n")


@pytest.hookimpl
def pytest_collectreport(report: pytest.CollectReport) -> None:
    path = os.environ.get("ZEUS_UPSTREAM_REPORT")
    if path and report.failed:
        with open(path, "a") as f:
            f.write(json.dumps({"id": report.nodeid + "::<collection>", "outcome": "failed", "why": _why(report)}) + "\n")
