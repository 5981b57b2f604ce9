"""The exporter over real sockets: /metrics scraped after a job, and a real Pushgateway.

The series' values must be the job's ``summary.json`` (a fresh store, so this
process's tries are the job's), the knobs its chosen ones; bad configuration
is bad input before anything runs; unconfigured, the plugin imports nothing.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest
from cluster_helpers import run_job, server_missing
from pg_server import free_port
from prometheus_client.parser import text_string_to_metric_families


def _series(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("instance", "job"))))] = s.value
    return out


def _check(series: dict, summary: dict, job: str = "zeus-cifar100") -> None:
    j = (("zeus_job", job),)
    for key, name in (("energy_j", "energy_joules"), ("time_s", "time_seconds"), ("cost", "cost")):
        assert series[(f"zeus_job_{name}", j)] == pytest.approx(summary[key], rel=1e-12)
        assert series[(f"zeus_{name}_total", j)] == pytest.approx(summary[key], rel=1e-9)  # this run's tries: all of them
    assert series[("zeus_job_tries", j)] == summary["tries"] and series[("zeus_job_recurrences", j)] == summary["recurrences"]
    reached = series.get(("zeus_tries_total", (("reached", "true"), *j)), 0)
    assert reached + series.get(("zeus_tries_total", (("reached", "false"), *j)), 0) == summary["tries"]
    assert reached == summary["recurrences"] == series[("zeus_recurrences_total", j)]
    assert series[("zeus_job_batch_size", j)] == summary["knobs"]["batch_size"]
    assert series[("zeus_job_power_limit_watts", j)] == summary["knobs"]["power_limit"]
    devices = {labels for name, labels in series if name == "zeus_device_energy_joules_total"}
    assert devices == {(("device", "gpu0"), *j)}
    assert series[("zeus_device_power_watts", (("device", "gpu0"), *j))] > 0
    # each energy's +/- bound beside it (issue 37): the job's is summary.json's (null: unknown, served as NaN)
    bound = series[("zeus_job_energy_error_joules", j)]
    assert math.isnan(bound) if summary["energy_error_j"] is None else bound == pytest.approx(summary["energy_error_j"], rel=1e-12)
    assert {labels for name, labels in series if name == "zeus_device_energy_error_joules"} == devices


def test_scraped_over_loopback_after_a_job_the_series_match_summary_json(tmp_path):
    port = free_port()
    env = {**os.environ, "ZEUS_METRICS_ADDRESS": f"127.0.0.1:{port}", "ZEUS_METRICS_LINGER": "60"}
    job = run_job(str(tmp_path / "job.sqlite"), 4, tmp_path, "--output", str(tmp_path / "out"), env=env)
    summary_file = tmp_path / "out" / "summary.json"
    deadline = time.monotonic() + 120
    while not summary_file.exists():  # outputs are written before the process lingers
        assert job.poll() is None and time.monotonic() < deadline, job.stderr.read() if job.poll() is not None else "timeout"
        time.sleep(0.1)
    time.sleep(0.2)
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    job.terminate()
    job.communicate(timeout=60)
    _check(_series(text), json.loads(summary_file.read_text()))


def test_with_a_token_a_scrape_without_it_is_refused():
    """The /metrics server itself: 401 without the bearer token, the metrics with it."""
    from prometheus_client import CollectorRegistry, Gauge

    from zeus_plugins_prometheus.exporter import _serve_metrics

    registry = CollectorRegistry()
    Gauge("zeus_probe", "a probe", registry=registry).set(7)
    port = free_port()
    server = _serve_metrics("127.0.0.1", port, registry, "t" * 24)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        assert httpx.get(url, timeout=10).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer " + "t" * 23 + "x"}, timeout=10).status_code == 401
        r = httpx.get(url, headers={"Authorization": "Bearer " + "t" * 24}, timeout=10)
        assert r.status_code == 200 and "zeus_probe 7.0" in r.text
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def pushgateway(tmp_path):
    binary = shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")
    if binary is None:
        server_missing("no Pushgateway binary; .ci/run installs it (apt-get install prometheus-pushgateway)")
    port = free_port()
    # Its own persistence file: Debian's build defaults to the system's /var/lib/prometheus/pushgateway.data.
    data = tmp_path / "pushgateway.data"
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", f"--persistence.file={data}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/-/ready", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "the Pushgateway did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)
    assert data.exists()  # it persisted what it held here, at its shutdown, and nowhere else


def test_pushed_to_a_pushgateway_the_series_match_summary_json(pushgateway, tmp_path):
    env = {**os.environ, "ZEUS_PUSHGATEWAY": pushgateway, "ZEUS_PUSHGATEWAY_INSTANCE": "node-7"}
    job = run_job(str(tmp_path / "job.sqlite"), 3, tmp_path, "--output", str(tmp_path / "out"), env=env)
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0, err
    text = httpx.get(f"{pushgateway}/metrics", timeout=10).text
    families = list(text_string_to_metric_families(text))
    ours = [s for f in families for s in f.samples if s.name.startswith("zeus_")]
    assert ours and all(s.labels.get("instance") == "node-7" and s.labels.get("job") == "zeus" for s in ours)
    _check(_series(text), json.loads((tmp_path / "out" / "summary.json").read_text()))


def test_bad_configuration_is_bad_input_before_anything_runs(tmp_path):
    for var, value in (
        ("ZEUS_METRICS_ADDRESS", "not-a-port"),
        ("ZEUS_METRICS_LINGER", "-3"),
        ("ZEUS_METRICS_ADDRESS", "0.0.0.0:9464"),  # beyond this machine without a token
        ("ZEUS_METRICS_TOKEN", "short"),
        ("ZEUS_PUSHGATEWAY", "ftp://user:hunter2@gw:21"),
        ("ZEUS_PUSHGATEWAY", "http://user:hunter2@gw:port"),
    ):
        env = {**os.environ, "ZEUS_METRICS_ADDRESS": "127.0.0.1:1", var: value}
        job = run_job(str(tmp_path / "job.sqlite"), 1, tmp_path, env=env)
        out, err = job.communicate(timeout=300)
        assert job.returncode == 2 and var in err, err
        assert "hunter2" not in out + err
        assert not (tmp_path / "job.sqlite").exists()  # nothing ran, nothing was written


def test_a_pushgateway_that_does_not_answer_is_reported_once_and_the_job_goes_on(tmp_path):
    env = {**os.environ, "ZEUS_PUSHGATEWAY": f"http://user:hunter2@127.0.0.1:{free_port()}"}
    job = run_job(str(tmp_path / "job.sqlite"), 3, tmp_path, env=env)
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0, err
    assert (out + err).count("cannot push to") == 1 and "hunter2" not in out + err and "user:***@" in out + err


def test_unconfigured_it_does_nothing_and_imports_nothing():
    code = (
        "import sys, os\n"
        "from zeus_core.engine.registry import get_registry\n"
        "reg = get_registry()\n"
        "reg.pm.hook.zeus_on_job_start(job=type('J', (), {'name': 'x'})(), context=None)\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_METRICS", "ZEUS_PUSHGATEWAY"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"
