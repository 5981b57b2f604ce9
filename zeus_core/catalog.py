"""What to install for a part the core does not have, said as a command that works here.

``catalog.toml`` (beside this module) maps each first-party part, store scheme, process
group, restorer and daemon service to the distribution that provides it, and each
distribution to its folder in the repository. The core names plugins only through it:
every install hint in ``zeus_core`` is :func:`hint` or :func:`install_command`.

The command depends on where zeus-core itself came from (its ``direct_url.json``,
PEP 610): an editable checkout gets ``pip install -e plugins/zeus_plugins_trace``; a
non-editable install from a checkout the same path without ``-e``; a wheel from a local
folder ``pip install --find-links FOLDER NAME``; a VCS URL the same URL with the
distribution's ``subdirectory``; an index the distribution's name, with ``--index-url``
when the catalog names an index other than PyPI, and a note when it names none.

Example::

    from zeus_core.catalog import hint

    hint("device", "nvml")   # "pip install -e plugins/zeus_plugins_nvml" in a checkout
"""

from __future__ import annotations

import functools
import json
import os
import tomllib
from importlib import metadata, resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

CORE = "zeus-core"
PYPI = "https://pypi.org/simple"


@functools.cache
def read() -> dict[str, Any]:
    """The catalog, parsed (the one reader of ``catalog.toml``)."""
    return tomllib.loads(resources.files("zeus_core").joinpath("catalog.toml").read_text())


def provider(section: str, name: str) -> str | None:
    """The distribution that provides ``name`` in ``section`` (``"device"``, ``"store"``, ...), if first-party."""
    table = read().get(section)
    return table.get(name) if isinstance(table, dict) else None


def hint(section: str, name: str, *, upgrade: bool = False) -> str | None:
    """The command that installs the provider of ``name`` in ``section``; None for a name the catalog lacks."""
    dist = provider(section, name)
    return install_command(dist, upgrade=upgrade) if dist else None


def install_command(dist: str, *, upgrade: bool = False) -> str:
    """The command that installs (``upgrade``: upgrades) ``dist`` from where zeus-core was installed."""
    return command_for(dist, core_origin(), upgrade=upgrade, cwd=Path.cwd())


def core_origin() -> dict[str, Any] | None:
    """zeus-core's ``direct_url.json``: None when it came from an index. Run from a source tree
    that was never installed, the tree's root as an editable directory."""
    found = False
    for dist in metadata.distributions(name=CORE):  # an editable checkout's own *.egg-info may come first
        found = True
        text = dist.read_text("direct_url.json")
        if text:
            return json.loads(text)
    root = Path(__file__).resolve().parents[1]
    if not found and (root / "pyproject.toml").is_file():
        return {"url": root.as_uri(), "dir_info": {"editable": True}}
    return None


def command_for(dist: str, origin: dict[str, Any] | None, *, upgrade: bool = False, cwd: Path | None = None) -> str:
    """The install command for ``dist`` given zeus-core's ``direct_url.json`` (``origin``); ``dist`` may
    name extras (``zeus-core[daemon]``), quoted in the command for the shell."""
    base, bracket, extras = dist.partition("[")
    suffix = bracket + extras

    def quoted(target: str) -> str:
        return f"'{target}{suffix}'" if suffix else target

    folder = read().get("folders", {}).get(base)
    flag = "-U " if upgrade else ""
    url = (origin or {}).get("url", "")
    local = unquote(urlparse(url).path) if url.startswith("file:") else None
    if origin is not None and "dir_info" in origin and local is not None and folder is not None:
        path = Path(local) / folder
        if (path / "pyproject.toml").is_file():
            editable = origin["dir_info"].get("editable", False)
            command = f"pip install {'-e ' if editable else flag}{quoted(_shown(path, cwd))}"
            return f"git -C {_shown(Path(local), cwd)} pull && {command}" if upgrade else command
    if origin is not None and "archive_info" in origin and local is not None:
        return f"pip install {flag}--find-links {_shown(Path(local).parent, cwd)} {quoted(base)}"
    if origin is not None and "vcs_info" in origin and folder is not None:
        vcs = origin["vcs_info"]
        ref = f"@{vcs['commit_id']}" if vcs.get("commit_id") else ""
        sub = "" if folder == "." else f"#subdirectory={folder}"
        return f'pip install {flag}"{base}{suffix} @ {vcs["vcs"]}+{url}{ref}{sub}"'
    index = read().get("index", "")
    if not index:
        return f"pip install {flag}{quoted(base)} (it is on no public index: add the --index-url or --find-links zeus-core came from)"
    if index.rstrip("/") != PYPI:
        return f"pip install {flag}--index-url {index} {quoted(base)}"
    return f"pip install {flag}{quoted(base)}"


def _shown(path: Path, cwd: Path | None) -> str:
    """``path`` relative to ``cwd`` when it lies under it (``plugins/zeus_plugins_trace``, ``.``), else absolute."""
    if cwd is not None:
        try:
            rel = path.resolve().relative_to(cwd.resolve())
        except ValueError:
            pass
        else:
            return str(rel) if rel.parts else "."
    return os.fspath(path)
