"""A two-size trace for the mab policy's exploratory-try tests, simulated end to end.

bs 8: steady epoch cost 1740 (100 W), reaches the target at epoch 3 (a recurrence: 5220);
bs 16: steady epoch cost 1140 (200 W), never reaches it.
"""

from __future__ import annotations

from zeus_core import JobOptions
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.policy import MabPolicy
from zeus_plugins_trace.device import TraceDevice, TraceDeviceOptions
from zeus_plugins_trace.simulate import simulate
from zeus_plugins_trace.traces import load_traces, select

TRAIN = (
    "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\nd,n,8,sgd,0.1,1,0.5,3\nd,n,16,sgd,0.1,1,0.5,nan\n"
)
POWER = (
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
    "d,n,8,sgd,200,10,150\nd,n,8,sgd,100,12,90\nd,n,16,sgd,200,6,180\nd,n,16,sgd,100,9,100\n"
)
#: A recurrence at 8, and one epoch at 16, both at the limit the JIT holds.
BEST, CPE_16 = 3 * 1740.0, 1140.0


def run_tiny(tmp_path, recurrences: int = 3, **options):
    """(policy, SimResult, job) of ``recurrences`` recurrences from default 8 with ``options``."""
    (tmp_path / "summary_train.csv").write_text(TRAIN)
    (tmp_path / "summary_power_g.csv").write_text(POWER)
    trace = select(load_traces(tmp_path, "g"), "d", "n", "sgd", 0.5)
    device = TraceDevice(TraceDeviceOptions(gpu="g"))
    device.attach(trace)
    job = JobOptions(name="t", recurrences=recurrences, seed=0, eta_knob=0.5, beta_knob=2.0, target_metric=0.5, max_epochs=100)
    policy = MabPolicy(MabOptions(default=8, **options), 0, device.predict_epoch)
    return policy, simulate(trace, policy, job, default_batch_size=8), job
