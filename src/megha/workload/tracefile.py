"""Trace files: the reference simulators' ``.tr`` text format and Megha's columnar Parquet format.

``.tr`` (used by the Megha, Pigeon, Eagle and Sparrow simulators): one job per line, whitespace separated::

    arrival_s  num_tasks  mean_task_duration_s  d_1 ... d_n

Reference quirks are options: ``truncate=True`` truncates every duration to whole seconds as the reference
code does (``int(float(x))``); ``dephase=True`` (default, as the reference) shifts the k-th job sharing an
arrival time by ``+0.01 s × k``. Malformed input raises :class:`~megha.errors.InputError` naming the file,
the line number and the field.

The columnar format is one Parquet row per task with columns ``job``, ``arrival``, ``mean_duration``,
``duration`` and optionally ``constraints`` (uint32 mask), ``user``, ``priority`` and one column per
resource (``cpu``, ``mem``, …) — the same table the public-trace converters produce.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np

from megha.errors import InputError
from megha.model.workload import Workload

TRACE_SUFFIXES = (".tr", ".tr.gz", ".txt")
#: the largest arrival time or task duration accepted (about 31.7 years): the simulator's float clock keeps
#: sub-microsecond resolution up to here, and a longer task would keep every scheduler busy for ever
MAX_SECONDS = 1e9
COLUMNAR_SUFFIXES = (".parquet", ".pq")
_RESOURCE_COLUMNS = ("cpu", "mem", "gpu", "disk")


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read trace: {e.strerror or e}") from e
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except EOFError as e:  # the stream stops before its end marker
            raise InputError(f"{path}: truncated gzip file ({e}); was the download or copy cut short?") from None
        except OSError as e:
            raise InputError(f"{path}: not a valid gzip file: {e}") from e
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a text file (byte {e.start} is not UTF-8)") from e


def _number(path: Path, lineno: int, field: str, tok: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise InputError(f"{path}:{lineno}: field '{field}': {tok!r} is not a number") from None
    if not math.isfinite(v):
        raise InputError(f"{path}:{lineno}: field '{field}': {tok!r} is not a finite number")
    if v < 0:
        raise InputError(f"{path}:{lineno}: field '{field}': {tok!r} is negative")
    if v > MAX_SECONDS and field != "num_tasks":
        raise InputError(
            f"{path}:{lineno}: field '{field}': {tok!r} seconds is more than the {MAX_SECONDS:,.0f} s (31 years) "
            f"a trace may hold"
        )
    return v


def dephase_arrivals(arrival: np.ndarray, step: float = 0.01) -> np.ndarray:
    """Shift the k-th repeat of each arrival time by ``k × step`` (the reference simulators' rule)."""
    order = np.argsort(arrival, kind="stable")
    s = arrival[order]
    new_group = np.ones(s.size, dtype=bool)
    new_group[1:] = s[1:] != s[:-1]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(s.size), 0))
    rank = np.arange(s.size) - group_start
    out = arrival.copy()
    out[order] = s + rank * step
    return out


def _first_jobs_text(path: Path, max_jobs: int) -> str | None:
    """The text of a ``.tr`` file from its start to the end of its ``max_jobs``-th job line (all of it when it has
    fewer), read line by line without decompressing or splitting the rest; None when something in that part needs
    the whole file's read to be reported (a file that cannot be read, bad gzip data, bytes that are not UTF-8).

    The lines are those of the whole text's ``splitlines()`` (every line break, not only ``\\n``), so the jobs, their
    line numbers in error messages and their dephased arrivals (a job's shift counts only earlier jobs) are those
    of the whole trace's first ``max_jobs`` jobs."""
    opener = gzip.open if path.suffix == ".gz" else open
    pieces: list[bytes] = []
    jobs = 0
    try:
        with opener(path, "rb") as f:
            for raw in f:
                pieces.append(raw)
                for line in raw.decode("utf-8").splitlines():
                    toks = line.split()
                    if toks and not toks[0].startswith("#"):
                        jobs += 1
                if jobs >= max_jobs:
                    break
    except (OSError, EOFError, UnicodeDecodeError):
        return None
    return b"".join(pieces).decode("utf-8")


def read_tr(path: str | Path, truncate: bool = False, dephase: bool = True, max_jobs: int | None = None) -> Workload:
    """Read a ``.tr`` trace (optionally gzipped) into a :class:`Workload`; with ``max_jobs``, only its first
    ``max_jobs`` jobs (the same jobs, durations and dephased arrivals as the whole trace's first ones; the lines
    after them are neither read nor checked)."""
    p = Path(path)
    text = None if max_jobs is None else _first_jobs_text(p, max_jobs)
    if text is None:
        text = _read_text(p)
    try:
        arrivals, counts, means, dur = _parse_tr_fast(text)
    except _NeedsChecks:
        arrivals, counts, means, dur = _parse_tr_checked(p, text)  # raises an error naming the line and field
    if counts.size == 0:
        raise InputError(f"{p}: the trace is empty (no job lines)")
    if max_jobs is not None and counts.size > max_jobs:  # the whole text was read, or a line held several jobs
        arrivals, means, dur = arrivals[:max_jobs], means[:max_jobs], dur[: int(counts[:max_jobs].sum())]
        counts = counts[:max_jobs]
    if truncate:
        dur = np.trunc(dur)
    arr = arrivals
    if dephase:
        arr = dephase_arrivals(arr)
    name = p.name
    for suf in (".gz", ".tr", ".txt"):
        name = name.removesuffix(suf)
    return Workload(
        job_arrival=arr,
        job_num_tasks=counts,
        job_mean_duration=means,
        task_duration=dur,
        name=name,
        meta={"source": str(p), "truncate": truncate, "dephase": dephase},
    )


class _NeedsChecks(Exception):
    """The fast parse met something it does not check itself; the line-by-line parse names the problem."""


def _parse_tr_fast(text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrivals, task counts, mean durations and durations of a ``.tr`` text: each line split once, every number
    converted in one call per column, every check vectorized. Raises :class:`_NeedsChecks` on anything unusual."""
    heads: list[str] = []
    lengths: list[int] = []
    durations: list[str] = []
    for line in text.splitlines():
        toks = line.split()
        if not toks or toks[0].startswith("#"):
            continue
        if len(toks) < 3:
            raise _NeedsChecks
        heads.extend(toks[:3])
        lengths.append(len(toks) - 3)
        durations.extend(toks[3:])
    try:
        head = np.array(heads, dtype=np.float64).reshape(-1, 3)
        dur = np.array(durations, dtype=np.float64)
    except ValueError:
        raise _NeedsChecks from None
    arrival, n_f, mean = head[:, 0], head[:, 1], head[:, 2]
    values = np.concatenate([arrival, mean, dur])
    if not (np.isfinite(values).all() and (values >= 0).all() and (values <= MAX_SECONDS).all()):
        raise _NeedsChecks
    if not (np.isfinite(n_f).all() and (n_f >= 1).all() and (n_f == np.floor(n_f)).all()):
        raise _NeedsChecks
    counts = n_f.astype(np.int64)
    if not np.array_equal(counts, np.array(lengths, dtype=np.int64)):
        raise _NeedsChecks
    return arrival.copy(), counts, mean.copy(), dur


def _parse_tr_checked(p: Path, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_parse_tr_fast` line by line, with an error naming the file, line and field of the first bad value."""
    arrivals: list[float] = []
    counts: list[int] = []
    means: list[float] = []
    chunks: list[np.ndarray] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        toks = line.split()
        if not toks or toks[0].startswith("#"):
            continue
        if len(toks) < 3:
            raise InputError(
                f"{p}:{lineno}: expected 'arrival num_tasks mean_duration d_1 ... d_n', got {len(toks)} field(s)"
            )
        arrival = _number(p, lineno, "arrival", toks[0])
        n_f = _number(p, lineno, "num_tasks", toks[1])
        if n_f != int(n_f) or n_f < 1:
            raise InputError(f"{p}:{lineno}: field 'num_tasks': {toks[1]!r} is not a positive whole number")
        n = int(n_f)
        mean = _number(p, lineno, "mean_duration", toks[2])
        if len(toks) - 3 != n:
            raise InputError(
                f"{p}:{lineno}: field 'num_tasks' says {n} task(s) but the line lists {len(toks) - 3} duration(s)"
            )
        try:
            d = np.array(toks[3:], dtype=np.float64)
        except ValueError:
            for k, tok in enumerate(toks[3:], start=1):
                _number(p, lineno, f"duration {k}", tok)
            raise
        bad = ~np.isfinite(d) | (d < 0) | (d > MAX_SECONDS)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            _number(p, lineno, f"duration {k + 1}", toks[3 + k])
        arrivals.append(arrival)
        counts.append(n)
        means.append(mean)
        chunks.append(d)
    if not counts:
        return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    return (
        np.array(arrivals, dtype=np.float64),
        np.array(counts, dtype=np.int64),
        np.array(means, dtype=np.float64),
        np.concatenate(chunks),
    )


def write_tr(workload: Workload, path: str | Path) -> None:
    """Write the jobs of a workload as a ``.tr`` trace (durations written losslessly)."""
    p = Path(path)
    lines = []
    dur = workload.task_duration.tolist()
    for j in range(workload.n_jobs):
        lo = int(workload.job_first_task[j])
        n = int(workload.job_num_tasks[j])
        fields = [repr(float(workload.job_arrival[j])), str(n), repr(float(workload.job_mean_duration[j]))]
        fields.extend(repr(x) for x in dur[lo : lo + n])
        lines.append(" ".join(fields))
    data = ("\n".join(lines) + "\n").encode()
    if p.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    p.write_bytes(data)


def write_columnar(workload: Workload, path: str | Path) -> None:
    """Write a workload as Parquet, one row per task."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from megha.workload.arrow import arrow_array

    cols = {
        "job": arrow_array(workload.task_job.astype(np.int64, copy=False)),
        "arrival": arrow_array(workload.task_arrival.astype(np.float64, copy=False)),
        "mean_duration": arrow_array(workload.job_mean_duration[workload.task_job].astype(np.float64, copy=False)),
        "duration": arrow_array(workload.task_duration.astype(np.float64, copy=False)),
    }
    if workload.task_mask is not None:
        cols["constraints"] = arrow_array(workload.task_mask.astype(np.uint32, copy=False))
    if workload.job_user is not None:
        cols["user"] = arrow_array(workload.job_user[workload.task_job].astype(np.int32, copy=False))
    if workload.job_priority is not None:
        cols["priority"] = arrow_array(workload.job_priority[workload.task_job].astype(np.int32, copy=False))
    if workload.task_demand is not None:
        for k, name in enumerate(workload.resource_names):
            cols[name] = arrow_array(workload.task_demand[:, k].astype(np.float64, copy=False))
    table = pa.table(cols)
    table = table.replace_schema_metadata({b"megha.workload": workload.name.encode()})
    pq.write_table(table, str(path))


def read_columnar(path: str | Path) -> Workload:
    """Read a Parquet workload written by :func:`write_columnar` or a trace converter."""
    import pyarrow.parquet as pq

    from megha.workload.arrow import numpy_array

    p = Path(path)
    try:
        # one file through its own reader: pq.read_table goes through pyarrow.dataset, whose import also loads
        # pandas (~0.3 CPU-s, more than reading a 20,000-task workload); a directory (a partitioned dataset) still
        # goes through it
        table = pq.read_table(str(p)) if p.is_dir() else pq.ParquetFile(str(p)).read()
    except (OSError, ValueError) as e:
        raise InputError(f"{p}: cannot read Parquet workload: {e}") from e
    names = set(table.column_names)
    missing = {"job", "arrival", "duration"} - names
    if missing:
        raise InputError(f"{p}: missing column(s) {sorted(missing)}; found {sorted(names)}")
    job = numpy_array(table.column("job"))
    if job.size == 0:
        raise InputError(f"{p}: the workload is empty")
    order = np.argsort(job, kind="stable")
    job = job[order]
    if np.any(np.diff(job) < 0):
        raise InputError(f"{p}: column 'job' is not sortable")

    def col(name: str) -> np.ndarray:
        return numpy_array(table.column(name))[order]

    for name in ("arrival", "duration"):
        v = col(name).astype(np.float64)
        bad = ~np.isfinite(v) | (v < 0) | (v > MAX_SECONDS)
        if bad.any():
            row = int(order[np.flatnonzero(bad)[0]])
            x = float(v[np.flatnonzero(bad)[0]])
            why = f"more than the {MAX_SECONDS:,.0f} s (31 years) a trace may hold" if x > MAX_SECONDS else "invalid"
            raise InputError(f"{p}: row {row + 1}: column '{name}': {x!r} is {why}")
    starts = np.flatnonzero(np.r_[True, job[1:] != job[:-1]])
    counts = np.diff(np.r_[starts, job.size])
    arrival = col("arrival").astype(np.float64)
    duration = col("duration").astype(np.float64)
    mean = col("mean_duration").astype(np.float64)[starts] if "mean_duration" in names else None
    if mean is None:
        mean = np.add.reduceat(duration, starts) / counts
    res = [c for c in table.column_names if c in _RESOURCE_COLUMNS]
    meta = table.schema.metadata or {}
    return Workload(
        job_arrival=arrival[starts],
        job_num_tasks=counts.astype(np.int64),
        job_mean_duration=mean,
        task_duration=duration,
        task_mask=col("constraints").astype(np.uint32) if "constraints" in names else None,
        task_demand=np.stack([col(c).astype(np.float64) for c in res], axis=1) if res else None,
        resource_names=tuple(res),
        job_user=col("user").astype(np.int32)[starts] if "user" in names else None,
        job_priority=col("priority").astype(np.int32)[starts] if "priority" in names else None,
        name=meta.get(b"megha.workload", p.stem.encode()).decode(),
        meta={"source": str(p)},
    )


def load_workload(
    path: str | Path, truncate: bool = False, dephase: bool = True, max_jobs: int | None = None
) -> Workload:
    """Load a trace by suffix: ``.tr``/``.tr.gz``/``.txt`` text, or ``.parquet`` columnar. ``max_jobs`` lets a text
    trace be read only up to its ``max_jobs``-th job (:func:`read_tr`); a columnar one is read whole, so the caller
    still keeps the first ``max_jobs`` jobs itself."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such trace file")
    if p.name.endswith(COLUMNAR_SUFFIXES):
        w = read_columnar(p)
        if truncate:
            from dataclasses import replace

            w = replace(w, task_duration=np.trunc(w.task_duration))
        return w
    return read_tr(p, truncate=truncate, dephase=dephase, max_jobs=max_jobs)
