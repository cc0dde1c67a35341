"""The compiled simulation of Pigeon's common configurations, dispatched from the builder when the run allows it.

In the common configurations — ``pigeonc`` (exact or reference master weights) or ``pigeon`` (even spread,
reserved workers), any worker choice, in-process workers (no processing model), no fault schedule, slot mode — the
whole event loop runs in one compiled call (:func:`._lean_kernel.run_lean`) with the same results as the
:class:`~megha.schedulers.pigeon.distributor.PigeonDistributor` and
:class:`~megha.schedulers.pigeon.simmaster.SimPigeonMaster` components, dispatched, checked and handed back as
every compiled loop is (:mod:`megha.schedulers.common.compiled_loop`; ``PIGEON_LEAN`` switches it).

What each worker runs is kept in a :class:`~megha.schedulers.common.ledger.WorkerLedger` of the whole datacenter
(``slot_array=True``; its ``task`` array is the loop's), started and ended through the ledger's compiled checks; an
over-commit inside the loop raises the ledger's error with the launching master's group's name
(:meth:`WorkerLedger.part` of the group's rows, named as the master's own ledger), as the components do.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from megha.model.constraints import MASK_DTYPE
from megha.model.matching import Policy
from megha.schedulers.common.compiled_loop import (
    absorb_logs,
    count_messages,
    dispatch_hook,
    feasible_job_spans,
    fresh_engine,
    plain_configuration,
    settle_engine,
    uniform_blocks,
)
from megha.schedulers.common.compiled_switch import NEVER, CompiledSwitch
from megha.schedulers.common.ledger import WorkerLedger
from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.schedulers.pigeon.distributor import PigeonDistributor
from megha.schedulers.pigeon.messages import Ended, Start, TaskBatch, TaskDone, TasksDone
from megha.schedulers.pigeon.simmaster import SimPigeonMaster

if TYPE_CHECKING:
    from megha.schedulers.registry import BuildContext

#: ``PIGEON_LEAN`` and the compiled loop it switches (:mod:`megha.schedulers.common.compiled_switch`)
SWITCH = CompiledSwitch("PIGEON_LEAN", "megha.schedulers.pigeon._lean_kernel")
#: the largest (queues × constraint masks) table of queue slots the compiled loop allocates
MAX_QUEUE_SLOTS = 1 << 22
_BLOCK = 4096  # FastRandom's block of uniform numbers
#: the masters' worker choices the compiled loop makes, by its number for them (``_lean_kernel.P_*``)
_POLICIES = {Policy.RANDOM: 0, Policy.MIN_CONSTRAINTS: 1, Policy.FIRST: 2}


def lean_runner(
    ctx: BuildContext,
    dists: list[PigeonDistributor],
    masters: list,
    route: Callable[[int], str],
    extras: dict,
) -> Callable[..., bool] | None:
    """The compiled run of this deployment, or None when its configuration is not the common one. A run it
    completes sets ``extras["compiled_run"]``."""
    mode = SWITCH.mode()
    if mode == NEVER:
        return None
    if not plain_configuration(ctx) or np.dtype(MASK_DTYPE) != np.uint32 or not dists or not masters:
        return None
    weights = dists[0].weights
    for i, d in enumerate(dists):
        if type(d) is not PigeonDistributor or d.weighted != dists[0].weighted or d.weights is not weights:
            return None
        if d.number != i or d.address != route(i) or d.masters != dists[0].masters or d.cutoff != dists[0].cutoff:
            return None  # the compiled loop routes job j to distributor j % len(dists)
    m0 = masters[0]
    for g, m in enumerate(masters):
        if type(m) is not SimPigeonMaster or m.policy not in _POLICIES:
            return None
        if m.address != dists[0].masters[g] or m.distributors != [d.address for d in dists]:
            return None
        if (m.launch_delay, m.report_delay, m.known_delay, m._short_turns, m.policy) != (
            m0.launch_delay,
            m0.report_delay,
            m0.known_delay,
            m0._short_turns,
            m0.policy,
        ):
            return None

    def healthy() -> bool:
        """No distributor degraded or parked, no master dead: failures are the components' business."""
        return not (
            any((d.health is not None and d.health.degraded) or d.parked for d in dists) or any(m.dead for m in masters)
        )

    return dispatch_hook(SWITCH, mode, ctx, functools.partial(_run, ctx, dists, masters), extras, healthy)


def first_uniforms(n_tasks: int, n_masters: int) -> int:
    """How many uniform numbers each master gets on the first try (twice the mean share of the tasks, and a block;
    a run that needs more is run again with twice as many)."""
    return 2 * n_tasks // n_masters + _BLOCK


def _starts(rng: np.random.Generator, n_jobs: int, n_masters: int) -> list[int]:
    """The first master of each of ``n_jobs`` even spreads, drawn one call at a time as the distributor draws them
    (from a copy of its generator)."""
    rng = copy.deepcopy(rng)
    return [int(rng.integers(n_masters)) for _ in range(n_jobs)]


def _uniforms(rngs: list[np.random.Generator], n: int) -> np.ndarray:
    """The first ``n`` uniform numbers of each generator (drawn from copies: the components keep theirs), in blocks
    of :data:`_BLOCK` as :class:`~megha.model.matching.FastRandom` draws them."""
    return uniform_blocks(rngs, -(-n // _BLOCK), _BLOCK)


def _run(
    ctx: BuildContext,
    dists: list[PigeonDistributor],
    masters: list[SimPigeonMaster],
    engine: Any,
    source: Any,
    stall: float,
) -> bool:
    """Run the deployment in the compiled loop; False (nothing recorded) when it does not reproduce this run. Raises
    the ledger's over-commit error if the loop reports one."""
    if not fresh_engine(engine):
        return False
    dm = engine.delay_model
    lane = engine._lane_delay
    d_src = float(dm.delay(source.kind, PigeonDistributor.kind))
    d_dm = float(dm.delay(PigeonDistributor.kind, SimPigeonMaster.kind))
    d_md = float(dm.delay(SimPigeonMaster.kind, PigeonDistributor.kind))
    m0 = masters[0]
    if d_md != m0.known_delay:
        return False
    rngs_d = [d.port.rng for d in dists]
    rngs_m = [m.port.rng for m in masters]
    if any(type(r) is not np.random.Generator for r in rngs_d + rngs_m):
        return False
    from megha.schedulers.pigeon import _lean_kernel as K

    w = ctx.workload
    n_d, n_m = len(dists), len(masters)
    feasible = np.ascontiguousarray(ctx.feasible, dtype=np.bool_)
    n_f = int(feasible.sum())
    masks = np.asarray(w.masks).astype(np.int64)
    ftasks = np.flatnonzero(feasible).astype(np.int64)
    f_off, f_n = feasible_job_spans(w, feasible)
    umask, task_mid = np.unique(masks, return_inverse=True)
    if 2 * n_m * umask.size > MAX_QUEUE_SLOTS:
        return False
    job_dist = np.arange(w.n_jobs, dtype=np.int64) % n_d  # route: dist_addr[job % n_dist]
    job_short = np.asarray(w.job_mean_duration, dtype=np.float64) < dists[0].cutoff  # exact in float64
    # each distributor draws one uniform number per task of its jobs, in the order the jobs reach it
    weighted = dists[0].weighted
    per_dist = np.bincount(job_dist, weights=f_n, minlength=n_d).astype(np.int64) if weighted else np.zeros(n_d)
    d_uoff = np.zeros(n_d, dtype=np.int64)
    np.cumsum(per_dist[:-1], out=d_uoff[1:])
    d_uni = np.concatenate(
        [copy.deepcopy(r).random(int(k)) for r, k in zip(rngs_d, per_dist.tolist(), strict=True)] + [np.zeros(0)]
    )
    # without weights, each distributor draws the first master of each job's spread, in the order its jobs reach it
    jobs_per_dist = np.bincount(job_dist[f_n > 0], minlength=n_d) if not weighted else np.zeros(n_d, dtype=np.int64)
    d_ioff = np.zeros(n_d, dtype=np.int64)
    np.cumsum(jobs_per_dist[:-1], out=d_ioff[1:])
    d_int = np.array(
        [x for r, k in zip(rngs_d, jobs_per_dist.tolist(), strict=True) for x in _starts(r, k, n_m)] + [0],
        dtype=np.int64,
    )
    w_res = np.zeros(ctx.datacenter.worker_masks.size, dtype=np.bool_)
    for m in masters:
        if m.reserved:
            w_res[sorted(m.reserved)] = True
    m_workers = np.concatenate([np.asarray(m.workers, dtype=np.int64) for m in masters])
    m_off = np.zeros(n_m + 1, dtype=np.int64)
    np.cumsum([m.workers.size for m in masters], out=m_off[1:])
    worker_masks = np.ascontiguousarray(ctx.datacenter.worker_masks, dtype=np.int64)
    n_w = worker_masks.size
    weights = dists[0].weights
    if weights.reference:
        ref = (weights._ref_keys, weights._ref_counts, weights._ref_owner)
    else:
        ref = (np.zeros(0, dtype=np.int64),) * 3
    n_uni = first_uniforms(n_f, n_m) if m0.policy is Policy.RANDOM else 1
    while True:
        m_uni = _uniforms(rngs_m, n_uni)
        counts = np.zeros(K.N_COUNTS, dtype=np.int64)
        m_stats = np.zeros((n_m, 4), dtype=np.int64)
        d_jobs = np.zeros((n_d, 2), dtype=np.int64)
        end = np.zeros(2)
        ledger = WorkerLedger("pigeon/workers", n_w, slot_array=True)  # what each worker runs (a fresh one per try)
        status, logs_n, *logs = K.run_lean(
            np.ascontiguousarray(source.order, dtype=np.int64),
            np.ascontiguousarray(w.job_arrival, dtype=np.float64),
            f_off,
            f_n,
            ftasks,
            job_dist,
            job_short,
            np.ascontiguousarray(w.task_duration, dtype=np.float64),
            task_mid.astype(np.int64).ravel(),
            umask.astype(np.int64),
            worker_masks,
            m_workers,
            m_off,
            d_uni,
            d_uoff,
            m_uni,
            weighted,
            d_int,
            d_ioff,
            w_res,
            _POLICIES[m0.policy],
            *ref,
            weights.reference,
            int(m0._short_turns),
            d_src,
            d_src == lane,
            d_dm,
            d_dm == lane,
            d_md,
            d_md == lane,
            float(m0.launch_delay),
            float(m0.report_delay),
            float(stall),
            ledger.task,
            counts,
            m_stats,
            d_jobs,
            end,
        )
        if status != K.NEED_UNIFORMS or n_uni >= n_f + _BLOCK:
            break
        n_uni = min(2 * n_uni, n_f + _BLOCK)
    if status == K.OVER_COMMIT:
        m = masters[int(counts[K.C_OVER_MASTER])]
        _raise_over_commit(ledger, m.ledger, int(counts[K.C_OVER_WORKER]), int(counts[K.C_OVER_TASK]), float(end[1]))
    if status != K.OK:
        return False
    absorb_logs(ctx.recorder, logs_n, logs)
    c = counts.tolist()
    # the message counts (the masters count Start, Ended and TaskDone from their start, even if none)
    count_messages(
        source.port,
        (
            (JobArrival, c[K.C_JOB], False),
            (TaskBatch, c[K.C_BATCH], False),
            (Start, c[K.C_START], True),
            (Launch, c[K.C_LAUNCH], False),
            (Ended, c[K.C_ENDED], True),
            (Finished, c[K.C_FINISHED], False),
            (TaskDone, c[K.C_TASKDONE], True),
            (TasksDone, c[K.C_TASKSDONE], False),
        ),
    )
    for i, d in enumerate(dists):
        d.jobs_short += int(d_jobs[i, 0])
        d.jobs_long += int(d_jobs[i, 1])
    keys = ("queued_short", "queued_long", "served_short", "served_long")
    for g, m in enumerate(masters):
        for k, key in enumerate(keys):
            m.stats[key] += int(m_stats[g, k])
    settle_engine(engine, source, float(end[0]), c[K.C_EVENTS], c[K.C_POS], c[K.C_SKIPPED])
    return True


def _raise_over_commit(ledger: WorkerLedger, group: WorkerLedger, w: int, t: int, at: float) -> NoReturn:
    """The master's over-commit error (``SimPigeonMaster._launch``'s): task ``t`` launched at ``at`` on worker ``w``
    of the master whose own ledger is ``group``, which runs a task in ``ledger`` (the compiled loop's)."""
    ledger.part(group.owner, group.first, group.n_workers).over_slot(w, t, at)
