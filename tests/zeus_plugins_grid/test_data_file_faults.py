"""Grid series and values that lie (issue 33): a carbon CSV with decimal commas (``0,35`` was read as
0 gCO2/kWh), rows wider than the header (accepted silently) or narrower, bytes that are not UTF-8,
values whose arithmetic overflows (``carbon_intensity = 1e308`` or a CSV of 1.7e308 passed
validation, then the run failed mid-way) and files past their size limit: each refused by
`zeus validate` at its ``[grid]`` key, naming the file, the line and the fix (exit 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_core.engine.registry import get_registry
from zeus_core.engine.signals import GridError, open_grid
from zeus_core.job import GridOptions
from zeus_plugins_grid.series import CSV_LIMIT_ENV

REPO = Path(__file__).resolve().parents[2]
HEADER = "Time,Carbon Intensity\n"


def problems(tmp_path: Path, **table) -> str:
    with pytest.raises(GridError) as e:
        open_grid(GridOptions(**table), get_registry(), tmp_path)
    return " ".join(str(e.value).split())


def write(tmp_path: Path, data: str | bytes, name: str = "ci.csv") -> str:
    if isinstance(data, bytes):
        (tmp_path / name).write_bytes(data)
    else:
        (tmp_path / name).write_text(data)
    return name


@pytest.mark.parametrize(
    "rows, words",
    [
        (
            "2020-06-01 00:00,0,35\n",
            [
                "ci.csv:2: the row has 3 cells but the header names 2 columns",
                "'0,35' looks like a number written with a decimal comma: write '0.35'",
            ],
        ),
        ('2020-06-01 00:00,"0,35"\n', ["ci.csv:2: carbon_intensity: '0,35' is written with a decimal comma; write '0.35'"]),
        ("2020-06-01 00:00,300,DE\n", ["ci.csv:2: the row has 3 cells", "cell 3 ('DE') is extra"]),
        ("2020-06-01 00:00,300\n2020-06-01 00:30\n", ["ci.csv:3: column 'Carbon Intensity' is missing"]),
        ("2020-06-01 00:00,1.7e308\n", ["ci.csv:2: carbon_intensity 1.7e+308 gCO2eq/kWh is beyond 10,000 gCO2eq/kWh"]),
        ("2020-06-01 00:00,1e400\n", ["ci.csv:2: carbon_intensity: '1e400' is infinite"]),
    ],
    ids=["decimal-comma", "quoted-decimal-comma", "extra-cell", "missing-cell", "1.7e308", "1e400"],
)
def test_bad_rows_of_a_carbon_csv_name_the_line_and_the_fix(tmp_path, rows, words):
    msg = problems(tmp_path, carbon_intensity=write(tmp_path, HEADER + rows), timezone="UTC")
    assert "[grid] carbon_intensity:" in msg
    for w in words:
        assert w in msg, msg


def test_a_price_past_its_bound_and_a_negative_price_within_it(tmp_path):
    name = write(tmp_path, "time,price\n2020-06-01 00:00,-0.02\n2020-06-01 01:00,2e6\n", "p.csv")
    msg = problems(tmp_path, price=name, currency="EUR", timezone="UTC")
    assert "p.csv:3: price 2e+06 per kWh is beyond 1,000,000 per kWh" in msg and "per kWh, not per MWh" in msg


def test_bytes_that_are_not_utf8_name_the_line_and_column(tmp_path):
    name = write(tmp_path, (HEADER + "2020-06-01 00:00,300\n2020-06-01 00:30,2\xb75\n").encode("latin-1"))
    msg = problems(tmp_path, carbon_intensity=name, timezone="UTC")
    assert "ci.csv:3: byte 0xb7 at column 19 is not UTF-8; a carbon intensity CSV is UTF-8 text" in msg


def test_a_csv_past_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch, shared_data):
    de = str(shared_data / "carbon_intensity" / "de_2020.csv")
    monkeypatch.setenv(CSV_LIMIT_ENV, "1")
    msg = problems(tmp_path, carbon_intensity=de, timezone="UTC")
    assert "de_2020.csv: the file is 1,428,284 bytes, more than the 1,048,576 bytes (1 MiB)" in msg
    assert "ZEUS_MAX_GRID_MB=<MiB>" in msg
    monkeypatch.delenv(CSV_LIMIT_ENV)
    assert len(open_grid(GridOptions(carbon_intensity=de, timezone="UTC"), get_registry(), tmp_path).carbon) == 37147


def test_numbers_in_the_grid_table_past_their_bounds():
    for table, words in (
        ({"carbon_intensity": 1e308}, "carbon_intensity: 1e+308 gCO2eq/kWh is beyond 10,000 gCO2eq/kWh"),
        ({"price": 1e308, "currency": "EUR"}, "price: 1e+308 per kWh is beyond 1,000,000 per kWh"),
        ({"carbon_intensity": 300, "timeout_s": 1e308}, "timeout_s must be between 0 and 3600"),
    ):
        with pytest.raises(ValueError, match=re.escape(words)):
            GridOptions(**table)
    assert GridOptions(carbon_intensity=10_000).carbon_intensity == 10_000


def test_a_constant_source_past_its_bound(tmp_path):
    msg = problems(tmp_path, carbon_intensity="constant:1e308")
    assert "constant:1e308: 1e+308 gCO2eq/kWh is beyond 10,000 gCO2eq/kWh" in msg


def _zeus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )


JOB = """
[job]
name = "ci"
recurrences = 2
target_metric = 0.6

[workload]
plugin = "trace"

[device]
plugin = "trace"

[batch_size]
plugin = "mab"

[grid]
timezone = "UTC"
start = "2020-06-01 00:00"
"""


@pytest.mark.parametrize(
    "value, csv, words",
    [
        ("1e308", None, "1e+308 gCO2eq/kWh is beyond 10,000 gCO2eq/kWh"),
        ('"ci.csv"', "2020-06-01 00:00,1.7e308\n", "ci.csv:2: carbon_intensity 1.7e+308 gCO2eq/kWh is beyond 10,000"),
        ('"ci.csv"', "2020-06-01 00:00,0,35\n", "'0,35' looks like a number written with a decimal comma"),
    ],
    ids=["constant-1e308", "csv-1.7e308", "csv-decimal-comma"],
)
def test_zeus_validate_and_run_refuse_before_anything_runs(tmp_path, value, csv, words):
    if csv is not None:
        write(tmp_path, HEADER + csv)
    job = tmp_path / "job.toml"
    job.write_text(JOB + f"carbon_intensity = {value}\n")
    for command in (["validate", str(job)], ["run", str(job), "--output", str(tmp_path / "out")]):
        r = _zeus(*command, cwd=tmp_path)
        out = " ".join(r.stderr.split())
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert words in out and "@ $.grid.carbon_intensity" in out
    assert not (tmp_path / "out").exists() and not (tmp_path / ".zeus").exists()  # nothing ran


def test_a_live_answer_past_its_bound_is_no_answer(tmp_path, monkeypatch):
    """Electricity Maps answering 1e308 is treated as a service that did not answer (the last value holds)."""
    from zeus_core.grid import SourceRequest
    from zeus_plugins_grid.electricitymaps import ElectricityMaps, ServiceError

    em = ElectricityMaps("DE", SourceRequest(quantity="carbon_intensity", job_dir=tmp_path), "token", "http://127.0.0.1:9")
    answers = {
        "/v3/carbon-intensity/history": {"history": [{"datetime": "2020-06-01T00:00:00Z", "carbonIntensity": 300}]},
        "/v3/carbon-intensity/latest": {"datetime": "2020-06-01T01:00:00Z", "carbonIntensity": 1e308},
    }
    monkeypatch.setattr(em, "_get", lambda path: answers[path])
    with pytest.raises(ServiceError, match=re.escape("an answer of 1e+308 gCO2eq/kWh is beyond 10,000 gCO2eq/kWh")):
        em._fetch()
    assert em.known == {}


def test_a_50_mb_carbon_csv_is_refused_at_once_without_reading_it(tmp_path):
    """It used to validate in 18 s at 860 MB of memory; now its size is refused before a byte is read."""
    import time

    with open(tmp_path / "big.csv", "wb") as f:
        f.write(HEADER.encode())
        f.truncate(50 * 10**6)  # sparse: 50 MB that take no disk
    started = time.monotonic()
    msg = problems(tmp_path, carbon_intensity="big.csv", timezone="UTC")
    assert time.monotonic() - started < 5
    assert "big.csv: the file is 50,000,000 bytes, more than the 16,777,216 bytes (16 MiB) a carbon intensity CSV may be" in msg


@pytest.mark.parametrize(
    "time, what",
    [("1e300", "after 2200"), ("9999-12-31T23:00:00Z", "after 2200"), ("nan", "not a finite number"), ("-1e12", "before 1900")],
)
def test_times_no_date_can_show_are_refused_naming_the_row(tmp_path, time, what):
    """A Unix time of 1e300 was a traceback in zeus validate (OverflowError while naming it)."""
    name = write(tmp_path, f"time,carbon_intensity\n{time},300\n")
    msg = problems(tmp_path, carbon_intensity=name, start="2020-06-01T00:00:00Z")
    assert f"ci.csv:2: time '{time}' is {what}; a series' times are between 1900 and 2200" in msg


def test_show_time_names_a_time_past_any_date():
    from zeus_core.grid import show_time

    assert show_time(1e300) == "1e+300 s (Unix time)" and show_time(0.0) == "1970-01-01T00:00:00Z"
