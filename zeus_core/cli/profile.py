"""``zeus profile``: thermally stable profiling of a callable or a command line over a parameter grid.

The command is :class:`zeus_core.profiling.ThermalProfiler` on a device plugin: every point of
the grid (the product of the ``--param`` values) runs ``--trials`` times in a balanced, seeded
order, each trial after a cooldown to the temperature band and a warm-up until power and
temperature settle, in a window at least ``--min-window`` long (or as long as ``--target-error``
asks of the device's energy bound). ``power_limit`` is the one parameter zeus applies itself
(through the device's journaled settings: it is put back at the end, on Ctrl-C, and after a
kill by the next zeus command); every other parameter is the target's: a keyword argument of a
callable, or ``{name}`` in a command's arguments and ``ZEUS_PARAM_<NAME>`` in its environment.
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from zeus_core import catalog
from zeus_core.cli.consoles import make_console
from zeus_core.cli.env import chosen_devices, device_options
from zeus_core.device import PowerLimitControl
from zeus_core.errors import EXIT_BAD_INPUT
from zeus_core.inloop import GPU_DEVICE_ENV
from zeus_core.profiling import ConfigResult, Cooldown, Sample, Settling, ThermalProfiler, TrialSample, bound_window, device_probe
from zeus_core.windows import Monitor

#: The parameter zeus sets on the device itself; every other one is the target's.
POWER_LIMIT = "power_limit"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class BadInput(click.ClickException):
    """Bad input: printed as ``error: ...`` with exit status 2."""

    exit_code = EXIT_BAD_INPUT


def _value(text: str) -> Any:
    """A grid value as the target gets it: an int, else a float, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_params(params: tuple[str, ...]) -> dict[str, list[Any]]:
    """``NAME=V1,V2,...`` options as ``{name: [values]}``; a clear error naming the bad one."""
    grid: dict[str, list[Any]] = {}
    for text in params:
        name, eq, values = text.partition("=")
        name = name.strip()
        if not eq or not _NAME.match(name):
            raise BadInput(f"--param {text!r}: expected NAME=V1,V2,... with NAME a Python identifier, e.g. power_limit=200,250,300")
        if name in grid:
            raise BadInput(f"--param {name} given twice: put every value in one --param {name}=V1,V2,...")
        got = [_value(v.strip()) for v in values.split(",") if v.strip()]
        if not got:
            raise BadInput(f"--param {text!r}: no values; expected NAME=V1,V2,...")
        if len(set(map(str, got))) != len(got):
            raise BadInput(f"--param {text!r}: a value is given twice")
        if name == POWER_LIMIT and not all(isinstance(v, (int, float)) and v > 0 for v in got):
            raise BadInput(f"--param {text!r}: power limits are positive numbers of watts")
        grid[name] = got
    return grid


def load_callable(target: str) -> Callable[..., Any]:
    """``module:function`` (the current folder importable, as with ``python -m``)."""
    module_name, _, attr = target.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise BadInput(f"{target}: cannot import module {module_name!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise BadInput(f"{target}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise BadInput(f"{target}: {attr!r} is not callable")
    return obj


class Target:
    """What runs once per measured run: a callable with the grid's keyword arguments, or a command."""

    def __init__(self, words: tuple[str, ...]) -> None:
        self.words = list(words)
        self.fn = load_callable(words[0]) if len(words) == 1 and _CALLABLE.match(words[0]) else None

    def check(self, names: list[str]) -> None:
        """Every parameter but ``power_limit`` must reach the target."""
        theirs = [n for n in names if n != POWER_LIMIT]
        if self.fn is not None:
            import inspect

            try:
                inspect.signature(self.fn).bind_partial(**dict.fromkeys(theirs))
            except TypeError as e:
                raise BadInput(f"{self.words[0]}: does not take the parameters {', '.join(theirs)}: {e}") from None
            except ValueError:
                pass  # no signature to check (a builtin): the call says

    def __call__(self, config: dict[str, Any]) -> None:
        theirs = {k: v for k, v in config.items() if k != POWER_LIMIT}
        if self.fn is not None:
            self.fn(**theirs)
            return
        try:
            argv = [w.format(**theirs) for w in self.words]
        except (KeyError, IndexError, ValueError) as e:
            raise BadInput(
                f"the command's {{...}} names no parameter: {e} (give it with --param, or write {{{{ and }}}} for braces)"
            ) from None
        env = dict(os.environ) | {f"ZEUS_PARAM_{k.upper()}": str(v) for k, v in theirs.items()}
        try:
            done = subprocess.run(argv, env=env, check=False)
        except OSError as e:
            raise BadInput(f"cannot run {argv[0]!r}: {e.strerror or e}") from None
        if done.returncode != 0:
            raise click.ClickException(f"the command exited with status {done.returncode} at {_label(config)}: {' '.join(argv)}")


def _number(flag: str, default: float, kind: click.ParamType, help: str) -> Callable[[Any], Any]:
    """A number option with its default shown."""
    return click.option(flag, default=default, show_default=True, type=kind, help=help)


def _label(config: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items()) or "(no parameters)"


def _interval(ci: Any, digits: int = 3) -> str:
    if math.isinf(ci.half_width):
        return f"{ci.mean:.{digits}g}"
    return f"{ci.mean:.{digits}g} ± {ci.half_width:.2g}"


def _open(reg: Any, device: str | None, tables: dict[str, dict], console: Any) -> tuple[str, Any]:
    """(name, device group) that ``zeus profile`` measures with: ``device`` (or the one ``--set`` names),
    else the GPUs ``ZeusMonitor`` would measure (:func:`zeus_core.inloop.monitor.open_gpus`: the one
    installed plugin whose GPUs open here; ``$ZEUS_GPU_DEVICE`` names it where several do)."""
    from zeus_core.engine import DeviceOpenError  # the engine loads only for a command that runs
    from zeus_core.engine.assembly import open_device
    from zeus_core.inloop.monitor import open_gpus

    if device is None and len(tables) > 1:
        raise BadInput(f"--set names {len(tables)} devices ({', '.join(sorted(tables))}): say which measures with --device")
    device = device or next(iter(tables), None)
    if device is not None:
        try:
            return device, open_device(device, tables.get(device, {}), registry=reg, console=console)
        except Exception as e:  # noqa: BLE001 - the plugin's reason, as an error
            raise click.ClickException(f"cannot open device {device!r}: {e}") from None
    try:
        choice = open_gpus(reg, None, console)
    except DeviceOpenError as e:
        raise BadInput(str(e)) from None
    if choice.opened is None:
        why = choice.why() or f"no installed device plugin measures GPUs ({catalog.hint('device', 'nvml')}, for one)"
        raise click.ClickException(f"no GPU to measure with: {why}; or name a device with --device")
    name, _identity, group = choice.opened
    return name, group


@click.command("profile", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("target", nargs=-1, type=click.UNPROCESSED, required=True)
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="NAME=V1,V2,...",
    help="A grid axis (repeatable; the grid is their product). power_limit (W) is set on the device; any other name is "
    "a keyword argument of the callable, or {NAME} in the command and $ZEUS_PARAM_<NAME> in its environment.",
)
@click.option(
    "--device",
    "-d",
    default=None,
    metavar="NAME",
    help="The device plugin that measures (and sets power_limit). Default: the one installed plugin that measures GPUs "
    f"(${GPU_DEVICE_ENV} names one where several are).",
)
@click.option(
    "--set", "sets", multiple=True, metavar="DEVICE.KEY=VALUE", help="A device option, as in job.toml's [device] table, e.g. nvml.gpus=[0]."
)
@click.option(
    "--trials", default=3, show_default=True, type=click.IntRange(1, 1000), help="Trials per grid point (an interval needs 2 or more)."
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="The seed of the trial order (balanced rounds: each pair a shuffle and its reverse).",
)
@_number("--min-window", 0.0, click.FloatRange(0), "Shortest measured window (s): a trial repeats the target to fill it.")
@click.option(
    "--target-error",
    type=click.FloatRange(0, 1, min_open=True),
    help="Make each window long enough that the device's energy bound is at most this fraction (e.g. 0.01).",
)
@click.option("--warmup/--no-warmup", default=True, show_default=True, help="Run the target unmeasured until power and temperature settle.")
@click.option("--warmup-timeout", default=120.0, show_default=True, type=click.FloatRange(0, min_open=True), help="Longest warm-up (s).")
@_number("--settle-temperature", 1.0, click.FloatRange(0, min_open=True), "Settled: the last readings within this (°C).")
@_number("--settle-power", 0.05, click.FloatRange(0, min_open=True), "Settled: the last readings within this fraction of their mean power.")
@click.option("--cooldown/--no-cooldown", default=True, show_default=True, help="Before each trial, wait for the temperature band.")
@_number("--cooldown-band", 2.0, click.FloatRange(0), "The band: at most this many °C over the first reading.")
@click.option("--cooldown-timeout", default=60.0, show_default=True, type=click.FloatRange(0), help="Longest wait for the band (s).")
@_number("--confidence", 0.95, click.FloatRange(0, 1, min_open=True, max_open=True), "The intervals' confidence.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Also write every trial and interval here.")
def profile_command(
    target: tuple[str, ...],
    params: tuple[str, ...],
    device: str | None,
    sets: tuple[str, ...],
    trials: int,
    seed: int,
    min_window: float,
    target_error: float | None,
    warmup: bool,
    warmup_timeout: float,
    settle_temperature: float,
    settle_power: float,
    cooldown: bool,
    cooldown_band: float,
    cooldown_timeout: float,
    confidence: float,
    json_path: Path | None,
) -> None:
    """Profile a callable (MODULE:FUNCTION) or a command line (-- CMD ARGS...) over a parameter grid,
    thermally stably, and print energy, time and power per grid point with confidence intervals.

    \b
    Each trial: cool down to the temperature band (--cooldown-band over the first reading), set
    the point's power_limit, warm up until power and temperature settle (--settle-*), then
    measure in a window of at least --min-window seconds. Trials run in a balanced order: each
    pair of rounds is a seeded shuffle of the grid and its reverse, so no point is always
    measured first (cold) or after the hottest. power_limit is put back when the command ends,
    on Ctrl-C too.

    \b
    Examples (on the simulated driver: ZEUS_FAKE_NVML=state.json, see zeus_plugins_nvml.fake_pynvml):
      zeus profile -p power_limit=200,250,300 mytrain:step
      zeus profile -p power_limit=200,300 -p batch=32,64 --trials 4 -- python train.py --batch {batch}
    """
    console = make_console()
    err = make_console(stderr=True)
    grid = parse_params(params)
    if target and target[0] == "--":
        target = target[1:]
    if not target:
        raise BadInput("nothing to profile: give MODULE:FUNCTION or -- CMD ARGS...")
    runner = Target(target)
    runner.check(list(grid))
    reg, wanted, unknown = chosen_devices((device,) if device else ())
    if unknown:
        raise BadInput(unknown)
    tables, errors = device_options(reg, sets)
    if errors:
        raise BadInput("; ".join(errors))
    device, devices = _open(reg, device, tables, err)
    configs = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())] or [{}]
    monitor = Monitor(devices, target_error=None)
    try:
        if POWER_LIMIT in grid:
            if not isinstance(devices, PowerLimitControl):
                raise BadInput(f"--param power_limit: device {device!r} cannot set power limits")
            lo, hi = (float(x) for x in devices.power_limit_range())
            bad = [v for v in grid[POWER_LIMIT] if not lo <= float(v) <= hi]
            if bad:
                raise BadInput(f"--param power_limit: {', '.join(map(str, bad))} W outside the device's range {lo:g}-{hi:g} W")
        keys = [json.dumps(c, sort_keys=True) for c in configs]
        by_key = dict(zip(keys, configs, strict=True))

        def prepare(key: str) -> None:
            if POWER_LIMIT in by_key[key]:
                devices.set_power_limit(float(by_key[key][POWER_LIMIT]))

        def measure(key: str) -> Sample:
            monitor.begin_window("zeus-profile")
            try:
                runner(by_key[key])
            except BaseException:
                monitor.end_window("zeus-profile", cancel=True)
                raise
            m = monitor.end_window("zeus-profile")
            return Sample(m.time, float(sum(m.energy.values())))

        def on_trial(t: TrialSample) -> None:
            notes = ("" if t.settled else ", not settled") + ("" if t.cooled else ", cooldown timed out")
            err.print(
                f"[dim]{escape(_label(by_key[str(t.config)]))} trial {t.trial + 1}: {t.energy_j:.4g} J in {t.time_s:.4g} s "
                f"({t.runs} run(s), warm-up {t.warmup_runs}{notes})[/]"
            )

        profiler = ThermalProfiler(
            trials=trials,
            min_window_s=min_window,
            settling=Settling(temperature_c=settle_temperature, power_rel=settle_power, timeout_s=warmup_timeout) if warmup else None,
            cooldown=Cooldown(band_c=cooldown_band, timeout_s=cooldown_timeout) if cooldown else None,
            seed=seed,
            confidence=confidence,
        )
        start = time.monotonic()
        results = profiler.run(
            keys,
            prepare,
            measure,
            probe=device_probe(devices),
            on_trial=on_trial,
            window_need=bound_window(devices, target_error) if target_error else None,
        )
    finally:
        monitor.close()
        devices.close()  # puts the power limit back
    _print(console, results, by_key, confidence, trials, time.monotonic() - start)
    if json_path is not None:
        _write_json(json_path, results, by_key, confidence)


def _print(console: Any, results: list[ConfigResult[str]], by_key: dict[str, dict], confidence: float, trials: int, took: float) -> None:
    names = list(next(iter(by_key.values())))
    table = Table(title=f"zeus profile: {trials} trial(s) per point, {confidence:.0%} intervals ({took:.1f} s)")
    for n in names:
        table.add_column(n, justify="right")
    for col in ("energy (J)", "time (s)", "power (W)", "settled", "cooled"):
        table.add_column(col, justify="right")
    for r in results:
        cfg = by_key[r.config]
        settled = sum(t.settled for t in r.trials)
        cooled = sum(t.cooled for t in r.trials)
        table.add_row(
            *(str(cfg[n]) for n in names),
            _interval(r.energy_j),
            _interval(r.time_s),
            f"{r.power_w:.4g}",
            f"{settled}/{len(r.trials)}",
            f"{cooled}/{len(r.trials)}",
        )
    console.print(table)
    if trials < 2:
        console.print("[dim]one trial per point: no interval (--trials 2 or more)[/]")


def _write_json(path: Path, results: list[ConfigResult[str]], by_key: dict[str, dict], confidence: float) -> None:
    from zeus_core.files import atomic_path

    def finite(ci: Any) -> dict[str, float | None]:
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in ci._asdict().items()}

    rows = [
        {
            "params": by_key[r.config],
            "energy_j": finite(r.energy_j),
            "time_s": finite(r.time_s),
            "power_w": r.power_w,
            "trials": [
                {"trial": t.trial, "energy_j": t.energy_j, "time_s": t.time_s, "runs": t.runs, "settled": t.settled, "cooled": t.cooled}
                for t in r.trials
            ],
        }
        for r in results
    ]
    text = json.dumps({"confidence": confidence, "points": rows}, indent=1, allow_nan=False, default=str) + "\n"
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)
