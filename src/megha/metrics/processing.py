"""Measured processing costs: what the real scheduler components spend per message, and a cost model built from it.

The simulator's :class:`~megha.sim.engine.ProcessingModel` charges a component ``base[kind] + per_item[kind] ×
len(msg)`` seconds for each message it receives (``len`` is the number of tasks or worker entries a message
carries). Without it, decisions take no simulated time, so a centralized scheduler is as fast as many
decentralized ones. ``processing_model = "measured"`` (``--processing measured``) fills it from a table of costs
measured on the very state machines the simulator runs (they are the live runtime's too):

* :class:`Profiler` wraps every component's ``on_message`` of a run and accumulates, per component kind, the CPU
  time (:func:`time.thread_time_ns`) of each call against the message's length; :func:`fit` turns that into
  ``base`` and ``per_item`` by least squares (both clamped at zero). Timer handlers (periodic rounds) are timed and
  reported too, but the engine's model charges messages only.
* ``benchmarks/measure_processing.py`` runs every registered scheduler at 10,000 and 100,000 workers with the
  profiler and writes ``megha/data/processing_costs.json`` (with how, where and on what it was measured).
* :func:`measured_model` reads that table for a scheduler and a datacenter size: per kind, linear interpolation in
  the number of workers between the measured sizes (the nearest size outside them).
"""

from __future__ import annotations

import json
import time
import types
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

#: component kinds the runner adds (trace source, watchdog, fault injector): not the scheduler's, never charged
INFRA_KINDS = frozenset({"source", "watchdog", "injector"})
TABLE = "processing_costs.json"

if TYPE_CHECKING:
    from megha.sim.component import Component


def _len(msg: Any) -> int:
    try:
        return len(msg)
    except TypeError:
        return 1


@dataclass
class Stats:
    """Sufficient statistics of (items, CPU ns) samples: count, sums, sums of squares and products."""

    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0
    ymax: float = 0.0

    def add(self, x: float, y: float) -> None:
        """Add one sample: a message of ``x`` items that took ``y`` CPU ns."""
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.sxy += x * y
        if y > self.ymax:
            self.ymax = y

    def merge(self, o: Stats) -> None:
        """Add the samples of ``o`` (another profiler's or component's statistics) to these."""
        self.n += o.n
        self.sx += o.sx
        self.sy += o.sy
        self.sxx += o.sxx
        self.sxy += o.sxy
        self.ymax = max(self.ymax, o.ymax)


def fit(s: Stats) -> tuple[float, float]:
    """``(base, per_item)`` in the units of the samples, by least squares of ``y = base + per_item × x``; a negative
    slope becomes 0 (base = the mean), a negative intercept 0 (a line through the origin)."""
    if s.n == 0:
        return 0.0, 0.0
    mean_x, mean_y = s.sx / s.n, s.sy / s.n
    var = s.sxx / s.n - mean_x * mean_x
    if var <= 1e-12 * max(1.0, mean_x * mean_x):
        return mean_y, 0.0
    slope = (s.sxy / s.n - mean_x * mean_y) / var
    if slope <= 0:
        return mean_y, 0.0
    base = mean_y - slope * mean_x
    if base < 0:
        return 0.0, s.sxy / s.sxx if s.sxx > 0 else 0.0
    return base, slope


@dataclass
class Profiler:
    """Times every ``on_message`` and ``on_timer`` of a run's components (install it before the run starts)."""

    messages: dict[tuple[str, str], Stats] = field(default_factory=dict)
    timers: dict[str, Stats] = field(default_factory=dict)

    def install(self, engine: Any) -> None:
        """Wrap the handlers of every scheduler component of ``engine`` (call before :meth:`Engine.run`)."""
        for comp in list(engine.components.values()):
            if comp.kind in INFRA_KINDS:
                continue
            self._wrap(comp)

    def _wrap(self, comp: Any) -> None:
        kind = comp.kind
        on_message, on_timer = comp.on_message, comp.on_timer
        msgs, tims = self.messages, self.timers
        clock = time.thread_time_ns

        def on_message_timed(
            _self: Component, msg: Any, now: float, _inner: Callable[[Any, float], None] = on_message
        ) -> None:  # named on_message below: the engine checks
            t0 = clock()
            _inner(msg, now)
            dt = clock() - t0
            key = (kind, type(msg).__name__)
            st = msgs.get(key)
            if st is None:
                st = msgs[key] = Stats()
            st.add(_len(msg), dt)

        def on_timer_timed(
            _self: Component, key: Hashable, now: float, _inner: Callable[[Hashable, float], None] = on_timer
        ) -> None:
            t0 = clock()
            _inner(key, now)
            dt = clock() - t0
            st = tims.get(kind)
            if st is None:
                st = tims[kind] = Stats()
            st.add(1, dt)

        on_message_timed.__name__ = "on_message"
        on_timer_timed.__name__ = "on_timer"
        comp.on_message = types.MethodType(on_message_timed, comp)
        comp.on_timer = types.MethodType(on_timer_timed, comp)
        port = getattr(comp, "port", None)
        if port is not None and hasattr(port, "_on_timer"):  # the simulator's port keeps the bound timer handler
            port._on_timer = comp.on_timer

    def table(self) -> dict[str, Any]:
        """Per component kind: the fitted ``base`` and ``per_item`` (seconds), message count, mean items and mean
        CPU time, per message type; and the timers' counts and mean cost (reported, not charged)."""
        kinds: dict[str, Stats] = {}
        for (kind, _), st in self.messages.items():
            kinds.setdefault(kind, Stats()).merge(st)
        out: dict[str, Any] = {}
        for kind, st in sorted(kinds.items()):
            base, per = fit(st)
            out[kind] = {
                "base": base * 1e-9,
                "per_item": per * 1e-9,
                "messages": st.n,
                "mean_items": st.sx / st.n,
                "mean_cpu_s": st.sy / st.n * 1e-9,
                "by_type": {
                    t: {"messages": s.n, "mean_items": s.sx / s.n, "mean_cpu_s": s.sy / s.n * 1e-9}
                    for (k, t), s in sorted(self.messages.items())
                    if k == kind
                },
            }
        for kind, st in sorted(self.timers.items()):
            out.setdefault(kind, {"base": 0.0, "per_item": 0.0, "messages": 0, "mean_items": 0.0, "mean_cpu_s": 0.0})
            out[kind]["timers"] = st.n
            out[kind]["timer_mean_cpu_s"] = st.sy / st.n * 1e-9
        return out


# --- the shipped table -------------------------------------------------------------------------------------------
@cache
def load_table() -> dict[str, Any]:
    """The measured table shipped in :mod:`megha.data` (``{}`` when the package has none)."""
    path = resources.files("megha") / "data" / TABLE
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


def measured_model(scheduler: str, n_workers: int, table: dict[str, Any] | None = None) -> tuple[dict, dict, dict]:
    """``(base, per_item, info)`` for ``scheduler`` on ``n_workers`` workers from the measured table: per component
    kind, linear interpolation in the number of workers between the measured sizes (the nearest size outside
    them). Raises ``KeyError`` when the scheduler was not measured."""
    t = load_table() if table is None else table
    sizes = sorted(int(s) for s, v in t.get("sizes", {}).items() if scheduler in v)
    if not sizes:
        raise KeyError(scheduler)
    lo = max((s for s in sizes if s <= n_workers), default=sizes[0])
    hi = min((s for s in sizes if s >= n_workers), default=sizes[-1])
    w = 0.0 if hi == lo else (n_workers - lo) / (hi - lo)
    a, b = t["sizes"][str(lo)][scheduler], t["sizes"][str(hi)][scheduler]
    base, per = {}, {}
    for kind in sorted(set(a) | set(b)):
        ka, kb = a.get(kind) or b[kind], b.get(kind) or a[kind]  # measured at one size only: that size's
        base[kind] = (1 - w) * ka.get("base", 0.0) + w * kb.get("base", 0.0)
        per[kind] = (1 - w) * ka.get("per_item", 0.0) + w * kb.get("per_item", 0.0)
    info = {
        "scheduler": scheduler,
        "workers": n_workers,
        "from_sizes": sorted({lo, hi}),
        "measured": t.get("measured_at"),
        "method": t.get("method"),
    }
    return base, per, info


PROCESSING_MODELS = ("none", "measured")
DESCRIPTIONS = {
    "none": "none: decisions take no simulated time (network delays only)",
    "custom": "custom: per-message costs given in the run configuration",
    "measured": "measured: per-message and per-task CPU costs of the real components (megha/data/" + TABLE + ")",
}


def effective_costs(cfg: Any, n_workers: int) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """The per-kind ``(base, per_item)`` a run charges, and a description: the measured table's values when
    ``cfg.processing_model == "measured"``, with the configuration's own ``processing`` / ``processing_per_item``
    entries overriding them kind by kind."""
    base, per = dict(cfg.processing), dict(cfg.processing_per_item)
    model = getattr(cfg, "processing_model", "none") or "none"
    info: dict[str, Any] = {}
    if model == "measured":
        mb, mp, info = measured_model(cfg.scheduler, n_workers)
        base, per = {**mb, **base}, {**mp, **per}
    elif any(base.values()) or any(per.values()):
        model = "custom"
    return base, per, {"name": model, "description": DESCRIPTIONS.get(model, model), **info}
