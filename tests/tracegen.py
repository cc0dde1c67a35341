"""Small workloads for tests: write ``.tr`` traces of hand-written or generated jobs (one helper for every test)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import strategies as st


def write_trace(jobs, path: Path | None = None) -> str:
    """A ``.tr`` trace of ``(arrival, [durations])`` jobs, in ``path`` or a fresh temporary directory."""
    if path is None:
        path = Path(tempfile.mkdtemp()) / "w.tr"
    lines = [f"{a} {len(d)} {float(np.mean(d))} " + " ".join(map(str, d)) for a, d in jobs]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def job_strategy(max_arrival: float = 15.0, max_duration: float = 6.0, max_tasks: int = 10):
    """Jobs as ``(arrival, [durations])``, times rounded to milliseconds."""
    return st.tuples(
        st.floats(0, max_arrival, allow_nan=False).map(lambda x: round(x, 3)),
        st.lists(
            st.floats(0.01, max_duration, allow_nan=False).map(lambda x: round(x, 3)), min_size=1, max_size=max_tasks
        ),
    )
