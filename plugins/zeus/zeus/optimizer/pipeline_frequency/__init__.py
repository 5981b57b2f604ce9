"""Optimize the energy of pipeline-parallel training with Perseus (upstream's ``zeus.optimizer.pipeline_frequency``).

Every forward and backward of a pipeline iteration gets its own GPU SM clock, from a plan on the
iteration's time-energy frontier. Here the plans come from ``zeus-plugins-perseus``'s planner
through its plan server (``zeus perseus serve``), and the clocks are locked through the same
frequency controller Perseus uses. Needs PyTorch (``torch.distributed``).
"""

from zeus.optimizer.pipeline_frequency.optimizer import PipelineFrequencyOptimizer

__all__ = ["PipelineFrequencyOptimizer"]
