"""A static HTML report of a sweep: tables and plots in one file that opens from disk (no server).

Plots are PNG images embedded as base64 ``data:`` URLs; nothing is fetched. A run *group* is the set of runs
that differ only by ``seed`` (seeds are pooled in CDFs and averaged in percentile lines, with a min–max band).

* delay in job response time and allocation time (task start − arrival): CDFs per group, log x axis;
* percentile-vs-parameter lines (the Megha paper's Figs. 8/9 style): for each varying parameter, the p50,
  p90 and p99 of allocation time and of delay against its values, one line set per combination of the other
  parameters;
* utilization: over time per group, and the mean per group;
* a summary table per group and the full results table (``results.csv``), failures with their errors.

``megha sweep report DIR`` rebuilds it from a sweep directory.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from megha.sweep.aggregate import collect
from megha.sweep.spec import load_plans, param_names

MAX_CURVES = 8
MAX_GROUPS_PLOTTED = 48  # CDF and utilization figures show at most this many groups (the tables have them all)
MAX_VALUES = 200_000
PCTS = (("p50", "-", "o"), ("p90", "--", "s"), ("p99", ":", "^"))


@dataclass
class Figure:
    title: str
    caption: str
    png: bytes
    kind: str


@dataclass
class Group:
    label: str
    key: tuple
    rows: list[dict[str, Any]] = field(default_factory=list)


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v == 0:
            return "0"
        a = abs(v)
        if a >= 1e5 or a < 1e-3:
            return f"{v:.3g}"
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    return str(v)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    _plt().close(fig)
    return buf.getvalue()


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


def _label_keys(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """The keys worth showing in labels: a parameter derived from an earlier one (e.g. a cost computed from the
    datacenter size) is left out."""
    out: list[str] = []
    for k in keys:
        if not any(_determines(rows, o, k) for o in out):
            out.append(k)
    return out


def _groups(rows: list[dict[str, Any]], keys: list[str]) -> list[Group]:
    out: OrderedDict[tuple, Group] = OrderedDict()
    shown = _label_keys(rows, keys)
    for r in rows:
        key = tuple(_hashable(r.get(k)) for k in keys)
        if key not in out:
            label = ", ".join(f"{k.removeprefix('options.')}={_fmt(r.get(k))}" for k in shown)
            out[key] = Group(label or "all runs", key)
        out[key].rows.append(r)
    return list(out.values())


def _ecdf_plot(ax, values: np.ndarray, label: str) -> bool:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return False
    q = np.linspace(0.0, 1.0, min(v.size, 1000))
    x = np.maximum(np.quantile(v, q), 1e-6)
    ax.step(x, q, where="post", label=label)
    return True


def _cdf_figures(groups: list[Group], out: Path, what: str) -> list[Figure]:
    plt = _plt()
    figs = []
    if what == "delay":
        title, xlabel = "Delay in job response time", "delay (s)"
    else:
        title, xlabel = "Allocation time (task start − arrival)", "allocation time (s)"
    for lo in range(0, len(groups), MAX_CURVES):
        chunk = groups[lo : lo + MAX_CURVES]
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
        drawn = 0
        for g in chunk:
            vals = []
            for r in g.rows:
                d = out / "runs" / r["run_id"]
                if what == "delay":
                    vals.append(_read_col(d / "jobs.parquet", "delay"))
                else:
                    vals.append(_read_col(d / "tasks.parquet", "allocation", "feasible"))
            v = np.concatenate(vals) if vals else np.zeros(0)
            drawn += _ecdf_plot(ax, v, g.label)
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CDF")
        ax.set_ylim(0, 1.01)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        part = f" ({lo // MAX_CURVES + 1})" if len(groups) > MAX_CURVES else ""
        ax.set_title(title + part)
        figs.append(Figure(title + part, "seeds pooled within each group", _png(fig), f"cdf-{what}"))
    return figs


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


def _percentile_figures(rows: list[dict[str, Any]], keys: list[str]) -> list[Figure]:
    plt = _plt()
    figs = []
    ok_rows = [r for r in rows if r["status"] in ("ok", "unfinished")]
    plotted: list[str] = []
    for x in keys:
        xs = []
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
        if len(lines) > 6:  # too many combinations: one line set per value of the first other parameter
            lines = _groups(ok_rows, others[:1])[:6]
        for metric, label in (("alloc", "allocation time"), ("delay", "delay in job response time")):
            fig, ax = plt.subplots(figsize=(7.5, 4.4))
            colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
            any_drawn = False
            for li, g in enumerate(lines):
                color = colors[li % len(colors)]
                for pct, style, marker in PCTS:
                    pos, mean, lo_, hi_ = [], [], [], []
                    for i, xv in enumerate(xs):
                        vals = [r.get(f"{metric}_{pct}") for r in g.rows if r.get(x) == xv]
                        vals = [v for v in vals if v is not None and math.isfinite(v)]
                        if vals:
                            pos.append(xv if numeric else i)
                            mean.append(float(np.mean(vals)))
                            lo_.append(min(vals))
                            hi_.append(max(vals))
                    if not pos:
                        continue
                    name = pct if len(lines) == 1 else f"{pct} {g.label}"
                    ax.plot(pos, np.maximum(mean, 1e-6), linestyle=style, marker=marker, color=color, label=name)
                    if any(h > lw for h, lw in zip(hi_, lo_, strict=True)):
                        ax.fill_between(pos, np.maximum(lo_, 1e-6), np.maximum(hi_, 1e-6), color=color, alpha=0.12)
                    any_drawn = True
            if not any_drawn:
                plt.close(fig)
                continue
            xname = x.removeprefix("options.")
            if numeric:
                pos_vals = [v for v in xs if v > 0]
                if len(pos_vals) == len(xs) and max(xs) / min(xs) >= 20:
                    ax.set_xscale("log")
            else:
                ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs], rotation=20)
            ax.set_yscale("log")
            ax.set_xlabel(xname)
            ax.set_ylabel(f"{label} (s)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, ncol=1 if len(lines) == 1 else 2)
            title = f"{label.capitalize()} percentiles vs {xname}"
            ax.set_title(title)
            cap = "mean over seeds, band = min–max over seeds" if any(len(g.rows) > len(xs) for g in lines) else ""
            figs.append(Figure(title, cap, _png(fig), f"pct-{metric}"))
    return figs


def _utilization_figures(groups: list[Group], out: Path) -> list[Figure]:
    import pyarrow.parquet as pq

    plt = _plt()
    figs = []
    for lo in range(0, len(groups), MAX_CURVES):
        chunk = groups[lo : lo + MAX_CURVES]
        fig, ax = plt.subplots(figsize=(7.5, 4.0))
        drawn = False
        for g in chunk:
            r = g.rows[0]
            p = out / "runs" / r["run_id"] / "utilization.parquet"
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
            plt.close(fig)
            continue
        ax.set_xlabel("time since the first task started (s)")
        ax.set_ylabel("utilization (%)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        part = f" ({lo // MAX_CURVES + 1})" if len(groups) > MAX_CURVES else ""
        ax.set_title("Utilization over time" + part)
        figs.append(Figure("Utilization over time" + part, "first seed of each group", _png(fig), "util-time"))
    means = [
        (g.label, [r.get("utilization_mean") for r in g.rows if r.get("utilization_mean") is not None]) for g in groups
    ]
    means = [(lab, v) for lab, v in means if v]
    if means:
        fig, ax = plt.subplots(figsize=(7.5, 0.8 + 0.3 * len(means)))
        y = np.arange(len(means))
        ax.barh(y, [100 * float(np.mean(v)) for _, v in means], color="#4c72b0")
        ax.set_yticks(y, [lab for lab, _ in means], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("mean utilization (%)")
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_title("Mean utilization per group")
        figs.append(
            Figure("Mean utilization per group", "time-weighted mean, averaged over seeds", _png(fig), "util-mean")
        )
    return figs


def _table(rows: list[dict[str, Any]], cols: list[str], link: bool = False, cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            text = html.escape(_fmt(v))
            if link and c == "run_id" and v:
                text = f'<a href="runs/{html.escape(str(v))}/">{text}</a>'
            num = " class=num" if _is_number(v) else ""
            status = f' class="st-{html.escape(str(v))}"' if c == "status" else num
            cells.append(f"<td{status}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _group_rows(groups: list[Group]) -> list[dict[str, Any]]:
    out = []
    for g in groups:
        ok = [r for r in g.rows if r["status"] in ("ok", "unfinished")]
        row: dict[str, Any] = {"group": g.label, "runs": len(g.rows), "ok": sum(r["status"] == "ok" for r in g.rows)}
        for k in ("alloc_p50", "alloc_p99", "delay_p50", "delay_p99", "delay_max", "utilization_mean"):
            vals = [r.get(k) for r in ok if r.get(k) is not None]
            row[k] = float(np.mean(vals)) if vals else None
        out.append(row)
    return out


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em;margin-bottom:4px} h2{font-size:1.2em;margin-top:32px;border-bottom:1px solid #ddd}
.meta{color:#555} figure{display:inline-block;margin:8px 12px 16px 0;vertical-align:top}
figcaption{font-size:.85em;color:#555;max-width:750px} img.plot{max-width:750px;border:1px solid #eee}
table{border-collapse:collapse;font-size:.82em;margin:8px 0} th,td{border:1px solid #ddd;padding:3px 6px}
th{background:#f4f4f4;position:sticky;top:0} td.num{text-align:right;font-variant-numeric:tabular-nums}
td.st-ok{color:#176617} td.st-failed{color:#b00020;font-weight:bold} td.st-unfinished{color:#b06000}
td.st-missing{color:#777} .scroll{overflow-x:auto;max-height:640px;overflow-y:auto} pre{white-space:pre-wrap}
"""

_SCRIPT = """
(function(){
  var root=document.documentElement, errors=0;
  window.addEventListener('error',function(){errors++;root.setAttribute('data-errors',String(errors));},true);
  function check(){
    var imgs=document.querySelectorAll('img.plot'),ok=0;
    for(var i=0;i<imgs.length;i++){if(imgs[i].complete&&imgs[i].naturalWidth>0){ok++;}}
    root.setAttribute('data-plots',String(imgs.length));
    root.setAttribute('data-plots-loaded',String(ok));
    root.setAttribute('data-errors',String(errors));
  }
  window.addEventListener('load',check);
})();
"""


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
        figures += _cdf_figures(shown, out, "alloc")
        figures += _cdf_figures(shown, out, "delay")
        figures += _percentile_figures(rows, keys)
        figures += _utilization_figures(shown, out)
    name = title or doc.get("name", out.name)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "unfinished", "failed", "missing")}
    parts = [
        f"<!DOCTYPE html><html lang=en data-plots=0 data-plots-loaded=0 data-errors=0><head><meta charset=utf-8>"
        f"<title>{html.escape(name)} — Megha sweep</title><style>{_CSS}</style></head><body>",
        f"<h1>Sweep {html.escape(name)}</h1>",
        f"<p class=meta>{len(rows)} runs: {counts['ok']} ok, {counts['unfinished']} unfinished, "
        f"{counts['failed']} failed, {counts['missing']} not run. Varying: "
        f'{html.escape(", ".join(params) or "nothing")}. Tables: <a href="results.csv">results.csv</a>, '
        f'results.parquet; plan: <a href="sweep.json">sweep.json</a>.</p>',
    ]
    failed = [r for r in rows if r["status"] == "failed"]
    if failed:
        parts.append("<h2>Failed runs</h2>")
        parts.append(_table(failed, ["index", "run_id", *params, "error"], link=True))
    if len(groups) > MAX_GROUPS_PLOTTED:
        parts.append(
            f"<p class=meta>{len(groups)} groups: the CDF and utilization plots show the first "
            f"{MAX_GROUPS_PLOTTED}; the tables list every run.</p>"
        )
    if groups:
        parts.append("<h2>Summary per group</h2><p class=meta>means over seeds; seconds</p>")
        gr = _group_rows(groups)
        parts.append(_table(gr, list(gr[0])))
    sections = [
        ("Percentiles vs parameters", "pct-"),
        ("Allocation time and delay CDFs", "cdf-"),
        ("Utilization", "util-"),
    ]
    for heading, prefix in sections:
        figs = [f for f in figures if f.kind.startswith(prefix)]
        if not figs:
            continue
        parts.append(f"<h2>{heading}</h2>")
        for i, f in enumerate(figs):
            b64 = base64.b64encode(f.png).decode("ascii")
            parts.append(
                f'<figure><img class=plot id="{prefix}{i}" data-kind="{f.kind}" alt="{html.escape(f.title)}" '
                f'src="data:image/png;base64,{b64}"><figcaption>{html.escape(f.title)}'
                f"{(' — ' + html.escape(f.caption)) if f.caption else ''}</figcaption></figure>"
            )
    parts.append("<h2>All runs</h2>")
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    parts.append(f"<div class=scroll>{_table(rows, cols, link=True, cls='results')}</div>")
    cfg_text = json.dumps(doc.get("spec", {}), indent=1, default=str)
    parts.append(f"<h2>Sweep definition</h2><pre>{html.escape(cfg_text)}</pre>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
