"""Synthetic files in the public traces' schemas, with the answer a converter must find (tests, benchmarks).

Each writer draws jobs with a seeded generator, writes their events or rows in the source's exact CSV layout
(headerless for Google 2011 and Alibaba 2018, a header for the Google 2019 export; optionally gzipped and split into
parts) and returns the expected Megha tasks: per finished task its source job, duration (s) and requests in the
units the converter writes. Some tasks are evicted and rescheduled, some killed (not finished), and a few jobs were
submitted before the trace began, as in the real traces.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


@dataclass
class Expected:
    """What a converter should produce: one entry per finished task."""

    job: np.ndarray  # source job id
    index: np.ndarray  # task index within the job
    arrival: np.ndarray  # job arrival, seconds (before the shift to 0)
    duration: np.ndarray  # seconds
    cpu: np.ndarray
    mem: np.ndarray
    priority: np.ndarray


def _write(path: Path, lines: list[str] | str) -> None:
    text = lines if isinstance(lines, str) else "".join(lines)
    data = text.encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, compresslevel=1, mtime=0) if path.suffix == ".gz" else data)


def _csv_text(table: pa.Table, header: bool = False) -> str:
    import pyarrow.csv as pcsv

    buf = pa.BufferOutputStream()
    pcsv.write_csv(table, buf, pcsv.WriteOptions(include_header=header, quoting_style="none"))
    return buf.getvalue().to_pybytes().decode()


def google_events(
    n_jobs: int,
    seed: int = 0,
    tasks_per_job: int = 8,
    evict_fraction: float = 0.1,
    kill_fraction: float = 0.05,
    early_jobs: int = 1,
) -> tuple[dict[str, np.ndarray], Expected]:
    """Event columns (time-sorted) for ``n_jobs`` jobs, and the expected finished tasks. Times in µs."""
    rng = np.random.default_rng(seed)
    ntask = rng.integers(1, 2 * tasks_per_job, size=n_jobs)
    job_ids = 6_000_000_000 + np.cumsum(rng.integers(1, 1000, size=n_jobs))
    submit = 600_000_000 + np.sort(rng.integers(0, 3_600_000_000, size=n_jobs))
    if early_jobs:
        submit[:early_jobs] = 0  # submitted before the trace window
    T = int(ntask.sum())
    tj = np.repeat(np.arange(n_jobs), ntask)
    tidx = np.arange(T) - np.repeat(np.cumsum(ntask) - ntask, ntask)
    prio = rng.integers(0, 12, size=n_jobs)[tj]
    user = rng.integers(0, 50, size=n_jobs)[tj]
    cpu = np.round(rng.uniform(0.01, 0.5, size=T), 5)
    mem = np.round(rng.uniform(0.001, 0.3, size=T), 5)
    sub_t = submit[tj]
    sched1 = np.maximum(sub_t, 600_000_000) + rng.integers(1_000, 5_000_000, size=T)
    sched1[sub_t == 0] = np.maximum(sched1[sub_t == 0], 600_000_001)
    evict = rng.random(T) < evict_fraction
    kill = (rng.random(T) < kill_fraction) & ~evict
    dur = rng.integers(1_000_000, 600_000_000, size=T)
    ev_t = sched1 + rng.integers(1, 1_000_000, size=T)  # eviction time
    sched2 = ev_t + rng.integers(1_000, 2_000_000, size=T)
    final_sched = np.where(evict, sched2, sched1)
    end = final_sched + dur
    rows_t, rows_i, rows_type = [sub_t, sched1], [np.arange(T), np.arange(T)], [np.zeros(T), np.ones(T)]
    i_ev = np.flatnonzero(evict)
    rows_t += [ev_t[i_ev], ev_t[i_ev] + 1, sched2[i_ev]]
    rows_i += [i_ev, i_ev, i_ev]
    rows_type += [np.full(i_ev.size, 2), np.full(i_ev.size, 0), np.full(i_ev.size, 1)]
    rows_t.append(end)
    rows_i.append(np.arange(T))
    rows_type.append(np.where(kill, 5, 4))
    t = np.concatenate(rows_t).astype(np.int64)
    ti = np.concatenate(rows_i).astype(np.int64)
    ty = np.concatenate(rows_type).astype(np.int64)
    order = np.lexsort((ty, t))
    t, ti, ty = t[order], ti[order], ty[order]
    cols = {
        "time": t,
        "job": job_ids[tj[ti]],
        "index": tidx[ti],
        "type": ty,
        "user": user[ti],
        "priority": prio[ti],
        "cpu": cpu[ti],
        "mem": mem[ti],
    }
    done = ~kill
    arr_job = np.where(submit == 0, 0, submit)  # submit at 0 counts as arrival 0 (first SUBMIT event)
    exp = Expected(
        job=job_ids[tj][done],
        index=tidx[done],
        arrival=(arr_job[tj] / 1e6)[done],
        duration=(dur / 1e6)[done],
        cpu=cpu[done],
        mem=mem[done],
        priority=prio[done],
    )
    return cols, exp


def write_google2011(
    root: Path, n_jobs: int, seed: int = 0, parts: int = 2, n_machines: int = 20, gz: bool = True, **kw: Any
) -> Expected:
    """A Google 2011 trace directory: ``task_events/part-0000i-of-0000n.csv.gz`` and ``machine_events/``."""
    cols, exp = google_events(n_jobs, seed, **kw)
    n = cols["time"].size
    users = np.array([f"user{u}" for u in range(int(cols["user"].max()) + 1)])[cols["user"]]
    empty = pa.nulls(n, pa.int64())
    table = pa.table(
        {
            "t": cols["time"],
            "mi": empty,
            "j": cols["job"],
            "i": cols["index"],
            "m": empty,
            "ty": cols["type"],
            "u": users,
            "sc": np.ones(n, dtype=np.int64),
            "p": cols["priority"],
            "c": cols["cpu"],
            "r": cols["mem"],
            "d": np.full(n, 0.0001),
            "dm": np.zeros(n, np.int64),
        }
    )
    bounds = np.linspace(0, n, parts + 1).astype(int)
    suffix = ".csv.gz" if gz else ".csv"
    for p in range(parts):
        _write(
            root / "task_events" / f"part-{p:05d}-of-{parts:05d}{suffix}",
            _csv_text(table.slice(bounds[p], bounds[p + 1] - bounds[p])),
        )
    rng = np.random.default_rng(seed + 1)
    mrows = []
    for m in range(n_machines):
        mrows.append(f"0,{1000 + m},0,plat{m % 3},{[0.5, 0.25, 1.0][m % 3]},{[0.4995, 0.2493, 1.0][m % 3]}\n")
    mrows.append(f"{int(rng.integers(1e9, 2e9))},{1000},2,plat0,0.5,0.749\n")  # an update of machine 1000
    mrows.append(f"{int(rng.integers(2e9, 3e9))},{1001},1,,,\n")  # a removal (machine stays in the list)
    _write(root / "machine_events" / f"part-00000-of-00001{suffix}", mrows)
    return exp


def write_google2019(
    root: Path, n_jobs: int, seed: int = 0, shuffle: bool = True, gz: bool = False, names: bool = False, **kw: Any
) -> Expected:
    """An exported ``instance_events`` CSV (with header; unordered like a BigQuery export) and ``machine_events``."""
    cols, exp = google_events(n_jobs, seed, **kw)
    code = {0: 0, 1: 3, 2: 4, 4: 6, 5: 7}  # 2011 codes → 2019 codes
    ty = np.vectorize(code.get)(cols["type"])
    if names:
        inv = {0: "SUBMIT", 3: "SCHEDULE", 4: "EVICT", 6: "FINISH", 7: "KILL"}
        tys = np.vectorize(inv.get)(ty).astype(str)
    else:
        tys = ty.astype(str)
    n = ty.size
    order = np.random.default_rng(seed + 7).permutation(n) if shuffle else np.arange(n)
    table = pa.table(
        {
            "time": cols["time"],
            "type": tys,
            "collection_id": cols["job"],
            "instance_index": cols["index"],
            "priority": cols["priority"],
            "collection_type": np.zeros(n, np.int64),
            "resource_request.cpus": cols["cpu"],
            "resource_request.memory": cols["mem"],
        }
    ).take(order)
    suffix = ".csv.gz" if gz else ".csv"
    _write(root / f"instance_events-000000000000{suffix}", _csv_text(table, header=True))
    m = ["time,machine_id,type,capacity.cpus,capacity.memory\n"]
    m += [f"0,{5000 + i},1,{[0.5, 1.0][i % 2]},{[0.25, 0.5][i % 2]}\n" for i in range(10)]
    _write(root / f"machine_events-000000000000{suffix}", m)
    return exp


def write_alibaba2018(root: Path, n_tasks: int, seed: int = 0, gz: bool = False) -> dict[str, np.ndarray]:
    """``batch_task.csv`` and ``machine_meta.csv``; returns the expected rows that are kept (one Megha job each)."""
    rng = np.random.default_rng(seed)
    inst = rng.integers(1, 20, size=n_tasks)
    start = rng.integers(1, 600_000, size=n_tasks)
    dur = rng.integers(1, 5000, size=n_tasks)
    status = np.where(rng.random(n_tasks) < 0.9, "Terminated", "Failed")
    cpu = rng.choice([50, 100, 200, 400], size=n_tasks)
    mem = np.round(rng.uniform(0.1, 5.0, size=n_tasks), 2)
    lines = []
    for i in range(n_tasks):
        lines.append(
            f"M{i % 5 + 1},{inst[i]},j_{i // 3},1,{status[i]},{start[i]},{start[i] + dur[i]},{cpu[i]},{mem[i]}\n"
        )
    suffix = ".csv.gz" if gz else ".csv"
    _write(root / f"batch_task{suffix}", lines)
    mm = [f"m_{i + 1},0,{i % 4},{i % 7},96,100,USING\n" for i in range(12)]
    mm.append("m_3,1000,2,5,64,50,USING\n")  # a later record of machine 3
    _write(root / f"machine_meta{suffix}", mm)
    keep = status == "Terminated"
    return {
        "arrival": start[keep].astype(float),
        "instances": inst[keep],
        "duration": dur[keep].astype(float),
        "cpu": cpu[keep] / 100.0,
        "mem": mem[keep] / 100.0,
    }
