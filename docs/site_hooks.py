"""MkDocs hooks of the docs site (mkdocs.yml ``hooks``).

``SUMMARY.md`` (written by docs/gen_pages.py) is the navigation mkdocs-literate-nav reads, not
a page: it is excluded from the build, so the site has no stray "SUMMARY" page. literate-nav
still reads it (it looks files up whether they are built or not).
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import Files, InclusionLevel

NAV_FILE = "SUMMARY.md"


def on_files(files: Files, config: Any) -> Files:
    nav = files.get_file_from_path(NAV_FILE)
    if nav is not None:
        nav.inclusion = InclusionLevel.EXCLUDED
    return files
