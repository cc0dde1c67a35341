"""The offered load of a workload (IoT 2023 Table 1 and Fig. 4), computed by the iot23 reproductions."""

from __future__ import annotations

import numpy as np
import pytest

from megha.experiments.iot23 import offered_load, write_load
from megha.model.topology import Datacenter
from megha.model.workload import Workload


def _small() -> tuple[Workload, Datacenter]:
    # job 0 at t=10.0: tasks of 2 s (needs c0) and 1 s (none); job 1 at t=10.5: one task of 3 s (needs c0 and c1)
    w = Workload(
        job_arrival=np.array([10.0, 10.5]),
        job_num_tasks=np.array([2, 1]),
        job_mean_duration=np.array([1.5, 3.0]),
        task_duration=np.array([2.0, 1.0, 3.0]),
        task_mask=np.array([0b01, 0b00, 0b11], dtype=np.uint32),
    )
    dc = Datacenter(worker_masks=np.array([0b01, 0b11], dtype=np.uint32))
    return w, dc


def test_total_and_per_constraint_load_per_second():
    load = offered_load(*_small())
    # seconds 0..3 after the first arrival hold 3, 2, 1, 0 active tasks on 2 workers
    assert load["seconds"] == 4 and load["workers"] == 2
    tot = load["total"]
    assert tot["mean"] == pytest.approx(0.75)
    assert tot["median"] == pytest.approx(0.75)
    assert tot["max"] == pytest.approx(1.5)
    assert tot["share_above_1"] == pytest.approx(0.25)
    c0, c1 = load["per_constraint"][0], load["per_constraint"][1]
    # constraint 0: 2 workers; active tasks needing it 2, 2, 1, 0
    assert c0["supply"] == 2 and c0["tasks"] == 2
    assert c0["mean"] == pytest.approx(np.mean([1.0, 1.0, 0.5, 0.0]))
    assert c0["share_above_1"] == 0.0
    # constraint 1: 1 worker; the 3-second task is active in seconds 0..2
    assert c1["supply"] == 1 and c1["tasks"] == 1
    assert c1["mean"] == pytest.approx(0.75) and c1["max"] == pytest.approx(1.0)
    # no worker has constraint 2: nothing to report for it
    assert load["per_constraint"][2] is None
    assert len(load["per_constraint"]) == 21


def test_constraint_nobody_needs_has_zero_load():
    w, _ = _small()
    dc = Datacenter(worker_masks=np.array([0b101, 0b111], dtype=np.uint32))
    c2 = offered_load(w, dc)["per_constraint"][2]
    assert c2["supply"] == 2 and c2["tasks"] == 0 and c2["max"] == 0.0


def test_unconstrained_workload_loads_only_through_total():
    w, dc = _small()
    from dataclasses import replace

    load = offered_load(replace(w, task_mask=None), dc)
    assert load["total"]["max"] == pytest.approx(1.5)
    assert load["per_constraint"][0]["tasks"] == 0


def test_write_load_outputs(tmp_path):
    write_load(offered_load(*_small()), "tiny", tmp_path)
    md = (tmp_path / "table1_load_tiny.md").read_text()
    assert md.splitlines()[0].startswith("| constraint | supply | tasks | median | mean")
    assert "| all | 2 |" in md
    assert (tmp_path / "table1_load_tiny.csv").read_text().count("\n") == 1 + 1 + 2  # header, all, c0, c1
    assert (tmp_path / "fig4_constraint_load_tiny.png").stat().st_size > 0


def test_empty_inputs_are_errors():
    w, _ = _small()
    with pytest.raises(ValueError, match="no workers"):
        offered_load(w, Datacenter(worker_masks=np.zeros(0, dtype=np.uint32)))
