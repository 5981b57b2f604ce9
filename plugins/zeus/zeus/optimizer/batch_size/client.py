"""Upstream's batch-size optimizer client: asks ``zeus serve`` for a batch size, reports each epoch.

Call, in a training script: ``get_batch_size()`` first, ``on_train_begin()`` before the first
epoch, ``on_evaluate(metric)`` after each. The server ends the trial (``training_finished``) at
the target metric, at ``max_epochs``, or early when its cost passes ``beta_knob`` times the best
so far; a trial stopped before the target raises :class:`ZeusBSOTrainFailError` (relaunch the
script: the server chooses again).
"""

from __future__ import annotations

import atexit
import logging

import httpx

from zeus.callback import Callback
from zeus.device import get_gpus
from zeus.monitor import ZeusMonitor
from zeus.optimizer.batch_size.common import (
    GET_NEXT_BATCH_SIZE_URL,
    REGISTER_JOB_URL,
    REPORT_END_URL,
    REPORT_RESULT_URL,
    CreatedJob,
    JobSpec,
    JobSpecFromClient,
    ReportResponse,
    TrainingResult,
    TrialId,
)
from zeus.optimizer.batch_size.exceptions import (
    ZeusBSOBadOperationError,
    ZeusBSOConfigError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)

logger = logging.getLogger(__name__)

WINDOW = "BatciSizeOptimizerClient"  # upstream's window name (sic), kept: scripts may look for it


class BatchSizeOptimizer(Callback):
    """One training session of a recurring job, steered by the batch-size optimizer at ``server_url``."""

    def __init__(self, monitor: ZeusMonitor, server_url: str, job: JobSpec, rank: int = 0) -> None:
        self.monitor = monitor
        self.server_url = server_url.rstrip("/")
        self.rank = rank
        self.cur_epoch = 0
        self.running_time = 0.0
        self.consumed_energy = 0.0
        self.training_finished = False
        self.trial_number = 0
        self.current_batch_size = 0
        gpus = get_gpus(ensure_homogeneous=True)
        if len(gpus) == 0:
            raise ZeusBSOConfigError("No GPUs detected.")
        self.job_spec = JobSpecFromClient(
            **job.model_dump(),
            max_power=gpus.get_power_management_limit_constraints(0)[1] // 1000 * len(monitor.gpu_indices),
            number_of_gpus=len(monitor.gpu_indices),
            gpu_model=gpus.get_name(0),
        )
        res = self._send("post", REGISTER_JOB_URL, content=self.job_spec.model_dump_json())
        self.job = CreatedJob.model_validate(res.json())
        logger.info("Job registered with job_id %s", self.job.job_id)

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            res = getattr(httpx, method)(self.server_url + path, **kwargs)  # httpx.post/get/patch, as upstream calls them
        except httpx.HTTPError as e:
            raise ZeusBSORuntimError(f"Zeus server at {self.server_url} cannot be reached: {e}") from None
        if not 200 <= res.status_code < 300:
            raise ZeusBSORuntimError(f"Zeus server returned status code {res.status_code}: {res.text}")
        return res

    def get_batch_size(self) -> int:
        """The batch size of this trial (asked once; only rank 0 asks)."""
        if self.rank != 0:
            raise ZeusBSOBadOperationError("Only rank 0 gpu can ask for a batch size.")
        if self.current_batch_size != 0:
            return self.current_batch_size
        self.cur_epoch = 0
        res = self._send("get", GET_NEXT_BATCH_SIZE_URL, params={"job_id": self.job.job_id})
        trial = TrialId.model_validate(res.json())
        if trial.batch_size not in self.job.batch_sizes:
            raise ZeusBSORuntimError(f"Zeus server returned a strange batch_size: {trial.batch_size}")
        self.current_batch_size = trial.batch_size
        self.trial_number = trial.trial_number

        def report_end() -> None:
            try:
                httpx.patch(self.server_url + REPORT_END_URL, content=trial.model_dump_json())
            except httpx.HTTPError as e:
                logger.warning("could not tell the server that trial %d ended: %s", trial.trial_number, e)

        atexit.register(report_end)
        return trial.batch_size

    def on_train_begin(self) -> None:
        """Training begins: the first epoch's window opens."""
        self.training_finished = False
        self.monitor.begin_window(WINDOW)

    def on_evaluate(self, metric: float) -> None:
        """An epoch ended with validation ``metric``: report it; the server says whether to go on."""
        if self.current_batch_size == 0:
            raise ZeusBSOOperationOrderError("Call get_batch_size to set the batch size first")
        if self.training_finished:
            return
        self.cur_epoch += 1
        m = self.monitor.end_window(WINDOW)
        self.running_time += m.time
        self.consumed_energy += m.total_energy
        result = TrainingResult(
            job_id=self.job.job_id,
            batch_size=self.current_batch_size,
            trial_number=self.trial_number,
            time=self.running_time,
            energy=self.consumed_energy,
            metric=metric,
            current_epoch=self.cur_epoch,
        )
        res = self._send("post", REPORT_RESULT_URL, content=result.model_dump_json())
        answer = ReportResponse.model_validate(res.json())
        if not answer.stop_train:
            self.monitor.begin_window(WINDOW)
            return
        self.training_finished = True
        if not answer.converged:
            raise ZeusBSOTrainFailError(
                f"Train failed: {answer.message} This batch size will not be selected again. Please re-launch the training"
            )
