from __future__ import annotations

import gzip

import numpy as np
import pytest

from megha.errors import InputError
from megha.samples import resolve
from megha.workload.tracefile import dephase_arrivals, load_workload, read_tr, write_columnar, write_tr


def test_reads_jobs_and_tasks(tiny_trace):
    w = read_tr(tiny_trace)
    assert w.n_jobs == 5 and w.n_tasks == 9
    assert w.job_num_tasks.tolist() == [2, 1, 3, 2, 1]
    assert w.task_duration[:3].tolist() == [1.0, 2.0, 3.0]
    assert w.job_first_task.tolist() == [0, 2, 3, 6, 8]
    assert w.task_job.tolist() == [0, 0, 1, 2, 2, 2, 3, 3, 4]
    # de-phasing: the second job arriving at 0.5 moves to 0.51
    assert w.job_arrival.tolist() == pytest.approx([0.0, 0.5, 0.51, 2.0, 10.0])
    assert w.ideal_job_duration().tolist() == [2.0, 3.0, 1.0, 1.0, 4.25]


def test_reference_quirks_are_options(tiny_trace):
    w = read_tr(tiny_trace, truncate=True, dephase=False)
    assert w.job_arrival.tolist() == [0.0, 0.5, 0.5, 2.0, 10.0]
    assert w.task_duration.tolist() == [1, 2, 3, 1, 1, 1, 0, 1, 4]


def test_dephase_three_way_tie():
    out = dephase_arrivals(np.array([5.0, 1.0, 5.0, 5.0]))
    assert out.tolist() == pytest.approx([5.0, 1.0, 5.01, 5.02])


@pytest.mark.parametrize(
    ("content", "line", "field"),
    [
        ("0 2 1 1\n", 1, "num_tasks"),  # says 2 tasks, lists 1
        ("0 1 1 1\n1 1 1 -3\n", 2, "duration 1"),  # negative
        ("0 1 1 1\n1 1 1 abc\n", 2, "duration 1"),  # not a number
        ("x 1 1 1\n", 1, "arrival"),
        ("0 0 1\n", 1, "num_tasks"),  # zero tasks
        ("0 1.5 1 1\n", 1, "num_tasks"),  # not whole
        ("0 1 nan 1\n", 1, "mean_duration"),
        ("0 1\n", 1, None),  # too few fields
    ],
)
def test_malformed_lines_name_file_line_and_field(tmp_path, content, line, field):
    p = tmp_path / "bad.tr"
    p.write_text(content)
    with pytest.raises(InputError) as e:
        read_tr(p)
    msg = str(e.value)
    assert f"bad.tr:{line}:" in msg
    if field:
        assert f"'{field}'" in msg


def test_empty_file_is_an_error(tmp_path):
    p = tmp_path / "empty.tr"
    p.write_text("\n\n")
    with pytest.raises(InputError, match="empty"):
        read_tr(p)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such trace"):
        load_workload(tmp_path / "nope.tr")


def test_roundtrip_text_gzip_and_parquet(tmp_path, tiny_trace):
    w = read_tr(tiny_trace, dephase=False)
    w = w.with_constraints(np.random.default_rng(3))
    write_tr(w, tmp_path / "a.tr.gz")
    back = read_tr(tmp_path / "a.tr.gz", dephase=False)
    assert back.task_duration.tolist() == w.task_duration.tolist()
    assert back.job_arrival.tolist() == w.job_arrival.tolist()
    assert gzip.decompress((tmp_path / "a.tr.gz").read_bytes()).startswith(b"0.0 2 1.5")
    write_columnar(w, tmp_path / "a.parquet")
    col = load_workload(tmp_path / "a.parquet")
    assert col.task_duration.tolist() == w.task_duration.tolist()
    assert col.job_num_tasks.tolist() == w.job_num_tasks.tolist()
    assert col.task_mask.tolist() == w.task_mask.tolist()
    assert col.job_mean_duration.tolist() == w.job_mean_duration.tolist()


def test_bundled_google_subtrace_shape():
    w = load_workload(resolve("sample:GOOG_subtrace"))
    assert (w.n_jobs, w.n_tasks) == (10_000, 312_558)


def test_fast_and_line_by_line_parses_agree(tmp_path):
    """Valid traces take the vectorized parse; it gives what the checked line-by-line parse gives."""
    from megha.workload.tracefile import _parse_tr_checked, _parse_tr_fast

    text = "# header\n\n0 2 1.5 1 2\n  0.25 1 3 3\n# mid\n7 3 0.1 0.1 0 1e3\n"
    fast = _parse_tr_fast(text)
    slow = _parse_tr_checked(tmp_path / "t.tr", text)
    for a, b in zip(fast, slow, strict=True):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert fast[1].tolist() == [2, 1, 3] and fast[3].tolist() == [1.0, 2.0, 3.0, 0.1, 0.0, 1000.0]


def _first_jobs(w, n):
    n_t = int(w.job_num_tasks[:n].sum())
    return w.job_arrival[:n], w.job_num_tasks[:n], w.job_mean_duration[:n], w.task_duration[:n_t]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 100])
@pytest.mark.parametrize("suffix", [".tr", ".tr.gz"])
def test_max_jobs_reads_the_first_jobs_of_the_whole_trace(tmp_path, n, suffix):
    # repeated arrivals (dephased), comments, blank lines, CRLF and a vertical tab (a line break for splitlines)
    text = "# header\n0.5 1 1 1\r\n\n0.5 2 2 1 3\n# note\n0.5 1 4 4\x0b1.0 1 5 5\n0.5 1 6 6\n2 1 7 7\n2 1 8 8\n"
    p = tmp_path / f"t{suffix}"
    p.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    for truncate, dephase in [(False, True), (True, False)]:
        whole = read_tr(p, truncate=truncate, dephase=dephase)
        first = read_tr(p, truncate=truncate, dephase=dephase, max_jobs=n)
        got = (first.job_arrival, first.job_num_tasks, first.job_mean_duration, first.task_duration)
        for a, b in zip(got, _first_jobs(whole, n), strict=True):
            assert np.array_equal(a, b)
        assert first.name == whole.name and first.meta == whole.meta
    assert read_tr(p, max_jobs=3).job_arrival.tolist() == pytest.approx([0.5, 0.51, 0.52])


def test_max_jobs_on_the_bundled_trace_is_its_first_jobs():
    path = resolve("sample:GOOG_subtrace", "trace")
    whole = read_tr(path)
    for n in (1, 5, 1000, 9999, 10000, 20000):
        first = load_workload(path, max_jobs=n)
        got = (first.job_arrival, first.job_num_tasks, first.job_mean_duration, first.task_duration)
        for a, b in zip(got, _first_jobs(whole, n), strict=True):
            assert np.array_equal(a, b)


def test_max_jobs_checks_the_lines_it_reads_and_not_the_rest(tmp_path):
    p = tmp_path / "t.tr"
    p.write_text("0 1 1 1\n1 1 1 -3\n2 1 1 zz\n")
    assert read_tr(p, max_jobs=1).task_duration.tolist() == [1.0]
    with pytest.raises(InputError, match=r"t\.tr:2: field 'duration 1'"):
        read_tr(p, max_jobs=2)
    with pytest.raises(InputError, match=r"t\.tr:2: field 'duration 1'"):
        read_tr(p)
    bad = tmp_path / "b.tr"
    bad.write_bytes(b"0 1 1 1\n1 1 1 \xff\n")
    assert read_tr(bad, max_jobs=1).n_jobs == 1
    with pytest.raises(InputError, match="not a text file"):
        read_tr(bad, max_jobs=2)
