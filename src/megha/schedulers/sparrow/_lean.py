"""The compiled simulation of Sparrow's common configuration, dispatched from the builder when the run allows it.

In the common configuration — slot mode, no processing model, no fault schedule, every scheduler–monitor link on
the engine's default delay (the one where the node monitors skip known no-ops and answers start tasks directly) —
the whole event loop runs in one compiled call (:func:`._lean_kernel.run_lean`) with the same results as the
:class:`~megha.schedulers.sparrow.scheduler.SparrowScheduler` and
:class:`~megha.schedulers.sparrow.monitors.SparrowMonitors` components, dispatched, checked and handed back as
every compiled loop is (:mod:`megha.schedulers.common.compiled_loop`; ``SPARROW_LEAN`` switches it).

What each worker runs is kept in a :class:`~megha.schedulers.common.ledger.WorkerLedger` of the node monitors
(``slot_array=True``; its ``task`` array is the loop's), started and ended through the ledger's compiled checks; an
over-commit inside the loop raises the ledger's error, with the node monitors' name, as the components do.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from megha.model.constraints import MASK_DTYPE
from megha.schedulers.common.compiled_loop import (
    absorb_logs,
    count_messages,
    dispatch_hook,
    feasible_job_spans,
    fresh_engine,
    plain_configuration,
    settle_engine,
)
from megha.schedulers.common.compiled_switch import NEVER, CompiledSwitch
from megha.schedulers.common.ledger import WorkerLedger
from megha.schedulers.common.messages import Finished, JobArrival
from megha.schedulers.sparrow.messages import Done, GetTask, Grant, Probes, Request, TaskReply
from megha.schedulers.sparrow.monitors import SparrowMonitors
from megha.schedulers.sparrow.scheduler import SparrowScheduler

if TYPE_CHECKING:
    from megha.schedulers.registry import BuildContext

#: ``SPARROW_LEAN`` and the compiled loop it switches (:mod:`megha.schedulers.common.compiled_switch`)
SWITCH = CompiledSwitch("SPARROW_LEAN", "megha.schedulers.sparrow._lean_kernel")


def lean_runner(
    ctx: BuildContext,
    monitors: SparrowMonitors,
    scheds: list[SparrowScheduler],
    route: Callable[[int], str],
    extras: dict,
) -> Callable[..., bool] | None:
    """The compiled run of this deployment, or None when its configuration is not the common one. A run it
    completes sets ``extras["compiled_run"]``."""
    mode = SWITCH.mode()
    if mode == NEVER:
        return None
    if (
        not plain_configuration(ctx)
        or np.dtype(MASK_DTYPE) != np.uint32
        or monitors.done_delay is None
        or monitors.resource
    ):
        return None
    for i, s in enumerate(scheds):
        if s.address != route(i) or s.number != i:
            return None  # the compiled loop routes job j to scheduler j % len(scheds)
        if type(s) is not SparrowScheduler or not s.direct or s.sampler is not scheds[0].sampler:
            return None
    if type(monitors) is not SparrowMonitors or monitors._peers is None:
        return None
    return dispatch_hook(SWITCH, mode, ctx, functools.partial(_run, ctx, monitors, scheds, route), extras)


def _run(
    ctx: BuildContext,
    monitors: SparrowMonitors,
    scheds: list[SparrowScheduler],
    route: Callable[[int], str],
    engine: Any,
    source: Any,
    stall: float,
) -> bool:
    """Run the deployment in the compiled loop; False (nothing recorded) when it does not reproduce this run. Raises
    the ledger's over-commit error if the loop reports one."""
    if not fresh_engine(engine):
        return False
    dm = engine.delay_model
    d_sm = float(dm.delay(SparrowScheduler.kind, SparrowMonitors.kind))
    d_ms = float(dm.delay(SparrowMonitors.kind, SparrowScheduler.kind))
    d_src = float(dm.delay(source.kind, SparrowScheduler.kind))
    lane = engine._lane_delay
    if d_sm != lane or d_ms != lane or monitors.done_delay != d_ms:
        return False  # the routed links (SimPort.route) the components' common path needs
    rngs = [s.port.rng for s in scheds]
    if any(type(r) is not np.random.Generator for r in rngs):
        return False
    ratios = {s.d for s in scheds}
    if len(ratios) != 1:
        return False
    ratio = ratios.pop()
    sampler = scheds[0].sampler
    if sampler.capacity is not None or sampler.n >= 1 << 31:
        return False
    from megha.schedulers.common._sampling_kernels import bit_source
    from megha.schedulers.sparrow import _lean_kernel as K

    w = ctx.workload
    feasible = np.ascontiguousarray(ctx.feasible, dtype=np.bool_)
    n_f = int(feasible.sum())
    masks = np.asarray(w.masks)
    ftasks = np.flatnonzero(feasible).astype(np.int64)
    f_off, f_n = feasible_job_spans(w, feasible)
    # the masks a group can have (its tasks' mask, or 0), numbered; the compiled loop counts and lists their eligible
    # workers as the sampler does when a group first needs them
    umask = np.unique(np.concatenate([masks[feasible].astype(np.int64), np.zeros(1, dtype=np.int64)]))
    task_mid = np.searchsorted(umask, masks.astype(np.int64)).astype(np.int64)
    mid_zero = int(np.searchsorted(umask, 0))
    job_sched = np.arange(w.n_jobs, dtype=np.int64) % len(scheds)  # route: addrs[job % n]
    # a bound on the probes: per group ceil(d·k) (at least k), groups at most one per task
    n_probes = math.ceil(ratio * n_f) + n_f + 2 * int((f_n > 0).sum()) + 16
    # each scheduler's generator, copied (the components keep theirs)
    copies = [copy.deepcopy(r) for r in rngs]
    src = [bit_source(r) for r in copies]
    counts = np.zeros(K.N_COUNTS, dtype=np.int64)
    sched_counts = np.zeros((len(scheds), 3), dtype=np.int64)
    end = np.zeros(2)
    ledger = WorkerLedger(monitors.address, len(sampler.masks), slot_array=True)  # what each worker runs
    status, logs_n, *logs = K.run_lean(
        np.ascontiguousarray(source.order, dtype=np.int64),
        np.ascontiguousarray(w.job_arrival, dtype=np.float64),
        f_off,
        f_n,
        job_sched,
        ftasks,
        np.ascontiguousarray(w.task_duration, dtype=np.float64),
        masks.astype(np.int64),
        task_mid,
        mid_zero,
        int(umask.size),
        32,  # constraint masks are uint32
        np.ascontiguousarray(sampler.masks, dtype=np.uint32),
        np.array([f for f, _ in src], dtype=np.int64),
        np.array([a for _, a in src], dtype=np.int64),
        float(ratio),
        float(sampler.exact_below * sampler.n),
        d_src,
        d_src == lane,
        d_sm,
        d_ms,
        float(stall),
        n_probes,
        ledger.task,
        counts,
        sched_counts,
        end,
    )
    del copies
    if status == K.OVER_COMMIT:
        _raise_over_commit(ledger, int(counts[K.C_OVER_WORKER]), int(counts[K.C_OVER_TASK]), float(end[1]))
    if status != K.OK:
        return False
    (n_wq,), (wq_ids, wq_v) = absorb_logs(ctx.recorder, logs_n, logs)
    if n_wq:
        ctx.recorder.add_worker_queue(wq_ids[:n_wq], wq_v[:n_wq])
    c = counts.tolist()
    unsent, unanswered = c[K.C_UNSENT], c[K.C_UNANSWERED]
    # the message counts (Done, Request and Grant are counted from the start on the common path, even if none)
    count_messages(
        source.port,
        (
            (JobArrival, c[K.C_JOB], False),
            (Probes, c[K.C_PROBES], False),
            (Done, c[K.C_DONE], True),
            (Request, c[K.C_REQ] - unsent, True),
            (Grant, c[K.C_GRANT] - unanswered, True),
            (GetTask, c[K.C_GETTASK], False),
            (TaskReply, c[K.C_REPLY], False),
            (Finished, c[K.C_FIN], False),
        ),
    )
    for i, s in enumerate(scheds):
        s.probes += int(sched_counts[i, 0])
        s.requests += int(sched_counts[i, 1])
        s.noops += int(sched_counts[i, 2])
    monitors.queued_probes += c[K.C_QUEUED]
    monitors.max_queue = max(monitors.max_queue, c[K.C_MAXQ])
    monitors._settled = (unsent, unanswered)
    settle_engine(engine, source, float(end[0]), c[K.C_EVENTS], c[K.C_POS], c[K.C_SKIPPED])
    return True


def _raise_over_commit(ledger: WorkerLedger, w: int, t: int, at: float) -> NoReturn:
    """The node monitors' over-commit error (``SparrowMonitors._over_slot``'s): task ``t`` reached worker ``w`` at
    ``at`` while it runs a task, or while it holds no request."""
    if ledger.task[w] >= 0:
        ledger.over_slot(w, t, at)
    ledger.over(w, at, f"task {t} sent while it holds no request")
