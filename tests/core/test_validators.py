"""Shared option validators, as users meet them through `zeus validate` on first-party plugins."""

from click.testing import CliRunner
from zeus_test_helpers import write_job

from zeus_core.cli import main as zcli
from zeus_core.engine import registry as zreg


def validate(path):
    return CliRunner().invoke(zcli.cli, ["validate", str(path)], obj={"registry": zreg.load()})


def test_blank_strings_are_refused_with_the_line_and_field(tmp_path):
    job = write_job(
        tmp_path / "job.toml",
        """
        [job]
        name = "blank"

        [frequency_plan]
        plugin = "perseus"
        profile = "   "
        microbatches = 4
        blocking_power_w = 80.0
    """,
    )
    r = validate(job)
    assert r.exit_code == 2
    assert "job.toml:6: profile must not be empty @ $.frequency_plan.profile" in r.output


def test_trace_workload_blank_dataset_and_zero_iterations(tmp_path):
    job = write_job(
        tmp_path / "job.toml",
        """
        [workload]
        plugin = "trace"
        dataset = ""
        iterations_per_epoch = 0

        [device]
        plugin = "trace"

        [batch_size]
        plugin = "fixed"
    """,
    )
    r = validate(job)
    assert r.exit_code == 2
    assert "dataset must not be empty @ $.workload.dataset" in r.output
    assert "iterations_per_epoch must be positive, got 0 @ $.workload.iterations_per_epoch" in r.output
