"""Bundled sample traces and datacenters, addressed as ``sample:NAME``.

The package ships the papers' sample workloads (gzipped) and cluster files so the first command and every
reproduction work offline: ``sample:GOOG_subtrace`` (10,000 jobs, 312,558 tasks), ``sample:YH1_sub``,
``sample:YH_small`` (10 Yahoo jobs), ``sample:syn_250``/``syn_500``/``syn_1000`` (2,000 jobs of N one-second
tasks, one job per second), ``sample:synthetic_FB_sub_2000jobs``, and the datacenters
``sample:megha_G5L5S10000`` (10,000 constrained workers, 5 LMs × 5 partitions), ``sample:pigeon_D10M100S10000``
(the same workers as 100 PigeonC masters) and ``sample:megha_G1L1S9``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from megha.errors import InputError

PREFIX = "sample:"

TRACES = {
    "GOOG_subtrace": "GOOG_subtrace.tr.gz",
    "YH1_sub": "YH1_sub.tr.gz",
    "YH_small": "YH_small.tr.gz",
    "syn_250": "syn_250.0.tr.gz",
    "syn_500": "syn_500.0.tr.gz",
    "syn_1000": "syn_1000.0.tr.gz",
    "synthetic_FB_sub_2000jobs": "synthetic_FB_sub_2000jobs.tr.gz",
}
CLUSTERS = {
    "megha_G5L5S10000": "megha_G5L5S10000.json.gz",
    "pigeon_D10M100S10000": "pigeon_D10M100S10000.json.gz",
    "megha_G1L1S9": "megha_G1L1S9.json",
}

DEFAULT_TRACE = "sample:GOOG_subtrace"
DEFAULT_CLUSTER = "sample:megha_G5L5S10000"
#: bundled traces the papers ran on another datacenter size than the 10,000-worker file (IoT 2023 §5: the Google
#: sub-trace on 20,000 workers; on 10,000 it offers more work than the datacenter holds for about ten hours)
PAPER_WORKERS = {"sample:GOOG_subtrace": 20000}


def data_dir() -> Path:
    """The directory of the bundled sample traces and datacenters (the package's ``data``)."""
    return Path(str(resources.files("megha") / "data"))


def resolve(ref: str, kind: str = "trace") -> Path:
    """Map ``sample:NAME`` to the bundled file; other strings are returned as paths."""
    if not ref.startswith(PREFIX):
        return Path(ref)
    name = ref[len(PREFIX) :]
    table = TRACES if kind == "trace" else CLUSTERS
    if name not in table:
        raise InputError(f"unknown sample {kind} {name!r}; bundled: {', '.join(table)}")
    return data_dir() / table[name]
