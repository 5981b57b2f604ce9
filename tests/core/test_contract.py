"""The plugin contract itself: one public surface, documented from its source, and acyclic.

* every plugin in this repository (and the custom-policy example) imports from
  the core only ``zeus_core``'s top-level names or the public submodule
  ``zeus_core.validators``;
* ``docs/hooks.md``, ``docs/parts.md`` and ``docs/api.md`` are what
  ``python -m zeus_core.docgen`` writes from the source, and every hook and
  protocol has an example;
* the core's modules import each other without a circle (counting imports
  made only for type checking);
* every public name resolves, and capabilities are checked by what a part has.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import zeus_core
from zeus_core import docgen

REPO = Path(__file__).resolve().parents[2]
PLUGIN_ROOTS = [
    REPO / "plugins",
    REPO / "zeus_plugins_mab",
    REPO / "zeus_plugins_hetero",
    REPO / "zeus_plugins_perseus",
    REPO / "examples",
]
PUBLIC_SUBMODULES = {"zeus_core.validators", "zeus_core.daemon"}


def _python_files(root: Path):
    for path in sorted(root.rglob("*.py")):
        if not {".venv", "build", "tests"} & set(path.parts):
            yield path


def core_imports(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every import of the core in ``path`` that is not the public surface."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("zeus_core"):
            if node.module == "zeus_core":
                for alias in node.names:
                    if alias.name not in zeus_core.__all__:
                        bad.append((node.lineno, f"from zeus_core import {alias.name} (not a public name)"))
            elif node.module not in PUBLIC_SUBMODULES:
                bad.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("zeus_core.") and alias.name not in PUBLIC_SUBMODULES:
                    bad.append((node.lineno, f"import {alias.name}"))
    return bad


def test_plugins_use_only_the_public_api():
    found = []
    for root in PLUGIN_ROOTS:
        for path in _python_files(root):
            found += [f"{path.relative_to(REPO)}:{line}: {what}" for line, what in core_imports(path)]
    assert not found, "plugins must import only zeus_core's public names:\n" + "\n".join(found)


def test_the_public_api_check_catches_an_internal_import(tmp_path):
    # The check above must be able to fail: an import of a core internal is caught.
    f = tmp_path / "p.py"
    f.write_text("from zeus_core.runner import Runner\nfrom zeus_core import Runner, nope\nimport zeus_core.store\n")
    got = [what for _, what in core_imports(f)]
    assert got == ["from zeus_core.runner import ...", "from zeus_core import nope (not a public name)", "import zeus_core.store"]


def test_every_public_name_resolves_and_type_checkers_see_the_same_names():
    tree = ast.parse(Path(zeus_core.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    for_checkers = {a.asname or a.name for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert for_checkers == set(zeus_core.__all__), (for_checkers ^ set(zeus_core.__all__))
    for name in zeus_core.__all__:
        assert getattr(zeus_core, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        zeus_core.not_a_name  # noqa: B018


def test_docs_are_generated_from_the_source_and_every_entry_has_an_example():
    problems = docgen.generate(REPO / "docs", check=True)
    assert not problems, "\n".join(problems)


def test_docgen_check_fails_on_a_stale_file_and_a_missing_example(tmp_path, monkeypatch):
    docgen.generate(tmp_path, check=False)
    assert docgen.generate(tmp_path, check=True) == []
    (tmp_path / "hooks.md").write_text((tmp_path / "hooks.md").read_text() + "\nhand edit\n")
    assert any("hooks.md is stale" in p for p in docgen.generate(tmp_path, check=True))
    from zeus_core import hookspecs

    monkeypatch.setattr(hookspecs.zeus_on_job_end, "__doc__", "Called at the end.")
    assert any("hook zeus_on_job_end has no 'Example::'" in p for p in docgen.generate(tmp_path, check=True))


def _module_imports(path: Path, package: str) -> set[str]:
    """Core modules ``path`` imports, including under ``if TYPE_CHECKING:``, excluding imports inside functions."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
                if node.module == package:
                    out.update(f"{package}.{a.name}" for a in node.names if (path.parent / f"{a.name}.py").exists())
                else:
                    out.add(node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith(package + "."))

    visit(tree.body)
    return out


def test_the_core_has_no_import_circle():
    core = REPO / "zeus_core"
    graph = {
        f"zeus_core.{p.stem}": _module_imports(p, "zeus_core")
        for p in core.glob("*.py")
        if p.stem != "__init__"  # its imports are lazy, or for type checkers of users only
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import circle in the core: " + " -> ".join(cycle))
            if n in graph and state.get(n) is None:
                dfs(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if state.get(m) is None:
            dfs(m)


def test_importing_zeus_core_loads_no_submodule_until_a_name_is_used():
    code = (
        "import sys, zeus_core\n"
        "before = sorted(m for m in sys.modules if m.startswith('zeus_core.'))\n"
        "zeus_core.Measurement\n"
        "after = sorted(m for m in sys.modules if m.startswith('zeus_core.'))\n"
        "print(before, 'numpy' in sys.modules, after)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("[] False ['zeus_core.errors', 'zeus_core.measurement']"), out


def test_capabilities_are_what_a_part_has_not_what_it_is_called():
    class Limits:
        def power_limit_range(self):
            return (100.0, 300.0)

        def power_limit(self):
            return 200.0

        def set_power_limit(self, watts):
            pass

    class HalfLimits:  # a capability is all of its methods or nothing
        def set_power_limit(self, watts):
            pass

    assert isinstance(Limits(), zeus_core.PowerLimitControl)
    assert not isinstance(HalfLimits(), zeus_core.PowerLimitControl)
    assert not isinstance(Limits(), zeus_core.ClockControl)
