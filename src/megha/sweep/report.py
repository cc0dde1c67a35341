"""A static HTML report of a sweep: tables and plots in one file that opens from disk (no server).

The page comes from a Jinja2 template (``templates/report.html.j2``); the figures from the shared plotting module
(:mod:`megha.metrics.plots`), embedded as base64 PNG ``data:`` URLs, so nothing is fetched; every number goes through
the shared formatter (:mod:`megha.metrics.format`). A run *group* is the set of runs that differ only by ``seed``.

* percentile-vs-parameter panels (the Megha paper's Figs. 8/9 style), one panel per percentile (p50, p90, p99) of
  allocation time and of delay, log y axis: a categorical parameter (e.g. the scheduler) gets one point per value
  at the median over seeds with an inter-quartile error bar and nothing joining the categories; a numeric one gets
  lines through the medians, with the same error bars;
* delay in job response time and allocation time (task start − arrival): CDFs per group (seeds pooled), log x;
* utilization: over time per group, and the mean per group;
* a summary table per group (medians over seeds) and the full results table (``results.csv``), failures first.

``megha sweep report DIR`` rebuilds it from a sweep directory.
"""

from __future__ import annotations

import base64
import json
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from megha.metrics import plots
from megha.metrics.format import cell, kind_of
from megha.sweep.aggregate import collect
from megha.sweep.spec import load_plans, param_names

if TYPE_CHECKING:
    import jinja2

MAX_CURVES = 8
MAX_GROUPS_PLOTTED = 48  # CDF and utilization figures show at most this many groups (the tables have them all)
MAX_LINES = 6  # line sets per percentile panel
MAX_VALUES = 200_000
PCTS = ("p50", "p90", "p99")


@dataclass
class Figure:
    title: str
    caption: str
    png: bytes
    kind: str

    @property
    def b64(self) -> str:
        """The PNG as base64 text (for an inline ``<img>``)."""
        return base64.b64encode(self.png).decode("ascii")


@dataclass
class Group:
    label: str
    key: tuple
    rows: list[dict[str, Any]] = field(default_factory=list)


def _fmt(v: Any, column: str = "") -> str:
    return cell(v, kind_of(column) if column else None)


def _subsample(v: np.ndarray) -> np.ndarray:
    v = v[np.isfinite(v)]
    if v.size > MAX_VALUES:
        v = v[:: math.ceil(v.size / MAX_VALUES)]
    return v


def _read_col(path: Path, col: str, where: str | None = None) -> np.ndarray:
    import pyarrow.parquet as pq

    if not path.is_file():
        return np.zeros(0)
    cols = [col] if where is None else [col, where]
    t = pq.read_table(str(path), columns=cols)
    v = t.column(col).to_numpy(zero_copy_only=False).astype(np.float64)
    if where is not None:
        v = v[t.column(where).to_numpy(zero_copy_only=False).astype(bool)]
    return _subsample(v)


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, list | dict) else v


def _determines(rows: list[dict[str, Any]], x: str, y: str) -> bool:
    """Each value of parameter ``x`` comes with a single value of ``y`` in these runs."""
    seen: dict[Any, Any] = {}
    for r in rows:
        a, b = _hashable(r.get(x)), _hashable(r.get(y))
        if seen.setdefault(a, b) != b:
            return False
    return True


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _label_keys(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """The keys worth showing in labels: a parameter derived from an earlier one (e.g. a cost computed from the
    datacenter size) is left out."""
    out: list[str] = []
    for k in keys:
        if not any(_determines(rows, o, k) for o in out):
            out.append(k)
    return out


def _value_label(v: Any) -> str:
    if isinstance(v, str) and v.startswith("sample:"):
        return v[len("sample:") :]
    return _fmt(v)


def _groups(rows: list[dict[str, Any]], keys: list[str]) -> list[Group]:
    out: OrderedDict[tuple, Group] = OrderedDict()
    shown = _label_keys(rows, keys)
    for r in rows:
        key = tuple(_hashable(r.get(k)) for k in keys)
        if key not in out:
            label = ", ".join(f"{k.removeprefix('options.')}={_value_label(r.get(k))}" for k in shown)
            out[key] = Group(label or "all runs", key)
        out[key].rows.append(r)
    return list(out.values())


def _cdf_figures(groups: list[Group], out: Path, what: str) -> list[Figure]:
    if what == "delay":
        title, xlabel = "Delay in job response time", "delay (s)"
    else:
        title, xlabel = "Allocation time (task start − arrival)", "allocation time (s)"
    figs = []
    for lo in range(0, len(groups), MAX_CURVES):
        chunk = groups[lo : lo + MAX_CURVES]
        series = {}
        for g in chunk:
            vals = []
            for r in g.rows:
                d = out / "runs" / r["run_id"]
                if what == "delay":
                    vals.append(_read_col(d / "jobs.parquet", "delay"))
                else:
                    vals.append(_read_col(d / "tasks.parquet", "allocation", "feasible"))
            series[g.label] = np.concatenate(vals) if vals else np.zeros(0)
        part = f" ({lo // MAX_CURVES + 1})" if len(groups) > MAX_CURVES else ""
        fig, ax = plots.new_figure(8.0, 4.6)
        if not plots.draw_cdfs(ax, series, xlabel=xlabel, title=title + part, max_points=1000):
            continue
        figs.append(Figure(title + part, "seeds pooled within each group", plots.png(fig), f"cdf-{what}"))
    return figs


def _percentile_figures(rows: list[dict[str, Any]], keys: list[str]) -> list[Figure]:
    figs = []
    ok_rows = [r for r in rows if r["status"] in ("ok", "unfinished")]
    plotted: list[str] = []
    for x in keys:
        xs: list[Any] = []
        for r in ok_rows:
            if r.get(x) not in xs:
                xs.append(r.get(x))
        if len(xs) < 2:
            continue
        if any(_determines(ok_rows, x, p) and _determines(ok_rows, p, x) for p in plotted):
            continue  # an alias of a parameter already plotted (e.g. an option that only one scheduler has)
        numeric = all(_is_number(v) for v in xs)
        if numeric:
            xs = sorted(xs)
        others = [k for k in keys if k != x and not _determines(ok_rows, x, k)]
        lines = _groups(ok_rows, others)
        if not any(len({_hashable(r.get(x)) for r in g.rows}) >= 2 for g in lines):
            continue
        plotted.append(x)
        if len(lines) > MAX_LINES:  # too many combinations: one line set per value of the first other parameter
            lines = _groups(ok_rows, others[:1])[:MAX_LINES]
        xname = x.removeprefix("options.")
        seeds = max(len(g.rows) for g in lines) > len(xs)
        for metric, label in (("alloc", "allocation time"), ("delay", "delay in job response time")):
            fig, axes = plots.new_panels(len(PCTS), width=4.0, height=4.0)
            drawn = 0
            for ax, pct in zip(axes, PCTS, strict=True):
                series: dict[str, list[list[float]]] = {}
                for g in lines:
                    name = "all runs" if len(lines) == 1 else g.label
                    series[name] = [
                        [r.get(f"{metric}_{pct}") for r in g.rows if _hashable(r.get(x)) == _hashable(xv)] for xv in xs
                    ]
                ylabel = f"{label} (s)" if ax is axes[0] else ""
                if numeric:
                    drawn += plots.draw_lines(ax, xs, series, ylabel=ylabel, xlabel=xname, legend=False)
                else:
                    cats = [_value_label(v) for v in xs]
                    drawn += plots.draw_points(ax, cats, series, ylabel=ylabel, xlabel=xname, legend=False)
                ax.set_title(pct)
            if not drawn:
                continue
            if len(lines) > 1:
                plots.figure_legend(fig, axes[0])
            title = f"{label.capitalize()} percentiles vs {xname}"
            fig.suptitle(title)
            cap = "median over seeds, bars: inter-quartile range over seeds" if seeds else ""
            figs.append(Figure(title, cap, plots.png(fig), f"pct-{metric}"))
    return figs


def _utilization_figures(groups: list[Group], out: Path) -> list[Figure]:
    import pyarrow.parquet as pq

    figs = []
    for lo in range(0, len(groups), MAX_CURVES):
        chunk = groups[lo : lo + MAX_CURVES]
        fig, ax = plots.new_figure(8.0, 4.2)
        drawn = False
        for g in chunk:
            p = out / "runs" / g.rows[0]["run_id"] / "utilization.parquet"
            if not p.is_file():
                continue
            t = pq.read_table(str(p))
            times = t.column("time").to_numpy()
            util = t.column("utilization").to_numpy()
            if times.size == 0:
                continue
            ax.step(times - times[0], 100 * util, where="post", label=g.label, linewidth=1)
            drawn = True
        if not drawn:
            continue
        ax.set_xlabel("time since the first task started (s)")
        ax.set_ylabel("utilization (%)")
        ax.grid(True, alpha=0.3)
        plots.legend(ax)
        part = f" ({lo // MAX_CURVES + 1})" if len(groups) > MAX_CURVES else ""
        ax.set_title("Utilization over time" + part)
        figs.append(Figure("Utilization over time" + part, "first seed of each group", plots.png(fig), "util-time"))
    means = [
        (g.label, [r.get("utilization_mean") for r in g.rows if r.get("utilization_mean") is not None]) for g in groups
    ]
    means = [(lab, v) for lab, v in means if v]
    if means:
        fig, ax = plots.new_figure(8.0, 1.0 + 0.35 * len(means))
        y = np.arange(len(means))
        ax.barh(y, [100 * float(np.median(v)) for _, v in means], color="#4c72b0")
        ax.set_yticks(y, [lab for lab, _ in means], fontsize=plots.LEGEND_SIZE)
        ax.invert_yaxis()
        ax.set_xlabel("mean utilization (%)")
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_title("Mean utilization per group")
        figs.append(
            Figure("Mean utilization per group", "time-weighted mean, median over seeds", plots.png(fig), "util-mean")
        )
    return figs


def _table(rows: list[dict[str, Any]], cols: list[str], link: bool = False, cls: str = "") -> dict[str, Any]:
    """A table for the template: header and, per row, cells with text, CSS class and link."""
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            css = f"st-{v}" if c == "status" else ("num" if _is_number(v) else "")
            href = f"runs/{v}/" if link and c == "run_id" and v else None
            cells.append(
                {
                    "text": _fmt(v, c) if c not in ("index", "seed", "workers", "n_workers") else _fmt(v),
                    "cls": css,
                    "href": href,
                }
            )
        body.append(cells)
    return {"columns": cols, "rows": body, "cls": cls}


def _group_rows(groups: list[Group]) -> list[dict[str, Any]]:
    out = []
    for g in groups:
        ok = [r for r in g.rows if r["status"] in ("ok", "unfinished")]
        row: dict[str, Any] = {"group": g.label, "runs": len(g.rows), "ok": sum(r["status"] == "ok" for r in g.rows)}
        for k in ("alloc_p50", "alloc_p99", "delay_p50", "delay_p99", "delay_max", "utilization_mean"):
            vals = [r.get(k) for r in ok if r.get(k) is not None]
            row[k] = float(np.median(vals)) if vals else None
        out.append(row)
    return out


def _template() -> jinja2.Template:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("megha.sweep", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("report.html.j2")


def build_report(out: str | Path, title: str | None = None) -> Path:
    """Write ``report.html`` for a sweep directory; returns its path."""
    out = Path(out)
    doc, plans = load_plans(out)
    rows = collect(out, plans)
    params = param_names(plans)
    keys = [k for k in params if k != "seed"]
    done = [r for r in rows if r["status"] in ("ok", "unfinished")]
    groups = _groups(done, keys)
    figures: list[Figure] = []
    if done:
        shown = groups[:MAX_GROUPS_PLOTTED]
        figures += _percentile_figures(rows, keys)
        figures += _cdf_figures(shown, out, "alloc")
        figures += _cdf_figures(shown, out, "delay")
        figures += _utilization_figures(shown, out)
    sections = []
    for heading, prefix, note in (
        ("Percentiles vs parameters", "pct-", "log scale; points: median over seeds; bars: inter-quartile range"),
        ("Allocation time and delay CDFs", "cdf-", "log scale"),
        ("Utilization", "util-", ""),
    ):
        figs = [f for f in figures if f.kind.startswith(prefix)]
        if figs:
            sections.append({"heading": heading, "prefix": prefix, "note": note, "figures": figs})
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    failed = [r for r in rows if r["status"] == "failed"]
    group_rows = _group_rows(groups)
    page = _template().render(
        name=title or doc.get("name", out.name),
        counts={
            "total": len(rows),
            **{s: sum(r["status"] == s for r in rows) for s in ("ok", "unfinished", "failed", "missing")},
        },
        params=params,
        failed=_table(failed, ["index", "run_id", *params, "error"], link=True) if failed else None,
        too_many_groups=len(groups) > MAX_GROUPS_PLOTTED,
        n_groups=len(groups),
        max_groups=MAX_GROUPS_PLOTTED,
        groups=_table(group_rows, list(group_rows[0])) if group_rows else None,
        sections=sections,
        results=_table(rows, cols, link=True, cls="results"),
        definition=json.dumps(doc.get("spec", {}), indent=1, default=str),
    )
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
