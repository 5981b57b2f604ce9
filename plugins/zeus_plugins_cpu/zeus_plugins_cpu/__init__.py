"""zeus-plugins-cpu: CPU energy through RAPL (device ``rapl``) or estimated (device ``cpu-estimate``)."""
