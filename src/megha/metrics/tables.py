"""Tables written one way: rows (dicts) become an Arrow table with one type per column, written as Parquet by
pyarrow or as CSV by pandas (header, minimal quoting, empty cells for missing values, whole numbers stay whole).

The CSVs of the CLI, the sweeps and the experiments (``compare.csv``, ``results.csv``, ``timing.csv``, the
reproductions' tables) go through :func:`write_csv`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _column_type(values: list[Any]) -> Any:
    import pyarrow as pa

    present = [v for v in values if v is not None]
    if not present:
        return pa.string()
    if all(isinstance(v, bool) for v in present):
        return pa.bool_()
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.int64()
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.float64()
    return pa.string()


def rows_to_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> Any:
    """Rows (dicts, possibly with different keys) → an Arrow table with one type per column; lists and dicts
    become JSON text, NaN becomes null."""
    import pyarrow as pa

    cols: list[str] = list(columns) if columns is not None else []
    if columns is None:
        for r in rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
    arrays = {}
    for c in cols:
        vals = [_plain(r.get(c)) for r in rows]
        t = _column_type(vals)
        if t == pa.string():
            vals = [None if v is None else (v if isinstance(v, str) else json.dumps(v, default=str)) for v in vals]
        elif t == pa.float64():
            vals = [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in vals]
        arrays[c] = pa.array(vals, type=t)
    return pa.table(arrays)


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, int | float | str | bool):  # numpy scalars
        return v.item()
    return v


def write_csv(rows_or_table: Any, path: str | Path, columns: Sequence[str] | None = None) -> Path:
    """Write rows (dicts) or an Arrow table as CSV with a header; returns the path."""
    import pandas as pd
    import pyarrow as pa

    table = rows_or_table if isinstance(rows_or_table, pa.Table) else rows_to_table(rows_or_table, columns)
    table.to_pandas(types_mapper=pd.ArrowDtype).to_csv(str(path), index=False)
    return Path(path)


def write_parquet(rows_or_table: Any, path: str | Path) -> Path:
    """Write rows (dicts) or an Arrow table as Parquet; returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = rows_or_table if isinstance(rows_or_table, pa.Table) else rows_to_table(rows_or_table)
    pq.write_table(table, str(path))
    return Path(path)
