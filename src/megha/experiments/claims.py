"""The papers' claims, checked: what each reproduction says the paper claims, what we measured, and whether it holds.

Every experiment of ``megha reproduce`` registers a function ``claims(doc, ctx) -> list[Claim]`` that reads the
document the experiment returned (the same one saved as ``summary.json``) and states, for each claim the paper
makes for that figure: the claim in words, the paper's value, the measured value, the tolerance, whether it holds,
and — when it does not — why. A claim that does not hold is reported with its explanation, never dropped.
``holds`` is ``None`` when the run could not measure it (for instance a ``--quick`` run without that load level).

The builders below (:func:`at_least`, :func:`at_most`, :func:`within_factor`, :func:`within_pct`, :func:`is_true`)
turn a measured number into a :class:`Claim`; :func:`render_table` and :func:`markdown_table` print many.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from megha.metrics import format as F


@dataclass
class Claim:
    """One claim of a paper for one figure, with our measurement."""

    id: str
    figure: str
    claim: str
    paper: str
    measured: str
    tolerance: str
    holds: bool | None
    explanation: str = ""
    value: float | bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The claim as a JSON-ready dict (a non-finite value as None)."""
        d = asdict(self)
        if isinstance(self.value, float) and not math.isfinite(self.value):
            d["value"] = None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Claim:
        """The claim written by :meth:`to_dict` (unknown keys ignored)."""
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


# --- formatting (megha.metrics.format, the project's one formatter) ------------------------------------------------
MISSING = F.MISSING


def fmt_seconds(x: float | None) -> str:
    """A duration in the unit that reads best (1.5 ms, 12.3 s, 23.6 min)."""
    return F.duration(_num(x))


def fmt_ratio(x: float | None) -> str:
    """A ratio: ``13.9×``."""
    v = _num(x)
    return MISSING if v is None else f"{F.number(v)}×"


def fmt_pct(x: float | None) -> str:
    """A value already in per cent: ``21 %``."""
    v = _num(x)
    return MISSING if v is None else f"{F.number(v, 2)} %"


def fmt_number(x: float | None) -> str:
    """A number as text (the project's formatter; missing when not a finite number)."""
    return F.number(_num(x))


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def ratio(a: Any, b: Any) -> float | None:
    """``a / b``, or None when either is missing or ``b`` is not positive."""
    a, b = _num(a), _num(b)
    if a is None or b is None or b <= 0:
        return None
    return a / b


# --- builders ----------------------------------------------------------------------------------------------------
NOT_MEASURED = "not measured in this run"


def _finish(c: Claim, why_not: str, note: str) -> Claim:
    """Explanation: why the claim does not hold (``why_not``), or that it was not measured; ``note`` is appended."""
    if c.holds is False:
        c.explanation = why_not or "no explanation recorded: a gap to investigate"
    elif c.holds is None:
        c.explanation = NOT_MEASURED
    if note:
        c.explanation = f"{c.explanation} {note}".strip()
    return c


def at_least(
    id: str,
    figure: str,
    claim: str,
    measured: Any,
    bound: float,
    *,
    paper: str,
    fmt: Callable[[float | None], str] = fmt_ratio,
    why_not: str = "",
    note: str = "",
) -> Claim:
    """Holds when ``measured >= bound``."""
    v = _num(measured)
    c = Claim(id, figure, claim, paper, fmt(v), f"≥ {fmt(bound)}", None if v is None else v >= bound, value=v)
    return _finish(c, why_not, note)


def at_most(
    id: str,
    figure: str,
    claim: str,
    measured: Any,
    bound: float,
    *,
    paper: str,
    fmt: Callable[[float | None], str] = fmt_ratio,
    why_not: str = "",
    note: str = "",
) -> Claim:
    """Holds when ``measured <= bound``."""
    v = _num(measured)
    c = Claim(id, figure, claim, paper, fmt(v), f"≤ {fmt(bound)}", None if v is None else v <= bound, value=v)
    return _finish(c, why_not, note)


def within_factor(
    id: str,
    figure: str,
    claim: str,
    measured: Any,
    paper_value: float,
    factor: float,
    *,
    paper: str | None = None,
    fmt: Callable[[float | None], str] = fmt_seconds,
    why_not: str = "",
    note: str = "",
) -> Claim:
    """Holds when ``paper_value / factor <= measured <= paper_value * factor``."""
    v = _num(measured)
    ok = None if v is None else (paper_value / factor <= v <= paper_value * factor)
    c = Claim(
        id,
        figure,
        claim,
        paper if paper is not None else fmt(paper_value),
        fmt(v),
        f"within {factor:g}× of the paper",
        ok,
        value=v,
    )
    return _finish(c, why_not, note)


def within_pct(
    id: str,
    figure: str,
    claim: str,
    measured: Any,
    paper_value: float,
    pct: float,
    *,
    paper: str | None = None,
    fmt: Callable[[float | None], str] = fmt_seconds,
    why_not: str = "",
    note: str = "",
) -> Claim:
    """Holds when ``measured`` is within ``pct`` % of ``paper_value``."""
    v = _num(measured)
    ok = None if v is None else abs(v - paper_value) <= pct / 100.0 * abs(paper_value)
    c = Claim(
        id,
        figure,
        claim,
        paper if paper is not None else fmt(paper_value),
        fmt(v),
        f"within {pct:g} % of the paper",
        ok,
        value=v,
    )
    return _finish(c, why_not, note)


def is_true(
    id: str,
    figure: str,
    claim: str,
    measured: bool | None,
    *,
    paper: str,
    measured_text: str | None = None,
    tolerance: str = "as stated",
    why_not: str = "",
    note: str = "",
) -> Claim:
    """Holds when ``measured`` is true (a qualitative claim); ``measured_text`` says what was seen."""
    m = None if measured is None else bool(measured)
    text = measured_text if measured_text is not None else (MISSING if m is None else ("yes" if m else "no"))
    return _finish(Claim(id, figure, claim, paper, text, tolerance, m, value=m), why_not, note)


# --- summaries and tables ----------------------------------------------------------------------------------------
def verdict(holds: bool | None) -> str:
    """The word for a claim's outcome: holds, does not hold, not measured."""
    return {True: "holds", False: "does not hold", None: "not measured"}[holds]


def tally(claims: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many claims hold, do not hold, or were not measured."""
    out = {"claims": 0, "hold": 0, "do_not_hold": 0, "not_measured": 0}
    for c in claims:
        out["claims"] += 1
        key = {True: "hold", False: "do_not_hold", None: "not_measured"}[c.get("holds")]
        out[key] += 1
    return out


COLUMNS = ("experiment", "figure", "claim", "paper", "measured", "tolerance", "verdict")


def rows(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows (one per claim) of ``{experiment id: summary document}``; an experiment that failed has an
    ``error`` and gives one row saying so."""
    out = []
    for exp_id, doc in results.items():
        if doc.get("error"):
            out.append(
                {
                    "experiment": exp_id,
                    "figure": "",
                    "claim": "(the experiment failed)",
                    "paper": "",
                    "measured": "",
                    "tolerance": "",
                    "verdict": "error",
                    "holds": None,
                    "explanation": doc["error"],
                    "quick": doc.get("quick"),
                }
            )
            continue
        for c in doc.get("claims", []):
            out.append({"experiment": exp_id, **c, "verdict": verdict(c.get("holds")), "quick": doc.get("quick")})
    return out


def render_table(results: dict[str, dict[str, Any]], title: str = "claims") -> tuple[Any, list[str]]:
    """A rich Table of every claim, and the numbered explanations of those that do not hold (printed under it)."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, show_lines=False)
    for col in COLUMNS:
        t.add_column(
            "" if col == "verdict" else col, overflow="fold", no_wrap=col in ("experiment", "verdict", "figure")
        )
    notes: list[str] = []
    for r in rows(results):
        mark = {"holds": "[green]holds[/]", "does not hold": "[red]does not hold[/]", "error": "[red]error[/]"}.get(
            r["verdict"], "[yellow]not measured[/]"
        )
        k = _note(notes, r)
        if k:
            mark += f" \\[{k}]"
        t.add_row(*(str(r.get(c) or "") for c in COLUMNS[:-1]), mark)
    return t, notes


def _note(notes: list[str], r: dict[str, Any]) -> int:
    """The number of the row's explanation among ``notes`` (added when new; identical ones shared), 0 if none."""
    if r["verdict"] not in ("does not hold", "error", "not measured") or not r.get("explanation"):
        return 0
    if r["explanation"] not in notes:
        notes.append(r["explanation"])
    return notes.index(r["explanation"]) + 1


def _md(s: Any) -> str:
    return str(s if s is not None else "").replace("|", "\\|").replace("\n", " ")


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    """The claims as a Markdown table, explanations of the claims that do not hold as numbered notes below."""
    lines = [
        "| experiment | figure | claim | paper | measured | tolerance | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes: list[str] = []
    for r in rows(results):
        v = r["verdict"]
        k = _note(notes, r)
        if k:
            v = f"{v} ({k})"
        exp = f"`{r['experiment']}`" + (" (quick)" if r.get("quick") else "")
        lines.append(
            "| "
            + " | ".join(_md(x) for x in (exp, r["figure"], r["claim"], r["paper"], r["measured"], r["tolerance"], v))
            + " |"
        )
    t = tally(c for doc in results.values() for c in doc.get("claims", []))
    lines.append("")
    lines.append(
        f"{t['claims']} claims: {t['hold']} hold, {t['do_not_hold']} do not hold, {t['not_measured']} not measured."
    )
    if notes:
        lines.append("")
        lines += [f"{i}. {_md(n)}" for i, n in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"


BEGIN = "<!-- claims:begin (generated by `megha reproduce --check --markdown`) -->"
END = "<!-- claims:end -->"


def splice(text: str, table: str) -> str:
    """Replace what lies between the :data:`BEGIN` and :data:`END` markers of ``text`` by ``table``."""
    i = text.find(BEGIN[: BEGIN.index(" (")])
    j = text.find(END)
    if i < 0 or j < i:
        raise ValueError(f"no {BEGIN!r} ... {END!r} markers")
    return text[:i] + BEGIN + "\n\n" + table + "\n" + text[j:]
