"""The compiled simulation of Megha's lean configuration (numba; see :mod:`._lean`).

One function runs the whole event loop of G GMs and L LMs:

* the engine's order: time, then creation order (every event gets the next sequence number when it is created, as
  the engine's counter gives them); the trace source's timer fires at the instants the component's timer would, and
  its job arrivals (zero delay) come after every event of that instant;
* each GM (:class:`~megha.schedulers.megha.gm.GlobalMaster` in the lean configuration): a job's placement in one call
  of :func:`._kernels.place_tasks` with the GM's uniform stream, its FIFO queue indexed by constraint mask (the
  first-fit answers of :class:`megha.model.matching.WaitQueue`, ``push_front`` included), its launch requests (one per
  LM and step, at most ``batch_size`` mappings each), cumulative acknowledgements, heartbeat deltas, rejections
  retried at once on the refreshed view (else to the head of the queue) and completions offered to the queue;
* each LM (:class:`~megha.schedulers.megha.simlm.SimLocalMaster`): validation of the mappings (a busy worker is an
  inconsistency, answered with the LM's pending delta), its in-process workers (task ends grouped by end instant,
  one timer each), its change log and heartbeats (one shared delta for every GM when all were told the same
  changes, else one per GM).

What each worker runs is a :class:`~megha.schedulers.common.ledger.WorkerLedger`'s (the caller passes its ``task``
array, ``slot_array=True``, every worker free): a start claims the worker and an end frees it through the ledger's
compiled checks (:mod:`megha.schedulers.common._ledger_kernels`). A start on a worker that runs a task already stops
the loop with ``OVER_COMMIT`` (the worker, the task and the instant in ``counts`` and ``end``), and the caller
raises the ledger's error. (The LMs' own record of their workers, on which they accept or reject mappings, is the
loop's ``ctask``, as :class:`~megha.schedulers.megha.lm.LocalMaster`'s cluster is the LM's.)

It writes the recorder's reports as flat logs in the order the components append them, so the recorder's columns
come out the same. ``NEED_UNIFORMS`` asks the caller for more of a GM's uniform numbers (it runs again from the
start); ``UNSUPPORTED`` means something happened that the components would handle differently (the caller runs
them instead). The ledger's checks and :mod:`._kernels`' functions are compiled into :func:`run_lean`, and numba's
cache of this module does not notice a change there: after changing them, touch this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from megha.schedulers.common._ledger_kernels import claim_slot, release_slot_of
from megha.schedulers.megha._kernels import _pick_masked, place_tasks

INF = np.iinfo(np.int64).max
_H1 = np.uint64(0x9E3779B97F4A7C15)  # the task-end groups' hash (splitmix64's constants)
_H2 = np.uint64(0xBF58476D1CE4E5B9)
_ONE = np.uint64(1)

# message / timer kinds (fields of the message table: kind, g, l, a, b, c, d, e)
K_LAUNCH = 0  # GM g -> LM l: mappings (a: request id, b: first index in the request store, c: count, d: one)
K_END = 1  # LM l task-end timer (a: end group)
K_DONE = 2  # LM l -> GM g: tasks done (a: payload offset, b: count, c: acked)
K_HEARTBEAT = 3  # LM l heartbeat timer
K_DELTA = 4  # LM l -> GM g: heartbeat delta (a: payload offset, b: count, c: acked, d: has "changed by")
K_REPLY = 5  # LM l -> GM g: rejections (a: payload offset of the rejected tasks, b: count, c: acked/req,
#              d: payload offset of the delta, e: its count)

OK = 0
UNSUPPORTED = 1
STALLED = 2
NEED_UNIFORMS = 3
OVER_COMMIT = 4  # a start on a worker that runs a task (C_OVER_WORKER, C_OVER_TASK, end[1])
NEED_ROOM = 5  # an array is full: ``room`` says which and how large it must be; the caller runs again with more

# the loop's arrays are allocated once, at the capacities ``caps`` gives (the caller's), and never replaced inside the
# loop: numba keeps an array that a loop may replace as a value merged at every join of the loop's branches, one
# atomic reference count up and down per array at each (about a third of the run's time when the arrays grew in
# place). A full array stops the loop with ``NEED_ROOM``, ``room[k]`` the size its category needs; the caller
# grows ``caps[k]`` and runs again from the start (the arrays of one category share its capacity).
R_DEC = 0  # the decided log (ids, times): one entry per booking
R_COMM = 1  # the comm log (ids, delays): one per booking, launch and rejection
R_RUNS = 2  # the started, finished and known logs: one per run of a task
R_EVENTS = 3  # the event heap and the message table (rows and free rows): events pending at once
R_PAYLOAD = 4  # the message payloads (appended while any message holds one)
R_REQUESTS = 5  # the launch requests of each GM ([G, cap]: request ids from 1)
R_STORE = 6  # the request store (workers and tasks of every launch request)
R_LOG = 7  # the change log of each LM ([L, cap]: change numbers from 1)
R_SCRATCH = 8  # the scratch lists of one event (workers, tasks, owners)
R_GAINED = 9  # the workers one GM's step gains
R_RETRY = 10  # the rejected tasks of one reply that do not fit
R_NODES = 11  # the wait queues' nodes (queued tasks)
R_GROUPS = 12  # the task-end groups pending at once
R_BOOK = 13  # one step's bookings per LM ([L, cap])
R_SLOTS = 14  # the wait queues' slots per GM ([G, cap]: one per queued constraint mask)
R_JOB = 15  # one job's feasible tasks
N_ROOM = 16

# counts[] slots
C_LAUNCH_REQ = 0
C_LAUNCH_REPLY = 1
C_STATE_DELTA = 2
C_TASK_DONE = 3
C_LAUNCH = 4
C_FINISHED = 5
C_JOB_ARRIVAL = 6
C_EVENTS = 7
C_SKIPPED = 8
C_HEARTBEATS = 9
C_SOURCE = 10
C_WATCHDOG = 11
C_OVER_WORKER = 12  # OVER_COMMIT: the worker
C_OVER_TASK = 13  # OVER_COMMIT: the task started on it
N_COUNTS = 14
# per-GM counters [G, 3] and per-LM counters [L, 3]
G_REPART_REQ = 0
G_UPDATES_RECEIVED = 1
G_REJECTIONS_RECEIVED = 2
L_REPARTITIONS = 0
L_INCONSISTENCIES = 1
L_UPDATES_SENT = 2


@njit(cache=True, nogil=True, inline="always")
def _less(t1: float, s1: int, t2: float, s2: int) -> bool:
    """Whether event ``(t1, s1)`` comes before ``(t2, s2)``: time, then sequence number."""
    return t1 < t2 or (t1 == t2 and s1 < s2)


@njit(cache=True, nogil=True, inline="always")
def _group_hash(l: int, bits: int, mask: int) -> int:  # noqa: E741
    """The slot of the task-end group of LM ``l`` and the end instant whose float64 bits are ``bits`` in a table of
    ``mask + 1`` slots (a power of two)."""
    x = np.uint64(bits) ^ (np.uint64(l) * _H1)
    x ^= x >> np.uint64(31)
    x *= _H2
    x ^= x >> np.uint64(29)
    return np.int64(x & np.uint64(mask))


@njit(cache=True, nogil=True)
def _py_floordiv(a: float, b: float) -> float:
    """Python's float ``a // b`` (CPython's float_floor_div)."""
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0.0 and (b < 0.0) != (mod < 0.0):
        div -= 1.0
    if div != 0.0:
        fd = np.floor(div)
        if div - fd > 0.5:
            fd += 1.0
        return fd
    return np.copysign(0.0, a / b)


# the event queue's integer table ``qi`` [rows, 11]: by message row, its fields (kind, g, l, a, b, c, d, e); by heap
# position, the event's sequence number and message row; by index, the free rows. One array with the heap's times
# ``ht``: a compiled call counts an atomic reference up and down for each array it takes
QI_SEQ = 8
QI_ROW = 9
QI_FREE = 10
QI_WIDTH = 11


@njit(cache=True, nogil=True)
def _pop(ht: np.ndarray, qi: np.ndarray, hn: int) -> int:
    """Remove the top of the heap (``hn`` events; read it first); returns the new count. The loop has the same
    code written out where it takes an event (a call counts an atomic reference up and down for each array)."""
    hn -= 1
    if hn > 0:
        lt = ht[hn]
        ls = qi[hn, QI_SEQ]
        lm = qi[hn, QI_ROW]
        pos = 0
        while True:
            c = 2 * pos + 1
            if c >= hn:
                break
            if c + 1 < hn and _less(ht[c + 1], qi[c + 1, QI_SEQ], ht[c], qi[c, QI_SEQ]):
                c += 1
            if _less(ht[c], qi[c, QI_SEQ], lt, ls):
                ht[pos] = ht[c]
                qi[pos, QI_SEQ] = qi[c, QI_SEQ]
                qi[pos, QI_ROW] = qi[c, QI_ROW]
                pos = c
            else:
                break
        ht[pos] = lt
        qi[pos, QI_SEQ] = ls
        qi[pos, QI_ROW] = lm
    return hn


@njit(cache=True, nogil=True, inline="always")
def _post(
    ht: np.ndarray,
    qi: np.ndarray,
    hn: int,
    n_mfree: int,
    n_msg: int,
    s: int,
    t: float,
    kind: int,
    g: int,
    l: int,  # noqa: E741
    a: int,
    b: int,
    c: int,
    d: int,
    e: int,
) -> tuple[int, int, int, int]:
    """Send a message at ``t``: a row of the message table (a free row, else a new one) filled with ``kind, g, l,
    a .. e``, and its event (``t`` and the sequence number ``s``) pushed on the heap (``ht`` and ``qi``'s columns;
    ``hn`` events). The caller made sure of a row (``n_mfree`` free, ``n_msg`` used; the heap holds one event per
    row in use). Returns the new ``hn, n_mfree, n_msg`` and the next sequence number."""
    if n_mfree:
        n_mfree -= 1
        nm = qi[n_mfree, QI_FREE]
    else:
        nm = n_msg
        n_msg += 1
    qi[nm, 0] = kind
    qi[nm, 1] = g
    qi[nm, 2] = l
    qi[nm, 3] = a
    qi[nm, 4] = b
    qi[nm, 5] = c
    qi[nm, 6] = d
    qi[nm, 7] = e
    pos = hn
    while pos > 0:
        par = (pos - 1) >> 1
        if _less(t, s, ht[par], qi[par, QI_SEQ]):
            ht[pos] = ht[par]
            qi[pos, QI_SEQ] = qi[par, QI_SEQ]
            qi[pos, QI_ROW] = qi[par, QI_ROW]
            pos = par
        else:
            break
    ht[pos] = t
    qi[pos, QI_SEQ] = s
    qi[pos, QI_ROW] = nm
    return hn + 1, n_mfree, n_msg, s + 1


@njit(cache=True, nogil=True)
def _arm_at(now: float, phase: float, h: float) -> float:
    """The instant of an LM's next heartbeat armed at ``now`` (``LocalMaster._arm``: the grid point after now)."""
    k = max(0.0, _py_floordiv(now - phase, h) + 1.0)
    return now + (phase + k * h - now)


@njit(cache=True, nogil=True)
def run_lean(
    # the workload: jobs in arrival order (stable), each job's GM; infeasible tasks are never scheduled
    job_order: np.ndarray,
    job_arrival: np.ndarray,
    job_first: np.ndarray,
    job_num: np.ndarray,
    job_gm: np.ndarray,
    feasible: np.ndarray,
    task_dur: np.ndarray,
    task_mask: np.ndarray,
    task_mgid: np.ndarray,
    mgid_mask: np.ndarray,
    n_expected: int,
    # the layout and the GMs' views (avail: [G, words], each GM's own copy)
    avail: np.ndarray,
    valid: np.ndarray,
    cvs: np.ndarray,
    n_constraints: int,
    int_orders: np.ndarray,
    ext_orders: np.ndarray,
    seg_start: np.ndarray,
    repartition: bool,
    rr_int: np.ndarray,
    rr_ext: np.ndarray,
    n_free: np.ndarray,
    worker_at_bit: np.ndarray,
    bit_of_worker: np.ndarray,
    worker_mask: np.ndarray,
    lm_of: np.ndarray,
    part_of: np.ndarray,
    ubuf: np.ndarray,
    batch_size: int,
    # the LMs
    heartbeat: float,
    phase: np.ndarray,
    # delays
    d_gl: float,
    d_lg: float,
    launch_delay: float,
    report_delay: float,
    stall_timeout: float,
    # the workers: the ledger's task array (what each runs; every worker free)
    w_task: np.ndarray,
    # the capacities of the loop's arrays (``R_*``; the logs' are their arrays' sizes) and, on NEED_ROOM, the sizes
    # they need
    caps: np.ndarray,
    room: np.ndarray,
    # the recorder's logs (filled up to ``logs_n``) and the results
    logs_n: np.ndarray,
    dec_ids: np.ndarray,
    dec_t: np.ndarray,
    comm_ids: np.ndarray,
    comm_d: np.ndarray,
    st_ids: np.ndarray,
    st_t: np.ndarray,
    st_w: np.ndarray,
    fin_ids: np.ndarray,
    fin_t: np.ndarray,
    kn_ids: np.ndarray,
    kn_t: np.ndarray,
    counts: np.ndarray,
    gm_counts: np.ndarray,
    lm_counts: np.ndarray,
    end: np.ndarray,
) -> int:
    """Run the simulation; returns its status. The recorder's logs go to the arrays given (decided ids and times,
    comm ids and delays, started ids, times and workers, finished ids and times, known ids and times; ``caps[R_DEC]``,
    ``caps[R_COMM]`` and ``caps[R_RUNS]`` long), their lengths to ``logs_n``; message counts and events to
    ``counts``, the GMs' and LMs' counters to ``gm_counts`` and ``lm_counts``, the time of the last event to
    ``end[0]`` (on ``OVER_COMMIT``: its instant to ``end[1]``). ``NEED_ROOM``: an array was full, ``room`` has the
    size its category needs."""
    G = avail.shape[0]
    L = phase.shape[0]
    n_workers = lm_of.shape[0]
    n_jobs = job_order.shape[0]
    T = task_dur.shape[0]
    n_dec = 0
    n_comm = 0
    n_st = 0
    n_fin = 0
    n_kn = 0
    # --- the event queue: a heap of (time, seq) over rows of the message table (kind, g, l, a, b, c, d, e) ---
    # heap times, sequence numbers and rows; the message table and its free rows; their counts
    n_ev = caps[R_EVENTS]
    ht = np.empty(n_ev)
    qi = np.zeros((n_ev, QI_WIDTH), dtype=np.int64)
    hn = 0
    n_mfree = 0
    n_msg = 0
    seq = 0
    # message payloads (lists of tasks, workers, states): appended; emptied whenever no message holds one
    pl = np.empty(caps[R_PAYLOAD], dtype=np.int64)
    n_pl = 0
    live_pl = 0
    pl_max = 0  # the payloads' high-water mark
    # --- GMs ---
    inflight = np.zeros((G, n_workers), dtype=np.int64)
    flag = np.zeros((G, n_workers), dtype=np.uint8)
    for g in range(G):
        for w in range(n_workers):
            b = bit_of_worker[w]
            if b >= 0 and (avail[g, b >> 6] >> np.uint64(b & 63)) & _ONE:
                flag[g, w] = 1
    upos = np.zeros(G, dtype=np.int64)
    req_seq = np.zeros(G, dtype=np.int64)
    # requests [G, request id]: first index in the request store, count, next unacknowledged of the same (GM, LM)
    rq_first = np.zeros((G, caps[R_REQUESTS]), dtype=np.int64)
    rq_cnt = np.zeros((G, caps[R_REQUESTS]), dtype=np.int64)
    rq_next = np.zeros((G, caps[R_REQUESTS]), dtype=np.int64)
    rs_w = np.empty(caps[R_STORE], dtype=np.int64)  # the request store: each request's workers and tasks
    rs_t = np.empty(caps[R_STORE], dtype=np.int64)
    n_rs = 0
    ua_head = np.zeros((G, L), dtype=np.int64)  # oldest unacknowledged request per (GM, LM); 0: none
    ua_tail = np.zeros((G, L), dtype=np.int64)
    # the wait queues (WaitQueue), one per GM: slots of queued masks; entries are nodes (task, key) linked per slot
    n_m = mgid_mask.shape[0]
    slot_of = np.full((G, n_m), -1, dtype=np.int64)
    s_mask = np.zeros((G, caps[R_SLOTS]), dtype=np.uint32)
    s_head = np.full((G, caps[R_SLOTS]), INF, dtype=np.int64)
    s_gid = np.zeros((G, caps[R_SLOTS]), dtype=np.int64)
    s_first = np.full((G, caps[R_SLOTS]), -1, dtype=np.int64)
    s_last = np.full((G, caps[R_SLOTS]), -1, dtype=np.int64)
    # a slot's head is its first node's key (the queue's order: distinct keys) times n_sc plus the slot's index, so
    # that the smallest head of the slots a worker fits names its slot (INF: an empty slot)
    n_sc = s_mask.shape[1]
    n_slots = np.zeros(G, dtype=np.int64)
    empty_slots = np.zeros(G, dtype=np.int64)
    q_back = np.zeros(G, dtype=np.int64)
    q_front = np.zeros(G, dtype=np.int64)
    q_len = np.zeros(G, dtype=np.int64)
    nd_task = np.empty(caps[R_NODES], dtype=np.int64)
    nd_key = np.empty(caps[R_NODES], dtype=np.int64)
    nd_next = np.empty(caps[R_NODES], dtype=np.int64)
    nd_free = -1
    n_nd = 0
    # one step's bookings (one GM's step at a time): per LM, LMs in the order of their first booking (dirty)
    bk_t = np.zeros((L, caps[R_BOOK]), dtype=np.int64)
    bk_w = np.zeros((L, caps[R_BOOK]), dtype=np.int64)
    n_bk = np.zeros(L, dtype=np.int64)
    dirty = np.empty(L, dtype=np.int64)
    n_dirty = 0
    out = np.empty(caps[R_JOB], dtype=np.int64)  # one job's placements, its tasks and their masks
    failed = np.empty(caps[R_JOB], dtype=np.int64)
    jt = np.empty(caps[R_JOB], dtype=np.int64)
    jm = np.empty(caps[R_JOB], dtype=np.uint32)
    gained = np.empty(caps[R_GAINED], dtype=np.int64)
    retry = np.empty(caps[R_RETRY], dtype=np.int64)
    mark = np.zeros(n_workers, dtype=np.int64)  # membership stamps
    stamp = 0
    # --- LMs ---
    ctask = np.full(n_workers, -1, dtype=np.int64)
    cowner = np.full(n_workers, -1, dtype=np.int64)
    processed = np.zeros((L, G), dtype=np.int64)
    sent = np.zeros((L, G), dtype=np.int64)
    lm_seq = np.zeros(L, dtype=np.int64)
    armed = np.zeros(L, dtype=np.bool_)
    # change log per LM: worker and GM of change number s (1-based); each worker's latest change number
    log_w = np.zeros((L, caps[R_LOG]), dtype=np.int64)
    log_by = np.zeros((L, caps[R_LOG]), dtype=np.int64)
    last_seq = np.zeros(n_workers, dtype=np.int64)
    # task-end groups: (LM, end instant) -> group; a group's tasks linked by next_in_group
    # and found by (LM, end instant) in an open-addressing table of group numbers (-1: empty; linear probing, deletion
    # by backward shift), at most half full
    n_gslot = 1
    while n_gslot < 2 * caps[R_GROUPS]:
        n_gslot *= 2
    gslot = np.full(n_gslot, -1, dtype=np.int64)
    gmask = n_gslot - 1
    fbits = np.zeros(1)  # an end instant's float64 bits (ibits[0])
    ibits = fbits.view(np.int64)
    g_first = np.empty(caps[R_GROUPS], dtype=np.int64)
    g_last = np.empty(caps[R_GROUPS], dtype=np.int64)
    g_t1 = np.empty(caps[R_GROUPS])
    g_e = np.empty(caps[R_GROUPS])
    g_l = np.empty(caps[R_GROUPS], dtype=np.int64)
    g_free = -1
    n_grp = 0
    next_in_group = np.full(T, -1, dtype=np.int64)
    run_w = np.full(T, -1, dtype=np.int64)
    tw = np.empty(caps[R_SCRATCH], dtype=np.int64)  # scratch lists
    tt = np.empty(caps[R_SCRATCH], dtype=np.int64)
    tb = np.empty(caps[R_SCRATCH], dtype=np.int64)
    byset = np.zeros(G, dtype=np.bool_)
    outstanding = n_expected
    n_skipped = 0
    now = 0.0
    jp = 0  # next job to arrive (position in job_order)
    jp_end = 0  # jobs [jp, jp_end) arrive at this instant (the source's timer fired)
    src_t = max(0.0, job_arrival[job_order[0]]) if n_jobs else 0.0
    status = STALLED
    wd_t = 0.0 + stall_timeout  # the runner's watchdog: its next check
    running = 0  # tasks running, as the recorder counts them (a start counts when recorded)
    last_progress = 0.0
    while True:
        # the watchdog's checks due before the next event (one that would stop the run: the components run instead)
        if outstanding > 0:
            nxt = ht[0] if hn else np.inf
            if jp < jp_end:
                nxt = now
            elif jp < n_jobs:
                nxt = min(nxt, src_t)
            while wd_t < nxt:
                counts[C_WATCHDOG] += 1
                if running == 0 and jp >= n_jobs and wd_t - last_progress >= stall_timeout:
                    status = UNSUPPORTED
                    break
                wd_t = wd_t + stall_timeout
            if status == UNSUPPORTED:
                break
        step = -1  # the GM whose step this event is (its queue is offered the gained workers, then it flushes)
        n_gain = 0
        if jp < jp_end or (jp < n_jobs and (hn == 0 or ht[0] > src_t)):
            if jp >= jp_end:  # the source's timer fires: the jobs arrived by now, one JobArrival each
                counts[C_SOURCE] += 1
                counts[C_EVENTS] += 1
                now = src_t
                jp_end = jp
                while jp_end < n_jobs and job_arrival[job_order[jp_end]] <= now:
                    jp_end += 1
                if jp_end < n_jobs:
                    src_t = now + (job_arrival[job_order[jp_end]] - now)
                if jp >= jp_end:
                    continue
            j = job_order[jp]
            jp += 1
            lo = job_first[j]
            hi = lo + job_num[j]
            nt = 0
            for t in range(lo, hi):
                if feasible[t]:
                    nt += 1
            if nt == 0:
                n_skipped += 1
                continue
            counts[C_JOB_ARRIVAL] += 1
            counts[C_EVENTS] += 1
            g = job_gm[j]
            step = g
            # --- GM g: _on_job_lean ---
            if nt > out.shape[0]:
                room[R_JOB] = nt
                return NEED_ROOM
            k = 0
            for t in range(lo, hi):
                if feasible[t]:
                    jm[k] = task_mask[t]
                    jt[k] = t
                    k += 1
            i, ri, rx, nf, up, nrep, _nf = place_tasks(
                avail[g],
                valid,
                cvs,
                n_constraints,
                jm[:nt],
                0,
                out,
                failed,
                0,
                int_orders[g],
                ext_orders[g],
                seg_start,
                G,
                L,
                repartition,
                rr_int[g],
                rr_ext[g],
                n_free[g],
                ubuf[g],
                upos[g],
            )
            rr_int[g] = ri
            rr_ext[g] = rx
            n_free[g] = nf
            upos[g] = up
            gm_counts[g, G_REPART_REQ] += nrep
            if i < nt:
                status = NEED_UNIFORMS
                break
            for k in range(nt):
                t = jt[k]
                b = out[k]
                if b >= 0:  # booked (the kernel cleared its bit in the view)
                    w = worker_at_bit[b]
                    flag[g, w] = 0
                    inflight[g, w] += 1
                    lm = lm_of[w]
                    if n_bk[lm] == 0:
                        dirty[n_dirty] = lm
                        n_dirty += 1
                    if n_bk[lm] == bk_t.shape[1]:
                        room[R_BOOK] = n_bk[lm] + 1
                        return NEED_ROOM
                    bk_t[lm, n_bk[lm]] = t
                    bk_w[lm, n_bk[lm]] = w
                    n_bk[lm] += 1
                else:  # WaitQueue.push_back
                    gid = task_mgid[t]
                    s = slot_of[g, gid]
                    if s < 0:
                        if n_slots[g] == s_mask.shape[1]:
                            room[R_SLOTS] = n_slots[g] + 1
                            return NEED_ROOM
                        s = n_slots[g]
                        n_slots[g] += 1
                        s_mask[g, s] = mgid_mask[gid]
                        s_head[g, s] = INF
                        s_gid[g, s] = gid
                        s_first[g, s] = -1
                        s_last[g, s] = -1
                        slot_of[g, gid] = s
                        empty_slots[g] += 1
                    q_back[g] += 1
                    if nd_free >= 0:
                        nd = nd_free
                        nd_free = nd_next[nd]
                    else:
                        if n_nd + 1 > nd_task.shape[0]:
                            room[R_NODES] = n_nd + 1
                            return NEED_ROOM
                        nd = n_nd
                        n_nd += 1
                    nd_task[nd] = t
                    nd_key[nd] = q_back[g]
                    nd_next[nd] = -1
                    if s_first[g, s] < 0:
                        s_head[g, s] = q_back[g] * n_sc + s
                        empty_slots[g] -= 1
                        s_first[g, s] = nd
                    else:
                        nd_next[s_last[g, s]] = nd
                    s_last[g, s] = nd
                    q_len[g] += 1
        else:
            if hn == 0:
                break
            # ============ the next event of the queue ============
            now = ht[0]
            mid = qi[0, QI_ROW]
            # the heap's top removed (_pop, written out here: a call counts references to its arrays)
            hn -= 1
            if hn > 0:
                lt = ht[hn]
                ls = qi[hn, QI_SEQ]
                lr = qi[hn, QI_ROW]
                pos = 0
                while True:
                    c = 2 * pos + 1
                    if c >= hn:
                        break
                    if c + 1 < hn and _less(ht[c + 1], qi[c + 1, QI_SEQ], ht[c], qi[c, QI_SEQ]):
                        c += 1
                    if _less(ht[c], qi[c, QI_SEQ], lt, ls):
                        ht[pos] = ht[c]
                        qi[pos, QI_SEQ] = qi[c, QI_SEQ]
                        qi[pos, QI_ROW] = qi[c, QI_ROW]
                        pos = c
                    else:
                        break
                ht[pos] = lt
                qi[pos, QI_SEQ] = ls
                qi[pos, QI_ROW] = lr
            qi[n_mfree, QI_FREE] = mid  # the row is free again from the next post (read it first)
            n_mfree += 1
            counts[C_EVENTS] += 1
            kind = qi[mid, 0]
            g = qi[mid, 1]
            l = qi[mid, 2]  # noqa: E741
            ma = qi[mid, 3]
            mb = qi[mid, 4]
            mc = qi[mid, 5]
            md = qi[mid, 6]
            me = qi[mid, 7]
            if kind == K_LAUNCH:
                # ---- LM l: a launch request of GM g (request ma, mappings rs[mb:mb+mc]) ----
                n_acc = 0
                n_rej = 0
                if mc > tw.shape[0]:
                    room[R_SCRATCH] = mc
                    return NEED_ROOM
                repart = 0
                for x in range(mb, mb + mc):
                    w = rs_w[x]
                    t = rs_t[x]
                    if ctask[w] < 0:
                        ctask[w] = t
                        cowner[w] = g
                        tt[n_acc] = t
                        tw[n_acc] = w
                        n_acc += 1
                        if part_of[w] != g:
                            repart += 1
                        lm_seq[l] += 1
                        sq = lm_seq[l]
                        if sq >= log_w.shape[1]:
                            room[R_LOG] = sq + 1
                            return NEED_ROOM
                        log_w[l, sq] = w
                        log_by[l, sq] = g
                        last_seq[w] = sq
                    else:
                        tb[n_rej] = x  # index of the rejected mapping
                        n_rej += 1
                if n_acc and not armed[l]:
                    armed[l] = True
                    if n_mfree == 0 and n_msg >= qi.shape[0]:
                        room[R_EVENTS] = n_msg + 1
                        return NEED_ROOM
                    hn, n_mfree, n_msg, seq = _post(
                        ht,
                        qi,
                        hn,
                        n_mfree,
                        n_msg,
                        seq,
                        _arm_at(now, phase[l], heartbeat),
                        K_HEARTBEAT,
                        0,
                        l,
                        0,
                        0,
                        0,
                        0,
                        0,
                    )
                lm_counts[l, L_REPARTITIONS] += repart
                if n_acc:
                    # _start_tasks: the workers start them one launch delay from now
                    counts[C_LAUNCH] += 1
                    start = now + launch_delay
                    if n_comm + n_acc > comm_ids.shape[0]:
                        room[R_COMM] = n_comm + n_acc
                        return NEED_ROOM
                    for x in range(n_acc):
                        comm_ids[n_comm] = tt[x]
                        comm_d[n_comm] = launch_delay
                        n_comm += 1
                    if n_st + n_acc > st_ids.shape[0]:
                        room[R_RUNS] = n_st + n_acc
                        return NEED_ROOM
                    for x in range(n_acc):
                        w = tw[x]
                        if not claim_slot(w_task, w, tt[x], 0):  # the workers' over-commit check
                            status = OVER_COMMIT
                            counts[C_OVER_WORKER] = w
                            counts[C_OVER_TASK] = tt[x]
                            end[1] = start
                            break
                        st_ids[n_st] = tt[x]
                        st_t[n_st] = start
                        st_w[n_st] = w
                        n_st += 1
                    running += n_acc
                    last_progress = start
                    if status == OVER_COMMIT:
                        break
                    for x in range(n_acc):
                        t = tt[x]
                        e = start + task_dur[t]
                        run_w[t] = tw[x]
                        fbits[0] = e + 0.0  # (-0.0 as 0.0: the instants compare equal)
                        h = _group_hash(l, ibits[0], gmask)
                        gi = -1
                        while gslot[h] >= 0:
                            c = gslot[h]
                            if g_l[c] == l and g_e[c] == e:
                                gi = c
                                break
                            h = (h + 1) & gmask
                        if gi < 0:
                            if g_free >= 0:
                                gi = g_free
                                g_free = g_first[gi]
                            else:
                                if n_grp + 1 > g_first.shape[0]:
                                    room[R_GROUPS] = n_grp + 1
                                    return NEED_ROOM
                                gi = n_grp
                                n_grp += 1
                            gslot[h] = gi  # the empty slot that ended the search
                            t1 = start + (e - start)  # the instant the pool's timer would fire
                            g_t1[gi] = t1
                            g_e[gi] = e
                            g_l[gi] = l
                            g_first[gi] = t
                            g_last[gi] = t
                            next_in_group[t] = -1
                            at = t1 + report_delay
                            if not at >= now:
                                status = UNSUPPORTED
                                break
                            if n_mfree == 0 and n_msg >= qi.shape[0]:
                                room[R_EVENTS] = n_msg + 1
                                return NEED_ROOM
                            hn, n_mfree, n_msg, seq = _post(
                                ht, qi, hn, n_mfree, n_msg, seq, at, K_END, 0, l, gi, 0, 0, 0, 0
                            )
                        else:
                            next_in_group[g_last[gi]] = t
                            next_in_group[t] = -1
                            g_last[gi] = t
                    if status == UNSUPPORTED:
                        break
                processed[l, g] = ma
                if n_rej:
                    # an inconsistency: the LM answers with the rejected tasks and its pending delta for g
                    lm_counts[l, L_INCONSISTENCIES] += n_rej
                    stamp += 1
                    nd0 = 0
                    sq_now = lm_seq[l]
                    nmax = sq_now - sent[l, g] + n_rej
                    if nmax > tw.shape[0]:
                        room[R_SCRATCH] = nmax
                        return NEED_ROOM
                    for sq in range(sent[l, g] + 1, sq_now + 1):
                        w = log_w[l, sq]
                        if last_seq[w] == sq and log_by[l, sq] != g:
                            tw[nd0] = w
                            mark[w] = stamp
                            nd0 += 1
                    n_delta = nd0
                    for x in range(n_rej):
                        w = rs_w[tb[x]]
                        if mark[w] != stamp:
                            tw[n_delta] = w
                            n_delta += 1
                    sent[l, g] = sq_now
                    if n_pl + n_rej + 2 * n_delta > pl.shape[0]:
                        room[R_PAYLOAD] = n_pl + n_rej + 2 * n_delta
                        return NEED_ROOM
                    p_rej = n_pl
                    for x in range(n_rej):
                        pl[n_pl] = rs_t[tb[x]]
                        n_pl += 1
                    p_delta = n_pl
                    for x in range(n_delta):
                        pl[n_pl] = tw[x]
                        pl[n_pl + n_delta] = 1 if ctask[tw[x]] < 0 else 0
                        n_pl += 1
                    n_pl += n_delta
                    live_pl += 1
                    counts[C_LAUNCH_REPLY] += 1
                    if n_comm + n_rej > comm_ids.shape[0]:
                        room[R_COMM] = n_comm + n_rej
                        return NEED_ROOM
                    for x in range(n_rej):
                        comm_ids[n_comm] = rs_t[tb[x]]
                        comm_d[n_comm] = d_lg
                        n_comm += 1
                    if n_mfree == 0 and n_msg >= qi.shape[0]:
                        room[R_EVENTS] = n_msg + 1
                        return NEED_ROOM
                    hn, n_mfree, n_msg, seq = _post(
                        ht,
                        qi,
                        hn,
                        n_mfree,
                        n_msg,
                        seq,
                        now + d_lg,
                        K_REPLY,
                        g,
                        l,
                        p_rej,
                        n_rej,
                        ma,
                        p_delta,
                        n_delta,
                    )
            elif kind == K_END:
                # ---- LM l: the tasks ending at one instant on its workers ----
                gi = ma
                t1 = g_t1[gi]
                # the group out of the table: its slot emptied, the entries after it shifted back over it
                fbits[0] = g_e[gi] + 0.0
                h = _group_hash(l, ibits[0], gmask)
                while gslot[h] != gi:
                    h = (h + 1) & gmask
                j = h
                while True:
                    j = (j + 1) & gmask
                    c = gslot[j]
                    if c < 0:
                        break
                    fbits[0] = g_e[c] + 0.0
                    k = _group_hash(g_l[c], ibits[0], gmask)
                    if (h < k <= j) if h <= j else (k > h or k <= j):
                        continue  # its home lies after the emptied slot: it stays
                    gslot[h] = c
                    h = j
                gslot[h] = -1
                n_done = 0
                t = g_first[gi]
                while t >= 0:
                    if n_done + 1 > tt.shape[0]:
                        room[R_SCRATCH] = n_done + 1
                        return NEED_ROOM
                    w = run_w[t]
                    release_slot_of(w_task, w, t, 0)  # unless a later start took the worker
                    tt[n_done] = t
                    tw[n_done] = w
                    n_done += 1
                    t = next_in_group[t]
                g_first[gi] = g_free
                g_free = gi
                if n_fin + n_done > fin_ids.shape[0]:
                    room[R_RUNS] = n_fin + n_done
                    return NEED_ROOM
                for x in range(n_done):
                    fin_ids[n_fin] = tt[x]
                    fin_t[n_fin] = t1
                    n_fin += 1
                running -= n_done
                last_progress = t1
                counts[C_FINISHED] += 1
                if not armed[l]:
                    armed[l] = True
                    if n_mfree == 0 and n_msg >= qi.shape[0]:
                        room[R_EVENTS] = n_msg + 1
                        return NEED_ROOM
                    hn, n_mfree, n_msg, seq = _post(
                        ht,
                        qi,
                        hn,
                        n_mfree,
                        n_msg,
                        seq,
                        _arm_at(now, phase[l], heartbeat),
                        K_HEARTBEAT,
                        0,
                        l,
                        0,
                        0,
                        0,
                        0,
                        0,
                    )
                if n_done > tb.shape[0]:
                    room[R_SCRATCH] = n_done
                    return NEED_ROOM
                for x in range(n_done):
                    w = tw[x]
                    tb[x] = cowner[w]
                    ctask[w] = -1
                    cowner[w] = -1
                    lm_seq[l] += 1
                    sq = lm_seq[l]
                    if sq >= log_w.shape[1]:
                        room[R_LOG] = sq + 1
                        return NEED_ROOM
                    log_w[l, sq] = w
                    log_by[l, sq] = tb[x]
                    last_seq[w] = sq
                # one TaskDone per owner GM, GMs in the order they first appear
                for x in range(n_done):
                    og = tb[x]
                    if og < 0:
                        continue
                    cnt = 0
                    for y in range(x, n_done):
                        if tb[y] == og:
                            cnt += 1
                    if n_pl + 2 * cnt > pl.shape[0]:
                        room[R_PAYLOAD] = n_pl + 2 * cnt
                        return NEED_ROOM
                    p0 = n_pl
                    for y in range(x, n_done):
                        if tb[y] == og:
                            pl[n_pl] = tt[y]
                            pl[n_pl + cnt] = tw[y]
                            n_pl += 1
                            if y > x:
                                tb[y] = -1
                    n_pl += cnt
                    live_pl += 1
                    counts[C_TASK_DONE] += 1
                    if n_mfree == 0 and n_msg >= qi.shape[0]:
                        room[R_EVENTS] = n_msg + 1
                        return NEED_ROOM
                    hn, n_mfree, n_msg, seq = _post(
                        ht,
                        qi,
                        hn,
                        n_mfree,
                        n_msg,
                        seq,
                        now + d_lg,
                        K_DONE,
                        og,
                        l,
                        p0,
                        cnt,
                        processed[l, og],
                        0,
                        0,
                    )
                    tb[x] = -1
            elif kind == K_HEARTBEAT:
                # ---- LM l's heartbeat: the changes since each GM was last told, except the GM's own ----
                counts[C_HEARTBEATS] += 1
                armed[l] = False
                sq_now = lm_seq[l]
                low = sent[l, 0]
                high = sent[l, 0]
                for g2 in range(1, G):
                    low = min(low, sent[l, g2])
                    high = max(high, sent[l, g2])
                if low < sq_now:
                    # the changes since low, oldest first (latest change of each worker only)
                    n_new = 0
                    if sq_now - low > tw.shape[0]:
                        room[R_SCRATCH] = sq_now - low
                        return NEED_ROOM
                    for sq in range(low + 1, sq_now + 1):
                        w = log_w[l, sq]
                        if last_seq[w] == sq:
                            tw[n_new] = w
                            tt[n_new] = sq
                            tb[n_new] = log_by[l, sq]
                            n_new += 1
                    if high == low:
                        # one list for every GM (each skips its own changes)
                        byset[:] = False
                        n_by = 0
                        for x in range(n_new):
                            if tb[x] >= 0 and not byset[tb[x]]:
                                byset[tb[x]] = True
                                n_by += 1
                            elif tb[x] < 0:
                                return UNSUPPORTED
                        if n_pl + 3 * n_new > pl.shape[0]:
                            room[R_PAYLOAD] = n_pl + 3 * n_new
                            return NEED_ROOM
                        p0 = n_pl
                        for x in range(n_new):
                            pl[p0 + x] = tw[x]
                            pl[p0 + n_new + x] = 1 if ctask[tw[x]] < 0 else 0
                            pl[p0 + 2 * n_new + x] = tb[x]
                        n_pl += 3 * n_new
                        n_sent = 0
                        for g2 in range(G):
                            sent[l, g2] = sq_now
                            if byset[g2] and n_by == 1:
                                continue  # only this GM's own changes: nothing to tell it
                            n_sent += 1
                            counts[C_STATE_DELTA] += 1
                            live_pl += 1
                            if n_mfree == 0 and n_msg >= qi.shape[0]:
                                room[R_EVENTS] = n_msg + 1
                                return NEED_ROOM
                            hn, n_mfree, n_msg, seq = _post(
                                ht,
                                qi,
                                hn,
                                n_mfree,
                                n_msg,
                                seq,
                                now + d_lg,
                                K_DELTA,
                                g2,
                                l,
                                p0,
                                n_new,
                                processed[l, g2],
                                1 if byset[g2] else 0,
                                0,
                            )
                        lm_counts[l, L_UPDATES_SENT] += n_sent
                    else:
                        for g2 in range(G):
                            since = sent[l, g2]
                            sent[l, g2] = sq_now
                            if since >= sq_now:
                                continue
                            cnt = 0
                            for x in range(n_new):
                                if tt[x] > since and tb[x] != g2:
                                    cnt += 1
                            if cnt == 0:
                                continue
                            lm_counts[l, L_UPDATES_SENT] += 1
                            counts[C_STATE_DELTA] += 1
                            if n_pl + 2 * cnt > pl.shape[0]:
                                room[R_PAYLOAD] = n_pl + 2 * cnt
                                return NEED_ROOM
                            p0 = n_pl
                            for x in range(n_new):
                                if tt[x] > since and tb[x] != g2:
                                    pl[n_pl] = tw[x]
                                    pl[n_pl + cnt] = 1 if ctask[tw[x]] < 0 else 0
                                    n_pl += 1
                            n_pl += cnt
                            live_pl += 1
                            if n_mfree == 0 and n_msg >= qi.shape[0]:
                                room[R_EVENTS] = n_msg + 1
                                return NEED_ROOM
                            hn, n_mfree, n_msg, seq = _post(
                                ht,
                                qi,
                                hn,
                                n_mfree,
                                n_msg,
                                seq,
                                now + d_lg,
                                K_DELTA,
                                g2,
                                l,
                                p0,
                                cnt,
                                processed[l, g2],
                                0,
                                0,
                            )
                else:
                    for g2 in range(G):
                        sent[l, g2] = sq_now
            else:
                # ---- GM g: a message of LM l (TaskDone, StateDelta or LaunchReply) ----
                step = g
                acked = mc
                r = ua_head[g, l]
                while r != 0 and r <= acked:
                    f0 = rq_first[g, r]
                    for x in range(f0, f0 + rq_cnt[g, r]):
                        inflight[g, rs_w[x]] -= 1
                    r = rq_next[g, r]
                ua_head[g, l] = r
                live_pl -= 1
                if kind == K_DONE:
                    cnt = mb
                    if n_kn + cnt > kn_ids.shape[0]:
                        room[R_RUNS] = n_kn + cnt
                        return NEED_ROOM
                    if cnt > gained.shape[0]:
                        room[R_GAINED] = cnt
                        return NEED_ROOM
                    for x in range(cnt):
                        kn_ids[n_kn] = pl[ma + x]
                        kn_t[n_kn] = now
                        n_kn += 1
                        gained[x] = pl[ma + cnt + x]
                    n_gain = cnt
                    outstanding -= cnt
                else:
                    if kind == K_DELTA:
                        gm_counts[g, G_UPDATES_RECEIVED] += 1
                        p0 = ma
                        cnt = mb
                        has_by = md
                    else:
                        gm_counts[g, G_REJECTIONS_RECEIVED] += mb
                        p0 = md
                        cnt = me
                        has_by = 0
                    # SlotView.apply_truths: a worker busy in truth and free in the view is booked out of the view
                    if cnt > gained.shape[0]:
                        room[R_GAINED] = cnt
                        return NEED_ROOM
                    for x in range(cnt):
                        if has_by and pl[p0 + 2 * cnt + x] == g:
                            continue
                        w = pl[p0 + x]
                        if pl[p0 + cnt + x] and inflight[g, w] == 0:
                            if not flag[g, w]:
                                gained[n_gain] = w
                                n_gain += 1
                        elif flag[g, w]:
                            b = bit_of_worker[w]
                            avail[g, b >> 6] &= ~(_ONE << np.uint64(b & 63))
                            flag[g, w] = 0
                            n_free[g] -= 1
                    if kind == K_REPLY:
                        # the rejected tasks, retried at once on the refreshed view; what does not fit goes to the
                        # head of the queue (in order)
                        n_fail = 0
                        if mb > retry.shape[0]:
                            room[R_RETRY] = mb
                            return NEED_ROOM
                        for x in range(mb):
                            t = pl[ma + x]
                            ok = False
                            if n_free[g] > 0:
                                if upos[g] >= ubuf.shape[1]:
                                    status = NEED_UNIFORMS
                                    break
                                u = ubuf[g, upos[g]]
                                m = np.int64(task_mask[t])
                                kk = -1
                                bb = -1
                                if not (m >> n_constraints):
                                    order = int_orders[g, rr_int[g]]
                                    kk, bb = _pick_masked(avail[g], valid, cvs, m, order, seg_start, u)
                                    if kk >= 0:
                                        rr_int[g] = (order[kk] // G + 1) % L
                                    elif repartition and G > 1:
                                        order = ext_orders[g, rr_ext[g]]
                                        kk, bb = _pick_masked(avail[g], valid, cvs, m, order, seg_start, u)
                                        if kk >= 0:
                                            rr_ext[g] = (order[kk] // G + 1) % L
                                            gm_counts[g, G_REPART_REQ] += 1
                                if kk >= 0:
                                    ok = True
                                    upos[g] += 1
                                    w = worker_at_bit[bb]
                                    if flag[g, w]:
                                        avail[g, bb >> 6] &= ~(_ONE << np.uint64(bb & 63))
                                        flag[g, w] = 0
                                        n_free[g] -= 1
                                    inflight[g, w] += 1
                                    lm = lm_of[w]
                                    if n_bk[lm] == 0:
                                        dirty[n_dirty] = lm
                                        n_dirty += 1
                                    if n_bk[lm] == bk_t.shape[1]:
                                        room[R_BOOK] = n_bk[lm] + 1
                                        return NEED_ROOM
                                    bk_t[lm, n_bk[lm]] = t
                                    bk_w[lm, n_bk[lm]] = w
                                    n_bk[lm] += 1
                            if not ok:
                                retry[n_fail] = t
                                n_fail += 1
                        if status == NEED_UNIFORMS:
                            break
                        for x in range(n_fail - 1, -1, -1):  # WaitQueue.push_front, last failed first
                            t = retry[x]
                            gid = task_mgid[t]
                            s = slot_of[g, gid]
                            if s < 0:
                                if n_slots[g] == s_mask.shape[1]:
                                    room[R_SLOTS] = n_slots[g] + 1
                                    return NEED_ROOM
                                s = n_slots[g]
                                n_slots[g] += 1
                                s_mask[g, s] = mgid_mask[gid]
                                s_head[g, s] = INF
                                s_gid[g, s] = gid
                                s_first[g, s] = -1
                                s_last[g, s] = -1
                                slot_of[g, gid] = s
                                empty_slots[g] += 1
                            q_front[g] -= 1
                            if nd_free >= 0:
                                nd = nd_free
                                nd_free = nd_next[nd]
                            else:
                                if n_nd + 1 > nd_task.shape[0]:
                                    room[R_NODES] = n_nd + 1
                                    return NEED_ROOM
                                nd = n_nd
                                n_nd += 1
                            nd_task[nd] = t
                            nd_key[nd] = q_front[g]
                            if s_first[g, s] < 0:
                                empty_slots[g] -= 1
                                s_last[g, s] = nd
                            nd_next[nd] = s_first[g, s]
                            s_first[g, s] = nd
                            s_head[g, s] = q_front[g] * n_sc + s
                            q_len[g] += 1
                if live_pl == 0:
                    pl_max = max(pl_max, n_pl)
                    n_pl = 0
        if step >= 0:
            g = step
            # ---- the step's end: each gained worker to the oldest queued task it suits, else free in the view ----
            for x in range(n_gain):
                w = gained[x]
                s = -1
                if q_len[g]:  # the slot of the smallest head whose mask the worker has (first_fit_min)
                    nm = ~worker_mask[w]
                    best = INF
                    for i2 in range(n_slots[g]):
                        best = min(best, s_head[g, i2] if (s_mask[g, i2] & nm) == 0 else INF)
                    if best != INF:
                        s = best % n_sc
                if s < 0:
                    if not flag[g, w]:
                        b = bit_of_worker[w]
                        avail[g, b >> 6] |= _ONE << np.uint64(b & 63)
                        flag[g, w] = 1
                        n_free[g] += 1
                    continue
                # WaitQueue._take(s)
                nd = s_first[g, s]
                t = nd_task[nd]
                s_first[g, s] = nd_next[nd]
                nd_next[nd] = nd_free
                nd_free = nd
                q_len[g] -= 1
                if s_first[g, s] >= 0:
                    s_head[g, s] = nd_key[s_first[g, s]] * n_sc + s
                else:
                    s_last[g, s] = -1
                    s_head[g, s] = INF
                    empty_slots[g] += 1
                    # WaitQueue._compact, sooner: once a sixteenth of the slots are empty (the scan above passes over
                    # them for every gained worker; the slots' order does not change which slot it finds)
                    if empty_slots[g] > 4 and empty_slots[g] * 16 > n_slots[g]:
                        k = 0
                        for i2 in range(n_slots[g]):
                            if s_first[g, i2] >= 0:
                                s_mask[g, k] = s_mask[g, i2]
                                s_head[g, k] = s_head[g, i2] - i2 + k
                                s_gid[g, k] = s_gid[g, i2]
                                s_first[g, k] = s_first[g, i2]
                                s_last[g, k] = s_last[g, i2]
                                slot_of[g, s_gid[g, k]] = k
                                k += 1
                            else:
                                slot_of[g, s_gid[g, i2]] = -1
                        for i2 in range(k, n_slots[g]):
                            s_head[g, i2] = INF
                        n_slots[g] = k
                        empty_slots[g] = 0
                # book w for t
                if flag[g, w]:
                    b = bit_of_worker[w]
                    avail[g, b >> 6] &= ~(_ONE << np.uint64(b & 63))
                    flag[g, w] = 0
                    n_free[g] -= 1
                inflight[g, w] += 1
                lm = lm_of[w]
                if n_bk[lm] == 0:
                    dirty[n_dirty] = lm
                    n_dirty += 1
                if n_bk[lm] == bk_t.shape[1]:
                    room[R_BOOK] = n_bk[lm] + 1
                    return NEED_ROOM
                bk_t[lm, n_bk[lm]] = t
                bk_w[lm, n_bk[lm]] = w
                n_bk[lm] += 1
            # ---- _flush: one launch request per LM and batch_size mappings, LMs in the order first booked ----
            for di in range(n_dirty):
                lm = dirty[di]
                nb = n_bk[lm]
                for lo2 in range(0, nb, batch_size):
                    hi2 = min(lo2 + batch_size, nb)
                    cnt = hi2 - lo2
                    req_seq[g] += 1
                    req = req_seq[g]
                    if req >= rq_first.shape[1]:
                        room[R_REQUESTS] = req + 1
                        return NEED_ROOM
                    if n_rs + cnt > rs_w.shape[0]:
                        room[R_STORE] = n_rs + cnt
                        return NEED_ROOM
                    rq_first[g, req] = n_rs
                    rq_cnt[g, req] = cnt
                    rq_next[g, req] = 0
                    if ua_head[g, lm] == 0:
                        ua_head[g, lm] = req
                    else:
                        rq_next[g, ua_tail[g, lm]] = req
                    ua_tail[g, lm] = req
                    if n_comm + cnt > comm_ids.shape[0]:
                        room[R_COMM] = n_comm + cnt
                        return NEED_ROOM
                    if n_dec + cnt > dec_ids.shape[0]:
                        room[R_DEC] = n_dec + cnt
                        return NEED_ROOM
                    p0 = n_rs
                    for x in range(lo2, hi2):
                        rs_w[n_rs] = bk_w[lm, x]
                        rs_t[n_rs] = bk_t[lm, x]
                        n_rs += 1
                        comm_ids[n_comm] = bk_t[lm, x]
                        comm_d[n_comm] = d_gl
                        n_comm += 1
                        dec_ids[n_dec] = bk_t[lm, x]
                        dec_t[n_dec] = now
                        n_dec += 1
                    counts[C_LAUNCH_REQ] += 1
                    if n_mfree == 0 and n_msg >= qi.shape[0]:
                        room[R_EVENTS] = n_msg + 1
                        return NEED_ROOM
                    hn, n_mfree, n_msg, seq = _post(
                        ht,
                        qi,
                        hn,
                        n_mfree,
                        n_msg,
                        seq,
                        now + d_gl,
                        K_LAUNCH,
                        g,
                        lm,
                        req,
                        p0,
                        cnt,
                        0,
                        0,
                    )
                n_bk[lm] = 0
            n_dirty = 0
            if outstanding <= 0:
                status = OK
                break
    end[0] = now
    counts[C_SKIPPED] = n_skipped
    logs_n[0] = n_dec
    logs_n[1] = n_comm
    logs_n[2] = n_st
    logs_n[3] = n_fin
    logs_n[4] = n_kn
    # the high-water marks of the arrays whose use the caller cannot count (its next runs' capacities)
    room[R_EVENTS] = n_msg
    room[R_PAYLOAD] = max(pl_max, n_pl)
    room[R_NODES] = n_nd
    room[R_GROUPS] = n_grp
    room[R_STORE] = n_rs
    room[R_LOG] = lm_seq.max() + 1
    room[R_REQUESTS] = req_seq.max() + 1
    return status


# numba cache stamp: megha.schedulers.common._ledger_kernels=2ca82caf9a23
# numba cache stamp: megha.schedulers.megha._kernels=660b87b18083
