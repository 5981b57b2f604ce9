"""``python -m zeus.monitor energy|power``: upstream's monitor CLI on the engine's monitors.

``energy [--gpu-indices I ...]`` opens one window and prints its :class:`~zeus.monitor.Measurement`
at Ctrl-C. ``power [--gpu-indices I ...] [--update-period S] [--power-domain D]`` prints the
GPUs' power (``{"GPU0": W, ...}``) every ``S`` seconds, and at Ctrl-C the total time and the
energy of that domain. (``zeus monitor`` is the engine's own command, with its own options.)
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Literal

import rich

from zeus.monitor.energy import ZeusMonitor
from zeus.monitor.power import PowerMonitor

WINDOW = "zeus.monitor.energy"
DOMAINS = ["device_instant", "device_average", "memory_average"]


def energy(gpu_indices: list[int] | None = None) -> None:
    """Measure the time and energy of the GPUs from now until Ctrl-C, then print the measurement."""
    monitor = ZeusMonitor(gpu_indices)
    monitor.begin_window(WINDOW)
    try:
        time.sleep(365 * 24 * 60 * 60)
    except KeyboardInterrupt:
        rich.print(monitor.end_window(WINDOW))


def _named(values: dict[int, float]) -> dict[str, float]:
    return {f"GPU{i}": v for i, v in values.items()}


def power(
    gpu_indices: list[int] | None = None,
    update_period: float = 1.0,
    power_domain: Literal["device_instant", "device_average", "memory_average"] = "device_instant",
) -> None:
    """Print the GPUs' power in ``power_domain`` every ``update_period`` s; at Ctrl-C the total time and energy."""
    monitor = PowerMonitor(gpu_indices=gpu_indices, update_period=update_period)
    start = time.time()
    period = monitor.update_period
    try:
        while True:
            time.sleep(period)
            watts = monitor.get_power(power_domain=power_domain)
            if watts is not None:
                rich.print(datetime.now(), _named(watts))
    except KeyboardInterrupt:
        end = time.time()
        rich.print("\nTotal time (s):", end - start)
        joules = monitor.get_energy(start, end, power_domain=power_domain)
        if joules is not None:
            rich.print("Total energy (J):", _named(joules))


def build_parser() -> argparse.ArgumentParser:
    """Upstream's arguments: ``energy`` and ``power`` subcommands."""
    parser = argparse.ArgumentParser(prog="python -m zeus.monitor", description="Zeus Monitor CLI")
    commands = parser.add_subparsers(
        dest="subcommand", required=True, help="The subcommand to run. See `python -m zeus.monitor <subcommand> --help`."
    )
    energy_parser = commands.add_parser("energy", help="Measure the time and energy consumption of specified GPU indices.")
    power_parser = commands.add_parser(
        "power", help="Monitor the power consumption of specified GPU indices, and compute total energy on exit (CTRL+C)."
    )
    for sub in (energy_parser, power_parser):
        sub.add_argument("--gpu-indices", nargs="+", type=int, help="Indices of GPUs to monitor. If omitted, all GPUs will be monitored.")
    power_parser.add_argument("--update-period", type=float, default=1.0, help="The time between power measurements in seconds.")
    power_parser.add_argument(
        "--power-domain",
        choices=DOMAINS,
        default="device_instant",
        help="The power domain to query. On GPUs that do not support instant power, use 'device_average'.",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.subcommand == "energy":
        energy(args.gpu_indices)
    else:
        power(args.gpu_indices, args.update_period, args.power_domain)


if __name__ == "__main__":
    main()
