"""Install hints say a command that works from where zeus-core was installed, and the core
names plugins only through its catalog (``zeus_core/catalog.toml``)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from zeus_core import catalog
from zeus_core.catalog import command_for, hint, install_command

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "zeus_core"


def test_an_editable_checkout_gets_the_folder_with_e(tmp_path):
    origin = {"url": REPO.as_uri(), "dir_info": {"editable": True}}
    assert command_for("zeus-plugins-trace", origin, cwd=REPO) == "pip install -e plugins/zeus_plugins_trace"
    assert command_for("zeus-plugins-mab", origin, cwd=REPO / "plugins") == f"pip install -e {REPO / 'zeus_plugins_mab'}"
    assert command_for("zeus-core", origin, cwd=REPO) == "pip install -e ."
    assert command_for("zeus-core", origin, cwd=tmp_path, upgrade=True) == f"git -C {REPO} pull && pip install -e {REPO}"


def test_a_copy_from_a_checkout_gets_the_folder_without_e():
    origin = {"url": REPO.as_uri(), "dir_info": {}}
    assert command_for("zeus-plugins-nvml", origin, cwd=REPO) == "pip install plugins/zeus_plugins_nvml"
    assert command_for("zeus-plugins-nvml", origin, cwd=REPO, upgrade=True) == "git -C . pull && pip install -U plugins/zeus_plugins_nvml"


def test_an_extra_of_the_core_is_named_and_quoted_for_the_shell(tmp_path):
    editable = {"url": REPO.as_uri(), "dir_info": {"editable": True}}
    assert command_for("zeus-core[daemon]", editable, cwd=REPO) == "pip install -e '.[daemon]'"
    wheel = {"url": (tmp_path / "dist" / "zeus_core-0.2.0-py3-none-any.whl").as_uri(), "archive_info": {}}
    assert command_for("zeus-core[daemon]", wheel, cwd=tmp_path) == "pip install --find-links dist 'zeus-core[daemon]'"


def test_a_wheel_from_a_folder_gets_that_folder_as_find_links(tmp_path):
    origin = {"url": (tmp_path / "dist" / "zeus_core-0.2.0-py3-none-any.whl").as_uri(), "archive_info": {}}
    assert command_for("zeus-plugins-trace", origin, cwd=tmp_path) == "pip install --find-links dist zeus-plugins-trace"


def test_a_vcs_install_gets_the_same_url_with_the_subdirectory():
    origin = {"url": "https://example.org/zeus.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}
    assert (
        command_for("zeus-plugins-serve", origin)
        == 'pip install "zeus-plugins-serve @ git+https://example.org/zeus.git@abc123#subdirectory=plugins/zeus_plugins_serve"'
    )
    assert command_for("zeus-core", origin) == 'pip install "zeus-core @ git+https://example.org/zeus.git@abc123"'


def test_an_index_install_gets_the_name_and_the_index(monkeypatch):
    assert command_for("zeus-plugins-trace", None).startswith("pip install zeus-plugins-trace (it is on no public index")
    data = dict(catalog.read(), index="https://pypi.org/simple/")
    monkeypatch.setattr(catalog, "read", lambda: data)
    assert command_for("zeus-plugins-trace", None) == "pip install zeus-plugins-trace"
    data["index"] = "https://wheels.example.org/simple"
    assert (
        command_for("zeus-plugins-trace", None, upgrade=True)
        == "pip install -U --index-url https://wheels.example.org/simple zeus-plugins-trace"
    )


def test_this_checkout_is_where_the_tests_run_from(monkeypatch):
    """The test environment installs zeus-core editable (requirements.txt); its own egg-info in
    the checkout's root, first on sys.path under ``python -m pytest``, does not hide that."""
    monkeypatch.chdir(REPO)
    assert install_command("zeus-plugins-trace") == "pip install -e plugins/zeus_plugins_trace"
    assert hint("device", "rapl") == "pip install -e plugins/zeus_plugins_cpu"
    assert hint("store", "postgresql") == "pip install -e plugins/zeus_plugins_postgres"
    assert hint("device", "no-such-device") is None


def test_the_catalog_covers_every_distribution_and_names_only_those():
    data = catalog.read()
    folders = data["folders"]
    for dist, folder in folders.items():
        project = tomllib.loads((REPO / folder / "pyproject.toml").read_text())["project"]
        assert project["name"] == dist, (folder, project["name"])
    found = {p.parent.relative_to(REPO).as_posix() or "." for p in REPO.glob("pyproject.toml")} | {
        p.parent.relative_to(REPO).as_posix() for root in ("plugins/*", "zeus_*") for p in REPO.glob(f"{root}/pyproject.toml")
    }
    assert found == set(folders.values()), f"distributions the catalog lacks: {sorted(found - set(folders.values()))}"
    for section, table in data.items():
        if isinstance(table, dict) and section != "folders":
            assert set(table.values()) <= set(folders), (section, set(table.values()) - set(folders))


def _strings(tree: ast.AST):
    """Every string constant of a module that is not a docstring (those may name plugins as examples)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_the_core_names_plugins_and_install_commands_only_through_the_catalog():
    found = []
    for path in sorted(CORE.rglob("*.py")):
        if path == CORE / "catalog.py":
            continue
        for node in _strings(ast.parse(path.read_text())):
            if any(word in node.value for word in ("pip install", "zeus-plugins-", "zeus_plugins_")):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not found, "say these through zeus_core.catalog:\n" + "\n".join(found)


@pytest.mark.parametrize("source, caught", [('x = "pip install zeus-plugins-nvml"', True), ('"""pip install zeus-plugins-nvml"""', False)])
def test_the_naming_check_can_fail(source, caught):
    assert bool(list(_strings(ast.parse(source)))) is caught
