"""A Perseus job stopped by a signal while it writes its outputs (plan files from the worker, figures here):
the exit status names the signal, summary.json records every file that was written, and neither process
prints a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zeus_test_helpers import ended, start


def _job(tmp_path: Path, profile: Path) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(
        f'[job]\nname = "p"\n\n[frequency_plan]\nplugin = "perseus"\nprofile = "{profile}"\nmicrobatches = 3\nblocking_power_w = 83.64\n'
    )
    return path


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_plans_are_written_ends_with_its_status_and_records_what_was_written(tmp_path, gpt3_a100, sig, code):
    out = tmp_path / "out"
    with ended(
        start(
            [sys.executable, "-m", "zeus_core.cli", "run", str(_job(tmp_path, gpt3_a100)), "--output", str(out)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    ) as proc:
        deadline = time.monotonic() + 120
        while not (out / "plans").exists():  # made as the plan files start; the job ends a while after
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the plans folder did not appear"
            time.sleep(0.005)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    # stopped while writing, or (on a slow machine) in the moments after, as the process exits: the same status
    assert proc.returncode == code, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    recorded = set(json.loads((out / "summary.json").read_text())["provenance"]["outputs"])
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert on_disk <= recorded, sorted(on_disk - recorded)  # a later --fresh knows every file this run left


def test_the_worker_ends_quietly_when_its_caller_dies(tmp_path):
    """The caller killed (SIGKILL) while the worker still has answers to send: it exits, without a traceback."""
    script = tmp_path / "caller.py"
    script.write_text(
        "import os, sys, time\n"
        "from zeus_plugins_perseus.background import Background\n"
        "bg = Background(workers=2)\n"
        "r = bg.submit(time.sleep, 1.0)\n"
        "big = [bg.submit(bytes, 1 << 20) for _ in range(4)]\n"  # answers larger than a pipe holds
        "print(bg._proc.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    worker = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{worker}").exists() and "Z" not in _state(worker):
        assert time.monotonic() < deadline, "the worker outlived its caller"
        time.sleep(0.05)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
