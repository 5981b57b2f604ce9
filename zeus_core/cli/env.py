"""``zeus env``: what this machine offers zeus, plugin by plugin, and what this process may change.

Like upstream Zeus's ``python -m zeus.show_env``, but asked of the installed device
plugins through the device capabilities (the core names no plugin): each plugin
is opened as ``zeus monitor`` opens it (``--set`` passes options, ``--device``
picks plugins), described, and closed; nothing is changed on any device.
Privileges are read, never tried: what a process may change comes from
:class:`~zeus_core.device.ControlPaths` (``local``, ``daemon``, or ``read-only``
where it lacks the capability the vendor's setters check and no daemon socket is
configured). A plugin whose library or hardware is not on this machine
(:class:`~zeus_core.errors.DeviceAbsent`) is ``absent``, which is fast: the
plugins find that out before loading anything heavy, and torch's versions are
read from its ``version.py`` without importing it.

``zeus env --json`` prints one object, whose shape (``schema`` 1) is stable: keys
are only ever added, never renamed or removed::

    {
      "schema": 1,
      "zeus_core": "0.1.0",
      "python": {"version": "3.11.9", "implementation": "CPython", "executable": "/usr/bin/python3",
                 "platform": "Linux-6.8.0-x86_64-with-glibc2.39"},
      "torch": {"version": "2.13.0+cu126", "cuda": "12.6", "hip": null, "rocm": null},   # null: no torch
      "rocm": {"version": "6.4.1", "path": "/opt/rocm"},                                  # null: no ROCm found
      "environment": {"CUDA_VISIBLE_DEVICES": "0,1"},          # the variables zeus reads that are set
      "privileges": {"root": false, "cap_sys_admin": false, "cap_dac_override": false},
      "daemon": {"socket": "/run/zeus/daemon.sock", "reachable": true, "pid": 812,
                 "operations": ["nvml.set_power_limit", ...], "error": null},      # socket null: none set
      "gpu_device": {"plugin": "nvml", "why": "..."},          # whose GPUs ZeusMonitor measures (plugin null: none)
      "plugins": [
        {"name": "nvml", "distribution": "zeus-plugins-nvml", "version": "0.1.0", "measures": ["gpu"],
         "status": "found",                                    # found | absent | unavailable
         "reason": null,                                       # the plugin's own message where not found
         "simulated": false,                                   # a virtual clock (a replayed trace)
         "drivers": {"NVIDIA driver": "550.54.15", "CUDA driver API": "12.4"},
         "max_power_w": 800.0,
         "devices": [
           {"name": "gpu0", "model": "NVIDIA A100-SXM4-40GB", "energy_source": "counter",
            "power_limit": {"min_w": 100.0, "max_w": 400.0, "current_w": 400.0},   # null: not controllable
            "clocks": {"min_mhz": 210, "max_mhz": 1410, "count": 81},              # null: not controllable
            "changes": "read-only",                            # local | daemon | read-only; null: nothing to change
            "via": "local, read-only",                         # the device's control_paths, as zeus monitor's column
            "power_domains": {"instant": 61.0, "average": 60.2},   # W now, where the device reports them
            "temperature_c": 34.0}                             # null where it has no sensor
         ]}
      ]
    }
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click
from rich.markup import escape

from zeus_core.cli.consoles import make_console
from zeus_core.device import (
    ClockControl,
    ControlPaths,
    DeviceModels,
    DriverVersions,
    PerDevicePowerLimits,
    PowerDomainReadings,
    PowerLimitControl,
    TemperatureReadings,
)
from zeus_core.engine.registry import CORE_PLUGIN, Registry, get_registry
from zeus_core.errors import EXIT_BAD_INPUT, DeviceAbsent
from zeus_core.inloop import GPU_DEVICE_ENV

# The command's body loads the engine, the daemon client and rich's tables when it runs, not when
# ``zeus`` (which adds the command) starts.
if TYPE_CHECKING:
    from rich.console import Console

#: the shape of ``zeus env --json`` (keys are only ever added)
SCHEMA = 1

#: environment variables that change what zeus sees or uses, shown where set
ENVIRONMENT = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ROCM_PATH",
    "ZEUS_DAEMON_SOCKET",
    GPU_DEVICE_ENV,
    "ZEUS_STATE_DIR",
    "ZEUS_DISABLED_PLUGINS",
    "ZEUS_FAKE_NVML",
    "ZEUS_FAKE_AMDSMI",
    "ZEUS_FAKE_APPLE_SILICON",
)


# --------------------------------------------------------------------------- opening every device plugin


@attrs.define
class Probe:
    """One device plugin tried on this machine: ``found`` (``group`` is open), ``absent`` (its library
    or hardware is not here) or ``unavailable`` (any other reason), with the plugin's own message."""

    plugin: str
    status: str
    reason: str | None = None
    group: Any = None

    @property
    def simulated(self) -> bool:
        """A group on a virtual clock (a replayed trace), not this machine's hardware."""
        return self.group is not None and getattr(self.group, "clock", None) is not time.monotonic


def chosen_devices(devices: tuple[str, ...]) -> tuple[Registry, list[str], str | None]:
    """For a command with ``--device`` options: the registry, the device plugins to open (every one
    where none is named), and what is wrong with the names (None: nothing)."""
    obj = click.get_current_context().obj
    reg = obj["registry"] if isinstance(obj, dict) and "registry" in obj else get_registry()
    known = reg.names("device")
    unknown = [d for d in devices if d not in known]
    error = f"no device named {', '.join(unknown)}; installed: {', '.join(known) or 'none'}" if unknown else None
    return reg, list(devices) or known, error


def device_options(reg: Registry, sets: tuple[str, ...]) -> tuple[dict[str, dict], list[str]]:
    """``--set DEVICE.KEY=VALUE`` options as per-plugin tables, and what is wrong with any of them."""
    from zeus_core.engine.validation import parse_override

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


def probe_devices(reg: Registry, names: list[str], tables: dict[str, dict], console: Console) -> tuple[list[Probe], list[str]]:
    """Open each device plugin of ``names`` with its options table: a :class:`Probe` per plugin, and
    the option errors (``"name: message @ path"``), which open nothing. The caller closes what opened."""
    from zeus_core.engine.assembly import OptionsError, build_device

    probes: list[Probe] = []
    errors: list[str] = []
    for name in names:
        try:
            group, _ = build_device(reg, name, tables.get(name, {}), console)
        except OptionsError as e:
            errors += [f"{name}: {line}" for line in e.lines()]
        except DeviceAbsent as e:
            probes.append(Probe(name, "absent", str(e)))
        except Exception as e:  # noqa: BLE001 - a device this machine cannot open is reported, not fatal
            probes.append(Probe(name, "unavailable", str(e) or type(e).__name__))
        else:
            probes.append(Probe(name, "found", group=group))
    return probes, errors


def close_probes(probes: list[Probe]) -> list[str]:
    """Close every opened group (last first); the errors, one line each."""
    errors = []
    for p in reversed(probes):
        if p.group is not None:
            try:
                p.group.close()
            except Exception as e:  # noqa: BLE001 - close the others, then report
                errors.append(f"{p.plugin}: {e}")
            p.group = None
    return errors


# --------------------------------------------------------------------------- the machine


def _core_version(reg: Registry) -> str:
    return reg.distribution_of(CORE_PLUGIN)[1] or "0+unknown"


def torch_versions() -> dict[str, str | None] | None:
    """torch's version and the CUDA / HIP / ROCm it was built for, read from ``torch/version.py``
    without importing torch (seconds, and a CUDA context, saved); None where torch is not installed."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    values: dict[str, Any] = {}
    try:
        tree = ast.parse((Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text())
    except (OSError, SyntaxError, StopIteration):
        return {"version": None, "cuda": None, "hip": None, "rocm": None}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    return {
        key: (None if values.get(name) is None else str(values[name]))
        for key, name in (("version", "__version__"), ("cuda", "cuda"), ("hip", "hip"), ("rocm", "rocm"))
    }


def rocm_version() -> dict[str, str] | None:
    """The ROCm release installed under ``$ROCM_PATH`` (or ``/opt/rocm``), from its ``.info/version``."""
    root = Path(os.environ.get("ROCM_PATH") or "/opt/rocm")
    try:
        version = (root / ".info" / "version").read_text().strip().splitlines()[0].strip()
    except (OSError, IndexError):
        return None
    return {"version": version, "path": str(root)} if version else None


def daemon_status(timeout_s: float = 1.0) -> dict[str, Any]:
    """The ``zeus daemon`` socket this process would use, and what it answers (nothing is asked of it)."""
    from zeus_core.daemon import DaemonClient, DaemonError, socket_path

    sock = socket_path()
    out: dict[str, Any] = {"socket": sock, "reachable": None, "pid": None, "operations": [], "error": None}
    if not sock:
        return out
    try:
        with DaemonClient(sock, timeout_s=timeout_s) as client:
            hello = client.hello()
    except DaemonError as e:
        out.update(reachable=False, error=str(e))
        return out
    out.update(reachable=True, pid=hello.get("pid"), operations=sorted(hello.get("operations", [])))
    return out


# --------------------------------------------------------------------------- one plugin's devices


def _changes(via: str | None, controllable: bool) -> str | None:
    """What this process may do to the settings: ``local``, ``daemon`` or ``read-only`` (None: nothing to change)."""
    if not controllable:
        return None
    if via is None or via == "local":
        return "local"
    return "read-only" if "read-only" in via else via


def _safely(read: Any, default: Any = None) -> Any:
    try:
        return read()
    except Exception:  # noqa: BLE001 - a reading this device cannot give now is shown as absent
        return default


def describe_devices(group: Any) -> list[dict[str, Any]]:
    """Each device of an open group: its model, energy source, what can be controlled and whether this
    process may, and what it reads now, as far as the group's capabilities say."""
    models = _safely(lambda: group.device_models, {}) if isinstance(group, DeviceModels) else {}
    vias = _safely(lambda: group.control_paths, {}) if isinstance(group, ControlPaths) else {}
    domains = _safely(group.read_power_domains, {}) if isinstance(group, PowerDomainReadings) else {}
    temps = _safely(group.read_temperatures, {}) if isinstance(group, TemperatureReadings) else {}
    limit = None
    if isinstance(group, PowerLimitControl):
        lo_hi = _safely(group.power_limit_range)
        currents = _safely(group.power_limits, {}) if isinstance(group, PerDevicePowerLimits) else {}
        shared = None if currents else _safely(group.power_limit)
        limit = (lo_hi, currents, shared)
    clocks = None
    if isinstance(group, ClockControl):
        supported = _safely(group.supported_clocks, [])
        clocks = {"min_mhz": min(supported), "max_mhz": max(supported), "count": len(supported)} if supported else None
    sources = _safely(lambda: dict(group.energy_sources), {})
    out = []
    for name in _safely(lambda: list(group.names), []):
        power_limit = None
        if limit is not None:
            lo_hi, currents, shared = limit
            current = currents.get(name, shared)
            power_limit = {
                "min_w": None if lo_hi is None else float(lo_hi[0]),
                "max_w": None if lo_hi is None else float(lo_hi[1]),
                "current_w": None if current is None else float(current),
            }
        via = vias.get(name)
        out.append(
            {
                "name": name,
                "model": models.get(name),
                "energy_source": sources.get(name),
                "power_limit": power_limit,
                "clocks": clocks,
                "changes": _changes(via, limit is not None or clocks is not None),
                "via": via,
                "power_domains": dict(domains.get(name, {})),
                "temperature_c": temps.get(name),
            }
        )
    return out


def describe_plugin(reg: Registry, probe: Probe) -> dict[str, Any]:
    r = reg.get("device", probe.plugin)
    dist, version = reg.distribution_of(r.plugin)
    entry: dict[str, Any] = {
        "name": probe.plugin,
        "distribution": dist,
        "version": version,
        "measures": sorted(r.measures),
        "status": probe.status,
        "reason": probe.reason,
        "simulated": probe.simulated,
        "drivers": {},
        "max_power_w": None,
        "devices": [],
    }
    g = probe.group
    if g is not None:
        entry["drivers"] = dict(_safely(lambda: g.driver_versions, {})) if isinstance(g, DriverVersions) else {}
        max_power = _safely(lambda: float(g.max_power_w))
        entry["max_power_w"] = max_power or None
        entry["devices"] = describe_devices(g)
    return entry


def gpu_choice(reg: Registry, probes: list[Probe]) -> dict[str, Any]:
    """Whose GPUs ``ZeusMonitor`` measures here, as it would choose (``inloop.monitor.open_gpus``)."""
    measuring = {r.name for r in reg.measuring("gpu")}
    found = [p.plugin for p in probes if p.plugin in measuring and p.status == "found"]
    named = os.environ.get(GPU_DEVICE_ENV)
    if named:
        ok = named in measuring
        return {
            "plugin": named if ok else None,
            "why": f"{GPU_DEVICE_ENV}={named}" + ("" if ok else ", which names no installed plugin that measures GPUs"),
        }
    if len(found) == 1:
        return {"plugin": found[0], "why": "the one plugin whose GPUs open here"}
    if not found:
        return {"plugin": None, "why": "no plugin that measures GPUs opens here"}
    return {"plugin": None, "why": f"GPUs of {', '.join(found)} open here: ZeusMonitor asks for device= or {GPU_DEVICE_ENV}"}


def machine_report(reg: Registry, probes: list[Probe]) -> dict[str, Any]:
    """Everything ``zeus env`` says, in its JSON shape (see the module docstring)."""
    from zeus_core.daemon import CAP_SYS_ADMIN, has_capability
    from zeus_core.devicekit import CAP_DAC_OVERRIDE
    from zeus_core.engine.provenance import python_info

    return {
        "schema": SCHEMA,
        "zeus_core": _core_version(reg),
        "python": python_info(),
        "torch": torch_versions(),
        "rocm": rocm_version(),
        "environment": {k: os.environ[k] for k in ENVIRONMENT if k in os.environ},
        "privileges": {
            "root": os.geteuid() == 0,
            "cap_sys_admin": has_capability(CAP_SYS_ADMIN),
            "cap_dac_override": has_capability(CAP_DAC_OVERRIDE),
        },
        "daemon": daemon_status(),
        "gpu_device": gpu_choice(reg, probes),
        "plugins": [describe_plugin(reg, p) for p in probes],
    }


# --------------------------------------------------------------------------- the command


def _watts(w: float | None) -> str:
    return "-" if w is None else f"{w:g} W"


def _device_rows(plugin: dict[str, Any]) -> list[list[str]]:
    rows = []
    for d in plugin["devices"]:
        limit = d["power_limit"]
        if limit is None or all(v is None for v in limit.values()):
            lim = "-"
        else:
            lim = f"{_watts(limit['current_w'])} ({_watts(limit['min_w'])}..{_watts(limit['max_w'])})"
        clocks = d["clocks"]
        clk = "-" if clocks is None else f"{clocks['count']} SM clocks, {clocks['min_mhz']}..{clocks['max_mhz']} MHz"
        reads = [f"{k} {v:.1f} W" for k, v in d["power_domains"].items()]
        if d["temperature_c"] is not None:
            reads.append(f"{d['temperature_c']:.0f} °C")
        rows.append([d["name"], d["model"] or "-", d["energy_source"] or "-", lim, clk, d["changes"] or "-", ", ".join(reads) or "-"])
    return rows


def print_report(report: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    py, torch = report["python"], report["torch"]
    lines = [f"zeus-core {report['zeus_core']}, Python {py['version']} ({py['executable']}), {py['platform']}"]
    if torch is None:
        lines.append("torch: not installed")
    else:
        built = ", ".join(f"{label} {torch[k]}" for k, label in (("cuda", "CUDA"), ("hip", "HIP"), ("rocm", "ROCm")) if torch[k])
        lines.append(f"torch {torch['version']} ({built or 'CPU only'})")
    rocm = report["rocm"]
    lines.append(f"ROCm {rocm['version']} ({rocm['path']})" if rocm else "ROCm: not found (ROCM_PATH, /opt/rocm)")
    priv = report["privileges"]
    lines.append("privileges: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in priv.items()))
    d = report["daemon"]
    if not d["socket"]:
        lines.append("zeus daemon: no socket configured (ZEUS_DAEMON_SOCKET, or a device's daemon_socket)")
    elif d["reachable"]:
        lines.append(f"zeus daemon: {d['socket']} (pid {d['pid']}), serves {', '.join(d['operations']) or 'nothing'}")
    else:
        lines.append(f"zeus daemon: {d['socket']}: {d['error']}")
    for k, v in report["environment"].items():
        lines.append(f"{k}={v}")
    gpu = report["gpu_device"]
    lines.append(f"ZeusMonitor's GPUs: {gpu['plugin'] or 'none'} ({gpu['why']})")
    for line in lines:
        console.print(escape(line), highlight=False)
    for plugin in report["plugins"]:
        head = f"{plugin['name']} ({plugin['distribution']} {plugin['version']})"
        if plugin["status"] != "found":
            style = "dim" if plugin["status"] == "absent" else "yellow"
            console.print(f"[{style}]{escape(head)}: {plugin['status']}: {escape(plugin['reason'] or '')}[/]")
            continue
        extra = [f"{k} {v}" for k, v in plugin["drivers"].items()] + (["simulated (virtual clock)"] if plugin["simulated"] else [])
        t = Table(title=escape(head + (": " + ", ".join(extra) if extra else "")), title_justify="left")
        for col in ("device", "model", "energy", "power limit", "clocks", "this process may", "reads now"):
            t.add_column(col)
        for row in _device_rows(plugin):
            t.add_row(*map(escape, row))
        console.print(t)


@click.command("env")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object, of the shape the README documents (schema 1).")
@click.option("--device", "-d", "devices", multiple=True, metavar="NAME", help="Device plugin to describe (repeatable); default every one.")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="DEVICE.KEY=VALUE",
    help="A device option, as in job.toml's [device] table, e.g. jetson.sysfs_root=/host/sys.",
)
def env_command(as_json: bool, devices: tuple[str, ...], sets: tuple[str, ...]) -> None:
    """Show what this machine offers: each device plugin, its devices, what this process may change, versions."""
    console = make_console()
    err = make_console(stderr=True)
    reg, wanted, unknown = chosen_devices(devices)
    tables, errors = device_options(reg, sets)
    if unknown:
        errors.insert(0, unknown)
    probes: list[Probe] = []
    if not errors:
        probes, errors = probe_devices(reg, wanted, tables, err)
    try:
        if errors:
            for e in errors:
                err.print(f"[bold red]error:[/] {escape(e)}")
            sys.exit(EXIT_BAD_INPUT)
        report = machine_report(reg, probes)
    finally:
        for e in close_probes(probes):
            err.print(f"[bold red]error while closing a device:[/] {escape(e)}")
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_report(report, console)


__all__ = ["Probe", "probe_devices", "close_probes", "describe_devices", "daemon_status"]
