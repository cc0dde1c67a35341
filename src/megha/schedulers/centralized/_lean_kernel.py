"""The compiled event loop of ``yarn``'s common configuration (numba): see :mod:`megha.schedulers.centralized._lean`.

:func:`run_lean` runs the whole simulation — trace source, watchdog, the RM's arrivals (node scan, bookings, FIFO
queue), the bookings' heartbeat timers and the in-process node managers' heartbeats — in one call, as
:class:`~megha.schedulers.centralized.simrm.SimResourceManager` does on its common path (slot mode, FIFO queue, a
scan from the soonest heartbeat, no application-master overhead, no processing model, no faults): the same
bookings, queue order, recorder reports and events in the same order (one queue ordered by time, then by the
engine's sequence number, taken in the order the components take theirs). What it does not model — two
containers due at the same heartbeat instant, a booking on a node that holds one, a stall the watchdog would
report, a run that runs out of events — makes it stop with :data:`GAVE_UP` before the caller touches anything, and
the caller runs the components instead. A launch to a node that runs a container stops it with
:data:`OVER_COMMIT` (the node, the task and the instant in ``counts`` and ``end``); the caller raises the node
managers' ledger error.

The node scan's lowest-bit helper (:mod:`megha.schedulers.centralized._kernels`) and the event heap
(:mod:`megha.schedulers.common._event_heap`) are compiled into :func:`run_lean`, and numba's cache of this module
does not notice a change there (the stamps at the end of the file tell it; see ``docs/extending.md``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.schedulers.centralized._kernels import _low_bit
from megha.schedulers.common._event_heap import heap_insert, heap_pop

OK = 0
GAVE_UP = 1
OVER_COMMIT = 2  # a launch to a node that runs a container (C_OVER_NODE, C_OVER_TASK, end[1])

# event kinds
E_SRC, E_WD, E_JOB, E_CLAIM, E_DUE = range(5)

# entries of the counts array
C_JOB = 0  # JobArrival messages
C_LAUNCH = 1  # Launch messages modelled
C_HB = 2  # NodeHeartbeat messages modelled
C_EVENTS = 3
C_SKIPPED = 4  # jobs without a feasible task
C_POS = 5  # the source's position in its arrival order
C_AT_ARRIVAL = 6  # stats: allocated_at_arrival
C_QUEUED = 7  # stats: queued
C_FROM_QUEUE = 8  # stats: allocated_from_queue
C_HEARTBEATS = 9  # stats: heartbeats (the RM's)
C_CLAIM_HB = 10  # stats: claim_heartbeats
C_MAXQ = 11  # stats: max_queue
C_NM_HB = 12  # the node managers' heartbeats
C_LEFT = 13  # tasks left queued
C_OVER_NODE = 14  # OVER_COMMIT: the node
C_OVER_TASK = 15  # OVER_COMMIT: the task launched to it
N_COUNTS = 16


@njit(cache=True)
def _push(hq: np.ndarray, ht: np.ndarray, ev: np.ndarray, st: np.ndarray, t: float, k: int, a: int) -> None:
    """Queue a timer (kind ``k``, argument ``a``) at ``t`` with the next sequence number. ``st``: heap size, free
    slots, next sequence number, slots used."""
    half = ht.size
    nf = st[1]
    if nf > 0:
        slot = hq[half + nf - 1, 1]
        st[1] = nf - 1
    else:
        slot = st[3]
        st[3] += 1
    ev[slot, 0] = k
    ev[slot, 1] = a
    q = st[2]
    st[2] += 1
    heap_insert(hq, ht, st, t, q, slot)


@njit(cache=True, inline="always")
def _home(tick: float, m: int) -> int:
    """The home slot of heartbeat instant ``tick`` in a table of ``m + 1`` slots (a power of two)."""
    h = np.uint64(np.int64(tick * 1048576.0)) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(h >> np.uint64(40)) & m


@njit(cache=True)
def _tick_add(tab_t: np.ndarray, tab_s: np.ndarray, tick: float) -> bool:
    """Add heartbeat instant ``tick`` to the table of pending ones (open addressing; ``tab_s``: 0 empty, 1 used, 2
    removed); False if it is there already."""
    m = tab_t.size - 1
    i = _home(tick, m)
    free = -1
    while tab_s[i] != 0:
        if tab_s[i] == 1:
            if tab_t[i] == tick:
                return False
        elif free < 0:
            free = i
        i = (i + 1) & m
    if free < 0:
        free = i
    tab_t[free] = tick
    tab_s[free] = 1
    return True


@njit(cache=True)
def _tick_remove(tab_t: np.ndarray, tab_s: np.ndarray, tick: float) -> None:
    """Remove heartbeat instant ``tick`` (in the table)."""
    m = tab_t.size - 1
    i = _home(tick, m)
    while not (tab_s[i] == 1 and tab_t[i] == tick):
        i = (i + 1) & m
    tab_s[i] = 2


@njit(cache=True)
def _tick_rebuild(tab_t: np.ndarray, tab_s: np.ndarray, pend: np.ndarray) -> int:
    """Empty the table of removed slots: re-add the pending instants (``pend``, NaN: none). Returns the slots used."""
    tab_s[:] = 0
    n = 0
    for i in range(pend.size):
        if pend[i] == pend[i]:
            _tick_add(tab_t, tab_s, pend[i])
            n += 1
    return n


@njit(cache=True)
def _scan(idle: np.ndarray, valid: np.ndarray, cv: np.ndarray, kb: np.ndarray, k0: int, k1: int, start: int) -> int:
    """The bit of the first node with room whose mask has constraints ``kb[k0:k1]`` at or after bit ``start``,
    wrapping; -1 if none: :func:`~megha.schedulers.centralized._kernels.first_and_from` on ``idle`` and the mask's
    :meth:`~megha.model.matching.SegmentedIndex.static_vector` (``valid`` and the constraints' vectors ``cv``),
    the words of the static vector made only where ``idle`` has a bit."""
    n = idle.size
    wi = start >> 6
    off = np.uint64(start & 63)
    for step in range(n + 1):  # the start word's high bits, the words after it, then from word 0 to the start word
        i = wi + step
        if i >= n:
            i -= n
        x = idle[i]
        if x == 0:
            continue
        x &= valid[i]
        for j in range(k0, k1):
            x &= cv[kb[j], i]
        if step == 0:
            x = (x >> off) << off
        if x:
            return i * 64 + _low_bit(x)
    return -1


@njit(cache=True)
def run_lean(
    order: np.ndarray,
    job_arrival: np.ndarray,
    f_off: np.ndarray,
    f_n: np.ndarray,
    ftasks: np.ndarray,
    durations: np.ndarray,
    task_mid: np.ndarray,
    umask: np.ndarray,
    valid: np.ndarray,
    cv: np.ndarray,
    kb: np.ndarray,
    kb_off: np.ndarray,
    inv_mask: np.ndarray,
    idle: np.ndarray,
    worker_at_bit: np.ndarray,
    bit_of_worker: np.ndarray,
    sorted_phases: np.ndarray,
    phases: np.ndarray,
    period: float,
    d_src: float,
    src_lane: bool,
    launch_delay: float,
    hb_latency: float,
    timeout: float,
    on_node: np.ndarray,
    busy: np.ndarray,
    counts: np.ndarray,
    end: np.ndarray,
) -> tuple:
    """The whole run (see the module's docstring). ``ftasks[f_off[j]:f_off[j] + f_n[j]]``: job ``j``'s feasible
    tasks; ``task_mid``: each task's mask's number, ``umask`` the masks by number, ``kb[kb_off[m]:kb_off[m + 1]]``
    the constraints of mask number ``m``; ``valid`` and ``cv``: the index's nodes and each constraint's nodes (bit
    vectors in heartbeat order, as ``idle``, the RM's nodes with room, updated in place); ``inv_mask``: each node's
    mask complemented (32 bits); ``phases``/``sorted_phases``/``period``: the heartbeat schedule; ``on_node``: the
    node managers' container per node (-1 none) and ``busy`` the RM's view, both updated in place. Fills ``counts``
    (``C_*``), ``end[0]`` (the last event's time) and on :data:`OVER_COMMIT` ``end[1]`` (its instant); returns
    ``(status, log sizes, decided ids, times, comm ids, delays, started ids, times, nodes, finished ids, times, known
    ids, times)``."""
    n_jobs = order.size
    n_f = ftasks.size
    n_w = phases.size
    n_tasks = durations.size
    n_mid = umask.size
    # --- the event queue: a binary heap of slots (rows of `hq` past `ht.size`: the free slots) ---
    cap = 2 * n_w + n_jobs + 16
    hq = np.empty((2 * cap, 2), dtype=np.int64)
    ht = np.empty(cap, dtype=np.float64)
    ev = np.empty((cap, 2), dtype=np.int64)
    st = np.zeros(4, dtype=np.int64)
    lane_t = np.empty(n_jobs + 1)  # JobArrival messages on the engine's lane (default delay): time, sequence, job
    lane_q = np.empty(n_jobs + 1, dtype=np.int64)
    lane_j = np.empty(n_jobs + 1, dtype=np.int64)
    lane_h = 0
    lane_n = 0
    # --- the RM ---
    claim = np.full(n_w, -1, dtype=np.int64)  # the task booked on each node for its next heartbeat
    q_next = np.full(n_tasks, -1, dtype=np.int64)  # the FIFO queue: per mask, a list of tasks in queue order
    q_seq = np.zeros(n_tasks, dtype=np.int64)
    qh = np.full(n_mid, -1, dtype=np.int64)
    qt = np.full(n_mid, -1, dtype=np.int64)
    # the masks with queued tasks, in any order (their heads' sequence numbers are distinct): each one's mask number,
    # mask and head's sequence number in compact arrays (the first fit scans them), its place by mask number
    act = np.empty(n_mid, dtype=np.int64)
    act_mask = np.empty(n_mid, dtype=np.uint32)
    act_head = np.empty(n_mid, dtype=np.int64)
    act_pos = np.full(n_mid, -1, dtype=np.int64)
    umask32 = umask.astype(np.uint32)
    inv32 = inv_mask.astype(np.uint32)
    never = np.iinfo(np.int64).max
    n_act = 0
    q_back = 0
    queued = 0
    failed = np.zeros(n_mid, dtype=np.int64)  # per mask: the last job (+1) whose scan found no node for it
    # --- the node managers: each node's container, its end, and the pending heartbeat instants ---
    run_e = np.zeros(n_tasks)
    run_w = np.zeros(n_tasks, dtype=np.int64)
    pend = np.full(n_w, np.nan)
    n_tab = 16
    while n_tab < 4 * n_w + 16:
        n_tab *= 2
    tab_t = np.zeros(n_tab)
    tab_s = np.zeros(n_tab, dtype=np.int8)
    tab_used = 0
    # --- the recorder's logs ---
    dec_ids = np.empty(n_f, dtype=np.int64)
    dec_t = np.empty(n_f)
    comm_ids = np.empty(n_f, dtype=np.int64)
    comm_d = np.empty(n_f)
    st_ids = np.empty(n_f, dtype=np.int64)
    st_t = np.empty(n_f)
    st_w = np.empty(n_f, dtype=np.int64)
    fin_ids = np.empty(n_f, dtype=np.int64)
    fin_t = np.empty(n_f)
    kn_ids = np.empty(n_f, dtype=np.int64)
    kn_t = np.empty(n_f)
    n_dec = n_st = n_fin = n_kn = 0
    # --- run state ---
    outstanding = n_f
    running = 0
    last_progress = 0.0
    pos = 0
    n_events = 0
    now = 0.0
    status = OK
    stop = False
    over_at = 0.0
    one = np.uint64(1)

    # on_start: the source's first timer, then the watchdog's
    if n_jobs:
        _push(hq, ht, ev, st, 0.0 + max(0.0, job_arrival[order[0]] - 0.0), E_SRC, 0)
    _push(hq, ht, ev, st, 0.0 + timeout, E_WD, 0)
    while st[0] > 0 or lane_n > 0:
        # the engine's next event: the lane's head or the heap's top, whichever is first in (time, sequence)
        if lane_n > 0 and (
            st[0] == 0 or lane_t[lane_h] < ht[0] or (lane_t[lane_h] == ht[0] and lane_q[lane_h] < hq[0, 0])
        ):
            now = lane_t[lane_h]
            k = E_JOB
            a = lane_j[lane_h]
            lane_h += 1
            lane_n -= 1
        else:
            now = ht[0]
            slot = heap_pop(hq, ht, st)
            k = ev[slot, 0]
            a = ev[slot, 1]
        n_events += 1
        t = -1  # a task to launch on node `w` at the end of the event (ResourceManager._flush)
        w = -1
        if k == E_DUE:  # SimResourceManager._nm_due: the heartbeat reporting task `a`'s end
            e = run_e[a]
            w = run_w[a]
            _tick_remove(tab_t, tab_s, pend[w])
            pend[w] = np.nan
            if claim[w] >= 0:
                status = GAVE_UP  # a booking on a node that ran a container: the components' general path
                break
            on_node[w] = -1
            fin_ids[n_fin] = a
            fin_t[n_fin] = e
            n_fin += 1
            running -= 1
            last_progress = e
            counts[C_NM_HB] += 1
            counts[C_HB] += 1
            counts[C_HEARTBEATS] += 1
            kn_ids[n_kn] = a
            kn_t[n_kn] = now
            n_kn += 1
            outstanding -= 1
            stop = outstanding <= 0
            busy[w] = False
            p = -1
            if queued:  # the queue's first fit: the earliest queued task whose mask the node has (a branch-free min)
                nm = inv32[w]
                bs = never
                for i in range(n_act):
                    bs = min(bs, act_head[i] if (act_mask[i] & nm) == 0 else never)
                if bs != never:
                    p = 0
                    while act_head[p] != bs:
                        p += 1
            if p >= 0:
                best = act[p]
                t = qh[best]
                nxt = q_next[t]
                qh[best] = nxt
                if nxt >= 0:
                    act_head[p] = q_seq[nxt]
                else:  # the mask's list is empty: off the active list
                    qt[best] = -1
                    n_act -= 1
                    last = act[n_act]
                    act[p] = last
                    act_mask[p] = act_mask[n_act]
                    act_head[p] = act_head[n_act]
                    act_pos[last] = p
                    act_pos[best] = -1
                queued -= 1
                counts[C_FROM_QUEUE] += 1
                busy[w] = True
            else:
                t = -1
                b = bit_of_worker[w]
                idle[b >> 6] |= one << np.uint64(b & 63)
        elif k == E_CLAIM:  # ResourceManager.on_timer: the heartbeat of node `a`, booked at an arrival
            counts[C_CLAIM_HB] += 1
            t = claim[a]
            claim[a] = -1
            w = a
        elif k == E_JOB:  # ResourceManager._submit
            j = a
            start = np.searchsorted(sorted_phases, now % period)
            n_q = 0
            for u in range(f_off[j], f_off[j] + f_n[j]):
                tk = ftasks[u]
                m = task_mid[tk]
                bit = -1
                if failed[m] != j + 1:
                    bit = _scan(idle, valid, cv, kb, kb_off[m], kb_off[m + 1], start)
                    if bit < 0:
                        failed[m] = j + 1
                if bit >= 0:  # booked on the node: ResourceManager._claim
                    idle[bit >> 6] &= ~(one << np.uint64(bit & 63))
                    node = worker_at_bit[bit]
                    busy[node] = True
                    if claim[node] >= 0:
                        status = GAVE_UP  # two bookings on one node: not in slot mode
                        break
                    claim[node] = tk
                    tick = now + (phases[node] - now) % period
                    _push(hq, ht, ev, st, now + (tick - now + hb_latency), E_CLAIM, node)
                    counts[C_AT_ARRIVAL] += 1
                else:  # WaitQueue.push_back
                    q_back += 1
                    q_seq[tk] = q_back
                    q_next[tk] = -1
                    if qh[m] < 0:
                        qh[m] = tk
                        act[n_act] = m
                        act_mask[n_act] = umask32[m]
                        act_head[n_act] = q_back
                        act_pos[m] = n_act
                        n_act += 1
                    else:
                        q_next[qt[m]] = tk
                    qt[m] = tk
                    n_q += 1
            if status != OK:
                break
            if n_q:
                counts[C_QUEUED] += n_q
                queued += n_q
                if queued > counts[C_MAXQ]:
                    counts[C_MAXQ] = queued
        elif k == E_SRC:  # TraceSource.on_timer
            while pos < n_jobs and job_arrival[order[pos]] <= now:
                j = order[pos]
                pos += 1
                if f_n[j] == 0:
                    counts[C_SKIPPED] += 1
                    continue
                counts[C_JOB] += 1
                if src_lane:
                    i = lane_h + lane_n
                    lane_t[i] = now + d_src
                    lane_q[i] = st[2]
                    st[2] += 1
                    lane_j[i] = j
                    lane_n += 1
                else:
                    _push(hq, ht, ev, st, now + d_src, E_JOB, j)
            if pos < n_jobs:
                _push(hq, ht, ev, st, now + (job_arrival[order[pos]] - now), E_SRC, 0)
        elif k == E_WD and outstanding > 0:  # Watchdog.on_timer (it stops re-arming once all is known)
            if running == 0 and pos >= n_jobs and now - last_progress >= timeout:
                status = GAVE_UP
                break
            _push(hq, ht, ev, st, now + timeout, E_WD, 0)
        if t >= 0:  # SimResourceManager._flush of one launch: task t to node w
            dec_ids[n_dec] = t
            dec_t[n_dec] = now
            n_dec += 1
            counts[C_LAUNCH] += 1
            t1 = now + launch_delay  # when the node managers get it
            if on_node[w] >= 0:
                status = OVER_COMMIT
                counts[C_OVER_NODE] = w
                counts[C_OVER_TASK] = t
                over_at = t1
                break
            on_node[w] = t
            comm_ids[n_st] = t
            comm_d[n_st] = launch_delay
            st_ids[n_st] = t
            st_t[n_st] = t1
            st_w[n_st] = w
            n_st += 1
            running += 1
            last_progress = t1
            e = t1 + durations[t]
            tick = e + (phases[w] - e) % period  # HeartbeatSchedule.next_tick
            if not _tick_add(tab_t, tab_s, tick):
                status = GAVE_UP  # two containers due at the same heartbeat instant: the components' general path
                break
            tab_used += 1
            pend[w] = tick
            run_e[t] = e
            run_w[t] = w
            fire = t1 + (tick - t1)  # the instant the node managers' timer would fire
            _push(hq, ht, ev, st, fire + hb_latency, E_DUE, t)
            if 2 * tab_used > n_tab:
                tab_used = _tick_rebuild(tab_t, tab_s, pend)
        if stop:
            break
    if status == OK and not stop:
        status = GAVE_UP  # out of events with tasks unfinished: the components report it
    end[0] = now
    if status == OVER_COMMIT:
        end[1] = over_at
    counts[C_EVENTS] = n_events
    counts[C_POS] = pos
    counts[C_LEFT] = queued
    return (
        status,
        np.array([n_dec, n_st, n_st, n_fin, n_kn], dtype=np.int64),
        dec_ids,
        dec_t,
        comm_ids,
        comm_d,
        st_ids,
        st_t,
        st_w,
        fin_ids,
        fin_t,
        kn_ids,
        kn_t,
    )


# numba cache stamp: megha.schedulers.centralized._kernels=bd0d044b44b3
# numba cache stamp: megha.schedulers.common._event_heap=db7406567ed5
