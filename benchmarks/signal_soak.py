"""The core's signal tests, run again and again under CPU load: how often each passes.

CI was red one run in three when its test runner had been started ignoring SIGINT (a non-interactive
shell's background job); the tests now start their runners at the default action whatever they
inherited. This script is the check that they pass whatever the load and the interpreter: it starts
``--load`` busy processes, then runs the signal tests ``--runs`` times with ``--python`` (each run
alternately from a parent that ignores SIGINT and SIGHUP, as a background job under nohup, and from
one that does not), and prints the passes per test and in all.

    python benchmarks/signal_soak.py --python /path/to/python3.12 --runs 20 --load 4

Exit status 1 when any run failed. The interpreter needs the project installed (.ci/ship makes such
venvs for 3.12 and 3.13).
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = ["tests/core/test_recurrence_account.py", "tests/core/test_store_cli.py"]


def _busy() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)


def _ignoring(sigs):
    def preexec() -> None:  # in the forked child before exec: what it inherits
        for s in sigs:
            signal.signal(s, signal.SIG_IGN)

    return preexec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter whose signal tests run (default: this one)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes beside the tests")
    ap.add_argument("-k", default="signal", help="pytest's -k selection (default: the signal tests)")
    ap.add_argument("--keep-failures", type=Path, metavar="DIR", help="write each failed run's pytest output here")
    args = ap.parse_args()
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    load = [_busy() for _ in range(args.load)]
    passed: collections.Counter[str] = collections.Counter()
    failed: collections.Counter[str] = collections.Counter()
    bad_runs = 0
    start = time.monotonic()
    try:
        for run in range(args.runs):
            ignored = (signal.SIGINT, signal.SIGHUP) if run % 2 else ()
            r = subprocess.run(
                [args.python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-k", args.k, *TESTS],
                cwd=REPO,
                capture_output=True,
                text=True,
                preexec_fn=_ignoring(ignored),
                timeout=1800,
            )
            for line in r.stdout.splitlines():
                word, _, test = line.partition(" ")
                if word == "PASSED":
                    passed[test] += 1
                elif word in ("FAILED", "ERROR"):
                    failed[test.split(" - ")[0]] += 1
            bad_runs += r.returncode != 0
            if r.returncode != 0 and args.keep_failures:
                args.keep_failures.mkdir(parents=True, exist_ok=True)
                (args.keep_failures / f"run{run + 1}.txt").write_text(r.stdout + r.stderr)
            print(
                f"run {run + 1}/{args.runs} ({'parent ignoring SIGINT and SIGHUP' if ignored else 'plain parent'}): "
                f"{'ok' if r.returncode == 0 else 'FAILED'}",
                flush=True,
            )
    finally:
        for p in load:
            p.kill()
            p.wait()
    print(
        f"\nPython {version}, {args.runs} runs beside {args.load} busy processes on {os.cpu_count()} CPUs, {time.monotonic() - start:.0f} s"
    )
    for test in sorted(set(passed) | set(failed)):
        print(f"  {passed[test]:3d} passed {failed[test]:3d} failed  {test}")
    print(f"runs with a failure: {bad_runs} of {args.runs}")
    return 1 if bad_runs else 0


if __name__ == "__main__":
    sys.exit(main())
