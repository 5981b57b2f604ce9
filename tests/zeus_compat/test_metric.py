"""``zeus.metric``: upstream's Prometheus metrics on the simulated NVIDIA driver, pushed to a real Pushgateway.

The series are upstream's (names, ``window``/``index``/``job`` labels, histogram buckets); the values are
what this package's monitors measure: GPU 0 draws 250 W and GPU 1 150 W on the simulated driver.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import warnings

import httpx
import pytest
from cluster_helpers import server_missing
from pg_server import free_port
from prometheus_client.parser import text_string_to_metric_families
from zeus_test_helpers import timed_window

from zeus_plugins_nvml import fake_pynvml


@pytest.fixture
def pushgateway(tmp_path):
    binary = shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")
    if binary is None:
        server_missing("no Pushgateway binary; .ci/run installs it (apt-get install prometheus-pushgateway)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", f"--persistence.file={tmp_path / 'pushgateway.data'}"],
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


def _series(gateway: str, prefix: str) -> dict[tuple[str, tuple], float]:
    """The gateway's samples whose name starts with ``prefix``: (name, sorted labels but ``instance``) -> value."""
    out = {}
    for family in text_string_to_metric_families(httpx.get(f"{gateway}/metrics", timeout=10).text):
        for s in family.samples:
            if s.name.startswith(prefix):
                out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "instance")))] = s.value
    return out


@pytest.fixture
def two_gpus(driver):
    driver(gpus=2)
    fake_pynvml.set_demand(1, 150.0)


def test_energy_histogram_pushes_each_windows_energy_with_upstreams_series(two_gpus, pushgateway):
    from zeus.metric import EnergyHistogram

    hist = EnergyHistogram(
        cpu_indices=[], gpu_indices=[0, 1], pushgateway_url=pushgateway, job="train", gpu_bucket_range=[10.0, 50.0, 100.0]
    )
    measured = []
    end = hist.energy_monitor.end_window
    hist.energy_monitor.end_window = lambda *a, **k: measured.append(end(*a, **k)) or measured[-1]
    spans = [
        timed_window(lambda: hist.begin_window("step", sync_execution=False), lambda: hist.end_window("step", sync_execution=False), 0.2)[1]
        for _ in range(2)
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hist.begin_window("tiny", sync_execution=False)
        hist.end_window("tiny", sync_execution=False)
    assert sorted(str(w.message).split(" energy ")[0] for w in caught) == ["GPU 0", "GPU 1"]
    assert all(str(w.message).endswith("is below the minimum bucket value of 10.0") for w in caught)
    series = _series(pushgateway, "energy_monitor_")
    assert not any("cpu" in name or "dram" in name for name, _ in series)
    for index in (0, 1):
        labels = (("index", str(index)), ("job", "train"), ("window", "step"))
        energies = [m.gpu_energy[index] for m in measured[:2]]
        assert series[("energy_monitor_gpu_energy_joules_sum", labels)] == pytest.approx(sum(energies))
        assert series[("energy_monitor_gpu_energy_joules_count", labels)] == 2
        buckets = {
            float(dict(k)["le"]): v
            for (name, k), v in series.items()
            if name == "energy_monitor_gpu_energy_joules_bucket" and tuple(x for x in k if x[0] != "le") == labels
        }
        assert buckets == {le: sum(e <= le for e in energies) for le in (10.0, 50.0, 100.0, float("inf"))}
    e0, e1 = (measured[0].gpu_energy[i] for i in (0, 1))
    # between the first window's shortest and longest length (the times around its calls; a loaded machine can
    # part the monitor's clock reading from its energy reading by more than 5% of 0.2 s)
    assert e0 == spans[0].drawn(250, rel=0.05) and e1 == spans[0].drawn(150, rel=0.05)
    tiny = (("index", "0"), ("job", "train"), ("window", "tiny"))
    assert series[("energy_monitor_gpu_energy_joules_count", tiny)] == 1


def test_an_empty_bucket_range_is_a_value_error(two_gpus):
    from zeus.metric import EnergyHistogram

    with pytest.raises(ValueError, match="DRAM bucket range cannot be empty"):
        EnergyHistogram([], [0], "http://127.0.0.1:9", "j", dram_bucket_range=[])


def _wait_for(gateway: str, name: str, count: int = 1, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        series = _series(gateway, name)
        if len([k for k in series if k[0] == name]) >= count:
            return series
        assert time.monotonic() < deadline, f"{name} was never pushed"
        time.sleep(0.1)


def test_energy_cumulative_counter_adds_each_periods_energy_in_a_spawned_process(two_gpus, pushgateway):
    from zeus.metric import EnergyCumulativeCounter

    counter = EnergyCumulativeCounter(cpu_indices=[], gpu_indices=[0, 1], update_period=0.5, pushgateway_url=pushgateway, job="train")
    counter.begin_window("epoch")
    assert counter.window_state["epoch"].proc.is_alive()
    _wait_for(pushgateway, "energy_monitor_gpu_energy_joules_total", 2)
    time.sleep(1.2)  # two more periods
    counter.end_window("epoch")
    assert "epoch" not in counter.window_state
    series = _series(pushgateway, "energy_monitor_gpu_energy_joules_total")
    e0 = series[("energy_monitor_gpu_energy_joules_total", (("index", "0"), ("job", "train"), ("window", "epoch")))]
    e1 = series[("energy_monitor_gpu_energy_joules_total", (("index", "1"), ("job", "train"), ("window", "epoch")))]
    assert e0 >= 250 * 0.5 * 2  # at least two periods of 250 W were added
    assert e1 / e0 == pytest.approx(150 / 250, rel=0.02)  # the same periods, each GPU's own draw
    with pytest.raises(ValueError, match="No active monitoring process found for 'epoch'"):
        counter.end_window("epoch")


def test_power_gauge_sets_each_gpus_power_in_a_spawned_process(two_gpus, pushgateway):
    from zeus.metric import PowerGauge

    gauge = PowerGauge(gpu_indices=[0, 1], update_period=0.2, pushgateway_url=pushgateway, job="train")
    gauge.begin_window("epoch")
    with pytest.raises(ValueError, match="PowerGauge metric 'epoch' already exists"):
        gauge.begin_window("epoch")
    series = _wait_for(pushgateway, "power_monitor_gpu_power_watts", 2)
    gauge.end_window("epoch")
    assert series == {
        ("power_monitor_gpu_power_watts", (("index", "0"), ("job", "train"), ("window", "epoch"))): 250.0,
        ("power_monitor_gpu_power_watts", (("index", "1"), ("job", "train"), ("window", "epoch"))): 150.0,
    }
    assert "epoch" not in gauge.window_state
