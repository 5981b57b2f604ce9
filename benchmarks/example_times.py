"""How long the README's example commands take, from the command to its last line, as a ratio to
starting Python with torch imported (``python -c "import torch"``), measured in the same run.

    python benchmarks/example_times.py [--rounds 1] [--only first|torch]

``first`` is README's first command's job (``examples/zeus_nsdi23/cifar100.toml``, the trace
replay), ``torch`` the real-training example (``examples/torch_recurring/job.toml``, torch on the
CPU). Each runs ``zeus run JOB --fresh --output DIR`` in a new temporary folder (its store starts
empty there), with the ``zeus`` console script next to this interpreter. Each round runs every
command once, in turn, so a busy moment of the machine hits them alike; the figure is the median
over rounds. The installs the README's commands do first are not timed (they depend on the
network and the package cache). The examples' READMEs quote the seconds this prints.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "first": REPO / "examples" / "zeus_nsdi23" / "cifar100.toml",
    "torch": REPO / "examples" / "torch_recurring" / "job.toml",
}


def zeus_command() -> list[str]:
    script = shutil.which("zeus", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "zeus_core"]


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="runs of each command; the median is printed (default 1)")
    ap.add_argument("--only", choices=sorted(EXAMPLES), action="append", help="time only this example (repeatable)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    chosen = args.only or list(EXAMPLES)
    zeus = zeus_command()
    times: dict[str, list[float]] = {"python + import torch": [], **{name: [] for name in chosen}}
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="zeus-example-") as tmp:
            times["python + import torch"].append(timed([sys.executable, "-c", "import torch"], Path(tmp)))
            for name in chosen:
                folder = Path(tmp) / name
                folder.mkdir()
                times[name].append(timed([*zeus, "run", str(EXAMPLES[name]), "--fresh", "--output", "out"], folder))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    base = statistics.median(times["python + import torch"])
    print(f"| command | median wall time (s) | ratio to python + import torch ({base:.2f} s) |")
    print("|---|---:|---:|")
    for name, values in times.items():
        label = name if name.startswith("python") else f"zeus run {EXAMPLES[name].relative_to(REPO)}"
        median = statistics.median(values)
        print(f"| {label} | {median:.1f} | {median / base:.1f}x |")


if __name__ == "__main__":
    main()
