"""The example third-party plugin, installed for real and driven through the CLI."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from zeus_test_helpers import TOY_JOB, write_job


def zeus(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "zeus_core.cli", *args], env=env, capture_output=True, text=True, timeout=120)


def test_installed_plugin_is_listed(site):
    r = zeus(site, "plugins", "--json")
    assert r.returncode == 0, r.stderr
    plugins = {p["name"]: p for p in json.loads(r.stdout)}
    assert plugins["greedy"]["distribution"] == "zeus-greedy-policy"
    assert plugins["greedy"]["version"] == "0.1.0"
    assert plugins["greedy"]["provides"] == {"batch_size_policy": ["greedy"]}
    assert plugins["greedy"]["hooks"] == ["zeus_register_batch_size_policies"]


def test_installed_plugin_runs_and_its_typos_fail_validation(site, tmp_path):
    job = write_job(
        tmp_path / "job.toml", TOY_JOB.replace('plugin = "fixed"\ndefault = 32', 'plugin = "greedy"\nbatch_sizes = [16, 32, 64, 128]')
    )
    r = zeus(site, "run", str(job), "--set", "job.recurrences=6", "--output", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr + r.stdout
    rows = list(csv.DictReader(open(tmp_path / "out" / "recurrences.csv")))
    chosen = [int(x["batch_size"]) for x in rows]
    # explores each once, then exploits the cheapest (toy: 64 needs fewest epochs)
    assert chosen[:4] == [16, 32, 64, 128]
    costs = {int(x["batch_size"]): float(x["cost"]) for x in rows[:4]}
    assert chosen[4:] == [min(costs, key=costs.get)] * 2
    bad = write_job(tmp_path / "bad.toml", job.read_text().replace("batch_sizes =", "batch_size ="))
    r = zeus(site, "validate", str(bad))
    assert r.returncode == 2
    assert "unknown key 'batch_size' (did you mean 'batch_sizes'?) @ $.batch_size.batch_size" in r.stderr


def test_disabling_the_installed_plugin(site, tmp_path):
    env_job = write_job(tmp_path / "job.toml", TOY_JOB.replace('plugin = "fixed"\ndefault = 32', 'plugin = "greedy"'))
    os.environ["ZEUS_DISABLED_PLUGINS"] = "greedy"
    try:
        r = zeus(site, "validate", str(env_job))
    finally:
        del os.environ["ZEUS_DISABLED_PLUGINS"]
    assert r.returncode == 2
    assert "unknown batch_size plugin 'greedy'" in r.stderr


def test_sigterm_during_run_restores_the_device_and_keeps_results(site, tmp_path):
    import signal
    import time

    marker = tmp_path / "closed.txt"
    job = write_job(tmp_path / "job.toml", TOY_JOB)
    env = dict(os.environ, PYTHONPATH=str(site), COLUMNS="200")
    proc = subprocess.Popen(
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
            f"device.closed_marker={marker}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    store = tmp_path / ".zeus" / "toyjob.sqlite"
    deadline = time.time() + 60
    from zeus_core.engine.stores.sqlite import Store

    while time.time() < deadline:  # wait for the first committed recurrence
        if store.exists():
            with Store(store) as s:
                if s.tries():
                    break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err  # 128 + SIGTERM, as shells report it
    assert "interrupted" in err
    assert marker.read_text() == "closed\n"  # the device was closed (restored) exactly once
    with Store(store) as s:
        done = s.tries()
    assert 1 <= len(done) < 50 and all(t.reached for t in done)
