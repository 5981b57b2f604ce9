"""The wire format of the batch-size optimizer protocol (upstream's), spoken by this client and ``zeus serve``."""

from __future__ import annotations

import builtins
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

REGISTER_JOB_URL = "/jobs"
DELETE_JOB_URL = "/jobs"
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"
REPORT_RESULT_URL = "/report"
REPORT_END_URL = "/trials"


class _Pydantic1Spellings(BaseModel):
    """Upstream's models are pydantic 1's: ``dict()``, ``json()`` and ``parse_obj()`` keep working."""

    def dict(self, **kwargs: Any) -> builtins.dict[str, Any]:
        return self.model_dump(**kwargs)

    def json(self, **kwargs: Any) -> str:
        return self.model_dump_json(**kwargs)

    @classmethod
    def parse_obj(cls, obj: Any) -> Any:
        return cls.model_validate(obj)


class JobParams(_Pydantic1Spellings):
    """A job's parameters: its batch sizes and default, the cost knobs, the target and the MAB's settings."""

    job_id: str
    job_id_prefix: str
    batch_sizes: list[int]
    default_batch_size: int = Field(gt=0)
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    target_metric: float = 0.50
    higher_is_better_metric: bool = True
    max_epochs: int = Field(default=100, gt=0)
    num_pruning_rounds: int = Field(default=2, ge=0)
    window_size: int = 0
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = 0.0
    mab_num_explorations: int = Field(default=2, ge=0)
    mab_seed: int | None = None

    @field_validator("batch_sizes")
    @classmethod
    def _sorted_batch_sizes(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError(f"Batch Sizes = {value} is empty")
        return sorted(value)

    @field_validator("eta_knob")
    @classmethod
    def _eta(cls, value: float) -> float:
        if not 0 <= value <= 1:
            raise ValueError("eta_knob should be in range [0,1]")
        return value

    @field_validator("beta_knob")
    @classmethod
    def _beta(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError(f"Invalid beta_knob({value}). To disable early stop, set beta_knob = None to disable or positive value.")
        return value

    @model_validator(mode="after")
    def _default_listed(self) -> JobParams:
        if self.default_batch_size not in self.batch_sizes:
            raise ValueError(f"Default BS({self.default_batch_size}) not in batch_sizes({self.batch_sizes}).")
        return self


class GpuConfig(_Pydantic1Spellings):
    """The GPUs of the training: their summed maximum power, count and model."""

    max_power: float = Field(gt=0)
    number_of_gpus: int = Field(gt=0)
    gpu_model: str = Field(min_length=1)


class JobSpec(JobParams):
    """What a user specifies; ``job_id`` may be left for the server to make (from ``job_id_prefix``)."""

    job_id: str | None = None  # type: ignore[assignment]

    @model_validator(mode="after")
    def _prefixed(self) -> JobSpec:
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise ValueError(f"Job_id({self.job_id}) does not start with prefix({self.job_id_prefix}).")
        return self


class JobSpecFromClient(JobSpec, GpuConfig):
    """The registration the client sends: the job's spec and its GPUs."""


class CreatedJob(JobParams, GpuConfig):
    """The registered job, as the server keeps it (``job_id`` set)."""


class TrialId(_Pydantic1Spellings):
    """One training of the job at one batch size: ``trial_number`` counts them from 1."""

    job_id: str
    batch_size: int
    trial_number: int


class TrainingResult(TrialId):
    """The trial so far: cumulative ``time`` (s) and ``energy`` (J), this epoch's ``metric``, and ``current_epoch``."""

    time: float
    energy: float
    metric: float
    current_epoch: int


class ReportResponse(_Pydantic1Spellings):
    """The server's answer to a report: stop now?, was the target reached?, and why."""

    stop_train: bool
    converged: bool
    message: str
