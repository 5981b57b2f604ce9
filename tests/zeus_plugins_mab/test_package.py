"""The mab plugin asks parts what they can do through zeus_core's capability protocols, never by name.

(``tests/core/test_contract.py`` checks that it imports only zeus_core's public surface, and
``tests/core/test_dependencies.py`` that its pyproject.toml declares what it imports.)
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "zeus_plugins_mab" / "zeus_plugins_mab"


def test_no_attribute_is_probed_by_name():
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"getattr", "hasattr"}, f"{path.name} probes attributes by name; use an isinstance check on a protocol"
