"""load_inputs: per-machine capacities from converted machine files (megha import-trace --machines) reach
``dc.capacity``; a uniform ``capacity`` applies elsewhere or when set explicitly; slot mode ignores capacities."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from megha.config import RunConfig
from megha.model.workload import Workload, feasible_tasks
from megha.runner import load_inputs, simulate
from megha.workload.converters.machines import MachineTable, write_cluster_json
from megha.workload.tracefile import write_columnar

#: 4 small machines and 2 big ones, in the units of the task requests (as a converter writes them)
CAPACITY = np.array([[0.25, 0.25]] * 4 + [[1.0, 0.5]] * 2)
IDS = ["s1", "s2", "s3", "s4", "b1", "b2"]

# job 0: 4 tasks only the big machines fit; job 1: 10 tasks any machine fits; job 2: 1 task no machine fits
DEMAND = np.array([[0.5, 0.4]] * 4 + [[0.2, 0.1]] * 10 + [[2.0, 0.1]])
NUM_TASKS = np.array([4, 10, 1])


@pytest.fixture()
def files(tmp_path: Path) -> tuple[str, str]:
    machines = write_cluster_json(
        MachineTable(ids=IDS, capacity=CAPACITY, source="test"),
        tmp_path / "m.json",
        lms=2,
        gms=1,
        constraints_seed=None,
    )
    w = Workload(
        job_arrival=np.array([0.0, 0.5, 1.0]),
        job_num_tasks=NUM_TASKS,
        job_mean_duration=np.array([3.0, 1.0, 1.0]),
        task_duration=np.array([3.0, 2.5, 3.5, 2.0] + [1.0] * 10 + [1.0]),
        task_demand=DEMAND.copy(),
        resource_names=("cpu", "mem"),
    )
    trace = tmp_path / "w.parquet"
    write_columnar(w, trace)
    return str(trace), str(machines)


def _cfg(trace: str, cluster: str, **kw) -> RunConfig:
    return RunConfig(scheduler=kw.pop("scheduler", "megha"), trace=trace, cluster=cluster, constraints=False, **kw)


def test_machine_file_capacities_reach_the_datacenter(files) -> None:
    w, dc = load_inputs(_cfg(*files, resources=True))
    assert dc.resource_names == ("cpu", "mem")
    np.testing.assert_array_equal(dc.capacity, CAPACITY)
    assert dc.meta["machine_ids"] == IDS
    np.testing.assert_array_equal(w.task_demand, DEMAND)
    # feasibility follows the machines: the big tasks fit only b1/b2, the 2-CPU task fits nowhere
    assert feasible_tasks(w, dc).tolist() == [True] * 14 + [False]


def test_explicit_uniform_capacity_overrides_the_file(files) -> None:
    w, dc = load_inputs(_cfg(*files, resources=True, capacity={"cpu": 4.0, "mem": 2.0}))
    np.testing.assert_array_equal(dc.capacity, np.tile([4.0, 2.0], (6, 1)))
    assert feasible_tasks(w, dc).all()


def test_slot_mode_ignores_machine_capacities(files) -> None:
    w, dc = load_inputs(_cfg(*files))
    assert dc.capacity is None and dc.resource_names == () and not dc.resource_mode
    assert w.task_demand is None
    assert dc.n_workers == 6 and int(dc.lm_of.max()) == 1


def test_machine_file_resources_reorder_trace_requests(files, tmp_path: Path) -> None:
    # the machine file lists mem before cpu: the requests follow the datacenter's resource order
    cluster = write_cluster_json(
        MachineTable(ids=IDS, capacity=CAPACITY[:, ::-1].copy(), resource_names=("mem", "cpu")),
        tmp_path / "m2.json",
        constraints_seed=None,
    )
    w, dc = load_inputs(_cfg(files[0], str(cluster), resources=True))
    assert dc.resource_names == w.resource_names == ("mem", "cpu")
    np.testing.assert_array_equal(w.task_demand, DEMAND[:, ::-1])
    assert feasible_tasks(w, dc).tolist() == [True] * 14 + [False]


def test_plain_cluster_file_gets_the_uniform_capacity() -> None:
    w, dc = load_inputs(
        RunConfig(scheduler="megha", trace="sample:YH_small", cluster="sample:megha_G1L1S9", resources=True, max_jobs=3)
    )
    np.testing.assert_array_equal(dc.capacity, np.tile([64.0, 16.0], (9, 1)))
    np.testing.assert_array_equal(w.task_demand, np.tile([1.0, 0.25], (w.n_tasks, 1)))


def test_machine_file_without_a_resource_of_the_trace_is_an_error(files, tmp_path: Path) -> None:
    from megha.errors import InputError

    cluster = write_cluster_json(
        MachineTable(ids=IDS, capacity=CAPACITY[:, :1].copy(), resource_names=("gpu",)),
        tmp_path / "m3.json",
        constraints_seed=None,
    )
    with pytest.raises(InputError, match=r"no 'gpu' requests"):
        load_inputs(_cfg(files[0], str(cluster), resources=True))


@pytest.mark.parametrize(
    "scheduler",
    [
        "megha",
        "yarn",
        "macrm",
        "flow",
        "sparrow",
    ],
)
def test_simulation_uses_per_machine_capacities(files, scheduler: str) -> None:
    res = simulate(_cfg(*files, scheduler=scheduler, resources=True, gms=1, lms=2))
    assert res.unfinished_reason is None
    assert res.counters["tasks_infeasible"] == 1
    rec = res.recorder
    ran = np.flatnonzero(res.feasible)
    workers = rec.worker[ran]
    assert (workers >= 0).all() and (rec.finishes[ran] == 1).all()
    # every task ran on a machine with room for its request; the big ones only on b1/b2
    assert (DEMAND[ran] <= CAPACITY[workers]).all()
    assert set(rec.worker[:4].tolist()) <= {4, 5}
    # no over-commit at any time on any machine (the worker pool also checks this as it runs)
    start, end = rec.start, rec.end
    for m in range(len(IDS)):
        on = ran[workers == m]
        for t in np.unique(start[on]):
            live = on[(start[on] <= t) & (end[on] > t)]
            assert (DEMAND[live].sum(axis=0) <= CAPACITY[m] + 1e-9).all()
