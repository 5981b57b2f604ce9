"""The core's data-file helpers (zeus_core.datafiles), which every reader of a trace, profile or
grid series uses: size limits, UTF-8, rows as wide as the header, decimal commas, JSON nesting
and plausible numbers, each refused naming the file and the line."""

from __future__ import annotations

import math

import pytest

from zeus_core.datafiles import (
    DataFileError,
    check_range,
    csv_table,
    data_limit,
    json_document,
    parse_number,
    read_data_text,
)


def test_a_file_past_its_limit_is_refused_before_it_is_read_naming_the_variable(tmp_path, monkeypatch):
    p = tmp_path / "d.csv"
    p.write_text("a,b\n" + "1,2\n" * 1000)
    assert read_data_text(p, what="a test file", limit=10_000, env="ZEUS_TEST_MB").startswith("a,b")
    with pytest.raises(
        DataFileError,
        match=r"d.csv: the file is 4,004 bytes, more than the 1,000 bytes .* a test file may be; "
        r".*ZEUS_TEST_MB=<MiB>",
    ):
        read_data_text(p, what="a test file", limit=1000, env="ZEUS_TEST_MB")
    monkeypatch.setenv("ZEUS_TEST_MB", "2")
    assert data_limit(5, "ZEUS_TEST_MB") == 2 << 20
    monkeypatch.setenv("ZEUS_TEST_MB", "-1")
    with pytest.raises(DataFileError, match=r"ZEUS_TEST_MB='-1': expected a number of MiB above 0"):
        data_limit(5, "ZEUS_TEST_MB")
    monkeypatch.delenv("ZEUS_TEST_MB")
    assert data_limit(5, "ZEUS_TEST_MB") == 5


def test_not_utf8_names_line_and_column_and_a_bom_is_dropped(tmp_path):
    p = tmp_path / "d.csv"
    p.write_bytes(b"a,b\n1,2\n3,\x954\n")
    with pytest.raises(DataFileError, match=r"d.csv:3: byte 0x95 at column 3 is not UTF-8"):
        read_data_text(p, what="a test file", limit=1000, env="X")
    p.write_bytes(b"\xef\xbb\xbfa,b\n")
    assert read_data_text(p, what="a test file", limit=1000, env="X") == "a,b\n"
    with pytest.raises(DataFileError, match=r"missing.csv: no such file"):
        read_data_text(tmp_path / "missing.csv", what="a test file", limit=1000, env="X")
    with pytest.raises(DataFileError, match=r"is a folder; expected a test file"):
        read_data_text(tmp_path, what="a test file", limit=1000, env="X")


def test_rows_as_wide_as_the_header_with_their_lines(tmp_path):
    header, rows = csv_table(" a , b \n1,2\n\n3,4\n", tmp_path / "d.csv")
    assert header == ["a", "b"] and rows == [(2, ["1", "2"]), (4, ["3", "4"])]
    with pytest.raises(
        DataFileError,
        match=r"d.csv:3: the row has 3 cells but the header names 2 columns \(a, b\): cell 3 "
        r"\('35'\) is extra; '0,35' looks like a number written with a decimal comma: "
        r"write '0.35'",
    ):
        csv_table("a,b\n1,2\nx,0,35\n", tmp_path / "d.csv")
    with pytest.raises(DataFileError, match=r"d.csv:2: column 'b' is missing: the row has 1 of the header's 2 cells"):
        csv_table("a,b\n1\n", tmp_path / "d.csv")
    with pytest.raises(DataFileError, match=r"d.csv:1: the file is empty; expected a header row naming a, b"):
        csv_table("\n", tmp_path / "d.csv", header_hint="a, b")


def test_json_nested_100000_deep_names_the_line_without_recursion(tmp_path):
    with pytest.raises(DataFileError, match=r"j.json:3: arrays and objects nest more than 32 deep"):
        json_document('{\n"a":\n' + "[" * 100_000 + "]" * 100_000 + "}", tmp_path / "j.json")
    assert json_document('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', tmp_path / "j.json", max_depth=1) == {"a": "[" * 40}
    # an error every Python reports at the same place (3.13 reports a trailing comma at the comma, 3.11 after it)
    with pytest.raises(DataFileError, match=r"j.json:2:5: not valid JSON"):
        json_document('{"a": 1,\n"b" 2}', tmp_path / "j.json")


@pytest.mark.parametrize(
    "text, message",
    [
        ("0,35", r"'0,35' is written with a decimal comma; write '0.35'"),
        ("", r"x is empty"),
        ("nan", r"x is NaN"),
        ("1e400", r"'1e400' is infinite"),
        ("1.5", r"'1.5' is not a whole number"),
        ("1e300", r"1e\+300 W is above 10000 W, the most a power can plausibly be"),
        ("-5", r"-5 W is below 0 W, the least a power can plausibly be"),
        ("abc", r"'abc' is not a number"),
    ],
)
def test_numbers_finite_whole_and_within_their_bounds(text, message):
    with pytest.raises(DataFileError, match=message):
        parse_number(text, "x", integer=True, high=1e4, low=0, unit="W", what="a power")


def test_good_numbers_and_nan_where_allowed():
    assert parse_number(" 12 ", "x", integer=True, high=100) == 12
    assert math.isnan(parse_number("", "x", nan_ok=True))
    assert check_range(10**400, "x") == 10**400
    with pytest.raises(DataFileError, match=r"x: a number of more than 300 digits is above 1"):
        check_range(10**400, "x", high=1)


@pytest.mark.parametrize(
    "module, limit, env, row",
    [
        ("zeus_plugins_trace.traces", "TRACE_LIMIT", "TRACE_LIMIT_ENV", "trace CSV, `synthetic.json`"),
        ("zeus_plugins_trace.groups", "GROUPS_LIMIT", "GROUPS_LIMIT_ENV", "Alibaba group file"),
        ("zeus_plugins_hetero.profile", "PROFILE_LIMIT", "PROFILE_LIMIT_ENV", "hetero profile (JSON)"),
        ("zeus_plugins_perseus.profile", "PROFILE_LIMIT", "PROFILE_LIMIT_ENV", "Perseus profile CSV"),
        ("zeus_plugins_grid.series", "CSV_LIMIT", "CSV_LIMIT_ENV", "grid CSV (`carbon_intensity`, `price`)"),
    ],
)
def test_the_readme_states_each_limit_as_the_code_has_it(repo_root, module, limit, env, row):
    mod = pytest.importorskip(module)
    mib = getattr(mod, limit) / (1 << 20)
    line = f"| {row} | {mib:g} MiB | `{getattr(mod, env)}` |"
    assert line in (repo_root / "README.md").read_text(), line
