"""Trace loading speed: tasks per second for .tr (text, gzip) and Parquet (prints, no assertions).

python benchmarks/bench_trace.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from megha.samples import resolve
from megha.workload.tracefile import load_workload, write_columnar, write_tr


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        for name in ("GOOG_subtrace", "syn_1000"):
            src = resolve(f"sample:{name}")
            w = load_workload(src)
            plain = Path(d) / f"{name}.tr"
            pq = Path(d) / f"{name}.parquet"
            write_tr(w, plain)
            write_columnar(w, pq)
            for label, path in (("tr.gz", src), ("tr", plain), ("parquet", pq)):
                dt = timed(lambda p=path: load_workload(p))
                print(f"{name:>14} {label:>8}: {w.n_tasks:>9,} tasks in {dt:6.3f} s = {w.n_tasks / dt:>12,.0f} tasks/s")


if __name__ == "__main__":
    main()
