"""Google cluster trace 2019 (clusterdata_2019): exported ``instance_events`` (and ``machine_events``) → Megha.

The 2019 trace is published as BigQuery tables; export ``instance_events`` as CSV with a header, flattening the
request record (``SELECT time, type, collection_id, instance_index, priority, collection_type,
resource_request.cpus AS cpus, resource_request.memory AS memory FROM ...``; BigQuery's own flattened names
``resource_request.cpus`` / ``resource_request_cpus`` are accepted too). SOURCE is such a file, or a directory of
``instance_events*.csv[.gz]`` parts (and optionally ``machine_events*.csv[.gz]`` with ``machine_id`` and
``capacity.cpus`` / ``capacity.memory``). Exports are not in time order: the converter notices and matches
after sorting (see :mod:`.events`). Add ``ORDER BY time`` to the export to convert in bounded memory.

Event types (numbers or names): 0 SUBMIT, 1 QUEUE, 2 ENABLE, 3 SCHEDULE, 4 EVICT, 5 FAIL, 6 FINISH, 7 KILL,
8 LOST, 9 UPDATE_PENDING, 10 UPDATE_RUNNING. Instances of alloc sets (``collection_type`` 1) are reservations,
not tasks, and are skipped. Times are µs; requests are in Google's normalized compute/memory units.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.errors import InputError
from megha.workload.converters import _csv
from megha.workload.converters._csv import Col, Schema
from megha.workload.converters.events import EventCodes

if TYPE_CHECKING:
    import pyarrow as pa

    from megha.workload.converters.events import EventMatcher
    from megha.workload.converters.google2011 import UserCodes
    from megha.workload.converters.machines import MachineTable

TYPE_NAMES = {
    "SUBMIT": 0,
    "QUEUE": 1,
    "ENABLE": 2,
    "SCHEDULE": 3,
    "EVICT": 4,
    "FAIL": 5,
    "FINISH": 6,
    "KILL": 7,
    "LOST": 8,
    "UPDATE_PENDING": 9,
    "UPDATE_RUNNING": 10,
}
CODES = EventCodes(submit=0, schedule=3, finish=6, ends=(4, 5, 7, 8))

INSTANCE_EVENTS = Schema(
    "Google 2019 instance_events export",
    (
        Col("time", "int", False),
        Col("type", "str", False),
        Col("collection_id", "int", False),
        Col("instance_index", "int", False),
        Col("priority", "int"),
        Col("collection_type", "int"),
        Col("user", "str"),
        Col("cpus", "float", False, ("resource_request.cpus", "resource_request_cpus", "request_cpus", "cpu_request")),
        Col(
            "memory",
            "float",
            False,
            ("resource_request.memory", "resource_request_memory", "request_memory", "memory_request"),
        ),
    ),
    use=("time", "type", "collection_id", "instance_index", "priority", "collection_type", "user", "cpus", "memory"),
    header=True,
)
MACHINE_EVENTS = Schema(
    "Google 2019 machine_events export",
    (
        Col("time", "int"),
        Col("machine_id", "int", False),
        Col("type", "str"),
        Col("cpus", "float", False, ("capacity.cpus", "capacity_cpus")),
        Col("memory", "float", False, ("capacity.memory", "capacity_memory")),
    ),
    use=("time", "machine_id", "type", "cpus", "memory"),
    header=True,
)


def task_files(source: Path) -> list[Path]:
    """The ``instance_events`` CSV files of a Google 2019 trace at ``source``."""
    return _csv.find_files(
        source, ["instance_events*.csv.gz", "instance_events*.csv", "*.csv.gz", "*.csv"], "instance_events"
    )


def machine_files(source: Path) -> list[Path]:
    """The trace's ``machine_events`` CSV files beside ``source``."""
    d = source.parent if source.is_file() else source
    return sorted(p for p in d.glob("machine_events*.csv*") if p.is_file())


def event_types(arr: pa.Array, path: Path) -> np.ndarray:
    """The ``type`` column (numbers or names) as event codes."""
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(arr)
    lut = []
    for v in enc.dictionary.to_pylist():
        s = (v or "").strip()
        if s.lstrip("-").isdigit():
            lut.append(int(s))
        elif s.upper() in TYPE_NAMES:
            lut.append(TYPE_NAMES[s.upper()])
        else:
            raise InputError(
                f"{path}: column 'type': unknown event type {s!r} (expected 0-10 or {', '.join(TYPE_NAMES)})"
            )
    idx = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    lut_a = np.array(lut or [-1], dtype=np.int64)
    return np.where(idx >= 0, lut_a[np.maximum(idx, 0)], -1)


def feed_events(matcher: EventMatcher, files: list[Path], progress: _csv.Progress | None, users: UserCodes) -> None:
    """Feed every instance event of ``files`` to ``matcher`` (users coded by ``users``)."""
    for path, _rec, b in _csv.stream(files, INSTANCE_EVENTS, progress, "instance_events"):
        typ = event_types(b.column(b.schema.get_field_index("type")), path)
        ctype = _csv.column(b, "collection_type", "int", fill=0)
        uidx = b.schema.get_field_index("user")
        user = users.encode(b.column(uidx)) if uidx >= 0 else np.full(b.num_rows, -1, dtype=np.int64)
        cols = dict(
            t=_csv.column(b, "time", "int"),
            job=_csv.column(b, "collection_id", "int"),
            idx=_csv.column(b, "instance_index", "int"),
            typ=typ,
            cpu=_csv.column(b, "cpus", "float"),
            mem=_csv.column(b, "memory", "float"),
            prio=_csv.column(b, "priority", "int"),
            user=user,
        )
        alloc = ctype == 1
        if alloc.any():
            cols = {k: v[~alloc] for k, v in cols.items()}
        matcher.feed(**cols)


def read_machines(files: list[Path], progress: _csv.Progress | None = None) -> MachineTable:
    """Every machine in the export with its last known capacity (by time)."""
    from megha.workload.converters.machines import MachineTable

    cap: dict[int, list[float]] = {}
    last_t: dict[int, int] = {}
    for _p, _r, b in _csv.stream(files, MACHINE_EVENTS, progress, "machine_events"):
        t = _csv.column(b, "time", "int", fill=0).tolist()
        mid = _csv.column(b, "machine_id", "int").tolist()
        cpus = _csv.column(b, "cpus", "float").tolist()
        mem = _csv.column(b, "memory", "float").tolist()
        for ti, m, c, r in zip(t, mid, cpus, mem, strict=True):
            cur = cap.setdefault(m, [np.nan, np.nan])
            newer = ti >= last_t.get(m, -1)
            if newer:
                last_t[m] = ti
            if c == c and (newer or cur[0] != cur[0]):
                cur[0] = c
            if r == r and (newer or cur[1] != cur[1]):
                cur[1] = r
    ids = sorted(m for m, (c, r) in cap.items() if c == c and r == r)
    missing = len(cap) - len(ids)
    capacity = np.array([cap[m] for m in ids], dtype=np.float64).reshape(-1, 2)
    return MachineTable(
        ids=[str(m) for m in ids],
        capacity=capacity,
        source="google2019 machine_events",
        dropped={"machines_without_capacity": missing} if missing else {},
    )
