"""Upstream Zeus's own tests against the ``zeus-compat`` package, file by file: passed / failed / labelled.

    python benchmarks/upstream_tests.py [--upstream PATH_OR_VERSION] [-k EXPR] [--keep] [--timeout S]

``--upstream`` is a release (``0.16.0``, the default: its sdist is downloaded from the package index
with pip and cached under ``$XDG_CACHE_HOME/zeus-compat``, default ``~/.cache``), an sdist file, an
upstream source tree (a folder holding ``tests/``), or a git directory of upstream (e.g. the one
``git clone --bare`` makes; its ``HEAD`` is read). Nothing of upstream is committed here. The tests
are copied to a temporary folder; upstream's own files are never modified in place, and where the
copy holds upstream's recorded data (profiles, service answers) that data is used as it is. Only
what must be is rewritten:

* ``mocker.patch("zeus.device.gpu.nvidia.pynvml", autospec=True)`` (a mock of upstream's private
  NVML binding) becomes ``simulated_pynvml(mocker)``: the same scriptable, call-recording mock,
  over zeus's simulated NVIDIA driver, which zeus's ``nvml`` device plugin reads
  (``benchmarks/upstream/simulated.py`` says how);
* where the copy lacks them (a release's sdist does), the power-limit profiles the power-limit test
  replays (upstream's ``tests/profile_data``) are the same public profiles under
  ``../shared/data/power_limit_profiles``, and the recorded service answers the carbon and price
  tests read (``tests/monitor/carbon_history_files``, ``tests/monitor/price_output_files``) are
  written in the services' formats: Electricity Maps histories of the hours the tests use, with the
  public intensities of ``../shared/data/carbon_intensity/de_2020.csv`` at the same calendar hours;
  OpenEI answers holding the rate the price test asserts and a two-tier time-of-use rate
  (:func:`service_answers`). The tests' own ``requests.get`` mocks serve them, unchanged;
* upstream's test-only replay monitor (``zeus/utils/testing.py``) is taken from the copy: it is the
  judge of the log file format.

Each test file runs in a pytest process of its own (so one collection error hides nothing else).
Per file the script prints the test functions that passed next to the cases, and splits the cases
that did not pass by why: ``failed`` (a bug), ``not implemented`` (a public API this package lacks),
``private`` (the file tests upstream's private internals), ``deliberate difference`` (a documented
difference of the zeus-compat README); every label carries its reason (``LABELS``, ``DIFFERENCES``).
Exit 1 when any case failed without a label.
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

NOT_IMPLEMENTED = "not implemented"
PRIVATE = "private"
DIFFERENCE = "deliberate difference"
KINDS = (NOT_IMPLEMENTED, PRIVATE, DIFFERENCE)

#: test file -> (label, why) for the cases of a file that do not pass: the label of every non-passing case
#: of the file (a failing case of an unlabelled file is a failure)
LABELS: dict[str, tuple[str, str]] = {
    "tests/device/gpu/test_amd.py": (
        PRIVATE,
        "upstream's private amdsmi binding (the module-level `amdsmi` it mocks);"
        " AMD GPUs are zeus's amdsmi device plugin, tested in tests/plugins",
    ),
    "tests/device/cpu/test_rapl.py": (
        PRIVATE,
        "upstream's private RAPL file reader and its wraparound process (zeus.device.cpu.rapl internals); RAPL is zeus's cpu device plugin",
    ),
    "tests/device/cpu/test_emi.py": (
        NOT_IMPLEMENTED,
        "Windows' EMI counters (zeus.device.cpu.emi): Windows-only, left out (the compat README says so)",
    ),
    "tests/device/cpu/test_socket_detection.py": (
        PRIVATE,
        "upstream's private CPU-socket lookup through its sysfs reads (mocks of its module internals)",
    ),
    "tests/device/soc/apple/test_apple.py": (
        PRIVATE,
        "upstream's private Apple Silicon binding (a mock of its `zeus_apple_silicon` import); zeus's apple_silicon plugin",
    ),
    "tests/device/test_deprecated_alias.py": (PRIVATE, "upstream's private device classes under the deprecated-method metaclass"),
    "tests/optimizer/batch_size/test_server.py": (
        PRIVATE,
        "upstream's batch-size server itself (its status codes,"
        " e.g. 201 for a new job, its FastAPI app); `zeus serve` is"
        " the server, run here in its place",
    ),
    "tests/optimizer/batch_size/test_explorer.py": (
        PRIVATE,
        "upstream's batch-size server's explorer (its status codes and pruning rounds); `zeus serve` is the server",
    ),
    "tests/optimizer/batch_size/test_simulator.py": (
        PRIVATE,
        "upstream's research simulator over its batch-size server internals (zeus._legacy)",
    ),
    "tests/test_skill_examples.py": (
        PRIVATE,
        "type-checks the code in upstream's repository's skills/ files (not in a release) with the `ty` checker",
    ),
}

#: (test-id regex, reason) of every deliberate difference: a failing case that matches is expected
DIFFERENCES: list[tuple[str, str]] = [
    (
        r"tests/utils/test_zeusd\.py::",
        "zeus.utils.zeusd is upstream master's client, which requires `pci_address` in a daemon's /discover;"
        " 0.16.0's tests answer /discover without it (README difference 20)",
    ),
]

#: (test-id regex, label, reason) of single cases of otherwise passing files, labelled as files are
CASE_LABELS: list[tuple[str, str, str]] = [
    (
        r"tests/monitor/test_power\.py::test_get_(power|energy)_",
        PRIVATE,
        "builds the monitor with PowerMonitor.__new__ and fills upstream's private sample queues (data_queues, samples of"
        " PowerSample); this package's monitor samples into the core's timeline in a thread (README difference 9), and"
        " its get_energy holds the last reading to the interval's end (README difference 10)",
    ),
    (
        r"tests/optimizer/batch_size/test_client\.py::test_register_job$",
        PRIVATE,
        "scripts the `pynvml` module's own functions (nvmlDeviceGetPowerManagementLimitConstraints: 300 W) to set the"
        " job's max_power; zeus's nvml plugin reads the simulated driver behind it, so max_power is the simulated GPUs'",
    ),
]

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
        print(
            f"cannot download zeus=={release}'s sdist from the package index ({last}).\n"
            f"Offline? Download it elsewhere with `pip download zeus=={release} --no-binary :all: --no-deps -d DIR` "
            f"and pass --upstream DIR/zeus-{release}.tar.gz, or put it in {where}/",
            file=sys.stderr,
        )
        sys.exit(2)
    return found[0]


_WANTED = r"(tests/|zeus/utils/testing\.py$|examples/.*\.py$)"


def unpack(sdist: Path, into: Path) -> Path:
    """The sdist's ``tests/``, examples and replay monitor (the judge) under ``into``; returns the tests' root."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if re.match(r"[^/]+/" + _WANTED, m.name)]
        tar.extractall(into, members=members, filter="data")
    [root] = [p for p in into.iterdir() if p.is_dir()]
    return _set_judge(root)


def _set_judge(root: Path) -> Path:
    judge = root / "judge"  # out of the way of the installed `zeus` package
    judge.mkdir()
    testing = root / "zeus" / "utils" / "testing.py"
    if testing.is_file():
        testing.rename(judge / "testing.py")
    shutil.rmtree(root / "zeus", ignore_errors=True)
    return root


def obtain(upstream: str, into: Path) -> tuple[Path, str]:
    """Upstream's tests copied under ``into`` from a release, an sdist, a source tree or a git directory:
    (the copy's root, what it is, for the report). Exit 2 with why where it cannot be had."""
    path = Path(upstream).expanduser()
    if path.is_file():
        return unpack(path, into), f"{path.name}"
    if path.is_dir() and (path / "tests").is_dir():
        root = into / "upstream"
        shutil.copytree(path / "tests", root / "tests")
        if (path / "examples").is_dir():
            shutil.copytree(
                path / "examples",
                root / "examples",
                ignore=lambda d, names: [n for n in names if not n.endswith(".py") and not (Path(d) / n).is_dir()],
            )
        if (path / "zeus" / "utils" / "testing.py").is_file():
            (root / "zeus" / "utils").mkdir(parents=True)
            shutil.copy(path / "zeus" / "utils" / "testing.py", root / "zeus" / "utils" / "testing.py")
        return _set_judge(root), f"the tree {path}"
    if path.is_dir() and (path / "HEAD").is_file() and (path / "objects").is_dir():
        git = ["git", f"--git-dir={path}"]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        when = subprocess.run([*git, "show", "-s", "--format=%cs", head], capture_output=True, text=True).stdout.strip()
        names = subprocess.run([*git, "ls-tree", "-r", "--name-only", head], capture_output=True, text=True, check=True).stdout.splitlines()
        wanted = [n for n in names if re.match(_WANTED, n)]
        root = into / "upstream"
        root.mkdir()
        archive = subprocess.run([*git, "archive", head, "--", *wanted], capture_output=True, check=True).stdout
        tar = into / "tree.tar"
        tar.write_bytes(archive)
        with tarfile.open(tar) as t:
            t.extractall(root, filter="data")
        tar.unlink()
        return _set_judge(root), f"the git tree {path} at {head[:12]} ({when})"
    if path.exists() or os.sep in upstream or not re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", upstream):
        print(f"--upstream {upstream}: no such file, or not an sdist, a tree with tests/ or a git directory", file=sys.stderr)
        sys.exit(2)
    sdist = fetch_sdist(upstream)
    return unpack(sdist, into), f"{sdist.name} (release {upstream})"


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
    bso = root / "tests" / "optimizer" / "batch_size" / "conftest.py"
    if bso.is_file() and "zeus.optimizer.batch_size.server" in bso.read_text():
        from upstream.serve import conftest_for

        bso.write_text(conftest_for(bso.read_text()))
        done.append(
            "tests/optimizer/batch_size/conftest.py: its `client` of upstream's in-process server app -> an httpx"
            " client of a real `zeus serve` on loopback (benchmarks/upstream/serve.py); its helpers kept"
        )
    return done


def _intensity_history(hours: list[str], values: dict[str, float]) -> str:
    """An Electricity Maps ``/v3/carbon-intensity/history`` answer for ``hours`` (``2024-11-30T07``)."""
    history = [
        {
            "zone": "US-MIDW-MISO",
            "carbonIntensity": round(values[h[5:]]),
            "datetime": f"{h}:00:00.000Z",
            "updatedAt": f"{h}:45:00.000Z",
            "createdAt": f"{h}:45:00.000Z",
            "emissionFactorType": "lifecycle",
            "isEstimated": True,
            "estimationMethod": "TIME_SLICER_AVERAGE",
        }
        for h in hours
    ]
    return json.dumps({"zone": "US-MIDW-MISO", "history": history})


def _rate(label: str, name: str, tiers: list[float], weekday: list[list[int]], weekend: list[list[int]]) -> dict:
    """One OpenEI utility-rate item (the fields the price monitor reads, and a few it does not)."""
    return {
        "label": label,
        "utility": "Example Utility",
        "name": name,
        "sector": "Residential",
        "uri": f"https://apps.openei.org/IURDB/rate/view/{label}",
        "energyratestructure": [[{"rate": r, "adj": 0.029681}] for r in tiers],
        "energyweekdayschedule": weekday,
        "energyweekendschedule": weekend,
    }


def service_answers(monitor: Path) -> list[str]:
    """Write the recorded answers the carbon and price tests read (see the module docstring); what was written."""
    from datetime import datetime, timedelta

    if not (monitor / "test_carbon.py").is_file() and not (monitor / "test_price.py").is_file():
        return []
    if (monitor / "carbon_history_files").exists() or (monitor / "price_output_files").exists():
        return ["tests/monitor: upstream's recorded carbon and price answers used as they are (nothing written)"]
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
    (price / "ann_arbor.json").write_text(
        json.dumps(
            {
                "items": [
                    _rate("539f6d3bec4f024411ecb311", "Residential Electric Service", [0.1056], flat, flat),
                    _rate("539f6d3bec4f024411ecb312", "Residential Time of Day", [0.0929, 0.1693], peak, flat),
                ]
            }
        )
    )
    (price / "virginia.json").write_text(
        json.dumps(
            {
                "items": [
                    _rate(
                        "539f6e1dec4f024411ecbeaf", "Residential Time of Use", [0.0812, 0.1290, 0.2130, 0.0598], tou_weekday, tou_weekend
                    ),
                    _rate("539f6e1dec4f024411ecbeb0", "Residential Service", [0.1190], flat, flat),
                ]
            }
        )
    )
    return [
        f"tests/monitor/carbon_history_files: 2 Electricity Maps histories (24 h each) with the intensities of {INTENSITY.name}",
        "tests/monitor/price_output_files: 3 OpenEI answers (no rate; a flat rate; a time-of-use rate)",
    ]


def run(root: Path, file: str, keyword: str | None, timeout: float) -> dict[str, tuple[str, str]]:
    """Run one test file in a pytest process of its own; test id -> (outcome, first line of why it failed)."""
    report = root / "report.jsonl"
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    if (root / "judge" / "testing.py").is_file():
        env["ZEUS_UPSTREAM_TESTING"] = str(root / "judge" / "testing.py")
    env.pop("ZEUS_FAKE_NVML", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "upstream.simulated",
        "-p",
        "upstream.collect",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::DeprecationWarning",
        "--rootdir",
        str(root),
        file,
    ]
    if keyword:
        cmd += ["-k", keyword]
    env["ZEUS_UPSTREAM_REPORT"] = str(report)
    out: dict[str, tuple[str, str]] = {}
    done = None
    try:
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        out[f"{file}::<timeout>"] = ("failed", f"the file did not finish in {timeout:.0f} s")
    if report.exists():
        for line in report.read_text().splitlines():
            row = json.loads(line)
            out[row["id"]] = (row["outcome"], row["why"])
    if done is not None and not out and done.returncode not in (0, 5):
        # pytest stopped before collecting the file (a conftest that cannot be imported): no report at all
        lines = (done.stdout + done.stderr).splitlines()
        why = next((ln[1:].strip() for ln in reversed(lines) if ln.startswith("E ")), lines[-1] if lines else "")
        out[f"{file}::<collection>"] = ("failed", " ".join(f"pytest exited {done.returncode}: {why}".split())[:300])
    return out


def function_of(test_id: str) -> str:
    """The test function of a case's id (its parameters dropped)."""
    return test_id.split("[", 1)[0]


def tally(file: str, results: dict[str, tuple[str, str]]) -> dict:
    """One file's cases and functions by outcome; each non-passing case counted under its label."""
    label = LABELS.get(file)
    row = {
        "passed": 0,
        "failed": 0,
        NOT_IMPLEMENTED: 0,
        PRIVATE: 0,
        DIFFERENCE: 0,
        "skipped": 0,
        "failures": [],
        "labelled": [],
        "functions": set(),
        "functions passed": set(),
    }
    by_function: dict[str, list[str]] = {}
    for test_id, (outcome, why) in sorted(results.items()):
        by_function.setdefault(function_of(test_id), []).append(outcome)
        if outcome in ("passed", "skipped"):
            row[outcome] += 1
            continue
        reason = next((r for pattern, r in DIFFERENCES if re.search(pattern, test_id)), None)
        case = next((kind for pattern, kind, _ in CASE_LABELS if re.search(pattern, test_id)), None)
        if reason is not None:
            row[DIFFERENCE] += 1
        elif case is not None:
            row[case] += 1
            row["labelled"].append(test_id)
        elif label is not None:
            row[label[0]] += 1
        else:
            row["failed"] += 1
            row["failures"].append((test_id, why))
    row["functions"] = {f for f in by_function if not f.endswith(("<collection>", "<timeout>"))}
    row["functions passed"] = {f for f, outcomes in by_function.items() if set(outcomes) == {"passed"}}
    return row


#: upstream's examples this package must run unchanged (issue #28)
EXAMPLES = (
    "examples/power_limit_optimizer/train_single.py",
    "examples/power_limit_optimizer/train_dp.py",
    "examples/power_limit_optimizer/train_fsdp.py",
    "examples/batch_size_optimizer/mnist/train_single_gpu.py",
    "examples/batch_size_optimizer/mnist/train_dp.py",
    "examples/huggingface/run_clm.py",
)


def check_examples(root: Path) -> list[tuple[str, str, str]]:
    """Each example: (file, ``ok``/``missing``/``broken``, detail). Every name an example imports from ``zeus``
    must resolve in this package; the third-party modules it imports are listed where they are not installed
    (then it cannot be run here)."""
    import ast
    import importlib
    import importlib.util

    out = []
    for rel in EXAMPLES:
        if not (root / rel).is_file():
            out.append((rel, "missing", "not in this upstream copy"))
            continue
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
    ap.add_argument(
        "--upstream",
        default=None,
        metavar="PATH_OR_VERSION",
        help="a release (default 0.16.0), an sdist, an upstream source tree or an upstream git directory",
    )
    ap.add_argument("--release", default="0.16.0", help=argparse.SUPPRESS)  # the older spelling of --upstream VERSION
    ap.add_argument("--sdist", type=Path, help=argparse.SUPPRESS)  # the older spelling of --upstream FILE
    ap.add_argument("-k", dest="keyword", help="pytest -k expression, to run a subset")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one test file may run (default 900)")
    ap.add_argument("--keep", action="store_true", help="keep the rewritten tests (their folder is printed)")
    args = ap.parse_args(argv)
    upstream = args.upstream or (str(args.sdist) if args.sdist else args.release)
    if args.sdist and not args.sdist.is_file():
        print(f"--sdist {args.sdist}: no such file", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="zeus-upstream-tests-"))
    try:
        root, what = obtain(upstream, tmp)
        print(f"upstream zeus tests from {what}")
        for line in rewrite(root):
            print(f"  rewritten: {line}")
        files = sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py"))
        started = time.monotonic()
        rows = {}
        for f in files:
            rows[f] = tally(f, run(root, f, args.keyword, args.timeout))
        took = time.monotonic() - started
        cols = ("passed", "failed", NOT_IMPLEMENTED, PRIVATE, DIFFERENCE)
        print(f"\n{len(files)} test files ({took:.0f} s); cases per file, and test functions that pass of those run")
        print(f"  {'file':48s} {'passed':>7s} {'failed':>7s} {'not impl.':>9s} {'private':>8s} {'diff.':>6s}  functions")
        for f, row in rows.items():
            print(
                f"  {f:48s} {row['passed']:7d} {row['failed']:7d} {row[NOT_IMPLEMENTED]:9d} {row[PRIVATE]:8d} "
                f"{row[DIFFERENCE]:6d}  {len(row['functions passed'])}/{len(row['functions'])}"
                + (f" (+{row['skipped']} skipped)" if row["skipped"] else "")
            )
        total = {c: sum(row[c] for row in rows.values()) for c in (*cols, "skipped")}
        fn_pass = sum(len(row["functions passed"]) for row in rows.values())
        fn_all = sum(len(row["functions"]) for row in rows.values())
        print(
            f"passed {total['passed']}, failed {total['failed']}, not implemented {total[NOT_IMPLEMENTED]}, "
            f"private {total[PRIVATE]}, deliberate difference {total[DIFFERENCE]}, skipped {total['skipped']} "
            f"(cases); test functions passing: {fn_pass} of {fn_all}"
        )
        for f, row in rows.items():
            if f in LABELS and row[LABELS[f][0]] > len([t for t in row["labelled"] if t.startswith(f)]):
                print(f"  {LABELS[f][0]} {f}: {LABELS[f][1]}")
        for pattern, reason in DIFFERENCES:
            print(f"  deliberate difference {pattern}: {reason}")
        for pattern, kind, reason in CASE_LABELS:
            if any(re.search(pattern, test_id) for row in rows.values() for test_id in row["labelled"]):
                print(f"  {kind} {pattern}: {reason}")
        failures = [fail for row in rows.values() for fail in row["failures"]]
        for test_id, why in failures[:40]:
            print(f"  FAILED {test_id}: {why}")
        if len(failures) > 40:
            print(f"  ... and {len(failures) - 40} more failures")
        examples = check_examples(root)
        print(f"examples: {sum(1 for _, state, _ in examples if state != 'broken')}/{len(examples)} import only what zeus-compat provides")
        for rel, state, detail in examples:
            print(f"  {state:7s} {rel}: {detail}")
        print("  (benchmarks/upstream_examples.py runs them)")
        if args.keep:
            print(f"rewritten tests kept in {root}")
        return 1 if failures or not any(row["passed"] for row in rows.values()) or any(state == "broken" for _, state, _ in examples) else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
