"""The nvml device's power domains and temperatures (PowerDomainReadings, TemperatureReadings)."""

from __future__ import annotations

from zeus_core import PowerDomainReadings, TemperatureReadings
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.fake_pynvml import FakeGpu


def test_power_domains_are_nvmls_field_values_where_the_gpu_has_them(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # three models: CUDA numbers them as NVML does
    fake_nvml(
        [
            FakeGpu(name="NVIDIA H100 80GB HBM3", demand_w=520.0, max_limit_w=700.0, default_limit_w=700.0, memory_power_w=61.5),
            FakeGpu(demand_w=230.5),  # an A100: no memory domain
            FakeGpu(name="Tesla V100", arch=4, demand_w=120.0, power_fields=False),  # a driver without the power fields
        ]
    )
    with NvmlGpus() as dev:
        assert isinstance(dev, PowerDomainReadings)
        assert dev.read_power_domains() == {
            "gpu0": {"instant": 520.0, "average": 520.0, "memory": 61.5},  # mW -> W
            "gpu1": {"instant": 230.5, "average": 230.5},
            "gpu2": {},  # absent, never zero
        }


def test_temperatures_are_the_gpu_dies_in_celsius(fake_nvml):
    fake_nvml([FakeGpu(temperature_c=47), FakeGpu(temperature_c=71)])
    with NvmlGpus() as dev:
        assert isinstance(dev, TemperatureReadings)
        assert dev.read_temperatures() == {"gpu0": 47.0, "gpu1": 71.0}
