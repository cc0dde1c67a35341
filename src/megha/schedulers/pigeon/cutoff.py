"""Short/long job classification for Pigeon-style schedulers.

A job is *short* (high priority) when the trace's mean task duration of the job (field 3 of a ``.tr`` line)
is below a per-trace cutoff (DESIGN §3.1, as in the Pigeon/Eagle simulators).
"""

from __future__ import annotations

import re

TRACE_CUTOFFS: dict[str, float] = {
    "yahoo": 90.5811,
    "google": 1129.532,
    "cloudera": 272.783,
    "facebook": 76.5951,
}
"""Cutoff (seconds) per trace family."""

_PATTERNS = (
    ("google", re.compile(r"goog", re.I)),
    ("yahoo", re.compile(r"(^|[^a-z])yh|yahoo", re.I)),
    ("cloudera", re.compile(r"cloudera|(^|[^a-z])cc[_\-.]", re.I)),
    ("facebook", re.compile(r"facebook|(^|[^a-z])fb([^a-z]|$)", re.I)),
)

DEFAULT_FAMILY = "yahoo"


def trace_family(name: str) -> str | None:
    """The trace family a workload name belongs to (google, yahoo, cloudera, facebook), or None."""
    for fam, pat in _PATTERNS:
        if pat.search(name):
            return fam
    return None


def resolve_cutoff(option: float | None, workload_name: str, cluster_meta: dict | None = None) -> tuple[float, str]:
    """The cutoff to use and where it came from.

    Order: the scheduler option; the trace family's cutoff (by workload name); the ``cutoff`` of a PigeonC
    cluster file; the Yahoo cutoff (synthetic traces of one-second tasks are all short with it).
    """
    if option is not None:
        return float(option), "option"
    fam = trace_family(workload_name)
    if fam is not None:
        return TRACE_CUTOFFS[fam], f"trace:{fam}"
    if cluster_meta and "cutoff" in cluster_meta:
        return float(cluster_meta["cutoff"]), "cluster-file"
    return TRACE_CUTOFFS[DEFAULT_FAMILY], f"default:{DEFAULT_FAMILY}"
