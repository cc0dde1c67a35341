"""Converter errors: wrong schemas fail at once; a malformed row names file, line and column."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from megha.errors import InputError
from megha.workload.converters import _csv, convert
from megha.workload.converters.synthetic import write_google2011

GOOD = "{t},,6000001,{i},,{ty},u1,1,9,0.1,0.2,0.0,0"


def _g2011(tmp_path: Path, lines: list[str], gz: bool = True) -> Path:
    d = tmp_path / "trace" / "task_events"
    d.mkdir(parents=True)
    text = ("\n".join(lines) + "\n").encode()
    p = d / ("part-00000-of-00001.csv" + (".gz" if gz else ""))
    p.write_bytes(gzip.compress(text) if gz else text)
    return p


def test_malformed_value_names_file_line_column(tmp_path: Path) -> None:
    lines = [GOOD.format(t=5 + k, i=k, ty=0) for k in range(6)]
    lines.append("20,,6000001,0,,1,u1,1,high,0.1,0.2,0.0,0")  # line 7: priority is not an integer
    p = _g2011(tmp_path, lines)
    with pytest.raises(InputError) as e:
        convert(tmp_path / "trace", "google2011", tmp_path / "o.parquet", progress=False)
    msg = str(e.value)
    assert f"{p}:7:" in msg and "column 'priority' (#9)" in msg and "'high'" in msg


def test_malformed_row_deep_in_a_large_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_csv, "BLOCK_SIZE", 1024)  # the bad row is many batches in
    lines = [GOOD.format(t=5 + k, i=k % 500, ty=k % 2) for k in range(3000)]
    lines[2345] = "2350,,6000001,1,,4,u1,1,9,0.1,lots,0.0,0"
    p = _g2011(tmp_path, lines, gz=False)
    with pytest.raises(InputError, match=rf"{p}:2346: column 'memory_request' \(#11\): 'lots' is not a number"):
        convert(p, "google2011", tmp_path / "o.parquet", progress=False)


def test_wrong_column_count_in_a_row(tmp_path: Path, monkeypatch) -> None:
    lines = [GOOD.format(t=5 + k, i=k, ty=0) for k in range(4)] + ["9,,6000001,0,,1,u1"]
    p = _g2011(tmp_path, lines)
    with pytest.raises(InputError, match=rf"{p}:5: expected 13 columns .* got 7"):
        convert(tmp_path / "trace", "google2011", tmp_path / "o.parquet", progress=False)


def test_wrong_schema_is_reported_with_expected_columns(tmp_path: Path) -> None:
    f = tmp_path / "batch_task.csv"
    f.write_text("M1,3,j_1,1,Terminated,10,20,100,0.5\n")
    with pytest.raises(InputError, match="not in the Google 2011 task_events format: expected 13 columns"):
        convert(f, "google2011", tmp_path / "o.parquet", progress=False)
    g = tmp_path / "instance_events.csv"
    g.write_text("time,type,collection_id\n1,0,5\n")
    with pytest.raises(InputError, match=r"missing column\(s\) instance_index; cpus .*resource_request.cpus"):
        convert(g, "google2019", tmp_path / "o.parquet", progress=False)
    with pytest.raises(InputError, match="not in the Alibaba 2018 batch_task format: expected 9 columns"):
        convert(_g2011(tmp_path, [GOOD.format(t=1, i=0, ty=0)]), "alibaba2018", tmp_path / "o.parquet", progress=False)


def test_bad_event_type_name_2019(tmp_path: Path) -> None:
    g = tmp_path / "instance_events.csv"
    g.write_text("time,type,collection_id,instance_index,cpus,memory\n1,SUBMIT,5,0,0.1,0.1\n2,LAUNCH,5,0,0.1,0.1\n")
    with pytest.raises(InputError, match="column 'type': unknown event type 'LAUNCH'"):
        convert(g, "google2019", tmp_path / "o.parquet", progress=False)


def test_usage_errors(tmp_path: Path) -> None:
    write_google2011(tmp_path / "g", 3, parts=1)
    with pytest.raises(InputError, match="unknown trace format"):
        convert(tmp_path / "g", "google2015", tmp_path / "o.parquet")
    with pytest.raises(InputError, match=r"\.parquet"):
        convert(tmp_path / "g", "google2011", tmp_path / "o.csv")
    with pytest.raises(InputError, match="no such file"):
        convert(tmp_path / "nope", "google2011", tmp_path / "o.parquet")
    with pytest.raises(InputError, match="no batch_task files"):
        convert(tmp_path / "g", "alibaba2018", tmp_path / "o.parquet")
    only_tasks = tmp_path / "g" / "task_events"
    (tmp_path / "h").mkdir()
    only_tasks.rename(tmp_path / "h" / "task_events")
    with pytest.raises(InputError, match="no machine file found"):
        convert(tmp_path / "h", "google2011", tmp_path / "o.parquet", machines=tmp_path / "m.json", progress=False)


def test_cli_import_trace(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from megha.cli import app

    write_google2011(tmp_path / "g", 10, parts=1)
    r = CliRunner().invoke(
        app,
        [
            "import-trace",
            str(tmp_path / "g"),
            "--format",
            "google2011",
            "--out",
            str(tmp_path / "o.parquet"),
            "--machines",
            str(tmp_path / "m.json"),
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "o.parquet").is_file() and (tmp_path / "m.json").is_file()
    r = CliRunner().invoke(
        app,
        ["trace", "import", str(tmp_path / "g"), "--format", "google2011", "--out", str(tmp_path / "o2.parquet"), "-q"],
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        app, ["import-trace", str(tmp_path / "g"), "--format", "nope", "--out", str(tmp_path / "o3.parquet")]
    )
    assert r.exit_code == 2 and "unknown trace format" in r.output
