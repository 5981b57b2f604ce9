"""Which AMD GPUs torch sees: ``ROCR_VISIBLE_DEVICES`` and ``HIP_VISIBLE_DEVICES`` resolved to amdsmi handles.

GPU indices in zeus are the ones torch uses (``cuda:0`` on ROCm), as in upstream
``ZeusMonitor``. amdsmi lists GPUs by PCI address, while HIP numbers them its own
way (the two differ on some nodes, e.g. MI350X); amdsmi's enumeration info gives
each GPU's HIP index (``hip_id``) and the ``GPU-...`` UUID HIP and ROCr accept,
so zeus orders GPUs by ``hip_id``. Then, as the ROCm runtimes do:

1. ``ROCR_VISIBLE_DEVICES`` (indices or ``GPU-`` UUIDs) picks, in its order,
   the GPUs the ROCm runtime exposes at all;
2. ``HIP_VISIBLE_DEVICES`` (or, when it is unset, ``CUDA_VISIBLE_DEVICES``,
   which HIP reads as the same thing) picks among those, its indices counting
   the GPUs step 1 left. With both set, HIP's variable wins and the CUDA one is
   ignored (a warning says so when they differ).

The result is numbered 0, 1, ... as torch numbers it. An entry that names no
GPU, a repeated one, or an empty variable is an error naming the variable and
the entry: zeus does not guess which GPUs the training process sees.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen
class AmdGpuRef:
    """One GPU as HIP numbers it in this process (``hip_index``) and as the machine does."""

    hip_index: int
    physical_index: int  # amdsmi's hip_id: HIP's index with nothing masked
    uuid: str  # amdsmi's device UUID: what the journal and the daemon name
    hip_uuid: str  # GPU-<hex>: what ROCR_/HIP_VISIBLE_DEVICES accept
    handle: Any


class VisibleDevicesError(ValueError):
    """A visibility variable names no GPU, or a GPU twice; the message names the fix."""


def machine_gpus(smi: Any) -> list[tuple[int, str, str, Any]]:
    """(hip_id, uuid, hip_uuid, handle) of every GPU, in HIP order."""
    out = []
    for pos, h in enumerate(smi.amdsmi_get_processor_handles()):
        uuid = smi.amdsmi_get_gpu_device_uuid(h)
        try:
            info = smi.amdsmi_get_gpu_enumeration_info(h)
        except AttributeError:  # amdsmi before ROCm 6.4: no enumeration info; PCI order it is
            info = {"hip_id": pos, "hip_uuid": ""}
        hip_id = info.get("hip_id")
        out.append((hip_id if isinstance(hip_id, int) else pos, uuid, str(info.get("hip_uuid") or ""), h))
    return sorted(out, key=lambda g: g[0])


def _pick(pool: list, var: str, value: str) -> list:
    entries = [e.strip() for e in value.split(",")]
    if not value.strip():
        raise VisibleDevicesError(f"{var} is set to an empty string, so HIP sees no GPU; unset it or list GPUs (e.g. {var}=0,1)")
    chosen: list = []
    for entry in entries:
        if entry.upper().startswith("GPU-"):
            hits = [g for g in pool if g[2] and g[2].lower() == entry.lower()]
            why = "no visible GPU has this UUID (amd-smi list shows them)"
        else:
            try:
                i = int(entry)
            except ValueError:
                raise VisibleDevicesError(f"{var}={value!r}: entry {entry!r} is neither an index nor a GPU-<uuid>") from None
            hits = [pool[i]] if 0 <= i < len(pool) else []
            why = f"the GPUs it may name are 0..{len(pool) - 1}" if pool else "no GPU is left to name"
        if not hits:
            raise VisibleDevicesError(f"{var}={value!r}: entry {entry!r} names no GPU ({why})")
        if hits[0] in chosen:
            raise VisibleDevicesError(f"{var}={value!r}: entry {entry!r} repeats a GPU listed before it")
        chosen.append(hits[0])
    return chosen


def visible_gpus(smi: Any, environ: Mapping[str, str]) -> list[AmdGpuRef]:
    """The GPUs torch would see under ``environ``'s visibility variables, in torch's order."""
    pool = machine_gpus(smi)
    rocr = environ.get("ROCR_VISIBLE_DEVICES")
    if rocr is not None:
        pool = _pick(pool, "ROCR_VISIBLE_DEVICES", rocr)
    hip, cuda = environ.get("HIP_VISIBLE_DEVICES"), environ.get("CUDA_VISIBLE_DEVICES")
    if hip is not None and cuda is not None and hip.strip() != cuda.strip():
        warnings.warn(
            f"HIP_VISIBLE_DEVICES={hip!r} and CUDA_VISIBLE_DEVICES={cuda!r} differ; HIP uses HIP_VISIBLE_DEVICES "
            "and so does zeus (unset one of them to silence this)",
            stacklevel=3,
        )
    if hip is not None:
        pool = _pick(pool, "HIP_VISIBLE_DEVICES", hip)
    elif cuda is not None:
        pool = _pick(pool, "CUDA_VISIBLE_DEVICES", cuda)
    return [AmdGpuRef(i, hip_id, uuid, hip_uuid, h) for i, (hip_id, uuid, hip_uuid, h) in enumerate(pool)]
