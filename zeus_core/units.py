"""Figures in human units, for what a person reads: the one formatter the CLI and the reports share.

The files (``recurrences.csv``, ``summary.json``) keep exact figures in SI base units (joules,
seconds, grams); what is printed for a person is rounded to three significant digits in the
unit that suits its size (``4.45 MJ (1.24 kWh)``, ``10.5 h``, ``1.23 kgCO2eq``), so that a
result reads at a glance and the exact number is always one file away.
"""

from __future__ import annotations

import math

#: Joules in a kilowatt-hour.
J_PER_KWH = 3.6e6

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def significant(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, with thousands separators and no exponent (``1,240``, ``0.0123``)."""
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    if round(abs(x), digits - 1 - magnitude) >= 10 ** (magnitude + 1):  # 0.99996 rounds to 1.00, not 1.000
        magnitude += 1
    decimals = max(0, digits - 1 - magnitude)
    text = f"{round(x, decimals):,.{decimals}f}"
    return "0" if text.strip("-0.,") == "" else text  # never "-0"


def si(x: float, unit: str) -> str:
    """``x`` (in ``unit``) with the SI prefix that keeps it between 1 and 1000 (``4.45 MJ``, ``512 J``)."""
    for factor, prefix in _SI:
        if abs(x) >= factor * 0.9995:  # what rounds to 1000 goes up a prefix
            return f"{significant(x / factor)} {prefix}{unit}"
    return f"{significant(x)} {unit}"


def energy(joules: float) -> str:
    """Energy: J, kJ, MJ, GJ, with kilowatt-hours beside from 0.1 kWh on (``4.45 MJ (1.24 kWh)``)."""
    text = si(joules, "J")
    kwh = joules / J_PER_KWH
    if abs(kwh) >= 0.1:
        text += f" ({significant(kwh / 1000)} MWh)" if abs(kwh) >= 999.5 else f" ({significant(kwh)} kWh)"
    return text


def duration(seconds: float) -> str:
    """Time: s, min, h, then days (``42.1 s``, ``12.5 min``, ``10.5 h``, ``123 days``)."""
    for limit, size, unit in ((59.95, 1.0, "s"), (3597.0, 60.0, "min"), (2 * 86400.0, 3600.0, "h")):
        if abs(seconds) < limit:
            return f"{significant(seconds / size)} {unit}"
    return f"{significant(seconds / 86400.0)} days"


def carbon(grams: float) -> str:
    """Emissions: gCO2eq, kgCO2eq, tCO2eq."""
    if abs(grams) >= 999.5e3:
        return f"{significant(grams / 1e6)} tCO2eq"
    if abs(grams) >= 999.5:
        return f"{significant(grams / 1e3)} kgCO2eq"
    return f"{significant(grams)} gCO2eq"


def money(amount: float, currency: str) -> str:
    """Money to the cent: ``12.34 EUR``."""
    return f"{amount:,.2f} {currency.upper()}"


def percent(fraction: float) -> str:
    """A fraction as a percentage to a tenth: ``57.4 %``."""
    return f"{100 * fraction:.1f} %"


__all__ = ["J_PER_KWH", "significant", "si", "energy", "duration", "carbon", "money", "percent"]
