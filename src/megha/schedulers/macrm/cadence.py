"""Fast-forward of MACRM's periodic traffic (simulator only): heartbeats that carry no news are computed, not sent.

MACRM's agents talk all the time: every node heartbeats its tracker every second, trackers send statistics every
100 ms and alive signals every 250 ms, job managers heartbeat their tracker. On a 10,000-node cluster that is more
than 10,000 events per simulated second, nearly all of them repeating what the receiver already knows. This module
lets a run skip them *without changing any result*: a periodic message whose content and effect are known in advance
is not simulated as an event; whoever would observe it computes, when it needs to, what it would have seen.

* **Node heartbeats.** After a node's heartbeat leaves, its next heartbeats are *virtual* (the node is *dormant*)
  until something about the node changes: a container starts or ends, an allocation arrives, it answers a
  sampling (its next heartbeat may then be missed, Fig. 3.3), the cluster goes centralized (heartbeats become
  hybrid), or a fault is injected. The node's tick times are exact (:class:`~megha.schedulers.macrm.period.Period`
  reproduces the engine's rounded additions). What a virtual heartbeat does is computed where it matters: the
  node ignores samplings while waiting for the reply to its latest virtual heartbeat (``NodeManagers._waiting``);
  while the arbitrator wants forwarded heartbeats, the tracker turns the virtual heartbeats of dormant nodes with
  free resources into real ones at their exact arrival times (:class:`FreeWheel` finds the next one); a tracker
  treats dormant nodes as heard from; when a node wakes up, a virtual heartbeat still in flight is delivered for
  real and counters and message counts get the virtual ones. A node whose content changes does not go back to a real
  timer: its next heartbeat is a *news* heartbeat, virtual at the node and delivered to the tracker as one event at
  its exact arrival time (``NodeManagers._news_at``), instead of a timer event and a message event.

A run is fast-forwarded only when this is exact: the simulator's engine without a processing-cost model (message
processing would queue behind virtual messages), and heartbeat periods long against message delays and the
liveness timeouts long against the periods (so that a dormant node can never look silent). Otherwise, and with
``fast_forward=false``, every timer is an event as before. Fault injection (:class:`~megha.schedulers.macrm.infra.
MacrmFaults`) first turns every virtual chain back into real timers (:meth:`Cadence.go_eager`).

Exactness holds up to the order of events at the very same float instant as a virtual one (the engine orders those
by when they were scheduled; a virtual event has no such rank), which the tests compare on many runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from megha.schedulers.macrm.messages import (
    Alive,
    Heartbeat,
    HeartbeatReply,
    JMHeartbeat,
    JMHeartbeatReply,
    LoadInfo,
    TrackerStats,
)
from megha.schedulers.macrm.period import Period
from megha.schedulers.macrm.state import (
    C_CALM,
    C_COLS,
    C_HB_CELL,
    C_METRIC,
    C_NEWS_OK,
    C_PYWHEEL,
    C_RANK,
    C_REP_CELL,
    G_D_NT,
    G_D_TN,
    G_FAST_D,
    G_FAST_HI,
    G_FAST_LO,
    G_HB,
    G_HB_REPLY,
    G_HOLD,
    G_LIM,
    G_MARGIN,
    G_NEED,
    G_POW2,
    G_STATS_H,
    G_THR,
    G_WHEEL_H,
    GR_NB,
    GR_NM_HB,
    GR_TR_ANSWERED,
    GR_TR_HB,
    METRIC_CPU,
    METRIC_MAX,
    METRIC_MEAN,
    NodeState,
    PackedWheel,
)
from megha.sim.component import Host

if TYPE_CHECKING:
    from megha.schedulers.macrm.jobmanager import JobManager
    from megha.schedulers.macrm.nodes import NodeManagers
    from megha.schedulers.macrm.tracker import ResourceTracker


class FreeWheel:
    """The dormant nodes of one group that have free resources, bucketed by heartbeat phase.

    ``next_after(y)`` finds the node whose next virtual heartbeat tick is the first one after ``y`` (ties: the order
    in which the nodes fell dormant): buckets give candidates in phase order, :class:`Period` gives exact ticks.
    """

    def __init__(self, period: Period, buckets: int) -> None:
        self.p = period
        self.h = period.h
        self.nb = max(1, int(buckets))
        self.buckets: list[set[int]] = [set() for _ in range(self.nb)]
        self.where: dict[int, int] = {}
        self.size = 0

    def bucket(self, t: float) -> int:
        """The phase bucket of a heartbeat tick at ``t``."""
        return int((math.fmod(t, self.h) / self.h) * self.nb) % self.nb

    def add(self, node: int, tick: float) -> None:
        """A dormant node with free resources joins the wheel, in the bucket of its next virtual tick ``tick``."""
        b = self.bucket(tick)
        self.buckets[b].add(node)
        self.where[node] = b
        self.size += 1

    def discard(self, node: int) -> bool:
        """Remove ``node`` from the wheel, if it is there (whether it was)."""
        b = self.where.pop(node, None)
        if b is None:
            return False
        self.buckets[b].discard(node)
        self.size -= 1
        return True

    def has(self, node: int) -> bool:
        """``node`` is in the wheel."""
        return node in self.where

    def next_after(self, y: float, key: Callable[[int, float], tuple]) -> tuple | None:
        """The smallest ``key(node, y)`` over the wheel's nodes, scanning buckets in phase order from ``y``.

        ``key(node, y)`` must return ``(tick, ...)`` with ``tick`` the node's first tick after ``y``, which lies in
        ``(y, y + h]``; a bucket further than the best tick found (plus two buckets of slack for rounding) cannot
        hold a better one.
        """
        if not self.size:
            return None
        nb = self.nb
        width = self.h / nb
        b0 = (self.bucket(y) - 2) % nb
        best = None
        for j in range(nb + 4):
            if best is not None and (j - 4) * width > best[0] - y:
                break
            for node in self.buckets[(b0 + j) % nb]:
                k = key(node, y)
                if best is None or k < best:
                    best = k
        return best


class Chain:
    """A component's periodic timer whose ticks from ``first`` on are virtual (computed, not run).

    ``end`` closes the virtual range (the chain went back to real timers then): ticks after it are real events.
    """

    __slots__ = ("end", "first", "memo", "p")

    def __init__(self, period: Period, first: float) -> None:
        self.p = period
        self.first = first
        self.memo = (0, first)
        self.end = math.inf

    def last_le(self, at: float) -> tuple[int, float] | None:
        """``(k, t_k)`` of the last virtual tick ``<= at`` (None if there is none)."""
        at = min(at, self.end)
        if self.first > at:
            return None
        k0, t0 = self.memo
        if t0 > at:
            k0, t0 = 0, self.first
        j, t = self.p.last_le(t0, at)
        self.memo = (k0 + j, t)
        return k0 + j, t

    def count_le(self, at: float) -> int:
        """How many virtual ticks of the chain fall at or before ``at``."""
        r = self.last_le(at)
        return 0 if r is None else r[0] + 1

    def next_after(self, at: float) -> float:
        """The first tick after ``at`` (``at`` within the virtual range)."""
        if self.first > at:
            return self.first
        k0, t0 = self.memo
        if t0 > at:
            k0, t0 = 0, self.first
        j, t = self.p.last_le(t0, at)
        self.memo = (k0 + j, t)
        return t + self.p.h

    def close(self, at: float) -> float:
        """End the virtual range at ``at``; returns the first (real) tick after it."""
        nxt = self.next_after(at)
        self.end = at
        return nxt


class Cadence:
    """What a MACRM deployment does not simulate event by event, and the bookkeeping to stay exact."""

    def __init__(self, engine: Host, heartbeat: float, delays: dict[str, float], enabled: bool = True) -> None:
        self.engine = engine
        self.enabled = enabled
        self.eager = not enabled  # every timer real (fast-forward off, or after a fault)
        self.hb = Period(heartbeat)
        self.d = delays  # one-way delays: nm->tracker, tracker->nm, tracker->arb, arb->nm, ...
        self.groups: list = []  # NodeManagers, by group
        self.trackers: list = []  # ResourceTracker, by group (the current instances)
        # run-wide counters the compiled handlers share (state.py's c; use_state): the rank counter at C_RANK
        self.state: NodeState | None = None
        self.cv = memoryview(np.zeros(C_COLS, dtype=np.int64))
        self.settled_at: float | None = None
        self.others: list = []  # components with virtual chains of their own (go_eager, settle)
        self.live_jms: dict[str, object] = {}  # running job-manager processes (they heartbeat their tracker)
        # calm: statistics and job-manager heartbeats are virtual (see maybe_calm)
        self.calm = False
        self.arbitrator = None
        self.supervisor = None
        self.threshold = math.inf  # loads below it make no decision differ (set by the deployment)
        self.margin = 0.005
        self.stats_period: Period | None = None
        self.jm_period: Period | None = None
        self.settle_after = 1.0  # seconds a mode switch needs to reach every agent
        self.stats_chain: Chain | None = None
        self.dormant_jms: dict[str, object] = {}  # job managers whose heartbeats are virtual
        self.ended_jm_chains: list[tuple] = []  # (chain, tracker) of dormant job managers that exited
        self._bound_sum: np.ndarray | None = None
        self._cells: dict[type, list] = {}  # the engine's message count cells, taken on a type's first count
        self._total_sum: np.ndarray | None = None
        self._lim_max: float | None = None
        self.calm_spells = 0

    # --- registration -----------------------------------------------------------------------------------------
    def use_state(self, st: NodeState) -> None:
        """Share the packed per-node state ``st`` (state.py) with the compiled handlers: the rank counter, the
        trackers' undo logs (rings), the calm bound and the run-wide constants live there (after the groups and
        trackers are registered, before the run starts)."""
        self.state = st
        st.c[:] = np.asarray(self.cv)
        self.cv = memoryview(st.c)
        self.gv = memoryview(st.g)  # (a kernel's float output: g[G_OUT])
        nm = self.groups[0]
        n_res = st.n_res
        g = st.g
        g[G_HB] = nm.hb
        g[G_D_NT] = self.d_nt
        g[G_D_TN] = self.d_tn
        g[G_WHEEL_H] = nm.wheel.h
        g[G_NEED : G_NEED + n_res] = nm._need
        g[G_HOLD] = nm.hold_timeout
        g[G_HB_REPLY] = nm.hb_reply_timeout
        g[G_POW2] = 1.0 if math.frexp(self.hb.h)[0] == 0.5 else 0.0
        fast = self.hb._fast
        g[G_FAST_LO], g[G_FAST_HI], g[G_FAST_D] = (math.nan, math.nan, math.nan) if fast is None else fast
        st.c[C_NEWS_OK] = int(nm._news_ok)
        st.c[C_PYWHEEL] = 1
        for gi, tr in enumerate(self.trackers):
            tr.bind_state(st, tr.lo)
            tr.use_ring(st, gi)
        if g[G_POW2] == 1.0:  # the free wheels in the packed state: the kernels keep them, k_vf_arm scans them
            nb = max(nm.wheel.nb for nm in self.groups)
            st.wheel = np.full((len(self.groups), nb), -1, dtype=np.int64)
            st.kargs = st.args()
            for gi, nm in enumerate(self.groups):
                if nm.wheel.size:
                    raise RuntimeError("the free wheels move to the packed state before the run starts")
                st.gr[gi, GR_NB] = nm.wheel.nb
                nm.wheel = PackedWheel(st, gi, nm.lo, nm.wheel.h, nm.wheel.nb)
                nm.pywheel = False
            st.c[C_PYWHEEL] = 0
        st.bind_kernels()
        for nm in self.groups:
            nm.kernels = True

    def fold_counts(self) -> None:
        """Add the counts the compiled handlers keep in the packed state (each group's node-manager and tracker
        heartbeats and answers, the Heartbeat and HeartbeatReply messages) to the components' counters and the
        engine's message counts, and zero them there (they are read only at the end of a run, :meth:`settle`;
        also before faults, :meth:`go_eager`)."""
        st = self.state
        if st is None:
            return
        gr = st.gr
        for gi, nm in enumerate(self.groups):
            n_hb, tr_hb, tr_ans = (int(v) for v in gr[gi, [GR_NM_HB, GR_TR_HB, GR_TR_ANSWERED]])
            if n_hb:
                nm.stats["heartbeats"] += n_hb
            ts = self.trackers[gi].stats
            if tr_hb:
                ts["heartbeats"] += tr_hb
            if tr_ans:
                ts["answered"] += tr_ans
            gr[gi, [GR_NM_HB, GR_TR_HB, GR_TR_ANSWERED]] = 0
        cv = self.cv
        self.count(Heartbeat, cv[C_HB_CELL])
        self.count(HeartbeatReply, cv[C_REP_CELL])
        cv[C_HB_CELL] = 0
        cv[C_REP_CELL] = 0

    def _share_calm(self) -> None:
        """A calm spell begins: its bound, limits and metric go to the shared state (the bound sum is kept there)."""
        st = self.state
        n_res = st.n_res
        g = st.g
        g[G_STATS_H] = self.stats_period.h
        g[G_LIM] = math.nan if self._lim_max is None else self._lim_max
        g[G_THR] = self.threshold
        g[G_MARGIN] = self.margin
        b0 = G_NEED + n_res
        g[b0 : b0 + n_res] = self._bound_sum
        g[b0 + n_res : b0 + 2 * n_res] = self._total_sum
        self._bound_sum = memoryview(g[b0 : b0 + n_res])
        metric = self.arbitrator.load_metric
        st.c[C_METRIC] = METRIC_MAX if metric == "max" else METRIC_CPU if metric == "cpu" else METRIC_MEAN
        st.c[C_CALM] = 1

    def add_group(self, nm: NodeManagers) -> None:
        """Register a node-manager group (its nodes' heartbeats may be virtual)."""
        self.groups.append(nm)

    def add_tracker(self, tr: ResourceTracker) -> None:
        """Register a resource tracker (its alive signals may be virtual; it takes part in go_eager and settle)."""
        self.trackers.append(tr)
        self.others.append(tr)

    def add_other(self, comp: Any) -> None:
        """A component implementing ``go_eager(now)`` and ``settle(now)`` for its own virtual chains."""
        self.others.append(comp)

    # --- job managers: their tracker hears from them while they run ---------------------------------------------
    def jm_started(self, jm: JobManager) -> None:
        """A job-manager process started: its tracker hears from it while it runs."""
        self.live_jms[jm.address] = jm
        self.trackers[jm.group].jm_covered(jm.address)

    def jm_exited(self, jm: JobManager) -> None:
        """A job-manager process exited: it no longer heartbeats its tracker."""
        if self.live_jms.get(jm.address) is jm:
            del self.live_jms[jm.address]

    def covers(self, address: str, tracker: int) -> bool:
        """A running job manager at ``address`` heartbeats tracker ``tracker``."""
        jm = self.live_jms.get(address)
        return jm is not None and jm.group == tracker

    def rank(self) -> int:
        """A counter giving dormant spells the order in which they began (ties between virtual events)."""
        cv = self.cv
        cv[C_RANK] += 1
        return cv[C_RANK]

    def count(self, cls: type, n: int) -> None:
        """Count ``n`` messages of type ``cls`` as sent (virtual messages)."""
        if n:
            cell = self._cells.get(cls)
            if cell is None:
                cell = self.cell(cls)
            cell[0] += n

    def cell(self, cls: type) -> list:
        """The engine's count cell of messages of type ``cls`` (``cell[0] += n`` is :meth:`count`; run started)."""
        cell = self._cells.get(cls)
        if cell is None:
            cell = self._cells[cls] = self.groups[0].port.message_counter(cls)
        return cell

    # --- calm: virtual statistics and job-manager heartbeats ---------------------------------------------------
    def maybe_calm(self, now: float) -> None:
        """At the first tracker's statistics tick: go calm if no load can matter until something changes.

        Calm means the trackers' statistics and the job managers' heartbeats (whose replies carry the load) are
        virtual. A load decides something only at the mode switch (``switch_load``) and in the adaptive sampling
        rate (from 75 %): if an upper bound of every load the arbitrator could compute stays below both (minus a
        margin), every decision is the same whatever the exact value, so loads are left as they are. The bound is
        the sum over trackers of their reported usage, raised by every increase a node reports; a change that brings
        it near the threshold ends the calm spell (:meth:`leave_calm`), which restores the arbitrator's exact view.
        Calm also needs: FIFO queue (fair share reads the per-user statistics), distributed mode settled for a while
        (mode changes reach every agent), complete statistics, and every load already below the threshold.
        """
        arb = self.arbitrator
        trs = self.trackers
        if arb.policy != "fifo" or arb.central or now - arb.last_switch < self.settle_after:
            return
        thr = self.threshold - self.margin
        if len(arb.tstats) != len(trs) or not all(m.complete for m in arb.tstats.values()):
            return
        if arb.load >= thr or any(tr.central or tr.load >= thr or tr.dead.any() for tr in trs):
            return
        if any(jm.central or jm.load >= thr for jm in self.live_jms.values()):
            return
        bounds = []
        for tr in trs:
            cur = tr.content(tr.used, tr.known)
            if not cur.complete:
                return
            bounds.append(np.maximum(cur.used, arb.tstats[tr.index].used))
        self._total_sum = np.sum([arb.tstats[tr.index].total for tr in trs], axis=0).tolist()
        bsum = np.sum(bounds, axis=0).tolist()
        if not self._below(bsum):
            return
        for tr in trs:
            tr.undo_clear()
        self._bound_sum = bsum
        # _below's limit when it takes the largest fraction (None: use _below)
        self._lim_max = (
            self.threshold - self.margin
            if self.threshold != math.inf and self.arbitrator.load_metric == "max"
            else (math.inf if self.threshold == math.inf else None)
        )
        self.calm = True
        self.calm_spells += 1
        if self.state is not None:
            self._share_calm()
        self.stats_chain = Chain(self.stats_period, now + self.stats_period.h)

    def _below(self, used: list[float]) -> bool:
        """The load of usage ``used`` (an upper bound) is below the threshold, with the margin."""
        if self.threshold == math.inf:
            return True
        frac = [u / t if t > 0 else 0.0 for u, t in zip(used, self._total_sum, strict=True)]
        metric = self.arbitrator.load_metric
        load = max(frac) if metric == "max" else frac[0] if metric == "cpu" else sum(frac) / len(frac)
        return load < self.threshold - self.margin

    def content_change(self, tr: ResourceTracker, i: int, new: list[float], now: float) -> None:
        """Tracker ``tr`` is about to record node ``i``'s new usage row ``new`` (calm only): log it, raise the
        bound. (The tracker replaces rows, never changes one in place: the logged row is the old one.)"""
        old = tr.row_of(i)
        known = tr.known[i]
        # (once past 64 entries, keep what reconstructing the last two ticks needs)
        tr.undo_log((now, i, old, known), now - 3 * self.stats_period.h)
        bsum = self._bound_sum
        raised = False
        if known and len(new) == 2:  # the loop below, unrolled for two resources
            a, b = new
            x, y = old
            if a > x:
                bsum[0] += a - x
                raised = True
            if b > y:
                bsum[1] += b - y
                raised = True
        elif known:
            for r, (a, b) in enumerate(zip(new, old, strict=True)):
                if a > b:
                    bsum[r] += a - b
                    raised = True
        else:
            for r, a in enumerate(new):
                bsum[r] += a
                raised = True
        # the bound was below the threshold (or calm would have ended): only a raised bound can cross it
        if raised:
            lim = self._lim_max
            if lim is not None:  # _below(bsum) with the largest fraction: every fraction below the limit
                for u, t in zip(bsum, self._total_sum, strict=True):
                    if not (u / t if t > 0 else 0.0) < lim:
                        self.leave_calm(now)
                        return
            elif not self._below(bsum):
                self.leave_calm(now)

    def leave_calm(self, at: float) -> None:
        """Statistics and job-manager heartbeats become real again after ``at``: the arbitrator's view of the
        statistics is restored exactly (from the trackers' undo logs), a statistics message still in flight is
        delivered, and every tracker's and job manager's next tick is a real timer."""
        if not self.calm:
            return
        self.calm = False
        if self.state is not None:
            self.state.c[C_CALM] = 0
        ch = self.stats_chain
        r = ch.last_le(at)
        trs = self.trackers
        arb = self.arbitrator
        d_ta = self.d["ta"]
        n = len(trs)
        if r is None:
            nxt = ch.first
        else:
            k, sk = r
            nxt = sk + ch.p.h
            arrival = sk + d_ta
            now_stats = [tr.content_at(sk) for tr in trs]
            if arrival <= at:
                arb.install_stats(now_stats)
                self.count(LoadInfo, (k + 1) * n)
            else:
                if k > 0:
                    prev = ch.p.advance(ch.first, k - 1)
                    arb.install_stats([tr.content_at(prev) for tr in trs])
                for m in now_stats:
                    self.engine.inject(arrival, arb.address, m)
                self.count(LoadInfo, k * n)
            self.count(TrackerStats, (k + 1) * n)
        ch.end = at
        self.stats_chain = None
        for tr in trs:
            tr.undo_clear()
            tr.port.set_timer_at(nxt, ("stats",))
        for jm in list(self.dormant_jms.values()):
            self.jm_wake(jm, at)

    # --- job managers' virtual heartbeats (calm only) -------------------------------------------------------------
    def jm_sleep(self, jm: JobManager, first: float) -> None:
        """Job manager ``jm``'s heartbeats from ``first`` on are virtual."""
        jm.vchain = Chain(self.jm_period, first)
        self.dormant_jms[jm.address] = jm

    def _jm_tallies(self, ch: Chain, tracker: int, upto: float, sent_upto: float) -> tuple | None:
        """Count a job manager's virtual heartbeats sent up to ``sent_upto`` and received up to ``upto``; returns
        (k, last tick, arrival of the last tick) or None."""
        r = ch.last_le(sent_upto)
        if r is None:
            return None
        k, t = r
        d = self.d["jt"]
        arrival = t + d
        arrived = k + 1 if arrival <= upto else k
        self.count(JMHeartbeat, k + 1)
        self.count(JMHeartbeatReply, arrived)
        self.trackers[tracker].stats["jm_heartbeats"] += arrived
        return k, t, arrival

    def jm_wake(self, jm: JobManager, at: float) -> None:
        """Job manager ``jm``'s heartbeats are real again after ``at``."""
        ch = jm.vchain
        jm.vchain = None
        del self.dormant_jms[jm.address]
        tr = self.trackers[jm.group]
        res = self._jm_tallies(ch, jm.group, at, at)
        if res is not None:
            k, _, arrival = res
            last = arrival
            if arrival > at:  # in flight: delivered for real
                self.engine.inject(arrival, tr.address, JMHeartbeat(jm.address, jm.job, jm.attempt))
                last = ch.p.advance(ch.first, k - 1) + self.d["jt"] if k > 0 else None
            if last is not None and jm.address in tr.jms:
                tr.jms[jm.address] = [jm.job, jm.attempt, last]
        jm.port.set_timer_at(ch.next_after(at), ("hb",))

    def jm_exit(self, jm: JobManager, now: float) -> None:
        """A job manager with virtual heartbeats exits: its tracker's entry gets the latest one (counted at the end)."""
        ch = jm.vchain
        jm.vchain = None
        del self.dormant_jms[jm.address]
        ch.end = now
        self.ended_jm_chains.append((ch, jm.group))
        r = ch.last_le(now)
        tr = self.trackers[jm.group]
        if r is not None and jm.address in tr.jms:
            tr.jms[jm.address] = [jm.job, jm.attempt, r[1] + self.d["jt"]]

    def go_eager(self, now: float) -> None:
        """From now on every timer is a real event (called before a fault is injected: silence must be observable).

        Components get ``go_eager(before)`` with ``before`` just below ``now``: virtual events at or before it
        happened, later ones (those at ``now`` included) become real events.
        """
        if self.eager:
            return
        self.eager = True
        self.fold_counts()
        before_ = math.nextafter(now, -math.inf)
        self.leave_calm(before_)
        # what happened before this event: a periodic timer due at this very instant fires after it (it was set one
        # period ago, after the fault injector's timer), so it becomes the first real one
        before = math.nextafter(now, -math.inf)
        for nm in self.groups:
            nm.wake_all(before)
        for c in self.others:
            c.go_eager(before)

    def settle(self, now: float) -> None:
        """Add the virtual messages up to ``now`` to counters and message counts (once, at the end of a run)."""
        if self.settled_at is not None:
            return
        self.settled_at = now
        self.fold_counts()
        for nm in self.groups:
            nm.settle(now)
        for c in self.others:
            c.settle(now)
        ch = self.stats_chain
        if ch is not None:  # a calm spell still running
            r = ch.last_le(now)
            if r is not None:
                k, sk = r
                n = len(self.trackers)
                self.count(TrackerStats, (k + 1) * n)
                self.count(LoadInfo, (k + 1 if sk + self.d["ta"] <= now else k) * n)
        for jm in self.dormant_jms.values():
            self._jm_tallies(jm.vchain, jm.group, now, now)
        for ch, tracker in self.ended_jm_chains:
            self._jm_tallies(ch, tracker, now, min(ch.end, now))


def eager_alive(comp: Any, chain: Chain, d: float, now: float) -> None:
    """A component's virtual alive signals become a real timer: the supervisor learns the latest one that arrived,
    one still in flight is delivered for real, the next tick is a real timer."""
    cad = comp.cad
    r = chain.last_le(now)
    nxt = chain.close(now)
    if r is not None:
        k, t = r
        arrival = t + d
        sup = cad.supervisor
        if arrival > now:
            cad.engine.inject(arrival, comp.supervisor, Alive(comp.address))
            if k > 0:
                sup.last[comp.address] = chain.p.advance(chain.first, k - 1) + d
        else:
            sup.last[comp.address] = arrival
    comp.port.set_timer_at(nxt, ("alive",))
