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

REFERENCE_CUTOFF = 2.0
"""The cutoff of the authors' PigeonC configuration for 10,000 workers (``cutoff`` in D10M100S10000)."""


def trace_family(name: str) -> str | None:
    """The trace family a workload name belongs to (google, yahoo, cloudera, facebook), or None."""
    for fam, pat in _PATTERNS:
        if pat.search(name):
            return fam
    return None


def resolve_cutoff(
    option: float | None, workload_name: str, cluster_meta: dict | None = None, cluster_first: bool = False
) -> tuple[float, str]:
    """The cutoff to use and where it came from.

    Order: the scheduler option; the trace family's cutoff (by workload name); the ``cutoff`` of a PigeonC
    cluster file; the Yahoo cutoff (synthetic traces of one-second tasks are all short with it).
    ``cluster_first`` (the authors' PigeonC code, which reads only its configuration's cutoff): the option, the
    cluster file's cutoff, else :data:`REFERENCE_CUTOFF` (its 10k configuration's 2 s).
    """
    if option is not None:
        return float(option), "option"
    from_cluster = cluster_meta is not None and "cutoff" in cluster_meta
    if cluster_first:
        if from_cluster:
            return float(cluster_meta["cutoff"]), "cluster-file"
        return REFERENCE_CUTOFF, "reference-config"
    fam = trace_family(workload_name)
    if fam is not None:
        return TRACE_CUTOFFS[fam], f"trace:{fam}"
    if from_cluster:
        return float(cluster_meta["cutoff"]), "cluster-file"
    return TRACE_CUTOFFS[DEFAULT_FAMILY], f"default:{DEFAULT_FAMILY}"
