"""Alibaba cluster trace 2018 (cluster-trace-v2018): ``batch_task.csv`` and ``machine_meta.csv`` → Megha.

SOURCE is the directory holding ``batch_task.csv[.gz]`` (and ``machine_meta.csv[.gz]``), or the batch_task file.
No header; the columns are:

* batch_task: task_name, instance_num, job_name, task_type, status, start_time, end_time, plan_cpu, plan_mem;
* machine_meta: machine_id, time_stamp, failure_domain_1, failure_domain_2, cpu_num, mem_size, status.

A batch *task* is a stage of a job's DAG with ``instance_num`` identical instances, so each terminated task
becomes one Megha job arriving at its ``start_time`` (its dependencies were met then), with ``instance_num``
tasks of duration ``end_time − start_time`` (batch_task has no per-instance times; batch_instance.csv does, but
is ~100× larger). Requests: ``plan_cpu`` is in hundredths of a core (100 = 1 core) and is written as cores;
``plan_mem`` is a percentage of the normalized maximum machine memory and is written as a fraction (so a
machine's ``mem_size`` of 100 becomes 1.0). Rows that are not ``Terminated``, or whose times are missing or go
backwards, are dropped and counted. Machines: the last record of each machine (``cpu_num`` cores,
``mem_size``/100 memory).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.workload.converters import _csv
from megha.workload.converters._csv import Col, Schema

if TYPE_CHECKING:
    from megha.workload.converters.machines import MachineTable

BATCH_TASK = Schema(
    "Alibaba 2018 batch_task",
    (
        Col("task_name", "str"),
        Col("instance_num", "float"),
        Col("job_name", "str", False),
        Col("task_type", "str"),
        Col("status", "str"),
        Col("start_time", "float"),
        Col("end_time", "float"),
        Col("plan_cpu", "float"),
        Col("plan_mem", "float"),
    ),
    use=("instance_num", "job_name", "status", "start_time", "end_time", "plan_cpu", "plan_mem"),
)
MACHINE_META = Schema(
    "Alibaba 2018 machine_meta",
    (
        Col("machine_id", "str", False),
        Col("time_stamp", "float"),
        Col("failure_domain_1", "str"),
        Col("failure_domain_2", "str"),
        Col("cpu_num", "float"),
        Col("mem_size", "float"),
        Col("status", "str"),
    ),
    use=("machine_id", "time_stamp", "cpu_num", "mem_size"),
)


def task_files(source: Path) -> list[Path]:
    """The ``batch_task`` CSV files of an Alibaba 2018 trace at ``source`` (a file or a directory)."""
    return _csv.find_files(source, ["batch_task.csv.gz", "batch_task.csv", "batch_task*.csv*"], "batch_task")


def machine_files(source: Path) -> list[Path]:
    """The trace's ``machine_meta`` CSV file beside ``source``, if there is one."""
    d = source.parent if source.is_file() else source
    return [p for p in (d / "machine_meta.csv.gz", d / "machine_meta.csv") if p.is_file()][:1]


def read_tasks(files: list[Path], progress: _csv.Progress | None) -> tuple[dict[str, np.ndarray], dict[str, int], int]:
    """Terminated batch tasks as columns: arrival (s), instances, duration (s), cpu (cores), mem (fraction)."""
    import pyarrow.compute as pc

    parts: list[tuple[np.ndarray, ...]] = []
    dropped = {"not_terminated": 0, "bad_times": 0, "no_instances": 0}
    rows = 0
    order = 0
    for _path, _rec, b in _csv.stream(files, BATCH_TASK, progress, "batch_task"):
        n = b.num_rows
        rows += n
        status = b.column(b.schema.get_field_index("status"))
        term = pc.fill_null(pc.equal(status, "Terminated"), False).to_numpy(zero_copy_only=False)
        start = _csv.column(b, "start_time", "float")
        end = _csv.column(b, "end_time", "float")
        inst = _csv.column(b, "instance_num", "float")
        ok_time = np.isfinite(start) & np.isfinite(end) & (start > 0) & (end >= start)
        ok_inst = np.isfinite(inst) & (inst >= 1)
        dropped["not_terminated"] += int((~term).sum())
        dropped["bad_times"] += int((term & ~ok_time).sum())
        dropped["no_instances"] += int((term & ok_time & ~ok_inst).sum())
        keep = term & ok_time & ok_inst
        cpu = _csv.column(b, "plan_cpu", "float") / 100.0
        mem = _csv.column(b, "plan_mem", "float") / 100.0
        seq = np.arange(order, order + n, dtype=np.int64)
        order += n
        parts.append(
            (
                start[keep],
                np.rint(inst[keep]).astype(np.int64),
                end[keep] - start[keep],
                cpu[keep],
                mem[keep],
                seq[keep],
            )
        )
    if parts:
        cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    else:
        cols = [np.zeros(0)] * 6
    names = ("arrival", "instances", "duration", "cpu", "mem", "row")
    return dict(zip(names, cols, strict=True)), {k: v for k, v in dropped.items() if v}, rows


def read_machines(files: list[Path], progress: _csv.Progress | None = None) -> MachineTable:
    """Each machine's last record: ``cpu_num`` cores and ``mem_size`` / 100 memory."""
    from megha.workload.converters.machines import MachineTable

    last: dict[str, tuple[float, float, float]] = {}
    for _p, _r, b in _csv.stream(files, MACHINE_META, progress, "machine_meta"):
        ids = b.column(b.schema.get_field_index("machine_id")).to_pylist()
        ts = _csv.column(b, "time_stamp", "float", fill=0.0).tolist()
        cpu = _csv.column(b, "cpu_num", "float").tolist()
        mem = _csv.column(b, "mem_size", "float").tolist()
        for m, t, c, r in zip(ids, ts, cpu, mem, strict=True):
            prev = last.get(m)
            if c != c or r != r:
                continue
            if prev is None or t >= prev[0]:
                last[m] = (t, c, r / 100.0)
    ids = sorted(last, key=lambda m: (len(m), m))
    capacity = np.array([[last[m][1], last[m][2]] for m in ids], dtype=np.float64).reshape(-1, 2)
    return MachineTable(ids=ids, capacity=capacity, source="alibaba2018 machine_meta")
