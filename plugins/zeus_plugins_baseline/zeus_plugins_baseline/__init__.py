"""Baseline policies that make zeus-core useful, and comparable, before any research plugin."""
