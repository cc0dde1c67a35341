"""Streaming CSV input for the trace converters: typed Arrow batches in bounded memory, clear errors, progress.

Files may be plain or gzipped (``.gz``). Headerless files (Google 2011, Alibaba 2018) are described by their column
list; files with a header (exported Google 2019 tables) are matched by column name, with accepted aliases. Before
streaming, the first line of every file is checked against the schema, so a wrong file fails at once with the
expected columns. A value that does not convert is reported as ``file:line: column 'name' (#k): …``: Arrow only
says which column failed, so the converter re-reads that part of the file to find the line.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from megha.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

BLOCK_SIZE = 8 << 20


@dataclass(frozen=True)
class Col:
    """One CSV column: its name, type ('int', 'float' or 'str'), whether it may be empty, and aliases."""

    name: str
    kind: str
    nullable: bool = True
    aliases: tuple[str, ...] = ()

    def arrow_type(self) -> pa.DataType:
        """The column's Arrow type."""
        import pyarrow as pa

        return {"int": pa.int64(), "float": pa.float64(), "str": pa.string()}[self.kind]


@dataclass(frozen=True)
class Schema:
    """A CSV table: every column in file order (headerless) and the ones to read."""

    what: str  # e.g. "Google 2011 task_events"
    columns: tuple[Col, ...]
    use: tuple[str, ...]
    header: bool = False

    def col(self, name: str) -> Col:
        """The column ``name`` (a ``KeyError`` if the schema has none)."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def describe(self) -> str:
        """The column names, comma-separated."""
        return ", ".join(c.name for c in self.columns)


def _open_text(path: Path) -> io.TextIOWrapper:
    raw = open(path, "rb")  # noqa: SIM115 - closed by the wrapper
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8", errors="replace", newline="")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")


def first_line(path: Path) -> list[str] | None:
    """The first CSV record of a file, or None when it is empty."""
    try:
        with _open_text(path) as f:
            for row in csv.reader(f):
                return row
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    return None


def _valid(kind: str, text: str, nullable: bool) -> str | None:
    """Why ``text`` is not a valid value of ``kind`` (None when it is)."""
    if text == "":
        return None if nullable else "is empty"
    if kind == "int":
        try:
            int(text)
        except ValueError:
            return f"{text[:40]!r} is not an integer"
    elif kind == "float":
        try:
            v = float(text)
        except ValueError:
            return f"{text[:40]!r} is not a number"
        if math.isnan(v):
            return None
    return None


def locate_bad_row(path: Path, schema: Schema, names: list[str], start_record: int) -> str | None:
    """Scan ``path`` from data record ``start_record`` (0-based) for the first row that breaks ``schema``."""
    want = {c.name: c for c in schema.columns if c.name in schema.use}
    positions = [(i, want[n]) for i, n in enumerate(names) if n in want]
    n_cols = len(names)
    with _open_text(path) as f:
        reader = csv.reader(f)
        if schema.header:
            next(reader, None)
        for rec, row in enumerate(reader):
            if rec < start_record:
                continue
            line = reader.line_num
            if len(row) != n_cols:
                return f"{path}:{line}: expected {n_cols} columns ({schema.what}: {schema.describe()}), got {len(row)}"
            for i, c in positions:
                why = _valid(c.kind, row[i], c.nullable)
                if why is not None:
                    return f"{path}:{line}: column '{c.name}' (#{i + 1}): {why}"
    return None


class Progress:
    """A byte-based progress bar over all input files (rich), shown on a terminal or with MEGHA_PROGRESS=1."""

    def __init__(self, total_bytes: int, label: str, enabled: bool) -> None:
        self.bar = None
        self.done_files = 0
        if not enabled:
            return
        from rich.console import Console

        console = Console(stderr=True)
        if not (console.is_terminal or os.environ.get("MEGHA_PROGRESS") == "1"):
            return
        from rich.progress import (
            BarColumn,
            FileSizeColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TotalFileSizeColumn,
            TransferSpeedColumn,
        )
        from rich.progress import (
            Progress as RichProgress,
        )

        self.bar = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            FileSizeColumn(),
            TextColumn("/"),
            TotalFileSizeColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            transient=True,
        )
        self.task = self.bar.add_task(label, total=max(total_bytes, 1), info="")
        self.bar.start()

    def update(self, done_bytes: int, info: str = "") -> None:
        """Show ``done_bytes`` read so far (and ``info``) on the progress bar, if there is one."""
        if self.bar is not None:
            self.bar.update(self.task, completed=done_bytes, info=info)

    def close(self) -> None:
        """Stop the progress bar."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _resolve_header(path: Path, schema: Schema) -> list[str]:
    row = first_line(path)
    if row is None:
        return []
    header = [h.strip() for h in row]
    names = []
    for h in header:
        canon = h
        for c in schema.columns:
            if h == c.name or h in c.aliases:
                canon = c.name
                break
        names.append(canon)
    missing = [c.name for c in schema.columns if c.name in schema.use and not c.nullable and c.name not in names]
    if missing:
        alias = {c.name: c.aliases for c in schema.columns}
        hints = "; ".join(f"{m} (or {', '.join(alias[m])})" if alias[m] else m for m in missing)
        raise InputError(
            f"{path}: not in the {schema.what} format: missing column(s) {hints}; the header has "
            f"{', '.join(header[:20])}"
        )
    return names


def _check_headerless(path: Path, schema: Schema) -> list[str]:
    row = first_line(path)
    names = [c.name for c in schema.columns]
    if row is not None and len(row) != len(names):
        raise InputError(
            f"{path}: not in the {schema.what} format: expected {len(names)} columns "
            f"({schema.describe()}), line 1 has {len(row)}: {','.join(row)[:120]!r}"
        )
    if row is not None:
        for i, c in enumerate(schema.columns):
            why = _valid(c.kind, row[i].strip(), True) if c.name in schema.use else None
            if why is not None:
                raise InputError(
                    f"{path}: not in the {schema.what} format: line 1, column '{c.name}' (#{i + 1}): "
                    f"{why} (expected columns: {schema.describe()})"
                )
    return names


def stream(
    paths: list[Path], schema: Schema, progress: Progress | None = None, label: str = ""
) -> Iterator[tuple[Path, int, pa.RecordBatch]]:
    """Yield ``(path, first_record, batch)`` for every Arrow record batch of every file, in order.

    Columns present in the batch are the schema's ``use`` columns under their canonical names (columns missing
    from a headered file are absent). ``first_record`` is the 0-based data record index of the batch's first row.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    sizes = [p.stat().st_size for p in paths]
    base = 0
    for path, size in zip(paths, sizes, strict=True):
        names = _resolve_header(path, schema) if schema.header else _check_headerless(path, schema)
        if not names:
            base += size
            continue
        present = [n for n in schema.use if n in names]
        types = {n: schema.col(n).arrow_type() for n in present}
        if schema.header:
            read = pcsv.ReadOptions(column_names=names, skip_rows=1, block_size=BLOCK_SIZE)
        else:
            read = pcsv.ReadOptions(column_names=names, block_size=BLOCK_SIZE)
        conv = pcsv.ConvertOptions(
            column_types=types, include_columns=present, strings_can_be_null=True, quoted_strings_can_be_null=True
        )
        raw = pa.OSFile(str(path), "rb")
        src = pa.CompressedInputStream(raw, "gzip") if path.suffix == ".gz" else raw
        record = 0
        try:
            reader = pcsv.open_csv(
                src, read_options=read, convert_options=conv, parse_options=pcsv.ParseOptions(newlines_in_values=False)
            )
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                yield path, record, batch
                record += batch.num_rows
                if progress is not None:
                    progress.update(base + min(raw.tell(), size), label)
        except pa.ArrowInvalid as e:
            where = locate_bad_row(path, schema, names, record)
            raise InputError(where or f"{path}: after data line {record}: {e}") from None
        except (OSError, EOFError) as e:
            raise InputError(f"{path}: cannot read (corrupt or truncated file?): {e}") from None
        finally:
            raw.close()
        base += size
        if progress is not None:
            progress.update(base, label)


def column(batch: pa.RecordBatch, name: str, kind: str, fill: float | str | None = None) -> np.ndarray | pa.Array:
    """A batch column as numpy (nulls → ``fill``; NaN for floats by default)."""
    import numpy as np
    import pyarrow.compute as pc

    idx = batch.schema.get_field_index(name)
    if idx < 0:
        n = batch.num_rows
        if kind == "float":
            return np.full(n, np.nan if fill is None else fill)
        if kind == "int":
            return np.full(n, -1 if fill is None else fill, dtype=np.int64)
        return np.array([fill] * n, dtype=object)
    arr = batch.column(idx)
    if kind == "float":
        return pc.fill_null(arr, np.nan if fill is None else fill).to_numpy(zero_copy_only=False)
    if kind == "int":
        return pc.fill_null(arr, -1 if fill is None else fill).to_numpy(zero_copy_only=False)
    return arr


def find_files(source: Path, patterns: list[str], what: str) -> list[Path]:
    """``source`` itself when it is a file, else the files under it matching the patterns (sorted by name)."""
    if source.is_file():
        return [source]
    if not source.exists():
        raise InputError(f"{source}: no such file or directory")
    for pat in patterns:
        found = sorted(p for p in source.glob(pat) if p.is_file())
        if found:
            return found
    raise InputError(f"{source}: no {what} files found (looked for {', '.join(patterns)})")
