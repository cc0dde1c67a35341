"""Write Megha's columnar job table (the format of :func:`megha.workload.tracefile.write_columnar`).

One Parquet row per task: ``job`` (0..J-1 in arrival order), ``arrival`` (the job's arrival, seconds from the
first arrival), ``mean_duration`` (the job's mean task duration), ``duration`` (seconds), ``cpu`` and ``mem``
(the task's requests, in the source's units), and ``priority`` / ``user`` when the source has them. The schema
metadata holds the workload name (``megha.workload``) and the conversion report (``megha.convert``, JSON).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from megha.errors import InputError


def write_job_table(
    path: str | Path,
    name: str,
    job_key: np.ndarray,
    arrival: np.ndarray,
    duration: np.ndarray,
    cpu: np.ndarray,
    mem: np.ndarray,
    priority: np.ndarray | None = None,
    user: np.ndarray | None = None,
    tie: np.ndarray | None = None,
    meta: dict[str, Any] | None = None,
    max_jobs: int | None = None,
) -> dict[str, int]:
    """Sort tasks into jobs by (arrival, job_key, tie), renumber jobs 0..J-1, shift time to 0 and write Parquet.

    ``job_key`` identifies a task's job; ``arrival`` is per task (its job's arrival, seconds). ``max_jobs`` keeps
    the earliest jobs. Returns ``{"jobs": J, "tasks": T}``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = int(duration.size)
    if n == 0:
        raise InputError("the source has no finished task with a known duration: nothing to write")
    keys = [job_key, arrival] if tie is None else [tie, job_key, arrival]
    order = np.lexsort(keys)
    jk = job_key[order]
    starts = np.r_[True, jk[1:] != jk[:-1]]
    job = np.cumsum(starts) - 1
    if max_jobs is not None and int(job[-1]) + 1 > max_jobs:
        cut = int(np.searchsorted(job, max_jobs))
        order, job, starts = order[:cut], job[:cut], starts[:cut]
    arr = arrival[order]
    arr = arr - arr.min()
    dur = duration[order].astype(np.float64)
    first = np.flatnonzero(starts)
    counts = np.diff(np.r_[first, job.size])
    mean = np.repeat(np.add.reduceat(dur, first) / counts, counts)
    cols = {
        "job": pa.array(job.astype(np.int64)),
        "arrival": pa.array(arr.astype(np.float64)),
        "mean_duration": pa.array(mean),
        "duration": pa.array(dur),
        "cpu": pa.array(np.nan_to_num(cpu[order].astype(np.float64), nan=0.0)),
        "mem": pa.array(np.nan_to_num(mem[order].astype(np.float64), nan=0.0)),
    }
    if priority is not None:
        cols["priority"] = pa.array(priority[order].astype(np.int32))
    if user is not None:
        cols["user"] = pa.array(user[order].astype(np.int32))
    table = pa.table(cols)
    md = {b"megha.workload": name.encode()}
    if meta:
        md[b"megha.convert"] = json.dumps(meta, default=str).encode()
    table = table.replace_schema_metadata(md)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(p))
    return {"jobs": int(job[-1]) + 1, "tasks": int(job.size)}
