"""NumPy arrays to Arrow arrays without pyarrow's pandas shim.

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
