"""Upstream's batch-size optimizer client against a real ``zeus serve`` on loopback."""

from __future__ import annotations

import httpx
import pytest
from serve_helpers import Serve
from zeus.monitor import ZeusMonitor
from zeus.optimizer.batch_size import BatchSizeOptimizer, JobSpec
from zeus.optimizer.batch_size.exceptions import (
    ZeusBSOBadOperationError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    with Serve(store=str(tmp_path_factory.mktemp("jobs"))) as svc:
        yield svc


def _train(bso: BatchSizeOptimizer, metrics: list[float]) -> int:
    """One training session: epochs until the server stops it; the number of epochs run."""
    bso.on_train_begin()
    for epoch, metric in enumerate(metrics, 1):
        bso.on_evaluate(metric)
        if bso.training_finished:
            return epoch
    return len(metrics)


def test_trials_through_zeus_serve(serve, driver):
    driver(gpus=1, max_limit_w=300.0)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    spec = JobSpec(
        job_id="mnist-compat-1",
        job_id_prefix="mnist",
        batch_sizes=[32, 64, 128],
        default_batch_size=64,
        target_metric=0.9,
        max_epochs=3,
        mab_seed=1,
        beta_knob=None,  # no early stop: the costs here are measured in real time, so only max_epochs may end a trial
    )
    bso = BatchSizeOptimizer(monitor, serve.url, spec)
    assert bso.job.job_id == "mnist-compat-1" and bso.job.max_power == 300 and bso.job.number_of_gpus == 1
    with pytest.raises(ZeusBSOOperationOrderError):
        bso.on_evaluate(0.1)
    first = bso.get_batch_size()
    assert first == 64  # the default first, as upstream's server
    assert bso.get_batch_size() == first  # asked once
    assert _train(bso, [0.5, 0.95]) == 2  # the target stops the trial, converged
    assert bso.training_finished

    # the next session tries another batch size; one that never reaches the target fails at max_epochs
    again = BatchSizeOptimizer(monitor, serve.url, spec)
    second = again.get_batch_size()
    assert second in (32, 128) and again.trial_number == 2
    with pytest.raises(ZeusBSOTrainFailError, match="max_epochs 3"):
        _train(again, [0.1, 0.2, 0.3, 0.4])

    # a process that ends before its first report (the client's exit hook says so) leaves a failed try
    third = BatchSizeOptimizer(monitor, serve.url, spec)
    size = third.get_batch_size()
    with httpx.Client(base_url=serve.url) as http:
        ended = http.patch("/trials", content=f'{{"job_id": "mnist-compat-1", "batch_size": {size}, "trial_number": 3}}')
        assert ended.status_code == 200, ended.text
        # the trials are the job's tries in the service's store: recurrence 2 holds the two failed ones
        tries = http.get("/v1/jobs/mnist-compat-1/history").json()["tries"]
    assert [(t["recurrence"], t["batch_size"], t["reached"], t["epochs"], t["stopped"]) for t in tries] == [
        (1, first, True, 2, None),
        (2, second, False, 3, "max-epochs"),
        (2, size, False, 0, "never-ran"),
    ]


def test_a_trial_whose_cost_passes_beta_knob_times_the_cheapest_is_stopped_early(serve, driver):
    """The reports carry the time and energy; with fixed ones the early stop is exact (cost = eta x E + (1 - eta) x P x T)."""
    driver(gpus=1, max_limit_w=300.0)
    spec = JobSpec(
        job_id="mnist-compat-5",
        job_id_prefix="mnist",
        batch_sizes=[32, 64],
        default_batch_size=32,
        target_metric=0.9,
        max_epochs=10,
        eta_knob=0.5,
        beta_knob=2.0,
    )
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])

    def report(bso: BatchSizeOptimizer, epoch: int, time: float, energy: float, metric: float) -> dict:
        body = {
            "job_id": spec.job_id,
            "batch_size": bso.current_batch_size,
            "trial_number": bso.trial_number,
            "time": time,
            "energy": energy,
            "metric": metric,
            "current_epoch": epoch,
        }
        with httpx.Client(base_url=serve.url) as http:
            answer = http.post("/report", json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()

    first = BatchSizeOptimizer(monitor, serve.url, spec)
    first.get_batch_size()
    assert report(first, 1, 10.0, 2000.0, 0.95)["converged"]  # cost 0.5 x 2000 + 0.5 x 300 x 10 = 2500
    second = BatchSizeOptimizer(monitor, serve.url, spec)
    second.get_batch_size()
    under = report(second, 1, 10.0, 3000.0, 0.1)  # 3000 <= 2 x 2500: go on
    assert (under["stop_train"], under["converged"]) == (False, False)
    over = report(second, 2, 20.0, 4200.0, 0.2)  # 0.5 x 4200 + 0.5 x 300 x 20 = 5100 > 5000
    assert (over["stop_train"], over["converged"]) == (True, False)
    assert "Cost 5100 exceeded the early-stop threshold 5000" in over["message"]


def test_registration_errors(serve, driver):
    driver(gpus=1)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    spec = JobSpec(job_id="mnist-compat-2", job_id_prefix="mnist", batch_sizes=[32, 64], default_batch_size=32)
    BatchSizeOptimizer(monitor, serve.url, spec)
    other = spec.model_copy(update={"batch_sizes": [32, 64, 256]})
    with pytest.raises(ZeusBSORuntimError, match="status code 409.*another configuration"):
        BatchSizeOptimizer(monitor, serve.url, other)
    with pytest.raises(ZeusBSOBadOperationError):
        BatchSizeOptimizer(monitor, serve.url, spec, rank=1).get_batch_size()
    with httpx.Client(base_url=serve.url) as http:
        assert http.get("/jobs/batch_size", params={"job_id": "mnist-never"}).status_code == 404
        bad = http.post(
            "/jobs",
            json={
                "job_id_prefix": "x",
                "batch_sizes": [8],
                "default_batch_size": 16,
                "max_power": 300,
                "number_of_gpus": 1,
                "gpu_model": "A100",
            },
        )
        assert bad.status_code == 422 and "Default BS(16)" in bad.text
    with pytest.raises(ZeusBSORuntimError, match="cannot be reached"):
        BatchSizeOptimizer(monitor, "http://127.0.0.1:9", spec)


def test_concurrent_trials_while_pruning_are_refused_clearly(serve, driver):
    """The mab policy prunes one batch size at a time: a second trial begun meanwhile is answered 409, never 5xx."""
    driver(gpus=1)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    spec = JobSpec(
        job_id="mnist-compat-3", job_id_prefix="mnist", batch_sizes=[32, 64], default_batch_size=32, target_metric=0.5, max_epochs=2
    )
    a, b = BatchSizeOptimizer(monitor, serve.url, spec), BatchSizeOptimizer(monitor, serve.url, spec)
    assert (a.get_batch_size(), b.get_batch_size()) == (32, 32)  # pruning hands out its current batch size
    assert _train(b, [0.9]) == 1
    with pytest.raises(ZeusBSORuntimError, match="status code 409.*one after another"):
        _train(a, [0.1, 0.2])


def test_every_rank_of_a_data_parallel_trial_reports_and_the_late_ranks_are_told_it_ended(serve, driver):
    """Upstream's data-parallel example: rank 0 gets the batch size, every rank reports each epoch; the reports after
    the one that ended the trial are answered as upstream's server does (stop, converged as recorded), and the
    trial is recorded once."""
    driver(gpus=2)
    spec = JobSpec(
        job_id="mnist-compat-4", job_id_prefix="mnist", batch_sizes=[32, 64], default_batch_size=64, target_metric=0.5, max_epochs=3
    )
    ranks = [BatchSizeOptimizer(ZeusMonitor(gpu_indices=[i], cpu_indices=[]), serve.url, spec, rank=i) for i in (0, 1)]
    size = ranks[0].get_batch_size()
    ranks[1].current_batch_size, ranks[1].trial_number = size, ranks[0].trial_number  # broadcast, as the example does
    for bso in ranks:
        bso.on_train_begin()
    ranks[0].on_evaluate(0.6)  # reached: the trial ends
    ranks[1].on_evaluate(0.4)  # below the target on its shard: told the trial ended, converged
    assert ranks[0].training_finished and ranks[1].training_finished
    with httpx.Client(base_url=serve.url) as http:
        tries = http.get("/v1/jobs/mnist-compat-4/history").json()["tries"]
        late = http.post(
            "/report",
            json={
                "job_id": "mnist-compat-4",
                "batch_size": size,
                "trial_number": 1,
                "time": 1.0,
                "energy": 1.0,
                "metric": 0.1,
                "current_epoch": 1,
            },
        )
    assert [(t["batch_size"], t["reached"]) for t in tries] == [(size, True)]
    assert late.status_code == 200 and late.json()["stop_train"] and late.json()["converged"]


def test_requests_go_through_httpx_post_get_and_patch_as_upstreams(serve, driver, monkeypatch):
    """Upstream's tests put a test client's methods in place of ``httpx.post``/``get``/``patch``."""
    driver(gpus=1, max_limit_w=300.0)
    calls = []
    for verb in ("post", "get", "patch"):
        real = getattr(httpx, verb)
        monkeypatch.setattr(httpx, verb, lambda url, *a, _verb=verb, _real=real, **k: calls.append((_verb, url)) or _real(url, *a, **k))
    spec = JobSpec(
        job_id="via-httpx-verbs", job_id_prefix="via-httpx", batch_sizes=[32, 64], default_batch_size=32, target_metric=0.5, max_epochs=3
    )
    bso = BatchSizeOptimizer(ZeusMonitor(gpu_indices=[0], cpu_indices=[]), serve.url, spec)
    bso.get_batch_size()
    assert [v for v, _ in calls] == ["post", "get"] and calls[0][1].startswith(serve.url)
