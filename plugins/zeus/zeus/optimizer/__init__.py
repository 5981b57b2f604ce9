"""Optimizers: ``zeus.optimizer.power_limit`` (JIT power-limit profiling) and ``zeus.optimizer.batch_size`` (the client)."""
