"""job.toml validation: every error class, with its line and path, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from zeus_test_helpers import TOY_JOB, toy_registry, write_job

from zeus_core.engine.validation import JobError, load_job, parse_override


@pytest.fixture
def reg(toy_plugin):
    return toy_registry(toy_plugin)


def errors(reg, text, *sets):
    path = write_job(Path("job.toml"), text)
    with pytest.raises(JobError) as e:
        load_job(path, reg, sets)
    return e.value.format_lines()


def test_valid_job_structures_each_plugin_table(reg):
    spec = load_job(write_job(Path("job.toml"), TOY_JOB), reg)
    assert spec.job.name == "toyjob"
    assert spec.job.recurrences == 3
    assert spec.parts["power"].options.limit_w == 200.0
    assert spec.parts["device"].plugin == "toy"
    assert spec.store_location() == ".zeus/toyjob.sqlite"


def test_malformed_toml_names_the_line(reg):
    lines = errors(reg, '[job]\nname = "x"\nrecurrences = = 3\n')
    assert len(lines) == 1
    assert lines[0].startswith("job.toml:3: invalid TOML")


def test_a_job_file_that_is_not_utf8_names_the_line_and_the_fix(reg):
    Path("job.toml").write_bytes(b'[job]\nname = "x"\ndescription = "caf\xe9"\n')
    with pytest.raises(JobError) as e:
        load_job(Path("job.toml"), reg)
    lines = e.value.format_lines()
    assert len(lines) == 1 and lines[0].startswith("job.toml:3: byte 0xe9 is not UTF-8") and "save it as UTF-8" in lines[0]


def test_all_errors_at_once_each_with_line_and_path(reg):
    lines = errors(
        reg,
        """
        [job]
        recurences = 3
        eta_knob = 2
        max_epochs = 1.5
        beta_knob = "high"

        [workload]
        plugin = "toyy"

        [device]
        plugin = "nvml"

        [batch_size]
        plugin = "fixed"
        defualt = 3

        [powr]
        plugin = "max"
        """,
    )
    text = "\n".join(lines)
    assert "job.toml:2: unknown key 'recurences' (did you mean 'recurrences'?) @ $.job.recurences" in text
    assert "job.toml:3: eta_knob must be between 0 and 1 inclusive, got 2.0 @ $.job.eta_knob" in text
    assert "job.toml:4: expected int, got float 1.5 @ $.job.max_epochs" in text
    assert "job.toml:5: expected float, got str 'high' @ $.job.beta_knob" in text
    assert "job.toml:8: unknown workload plugin 'toyy' (did you mean 'toy'?)" in text
    assert "job.toml:11: unknown device plugin 'nvml'" in text and "pip install zeus-plugins-nvml" in text
    assert "job.toml:15: unknown key 'defualt' (did you mean 'default'?) @ $.batch_size.defualt" in text
    assert "job.toml:17: unknown section 'powr' (did you mean 'power'?)" in text
    assert len(lines) == 8


def test_missing_required_and_plugin_key(reg):
    lines = errors(
        reg,
        """
        [workload]
        plugin = "toy"
        [device]
        plugin = "toy"
        [batch_size]
        default = 4
        [power]
        plugin = "fixed"
        """,
    )
    text = "\n".join(lines)
    assert "job.toml:5: required key 'plugin' is missing" in text and "@ $.batch_size.plugin" in text
    assert "job.toml:7: required key 'limit_w' is missing @ $.power.limit_w" in text


def test_validator_in_plugin_options(reg):
    text = TOY_JOB.replace("limit_w = 200", "limit_w = -5")
    lines = errors(reg, text)
    assert lines == ["job.toml:21: limit_w must be positive, got -5.0 @ $.power.limit_w"]


def test_nested_list_paths_and_bool_not_int(reg):
    text = TOY_JOB.replace('[workload]\nplugin = "toy"', '[workload]\nplugin = "toy"\nbatch_sizes = [16, true, "x"]')
    lines = errors(reg, text)
    assert any("@ $.workload.batch_sizes" in ln and "job.toml:11" in ln for ln in lines), lines


def test_workload_without_batch_size_or_device(reg):
    lines = errors(reg, '[workload]\nplugin = "toy"\n')
    text = "\n".join(lines)
    assert "needs a [batch_size] table" in text
    assert "needs a [device] table" in text


def test_empty_job_says_nothing_to_run(reg):
    lines = errors(reg, '[job]\nname = "x"\n')
    assert "nothing to run" in lines[0]


def test_set_overrides_apply_and_errors_name_the_override(reg):
    path = write_job(Path("job.toml"), TOY_JOB)
    spec = load_job(path, reg, ["job.recurrences=7", "power.limit_w=150", "job.name=other"])
    assert spec.job.recurrences == 7 and spec.parts["power"].options.limit_w == 150.0
    assert spec.provenance(("job", "recurrences")) == "--set"
    assert spec.provenance(("job", "eta_knob")) == "file"
    assert spec.provenance(("job", "max_tries")) == "default"
    with pytest.raises(JobError) as e:
        load_job(path, reg, ["job.recurrences=many", "device.colour=1"])
    lines = e.value.format_lines()
    assert "--set job.recurrences=many: expected int, got str 'many' @ $.job.recurrences" in lines
    assert any(ln.startswith("--set device.colour=1: unknown key 'colour'") for ln in lines)


def test_set_can_switch_plugins(reg):
    spec = load_job(write_job(Path("job.toml"), TOY_JOB), reg, ["power.plugin=max", 'power={plugin="max"}'])
    assert spec.parts["power"].plugin == "max"


def test_parse_override_values_are_toml_or_strings():
    assert parse_override("a.b=3") == (("a", "b"), 3)
    assert parse_override("a=[1, 2]") == (("a",), [1, 2])
    assert parse_override("a=hello") == (("a",), "hello")
    assert parse_override('a="3"') == (("a",), "3")
    with pytest.raises(ValueError, match="dotted.key=value"):
        parse_override("novalue")
