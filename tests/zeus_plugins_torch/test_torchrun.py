"""Ranks a launcher started are one job: ``torchrun`` on one machine and on two (c10d on loopback).

Each rank trains on its own simulated GPU (the driver of ``ZEUS_FAKE_NVML``, shared like a real
one). Rank 0 decides, every rank follows at every step, energies are summed, and the store holds
exactly the requested recurrences, whether the job is driven from the script
(``ZeusMonitor``, ``BatchSizeOptimizer``, ``PowerLimitOptimizer``) or by ``run_job`` / ``zeus run``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from allocation_model import single_process_params
from inloop_helpers import fake_gpus, launcher_env, limits, torchrun

from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store

HERE = Path(__file__).resolve().parent

LAUNCHED = """
[job]
name = "launched"
recurrences = 2
target_metric = 0.5
store = "launched.sqlite"

[workload]
plugin = "torch"
entry = "inloop_helpers:train_recording"
batch_sizes = [16, 32, 64]
default_batch_size = 32
threads = 1
timeout_s = 60

[workload.args]
out = "{out}/launched-{{rank}}.jsonl"

[device]
plugin = "nvml"

[batch_size]
plugin = "mab"

[power]
plugin = "jit"
warmup_iters = 1
measure_iters = 2
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tries(path: Path) -> list:
    store = open_store(path, get_registry())
    try:
        return store.tries()
    finally:
        store.close()


def test_two_ranks_on_one_machine_are_one_job_from_a_script_and_from_run_job(tmp_path, monkeypatch):
    driver = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)
    (tmp_path / "launched.toml").write_text(LAUNCHED.format(out=tmp_path))
    p = subprocess.run(
        torchrun("--standalone", "--nproc-per-node=2", str(HERE / "torchrun_worker.py"), str(tmp_path)),
        env=launcher_env(driver, HERE),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    assert limits(driver) == [400.0, 400.0]  # every device put back

    # From the script: exactly the two recurrences asked for; one choice and one limit per step on both ranks.
    scripted = [json.loads((tmp_path / f"scripted-{r}.json").read_text()) for r in (0, 1)]
    assert [t["gpus"] for t in scripted[0]] == [[0], [0]] and [t["gpus"] for t in scripted[1]] == [[1], [1]]
    tries = _tries(tmp_path / "scripted.sqlite")
    assert [(t.recurrence, t.try_index) for t in tries] == [(1, 1), (2, 1)]
    for k, t in enumerate(tries):
        assert scripted[0][k]["steps"] == scripted[1][k]["steps"]  # same batch size and limit at every step
        assert {b for b, _ in scripted[0][k]["steps"]} == {t.batch_size}
        assert t.energy_j == pytest.approx(scripted[0][k]["energy_j"] + scripted[1][k]["energy_j"])  # the ranks' sum
        assert scripted[0][k]["recorded_j"] == scripted[1][k]["recorded_j"] == t.energy_j
    assert len({lim for _, lim in scripted[0][0]["steps"]}) == 13  # the first try profiled every limit on both GPUs

    # From run_job (what zeus run runs): the same, through the torch workload.
    assert json.loads((tmp_path / "launched-summary-0.json").read_text())["recurrences"] == 2
    tries = _tries(tmp_path / "launched.sqlite")
    assert [(t.recurrence, t.try_index) for t in tries] == [(1, 1), (2, 1)]
    seen = [[json.loads(x) for x in (tmp_path / f"launched-{r}.jsonl").read_text().splitlines()] for r in (0, 1)]
    assert len(seen[0]) == len(seen[1]) == 2
    for k, t in enumerate(tries):
        assert seen[0][k]["steps"] == seen[1][k]["steps"] and {b for b, _ in seen[0][k]["steps"]} == {t.batch_size}
        assert t.energy_j == pytest.approx(seen[0][k]["energy_j"] + seen[1][k]["energy_j"])
        assert t.power_limit == seen[0][k]["steps"][-1][1]


ALLOCATED_TRAINER = textwrap.dedent("""
    import json, os
    import torch
    from allocation_model import make_data, make_model
    from inloop_helpers import gpu_limit

    def train(batch_size, zeus):
        steps, B = 3, zeus.batch_size
        x, y = make_data(B * steps)
        model = zeus.wrap_model(make_model())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        held = []
        for epoch in zeus.epochs():
            for i in zeus.iterate(range(steps)):
                xb, yb = x[i * B:(i + 1) * B][zeus.batch_slice], y[i * B:(i + 1) * B][zeus.batch_slice]
                held.append(gpu_limit(int(os.environ["CUDA_VISIBLE_DEVICES"])))
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(xb), yb).backward()
                opt.step()
            zeus.report_metric(1.0)
        with open(zeus.args["out"].format(rank=zeus.rank), "w") as f:
            json.dump({"local_batch_size": batch_size, "held": held, "node": os.environ["CUDA_VISIBLE_DEVICES"],
                       "params": torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()}, f)
""")

ALLOCATED = """
[job]
name = "across"
recurrences = 1
target_metric = 0.5
max_epochs = 1
store = "across.sqlite"

[workload]
plugin = "torch"
entry = "alloc_trainer:train"
allocation = "allocation.json"
threads = 1
timeout_s = 60

[workload.args]
out = "{out}/across-{{rank}}.json"

[device]
plugin = "nvml"

[batch_size]
plugin = "fixed"
"""


def test_two_machines_train_one_job_by_a_zeus2_allocation(tmp_path, monkeypatch):
    """Two torchrun "machines" on loopback (c10d rendezvous), one rank each on its own GPU: each rank
    trains its allocated local batch at its allocated limit by global rank, and the uneven-batch step
    equals one process's step on the whole batch."""
    driver = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)
    (tmp_path / "alloc_trainer.py").write_text(ALLOCATED_TRAINER)
    ranks = [
        {"rank": 0, "gpu": "A10", "local_batch": 3, "power_limit": 300},
        {"rank": 1, "gpu": "T4", "local_batch": 5, "power_limit": 200},
    ]
    (tmp_path / "allocation.json").write_text(json.dumps({"ranks": ranks, "global_batch_size": 8}))
    (tmp_path / "job.toml").write_text(ALLOCATED.format(out=tmp_path))
    port = _free_port()
    nodes = [
        subprocess.Popen(
            torchrun(
                "--nnodes=2",
                "--nproc-per-node=1",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}",
                "--rdzv-id=zeus-across",
                "--no-python",
                str(Path(sys.executable).parent / "zeus"),
                "run",
                "job.toml",
            ),
            env=launcher_env(driver, HERE, CUDA_VISIBLE_DEVICES=str(node)),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for node in (0, 1)
    ]
    outs = [n.communicate(timeout=240)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], "\n".join(o[-4000:] for o in outs)
    assert limits(driver) == [400.0, 400.0]
    got = [json.loads((tmp_path / f"across-{r}.json").read_text()) for r in (0, 1)]
    assert [g["local_batch_size"] for g in got] == [3, 5]  # by global rank, whichever node
    assert set(got[0]["held"]) == {300.0} and set(got[1]["held"]) == {200.0}
    assert [t.recurrence for t in _tries(tmp_path / "across.sqlite")] == [1]
    expected = single_process_params(8, 3)
    for g in got:
        np.testing.assert_allclose(np.array(g["params"]), expected, rtol=0, atol=1e-6)


DYING = textwrap.dedent("""
    import os
    from zeus_core import PowerLimitOptimizer, ZeusMonitor
    monitor = ZeusMonitor(cpu_indices=[])
    plo = PowerLimitOptimizer(monitor, "jit", job="dying", options={"warmup_iters": 1, "measure_iters": 8})
    plo.on_epoch_begin()
    for step in range(100):
        if step == 40 and os.environ["RANK"] == "1":
            os._exit(3)  # killed mid-profile: nothing of this process restores its GPU
        plo.on_step_begin()
        plo.on_step_end()
    plo.on_epoch_end()
""")


def test_a_rank_that_dies_stops_the_job_and_every_device_is_restored(tmp_path, monkeypatch):
    driver = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)
    (tmp_path / "dying.py").write_text(DYING)
    p = subprocess.run(
        torchrun("--standalone", "--nproc-per-node=2", "dying.py"),
        env=launcher_env(driver, HERE),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode != 0 and "exitcode  : 3" in p.stderr + p.stdout, p.stderr[-4000:]
    from zeus_core import ZeusMonitor

    with ZeusMonitor(cpu_indices=[]):  # the next zeus start puts back what the killed rank left
        assert limits(driver) == [400.0, 400.0]


def test_a_job_with_no_way_to_succeed_is_refused_before_it_trains(tmp_path, registry, write_trainer):
    from zeus_test_helpers import run_cli

    module = write_trainer(tmp_path)
    job = tmp_path / "job.toml"
    job.write_text(
        f'[job]\nname = "nogoal"\n[workload]\nplugin = "torch"\nentry = "{module}:train"\n'
        'batch_sizes = [8]\n[device]\nplugin = "wall"\n[batch_size]\nplugin = "fixed"\ndefault = 8\n'
    )
    r = run_cli(registry, "run", str(job))
    assert r.exit_code == 2
    assert "job.target_metric is not set, so no try can reach the target" in r.output
    assert "workload.marks_reached = true" in r.output and not (tmp_path / ".zeus" / "nogoal.sqlite").exists()
