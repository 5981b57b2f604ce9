"""README.md's two set-up commands and the install line of each example: what they install is what
the jobs need (a job whose plugin a line leaves out would fail on a machine set up by that line)."""

from __future__ import annotations

import glob
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from zeus_core import catalog
from zeus_core.engine.registry import SECTION_KIND, get_registry

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _two_commands() -> list[str]:
    section = re.search(r"\n## Two commands\n(.*?)(?=\n## )", README, re.S)
    assert section, "README.md has no 'Two commands' section"
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section.group(1), re.S)]


def _distributions(install: str) -> set[str]:
    """The distribution names a ``pip install`` argument list installs from this checkout's folders."""
    names = set()
    for arg in shlex.split(install):
        if arg.startswith("-") or "==" in arg:
            continue
        pyproject = REPO / arg / "pyproject.toml"
        assert pyproject.is_file(), f"{arg} is not a distribution folder of this checkout"
        names.add(tomllib.loads(pyproject.read_text())["project"]["name"])
    return names


def _needed(job_file: Path) -> set[str]:
    """zeus-core and the distributions of the plugins the job's sections name: from the installed
    registry where the plugin is installed, else from the core's catalog of first-party plugins (a
    machine without torch, as CI's Python 3.12 run, has no torch plugin to ask)."""
    reg = get_registry()
    job = tomllib.loads(job_file.read_text())
    needed = {"zeus-core"}
    for section, table in job.items():
        kind = SECTION_KIND.get(section)
        if kind is None or not isinstance(table, dict) or "plugin" not in table:
            continue
        name = table["plugin"]
        dist = reg.get(kind, name).distribution if name in reg.parts[kind] else catalog.provider(section, name)
        assert dist, f"{job_file.relative_to(REPO)}: [{section}] plugin {name!r} is neither installed nor in the catalog"
        needed.add(dist)
    return needed


def test_two_commands_one_for_the_main_job_one_for_the_tests_which_ci_runs():
    first, second = _two_commands()
    install, run = first.split(" && ")
    assert install.startswith("pip install ") and run == "zeus run examples/zeus_nsdi23/cifar100.toml --output out"
    assert _needed(REPO / "examples/zeus_nsdi23/cifar100.toml") <= _distributions(install.removeprefix("pip install "))
    assert "requirements.txt" not in first  # the main job does not install the development environment
    assert second == "pip install -r requirements.txt && python -m pytest -q"
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert second in ci  # .ci/run runs exactly the README's second command


def _example_rows() -> list[tuple[str, str]]:
    rows = re.findall(r"^\| `(examples/[^`]+)` \|.*\| `([^`]+)`[^|]*\|$", README, re.M)
    assert len(rows) >= 8, rows
    return rows


@pytest.mark.parametrize(("pattern", "install"), _example_rows(), ids=[r[0] for r in _example_rows()])
def test_each_example_s_install_line_installs_what_its_jobs_need(pattern, install):
    have = _distributions(install)
    paths = [Path(f) for pat in _braces(pattern) for f in glob.glob(str(REPO / pat))]
    assert paths, f"{pattern} names nothing in the checkout"
    jobs = [p for p in paths if p.suffix == ".toml"] + [p / "job.toml" for p in paths if (p / "job.toml").is_file()]
    for job in jobs:
        missing = _needed(job) - have
        assert not missing, f"{job.relative_to(REPO)} needs {sorted(missing)}, which its README line does not install"


def _braces(pattern: str) -> list[str]:
    """A shell brace alternative expanded (``{gpt3,bloom}_*``), which glob does not."""
    m = re.search(r"\{([^}]*)\}", pattern)
    if m is None:
        return [pattern]
    return [x for alt in m.group(1).split(",") for x in _braces(pattern[: m.start()] + alt + pattern[m.end() :])]
