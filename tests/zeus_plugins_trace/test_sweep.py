"""`zeus sweep`: the grid's points, bad points refused before anything runs, and the same table
from the local process pool and from a real Ray cluster started on loopback."""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from zeus_test_helpers import start

from zeus_plugins_trace.sweep import parse_axis, sweep_cmd

REPO = Path(__file__).resolve().parents[2]
SINGLE = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"
ALIBABA = REPO / "examples" / "alibaba" / "job.toml"
SINGLE_ARGS = ["--set", "job.recurrences=15", "--axis", "device.gpu=v100,a40", "--axis", "job.seed=1..2"]
ALIBABA_ARGS = ["--set", "profiler.synthetic_groups=3", "--axis", "job.eta_knob=0.3,0.7"]


def sweep(job, args, out, *more):
    res = CliRunner().invoke(sweep_cmd, [str(job), *args, "--output", str(out), *more])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return list(csv.DictReader(io.StringIO(out.read_text())))


def test_axes():
    assert parse_axis("job.seed=1..3") == ("job.seed", [1, 2, 3])
    assert parse_axis("device.gpu=v100,a40") == ("device.gpu", ["v100", "a40"])
    assert parse_axis("job.eta_knob=0.3, 0.5") == ("job.eta_knob", [0.3, 0.5])
    assert parse_axis('profiler.groups="a.csv","b,c.csv"')[1] == ["a.csv", '"b', 'c.csv"']  # commas split values


def test_pool_table_single_job_points(tmp_path):
    rows = sweep(SINGLE, SINGLE_ARGS, tmp_path / "t.csv", "--workers", "2")
    assert [(r["point"], r["device.gpu"], r["job.seed"], r["kind"], r["workload"]) for r in rows] == [
        ("1", "v100", "1", "single", "cifar100"),
        ("2", "v100", "2", "single", "cifar100"),
        ("3", "a40", "1", "single", "cifar100"),
        ("4", "a40", "2", "single", "cifar100"),
    ]
    assert all(r["gpu"] == r["device.gpu"] and r["recurrences"] == "15" for r in rows)
    # each row is the fast simulator's run of that point
    from zeus_core.engine.registry import get_registry
    from zeus_core.engine.validation import load_job
    from zeus_plugins_trace.sweep import run_point

    spec = load_job(SINGLE, get_registry(), ["job.recurrences=15", 'device.gpu="a40"', "job.seed=2"])
    assert spec.job.seed == 2
    again = run_point(str(SINGLE), ["job.recurrences=15", 'device.gpu="a40"', "job.seed=2"])[0]
    assert float(rows[3]["cost"]) == again["cost"] and float(rows[3]["regret"]) == again["regret"]
    assert float(rows[0]["cost"]) != float(rows[1]["cost"])  # seeds differ


def test_bad_points_are_refused_before_anything_runs(tmp_path):
    out = tmp_path / "t.csv"
    res = CliRunner().invoke(sweep_cmd, [str(SINGLE), "--axis", "job.eta_knob=0.5,1.5", "--axis", "device.gpu=v100", "--output", str(out)])
    assert res.exit_code == 2 and "point job.eta_knob=1.5, device.gpu='v100'" in res.output
    assert "eta" in res.output and "@ $.job.eta_knob" in res.output and not out.exists()
    res = CliRunner().invoke(sweep_cmd, [str(SINGLE), "--axis", "job.seed=3..1", "--output", str(out)])
    assert res.exit_code == 2 and "is empty" in res.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head():
    """A one-node Ray cluster on 127.0.0.1 for this test, stopped (its own process group) after it."""
    try:
        import ray  # noqa: F401
    except ImportError:
        from cluster_helpers import server_missing

        server_missing("ray is not installed (requirements.txt installs it)")
    ray_bin = Path(sys.executable).with_name("ray")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="zray")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    proc = start(  # SIGINT at its default in ray, whatever this test runner was started with: it stops ray below
        [
            str(ray_bin),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the local Ray head did not start")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        # `ray start --block` stops the processes it started on SIGINT; the group is ours alone.
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_gives_the_pool_table(tmp_path, ray_head):
    import ray

    pool_single = (tmp_path / "pool1.csv", tmp_path / "ray1.csv")
    pool_alibaba = (tmp_path / "pool2.csv", tmp_path / "ray2.csv")
    sweep(SINGLE, SINGLE_ARGS, pool_single[0], "--workers", "2")
    sweep(SINGLE, SINGLE_ARGS, pool_single[1], "--executor", "ray", "--ray-address", ray_head)
    assert pool_single[1].read_text() == pool_single[0].read_text()
    rows = sweep(ALIBABA, ALIBABA_ARGS, pool_alibaba[0], "--workers", "2")
    assert [(r["job.eta_knob"], r["kind"], r["rule"]) for r in rows] == [
        ("0.3", "alibaba", "paper"),
        ("0.3", "alibaba", "improved"),
        ("0.7", "alibaba", "paper"),
        ("0.7", "alibaba", "improved"),
    ]
    sweep(ALIBABA, ALIBABA_ARGS, pool_alibaba[1], "--executor", "ray", "--ray-address", ray_head)
    assert pool_alibaba[1].read_text() == pool_alibaba[0].read_text()
    assert not ray.is_initialized()  # the sweep shut its connection down


@pytest.mark.parametrize("form", ["{host}:{port}", "ray://{host}:{port}"])
def test_a_ray_address_where_nothing_listens_is_exit_2_at_once_naming_that_address(tmp_path, form):
    """Ray would retry for minutes, printing the address it resolved; the sweep says what it was given."""
    address = form.format(host="127.0.0.1", port=_free_port())
    start = time.monotonic()
    res = CliRunner().invoke(
        sweep_cmd,
        [str(SINGLE), "--axis", "job.seed=1..2", "--output", str(tmp_path / "t.csv"), "--executor", "ray", "--ray-address", address],
    )
    assert res.exit_code == 2 and f"--ray-address {address}: nothing accepts connections at 127.0.0.1:" in res.output, res.output
    assert "Connection refused" in res.output and time.monotonic() - start < 60 and not (tmp_path / "t.csv").exists()
    res = CliRunner().invoke(
        sweep_cmd,
        [str(SINGLE), "--axis", "job.seed=1..2", "--output", str(tmp_path / "t.csv"), "--executor", "ray", "--ray-address", "head-node"],
    )
    assert res.exit_code == 2 and "expected HOST:PORT" in res.output
