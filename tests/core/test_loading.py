"""load_callable: the user's function from "module:function" or "file.py:function"."""

from __future__ import annotations

import pytest

from zeus_core import load_callable


def test_file_relative_to_base_and_module(tmp_path):
    (tmp_path / "steps.py").write_text("def make(n):\n    return n * 2\n")
    assert load_callable("steps.py:make", tmp_path)(4) == 8
    assert load_callable("json:dumps")([1]) == "[1]"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nocolon", 'expected "module:function"'),
        ("missing.py:f", "file .*missing.py not found"),
        ("boom.py:f", "running .*boom.py failed: ZeroDivisionError"),
        ("steps.py:nope", "defines no function 'nope'"),
        ("steps.py:VALUE", "defines no function 'VALUE'"),
        ("no_such_module_zz:f", "cannot import 'no_such_module_zz': ModuleNotFoundError"),
    ],
)
def test_every_failure_names_the_setting_and_the_fix(tmp_path, spec, message):
    (tmp_path / "steps.py").write_text("VALUE = 3\n")
    (tmp_path / "boom.py").write_text("1 / 0\n")
    with pytest.raises(ValueError, match=message) as e:
        load_callable(spec, tmp_path, what="profiler.step")
    assert str(e.value).startswith(f"profiler.step {spec!r}")
