"""The docs site reads on its own, without the repository beside it.

The pages docs/gen_pages.py makes from the READMEs hold no path outside the repository, no
escaped pipe a browser would show with its backslash, and links only to pages the site has
(an anchor of another README section to that section's page). docs/check_site.py finds each of
those defects in a built site (and a navigation file built as a page); where MkDocs is installed
(requirements-docs.txt, as in .ci/ship) the site is built here and checked whole.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "docs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_pages = _module("gen_pages")
check_site = _module("check_site")

PAGES = {path: text for path, (text, _edit) in gen_pages.pages().items()}
DOCS = {p.name for p in (REPO / "docs").glob("*.md")}


def _outside_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def test_no_page_points_outside_the_repository():
    found = [path for path, text in PAGES.items() if "../shared" in text or "shared/data" in text]
    assert not found, f"pages that name the data folder beside a checkout (say what the data is and where it is public): {found}"


def test_no_code_span_in_a_table_keeps_an_escaped_pipe():
    found = []
    for path, text in PAGES.items():
        for line in _outside_fences(text).splitlines():
            if line.lstrip().startswith("|") and any("\\|" in span for span in re.findall(r"`[^`]*`", line)):
                found.append(f"{path}: {line[:100]}")
    assert not found, "\n".join(found)


def test_the_table_pipes_of_a_readme_become_bare_in_code_and_only_there():
    text = "| a | `x\\|y` and z \\| w |\n```\n| `p\\|q` |\n```\nplain `r\\|s`"
    assert gen_pages.bare_table_pipes(text) == "| a | `x|y` and z \\| w |\n```\n| `p\\|q` |\n```\nplain `r\\|s`"


def test_every_link_between_pages_leads_to_a_page_and_an_anchor_there():
    anchors = {
        path: {gen_pages.slug(h) for h in re.findall(r"^#+ (.+)$", _outside_fences(text), flags=re.M)} for path, text in PAGES.items()
    }
    found = []
    for path, text in PAGES.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", _outside_fences(text)):
            if re.match(r"[a-z]+:", target):
                continue  # another site
            page, _, anchor = target.partition("#")
            if not page:
                if anchor not in anchors[path]:
                    found.append(f"{path}: #{anchor} is no heading of this page")
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), page))
            if resolved in PAGES:
                if anchor and anchor not in anchors[resolved]:
                    found.append(f"{path}: {target}: no heading #{anchor} on {resolved}")
            elif not (resolved in DOCS or (REPO / resolved).exists()):
                found.append(f"{path}: {target} is no page of the site")
    assert not found, "\n".join(found)


def test_the_examples_page_links_to_the_install_commands_it_refers_to():
    assert "[Two commands](install.md)" in PAGES["examples.md"] and "[the first command](install.md)" in PAGES["examples.md"]


def test_a_link_named_by_its_repository_path_reads_as_the_page_title():
    found = [f"{path}: {m}" for path, text in PAGES.items() for m in re.findall(r"\[`?(?:docs/\w+\.md|[\w/]*README\.md)`?\]\(", text)]
    assert not found, "\n".join(found)
    assert "[Architecture](architecture.md)" in PAGES["install.md"]


def test_the_navigation_is_no_page_of_the_site():
    assert "SUMMARY.md" not in PAGES
    hooks = (REPO / "mkdocs.yml").read_text()
    assert "docs/site_hooks.py" in hooks and "nav_file: SUMMARY.md" in hooks


def test_the_site_check_finds_each_defect(tmp_path):
    site = tmp_path / "site"
    (site / "SUMMARY").mkdir(parents=True)
    (site / "SUMMARY" / "index.html").write_text("<p>nav</p>")
    (site / "a").mkdir()
    (site / "a" / "index.html").write_text(
        '<h1 id="top">A</h1><p><code>--set gpu=v100\\|a40</code> from ../shared/data/x.csv</p>'
        '<a href="../b/">b</a> <a href="../a/#top">here</a> <a href="../a/#nowhere">gone</a> <a href="https://example.org/">out</a>'
    )
    problems = check_site.check(site)
    assert problems[0].startswith("SUMMARY")
    assert any("'../shared'" in p for p in problems) and any("'\\\\|'" in p for p in problems)
    assert any("link '../b/' leads to no page" in p for p in problems)
    assert any("no anchor 'nowhere'" in p for p in problems)
    assert not any("#top" in p or "example.org" in p for p in problems)
    clean = tmp_path / "clean"
    (clean / "a").mkdir(parents=True)
    (clean / "a" / "index.html").write_text('<h1 id="top">A</h1><a href="../">home</a>')
    (clean / "index.html").write_text('<a href="a/#top">a</a> <img src="a/index.html">')
    assert subprocess.run([sys.executable, str(REPO / "docs" / "check_site.py"), str(clean)], check=False).returncode == 0
    assert subprocess.run([sys.executable, str(REPO / "docs" / "check_site.py"), str(site)], check=False).returncode == 1


def test_the_built_site_reads_on_its_own(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("MkDocs is not installed here (pip install -r requirements-docs.txt); .ci/ship builds and checks the site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    site = tmp_path / "site"
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    done = subprocess.run(build, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MkDocs 2" not in done.stderr and "ProperDocs" not in done.stderr  # the banners are silenced as the README says
    assert check_site.check(site) == []
