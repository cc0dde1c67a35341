"""Declared counters: what each scheduler family counts, under its namespace, and how ``summary.json`` groups them.

Components count with plain dictionary increments (``self.counters["updates_sent"] += 1``) or attributes, and a
family's ``Deployment.counters()`` returns them at the end of a run as one flat ``{key: value}`` dict, merged by the
runner into :attr:`~megha.metrics.result.RunResult.counters` with the run-level counters (:data:`RUN_COUNTERS`).
Nothing of that changes at run time: a counter stays one increment on a hot path.

Each family declares its counters once, as a :class:`CounterSet` given to
:func:`megha.schedulers.registry.register` (``counters=``): its namespace (``megha``, ``sparrow``, ``yarn`` …),
the prefix its flat keys carry in ``RunResult.counters`` (``sparrow_`` for ``sparrow_probes``; none for Megha's,
which predate the namespaces), and every counter's name with a one-line meaning. ``megha schedulers NAME`` lists
them. The namespacing happens when a summary is built (:func:`group`): ``summary.json``'s ``counters`` is

.. code-block:: json

    {"run": {"jobs_without_feasible_tasks": 0, "tasks_infeasible": 12},
     "sparrow": {"max_worker_queue": 3, "noops": 0, "probes": 2410, "probes_queued": 2410, "requests": 1205}}

— ``run`` first (counted by the runner for every scheduler), then the scheduler's namespace, names without the
prefix, each group sorted by name. A counter a family did not declare is still reported, under the family's
namespace with its flat key (the tests fail on it: ``tests/test_counters.py``). A result with no declaration
(a live run, a hand-made :class:`~megha.metrics.result.RunResult`) groups what is not run-level under its
scheduler's name, keys unchanged.

:func:`items` and :func:`merged` read both that format and the flat one written before it (``summary.json`` files
of older runs, kept by sweeps).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CounterSet:
    """The counters one namespace reports: name (within the namespace) → one-line meaning.

    ``prefix`` is how the names are spelled in the flat :attr:`RunResult.counters` dict (key = prefix + name); by
    default ``namespace + "_"``.
    """

    namespace: str
    counters: Mapping[str, str] = field(default_factory=dict)
    prefix: str | None = None

    def __post_init__(self) -> None:
        if self.prefix is None:
            object.__setattr__(self, "prefix", f"{self.namespace}_")
        object.__setattr__(self, "counters", dict(self.counters))

    def key(self, name: str) -> str:
        """The flat key of the counter ``name`` (as in :attr:`RunResult.counters`)."""
        return f"{self.prefix}{name}"

    def keys(self) -> list[str]:
        """The flat keys of every declared counter."""
        return [self.key(n) for n in self.counters]


#: counted by the runner for every scheduler (``summary.json``: ``counters.run``)
RUN_COUNTERS = CounterSet(
    "run",
    {
        "tasks_infeasible": "tasks no worker of the datacenter can run (their constraints or demand); never submitted",
        "jobs_without_feasible_tasks": "jobs none of whose tasks is feasible (skipped by the job source)",
        "tasks_stranded": "feasible tasks left without a live eligible worker by workers that failed for good "
        "(runs with a fault schedule; not waited for)",
    },
    prefix="",
)


def _index(sets: Sequence[CounterSet]) -> dict[str, tuple[str, str]]:
    """Flat key → (namespace, name) for every declared counter (the first declaration of a key wins)."""
    out: dict[str, tuple[str, str]] = {}
    for s in sets:
        for n in s.counters:
            out.setdefault(s.key(n), (s.namespace, n))
    return out


def undeclared(flat: Mapping[str, Any], sets: Sequence[CounterSet]) -> list[str]:
    """The keys of ``flat`` that no set declares (sorted)."""
    idx = _index(sets)
    return sorted(k for k in flat if k not in idx)


def group(flat: Mapping[str, Any], sets: Sequence[CounterSet], fallback: str) -> dict[str, dict[str, Any]]:
    """``{namespace: {name: value}}`` of a flat counter dict: declared counters under their namespace (in the order
    of ``sets``), names sorted; an undeclared key under the namespace of the last set (the scheduler's), or under
    ``fallback`` when ``sets`` declare no scheduler namespace, with its flat key (the prefix stripped when it has
    the scheduler's)."""
    idx = _index(sets)
    own = sets[-1] if sets and sets[-1].namespace != RUN_COUNTERS.namespace else None
    out: dict[str, dict[str, Any]] = {s.namespace: {} for s in sets}
    for k in sorted(flat):
        hit = idx.get(k)
        if hit is None:
            if own is None:
                hit = (fallback, k)
            else:
                hit = (own.namespace, k.removeprefix(own.prefix) if own.prefix else k)
        out.setdefault(hit[0], {})[hit[1]] = flat[k]
    return {ns: g for ns, g in out.items() if g}


def items(counters: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(dotted name, value)`` of a ``summary.json`` ``counters`` value: ``namespace.name`` for the grouped
    format, the flat key for the format before it."""
    for k, v in counters.items():
        if isinstance(v, Mapping):
            for n, x in v.items():
                yield f"{k}.{n}", x
        else:
            yield k, v


def merged(counters: Mapping[str, Any]) -> dict[str, Any]:
    """A ``summary.json`` ``counters`` value as one dict of names without namespaces (a flat one is returned as
    it is). Lossless for one run: no family declares a name of :data:`RUN_COUNTERS`."""
    out: dict[str, Any] = {}
    for k, v in counters.items():
        if isinstance(v, Mapping):
            out.update(v)
        else:
            out[k] = v
    return out
