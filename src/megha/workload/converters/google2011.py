"""Google cluster trace 2011 (clusterdata-2011-2): ``task_events`` and ``machine_events`` → Megha.

SOURCE is the trace directory (``task_events/part-*-of-*.csv.gz``, ``machine_events/part-*.csv.gz``), a
``task_events`` directory, or task-event files. The files have no header; the columns are (Google's schema):

* task_events: timestamp (µs), missing info, job ID, task index, machine ID, event type, user, scheduling class,
  priority, CPU request, memory request, disk request, different-machines restriction;
* machine_events: timestamp, machine ID, event type, platform ID, CPUs, memory.

Event types: 0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST, 7 UPDATE_PENDING, 8 UPDATE_RUNNING.
Durations and requests come from SCHEDULE → FINISH (see :mod:`.events`); users become integer codes in order of
appearance. Machines: every machine that was ever added, with its last known capacity (CPUs and memory are
normalized by Google to the largest machine, like the task requests).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.workload.converters import _csv
from megha.workload.converters._csv import Col, Schema
from megha.workload.converters.events import EventCodes

if TYPE_CHECKING:
    import pyarrow as pa

    from megha.workload.converters.events import EventMatcher
    from megha.workload.converters.machines import MachineTable

TASK_EVENTS = Schema(
    "Google 2011 task_events",
    (
        Col("timestamp", "int", False),
        Col("missing_info", "int"),
        Col("job_id", "int", False),
        Col("task_index", "int", False),
        Col("machine_id", "int"),
        Col("event_type", "int", False),
        Col("user", "str"),
        Col("scheduling_class", "int"),
        Col("priority", "int"),
        Col("cpu_request", "float"),
        Col("memory_request", "float"),
        Col("disk_request", "float"),
        Col("different_machines", "int"),
    ),
    use=("timestamp", "job_id", "task_index", "event_type", "user", "priority", "cpu_request", "memory_request"),
)
MACHINE_EVENTS = Schema(
    "Google 2011 machine_events",
    (
        Col("timestamp", "int", False),
        Col("machine_id", "int", False),
        Col("event_type", "int", False),
        Col("platform_id", "str"),
        Col("cpus", "float"),
        Col("memory", "float"),
    ),
    use=("timestamp", "machine_id", "event_type", "cpus", "memory"),
)
CODES = EventCodes(submit=0, schedule=1, finish=4, ends=(2, 3, 5, 6))
MACHINE_ADD, MACHINE_REMOVE, MACHINE_UPDATE = 0, 1, 2


def task_files(source: Path) -> list[Path]:
    """The ``task_events`` CSV files of a Google 2011 trace at ``source`` (a file, the directory, or the trace's
    root)."""
    if source.is_dir() and (source / "task_events").is_dir():
        source = source / "task_events"
    return _csv.find_files(source, ["part-*.csv.gz", "part-*.csv", "*.csv.gz", "*.csv"], "task_events")


def machine_files(source: Path) -> list[Path]:
    """The trace's ``machine_events`` CSV files beside ``source`` (none if not found)."""
    if source.is_file():
        source = source.parent
    for d in (source / "machine_events", source.parent / "machine_events"):
        if d.is_dir():
            return _csv.find_files(d, ["part-*.csv.gz", "part-*.csv", "*.csv.gz", "*.csv"], "machine_events")
    return []


class UserCodes:
    """User names → small integers, in order of first appearance."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def encode(self, arr: pa.Array) -> np.ndarray:
        """Each user name of ``arr`` as its integer code (new names get the next codes; a missing name is -1)."""
        import pyarrow.compute as pc

        enc = pc.dictionary_encode(arr)
        dic = enc.dictionary.to_pylist()
        lut = np.array(
            [self.codes.setdefault(u, len(self.codes)) if u is not None else -1 for u in dic] or [-1], dtype=np.int64
        )
        idx = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        out = np.where(idx >= 0, lut[np.maximum(idx, 0)], -1)
        return out


def feed_events(matcher: EventMatcher, files: list[Path], progress: _csv.Progress | None, users: UserCodes) -> None:
    """Feed every task event of ``files`` to ``matcher`` (users coded by ``users``)."""
    for _path, _rec, b in _csv.stream(files, TASK_EVENTS, progress, "task_events"):
        matcher.feed(
            t=_csv.column(b, "timestamp", "int"),
            job=_csv.column(b, "job_id", "int"),
            idx=_csv.column(b, "task_index", "int"),
            typ=_csv.column(b, "event_type", "int"),
            cpu=_csv.column(b, "cpu_request", "float"),
            mem=_csv.column(b, "memory_request", "float"),
            prio=_csv.column(b, "priority", "int"),
            user=users.encode(b.column(b.schema.get_field_index("user"))),
        )


def read_machines(files: list[Path], progress: _csv.Progress | None = None) -> MachineTable:
    """Every machine ever added, with its last known CPU and memory capacity."""
    from megha.workload.converters.machines import MachineTable

    cap: dict[int, list[float]] = {}
    for _p, _r, b in _csv.stream(files, MACHINE_EVENTS, progress, "machine_events"):
        mid = _csv.column(b, "machine_id", "int").tolist()
        typ = _csv.column(b, "event_type", "int").tolist()
        cpus = _csv.column(b, "cpus", "float").tolist()
        mem = _csv.column(b, "memory", "float").tolist()
        for m, t, c, r in zip(mid, typ, cpus, mem, strict=True):
            if t == MACHINE_REMOVE:
                cap.setdefault(m, [np.nan, np.nan])
                continue
            cur = cap.setdefault(m, [np.nan, np.nan])
            if c == c:
                cur[0] = c
            if r == r:
                cur[1] = r
    ids = [m for m, (c, r) in cap.items() if c == c and r == r]
    missing = len(cap) - len(ids)
    capacity = np.array([cap[m] for m in ids], dtype=np.float64).reshape(-1, 2)
    return MachineTable(
        ids=[str(m) for m in ids],
        capacity=capacity,
        source="google2011 machine_events",
        dropped={"machines_without_capacity": missing} if missing else {},
    )
