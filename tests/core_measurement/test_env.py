"""`zeus env`: what this machine offers, on the simulated drivers of nvml, amdsmi, jetson and apple-silicon
(the real plugins, through their entry points), and on a machine where none of their libraries is."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from importlib.metadata import version

import pytest
from click.testing import CliRunner

import zeus_core.daemon
from zeus_core import DeviceError, hookimpl
from zeus_core.cli.main import cli
from zeus_core.devicekit import settings as settings_module
from zeus_core.engine import registry as zreg
from zeus_core.engine.registry import get_registry
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_apple_silicon import fake_apple_silicon
from zeus_plugins_jetson.fake_sysfs import write_tree
from zeus_plugins_nvml import fake_pynvml

FAKES = (
    "ZEUS_FAKE_NVML",
    "ZEUS_FAKE_AMDSMI",
    "ZEUS_FAKE_APPLE_SILICON",
    "ZEUS_GPU_DEVICE",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "ROCM_PATH",
)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """No simulated driver, no capability (as a training user's process): what each test adds is all there is."""
    for var in FAKES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # not installed
    monkeypatch.setattr(settings_module, "has_capability", lambda bit: False)
    monkeypatch.setattr(zeus_core.daemon, "has_capability", lambda bit: False)  # what zeus env asks
    return tmp_path


def zeus_env(*args, registry=None):
    r = CliRunner().invoke(cli, ["env", *args], obj={"registry": registry or get_registry()}, catch_exceptions=False)
    return r, (json.loads(r.stdout) if "--json" in args and r.exit_code == 0 else None)


def by_name(report):
    return {p["name"]: p for p in report["plugins"]}


def test_every_simulated_device_plugin_is_described(machine, monkeypatch):
    fake_pynvml.install(fake_pynvml.create(machine / "nvml.json", 2, privileged="root"), monkeypatch)
    fake_amdsmi.install(fake_amdsmi.create(machine / "amd.json", [fake_amdsmi.FakeAmdGpu(demand_w=300.0)]), monkeypatch)
    monkeypatch.setenv(fake_apple_silicon.ENV, str(fake_apple_silicon.create(machine / "apple.json")))
    board = write_tree(
        machine / "sys", "hwmon", {"VDD_IN": 7.5, "VDD_CPU_GPU_CV": 2.5, "VDD_SOC": 1.8}, model="NVIDIA Jetson Orin Nano Developer Kit"
    )
    (machine / "rocm" / ".info").mkdir(parents=True)
    (machine / "rocm" / ".info" / "version").write_text("6.4.1-120\n")
    monkeypatch.setenv("ROCM_PATH", str(machine / "rocm"))
    r, report = zeus_env("--json", "--set", f"jetson.sysfs_root={board}", "--set", "amdsmi.counter_check_s=0.05")
    assert r.exit_code == 0, r.output
    assert report["schema"] == 1 and report["zeus_core"]
    assert report["torch"]["version"] == version("torch") and report["torch"]["cuda"] is None  # the CPU wheel
    assert report["rocm"] == {"version": "6.4.1-120", "path": str(machine / "rocm")}
    assert report["privileges"] == {"root": report["privileges"]["root"], "cap_sys_admin": False, "cap_dac_override": False}
    assert report["daemon"]["socket"] is None
    plugins = by_name(report)

    nv = plugins["nvml"]
    assert nv["status"] == "found" and nv["measures"] == ["gpu"] and nv["distribution"] == "zeus-plugins-nvml"
    assert nv["drivers"] == {"NVIDIA driver": "550.54.15", "CUDA driver API": "12.4"}
    gpu0 = nv["devices"][0]
    assert [d["name"] for d in nv["devices"]] == ["gpu0", "gpu1"] and nv["max_power_w"] == 800.0
    assert gpu0["model"] == "NVIDIA A100-SXM4-40GB" and gpu0["energy_source"] == "counter"
    assert gpu0["power_limit"] == {"min_w": 100.0, "max_w": 400.0, "current_w": 400.0}
    assert gpu0["clocks"] == {"min_mhz": 210, "max_mhz": 1410, "count": 81}
    assert gpu0["changes"] == "read-only" and gpu0["via"] == "local, read-only"  # no CAP_SYS_ADMIN, no daemon
    assert gpu0["temperature_c"] == 45.0 and set(gpu0["power_domains"]) == {"instant", "average"}

    amd = plugins["amdsmi"]["devices"][0]
    assert amd["model"] == "AMD Instinct MI300X" and amd["energy_source"] == "counter"
    assert amd["power_limit"] == {"min_w": 200.0, "max_w": 750.0, "current_w": 750.0}
    assert amd["clocks"] == {"min_mhz": 510, "max_mhz": 2100, "count": 107}  # the GFX ceilings a plan may lock: every 15 MHz
    assert amd["changes"] == "read-only" and amd["temperature_c"] == 62.0
    assert amd["power_domains"] == {"instant": 300.0, "average": 300.0}
    assert plugins["amdsmi"]["drivers"] == {"amdgpu driver": "6.10.5", "amdsmi library": "26.0.2"}

    jetson = plugins["jetson"]
    assert [d["name"] for d in jetson["devices"]] == ["vdd_in", "vdd_cpu_gpu_cv", "vdd_soc"]
    rail = jetson["devices"][1]
    assert rail["model"] == "VDD_CPU_GPU_CV rail of NVIDIA Jetson Orin Nano Developer Kit"
    assert rail["energy_source"] == "polling" and rail["power_limit"] is None and rail["changes"] is None
    assert rail["temperature_c"] == 43.0

    apple = plugins["apple-silicon"]
    assert [(d["name"], d["model"], d["energy_source"]) for d in apple["devices"]] == [
        (n, "Apple M2 Max", "counter") for n in ("cpu", "gpu", "ane", "dram")
    ]
    assert all(d["changes"] is None and d["temperature_c"] is None for d in apple["devices"])

    assert plugins["cpu-estimate"]["devices"][0]["energy_source"] == "estimate"
    assert plugins["trace"]["simulated"] is True and plugins["nvml"]["simulated"] is False
    # two plugins' GPUs open here: ZeusMonitor would ask which
    assert report["gpu_device"]["plugin"] is None and "amdsmi, nvml open here" in report["gpu_device"]["why"]


def test_what_this_process_may_change_follows_its_privilege_and_the_daemon_socket(machine, monkeypatch):
    fake_pynvml.install(fake_pynvml.create(machine / "nvml.json", 1, privileged="root"), monkeypatch)
    monkeypatch.setenv("ZEUS_DAEMON_SOCKET", str(machine / "nowhere.sock"))
    r, report = zeus_env("--json", "-d", "nvml")
    assert [p["name"] for p in report["plugins"]] == ["nvml"]
    assert report["plugins"][0]["devices"][0]["changes"] == "daemon"
    assert report["daemon"]["socket"] == str(machine / "nowhere.sock") and report["daemon"]["reachable"] is False
    assert report["daemon"]["error"].startswith(f"cannot reach the zeus daemon at {machine / 'nowhere.sock'}")
    assert report["gpu_device"] == {"plugin": "nvml", "why": "the one plugin whose GPUs open here"}
    monkeypatch.delenv("ZEUS_DAEMON_SOCKET")
    monkeypatch.setattr(settings_module, "has_capability", lambda bit: bit == 21)  # CAP_SYS_ADMIN held
    r, report = zeus_env("--json", "-d", "nvml")
    assert report["plugins"][0]["devices"][0]["changes"] == "local"
    r, _ = zeus_env("-d", "nvml")  # the table says the same
    assert r.exit_code == 0 and "NVIDIA A100-SXM4-40GB" in r.output and "local" in r.output


def test_a_machine_without_any_vendor_library(machine, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "zeus_apple_silicon", None)
    r, report = zeus_env("--json")
    assert r.exit_code == 0, r.output
    plugins = by_name(report)
    for name, says in (
        ("nvml", "pynvml cannot be imported"),
        ("amdsmi", "amdsmi Python package is not installed"),
        ("apple-silicon", "zeus_apple_silicon cannot be imported"),
        ("jetson", "no INA3221 power monitor"),
    ):
        assert plugins[name]["status"] == "absent" and says in plugins[name]["reason"], plugins[name]
        assert plugins[name]["devices"] == []
    assert report["gpu_device"] == {"plugin": None, "why": "no plugin that measures GPUs opens here"}
    r, _ = zeus_env()
    assert r.exit_code == 0 and "nvml (zeus-plugins-nvml" in r.output and "absent: pynvml cannot be imported" in " ".join(r.output.split())


def test_a_failing_plugin_is_unavailable_with_its_own_message_and_bad_input_exits_2(machine):
    plugin = types.ModuleType("zeus_test_env_devices")

    def broken(options, context):
        raise DeviceError("the driver is wedged: reload it")

    @hookimpl
    def zeus_register_devices(register):
        register("wedged", broken)

    plugin.zeus_register_devices = zeus_register_devices
    reg = zreg.load(extra_plugins=[("envtest", plugin)], entry_points=False)
    r, report = zeus_env("--json", registry=reg)
    assert by_name(report)["wedged"] == {
        "name": "wedged",
        "distribution": "(not installed; registered directly)",
        "version": "",
        "measures": [],
        "status": "unavailable",
        "reason": "the driver is wedged: reload it",
        "simulated": False,
        "drivers": {},
        "max_power_w": None,
        "devices": [],
    }
    r, _ = zeus_env("-d", "nope", registry=reg)
    assert r.exit_code == 2 and "no device named nope; installed: wedged" in r.output
    r, _ = zeus_env("--set", "wedged=1", registry=reg)
    assert r.exit_code == 2 and "expected DEVICE.key=value" in r.output


def test_it_is_quick_where_nothing_is_installed_and_never_imports_torch(machine):
    code = (
        "import json, sys\nfrom click.testing import CliRunner\nfrom zeus_core.cli.main import cli\n"
        "from zeus_core.engine.registry import get_registry\n"
        "r = CliRunner().invoke(cli, ['env', '--json'], obj={'registry': get_registry()})\n"
        "print(json.dumps({'exit': r.exit_code, 'torch': 'torch' in sys.modules, 'report': json.loads(r.stdout)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["exit"] == 0 and got["torch"] is False
    assert got["report"]["torch"]["version"] == version("torch")  # read without importing it
