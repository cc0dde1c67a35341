"""The counters the flow scheduler reports, declared for the registry (``summary.json``: ``counters.flow``; flat keys
``flow_*``). The ``round_us_*`` and ``solve_us_*`` figures are wall-clock measurements: they vary between runs."""

from __future__ import annotations

from megha.metrics.counters import CounterSet

_STATS = {"mean": "mean", "p50": "median", "p90": "90th percentile", "p99": "99th percentile", "max": "maximum"}

COUNTERS = CounterSet(
    "flow",
    {
        "rounds": "scheduling rounds (one min-cost flow solve and placement each)",
        "passes": "solver passes (a round may solve more than once)",
        "searches": "shortest-path searches of the solver",
        "arc_scans": (
            "half-arcs the solver's searches read (its deterministic work; 0 for from-scratch solves): every entry of"
            " an adjacency list shorter than flow._kernels.INDEX_DEGREE, only the residual ones of a longer list (read"
            " from its index; the entries a search passed, read or not, are the solver's list_visits)"
        ),
        "settled": "nodes settled by the solver's searches",
        "launched": "tasks placed (launched) by the rounds",
        "preemptions": "running tasks killed by preemption (the flow solution moved them; they wait again)",
        "max_nodes": "largest flow network (nodes)",
        "max_arcs": "largest flow network (arcs)",
        "machines_failed": "machines lost (worker faults)",
        "tasks_lost": "running tasks lost with failed machines",
        **{
            f"round_us_{k}": f"{v} wall-clock time of a whole round, microseconds (a measurement)"
            for k, v in _STATS.items()
        },
        "round_us_total": "wall-clock time of every round, microseconds (a measurement)",
        **{
            f"solve_us_{k}": f"{v} wall-clock time of the solver in a round, microseconds (a measurement)"
            for k, v in _STATS.items()
        },
        "solve_us_total": "wall-clock time of the solver in every round, microseconds (a measurement)",
        "round_tasks_mean": "mean tasks placed per round",
        "round_tasks_p50": "median tasks placed per round",
        "round_tasks_p99": "99th percentile of tasks placed per round",
        "round_tasks_max": "most tasks placed in one round",
    },
)
