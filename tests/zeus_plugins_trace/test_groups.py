"""Group files: read with file:line errors (zeus validate/run exit 2), written by the generator with its patterns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from zeus_core.cli import main as zcli
from zeus_core.engine import registry as zreg
from zeus_plugins_mab import plugin as mab_plugin
from zeus_plugins_trace import plugin as trace_plugin
from zeus_plugins_trace.commands import traces_group
from zeus_plugins_trace.groups import GROUP_COLUMNS, read_groups, write_groups
from zeus_plugins_trace.groupsynth import MEDIAN_RUNTIME_S, PERIODS_S, overlap_share, synthesize
from zeus_plugins_trace.traces import TraceError

REPO = Path(__file__).resolve().parents[2]
HEADER = "group,start_time,end_time,dataset,runtime_ratio,user\n"
GOOD = HEADER + "b,50,90,squad,1.0,u1\na,10,100,cifar100,0.5,u2\na,0,20,cifar100,1.5,u3\n"


@pytest.fixture(scope="module")
def reg():
    return zreg.load(entry_points=False, extra_plugins=[("trace", trace_plugin), ("mab", mab_plugin)])


def test_reads_any_file_in_the_format_sorted_and_ignoring_extra_columns(tmp_path):
    p = tmp_path / "g.csv"
    p.write_text(GOOD)
    groups = read_groups(p, ["cifar100", "squad"])
    assert [g.id for g in groups] == ["a", "b"]  # by first submission
    a = groups[0]
    assert a.dataset == "cifar100" and [(j.start, j.end, j.runtime_ratio, j.line) for j in a.jobs] == [(0, 20, 1.5, 4), (10, 100, 0.5, 3)]
    out = write_groups(tmp_path / "again.csv", groups)  # written back in the format, read back the same
    assert [(g.id, [(j.start, j.end) for j in g.jobs]) for g in read_groups(out)] == [("a", [(0, 20), (10, 100)]), ("b", [(50, 90)])]
    assert out.read_text().splitlines()[0] == ",".join(GROUP_COLUMNS)


@pytest.mark.parametrize(
    "text, message",
    [
        ("group,start_time,dataset,runtime_ratio\na,0,cifar100,1\n", r"g\.csv:1: missing column 'end_time'"),
        (HEADER + "a,0,20,cifar100,1,u\na,30,30,cifar100,1,u\n", r"g\.csv:3: column 'end_time': 30 is not after start_time 30"),
        (HEADER + "a,0,20,mnist,1,u\n", r"g\.csv:2: column 'dataset': unknown dataset 'mnist'; the replay knows cifar100, squad"),
        (HEADER + "a,0,20,cifar100,nan,u\n", r"g\.csv:2: column 'runtime_ratio' is NaN"),
        (HEADER + "a,NaN,20,cifar100,1,u\n", r"g\.csv:2: column 'start_time' is NaN"),
        (HEADER + "a,0,20,cifar100,0,u\n", r"g\.csv:2: column 'runtime_ratio': 0 must be positive"),
        (
            HEADER + "a,0,20,cifar100,1,u\na,5,20,squad,1,u\n",
            r"g\.csv:3: column 'dataset': group 'a' is 'squad' here but 'cifar100' at line 2",
        ),
        (HEADER, r"g\.csv: no data rows"),
    ],
)
def test_bad_files_name_file_line_and_column(tmp_path, text, message):
    p = tmp_path / "g.csv"
    p.write_text(text)
    with pytest.raises(TraceError, match=message):
        read_groups(p, ["cifar100", "squad"])


@pytest.mark.parametrize(
    "bad, where",
    [
        ("a,0,20,cifar100,1\na,40,30,cifar100,1\n", "g.csv:3: column 'end_time': 30 is not after start_time 40"),
        ("a,0,20,mnist,1\n", "g.csv:2: column 'dataset': unknown dataset 'mnist'"),
        ("a,0,nan,cifar100,1\n", "g.csv:2: column 'end_time' is NaN"),
    ],
)
def test_zeus_validate_and_run_exit_2_on_a_bad_group_file(tmp_path, bad, where, reg):
    (tmp_path / "g.csv").write_text("group,start_time,end_time,dataset,runtime_ratio\n" + bad)
    job = tmp_path / "job.toml"
    job.write_text((REPO / "examples" / "alibaba" / "job.toml").read_text().replace('groups = "synthetic"', 'groups = "g.csv"'))
    for command in (["validate", str(job)], ["run", str(job), "--output", str(tmp_path / "out")]):
        res = CliRunner().invoke(zcli.cli, command, obj={"registry": reg})
        assert res.exit_code == 2, res.output
        assert where in " ".join(res.output.split()) and "@ $.profiler.groups" in res.output
    assert not (tmp_path / "out" / "groups.csv").exists()


def test_generator_patterns(tmp_path):
    groups, pattern = synthesize(120, seed=3)
    assert len(groups) == 120 and len({g.id for g in groups}) == 120
    share = {p: [overlap_share(g) for g in groups if pattern[g.id] == p] for p in ("periodic", "burst", "sequential")}
    assert all(len(v) >= 15 for v in share.values())
    # Bursts overlap most (sessions of jobs minutes apart), sequential groups least (the next job
    # follows the previous one's end, resubmitted early now and then).
    assert np.mean(share["burst"]) > 0.6 > np.mean(share["periodic"]) > np.mean(share["sequential"]) and np.mean(share["sequential"]) < 0.3
    for g in groups:
        starts = [j.start for j in g.jobs]
        assert starts == sorted(starts) and all(j.end > j.start for j in g.jobs) and 2 <= len(g.jobs) <= 300
        if pattern[g.id] == "periodic":  # one period apart (or a multiple: a skipped run), minutes of jitter
            gaps = np.diff(starts)
            period = min(PERIODS_S, key=lambda p: abs(p - np.median(gaps)))
            assert np.all(np.abs(gaps - period * np.maximum(1, np.round(gaps / period))) < 1000)
    # runtime_ratio as the published column: runtime over the mean runtime of the file's jobs of that dataset
    for d in MEDIAN_RUNTIME_S:
        ratios = [j.runtime_ratio for g in groups if g.dataset == d for j in g.jobs]
        assert ratios and np.mean(ratios) == pytest.approx(1.0, abs=1e-3)
    # deterministic by seed
    assert synthesize(5, seed=3)[0] == synthesize(5, seed=3)[0] != synthesize(5, seed=4)[0]


def test_alibaba_synth_command_writes_a_readable_file_marked_synthetic(tmp_path):
    out = tmp_path / "groups.csv"
    res = CliRunner().invoke(traces_group, ["alibaba-synth", "--out", str(out), "--groups", "7", "--seed", "2"], catch_exceptions=False)
    assert res.exit_code == 0 and "synthetic" in res.output
    assert out.read_text().splitlines()[0] == ",".join(GROUP_COLUMNS) + ",pattern"

    def plain(groups):
        return sorted((g.id, g.dataset, [(j.start, j.end, j.runtime_ratio) for j in g.jobs]) for g in groups)

    assert plain(read_groups(out, MEDIAN_RUNTIME_S)) == plain(synthesize(7, 2)[0])
