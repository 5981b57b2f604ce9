"""``zeus monitor``: live power, energy and temperature of every device the installed plugins provide.

Like upstream Zeus's standalone power monitor: a table refreshed each second
(power over the last second, average power and energy since start, and where
each figure comes from), optionally a CSV of every sample, and a summary when
Ctrl-C (or SIGTERM, or ``--duration``) ends it. The core names no device: the
devices are whatever ``zeus_register_devices`` registered; without
``--device`` every one that can be opened on this machine is shown, and the
others are listed with the reason (a plugin whose library or hardware is not
here is ``not here``). The ``via`` column says whether a device's privileged
operations (setters, root-only counters) run in this process (``local``) or
through ``zeus daemon`` (``daemon``).

Devices that read them through their capabilities show more: their temperature
(:class:`~zeus_core.device.TemperatureReadings`) and the vendor's power domains,
named (:class:`~zeus_core.device.PowerDomainReadings`: ``instant``, ``average``,
``memory``). The total row adds each device once: a device whose energy another
measured device includes (:class:`~zeus_core.device.EnergyIncludes`, a Jetson's
input rail) is left out of it.

The energy since start shows its +/- bound (``1.234 kJ ± 3 J``; ``± ?`` where the device does
not say how it measures: :class:`~zeus_core.device.EnergyPrecision`), the total row the sum of
the bounds it adds.

The CSV has ``time``, ``elapsed_s``, then per device ``<name>_power_w``,
``<name>_energy_j`` and ``<name>_energy_error_j`` (its +/- bound in joules, empty where
unknown) and, beside them where the device reads them,
``<name>_temperature_c`` and ``<name>_power_<domain>_w``; the columns are fixed
by the first reading, and a value a device does not give at a sample is empty. It is written
to a hidden temporary file beside it and put in place when the monitor ends
(:func:`zeus_core.files.atomic_path`), so a reader never sees half of it; when a write fails
(a full disk, a read-only one, an I/O error) the monitor stops, shows its summary, removes the
temporary file and exits 1 naming the file and why.

``--node HOST:PORT`` (repeatable) shows node daemons' devices instead of this machine's: each
node's ``zeus daemon`` (or upstream zeusd) streams its GPUs' and CPUs' power over its HTTP API
(:class:`zeus_core.daemon.nodeclient.Fleet`); a node that goes away is retried every second and
its stream reopened, and each sample's time is put on this machine's clock by the node's offset,
measured over ``/time`` at every (re)connection. ``--token`` (default ``$ZEUSD_TOKEN``) is shown
to daemons that want one. Its ``--csv`` (:class:`FleetLog`) is long: a row per node and device
at each refresh, written atomically as above.
"""

from __future__ import annotations

import csv
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from zeus_core.cli.consoles import make_console
from zeus_core.cli.env import chosen_devices, close_probes, device_options, probe_devices
from zeus_core.device import ControlPaths, EnergyIncludes, EnergyPrecision, PowerDomainReadings, TemperatureReadings
from zeus_core.files import atomic_path, cannot_write
from zeus_core.measurement import format_bound, format_joules

if TYPE_CHECKING:  # rich's live display and tables load when the command runs
    from rich.table import Table
    from rich.text import Text

#: the order power domains are shown in (others follow, by name)
DOMAIN_ORDER = ("instant", "average", "memory")


class _Stop(BaseException):
    """SIGTERM while monitoring: end like Ctrl-C."""


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise _Stop()


def _ordered(domains: Any) -> list[str]:
    return sorted(domains, key=lambda d: (DOMAIN_ORDER.index(d) if d in DOMAIN_ORDER else len(DOMAIN_ORDER), d))


class Sampler:
    """Energy of every device since start, power over the last interval, and the temperatures and
    power domains of the devices that read them."""

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
        #: rows a total leaves out: their energy is inside another measured device's (``EnergyIncludes``)
        self.included: dict[str, str] = {}
        for p, g in groups:
            names = g.names
            if isinstance(g, EnergyIncludes):
                for outer, inner in g.energy_includes.items():
                    if outer in names:
                        self.included.update({self._key[p, n]: self._key[p, outer] for n in inner if n in names})
        self.temperature: dict[str, float | None] = {}
        self.domains: dict[str, dict[str, float]] = {}
        #: what a temperature or power-domain reading failed with, by plugin (the last failure)
        self.read_errors: dict[str, str] = {}
        self._read_extras()
        #: per row, the temperature and the power domains it had at the first reading (the CSV's columns)
        self.temperature_rows = [n for _, n, _ in self.rows if self.temperature.get(n) is not None]
        self.domain_rows = {n: _ordered(self.domains[n]) for _, n, _ in self.rows if self.domains.get(n)}
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.e0 = self._read()
        self.t_prev, self.e_prev = self.t0, dict(self.e0)
        self.power: dict[str, float | None] = {n: None for _, n, _ in self.rows}
        self.energy: dict[str, float] = {n: 0.0 for _, n, _ in self.rows}
        #: per row, the +/- bound (J) on its energy since start (NaN: the device does not say)
        self.errors: dict[str, float] = {n: self._bound(n, 0.0, 0.0) for _, n, _ in self.rows}
        self.elapsed = 0.0

    def _read_extras(self) -> None:
        """Temperatures and power domains of the groups that read them; a failed reading leaves the
        group's values empty and is kept in :attr:`read_errors`."""
        for plugin, g in self.groups:
            names = g.names
            readers = (
                ("temperatures", TemperatureReadings, lambda g=g: g.read_temperatures(), self.temperature),
                ("power domains", PowerDomainReadings, lambda g=g: g.read_power_domains(), self.domains),
            )
            for what, capability, read, into in readers:
                if not isinstance(g, capability):
                    continue
                try:
                    got = read()
                except Exception as e:  # noqa: BLE001 - the energy goes on; the summary says what failed
                    self.read_errors[f"{plugin} {what}"] = str(e) or type(e).__name__
                    got = {}
                for n in names:
                    into[self._key[plugin, n]] = got.get(n)

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
        for n in e:
            self.errors[n] = self._bound(n, self.elapsed, self.energy[n])
        self._read_extras()

    def _bound(self, key: str, seconds: float, joules: float) -> float:
        """The +/- bound (J) on a row's energy over ``seconds`` (:class:`~zeus_core.device.Precision`; NaN: unknown)."""
        g, n = self._via[key]
        precision = g.energy_precision.get(n) if isinstance(g, EnergyPrecision) else None
        return math.nan if precision is None else precision.bound_j(seconds, joules)

    def via(self, key: str) -> str:
        """``local`` or ``daemon``: the path the device's privileged operations take (``-``: none)."""
        g, n = self._via[key]
        return str(g.control_paths.get(n, "-")) if isinstance(g, ControlPaths) else "-"

    def table(self, title: str, final: bool = False) -> Table:
        from rich.table import Table
        from rich.text import Text

        temps, domains = any(v is not None for v in self.temperature.values()), any(self.domains.values())
        t = Table(title=title, title_justify="left")
        t.add_column("device")
        t.add_column("name")
        t.add_column("source")
        t.add_column("via")
        if not final:
            t.add_column("power now", justify="right")
        t.add_column("avg power", justify="right")
        t.add_column("energy since start", justify="right")
        if temps and not final:
            t.add_column("temp", justify="right")
        if domains and not final:
            t.add_column("power domains")
        total_p, total_e, total_err = 0.0, 0.0, 0.0
        for plugin, n, source in self.rows:
            p = self.power[n]
            avg = self.energy[n] / self.elapsed if self.elapsed > 0 else None
            if n not in self.included:
                total_p += p or 0.0
                total_e += self.energy[n]
                total_err += self.errors[n]
            src = Text(source, style="yellow") if source == "estimate" else Text(source)
            cells: list[str | Text] = [plugin, n, src, self.via(n)]
            if not final:
                cells.append("-" if p is None else f"{p:.1f} W")
            cells += ["-" if avg is None else f"{avg:.1f} W", format_bound(self.energy[n], self.errors[n])]
            if temps and not final:
                c = self.temperature.get(n)
                cells.append("-" if c is None else f"{c:.0f} °C")
            if domains and not final:
                d = self.domains.get(n) or {}
                cells.append(", ".join(f"{k} {d[k]:.1f} W" for k in _ordered(d)) or "-")
            t.add_row(*cells)
        avg_total = total_e / self.elapsed if self.elapsed > 0 else 0.0
        footer = (
            ["total", "", "", ""] + ([f"{total_p:.1f} W"] if not final else []) + [f"{avg_total:.1f} W", format_bound(total_e, total_err)]
        )
        footer += [""] * (len(t.columns) - len(footer))
        t.add_section()
        t.add_row(*footer, style="bold")
        return t

    def notes(self) -> list[str]:
        """What the total leaves out, and readings that failed."""
        out: list[str] = []
        by_outer: dict[str, list[str]] = {}
        for inner, outer in self.included.items():
            by_outer.setdefault(outer, []).append(inner)
        for outer, inners in by_outer.items():
            out.append(f"total: {outer} includes {', '.join(inners)}, which are not added again")
        out += [f"{what} could not be read: {why}" for what, why in self.read_errors.items()]
        return out


def _cell(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


class SampleLog:
    """CSV of every sample: time, elapsed_s, then per device ``<name>_power_w``, ``<name>_energy_j``,
    ``<name>_energy_error_j`` (its +/- bound; empty where unknown) and,
    where the device reads them, ``<name>_temperature_c`` and ``<name>_power_<domain>_w``.

    Written to a temporary file beside ``path`` (:func:`~zeus_core.files.atomic_path`) and put in
    place by :meth:`close`; an ``OSError`` (naming ``path``) from the constructor or :meth:`write`
    means nothing was put there."""

    def __init__(self, path: Path, s: Any) -> None:  # a Sampler (FleetLog: a FleetView)
        self._f: Any = None
        self._closed = False
        self._atomic = atomic_path(path)
        tmp = self._atomic.__enter__()
        try:
            self._f = tmp.open("w", newline="")
            self._w = csv.writer(self._f)
            self._start(s)
        except BaseException as e:
            self.close(e)
            raise

    def _start(self, s: Sampler) -> None:
        self.names = [n for _, n, _ in s.rows]
        self._temps = set(s.temperature_rows)
        self._domains = s.domain_rows
        header = ["time", "elapsed_s"]
        for n in self.names:
            header += [f"{n}_power_w", f"{n}_energy_j", f"{n}_energy_error_j"]
            header += [f"{n}_temperature_c"] if n in self._temps else []
            header += [f"{n}_power_{d}_w" for d in self._domains.get(n, ())]
        self._w.writerow(header)
        self._f.flush()  # a full disk shows now, before the monitor starts

    def write(self, s: Sampler) -> None:
        cells: list[str] = [f"{s.wall0 + s.elapsed:.3f}", f"{s.elapsed:.3f}"]
        for n in self.names:
            error = s.errors.get(n, math.nan)
            cells += [_cell(s.power[n], 3), f"{s.energy[n]:.6f}", f"{error:.6f}" if math.isfinite(error) else ""]
            if n in self._temps:
                cells.append(_cell(s.temperature.get(n), 2))
            domains = s.domains.get(n) or {}
            cells += [_cell(domains.get(d), 3) for d in self._domains.get(n, ())]
        self._w.writerow(cells)
        self._f.flush()

    def close(self, failed: BaseException | None = None) -> OSError | None:
        """Put the CSV in place; after ``failed`` (or when closing fails) remove the temporary file
        instead. The write error, if any, is returned (``failed`` itself when it is one)."""
        if self._closed:
            return failed if isinstance(failed, OSError) else None
        self._closed = True
        try:
            if self._f is not None:
                self._f.close()
        except OSError as e:
            failed = failed or e  # the buffered rows did not fit either
        try:
            if failed is None:
                self._atomic.__exit__(None, None, None)  # fsync, rename into place
            else:
                self._atomic.__exit__(type(failed), failed, failed.__traceback__)  # removes the temporary file
        except OSError as e:
            failed = e
        return failed if isinstance(failed, OSError) else None


def _ticks(t0: float, interval: float, duration: float | None, elapsed: Callable[[], float]) -> Iterator[None]:
    """Yield every ``interval`` seconds from ``t0`` (the last one at ``duration``) while ``elapsed()`` is short of it."""
    next_t = t0 + interval
    while duration is None or elapsed() < duration:
        wait = next_t - time.monotonic()
        if duration is not None:
            wait = min(wait, t0 + duration - time.monotonic())
        if wait > 0:
            time.sleep(wait)
        next_t += interval
        yield


class FleetLog(SampleLog):
    """``zeus monitor --node``'s CSV: one row per device of every node at each refresh, long format
    (a node's devices are known only once it answers): ``time``, ``elapsed_s``, ``node``, ``device``,
    ``state``, ``power_w``, ``energy_j``, ``sample_time`` (the latest sample's time on this
    machine's clock, the node's clock offset corrected), ``samples``. Written as ``--csv`` is."""

    def _start(self, s: Any) -> None:
        self._w.writerow(["time", "elapsed_s", "node", "device", "state", "power_w", "energy_j", "sample_time", "samples"])
        self._f.flush()

    def write(self, s: Any) -> None:
        now, elapsed = time.time(), time.monotonic() - s.t0
        for node, readings in s.fleet.snapshot():
            for device, r in sorted(readings.items()):
                figures = [f"{r.watts:.3f}", f"{r.energy_j:.6f}", f"{r.time_s:.3f}", r.samples]
                self._w.writerow([f"{now:.3f}", f"{elapsed:.3f}", node.name, device, node.state, *figures])
        self._f.flush()


class FleetView:
    """What ``zeus monitor --node`` shows: per node and device, the live power from its stream."""

    def __init__(self, fleet: Any) -> None:
        self.fleet = fleet
        self.t0 = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def table(self, title: str, final: bool = False) -> Table:
        from rich.table import Table

        t = Table(title=title, title_justify="left")
        for name in ("node", "state", "clock offset", "reconnects", "device"):
            t.add_column(name)
        if not final:
            t.add_column("power now", justify="right")
        for name in ("avg power", "energy", "samples"):
            t.add_column(name, justify="right")
        total_p, total_e = 0.0, 0.0
        now = time.time()
        for node, readings in self.fleet.snapshot():
            offset = "-" if node.offset_s is None else f"{node.offset_s * 1000:+.0f} ms"
            reconnects = str(max(node.connections - len(node.streams), 0))
            state = node.state if node.state != "connected" else "streaming"
            if not readings:
                cells = [node.name, state, offset, reconnects, escape(node.detail[:60]) or "-"]
                t.add_row(*cells, *([""] * (len(t.columns) - len(cells))))
                continue
            for device, r in sorted(readings.items()):
                fresh = now - r.time_s < 5.0
                avg = r.energy_j / self.elapsed if self.elapsed > 0 else None
                if fresh:
                    total_p += r.watts
                total_e += r.energy_j
                cells = [node.name, state, offset, reconnects, device]
                if not final:
                    cells.append(f"{r.watts:.1f} W" if fresh else "-")
                cells += ["-" if avg is None else f"{avg:.1f} W", format_joules(r.energy_j), str(r.samples)]
                t.add_row(*cells)
        footer = ["total", "", "", "", ""] + ([f"{total_p:.1f} W"] if not final else [])
        footer += [f"{total_e / self.elapsed:.1f} W" if self.elapsed > 0 else "-", format_joules(total_e), ""]
        t.add_section()
        t.add_row(*footer, style="bold")
        return t


def _monitor_nodes(nodes: tuple[str, ...], token: str | None, interval: float, csv_path: Path | None, duration: float | None) -> None:
    """``zeus monitor --node ...``: stream every node's power until Ctrl-C, SIGTERM or ``--duration``."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    from zeus_core.daemon.nodeclient import Endpoint, Fleet

    console = make_console()
    err = make_console(stderr=True)
    endpoints = []
    for text in nodes:
        try:
            endpoints.append(Endpoint.parse(text, token))
        except ValueError as e:
            err.print(f"[bold red]error:[/] --node {escape(str(e))}")
            sys.exit(2)
    try:
        fleet = Fleet(endpoints)
    except ValueError as e:
        err.print(f"[bold red]error:[/] --node: {escape(str(e))}")
        sys.exit(2)
    view = FleetView(fleet)
    try:
        log = FleetLog(csv_path, view) if csv_path else None
    except OSError as e:
        err.print(f"[bold red]error:[/] {escape(cannot_write(e, f'--csv {csv_path}'))}")
        sys.exit(1)
    fleet.start()
    write_error: OSError | None = None
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    hint = Text("Ctrl-C to stop", style="dim")
    try:
        with Live(Group(view.table("zeus monitor: connecting"), hint), console=console, auto_refresh=False, transient=True) as live:
            for _ in _ticks(view.t0, interval, duration, lambda: view.elapsed):
                if log is not None:
                    try:
                        log.write(view)
                    except OSError as e:
                        write_error = e
                        break
                live.update(Group(view.table(f"zeus monitor: {len(endpoints)} node(s), {view.elapsed:.0f} s"), hint), refresh=True)
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        fleet.stop()
        if log is not None:
            write_error = log.close(write_error)
    console.print(view.table(f"zeus monitor: summary over {view.elapsed:.1f} s", final=True))
    for node in fleet.nodes:
        if node.state in ("refused", "away") or not node.connections:
            console.print(f"[yellow]{escape(node.name)}[/]: {escape(node.state)}: {escape(node.detail or 'never streamed')}")
    if write_error is not None:
        why = cannot_write(write_error, f"--csv {csv_path}")
        err.print(f"[bold red]error:[/] {escape(why)} (monitoring stopped after {view.elapsed:.1f} s)")
        sys.exit(1)
    if csv_path:
        console.print(f"wrote {escape(str(csv_path))}")
    if not any(n.connections for n in fleet.nodes):
        err.print("[bold red]error:[/] no node streamed; see the reasons above")
        sys.exit(1)


def _close_groups(opened: list[tuple[str, Any]], err: Any) -> None:
    for _, g in reversed(opened):
        try:
            g.close()
        except Exception as e:  # noqa: BLE001 - report, close the others
            err.print(f"[bold red]error while closing a device:[/] {escape(str(e))}")


@click.command("monitor")
@click.option(
    "--device",
    "-d",
    "devices",
    multiple=True,
    metavar="NAME",
    help="Device plugin to show (repeatable); default every device this machine can open.",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="DEVICE.KEY=VALUE",
    help="A device option, as in job.toml's [device] table, e.g. cpu-estimate.tdp_w=120.",
)
@click.option(
    "--interval", default=1.0, show_default=True, type=click.FloatRange(0.05, 3600), help="Seconds between samples and table refreshes."
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write every sample to this CSV file: per device <name>_power_w, <name>_energy_j and <name>_energy_error_j "
    "(the energy's +/- bound in joules, empty where the device does not say), then temperatures and power domains.",
)
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Stop after this many seconds (default: until Ctrl-C).")
@click.option(
    "--node",
    "nodes",
    multiple=True,
    metavar="HOST:PORT",
    help="Show the live power of the node daemon there (zeus daemon or upstream zeusd; repeatable; a socket path works too) "
    "instead of this machine's devices.",
)
@click.option(
    "--token",
    envvar="ZEUSD_TOKEN",
    metavar="TOKEN",
    help="The token --node daemons want (zeus daemon token issue --scope gpu-read,cpu-read); default $ZEUSD_TOKEN.",
)
def monitor_command(
    devices: tuple[str, ...],
    sets: tuple[str, ...],
    interval: float,
    csv_path: Path | None,
    duration: float | None,
    nodes: tuple[str, ...],
    token: str | None,
) -> None:
    """Show live power, energy and temperature of every device; Ctrl-C ends with a summary.

    Each energy shows its +/- bound (1.234 kJ ± 3 J): from the counter's update period, or the
    polling period and the power reading's coverage; "± ?" where the device does not say.
    """
    if nodes:
        if devices or sets:
            err = make_console(stderr=True)
            err.print("[bold red]error:[/] --node shows node daemons' devices; --device and --set are for this machine's")
            sys.exit(2)
        _monitor_nodes(nodes, token, interval, csv_path, duration)
        return
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    console = make_console()
    err = make_console(stderr=True)
    reg, wanted, unknown = chosen_devices(devices)
    if unknown:
        err.print(f"[bold red]error:[/] {escape(unknown)}")
        sys.exit(2)
    tables, errors = device_options(reg, sets)
    probes, opt_errors = probe_devices(reg, wanted, tables, console) if not errors else ([], [])
    errors += opt_errors
    missing = [p for p in probes if p.group is None]
    if errors or (devices and missing):  # bad options; or asked for by name, and it must open
        for e in errors:
            err.print(f"[bold red]error:[/] {escape(e)}")
        for p in missing if not errors else []:
            err.print(f"[bold red]error:[/] {escape(p.plugin)}: {escape(p.reason or p.status)}")
        close_probes(probes)
        sys.exit(2)
    if not devices:  # by default, real devices only: a simulated one has its own (virtual) clock
        for p in [p for p in probes if p.simulated]:
            close_probes([p])
            p.status, p.reason = "unavailable", "simulated (virtual clock); name it with --device to show it anyway"
    for p in probes:
        if p.group is None:
            label = "not here" if p.status == "absent" else "unavailable"
            console.print(f"[dim]{escape(p.plugin)}: {label}: {escape(p.reason or '')}[/]")
    opened = [(p.plugin, p.group) for p in probes if p.group is not None]
    if not opened:
        err.print("[bold red]error:[/] no device can be opened on this machine; install a device plugin or see the reasons above")
        sys.exit(1)
    try:
        sampler = Sampler(opened)
    except BaseException:
        close_probes(probes)
        raise
    try:
        log = SampleLog(csv_path, sampler) if csv_path else None
    except OSError as e:  # its folder is read-only, its disk full: say so before monitoring anything
        _close_groups(opened, err)
        err.print(f"[bold red]error:[/] {escape(cannot_write(e, f'--csv {csv_path}'))}")
        sys.exit(1)
    write_error: OSError | None = None
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    hint = Text("Ctrl-C to stop", style="dim")
    try:
        with Live(Group(sampler.table("zeus monitor: starting"), hint), console=console, auto_refresh=False, transient=True) as live:
            for _ in _ticks(sampler.t0, interval, duration, lambda: sampler.elapsed):
                sampler.sample()
                if log is not None:
                    try:
                        log.write(sampler)
                    except OSError as e:  # the disk filled up (or failed) under the CSV: stop, and say so
                        write_error = e
                        break
                live.update(Group(sampler.table(f"zeus monitor: {sampler.elapsed:.0f} s"), hint), refresh=True)
    except (KeyboardInterrupt, _Stop):
        sampler.sample()
        if log is not None and write_error is None:
            try:
                log.write(sampler)
            except OSError as e:
                write_error = e
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if log is not None:
            write_error = log.close(write_error)
        _close_groups(opened, err)
    console.print(sampler.table(f"zeus monitor: summary over {sampler.elapsed:.1f} s", final=True))
    for note in sampler.notes():
        console.print(escape(note))
    if any(src == "estimate" for _, _, src in sampler.rows):
        console.print("[yellow]estimate[/]: not measured but modelled (e.g. TDP x utilisation)")
    if write_error is not None:
        err.print(
            f"[bold red]error:[/] {escape(cannot_write(write_error, f'--csv {csv_path}'))} "
            f"(monitoring stopped after {sampler.elapsed:.1f} s)"
        )
        sys.exit(1)
    if csv_path:
        console.print(f"wrote {escape(str(csv_path))}")
