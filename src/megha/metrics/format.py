"""Numbers people read at a glance: one formatter for durations, percentages, counts and plain numbers, used by
every table and report (the CLI tables, ``megha trace info``, the sweep report, the experiments' markdown tables).

Rules: never scientific notation; three significant digits unless asked otherwise; thousands separators;
durations pick the unit that keeps the number between 1 and 1,000 (µs, ms, s, min, h); utilization and other
fractions print as percentages; a missing value (None, NaN) prints as an em dash.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

MISSING = "—"

_UNITS = (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("µs", 1e-6))


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def number(x: Any, digits: int = 3) -> str:
    """A plain number in fixed notation with ``digits`` significant digits (whole numbers exactly):
    ``1040.3 -> '1,040'``, ``0.0015 -> '0.0015'``, ``12 -> '12'``, ``1.5e6 -> '1,500,000'``."""
    if _missing(x):
        return MISSING
    if hasattr(x, "item") and not isinstance(x, int | float):  # numpy scalars
        x = x.item()
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}"
    x = float(x)
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    rounded = round(x, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > mag:  # 9.996 -> 10.0: one decimal fewer
        decimals = max(0, decimals - 1)
    text = f"{x:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def duration(seconds: Any, digits: int = 3) -> str:
    """A duration in the unit that reads best: ``0.0015 -> '1.5 ms'``, ``12.3 -> '12.3 s'``,
    ``5400 -> '1.5 h'``, ``2e-6 -> '2 µs'``; ``0 -> '0 s'``; None/NaN -> '—'."""
    if _missing(seconds):
        return MISSING
    s = float(seconds)
    if math.isinf(s):
        return "∞" if s > 0 else "-∞"
    if s == 0:
        return "0 s"
    a = abs(s)
    for unit, scale in _UNITS:
        if a >= scale * (1 - 0.5 * 10 ** (1 - digits)) or unit == "µs":
            # 59.99 s rounds to "60 s": keep it (a unit change at the rounding edge would read "1 min")
            return f"{number(s / scale, digits)} {unit}"
    raise AssertionError("unreachable")


def percent(fraction: Any, digits: int = 1) -> str:
    """A fraction as a percentage with ``digits`` decimals: ``0.1234 -> '12.3 %'``."""
    if _missing(fraction):
        return MISSING
    return f"{100.0 * float(fraction):.{digits}f} %"


def count(n: Any) -> str:
    """A whole number with thousands separators."""
    if _missing(n):
        return MISSING
    return f"{int(n):,}"


def cell(value: Any, kind: str | None = None) -> str:
    """One table cell. ``kind``: ``'duration'`` (seconds), ``'percent'`` (a fraction), ``'count'``, or None to
    guess from the value (bool, int, float, text)."""
    if kind == "duration":
        return duration(value)
    if kind == "percent":
        return percent(value)
    if kind == "count":
        return count(value)
    if _missing(value):
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    if hasattr(value, "item") and not isinstance(value, int | float | str):  # numpy scalars
        value = value.item()
    if isinstance(value, int | float):
        return number(value)
    return str(value)


def kind_of(column: str) -> str | None:
    """The display kind of a result column by its name (delay/allocation/seconds columns are durations,
    utilization columns fractions)."""
    c = column.lower()
    if "util" in c:
        return "percent"
    if c.startswith(("delay", "alloc", "allocation", "makespan", "wall", "span")) or c.endswith(
        ("_seconds", "_s", "seconds", "duration", "_p50", "_p90", "_p99", "_p999", "_mean", "_max", "latency")
    ):
        return "duration"
    return None


def markdown_table(
    rows: Sequence[dict[str, Any]] | Sequence[Sequence[Any]],
    columns: Sequence[str] | None = None,
    kinds: dict[str, str | None] | None = None,
    float_kind: str | None = None,
) -> str:
    """A GitHub-flavoured markdown table. ``rows`` are dicts (``columns`` default: every key, first-seen order) or
    sequences (``columns`` then names them). Cells go through :func:`cell` with ``kinds[column]``; a float in a
    column without a kind gets ``float_kind`` (e.g. ``'duration'`` when every float of the table is seconds)."""
    kinds = kinds or {}
    if columns is None:
        cols: list[str] = []
        for r in rows:
            for k in r:  # type: ignore[union-attr]
                if k not in cols:
                    cols.append(k)
        columns = cols
    lines = ["| " + " | ".join(str(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        vals: Iterable[Any] = (r.get(c) for c in columns) if isinstance(r, dict) else r
        cells = [
            cell(v, kinds.get(c, float_kind if isinstance(v, float) else None)).replace("|", "\\|")
            for c, v in zip(columns, vals, strict=False)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
