"""Arrow columns to NumPy and back without pandas: the same values and dtypes as pyarrow's own conversions."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from megha.workload.arrow import arrow_array, numpy_array

DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_array_equals_to_numpy(dtype):
    rng = np.random.default_rng(1)
    x = (rng.random(1000) * 100).astype(dtype)
    if dtype.startswith("float"):
        x[::7] = np.nan  # NaN is a value, not a null
    chunked = pa.chunked_array([arrow_array(x[:300]), arrow_array(x[300:])])
    for col in (chunked, chunked.slice(5, 700), arrow_array(x), arrow_array(x).slice(17, 400)):
        got, want = numpy_array(col), col.to_numpy()
        assert got.dtype == want.dtype
        assert np.array_equal(got, want, equal_nan=dtype.startswith("float"))
        assert got.flags.writeable


def test_numpy_array_falls_back_for_nulls_booleans_and_empty_columns():
    ints = pa.chunked_array([pa.array([1, None, 3], type=pa.int64())])
    assert np.array_equal(numpy_array(ints), ints.to_numpy(), equal_nan=True)
    flags = pa.chunked_array([arrow_array(np.array([True, False, True]))])
    assert numpy_array(flags).tolist() == [True, False, True]
    empty = pa.chunked_array([], type=pa.float64())
    assert numpy_array(empty).dtype == np.float64 and numpy_array(empty).size == 0


def test_reading_a_parquet_workload_does_not_import_pandas(tmp_path):
    from megha.workload.generate import poisson_workload
    from megha.workload.tracefile import load_workload, write_columnar

    path = tmp_path / "w.parquet"
    w = poisson_workload(50, tasks_per_worker=2, seed=3)
    write_columnar(w.with_constraints(np.random.default_rng(0)), path)
    code = (
        "import sys\n"
        "from megha.workload.tracefile import load_workload\n"
        f"w = load_workload({str(path)!r})\n"
        "print(w.n_tasks, 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(w.n_tasks), "False"]
    back = load_workload(path)
    assert np.array_equal(back.task_duration, w.task_duration)
    assert np.array_equal(back.job_arrival, w.job_arrival)
    assert back.task_mask is not None and back.task_mask.dtype == np.uint32
