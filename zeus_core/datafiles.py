"""Reading the data files a job names (traces, group files, profiles, grid series), as every reader must.

A data file is usually made by hand or by a script that went wrong, so a reader refuses
what it cannot use at ``zeus validate`` time, naming the file, the line (and the column
or field) and the fix, with a :class:`DataFileError` (a ``ValueError``), never a
traceback. The helpers here do the parts every reader shares:

* :func:`read_data_text`: the whole text of a file, refused past a size limit before it
  is read (each kind of file has its own, raised by an environment variable the message
  names: :func:`data_limit`), and refused when its bytes are not UTF-8 (naming the line
  and column of the first bad byte); a UTF-8 byte-order mark is dropped.
* :func:`csv_table`: the header and the data rows of CSV text, each row with its line;
  a row with more or fewer cells than the header is refused, naming the line and the
  first extra or missing column (a decimal comma, ``0,35``, is one extra cell: the
  message says so); blank rows are skipped.
* :func:`json_document`: JSON text, refused when it nests deeper than a limit (looked at
  without recursion, naming the line), or when it is not JSON (naming line and column).
* :func:`parse_number` and :func:`check_range`: a finite number within the plausible
  range of its quantity (so that no later arithmetic overflows), else the message names
  the bound; ``0,35`` is named as a decimal comma.

These need nothing beyond the standard library, so validating a job stays light.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIB = 1 << 20


class DataFileError(ValueError):
    """A data file that cannot be used; the message names the file, the line and the fix."""


ErrorType = Callable[[str], Exception]


def _mib(n: float) -> str:
    return f"{n / MIB:g} MiB"


def data_limit(default_bytes: int, env: str, error: ErrorType = DataFileError) -> int:
    """The size limit of a kind of data file: ``default_bytes``, or the environment variable
    ``env`` in MiB (a positive number) where it is set."""
    text = os.environ.get(env, "").strip()
    if not text:
        return default_bytes
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise error(f"{env}={text!r}: expected a number of MiB above 0 (the largest data file of this kind to read)")
    return int(value * MIB)


def read_data_text(path: str | os.PathLike[str], *, what: str, limit: int, env: str, error: ErrorType = DataFileError) -> str:
    """The text of data file ``path`` (``what`` it is, for messages: ``"a trace CSV"``).

    Refused (``error``, a :class:`DataFileError` by default) past ``limit`` bytes before it is
    read (the message names the limit and ``env``, the variable that raises it), when it cannot
    be read (naming why), and when a byte is not UTF-8 (naming its line and column). A leading
    UTF-8 byte-order mark (a spreadsheet's "CSV UTF-8") is dropped."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise error(_too_big(path, f"{size:,} bytes", what, limit, env))
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder; expected {what}") from None
    except OSError as e:
        raise error(f"{path}: cannot read it: {e.strerror or e}") from None
    if len(data) > limit:  # a pipe or a special file whose size is not known in advance
        raise error(_too_big(path, "more bytes", what, limit, env))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(
            f"{path}:{line}: byte {data[e.start]:#04x} at column {column} is not UTF-8; {what} is UTF-8 "
            'text: save it as UTF-8 (a spreadsheet\'s "CSV UTF-8"), or convert it, e.g. '
            f"`iconv -f latin1 -t utf-8 {path.name}`"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _too_big(path: Path, size: str, what: str, limit: int, env: str) -> str:
    return (
        f"{path}: the file is {size}, more than the {limit:,} bytes ({_mib(limit)}) {what} may be; "
        f"real ones are far smaller, so is it the right file? To read it anyway, raise the limit: "
        f"{env}=<MiB> (e.g. {env}={max(1, math.ceil(2 * limit / MIB))})"
    )


_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


def csv_table(
    text: str, path: str | os.PathLike[str], *, what: str = "a CSV file", header_hint: str = "", error: ErrorType = DataFileError
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, rows) of CSV ``text`` read from ``path``: the header's cells stripped, and every
    non-blank data row as (its line, its cells), each row as wide as the header.

    Refused: an empty file (``header_hint`` says what the header should name), a row with
    more or fewer cells than the header (naming the line and the first extra or missing
    column, and a decimal comma where that is the likely cause), and what the csv module
    cannot read (a NUL byte, a cell past its size limit), naming the line."""
    path = Path(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None or not any(c.strip() for c in header):
            raise error(f"{path}:1: the file is empty; expected a header row" + (f" naming {header_hint}" if header_hint else ""))
        header = [h.strip() for h in header]
        rows: list[tuple[int, list[str]]] = []
        start = reader.line_num + 1
        for cells in reader:
            line = start
            start = reader.line_num + 1
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise error(width_problem(path, line, header, cells))
            rows.append((line, cells))
    except csv.Error as e:
        raise error(f"{path}:{reader.line_num}: {what} cannot be read as CSV there ({e}); fix or remove that line") from None
    return header, rows


def width_problem(path: Path, line: int, header: list[str], cells: list[str]) -> str:
    """What is wrong with a row of ``len(cells)`` cells under ``header``: the first missing or extra column."""
    if len(cells) < len(header):
        return (
            f"{path}:{line}: column {header[len(cells)]!r} is missing: the row has {len(cells)} of the "
            f"header's {len(header)} cells; fill it in or remove the row"
        )
    hint = ""
    for i in reversed(range(len(cells) - 1)):  # the last such pair: values usually end a row
        pair = f"{cells[i].strip()},{cells[i + 1].strip()}"
        if _DECIMAL_COMMA.fullmatch(pair):
            hint = (
                f"; {pair!r} looks like a number written with a decimal comma: write {pair.replace(',', '.')!r} "
                "(a CSV number has a decimal point)"
            )
            break
    return (
        f"{path}:{line}: the row has {len(cells)} cells but the header names {len(header)} columns "
        f"({', '.join(header)}): cell {len(header) + 1} ({cells[len(header)].strip()!r}) is extra{hint}"
    )


def json_document(text: str, path: str | os.PathLike[str], *, max_depth: int = 32, error: ErrorType = DataFileError) -> Any:
    """The JSON value of ``text`` read from ``path``; refused when its arrays and objects nest more
    than ``max_depth`` deep (found without recursion, naming the line) or when it is not JSON
    (naming line and column)."""
    path = Path(path)
    depth = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                line = text.count("\n", 0, m.start()) + 1
                raise error(
                    f"{path}:{line}: arrays and objects nest more than {max_depth} deep here; this file nests at most {max_depth} levels"
                )
        elif c in "]}":
            depth -= 1
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    except RecursionError:  # unreachable after the scan above; kept so that no shape is a traceback
        raise error(f"{path}: arrays and objects nest too deep; this file nests at most {max_depth} levels") from None
    except ValueError as e:  # an integer of thousands of digits
        raise error(f"{path}: not valid JSON here ({e})") from None


def _show(value: float) -> str:
    try:
        return f"{value:g}"
    except OverflowError:  # an integer past any float
        return "a number of more than 300 digits"


def check_range(
    value: float,
    where: str,
    *,
    high: float | None = None,
    low: float | None = None,
    unit: str = "",
    what: str = "a value",
    error: ErrorType = DataFileError,
) -> float:
    """``value`` when ``low <= value <= high`` (each bound optional), else ``error`` naming the bound:
    ``where`` begins the message (``file.csv:12: column 'time'``), ``unit`` follows the numbers,
    ``what`` is the quantity (for "the most ``what`` can plausibly be")."""
    u = f" {unit}" if unit else ""
    if high is not None and value > high:
        raise error(
            f"{where}: {_show(value)}{u} is above {high:g}{u}, the most {what} can plausibly be; is the unit right, or the value a typo?"
        )
    if low is not None and value < low:
        raise error(
            f"{where}: {_show(value)}{u} is below {low:g}{u}, the least {what} can plausibly be; is the unit right, or the value a typo?"
        )
    return value


def parse_number(
    text: str | None,
    where: str,
    *,
    integer: bool = False,
    nan_ok: bool = False,
    high: float | None = None,
    low: float | None = None,
    unit: str = "",
    what: str = "a value",
    error: ErrorType = DataFileError,
) -> float:
    """The number written ``text`` in a data file (``where`` begins every message: file, line, column).

    Refused: empty, NaN (unless ``nan_ok``: then NaN is returned for either), not a number (a
    decimal comma named as such), infinite, not whole when ``integer``, and outside
    [``low``, ``high``] (:func:`check_range`)."""
    text = (text or "").strip()
    if text == "" or text.lower() == "nan":
        if nan_ok:
            return math.nan
        raise error(f"{where} is {'empty' if text == '' else 'NaN'}; every row needs a number there")
    try:
        value = float(text)
    except ValueError:
        if _DECIMAL_COMMA.fullmatch(text):
            raise error(
                f"{where}: {text!r} is written with a decimal comma; write {text.replace(',', '.')!r} "
                "(a number in a data file has a decimal point)"
            ) from None
        raise error(f"{where}: {text!r} is not a number") from None
    if math.isnan(value):
        if nan_ok:
            return value
        raise error(f"{where} is NaN; every row needs a number there")
    if math.isinf(value):
        raise error(f"{where}: {text!r} is infinite; give a finite number")
    if integer and value != int(value):
        raise error(f"{where}: {text!r} is not a whole number")
    return check_range(value, where, high=high, low=low, unit=unit, what=what, error=error)


__all__ = [
    "DataFileError",
    "data_limit",
    "read_data_text",
    "csv_table",
    "width_problem",
    "json_document",
    "check_range",
    "parse_number",
    "MIB",
]
