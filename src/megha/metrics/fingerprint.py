"""A fingerprint of a run's per-task outputs: equal fingerprints mean the scheduler made the same decisions.

Refactoring and speed work must not change results. :func:`fingerprint` hashes, for every task, when it was
decided, started and finished, where it ran, when the scheduler learned it finished, and how often it was
launched, finished and preempted — the exact bytes of those columns, so any change of a decision or a time shows.
``benchmarks/fingerprints.py`` runs every registered scheduler on small fixed configurations and compares their
fingerprints with a saved baseline.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

from megha.metrics.recorder import TaskRecorder

if TYPE_CHECKING:
    from megha.metrics.result import RunResult

_COLUMNS = ("scheduled", "start", "end", "known", "worker", "launches", "finishes", "preemptions")


def fingerprint_recorder(rec: TaskRecorder) -> str:
    """SHA-256 (first 16 hex digits) of a recorder's per-task columns."""
    h = hashlib.sha256()
    for name in _COLUMNS:
        col = np.ascontiguousarray(getattr(rec, name))
        h.update(name.encode())
        h.update(str(col.dtype).encode())
        h.update(col.tobytes())
    return h.hexdigest()[:16]


def fingerprint(result: RunResult) -> str:
    """Fingerprint of a :class:`~megha.metrics.result.RunResult` (its recorder's per-task outputs)."""
    return fingerprint_recorder(result.recorder)
