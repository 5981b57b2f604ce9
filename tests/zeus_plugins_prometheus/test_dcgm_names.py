"""dcgm-exporter's names on /metrics (``ZEUS_METRICS_NAMES``), scraped for real from a running job.

The job runs ``zeus run`` on two simulated NVIDIA GPUs (``ZEUS_FAKE_NVML``) with the
scheduler's variables set; its workload scrapes its own ``/metrics`` over loopback
mid-epoch, between two reads of the simulated driver's energy counter, and writes the
text down. The series must carry dcgm-exporter's names, types, units and labels, and the
driver's values (the energy counter between the two reads: no timing luck). The Grafana
dashboard in ``contrib/`` may use only series and labels the exporter emits.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from pg_server import free_port
from prometheus_client.parser import text_string_to_metric_families

from zeus_core import PartMismatch
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_prometheus import dcgm
from zeus_plugins_prometheus.plugin import read_config

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "contrib" / "grafana" / "zeus-dcgm-dashboard.json"

ENTRY = """
import json, os, time, urllib.request
from zeus_plugins_nvml import fake_pynvml

def _energy_mj():
    return [fake_pynvml.nvmlDeviceGetTotalEnergyConsumption(fake_pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(2)]

def train(batch_size, zeus):
    port = os.environ["ZEUS_METRICS_ADDRESS"].rpartition(":")[2]
    for _ in zeus.epochs():
        for _ in zeus.iterate(range(20)):
            time.sleep(0.001)
        fake_pynvml.nvmlInit()
        before = _energy_mj()
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        after = _energy_mj()
        fake_pynvml.nvmlShutdown()
        with open(os.environ["SCRAPE_OUT"], "w") as f:
            json.dump({"text": text, "before": before, "after": after}, f)
        zeus.report_metric(1.0)
"""

JOB = """
[job]
name = "dcgm-job"
recurrences = 1
target_metric = 0.5
store = "job.sqlite"

[workload]
plugin = "torch"
entry = "scrape_entry:train"
python_path = ["{support}"]
batch_sizes = [32]
default_batch_size = 32
threads = 1

[device]
plugin = "nvml"
gpus = [0, 1]

[batch_size]
plugin = "fixed"
default = 32
"""

SCHEDULER = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_USER": "alice",
    "POD_NAME": "train-7f9c",
    "POD_NAMESPACE": "research",
    "CONTAINER_NAME": "trainer",
    "NODE_NAME": "node-a7",
}

#: what SCHEDULER makes of the labels: dcgm-exporter's names (pod, namespace, container, hpc_job), then Slurm's
JOB_LABELS = {
    "pod": "train-7f9c",
    "namespace": "research",
    "container": "trainer",
    "hpc_job": "4242",
    "slurm_step": "0",
    "slurm_user": "alice",
}


def _run_job(tmp_path: Path, names: str, linger: bool = False, entry: str = ENTRY) -> dict:
    gpus = [fake_pynvml.FakeGpu(demand_w=250.0, temperature_c=51), fake_pynvml.FakeGpu(demand_w=180.0, temperature_c=47)]
    driver = fake_pynvml.create(tmp_path / "nvml.json", gpus, privileged=True)
    (tmp_path / "scrape_entry.py").write_text(textwrap.dedent(entry))
    job = tmp_path / "job.toml"
    job.write_text(JOB.format(support=tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_METRICS", "ZEUS_PUSHGATEWAY", "SLURM_", "POD_", "CUDA_"))}
    env.update(SCHEDULER)
    env.update(
        ZEUS_FAKE_NVML=str(driver),
        ZEUS_METRICS_ADDRESS=f"127.0.0.1:{free_port()}",
        ZEUS_METRICS_NAMES=names,
        SCRAPE_OUT=str(tmp_path / "scrape.json"),
        ZEUS_DISABLED_PLUGINS="perseus,hetero,trace,cpu",
        OMP_NUM_THREADS="1",
    )
    argv = [sys.executable, "-m", "zeus_core.cli", "run", str(job), "--output", str(tmp_path / "out")]
    if not linger:
        r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return json.loads((tmp_path / "scrape.json").read_text())
    # /metrics stays up after the job's end (its outputs are written first); the devices are closed
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env={**env, "ZEUS_METRICS_LINGER": "60"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "out" / "summary.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.communicate()[1][-3000:] if proc.poll() is not None else "timeout"
            )
            time.sleep(0.1)
        port = env["ZEUS_METRICS_ADDRESS"].rpartition(":")[2]
        after_end = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    return {**json.loads((tmp_path / "scrape.json").read_text()), "after_end": after_end}


def test_a_running_job_serves_dcgm_exporter_names_types_units_and_labels(tmp_path):
    scraped = _run_job(tmp_path, "both")
    text = scraped["text"]
    # dcgm-exporter's counter is its bare name (no _total), in the text format 0.0.4
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=" in text
    assert "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n" in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    kinds = {name: families[name].type for name in dcgm.FIELD_NAMES}
    assert kinds == {
        "DCGM_FI_DEV_GPU_TEMP": "gauge",
        "DCGM_FI_DEV_POWER_USAGE": "gauge",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
        "DCGM_FI_DEV_POWER_MGMT_LIMIT": "gauge",
        "DCGM_FI_DEV_SM_CLOCK": "gauge",
        "DCGM_FI_DEV_MEM_CLOCK": "gauge",
    }
    assert "(in W)" in families["DCGM_FI_DEV_POWER_USAGE"].documentation
    assert "(in MHz)" in families["DCGM_FI_DEV_SM_CLOCK"].documentation
    state = fake_pynvml.read_state(tmp_path / "nvml.json")["gpus"]
    for i, g in enumerate(state):
        want = {
            "gpu": str(i),
            "UUID": g["uuid"],
            "device": f"nvidia{i}",
            "modelName": g["name"],
            "Hostname": "node-a7",
            "DCGM_FI_DRIVER_VERSION": "550.54.15",
            **JOB_LABELS,
            "zeus_job": "dcgm-job",
        }
        values = {}
        for name in dcgm.FIELD_NAMES:
            (sample,) = [s for s in families[name].samples if s.labels["gpu"] == str(i)]
            assert sample.name in (name, f"{name}_total") and sample.labels == want  # the parser names a counter's samples _total
            values[name] = sample.value
        draw = min(g["demand_w"], g["limit_w"])
        assert values["DCGM_FI_DEV_POWER_USAGE"] == pytest.approx(draw)  # W, not mW
        assert values["DCGM_FI_DEV_POWER_MGMT_LIMIT"] == g["limit_w"]
        assert values["DCGM_FI_DEV_GPU_TEMP"] == g["temperature_c"]
        # MHz, as the driver reports them (nothing locked: the GPU's highest clocks)
        assert (values["DCGM_FI_DEV_SM_CLOCK"], values["DCGM_FI_DEV_MEM_CLOCK"]) == (max(g["graphics_clocks"]), max(g["mem_clocks"]))
        # mJ since the driver loaded, as NVML's counter: read between two reads of the driver's counter
        assert scraped["before"][i] - 1 <= values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] <= scraped["after"][i] + 1
    # both: the project's own series are served too, unchanged
    assert families["zeus_device_energy_joules"].type == "counter"
    # issue 37: on NVIDIA GPUs counted by their counters, every energy figure says so and carries a finite bound
    with open(tmp_path / "out" / "recurrences.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["energy_method"] == "counter" and float(r["energy_error_j"]) > 0 for r in rows)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["energy_method"] == "counter"
    assert summary["energy_error_j"] == pytest.approx(sum(float(r["energy_error_j"]) for r in rows))
    assert families["zeus_device_energy_error_joules"].type == "gauge"  # set as each try's window ends (scraped here mid-try)


def _energy(text: str) -> dict[str, float]:
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    return {s.labels["gpu"]: s.value for s in family.samples}


def test_names_dcgm_serves_only_dcgm_names_and_after_the_jobs_end_its_last_reading(tmp_path, monkeypatch):
    scraped = _run_job(tmp_path, "dcgm", linger=True)
    names = {f.name for f in text_string_to_metric_families(scraped["text"])}
    assert names == set(dcgm.FIELD_NAMES)
    # after the end, the devices closed: the reading taken at the job's end, no later than the driver's counter now
    assert {f.name for f in text_string_to_metric_families(scraped["after_end"])} == set(dcgm.FIELD_NAMES)
    during, at_end = _energy(scraped["text"]), _energy(scraped["after_end"])
    nvml = fake_pynvml.install(tmp_path / "nvml.json", monkeypatch)
    nvml.nvmlInit()
    now = [nvml.nvmlDeviceGetTotalEnergyConsumption(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(2)]
    nvml.nvmlShutdown()
    assert all(during[str(i)] <= at_end[str(i)] <= now[i] for i in range(2)), (during, at_end, now)


def test_the_default_keeps_todays_output_and_a_bad_value_is_bad_input():
    assert read_config({"ZEUS_METRICS_ADDRESS": "9464"}).names == "zeus"
    assert read_config({"ZEUS_METRICS_ADDRESS": "9464", "ZEUS_METRICS_NAMES": "both"}).names == "both"
    with pytest.raises(PartMismatch, match=r"ZEUS_METRICS_NAMES='dcmg'.*zeus, dcgm, both"):
        read_config({"ZEUS_METRICS_ADDRESS": "9464", "ZEUS_METRICS_NAMES": "dcmg"})
    with pytest.raises(PartMismatch, match="ZEUS_METRICS_NAMES=dcgm.*set ZEUS_METRICS_ADDRESS"):
        read_config({"ZEUS_PUSHGATEWAY": "http://gw:9091", "ZEUS_METRICS_NAMES": "dcgm"})


def test_job_labels_come_from_slurm_and_the_downward_api_and_unset_ones_are_absent():
    assert dcgm.job_labels(SCHEDULER) == JOB_LABELS
    assert dcgm.job_labels({"SLURM_JOB_ID": " ", "POD_NAME": ""}) == {}
    assert dcgm.hostname({"NODE_NAME": "node-a7"}) == "node-a7"


def _exprs(node) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "expr" and isinstance(v, str)] + [e for v in node.values() for e in _exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


def test_the_grafana_dashboard_reads_only_what_the_exporter_emits():
    board = json.loads(DASHBOARD.read_text())
    assert board["title"] and board["panels"]
    exprs = _exprs(board["panels"])
    assert len(exprs) >= 4
    # a series is a name before its selector: every expression here selects (by Hostname at least)
    used = {m for e in exprs for m in re.findall(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\s*\{", e)}
    assert all(re.findall(r"\bDCGM_\w+", e) == re.findall(r"\bDCGM_\w+(?=\s*\{)", e) for e in exprs)
    assert used and used <= set(dcgm.FIELD_NAMES), used - set(dcgm.FIELD_NAMES)
    assert {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"} <= used
    labels = {label.strip() for e in exprs for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", e) for label in group.split(",")}
    labels |= {m for e in exprs for m in re.findall(r"([A-Za-z_]+)\s*=~?\s*\"", e)}
    assert labels <= set(dcgm.ALL_LABELS), labels - set(dcgm.ALL_LABELS)
    # template variables query label values of emitted series too
    for var in board.get("templating", {}).get("list", []):
        query = var.get("query")
        text = query if isinstance(query, str) else (query or {}).get("query", "")
        if var.get("type") == "query":
            m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", text.strip())
            assert m and m.group(1) in dcgm.FIELD_NAMES and m.group(2) in dcgm.ALL_LABELS, text


def test_amd_gpus_serve_their_gfx_and_memory_clocks_as_dcgms_clock_fields(tmp_path, monkeypatch):
    """The amdsmi device's clocks on dcgm-exporter's names: the GFX clock is the SM clock's field, and a
    lock (a frequency plan's ceiling) shows in the next scrape."""
    from zeus_plugins_amdsmi import fake_amdsmi
    from zeus_plugins_amdsmi.device import AmdGpus
    from zeus_plugins_amdsmi.options import AmdsmiOptions

    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ZEUS_STATE_DIR", str(tmp_path / "state"))
    fake_amdsmi.install(fake_amdsmi.create(tmp_path / "amd.json", 2, privileged=True), monkeypatch)

    def clocks(series: dcgm.DcgmSeries) -> dict[str, dict[str, float]]:
        families = {f.name: f for f in text_string_to_metric_families(series.render())}
        assert families["DCGM_FI_DEV_SM_CLOCK"].type == "gauge" and "(in MHz)" in families["DCGM_FI_DEV_MEM_CLOCK"].documentation
        return {
            name: {s.labels["gpu"]: s.value for s in families[name].samples} for name in ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK")
        }

    with AmdGpus(AmdsmiOptions(counter_check_s=0.02)) as dev:
        series = dcgm.DcgmSeries(dev, "amd-job", {"NODE_NAME": "node-b"}, plugin="amdsmi")
        assert clocks(series) == {"DCGM_FI_DEV_SM_CLOCK": {"0": 2100.0, "1": 2100.0}, "DCGM_FI_DEV_MEM_CLOCK": {"0": 1300.0, "1": 1300.0}}
        dev.gpus[1].lock_clocks(1395)
        assert clocks(series)["DCGM_FI_DEV_SM_CLOCK"] == {"0": 2100.0, "1": 1395.0}


#: the job's process beside another on GPU 0 at 30 % and 10 % SM: the driver lists both, so each try is charged its share
SHARED_ENTRY = ENTRY.replace(
    "def train(batch_size, zeus):\n",
    "def train(batch_size, zeus):\n    fake_pynvml.set_processes(0, [{'pid': os.getpid(), 'sm': 30.0}, {'pid': 1, 'sm': 10.0}])\n",
)


def test_the_tries_attributed_energy_is_served_with_the_schedulers_labels_and_marked_an_estimate(tmp_path):
    """Issue 36 item 7 with item 5's labels: the energy charged to the job's own process on the GPU it shared,
    as recurrences.csv and summary.json have it, labelled with its pod and Slurm job, its HELP an estimate."""
    scraped = _run_job(tmp_path, "both", linger=True, entry=SHARED_ENTRY)
    families = {f.name: f for f in text_string_to_metric_families(scraped["after_end"])}
    family = families["zeus_attributed_energy_joules"]
    assert family.type == "counter" and family.documentation.startswith("Estimate")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    with open(tmp_path / "out" / "recurrences.csv") as f:
        rows = list(csv.DictReader(f))
    # one series per basis the tries were charged by (sm, or equal shares where the driver had no SM sample yet)
    assert {s.labels["basis"] for s in family.samples} == {r["energy_attribution"] for r in rows}
    assert all({k: v for k, v in s.labels.items() if k != "basis"} == {"zeus_job": "dcgm-job", **JOB_LABELS} for s in family.samples)
    served = sum(s.value for s in family.samples)
    assert served == pytest.approx(summary["energy_attributed_j"], rel=1e-9)
    assert served == pytest.approx(sum(float(r["energy_attributed_j"]) for r in rows), rel=1e-9)
    assert 0 < served < summary["energy_j"]  # a share of the two GPUs' energy, not all of it
