"""The plugin contract itself: one public surface, documented from its source, and acyclic.

* ``zeus_core``'s top level is a literal list of at most 60 names, each bound by a
  literal import (or, for the few that load on first use, one under ``TYPE_CHECKING``);
* every plugin in this repository (and the custom-policy example) imports from the core
  only its top-level names, or names of its public modules (never a private one, nor
  a private name);
* ``docs/hooks.md``, ``docs/parts.md`` and ``docs/api.md`` are what
  ``python -m zeus_core.docgen`` writes from the source, and every hook and
  protocol has an example;
* the core's modules, and each plugin package's, import each other without a circle,
  counting imports made inside functions and only for type checking;
* capabilities are checked by what a part has.
"""

from __future__ import annotations

import ast
import importlib
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
PACKAGES = (
    [(REPO, "zeus_core")]
    + [(p.parent, p.name) for root in PLUGIN_ROOTS[:-1] for p in sorted(root.glob("**/zeus_plugins_*")) if (p / "__init__.py").is_file()]
    + [(REPO / "plugins" / "zeus", "zeus")]
)  # upstream's import package (zeus-compat)
#: What a plugin may import from the core, besides the face (``zeus_core``'s ``__all__``): the
#: engine's door (``zeus_core.engine``'s ``__all__``) and the toolkits a kind of plugin needs,
#: each through its literal ``__all__``. Every other module (the engine's own, the commands,
#: the daemon's server) is the core's implementation: no plugin imports it.
PLUGIN_SURFACE = (
    "zeus_core",
    "zeus_core.engine",
    # the contract beside the face: hooks, parts, devices, jobs, results, stores, errors
    "zeus_core.hookspecs",
    "zeus_core.device",
    "zeus_core.job",
    "zeus_core.results",
    "zeus_core.errors",
    "zeus_core.backends",
    "zeus_core.identity",
    "zeus_core.measurement",
    "zeus_core.windows",
    "zeus_core.scheduler",
    "zeus_core.attribution",
    # helpers for options, data files, files, logs and units
    "zeus_core.validators",
    "zeus_core.unset",
    "zeus_core.loading",
    "zeus_core.datafiles",
    "zeus_core.files",
    "zeus_core.journal",
    "zeus_core.logs",
    "zeus_core.units",
    "zeus_core.exposure",
    # the shared rules of the research systems, and what their reports draw
    "zeus_core.cost",
    "zeus_core.selection",
    "zeus_core.stopping",
    "zeus_core.allocation",
    "zeus_core.comparison",
    "zeus_core.grid",
    "zeus_core.plots",
    "zeus_core.profiling",
    # device plugins (their drivers, simulated drivers and privileged services)
    "zeus_core.devicekit",
    "zeus_core.devicekit.simulated",
    "zeus_core.daemon",
    "zeus_core.daemon.nodeclient",
    # the user's own loop (zeus-compat and the framework callbacks)
    "zeus_core.inloop",
    "zeus_core.inloop.monitor",
    "zeus_core.inloop.timeline",
    "zeus_core.inloop.trainer",
    # plugins that add commands
    "zeus_core.cli.consoles",
    "zeus_core.cli.env",
)


def _python_files(root: Path):
    for path in sorted(root.rglob("*.py")):
        if not {".venv", "build", "tests"} & set(path.parts):
            yield path


def _core_module_exists(module: str) -> bool:
    parts = module.split(".")
    base = REPO.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _listed_names(module: str) -> list[str] | None:
    """The literal ``__all__`` of a core module, read from its source (None when it has none)."""
    parts = module.split(".")
    base = REPO.joinpath(*parts)
    path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return [e.value for e in node.value.elts] if isinstance(node.value, ast.List) else None
    return None


def core_imports(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every import of the core in ``path`` that is not the plugins' surface."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "zeus_core":
            if not _core_module_exists(node.module):
                bad.append((node.lineno, f"from {node.module} import ... (no such module)"))
            elif node.module not in PLUGIN_SURFACE:
                bad.append((node.lineno, f"from {node.module} import ... (the core's implementation)"))
            else:
                listed = zeus_core.__all__ if node.module == "zeus_core" else _listed_names(node.module) or []
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    if alias.name in listed or (submodule in PLUGIN_SURFACE and _core_module_exists(submodule)):
                        continue
                    bad.append((node.lineno, f"from {node.module} import {alias.name} (not in its __all__)"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("zeus_core.") and alias.name not in PLUGIN_SURFACE:
                    bad.append((node.lineno, f"import {alias.name}"))
    return bad


def test_plugins_use_only_the_public_api():
    found = []
    for root in PLUGIN_ROOTS:
        for path in _python_files(root):
            found += [f"{path.relative_to(REPO)}:{line}: {what}" for line, what in core_imports(path)]
    assert not found, "plugins must import only zeus_core's public names:\n" + "\n".join(found)


def test_the_public_api_check_catches_an_internal_import(tmp_path):
    # The check above must be able to fail: internals, names outside a module's __all__, private
    # names, the engine's modules behind its door and unknown modules are caught.
    f = tmp_path / "p.py"
    f.write_text(
        "from zeus_core.runner import Runner\nfrom zeus_core import Runner, hookimpl\n"
        "from zeus_core.engine.validation import load_job\nfrom zeus_core.cli.main import main\n"
        "from zeus_core.engine import Runner, _suggest\nfrom zeus_core.validators import positive, Any\n"
        "from zeus_core.devicekit import simulated, drivers\nimport zeus_core.engine.runner\n"
    )
    got = [what for _, what in core_imports(f)]
    assert got == [
        "from zeus_core.runner import ... (no such module)",
        "from zeus_core import Runner (not in its __all__)",
        "from zeus_core.engine.validation import ... (the core's implementation)",
        "from zeus_core.cli.main import ... (the core's implementation)",
        "from zeus_core.engine import _suggest (not in its __all__)",
        "from zeus_core.validators import Any (not in its __all__)",
        "from zeus_core.devicekit import drivers (not in its __all__)",
        "import zeus_core.engine.runner",
    ]


def test_every_module_of_the_plugins_surface_lists_its_names_literally():
    for module in PLUGIN_SURFACE:
        listed = _listed_names(module)
        assert listed, f"{module} needs a literal __all__: it is what plugins may import from it"
        assert len(listed) == len(set(listed)), module
        loaded = importlib.import_module(module)
        for name in listed:
            assert getattr(loaded, name, None) is not None, f"{module}.__all__ names {name}, which it does not have"


def test_the_engines_door_is_literal_small_and_loads_lazily():
    import zeus_core.engine

    listed, eager, checking = _top_level_bindings(ast.parse(Path(zeus_core.engine.__file__).read_text()))
    assert listed == zeus_core.engine.__all__ and len(listed) == len(set(listed)) <= 48, len(listed)
    assert set(listed) == checking and not eager - {"TYPE_CHECKING", "annotations"}, (set(listed) ^ checking, eager)
    assert all(not name.startswith("_") for name in listed)


def _top_level_bindings(tree: ast.Module) -> tuple[list[str], set[str], set[str]]:
    """``__all__`` (literal), names bound by top-level imports, names imported under TYPE_CHECKING."""
    listed: list[str] = []
    eager: set[str] = set()
    checking: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            assert isinstance(node.value, ast.List) and all(isinstance(e, ast.Constant) for e in node.value.elts), (
                "__all__ must be a literal list of strings"
            )
            listed = [e.value for e in node.value.elts]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] != "typing" and node.module != "__future__":
            eager.update(a.asname or a.name for a in node.names if a.name != "lazy_exports")
        elif isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            checking.update(a.asname or a.name for n in node.body if isinstance(n, ast.ImportFrom) for a in n.names)
    return listed, eager, checking


def test_the_public_api_is_literal_small_and_visible_to_tools():
    listed, eager, checking = _top_level_bindings(ast.parse(Path(zeus_core.__file__).read_text()))
    assert listed == zeus_core.__all__ and len(listed) == len(set(listed)) <= 60, len(listed)
    assert set(listed) == eager | checking, set(listed) ^ (eager | checking)
    assert not eager & checking
    assert checking == set(zeus_core.loading.imported_for_type_checking("zeus_core")), "the lazy names are the TYPE_CHECKING imports"
    for name in listed:
        assert getattr(zeus_core, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        zeus_core.not_a_name  # noqa: B018


@pytest.mark.parametrize("root, package", PACKAGES[1:], ids=[p for _, p in PACKAGES[1:]])
def test_every_plugin_package_lists_its_names_literally(root, package):
    """A plugin package's ``__all__`` is literal, and each name is imported where tools see it."""
    init = root / package / "__init__.py"
    listed, eager, checking = _top_level_bindings(ast.parse(init.read_text()))
    if not listed and not eager and not checking:
        return  # a package with no names of its own
    assert set(listed) == eager | checking, set(listed) ^ (eager | checking)


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


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path, module: str, package: str, known: set[str]) -> set[str]:
    """Modules of ``package`` that ``path`` imports anywhere: at the top, inside functions, under TYPE_CHECKING."""
    out: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != package:
                continue
            for a in node.names:  # ``from pkg import submodule`` imports the submodule
                if f"{target}.{a.name}" in known:
                    out.add(f"{target}.{a.name}")
            out.add(target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == package)
    # a module's own package (its __init__) is not a dependency worth a circle; its parents are imported first anyway
    return {m for m in out if m in known and m != module and not module.startswith(m + ".")}


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    return {m: _imports(p, m, package, set(files)) for m, p in files.items()}


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if state.get(n) is None and (got := dfs(n)):
                return got
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if state.get(m) is None and (got := dfs(m)):
            return got
    return None


@pytest.mark.parametrize("root, package", PACKAGES, ids=[p for _, p in PACKAGES])
def test_no_import_circle(root, package):
    circle = find_circle(import_graph(root, package))
    assert circle is None, f"import circle in {package}: " + " -> ".join(circle)


#: The core's layers, lowest first: a module imports only from its own layer or the ones before it
#: (imports inside functions and for type checking count). The top-level modules are the contract,
#: below every folder, except the face (``zeus_core`` itself, whose names load the rest on first use)
#: and the entry points, above everything.
CORE_LAYERS = ("contract", "engine", "daemon", "devicekit", "inloop", "cli", "face")
FACE_MODULES = {"zeus_core", "zeus_core.__main__", "zeus_core.docgen"}


def core_layer(module: str) -> str:
    """The layer of a module of the core: its folder (``zeus_core.engine.stores.sqlite``: engine)."""
    if module in FACE_MODULES:
        return "face"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (REPO / "zeus_core" / parts[-1]).is_dir() else "contract"


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {layer: i for i, layer in enumerate(CORE_LAYERS)}
    return sorted(
        f"{m} ({core_layer(m)}) imports {d} ({core_layer(d)})"
        for m, deps in graph.items()
        for d in deps
        if rank[core_layer(d)] > rank[core_layer(m)]
    )


def test_the_cores_folders_are_layered_downward_without_a_circle():
    graph = import_graph(REPO, "zeus_core")
    assert {core_layer(m) for m in graph} == set(CORE_LAYERS), "a folder of the core is in no layer: add it to CORE_LAYERS"
    found = layer_violations(graph)
    assert not found, "the core's folders must import downward only (CORE_LAYERS):\n" + "\n".join(found)


def test_the_layer_check_catches_an_upward_import():
    graph = {"zeus_core.engine.registry": {"zeus_core.daemon.server"}, "zeus_core.daemon.server": {"zeus_core.engine.registry"}}
    assert layer_violations(graph) == ["zeus_core.engine.registry (engine) imports zeus_core.daemon.server (daemon)"]


def test_the_circle_check_finds_one_inside_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import x\n")
    (pkg / "b.py").write_text("def x():\n    from pkg import a\n")
    assert find_circle(import_graph(tmp_path, "pkg")) == ["pkg.a", "pkg.b", "pkg.a"]


def test_importing_zeus_core_loads_neither_the_engine_nor_heavy_libraries():
    code = (
        "import sys, zeus_core\n"
        "print(sorted(m for m in sys.modules if m.startswith(('zeus_core.engine.runner', 'zeus_core.inloop', "
        "'zeus_core.cli', 'zeus_core.engine', 'zeus_core.allocation', 'zeus_core.windows', 'importlib.metadata', "
        "'numpy', 'rich', 'cattrs', 'torch', 'click'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


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
