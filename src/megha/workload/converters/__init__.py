"""Converters from public cluster traces to Megha's columnar job table (and a cluster file from their machines).

    megha import-trace SOURCE --format google2011|google2019|alibaba2018 --out OUT.parquet [--machines OUT.json]

Formats (details in each module): :mod:`.google2011` (``task_events`` + ``machine_events``), :mod:`.google2019`
(exported ``instance_events`` + ``machine_events``), :mod:`.alibaba2018` (``batch_task.csv`` +
``machine_meta.csv``). Inputs are read as a stream of Arrow batches (plain or gzipped CSV), so a multi-GB source
converts in memory bounded by the output (about 50 bytes per kept task) plus the tasks running at a time; a
progress bar shows bytes read. The output is the Parquet job table of :mod:`megha.workload.tracefile`
(``job, arrival, mean_duration, duration, cpu, mem[, priority, user]``) that ``--trace OUT.parquet`` and
``--resources`` use directly; the machine list becomes a Megha cluster file with per-machine capacities
(:mod:`.machines`). Wrong files fail with the expected columns; a malformed value names file, line and column.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from megha.errors import InputError

if TYPE_CHECKING:
    from megha.workload.converters.events import MatchedTasks
    from megha.workload.converters.google2011 import UserCodes

FORMATS = ("google2011", "google2019", "alibaba2018")


@dataclass
class ConvertReport:
    """What a conversion read, kept, dropped and wrote."""

    format: str
    inputs: list[str]
    out: Path
    records: int = 0
    jobs: int = 0
    tasks: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    machines: int | None = None
    machines_out: Path | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (the first 20 input files named)."""
        return {
            "format": self.format,
            "inputs": self.inputs[:20],
            "n_inputs": len(self.inputs),
            "records": self.records,
            "jobs": self.jobs,
            "tasks": self.tasks,
            "dropped": self.dropped,
            "machines": self.machines,
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }

    def describe(self) -> str:
        """The report as text: what was read and written, what was dropped, the machines written, the notes."""
        lines = [
            f"{self.format}: read {self.records:,} records from {len(self.inputs)} file(s) in "
            f"{self.seconds:.1f} s; wrote {self.jobs:,} jobs / {self.tasks:,} tasks to {self.out}"
        ]
        if self.dropped:
            lines.append("dropped: " + ", ".join(f"{k} {v:,}" for k, v in sorted(self.dropped.items())))
        if self.machines_out is not None:
            lines.append(f"machines: {self.machines:,} written to {self.machines_out}")
        lines.extend(self.notes)
        return "\n".join(lines)


def _events(fmt: str, files: list[Path], progress: bool) -> tuple[MatchedTasks, UserCodes, list[str]]:
    from megha.workload.converters import google2011, google2019
    from megha.workload.converters._csv import Progress
    from megha.workload.converters.events import EventMatcher, OutOfOrder

    mod = google2011 if fmt == "google2011" else google2019
    notes = []
    for ordered in (True, False):
        bar = Progress(sum(p.stat().st_size for p in files), fmt, progress)
        users = google2011.UserCodes()
        matcher = EventMatcher(mod.CODES, ordered=ordered)
        try:
            mod.feed_events(matcher, files, bar, users)
        except OutOfOrder as e:
            notes.append(f"note: the events are not in time order ({e}); matched after sorting instead")
            continue
        except ValueError as e:
            raise InputError(f"{files[0].parent}: {e}") from None
        finally:
            bar.close()
        return matcher.result(), users, notes
    raise AssertionError("unreachable")


def _write_events(
    res: MatchedTasks, users: UserCodes, out: Path, name: str, meta: dict, max_jobs: int | None
) -> dict[str, int]:
    from megha.workload.converters.events import INT64_MAX
    from megha.workload.converters.table import write_job_table

    slot = res.job_slot
    if slot.size == 0:
        raise InputError("no task ran from SCHEDULE to FINISH in the source: nothing to write")
    first_sched = np.full(res.job_ids.size, INT64_MAX, dtype=np.int64)
    np.minimum.at(first_sched, slot, res.t_schedule)
    arrival_us = np.minimum(res.job_submit, first_sched)
    arrival = arrival_us[slot] / 1e6
    duration = (res.t_finish - res.t_schedule) / 1e6
    prio = res.priority if (res.priority >= 0).any() else None
    user = res.job_user[slot] if (res.job_user >= 0).any() else None
    return write_job_table(
        out,
        name,
        slot,
        arrival,
        duration,
        res.cpu,
        res.mem,
        priority=prio,
        user=user,
        tie=res.index,
        meta=meta,
        max_jobs=max_jobs,
    )


def convert(
    source: str | Path,
    fmt: str,
    out: str | Path,
    machines: str | Path | None = None,
    max_jobs: int | None = None,
    lms: int = 1,
    gms: int = 1,
    constraints_seed: int | None = 0,
    progress: bool = True,
) -> ConvertReport:
    """Convert a trace; see the module docstring. ``constraints_seed=None`` gives machines every constraint."""
    from megha.workload.converters import alibaba2018, google2011, google2019
    from megha.workload.converters._csv import Progress
    from megha.workload.converters.table import write_job_table

    t0 = time.perf_counter()
    source = Path(source)
    out = Path(out)
    if fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r}; known: {', '.join(FORMATS)}")
    if not out.name.endswith((".parquet", ".pq")):
        raise InputError(f"{out}: the job table is written as Parquet: use a .parquet file name")
    if max_jobs is not None and max_jobs < 1:
        raise InputError(f"--max-jobs must be at least 1, got {max_jobs}")
    mod = {"google2011": google2011, "google2019": google2019, "alibaba2018": alibaba2018}[fmt]
    files = mod.task_files(source)
    rep = ConvertReport(format=fmt, inputs=[str(p) for p in files], out=out)
    name = out.name.removesuffix(".parquet").removesuffix(".pq")
    if fmt == "alibaba2018":
        bar = Progress(sum(p.stat().st_size for p in files), fmt, progress)
        try:
            cols, dropped, rows = alibaba2018.read_tasks(files, bar)
        finally:
            bar.close()
        rep.records = rows
        rep.dropped = dropped
        if cols["arrival"].size == 0:
            raise InputError(f"{files[0]}: no terminated batch task with valid times: nothing to write")
        n = cols["instances"]
        counts = write_job_table(
            out,
            name,
            np.repeat(cols["row"], n),
            np.repeat(cols["arrival"], n),
            np.repeat(cols["duration"], n),
            np.repeat(cols["cpu"], n),
            np.repeat(cols["mem"], n),
            meta=rep.as_dict(),
            max_jobs=max_jobs,
        )
    else:
        res, users, notes = _events(fmt, files, progress)
        rep.notes.extend(notes)
        rep.records = res.events
        rep.dropped = dict(res.dropped)
        counts = _write_events(res, users, out, name, rep.as_dict(), max_jobs)
    rep.jobs, rep.tasks = counts["jobs"], counts["tasks"]
    if machines is not None:
        from megha.workload.converters.machines import write_cluster_json

        mfiles = mod.machine_files(source)
        if not mfiles:
            want = {
                "google2011": "machine_events/",
                "google2019": "machine_events*.csv",
                "alibaba2018": "machine_meta.csv",
            }[fmt]
            raise InputError(f"{source}: --machines given but no machine file found next to the tasks ({want})")
        table = mod.read_machines(mfiles)
        rep.dropped.update(table.dropped)
        rep.machines = table.n
        rep.machines_out = write_cluster_json(table, machines, lms=lms, gms=gms, constraints_seed=constraints_seed)
        rep.inputs.extend(str(p) for p in mfiles)
    rep.seconds = time.perf_counter() - t0
    return rep
