"""The job store as a user meets it, through the `zeus` command in a subprocess.

Every refusal exits 2 with the file, the field and the fix, and leaves the store
byte-for-byte as it was (its SHA-256 before and after). The job is the CIFAR-100
example on the synthetic trace (seconds per run); the concurrency case uses the
toy plugin, installed for real.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zeus_core.engine.stores.sqlite import Store

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"
STORE = Path(".zeus") / "zeus-cifar100.sqlite"


def zeus(*args: str, cwd: Path, site: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("COLUMNS", None)  # as in CI logs: output is a pipe, not a terminal
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "zeus_core.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "cifar100.toml"
    path.write_text(EXAMPLE.read_text())
    return path


@pytest.fixture
def learned(job: Path, tmp_path: Path) -> Path:
    """A store that learned the example job (3 recurrences); its path."""
    r = zeus("run", str(job), "--set", "job.recurrences=3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    store = tmp_path / STORE
    for suffix in ("-wal", "-shm"):  # checkpointed on close: the main file is the whole store
        assert not Path(f"{store}{suffix}").exists() or Path(f"{store}{suffix}").stat().st_size == 0
    return store


@pytest.mark.parametrize(
    ("override", "field", "stored", "current"),
    [
        ("device.gpu=a40", "device.gpu", "v100", "a40"),
        ("job.eta_knob=0.9", "job.eta_knob", "0.5", "0.9"),
        ("job.target_metric=0.65", "job.target_metric", "0.6", "0.65"),
        ('batch_size.variant="paper"', "batch_size.variant", "improved", "paper"),
        ('power={plugin="max"}', "power.plugin", "jit", "max"),
        ("workload.synthetic_seed=7", "workload.synthetic_seed", "0", "7"),
        ("job.processes=2", "job.processes", "1", "2"),
    ],
)
def test_a_run_of_another_setup_is_refused_before_it_touches_the_store(learned, job, tmp_path, override, field, stored, current):
    before = sha(learned)
    r = zeus("run", str(job), "--set", override, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    err = " ".join(r.stderr.split())
    assert f"the store {STORE} learned a different job" in err
    assert f"{field} {stored} {current}" in err  # side by side: the store's value, then this run's
    assert "zeus run --fresh" in err and "job.store" in err
    assert sha(learned) == before
    # validate and --dry-run accept the file (it is valid) and say that the run needs --fresh
    for command in (("validate",), ("run", "--dry-run")):
        v = zeus(*command, str(job), "--set", override, cwd=tmp_path)
        out = " ".join(v.stdout.split())
        assert v.returncode == 0 and "learned a different job" in out and "zeus run --fresh" in out, v.stdout + v.stderr
        assert f"{field} {stored} {current}" in out
    assert sha(learned) == before


def test_the_public_traces_are_another_job_than_the_synthetic_ones(learned, job, tmp_path, shared_data):
    before = sha(learned)
    r = zeus("run", str(job), "--set", f'workload.traces="{shared_data / "zeus_nsdi23"}"', cwd=tmp_path)
    assert r.returncode == 2 and "workload.traces synthetic" in " ".join(r.stderr.split())
    assert sha(learned) == before


def test_long_values_that_differ_are_shown_whole():
    """Two trace folders that differ only at the end: each value whole, one under the other."""
    from zeus_core.identity import Difference, IdentityMismatch

    a, b = "/home/user/datasets/zeus_nsdi23/v1", "/home/user/datasets/zeus_nsdi23/v2"
    text = str(IdentityMismatch("s.sqlite", [Difference("workload.traces", a, b), Difference("job.eta_knob", 0.5, 0.9)]))
    assert f"in the store: {a}" in text and f"this run:     {b}" in text
    assert "in the store: 0.5" in text and "this run:     0.9" in text


def test_options_that_do_not_change_the_problem_never_block_and_fresh_starts_over(learned, job, tmp_path):
    r = zeus(
        "run",
        str(job),
        "--set",
        "job.recurrences=1",
        "--set",
        "job.seed=5",
        "--set",
        "job.max_tries=30",
        "--set",
        "batch_size.seed=3",
        "--output",
        str(tmp_path / "o"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    with Store(learned) as s:
        assert [t.recurrence for t in s.tries() if t.reached] == [1, 2, 3, 4]
    r = zeus("run", str(job), "--fresh", "--set", "device.gpu=a40", "--set", "job.recurrences=1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with Store(learned) as s:
        assert [t.recurrence for t in s.tries()][-1] == 1 and s.identity()["device"]["gpu"] == "a40"


def test_fresh_with_a_failing_start_leaves_the_store_as_it_was(learned, job, tmp_path):
    before = sha(learned)
    r = zeus("run", str(job), "--fresh", "--set", 'workload.dataset="no-such-dataset"', cwd=tmp_path)
    assert r.returncode == 2 and "no-such-dataset" in r.stderr
    assert sha(learned) == before


def _make_foreign(path: Path) -> None:
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    c.commit()
    c.close()


def test_a_foreign_newer_or_damaged_file_is_refused_and_left_unchanged(learned, job, tmp_path):
    foreign = tmp_path / "foreign.sqlite"
    _make_foreign(foreign)
    newer = tmp_path / "newer.sqlite"
    newer.write_bytes(learned.read_bytes())
    c = sqlite3.connect(newer)
    c.execute("PRAGMA journal_mode = DELETE")  # no side files: whatever appears next to it, zeus made
    c.execute("PRAGMA user_version = 9")
    c.commit()
    c.close()
    damaged = tmp_path / "damaged.sqlite"
    data = bytearray(learned.read_bytes())
    c = sqlite3.connect(learned)
    root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tries'").fetchone()[0]
    page = c.execute("PRAGMA page_size").fetchone()[0]
    c.close()
    data[(root - 1) * page : root * page] = b"\xff" * page
    damaged.write_bytes(bytes(data))
    cases = {
        foreign: "is an SQLite database but not a zeus store (it has tables users)",
        newer: "was written by a newer zeus-core (store schema 9",
        damaged: "is damaged (",
    }
    for path, what in cases.items():
        before = sha(path)
        r = zeus("run", str(job), "--set", f'job.store="{path}"', cwd=tmp_path)
        err = " ".join(r.stderr.split())
        assert r.returncode == 2 and f"{path}: {what}" in err and "The file was not changed" in err, err
        assert sha(path) == before
        assert not Path(f"{path}-wal").exists()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../../escape", "contains '/'"),
        ("a/b", "contains '/'"),
        ("x" * 300, "is longer than 100 characters"),
        ("a\\u0000b", "contains '\\x00'"),
        ("..", "is not a name"),
    ],
)
def test_a_job_name_is_a_name(job, tmp_path, name, why):
    r = zeus("run", str(job), "--set", f'job.name="{name}"', cwd=tmp_path)
    assert r.returncode == 2
    err = " ".join(r.stderr.split())
    assert why in err and "@ $.job.name" in err
    assert not (tmp_path / ".zeus").exists() and not (tmp_path.parent / "escape.sqlite").exists()


def test_a_store_that_is_a_folder_and_an_unwritable_output_exit_2_before_anything_runs(job, tmp_path):
    (tmp_path / "folder.sqlite").mkdir()
    r = zeus("run", str(job), "--set", 'job.store="folder.sqlite"', cwd=tmp_path)
    assert r.returncode == 2 and "is a folder, not a store file" in " ".join(r.stderr.split())
    (tmp_path / "afile").write_text("x")
    r = zeus("run", str(job), "--output", str(tmp_path / "afile" / "out"), cwd=tmp_path)
    assert r.returncode == 2 and "--output" in r.stderr and "cannot write there" in r.stderr
    assert not (tmp_path / STORE).exists()  # found before the first recurrence


def test_report_writes_every_output_from_the_store_alone(learned, job, tmp_path):
    r = zeus("run", str(job), "--set", "job.recurrences=0", "--output", str(tmp_path / "zero"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # recurrences = 0: nothing run, everything reported
    r = zeus("report", str(job), "--output", str(tmp_path / "rep"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for out in ("zero", "rep"):
        rows = list(csv.DictReader(open(tmp_path / out / "recurrences.csv")))
        assert [int(x["recurrence"]) for x in rows if x["reached"] == "True"] == [1, 2, 3]
        summary = json.loads((tmp_path / out / "summary.json").read_text())
        assert summary["recurrences"] == 3 and "workload" in summary and "batch_size" in summary
        assert (tmp_path / out / "cost_per_recurrence.png").stat().st_size > 0
    assert (tmp_path / "zero" / "recurrences.csv").read_text() == (tmp_path / "rep" / "recurrences.csv").read_text()
    with Store(learned) as s:
        assert len({t.recurrence for t in s.tries()}) == 3  # report ran nothing
    r = zeus("report", str(job), "--set", 'job.store="empty.sqlite"', "--output", "refused", cwd=tmp_path)
    assert r.returncode == 2 and "holds no results" in r.stderr
    assert not (tmp_path / "refused").exists()  # refused before the output folder was made


def test_output_files_follow_the_umask_and_tables_are_not_cut_in_a_pipe(job, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.umask(0o022); from zeus_core.cli.main import main; main()",
            "run",
            str(job),
            "--set",
            "job.recurrences=2",
            "--output",
            str(tmp_path / "o"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    assert r.returncode == 0, r.stderr
    for name in ("summary.json", "recurrences.csv", "cost_per_recurrence.png"):
        assert (tmp_path / "o" / name).stat().st_mode & 0o777 == 0o644, name
    assert "recurrence" in r.stdout and "recur…" not in r.stdout and "…" not in r.stdout


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
@pytest.mark.parametrize("started_ignoring", [False, True], ids=["as-from-a-terminal", "runner-ignores-the-signal"])
def test_a_signal_restores_writes_what_finished_and_exits_128_plus_its_number(site, tmp_path, sig, code, started_ignoring):
    from zeus_test_helpers import TOY_JOB, ended, signals_ignored, start, write_job

    job = write_job(tmp_path / "job.toml", TOY_JOB)
    marker = tmp_path / "closed.txt"
    env = dict(os.environ, PYTHONPATH=str(site))
    store = tmp_path / ".zeus" / "toyjob.sqlite"
    # the test runner may have been started ignoring the signal (a shell's background: SIGINT; nohup: SIGHUP);
    # the runner under test is started as from a terminal all the same
    with (
        signals_ignored(*([sig] if started_ignoring else [])),
        ended(
            start(
                [
                    sys.executable,
                    "-m",
                    "zeus_core.cli",
                    "run",
                    str(job),
                    "--set",
                    "job.recurrences=50",
                    "--set",
                    "workload.sleep_s=0.05",
                    "--set",
                    f'device.closed_marker="{marker}"',
                    "--output",
                    str(tmp_path / "o"),
                ],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        ) as proc,
    ):
        _wait_for_tries(store, proc, 2)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert f"interrupted by {sig.name}" in err
    assert marker.read_text() == "closed\n"
    with Store(store) as s:
        done = s.tries()
    rows = list(csv.DictReader(open(tmp_path / "o" / "recurrences.csv")))
    assert 2 <= len(rows) == len(done) < 50
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["tries"] == len(done)


def _wait_for_tries(store: Path, proc: subprocess.Popen, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        if store.exists():
            with Store(store) as s:
                if len(s.tries()) >= n:
                    return
        time.sleep(0.05)
    raise AssertionError(f"the runner did not record {n} tries in {timeout:g} s")


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path} did not appear in {timeout:g} s"
        time.sleep(0.02)


def test_a_signal_a_nohup_runner_was_started_ignoring_stays_ignored(site, tmp_path):
    """``nohup zeus run``: a hangup (the terminal closed) must not stop the run; a later SIGTERM still does."""
    from zeus_test_helpers import TOY_JOB, ended, signals_ignored, write_job

    job = write_job(tmp_path / "job.toml", TOY_JOB)
    env = dict(os.environ, PYTHONPATH=str(site))
    with signals_ignored(signal.SIGHUP):  # as nohup starts it: SIGHUP ignored, inherited by the runner
        proc = subprocess.Popen(
            [sys.executable, "-m", "zeus_core.cli", "run", str(job), "--set", "job.recurrences=50", "--set", "workload.sleep_s=0.05"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    with ended(proc):
        _wait_for_tries(tmp_path / ".zeus" / "toyjob.sqlite", proc, 2)
        # both pending at once are delivered lowest number first: SIGHUP (1) would stop it before SIGTERM (15)
        os.kill(proc.pid, signal.SIGSTOP)
        proc.send_signal(signal.SIGHUP)
        proc.send_signal(signal.SIGTERM)
        os.kill(proc.pid, signal.SIGCONT)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "interrupted by SIGTERM" in err, err


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_outputs_are_written_records_what_was_written_and_exits_128_plus_its_number(site, tmp_path, sig, code):
    from zeus_test_helpers import TOY_JOB, ended, start, write_job

    job = write_job(tmp_path / "job.toml", TOY_JOB)
    hold, out = tmp_path / "release", tmp_path / "o"
    (out / "toy").mkdir(parents=True)
    (out / "toy" / "999.txt").write_text("the user's own\n")  # recorded by no zeus command: never listed
    env = dict(os.environ, PYTHONPATH=str(site))
    with ended(
        start(
            [
                sys.executable,
                "-m",
                "zeus_core.cli",
                "run",
                str(job),
                "--set",
                "job.recurrences=2",
                "--set",
                "workload.output_files=10",
                "--set",
                f'workload.hold_outputs="{hold}"',
                "--output",
                str(out),
            ],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    ) as proc:
        _wait_for(Path(f"{hold}.held"), proc)  # 5 of its 10 files written, waiting
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert f"interrupted by {sig.name} while the outputs were written" in err and "Traceback" not in err
    assert sorted(p.name for p in (out / "toy").iterdir()) == [*(f"{i:03d}.txt" for i in range(5)), "999.txt"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recurrences"] == 2
    recorded = summary["provenance"]["outputs"]
    assert recorded == sorted(["recurrences.csv", "summary.json", *(f"toy/{i:03d}.txt" for i in range(5))]), recorded


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_zeus_report_writes_its_outputs_records_what_was_written_and_exits_128_plus_its_number(site, tmp_path, sig, code):
    from zeus_test_helpers import TOY_JOB, ended, start, write_job

    job = write_job(tmp_path / "job.toml", TOY_JOB)
    env = dict(os.environ, PYTHONPATH=str(site))
    run = [sys.executable, "-m", "zeus_core.cli"]
    hold, out = tmp_path / "release", tmp_path / "o"
    holding = ["--set", "workload.output_files=10", "--set", f'workload.hold_outputs="{hold}"']  # the job's options: the run's too
    done = subprocess.run(
        [*run, "run", str(job), "--set", "job.recurrences=2", *holding], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr  # no --output: nothing held
    cmd = [*run, "report", str(job), *holding, "--output", str(out)]
    with ended(start(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as proc:
        _wait_for(Path(f"{hold}.held"), proc)  # 5 of its 10 files written, waiting
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert f"interrupted by {sig.name} while the outputs were written" in err and "Traceback" not in err and "Aborted" not in err
    assert sorted(p.name for p in (out / "toy").iterdir()) == [f"{i:03d}.txt" for i in range(5)]
    recorded = json.loads((out / "summary.json").read_text())["provenance"]["outputs"]
    assert recorded == sorted(["recurrences.csv", "summary.json", *(f"toy/{i:03d}.txt" for i in range(5))]), recorded


def test_ctrl_c_in_a_command_that_does_not_handle_it_exits_130_not_aborted(site, tmp_path):
    """Click's own ending is "Aborted!" with exit 1; every zeus command ends on SIGINT as zeus run does."""
    from zeus_test_helpers import ended, start

    marker = tmp_path / "waiting"
    env = dict(os.environ, PYTHONPATH=str(site))
    cmd = [sys.executable, "-m", "zeus_core.cli", "toy-wait", str(marker)]
    with ended(start(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as proc:
        _wait_for(marker, proc)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "zeus: interrupted by SIGINT" in err and "Aborted" not in err and "Traceback" not in err


def test_store_check_export_import_round_trip(learned, job, tmp_path):
    r = zeus("store", "check", str(learned), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "zeus store, schema 2, 3 tries" in r.stdout and '"gpu": "v100"' in r.stdout
    r = zeus("store", "export", str(learned), "--output", str(tmp_path / "dump.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dump = json.loads((tmp_path / "dump.json").read_text())
    r = zeus("store", "export", str(learned), "--output", str(tmp_path / "dump.json" / "x.json"), cwd=tmp_path)  # under a file
    assert r.returncode == 2 and "--output" in r.stderr and "cannot write it" in r.stderr and "Traceback" not in r.stderr
    assert dump["format"] == "zeus-store" and len(dump["tries"]) >= 3 and "policy:batch_size" in dump["state"]
    r = zeus("store", "import", str(tmp_path / "dump.json"), str(tmp_path / "copy.sqlite"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert zeus("store", "export", str(tmp_path / "copy.sqlite"), cwd=tmp_path).stdout == json.dumps(dump, indent=1) + "\n"
    # the rebuilt store continues the job where the original was
    r = zeus("run", str(job), "--set", 'job.store="copy.sqlite"', "--set", "job.recurrences=1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with Store(tmp_path / "copy.sqlite") as s:
        assert max(t.recurrence for t in s.tries()) == 4
    # refusals: an existing target, a file that is not an export, NaN, a damaged store to check
    r = zeus("store", "import", str(tmp_path / "dump.json"), str(tmp_path / "copy.sqlite"), cwd=tmp_path)
    assert r.returncode == 2 and "exists; import builds a new store" in r.stderr
    dump["tries"][0]["cost"] = float("nan")
    (tmp_path / "nan.json").write_text(json.dumps(dump))
    r = zeus("store", "import", str(tmp_path / "nan.json"), str(tmp_path / "nan.sqlite"), cwd=tmp_path)
    assert r.returncode == 2 and "$.tries[0].cost must be a finite number" in r.stderr and not (tmp_path / "nan.sqlite").exists()
    (tmp_path / "other.json").write_text("{}")
    r = zeus("store", "import", str(tmp_path / "other.json"), str(tmp_path / "o.sqlite"), cwd=tmp_path)
    assert r.returncode == 2 and "not a `zeus store export` file" in r.stderr
    _make_foreign(tmp_path / "f.sqlite")
    r = zeus("store", "check", str(tmp_path / "f.sqlite"), cwd=tmp_path)
    assert r.returncode == 2 and "not a zeus store" in r.stderr
    (tmp_path / "empty.sqlite").write_bytes(b"")
    for cmd in ("check", "export"):
        r = zeus("store", cmd, str(tmp_path / "empty.sqlite"), cwd=tmp_path)
        assert r.returncode == 2 and "an empty file, which is no store yet" in r.stderr, (cmd, r.stdout, r.stderr)


ALTERNATE_JIT_JOB = """
[job]
name = "shared"
recurrences = 4
target_metric = 1.0
max_epochs = 30
beta_knob = inf
store = "shared.sqlite"

[workload]
plugin = "toy"
sleep_s = 0.15

[device]
plugin = "toy"

[batch_size]
plugin = "alternate"
batch_sizes = [16, 24, 32, 48, 64, 96, 128, 192]

[power]
plugin = "jit"
step_w = 50
warmup_iters = 2
measure_iters = 8
"""


def test_two_concurrent_runners_lose_no_power_policy_choice(site, tmp_path):
    # Each runner's JIT settles on a limit for the batch sizes of its own recurrences while
    # the other commits its own choices; every one must survive in the store's power state.
    job = tmp_path / "job.toml"
    job.write_text(ALTERNATE_JIT_JOB)
    env = dict(os.environ, PYTHONPATH=str(site))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "zeus_core.cli", "run", str(job)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    with Store(tmp_path / "shared.sqlite") as s:
        sizes = {t.batch_size for t in s.tries()}
        choices = s.get("policy:power")["choices"]
    assert len(sizes) == 8  # recurrences 1..8, one per size
    assert sorted(int(b) for b in choices) == sorted(sizes)


def test_outputs_on_a_full_disk_are_an_error_naming_the_file_and_the_next_run_writes_them(site, tmp_path):
    from filesystems import fill, free_space, small_fs
    from zeus_test_helpers import TOY_JOB, write_job

    job = write_job(tmp_path / "job.toml", TOY_JOB)
    env = dict(os.environ, PYTHONPATH=str(site))
    with small_fs("64k") as disk:
        out = disk / "o"
        fill(disk, leave=0)
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "zeus_core.cli",
                "run",
                str(job),
                "--set",
                "job.recurrences=2",
                "--set",
                "workload.output_files=3",
                "--output",
                str(out),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 1, r.stderr
        message = " ".join(r.stderr.split())
        assert "Traceback" not in r.stderr and "the disk is full" in message and "recurrences.csv" in message, message
        assert "zeus report" in message  # how to get them once space is freed
        assert [p.name for p in out.iterdir()] == []  # no temporary file, no half of a file
        free_space(disk)
        r = subprocess.run(
            [sys.executable, "-m", "zeus_core.cli", "report", str(job), "--set", "workload.output_files=3", "--output", str(out)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        rows = list(csv.DictReader(open(out / "recurrences.csv")))
        assert len({row["recurrence"] for row in rows}) == 2 and len(list((out / "toy").iterdir())) == 3
