"""``zeus run --fresh`` into an --output folder used before leaves only what this run wrote there,
and removes nothing that no zeus command recorded (the user's own files)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
from zeus_test_helpers import run_cli, write_job

from zeus_core import hookimpl, write_atomic
from zeus_core.engine.registry import load


@attrs.define
class PlansOptions:
    count: int = 3


class WritesPlans:
    """A planner that writes ``plans/NNNNN.json`` (one per plan) and ``chosen.json``, returning the folder."""

    def __init__(self, options: PlansOptions, context) -> None:
        self.count = options.count

    def plan(self, ctx) -> None:
        pass

    def write_outputs(self, out_dir: Path, job) -> list[Path]:
        for k in range(self.count):
            write_atomic(out_dir / "plans" / f"{k:05d}.json", json.dumps({"plan": k}))
        return [out_dir / "plans", write_atomic(out_dir / "chosen.json", "{}")]


class Plugin:
    @hookimpl
    def zeus_register_profilers(self, register):
        register("plans", WritesPlans, options=PlansOptions)


JOB = """
[job]
name = "plans"
store = "{store}"

[profiler]
plugin = "plans"
"""


def _run(tmp_path: Path, out: Path, count: int, *flags: str):
    job = write_job(tmp_path / "job.toml", JOB.format(store=tmp_path / "store.sqlite"))
    reg = load(extra_plugins=[("plans", Plugin())], entry_points=False)
    r = run_cli(reg, "run", str(job), "--output", str(out), "--set", f"profiler.count={count}", *flags)
    assert r.exit_code == 0, r.output
    return json.loads((out / "summary.json").read_text())["provenance"]["outputs"]


def _files(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())


def test_fresh_removes_what_an_earlier_run_wrote_and_this_one_did_not(tmp_path):
    out = tmp_path / "out"
    plans = [f"plans/{k:05d}.json" for k in range(5)]
    assert _run(tmp_path, out, 5) == sorted(["chosen.json", "summary.json", *plans])
    (out / "notes.txt").write_text("mine")  # the user's own files, never recorded
    (out / "plans" / "README").write_text("mine too")
    (out / "old").mkdir()
    (out / "old" / "00099.json").write_text("{}")  # written before zeus recorded its outputs: not known as zeus's
    assert _run(tmp_path, out, 2, "--fresh") == ["chosen.json", *plans[:2], "summary.json"]
    assert _files(out) == [
        "chosen.json",
        "notes.txt",
        "old/00099.json",
        "plans/00000.json",
        "plans/00001.json",
        "plans/README",
        "summary.json",
    ]


def test_without_fresh_earlier_outputs_stay_and_stay_recorded(tmp_path):
    out = tmp_path / "out"
    _run(tmp_path, out, 4)
    recorded = _run(tmp_path, out, 1)
    assert recorded == sorted(["chosen.json", "summary.json", *(f"plans/{k:05d}.json" for k in range(4))])
    assert _run(tmp_path, out, 1, "--fresh") == ["chosen.json", "plans/00000.json", "summary.json"]
    assert _files(out) == ["chosen.json", "plans/00000.json", "summary.json"]


def test_a_record_naming_files_outside_the_folder_removes_nothing_there(tmp_path):
    out = tmp_path / "out"
    _run(tmp_path, out, 1)
    outside = tmp_path / "precious.txt"
    outside.write_text("keep")
    summary = json.loads((out / "summary.json").read_text())
    summary["provenance"]["outputs"] += ["../precious.txt", str(outside), "plans"]
    (out / "summary.json").write_text(json.dumps(summary))
    _run(tmp_path, out, 1, "--fresh")
    assert outside.read_text() == "keep" and (out / "plans" / "00000.json").is_file()
