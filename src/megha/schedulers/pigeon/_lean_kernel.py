"""The compiled event loop of Pigeon's and PigeonC's common configurations (numba): see
:mod:`megha.schedulers.pigeon._lean`.

:func:`run_lean` runs the whole simulation — trace source, watchdog, the distributors' master choice (weighted, or
the even spread), the masters' worker choice (reserved workers included), short/long queues with weighted fair
queuing, the in-process workers' ends — in one call, as the components do on the simulator's common path
(:class:`~megha.schedulers.pigeon.distributor.PigeonDistributor` and
:class:`~megha.schedulers.pigeon.simmaster.SimPigeonMaster`, no processing model, no faults): the same decisions,
the same random draws (each distributor's and each master's generator, drawn ahead by the caller) and the events in
the same order (one queue ordered by time, then by the engine's sequence number, taken in the order the components
take theirs). It returns the recorder's logs; it fills the message counts and the counters. Anything it cannot
reproduce (a stall the watchdog would report, a run that runs out of events, a choice past the last master) makes it
stop with :data:`GAVE_UP` and the caller runs the components instead; a master that ran out of the uniform numbers
drawn for it stops it with :data:`NEED_UNIFORMS`.

What each worker runs is a :class:`~megha.schedulers.common.ledger.WorkerLedger`'s: the caller passes its ``task``
array (``slot_array=True``, global worker ids) and the loop starts and ends tasks through the ledger's compiled
checks (:mod:`megha.schedulers.common._ledger_kernels`). A launch on a worker that runs a task already stops the loop
with :data:`OVER_COMMIT` (the master, the worker and the task in ``counts``, the instant in ``end[1]``), and the
caller raises the ledger's error with that master's group's name, as the components do.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.model._kernels import popcount64 as _popcount
from megha.schedulers.common._event_heap import heap_insert, heap_pop
from megha.schedulers.common._ledger_kernels import claim_slot, release_slot
from megha.schedulers.pigeon._kernels import take_random_in

OK = 0
GAVE_UP = 1
NEED_UNIFORMS = 2
OVER_COMMIT = 3  # a launch on a worker that runs a task (C_OVER_MASTER, C_OVER_WORKER, C_OVER_TASK, end[1])

# event kinds
E_SRC, E_WD, E_JOB, E_BATCH, E_END, E_DONE = range(6)

# entries of the counts array (messages sent or modelled, then the run's own counts)
C_JOB = 0  # JobArrival
C_BATCH = 1  # TaskBatch
C_START = 2  # Start (a launch of one task)
C_LAUNCH = 3  # Launch (several)
C_ENDED = 4  # Ended (one task ended on its worker)
C_FINISHED = 5  # Finished (several at the same instant)
C_TASKDONE = 6  # TaskDone (modelled or sent)
C_TASKSDONE = 7  # TasksDone
C_EVENTS = 8
C_SKIPPED = 9  # jobs without a feasible task
C_POS = 10  # the source's position in its arrival order
C_OVER_MASTER = 11  # OVER_COMMIT: the master that launched
C_OVER_WORKER = 12  # OVER_COMMIT: the worker
C_OVER_TASK = 13  # OVER_COMMIT: the task launched on it
N_COUNTS = 14

# worker choice of the masters (Policy)
P_RANDOM, P_MIN_CONSTRAINTS, P_FIRST = range(3)

# per-master counters (the master's ``stats``)
S_QUEUED_SHORT, S_QUEUED_LONG, S_SERVED_SHORT, S_SERVED_LONG = range(4)

_ONE = np.uint64(1)


# --- the event queue: a binary heap of (time, sequence) over slots of payloads, and the engine's FIFO lane ----------
@njit(cache=True)
def _push(hq: np.ndarray, ht: np.ndarray, ev: np.ndarray, evx: np.ndarray, st: np.ndarray, t: float, k: int, a: int,
          b: int, x: float) -> None:  # fmt: skip
    """Queue a timer or a heap message at ``t`` with the next sequence number. ``hq[i]``: sequence number and slot
    of the heap's entry ``i``, ``ht[i]`` its time; ``ev``/``evx`` the slots' payloads; free slots are kept in
    ``hq[cap + j, 1]``; ``st``: heap size, free slots, next sequence number, slots used."""
    cap = ht.size
    nf = st[1]
    if nf > 0:
        slot = hq[cap + nf - 1, 1]
        st[1] = nf - 1
    else:
        slot = st[3]
        st[3] += 1
    ev[slot, 0] = k
    ev[slot, 1] = a
    ev[slot, 2] = b
    evx[slot] = x
    q = st[2]
    st[2] += 1
    heap_insert(hq, ht, st, t, q, slot)


@njit(cache=True)
def _lane(li: np.ndarray, lt: np.ndarray, ls: np.ndarray, st: np.ndarray, t: float, k: int, a: int, b: int) -> None:
    """Queue a message on the engine's lane (the default delay: FIFO in time and sequence order); ``ls``: the
    ring's head and length; ``li[i]``: sequence number, kind, two ints; ``lt[i]`` its time."""
    n = lt.size
    i = ls[0] + ls[1]
    if i >= n:
        i -= n
    ls[1] += 1
    li[i, 0] = st[2]
    st[2] += 1
    li[i, 1] = k
    li[i, 2] = a
    li[i, 3] = b
    lt[i] = t


@njit(cache=True)
def _send(in_lane: bool, t: float, k: int, a: int, b: int, hq: np.ndarray, ht: np.ndarray, ev: np.ndarray,
          evx: np.ndarray, st: np.ndarray, li: np.ndarray, lt: np.ndarray, ls: np.ndarray) -> None:  # fmt: skip
    """A message arriving at ``t``: on the lane when its link has the lane's delay, else on the heap."""
    if in_lane:
        _lane(li, lt, ls, st, t, k, a, b)
    else:
        _push(hq, ht, ev, evx, st, t, k, a, b, 0.0)


# --- the masters' groups of tasks ending at the same instant: (master, end) -> group, open addressing -------------
@njit(cache=True, inline="always")
def _end_home(size: int, m: int, e: float) -> int:
    """The home slot of (master ``m``, end ``e``) in a table of ``size`` (a power of two) entries."""
    h = (np.uint64(np.int64(e * 1048576.0)) + np.uint64(m) * np.uint64(0x632BE59BD9B4E019)) * np.uint64(
        0x9E3779B97F4A7C15
    )
    return np.int64(h >> np.uint64(40)) & (size - 1)


@njit(cache=True)
def end_get(end_t: np.ndarray, end_m: np.ndarray, end_g: np.ndarray, m: int, e: float) -> int:
    """The group of master ``m``'s tasks ending at ``e``, or -1."""
    size = end_t.size
    i = _end_home(size, m, e)
    while end_g[i] >= 0:
        if end_t[i] == e and end_m[i] == m:
            return end_g[i]
        i = (i + 1) & (size - 1)
    return -1


@njit(cache=True)
def end_put(end_t: np.ndarray, end_m: np.ndarray, end_g: np.ndarray, m: int, e: float, g: int) -> None:
    """Add master ``m``'s end ``e`` (not in the table) with its group ``g``."""
    size = end_t.size
    i = _end_home(size, m, e)
    while end_g[i] >= 0:
        i = (i + 1) & (size - 1)
    end_t[i] = e
    end_m[i] = m
    end_g[i] = g


@njit(cache=True)
def end_del(end_t: np.ndarray, end_m: np.ndarray, end_g: np.ndarray, m: int, e: float) -> None:
    """Remove master ``m``'s end ``e`` (in the table), shifting back the entries that probed past it."""
    size = end_t.size
    mk = size - 1
    i = _end_home(size, m, e)
    while end_g[i] < 0 or end_t[i] != e or end_m[i] != m:
        i = (i + 1) & mk
    j = i
    while True:
        j = (j + 1) & mk
        if end_g[j] < 0:
            break
        k = _end_home(size, end_m[j], end_t[j])
        if (i <= j and (k <= i or k > j)) or (i > j and k <= i and k > j):
            end_t[i] = end_t[j]
            end_m[i] = end_m[j]
            end_g[i] = end_g[j]
            i = j
    end_g[i] = -1


# --- the masters' state ------------------------------------------------------------------------------------------
@njit(cache=True)
def take_fewest(avail: np.ndarray, stat: np.ndarray, lo: int, hi: int, weight: np.ndarray, base: int,
                first: bool) -> int:  # fmt: skip
    """The set bit of ``avail & stat`` in words ``[lo, hi)`` whose worker has the fewest constraints
    (``weight[base + bit]``; the lowest bit on ties), or the lowest set bit when ``first``; cleared in ``avail``;
    -1 when there is none: :meth:`~megha.model.matching.SegmentedIndex.pick` with the min-constraints or first
    policy."""
    best = -1
    best_w = 0
    for i in range(lo, hi):
        x = avail[i] & stat[i]
        while x:
            low = x & (~x + _ONE)
            b = 0
            while not (low >> np.uint64(b)) & _ONE:
                b += 1
            bit = (i - lo) * 64 + b
            if first:
                avail[i] &= ~low
                return bit
            wt = weight[base + bit]
            if best < 0 or wt < best_w:
                best = bit
                best_w = wt
            x ^= low
    if best >= 0:
        avail[lo + (best >> 6)] &= ~(_ONE << np.uint64(best & 63))
    return best


@njit(cache=True)
def pick_among(avail: np.ndarray, stat: np.ndarray, extra: np.ndarray, lo: int, hi: int, policy: int, u: float,
               weight: np.ndarray, base: int) -> int:  # fmt: skip
    """:func:`~megha.schedulers.pigeon._kernels.take_random_in` (``u``) or :func:`take_fewest` (by ``policy``)
    among the set bits of ``avail & stat & extra`` (a master with reserved workers: ``extra`` is its reserved or
    its other workers)."""
    if policy == P_RANDOM:
        total = 0
        for i in range(lo, hi):
            total += _popcount(avail[i] & stat[i] & extra[i])
        if total == 0:
            return -1
        r = min(int(u * total), total - 1)
        for i in range(lo, hi):
            w = avail[i] & stat[i] & extra[i]
            c = _popcount(w)
            if r < c:
                for _ in range(r):
                    w &= w - _ONE
                b = 0
                while not (w >> np.uint64(b)) & _ONE:
                    b += 1
                avail[i] &= ~(_ONE << np.uint64(b))
                return (i - lo) * 64 + b
            r -= c
        return -1
    best = -1
    best_w = 0
    for i in range(lo, hi):
        x = avail[i] & stat[i] & extra[i]
        while x:
            low = x & (~x + _ONE)
            b = 0
            while not (low >> np.uint64(b)) & _ONE:
                b += 1
            bit = (i - lo) * 64 + b
            if policy == P_FIRST:
                avail[i] &= ~low
                return bit
            wt = weight[base + bit]
            if best < 0 or wt < best_w:
                best = bit
                best_w = wt
            x ^= low
    if best >= 0:
        avail[lo + (best >> 6)] &= ~(_ONE << np.uint64(best & 63))
    return best


@njit(cache=True)
def any_bits(a: np.ndarray, b: np.ndarray, c: np.ndarray, lo: int, hi: int) -> bool:
    """Whether ``a & b & c`` has a set bit in words ``[lo, hi)``."""
    for i in range(lo, hi):  # noqa: SIM110 (a loop numba compiles)
        if a[i] & b[i] & c[i]:
            return True
    return False


@njit(cache=True)
def take_first_anywhere(q: int, wm: int, q_cnt: np.ndarray, qd_mask: np.ndarray, qd_slot: np.ndarray,
                        s_head: np.ndarray, s_tail: np.ndarray, s_pos: np.ndarray, t_qnext: np.ndarray,
                        t_seq: np.ndarray, t_any: np.ndarray, qd_seq: np.ndarray,
                        q_len: np.ndarray) -> int:  # fmt: skip
    """``WaitQueue.pop_first_fitting_where(wm, may use a reserved worker)``: among the first 64 tasks of each slot a
    worker of mask ``wm`` can run, the earliest that may use a reserved worker, taken out of its slot; -1 if none."""
    best = -1
    best_seq = 0
    best_p = -1
    best_prev = -1
    nm = ~wm
    for p in range(q_cnt[q]):
        if (qd_mask[q, p] & nm) != 0:
            continue
        t = s_head[qd_slot[q, p]]
        prev = -1
        i = 0
        while t >= 0 and i < 64:
            if best >= 0 and t_seq[t] >= best_seq:
                break
            if t_any[t]:
                best = t
                best_seq = t_seq[t]
                best_p = p
                best_prev = prev
                break
            prev = t
            t = t_qnext[t]
            i += 1
    if best < 0:
        return -1
    if best_prev < 0:
        return take_head(q, best_p, q_cnt, qd_mask, qd_seq, qd_slot, s_head, s_pos, t_qnext, t_seq, q_len)
    s = qd_slot[q, best_p]
    t_qnext[best_prev] = t_qnext[best]
    if s_tail[s] == best:
        s_tail[s] = best_prev
    q_len[q] -= 1
    return best


@njit(cache=True)
def first_fit(q: int, wm: int, q_cnt: np.ndarray, qd_mask: np.ndarray, qd_seq: np.ndarray) -> int:
    """The position (in queue ``q``'s dense list of non-empty slots, one FIFO per mask) of the slot whose head task
    was queued first among those a worker of mask ``wm`` can run — the earliest fitting task — or -1."""
    best = -1
    best_seq = 0
    nm = ~wm
    for p in range(q_cnt[q]):
        if (qd_mask[q, p] & nm) == 0:
            sq = qd_seq[q, p]
            if best < 0 or sq < best_seq:
                best = p
                best_seq = sq
    return best


@njit(cache=True)
def take_head(q: int, p: int, q_cnt: np.ndarray, qd_mask: np.ndarray, qd_seq: np.ndarray, qd_slot: np.ndarray,
              s_head: np.ndarray, s_pos: np.ndarray, t_qnext: np.ndarray, t_seq: np.ndarray,
              q_len: np.ndarray) -> int:  # fmt: skip
    """Pop the head task of the slot at position ``p`` of queue ``q``; an emptied slot leaves the dense list (the
    last one takes its place: the first fit does not depend on the order)."""
    s = qd_slot[q, p]
    t = s_head[s]
    nx = t_qnext[t]
    q_len[q] -= 1
    if nx >= 0:
        s_head[s] = nx
        qd_seq[q, p] = t_seq[nx]
    else:
        s_head[s] = -1
        s_pos[s] = -1
        last = q_cnt[q] - 1
        q_cnt[q] = last
        if p != last:
            moved = qd_slot[q, last]
            qd_slot[q, p] = moved
            qd_mask[q, p] = qd_mask[q, last]
            qd_seq[q, p] = qd_seq[q, last]
            s_pos[moved] = p
    return t


@njit(cache=True)
def group_words(umask: np.ndarray, worker_masks: np.ndarray, m_workers: np.ndarray, m_off: np.ndarray,
                m_word: np.ndarray, ref_keys: np.ndarray, ref_counts: np.ndarray, ref_owner: np.ndarray,
                reference: bool) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per mask number: the packed set of workers having every constraint of the mask (each master's group from
    its word ``m_word[g]``, in the group's bit order: its workers as listed), and per master the cumulative count
    (over masters) of those workers — :meth:`~megha.schedulers.pigeon.distributor.MasterWeights.cumulative` with
    exact weights, or with ``reference`` the authors' constraint-set table (``ref_*``: its keys, counts and
    masters; a master with no suitable worker still weighs nothing). One bit set per constraint bit, intersected per
    mask."""
    n_m = m_off.size - 1
    n_words = m_word[n_m]
    bits = np.zeros((32, n_words), dtype=np.uint64)
    valid = np.zeros(n_words, dtype=np.uint64)
    for g in range(n_m):
        base = m_word[g]
        for i in range(m_off[g], m_off[g + 1]):
            b = i - m_off[g]
            word = base + (b >> 6)
            bit = _ONE << np.uint64(b & 63)
            valid[word] |= bit
            wmask = worker_masks[m_workers[i]]
            for c in range(32):
                if (wmask >> c) & 1:
                    bits[c, word] |= bit
    stat = np.empty((umask.size, n_words), dtype=np.uint64)
    cum = np.zeros((umask.size, n_m), dtype=np.int64)
    ref = np.zeros(n_m)  # the reference's weights as np.bincount gives them (float64)
    for k in range(umask.size):
        m = umask[k]
        for i in range(n_words):
            stat[k, i] = valid[i]
        c = 0
        while m:
            if m & 1:
                for i in range(n_words):
                    stat[k, i] &= bits[c, i]
            m >>= 1
            c += 1
        if reference:
            for g in range(n_m):
                ref[g] = 0.0
            for i in range(ref_keys.size):
                if (umask[k] & ~ref_keys[i]) == 0:
                    ref[ref_owner[i]] += ref_counts[i]
        total = 0
        for g in range(n_m):
            per = 0
            for i in range(m_word[g], m_word[g + 1]):
                per += _popcount(stat[k, i])
            if reference and per > 0:
                per = np.int64(ref[g])
            total += per
            cum[k, g] = total
    return stat, cum


@njit(cache=True)
def _choose_master(cum: np.ndarray, k: int, u: float) -> int:
    """``bisect_right(cum[k], u * total)``: the master the weighted choice draws with ``u``."""
    n = cum.shape[1]
    x = u * float(cum[k, n - 1])
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if float(cum[k, mid]) <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def run_lean(
    order: np.ndarray,
    job_arrival: np.ndarray,
    f_off: np.ndarray,
    f_n: np.ndarray,
    ftasks: np.ndarray,
    job_dist: np.ndarray,
    job_short: np.ndarray,
    durations: np.ndarray,
    task_mid: np.ndarray,
    umask: np.ndarray,
    worker_masks: np.ndarray,
    m_workers: np.ndarray,
    m_off: np.ndarray,
    d_uni: np.ndarray,
    d_uoff: np.ndarray,
    m_uni: np.ndarray,
    weighted: bool,
    d_int: np.ndarray,
    d_ioff: np.ndarray,
    w_res: np.ndarray,
    policy: int,
    ref_keys: np.ndarray,
    ref_counts: np.ndarray,
    ref_owner: np.ndarray,
    reference: bool,
    short_turns: int,
    d_src: float,
    src_lane: bool,
    d_dm: float,
    dm_lane: bool,
    d_md: float,
    md_lane: bool,
    launch_delay: float,
    report_delay: float,
    timeout: float,
    on_worker: np.ndarray,
    counts: np.ndarray,
    m_stats: np.ndarray,
    d_jobs: np.ndarray,
    end: np.ndarray,
) -> tuple:
    """The whole run (see the module's docstring). ``ftasks[f_off[j]:f_off[j] + f_n[j]]``: job ``j``'s feasible
    tasks; ``job_dist``/``job_short``: its distributor and class; ``task_mid``: each task's mask's number in
    ``umask``; ``m_workers[m_off[g]:m_off[g + 1]]``: master ``g``'s workers in bit order; ``d_uni``: the uniform
    numbers each distributor draws, from ``d_uoff[d]``; ``m_uni[g]``: master ``g``'s (used by the random
    ``policy``, one of ``P_*``); ``weighted``: the distributors' choice (else the even spread from the master each
    distributor draws per job, ``d_int`` from ``d_ioff[d]``); ``w_res``: the workers reserved for short tasks;
    ``ref_*``: the reference's constraint-set table when ``reference`` (see :func:`group_words`);
    ``d_*``/``*_lane``: the links' delays (source → distributor, distributor → master, master → distributor) and
    whether they take the engine's lane; ``on_worker``: the ledger's ``task`` array (every worker free), the task
    each worker runs. Fills ``counts`` (``C_*``), ``m_stats`` (``S_*`` per master), ``d_jobs`` (short and long jobs
    per distributor), ``end[0]`` (the last event's time) and on :data:`OVER_COMMIT` ``end[1]`` (its instant);
    returns ``(status, log sizes, decided ids, times, comm ids, delays, started ids, times, workers, finished ids,
    times, known ids, times)``."""
    n_jobs = order.size
    n_f = ftasks.size
    n_w = worker_masks.size
    n_tasks = durations.size
    n_m = m_off.size - 1
    n_q = 2 * n_m
    n_mid = umask.size
    wm = worker_masks.astype(np.int64)
    # --- the event queue and the lane ---
    cap = n_w + n_jobs + 2 * n_f + 16
    hq = np.empty((2 * cap, 2), dtype=np.int64)
    ht = np.empty(cap, dtype=np.float64)
    ev = np.empty((cap, 3), dtype=np.int64)
    evx = np.empty(cap, dtype=np.float64)
    st = np.zeros(4, dtype=np.int64)
    li = np.empty((cap, 4), dtype=np.int64)
    lt = np.empty(cap, dtype=np.float64)
    ls = np.zeros(2, dtype=np.int64)
    # --- the masters' groups: free workers as bits, the masks' static vectors ---
    m_word = np.zeros(n_m + 1, dtype=np.int64)
    for g in range(n_m):
        m_word[g + 1] = m_word[g] + (m_off[g + 1] - m_off[g] + 63) // 64
    avail = np.zeros(m_word[n_m], dtype=np.uint64)
    w_master = np.full(n_w, -1, dtype=np.int64)
    w_bit = np.zeros(n_w, dtype=np.int64)
    n_free = np.zeros(n_m, dtype=np.int64)
    for g in range(n_m):
        for i in range(m_off[g], m_off[g + 1]):
            b = i - m_off[g]
            avail[m_word[g] + (b >> 6)] |= _ONE << np.uint64(b & 63)
            w = m_workers[i]
            w_master[w] = g
            w_bit[w] = b
        n_free[g] = m_off[g + 1] - m_off[g]
    res = np.zeros(m_word[n_m], dtype=np.uint64)  # reserved workers (Pigeon), then the others
    has_res = np.zeros(n_m, dtype=np.bool_)
    for g in range(n_m):
        for i in range(m_off[g], m_off[g + 1]):
            if w_res[m_workers[i]]:
                b = i - m_off[g]
                res[m_word[g] + (b >> 6)] |= _ONE << np.uint64(b & 63)
                has_res[g] = True
    valid = avail.copy()  # every worker of the groups
    gen = avail & ~res
    t_any = np.zeros(n_tasks, dtype=np.bool_)  # a queued long task may use a reserved worker
    d_icur = d_ioff.copy()
    stat, cum = group_words(umask, worker_masks, m_workers, m_off, m_word, ref_keys, ref_counts, ref_owner, reference)
    w_weight = np.empty(m_workers.size, dtype=np.int64)  # constraints of each worker, as the masters list them
    for i in range(m_workers.size):
        w_weight[i] = _popcount(np.uint64(wm[m_workers[i]] & 0xFFFFFFFF))
    m_ucur = np.zeros(n_m, dtype=np.int64)
    n_uni = m_uni.shape[1]
    d_ucur = d_uoff.copy()
    fq = np.zeros(n_m, dtype=np.int64)
    # --- the masters' short (2g) and long (2g + 1) queues: per (queue, mask) a FIFO slot ---
    q_slot = np.full((n_q, n_mid), -1, dtype=np.int64)  # the slot of each (queue, mask) once used
    n_slot_cap = n_q * n_mid if n_q * n_mid < n_f + 1 else n_f + 1
    s_head = np.full(n_slot_cap, -1, dtype=np.int64)
    s_tail = np.full(n_slot_cap, -1, dtype=np.int64)
    s_pos = np.full(n_slot_cap, -1, dtype=np.int64)  # its position in its queue's dense list (-1: empty)
    n_slots = 0
    width = n_mid if n_mid < n_f + 1 else n_f + 1
    qd_mask = np.empty((n_q, width), dtype=np.int64)  # each queue's non-empty slots: mask, head's number, slot
    qd_seq = np.empty((n_q, width), dtype=np.int64)
    qd_slot = np.empty((n_q, width), dtype=np.int64)
    q_cnt = np.zeros(n_q, dtype=np.int64)
    q_len = np.zeros(n_q, dtype=np.int64)
    q_back = 0
    t_qnext = np.full(n_tasks, -1, dtype=np.int64)
    t_seq = np.zeros(n_tasks, dtype=np.int64)
    # --- tasks: their distributor, worker, end groups ---
    t_dist = np.zeros(n_tasks, dtype=np.int64)
    run_w = np.full(n_tasks, -1, dtype=np.int64)
    t_enext = np.full(n_tasks, -1, dtype=np.int64)
    eg_head = np.empty(n_f + 1, dtype=np.int64)
    eg_tail = np.empty(n_f + 1, dtype=np.int64)
    eg_n = np.zeros(n_f + 1, dtype=np.int64)
    eg_tp = np.zeros(n_f + 1)
    egc = 0
    size = 16
    while size < 4 * n_w + 16:
        size *= 2
    end_t = np.zeros(size)
    end_m = np.zeros(size, dtype=np.int64)
    end_g = np.full(size, -1, dtype=np.int64)
    # --- message payloads: batches (job, tasks) and real completion reports (tasks) ---
    b_job = np.empty(n_f + 1, dtype=np.int64)
    b_off = np.empty(n_f + 1, dtype=np.int64)
    b_n = np.empty(n_f + 1, dtype=np.int64)
    b_tasks = np.empty(n_f + 1, dtype=np.int64)
    nb = 0
    nbt = 0
    dn_tasks = np.empty(n_f + 1, dtype=np.int64)
    ndn = 0
    # --- scratch ---
    kk = np.empty(n_f + 1, dtype=np.int64)
    lt_t = np.empty(n_w + n_f + 1, dtype=np.int64)
    lt_w = np.empty(n_w + n_f + 1, dtype=np.int64)
    items = np.empty(n_w + 1, dtype=np.int64)
    rd = np.empty(n_w + 1, dtype=np.int64)
    rdone = np.zeros(n_w + 1, dtype=np.bool_)
    # --- the recorder's logs ---
    dec_ids = np.empty(n_f, dtype=np.int64)
    dec_t = np.empty(n_f)
    comm_ids = np.empty(2 * n_f, dtype=np.int64)
    comm_d = np.empty(2 * n_f)
    st_ids = np.empty(n_f, dtype=np.int64)
    st_t = np.empty(n_f)
    st_w = np.empty(n_f, dtype=np.int64)
    fin_ids = np.empty(n_f, dtype=np.int64)
    fin_t = np.empty(n_f)
    kn_ids = np.empty(n_f, dtype=np.int64)
    kn_t = np.empty(n_f)
    n_dec = n_comm = n_st = n_fin = n_kn = 0
    # --- run state ---
    outstanding = n_f
    running = 0
    last_progress = 0.0
    pos = 0
    skipped = 0
    n_events = 0
    now = 0.0
    status = OK
    stop = False

    # on_start: the source's first timer, then the watchdog's
    if n_jobs:
        _push(hq, ht, ev, evx, st, 0.0 + 0.0 + max(0.0, job_arrival[order[0]] - 0.0), E_SRC, 0, 0, 0.0)
    _push(hq, ht, ev, evx, st, 0.0 + 0.0 + timeout, E_WD, 0, 0, 0.0)
    while st[0] > 0 or ls[1] > 0:
        # the engine's next event: the lane's head or the heap's top, whichever is first in (time, sequence)
        h = ls[0]
        if ls[1] > 0 and (st[0] == 0 or lt[h] < ht[0] or (lt[h] == ht[0] and li[h, 0] < hq[0, 0])):
            now = lt[h]
            k = li[h, 1]
            a = li[h, 2]
            b = li[h, 3]
            x = 0.0
            ls[0] = h + 1 if h + 1 < lt.size else 0
            ls[1] -= 1
        else:
            now = ht[0]
            slot = heap_pop(hq, ht, st)
            k = ev[slot, 0]
            a = ev[slot, 1]
            b = ev[slot, 2]
            x = evx[slot]
        n_events += 1
        n_launch = 0
        g = -1  # the master that launches what it collected in lt_t/lt_w
        if k == E_END:  # SimPigeonMaster._on_end: master a's tasks ending at x (group b) are reported
            g = a
            gid = b
            end_del(end_t, end_m, end_g, g, x)
            tp = eg_tp[gid]
            n_it = 0
            t = eg_head[gid]
            while t >= 0:
                items[n_it] = t
                n_it += 1
                t = t_enext[t]
            for i in range(n_it):
                t = items[i]
                release_slot(on_worker, run_w[t], 0)
                fin_ids[n_fin] = t
                fin_t[n_fin] = tp
                n_fin += 1
            running -= n_it
            last_progress = tp
            if n_it == 1:
                counts[C_ENDED] += 1
                t = items[0]
                counts[C_TASKDONE] += 1
                if outstanding > 1:
                    kn_ids[n_kn] = t
                    kn_t[n_kn] = now + d_md
                    n_kn += 1
                    outstanding -= 1
                else:  # the run's last completion: a real message, so the run ends when it arrives
                    dn_tasks[ndn] = t
                    _send(md_lane, now + d_md, E_DONE, ndn, 1, hq, ht, ev, evx, st, li, lt, ls)
                    ndn += 1
            else:
                counts[C_FINISHED] += 1
                # SimPigeonMaster._report: one report per distributor, in the order they first appear
                for i in range(n_it):
                    rd[i] = t_dist[items[i]]
                    rdone[i] = False
                for i in range(n_it):
                    if rdone[i]:
                        continue
                    d = rd[i]
                    nd = 0
                    for j in range(i, n_it):
                        if not rdone[j] and rd[j] == d:
                            nd += 1
                    counts[C_TASKSDONE] += 1
                    if outstanding > nd:
                        for j in range(i, n_it):
                            if not rdone[j] and rd[j] == d:
                                rdone[j] = True
                                kn_ids[n_kn] = items[j]
                                kn_t[n_kn] = now + d_md
                                n_kn += 1
                        outstanding -= nd
                    else:
                        start = ndn
                        for j in range(i, n_it):
                            if not rdone[j] and rd[j] == d:
                                rdone[j] = True
                                dn_tasks[ndn] = items[j]
                                ndn += 1
                        _send(md_lane, now + d_md, E_DONE, start, nd, hq, ht, ev, evx, st, li, lt, ls)
            # next_task for each freed worker (weighted fair queuing), in the order of the report
            sq = 2 * g
            lq = sq + 1
            for i in range(n_it):
                w = run_w[items[i]]
                s = -1
                qq = -1
                if has_res[g] and w_res[w]:  # a reserved worker: short tasks first, then long ones that may use it
                    t = -1
                    if q_len[sq]:
                        s = first_fit(sq, wm[w], q_cnt, qd_mask, qd_seq)
                        if s >= 0:
                            m_stats[g, S_SERVED_SHORT] += 1
                            t = take_head(sq, s, q_cnt, qd_mask, qd_seq, qd_slot, s_head, s_pos, t_qnext, t_seq, q_len)
                    if t < 0 and q_len[lq]:
                        t = take_first_anywhere(
                            lq,
                            wm[w],
                            q_cnt,
                            qd_mask,
                            qd_slot,
                            s_head,
                            s_tail,
                            s_pos,
                            t_qnext,
                            t_seq,
                            t_any,
                            qd_seq,
                            q_len,
                        )
                        if t >= 0:
                            m_stats[g, S_SERVED_LONG] += 1
                    if t >= 0:
                        lt_t[n_launch] = t
                        lt_w[n_launch] = w
                        n_launch += 1
                    else:
                        bb = w_bit[w]
                        avail[m_word[g] + (bb >> 6)] |= _ONE << np.uint64(bb & 63)
                        n_free[g] += 1
                    continue
                if q_len[sq] or q_len[lq]:
                    m = wm[w]
                    if q_len[sq] and (fq[g] < short_turns or not q_len[lq]):
                        s = first_fit(sq, m, q_cnt, qd_mask, qd_seq)
                        qq = sq
                        if s < 0 and q_len[lq]:
                            s = first_fit(lq, m, q_cnt, qd_mask, qd_seq)
                            qq = lq
                    elif q_len[lq]:
                        s = first_fit(lq, m, q_cnt, qd_mask, qd_seq)
                        qq = lq
                        if s < 0 and q_len[sq]:
                            s = first_fit(sq, m, q_cnt, qd_mask, qd_seq)
                            qq = sq
                if s >= 0:
                    if qq == sq:
                        fq[g] += 1
                        m_stats[g, S_SERVED_SHORT] += 1
                    else:
                        fq[g] = 0
                        m_stats[g, S_SERVED_LONG] += 1
                    t = take_head(qq, s, q_cnt, qd_mask, qd_seq, qd_slot, s_head, s_pos, t_qnext, t_seq, q_len)
                    lt_t[n_launch] = t
                    lt_w[n_launch] = w
                    n_launch += 1
                else:
                    bb = w_bit[w]
                    avail[m_word[g] + (bb >> 6)] |= _ONE << np.uint64(bb & 63)
                    n_free[g] += 1
        elif k == E_BATCH:  # PigeonMaster._arrive_lists: batch b reaches master a
            g = a
            j = b_job[b]
            short = job_short[j]
            d = job_dist[j]
            q = 2 * g if short else 2 * g + 1
            queued = 0
            lo = m_word[g]
            hi = m_word[g + 1]
            for i in range(b_off[b], b_off[b] + b_n[b]):
                t = b_tasks[i]
                t_dist[t] = d
                mid = task_mid[t]
                bit = -1
                anywhere = False
                if has_res[g] and not short:  # a long task no unreserved worker can run may use reserved ones
                    anywhere = not any_bits(stat[mid], gen, gen, lo, hi)
                if n_free[g] and has_res[g]:
                    if short or anywhere:
                        extra = res if any_bits(avail, stat[mid], res, lo, hi) else valid
                    else:
                        extra = gen
                    c = m_ucur[g]
                    if policy == P_RANDOM and c >= n_uni:
                        status = NEED_UNIFORMS
                        break
                    bit = pick_among(avail, stat[mid], extra, lo, hi, policy, m_uni[g, min(c, n_uni - 1)], w_weight,
                                     m_off[g])  # fmt: skip
                    if bit >= 0:
                        if policy == P_RANDOM:
                            m_ucur[g] = c + 1
                        n_free[g] -= 1
                elif n_free[g] and policy == P_RANDOM:
                    c = m_ucur[g]
                    if c >= n_uni:
                        status = NEED_UNIFORMS
                        break
                    bit = take_random_in(avail, stat[mid], lo, hi, m_uni[g, c])
                    if bit >= 0:
                        m_ucur[g] = c + 1
                        n_free[g] -= 1
                elif n_free[g]:
                    bit = take_fewest(avail, stat[mid], lo, hi, w_weight, m_off[g], policy == P_FIRST)
                    if bit >= 0:
                        n_free[g] -= 1
                if bit < 0:  # queued at the back of its mask's slot
                    s = q_slot[q, mid]
                    if s < 0:
                        s = n_slots
                        n_slots += 1
                        q_slot[q, mid] = s
                    q_back += 1
                    t_any[t] = anywhere
                    t_seq[t] = q_back
                    t_qnext[t] = -1
                    if s_pos[s] < 0:
                        p = q_cnt[q]
                        q_cnt[q] = p + 1
                        s_pos[s] = p
                        qd_mask[q, p] = umask[mid]
                        qd_seq[q, p] = q_back
                        qd_slot[q, p] = s
                        s_head[s] = t
                    else:
                        t_qnext[s_tail[s]] = t
                    s_tail[s] = t
                    q_len[q] += 1
                    queued += 1
                else:
                    lt_t[n_launch] = t
                    lt_w[n_launch] = m_workers[m_off[g] + bit]
                    n_launch += 1
            if status != OK:
                break
            if queued:
                m_stats[g, S_QUEUED_SHORT if short else S_QUEUED_LONG] += queued
        elif k == E_JOB:  # PigeonDistributor._send_weighted: job a at its distributor
            j = a
            d = job_dist[j]
            d_jobs[d, 0 if job_short[j] else 1] += 1
            n = f_n[j]
            o = f_off[j]
            if weighted:
                c = d_ucur[d]
                for i in range(n):
                    m_k = _choose_master(cum, task_mid[ftasks[o + i]], d_uni[c + i])
                    if m_k >= n_m:
                        status = GAVE_UP
                        break
                    kk[i] = m_k
                if status != OK:
                    break
                d_ucur[d] = c + n
            else:  # MasterWeights.spread: round robin from a drawn master, skipping masters with no suitable worker
                first = d_int[d_icur[d]]
                d_icur[d] += 1
                for i in range(n):
                    m_k = (first + i) % n_m
                    mid = task_mid[ftasks[o + i]]
                    if umask[mid] != 0:
                        r = 0
                        while r < n_m and cum[mid, m_k] - (cum[mid, m_k - 1] if m_k > 0 else 0) == 0:
                            m_k = (m_k + 1) % n_m
                            r += 1
                    kk[i] = m_k
            perm = np.argsort(kk[:n], kind="mergesort")
            i = 0
            while i < n:
                m_k = kk[perm[i]]
                b_job[nb] = j
                b_off[nb] = nbt
                i0 = i
                while i < n and kk[perm[i]] == m_k:
                    t = ftasks[o + perm[i]]
                    b_tasks[nbt] = t
                    nbt += 1
                    comm_ids[n_comm] = t
                    comm_d[n_comm] = d_dm
                    n_comm += 1
                    i += 1
                b_n[nb] = i - i0
                counts[C_BATCH] += 1
                _send(dm_lane, now + d_dm, E_BATCH, m_k, nb, hq, ht, ev, evx, st, li, lt, ls)
                nb += 1
        elif k == E_SRC:  # TraceSource.on_timer
            while pos < n_jobs and job_arrival[order[pos]] <= now:
                j = order[pos]
                pos += 1
                if f_n[j] == 0:
                    skipped += 1
                    continue
                counts[C_JOB] += 1
                _send(src_lane, now + d_src, E_JOB, j, 0, hq, ht, ev, evx, st, li, lt, ls)
            if pos < n_jobs:
                _push(hq, ht, ev, evx, st, now + 0.0 + (job_arrival[order[pos]] - now), E_SRC, 0, 0, 0.0)
        elif k == E_DONE:  # a distributor learns of the run's last completions (TaskDone / TasksDone)
            for i in range(a, a + b):
                kn_ids[n_kn] = dn_tasks[i]
                kn_t[n_kn] = now
                n_kn += 1
            outstanding -= b
            stop = outstanding <= 0
        elif k == E_WD and outstanding > 0:  # Watchdog.on_timer (it stops re-arming once all is known)
            if running == 0 and pos >= n_jobs and now - last_progress >= timeout:
                status = GAVE_UP
                break
            _push(hq, ht, ev, evx, st, now + 0.0 + timeout, E_WD, 0, 0, 0.0)
        if n_launch:  # SimPigeonMaster._launch: decided, sent, started one launch delay later, ends filed
            if n_launch == 1:
                counts[C_START] += 1
            else:
                counts[C_LAUNCH] += 1
            at = now + launch_delay
            for i in range(n_launch):
                t = lt_t[i]
                w = lt_w[i]
                if not claim_slot(on_worker, w, t, 0):  # an over-commit: the caller raises the ledger's error
                    status = OVER_COMMIT
                    counts[C_OVER_MASTER] = g
                    counts[C_OVER_WORKER] = w
                    counts[C_OVER_TASK] = t
                    end[1] = at
                    break
                run_w[t] = w
                dec_ids[n_dec] = t
                dec_t[n_dec] = now
                n_dec += 1
                comm_ids[n_comm] = t
                comm_d[n_comm] = launch_delay
                n_comm += 1
                st_ids[n_st] = t
                st_t[n_st] = at
                st_w[n_st] = w
                n_st += 1
                e = at + durations[t]
                gid = end_get(end_t, end_m, end_g, g, e)
                if gid >= 0:  # another task of this master ends at the same instant: one timer
                    t_enext[eg_tail[gid]] = t
                    t_enext[t] = -1
                    eg_tail[gid] = t
                    eg_n[gid] += 1
                else:
                    end_put(end_t, end_m, end_g, g, e, egc)
                    eg_head[egc] = t
                    eg_tail[egc] = t
                    eg_n[egc] = 1
                    t_enext[t] = -1
                    tp = at + (e - at)  # the instant the workers' timer would fire
                    eg_tp[egc] = tp
                    _push(hq, ht, ev, evx, st, tp + report_delay, E_END, g, egc, e)
                    egc += 1
            if status != OK:
                break
            running += n_launch
            last_progress = at
        if stop:
            break
    if status == OK and not stop:
        status = GAVE_UP  # out of events with tasks unfinished: the components report it
    end[0] = now
    counts[C_EVENTS] = n_events
    counts[C_SKIPPED] = skipped
    counts[C_POS] = pos
    logs_n = np.array([n_dec, n_comm, n_st, n_fin, n_kn], dtype=np.int64)
    return (
        status,
        logs_n,
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


# numba cache stamp: megha.model._kernels=36d6c6c71883
# numba cache stamp: megha.schedulers.common._event_heap=db7406567ed5
# numba cache stamp: megha.schedulers.common._ledger_kernels=2ca82caf9a23
# numba cache stamp: megha.schedulers.pigeon._kernels=0a2b8ee08fd8
