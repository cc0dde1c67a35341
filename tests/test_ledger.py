"""The worker ledger driven by hand-written calls: claims, releases, the one over-commit error in both modes."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import SimulationError
from megha.schedulers.common.ledger import FREE, OVER_EPS, WorkerLedger, over_committed

OVER = r"^pool: worker {w} over-committed at t={t}: "


def test_error_text_is_the_one_format() -> None:
    e = over_committed("lm/3/pool", 17, 1.5, "why")
    assert isinstance(e, SimulationError)
    assert str(e) == "lm/3/pool: worker 17 over-committed at t=1.500000: why"


@pytest.mark.parametrize("slot_array", [False, True])
def test_slot_claim_release(slot_array: bool) -> None:
    led = WorkerLedger("pool", 4, slot_array=slot_array)
    assert not led.resource_mode
    led.claim([10, 11], [0, 2], 0.0)
    assert [led.running_on(w) for w in range(4)] == [10, FREE, 11, FREE]
    assert led.busy() == 2
    led.release([0])
    assert led.running_on(0) == FREE
    led.claim_one(12, 0, 1.0)
    assert led.running_on(0) == 12
    led.release([0, 2], tasks=[99, 11])  # worker 0 runs 12, not 99: kept
    assert led.running_on(0) == 12 and led.running_on(2) == FREE
    led.clear()
    assert led.busy() == 0


@pytest.mark.parametrize("slot_array", [False, True])
def test_slot_over_commit_raises_the_one_error(slot_array: bool) -> None:
    led = WorkerLedger("pool", 3, slot_array=slot_array)
    led.claim([5], [1], 0.0)
    with pytest.raises(SimulationError, match=OVER.format(w=1, t="2.000000") + "task 6 launched while it runs task 5"):
        led.claim([7, 6], [0, 1], 2.0)
    with pytest.raises(SimulationError, match="worker 1 over-committed"):
        led.claim_one(8, 1, 3.0)


@pytest.mark.parametrize("slot_array", [False, True])
def test_slot_two_tasks_on_one_worker_in_one_batch(slot_array: bool) -> None:
    led = WorkerLedger("pool", 3, slot_array=slot_array)
    with pytest.raises(SimulationError, match=OVER.format(w=2, t="0.000000") + "task 4 launched while it runs task 3"):
        led.claim([3, 4], [2, 2], 0.0)


def test_slot_claim_of_an_ended_task_is_no_over_commit() -> None:
    led = WorkerLedger("pool", 2)
    led.claim([1], [0], 0.0)
    led.claim([2], [0], 1.0, ended=lambda t: t == 1)  # task 1 has ended, its end is not processed yet
    assert led.running_on(0) == 2
    with pytest.raises(SimulationError, match="over-committed"):
        led.claim([3], [0], 1.0, ended=lambda t: t == 1)


def test_first_offsets_global_ids() -> None:
    led = WorkerLedger("lm/1/pool", 3, first=100)
    led.claim([1, 2], [100, 102], 0.0)
    assert led.running_on(102) == 2
    with pytest.raises(SimulationError, match=r"lm/1/pool: worker 102 over-committed at t=0\.500000"):
        led.claim_one(3, 102, 0.5)
    led.release([100, 102])
    assert led.busy() == 0


def test_resource_claim_release_in_order() -> None:
    cap = np.array([[1.0, 2.0], [0.5, 0.5]])
    led = WorkerLedger("pool", 2, cap)
    assert led.resource_mode and led.task is None
    d = np.array([[0.1, 0.2], [0.2, 0.3], [0.5, 0.5]])
    led.claim([0, 1, 2], [0, 0, 1], 0.0, d)
    ref = np.zeros(2)
    ref += d[0]
    ref += d[1]
    assert led.used[0].tolist() == ref.tolist()  # bit-identical to adding one by one
    assert led.used[1].tolist() == [0.5, 0.5]  # exactly full is no over-commit
    assert not led.fits(1, np.array([0.0, 1e-6]))
    assert led.fits(0, np.array([0.7, 1.5]))
    assert np.allclose(led.room(), cap - led.used)
    led.release([0, 0], d[:2])
    assert led.used[0].tolist() == (ref - d[0] - d[1]).tolist()
    led.clear([1])
    assert led.used[1].tolist() == [0.0, 0.0]


def test_resource_over_commit_raises_the_one_error() -> None:
    led = WorkerLedger("pool", 2, np.array([[1.0, 1.0], [1.0, 1.0]]), first=10)
    led.claim([1], [11], 0.0, np.array([[0.6, 0.1]]))
    led.claim([2], [11], 0.0, np.array([[0.4 + OVER_EPS / 2, 0.1]]))  # within the tolerance
    with pytest.raises(
        SimulationError, match=OVER.format(w=11, t="3.250000") + r"used \[1\.5.*, 0\.5\] > capacity \[1\.0, 1\.0\]"
    ):
        led.claim([3, 4], [10, 11], 3.25, np.array([[0.1, 0.1], [0.5, 0.3]]))


def test_unlimited_checks_nothing() -> None:
    led = WorkerLedger("pool", 0, unlimited=True)
    led.claim([1, 2], [5, 5], 0.0)
    led.release([5, 5])


def test_dead_workers() -> None:
    led = WorkerLedger("pool", 5)
    assert led.fail([3, 1, 3]) == [3, 1]
    assert led.fail([1, 4]) == [4]
    assert led.split_dead([0, 1, 2, 3]) == ([0, 2], [1, 3])
    assert led.restore([1, 2]) == [1]
    assert led.dead == {3, 4}


def test_capacity_shape_is_checked() -> None:
    with pytest.raises(ValueError, match="capacity"):
        WorkerLedger("pool", 3, np.ones((2, 2)))


def test_compiled_kernels_apply_the_same_rules() -> None:
    k = WorkerLedger.kernels()
    led = WorkerLedger("pool", 4, slot_array=True, first=8)
    assert k.claim_slots(led.task, np.array([8, 9], dtype=np.int64), np.array([1, 2], dtype=np.int64), 8) == -1
    assert k.claim_slot(led.task, 10, 3, 8)
    assert not k.claim_slot(led.task, 10, 4, 8)
    at = k.claim_slots(led.task, np.array([11, 9], dtype=np.int64), np.array([5, 6], dtype=np.int64), 8)
    assert at == 1 and led.running_on(11) == 5
    with pytest.raises(SimulationError, match=r"worker 9 over-committed at t=1\.000000: task 6 launched while it runs"):
        led.over_slot(9, 6, 1.0)
    k.release_slots(led.task, np.array([8, 9], dtype=np.int64), 8)
    assert led.running_on(8) == FREE and led.running_on(9) == FREE

    cap = np.array([[1.0, 1.0], [1.0, 1.0]])
    a = WorkerLedger("pool", 2, cap)
    b = WorkerLedger("pool", 2, cap)
    w = np.array([0, 1, 0], dtype=np.int64)
    d = np.array([[0.3, 0.1], [0.9, 0.2], [0.7, 0.4]])
    assert k.claim_resources(a.used, a.capacity, w, d, 0) == -1
    b.claim([1, 2, 3], w, 0.0, d)
    assert a.used.tolist() == b.used.tolist()
    assert not k.exceeds(a.used, a.capacity, 0)
    assert k.fits(a.used, a.capacity, 1, np.array([0.1, 0.8]))
    assert not k.fits(a.used, a.capacity, 1, np.array([0.2, 0.0]))
    assert k.claim_resources(a.used, a.capacity, np.array([1], dtype=np.int64), np.array([[0.2, 0.0]]), 0) == 0
    with pytest.raises(SimulationError, match="worker 1 over-committed"):
        a.over_row(1, 0.0)
    k.release_resources(a.used, w, d, 0)
    assert np.allclose(a.used, [[0.0, 0.0], [0.2, 0.0]])


def test_compiled_single_releases() -> None:
    k = WorkerLedger.kernels()
    led = WorkerLedger("pool", 3, slot_array=True, first=4)
    assert k.claim_slot(led.task, 5, 7, 4) and k.claim_slot(led.task, 6, 8, 4)
    assert not k.release_slot_of(led.task, 5, 99, 4)  # worker 5 runs 7, not 99: kept
    assert led.running_on(5) == 7
    assert k.release_slot_of(led.task, 5, 7, 4)
    assert led.running_on(5) == FREE
    assert not k.release_slot_of(led.task, 5, 7, 4)  # free already
    k.release_slot(led.task, 6, 4)
    assert led.busy() == 0


def test_part_shares_the_arrays_and_names_its_owner() -> None:
    led = WorkerLedger("all", 10, slot_array=True)
    lm = led.part("lm/1/pool", 4, 3)
    assert (lm.first, lm.n_workers, lm.owner) == (4, 3, "lm/1/pool")
    WorkerLedger.kernels().claim_slot(led.task, 5, 11, 0)  # a compiled claim on the whole ledger's array
    assert lm.running_on(5) == 11
    lm.claim_one(12, 6, 0.0)
    assert led.running_on(6) == 12
    with pytest.raises(
        SimulationError, match=r"^lm/1/pool: worker 5 over-committed at t=2\.000000: task 13 .* task 11"
    ):
        lm.over_slot(5, 13, 2.0)
    lm.fail([4])
    assert 4 in led.dead
    cap = np.ones((4, 2))
    res = WorkerLedger("all", 4, cap, first=2)
    sub = res.part("half", 4, 2)
    sub.claim([1], [5], 0.0, np.array([[0.5, 0.25]]))
    assert res.used[3].tolist() == [0.5, 0.25]
    with pytest.raises(ValueError, match="not all in this ledger"):
        res.part("x", 1, 2)
    with pytest.raises(ValueError, match="list slots"):
        WorkerLedger("all", 4).part("x", 0, 2)


def test_resource_free_tracking_subtracts_in_order() -> None:
    cap = np.array([[1.0, 2.0], [0.5, 0.5]])
    led = WorkerLedger("pool", 2, cap, track_free=True)
    assert led.used is None and led.free.tolist() == cap.tolist()
    d = np.array([[0.1, 0.2], [0.2, 0.3], [0.5, 0.5]])
    led.claim([0, 1, 2], [0, 0, 1], 0.0, d)
    ref = cap[0].copy()
    ref -= d[0]
    ref -= d[1]
    assert led.free[0].tolist() == ref.tolist()  # bit-identical to subtracting one by one
    assert led.free[1].tolist() == [0.0, 0.0]
    assert not led.fits(1, np.array([0.0, 1e-6]))
    assert led.fits(0, np.array([0.7, 1.5]))
    assert led.room().tolist() == led.free.tolist()
    with pytest.raises(
        SimulationError, match=OVER.format(w=1, t="1.000000") + r"used \[0\.75, 0\.5\] > capacity \[0\.5, 0\.5\]"
    ):
        led.claim([3], [1], 1.0, np.array([[0.25, 0.0]]))
    led.release([1], np.array([[0.25, 0.0]]))
    led.release([0, 0, 1], d)
    assert np.allclose(led.free, cap)
    led.claim([4], [0], 2.0, np.array([[1.0, 1.0]]))
    led.clear([0])
    assert led.free[0].tolist() == cap[0].tolist()


@pytest.mark.parametrize("slot_array", [False, True])
def test_claim_or_report_slot_records_and_reports(slot_array: bool) -> None:
    led = WorkerLedger("pool", 3, slot_array=slot_array, first=10)
    assert led.claim_or_report(5, 11, 0.0) is None
    text = led.claim_or_report(6, 11, 2.0)  # no raise: the text of the one error, and the claim is kept
    with pytest.raises(SimulationError) as e:
        WorkerLedger("pool", 3, slot_array=slot_array, first=10).claim([5, 6], [11, 11], 2.0)
    assert text == str(e.value)
    assert led.running_on(11) == 6
    led.release([11], tasks=[6])
    assert led.claim_or_report(7, 11, 3.0) is None


@pytest.mark.parametrize("track_free", [False, True])
def test_claim_or_report_resource_records_and_reports(track_free: bool) -> None:
    cap = np.array([[4.0, 2.0], [1.0, 1.0]])
    led = WorkerLedger("pool", 2, cap, track_free=track_free)
    assert led.claim_or_report(1, 0, 0.0, np.array([3.0, 2.0])) is None
    assert led.claim_or_report(2, 0, 0.0, np.array([1.0, OVER_EPS / 2])) is None  # within the tolerance
    text = led.claim_or_report(3, 0, 1.0, np.array([1.0, 0.0]))
    assert text is not None and text.startswith("pool: worker 0 over-committed at t=1.000000: used ")
    assert text.endswith("> capacity [4.0, 2.0]")
    np.testing.assert_allclose(led.room()[0], [-1.0, -OVER_EPS / 2])  # recorded all the same
    led.release([0], np.array([[1.0, 0.0]]))
    np.testing.assert_allclose(led.room()[0], [0.0, -OVER_EPS / 2])


def test_claim_or_report_unlimited_reports_nothing() -> None:
    led = WorkerLedger("ideal", 1, unlimited=True)
    assert led.claim_or_report(1, 0, 0.0) is None and led.claim_or_report(2, 0, 0.0) is None


def test_row_lists_add_in_order_as_the_arrays_do() -> None:
    rng = np.random.default_rng(3)
    cap = rng.random((3, 2)) * 4.0 + 4.0
    arr = WorkerLedger("pool", 3, cap, first=10)
    lst = WorkerLedger("pool", 3, cap, first=10, row_lists=True)
    assert lst.resource_mode and lst.row_lists and lst.cap_rows == cap.tolist()
    for _ in range(20):
        w = rng.integers(10, 13, size=4)
        d = rng.random((4, 2)) * 0.3
        arr.claim([0] * 4, w, 0.0, d)
        lst.claim([0] * 4, w.tolist(), 0.0, d)
        assert np.array_equal(np.array(lst.used), arr.used)  # bit for bit: the same additions, in order
        arr.release(w[:2], d[:2])
        lst.release(w[:2].tolist(), d[:2])
        assert np.array_equal(np.array(lst.used), arr.used)
    assert np.array_equal(lst.room(), arr.room())
    assert lst.fits(11, np.array([0.0, 0.0])) and not lst.fits(11, np.array([100.0, 0.0]))
    assert list(lst.over_rows(np.array([0, 1, 2]))) == [False, False, False]


def test_row_lists_over_commit_raises_the_one_error_with_its_tolerance() -> None:
    cap = np.array([[1.0, 1.0], [2.0, 2.0]])
    led = WorkerLedger("pool", 2, cap, row_lists=True, over_eps=1e-7)
    led.claim([0], [1], 0.0, np.array([[2.0 + 5e-8, 1.0]]))  # within the tolerance: no over-commit
    assert led.used[1] == [2.0 + 5e-8, 1.0] and not led.row_over(1)
    with pytest.raises(SimulationError, match=OVER.format(w=0, t="1.000000") + r"used \[1.5, 0.5\] > capacity"):
        led.claim([1], [0], 1.0, np.array([[1.5, 0.5]]))
    text = led.claim_or_report(2, 1, 2.0, np.array([0.5, 0.0]))
    assert text is not None and text.startswith("pool: worker 1 over-committed at t=2.000000")
    led.used[0] = [1.0, 1.0 + 1e-6]  # a hot path replacing the row, then applying the check inline
    with pytest.raises(SimulationError, match=OVER.format(w=0, t="3.000000")):
        led.over_row(0, 3.0)
    led.clear([0])
    assert led.used[0] == [0.0, 0.0]


def test_clip_release_never_goes_below_zero() -> None:
    cap = np.array([[1.0, 1.0]])
    for row_lists in (False, True):
        led = WorkerLedger("pool", 1, cap, row_lists=row_lists, clip_release=True)
        led.claim([0], [0], 0.0, np.array([[0.1 + 0.2, 0.5]]))
        led.release([0], np.array([[0.3 + 1e-12, 0.5]]))
        assert np.array(led.used).tolist() == [[0.0, 0.0]]
    plain = WorkerLedger("pool", 1, cap, row_lists=True)
    plain.claim([0], [0], 0.0, np.array([[0.1 + 0.2, 0.5]]))
    plain.release([0], np.array([[0.3 + 1e-12, 0.5]]))
    assert plain.used[0][0] < 0.0


def test_row_lists_have_no_parts_and_no_free_tracking() -> None:
    cap = np.ones((2, 1))
    with pytest.raises(ValueError, match="no parts"):
        WorkerLedger("pool", 2, cap, row_lists=True).part("lm", 0, 1)
    with pytest.raises(ValueError, match="track_free"):
        WorkerLedger("pool", 2, cap, row_lists=True, track_free=True)
