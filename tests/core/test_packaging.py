"""Every distribution (each folder of ``zeus_core/catalog.toml``) carries what a package index
and a packager need: the license (Apache-2.0, its file shipped), its own README, one
``requires-python``, classifiers, URLs, type information, the core within its contract's
range (README of zeus-core: "Versions and the contract") and a floor on every dependency.
A new distribution passes these by copying an existing ``pyproject.toml``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from zeus_core import catalog

REPO = Path(__file__).resolve().parents[2]
FOLDERS = catalog.read()["folders"]
CORE = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LICENSE = (REPO / "LICENSE").read_text()


def _project(dist: str) -> dict:
    return tomllib.loads((REPO / FOLDERS[dist] / "pyproject.toml").read_text())


def _requirements(project: dict) -> list[Requirement]:
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def test_the_license_is_apache_2():
    assert LICENSE.lstrip().startswith("Apache License\n") and "Version 2.0, January 2004" in LICENSE
    assert "END OF TERMS AND CONDITIONS" in LICENSE


@pytest.mark.parametrize("dist", sorted(FOLDERS))
def test_license_readme_python_classifiers_urls(dist):
    data = _project(dist)
    project, folder = data["project"], REPO / FOLDERS[dist]
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77 for r in data["build-system"]["requires"]), (
        "PEP 639 license metadata needs setuptools>=77"
    )
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_text() == LICENSE, f"{folder / 'LICENSE'} is not the repository's LICENSE"
    assert not any(c.startswith("License ::") for c in project["classifiers"]), "the SPDX expression replaces license classifiers"
    readme = folder / project["readme"]
    assert readme.is_file() and readme.read_text().startswith(f"# {dist}"), readme
    assert "](" not in readme.read_text(), f"{readme}: a relative link breaks on an index page"
    assert project["requires-python"] == CORE["requires-python"] == ">=3.11"
    pythons = {c.rsplit(" ", 1)[1] for c in project["classifiers"] if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert "3.11" in pythons and pythons <= {"3.11", "3.12", "3.13"}, pythons
    assert project["urls"] == CORE["urls"]
    package = "zeus_core" if FOLDERS[dist] == "." else folder.name
    assert (folder / package / "py.typed").is_file() and "Typing :: Typed" in project["classifiers"]
    assert "py.typed" in data["tool"]["setuptools"]["package-data"][package]


@pytest.mark.parametrize("dist", sorted(set(FOLDERS) - {"zeus-core"}))
def test_plugins_require_the_core_within_its_contract(dist):
    core = Version(CORE["version"])
    wanted = [r for r in _requirements(_project(dist)["project"]) if r.name == "zeus-core"]
    assert len(wanted) == 1, "every plugin requires zeus-core"
    spec = wanted[0].specifier
    assert core in spec, f"{dist}: {spec} excludes this core ({core})"
    assert Version(f"{core.major}.{core.minor + 1}") not in spec, f"{dist}: {spec} admits the next contract"


@pytest.mark.parametrize("dist", sorted(FOLDERS))
def test_every_dependency_has_a_floor(dist):
    missing = [str(r) for r in _requirements(_project(dist)["project"]) if not any(s.operator in (">=", "==", "~=") for s in r.specifier)]
    assert not missing, f"{dist}: no lower bound on {missing}"


@pytest.mark.parametrize("dist", sorted(FOLDERS))
def test_the_floors_page_names_every_floor(dist):
    """docs/floors.md says how each floor was tested: its row for ``dist`` names each ``name>=floor`` as declared,
    so a floor raised or added without a run recorded there fails here."""
    rows = [line for line in (REPO / "docs" / "floors.md").read_text().splitlines() if line.startswith(f"| {dist} |")]
    assert len(rows) == 1, f"docs/floors.md has {len(rows)} rows for {dist}"
    floors = [
        f"`{r.name}{'[' + ','.join(sorted(r.extras)) + ']' if r.extras else ''}>={s.version}`"
        for r in _requirements(_project(dist)["project"])
        if r.name != "zeus-core"
        for s in r.specifier
        if s.operator == ">="
    ]
    missing = [f for f in floors if f not in rows[0]]
    assert not missing, f"docs/floors.md, row {dist}: not {missing}"


@pytest.mark.parametrize("folder", ["zeus_core", "plugins/zeus_plugins_baseline"])
def test_the_readme_example_runs(folder, tmp_path):
    """The example job of the README an index shows runs as it is written."""
    text = (REPO / folder / "README.md").read_text()
    block = re.search(r"```toml\n# job.toml\n(.*?)```", text, re.S)
    assert block, "the README shows a job.toml"
    (tmp_path / "job.toml").write_text(block.group(1))
    run = subprocess.run(
        [sys.executable, "-m", "zeus_core", "run", "job.toml", "--output", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "summary.json").is_file()
