"""`zeus run examples/alibaba/job.toml`: what it writes, and that the written group file replays the same."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from zeus_core import units
from zeus_core.cli import main as zcli
from zeus_core.engine import registry as zreg
from zeus_plugins_mab import plugin as mab_plugin
from zeus_plugins_trace import plugin as trace_plugin
from zeus_plugins_trace.groups import read_groups

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "alibaba" / "job.toml"


@pytest.fixture(scope="module")
def reg():
    return zreg.load(entry_points=False, extra_plugins=[("trace", trace_plugin), ("mab", mab_plugin)])


def zeus(reg, *args):
    return CliRunner().invoke(zcli.cli, list(args), obj={"registry": reg})


def table(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def run(reg, tmp_path_factory):
    out = tmp_path_factory.mktemp("alibaba") / "out"
    res = zeus(reg, "run", str(JOB), "--output", str(out), "--set", "profiler.synthetic_groups=6")
    assert res.exit_code == 0, res.output
    return out, res.output


def test_outputs_per_group_and_total_against_default_and_oracle(run):
    out, output = run
    summary = json.loads((out / "summary.json").read_text())["profiler"]
    assert summary["group_count"] == 6 and summary["synthetic_groups"] and summary["gpu"] == "v100"
    results = table(out / "group_results.csv")
    assert [r["rule"] for r in results] == ["paper"] * 6 + ["improved"] * 6
    for rule in ("paper", "improved"):
        mine = [r for r in results if r["rule"] == rule]
        total = summary["rules"][rule]
        # the totals are the per-group sums, and savings are against those of the baselines
        assert total["cost"] == pytest.approx(sum(float(r["cost"]) for r in mine))
        assert summary["default"]["cost"] == pytest.approx(sum(float(r["default_cost"]) for r in mine))
        assert total["vs_default"]["cost_saved"] == pytest.approx(1 - total["cost"] / summary["default"]["cost"])
        assert total["vs_oracle"]["regret"] == pytest.approx(total["cost"] / summary["oracle"]["cost"] - 1)
        assert all(float(r["oracle_cost"]) <= float(r["default_cost"]) for r in mine)
    tries = table(out / "tries.csv")
    for r in results:  # a group's totals are its tries', scaled by runtime_ratio
        mine = [t for t in tries if t["rule"] == r["rule"] and t["group"] == r["group"]]
        assert len(mine) == int(r["tries"]) and float(r["cost"]) == pytest.approx(sum(float(t["cost"]) for t in mine))
        assert sum(t["chosen_by"] == "policy" for t in mine) == int(r["policy_tries"])
    # a try submitted while nothing of its group ran was the policy's under both rules
    assert all(t["chosen_by"] == "policy" for t in tries if t["in_flight"] == "0")
    # the unit-suffixed columns come after the contract's own and repeat them
    header = (out / "tries.csv").read_text().splitlines()[0].split(",")
    assert header[-3:] == ["start_time_s", "end_time_s", "power_limit_w"] and header.index("cost") == len(header) - 4
    assert all(
        (t["start_time_s"], t["end_time_s"], t["power_limit_w"]) == (t["start_time"], t["end_time"], t["power_limit"]) for t in tries
    )
    assert (out / "energy_over_time.png").read_bytes()[:4] == b"\x89PNG"
    assert "rule paper" in output and "rule improved" in output and "oracle" in output


def test_the_replay_ends_with_each_rules_verdict_in_human_units(run):
    out, output = run
    summary = json.loads((out / "summary.json").read_text())["profiler"]
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("result of job"))
    verdict = [line.rstrip() for line in lines[start:] if line.strip()]
    assert not [line for line in verdict if line.startswith("wrote ")]  # the verdict comes last
    heads = [line for line in verdict if line.startswith("result of job")]
    assert heads == [
        f"result of job 'alibaba': rule {rule}, 6 synthetic groups of {summary['jobs']:,} jobs replayed" for rule in ("paper", "improved")
    ]
    paper = verdict[verdict.index(heads[0]) + 1]
    total, default = summary["rules"]["paper"], summary["default"]
    change = total["energy_j"] / default["energy_j"] - 1
    assert paper.split()[:5] == ["energy", *units.energy(total["energy_j"]).split()]
    assert (
        f"{units.percent(abs(change))} {'less' if change < 0 else 'more'} than the default ({units.si(default['energy_j'], 'J')})" in paper
    )
    assert sum("energy-time cost" in line for line in verdict) == 1  # what the cost is, said once
    assert verdict[-1] == f"(exact figures: {out / 'summary.json'})"


def test_the_written_group_file_replays_the_same(reg, run, tmp_path):
    out, _ = run
    groups = read_groups(out / "groups.csv")
    assert len(groups) == 6 and (out / "groups.csv").read_text().splitlines()[0].endswith(",pattern")
    res = zeus(reg, "run", str(JOB), "--output", str(tmp_path), "--set", f'profiler.groups="{out / "groups.csv"}"')
    assert res.exit_code == 0, res.output
    assert table(tmp_path / "group_results.csv") == table(out / "group_results.csv")
    assert not json.loads((tmp_path / "summary.json").read_text())["profiler"]["synthetic_groups"]


def test_job_errors_name_the_field(reg, tmp_path):
    res = zeus(reg, "validate", str(JOB), "--set", 'profiler.inflight=["paper","fifo"]', "--set", "profiler.groupz=1")
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "@ $.profiler.inflight" in text and "unknown key 'groupz' (did you mean 'groups'?)" in text
    res = zeus(reg, "validate", str(JOB), "--set", 'profiler.traces="nowhere"')
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "trace folder" in text and "does not exist" in text and "@ $.profiler.traces" in text
    res = zeus(reg, "run", str(JOB), "--set", "batch_size=false")
    assert res.exit_code == 2


def test_a_rule_that_runs_out_of_tries_is_named_and_the_rule_that_finished_is_written(reg, tmp_path, monkeypatch):
    """One rule's replay stops at job.max_tries (the real check, with max_tries = 1 for rule 'improved'
    only): exit 2 naming that rule, group and job; the other rule's results reported and written."""
    import attrs

    from zeus_plugins_trace import alibaba, replay

    real = replay.replay_group

    def improved_runs_out(group, wt, make, job, default, rule="paper"):
        if rule == "improved":
            job = attrs.evolve(job, max_tries=1, beta_knob=1.01)
        return real(group, wt, make, job, default, rule)

    monkeypatch.setattr(alibaba, "replay_group", improved_runs_out)
    out = tmp_path / "out"
    res = zeus(reg, "run", str(JOB), "--output", str(out), "--set", "profiler.synthetic_groups=4")
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "[profiler] plugin 'alibaba': in-flight rule 'improved': group " in text and "no try reached the target in 1 tries" in text
    assert "the results of the rule that finished ('paper') are reported and written (--output)" in text
    assert [r["rule"] for r in table(out / "group_results.csv")] == ["paper"] * 4
    summary = json.loads((out / "summary.json").read_text())["profiler"]
    assert list(summary["rules"]) == ["paper"] and summary["default"]["cost"] > 0
    assert {r["rule"] for r in table(out / "tries.csv")} == {"paper"} and (out / "energy_over_time.png").exists()
    assert "rule paper" in text and "rule improved" not in text  # the closing table has the finished rule only


def test_energy_over_time_keeps_every_rule_visible_where_they_overlap(reg, tmp_path, monkeypatch):
    """The two rules end within a fraction of a percent: each is drawn wider and paler than the next (the
    last on top, opaque), so neither hides the other, and the legend says each total."""
    from zeus_plugins_trace.alibaba import AlibabaReplay

    figures = []
    draw = AlibabaReplay._figure
    monkeypatch.setattr(AlibabaReplay, "_figure", lambda self: figures.append(draw(self)) or figures[-1])
    res = zeus(reg, "run", str(JOB), "--output", str(tmp_path), "--set", "profiler.synthetic_groups=4")
    assert res.exit_code == 0, res.output
    (fig,) = figures
    lines = {line.get_label().split(":")[0]: line for line in fig.axes[0].get_lines()}
    paper, improved = lines["rule paper"], lines["rule improved"]
    assert paper.get_linewidth() > improved.get_linewidth() + 2  # the one underneath shows around the one on top
    assert paper.get_zorder() < improved.get_zorder() and (paper.get_alpha() or 1) < 1 and improved.get_alpha() in (None, 1.0)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("rule paper: ") and t.endswith("Wh)") for t in legend) and len(legend) == 4
