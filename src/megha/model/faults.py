"""Fault schedules: which part of a datacenter or a scheduler fails, when, and for how long.

A schedule is a list of faults and of random fault processes, read from TOML (``megha simulate --faults FILE``)
or given as a dict. Times are seconds after the first job arrives (traces such as the Google sub-trace start
hours into their clock, and "an hour into the run" is what a user means).

.. code-block:: toml

    [[fault]]              # one fault
    at = 3600              # seconds after the first arrival
    kind = "worker"        # worker | partition | a scheduler's own component kind (gm, lm, master, rm, ...)
    target = 0.05          # worker: a fraction of the workers (drawn with the schedule's seed), an id or a list
    down_for = 600         # seconds until it comes back; omitted: it never does (workers) / restarts at once

    [[fault]]
    at = 7200
    kind = "gm"
    target = 1             # component index; "random" draws one

    [[random]]             # a random process: every target of the kind fails after exponential times
    kind = "worker"
    mtbf = 360000          # mean time between failures of one target, seconds (1 % of workers an hour)
    down_for = 600
    until = 36000          # stop drawing after this time (default: the end of the arrivals)

    seed = 7               # top-level: seeds the fractions, "random" targets and the random processes

Which kinds a scheduler has is part of its registration; a kind it does not have is an error that names the kind,
the file and the entry, and lists the kinds it has. :meth:`FaultSchedule.expand` turns a schedule into the
concrete, time-ordered :class:`FaultEvent` list a run injects.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from megha.errors import InputError

WORKER = "worker"
PARTITION = "partition"
GENERIC_KINDS = (WORKER, PARTITION)


@dataclass(frozen=True)
class FaultEvent:
    """One concrete fault: at simulated time ``at``, ``targets`` of ``kind`` fail for ``down_for`` seconds
    (``math.inf``: for good)."""

    at: float
    kind: str
    targets: tuple[int, ...]
    down_for: float
    source: str = ""  # where it came from: "fault 2 of FILE", "random 1 of FILE"


@dataclass(frozen=True)
class FaultSpec:
    """A ``[[fault]]`` entry as written: ``target`` is an int, a list of ints, a fraction, or ``"random"``."""

    at: float
    kind: str
    target: Any
    down_for: float
    where: str


@dataclass(frozen=True)
class RandomFaults:
    """A ``[[random]]`` entry: every target of ``kind`` fails after exponential times of mean ``mtbf``."""

    kind: str
    mtbf: float
    down_for: float
    until: float | None
    where: str


@dataclass(frozen=True)
class FaultSchedule:
    """Faults and random fault processes, with the seed of every draw they need."""

    faults: tuple[FaultSpec, ...] = ()
    random: tuple[RandomFaults, ...] = ()
    seed: int = 0
    source: str = "<dict>"

    @property
    def kinds(self) -> set[str]:
        """The fault kinds the schedule uses (listed faults and random ones)."""
        return {f.kind for f in self.faults} | {r.kind for r in self.random}

    def check_kinds(self, scheduler: str, available: dict[str, str]) -> None:
        """Fail clearly when the schedule uses a kind ``scheduler`` does not have (``available``: kind -> what
        happens on such a fault)."""
        for entry in (*self.faults, *self.random):
            if entry.kind not in available:
                raise InputError(
                    f"{self.source}: {entry.where}: scheduler {scheduler!r} has no component of kind "
                    f"{entry.kind!r}; its fault kinds: {', '.join(sorted(available)) or 'none'}"
                )

    def expand(self, start: float, end: float, population: dict[str, int]) -> list[FaultEvent]:
        """The concrete faults of a run whose arrivals span ``[start, end]``; ``population[kind]`` is how many
        targets of each kind exist (workers, LMs or masters for partitions, GMs, ...)."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0xFA017]))
        out: list[FaultEvent] = []
        for f in self.faults:
            n = _population(population, f.kind, self.source, f.where)
            out.append(
                FaultEvent(start + f.at, f.kind, _targets(f.target, n, rng, self.source, f.where), f.down_for, f.where)
            )
        for r in self.random:
            n = _population(population, r.kind, self.source, r.where)
            horizon = (end - start) if r.until is None else r.until
            # superposition of n exponential processes = one process of rate n/mtbf, each fault on a random target
            t = 0.0
            while True:
                t += rng.exponential(r.mtbf / n)
                if t > horizon:
                    break
                out.append(FaultEvent(start + t, r.kind, (int(rng.integers(n)),), r.down_for, r.where))
        out.sort(key=lambda e: e.at)
        return out


def _population(population: dict[str, int], kind: str, source: str, where: str) -> int:
    n = population.get(kind, 0)
    if n < 1:
        raise InputError(f"{source}: {where}: this run has no {kind!r} to fail")
    return n


def _targets(target: Any, n: int, rng: np.random.Generator, source: str, where: str) -> tuple[int, ...]:
    if target == "random":
        return (int(rng.integers(n)),)
    if isinstance(target, float) and not target.is_integer():
        if not 0 < target < 1:
            raise InputError(f"{source}: {where}: target: a fraction must be between 0 and 1, got {target}")
        k = max(1, round(target * n))
        return tuple(sorted(int(x) for x in rng.choice(n, size=k, replace=False)))
    ids = target if isinstance(target, list) else [target]
    out = []
    for x in ids:
        if isinstance(x, bool) or not isinstance(x, int | float) or float(x) != int(x):
            raise InputError(f"{source}: {where}: target: expected an id, a list of ids, a fraction or 'random'")
        if not 0 <= int(x) < n:
            raise InputError(f"{source}: {where}: target: id {int(x)} is out of range (0..{n - 1})")
        out.append(int(x))
    return tuple(out)


def _default_down(kind: str) -> float:
    """``down_for`` when omitted: workers (and partitions) never come back; a component restarts at once."""
    return math.inf if kind in GENERIC_KINDS else 0.0


def _number(
    entry: dict, key: str, where: str, source: str, default: float | None = None, positive: bool = False
) -> float:
    v = entry.get(key, default)
    if v is None:
        raise InputError(f"{source}: {where}: missing field {key!r}")
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        raise InputError(f"{source}: {where}: field {key!r}: expected a number, got {v!r}")
    if v < 0 or (positive and v == 0):
        raise InputError(f"{source}: {where}: field {key!r}: must be {'> 0' if positive else '>= 0'}, got {v}")
    return float(v)


def parse_schedule(doc: dict[str, Any], source: str = "<dict>") -> FaultSchedule:
    """A schedule from its TOML/dict form; every error names the source, the entry and the field."""
    known = {"fault", "random", "seed"}
    extra = set(doc) - known
    if extra:
        raise InputError(f"{source}: unknown key(s) {sorted(extra)}; a fault schedule has [[fault]], [[random]], seed")
    faults = []
    for i, e in enumerate(doc.get("fault", []), 1):
        where = f"fault {i}"
        if not isinstance(e, dict):
            raise InputError(f"{source}: {where}: expected a table")
        bad = set(e) - {"at", "kind", "target", "down_for"}
        if bad:
            raise InputError(f"{source}: {where}: unknown field(s) {sorted(bad)} (fields: at, kind, target, down_for)")
        kind = e.get("kind")
        if not isinstance(kind, str) or not kind:
            raise InputError(f"{source}: {where}: field 'kind': expected a name such as 'worker', 'gm' or 'lm'")
        at = _number(e, "at", where, source)
        down = _number(e, "down_for", where, source, default=_default_down(kind))
        faults.append(FaultSpec(at, kind, e.get("target", "random"), down, where))
    randoms = []
    for i, e in enumerate(doc.get("random", []), 1):
        where = f"random {i}"
        if not isinstance(e, dict):
            raise InputError(f"{source}: {where}: expected a table")
        bad = set(e) - {"kind", "mtbf", "down_for", "until"}
        if bad:
            raise InputError(f"{source}: {where}: unknown field(s) {sorted(bad)} (fields: kind, mtbf, down_for, until)")
        kind = e.get("kind")
        if not isinstance(kind, str) or not kind:
            raise InputError(f"{source}: {where}: field 'kind': expected a name such as 'worker'")
        mtbf = _number(e, "mtbf", where, source, positive=True)
        down = _number(e, "down_for", where, source, default=_default_down(kind))
        until = None if "until" not in e else _number(e, "until", where, source)
        randoms.append(RandomFaults(kind, mtbf, down, until, where))
    seed = doc.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"{source}: field 'seed': expected an integer, got {seed!r}")
    if not faults and not randoms:
        raise InputError(f"{source}: the schedule has no [[fault]] and no [[random]] entry")
    return FaultSchedule(tuple(faults), tuple(randoms), seed, source)


def load_schedule(path: str | Path) -> FaultSchedule:
    """A schedule from a TOML file (errors name the file, the entry and the field)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"fault schedule {p}: no such file")
    try:
        doc = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{p}: not valid TOML: {e}") from None
    return parse_schedule(doc, str(p))


class FaultHandler(Protocol):
    """What a scheduler family offers for faults beyond crashes of its components (which every family gets from the
    runner: the component is down for ``down_for`` seconds, then resumes; see
    :meth:`megha.sim.component.Component.on_recover`). A family returns one in its ``Deployment.faults``."""

    #: kind -> what happens on such a fault (shown in errors and ``megha schedulers``)
    kinds: dict[str, str]
    # optional ``permanent``: kinds whose targets never come back, whatever ``down_for`` says (MACRM's nodes)

    def population(self, kind: str) -> int:
        """How many targets of ``kind`` exist (workers, partitions, ...)."""

    def fail(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Targets of ``kind`` fail at ``now``."""

    def restore(self, kind: str, targets: tuple[int, ...], now: float) -> None:
        """Targets of ``kind`` come back at ``now``."""

    def workers(self, kind: str, targets: tuple[int, ...]) -> list[int]:
        """The workers a fault of ``kind`` on ``targets`` takes down (``worker``: the targets themselves; ``[]`` for
        a kind that takes no worker down, such as a component's crash — the runner then hands the fault's own
        targets to :meth:`fail`). Never read a component's index as a worker id."""
