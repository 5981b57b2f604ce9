"""The package's modules import each other without a cycle, counting every import the code can run.

Imports inside functions and under ``TYPE_CHECKING`` count too: a cycle there
still ties two modules' meanings together and breaks the first time the lazy
import runs in the other order. The one DAG walk and the one slack
reclamation are checked by who imports them.
"""

import ast
from pathlib import Path

import zeus_plugins_perseus.planner as planner

PACKAGE = Path(planner.__file__).resolve().parent
NAME = PACKAGE.name


def _modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere (a package's lazy export strings included)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        is_pkg = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = m.split(".") if is_pkg else m.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            elif is_pkg and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in mods:
                targets = [node.value]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m and t.startswith(NAME):
                    graph[m].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_in_the_package():
    assert cycles(import_graph()) == []


def test_the_checker_sees_a_cycle_through_a_function_level_import():
    graph = import_graph()
    graph[f"{NAME}.dag_times"].add(f"{NAME}.emulator")  # as if dag_times imported the emulator inside a function
    assert any({f"{NAME}.dag_times", f"{NAME}.emulator"} <= set(c) for c in cycles(graph))


def test_one_dag_walk_and_one_slack_reclamation():
    """Only dag_times walks the DAG's levels; only reclaim.py reclaims slack, and the real-time plans use it."""
    for m, f in _modules().items():
        text = f.read_text()
        if m != f"{NAME}.dag_times":
            assert "in lv.levels" not in text and "reversed(lv.levels)" not in text, f"{m} walks the DAG itself"
            assert "def topological_order" not in text, m
    graph = import_graph()
    for user in ("emulator", "exact", "reclaim", "tradeoff"):
        assert f"{NAME}.dag_times" in graph[f"{NAME}.{user}"], user
    assert f"{NAME}.reclaim" in graph[f"{NAME}.exact"]
