r"""The docs site's pages from the READMEs and the source, run by mkdocs-gen-files at build time.

The top README is cut at its ``## `` headings into pages (PAGES, in the order a new user
reads them); every distribution's README (its folder from ``zeus_core/catalog.toml``)
becomes ``plugins/<name>.md``; every public module of the core gets an API page rendered
by mkdocstrings. Links between READMEs, and to ``docs/*.md``, are rewritten to the pages
they became. The navigation (``SUMMARY.md``, read by mkdocs-literate-nav) is written here
too, so a new distribution or section shows up without editing mkdocs.yml.

The site reads on its own, without the repository beside it: a README link to an anchor of
another section points to that section's page, and a code span in a table cell shows a bare
``|`` where GitHub needs ``\|``. :func:`pages` is the whole of it, importable without MkDocs
(``tests/core/test_docs_site.py`` checks the pages; ``docs/check_site.py`` the built site).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
FOLDERS = tomllib.loads((REPO / "zeus_core" / "catalog.toml").read_text())["folders"]

#: README section (its heading's first words) -> (page, title in the navigation), in reading order.
PAGES = {
    "Two commands": ("install.md", "Install and run"),
    "More examples": ("examples.md", "Examples"),
    "Using it": ("using.md", "Using zeus"),
    "What this machine offers": ("env.md", "What this machine offers (zeus env)"),
    "job.toml reference": ("job-toml.md", "job.toml reference"),
    "Add zeus to your own training script": ("in-loop.md", "In your training loop"),
    "Carbon and money": ("carbon.md", "Carbon and money"),
    "The cost metric": ("cost.md", "The cost metric"),
    "State": ("state.md", "State and the job store"),
    "A cluster": ("cluster.md", "A cluster: store, serve, metrics"),
    "Running without root": ("daemon.md", "Running without root (zeus daemon)"),
    "Writing a plugin": ("writing-a-plugin.md", "Writing a plugin"),
    "Layout": ("layout.md", "Repository layout"),
}
GENERATED = {"hooks.md": "Hooks", "parts.md": "Parts and capabilities", "api.md": "Public names"}
#: Pages written by hand in docs/ that the READMEs may link to (``docs/architecture.md``).
WRITTEN = {
    "architecture.md": "Architecture",
    "floors.md": "Dependency floors",
    "real-hardware.md": "Real hardware",
    "measurement.md": "How sure a figure is",
    "profiling.md": "Thermally stable profiling",
}
#: The core's modules with no API page: the engine and the CLI sit behind the contract; docgen is a tool.
NOT_API = ("engine", "cli", "docgen", "__main__")
#: The contract's modules in reading order; every other public module of the core follows, by name.
FIRST = ["hookspecs", "parts", "device", "contexts", "job", "errors", "cost"]


def api_modules() -> list[str]:
    """Every public module of the core (but NOT_API), so a new one gets its page without an edit here."""
    found = []
    for path in sorted((REPO / "zeus_core").rglob("*.py")):
        parts = path.relative_to(REPO / "zeus_core").with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and parts[0] not in NOT_API and not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return FIRST + [m for m in found if m not in FIRST]


API_MODULES = api_modules()


def slug(heading: str) -> str:
    """The anchor GitHub and Python-Markdown give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text before the first ``## `` heading, and each (heading, body) after it."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return parts[0], [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts), 2)]


def page_of(heading: str) -> tuple[str, str]:
    for start, page in PAGES.items():
        if heading.startswith(start):
            return page
    raise SystemExit(f"README.md section {heading!r} has no page in docs/gen_pages.py PAGES")


def plugin_page(dist: str) -> str:
    return f"plugins/{dist}.md"


def rewrite_links(text: str, here: str, anchors: dict[str, str]) -> str:
    """README links -> site links, relative to the page ``here``."""
    up = "../" * here.count("/")
    targets = {f"docs/{name}": name for name in [*GENERATED, *WRITTEN]}
    targets.update({f"{folder}/README.md".removeprefix("./"): plugin_page(dist) for dist, folder in FOLDERS.items()})

    titles = {f"docs/{name}": title for name, title in [*GENERATED.items(), *WRITTEN.items()]}
    titles.update({f"{folder}/README.md".removeprefix("./"): dist for dist, folder in FOLDERS.items()})

    def named(m: re.Match[str]) -> str:
        """A link whose text is its repository path reads as the page's title on the site."""
        return f"[{titles[m.group(1)]}]({m.group(1)})" if m.group(1) in titles else m.group(0)

    def link(m: re.Match[str]) -> str:
        target = m.group(1)
        if target.startswith("#") and anchors.get(target[1:], here) != here:
            return f"]({up}{anchors[target[1:]]})"
        if target in targets:
            return f"]({up}{targets[target]})"
        return m.group(0)

    text = re.sub(r"\[`?([^]`\s]+)`?\]\(\1\)", named, text)
    return re.sub(r"\]\(([^)\s]+)\)", link, text)


def bare_table_pipes(text: str) -> str:
    """``\\|`` -> ``|`` inside the code spans of table rows (outside fenced code).

    GitHub splits a table row at every unescaped ``|``, code spans too, so the READMEs write a
    pipe in a cell's code as ``\\|`` and GitHub shows ``|``. Python-Markdown keeps code spans
    whole when it splits a row and would show the backslash.
    """
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith("|"):
            line = re.sub(r"`[^`]*`", lambda m: m.group(0).replace("\\|", "|"), line)
        out.append(line)
    return "\n".join(out)


def page_text(text: str, here: str, anchors: dict[str, str]) -> str:
    return bare_table_pipes(rewrite_links(text, here, anchors))


def pages() -> dict[str, tuple[str, str | None]]:
    """Every generated page: its path -> (Markdown, the README it is edited in where it is a whole one)."""
    intro, parts = sections(README)
    anchors = {slug(heading): page_of(heading)[0] for heading, _ in parts}
    out: dict[str, tuple[str, str | None]] = {"index.md": (page_text(intro, "index.md", anchors), None)}
    for heading, body in parts:
        page, _name = page_of(heading)
        out[page] = (page_text(f"# {heading}\n{body}", page, anchors), None)
    for dist, folder in FOLDERS.items():
        readme = REPO / folder / ("zeus_core/README.md" if folder == "." else "README.md")
        page = plugin_page(dist)
        out[page] = (page_text(readme.read_text(), page, anchors), readme.relative_to(REPO).as_posix())
    for module in API_MODULES:
        out[f"reference/{module}.md"] = (f"# `zeus_core.{module}`\n\n::: zeus_core.{module}\n", None)
    return out


def navigation() -> str:
    """``SUMMARY.md``: the site's navigation, for mkdocs-literate-nav (not a page: docs/site_hooks.py)."""
    groups = {
        "Getting started": ["install.md", "examples.md", "using.md", "env.md", "job-toml.md"],
        "Guides": ["in-loop.md", "cost.md", "state.md", "cluster.md", "carbon.md", "daemon.md"],
        "Writing a plugin": ["writing-a-plugin.md"],
    }
    titles = dict(PAGES.values())
    nav = ["* [Home](index.md)"]
    for group, names in groups.items():
        nav.append(f"* {group}")
        nav += [f"    * [{titles[p]}]({p})" for p in names]
    nav += [f"    * [{name}]({page})" for page, name in GENERATED.items()]
    nav.append("* Distributions")
    nav += [f"    * [{dist}]({plugin_page(dist)})" for dist in FOLDERS]
    nav.append("* API reference")
    nav += [f"    * [zeus_core.{m}](reference/{m}.md)" for m in API_MODULES]
    nav.append(f"* [{WRITTEN['architecture.md']}](architecture.md)")  # docs/architecture.md, written by hand
    nav.append(f"* [{titles['layout.md']}](layout.md)")
    nav.append(f"* [{WRITTEN['floors.md']}](floors.md)")  # docs/floors.md, written by hand
    nav.append(f"* [{WRITTEN['real-hardware.md']}](real-hardware.md)")  # docs/real-hardware.md, written by hand
    nav.append(f"* [{WRITTEN['measurement.md']}](measurement.md)")  # docs/measurement.md, written by hand
    nav.append(f"* [{WRITTEN['profiling.md']}](profiling.md)")  # docs/profiling.md, written by hand
    missing = set(titles) - {p for names in groups.values() for p in names} - {"layout.md"}
    if missing:
        raise SystemExit(f"pages in no navigation group: {sorted(missing)}")
    return "\n".join(nav) + "\n"


#: The navigation file mkdocs.yml's literate-nav reads.
NAV_FILE = "SUMMARY.md"


def main() -> None:
    import mkdocs_gen_files

    for path, (text, edit) in pages().items():
        with mkdocs_gen_files.open(path, "w") as f:
            f.write(text)
        if edit is not None:
            mkdocs_gen_files.set_edit_path(path, edit)
    with mkdocs_gen_files.open(NAV_FILE, "w") as f:
        f.write(navigation())


if __name__ in {"__main__", "<run_path>"}:  # run by mkdocs-gen-files (runpy.run_path), or by hand
    main()
