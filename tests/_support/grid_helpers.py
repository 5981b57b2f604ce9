"""Helpers for the tests of grid signals: an ImageNet/ResNet-50 job replayed on the NSDI'23 traces with a
``[grid]`` table, and a registry of the plugins it uses."""

from __future__ import annotations

from pathlib import Path

from zeus_core.engine import registry as zreg

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "zeus_nsdi23"
if not TRACES.is_dir():
    TRACES = Path("/work/shared/data/zeus_nsdi23")


def grid_registry(*extra):
    """The baseline, trace, mab and grid plugins (and ``extra`` (name, module) pairs), no entry points."""
    from zeus_plugins_baseline import plugin as baseline_plugin
    from zeus_plugins_grid import plugin as grid_plugin
    from zeus_plugins_mab import plugin as mab_plugin
    from zeus_plugins_trace import plugin as trace_plugin

    return zreg.load(
        entry_points=False,
        extra_plugins=[("baseline", baseline_plugin), ("trace", trace_plugin), ("mab", mab_plugin), ("grid", grid_plugin), *extra],
    )


def trace_job(
    folder: Path, grid: str, power: str = 'plugin = "max"', recurrences: int = 2, gpu: str = "a40", name: str = "grid-job"
) -> Path:
    """``folder/job.toml``: ImageNet/ResNet-50 at batch size 256 on the ``gpu`` trace, with ``[grid]`` lines
    ``grid`` and ``[power]`` lines ``power``; its store in ``folder``."""
    lines = [
        "[job]",
        f'name = "{name}"',
        f"recurrences = {recurrences}",
        "seed = 1",
        "target_metric = 0.65",
        "max_epochs = 100",
        f'store = "{folder / "store.sqlite"}"',
        "",
        "[grid]",
        grid,
        "",
        "[workload]",
        'plugin = "trace"',
        f'traces = "{TRACES}"',
        'dataset = "imagenet"',
        'model = "resnet50"',
        'optimizer = "adadelta"',
        "",
        "[device]",
        'plugin = "trace"',
        f'gpu = "{gpu}"',
        "",
        "[batch_size]",
        'plugin = "fixed"',
        "default = 256",
        "",
        "[power]",
        power,
        "",
    ]
    path = folder / "job.toml"
    path.write_text("\n".join(lines))
    return path
