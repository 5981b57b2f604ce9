"""Progress within a try: on a terminal a live line over each epoch's steps, ended with the try
(also when the training fails); elsewhere a line per finished epoch (test_example checks those)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from zeus_test_helpers import write_job

from zeus_core import RunFailed
from zeus_plugins_torch.api import run_job

JOB = """
[job]
recurrences = 1
max_epochs = 3
target_metric = 0.75
store = "s.sqlite"
beta_knob = inf  # no early stop: a slow epoch under load must not end the try
[device]
plugin = "cpu-estimate"
[batch_size]
plugin = "fixed"
default = 8
"""


def steps_train(batch_size, zeus):
    for epoch in zeus.epochs():
        for _ in zeus.iterate(range(7)):
            sum(range(2000))
        zeus.report_metric(epoch / 4)


def failing_train(batch_size, zeus):
    for epoch in zeus.epochs():
        for i in zeus.iterate(range(7)):
            if epoch == 2 and i == 3:
                raise ZeroDivisionError("blew up mid-epoch")


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=160, color_system=None), out


def test_a_terminal_shows_the_epoch_its_steps_and_the_metric(tmp_path):
    console, out = terminal()
    summary = run_job(write_job(tmp_path / "job.toml", JOB), steps_train, console=console)
    assert summary.tries == 1
    text = out.getvalue()
    for epoch in (1, 2, 3):
        assert f"recurrence 1, try 1, batch 8: epoch {epoch} of at most 3" in text
    assert "7/7 steps" in text
    assert "metric 0.5 (target 0.75)" in text
    assert "epoch 1: 7 steps" not in text  # full lines are for output that is not a terminal
    assert text.rfind("\x1b[?25h") > text.rfind("steps") and console._live_stack == []  # noqa: SLF001 - the live line ended


def test_a_failed_try_ends_the_live_line_before_its_error(tmp_path):
    console, out = terminal()
    with pytest.raises(RunFailed, match="blew up mid-epoch"):
        run_job(write_job(tmp_path / "job.toml", JOB), failing_train, console=console)
    text = out.getvalue()
    assert "epoch 2 of at most 3" in text and "3/7 steps" in text
    assert text.rfind("\x1b[?25h") > text.rfind("steps")  # the cursor is back: no live display left running
    assert console._live_stack == []  # noqa: SLF001 - rich's record of the live displays it runs
