"""`zeus validate` opens the files a job names and reports their errors with the rest.

Traces, hetero profiles and Perseus profiles are read by the same code the parts
use when they are built, so a missing folder, NaN in a CSV or a broken profile
is found before anything runs, at the option's path. A file that an earlier part
of the same job writes (a profiler's ``save_to``) is named as deferred. A job
whose data file is bad leaves no store behind when run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def zeus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )


def flat(r: subprocess.CompletedProcess) -> str:
    return " ".join(r.stderr.split())


def test_a_missing_trace_folder_and_nan_in_a_trace_csv(tmp_path, shared_data):
    job = tmp_path / "job.toml"
    job.write_text((REPO / "examples" / "zeus_nsdi23" / "cifar100.toml").read_text())
    r = zeus("validate", str(job), "--set", 'workload.traces="no-such-folder"', "--set", "job.eta_knob=2", cwd=tmp_path)
    assert r.returncode == 2
    err = flat(r)
    assert "2 errors" in err  # every mistake at once: the option and the folder
    assert "eta_knob must be between 0 and 1" in err
    assert f"trace folder {tmp_path / 'no-such-folder'} does not exist" in err and "@ $.workload.traces" in err
    bad = tmp_path / "traces"
    bad.mkdir()
    for f in (shared_data / "zeus_nsdi23").glob("*.csv"):
        (bad / f.name).write_text(f.read_text())
    lines = (bad / "summary_power_v100.csv").read_text().splitlines()
    cells = lines[3].split(",")
    cells[-1] = "nan"
    lines[3] = ",".join(cells)
    (bad / "summary_power_v100.csv").write_text("\n".join(lines) + "\n")
    r = zeus("run", str(job), "--set", 'workload.traces="traces"', cwd=tmp_path)
    assert r.returncode == 2
    assert "summary_power_v100.csv:4: column 'average_power' is NaN" in flat(r) and "@ $.workload.traces" in flat(r)
    assert not (tmp_path / ".zeus").exists()  # a failed start leaves no store behind


def _hetero_job(tmp_path: Path, shared_data: Path, a10_profile: str, extra: str = "") -> Path:
    job = tmp_path / "hetero.toml"
    text = (REPO / "examples" / "hetero" / "cifar100_a10_t4" / "job.toml").read_text()
    text = text.replace("../../../../shared/data/hetero_aws/cifar_a10.json", a10_profile)
    text = text.replace("../../../../shared/data/hetero_aws/cifar_t4.json", str(shared_data / "hetero_aws" / "cifar_t4.json"))
    job.write_text(extra + text)
    return job


def test_a_broken_hetero_profile_is_reported_at_its_gpu(tmp_path, shared_data):
    data = json.loads((shared_data / "hetero_aws" / "cifar_a10.json").read_text())
    first = next(iter(data))
    data[first] = "not a table"
    (tmp_path / "broken.json").write_text(json.dumps(data))
    r = zeus("validate", str(_hetero_job(tmp_path, shared_data, "broken.json")), cwd=tmp_path)
    assert r.returncode == 2
    assert "broken.json" in flat(r) and "@ $.allocation.gpus[0].profile" in flat(r)
    r = zeus("validate", str(_hetero_job(tmp_path, shared_data, "missing.json")), cwd=tmp_path)
    assert r.returncode == 2 and "profile file not found" in flat(r) and "@ $.allocation.gpus[0].profile" in flat(r)


def test_a_file_an_earlier_part_writes_is_deferred_not_refused(tmp_path, shared_data):
    profiler = """
[device]
plugin = "cpu-estimate"

[profiler]
plugin = "power-sweep"
step = "steps.py:make_step"
batch_sizes = [32]
power_limits = [100]
save_to = "made.json"

"""
    (tmp_path / "steps.py").write_text("def make_step(batch_size):\n    return lambda: None\n")
    job = _hetero_job(tmp_path, shared_data, "made.json", extra=profiler)
    r = zeus("validate", str(job), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "deferred $.allocation.gpus[0].profile:" in out and "made.json is written by [profiler] power-sweep" in out
    (tmp_path / "steps.py").unlink()
    r = zeus("validate", str(job), cwd=tmp_path)
    assert r.returncode == 2 and "step file" in flat(r) and "@ $.profiler.step" in flat(r)


def test_a_broken_perseus_profile(tmp_path, shared_data):
    src = (REPO / "examples" / "perseus" / "gpt3_a100" / "job.toml").read_text()
    profile = tmp_path / "p.csv"
    lines = (shared_data / "perseus_sosp24" / "gpt3-175b+a100_sxm_bf16.csv").read_text().splitlines()
    lines[2] = lines[2].rsplit(",", 1)[0] + ",nan"
    profile.write_text("\n".join(lines) + "\n")
    job = tmp_path / "job.toml"
    job.write_text("\n".join(f'profile = "{profile}"' if line.strip().startswith("profile") else line for line in src.splitlines()) + "\n")
    r = zeus("validate", str(job), cwd=tmp_path)
    assert r.returncode == 2
    assert f"{profile}:3" in flat(r) and "@ $.frequency_plan.profile" in flat(r)
