"""The compiled event loop of Sparrow's common configuration (numba): see :mod:`megha.schedulers.sparrow._lean`.

:func:`run_lean` runs the whole simulation — trace source, watchdog, the schedulers' batch sampling and late
binding, the node monitors' queues with known no-ops skipped, task ends — in one call, as the components do on the
simulator's common path (slot mode, no processing model, no faults, every link on the engine's default delay):
the same decisions, random draws (each scheduler's generator, through :func:`sample_groups`) and events in the same
order (one queue ordered by time, then by the engine's sequence number, taken in the order the components take
theirs). It returns the recorder's logs, the message counts and the counters; anything it cannot reproduce (a
stall the watchdog would report, a run that runs out of events) makes it stop with :data:`GAVE_UP`, and the caller
runs the components instead.

What each worker runs is the node monitors' :class:`~megha.schedulers.common.ledger.WorkerLedger`'s: the caller
passes its ``task`` array (``slot_array=True``) and the loop starts and ends tasks through the ledger's compiled
checks (:mod:`megha.schedulers.common._ledger_kernels`). A task sent to a worker that runs one already, or that
holds no request, stops the loop with :data:`OVER_COMMIT` (the worker, the task and the instant in ``counts`` and
``end``), and the caller raises the ledger's error.

The compiled sampler (:func:`~megha.schedulers.common._sampling_kernels.sample_groups`) and the ledger's checks
(:mod:`megha.schedulers.common._ledger_kernels`) are compiled into :func:`run_lean`, and numba's cache of this module
does not notice a change there: after changing them, touch this file.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from megha.schedulers.common._event_heap import heap_insert, heap_pop
from megha.schedulers.common._ledger_kernels import claim_slot, release_slot
from megha.schedulers.common._sampling_kernels import sample_groups

OK = 0
GAVE_UP = 1
OVER_COMMIT = 2  # a task sent to a worker that runs one or holds no request (C_OVER_WORKER, C_OVER_TASK, end[1])

# event kinds
E_SRC, E_WD, E_JOB, E_PROBES, E_REQ, E_GETTASK, E_REPLY, E_GRANT, E_END, E_FIN, E_DONE, E_WAKE = range(12)

# entries of the counts array
C_JOB = 0  # JobArrival messages
C_PROBES = 1
C_REQ = 2  # Request messages (routed, sent or skipped)
C_GRANT = 3  # Grant answers (routed or skipped)
C_GETTASK = 4
C_REPLY = 5  # TaskReply
C_FIN = 6  # Finished
C_DONE = 7  # Done (modelled or sent)
C_EVENTS = 8
C_SKIPPED = 9  # jobs without a feasible task
C_POS = 10  # the source's position in its arrival order
C_QUEUED = 11  # probes that waited in a queue
C_MAXQ = 12  # longest queue
C_UNSENT = 13  # skipped requests the run's end cut off (settle_skipped)
C_UNANSWERED = 14
C_OVER_WORKER = 15  # OVER_COMMIT: the worker
C_OVER_TASK = 16  # OVER_COMMIT: the task sent to it
N_COUNTS = 17

# fields of the event table (ints)
_Q, _K, _A, _B, _C = range(5)


@njit(cache=True)
def _push(heap: np.ndarray, hkt: np.ndarray, evi: np.ndarray, evf: np.ndarray, st: np.ndarray, t: float, k: int,
          a: int, b: int, c: int, x: float) -> None:  # fmt: skip
    """Queue a timer at ``t`` (its sequence number: the next one). ``heap[i]``: sequence number and slot of the
    heap's entry ``i`` (the free slots in the rows past ``hkt.size``), ``hkt[i]`` its time; ``st``: heap size, free
    slots, next sequence number, -, slots used."""
    half = hkt.size
    nf = st[1]
    if nf > 0:
        slot = heap[half + nf - 1, 1]
        st[1] = nf - 1
    else:
        slot = st[4]
        st[4] += 1
    evi[slot, _K] = k
    evi[slot, _A] = a
    evi[slot, _B] = b
    evi[slot, _C] = c
    evf[slot, 1] = x
    q = st[2]
    st[2] += 1
    heap_insert(heap, hkt, st, t, q, slot)


@njit(cache=True, inline="always")
def _end_home(end_t: np.ndarray, e: float) -> int:
    """The home slot of end time ``e`` in the table of end groups (its size a power of two)."""
    h = np.uint64(np.int64(e * 1048576.0)) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(h >> np.uint64(40)) & (end_t.size - 1)


@njit(cache=True)
def _end_get(end_t: np.ndarray, end_g: np.ndarray, e: float) -> int:
    """The end group of the tasks ending at ``e``, or -1."""
    m = end_t.size - 1
    i = _end_home(end_t, e)
    while end_g[i] >= 0:
        if end_t[i] == e:
            return end_g[i]
        i = (i + 1) & m
    return -1


@njit(cache=True)
def _end_put(end_t: np.ndarray, end_g: np.ndarray, e: float, g: int) -> None:
    """Add end time ``e`` (not in the table) with its group ``g``."""
    m = end_t.size - 1
    i = _end_home(end_t, e)
    while end_g[i] >= 0:
        i = (i + 1) & m
    end_t[i] = e
    end_g[i] = g


@njit(cache=True)
def _file_end(t: int, at: float, e: float, egc: int, t_next: np.ndarray, eg_head: np.ndarray, eg_tail: np.ndarray,
              eg_n: np.ndarray, end_t: np.ndarray, end_g: np.ndarray, heap: np.ndarray, hkt: np.ndarray,
              evi: np.ndarray, evf: np.ndarray, st: np.ndarray) -> int:  # fmt: skip
    """File the end ``e`` of task ``t`` (started at ``at``) in the end group of the tasks ending at ``e`` (a new
    group ``egc`` and its :data:`E_END` timer at the workers' instant ``at + (e - at)`` if there is none). Returns
    the next new group's id."""
    gid = _end_get(end_t, end_g, e)
    if gid >= 0:  # another task ends at the same instant: one timer
        t_next[eg_tail[gid]] = t
        t_next[t] = -1
        eg_tail[gid] = t
        eg_n[gid] += 1
        return egc
    _end_put(end_t, end_g, e, egc)
    eg_head[egc] = t
    eg_tail[egc] = t
    eg_n[egc] = 1
    t_next[t] = -1
    _push(heap, hkt, evi, evf, st, at + (e - at), E_END, egc, 0, 0, e)
    return egc + 1


@njit(cache=True, inline="always")
def _start(t: int, w: int, s: int, at: float, e: float, run_w: np.ndarray, run_s: np.ndarray, t_next: np.ndarray,
           eg_head: np.ndarray, eg_tail: np.ndarray, eg_n: np.ndarray, egc: int, end_t: np.ndarray,
           end_g: np.ndarray, heap: np.ndarray, hkt: np.ndarray, evi: np.ndarray, evf: np.ndarray,
           st: np.ndarray) -> int:  # fmt: skip
    """A node monitor starts task ``t`` (of scheduler ``s``) on worker ``w`` (claimed in the ledger already) at
    ``at``; it ends at ``e``: note its worker and scheduler, and file its end (:func:`_file_end`). Returns the next
    new end group's id. Straight-line, inlined into the loop in numba's IR so that the arrays' reference counts
    cancel."""
    run_w[t] = w
    run_s[t] = s
    return _file_end(t, at, e, egc, t_next, eg_head, eg_tail, eg_n, end_t, end_g, heap, hkt, evi, evf, st)


@njit(cache=True)
def _end_del(end_t: np.ndarray, end_g: np.ndarray, e: float) -> None:
    """Remove end time ``e`` (in the table), shifting back the entries that probed past it."""
    m = end_t.size - 1
    i = _end_home(end_t, e)
    while end_t[i] != e or end_g[i] < 0:
        i = (i + 1) & m
    j = i
    while True:
        j = (j + 1) & m
        if end_g[j] < 0:
            break
        k = _end_home(end_t, end_t[j])
        if (i <= j and (k <= i or k > j)) or (i > j and k <= i and k > j):
            end_t[i] = end_t[j]
            end_g[i] = end_g[j]
            i = j
    end_g[i] = -1


@njit(cache=True)
def _lane(lane_i: np.ndarray, lane_f: np.ndarray, ls: np.ndarray, st: np.ndarray, t: float, k: int, a: int, b: int,
          c: int, x: float) -> None:  # fmt: skip
    """Queue a message on the engine's lane (the default delay: FIFO in time and sequence order); ``ls``: the ring's
    head and length."""
    n = lane_f.shape[0]
    i = ls[0] + ls[1]
    if i >= n:
        i -= n
    ls[1] += 1
    lane_i[i, _Q] = st[2]
    st[2] += 1
    lane_i[i, _K] = k
    lane_i[i, _A] = a
    lane_i[i, _B] = b
    lane_i[i, _C] = c
    lane_f[i, 0] = t
    lane_f[i, 1] = x


_DEBRUIJN = 0x03F79D71B4CB0A89
_BIT_AT = np.zeros(64, dtype=np.int64)  # the lowest set bit of a word, by its de Bruijn product (x & -x) * _DEBRUIJN
for _i in range(64):
    _BIT_AT[(((1 << _i) * _DEBRUIJN) & 0xFFFFFFFFFFFFFFFF) >> 58] = _i


@njit(cache=True)
def _worker_bits(wm: np.ndarray, n_bits: int) -> np.ndarray:
    """Per constraint bit, the set of workers that have it (64 workers a word)."""
    n_words = (wm.size + 63) // 64
    bits = np.zeros((n_bits, n_words), dtype=np.uint64)
    for w in range(wm.size):
        m = wm[w]
        for b in range(n_bits):
            if (m >> b) & 1:
                bits[b, w >> 6] |= np.uint64(1) << np.uint64(w & 63)
    return bits


@njit(cache=True)
def _eligible_words(m: int, bits: np.ndarray, n_w: int, words: np.ndarray) -> int:
    """The workers that have every constraint of mask ``m`` into ``words`` (a bit set); returns how many."""
    n_words = words.size
    for i in range(n_words):
        words[i] = np.uint64(0xFFFFFFFFFFFFFFFF)
    if n_w & 63:
        words[n_words - 1] = (np.uint64(1) << np.uint64(n_w & 63)) - np.uint64(1)
    b = 0
    mm = m
    while mm:
        if mm & 1:
            for i in range(n_words):
                words[i] &= bits[b, i]
        mm >>= 1
        b += 1
    c = 0
    for i in range(n_words):  # popcount (SWAR)
        x = words[i]
        x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
        x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
        x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
        c += np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))
    return c


@njit(cache=True)
def _list_words(words: np.ndarray, out: np.ndarray, at: int) -> None:
    """The ids in bit set ``words``, in increasing order, written from ``out[at]``."""
    for i in range(words.size):
        x = words[i]
        while x:
            low = x & (~x + np.uint64(1))
            out[at] = i * 64 + _BIT_AT[np.int64((low * np.uint64(_DEBRUIJN)) >> np.uint64(58))]
            at += 1
            x ^= low


@njit(cache=True, inline="always")
def _take(j: int, gk: int, gorder: np.ndarray, g_ptr: np.ndarray, g_end: np.ndarray, g_nxt: np.ndarray,
          g_prv: np.ndarray, j_open: np.ndarray, remaining: np.ndarray) -> int:  # fmt: skip
    """Pop group ``gk``'s next task (its local index); an emptied group leaves the job's open groups."""
    i = gorder[g_ptr[gk]]
    g_ptr[gk] += 1
    remaining[j] -= 1
    if g_ptr[gk] == g_end[gk]:
        p = g_prv[gk]
        q = g_nxt[gk]
        if p >= 0:
            g_nxt[p] = q
        else:
            j_open[j] = q
        if q >= 0:
            g_prv[q] = p
    return i


@njit(cache=True)
def _choose(j: int, w: int, g: int, wm: np.ndarray, g_off: np.ndarray, g_n: np.ndarray, g_mask: np.ndarray,
            g_ptr: np.ndarray, g_end: np.ndarray, gorder: np.ndarray, remaining: np.ndarray, g_nxt: np.ndarray,
            g_prv: np.ndarray, j_open: np.ndarray) -> int:  # fmt: skip
    """Local index of the task a probe of group ``g`` on worker ``w`` gets (own group first, else the first group
    with a task that fits the worker), or -1; the job has tasks left."""
    gi = g_off[j] + g
    if g_ptr[gi] < g_end[gi]:
        return _take(j, gi, gorder, g_ptr, g_end, g_nxt, g_prv, j_open, remaining)
    if g_n[j] > 1:
        m = wm[w]
        gk = j_open[j]
        while gk >= 0:
            if (g_mask[gk] & ~m) == 0:
                return _take(j, gk, gorder, g_ptr, g_end, g_nxt, g_prv, j_open, remaining)
            gk = g_nxt[gk]
    return -1


@njit(cache=True)
def _fits_any(j: int, w: int, g: int, wm: np.ndarray, g_off: np.ndarray, g_n: np.ndarray, g_mask: np.ndarray,
              g_ptr: np.ndarray, g_end: np.ndarray, remaining: np.ndarray, g_nxt: np.ndarray,
              j_open: np.ndarray) -> bool:  # fmt: skip
    """Whether a request of a probe of group ``g`` on ``w`` would get a task (SparrowScheduler.skip_noop's test)."""
    if remaining[j] == 0:
        return False
    gi = g_off[j] + g
    if g_ptr[gi] < g_end[gi]:
        return True
    if g_n[j] > 1:
        m = wm[w]
        gk = j_open[j]
        while gk >= 0:
            if (g_mask[gk] & ~m) == 0:
                return True
            gk = g_nxt[gk]
    return False


@njit(cache=True)
def run_lean(
    order: np.ndarray,
    job_arrival: np.ndarray,
    f_off: np.ndarray,
    f_n: np.ndarray,
    job_sched: np.ndarray,
    ftasks: np.ndarray,
    durations: np.ndarray,
    task_mask: np.ndarray,
    task_mid: np.ndarray,
    mid_zero: int,
    n_masks: int,
    n_bits: int,
    worker_masks: np.ndarray,
    fns: np.ndarray,
    states: np.ndarray,
    ratio: float,
    exact_limit: float,
    d_src: float,
    src_lane: bool,
    d_sm: float,
    d_ms: float,
    timeout: float,
    n_probes: int,
    on_worker: np.ndarray,
    counts: np.ndarray,
    sched_counts: np.ndarray,
    end: np.ndarray,
) -> tuple:
    """The whole run (see the module's docstring). ``ftasks[f_off[j]:f_off[j] + f_n[j]]``: job ``j``'s feasible
    tasks; ``task_mid``: each task's mask's number (``mid_zero`` that of mask 0, ``n_masks`` of them), under which
    the eligible workers of a group's mask are counted and listed (when the sampler needs the list) from one bit set
    of workers per constraint bit (``n_bits`` of them); ``fns``/``states``: each scheduler's
    generator (:func:`~megha.schedulers.common._sampling_kernels.bit_source`); ``n_probes``: a bound on the probes
    the run sends; ``src_lane``: whether ``d_src`` is the lane's delay (``d_sm`` and ``d_ms`` must be);
    ``on_worker``: the ledger's ``task`` array (every worker free), the task each worker runs.
    Fills ``counts`` (``C_*``), ``sched_counts`` (per scheduler: probes, requests, no-ops),
    ``end[0]`` (the last event's time) and on :data:`OVER_COMMIT` ``end[1]`` (its instant); returns ``(status,
    log sizes, decided ids, times, comm ids, delays, started ids, times, workers, finished ids, times, known ids,
    times, worker-queue ids, delays)``."""
    n_jobs = order.size
    n_f = ftasks.size
    n_w = worker_masks.size
    n_tasks = durations.size
    wm = worker_masks.astype(np.int64)
    P = n_probes
    # --- the event queue: a binary heap of slots (upper half of `heap`: the free slots) ---
    cap = 2 * n_w + P + 2 * n_jobs + n_f + 16
    heap = np.empty((2 * cap, 2), dtype=np.int64)
    hkt = np.empty(cap, dtype=np.float64)
    evi = np.empty((cap, 5), dtype=np.int64)
    evf = np.empty((cap, 2), dtype=np.float64)
    st = np.zeros(5, dtype=np.int64)  # heap size, free slots, next sequence, -, slots used
    lane_i = np.empty((cap, 5), dtype=np.int64)  # messages with the default delay (the engine's lane), a ring
    lane_f = np.empty((cap, 2), dtype=np.float64)
    ls = np.zeros(2, dtype=np.int64)  # the ring's head and length
    # --- workers ---
    free_w = np.ones(n_w, dtype=np.bool_)
    q_head = np.full(n_w, -1, dtype=np.int64)
    q_tail = np.full(n_w, -1, dtype=np.int64)
    q_len = np.zeros(n_w, dtype=np.int64)
    idle_at = np.full(n_w, np.nan)
    ch_x0 = np.zeros(n_w)
    ch_n = np.zeros(n_w, dtype=np.int64)
    ch_off = np.zeros(n_w, dtype=np.int64)
    ch_len = np.full(n_w, -1, dtype=np.int64)  # -1: no chain
    chbuf = np.empty(P + 1)
    chc = 0
    # --- probes ---
    p_job = np.empty(P, dtype=np.int64)
    p_grp = np.empty(P, dtype=np.int64)
    p_w = np.empty(P, dtype=np.int64)
    p_next = np.empty(P, dtype=np.int64)
    p_t0 = np.empty(P)
    pc = 0
    # --- jobs and their task groups ---
    remaining = np.zeros(n_jobs, dtype=np.int64)
    probes_out = np.zeros(n_jobs, dtype=np.int64)
    j_poff = np.zeros(n_jobs, dtype=np.int64)
    j_pn = np.zeros(n_jobs, dtype=np.int64)
    g_off = np.zeros(n_jobs, dtype=np.int64)
    g_n = np.zeros(n_jobs, dtype=np.int64)
    g_mask = np.empty(n_f + 1, dtype=np.int64)
    g_ptr = np.empty(n_f + 1, dtype=np.int64)
    g_end = np.empty(n_f + 1, dtype=np.int64)
    gorder = np.empty(n_f + 1, dtype=np.int64)
    g_nxt = np.empty(n_f + 1, dtype=np.int64)  # the open groups of a job: a doubly linked list from j_open[j]
    g_prv = np.empty(n_f + 1, dtype=np.int64)
    j_open = np.full(n_jobs, -1, dtype=np.int64)
    mask_count = np.full(n_masks, -1, dtype=np.int64)  # per mask number: its eligible workers (-1: not yet counted)
    mask_start = np.full(n_masks, -1, dtype=np.int64)  # where their ids start in `flat` (-1: not listed yet)
    flat = np.empty(1 << 16, dtype=np.int64)
    flat_len = 0
    wbits = _worker_bits(wm, n_bits)
    words = np.empty((n_w + 63) // 64, dtype=np.uint64)
    words_of = -1  # the mask number whose eligible workers `words` holds
    gc = 0
    # --- running tasks and end groups ---
    run_w = np.full(n_tasks, -1, dtype=np.int64)
    run_s = np.zeros(n_tasks, dtype=np.int64)
    t_next = np.full(n_tasks, -1, dtype=np.int64)
    eg_head = np.empty(n_f + 1, dtype=np.int64)
    eg_tail = np.empty(n_f + 1, dtype=np.int64)
    eg_n = np.zeros(n_f + 1, dtype=np.int64)
    egc = 0
    n_slots = 16
    while n_slots < 4 * n_w + 16:
        n_slots *= 2
    end_t = np.zeros(n_slots)  # end time -> its end group (open addressing; -1: empty), at most one per worker
    end_g = np.full(n_slots, -1, dtype=np.int64)
    # --- message payloads ---
    gt_w = np.empty(P, dtype=np.int64)
    gt_g = np.empty(P, dtype=np.int64)
    gt_x = np.empty(P)
    gtc = 0
    rp_w = np.empty(P, dtype=np.int64)
    rp_t = np.empty(P, dtype=np.int64)
    rp_d = np.empty(P)
    rp_x = np.empty(P)
    rpc = 0
    fin_buf = np.empty(n_f + 1, dtype=np.int64)
    fbc = 0
    o_s = np.empty(P + n_w, dtype=np.int64)
    o_j = np.empty(P + n_w, dtype=np.int64)
    o_w = np.empty(P + n_w, dtype=np.int64)
    o_g = np.empty(P + n_w, dtype=np.int64)
    o_x = np.empty(P + n_w)
    o_done = np.zeros(P + n_w, dtype=np.bool_)
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
    wq_ids = np.empty(n_f, dtype=np.int64)
    wq_v = np.empty(n_f)
    n_dec = n_comm = n_st = n_fin = n_kn = n_wq = 0
    # --- sampling scratch ---
    seen = np.zeros(n_w, dtype=np.int64)
    stamp = np.zeros(1, dtype=np.int64)
    sorter = np.empty(n_f + 1, dtype=np.int64)
    # --- run state ---
    outstanding = n_f
    running = 0
    last_progress = 0.0
    pos = 0
    skipped = 0
    queued_probes = 0
    max_q = 0
    n_events = 0
    now = 0.0
    status = OK
    stop = False
    over_w = over_t = -1  # OVER_COMMIT: the worker, the task sent to it, the instant
    over_at = 0.0

    # on_start: the source's first timer, then the watchdog's
    if n_jobs:
        _push(heap, hkt, evi, evf, st, 0.0 + 0.0 + max(0.0, job_arrival[order[0]] - 0.0), E_SRC, 0, 0, 0, 0.0)
    _push(heap, hkt, evi, evf, st, 0.0 + 0.0 + timeout, E_WD, 0, 0, 0, 0.0)
    while st[0] > 0 or ls[1] > 0:
        # the engine's next event: the lane's head or the heap's top, whichever is first in (time, sequence)
        h = ls[0]
        if ls[1] > 0 and (
            st[0] == 0 or lane_f[h, 0] < hkt[0] or (lane_f[h, 0] == hkt[0] and lane_i[h, _Q] < heap[0, 0])
        ):
            now = lane_f[h, 0]
            x = lane_f[h, 1]
            k = lane_i[h, _K]
            a = lane_i[h, _A]
            b = lane_i[h, _B]
            c = lane_i[h, _C]
            ls[0] = h + 1 if h + 1 < lane_f.shape[0] else 0
            ls[1] -= 1
        else:
            now = hkt[0]
            slot = heap_pop(heap, hkt, st)
            x = evf[slot, 1]
            k = evi[slot, _K]
            a = evi[slot, _A]
            b = evi[slot, _B]
            c = evi[slot, _C]
        n_events += 1
        n_out = 0
        if k == E_REQ:  # SparrowScheduler.on_message_request (j, w, g, waited)
            j = a
            w = b
            s = job_sched[j]
            sched_counts[s, 1] += 1
            i = -1
            if remaining[j]:
                i = _choose(j, w, c, wm, g_off, g_n, g_mask, g_ptr, g_end, gorder, remaining, g_nxt, g_prv, j_open)
            probes_out[j] -= 1
            if probes_out[j] <= 0 and remaining[j]:
                status = GAVE_UP
                break
            counts[C_GRANT] += 1
            if i < 0:
                sched_counts[s, 2] += 1
                _lane(lane_i, lane_f, ls, st, now + d_sm, E_GRANT, s, w, 0, x)
            else:
                t = ftasks[f_off[j] + i]
                dec_ids[n_dec] = t
                dec_t[n_dec] = now
                n_dec += 1
                comm_ids[n_comm] = t
                comm_d[n_comm] = d_sm
                n_comm += 1
                # SparrowMonitors.start_answered(s, w, t, dur, waited, now + d)
                at = now + d_sm
                if free_w[w] or not claim_slot(on_worker, w, t, 0):
                    status = OVER_COMMIT  # reported after the loop, from over_*
                    over_w = w
                    over_t = t
                    over_at = at
                    break
                egc = _start(t, w, s, at, at + durations[t], run_w, run_s, t_next, eg_head, eg_tail, eg_n, egc, end_t,
                             end_g, heap, hkt, evi, evf, st)  # fmt: skip
                st_ids[n_st] = t
                st_t[n_st] = at
                st_w[n_st] = w
                n_st += 1
                running += 1
                last_progress = at
                wq_ids[n_wq] = t
                wq_v[n_wq] = x
                n_wq += 1
        elif k in (E_GRANT, E_END, E_WAKE):
            serve = False
            if k == E_GRANT:  # a no-op answer (on_message_grant)
                w = b
                serve = q_len[w] > 0
            elif k == E_WAKE:
                w = a
                serve = q_len[w] > 0
            else:  # _on_end
                gid = a
                _end_del(end_t, end_g, x)
                if eg_n[gid] == 1:
                    t = eg_head[gid]
                    w = run_w[t]
                    release_slot(on_worker, w, 0)
                    fin_ids[n_fin] = t
                    fin_t[n_fin] = now
                    n_fin += 1
                    running -= 1
                    last_progress = now
                    counts[C_DONE] += 1
                    if outstanding > 1:
                        kn_ids[n_kn] = t
                        kn_t[n_kn] = now + d_ms
                        n_kn += 1
                        outstanding -= 1
                    else:
                        _lane(lane_i, lane_f, ls, st, now + d_ms, E_DONE, t, 0, 0, 0.0)
                    serve = q_len[w] > 0
                else:  # several tasks end at once (_end_tasks): Finished messages per scheduler
                    w = -1
                    t = eg_head[gid]
                    nt = 0
                    while t >= 0:
                        ww = run_w[t]
                        release_slot(on_worker, ww, 0)
                        free_w[ww] = True
                        o_w[nt] = ww  # the freed workers, in order (o_* reused as scratch)
                        o_j[nt] = t
                        o_done[nt] = False
                        nt += 1
                        t = t_next[t]
                    for u in range(nt):
                        if o_done[u]:
                            continue
                        s = run_s[o_j[u]]
                        start = fbc
                        for v in range(u, nt):
                            if not o_done[v] and run_s[o_j[v]] == s:
                                o_done[v] = True
                                tt = o_j[v]
                                fin_buf[fbc] = tt
                                fbc += 1
                                fin_ids[n_fin] = tt
                                fin_t[n_fin] = now
                                n_fin += 1
                        running -= fbc - start
                        last_progress = now
                        counts[C_FIN] += 1
                        _lane(lane_i, lane_f, ls, st, now + d_ms, E_FIN, start, fbc - start, 0, 0.0)
                    # _advance each freed worker; the requests leave at the end of the event (_flush)
                    frees = o_w[:nt].copy()
                    for u in range(nt):
                        ww = frees[u]
                        if q_len[ww] > 0 and free_w[ww]:
                            p = q_head[ww]
                            q_head[ww] = p_next[p]
                            q_len[ww] -= 1
                            free_w[ww] = False
                            jj = p_job[p]
                            o_s[n_out] = job_sched[jj]
                            o_j[n_out] = jj
                            o_w[n_out] = ww
                            o_g[n_out] = p_grp[p]
                            o_x[n_out] = now - p_t0[p]
                            n_out += 1
            if w >= 0:
                if not serve:
                    free_w[w] = True
                else:  # SparrowMonitors._serve
                    p = q_head[w]
                    j = p_job[p]
                    if _fits_any(j, w, p_grp[p], wm, g_off, g_n, g_mask, g_ptr, g_end, remaining, g_nxt, j_open):
                        q_head[w] = p_next[p]
                        q_len[w] -= 1
                        counts[C_REQ] += 1
                        _lane(lane_i, lane_f, ls, st, now + d_ms, E_REQ, j, w, p_grp[p], now - p_t0[p])
                    else:
                        xx = now
                        nn = 0
                        start = chc
                        while True:
                            # skip_noop's accounting for the head probe
                            s = job_sched[j]
                            sched_counts[s, 1] += 1
                            sched_counts[s, 2] += 1
                            probes_out[j] -= 1
                            if probes_out[j] <= 0 and remaining[j]:
                                status = GAVE_UP
                                break
                            q_head[w] = p_next[p]
                            q_len[w] -= 1
                            nn += 1
                            xx = (xx + d_ms) + d_sm
                            if q_len[w] == 0:
                                break
                            chbuf[chc] = xx
                            chc += 1
                            p = q_head[w]
                            j = p_job[p]
                            if _fits_any(
                                j, w, p_grp[p], wm, g_off, g_n, g_mask, g_ptr, g_end, remaining, g_nxt, j_open
                            ):
                                break
                        if status != OK:
                            break
                        counts[C_REQ] += nn
                        counts[C_GRANT] += nn
                        ch_x0[w] = now
                        ch_n[w] = nn
                        ch_off[w] = start
                        ch_len[w] = chc - start
                        if q_len[w] == 0:
                            idle_at[w] = xx
                        else:
                            q_head[w] = p_next[p]
                            q_len[w] -= 1
                            counts[C_REQ] += 1
                            _push(heap, hkt, evi, evf, st, xx + d_ms, E_REQ, j, w, p_grp[p], xx - p_t0[p])
        elif k == E_PROBES:  # SparrowMonitors._probes
            j = a
            s = job_sched[j]
            queued = 0
            for p in range(j_poff[j], j_poff[j] + j_pn[j]):
                w = p_w[p]
                if free_w[w] and q_len[w] == 0:
                    free_w[w] = False
                    o_s[n_out] = s
                    o_j[n_out] = j
                    o_w[n_out] = w
                    o_g[n_out] = p_grp[p]
                    o_x[n_out] = 0.0
                    n_out += 1
                    continue
                if q_len[w] == 0 and not np.isnan(idle_at[w]):
                    ia = idle_at[w]
                    idle_at[w] = np.nan
                    if now > ia:
                        o_s[n_out] = s
                        o_j[n_out] = j
                        o_w[n_out] = w
                        o_g[n_out] = p_grp[p]
                        o_x[n_out] = 0.0
                        n_out += 1
                        continue
                    _push(heap, hkt, evi, evf, st, ia, E_WAKE, w, 0, 0, 0.0)
                p_t0[p] = now
                p_next[p] = -1
                if q_len[w] == 0:
                    q_head[w] = p
                else:
                    p_next[q_tail[w]] = p
                q_tail[w] = p
                q_len[w] += 1
                queued += 1
                nq = q_len[w]
                if ch_len[w] >= 0:  # probes taken off ahead of their time still count
                    lo = ch_off[w]
                    hi = lo + ch_len[w]
                    cut = lo + np.searchsorted(chbuf[lo:hi], now, side="right")
                    nq += hi - cut
                if nq > max_q:
                    max_q = nq
                if free_w[w]:
                    h = q_head[w]
                    q_head[w] = p_next[h]
                    q_len[w] -= 1
                    free_w[w] = False
                    jj = p_job[h]
                    o_s[n_out] = job_sched[jj]
                    o_j[n_out] = jj
                    o_w[n_out] = w
                    o_g[n_out] = p_grp[h]
                    o_x[n_out] = now - p_t0[h]
                    n_out += 1
            queued_probes += queued
        elif k == E_GETTASK:  # SparrowScheduler._get_task (j, items b..b+c)
            j = a
            s = job_sched[j]
            sched_counts[s, 1] += c
            start = rpc
            for u in range(b, b + c):
                i = -1
                if remaining[j]:
                    i = _choose(
                        j,
                        gt_w[u],
                        gt_g[u],
                        wm,
                        g_off,
                        g_n,
                        g_mask,
                        g_ptr,
                        g_end,
                        gorder,
                        remaining,
                        g_nxt,
                        g_prv,
                        j_open,
                    )
                rp_w[rpc] = gt_w[u]
                rp_x[rpc] = gt_x[u]
                if i < 0:
                    rp_t[rpc] = -1
                    rp_d[rpc] = 0.0
                    sched_counts[s, 2] += 1
                else:
                    t = ftasks[f_off[j] + i]
                    rp_t[rpc] = t
                    rp_d[rpc] = durations[t]
                rpc += 1
            probes_out[j] -= c
            if probes_out[j] <= 0 and remaining[j]:
                status = GAVE_UP
                break
            for u in range(start, rpc):
                if rp_t[u] >= 0:
                    dec_ids[n_dec] = rp_t[u]
                    dec_t[n_dec] = now
                    n_dec += 1
            for u in range(start, rpc):
                if rp_t[u] >= 0:
                    comm_ids[n_comm] = rp_t[u]
                    comm_d[n_comm] = d_sm
                    n_comm += 1
            counts[C_REPLY] += 1
            _lane(lane_i, lane_f, ls, st, now + d_sm, E_REPLY, s, start, rpc - start, 0.0)
        elif k == E_REPLY:  # SparrowMonitors._reply (scheduler a, items b..b+c)
            s = a
            n_started = 0
            for u in range(b, b + c):
                w = rp_w[u]
                t = rp_t[u]
                e = now + rp_d[u]
                if t < 0:
                    free_w[w] = True
                    if q_len[w] > 0:  # _advance
                        h = q_head[w]
                        q_head[w] = p_next[h]
                        q_len[w] -= 1
                        free_w[w] = False
                        jj = p_job[h]
                        o_s[n_out] = job_sched[jj]
                        o_j[n_out] = jj
                        o_w[n_out] = w
                        o_g[n_out] = p_grp[h]
                        o_x[n_out] = now - p_t0[h]
                        n_out += 1
                    continue
                if free_w[w] or not claim_slot(on_worker, w, t, 0):
                    status = OVER_COMMIT  # reported after the loop, from over_*
                    over_w = w
                    over_t = t
                    over_at = now
                    break
                egc = _start(t, w, s, now, e, run_w, run_s, t_next, eg_head, eg_tail, eg_n, egc, end_t, end_g, heap,
                             hkt, evi, evf, st)  # fmt: skip
                n_started += 1
            if status != OK:
                break
            if n_started:
                for u in range(b, b + c):
                    if rp_t[u] >= 0:
                        st_ids[n_st] = rp_t[u]
                        st_t[n_st] = now
                        st_w[n_st] = rp_w[u]
                        n_st += 1
                        wq_ids[n_wq] = rp_t[u]
                        wq_v[n_wq] = rp_x[u]
                        n_wq += 1
                running += n_started
                last_progress = now
        elif k == E_JOB:  # SparrowScheduler._submit: batch sampling
            j = a
            s = job_sched[j]
            n = f_n[j]
            off = f_off[j]
            g0 = gc
            any_mask = False
            for u in range(off, off + n):
                if task_mask[ftasks[u]] != 0:
                    any_mask = True
                    break
            if n == 1 or not any_mask:
                G = 1
                mid = task_mid[ftasks[off]] if n == 1 else mid_zero
                g_mask[gc] = task_mask[ftasks[off]] if n == 1 else 0
                g_ptr[gc] = off
                g_end[gc] = off + n
                for u in range(n):
                    gorder[off + u] = u
                gc += 1
                sorter[0] = mid
            else:
                ml = np.empty(n, dtype=np.int64)
                for u in range(n):
                    ml[u] = task_mask[ftasks[off + u]]
                srt = np.argsort(ml, kind="mergesort")
                G = 0
                for u in range(n):
                    li = srt[u]
                    gorder[off + u] = li
                    if u == 0 or ml[li] != ml[srt[u - 1]]:
                        if u > 0:
                            g_end[gc - 1] = off + u
                        g_mask[gc] = ml[li]
                        g_ptr[gc] = off + u
                        sorter[G] = task_mid[ftasks[off + li]]
                        gc += 1
                        G += 1
                g_end[gc - 1] = off + n
            # each group: ceil(d·k) distinct probes wanted, k needed, its mask's eligible workers (ProbeSampler.sample)
            gmasks = np.empty(G, dtype=np.uint32)
            grp = np.empty((4, G), dtype=np.int64)
            for g in range(G):
                gk = g0 + g
                kk = g_end[gk] - g_ptr[gk]
                gmasks[g] = g_mask[gk]
                want = math.ceil(ratio * kk)
                grp[0, g] = want
                grp[1, g] = kk
                mid = sorter[g]
                ne = mask_count[mid]
                if ne < 0:
                    ne = _eligible_words(g_mask[gk], wbits, n_w, words)
                    words_of = mid
                    mask_count[mid] = ne
                grp[2, g] = ne
                if ne == 0:
                    status = GAVE_UP
                    break
                sd = min(want, ne)
                grp[3, g] = -1
                if ne < exact_limit or 2 * sd > ne or kk > sd:  # drawn exactly or probed again: its eligible list
                    if mask_start[mid] < 0:
                        if flat_len + ne > flat.size:
                            grown = np.empty(max(2 * flat.size, flat_len + ne), dtype=np.int64)
                            grown[:flat_len] = flat[:flat_len]
                            flat = grown
                        mask_start[mid] = flat_len
                        if words_of != mid:
                            _eligible_words(g_mask[gk], wbits, n_w, words)
                            words_of = mid
                        _list_words(words, flat, flat_len)
                        flat_len += ne
                    grp[3, g] = mask_start[mid]
                # the open groups, in increasing order (a request takes the first that fits)
                g_prv[gk] = gk - 1 if g > 0 else -1
                g_nxt[gk] = gk + 1 if g + 1 < G else -1
            if status != OK:
                break
            g_off[j] = g0
            g_n[j] = G
            j_open[j] = g0
            ws, gs = sample_groups(fns[s], states[s], worker_masks, gmasks, grp, flat, exact_limit, seen, stamp)
            m = ws.size
            if pc + m > P:
                status = GAVE_UP
                break
            j_poff[j] = pc
            j_pn[j] = m
            for u in range(m):
                p_job[pc + u] = j
                p_grp[pc + u] = gs[u]
                p_w[pc + u] = ws[u]
            pc += m
            remaining[j] = n
            probes_out[j] = m
            sched_counts[s, 0] += m
            if m:
                counts[C_PROBES] += 1
                _lane(lane_i, lane_f, ls, st, now + d_sm, E_PROBES, j, 0, 0, 0.0)
        elif k == E_SRC:  # TraceSource.on_timer
            while pos < n_jobs and job_arrival[order[pos]] <= now:
                j = order[pos]
                pos += 1
                if f_n[j] == 0:
                    skipped += 1
                    continue
                counts[C_JOB] += 1
                if src_lane:
                    _lane(lane_i, lane_f, ls, st, now + d_src, E_JOB, j, 0, 0, 0.0)
                else:
                    _push(heap, hkt, evi, evf, st, now + d_src, E_JOB, j, 0, 0, 0.0)
            if pos < n_jobs:
                _push(heap, hkt, evi, evf, st, now + 0.0 + (job_arrival[order[pos]] - now), E_SRC, 0, 0, 0, 0.0)
        elif k == E_FIN:  # the scheduler learns of several ends (completion_known)
            for u in range(a, a + b):
                kn_ids[n_kn] = fin_buf[u]
                kn_t[n_kn] = now
                n_kn += 1
            outstanding -= b
            stop = outstanding <= 0
        elif k == E_DONE:  # the run's last completion
            kn_ids[n_kn] = a
            kn_t[n_kn] = now
            n_kn += 1
            outstanding -= 1
            stop = outstanding <= 0
        elif k == E_WD and outstanding > 0:  # Watchdog.on_timer (it stops re-arming once all is known)
            if running == 0 and pos >= n_jobs and now - last_progress >= timeout:
                status = GAVE_UP
                break
            _push(heap, hkt, evi, evf, st, now + 0.0 + timeout, E_WD, 0, 0, 0, 0.0)
        if n_out:  # SparrowMonitors._flush: one request routed, several as GetTask per (scheduler, job)
            if n_out == 1:
                counts[C_REQ] += 1
                _lane(lane_i, lane_f, ls, st, now + d_ms, E_REQ, o_j[0], o_w[0], o_g[0], o_x[0])
            else:
                for u in range(n_out):
                    o_done[u] = False
                for u in range(n_out):
                    if o_done[u]:
                        continue
                    start = gtc
                    for v in range(u, n_out):
                        if not o_done[v] and o_s[v] == o_s[u] and o_j[v] == o_j[u]:
                            o_done[v] = True
                            gt_w[gtc] = o_w[v]
                            gt_g[gtc] = o_g[v]
                            gt_x[gtc] = o_x[v]
                            gtc += 1
                    counts[C_GETTASK] += 1
                    _lane(lane_i, lane_f, ls, st, now + d_ms, E_GETTASK, o_j[u], start, gtc - start, 0.0)
        if stop:
            break
    if status == OK and not stop:
        status = GAVE_UP  # out of events with tasks unfinished: the components report it
    end[0] = now
    if status == OVER_COMMIT:
        counts[C_OVER_WORKER] = over_w
        counts[C_OVER_TASK] = over_t
        end[1] = over_at
    if status == OK:
        # SparrowMonitors.settle_skipped: skipped round trips the run's end cut off
        unsent = 0
        unanswered = 0
        for w in range(n_w):
            if ch_len[w] < 0:
                continue
            lo = ch_off[w]
            ln = ch_len[w]
            last = chbuf[lo + ln - 1] if ln else ch_x0[w]
            if last + d_ms < now:
                continue
            for u in range(ln + 1):
                xs = ch_x0[w] if u == 0 else chbuf[lo + u - 1]
                if xs > now:
                    unsent += 1
                if u < ch_n[w] and xs + d_ms >= now:
                    unanswered += 1
        counts[C_UNSENT] = unsent
        counts[C_UNANSWERED] = unanswered
    counts[C_EVENTS] = n_events
    counts[C_SKIPPED] = skipped
    counts[C_POS] = pos
    counts[C_QUEUED] = queued_probes
    counts[C_MAXQ] = max_q
    return (
        status,
        np.array([n_dec, n_comm, n_st, n_fin, n_kn, n_wq], dtype=np.int64),
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
        wq_ids,
        wq_v,
    )


# numba cache stamp: megha.schedulers.common._event_heap=db7406567ed5
# numba cache stamp: megha.schedulers.common._ledger_kernels=2ca82caf9a23
# numba cache stamp: megha.schedulers.common._sampling_kernels=1a0e1bd7b704
