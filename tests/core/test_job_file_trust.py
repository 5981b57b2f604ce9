"""Issue 33, item 6: the README says plainly that a job file runs code and must be trusted like a script,
where job files are explained (its ``job.toml reference`` section, which the docs site's ``job-toml.md`` page is)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_the_job_file_reference_says_a_job_file_runs_code():
    section = _section((REPO / "README.md").read_text(), "job.toml reference")
    intro = section.split("\n### ", 1)[0]  # before the first table: read by anyone who opens the page
    flat = re.sub(r"\s+", " ", intro)
    assert "A job file runs code: trust it as you would a script." in flat
    for key in ("`workload.entry`", "`workload.python_path`", "`profiler.step`"):
        assert key in flat


def test_the_docs_site_page_of_job_files_is_that_section():
    pages = (REPO / "docs" / "gen_pages.py").read_text()
    assert '"job.toml reference": ("job-toml.md"' in pages
