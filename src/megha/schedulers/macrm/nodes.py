"""MACRM node managers (thesis Fig. 3.3, §3.1.5): one component models the node managers of one tracker's nodes.

Every node keeps its own state and follows the per-node rules exactly:

* **Sampling** (Fig. 3.3): a node answers a ``_ResourceSamplingInquiry`` only if it is not waiting for a
  heartbeat reply, has no pending sampling service, and has free resources for the request; answering makes the
  sampling *pending* until the job manager's allocation request or cancel arrives, or the node's response timeout
  (``hold_timeout``) fires. A heartbeat due while a sampling is pending is *missed* and sent as soon as the
  sampling resolves. A node ignores inquiries while it waits for its heartbeat's reply (the reply may carry an
  allocation from the arbitrator); a reply that never comes (tracker or arbitrator down) stops blocking the node
  after ``hb_reply_timeout``. With ``hb_blocks_sampling=False`` that last rule is off: the thesis's Sparrow has no
  heartbeats at all ("it does not monitor cluster nodes", §4.2.3), so nothing makes its nodes ignore a sampling;
  our heartbeats then only feed the trackers' liveness view and statistics (no allocation travels in them).
* **Heartbeats**: periodic, every ``heartbeat`` seconds (random phase per node). In centralized mode they are
  hybrid: a container exit triggers an immediate heartbeat (the periodic timer restarts), and a node with no free
  resources at its periodic tick skips it once and re-checks after half an interval, then sends.
* **Containers**: task and job-manager containers start only if they fit the node (allocatable capacity =
  ``capacity``; ``background`` is load held by processes outside the scheduler, reported in heartbeats as used).
  What does not fit is rejected back to its sender, so a stale view never over-commits a node; what each node holds
  is kept in the shared :class:`~megha.schedulers.common.ledger.WorkerLedger` (resource mode with list rows), whose
  over-commit check (tolerance 1e-7) raises its one :class:`~megha.errors.SimulationError` if a node ever holds
  more than its capacity.
* **Failures**: a task may fail mid-run (``task_failure_prob``, or injected); the node manager reports it to the job
  manager. A crashed node drops everything: its tasks' runs are recorded as lost (a fault), its job managers are
  terminated, and it answers nothing (the trackers detect it by missing heartbeats).
* **Job-manager recovery**: containers are fenced by job attempt; a restarted job manager *adopts* the job's
  running tasks and learns which already finished (kept per job until the job is complete).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from heapq import heappush
from typing import Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.ledger import WorkerLedger
from megha.schedulers.common.messages import Finished
from megha.schedulers.macrm.cadence import Cadence, FreeWheel
from megha.schedulers.macrm.messages import (
    Adopt,
    Allocate,
    AllocRejected,
    Containers,
    Forget,
    ForwardedHeartbeat,
    Heartbeat,
    HeartbeatReply,
    JMExit,
    JobState,
    LaunchRejected,
    ModeChange,
    NodeCrash,
    SampleDecision,
    SampleInquiry,
    SampleReply,
    SpawnJM,
    TaskCrash,
    TaskFailed,
    Terminate,
    select_containers,
)
from megha.schedulers.macrm.rows import OVER, row_ops
from megha.schedulers.macrm.state import (
    C_RANK,
    DELIVER_FREE,
    E_CANCEL_NEWS,
    E_HB_TIMER,
    F_ANCHOR,
    F_COLS,
    F_FWD_TICK,
    F_MEMO_T,
    F_VWAIT,
    F_WAIT_SINCE,
    FALLBACK,
    G_NEED,
    G_OUT,
    K_ARB_SEQ,
    K_DORMANT,
    K_FWD_COUNT,
    K_HALVED,
    K_LIGHT,
    K_MEMO_K,
    K_MISSED,
    K_NEWS,
    K_PENDING,
    K_RANK,
    K_WAITING,
    N_FULL,
    N_PENDING,
    N_TIMEOUTS,
    N_WAITING,
    NM_F_COLS,
    NM_F_INIT,
    NM_K_COLS,
    NM_K_INIT,
    Q_ANSWERED,
    S_DEAD,
    S_OVER,
    S_REJECT,
    WAKE_PUSH,
    WAKE_QUIET,
    NodeState,
)
from megha.sim.component import Component, TimerQueue, timer_queue_of

_EPS = 1e-9
S_LOST = S_DEAD | S_REJECT  # k_container_start: the container does not start


class NodeManagers(Component):
    """The node managers of nodes ``lo .. lo + n - 1`` (one tracker's share of the cluster)."""

    kind = "macrm-nm"
    crash_kind = None  # fault schedules crash nodes one by one as MACRM does ('node', faults.py)

    def __init__(
        self,
        address: str,
        group: int,
        lo: int,
        capacity: np.ndarray,
        background: np.ndarray,
        recorder: TaskRecorder,
        tracker: str,
        arbitrator: str,
        runtime: str,
        heartbeat: float = 1.0,
        hold_timeout: float = 0.012,
        hb_reply_timeout: float = 0.1,
        min_alloc: np.ndarray | None = None,
        task_failure_prob: float = 0.0,
        central: bool = False,
        track_users: bool = True,
        hb_blocks_sampling: bool = True,
    ) -> None:
        super().__init__(address)
        cap = np.asarray(capacity, dtype=np.float64)
        bg = np.asarray(background, dtype=np.float64)
        if cap.ndim != 2 or bg.shape != cap.shape:
            raise ValueError(f"{address}: capacity and background must be [n, R] arrays of the same shape")
        if heartbeat <= 0 or hold_timeout <= 0 or hb_reply_timeout <= 0:
            raise ValueError(f"{address}: heartbeat and timeouts must be > 0")
        self.group = group
        self.lo = int(lo)
        self.n = int(cap.shape[0])
        self.cap = cap  # allocatable
        self.bg = bg  # held outside the scheduler (initial load)
        self.phys = cap + bg  # physical capacity (load = (bg + used) / phys)
        # what each node holds: the shared worker ledger (resource mode, per-node rows as lists of floats: the same
        # IEEE additions as numpy rows without numpy's per-call cost; rows.py's tolerance and clipped release)
        self.ledger = WorkerLedger(
            address, self.n, cap, first=self.lo, row_lists=True, over_eps=OVER, clip_release=True
        )
        self.capl: list[list[float]] = self.ledger.cap_rows  # (the ledger's rows, bound here for the hot paths)
        self.used: list[list[float]] = self.ledger.used
        self.bgl: list[list[float]] = bg.tolist()
        self.ops = row_ops(cap.shape[1])  # row arithmetic (rows.py: unrolled for two resources)
        self.rec = recorder
        self.tracker = tracker
        self.arbitrator = arbitrator
        self.runtime = runtime
        self.hb = float(heartbeat)
        self.hold_timeout = float(hold_timeout)
        self.hb_reply_timeout = float(hb_reply_timeout)
        self.min_alloc = np.zeros(cap.shape[1]) if min_alloc is None else np.asarray(min_alloc, dtype=np.float64)
        self.fail_p = float(task_failure_prob)
        self.central = central
        self.track_users = track_users
        self.hb_blocks = hb_blocks_sampling
        n = self.n
        self.alive = [True] * n
        self._down = 0  # nodes crashed (the compiled inquiry handler covers groups without any)
        self.pending: list[tuple | None] = [None] * n  # token of the pending sampling service
        # its response-timeout timer: shared by the nodes that answered one inquiry, [handle, nodes still holding]
        self.hold: list[list | None] = [None] * n
        self.hb_timer: list[int | None] = [None] * n
        self.users: list[dict[int, np.ndarray]] = [{} for _ in range(n)]  # per-user usage of each node
        # task -> [local node, end, owner, job, attempt, user, demand, fails]
        # (a node's and a job's running tasks are looked up from it when needed: tasks_on, on faults only)
        self.containers: dict[int, list] = {}
        self.finished_by_job: dict[int, list[int]] = {}
        self.job_attempt: dict[int, int] = {}
        self.jm_containers: dict[tuple[int, int], tuple[int, np.ndarray, str, int]] = {}
        self._ends: dict[float, list[int]] = {}
        # per-event outputs
        self._hb_out: list[int] = []
        self._hb_set: set[int] = set()
        # fast-forward (cadence.py): a dormant node's heartbeats are virtual from ``anchor`` on, every ``hb``
        self.cad: Cadence | None = None
        self._to_sleep: set[int] = set()  # heartbeats of this event after which the node may fall dormant
        # nodes a sampling inquiry woke whose heartbeat content has not changed since: node -> its next (real) tick
        self._clean: dict[int, float] = {}
        self._vr: list[list[float]] = [[] for _ in range(n)]  # when the tracker's (virtual) replies arrive
        self._news_ok = False  # news heartbeats in use (fast-forward, no per-user usage in heartbeats)
        self._tq: TimerQueue | None = None
        self._routes: dict | None = None  # the port's route cache (SimHooks.routes), once the run starts
        self._need = (self.min_alloc - _EPS).tolist()
        self.wheel: FreeWheel | Any = None  # (a PackedWheel once the deployment's state is shared, Cadence.use_state)
        self.pywheel = True  # the free wheel is a FreeWheel (sets), kept here; else the kernels keep it
        self._hb_cell: list | None = None  # the engine's count cell of Heartbeat messages
        # the per-node scalars live in packed arrays (state.py), read and written here through memoryviews
        self._rows: tuple[np.ndarray, np.ndarray] | None = None
        self.bind_state(NodeState(n, cap.shape[1], 1, 1), 0)
        # the compiled handlers where they cover a call (on once the deployment's state is shared: Cadence.use_state)
        self.kernels = False
        self._rep_cell: list | None = None  # ... and of HeartbeatReply messages
        self._next_tick = 0.0  # the real heartbeat tick the last _wake set
        self.stats: dict[str, int] = {
            "heartbeats": 0,
            "heartbeats_event": 0,
            "heartbeats_missed": 0,
            "heartbeats_halved": 0,
            "hb_reply_timeouts": 0,
            "inquiries": 0,
            "answered": 0,
            "ignored_pending": 0,
            "ignored_waiting": 0,
            "ignored_full": 0,
            "hold_timeouts": 0,
            "launched": 0,
            "rejected_jm": 0,
            "rejected_arbitrator": 0,
            "task_failures": 0,
            "tasks_lost_on_nodes": 0,
            "nodes_crashed": 0,
            "jms_started": 0,
        }

    def bind_state(self, st: NodeState, x0: int) -> None:
        """Keep this group's per-node scalars in rows ``x0 .. x0 + n - 1`` of ``st`` (the packed arrays the compiled
        handlers work on; their current values move there), read and written here through memoryviews:

        * ``waiting``: heartbeats sent whose reply has not come; ``wait_since``: since when;
        * ``missed``, ``halved``: a heartbeat was missed (sampling pending), skipped (full node; 0/1);
        * ``arb_seq``: the last arbitrator allocation number received;
        * fast-forward (cadence.py): ``dormant`` (0/1; a dormant node's heartbeats are virtual from ``anchor`` on,
          every ``hb``), ``light`` (0/1; dormant while a sampling it answered is pending, _stays_dormant),
          ``memo_k``, ``memo_t`` (k and tick k of the last tick looked up), ``rank`` (the order in which dormant
          spells began: ties between virtual heartbeats), ``vwait`` (the tracker's reply to a virtual heartbeat
          arrives then), ``fwd_tick`` (a virtual heartbeat the tracker forwarded whose reply is to come; NaN: none),
          ``fwd_count`` (virtual heartbeats of the dormant spell the tracker forwarded), ``news`` (a dormant node
          whose next heartbeat, at ``anchor``, carries news: the handle of its delivery, _news_at; -1: none)."""
        n = self.n
        f = st.f[x0 : x0 + n]
        k = st.k[x0 : x0 + n]
        if self._rows is None:
            f[:, NM_F_COLS] = NM_F_INIT
            k[:, NM_K_COLS] = NM_K_INIT
        else:
            f[:, NM_F_COLS] = self._rows[0][:, NM_F_COLS]
            k[:, NM_K_COLS] = self._rows[1][:, NM_K_COLS]
        self._rows = (f, k)
        self.state = st
        self.x0 = x0
        n_res = st.n_res
        cap0 = F_COLS
        f[:, cap0 : cap0 + n_res] = self.cap
        f[:, cap0 + n_res : cap0 + 2 * n_res] = self.bg
        us0 = cap0 + 2 * n_res
        f[:, us0 : us0 + n_res] = np.array(self.used, dtype=np.float64).reshape(n, n_res)
        # the ledger's used rows mirrored (_mirror) for the compiled handlers, one memoryview per resource
        self._uf = [memoryview(f[:, us0 + r]) for r in range(n_res)]
        self._uf2 = n_res == 2  # (the hot paths read two resources' columns without a loop)
        self._gv = memoryview(st.g)  # (k_container_end's input: the demand at G_DEM)
        self._dem0 = G_NEED + 3 * n_res
        self.anchor = memoryview(f[:, F_ANCHOR])
        self.memo_t = memoryview(f[:, F_MEMO_T])
        self.fwd_tick = memoryview(f[:, F_FWD_TICK])
        self.vwait = memoryview(f[:, F_VWAIT])
        self.wait_since = memoryview(f[:, F_WAIT_SINCE])
        self.memo_k = memoryview(k[:, K_MEMO_K])
        self.rank = memoryview(k[:, K_RANK])
        self.fwd_count = memoryview(k[:, K_FWD_COUNT])
        self.waiting = memoryview(k[:, K_WAITING])
        self.news = memoryview(k[:, K_NEWS])
        self.arb_seq = memoryview(k[:, K_ARB_SEQ])
        self.halved = memoryview(k[:, K_HALVED])
        self.missed = memoryview(k[:, K_MISSED])
        self.dormant = memoryview(k[:, K_DORMANT])
        self.light = memoryview(k[:, K_LIGHT])
        # whether a sampling is pending (0) or not (-1), for the compiled inquiry handler (the tokens stay in pending)
        self._pend = memoryview(k[:, K_PENDING])
        for i, p in enumerate(self.pending):
            self._pend[i] = -1 if p is None else 0

    def _mirror(self, i: int) -> None:
        """Node ``i``'s ledger row changed: copy it to the packed state (the compiled handlers read it there)."""
        row = self.used[i]
        for col, v in zip(self._uf, row, strict=True):
            col[i] = v

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def on_start(self, now: float) -> None:
        self._routes = getattr(self.port, "routes", None)
        phases = self.port.rng.random(self.n) * self.hb
        for i in range(self.n):
            self.hb_timer[i] = self.port.set_timer(float(phases[i]), ("hb", i))

    def on_message(self, msg: Any, now: float) -> None:
        tp = type(msg)
        if tp is SampleInquiry:
            self._inquiry(msg, now)
        elif tp is SampleDecision:
            self._decision(msg, now)
        elif tp is HeartbeatReply:
            self._hb_reply(msg, now)
        elif tp is Allocate:
            self._start(msg.containers, now, from_arbitrator=True)
        elif tp is JMExit:
            self._jm_exit(msg.job, msg.attempt, now)
        elif tp is Adopt:
            self._adopt(msg)
        elif tp is Forget:
            self.finished_by_job.pop(msg.job, None)
            self.job_attempt.pop(msg.job, None)
        elif tp is ModeChange:
            if msg.central and not self.central:
                self.wake_all(now)  # centralized heartbeats are hybrid: no dormant nodes
            self.central = msg.central
        elif tp is NodeCrash:
            self._crash(msg.nodes, now)
        elif tp is TaskCrash:
            self._fail_now(msg.tasks, now)
        else:
            super().on_message(msg, now)
        self._flush(now)

    def on_timer(self, key: Hashable, now: float) -> None:
        kind = key[0]
        if kind == "hb":
            i = key[1]
            cad = self.cad
            if (
                cad is not None
                and not cad.eager
                and not self.central
                and self.alive[i]
                and self.pending[i] is None
                and not self._hb_out
            ):
                self._hb_sleep(i, now)
                return
        if kind == "end":
            self._ends_at(key[1], now)
        elif kind == "hb":
            self._hb_tick(key[1], now)
        elif kind == "hold":
            self._holds_expired(key[1], key[2], key[3], now)
            return  # flushed after each node
        self._flush(now)

    # --- sampling (Fig. 3.3) -----------------------------------------------------------------------------------
    def replies_due(self, nodes: list[int], at: float) -> None:
        """Fast-forward: the tracker answered these nodes' heartbeats; the replies (which only end the nodes' wait)
        arrive at ``at`` and are applied when the wait is next looked at (cadence.py)."""
        vr = self._vr
        lo = self.lo
        for node in nodes:
            vr[node - lo].append(at)

    def _replies_in(self, i: int, now: float) -> None:
        """Apply the tracker's virtual replies to node ``i`` that arrived by ``now``."""
        vr = self._vr[i]
        while vr and vr[0] <= now:
            del vr[0]
            if self.waiting[i]:
                self.waiting[i] -= 1

    def _waiting(self, i: int, now: float) -> bool:
        if self._vr[i]:
            self._replies_in(i, now)
        if self.dormant[i] and self.anchor[i] <= now:
            tv = self._last_tick(i, now)[1]
            if self.fwd_tick[i] == tv:
                return True  # forwarded: the arbitrator's reply is to come
            cad = self.cad
            if now < tv + cad.d_nt + cad.d_tn:
                return True  # the tracker's reply to the latest virtual heartbeat is to come
        elif now < self.vwait[i]:
            return True
        if self.waiting[i] and now - self.wait_since[i] > self.hb_reply_timeout:
            self.waiting[i] = 0  # the reply is lost (tracker or arbitrator down): stop waiting for it
            self.stats["hb_reply_timeouts"] += 1
        return self.waiting[i] > 0

    def _inquiry(self, msg: SampleInquiry, now: float) -> None:
        st = self.stats
        lo = self.lo
        answered: list[int] = []
        idx = [node - lo for node in msg.nodes]
        st["inquiries"] += len(idx)
        # one response-timeout timer for every node answering this inquiry: the per-node timers would all fire at
        # the same instant, one after the other (nothing else is scheduled for that instant in between)
        batch: list | None = None
        # the compiled handler (state.k_inquiry) where it covers the message: heartbeats block sampling, no per-user
        # usage, no crashed node, fast-forward on, forwarding off and nothing armed at the tracker; it answers the
        # nodes in order up to the first it does not cover, and this loop takes the rest
        if self.kernels and self.hb_blocks and not self.track_users and not self._down:
            cad = self.cad
            tr = cad.trackers[self.group]
            if not (cad.eager or tr.forward or tr._vf is not None):
                done, batch = self._inquiry_k(msg, idx, answered, tr, now)
                if done:
                    idx = idx[done:]
        if idx:  # nodes the compiled handler did not take (or all of them, without it)
            batch = self._inquiry_py(msg, idx, answered, batch, now)
        if answered:
            st["answered"] += len(answered)
            # the answering nodes' free rows, capacity minus the ledger's rows, from their packed copies (_mirror)
            f = self.state.f
            xs = np.array(answered, dtype=np.int64)
            xs += self.x0
            n_res = self.state.n_res
            free = f[xs, F_COLS : F_COLS + n_res] - f[xs, F_COLS + 2 * n_res : F_COLS + 3 * n_res]
            self.port.send(msg.jm, SampleReply(msg.token, [lo + i for i in answered], free, self.phys[answered]))

    def _inquiry_py(
        self, msg: SampleInquiry, idx: list[int], answered: list[int], batch: list | None, now: float
    ) -> list | None:
        """:meth:`_inquiry` in Python on local nodes ``idx`` in order (the nodes the compiled handler did not take, or
        all of them without it): each node that is up, not waiting for a heartbeat reply, not holding another
        inquiry's answer and with room for ``msg.need`` is woken if dormant, held for ``msg.token`` and appended to
        ``answered``. Returns the shared response-timeout batch (made here if ``batch`` is None and a node answers)."""
        st = self.stats
        token = msg.token
        need = (msg.need - _EPS).tolist()
        capl = self.capl
        used = self.used
        alive, pending, dormant = self.alive, self.pending, self.dormant
        hb_blocks, track_users = self.hb_blocks, self.track_users
        hold = self.hold
        room_min = self.ops.room_min
        for i in idx:
            if not alive[i]:
                continue
            if hb_blocks and self._waiting(i, now):
                st["ignored_waiting"] += 1
                continue
            if pending[i] is not None:
                st["ignored_pending"] += 1
                continue
            if not room_min(capl[i], used[i], need):
                st["ignored_full"] += 1
                continue
            if dormant[i]:
                stays = not track_users and self._stays_dormant(i, now)
                if not stays:
                    was_news = self.news[i] >= 0
                    self._wake(i, now)
                    if not track_users and not was_news:  # (a real heartbeat re-adds per-user usage: rounding)
                        self._clean[i] = self._next_tick
            pending[i] = token
            self._pend[i] = 0
            if batch is None:
                batch = [0, 0]
                batch[0] = self.port.set_timer(self.hold_timeout, ("hold", token, answered, batch))
            batch[1] += 1
            hold[i] = batch
            answered.append(i)
        return batch

    def _inquiry_k(self, msg: SampleInquiry, idx: list[int], answered: list[int], tr: Any, now: float) -> tuple:
        """:meth:`_inquiry` through the compiled handler (state.k_inquiry) on local nodes ``idx`` in order, up to the
        first node it does not cover: the events it asks for (a woken node's news delivery cancelled and its real
        heartbeat timer, the shared response timeout) are made here in order, the answering nodes appended to
        ``answered``. Returns ``(nodes done, the response-timeout batch or None)``."""
        vr = self._vr
        for i in idx:
            if vr[i]:  # (the kernel's first step for each node; virtual replies stay in Python)
                self._replies_in(i, now)
        n = len(idx)
        off = self.x0 - self.lo
        xs = np.array(msg.nodes, dtype=np.int64)
        if off:
            xs += off
        out = np.empty(n, dtype=np.int64)
        cnt = np.zeros(6, dtype=np.int64)
        ev = np.empty((2 * n + 1, 3))
        r = self.state.inquiry(*self.state.kargs, xs, msg.need - _EPS, 0, now, out, cnt, ev)
        done = n if r >= 0 else -r - 1
        c = cnt.tolist()
        st = self.stats
        if c[N_WAITING]:
            st["ignored_waiting"] += c[N_WAITING]
        if c[N_PENDING]:
            st["ignored_pending"] += c[N_PENDING]
        if c[N_FULL]:
            st["ignored_full"] += c[N_FULL]
        if c[N_TIMEOUTS]:
            st["hb_reply_timeouts"] += c[N_TIMEOUTS]
        batch = None
        n_ev = c[5]
        if n_ev:
            port = self.port  # (the kernel counted the woken nodes' virtual heartbeats: Cadence.fold_counts)
            wheel = self.wheel
            pywheel = self.pywheel
            hb_timer = self.hb_timer
            clean = self._clean
            token = msg.token
            cancelled = -1
            for kind, pos, t in ev[:n_ev].tolist():
                p = int(pos)
                i = idx[p]
                if kind == E_HB_TIMER:  # (after the cancel of the same node's news delivery, if any)
                    if pywheel:  # (else the kernel removed it from the packed wheel)
                        wheel.discard(i)
                    self._next_tick = t
                    hb_timer[i] = port.set_timer_at(t, ("hb", i))
                    if cancelled != p:  # not woken with news: its heartbeat content is clean (_inquiry)
                        clean[i] = t
                elif kind == E_CANCEL_NEWS:
                    port.cancel_timer(int(t))
                    cancelled = p
                else:  # E_HOLD_TIMER (at the first answer)
                    batch = [0, 0]
                    batch[0] = port.set_timer(self.hold_timeout, ("hold", token, answered, batch))
        if batch is not None:
            pending, hold = self.pending, self.hold
            token = msg.token
            for p in np.flatnonzero(out[:done] == Q_ANSWERED).tolist():
                i = idx[p]
                pending[i] = token
                hold[i] = batch
                answered.append(i)
            batch[1] = len(answered)
        return done, batch

    def _stays_dormant(self, i: int, now: float) -> bool:
        """Dormant node ``i`` answers a sampling inquiry: may it stay dormant while the sampling is pending (a *light*
        node) instead of waking and, if the sampling leaves it unchanged, falling dormant again (:meth:`_resleep`)?

        Yes when that round trip would change nothing but the order of its timers: its next tick comes after the
        response timeout (so no heartbeat is missed meanwhile), its latest virtual heartbeat has reached the tracker
        and was not forwarded (the wake would deliver or await nothing). A light node that the sampling changes
        (a container starts, ends or is refused on it) wakes then, with the same counts and tick as at the inquiry;
        released unchanged, it begins a new dormant spell (rank) as :meth:`_resleep` does (:meth:`_release_sampling`).
        """
        cad = self.cad
        if cad.eager or self.fwd_tick[i] == self.fwd_tick[i]:
            return False
        a = self.anchor[i]
        if a > now:
            nxt = a
        else:
            k0 = self.memo_k[i]  # _last_tick(i, now)
            t0 = self.memo_t[i]
            if t0 > now:
                k0, t0 = 0, a
            j, tv = cad.hb.last_le(t0, now)
            self.memo_k[i] = k0 + j
            self.memo_t[i] = tv
            if tv + cad.d_nt > now:
                return False
            nxt = tv + self.hb
        if not nxt > now + 2 * self.hold_timeout:
            return False
        self.light[i] = True
        return True

    def _release_sampling(self, nodes: Iterable[int], token: tuple, now: float) -> None:
        """The sampling ``token`` ends on each of ``nodes`` (local indices, in order) that it is still pending on."""
        pending, hold, light, pend = self.pending, self.hold, self.light, self._pend
        for i in nodes:
            p = pending[i]
            if p is None or p != token:
                continue
            pending[i] = None
            pend[i] = -1
            h = hold[i]
            if h is not None:  # self._unhold(i, h), inlined
                hold[i] = None
                h[1] -= 1
                if not h[1]:
                    self.port.cancel_timer(h[0])
            if light[i]:  # released unchanged while dormant: a new dormant spell (_resleep), same ticks and chain
                light[i] = False
                cad = self.cad
                if cad.eager or self.central or not self.alive[i] or self.missed[i]:
                    self._wake(i, now)  # (not reached: faults and the switch to centralized mode wake light nodes)
                    continue
                cv = cad.cv
                cv[C_RANK] += 1
                self.rank[i] = cv[C_RANK]
                if self.wheel.has(i):
                    tr = cad.trackers[self.group]
                    if tr.forward or tr._vf is not None:  # tr.vf_changed(now): nothing to do otherwise
                        tr.vf_added(i, now)
                continue
            if self.missed[i] and self.alive[i]:
                self._send_hb(i, now)
            elif self._clean:
                tick = self._clean.pop(i, None)
                if tick is not None and tick > now:
                    self._resleep(i, tick, now)

    def _resleep(self, i: int, tick: float, now: float) -> None:
        """Node ``i`` answered a sampling that left it unchanged: its heartbeat at ``tick`` (the real timer a sampling
        inquiry woke it to) would carry nothing new, so it is dormant again from that tick on, as if its heartbeat
        there had been virtual (cadence.py): same ticks, same tracker view, same counts."""
        cad = self.cad
        if cad.eager or self.central or not self.alive[i] or self.pending[i] is not None or self.missed[i]:
            return
        h = self.hb_timer[i]
        if h is None:
            return
        self.port.cancel_timer(h)
        self.hb_timer[i] = None
        self.dormant[i] = True
        self.anchor[i] = tick
        self.memo_k[i] = 0
        self.memo_t[i] = tick
        cv = cad.cv
        cv[C_RANK] += 1
        self.rank[i] = cv[C_RANK]
        self.fwd_tick[i] = math.nan
        self.fwd_count[i] = 0
        if self._has_free(i):
            self.wheel.add(i, tick)
            cad.trackers[self.group].vf_added(i, now)

    def _decision(self, msg: SampleDecision, now: float) -> None:
        c = msg.containers
        if len(c):
            self._start(c, now, from_arbitrator=False)
        lo = self.lo
        self._release_sampling([node - lo for node in c.nodes], msg.token, now)
        if len(msg.cancel):
            self._release_sampling([node - lo for node in msg.cancel], msg.token, now)

    def _unhold(self, i: int, batch: list) -> None:
        """Node ``i`` no longer waits for its response timeout (``batch``); the timer goes when no node does."""
        self.hold[i] = None
        batch[1] -= 1
        if not batch[1]:
            self.port.cancel_timer(batch[0])

    def _holds_expired(self, token: tuple, nodes: list[int], batch: list, now: float) -> None:
        """The response timeout of the nodes that answered one inquiry: each node still holding for it, in the order
        they answered, as its own timer would have (output flushed after each)."""
        hold = self.hold
        pending = self.pending
        for i in nodes:
            if hold[i] is not batch:
                continue  # released meanwhile (its own timer would have been cancelled)
            hold[i] = None
            if pending[i] is None or pending[i] != token:
                continue
            self.stats["hold_timeouts"] += 1
            self._release_sampling((i,), token, now)
            self._flush(now)

    # --- heartbeats --------------------------------------------------------------------------------------------
    def _has_free(self, i: int) -> bool:
        """Node ``i`` has room for the smallest allocation and some resource free."""
        ops = self.ops
        return ops.has_free(ops.diff(self.capl[i], self.used[i]), self._need)

    def _hb_tick(self, i: int, now: float) -> None:
        self.hb_timer[i] = None
        if self._clean:
            self._clean.pop(i, None)
        if not self.alive[i]:
            return
        if self.central and not self.halved[i] and not self._has_free(i):
            self.halved[i] = True  # full node: skip this heartbeat, look again after half an interval
            self.stats["heartbeats_halved"] += 1
            self.hb_timer[i] = self.port.set_timer(self.hb / 2, ("hb", i))
            return
        self.halved[i] = False
        if self.pending[i] is not None:
            self.missed[i] = True
            self.stats["heartbeats_missed"] += 1
            return
        self._send_hb(i, now)

    def _hb_sleep(self, i: int, now: float) -> None:
        """:meth:`_hb_tick`, :meth:`_send_hb` and :meth:`_flush` of a periodic heartbeat in distributed mode with
        fast-forward (the common case), step for step: the node sends its heartbeat and falls dormant."""
        self.hb_timer[i] = None
        if self._clean:
            self._clean.pop(i, None)
        self.halved[i] = False
        self.missed[i] = False
        self.waiting[i] += 1
        self.wait_since[i] = now
        self.stats["heartbeats"] += 1
        free, row, has_free = self.ops.beat(self.capl[i], self.bgl[i], self.used[i], self._need)
        route = self.port.route(self.tracker, "on_message_hb1", Heartbeat) if not self.track_users else False
        if route:  # the tracker's handler of one node's heartbeat, without the message object (same event)
            append, handler, d, seq, cell, _ = route
            append(
                (
                    now + d,
                    seq(),
                    handler,
                    (self.lo + i, free, row, self.arb_seq[i], None),
                )
            )
            cell[0] += 1
        else:
            self.port.send(self.tracker, self._heartbeat_of(i))
        # _fall_asleep(i, now): the node is alive, not pending, in distributed mode with fast-forward (on_timer)
        cad = self.cad
        a = now + self.hb
        self.dormant[i] = True
        self.anchor[i] = a
        self.memo_k[i] = 0
        self.memo_t[i] = a
        cv = cad.cv
        cv[C_RANK] += 1
        self.rank[i] = cv[C_RANK]
        self.fwd_tick[i] = math.nan
        self.fwd_count[i] = 0
        if has_free:  # _has_free(i)
            self.wheel.add(i, a)
            tr = cad.trackers[self.group]
            if tr.forward or tr._vf is not None:  # tr.vf_changed(now): nothing to do otherwise
                tr.vf_added(i, now)

    def _send_hb(self, i: int, now: float) -> None:
        if i in self._hb_set:
            return
        if self._clean:
            self._clean.pop(i, None)
        h = self.hb_timer[i]
        if h is not None:
            self.port.cancel_timer(h)
        self.missed[i] = False
        self.halved[i] = False
        self.waiting[i] += 1
        self.wait_since[i] = now
        if self.cad is not None and not self.cad.eager and not self.central:
            self.hb_timer[i] = None  # decided when the heartbeat leaves (_flush)
            self._to_sleep.add(i)
        else:
            self.hb_timer[i] = self.port.set_timer(self.hb, ("hb", i))
        self._hb_out.append(i)
        self._hb_set.add(i)

    def _container_exit(self, i: int, now: float) -> None:
        """Event-driven heartbeat in centralized mode (thesis §3.1.5)."""
        if not self.central or not self.alive[i]:
            return
        if self.pending[i] is not None:
            self.missed[i] = True
            return
        if i not in self._hb_set:
            self.stats["heartbeats_event"] += 1
        self._send_hb(i, now)

    def _hb_reply(self, msg: HeartbeatReply, now: float) -> None:
        lo = self.lo
        for node in msg.nodes:
            i = node - lo
            if self._vr[i]:
                self._replies_in(i, now)
            if self.waiting[i]:
                self.waiting[i] -= 1
            elif self.fwd_tick[i] == self.fwd_tick[i]:  # (NaN: none)
                self.fwd_tick[i] = math.nan
        if msg.containers is not None and len(msg.containers):
            self._start(msg.containers, now, from_arbitrator=True)

    # --- containers --------------------------------------------------------------------------------------------
    def _start(self, c: Containers, now: float, from_arbitrator: bool) -> None:
        lo = self.lo
        rejected: list[int] = []
        st_t: list[int] = []
        st_w: list[int] = []
        rng = self.port.rng
        clean = self._clean
        drows = c.demands.tolist()
        used = self.used
        uf = self._uf
        capl = self.capl
        light, alive, dormant, news, anchor = self.light, self.alive, self.dormant, self.news, self.anchor
        arb_seq = self.arb_seq
        containers, job_attempt, ends = self.containers, self.job_attempt, self._ends
        seqs, tasks, jobs, attempts, owners = c.seqs, c.tasks, c.jobs, c.attempts, c.owners
        track_users = self.track_users
        fail_p = self.fail_p
        ops = self.ops
        place, over = ops.place, ops.over
        tq = self._tq
        if tq is None and self.cad is not None:
            tq = self._tq = timer_queue_of(self.port)
        # the node's side of a container in the compiled handler (state.k_container_start) where it covers it: a live
        # node with no virtual reply due, forwarding off and nothing armed at the tracker, no per-user usage
        tr = self.cad.trackers[self.group] if self.kernels and not track_users else None
        vr = self._vr
        gv, dem0, x0 = self._gv, self._dem0, self.x0
        kargs = self.state.kargs
        kstart = self.state.container_start if tr is not None else None
        uf2 = self._uf2
        if uf2:
            uf0, uf1 = uf
        ends_at = self._ends_at
        if tr is not None:
            pywheel = self.pywheel
            gvo = self.cad.gv
            d_nt = self.cad.d_nt
            if tq is None:
                tq = self._tq = timer_queue_of(self.port)
        for k, node in enumerate(c.nodes):
            i = node - lo
            if clean:
                clean.pop(i, None)
            t = tasks[k]
            job = jobs[k]
            att = attempts[k]
            d = drows[k]
            if tr is not None and alive[i] and not vr[i] and not (tr.forward or tr._vf is not None):
                if uf2:  # (the demand goes in at G_DEM)
                    gv[dem0] = d[0]
                    gv[dem0 + 1] = d[1]
                else:
                    q = dem0
                    for v in d:
                        gv[q] = v
                        q += 1
                fenced = t >= 0 and (job_attempt.get(job, 0) > att or t in containers)
                code = kstart(*kargs, x0 + i, seqs[k], fenced, now)
            else:
                code = FALLBACK
            if code != FALLBACK:
                if code & WAKE_PUSH:  # self._news_pushed(i, tr), inlined
                    if pywheel:
                        self.wheel.discard(i)
                    self._next_tick = nxt = gvo[G_OUT]
                    seq = tq.next_seq()
                    heappush(tq.heap, (nxt + d_nt, seq, self._deliver, i))
                    news[i] = seq
                if code & S_LOST:
                    if code & S_REJECT:
                        rejected.append(k)  # fenced, already running here, or no room
                    continue  # (S_DEAD: lost)
                # the ledger's row (self.ledger.used): the kernel's sums
                used[i] = [uf0[i], uf1[i]] if uf2 else [col[i] for col in uf]
                if code & S_OVER:  # the ledger's check (OVER is its tolerance)
                    self.ledger.over_row(i, now)
            else:
                if light[i]:
                    self._wake(i, now, True)  # a light node the sampling changes (_stays_dormant)
                if not alive[i]:
                    continue  # the message reached a dead machine: lost (the failure detector handles it)
                if seqs[k] > arb_seq[i]:  # an arbitrator allocation (also a sampled job-manager container)
                    if dormant[i]:
                        self._wake(i, now, True)
                    arb_seq[i] = seqs[k]
                if t >= 0 and (job_attempt.get(job, 0) > att or t in containers):
                    rejected.append(k)  # stale job manager attempt (fenced) or already running here
                    continue
                cap = capl[i]
                row = place(cap, used[i], d)
                if row is None:
                    rejected.append(k)
                    continue
                if dormant[i] and (news[i] < 0 or anchor[i] <= now):  # (a news heartbeat to come carries it anyway)
                    self._wake(i, now, True)  # (a heartbeat in flight carries the row before this container)
                used[i] = row  # the ledger's row (self.ledger.used)
                for col, v in zip(uf, row, strict=True):  # self._mirror(i)
                    col[i] = v
                if over(row, cap):  # the ledger's check, inline (OVER is its tolerance)
                    self.ledger.over_row(i, now)
            user = c.users[k]
            if track_users:  # per-user usage is read only for heartbeats that carry it
                uu = self.users[i]
                prev = uu.get(user)
                uu[user] = np.array(d) if prev is None else prev + np.array(d)
            if t < 0:  # a job-manager container
                owner = owners[k]
                self.jm_containers[(job, att)] = (i, d, owner, user)
                self.stats["jms_started"] += 1
                spec, load, central = c.specs[k]
                self.port.send(self.runtime, SpawnJM(owner, spec, att, node, self.group, load, central))
                continue
            dur = c.durations[k]
            end = now + dur
            fails = False
            if fail_p > 0.0 and rng.random() < fail_p:
                fails = True
                end = now + dur * float(rng.random())
            containers[t] = [i, end, owners[k], job, att, user, d, fails]
            lst = ends.get(end)
            if lst is None:
                ends[end] = [t]
                if tq is not None:  # self.port.set_timer(end - now, ("end", end)) with _ends_at as its handler
                    heappush(tq.heap, (now + (end - now), tq.next_seq(), ends_at, end))
                else:
                    self.port.set_timer(end - now, ("end", end))
            else:
                lst.append(t)
            st_t.append(t)
            st_w.append(node)
        if st_t:
            self.stats["launched"] += len(st_t)
            self.rec.started(st_t, now, st_w)
        if rejected:
            if from_arbitrator:
                self.stats["rejected_arbitrator"] += len(rejected)
                sel = select_containers(c, rejected)
                free = np.array([self.free_of(n) for n in sel.nodes])
                self.port.send(self.arbitrator, AllocRejected(sel, free))
            else:
                self.stats["rejected_jm"] += len(rejected)
                by_owner: dict[str, tuple[list, list]] = {}
                jm_rej = [k for k in rejected if c.tasks[k] < 0]  # a sampled job-manager container: the arbitrator's
                if jm_rej:
                    sel = select_containers(c, jm_rej)
                    free = np.array([self.free_of(n) for n in sel.nodes])
                    self.port.send(self.arbitrator, AllocRejected(sel, free))
                for k in rejected:
                    if c.tasks[k] < 0:
                        continue
                    o = by_owner.setdefault(c.owners[k], ([], []))
                    o[0].append(c.tasks[k])
                    o[1].append(c.nodes[k])
                for owner, (ts, ns) in by_owner.items():
                    self.port.send(owner, LaunchRejected(ts, ns))

    def _remove(self, t: int, now: float) -> list:
        e = self.containers.pop(t)
        i = e[0]
        if self._clean:
            self._clean.pop(i, None)
        if self.dormant[i] and (self.news[i] < 0 or self.anchor[i] <= now):
            self._wake(i, now, True)
        d = e[6]
        self.used[i] = self.ops.minus_clip(self.used[i], d)
        self._mirror(i)
        if self.track_users:
            uu = self.users[i]
            left = uu[e[5]] - np.array(d)
            if (left > _EPS).any():
                uu[e[5]] = left
            else:
                del uu[e[5]]
        return e

    def _ends_at(self, key: float, now: float) -> None:
        """The containers ending at ``key`` end (the timer ``("end", key)``; with fast-forward its event calls this
        directly), and the heartbeats they trigger leave."""
        tasks = self._ends.pop(key, ())
        if len(tasks) == 1 and self.cad is not None:  # one task ends (the common case): the loop below, step for step
            t = tasks[0]
            e = self.containers.get(t)
            if e is None or e[1] != key:
                return  # killed, or relaunched with another end
            if not e[7]:
                i = e[0]
                if self.track_users:
                    self._remove(t, now)
                else:  # self._remove(t, now), inlined
                    del self.containers[t]
                    if self._clean:
                        self._clean.pop(i, None)
                    d = e[6]
                    code = FALLBACK
                    if self.kernels and not self.central and not self._vr[i]:
                        # the node's side in the compiled handler (state.k_container_end: a news wake if it needs
                        # one, the packed row) where it covers it: forwarding off and nothing armed at the tracker
                        tr = self.cad.trackers[self.group]
                        if not (tr.forward or tr._vf is not None):
                            gv = self._gv  # (the demand goes in at G_DEM)
                            q = self._dem0
                            if self._uf2:
                                gv[q] = d[0]
                                gv[q + 1] = d[1]
                            else:
                                for v in d:
                                    gv[q] = v
                                    q += 1
                            code = self.state.container_end(*self.state.kargs, self.x0 + i, now)
                            if code == WAKE_PUSH:  # self._news_pushed(i, tr), inlined
                                if self.pywheel:
                                    self.wheel.discard(i)
                                cad = self.cad
                                self._next_tick = nxt = cad.gv[G_OUT]
                                tq = self._tq
                                if tq is None:
                                    tq = self._tq = timer_queue_of(self.port)
                                seq = tq.next_seq()
                                heappush(tq.heap, (nxt + cad.d_nt, seq, self._deliver, i))
                                self.news[i] = seq
                    if code == FALLBACK:
                        if self.dormant[i] and (self.news[i] < 0 or self.anchor[i] <= now):
                            self._wake(i, now, True)
                        self.used[i] = self.ops.minus_clip(self.used[i], d)
                        self._mirror(i)
                    elif self._uf2:  # the kernel updated the packed row (minus_clip's operations): the ledger's row
                        uf0, uf1 = self._uf
                        self.used[i] = [uf0[i], uf1[i]]
                    else:
                        self.used[i] = [col[i] for col in self._uf]
                fl = self.finished_by_job.get(e[3])
                if fl is None:
                    self.finished_by_job[e[3]] = [t]
                else:
                    fl.append(t)
                if self.central:
                    self._container_exit(i, now)
                self.rec.finished_one(t, now)
                owner = e[2]
                route = self._routes.get((owner, "on_message_finished_one")) if self._routes is not None else None
                if route is None:
                    route = self.port.route(owner, "on_message_finished_one", Finished)
                if route:  # the job manager's handler of a Finished message, without the message (same event)
                    append, handler, d, seq, cell, _ = route
                    append((now + d, seq(), handler, t))
                    cell[0] += 1
                else:
                    self.port.send(owner, Finished([t], [self.lo + i]))
                if self._hb_out:
                    self._flush(now)
                return
        done: dict[str, tuple[list, list]] = {}
        failed: dict[str, tuple[list, list]] = {}
        fin: list[int] = []
        failed_ids: list[int] = []
        for t in tasks:
            e = self.containers.get(t)
            if e is None or e[1] != key:
                continue  # killed, or relaunched with another end
            self._remove(t, now)
            i = e[0]
            node = self.lo + i
            if e[7]:
                failed_ids.append(t)
                lst = failed.setdefault(e[2], ([], []))
            else:
                fin.append(t)
                fl = self.finished_by_job.get(e[3])
                if fl is None:
                    self.finished_by_job[e[3]] = [t]
                else:
                    fl.append(t)
                lst = done.setdefault(e[2], ([], []))
            lst[0].append(t)
            lst[1].append(node)
            self._container_exit(i, now)
        if fin:
            self.rec.finished(fin, now)
        if failed_ids:
            self.stats["task_failures"] += len(failed_ids)
            self.rec.preempted(failed_ids, now)
        for owner, (ts, ns) in done.items():
            self.port.send(owner, Finished(ts, ns))
        for owner, (ts, ns) in failed.items():
            self.port.send(owner, TaskFailed(ts, ns))
        if self._hb_out:
            self._flush(now)

    def _fail_now(self, tasks: list[int], now: float) -> None:
        """Injected task failures: the processes die now."""
        failed: dict[str, tuple[list, list]] = {}
        ids: list[int] = []
        for t in tasks:
            e = self.containers.get(t)
            if e is None:
                continue
            self._remove(t, now)
            ids.append(t)
            lst = failed.setdefault(e[2], ([], []))
            lst[0].append(t)
            lst[1].append(self.lo + e[0])
            self._container_exit(e[0], now)
        if ids:
            self.stats["task_failures"] += len(ids)
            self.rec.preempted(ids, now)
        for owner, (ts, ns) in failed.items():
            self.port.send(owner, TaskFailed(ts, ns))

    def _jm_exit(self, job: int, attempt: int, now: float) -> None:
        entry = self.jm_containers.pop((job, attempt), None)
        if entry is None:
            return
        i, d, _, user = entry
        if self._clean:
            self._clean.pop(i, None)
        if self.dormant[i]:
            self._wake(i, now, True)
        self.used[i] = self.ops.minus_clip(self.used[i], d)
        self._mirror(i)
        if self.track_users:
            d = np.array(d)
            uu = self.users[i]
            left = uu.get(user, d) - d
            if (left > _EPS).any():
                uu[user] = left
            else:
                uu.pop(user, None)
        self._container_exit(i, now)

    # --- job-manager recovery ----------------------------------------------------------------------------------
    def _adopt(self, msg: Adopt) -> None:
        if self.job_attempt.get(msg.job, 0) < msg.attempt:
            self.job_attempt[msg.job] = msg.attempt
        running = sorted(t for t, e in self.containers.items() if e[3] == msg.job)
        nodes = []
        for t in running:
            e = self.containers[t]
            e[2] = msg.jm
            e[4] = msg.attempt
            nodes.append(self.lo + e[0])
        self.port.send(
            msg.jm, JobState(self.group, msg.attempt, running, nodes, list(self.finished_by_job.get(msg.job, ())))
        )

    # --- node failures -----------------------------------------------------------------------------------------
    def _crash(self, nodes: list[int], now: float) -> None:
        lost: list[int] = []
        for node in nodes:
            i = node - self.lo
            if not 0 <= i < self.n or not self.alive[i]:
                continue
            self._clean.pop(i, None)
            if self.dormant[i]:
                self._wake(i, now)
            self.alive[i] = False
            self._down += 1
            self.stats["nodes_crashed"] += 1
            h = self.hb_timer[i]
            if h is not None:
                self.port.cancel_timer(h)
            self.hb_timer[i] = None
            if self.hold[i] is not None:
                self._unhold(i, self.hold[i])
            self.pending[i] = None
            self._pend[i] = -1
            for t in self.tasks_on(i):
                self._remove(t, now)
                lost.append(t)
            for key in [k for k, v in self.jm_containers.items() if v[0] == i]:
                _, _, owner, _ = self.jm_containers.pop(key)
                self.port.send(self.runtime, Terminate(owner))
            self.ledger.clear((node,))
            self._mirror(i)
            self.users[i] = {}
        if lost:
            self.stats["tasks_lost_on_nodes"] += len(lost)
            self.rec.lost(lost, now, "node crashed")

    # --- per-event output --------------------------------------------------------------------------------------
    def _flush(self, now: float) -> None:
        out = self._hb_out
        if not out:
            return
        self._hb_out = []
        self._hb_set = set()
        self.stats["heartbeats"] += len(out)
        if len(out) == 1:
            self.port.send(self.tracker, self._heartbeat_of(out[0]))
        else:
            rows = np.array([self.used[i] for i in out])
            free = self.cap[out] - rows
            used = self.bg[out] + rows
            users = [dict(self.users[i]) for i in out] if self.track_users else []
            self.port.send(
                self.tracker,
                Heartbeat(self.group, [self.lo + i for i in out], free, used, [self.arb_seq[i] for i in out], users),
            )
        if self._to_sleep:
            sleep, self._to_sleep = self._to_sleep, set()
            for i in out:
                if i in sleep:
                    self._fall_asleep(i, now)

    def _heartbeat_of(self, i: int) -> Heartbeat:
        """Node ``i``'s heartbeat as it stands (a message of its own)."""
        u = self.used[i]
        free = [self.ops.diff(self.capl[i], u)]
        used = [self.ops.plus(self.bgl[i], u)]
        users = [dict(self.users[i])] if self.track_users else []
        return Heartbeat(self.group, [self.lo + i], free, used, [self.arb_seq[i]], users)

    # --- fast-forward: dormant nodes (cadence.py) ----------------------------------------------------------------
    def use_cadence(self, cad: Cadence) -> None:
        """Fast-forward this group's heartbeats (simulator only, before the run starts)."""
        self.cad = cad
        # buckets of the free wheel: finer with a power-of-two period (its ticks keep their phase exactly, so a bucket
        # holds the nodes it should however long their dormant spells; a finer wheel has fewer candidates per scan)
        exact = math.frexp(cad.hb.h)[0] == 0.5 and cad.hb.h < 16.0
        self.wheel = FreeWheel(cad.hb, min(4096, max(8, 4 * self.n)) if exact else min(1024, max(8, 2 * self.n)))
        self._news_ok = not self.track_users

    def _fall_asleep(self, i: int, now: float) -> None:
        """Node ``i``'s heartbeat just left: its next ones are virtual until something changes (or a real timer)."""
        cad = self.cad
        if cad.eager or self.central or not self.alive[i] or self.pending[i] is not None:
            self.hb_timer[i] = self.port.set_timer(self.hb, ("hb", i))
            return
        a = now + self.hb
        self.dormant[i] = True
        self.anchor[i] = a
        self.memo_k[i] = 0
        self.memo_t[i] = a
        cv = cad.cv  # cad.rank()
        cv[C_RANK] += 1
        self.rank[i] = cv[C_RANK]
        self.fwd_tick[i] = math.nan
        self.fwd_count[i] = 0
        if self._has_free(i):
            self.wheel.add(i, a)
            cad.trackers[self.group].vf_added(i, now)

    def _last_tick(self, i: int, now: float) -> tuple[int, float]:
        """``(k, t_k)``: the last virtual heartbeat of dormant node ``i`` at or before ``now`` (``anchor <= now``)."""
        k0 = self.memo_k[i]
        t0 = self.memo_t[i]
        if t0 > now:
            k0, t0 = 0, self.anchor[i]
        per = self.cad.hb
        fast = per._fast
        if fast is not None and fast[0] <= t0 and now + per.h < fast[1]:  # per.last_le(t0, now), its first case
            delta = fast[2]
            j = int((now - t0) / delta)
            while j > 0 and t0 + j * delta > now:
                j -= 1
            while t0 + (j + 1) * delta <= now:
                j += 1
            t = t0 + j * delta
        else:
            j, t = per.last_le(t0, now)
        self.memo_k[i] = k0 + j
        self.memo_t[i] = t
        return k0 + j, t

    def next_virtual(self, i: int, y: float) -> float:
        """Dormant node ``i``'s first virtual heartbeat after ``y``."""
        a = self.anchor[i]
        if a > y:
            return a
        return self._last_tick(i, y)[1] + self.hb

    def _virtual_tallies(self, i: int, now: float) -> tuple[int, int, float]:
        """For dormant node ``i`` up to ``now``: (virtual heartbeats sent, of those received, last one sent)."""
        a = self.anchor[i]
        if a > now:
            return 0, 0, -math.inf
        k, tv = self._last_tick(i, now)
        arrived = k + 1 if tv + self.cad.d_nt <= now and self.news[i] < 0 else k
        return k + 1, arrived, tv

    def _count_virtual(self, i: int, sent: int, arrived: int) -> None:
        cad = self.cad
        answered = arrived - self.fwd_count[i]  # forwarded ones were real at the tracker
        self.stats["heartbeats"] += sent
        cad.count(Heartbeat, sent)
        tr = cad.trackers[self.group]
        tr.stats["heartbeats"] += answered
        tr.stats["answered"] += answered
        cad.count(HeartbeatReply, answered)

    def _wake(self, i: int, now: float, news: bool = False) -> None:
        """Dormant node ``i`` goes back to real heartbeat timers (its state is about to change, or faults).

        With ``news`` (its content is about to change; distributed mode) its next heartbeat, the one a real timer would
        send, is a *news* heartbeat instead (:meth:`_news_at`): the node stays dormant, and a node whose news heartbeat
        is still to come changes again at no cost (that heartbeat reads its content when it is due).

        A news wake goes through the compiled handler (state.k_wake_news) where it covers it (no virtual reply due,
        forwarding off and nothing armed at the tracker, no virtual heartbeat in flight, ...), else :meth:`_wake_py`;
        the counters, the free wheel and the news delivery's event stay here."""
        if news and self.kernels and not self._vr[i]:
            cad = self.cad
            tr = cad.trackers[self.group]
            if tr.forward or tr._vf is not None:
                self._wake_py(i, now, news)
                return
            code = self.state.wake_news(*self.state.kargs, self.x0 + i, now)
            if code == WAKE_QUIET:
                return
            if code == WAKE_PUSH:
                self._news_pushed(i, tr)
                return
        self._wake_py(i, now, news)

    def _news_pushed(self, i: int, tr: Any) -> None:
        """A compiled handler woke dormant node ``i`` with news (WAKE_PUSH; it counted the virtual heartbeats in the
        packed state, Cadence.fold_counts): the node leaves the free wheel, and its news delivery at tick ``g[G_OUT]``
        is pushed with the engine's next sequence number (tracker ``tr``: its group's)."""
        cad = self.cad
        if self.pywheel:  # (else the kernel removed it from the packed wheel)
            wheel = self.wheel
            b = wheel.where.pop(i, None)
            if b is not None:  # wheel.discard(i)
                wheel.buckets[b].discard(i)
                wheel.size -= 1
        self._next_tick = nxt = cad.gv[G_OUT]
        tq = self._tq
        if tq is None:
            tq = self._tq = timer_queue_of(self.port)
        seq = tq.next_seq()
        heappush(tq.heap, (nxt + cad.d_nt, seq, self._deliver, i))
        self.news[i] = seq

    def _wake_py(self, i: int, now: float, news: bool = False) -> None:
        """:meth:`_wake` in Python."""
        cad = self.cad
        pend = self.news[i]
        if pend >= 0:
            if news and self.anchor[i] > now:
                self.light[i] = False
                return  # its next heartbeat carries the news anyway
            self.port.cancel_timer(pend)  # its tick is past (the heartbeat is in flight) or back to a real timer
            self.news[i] = -1
        news = news and self._news_ok
        self.dormant[i] = False
        self.light[i] = False
        if self._vr[i]:
            self._replies_in(i, now)
        tr = cad.trackers[self.group]
        if self.wheel.discard(i) and (tr.forward or tr._vf is not None):  # tr.vf_changed(now): else nothing to do
            tr.vf_removed(i, now)
        a = self.anchor[i]
        if a > now:  # no virtual heartbeat yet (_virtual_tallies, _count_virtual: nothing to count)
            self.fwd_tick[i] = math.nan
            self.fwd_count[i] = 0
            self._next_tick = a
            if news:
                self._news_at(i, a)
            else:
                self.hb_timer[i] = self.port.set_timer_at(a, ("hb", i))
            return
        k0 = self.memo_k[i]  # _last_tick(i, now)
        t0 = self.memo_t[i]
        if t0 > now:
            k0, t0 = 0, a
        per = cad.hb
        fast = per._fast
        if fast is not None and fast[0] <= t0 and now + per.h < fast[1]:  # per.last_le(t0, now), its first case
            delta = fast[2]
            j = int((now - t0) / delta)
            while j > 0 and t0 + j * delta > now:
                j -= 1
            while t0 + (j + 1) * delta <= now:
                j += 1
            tv = t0 + j * delta
        else:
            j, tv = per.last_le(t0, now)
        k = k0 + j
        if not news:
            self.memo_k[i] = k  # (a news heartbeat sets the next spell's memo below)
            self.memo_t[i] = tv
        sent = k + 1
        arrival = tv + cad.d_nt
        # a news heartbeat (tick 0 of its spell) not yet delivered is in flight, whatever the time
        arrived = sent if arrival <= now and pend < 0 else k
        # _count_virtual(i, sent, arrived)
        answered = arrived - self.fwd_count[i]  # forwarded ones were real at the tracker
        self.stats["heartbeats"] += sent
        cell = self._hb_cell
        if cell is None:
            cell = self._hb_cell = cad.cell(Heartbeat)
        cell[0] += sent  # cad.count(Heartbeat, sent): sent >= 1
        ts = tr.stats
        ts["heartbeats"] += answered
        ts["answered"] += answered
        if answered:
            cell = self._rep_cell
            if cell is None:
                cell = self._rep_cell = cad.cell(HeartbeatReply)
            cell[0] += answered  # cad.count(HeartbeatReply, answered)
        if arrived < sent:  # the latest virtual heartbeat is in flight: deliver it for real
            cad.engine.inject(arrival, self.tracker, self._heartbeat_of(i))
            self.waiting[i] += 1
            self.wait_since[i] = tv
            if sent > 1:  # the tracker heard the one before
                tr.last_seen[self.lo + i - tr.lo] = cad.hb.advance(a, sent - 2) + cad.d_nt
        else:
            tr.last_seen[self.lo + i - tr.lo] = arrival
            if self.fwd_tick[i] == tv:  # forwarded: the arbitrator's (real) reply is to come
                self.waiting[i] += 1
                self.wait_since[i] = tv
            else:
                self.vwait[i] = arrival + cad.d_tn
        self.fwd_tick[i] = math.nan
        self.fwd_count[i] = 0
        self._next_tick = nxt = tv + self.hb
        if news:  # self._news_at(i, nxt), inlined
            self.dormant[i] = True
            self.anchor[i] = nxt
            self.memo_k[i] = 0
            self.memo_t[i] = nxt
            tq = self._tq
            if tq is None:
                tq = self._tq = timer_queue_of(self.port)
            seq = tq.next_seq()
            heappush(tq.heap, (nxt + cad.d_nt, seq, self._deliver, i))
            self.news[i] = seq
        else:
            self.hb_timer[i] = self.port.set_timer_at(nxt, ("hb", i))

    def _news_at(self, i: int, tick: float) -> None:
        """Node ``i``'s heartbeat at ``tick`` carries news (its content changed since the tracker last heard from it).

        What a real heartbeat timer at ``tick`` would do (:meth:`_hb_sleep`: the node sends its heartbeat and falls
        dormant) is one event instead of two: the node is dormant from ``tick`` on (its tick is virtual, so it waits
        for the reply as after any virtual heartbeat, :meth:`_waiting`), and the heartbeat reaches the tracker at
        ``tick + d_nt`` (:meth:`_deliver`) with the node's content as it is then — which is its content at ``tick``:
        a change after ``tick`` wakes the node first (:meth:`_wake`: the heartbeat in flight is delivered as a message
        of its own). Nothing is different from the real timer but the order among events at the very same instant
        (the same caveat as every virtual event, cadence.py)."""
        self.dormant[i] = True
        self.anchor[i] = tick
        self.memo_k[i] = 0
        self.memo_t[i] = tick
        tq = self._tq
        if tq is None:
            tq = self._tq = timer_queue_of(self.port)
        seq = tq.next_seq()
        heappush(tq.heap, (tick + self.cad.d_nt, seq, self._deliver, i))
        self.news[i] = seq

    def _deliver(self, i: int, now: float) -> None:
        """Node ``i``'s news heartbeat (tick ``anchor``) reaches its tracker: the node's side of :meth:`_hb_sleep` at
        the tick (counted, the next spell's first tick) and the tracker's handling of the heartbeat, in one event:
        the compiled handler (state.k_deliver) where it covers it (forwarding off and nothing armed at the tracker,
        no dead node, a calm bound that stays below the threshold), else :meth:`_deliver_py`."""
        cad = self.cad
        tr = cad.trackers[self.group]
        if self.kernels and not (tr.n_dead or tr.forward or tr._vf is not None):
            code = self.state.deliver(*self.state.kargs, self.x0 + i, now)
            if code != FALLBACK:
                if self._clean:  # (the kernel counted the heartbeat and its reply: Cadence.fold_counts)
                    self._clean.pop(i, None)
                if code == DELIVER_FREE:
                    a = self.anchor[i]
                    wheel = self.wheel  # wheel.add(i, a)
                    b = int((math.fmod(a, wheel.h) / wheel.h) * wheel.nb) % wheel.nb
                    wheel.buckets[b].add(i)
                    wheel.where[i] = b
                    wheel.size += 1
                return
        self._deliver_py(i, now)

    def _deliver_py(self, i: int, now: float) -> None:
        """:meth:`_deliver` in Python (``ResourceTracker.heard`` inlined but for a tracker with dead nodes)."""
        self.news[i] = -1
        cad = self.cad
        t = self.anchor[i]
        if self._clean:
            self._clean.pop(i, None)
        self.halved[i] = False
        self.missed[i] = False
        self.stats["heartbeats"] += 1
        cell = self._hb_cell
        if cell is None:
            cell = self._hb_cell = cad.cell(Heartbeat)
        cell[0] += 1
        free, row, has_free = self.ops.beat(self.capl[i], self.bgl[i], self.used[i], self._need)
        a = t + self.hb
        self.anchor[i] = a
        self.memo_k[i] = 0
        self.memo_t[i] = a
        cv = cad.cv
        cv[C_RANK] += 1
        self.rank[i] = cv[C_RANK]
        self.fwd_tick[i] = math.nan
        self.fwd_count[i] = 0
        tr = cad.trackers[self.group]
        if has_free:
            self.wheel.add(i, a)
            if tr.forward or tr._vf is not None:  # tr.vf_changed(now): nothing to do otherwise
                tr.vf_added(i, now)
        node = self.lo + i
        if tr.n_dead:
            forwarded = tr.heard(node, free, row, self.arb_seq[i], has_free, now)
        else:  # tr.heard(node, free, row, self.arb_seq[i], has_free, now), inlined
            j = node - tr.lo
            st = tr.stats
            st["heartbeats"] += 1
            tr.last_seen[j] = now
            if cad.calm and (not tr.known[j] or tr.row_differs(j, row)):
                cad.content_change(tr, j, row, now)
            tr.set_row(j, row)
            tr.known[j] = True
            fwd_free = tr.fwd_free
            forwarded = tr.forward and (has_free or fwd_free[j])
            fwd_free[j] = has_free
            if forwarded:
                st["forwarded"] += 1
                tr.port.send(
                    tr.arbitrator,
                    ForwardedHeartbeat(
                        tr.index, tr.group, [node], np.array([free], dtype=np.float64), [self.arb_seq[i]]
                    ),
                )
            else:
                st["answered"] += 1
        if forwarded:
            self.waiting[i] += 1  # forwarded: the arbitrator's (real) reply is to come
            self.wait_since[i] = t
        else:
            self.vwait[i] = now + cad.d_tn
            cell = self._rep_cell
            if cell is None:
                cell = self._rep_cell = cad.cell(HeartbeatReply)
            cell[0] += 1  # cad.count(HeartbeatReply, 1)

    def wake_all(self, now: float) -> None:
        """Every dormant node goes back to real heartbeat timers at ``now`` (centralized mode, whose heartbeats are
        hybrid; the end of fast-forward before a fault)."""
        for i in range(self.n):
            if self.dormant[i]:
                self._wake(i, now)

    def settle(self, now: float) -> None:
        """Count the virtual heartbeats of the still dormant nodes up to ``now`` (end of the run)."""
        for i in range(self.n):
            if self.dormant[i]:
                sent, arrived, _ = self._virtual_tallies(i, now)
                self._count_virtual(i, sent, arrived)

    def virtual_row(self, i: int) -> tuple:
        """What dormant node ``i``'s heartbeats carry, for the tracker to forward: ([node], free [1, R], [ack])."""
        return (
            [self.lo + i],
            np.array([self.ops.diff(self.capl[i], self.used[i])]),
            [self.arb_seq[i]],
        )

    # --- inspection --------------------------------------------------------------------------------------------
    def running_tasks(self) -> int:
        """How many task containers run on these nodes."""
        return len(self.containers)

    def tasks_on(self, i: int) -> list[int]:
        """The tasks running on local node ``i``, in id order (a scan of the containers: faults and tests only)."""
        return sorted(t for t, e in self.containers.items() if e[0] == i)

    def free_of(self, node: int) -> np.ndarray:
        """The free resources of ``node``: its allocatable capacity (background aside) minus what its containers use."""
        i = node - self.lo
        return np.array(self.ops.diff(self.capl[i], self.used[i]))
