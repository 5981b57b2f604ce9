"""zeus-plugins-prometheus: a job's energy, power, cost, tries and knobs as Prometheus metrics."""
