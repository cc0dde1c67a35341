"""The compiled simulation of Megha's lean configuration, dispatched from the builder when the run allows it.

In the lean configuration — slot mode, in-process workers, no processing model, one FIFO queue per GM with offer
matching and retried rejections, policy random with round-robin partitions, no fairness, hand-over, state pulls,
replies to every batch or faults; the ``paper`` profile's defaults, any number of GMs and LMs — the whole event loop
runs in one compiled call (:func:`._lean_kernel.run_lean`) with the same results as the
:class:`~megha.schedulers.megha.gm.GlobalMaster` and :class:`~megha.schedulers.megha.simlm.SimLocalMaster`
components, dispatched, checked and handed back as every compiled loop is
(:mod:`megha.schedulers.common.compiled_loop`; ``MEGHA_LEAN`` switches it; it costs about a minute of CPU to
compile once).

What each worker runs is kept in a :class:`~megha.schedulers.common.ledger.WorkerLedger` of all the workers
(``slot_array=True``; its ``task`` array is the loop's), claimed and freed through the ledger's compiled checks; an
over-commit inside the loop raises the ledger's error from the LM's share of it (:meth:`WorkerLedger.part`: the
worker's LM's pool names it), as :class:`~megha.schedulers.megha.simlm.SimLocalMaster`'s own ledger does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from megha.schedulers.common.compiled_loop import (
    absorb_logs,
    count_messages,
    dispatch_hook,
    plain_configuration,
    settle_engine,
    uniform_blocks,
)
from megha.schedulers.common.compiled_switch import NEVER, CompiledSwitch
from megha.schedulers.common.ledger import WorkerLedger
from megha.schedulers.common.messages import Finished, JobArrival, Launch
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.messages import LaunchReply, LaunchRequest, StateDelta, TaskDone
from megha.schedulers.megha.simlm import SimLocalMaster

if TYPE_CHECKING:
    from megha.schedulers.megha import MeghaOptions
    from megha.schedulers.megha.layout import MeghaLayout
    from megha.schedulers.registry import BuildContext

_BLOCK = 4096  # FastRandom's block of uniform numbers
#: ``MEGHA_LEAN`` and the compiled loop it switches (:mod:`megha.schedulers.common.compiled_switch`)
SWITCH = CompiledSwitch("MEGHA_LEAN", "megha.schedulers.megha._lean_kernel")


def lean_runner(
    ctx: BuildContext, opts: MeghaOptions, layout: MeghaLayout, gms: list, lms: list, route: Callable, extras: dict
) -> Callable[..., bool] | None:
    """The compiled run of this deployment, or None when its configuration is not the lean one. A run it completes
    sets ``extras["compiled_run"]``."""
    mode = SWITCH.mode()
    if mode == NEVER:
        return None
    if (
        not plain_configuration(ctx)
        or layout.capacity is not None
        or not opts.in_process_workers
        or opts.shares
        or opts.handoff_after is not None
        or opts.full_pull
        or opts.pull_overwrites
        or opts.reply_always
        or opts.reject != "retry"
    ):
        return None
    for gm in gms:
        if type(gm) is not GlobalMaster or not gm._lean or gm._job_kernel is None or gm.full_pull or gm.fair:
            return None
    for lm in lms:
        if type(lm) is not SimLocalMaster or lm.usage is not None or lm.reply_always:
            return None
    return dispatch_hook(SWITCH, mode, ctx, functools.partial(_run, ctx, layout, gms, lms, route), extras)


def _capacities(w: Any, n_f: int, G: int, L: int, layout: MeghaLayout, n_masks: int, batch: int) -> np.ndarray:
    """The first capacities of the compiled loop's arrays (``_lean_kernel.R_*``): what a run of ``n_f`` feasible
    tasks on this layout needs, with room to spare (a full one makes the loop run again with more: ``NEED_ROOM``).
    Arrays are allocated, not touched, beyond what the run uses."""
    from megha.schedulers.megha import _lean_kernel as K

    n_workers = len(layout.lm_of)
    caps = np.zeros(K.N_ROOM, dtype=np.int64)
    bookings = n_f + n_f // 2 + 4096  # every task once, and the rejected ones again
    caps[K.R_DEC] = bookings
    caps[K.R_COMM] = 2 * bookings
    caps[K.R_RUNS] = n_f + 16
    caps[K.R_EVENTS] = 4 * n_workers + 4096
    caps[K.R_PAYLOAD] = 4 * n_f + 65536
    caps[K.R_REQUESTS] = bookings // max(G, 1) + 4096
    caps[K.R_STORE] = bookings
    caps[K.R_LOG] = 4 * (n_f // max(L, 1)) + 4096
    caps[K.R_SCRATCH] = n_workers + 4096
    caps[K.R_GAINED] = n_workers + 16
    caps[K.R_RETRY] = min(batch, n_workers) + 16
    caps[K.R_NODES] = n_f + 16
    caps[K.R_GROUPS] = n_workers + 16
    caps[K.R_BOOK] = int(np.bincount(layout.lm_of, minlength=max(L, 1)).max()) + 16
    caps[K.R_SLOTS] = n_masks + 1
    caps[K.R_JOB] = int(w.job_num_tasks.max()) + 1 if w.n_jobs else 1
    return caps


def _run(
    ctx: BuildContext,
    layout: MeghaLayout,
    gms: list[GlobalMaster],
    lms: list[SimLocalMaster],
    route: Callable,
    engine: Any,
    source: Any,
    stall: float,
) -> bool:
    """Run the deployment in the compiled loop; False (nothing recorded) when it does not model this run. Raises the
    ledger's over-commit error if the loop reports one."""
    from megha.model.constraints import NUM_CONSTRAINTS
    from megha.schedulers.megha import _lean_kernel as K

    w = ctx.workload
    G, L = layout.n_gms, layout.n_lms
    feasible = np.ascontiguousarray(ctx.feasible, dtype=np.bool_)
    n_f = int(feasible.sum())
    masks = np.ascontiguousarray(w.masks, dtype=np.uint32)
    mgid_mask, task_mgid = np.unique(masks, return_inverse=True)
    g_of = {gm.address: g for g, gm in enumerate(gms)}
    job_gm = np.array([g_of[route(j)] for j in range(w.n_jobs)], dtype=np.int64)
    idx = layout.idx
    h = float(lms[0].heartbeat)
    phase = np.array(
        [lm._aligned if lm._aligned is not None else 0.0 + h * (lm.l + 1) / max(L, 1) for lm in lms], dtype=np.float64
    )
    lm0 = lms[0]
    if any(
        lm.heartbeat != h or lm.launch_delay != lm0.launch_delay or lm.report_delay != lm0.report_delay for lm in lms
    ):
        return False
    gm0 = gms[0]
    if any(gm.batch_size != gm0.batch_size or gm.repartition != gm0.repartition for gm in gms):
        return False
    d_gl = engine.delay_model.delay(GlobalMaster.kind, SimLocalMaster.kind)
    d_lg = engine.delay_model.delay(SimLocalMaster.kind, GlobalMaster.kind)
    if not (d_gl > 0 and d_lg > 0 and lm0.launch_delay > 0 and lm0.report_delay >= 0):
        return False  # an event at the instant it is made: the loop's arrival order assumes none
    blocks = n_f // _BLOCK + 2
    caps = _capacities(w, n_f, G, L, layout, mgid_mask.size, gm0.batch_size)
    while True:
        # each GM's uniform numbers, drawn from a copy of its generator (the components keep theirs)
        ubuf = uniform_blocks([gm.rnd.rng for gm in gms], blocks, _BLOCK)
        counts = np.zeros(K.N_COUNTS, dtype=np.int64)
        gm_counts = np.zeros((G, 3), dtype=np.int64)
        lm_counts = np.zeros((L, 3), dtype=np.int64)
        end = np.zeros(2)
        room = np.zeros(K.N_ROOM, dtype=np.int64)
        logs_n = np.zeros(5, dtype=np.int64)
        n_dec, n_comm, n_runs = int(caps[K.R_DEC]), int(caps[K.R_COMM]), int(caps[K.R_RUNS])
        logs = (
            np.empty(n_dec, dtype=np.int64),  # decided: ids, times
            np.empty(n_dec),
            np.empty(n_comm, dtype=np.int64),  # comm: ids, delays
            np.empty(n_comm),
            np.empty(n_runs, dtype=np.int64),  # started: ids, times, workers
            np.empty(n_runs),
            np.empty(n_runs, dtype=np.int64),
            np.empty(n_runs, dtype=np.int64),  # finished: ids, times
            np.empty(n_runs),
            np.empty(n_runs, dtype=np.int64),  # known: ids, times
            np.empty(n_runs),
        )
        ledger = WorkerLedger("megha/workers", len(layout.lm_of), slot_array=True)  # what each worker runs
        status = K.run_lean(
            np.ascontiguousarray(source.order, dtype=np.int64),
            np.ascontiguousarray(w.job_arrival, dtype=np.float64),
            np.ascontiguousarray(w.job_first_task, dtype=np.int64),
            np.ascontiguousarray(w.job_num_tasks, dtype=np.int64),
            job_gm,
            feasible,
            np.ascontiguousarray(w.task_duration, dtype=np.float64),
            masks,
            task_mgid.astype(np.int64),
            mgid_mask.astype(np.uint32),
            n_f,
            np.stack([gm.view.avail for gm in gms]),
            idx.valid,
            idx.constraint_vectors,
            NUM_CONSTRAINTS,
            layout.int_orders,
            layout.ext_orders,
            idx.seg_word_start,
            gm0.repartition,
            np.array([gm.rr_int for gm in gms], dtype=np.int64),
            np.array([gm.rr_ext for gm in gms], dtype=np.int64),
            np.array([gm.view.n_free for gm in gms], dtype=np.int64),
            idx.worker_at_bit,
            idx.bit_of_worker,
            np.ascontiguousarray(layout.worker_masks, dtype=np.uint32),
            np.ascontiguousarray(layout.lm_of, dtype=np.int64),
            np.ascontiguousarray(layout.part_of, dtype=np.int64),
            ubuf,
            gm0.batch_size,
            h,
            phase,
            d_gl,
            d_lg,
            float(lm0.launch_delay),
            float(lm0.report_delay),
            float(stall),
            ledger.task,
            caps,
            room,
            logs_n,
            *logs,
            counts,
            gm_counts,
            lm_counts,
            end,
        )
        if status == K.NEED_UNIFORMS:
            blocks *= 2
        elif status == K.NEED_ROOM:
            caps = np.maximum(caps, np.where(room > 0, np.maximum(2 * caps, room), caps))
        else:
            break
    if status == K.OVER_COMMIT:
        w_over = int(counts[K.C_OVER_WORKER])
        lm = lms[int(layout.lm_of[w_over])]
        part = ledger.part(lm.pool, lm.lo, lm.hi - lm.lo)  # the LM's workers: its pool's error, as SimLocalMaster's
        part.over_slot(w_over, int(counts[K.C_OVER_TASK]), float(end[1]))
    if status != K.OK:
        return False
    absorb_logs(ctx.recorder, logs_n, list(logs))
    t_end = float(end[0])
    # the messages modelled, the counters, the engine's clock and events (the watchdog's timers included)
    c = counts.tolist()
    count_messages(
        source.port,
        (
            (LaunchRequest, c[K.C_LAUNCH_REQ], False),
            (LaunchReply, c[K.C_LAUNCH_REPLY], False),
            (StateDelta, c[K.C_STATE_DELTA], False),
            (TaskDone, c[K.C_TASK_DONE], False),
            (Launch, c[K.C_LAUNCH], False),
            (Finished, c[K.C_FINISHED], False),
            (JobArrival, c[K.C_JOB_ARRIVAL], False),
        ),
    )
    for g, gm in enumerate(gms):
        for name, k in (
            ("repartition_requests", K.G_REPART_REQ),
            ("updates_received", K.G_UPDATES_RECEIVED),
            ("rejections_received", K.G_REJECTIONS_RECEIVED),
        ):
            if gm_counts[g, k]:
                gm.counters[name] += int(gm_counts[g, k])
    for l, lm in enumerate(lms):  # noqa: E741
        for name, k in (
            ("repartitions", K.L_REPARTITIONS),
            ("inconsistencies", K.L_INCONSISTENCIES),
            ("updates_sent", K.L_UPDATES_SENT),
        ):
            if lm_counts[l, k]:
                lm.counters[name] += int(lm_counts[l, k])
    pos = int(np.searchsorted(w.job_arrival[source.order], t_end, side="right"))
    settle_engine(engine, source, t_end, c[K.C_EVENTS] + c[K.C_WATCHDOG], pos, c[K.C_SKIPPED])
    return True
