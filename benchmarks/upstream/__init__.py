"""Helpers of ``benchmarks/upstream_tests.py``: the pytest plugin that runs upstream's tests on the simulated drivers."""
