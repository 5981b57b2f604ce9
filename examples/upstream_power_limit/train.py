"""Upstream Zeus's documented power-limit example, with only the imports changed.

Upstream's docs ("Power Limit Optimizer") integrate ``GlobalPowerLimitOptimizer`` into a
training loop with the calls marked below; this file is that example as written, with
``zeus.monitor`` / ``zeus.optimizer.power_limit`` replaced by ``zeus_core`` /
``zeus_plugins_mab``. The model, data and step (which upstream's snippet leaves to the
reader) are a tiny classifier on generated data. On a machine without GPUs, run it on the
simulated NVIDIA driver:

    python -m zeus_plugins_nvml.fake_pynvml /tmp/zeus-fake-nvml.json --gpus 4 --privileged
    ZEUS_FAKE_NVML=/tmp/zeus-fake-nvml.json python examples/upstream_power_limit/train.py

It profiles every power limit (25 W apart, highest first) during the first epochs, then
holds the optimum (printed to stderr) on all four GPUs, and puts them back at exit.
"""

import torch
from torch.utils.data import DataLoader, TensorDataset

from zeus_core import ZeusMonitor  # upstream: from zeus.monitor import ZeusMonitor
from zeus_plugins_mab import (
    GlobalPowerLimitOptimizer,  # upstream: from zeus.optimizer.power_limit import GlobalPowerLimitOptimizer
)

# The user's own model and data (8 steps an epoch: upstream's 650 profiling steps fit in its 100 epochs).
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(32, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_dataloader = DataLoader(TensorDataset(torch.randn(256, 32), torch.randint(0, 10, (256,))), batch_size=32)

# Upstream's example from here on.
# Data parallel training with four GPUs.
monitor = ZeusMonitor(gpu_indices=[0,1,2,3])
plo = GlobalPowerLimitOptimizer(monitor)

for _epoch in range(100):
    plo.on_epoch_begin()

    for x, y in train_dataloader:
        plo.on_step_begin()
        # Learn from x and y
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        plo.on_step_end()

    plo.on_epoch_end()
