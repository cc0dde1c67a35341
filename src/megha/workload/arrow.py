"""NumPy arrays to Arrow arrays and back without pyarrow's pandas shim.

``pyarrow.array(numpy_array)`` imports pandas on its first call (about 0.3-0.5 CPU-s, to check whether the argument
is a pandas object), which every ``megha simulate`` paid for writing its Parquet tables. A numeric NumPy column
needs no conversion at all: its buffer becomes the Arrow array's data buffer as it is (booleans are packed into
Arrow's bitmap), so the tables are the same, NaN stays NaN (not null), and pandas is never imported.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def arrow_array(values: Any) -> Any:
    """An Arrow array holding ``values`` (a 1-D NumPy array or anything :func:`numpy.asarray` accepts).

    Numeric and boolean arrays are wrapped without the pandas shim; other dtypes (strings, objects) go through
    ``pyarrow.array``."""
    import pyarrow as pa

    x = np.asarray(values)
    if x.ndim != 1:
        raise ValueError(f"a table column must be 1-D, got shape {x.shape}")
    if x.dtype == np.bool_:
        bits = np.packbits(x, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), x.size, [None, pa.py_buffer(bits)])
    if x.dtype.kind in "iuf" and x.dtype.isnative:
        x = np.ascontiguousarray(x)
        return pa.Array.from_buffers(pa.from_numpy_dtype(x.dtype), x.size, [None, pa.py_buffer(x)])
    return pa.array(x)


def _numpy_dtypes() -> dict[Any, np.dtype]:
    import pyarrow as pa

    pairs = [
        (pa.int8(), np.int8),
        (pa.int16(), np.int16),
        (pa.int32(), np.int32),
        (pa.int64(), np.int64),
        (pa.uint8(), np.uint8),
        (pa.uint16(), np.uint16),
        (pa.uint32(), np.uint32),
        (pa.uint64(), np.uint64),
        (pa.float32(), np.float32),
        (pa.float64(), np.float64),
    ]
    return {t: np.dtype(d) for t, d in pairs}


def numpy_array(column: Any) -> np.ndarray:
    """The values of an Arrow array or chunked column as a NumPy array (a copy), as ``column.to_numpy()`` gives them.

    ``to_numpy()`` imports pandas on its first call (about 0.3 CPU-s, as :func:`arrow_array`'s note says), which
    every run on a Parquet workload paid for reading it. A numeric column without nulls is read from its data buffers
    instead (same dtype, same values); any other column (booleans, strings, nulls) goes through ``to_numpy()``."""
    import pyarrow as pa

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    dtype = _numpy_dtypes().get(column.type)
    if dtype is None or any(c.null_count for c in chunks):
        return np.array(column.to_numpy())
    parts = [np.frombuffer(c.buffers()[1], dtype=dtype, count=c.offset + len(c))[c.offset :] for c in chunks]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
