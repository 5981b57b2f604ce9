"""Perseus profiles that lie (issue 33): bad bytes (the message names the file), rows wider than the
header, decimal commas, times whose arithmetic overflows (1e300 s passed validation, then the run died
with OverflowError) and files past their size limit are refused by `zeus validate` (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_plugins_perseus.profile import PROFILE_LIMIT_ENV, ProfileError, read_profile

REPO = Path(__file__).resolve().parents[2]
HEADER = "stage,instruction,frequency,time,energy\n"


def write(tmp_path: Path, data: str | bytes, name: str = "p.csv") -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def test_bytes_that_are_not_utf8_name_the_file_line_and_column(tmp_path):
    path = write(tmp_path, (HEADER + "0,forward,1410,0.1,20\n0,backward\xa0,1410,0.1,20\n").encode("latin-1"))
    with pytest.raises(ProfileError, match=rf"{path}:3: byte 0xa0 at column 11 is not UTF-8; a Perseus profile CSV is UTF-8"):
        read_profile(path)


@pytest.mark.parametrize(
    "row, message",
    [
        ("0,forward,1410,0.1,20,7", r":3: the row has 6 cells but the header names 5 columns .*cell 6 \('7'\) is extra"),
        ("0,forward,1410,0.1,0,35", r":3: the row has 6 cells .*'0,35' looks like a number written with a decimal comma"),
        ('0,forward,1410,"0,1",20', r":3: column 'time': '0,1' is written with a decimal comma; write '0.1'"),
        ("0,forward,1410,0.1", r":3: column 'energy' is missing: the row has 4 of the header's 5 cells"),
        ("0,forward,1410,1e300,20", r":3: column 'time': 1e\+300 s is above 3600 s, the most one microbatch's time"),
        ("0,forward,1410,0.1,1.7e308", r":3: column 'energy': 1.7e\+308 J is above 1e\+08 J"),
        ("0,forward,1e300,0.1,20", r":3: column 'frequency': 1e\+300 MHz is above 100000 MHz"),
        ("99999999,forward,1410,0.1,20", r":3: column 'stage': 1e\+08 is above 10000"),
    ],
    ids=["extra-cell", "decimal-comma", "quoted-decimal-comma", "missing-cell", "time-1e300", "energy-1.7e308", "frequency-1e300", "stage"],
)
def test_wide_rows_decimal_commas_and_implausible_values_name_the_line(tmp_path, row, message):
    path = write(tmp_path, HEADER + "0,backward,1410,0.1,20\n" + row + "\n")
    with pytest.raises(ProfileError, match=rf"{path}{message}"):
        read_profile(path)


def test_a_profile_past_the_size_limit(tmp_path, monkeypatch, gpt3_a100):
    monkeypatch.setenv(PROFILE_LIMIT_ENV, "0.01")
    with pytest.raises(
        ProfileError,
        match=r"the file is 33,193 bytes, more than the 10,485 bytes .*"
        r"ZEUS_MAX_PERSEUS_PROFILE_MB=<MiB>",
    ):
        read_profile(gpt3_a100)
    monkeypatch.delenv(PROFILE_LIMIT_ENV)
    assert read_profile(gpt3_a100).stages == list(range(8))


def _zeus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )


def _job(tmp_path: Path, profile: Path) -> Path:
    src = (REPO / "examples" / "perseus" / "gpt3_a100" / "job.toml").read_text()
    job = tmp_path / "job.toml"
    job.write_text("\n".join(f'profile = "{profile}"' if line.strip().startswith("profile") else line for line in src.splitlines()) + "\n")
    return job


def test_zeus_validate_refuses_a_time_of_1e300_s_and_a_unit_the_planner_cannot_count_in(tmp_path, gpt3_a100):
    lines = gpt3_a100.read_text().splitlines()
    cells = lines[2].split(",")
    cells[HEADER.strip().split(",").index("time")] = "1e300"
    lines[2] = ",".join(cells)
    profile = write(tmp_path, "\n".join(lines) + "\n")
    r = _zeus("validate", str(_job(tmp_path, profile)), cwd=tmp_path)
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{profile}:3: column 'time': 1e+300 s is above 3600 s" in out and "@ $.frequency_plan.profile" in out
    r = _zeus("validate", str(_job(tmp_path, gpt3_a100)), "--set", "frequency_plan.unit_time_s=1e-300", cwd=tmp_path)
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "the planner counts at most 1e+09 units per instruction: raise unit_time_s to at least" in out
    assert "@ $.frequency_plan.unit_time_s" in out


def test_zeus_validate_names_the_file_of_bytes_that_are_not_utf8(tmp_path, gpt3_a100):
    profile = write(tmp_path, gpt3_a100.read_bytes() + b"7,forward,1410,0.1,2\xff\n")
    r = _zeus("validate", str(_job(tmp_path, profile)), cwd=tmp_path)
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{profile}:" in out and "is not UTF-8" in out and "@ $.frequency_plan.profile" in out


def test_option_values_whose_arithmetic_overflows_are_refused_naming_the_bound(tmp_path, gpt3_a100):
    """blocking_power_w = 1e308 broke the solver; unit_time_s = 1e300 ended the run with OverflowError."""
    r = _zeus(
        "validate",
        str(_job(tmp_path, gpt3_a100)),
        "--set",
        "frequency_plan.blocking_power_w=1e308",
        "--set",
        "frequency_plan.unit_time_s=1e300",
        cwd=tmp_path,
    )
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "blocking_power_w must be between 0.0 and 10000.0 inclusive" in out and "@ $.frequency_plan.blocking_power_w" in out
    assert "unit_time_s must be between 0.0 and 1.0 inclusive" in out and "@ $.frequency_plan.unit_time_s" in out
