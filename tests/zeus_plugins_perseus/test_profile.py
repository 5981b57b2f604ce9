import math

import pytest

from zeus_plugins_perseus.profile import ProfileError, read_profile

HEADER = "stage,instruction,frequency,time,energy\n"


def write(tmp_path, text, name="p.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_published_profile(gpt3_a100):
    p = read_profile(gpt3_a100)
    assert p.stages == list(range(8))
    assert p.instructions == ["backward", "forward"]
    fwd = p.get(0, "forward")
    assert list(fwd.frequency[:3]) == [1410, 1395, 1380]  # fastest clock first
    assert len(fwd.frequency) == 38
    t, e = fwd.at(1410)
    assert math.isclose(t, 0.05016166687011708) and math.isclose(e, 23.80547200000007)


def test_extra_columns_are_ignored(tmp_path):
    path = write(tmp_path, "rank,stage,instruction,frequency,time,energy,pp_rank\n0,0,forward,1410,0.05,20,0\n")
    p = read_profile(path)
    assert p.get(0, "forward").at(1410) == (0.05, 20.0)


@pytest.mark.parametrize(
    "row, message",
    [
        ("0,forward,1410,,20", "column 'time' is empty"),
        ("0,forward,1410,-0.1,20", "column 'time' is negative"),
        ("0,forward,1410,0.1,nan", "column 'energy' is NaN"),
        ("0,forward,1410,0.1,abc", "column 'energy': 'abc' is not a number"),
        ("-1,forward,1410,0.1,20", "column 'stage' is negative"),
        ("0,forward,1410.5,0.1,20", "'1410.5' is not a whole number"),
        ("0,,1410,0.1,20", "column 'instruction' is empty"),
        ("0,forward,1410,0,20", "column 'time' is 0"),
    ],
)
def test_bad_value_names_its_line(tmp_path, row, message):
    path = write(tmp_path, HEADER + "0,backward,1410,0.1,20\n" + row + "\n")
    with pytest.raises(ProfileError) as err:
        read_profile(path)
    assert f"{path}:3:" in str(err.value)
    assert message in str(err.value)


def test_missing_header_column(tmp_path):
    path = write(tmp_path, "stage,instruction,frequency,time\n0,forward,1410,0.1\n")
    with pytest.raises(ProfileError, match="lacks column\\(s\\) energy"):
        read_profile(path)


def test_duplicate_row_points_at_first(tmp_path):
    path = write(tmp_path, HEADER + "0,forward,1410,0.1,20\n0,forward,1410,0.2,20\n")
    with pytest.raises(ProfileError, match="already appeared on line 2"):
        read_profile(path)


def test_missing_file_and_empty(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        read_profile(tmp_path / "nope.csv")
    with pytest.raises(ProfileError, match="no data rows"):
        read_profile(write(tmp_path, HEADER))


def test_stage_count_must_match(gpt3_a100):
    p = read_profile(gpt3_a100)
    with pytest.raises(ProfileError, match="has 8 stage\\(s\\) but the job asks for 4"):
        p.check_stages(4, ("forward", "backward"))
    with pytest.raises(ProfileError, match="no rows for stage 0 instruction 'load'"):
        p.check_stages(8, ("forward", "load"))


def test_csv_round_trip(tmp_path, gpt3_a100):
    p = read_profile(gpt3_a100)
    q = read_profile(p.to_csv(tmp_path / "out.csv"))
    for key, o in p.options.items():
        assert list(q.options[key].frequency) == list(o.frequency)
        assert list(q.options[key].energy) == list(o.energy)
