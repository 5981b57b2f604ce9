"""The batch-size optimizer client of upstream's protocol, served by ``zeus serve``."""

from zeus.optimizer.batch_size.client import BatchSizeOptimizer
from zeus.optimizer.batch_size.common import JobParams, JobSpec

__all__ = ["BatchSizeOptimizer", "JobParams", "JobSpec"]
