"""Trace, group and synthetic-marker files that lie (issue 33): bad bytes, rows wider or narrower than
the header, decimal commas, values past their plausible range and files past their size limit are
refused by `zeus validate` with the file, the line and the fix (exit 2), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_plugins_trace.groups import GROUPS_LIMIT_ENV, read_groups
from zeus_plugins_trace.traces import TRACE_LIMIT_ENV, TraceError, load_traces, read_power, read_train

REPO = Path(__file__).resolve().parents[2]
TRAIN_HEADER = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
POWER_HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
GROUP_HEADER = "group,start_time,end_time,dataset,runtime_ratio\n"


def write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def test_bytes_that_are_not_utf8_name_the_file_line_and_column(tmp_path):
    p = write(tmp_path / "summary_power_v100.csv", (POWER_HEADER + "c,n,8,sgd,100,1.0,90\nc,n,8,sgd,150,1.0,9\xb0\n").encode("latin-1"))
    with pytest.raises(TraceError, match=r"summary_power_v100.csv:3: byte 0xb0 at column 20 is not UTF-8; .*save it as UTF-8"):
        read_power(p)
    g = write(tmp_path / "g.csv", (GROUP_HEADER + "caf\xe9,0,20,cifar100,1\n").encode("latin-1"))
    with pytest.raises(TraceError, match=r"g.csv:2: byte 0xe9 at column 4 is not UTF-8"):
        read_groups(g)


def test_a_byte_order_mark_is_read_as_nothing(tmp_path):
    p = write(tmp_path / "summary_train.csv", "\ufeff" + TRAIN_HEADER + "c,n,8,sgd,0.1,1,0.5,3\n")
    assert read_train(p)[0].dataset == "c"


@pytest.mark.parametrize(
    "row, message",
    [
        ("c,n,8,sgd,100,1.0,90,7\n", r":2: the row has 8 cells but the header names 7 columns .*cell 8 \('7'\) is extra"),
        ("c,n,8,sgd,100,1.0,0,35\n", r":2: the row has 8 cells .* '0,35' looks like a number written with a decimal comma: write '0.35'"),
        ("c,n,8,sgd,100,1.0\n", r":2: column 'average_power' is missing: the row has 6 of the header's 7 cells"),
        ('c,n,8,sgd,100,1.0,"0,35"\n', r":2: column 'average_power': '0,35' is written with a decimal comma; write '0.35'"),
        (
            "c,n,8,sgd,100,1e300,90\n",
            r":2: column 'time_per_epoch': 1e\+300 s is above 1e\+07 s, the most an epoch's time can plausibly be",
        ),
        ("c,n,8,sgd,1.7e308,1.0,90\n", r":2: column 'power_limit': 1.7e\+308 W is above 10000 W"),
        ("c,n,8,sgd,100,1.0,1e400\n", r":2: column 'average_power': '1e400' is infinite"),
        ('c,n,8,sgd,100,1.0,"' + "9" * 200_000 + '"\n', r":2: a trace CSV cannot be read as CSV there \(field larger than field limit"),
    ],
    ids=[
        "extra-cell",
        "decimal-comma",
        "missing-cell",
        "quoted-decimal-comma",
        "time-1e300",
        "limit-1.7e308",
        "infinite",
        "cell-past-csv-limit",
    ],
)
def test_rows_too_wide_or_narrow_decimal_commas_and_implausible_values(tmp_path, row, message):
    p = write(tmp_path / "summary_power_v100.csv", POWER_HEADER + row)
    with pytest.raises(TraceError, match=message):
        read_power(p)


def test_a_target_epoch_or_batch_size_past_its_bound(tmp_path):
    p = write(tmp_path / "summary_train.csv", TRAIN_HEADER + "c,n,8,sgd,0.1,1,0.5,1e9\n")
    with pytest.raises(TraceError, match=r":2: column 'target_epoch': 1e\+09 epochs is above 1e\+06 epochs"):
        read_train(p)
    g = write(tmp_path / "g.csv", GROUP_HEADER + "a,0,1e300,cifar100,1\n")
    with pytest.raises(TraceError, match=r"g.csv:2: column 'end_time': 1e\+300 s is above 1e\+11 s"):
        read_groups(g)


def test_files_past_the_size_limit_are_refused_before_they_are_read(tmp_path, monkeypatch):
    p = write(tmp_path / "summary_power_v100.csv", POWER_HEADER + "c,n,8,sgd,100,1.0,90\n" * 30_000)
    assert len(read_power(p)) == 30_000  # 1 MiB: under the default limit
    monkeypatch.setenv(TRACE_LIMIT_ENV, "0.5")
    with pytest.raises(
        TraceError,
        match=r"summary_power_v100.csv: the file is [\d,]+ bytes, more than the 524,288 bytes "
        r"\(0.5 MiB\) a trace CSV may be; .*raise the limit: ZEUS_MAX_TRACE_MB=<MiB>",
    ):
        read_power(p)
    monkeypatch.setenv(TRACE_LIMIT_ENV, "many")
    with pytest.raises(TraceError, match=r"ZEUS_MAX_TRACE_MB='many': expected a number of MiB"):
        read_power(p)
    g = write(tmp_path / "g.csv", GROUP_HEADER + "a,0,20,cifar100,1\n" * 40_000)
    monkeypatch.setenv(GROUPS_LIMIT_ENV, "0.25")
    with pytest.raises(TraceError, match=r"g.csv: the file is .* a group file may be; .*ZEUS_MAX_GROUPS_MB"):
        read_groups(g)


def test_a_synthetic_marker_nested_deep_or_not_utf8(tmp_path):
    write(tmp_path / "summary_train.csv", TRAIN_HEADER + "c,n,8,sgd,0.1,1,0.5,3\n")
    write(tmp_path / "summary_power_v100.csv", POWER_HEADER + "c,n,8,sgd,100,1.0,90\n")
    write(tmp_path / "synthetic.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(TraceError, match=r"synthetic.json:1: arrays and objects nest more than 32 deep"):
        load_traces(tmp_path, "v100")
    write(tmp_path / "synthetic.json", b'{"seed": "\xff"}')
    with pytest.raises(TraceError, match=r"synthetic.json:1: byte 0xff at column 11 is not UTF-8"):
        load_traces(tmp_path, "v100")
    write(tmp_path / "synthetic.json", json.dumps({"seed": 1}))
    assert load_traces(tmp_path, "v100").model == {"seed": 1}


def _zeus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )


def test_zeus_validate_refuses_a_bad_trace_and_a_bad_group_file_with_exit_2_and_no_traceback(tmp_path, shared_data):
    traces = tmp_path / "t"
    traces.mkdir()
    for f in (shared_data / "zeus_nsdi23").glob("*.csv"):
        (traces / f.name).write_bytes(f.read_bytes())
    with open(traces / "summary_power_v100.csv", "ab") as f:
        f.write(b"cifar100,shufflenetv2,1024,adadelta,175,9\xff,100\n")
    job = tmp_path / "job.toml"
    job.write_text((REPO / "examples" / "zeus_nsdi23" / "cifar100.toml").read_text().replace('traces = "synthetic"', 'traces = "t"'))
    r = _zeus("validate", str(job), cwd=tmp_path)
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "summary_power_v100.csv:478: byte 0xff at column 42 is not UTF-8" in out and "@ $.workload.traces" in out
    (tmp_path / "g.csv").write_text(GROUP_HEADER + "a,0,20,cifar100,0,5\n")
    alibaba = tmp_path / "alibaba.toml"
    alibaba.write_text((REPO / "examples" / "alibaba" / "job.toml").read_text().replace('groups = "synthetic"', 'groups = "g.csv"'))
    r = _zeus("validate", str(alibaba), cwd=tmp_path)
    out = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "g.csv:2: the row has 6 cells" in out and "'0,5' looks like a number written with a decimal comma" in out
    assert "@ $.profiler.groups" in out
