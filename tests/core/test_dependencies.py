"""Each distribution declares the third-party packages it imports, and only those.

Imports are read from the source (``ast``), mapped to their distributions with
``importlib.metadata.packages_distributions()``, and compared with the
``dependencies`` (and optional extras) of the distribution's pyproject.toml.
An import inside a function counts: it is a dependency when that code runs.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from zeus_core import catalog

REPO = Path(__file__).resolve().parents[2]
# Every distribution of the repository, from the catalog that lists each one's folder.
DISTRIBUTIONS = {
    dist: (REPO / folder, "zeus_core" if folder == "." else Path(folder).name) for dist, folder in catalog.read()["folders"].items()
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


#: The core's ``test`` extra: the tests' own requirements (pytest; pip and setuptools to build toy plugins).
_CORE = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
TEST_ONLY = {_norm(Requirement(r).name) for r in _CORE["optional-dependencies"]["test"]}


def imported_distributions(package_dir: Path) -> set[str]:
    mapping = packages_distributions()
    found: set[str] = set()
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top in sys.stdlib_module_names:
                    continue
                for dist in mapping.get(top, []):
                    found.add(_norm(dist))
    return found


def declared(root: Path) -> set[str]:
    """What the pyproject declares for this platform (a requirement whose environment marker does
    not hold here, such as a macOS-only library, is neither installed nor imported here)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return {_norm(r.name) for r in map(Requirement, reqs) if r.marker is None or r.marker.evaluate()}


def installed(dist: str) -> bool:
    try:
        distribution(dist)
    except PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_imports_are_declared_and_declarations_are_imported(dist):
    root, package = DISTRIBUTIONS[dist]
    imported = imported_distributions(root / package) - {_norm(dist)}
    # zeus distributions import each other only through zeus-core (a test of the contract checks how)
    imported = {d for d in imported if not d.startswith("zeus-plugins-")}
    wanted = declared(root) - TEST_ONLY  # what runs the tests, not the distribution
    # a distribution not installed here cannot be mapped to from its imports (.ci/ship's core tests on
    # Python 3.12+ have no torch wheel): the others are checked, and the test says what it could not check
    absent = {d for d in wanted if not installed(d)}
    assert imported <= wanted, f"{dist} imports {sorted(imported - wanted)} without declaring them in {root / 'pyproject.toml'}"
    assert wanted - absent <= imported, f"{dist} declares {sorted(wanted - absent - imported)} but never imports them"
    if absent:
        pytest.skip(f"{dist}: {sorted(absent)} not installed here, so whether they are imported is not checked")


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_every_subpackage_is_in_the_distribution(dist):
    """A built wheel holds every package of the source tree: ``packages = [...]`` lists each
    subpackage, or ``packages.find`` includes it (an editable install would hide a missing one)."""
    root, package = DISTRIBUTIONS[dist]
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / package).rglob("__init__.py")}
    setuptools = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {})
    listed = setuptools.get("packages")
    if isinstance(listed, list):
        missing = found - set(listed)
    else:
        patterns = listed.get("find", {}).get("include", ["*"]) if isinstance(listed, dict) else ["*"]
        missing = {p for p in found if not any(fnmatch.fnmatch(p, pat) for pat in patterns)}
    assert not missing, f"{dist}: {sorted(missing)} would be missing from its wheel"
