"""``zeus monitor``: live power and energy of every device the installed plugins provide.

Like upstream Zeus's standalone power monitor: a table refreshed each second
(power over the last second, average power and energy since start, and where
each figure comes from), optionally a CSV of every sample, and a summary when
Ctrl-C (or SIGTERM, or ``--duration``) ends it. The core names no device: the
devices are whatever ``zeus_register_devices`` registered; without
``--device`` every one that can be opened on this machine is shown, and the
others are listed with the reason. Devices are opened through
:mod:`zeus_core.engine.assembly`, as every tool outside a job does. The ``via`` column
says whether a device's privileged operations (setters, root-only counters)
run in this process (``local``) or through ``zeus daemon`` (``daemon``).
"""

from __future__ import annotations

import csv
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from zeus_core.cli.consoles import make_console
from zeus_core.device import ControlPaths
from zeus_core.engine.assembly import open_devices
from zeus_core.engine.registry import Registry, get_registry
from zeus_core.engine.validation import parse_override
from zeus_core.measurement import format_joules


class _Stop(BaseException):
    """SIGTERM while monitoring: end like Ctrl-C."""


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise _Stop()


def _device_options(reg: Registry, sets: tuple[str, ...]) -> tuple[dict[str, dict], list[str]]:
    tables: dict[str, dict] = {}
    errors = []
    for text in sets:
        try:
            path, value = parse_override(text)
        except ValueError as e:
            errors.append(str(e))
            continue
        if len(path) != 2:
            errors.append(f"--set {text!r}: expected DEVICE.key=value, e.g. cpu-estimate.tdp_w=120")
            continue
        if path[0] not in reg.parts["device"]:
            errors.append(f"--set {text!r}: no device named {path[0]!r}; installed: {', '.join(reg.names('device'))}")
            continue
        tables.setdefault(path[0], {})[path[1]] = value
    return tables, errors


class Sampler:
    """Energy of every device since start, and power over the last interval."""

    def __init__(self, groups: list[tuple[str, Any]]) -> None:
        self.groups = groups
        names = [n for _, g in groups for n in g.names]
        # Two plugins may both call a device "gpu0": then the key says which plugin's.
        self._key = {(p, n): (n if names.count(n) == 1 else f"{p}/{n}") for p, g in groups for n in g.names}
        self.rows: list[tuple[str, str, str]] = [
            (plugin, self._key[plugin, n], g.energy_sources.get(n, "?")) for plugin, g in groups for n in g.names
        ]
        #: per row, the group and device name whose ``control_paths`` say how its settings change
        self._via = {self._key[p, n]: (g, n) for p, g in groups for n in g.names}
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.e0 = self._read()
        self.t_prev, self.e_prev = self.t0, dict(self.e0)
        self.power: dict[str, float | None] = {n: None for _, n, _ in self.rows}
        self.energy: dict[str, float] = {n: 0.0 for _, n, _ in self.rows}
        self.elapsed = 0.0

    def _read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for plugin, g in self.groups:
            for n, joules in g.read_energy().items():
                out[self._key[plugin, n]] = joules
        return out

    def sample(self) -> None:
        t = time.monotonic()
        e = self._read()
        dt = t - self.t_prev
        for n in e:
            if dt > 0:
                self.power[n] = (e[n] - self.e_prev[n]) / dt
            self.energy[n] = e[n] - self.e0[n]
        self.t_prev, self.e_prev = t, e
        self.elapsed = t - self.t0

    def via(self, key: str) -> str:
        """``local`` or ``daemon``: the path the device's privileged operations take (``-``: none)."""
        g, n = self._via[key]
        return str(g.control_paths.get(n, "-")) if isinstance(g, ControlPaths) else "-"

    def table(self, title: str, final: bool = False) -> Table:
        t = Table(title=title, title_justify="left")
        t.add_column("device")
        t.add_column("name")
        t.add_column("source")
        t.add_column("via")
        if not final:
            t.add_column("power now", justify="right")
        t.add_column("avg power", justify="right")
        t.add_column("energy since start", justify="right")
        total_p, total_e = 0.0, 0.0
        for plugin, n, source in self.rows:
            p = self.power[n]
            avg = self.energy[n] / self.elapsed if self.elapsed > 0 else None
            total_p += p or 0.0
            total_e += self.energy[n]
            src = Text(source, style="yellow") if source == "estimate" else Text(source)
            cells: list[str | Text] = [plugin, n, src, self.via(n)]
            if not final:
                cells.append("-" if p is None else f"{p:.1f} W")
            cells += ["-" if avg is None else f"{avg:.1f} W", format_joules(self.energy[n])]
            t.add_row(*cells)
        avg_total = total_e / self.elapsed if self.elapsed > 0 else 0.0
        footer = ["total", "", "", ""] + ([f"{total_p:.1f} W"] if not final else []) + [f"{avg_total:.1f} W", format_joules(total_e)]
        t.add_section()
        t.add_row(*footer, style="bold")
        return t


class SampleLog:
    """CSV of every sample: time, elapsed_s, then ``<name>_power_w`` and ``<name>_energy_j`` per device."""

    def __init__(self, path: Path, names: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = path.open("w", newline="")
        self._w = csv.writer(self._f)
        self.names = names
        self._w.writerow(["time", "elapsed_s", *(f"{n}_{k}" for n in names for k in ("power_w", "energy_j"))])

    def write(self, s: Sampler) -> None:
        cells: list[str] = [f"{s.wall0 + s.elapsed:.3f}", f"{s.elapsed:.3f}"]
        for n in self.names:
            p = s.power[n]
            cells += ["" if p is None else f"{p:.3f}", f"{s.energy[n]:.6f}"]
        self._w.writerow(cells)
        self._f.flush()

    def close(self) -> None:
        self._f.close()


@click.command("monitor")
@click.option("--device", "-d", "devices", multiple=True, metavar="NAME",
              help="Device plugin to show (repeatable); default every device this machine can open.")
@click.option("--set", "sets", multiple=True, metavar="DEVICE.KEY=VALUE",
              help="A device option, as in job.toml's [device] table, e.g. cpu-estimate.tdp_w=120.")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(0.05, 3600),
              help="Seconds between samples and table refreshes.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), help="Write every sample to this CSV file.")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Stop after this many seconds (default: until Ctrl-C).")
def monitor_command(
    devices: tuple[str, ...], sets: tuple[str, ...], interval: float, csv_path: Path | None, duration: float | None
) -> None:
    """Show live power and energy of every device; Ctrl-C ends with a summary."""
    console = make_console()
    err = make_console(stderr=True)
    obj = click.get_current_context().obj
    reg = obj["registry"] if isinstance(obj, dict) and "registry" in obj else get_registry()
    known = reg.names("device")
    unknown = [d for d in devices if d not in known]
    if unknown:
        err.print(f"[bold red]error:[/] no device named {escape(', '.join(unknown))}; installed: {escape(', '.join(known)) or 'none'}")
        sys.exit(2)
    tables, errors = _device_options(reg, sets)
    wanted = list(devices) or known
    opened, unavailable, opt_errors = open_devices(reg, wanted, tables, console)
    errors += opt_errors
    if errors:
        for e in errors:
            err.print(f"[bold red]error:[/] {escape(e)}")
        for _, g in opened:
            g.close()
        sys.exit(2)
    if devices and unavailable:  # asked for by name: it must open
        for name, why in unavailable:
            err.print(f"[bold red]error:[/] {escape(name)}: {escape(why)}")
        for _, g in opened:
            g.close()
        sys.exit(2)
    if not devices:  # by default, real devices only: a simulated one has its own (virtual) clock
        for name, g in [x for x in opened if getattr(x[1], "clock", None) is not time.monotonic]:
            opened.remove((name, g))
            g.close()
            unavailable.append((name, "simulated (virtual clock); name it with --device to show it anyway"))
    for name, why in unavailable:
        console.print(f"[dim]{escape(name)}: unavailable: {escape(why)}[/]")
    if not opened:
        err.print("[bold red]error:[/] no device can be opened on this machine; install a device plugin or see the reasons above")
        sys.exit(1)
    sampler = Sampler(opened)
    log = SampleLog(csv_path, [n for _, n, _ in sampler.rows]) if csv_path else None
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    hint = Text("Ctrl-C to stop", style="dim")
    try:
        with Live(Group(sampler.table("zeus monitor: starting"), hint), console=console, auto_refresh=False, transient=True) as live:
            next_t = sampler.t0 + interval
            while duration is None or sampler.elapsed < duration:
                wait = next_t - time.monotonic()
                if duration is not None:
                    wait = min(wait, sampler.t0 + duration - time.monotonic())
                if wait > 0:
                    time.sleep(wait)
                sampler.sample()
                next_t += interval
                if log is not None:
                    log.write(sampler)
                live.update(Group(sampler.table(f"zeus monitor: {sampler.elapsed:.0f} s"), hint), refresh=True)
    except (KeyboardInterrupt, _Stop):
        sampler.sample()
        if log is not None:
            log.write(sampler)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if log is not None:
            log.close()
        for _, g in reversed(opened):
            try:
                g.close()
            except Exception as e:  # noqa: BLE001 - report, close the others
                err.print(f"[bold red]error while closing a device:[/] {escape(str(e))}")
    console.print(sampler.table(f"zeus monitor: summary over {sampler.elapsed:.1f} s", final=True))
    if any(src == "estimate" for _, _, src in sampler.rows):
        console.print("[yellow]estimate[/]: not measured but modelled (e.g. TDP x utilisation)")
    if csv_path:
        console.print(f"wrote {escape(str(csv_path))}")

