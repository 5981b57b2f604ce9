"""Job files written to break the reader: too large, too deep, numbers out of range, nothing to run.

Each is refused by validation with its path (exit 2 from the CLI), never a traceback, and
before anything is created (no store file).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from zeus_test_helpers import TOY_JOB, run_cli, toy_registry, write_job

from zeus_core.engine.validation import MAX_ARRAY, MAX_DEPTH, MAX_JOB_BYTES, JobError, load_job


@pytest.fixture
def reg(toy_plugin):
    return toy_registry(toy_plugin)


def problems(reg, path: Path, *sets: str) -> list[str]:
    with pytest.raises(JobError) as e:
        load_job(path, reg, sets)
    return e.value.format_lines()


def test_a_file_over_the_size_limit_is_refused_by_its_size_without_being_read(reg, tmp_path):
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:  # 50 MB, sparse: reading it would take the time and memory the limit spares
        f.truncate(50_000_000)
    lines = problems(reg, big)
    assert lines == [
        f"{big}:1: the file is 50,000,000 bytes; a job file is at most {MAX_JOB_BYTES:,} bytes (1 MiB): keep "
        "data (traces, profiles, arrays of values) in the files its options name @ $"
    ]


def test_a_stream_without_an_end_is_refused_after_the_limit(reg):
    """/dev/zero has no size: the reader stops one byte past the limit (a reader that read to the end
    would never return)."""
    lines = problems(reg, Path("/dev/zero"))
    assert len(lines) == 1 and "more than 1,048,576 bytes" in lines[0]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 5000])
def test_deep_nesting_is_a_problem_with_its_path_not_a_recursion_error(reg, depth):
    path = write_job(Path("deep.toml"), TOY_JOB + "[workload.deep]\nx = " + "[" * depth + "]" * depth + "\n")
    lines = problems(reg, path)
    assert len(lines) == 1 and f"nested more than {MAX_DEPTH} levels deep" in lines[0], lines


def test_deep_nesting_in_a_set_value_and_dotted_keys(reg):
    path = write_job(Path("job.toml"), TOY_JOB)
    lines = problems(reg, path, "workload.x=" + "[" * 800 + "]" * 800)
    assert len(lines) == 1 and "--set workload.x=...: the value nests more than 32 levels deep" in lines[0]
    dotted = write_job(Path("dotted.toml"), TOY_JOB + "[workload.a]\n" + ".".join(["k"] * 60) + " = 1\n")
    lines = problems(reg, dotted)
    assert len(lines) == 1 and "nested more than 32 levels deep; a job file nests at most 32 @ $.workload.a.k.k" in lines[0]


def test_an_array_longer_than_the_limit_names_its_path(reg):
    path = write_job(Path("job.toml"), TOY_JOB + "[workload.big]\nx = [" + "1," * (MAX_ARRAY + 1) + "]\n")
    lines = problems(reg, path)
    assert len(lines) == 1 and f"an array of {MAX_ARRAY + 1:,} values" in lines[0] and "@ $.workload.big.x" in lines[0]


@pytest.mark.parametrize(
    "override, field, words",
    [
        ("job.seed=-1", "job.seed", "seed must be between 0 and 9223372036854775807"),
        ("job.seed=18446744073709551616", "job.seed", "outside the 64-bit range"),
        ("job.recurrences=9223372036854775808", "job.recurrences", "outside the 64-bit range"),
        ("job.recurrences=1000001", "job.recurrences", "recurrences must be between 0 and 1000000"),
        ("job.max_tries=0", "job.max_tries", "max_tries must be between 1 and 10000"),
        ("job.max_tries=10001", "job.max_tries", "max_tries must be between 1 and 10000"),
        ("job.max_epochs=1000001", "job.max_epochs", "max_epochs must be between 1 and 1000000"),
        ("job.processes=100000", "job.processes", "processes must be between 1 and 1024"),
        ("job.eta_knob=nan", "job.eta_knob", "got nan"),
        ("job.target_metric=inf", "job.target_metric", "must be a finite number"),
        ("power.limit_w=nan", "power.limit_w", "got nan"),
    ],
)
def test_every_core_number_has_limits(reg, override, field, words):
    lines = problems(reg, write_job(Path("job.toml"), TOY_JOB), override)
    assert len(lines) == 1 and words in lines[0] and lines[0].endswith(f"@ $.{field}"), lines


def test_the_limits_themselves_are_accepted(reg):
    spec = load_job(
        write_job(Path("job.toml"), TOY_JOB),
        reg,
        ["job.seed=9223372036854775807", "job.recurrences=1000000", "job.max_tries=10000", "job.processes=1"],
    )
    assert spec.job.seed == 2**63 - 1 and spec.job.recurrences == 1_000_000


def test_a_job_without_workload_or_planner_names_what_is_missing(reg, tmp_path):
    text = '[job]\nname = "idle"\n\n[device]\nplugin = "toy"\n\n[batch_size]\nplugin = "fixed"\ndefault = 32\n'
    path = write_job(tmp_path / "idle.toml", text)
    lines = problems(reg, path)
    assert len(lines) == 1 and lines[0].startswith(f"{path}:1: the job has [device] and [batch_size] but no [workload]")
    assert lines[0].endswith("@ $.workload")
    r = run_cli(reg, "run", str(path))
    assert r.exit_code == 2 and "no [workload]" in r.output
    assert not (tmp_path / ".zeus").exists() and not Path(".zeus").exists()


def test_the_cli_refuses_a_hostile_file_with_exit_2_and_no_traceback(reg, tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("[job]\nx = " + "[" * 2000 + "]" * 2000 + "\n")
    for command in ("validate", "run"):
        r = run_cli(reg, command, str(path))
        assert r.exit_code == 2 and "nested more than 32 levels deep" in r.output and "Traceback" not in r.output
    assert not os.path.exists(".zeus")
