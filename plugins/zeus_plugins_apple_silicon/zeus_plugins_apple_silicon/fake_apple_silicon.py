"""A simulated ``zeus_apple_silicon`` (AppleEnergyMonitor, AppleEnergyMetrics), for tests and demos.

``ZEUS_FAKE_APPLE_SILICON=PATH`` makes the ``apple-silicon`` device use this
module instead of ``zeus_apple_silicon`` (:func:`zeus_plugins_apple_silicon.control.apple_module`),
so the plugin's own code runs on Linux. It follows the real package
(zeus-apple-silicon 1.1, ``bindings/energy_bindings.hpp`` and ``apple_energy.hpp``):

* ``AppleEnergyMetrics`` has the same eleven fields, integers in millijoules
  (per-core and per-cluster fields are lists), ``None`` where the chip has no
  such channel (DRAM on older chips, GPU SRAM on most);
* ``AppleEnergyMonitor()`` raises ``RuntimeError`` when it cannot subscribe to
  IOReport (here: no state file, or ``"subscribe_fails": true``);
  ``begin_window(key, restart=False)`` raises ``RuntimeError`` for a key still
  open (unless ``restart``), ``end_window(key)`` for a key never begun;
  ``get_cumulative_energy()`` counts from a fixed point (boot).

The state is a JSON file of constant power per channel (W; ``null`` = absent),
written by :func:`create` or ``python -m zeus_plugins_apple_silicon.fake_apple_silicon PATH``;
energy is that power times the time since the state was written, plus what the
counters held then. A channel's counter can be made faulty (``quirks``:
:data:`COUNTER_QUIRKS`), to test the check the plugin makes when it opens.
Readings are whole millijoules, as the real package's ``int64_t`` fields.

The measurement quirk, off by default: ``update_s`` > 0 renews every channel
only at each multiple of that period (``time.monotonic``'s phase), as IOReport's
channels are renewed by the system rather than on each read (how often Apple
does not document: the plugin infers it when it opens); a window read between
two renewals misses up to a period's energy.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

ENV = "ZEUS_FAKE_APPLE_SILICON"

SCALAR_FIELDS = ("cpu_total_mj", "efficiency_core_manager_mj", "performance_core_manager_mj", "dram_mj", "gpu_mj", "gpu_sram_mj", "ane_mj")
LIST_FIELDS = ("efficiency_cores_mj", "performance_cores_mj", "efficiency_cluster_mj", "performance_cluster_mj")

#: an M2 Max at a light load (W); GPU SRAM is not reported on it
M2_MAX = {
    "cpu_total_mj": 6.0,
    "efficiency_cores_mj": [0.25] * 4,
    "performance_cores_mj": [0.6] * 8,
    "efficiency_cluster_mj": [1.2],
    "performance_cluster_mj": [4.6],
    "efficiency_core_manager_mj": 0.05,
    "performance_core_manager_mj": 0.15,
    "dram_mj": 1.5,
    "gpu_mj": 12.0,
    "gpu_sram_mj": None,
    "ane_mj": 0.5,
}


#: What a scalar channel's counter counts, per quirk, against the energy drawn: ``frozen`` (it
#: stands still), ``backwards`` (it counts down, as a counter restarting or a firmware fault
#: looks), ``jump`` (1000 times the energy drawn: steps no chip can draw, as a channel read in the
#: wrong unit gives). IOReport has no power reading, so a frozen channel cannot be told from an
#: idle one; the plugin's check refuses the other two.
COUNTER_QUIRKS = {"frozen": 0.0, "backwards": -1.0, "jump": 1000.0}


def create(
    path: str | os.PathLike[str],
    watts: dict[str, Any] | None = None,
    chip: str = "Apple M2 Max",
    subscribe_fails: bool = False,
    quirks: dict[str, str] | None = None,
    update_s: float = 0.0,
) -> Path:
    """Write a state: ``watts`` maps AppleEnergyMetrics fields to constant power (W), None where absent;
    ``quirks`` maps scalar fields to a counter fault of :data:`COUNTER_QUIRKS` (none by default)."""
    watts = dict(M2_MAX if watts is None else watts)
    unknown = sorted(set(watts) - set(SCALAR_FIELDS) - set(LIST_FIELDS))
    if unknown:
        raise ValueError(f"not AppleEnergyMetrics fields: {unknown}")
    quirks = dict(quirks or {})
    bad = sorted(f"{f}={q}" for f, q in quirks.items() if f not in SCALAR_FIELDS or q not in COUNTER_QUIRKS)
    if bad:
        raise ValueError(f"quirks must map scalar fields to one of {sorted(COUNTER_QUIRKS)}, got {bad}")
    state = {
        "chip": chip,
        "subscribe_fails": subscribe_fails,
        "anchor_t": time.monotonic(),
        "start_mj": 3_600_000_000,
        "watts": {f: watts.get(f) for f in (*SCALAR_FIELDS, *LIST_FIELDS)},
        "quirks": quirks,
        "update_s": float(update_s),
    }
    p = Path(path)
    p.write_text(json.dumps(state))
    return p


def _state() -> dict:
    path = os.environ.get(ENV)
    if not path:
        raise RuntimeError("Failed to create IOReport subscription.")
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise RuntimeError("Failed to create IOReport subscription.") from None


def true_energy_j(field: str) -> float:
    """The energy channel ``field`` really drew since the state was written (J; what a test compares with)."""
    state = _state()
    return float(state["watts"][field]) * max(0.0, time.monotonic() - state["anchor_t"])


def chip() -> str:
    """The simulated chip's name (what ``sysctl machdep.cpu.brand_string`` says on a Mac)."""
    return _state()["chip"]


class AppleEnergyMetrics:
    """Energy per channel in mJ; None where the chip has no such channel."""

    def __init__(self) -> None:
        for f in (*SCALAR_FIELDS, *LIST_FIELDS):
            setattr(self, f, None)

    def __repr__(self) -> str:
        return "".join(f"{f}: {getattr(self, f)}\n" for f in (*SCALAR_FIELDS, *LIST_FIELDS))


def _reading(state: dict, now: float) -> AppleEnergyMetrics:
    m = AppleEnergyMetrics()
    period = state.get("update_s", 0.0)
    if period > 0:  # the channels as last renewed
        now = now - now % period
    elapsed = max(0.0, now - state["anchor_t"])
    for f, w in state["watts"].items():
        if w is None:
            continue
        if isinstance(w, list):
            setattr(m, f, [int(state["start_mj"] + x * 1000.0 * elapsed) for x in w])
        else:
            rate = COUNTER_QUIRKS.get(state.get("quirks", {}).get(f, ""), 1.0)
            setattr(m, f, int(state["start_mj"] + rate * w * 1000.0 * elapsed))
    return m


def _minus(a: AppleEnergyMetrics, b: AppleEnergyMetrics) -> AppleEnergyMetrics:
    out = AppleEnergyMetrics()
    for f in (*SCALAR_FIELDS, *LIST_FIELDS):
        x, y = getattr(a, f), getattr(b, f)
        if x is None or y is None:
            continue
        setattr(out, f, [i - j for i, j in zip(x, y)] if isinstance(x, list) else x - y)
    return out


class AppleEnergyMonitor:
    """Measurement windows over the simulated IOReport energy channels."""

    def __init__(self) -> None:
        if _state()["subscribe_fails"]:
            raise RuntimeError("Failed to create IOReport subscription.")
        self._begun: dict[str, AppleEnergyMetrics] = {}

    def get_cumulative_energy(self) -> AppleEnergyMetrics:
        return _reading(_state(), time.monotonic())

    def begin_window(self, key: str, restart: bool = False) -> None:
        if key in self._begun and not restart:
            raise RuntimeError("Measurement with specified key already exists.")
        self._begun[key] = self.get_cumulative_energy()

    def end_window(self, key: str) -> AppleEnergyMetrics:
        start = self._begun.pop(key, None)
        if start is None:
            raise RuntimeError("No measurement with provided key had been started.")
        return _minus(self.get_cumulative_energy(), start)


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m zeus_plugins_apple_silicon.fake_apple_silicon",
        description=f"Write a simulated Apple Silicon energy state; then run zeus with {ENV}=PATH.",
    )
    p.add_argument("path", help="state file to write (replaced if it exists)")
    p.add_argument("--gpu-w", type=float, default=M2_MAX["gpu_mj"], help="GPU power (W)")
    p.add_argument("--cpu-w", type=float, default=M2_MAX["cpu_total_mj"], help="CPU power (W)")
    p.add_argument("--no-dram", action="store_true", help="a chip that reports no DRAM energy (M1)")
    a = p.parse_args(argv)
    for flag, value in (("--gpu-w", a.gpu_w), ("--cpu-w", a.cpu_w)):
        if value < 0:
            p.error(f"{flag} must not be negative, got {value}")
    watts = dict(M2_MAX, gpu_mj=a.gpu_w, cpu_total_mj=a.cpu_w)
    if a.no_dram:
        watts["dram_mj"] = None
    path = create(a.path, watts)
    print(f"simulated Apple Silicon in {path}; use it with {ENV}={Path(path).resolve()}")


if __name__ == "__main__":
    main()
