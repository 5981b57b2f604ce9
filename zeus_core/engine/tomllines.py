"""Map a value's path in a TOML document back to its line number.

``tomllib`` gives no positions, and error messages must say ``job.toml:LINE``.
This scanner follows table headers (``[a.b]``, ``[[a.b]]`` with their array
index), ``key = value`` lines (dotted keys included) and keys of one-line
inline tables. It only needs to be right for documents ``tomllib`` accepted.
"""

from __future__ import annotations

import re

_ARRAY_TABLE = re.compile(r"^\s*\[\[\s*(.+?)\s*\]\]\s*(#.*)?$")
_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'))*)\s*=(.*)$""")
_INLINE_KEY = re.compile(r"""[{,]\s*([A-Za-z0-9_\-]+|"[^"]*")\s*=""")


def _split_key(text: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'""", text)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def line_index(text: str) -> dict[tuple, int]:
    """Return {path: line} for every table and key in ``text`` (lines count from 1)."""
    index: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    current: tuple = ()
    key: tuple[str | int, ...]
    in_multiline: str | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        m = _ARRAY_TABLE.match(line)
        if m:
            key = _split_key(m.group(1))
            i = counts.get(key, 0)
            counts[key] = i + 1
            current = key + (i,)
            index.setdefault(key, lineno)
            index[current] = lineno
            continue
        m = _TABLE.match(line)
        if m:
            key = _split_key(m.group(1))
            # A sub-table of the latest array element: [a.b] after [[a]].
            for n in range(len(key), 0, -1):
                if key[:n] in counts:
                    key = key[:n] + (counts[key[:n]] - 1,) + key[n:]
                    break
            current = key
            index.setdefault(current, lineno)
            continue
        m = _KEY.match(line)
        if m:
            path = current + _split_key(m.group(1))
            index.setdefault(path, lineno)
            rest = m.group(m.lastindex or 0)
            for q in ('"""', "'''"):
                if rest.count(q) % 2 == 1:
                    in_multiline = q
            for k in _INLINE_KEY.findall(rest):
                index.setdefault(path + _split_key(k), lineno)
    return index


def find_line(index: dict[tuple, int], path: tuple) -> int:
    """Line of ``path``, or of its nearest ancestor present in the document, or 1."""
    for n in range(len(path), -1, -1):
        if path[:n] in index:
            return index[path[:n]]
    return 1
