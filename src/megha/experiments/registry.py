"""Registry of reproducible experiments (``megha reproduce``).

An experiment is a function ``run(ctx) -> dict`` registered under an id such as ``iot23-google``, with the paper
(a key of :data:`PAPERS`) and the figures it reproduces. It writes its tables and figures into ``ctx.out`` and
returns the document saved as ``ctx.out / "summary.json"`` (per scheduler: the delay summary and counters, plus
whatever the experiment measures). ``ctx.quick`` asks for a smaller but still meaningful version that finishes in
under two minutes on a 2-core machine.

Its ``claims(doc, ctx) -> list[Claim]`` function states the paper's claims for those figures and checks them
against the document (:mod:`megha.experiments.claims`); :func:`run_experiment` stores them under ``"claims"``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megha.errors import InputError

if TYPE_CHECKING:
    from megha.config import RunConfig
    from megha.metrics.result import RunResult


@dataclass
class ReproContext:
    """What an experiment gets: where to write, how big to be, the seed, and a logger."""

    out: Path
    quick: bool = False
    seed: int = 0
    log: Callable[[str], None] = print
    progress: Callable[[str, float, int, int], None] | None = None
    extra: dict = field(default_factory=dict)

    def simulate(self, cfg: RunConfig, label: str | None = None) -> RunResult:
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


@dataclass(frozen=True)
class Paper:
    """A source paper: how ``megha reproduce --list`` names and cites it."""

    short: str
    title: str
    citation: str


#: The papers the experiments reproduce (``paper=`` of :func:`experiment`).
PAPERS: dict[str, Paper] = {
    "megha20": Paper(
        "Megha",
        "Megha: Decentralized Global Fair Scheduling for Federated Clusters",
        "M. Thiyyakat, S. Kalambur, D. Sitaram (PES University), preprint",
    ),
    "iot23": Paper(
        "IoT 2023",
        "Constraint-Aware Federated Scheduling for Data Center Workloads",
        "M. Thiyyakat, S. Kalambur, D. Sitaram, IoT 2023, 4(4), 534-557, doi:10.3390/iot4040023",
    ),
    "macrm": Paper(
        "MACRM thesis",
        "MACRM: A Multi-Agent Cluster Resource Management System",
        "M. H. Sedighi Gilani, M.Sc. thesis, University of Saskatchewan, 2016",
    ),
    "sirius": Paper(
        "Sirius",
        "Min-cost max-flow based large-scale resource scheduling (Sirius; in Chinese)",
        "State Key Laboratory of Computer Science, Institute of Software, Chinese Academy of Sciences",
    ),
    "psychas": Paper(
        "Psychas & Ghaderi",
        "Scheduling Jobs with Random Resource Requirements in Computing Clusters",
        "K. Psychas, J. Ghaderi, arXiv, January 2019 (IEEE INFOCOM 2019)",
    ),
}


@dataclass
class Experiment:
    id: str
    title: str
    paper: str
    run: Callable[[ReproContext], dict[str, Any]]
    quick_note: str = ""
    figures: str = ""
    claims: Callable[[dict[str, Any], ReproContext], list] | None = None

    @property
    def source(self) -> Paper | None:
        """The paper, when ``paper`` is a key of :data:`PAPERS`."""
        return PAPERS.get(self.paper)

    @property
    def paper_label(self) -> str:
        """``<short name>, <figures>`` (or the raw ``paper`` text for an unknown key)."""
        p = self.source
        if p is None:
            return self.paper
        return f"{p.short}, {self.figures}" if self.figures else p.short


_EXPERIMENTS: dict[str, Experiment] = {}
_loaded = False


def experiment(
    id: str,
    title: str,
    paper: str,
    quick_note: str = "",
    figures: str = "",
    claims: Callable[[dict[str, Any], ReproContext], list] | None = None,
) -> Callable[[Callable[[ReproContext], dict[str, Any]]], Callable[[ReproContext], dict[str, Any]]]:
    """Decorator registering ``run(ctx) -> dict`` as experiment ``id``.

    ``paper`` is a key of :data:`PAPERS`, ``figures`` the figures reproduced ("Figs. 8-10"), ``claims`` the
    function stating and checking the paper's claims for them (see :mod:`megha.experiments.claims`).
    """

    def deco(fn: Callable[[ReproContext], dict[str, Any]]) -> Callable[[ReproContext], dict[str, Any]]:
        if id in _EXPERIMENTS:
            raise ValueError(f"experiment {id!r} registered twice")
        _EXPERIMENTS[id] = Experiment(id, title, paper, fn, quick_note, figures, claims)
        return fn

    return deco


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    import megha.experiments as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name not in ("registry", "cli", "claims"):
            importlib.import_module(f"megha.experiments.{mod.name}")
    _loaded = True


def all_experiments() -> list[Experiment]:
    """Every registered experiment, by id."""
    _load_all()
    return sorted(_EXPERIMENTS.values(), key=lambda e: e.id)


def get(id: str) -> Experiment:
    """The experiment ``id`` (an unknown id is an ``InputError`` with a suggestion)."""
    _load_all()
    if id not in _EXPERIMENTS:
        from megha.errors import did_you_mean

        raise InputError(
            f"unknown experiment {id!r}{did_you_mean(id, _EXPERIMENTS)}; see `megha reproduce --list` "
            f"({', '.join(sorted(_EXPERIMENTS))})"
        )
    return _EXPERIMENTS[id]


def evaluate_claims(exp: Experiment, doc: dict[str, Any], ctx: ReproContext) -> list[dict[str, Any]]:
    """The experiment's claims checked against ``doc`` (JSON-able dicts; none when it declares no claims)."""
    if exp.claims is None:
        return []
    try:
        return [c.to_dict() for c in exp.claims(doc, ctx)]
    except Exception as e:  # a broken claims function must not lose the run: it is reported as a claim
        from megha.experiments.claims import Claim

        return [
            Claim(
                "claims-error",
                exp.figures,
                "the paper's claims could not be evaluated on this run",
                "",
                "",
                "",
                None,
                f"{type(e).__name__}: {e} (a bug in the experiment's claims function)",
            ).to_dict()
        ]


def paper_doc(exp: Experiment) -> dict[str, Any]:
    """The paper an experiment reproduces, for its ``results.json`` (short name, title, citation, figures)."""
    p = exp.source
    if p is None:
        return {"paper": exp.paper}
    return {"paper": p.short, "paper_title": p.title, "citation": p.citation, "figures": exp.figures}


def run_experiment(id: str, ctx: ReproContext) -> dict[str, Any]:
    """Run an experiment, check its claims and write its ``summary.json``."""
    from megha.experiments.claims import tally
    from megha.metrics.report import _clean

    exp = get(id)
    ctx.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    doc = exp.run(ctx)
    doc = _clean(
        {
            "experiment": exp.id,
            "title": exp.title,
            **paper_doc(exp),
            "quick": ctx.quick,
            "seed": ctx.seed,
            "wall_seconds": time.perf_counter() - t0,
            **doc,
        }
    )
    doc["claims"] = evaluate_claims(exp, doc, ctx)
    doc["claims_tally"] = tally(doc["claims"])
    doc = _clean(doc)
    (ctx.out / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc
