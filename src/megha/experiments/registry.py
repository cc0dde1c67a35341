"""Registry of reproducible experiments (``megha reproduce``).

An experiment is a function ``run(ctx) -> dict`` registered under an id such as ``iot23-google``. It writes
its tables and figures into ``ctx.out`` and returns the document saved as ``ctx.out / "summary.json"``
(per scheduler: the delay summary and counters, plus whatever the experiment measures). ``ctx.quick`` asks
for a smaller but still meaningful version that finishes in under two minutes on a 2-core machine.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megha.errors import InputError


@dataclass
class ReproContext:
    """What an experiment gets: where to write, how big to be, the seed, and a logger."""

    out: Path
    quick: bool = False
    seed: int = 0
    log: Callable[[str], None] = print
    progress: Callable[[str, float, int, int], None] | None = None
    extra: dict = field(default_factory=dict)

    def simulate(self, cfg, label: str | None = None):
        """Run one simulation (with progress reporting) and return its RunResult."""
        from megha.runner import simulate

        lab = label or cfg.scheduler
        cb = None
        if self.progress is not None:

            def cb(now: float, done: int, total: int) -> None:
                self.progress(lab, now, done, total)

        t0 = time.perf_counter()
        res = simulate(cfg, progress=cb)
        self.log(f"  {lab}: {res.workload.n_tasks:,} tasks in {time.perf_counter() - t0:.1f} s")
        return res


@dataclass
class Experiment:
    id: str
    title: str
    paper: str
    run: Callable[[ReproContext], dict[str, Any]]
    quick_note: str = ""


_EXPERIMENTS: dict[str, Experiment] = {}
_loaded = False


def experiment(id: str, title: str, paper: str, quick_note: str = ""):
    """Decorator registering ``run(ctx) -> dict`` as experiment ``id``."""

    def deco(fn: Callable[[ReproContext], dict[str, Any]]):
        if id in _EXPERIMENTS:
            raise ValueError(f"experiment {id!r} registered twice")
        _EXPERIMENTS[id] = Experiment(id, title, paper, fn, quick_note)
        return fn

    return deco


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    import megha.experiments as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name not in ("registry", "cli"):
            importlib.import_module(f"megha.experiments.{mod.name}")
    _loaded = True


def all_experiments() -> list[Experiment]:
    _load_all()
    return sorted(_EXPERIMENTS.values(), key=lambda e: e.id)


def get(id: str) -> Experiment:
    _load_all()
    if id not in _EXPERIMENTS:
        from megha.errors import did_you_mean

        raise InputError(
            f"unknown experiment {id!r}{did_you_mean(id, _EXPERIMENTS)}; see `megha reproduce --list` "
            f"({', '.join(sorted(_EXPERIMENTS))})"
        )
    return _EXPERIMENTS[id]


def run_experiment(id: str, ctx: ReproContext) -> dict[str, Any]:
    """Run an experiment and write its ``summary.json``."""
    exp = get(id)
    ctx.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    doc = exp.run(ctx)
    doc = {
        "experiment": exp.id,
        "title": exp.title,
        "paper": exp.paper,
        "quick": ctx.quick,
        "seed": ctx.seed,
        "wall_seconds": time.perf_counter() - t0,
        **doc,
    }
    from megha.metrics.report import _clean

    (ctx.out / "summary.json").write_text(json.dumps(_clean(doc), indent=2) + "\n")
    return doc
