"""The wire format of ``zeus serve`` (API version 1): request and response bodies.

Every number is checked where it enters: non-finite numbers (``NaN``,
``Infinity``) and values out of range are refused with 422 naming the field,
never stored and never a server error. Free-form JSON (policy states, a try's
``extra``, a part's state values) must hold finite numbers only, at most
:data:`MAX_DEPTH` levels deep. Infinity where a quantity may be infinite (an
unbounded cost) travels as ``null``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

API_VERSION = 1
#: Nesting of free-form JSON values.
MAX_DEPTH = 32
#: A 32-bit signed count (recurrences, tries, batch sizes): what every store can hold.
MAX_COUNT = 2**31 - 1
#: The largest quantity (joules, seconds, cost) accepted: finite and far beyond any real job.
MAX_QUANTITY = 1e300
#: Client and request ids: what ``uuid.uuid4().hex`` gives, and a little more.
ID_PATTERN = r"^[A-Za-z0-9_-]{8,64}$"
#: A state key: printable, no NUL.
KEY_PATTERN = r"^[^\x00-\x1f\x7f]{1,200}$"

#: State keys the service keeps itself: a remote transaction may read them, not write them.
RESERVED_KEYS = ("runner", "policy:", "serve:")  # "runner" covers runner:open and runner:abandoned


def check_json(value: Any, depth: int = 0, path: str = "") -> Any:
    """A free-form JSON value: finite numbers only, at most MAX_DEPTH levels deep."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{path or 'value'} must be a finite number, got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            if "\x00" in k:
                raise ValueError(f"a key of {path or 'the object'} contains a NUL character")
            check_json(v, depth + 1, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_json(v, depth + 1, f"{path}[{i}]")
    return value


JsonValue = Annotated[Any, AfterValidator(check_json)]
JsonObject = Annotated[dict[str, Any], AfterValidator(check_json)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Whole = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Quantity = Annotated[float, Field(ge=0, le=MAX_QUANTITY, allow_inf_nan=False)]
Watts = Annotated[float, Field(gt=0, le=1e7, allow_inf_nan=False)]
Id = Annotated[str, Field(pattern=ID_PATTERN, examples=["0123456789abcdef"])]
Key = Annotated[str, Field(pattern=KEY_PATTERN)]
Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# -- service --


class ServiceInfo(Model):
    service: str = "zeus"
    api: int = API_VERSION
    version: str
    store: str = Field(description="where jobs' state lives (credentials masked)")


class Health(Model):
    ok: bool = True


# -- jobs --


class JobInfo(Model):
    job: str
    identity: dict[str, Any] | None = Field(description="what the job optimises, as its first run recorded it; null: nothing yet")
    tries: int
    next_recurrence: int


class SetupIn(Model):
    """``zeus_core.engine.remote.HistorySetup.to_json()``: what the service needs to run the job's
    batch-size policy as ``zeus run`` does. ``job`` is the ``[job]`` table, ``batch_size`` the
    ``[batch_size]`` table (``{"plugin": "mab", ...}``), ``identity`` what the job optimises. Every
    field is checked on arrival by ``HistorySetup.from_json`` (one check, each problem with its
    path, 422); an infinite option, such as ``beta_knob``, is the string ``"inf"``, as in the
    stored identity, since null is an optional option's "none"."""

    job: JsonObject = Field(examples=[{"name": "fuzz", "eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.6}])
    identity: JsonObject = Field(examples=[{"job": {"eta_knob": 0.5}, "batch_size": {"plugin": "fixed"}}])
    batch_size: JsonObject = Field(examples=[{"plugin": "fixed", "default": 32}])
    max_power_w: JsonValue = Field(description="watts (> 0): the device's maximum power of the cost metric", examples=[300.0])
    batch_sizes: JsonValue = Field(None, description="null or the distinct batch sizes the workload offers", examples=[[32, 64]])
    default_batch_size: JsonValue = Field(None, description="null or the workload's default batch size", examples=[32])
    predictions: JsonValue = Field(
        None, description="null or batch size -> [[power_limit, time_s, energy_j], ...]: the device's epoch predictions"
    )
    fresh: JsonValue = Field(False, description="forget what the store learned, in the job's first write")


class SessionIn(Model):
    """A client (one ``zeus run`` process, one script optimizer) describes its job once."""

    client: Id = Field(description="chosen by the client (e.g. uuid4().hex); the same after a reconnect")
    setup: SetupIn


class SessionOut(Model):
    session: str
    next_recurrence: int
    open: dict[str, Any] = Field(
        default_factory=dict,
        description="recurrences begun and not ended, with the process that "
        "began each (a client records those of its machine whose process is gone as abandoned)",
    )


class StepIn(Model):
    """Every step names its session and carries a request id: a retried request (same id)
    gets the first answer back, and is never applied twice."""

    session: Id
    request: Id


class Owner(Model):
    """The process that begins a recurrence (``zeus_core.engine.owner.this_process()``)."""

    host: Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
    pid: Count
    boot: Annotated[str, Field(max_length=64, pattern=r"^[0-9A-Za-z-]+$")] | None = None
    start: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None


class RecurrenceIn(StepIn):
    owner: Owner | None = Field(
        None, description="the client's process, so that a recurrence it leaves open when it is killed can be recorded as abandoned"
    )


class RecurrenceOut(Model):
    recurrence: int


class AbandonIn(StepIn):
    recurrence: Count
    reason: Annotated[str, Field(min_length=1, max_length=500, pattern=r"^[^\x00]*$")]


class AbandonOut(Model):
    abandoned: bool


class TrialIn(StepIn):
    recurrence: Count
    try_index: Count


class TrialOut(Model):
    recurrence: int
    try_index: int
    batch_size: int
    cost_bound: float | None = Field(description="stop the try before its cost passes this; null: no bound")
    min_cost: float | None = Field(description="the cheapest finished recurrence so far; null: none yet")
    power_state: Any = Field(description="the committed power-policy state, for the client's power policy")
    power_digest: str = Field(description="zeus_core.engine.history.state_digest(power_state): what a power update is merged onto")


class TrialRef(Model):
    """The trial a result belongs to, as the service answered it."""

    recurrence: Count
    try_index: Count
    batch_size: Count
    min_cost: Quantity | None = None


class TryIn(Model):
    """One try's result (zeus_core.TryRecord)."""

    recurrence: Count
    try_index: Count
    batch_size: Count
    power_limit: Watts | None = None
    epochs: Whole
    time_s: Quantity
    energy_j: Quantity
    cost: Quantity
    reached: bool
    stopped: Annotated[str, Field(max_length=200, pattern=r"^[^\x00]*$")] | None = None
    extra: JsonObject = Field(default_factory=dict)
    steady_cost: Quantity | None = None


class PowerUpdate(Model):
    state: JsonValue = Field(description="the power policy's state to commit, merged by the client")
    expected: Digest = Field(description="the digest of the committed state the client merged onto")


class ResultIn(StepIn):
    trial: TrialRef
    record: TryIn
    recurrence_cost: Quantity | None = Field(None, description="the recurrence's cost when this try reached the target")
    power: PowerUpdate | None = None


class ResultOut(Model):
    stored: bool = Field(True, description="false: the try had its result already (sent again), which stands")


class PowerConflict(Model):
    detail: str
    power_state: Any
    power_digest: str


class HistoryOut(Model):
    tries: list[TryIn]


class StateOut(Model):
    key: str
    found: bool
    value: Any = None
    digest: str


# -- remote transactions over a part's own state --


class ClientIn(Model):
    client: Id


class ClientStepIn(Model):
    client: Id
    request: Id


class StateItems(Model):
    items: dict[str, Any]


class TxOut(Model):
    transaction: str
    lease_s: float


class TxGetIn(Model):
    key: Key


class TxCommitIn(ClientStepIn):
    reads: dict[Key, Digest] = Field(default_factory=dict, description="key -> digest of the value read in the transaction")
    set: dict[Key, JsonValue] = Field(default_factory=dict, description="key -> new value")


class Committed(Model):
    committed: bool = True
