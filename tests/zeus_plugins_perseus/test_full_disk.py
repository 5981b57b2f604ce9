"""A Perseus job whose --output disk fills up while the plan files are written (by the planner's worker)."""

from __future__ import annotations

import re
import subprocess
import sys

from filesystems import small_fs


def test_plan_files_on_a_full_disk_are_an_error_naming_the_file_not_a_traceback(tmp_path, gpt3_a100):
    job = tmp_path / "job.toml"
    job.write_text(
        f'[job]\nname = "p"\n\n[frequency_plan]\nplugin = "perseus"\nprofile = "{gpt3_a100}"\nmicrobatches = 3\nblocking_power_w = 83.64\n'
    )
    with small_fs("96k") as disk:  # room for frontier.csv and some of the 141 plan files (about 2 kB each)
        out = disk / "out"
        r = subprocess.run(
            [sys.executable, "-m", "zeus_core.cli", "run", str(job), "--output", str(out)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 1, r.stderr
        message = " ".join(r.stderr.split())
        assert "Traceback" not in r.stderr and "the disk is full" in message, message
        # the file the disk ran out at is named: a plan file, the frontier or a figure, whichever the disk
        # filled at (the figures' sizes depend on matplotlib's version and fonts)
        assert re.search(rf"{re.escape(str(out))}/\S+\.(json|csv|png): cannot write it \(No space left on device\)", message), message
        leftovers = [p.name for p in out.rglob(".*") if p.is_file()]
        assert leftovers == []  # no temporary file left behind
