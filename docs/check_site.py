"""Check a built docs site reads on its own: ``python docs/check_site.py SITE_DIR`` (.ci/ship runs it
after ``mkdocs build``); prints each problem and exits 1 if there is any.

What a reader of the site, who has only the site, would trip on:

* a reference to files outside the repository (``../shared``: the public data beside a checkout);
* a literal ``\\|`` (a README's escaped pipe shown as it is written);
* the navigation file built as a page of its own (``SUMMARY``);
* a link between the site's pages that leads nowhere: no such page, or no such anchor on it.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

#: Text no page may hold, and why.
FORBIDDEN = {
    "../shared": "a path outside the repository, which a reader of the site does not have",
    "shared/data": "the public data folder beside a checkout, which a reader of the site does not have",
    "\\|": "a README's escaped pipe, shown with its backslash",
}


class _Page(HTMLParser):
    """The links (``href``/``src``) and element ids of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id":
                self.ids.add(value)
            elif name in ("href", "src") and tag in ("a", "img", "link", "script"):
                self.links.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _target(site: Path, page: Path, link: str) -> Path | None:
    """The file an internal link leads to (a folder's ``index.html``), or None for an external link."""
    parts = urlsplit(link)
    if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
        return None
    if not parts.path:
        return page
    base = site if parts.path.startswith("/") else page.parent
    target = (base / unquote(parts.path.lstrip("/"))).resolve()
    return target / "index.html" if target.is_dir() or parts.path.endswith("/") else target


def check(site: Path) -> list[str]:
    """Every problem of the site built in ``site``, one line each (none: it reads on its own)."""
    site = site.resolve()
    problems = []
    if (site / "SUMMARY").exists() or (site / "SUMMARY.html").exists():
        problems.append("SUMMARY: the navigation file is built as a page of its own")
    pages = {path: _parse(path) for path in sorted(site.rglob("*.html"))}
    for path, page in pages.items():
        name = path.relative_to(site).as_posix()
        text = "".join(page.text)
        for needle, why in FORBIDDEN.items():
            if needle in text:
                at = text.index(needle)
                problems.append(f"{name}: {needle!r} ({why}): ...{' '.join(text[max(0, at - 60) : at + 40].split())}...")
        for link in page.links:
            target = _target(site, path, link)
            if target is None:
                continue
            if not target.is_relative_to(site) or not target.exists():
                problems.append(f"{name}: link {link!r} leads to no page of the site")
                continue
            fragment = urldefrag(link).fragment
            if fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(fragment) not in ids:
                    problems.append(f"{name}: link {link!r}: no anchor {fragment!r} on {target.relative_to(site).as_posix()}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python docs/check_site.py SITE_DIR", file=sys.stderr)
        return 2
    problems = check(Path(argv[0]))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
