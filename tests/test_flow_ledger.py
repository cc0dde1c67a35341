"""Flow's slot mode on the shared worker ledger: a machine's workers are ledger rows, one per slot."""

from __future__ import annotations

import numpy as np

from megha.schedulers.common.ledger import FREE, WorkerLedger
from megha.schedulers.flow import _graph_kernels as GK


def test_take_workers_claims_the_first_free_ledger_slot_of_each_machine() -> None:
    ledger = WorkerLedger("flow", 4, slot_array=True)
    ledger.claim([5, 7], [0, 3], 0.0)  # machine 0 = workers 0, 1; machine 1 = workers 2, 3
    ptr = np.array([0, 2, 4], dtype=np.int64)
    workers = np.arange(4, dtype=np.int64)
    out = np.empty(2, dtype=np.int64)
    bad = GK.k_take_workers(np.array([0, 1]), np.array([10, 11]), ptr, workers, ledger.task, out)
    assert bad == -1
    assert out.tolist() == [1, 2]
    assert ledger.task.tolist() == [5, 10, 11, 7]
    # machine 0 is full now: the first row that finds no free worker is reported, nothing is claimed for it
    assert GK.k_take_workers(np.array([0]), np.array([12]), ptr, workers, ledger.task, out[:1]) == 0
    assert ledger.task.tolist() == [5, 10, 11, 7]


def test_free_workers_release_ledger_slots_and_count_machine_slots() -> None:
    ledger = WorkerLedger("flow", 4, slot_array=True)
    ledger.claim([5, 6, 7], [0, 1, 3], 0.0)
    free = np.zeros(2, dtype=np.int64)
    GK.k_free_workers(np.array([1, 3]), ledger.task, np.array([0, 0, 1, 1]), free)
    assert ledger.task.tolist() == [5, FREE, FREE, FREE]
    assert free.tolist() == [1, 1]
    assert ledger.running_on(0) == 5
