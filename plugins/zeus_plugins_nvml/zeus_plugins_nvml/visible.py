"""Which GPUs CUDA sees: ``CUDA_VISIBLE_DEVICES`` resolved to NVML handles.

GPU indices in zeus are CUDA-visible indices (as in upstream ``ZeusMonitor``
and as torch numbers them), while NVML numbers every GPU of the machine. This
module maps one onto the other the way the CUDA runtime does:

* unset: every GPU, in NVML order;
* set but empty: no GPU at all (an error here: there is nothing to measure);
* entries are indices, ``GPU-<uuid>`` (a unique prefix is enough) or
  ``MIG-<uuid>`` slices; the first entry that is not a GPU (out of range,
  unknown, repeated, ``-1``) ends the list, and CUDA ignores it and everything
  after it. zeus follows, with a warning, so that its indices stay torch's.

NVML orders GPUs by PCI bus; CUDA does too only under
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (its default is "fastest first"). On a
machine with different GPU models the two orders can differ, so the device
warns when it sees mixed models without that setting.
"""

from __future__ import annotations

import warnings
from typing import Any

import attrs


@attrs.frozen
class VisibleGpu:
    """One GPU as CUDA numbers it.

    ``handle`` is the NVML handle of the whole GPU; ``mig_uuid`` is set when
    CUDA sees only a MIG slice of it.
    """

    cuda_index: int
    nvml_index: int
    uuid: str
    handle: Any
    mig_uuid: str | None = None


class VisibleDevicesError(ValueError):
    """``CUDA_VISIBLE_DEVICES`` makes no GPU visible; the message names the fix."""


def _physical(nvml: Any) -> list[tuple[int, str, Any]]:
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        out.append((i, nvml.nvmlDeviceGetUUID(h), h))
    return out


def _entry(entry: str, gpus: list[tuple[int, str, Any]], nvml: Any) -> tuple[tuple[int, str, Any], str | None] | str:
    """Resolve one entry to ((nvml index, uuid, handle), mig uuid) or say why it is not a GPU."""
    if entry.startswith("MIG-"):
        try:
            h = nvml.nvmlDeviceGetHandleByUUID(entry)
        except nvml.NVMLError:
            return "no MIG slice has this UUID (list them with `nvidia-smi -L`)"
        if nvml.nvmlDeviceIsMigDeviceHandle(h):
            parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h)
            parent_uuid = nvml.nvmlDeviceGetUUID(parent)
        else:
            parent_uuid = nvml.nvmlDeviceGetUUID(h)
        for g in gpus:
            if g[1] == parent_uuid:
                return g, entry
        return "its GPU is not in NVML's list"
    if entry.startswith("GPU-"):
        hits = [g for g in gpus if g[1].startswith(entry)]
        if len(hits) == 1:
            return hits[0], None
        return "no GPU has this UUID" if not hits else f"the prefix matches {len(hits)} GPUs"
    try:
        i = int(entry)
    except ValueError:
        return "not an index, GPU-<uuid> or MIG-<uuid>"
    if not 0 <= i < len(gpus):
        return f"this machine has GPUs 0..{len(gpus) - 1}" if gpus else "this machine has no GPU"
    return gpus[i], None


def visible_gpus(nvml: Any, env: str | None) -> list[VisibleGpu]:
    """The GPUs CUDA would see under ``CUDA_VISIBLE_DEVICES=env`` (``None``: unset)."""
    gpus = _physical(nvml)
    if env is None:
        return [VisibleGpu(i, i, uuid, h) for i, uuid, h in gpus]
    if not env.strip():
        raise VisibleDevicesError(
            "CUDA_VISIBLE_DEVICES is set to an empty string, so CUDA sees no GPU; unset it or list GPUs (e.g. CUDA_VISIBLE_DEVICES=0,1)"
        )
    out: list[VisibleGpu] = []
    seen: set[str] = set()
    entries = [e.strip() for e in env.split(",")]
    for pos, entry in enumerate(entries):
        got = _entry(entry, gpus, nvml)
        if isinstance(got, tuple) and (got[1] or got[0][1]) in seen:
            got = "it repeats an earlier entry"
        if isinstance(got, str):
            ignored = ",".join(entries[pos:])
            if not out:
                raise VisibleDevicesError(
                    f"CUDA_VISIBLE_DEVICES={env!r} makes no GPU visible: entry {entry!r} is not a GPU ({got}), "
                    "and CUDA ignores it and every entry after it. List GPUs by index, GPU-<uuid> or MIG-<uuid>"
                )
            warnings.warn(
                f"CUDA_VISIBLE_DEVICES={env!r}: entry {entry!r} is not a GPU ({got}); CUDA ignores "
                f"{ignored!r}, so zeus measures only the {len(out)} GPU(s) before it",
                stacklevel=3,
            )
            break
        (nvml_index, uuid, handle), mig = got
        seen.add(mig or uuid)
        out.append(VisibleGpu(len(out), nvml_index, uuid, handle, mig))
    return out
