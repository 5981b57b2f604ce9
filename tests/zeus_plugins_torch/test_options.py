"""The ``[workload]`` table of the torch workload, and what loading the plugin costs.

``zeus validate`` names every bad option at once, each with its field path and
what to write instead, before any training function is imported. Every ``zeus``
command loads the plugin's registration module, so that module must not pull in
torch or numpy.
"""

from __future__ import annotations

import subprocess
import sys

from zeus_test_helpers import run_cli, write_job

JOB = """
[job]
name = "opts"
target_metric = 0.9

[workload]
plugin = "torch"
{workload}

[device]
plugin = "wall"

[batch_size]
plugin = "fixed"
default = 32
"""


def validate(registry, tmp_path, workload: str) -> tuple[int, str]:
    path = write_job(tmp_path / "job.toml", JOB.format(workload=workload))
    result = run_cli(registry, "validate", str(path))
    return result.exit_code, " ".join(result.output.split())


def test_every_bad_option_is_named_with_its_path_and_fix(registry, tmp_path):
    code, out = validate(
        registry,
        tmp_path,
        """
        entry = "my-train:run"
        batch_sizes = [32, 0, 64]
        default_batch_size = 0
        lr_scaling = "cubic"
        accelerator = "tpu"
        threads = -1
        timeout_s = inf
        allocation = "  "
    """,
    )
    assert code == 2
    for field, message in [
        ("entry", "entry must look like 'package.module:function', got 'my-train:run'"),
        ("batch_sizes", "batch_sizes must list batch sizes, each at least 1; got 0 in [32, 0, 64]"),
        ("default_batch_size", "default_batch_size must be positive, got 0"),
        ("lr_scaling", "lr_scaling must be one of 'auto', 'sqrt', 'linear', 'none'; got 'cubic'"),
        ("accelerator", "accelerator must be one of 'auto', 'cpu', 'cuda'; got 'tpu'"),
        ("threads", "threads must be a finite number >= 0, got -1"),
        ("timeout_s", "timeout_s must be a finite number, got inf"),  # a rank would wait forever
        ("allocation", "allocation must not be empty"),
    ]:
        assert message in out and f"$.workload.{field}" in out, (field, out)


def test_batch_sizes_are_distinct_and_hold_the_default(registry, tmp_path):
    code, out = validate(registry, tmp_path, 'entry = "train:train"\nbatch_sizes = [16, 32, 16]')
    assert code == 2 and "batch_sizes lists 16 twice: [16, 32, 16]" in out
    code, out = validate(registry, tmp_path, 'entry = "train:train"\nbatch_sizes = [16, 32]\ndefault_batch_size = 64')
    assert code == 2 and "default_batch_size 64 is not one of batch_sizes [16, 32]; add it to the list" in out
    # Good options pass; no list at all is fine too (policies then bring their own).
    code, out = validate(registry, tmp_path, 'entry = "pkg.train:loop.run"\nbatch_sizes = [16, 32]\ndefault_batch_size = 32')
    assert code == 0, out
    assert validate(registry, tmp_path, 'entry = "train:train"\nthreads = 0')[0] == 0


def test_registering_the_plugin_imports_neither_torch_nor_numpy():
    code = (
        "import sys, zeus_plugins_torch.plugin as p\n"
        "assert p.zeus_register_workloads\n"
        "heavy = sorted(m for m in ('torch', 'numpy', 'zeus_plugins_torch.workload') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
