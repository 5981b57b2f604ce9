"""The published profile format: reading, writing, validation errors and interpolation."""

import json
import math

import numpy as np
import pytest

from zeus_plugins_hetero.profile import Profile, ProfileError


def _write(tmp_path, data, name="p.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_public_profiles_load(hetero_aws):
    prof = Profile.load(hetero_aws / "cifar_a10.json", profile_steps=10)
    assert list(prof.batch_sizes) == [32, 64, 128, 256, 512, 1024]
    assert list(prof.power_limits) == [300, 250, 200, 150, 100]
    # The record at b=32, 250 W of the published file, divided by its 10 steps.
    t, e = prof.per_iteration([32])
    assert t[0, 1] == pytest.approx(0.24475884437561035 / 10)
    assert e[0, 1] == pytest.approx(15.527000000001863 / 10)
    imagenet = Profile.load(hetero_aws / "imagenet_t4.json", profile_steps=40)
    assert imagenet.max_batch == 512 and imagenet.max_power_limit == 70


def test_round_trip(tmp_path, hetero_aws):
    prof = Profile.load(hetero_aws / "cifar_t4.json", profile_steps=10)
    again = Profile.load(prof.save(tmp_path / "copy.json"), profile_steps=10)
    assert np.array_equal(again.time, prof.time) and np.array_equal(again.energy, prof.energy)
    data = json.loads((tmp_path / "copy.json").read_text())
    assert data["32"][0] == {"power_limit": 70, "energy": prof.energy[0, 0], "time": prof.time[0, 0]}


def test_interpolates_piecewise_linearly():
    prof = Profile([10, 30, 50], [200, 100], time=[[1, 2], [3, 4], [7, 8]], energy=[[10, 20], [30, 40], [90, 80]], profile_steps=2)
    t, e = prof.per_iteration([10, 20, 40, 50])
    assert t[:, 0].tolist() == [0.5, 1.0, 2.5, 3.5]  # (1+3)/2/2, (3+7)/2/2
    assert e[:, 1].tolist() == [10.0, 15.0, 30.0, 40.0]


def test_never_extrapolates():
    prof = Profile([10, 30], [200], time=[[1], [3]], energy=[[1], [3]], profile_steps=1, source="a.json")
    with pytest.raises(ProfileError, match=r"a.json: batch 31 is outside the profiled range \[10, 30\]"):
        prof.per_iteration([20, 31])


def test_single_batch_size_cannot_interpolate():
    prof = Profile([32], [200], time=[[1]], energy=[[1]], profile_steps=1, source="one.json")
    assert prof.per_iteration([32])[0][0, 0] == 1.0
    with pytest.raises(ProfileError, match="one.json: the profile has a single batch size \\(32\\).*at least two"):
        prof.per_iteration([64])


def test_nan_names_file_and_key_path(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text('{"32": [{"power_limit": 70, "energy": 1.0, "time": 0.1}], "64": [{"power_limit": 70, "energy": NaN, "time": 0.2}]}')
    with pytest.raises(ProfileError) as info:
        Profile.load(path, profile_steps=10)
    assert f'{path}: $["64"][0].energy: is nan' in str(info.value)


def test_every_problem_is_reported_at_once(tmp_path):
    data = {
        "32": [{"power_limit": 70, "energy": 1.0}, {"power_limit": 60, "energy": 1.0, "time": -1}],
        "x": [],
        "64": [{"power_limit": 70, "energy": "a lot", "time": 0.2}],
        "128": [],
    }
    with pytest.raises(ProfileError) as info:
        Profile.load(_write(tmp_path, data, "bad.json"), profile_steps=1)
    msg = str(info.value)
    assert "5 problems in profile" in msg
    assert '$["128"]: expected a non-empty list' in msg
    assert "bad.json: $[\"32\"][0]: missing key 'time'" in msg
    assert '$["32"][1].time: must be positive' in msg
    assert '$["x"]: batch-size key must be a positive integer' in msg
    assert "$[\"64\"][0].energy: expected a number, got 'a lot'" in msg


def test_power_limits_must_match_across_batch_sizes(tmp_path):
    data = {
        "32": [{"power_limit": 70, "energy": 1, "time": 1}, {"power_limit": 60, "energy": 1, "time": 1}],
        "64": [{"power_limit": 70, "energy": 2, "time": 2}],
    }
    with pytest.raises(ProfileError, match=r'\$\["64"\]: no record for power limit\(s\) 60 W'):
        Profile.load(_write(tmp_path, data), profile_steps=1)


def test_file_errors(tmp_path):
    with pytest.raises(ProfileError, match="profile file not found"):
        Profile.load(tmp_path / "missing.json", profile_steps=1)
    (tmp_path / "broken.json").write_text('{"32": [\n{"power_limit": 70,, }]}')
    with pytest.raises(ProfileError, match=r"broken.json:2:\d+: not valid JSON"):
        Profile.load(tmp_path / "broken.json", profile_steps=1)
    with pytest.raises(ProfileError, match=r"\$: expected an object keyed by batch size"):
        Profile.from_dict([1, 2], profile_steps=1)
    with pytest.raises(ProfileError, match="profile_steps must be at least 1"):
        Profile.from_dict({"1": [{"power_limit": 1, "energy": 1, "time": 1}]}, profile_steps=0)


def test_infinite_values_rejected():
    data = {"32": [{"power_limit": 70, "energy": math.inf, "time": 1}]}
    with pytest.raises(ProfileError, match=r'\$\["32"\]\[0\].energy: is inf'):
        Profile.from_dict(data, profile_steps=1, source="inf.json")
