"""One plotting module for every figure: CDFs (log x axis, like the papers'), percentile-vs-parameter panels
(categorical axes as points with median and inter-quartile error bars across seeds, numeric axes as lines),
and PNG output.

Figures written to files are built on :class:`matplotlib.figure.Figure` directly (no pyplot state, no backend
switch), so writing a report from a notebook leaves the notebook's backend alone; :func:`cdf_axes` without an
``ax`` uses pyplot so that the figure shows in a notebook.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: the smallest value drawn on a log axis (zeros and 1.5 µs-class values stay visible)
LOG_FLOOR = 1e-6
LEGEND_SIZE = 9
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def decade_label(x: float) -> str:
    """``10`` with the exponent of a power of ten as Unicode superscripts (``10⁻³``), or "" for other values."""
    if not (x > 0 and math.isfinite(x)):
        return ""
    e = math.log10(x)
    k = round(e)
    return "10" + str(k).translate(_SUPERSCRIPT) if abs(e - k) < 1e-6 else ""


def log_axis(ax: Any, which: str = "x") -> None:
    """A base-10 log scale on ``ax``'s x or y axis, its decades labelled ``10³`` in plain text.

    Matplotlib's own log labels are mathtext (``$10^{3}$``), and the first of them builds the mathtext parser: about
    0.2 CPU-s of every run that writes a figure. Axes spanning less than a decade keep Matplotlib's labels (they
    label the ticks between powers of ten too)."""
    from matplotlib.ticker import LogFormatterSciNotation

    class _Decades(LogFormatterSciNotation):
        def __call__(self, x: float, pos: Any = None) -> str:
            lo, hi = self.axis.get_view_interval()
            if lo > 0 and hi >= 10 * lo:
                return decade_label(x)
            return super().__call__(x, pos)

    if which == "x":
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(_Decades())
    else:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_Decades())


def new_figure(width: float = 7.5, height: float = 4.4, dpi: int = 100) -> tuple[Any, Any]:
    """A figure and its single Axes, independent of pyplot."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi)
    return fig, fig.subplots()


def new_panels(n: int, width: float = 4.0, height: float = 4.0, dpi: int = 100, sharey: bool = True) -> tuple[Any, Any]:
    """A figure of ``n`` side-by-side panels (sharing the y axis); returns the figure and its Axes list."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n, height), dpi=dpi)
    axes = fig.subplots(1, n, sharey=sharey, squeeze=False)[0]
    return fig, list(axes)


def new_grid(
    rows: int,
    cols: int,
    width: float,
    height: float,
    dpi: int = 100,
    sharex: bool = False,
    sharey: bool = False,
) -> tuple[Any, Any]:
    """A ``width`` x ``height`` figure of ``rows`` x ``cols`` panels, independent of pyplot; returns the figure
    and its Axes as a 2-D array (``axes[row, col]``, ``axes[0]`` for the panels of a single row)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi)
    return fig, fig.subplots(rows, cols, sharex=sharex, sharey=sharey, squeeze=False)


def figure_legend(fig: Any, ax: Any) -> None:
    """One legend for a figure of panels, below them, in as many columns as fit."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    ncol = min(len(labels), 3)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=LEGEND_SIZE, frameon=False)
    rows = -(-len(labels) // ncol)
    fig.tight_layout(rect=(0, 0.06 * rows + 0.02, 1, 0.95))
    fig._megha_laid_out = True


def _interval_contains(lo: float, hi: float, x: float, rtol: float = 1e-10) -> bool:
    if lo > hi:
        lo, hi = hi, lo
    eps = (hi - lo) * rtol
    return lo - eps <= x <= hi + eps


def _moved_minor_ticks(axis: Any) -> Any:
    """An artist drawing ``axis``' minor ticks (tick mark and grid line) with one :class:`~matplotlib.axis.Tick`
    moved to each location in turn -- the same pixels as Matplotlib's own minor ticks without building a Tick (two
    lines, two texts and their properties) per location: a log axis over eight decades has some 70 of them, about
    half the cost of drawing a run's CDF figure. None when the axis has no minor ticks or labels some of them."""
    from matplotlib.artist import Artist
    from matplotlib.ticker import NullLocator

    if isinstance(axis.get_minor_locator(), NullLocator):
        return None
    visible = getattr(axis, "_tick_group_visible", None)  # Matplotlib >= 3.10 skips ticks with nothing visible
    if visible is not None and not visible(axis._minor_tick_kw):
        return None
    tr = axis.get_transform()
    t_lo, t_hi = tr.transform(list(axis.get_view_interval()))
    locs = [float(x) for x in axis.get_minorticklocs() if _interval_contains(t_lo, t_hi, float(tr.transform(x)))]
    if any(axis.minor.formatter.format_ticks(locs)):  # labelled minor ticks (a log axis of under a decade)
        return None

    class MovedTick(Artist):
        def draw(self, renderer: Any) -> None:
            tick = axis.minorTicks[0]  # configured as the axis configures every minor tick
            for loc in locs:
                tick.update_position(loc)
                tick.draw(renderer)
            self.stale = False

    art = MovedTick()
    art.set_zorder(axis.get_zorder())
    art.set_in_layout(False)
    return art


def light_minor_ticks(fig: Any) -> None:
    """Before writing ``fig``: every axis whose minor ticks carry no label (log axes over more than a decade) has
    them drawn by one moved Tick instead of a Tick per location (:func:`_moved_minor_ticks`); the figure looks the
    same. Call it once the figure is laid out (a log axis' ticks depend on its length) and its limits are final."""
    from matplotlib.ticker import NullLocator

    swaps = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            art = _moved_minor_ticks(axis)
            if art is not None:
                swaps.append((ax, axis, art))
    for ax, axis, art in swaps:  # shared axes share their locators: read every axis before changing any
        axis.set_minor_locator(NullLocator())
        ax.add_artist(art)


def png(fig: Any, dpi: int = 100) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    if not getattr(fig, "_megha_laid_out", False):
        fig.tight_layout()
    light_minor_ticks(fig)
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


#: fixed margins (left, bottom, right, top as figure fractions) for the single-panel figures every run writes: laying
#: a figure out to fit its labels draws it once more, which is half the cost of writing it
RUN_MARGINS = (0.1, 0.13, 0.98, 0.92)


def save(fig: Any, path: str | Path, dpi: int = 120, margins: tuple[float, float, float, float] | None = None) -> None:
    """Write the figure (format from the suffix), laid out to fit its labels, or with fixed ``margins``."""
    if margins is None:
        fig.tight_layout()
    else:
        left, bottom, right, top = margins
        fig.subplots_adjust(left=left, bottom=bottom, right=right, top=top)
    light_minor_ticks(fig)
    fig.savefig(str(path), dpi=dpi)


def ecdf(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite values and their cumulative fractions."""
    v = np.asarray(values, dtype=np.float64)
    v = np.sort(v[np.isfinite(v)])
    return v, np.arange(1, v.size + 1) / max(v.size, 1)


def legend(ax: Any, n: int | None = None, **kw: Any) -> None:
    """A legible legend: readable font size, two columns past eight entries, outside the data when long."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    n = len(labels) if n is None else n
    kw.setdefault("fontsize", LEGEND_SIZE)
    kw.setdefault("ncol", 1 if n <= 8 else 2)
    kw.setdefault("framealpha", 0.85)
    ax.legend(**kw)


def draw_cdfs(
    ax: Any,
    series: dict[str, Any],
    xlabel: str = "delay in job response time (s)",
    log: bool = True,
    title: str = "",
    max_points: int = 2000,
) -> int:
    """Step CDFs of each labelled value set on ``ax``; returns how many were drawn (empty sets are skipped)."""
    drawn = 0
    for label, vals in series.items():
        x, y = ecdf(vals)
        if x.size == 0:
            continue
        if x.size > max_points:  # quantiles keep the shape at any size
            q = np.linspace(0.0, 1.0, max_points)
            x, y = np.quantile(x, q), q
        if log:
            x = np.maximum(x, LOG_FLOOR)
        ax.step(x, y, where="post", label=label)
        drawn += 1
    if log:
        log_axis(ax, "x")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    legend(ax, loc="best")
    return drawn


def cdf_axes(
    series: dict[str, Any], ax: Any = None, xlabel: str = "delay in job response time (s)", log: bool = True
) -> Any:
    """CDFs on ``ax``, or on a new pyplot figure (shown by notebooks); returns the Axes."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.4, 4.2))
    draw_cdfs(ax, series, xlabel=xlabel, log=log)
    return ax


def save_cdfs(
    series: dict[str, Any],
    path: str | Path,
    title: str = "",
    xlabel: str = "delay in job response time (s)",
    log: bool = True,
) -> None:
    """A CDF figure written to ``path`` (PNG by suffix)."""
    fig, ax = new_figure(6.4, 4.2, dpi=120)
    draw_cdfs(ax, series, xlabel=xlabel, title=title, log=log)
    save(fig, path, margins=RUN_MARGINS)


def median_iqr(values: Sequence[float]) -> tuple[float, float, float]:
    """Median, 25th and 75th percentiles of the finite values (NaN when there are none)."""
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan"), float("nan"), float("nan")
    lo, med, hi = np.percentile(v, [25, 50, 75])
    return float(med), float(lo), float(hi)


def draw_points(
    ax: Any,
    categories: Sequence[str],
    series: dict[str, list[Sequence[float]]],
    ylabel: str,
    xlabel: str = "",
    log: bool = True,
    legend: bool = True,
) -> int:
    """Categorical x axis: for each labelled series, one point per category at the median of its values (seeds)
    with an inter-quartile error bar; series are offset sideways so that they do not hide each other. Nothing
    joins the categories (they are not ordered). Returns the points drawn."""
    n = max(len(series), 1)
    width = min(0.7, 0.18 * n)
    drawn = 0
    for k, (label, per_cat) in enumerate(series.items()):
        off = (k - (n - 1) / 2) * (width / max(n - 1, 1)) if n > 1 else 0.0
        xs, med, lo, hi = [], [], [], []
        for i, vals in enumerate(per_cat):
            m, a, b = median_iqr(vals)
            if np.isfinite(m):
                xs.append(i + off)
                med.append(m)
                lo.append(a)
                hi.append(b)
        if not xs:
            continue
        m_ = np.maximum(med, LOG_FLOOR) if log else np.asarray(med)
        err = np.vstack(
            [m_ - (np.maximum(lo, LOG_FLOOR) if log else lo), (np.maximum(hi, LOG_FLOOR) if log else hi) - m_]
        )
        ax.errorbar(xs, m_, yerr=np.maximum(err, 0), fmt=MARKERS[k % len(MARKERS)], capsize=3, label=label, ms=6)
        drawn += len(xs)
    ax.set_xticks(range(len(categories)), list(categories), rotation=20 if len(categories) > 4 else 0)
    ax.set_xlim(-0.6, len(categories) - 0.4)
    _finish(ax, xlabel, ylabel, log, show_legend=legend)
    return drawn


def draw_lines(
    ax: Any,
    xs: Sequence[float],
    series: dict[str, list[Sequence[float]]],
    ylabel: str,
    xlabel: str = "",
    log: bool = True,
    styles: dict[str, dict[str, Any]] | None = None,
    legend: bool = True,
) -> int:
    """Numeric x axis: for each labelled series, the median over seeds at each x joined by a line, with
    inter-quartile error bars. A log x axis when the values span 20x or more. Returns the points drawn."""
    drawn = 0
    for k, (label, per_x) in enumerate(series.items()):
        px, med, lo, hi = [], [], [], []
        for x, vals in zip(xs, per_x, strict=True):
            m, a, b = median_iqr(vals)
            if np.isfinite(m):
                px.append(x)
                med.append(m)
                lo.append(a)
                hi.append(b)
        if not px:
            continue
        m_ = np.maximum(med, LOG_FLOOR) if log else np.asarray(med)
        lo_ = np.maximum(lo, LOG_FLOOR) if log else np.asarray(lo)
        hi_ = np.maximum(hi, LOG_FLOOR) if log else np.asarray(hi)
        style = {"marker": MARKERS[k % len(MARKERS)], "capsize": 3, **((styles or {}).get(label, {}))}
        ax.errorbar(px, m_, yerr=np.maximum(np.vstack([m_ - lo_, hi_ - m_]), 0), label=label, **style)
        drawn += len(px)
    pos = [x for x in xs if x > 0]
    if len(pos) == len(xs) and len(xs) > 1 and max(xs) / min(xs) >= 20:
        log_axis(ax, "x")
    _finish(ax, xlabel, ylabel, log, show_legend=legend)
    return drawn


def _finish(ax: Any, xlabel: str, ylabel: str, log: bool, show_legend: bool = True) -> None:
    if log:
        log_axis(ax, "y")
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    if show_legend:
        legend(ax)
