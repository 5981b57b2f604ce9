"""``benchmarks/real_gpu.py --fake``: the real-GPU run's script, checked on the simulated driver.

The script is what a lent GPU machine runs in its one call, so it must work the first time
there: here it runs as a user runs it (a subprocess, its own folder as the working directory,
no ``ZEUS_*`` variable inherited), on the simulated driver with torch on the CPU, and its table
must hold every check, each passed, with the GPU as it was at the end. (It lives with no plugin's
tests: it needs the nvml, mab and perseus plugins and torch, which only the full environment has.)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from zeus_test_helpers import ended, start

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_gpu.py"

#: every row of a full run, in order
ROWS = [
    "energy counter update period",
    "power reading update period",
    "counter vs polled energy (steady load)",
    "power reading under a bursty load (coverage)",
    "power limit set and read (plugin)",
    "power limit held under load",
    "power limit restored on close",
    "SM clock locked and read (plugin)",
    "SM clock reset (plugin)",
    "JIT power limit in a training loop",
    "JIT energy saving against max power",
    "Perseus stage profiler, two stages",
    "Perseus planner on the measured profile",
    "daemon path: limit set by an unprivileged client",
    "daemon path: restored when the client exits",
    "GPU as it was after the run",
]
#: rows whose figures, on the simulated driver, say nothing about hardware
SIMULATED = {
    "energy counter update period",
    "power reading update period",
    "counter vs polled energy (steady load)",
    "power reading under a bursty load (coverage)",
    "power limit held under load",
    "JIT energy saving against max power",
    "Perseus stage profiler, two stages",
    "Perseus planner on the measured profile",
}


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "CUDA_"))}


def _rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows: check -> [measured, expected, result]."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("| ") and not line.startswith(("| check |", "| --- |")):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            assert len(cells) == 4, line
            rows[cells[0]] = cells[1:]
    return rows


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, list[str]]]:
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--fake", *args], capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=300
    )
    return r, _rows(r.stdout)


def test_fake_run_passes_every_check_and_says_which_are_simulated(tmp_path):
    r, rows = _run(tmp_path)
    assert r.returncode == 0, [(check, *cells) for check, cells in rows.items() if cells[2] == "FAIL"] or r.stdout + r.stderr
    assert "SIMULATED GPU" in r.stdout and "NVIDIA driver: 550.54.15" in r.stdout  # the header names what was measured
    assert list(rows) == ROWS
    for check, (measured, _expected, result) in rows.items():
        assert result == ("pass (simulated)" if check in SIMULATED else "pass"), (check, measured, result)
    # the figures are the simulated driver's: its counter's 100 ms period, its 400 W limit restored
    assert re.search(r"median (9\d|10\d|110)\.\d ms", rows["energy counter update period"][0])
    assert "-> set 100 W -> plugin reads 100 W, NVML 100 W" in rows["power limit set and read (plugin)"][0]
    assert "path daemon: 400 W -> 100 W" in rows["daemon path: limit set by an unprivileged client"][0]
    assert rows["GPU as it was after the run"][0] == "power limit 400 W"
    assert f"{len(ROWS)} of {len(ROWS)} checks passed" in r.stdout


def test_a_spent_budget_stops_the_checks_fails_the_run_and_leaves_the_gpu_as_it_was(tmp_path):
    r, rows = _run(tmp_path, "--timeout", "12")
    assert r.returncode == 1, r.stdout + r.stderr
    assert rows["time budget"][2] == "FAIL" and "the time budget of 12 s ran out during" in rows["time budget"][0]
    assert rows["GPU as it was after the run"] == ["power limit 400 W", "400 W (at start)", "pass"]
    assert len(rows) < len(ROWS)  # the checks take longer than 12 s even on a fast machine: they stopped


def test_a_budget_past_eight_minutes_is_refused(tmp_path):
    r, _ = _run(tmp_path, "--timeout", "600")
    assert r.returncode == 2 and "--timeout must be between 10 and 480 seconds, got 600" in r.stderr


def test_ctrl_c_during_a_check_ends_the_run_with_130_and_the_gpu_as_it_was(tmp_path):
    """Ctrl-C once the power-limit check has begun (the limit is changed within it): whichever
    check it lands in, the run stops there, says so, and the last row finds the limit it began with."""
    proc = start(
        [sys.executable, str(SCRIPT), "--fake"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with ended(proc):
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("... power limit"):
                proc.send_signal(signal.SIGINT)
                break
        else:
            raise AssertionError("the power-limit check never began:\n" + "".join(seen))
        stdout, stderr = proc.communicate(timeout=120)
    rows = _rows(stdout)
    assert proc.returncode == 130, stdout + stderr
    assert rows["interrupted"][0].startswith("Ctrl-C during ") and rows["interrupted"][2] == "FAIL"
    assert rows["GPU as it was after the run"] == ["power limit 400 W", "400 W (at start)", "pass"]
    assert "daemon path: restored when the client exits" not in rows
