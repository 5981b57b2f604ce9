"""On a machine with an NVIDIA GPU: the nvml device's checks that need real hardware.

1. Counter energy versus polled energy over the same load (a 10 s matmul loop
   on GPU 0): both devices measure one window; they should agree within 2%.
2. A power limit set to the minimum, read back, then restored by ``close()``.
3. SM clocks locked to a middle supported clock, read back, then reset.
   (2 and 3 need root or CAP_SYS_ADMIN; without it the permission error and its
   fix are printed instead.)

    python benchmarks/measurement_real_gpu.py [--seconds 10]

``--fake`` runs the same code against the simulated driver with a sleep as the
load, to check the script itself on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table


def load(seconds: float, fake: bool) -> None:
    if fake:
        time.sleep(seconds)
        return
    import torch

    a = torch.randn(8192, 8192, device="cuda:0")
    b = torch.randn(8192, 8192, device="cuda:0")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            a = a @ b
            a = a / a.norm()
        torch.cuda.synchronize(0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fake", action="store_true", help="simulated driver and a sleep, to check this script")
    args = ap.parse_args()
    console = Console()
    if args.fake:
        from zeus_plugins_nvml import fake_pynvml

        tmp = tempfile.mkdtemp()
        fake_pynvml.install(fake_pynvml.create(Path(tmp) / "driver.json", 1, privileged=True))

    from zeus_core import DeviceError, Monitor
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    counter = NvmlGpus(NvmlOptions(gpus=[0]))
    polled = NvmlGpus(NvmlOptions(gpus=[0], energy="polling"))
    g = counter.gpus[0]
    console.print(f"GPU 0: {g.model} ({g.uuid}), energy source {g.source}")
    mon = Monitor([counter], sync="torch" if not args.fake else "none")
    mon_p = Monitor([polled], sync="none")
    load(1.0, args.fake)  # warm up
    mon.begin_window("load")
    mon_p.begin_window("load")
    load(args.seconds, args.fake)
    mp = mon_p.end_window("load")
    mc = mon.end_window("load")
    polled.close()
    ec, ep = mc.energy["gpu0"], mp.energy["gpu0"]
    t = Table(title=f"counter vs polled energy over {mc.time:.1f} s")
    for col in ("source", "energy J", "avg power W"):
        t.add_column(col, justify="right")
    t.add_row(mc.sources["gpu0"], f"{ec:.1f}", f"{ec / mc.time:.1f}")
    t.add_row(mp.sources["gpu0"], f"{ep:.1f}", f"{ep / mp.time:.1f}")
    console.print(t)
    diff = abs(ep - ec) / ec if ec else float("nan")
    console.print(f"difference {diff * 100:.2f}% (target < 2%)")

    try:
        lo, hi = counter.power_limit_range()
        before = counter.power_limit()
        counter.set_power_limit(lo)
        now = counter.power_limit()
        console.print(f"power limit {before:g} W -> set {lo:g} W -> read back {now:g} W (range {lo:g}..{hi:g})")
        clocks = counter.supported_clocks()
        mid = clocks[len(clocks) // 2]
        counter.lock_clocks(mid)
        load(1.0, args.fake)
        sm_mhz = counter._nvml.nvmlDeviceGetClockInfo(g.handle, counter._nvml.NVML_CLOCK_SM)
        console.print(f"SM clock locked to {mid} MHz; NVML reports {sm_mhz} MHz under load")
        counter.reset_clocks()
        console.print("SM clock reset")
    except DeviceError as e:
        console.print(f"[yellow]control not available:[/] {e}")
    finally:
        counter.close()
    reopened = NvmlGpus(NvmlOptions(gpus=[0]))
    console.print(f"after close: power limit {reopened.power_limit():g} W (restored)")
    reopened.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
