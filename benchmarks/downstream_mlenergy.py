"""The measurement path of the ML.ENERGY benchmark (ml-energy/benchmark), on zeus-compat and the simulated NVIDIA driver.

    python benchmarks/downstream_mlenergy.py [--gpus 2] [--steady-s 2.0] [--ramp-s 0.6] [--json OUT]

The benchmark's LLM and diffusion runners measure a serving run with upstream Zeus as follows; this
script makes the same calls, in the same order, with the same keywords, against ``zeus-compat``:

* ``show_env()`` with its standard output captured (``redirect_stdout``), logged as text;
* ``ZeusMonitor()`` over every GPU, ``PowerMonitor(update_period=0.1)`` and
  ``TemperatureMonitor(update_period=0.5)`` started before the load;
* ``begin_window("entire_benchmark", sync_execution=False)`` when the first request goes out, and
  ``begin_window("steady_state", sync_execution=False)`` once the server is at its steady batch;
  ``end_window(..., sync_execution=False)`` for each, steady state first;
* ``get_all_power_timelines(start_time=..., end_time=...)`` and
  ``get_temperature_timeline(start_time=..., end_time=...)`` over the whole run;
* ``measurement.time``, ``sum(measurement.gpu_energy.values())`` (energy per token from the steady
  state), and ``dataclasses.asdict(measurement)`` into a JSON result file.

The "server" here is the simulated driver's load: each GPU draws ``RAMP_W`` while the batch ramps up
and down and ``STEADY_W`` in the steady state (``fake_pynvml.set_demand``), so what the monitors
report can be checked against what the GPUs drew. The script prints one row per check and exits 1
if any fails: the energies against the drawn power times the window's time, the power timeline's
keys and values (upstream's ``device_instant``/``device_average``/``memory_average``), the
temperature timeline, show_env's text, and that the result is JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from contextlib import redirect_stdout
from dataclasses import asdict
from pathlib import Path

RAMP_W = 120.0
STEADY_W = 280.0
#: How far a window's energy may be from the drawn power times its time: the windows' edges are read a
#: few milliseconds apart from the moments the load changes, on a loaded machine.
TOLERANCE = 0.08


def serve(args: argparse.Namespace, driver: Path) -> dict:
    """One benchmark run, as the ML.ENERGY runner makes it (see the module docstring)."""
    from zeus.monitor import PowerMonitor, TemperatureMonitor, ZeusMonitor
    from zeus.show_env import show_env

    from zeus_plugins_nvml import fake_pynvml

    def load(watts: float) -> None:
        for gpu in range(args.gpus):
            fake_pynvml.set_demand(gpu, watts)

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        show_env()
    env_text = buffer.getvalue()
    zeus_monitor = ZeusMonitor()
    power_monitor = PowerMonitor(update_period=0.1)
    temperature_monitor = TemperatureMonitor(update_period=0.5)

    load(RAMP_W)
    benchmark_start_time = time.time()
    zeus_monitor.begin_window("entire_benchmark", sync_execution=False)
    time.sleep(args.ramp_s)
    load(STEADY_W)
    steady_state_start_time = time.time()
    zeus_monitor.begin_window("steady_state", sync_execution=False)
    time.sleep(args.steady_s)
    steady_state_mes = zeus_monitor.end_window("steady_state", sync_execution=False)
    steady_state_end_time = time.time()
    load(RAMP_W)
    time.sleep(args.ramp_s)
    entire_mes = zeus_monitor.end_window("entire_benchmark", sync_execution=False)
    benchmark_end_time = time.time()
    load(0.0)
    time.sleep(0.3)  # the pollers' last samples of the run

    power_timeline = power_monitor.get_all_power_timelines(start_time=benchmark_start_time, end_time=benchmark_end_time)
    temperature_timeline = temperature_monitor.get_temperature_timeline(start_time=benchmark_start_time, end_time=benchmark_end_time)
    temperature_now = temperature_monitor.get_temperature()
    power_monitor.stop()
    temperature_monitor.stop()
    tokens = 1000 * args.steady_s  # a steady 1,000 tokens per second
    steady_state_energy = sum(steady_state_mes.gpu_energy.values())
    return {
        "show_env": env_text,
        "duration": benchmark_end_time - benchmark_start_time,
        "steady_state_duration": steady_state_mes.time,
        "steady_state_energy": steady_state_energy,
        "steady_state_energy_per_token": steady_state_energy / tokens,
        "steady_state_measurement": asdict(steady_state_mes),
        "entire_benchmark_measurement": asdict(entire_mes),
        "timeline": {
            "benchmark_start_time": benchmark_start_time,
            "benchmark_end_time": benchmark_end_time,
            "steady_state_start_time": steady_state_start_time,
            "steady_state_end_time": steady_state_end_time,
            "power": power_timeline,
            "temperature": temperature_timeline,
        },
        "temperature_now": temperature_now,
    }


def checks(result: dict, args: argparse.Namespace) -> list[tuple[str, str, str, bool]]:
    """(check, measured, expected, passed) for one run."""
    rows = []
    steady, entire = result["steady_state_measurement"], result["entire_benchmark_measurement"]

    def near(got: float, want: float) -> bool:
        return abs(got - want) <= TOLERANCE * want

    want = STEADY_W * args.gpus * steady["time"]
    got = result["steady_state_energy"]
    rows.append(("steady-state energy (J), all GPUs", f"{got:.1f}", f"{want:.1f} +/- {TOLERANCE:.0%}", near(got, want)))
    ramp_time = entire["time"] - steady["time"]
    want = (STEADY_W * steady["time"] + RAMP_W * ramp_time) * args.gpus
    got = sum(entire["gpu_energy"].values())
    rows.append(("whole-run energy (J), all GPUs", f"{got:.1f}", f"{want:.1f} +/- {TOLERANCE:.0%}", near(got, want)))
    keys = sorted(entire["gpu_energy"])
    rows.append(("gpu_energy keys", str(keys), str(list(range(args.gpus))), keys == list(range(args.gpus))))
    power = result["timeline"]["power"]
    rows.append(("power timeline domains", ", ".join(sorted(power)), "device_instant present", "device_instant" in power))
    instant = power.get("device_instant", {})
    # the timelines hold a sample where the reading changed (upstream's deduplication): the power in force
    # in the middle of the steady state is the last sample before it
    middle = (result["timeline"]["steady_state_start_time"] + result["timeline"]["steady_state_end_time"]) / 2
    in_force = [max((s for s in samples if s[0] <= middle), default=(0.0, 0.0))[1] for samples in instant.values()]
    ok = len(in_force) == args.gpus and all(near(w, STEADY_W) for w in in_force)
    shown = ", ".join(f"{w:.0f}" for w in in_force)
    rows.append(("power in force mid steady state (W)", shown, f"{STEADY_W:.0f} on each of {args.gpus}", ok))
    temps, now = result["timeline"]["temperature"], result["temperature_now"] or {}
    ok = sorted(temps) == sorted(now) == list(range(args.gpus)) and all(isinstance(c, int) and 0 < c < 120 for c in now.values())
    rows.append(("temperature (C) per GPU", ", ".join(str(c) for c in now.values()), "an integer per GPU, timeline per GPU", ok))
    env = result["show_env"]
    rows.append(("show_env output", f"{len(env.splitlines())} lines", "names the GPUs", "GPU" in env))
    try:
        json.dumps(result)
        serializable = True
    except (TypeError, ValueError):
        serializable = False
    rows.append(("result file is JSON", str(serializable), "True", serializable))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=2, help="simulated GPUs (default 2)")
    parser.add_argument("--steady-s", type=float, default=2.0, help="seconds of steady state (default 2)")
    parser.add_argument("--ramp-s", type=float, default=0.6, help="seconds of ramp-up and of ramp-down (default 0.6)")
    parser.add_argument("--json", type=Path, help="write the benchmark's result file here")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="zeus-mlenergy-"))
    from zeus_plugins_nvml import fake_pynvml

    driver = fake_pynvml.create(work / "nvml.json", [fake_pynvml.FakeGpu() for _ in range(args.gpus)], privileged=True)
    os.environ.update(ZEUS_FAKE_NVML=str(driver), ZEUS_STATE_DIR=str(work / "state"), ZEUS_GPU_DEVICE="nvml")
    result = serve(args, driver)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    rows = checks(result, args)
    print(f"ML.ENERGY benchmark measurement path on zeus-compat, {args.gpus} simulated GPUs\n")
    print("| check | measured | expected | ok |")
    print("| --- | --- | --- | --- |")
    for name, got, want, ok in rows:
        print(f"| {name} | {got} | {want} | {'yes' if ok else 'NO'} |")
    failed = [name for name, _, _, ok in rows if not ok]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} checks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
