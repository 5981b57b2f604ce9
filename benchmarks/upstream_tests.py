"""Upstream Zeus's own tests against the ``zeus-compat`` package: passed / failed / not portable.

    python benchmarks/upstream_tests.py [--release 0.16.0] [--sdist PATH] [-k EXPR] [--keep]

The tests are read at run time from the release's sdist on the package index (cached under
``$XDG_CACHE_HOME/zeus-compat``, default ``~/.cache``); nothing of upstream is committed here.
The script copies the sdist's ``tests/`` to a temporary folder and rewrites only what must be:

* ``mocker.patch("zeus.device.gpu.nvidia.pynvml", autospec=True)`` (a mock of upstream's private
  NVML binding) becomes ``simulated_pynvml(mocker)``: the same scriptable, call-recording mock,
  over zeus's simulated NVIDIA driver, which zeus's ``nvml`` device plugin reads
  (``benchmarks/upstream/simulated.py`` says how);
* the power-limit profiles the power-limit test replays (upstream's ``tests/profile_data``, not in
  the sdist) are the same public profiles under ``../shared/data/power_limit_profiles``;
* the recorded service answers the carbon and price tests read (``tests/monitor/carbon_history_files``,
  ``tests/monitor/price_output_files``, not in the sdist) are written in the services' formats:
  Electricity Maps histories of the hours the tests use, with the public intensities of
  ``../shared/data/carbon_intensity/de_2020.csv`` at the same calendar hours; OpenEI answers holding the
  rate the price test asserts and a two-tier time-of-use rate (:func:`service_answers`). The tests'
  own ``requests.get`` mocks serve them, unchanged;
* upstream's test-only replay monitor (``zeus/utils/testing.py``) is taken from the sdist: it is the
  judge of the log file format.

Test files that exercise upstream's private implementation (its AMD/RAPL/Apple/zeusd bindings, its
batch-size server's database layer, its Prometheus and streaming exporters) are listed as not
portable with the reason; they are not run. Every failing case of a portable file must be one of
the deliberate differences listed in ``DIFFERENCES`` (each documented in the zeus-compat README);
the script exits 1 otherwise. Prints the counts, then each failure and reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROFILES = HERE.parent.parent / "shared" / "data" / "power_limit_profiles"
INTENSITY = HERE.parent.parent / "shared" / "data" / "carbon_intensity" / "de_2020.csv"

#: test file -> why it cannot run against zeus-compat (it tests upstream's private implementation)
NOT_PORTABLE = {
    "tests/device/gpu/test_amd.py": "upstream's private amdsmi binding (zeus.device.gpu.amd); AMD GPUs are zeus's amdsmi device plugin,"
                                    " tested in tests/plugins",
    "tests/device/cpu/test_rapl.py": "upstream's private RAPL reader and its wraparound process (zeus.device.cpu.rapl); RAPL is zeus's"
                                     " cpu device plugin",
    "tests/device/cpu/test_socket_detection.py": "upstream's private CPU-socket lookup (zeus.device.cpu.get_current_cpu_index)",
    "tests/device/soc/apple/test_apple.py": "upstream's private Apple Silicon binding (zeus.device.soc.apple); zeus's apple_silicon"
                                            " device plugin replaces it",
    "tests/device/test_deprecated_alias.py": "upstream's private deprecated-method metaclass of its device classes",
    "tests/utils/test_zeusd.py": "upstream's zeusd client (zeus.utils.zeusd); zeus's privileged service is `zeus daemon`, another protocol",
    "tests/utils/test_multiprocessing.py": "upstream's spawn-guard helper (zeus.utils.multiprocessing), not part of this package",
    "tests/test_metric.py": "upstream's Prometheus exporters (zeus.metric); zeus's exporter is the prometheus plugin, another API",
    "tests/monitor/test_power_streaming.py": "upstream's power-streaming client for its daemon (zeus.monitor.power_streaming)",
    "tests/optimizer/batch_size/test_server.py": "upstream's batch-size server internals (FastAPI app, SQLAlchemy schema); `zeus serve`"
                                                 " is the server",
    "tests/optimizer/batch_size/test_explorer.py": "upstream's batch-size server internals (its explorer over its database)",
    "tests/optimizer/batch_size/test_simulator.py": "upstream's batch-size server internals (simulated over its database)",
    "tests/optimizer/batch_size/test_client.py": "drives the client against upstream's in-process server app (its conftest builds"
                                                 " upstream's FastAPI app and database)",
}

#: (test-id regex, reason) of every deliberate difference: a failing case that matches is expected
DIFFERENCES: list[tuple[str, str]] = []

MOCK = 'mocker.patch("zeus.device.gpu.nvidia.pynvml", autospec=True)'


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zeus-compat"


def fetch_sdist(release: str) -> Path:
    """The release's sdist, downloaded once with pip into the cache; exit 2 with the fix where it cannot be."""
    where = cache_dir() / release
    found = sorted(where.glob(f"zeus-{release}.tar.gz"))
    if found:
        return found[0]
    where.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", f"zeus=={release}", "--no-binary", ":all:", "--no-deps", "-d", str(where)]
    print(f"fetching upstream zeus {release}'s sdist: {' '.join(cmd)}", file=sys.stderr)
    done = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(where.glob(f"zeus-{release}.tar.gz"))
    if done.returncode != 0 or not found:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"cannot download zeus=={release}'s sdist from the package index ({last}).\n"
              f"Offline? Download it elsewhere with `pip download zeus=={release} --no-binary :all: --no-deps -d DIR` "
              f"and pass --sdist DIR/zeus-{release}.tar.gz, or put it in {where}/", file=sys.stderr)
        sys.exit(2)
    return found[0]


def unpack(sdist: Path, into: Path) -> Path:
    """The sdist's ``tests/`` and its replay monitor (the judge) under ``into``; returns the tests' root."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if re.match(r"[^/]+/(tests/|zeus/utils/testing\.py$|examples/)", m.name)]
        tar.extractall(into, members=members, filter="data")
    [root] = [p for p in into.iterdir() if p.is_dir()]
    judge = root / "judge"  # out of the way of the installed `zeus` package
    judge.mkdir()
    (root / "zeus" / "utils" / "testing.py").rename(judge / "testing.py")
    shutil.rmtree(root / "zeus")
    return root


def rewrite(root: Path) -> list[str]:
    """Apply the rewrites (see the module docstring); returns what was rewritten, file by file."""
    done = []
    for path in sorted((root / "tests").rglob("*.py")):
        text = path.read_text()
        new = text.replace(MOCK, "simulated_pynvml(mocker)")
        if new != text:
            first_import = r"^(import |from (?!__future__))"  # after `from __future__ import ...`
            new = re.sub(first_import, "from upstream.simulated import simulated_pynvml\n\\1", new, count=1, flags=re.M)
            done.append(f"{path.relative_to(root)}: {text.count(MOCK)} mock(s) of zeus.device.gpu.nvidia.pynvml -> simulated driver")
        if new != text:
            path.write_text(new)
    profiles = root / "tests" / "profile_data"
    if not profiles.exists() and PROFILES.is_dir():
        shutil.copytree(PROFILES, profiles)
        done.append(f"tests/profile_data: {len(list(profiles.iterdir()))} public power-limit profiles from {PROFILES}")
    done += service_answers(root / "tests" / "monitor")
    return done


def _intensity_history(hours: list[str], values: dict[str, float]) -> str:
    """An Electricity Maps ``/v3/carbon-intensity/history`` answer for ``hours`` (``2024-11-30T07``)."""
    history = [{"zone": "US-MIDW-MISO", "carbonIntensity": round(values[h[5:]]), "datetime": f"{h}:00:00.000Z",
                "updatedAt": f"{h}:45:00.000Z", "createdAt": f"{h}:45:00.000Z", "emissionFactorType": "lifecycle",
                "isEstimated": True, "estimationMethod": "TIME_SLICER_AVERAGE"} for h in hours]
    return json.dumps({"zone": "US-MIDW-MISO", "history": history})


def _rate(label: str, name: str, tiers: list[float], weekday: list[list[int]], weekend: list[list[int]]) -> dict:
    """One OpenEI utility-rate item (the fields the price monitor reads, and a few it does not)."""
    return {"label": label, "utility": "Example Utility", "name": name, "sector": "Residential", "uri":
            f"https://apps.openei.org/IURDB/rate/view/{label}", "energyratestructure": [[{"rate": r, "adj": 0.029681}]
                                                                                       for r in tiers],
            "energyweekdayschedule": weekday, "energyweekendschedule": weekend}


def service_answers(monitor: Path) -> list[str]:
    """Write the recorded answers the carbon and price tests read (see the module docstring); what was written."""
    from datetime import datetime, timedelta

    if not (monitor / "test_carbon.py").is_file() and not (monitor / "test_price.py").is_file():
        return []
    if not INTENSITY.is_file():
        return [f"carbon/price service answers: not written ({INTENSITY} missing)"]
    values: dict[str, float] = {}  # "MM-DDTHH" of 2020 -> intensity at the full hour
    for line in INTENSITY.read_text().splitlines()[1:]:
        stamp, _, value = line.partition(",")
        if stamp.endswith(":00:00"):
            values[stamp[5:13].replace(" ", "T")] = float(value)
    first = datetime(2024, 11, 30, 7)
    hours = [(first + timedelta(hours=i)).strftime("%Y-%m-%dT%H") for i in range(48)]
    carbon = monitor / "carbon_history_files"
    carbon.mkdir(exist_ok=True)
    (carbon / "carbon_history_file1").write_text(_intensity_history(hours[:24], values))  # asked before 2024-12-01T07
    (carbon / "carbon_history_file2").write_text(_intensity_history(hours[24:], values))  # asked from then on
    price = monitor / "price_output_files"
    price.mkdir(exist_ok=True)
    flat = [[0] * 24 for _ in range(12)]
    peak = [[1 if 5 <= m <= 8 and 14 <= h < 19 or 8 <= h < 11 else 0 for h in range(24)] for m in range(12)]
    # four tiers (off-peak, shoulder, peak, night) that change within the hours the tests' windows cover, so an
    # hour charged at another hour's rate shows
    tou_weekday = [[3, 3, 3, 3, 3, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 1, 1, 0, 0, 3] for _ in range(12)]
    tou_weekend = [[3, 3, 3, 3, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 3] for _ in range(12)]
    (price / "invalid.json").write_text(json.dumps({"items": []}))
    (price / "ann_arbor.json").write_text(json.dumps({"items": [
        _rate("539f6d3bec4f024411ecb311", "Residential Electric Service", [0.1056], flat, flat),
        _rate("539f6d3bec4f024411ecb312", "Residential Time of Day", [0.0929, 0.1693], peak, flat)]}))
    (price / "virginia.json").write_text(json.dumps({"items": [
        _rate("539f6e1dec4f024411ecbeaf", "Residential Time of Use", [0.0812, 0.1290, 0.2130, 0.0598], tou_weekday,
              tou_weekend),
        _rate("539f6e1dec4f024411ecbeb0", "Residential Service", [0.1190], flat, flat)]}))
    return ["tests/monitor/carbon_history_files: 2 Electricity Maps histories (24 h each) with the intensities of "
            f"{INTENSITY.name}", "tests/monitor/price_output_files: 3 OpenEI answers (no rate; a flat rate; a time-of-use rate)"]


def run(root: Path, files: list[str], keyword: str | None) -> dict[str, tuple[str, str]]:
    """Run ``files`` under pytest; test id -> (outcome, first line of the failure)."""
    report = root / "report.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env["ZEUS_UPSTREAM_TESTING"] = str(root / "judge" / "testing.py")
    env.pop("ZEUS_FAKE_NVML", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "upstream.simulated", "-p", "upstream.collect", "-p", "no:cacheprovider",
           "-W", "ignore::DeprecationWarning", "--rootdir", str(root), *files]
    if keyword:
        cmd += ["-k", keyword]
    env["ZEUS_UPSTREAM_REPORT"] = str(report)
    subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL)
    out: dict[str, tuple[str, str]] = {}
    if report.exists():
        for line in report.read_text().splitlines():
            row = json.loads(line)
            out[row["id"]] = (row["outcome"], row["why"])
    return out


#: upstream's examples this package must run unchanged (issue #28)
EXAMPLES = ("examples/power_limit_optimizer/train_single.py", "examples/power_limit_optimizer/train_dp.py",
            "examples/power_limit_optimizer/train_fsdp.py", "examples/batch_size_optimizer/mnist/train_single_gpu.py",
            "examples/batch_size_optimizer/mnist/train_dp.py", "examples/huggingface/run_clm.py")


def check_examples(root: Path) -> list[tuple[str, str, str]]:
    """Each example: (file, ``ok``/``missing``/``broken``, detail). Every name an example imports from ``zeus``
    must resolve in this package; the third-party modules it imports are listed where they are not installed
    (then it cannot be run here)."""
    import ast
    import importlib
    import importlib.util

    out = []
    for rel in EXAMPLES:
        tree = ast.parse((root / rel).read_text())
        broken, missing = [], set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                top = node.module.split(".")[0]
                if top == "zeus":
                    try:
                        module = importlib.import_module(node.module)
                        broken += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)]
                    except ImportError as e:
                        broken.append(f"{node.module} ({e})")
                elif top != "__future__" and importlib.util.find_spec(top) is None:
                    missing.add(top)
            elif isinstance(node, ast.Import):
                missing |= {a.name.split(".")[0] for a in node.names if importlib.util.find_spec(a.name.split(".")[0]) is None}
        if broken:
            out.append((rel, "broken", "zeus names that do not resolve: " + ", ".join(broken)))
        elif missing:
            out.append((rel, "missing", "every zeus import resolves; not run here: " + ", ".join(sorted(missing)) + " not installed"))
        else:
            out.append((rel, "ok", "every zeus import resolves"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default="0.16.0")
    ap.add_argument("--sdist", type=Path, help="the release's sdist (default: download it into the cache)")
    ap.add_argument("-k", dest="keyword", help="pytest -k expression, to run a subset")
    ap.add_argument("--keep", action="store_true", help="keep the rewritten tests (their folder is printed)")
    args = ap.parse_args(argv)
    sdist = args.sdist or fetch_sdist(args.release)
    if not sdist.is_file():
        print(f"--sdist {sdist}: no such file", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="zeus-upstream-tests-"))
    try:
        root = unpack(sdist, tmp)
        print(f"upstream zeus {args.release} tests from {sdist.name}")
        for line in rewrite(root):
            print(f"  rewritten: {line}")
        files = sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py"))
        portable = [f for f in files if f not in NOT_PORTABLE]
        started = time.monotonic()
        results = run(root, portable, args.keyword)
        took = time.monotonic() - started
        counts = {"passed": 0, "failed": 0, "difference": 0, "skipped": 0}
        failures = []
        for test_id, (outcome, why) in sorted(results.items()):
            if outcome == "failed":
                reason = next((r for pattern, r in DIFFERENCES if re.search(pattern, test_id)), None)
                if reason is not None:
                    counts["difference"] += 1
                    continue
                failures.append((test_id, why))
            counts[outcome] = counts.get(outcome, 0) + 1
        print(f"\nportable files: {len(portable)} ({took:.0f} s)")
        for f in portable:
            here = [v for k, v in results.items() if k.startswith(f + "::")]
            ok = sum(1 for o, _ in here if o == "passed")
            print(f"  {f}: {ok}/{len(here)} passed")
        print(f"passed {counts['passed']}, failed {counts['failed']}, documented differences {counts['difference']}, "
              f"skipped {counts['skipped']}, not portable {len(NOT_PORTABLE)} file(s)")
        for pattern, reason in DIFFERENCES:
            print(f"  difference {pattern}: {reason}")
        for f, reason in NOT_PORTABLE.items():
            print(f"  not portable {f}: {reason}")
        for test_id, why in failures[:40]:
            print(f"  FAILED {test_id}: {why}")
        if len(failures) > 40:
            print(f"  ... and {len(failures) - 40} more failures")
        examples = check_examples(root)
        print(f"examples: {sum(1 for _, state, _ in examples if state != 'broken')}/{len(examples)} import only what "
              "zeus-compat provides")
        for rel, state, detail in examples:
            print(f"  {state:7s} {rel}: {detail}")
        print("  (benchmarks/upstream_examples.py runs them)")
        if args.keep:
            print(f"rewritten tests kept in {root}")
        return 1 if failures or not results or any(state == "broken" for _, state, _ in examples) else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
