"""One rank of test_torchrun.py, started by torchrun (not collected by pytest).

argv: out_dir. Trains two jobs on this rank's simulated GPU: "scripted" from this script
(ZeusMonitor, BatchSizeOptimizer, PowerLimitOptimizer), then "launched" with run_job
(the torch workload, the same code zeus run runs). Writes what this rank saw to out_dir.
"""

import json
import os
import sys
from pathlib import Path

from inloop_helpers import QUICK_JIT, gpu_limit, spin

from zeus_core import BatchSizeOptimizer, PowerLimitOptimizer, ZeusMonitor
from zeus_plugins_torch import run_job

out = Path(sys.argv[1])
rank = int(os.environ["RANK"])
store = out / "scripted.sqlite"
with ZeusMonitor(cpu_indices=[]) as monitor:
    bso = BatchSizeOptimizer(job="scripted", policy="mab", batch_sizes=[16, 32, 64], default=32, monitor=monitor, store=store)
    tries = []
    for _ in range(2):
        trial = bso.next()
        steps = []
        with PowerLimitOptimizer(monitor, "jit", job="scripted", options=QUICK_JIT, batch_size=trial.batch_size, store=store) as plo:
            monitor.begin_window("try")
            for _ in range(2):
                plo.on_epoch_begin()
                for _ in range(150):
                    plo.on_step_begin()
                    steps.append([trial.batch_size, gpu_limit(monitor.gpu_indices[0])])
                    spin(0.0003)
                    plo.on_step_end()
                plo.on_epoch_end()
                if trial.should_stop(plo.epochs[-1]["cost"] * len(plo.epochs)):
                    break
            m = monitor.end_window("try")
            rec = bso.report(trial, energy_j=m.total_energy, time_s=m.time, reached=True, power=plo)
        tries.append({"steps": steps, "energy_j": m.total_energy, "recorded_j": rec.energy_j, "gpus": monitor.gpu_indices})
    bso.close()
(out / f"scripted-{rank}.json").write_text(json.dumps(tries))

summary = run_job(out / "launched.toml")
(out / f"launched-summary-{rank}.json").write_text(json.dumps({"recurrences": summary.recurrences}))
