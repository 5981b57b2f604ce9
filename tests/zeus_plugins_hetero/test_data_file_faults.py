"""Hetero profiles that lie (issue 33): bad bytes, nesting 100,000 deep, values past their plausible
range, numbers of hundreds of digits and files past their size limit are refused by `zeus validate`
at the GPU's profile (exit 2), naming the file and where in it, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_plugins_hetero.profile import PROFILE_LIMIT_ENV, Profile, ProfileError

REPO = Path(__file__).resolve().parents[2]
RECORD = {"power_limit": 70, "energy": 10.5, "time": 0.25}


def test_bytes_that_are_not_utf8_name_the_line_and_column(tmp_path):
    p = tmp_path / "p.json"
    p.write_bytes(b'{"32": [\n {"power_limit": 70, "energy": 1, "time": 1, "note": "\xe9t\xe9"}]}')
    with pytest.raises(ProfileError, match=r"p.json:2: byte 0xe9 at column 55 is not UTF-8; a profile \(JSON\) is UTF-8"):
        Profile.load(p, profile_steps=1)


def test_nesting_100000_deep_is_refused_naming_the_line(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"32":\n' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ProfileError, match=r"deep.json:2: arrays and objects nest more than 8 deep"):
        Profile.load(p, profile_steps=1)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("time", 1e300, r'\$\["32"\]\[0\].time: 1e\+300 s is above 1e\+06 s, the most a profiling window\'s time can plausibly be'),
        ("energy", 1.7e308, r'\$\["32"\]\[0\].energy: 1.7e\+308 J is above 1e\+10 J'),
        ("power_limit", 10**400, r'\$\["32"\]\[0\].power_limit: a number of more than 300 digits W is above 10000 W'),
    ],
)
def test_values_whose_arithmetic_would_overflow_name_the_bound(tmp_path, field, value, message):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"32": [{**RECORD, field: value}]}))
    with pytest.raises(ProfileError, match=message):
        Profile.load(p, profile_steps=1)


def test_a_batch_size_key_past_its_bound_or_of_thousands_of_digits(tmp_path):
    with pytest.raises(ProfileError, match=r'\$\["99999999999"\]: batch size 99999999999 is above 10,000,000'):
        Profile.from_dict({"99999999999": [RECORD]}, profile_steps=1)
    with pytest.raises(ProfileError, match=r"batch-size key must be a positive integer"):
        Profile.from_dict({"9" * 5000: [RECORD]}, profile_steps=1)
    p = tmp_path / "p.json"
    p.write_text('{"32": [{"power_limit": ' + "9" * 5000 + ', "energy": 1, "time": 1}]}')
    with pytest.raises(ProfileError, match=r"p.json: not valid JSON here \(Exceeds the limit"):
        Profile.load(p, profile_steps=1)


def test_a_file_past_the_size_limit_is_refused_naming_the_limit_and_how_to_raise_it(tmp_path, monkeypatch, hetero_aws):
    monkeypatch.setenv(PROFILE_LIMIT_ENV, "0.001")  # 1,048 bytes: less than the published cifar_a10.json (2.5 KiB)
    with pytest.raises(
        ProfileError,
        match=r"cifar_a10.json: the file is 2,470 bytes, more than the 1,048 bytes .*"
        r"ZEUS_MAX_HETERO_PROFILE_MB=<MiB>",
    ):
        Profile.load(hetero_aws / "cifar_a10.json", profile_steps=10)
    monkeypatch.delenv(PROFILE_LIMIT_ENV)
    assert Profile.load(hetero_aws / "cifar_a10.json", profile_steps=10).max_batch == 1024


def _hetero_job(tmp_path: Path, shared_data: Path, a10_profile: str) -> Path:
    job = tmp_path / "hetero.toml"
    text = (REPO / "examples" / "hetero" / "cifar100_a10_t4" / "job.toml").read_text()
    text = text.replace("../../../../shared/data/hetero_aws/cifar_a10.json", a10_profile)
    text = text.replace("../../../../shared/data/hetero_aws/cifar_t4.json", str(shared_data / "hetero_aws" / "cifar_t4.json"))
    job.write_text(text)
    return job


@pytest.mark.parametrize(
    "content, where",
    [
        (b'{"32":\n' + b"[" * 100_000 + b"]" * 100_000 + b"}", "bad.json:2: arrays and objects nest more than 8 deep"),
        (b'{"32": [{"power_limit": 70, "energy": 1, "time": 1, "gpu": "\xff"}]}', "bad.json:1: byte 0xff at column 61 is not UTF-8"),
    ],
    ids=["nested-100000-deep", "not-utf8"],
)
def test_zeus_validate_exits_2_at_the_gpus_profile_without_a_traceback(tmp_path, shared_data, content, where):
    (tmp_path / "bad.json").write_bytes(content)
    r = subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", "validate", str(_hetero_job(tmp_path, shared_data, "bad.json"))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert where in out and "@ $.allocation.gpus[0].profile" in out


def test_option_values_whose_arithmetic_overflows_are_refused_naming_the_bound(tmp_path, shared_data):
    """allreduce_time_s = 1e308 used to pass validation, then allocation.json failed with a traceback
    ('Out of range float values are not JSON compliant')."""
    job = _hetero_job(tmp_path, shared_data, str(shared_data / "hetero_aws" / "cifar_a10.json"))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "zeus_core.cli",
            "validate",
            str(job),
            "--set",
            "allocation.allreduce_time_s=1e308",
            "--set",
            "allocation.gpus.0.idle_power_w=1e308",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "allreduce_time_s must be between 0.0 and 3600.0 inclusive" in out and "@ $.allocation.allreduce_time_s" in out
    assert "idle_power_w must be between 0.0 and 10000.0 inclusive" in out and "@ $.allocation.gpus[0].idle_power_w" in out
