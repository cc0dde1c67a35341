"""The compiled simulation of ``yarn``'s common configuration, dispatched from the builder when the run allows it.

In the common configuration — slot mode with the node managers in-process
(:class:`~megha.schedulers.centralized.simrm.SimResourceManager`), FIFO queue, a scan from the soonest heartbeat
(``rotate`` or ``first``), no application-master overhead, no processing model, no fault schedule — the whole event
loop runs in one compiled call (:func:`._lean_kernel.run_lean`) with the components' results, dispatched, checked
and handed back as every compiled loop is (:mod:`megha.schedulers.common.compiled_loop`; ``YARN_LEAN`` switches
it). The RM's counters, its queue's length and the node managers' record of what each node runs are set as the
components leave them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from megha.model.constraints import MASK_DTYPE, NUM_CONSTRAINTS
from megha.schedulers.centralized.messages import NodeHeartbeat
from megha.schedulers.centralized.simrm import SimResourceManager
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
from megha.schedulers.common.messages import JobArrival, Launch

if TYPE_CHECKING:
    from megha.schedulers.registry import BuildContext

#: ``YARN_LEAN`` and the compiled loop it switches (:mod:`megha.schedulers.common.compiled_switch`)
SWITCH = CompiledSwitch("YARN_LEAN", "megha.schedulers.centralized._lean_kernel")


def lean_runner(ctx: BuildContext, rm: SimResourceManager, extras: dict) -> Callable[..., bool] | None:
    """The compiled run of this deployment, or None when its configuration is not the common one. A run it
    completes sets ``extras["compiled_run"]``."""
    mode = SWITCH.mode()
    if mode == NEVER:
        return None
    if (
        not plain_configuration(ctx)
        or np.dtype(MASK_DTYPE) != np.uint32
        or type(rm) is not SimResourceManager
        or rm.resource
        or rm.queue_policy != "fifo"
        or rm.scan not in ("rotate", "first")
        or rm.am_overhead != 0
    ):
        return None
    return dispatch_hook(SWITCH, mode, ctx, functools.partial(_run, ctx, rm), extras)


def _run(ctx: BuildContext, rm: SimResourceManager, engine: Any, source: Any, stall: float) -> bool:
    """Run the deployment in the compiled loop; False (nothing recorded) when it does not reproduce this run. Raises
    the node managers' over-commit error if the loop reports one."""
    if not fresh_engine(engine) or rm.queues or rm.claims or rm._due:
        return False
    d_src = float(engine.delay_model.delay(source.kind, rm.kind))
    from megha.schedulers.centralized import _lean_kernel as K

    w = ctx.workload
    feasible = np.ascontiguousarray(ctx.feasible, dtype=np.bool_)
    masks = np.asarray(w.masks).astype(np.int64)
    ftasks = np.flatnonzero(feasible).astype(np.int64)
    f_off, f_n = feasible_job_spans(w, feasible)
    umask = np.unique(masks[feasible])
    task_mid = np.searchsorted(umask, masks).astype(np.int64)
    if umask.size and int(umask[-1]) >> NUM_CONSTRAINTS:
        return False  # a constraint no node has (such a task is infeasible)
    index = rm.index
    has = (umask[:, None] >> np.arange(NUM_CONSTRAINTS, dtype=np.int64)) & 1  # each mask's constraints
    kb_off = np.zeros(umask.size + 1, dtype=np.int64)
    np.cumsum(has.sum(axis=1), out=kb_off[1:])
    kb = np.nonzero(has)[1].astype(np.int64)
    worker_masks = np.asarray(rm.mask_of, dtype=np.int64)
    sch = rm.schedule
    idle = rm.idle.copy()
    on_node = np.array(rm.on_node, dtype=np.int64)  # the node managers' ledger: each node's container (-1: none)
    busy = np.zeros(len(rm.mask_of), dtype=np.bool_)
    counts = np.zeros(K.N_COUNTS, dtype=np.int64)
    end = np.zeros(2)
    status, logs_n, *logs = K.run_lean(
        np.ascontiguousarray(source.order, dtype=np.int64),
        np.ascontiguousarray(w.job_arrival, dtype=np.float64),
        f_off,
        f_n,
        ftasks,
        np.ascontiguousarray(w.task_duration, dtype=np.float64),
        task_mid,
        umask,
        np.ascontiguousarray(index.valid, dtype=np.uint64),
        np.ascontiguousarray(index.constraint_vectors, dtype=np.uint64),
        kb,
        kb_off,
        ~worker_masks & 0xFFFFFFFF,
        idle,
        np.ascontiguousarray(index.worker_at_bit, dtype=np.int64),
        np.ascontiguousarray(index.bit_of_worker, dtype=np.int64),
        np.ascontiguousarray(sch.sorted_phases, dtype=np.float64),
        np.ascontiguousarray(sch.phases, dtype=np.float64),
        float(sch.period),
        d_src,
        d_src == engine._lane_delay,
        float(rm.launch_delay),
        float(rm.hb_latency),
        float(stall),
        on_node,
        busy,
        counts,
        end,
    )
    if status == K.OVER_COMMIT:
        rm.ledger.over_slot(int(counts[K.C_OVER_NODE]), int(counts[K.C_OVER_TASK]), float(end[1]))
    if status != K.OK:
        return False
    absorb_logs(ctx.recorder, logs_n, logs)
    c = counts.tolist()
    count_messages(
        source.port,
        ((JobArrival, c[K.C_JOB], False), (Launch, c[K.C_LAUNCH], True), (NodeHeartbeat, c[K.C_HB], True)),
    )
    stats = rm.stats
    stats["allocated_at_arrival"] += c[K.C_AT_ARRIVAL]
    stats["queued"] += c[K.C_QUEUED]
    stats["allocated_from_queue"] += c[K.C_FROM_QUEUE]
    stats["heartbeats"] += c[K.C_HEARTBEATS]
    stats["claim_heartbeats"] += c[K.C_CLAIM_HB]
    stats["max_queue"] = max(stats["max_queue"], c[K.C_MAXQ])
    rm.nm_heartbeats += c[K.C_NM_HB]
    rm._queued = c[K.C_LEFT]
    rm.on_node[:] = on_node.tolist()  # the ledger's list, in place
    rm.busy[:] = busy.tolist()
    rm.idle[:] = idle
    settle_engine(engine, source, float(end[0]), c[K.C_EVENTS], c[K.C_POS], c[K.C_SKIPPED])
    return True
