"""A MACRM resource tracker (thesis §3.2.3): cluster-state-writer and -reader for one share of the nodes.

* **Writer**: receives the node heartbeats of its nodes and keeps their view (used and free resources, per-user
  usage); forwards the heartbeats of nodes with free resources to the arbitrator — and of nodes that just became
  full, so the arbitrator's free-resource view drops them — and answers the others itself. The arbitrator turns
  forwarding off while it has nothing to allocate in distributed mode (:class:`Forwarding`).
* **Reader**: watches liveness — a node silent for ``node_timeout`` and a job manager silent for ``jm_timeout``
  are reported to the arbitrator (reliably: resent until acknowledged) — and sends the arbitrator aggregate
  statistics (used/total resources, per-user usage) every ``stats_interval``; the arbitrator derives the cluster
  load, the sampling rate and the mode from them.
* Job managers heartbeat the tracker of their node; the reply carries the current load and mode.

Its state is soft: a restarted tracker starts from its node list, gives every node and known job manager a full
timeout before suspecting it, and has a complete view again after one round of heartbeats.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from typing import Any

import numpy as np

from megha.schedulers.macrm.cadence import Chain, eager_alive
from megha.schedulers.macrm.messages import (
    Alive,
    ArbitratorUp,
    ExpectJM,
    ForwardedHeartbeat,
    Forwarding,
    Heartbeat,
    HeartbeatReply,
    JMHeartbeat,
    JMHeartbeatReply,
    LoadInfo,
    Report,
    ReportAck,
    TrackerStats,
    TrackerUp,
)
from megha.schedulers.macrm.period import Period
from megha.schedulers.macrm.rows import row_ops
from megha.schedulers.macrm.state import (
    F_COLS,
    F_LAST_SEEN,
    FALLBACK,
    GR_UHEAD,
    GR_ULEN,
    K_FWD_FREE,
    K_KNOWN,
    VF_FOUND,
    NodeState,
)
from megha.sim.component import Component

_EPS = 1e-9


def _rows(a: list | np.ndarray) -> list:
    """Rows of a heartbeat's [k, R] block (a list of lists or an array) as lists of floats."""
    return a if type(a) is list else a.tolist()


class ResourceTracker(Component):
    """Tracker ``index`` for nodes ``lo .. lo + n - 1`` whose node managers live in component ``group``."""

    kind = "macrm-tracker"
    crash_kind = None  # fault schedules kill trackers as MACRM does ('tracker', faults.py)

    def __init__(
        self,
        address: str,
        index: int,
        group: str,
        lo: int,
        physical: np.ndarray,
        arbitrator: str,
        supervisor: str,
        node_timeout: float,
        jm_timeout: float,
        stats_interval: float = 0.1,
        alive_interval: float = 0.25,
        min_alloc: np.ndarray | None = None,
    ) -> None:
        super().__init__(address)
        if node_timeout <= 0 or jm_timeout <= 0 or stats_interval <= 0 or alive_interval <= 0:
            raise ValueError(f"{address}: timeouts and intervals must be > 0")
        self.index = index
        self.group = group
        self.lo = int(lo)
        self.phys = np.asarray(physical, dtype=np.float64)
        self.n = int(self.phys.shape[0])
        self.arbitrator = arbitrator
        self.supervisor = supervisor
        self.node_timeout = float(node_timeout)
        self.jm_timeout = float(jm_timeout)
        self.stats_interval = float(stats_interval)
        self.alive_interval = float(alive_interval)
        self.check_interval = min(self.node_timeout, self.jm_timeout) / 4
        self.min_alloc = np.zeros(self.phys.shape[1]) if min_alloc is None else np.asarray(min_alloc, dtype=float)
        self.need = (self.min_alloc - _EPS).tolist()
        self.has_free = row_ops(self.phys.shape[1]).has_free  # free rows hold the smallest allocation (rows.py)
        n = self.n
        self.dead = np.zeros(n, dtype=bool)
        self.n_dead = 0  # nodes marked dead (the hot paths look at dead[i] only when there are any)
        # the per-node view lives in packed arrays (state.py): bind_state
        self._rows: tuple[np.ndarray, np.ndarray] | None = None
        self._ring: tuple[Any, int] | None = None  # (NodeState, group) of the undo log while calm, with fast-forward
        self.bind_state(NodeState(n, self.phys.shape[1], 1, 1), 0)
        self.node_users: list[dict[int, np.ndarray]] = [{} for _ in range(n)]
        self.user_used: dict[int, np.ndarray] = {}
        self.jms: dict[str, list] = {}  # address -> [job, attempt, last heartbeat]
        self.unacked: dict[int, Report] = {}
        self._rid = 0
        self.load = 0.0
        self.central = False
        self.forward = True
        self.cad = None  # fast-forward (cadence.py): dormant nodes' heartbeats are virtual
        self.alive_chain: Chain | None = None
        self.check_chain: Chain | None = None
        self._check_at: tuple[float, int] | None = None  # the armed check (time, handle), fast-forward only
        self.uncovered: dict[str, float] = {}  # job-manager entries no running job manager refreshes: address -> last
        # while statistics are virtual: (time, node, previous usage row, was known); the packed state's ring instead
        # once bound to a deployment's (use_ring)
        self.undo: deque[tuple] = deque()
        self._vf_out = np.empty(4)  # (k_vf_arm's output)
        self._vf: tuple | None = None  # the armed virtual heartbeat to forward: (arrival, rank, node, tick, handle)
        self.stats = {
            "heartbeats": 0,
            "forwarded": 0,
            "answered": 0,
            "jm_heartbeats": 0,
            "nodes_lost": 0,
            "jms_lost": 0,
            "reports_resent": 0,
            "heartbeats_from_dead": 0,
        }

    def bind_state(self, st: NodeState, x0: int) -> None:
        """Keep this tracker's per-node view in rows ``x0 .. x0 + n - 1`` of ``st`` (the packed arrays the compiled
        handlers work on; the current values move there): ``used`` (each node's usage row, an ``[n, R]`` array view;
        written through :meth:`set_row`), ``known`` (0/1: heard from), ``last_seen`` (when each node was last heard
        from) and ``fwd_free`` (0/1: the arbitrator's view currently lists the node as free), the last three
        memoryviews."""
        n = self.n
        n_res = self.phys.shape[1]
        tu0 = F_COLS + 3 * n_res
        f = st.f[x0 : x0 + n]
        k = st.k[x0 : x0 + n]
        if self._rows is not None:
            f[:, F_LAST_SEEN] = self._rows[0][:, F_LAST_SEEN]
            f[:, tu0 : tu0 + n_res] = self._rows[0][:, tu0 : tu0 + n_res]
            k[:, K_KNOWN] = self._rows[1][:, K_KNOWN]
            k[:, K_FWD_FREE] = self._rows[1][:, K_FWD_FREE]
        self._rows = (f, k)
        self.used = f[:, tu0 : tu0 + n_res]
        self._tu = [memoryview(f[:, tu0 + r]) for r in range(n_res)]
        self.last_seen = memoryview(f[:, F_LAST_SEEN])
        self.known = memoryview(k[:, K_KNOWN])
        self.fwd_free = memoryview(k[:, K_FWD_FREE])

    def use_ring(self, st: NodeState, group: int) -> None:
        """Keep the undo log in ``st``'s ring of group ``group`` (the one the compiled handlers write)."""
        self._ring = (st, group)
        st.gr[group, GR_UHEAD] = 0
        st.gr[group, GR_ULEN] = 0

    def row_differs(self, i: int, row: list[float]) -> bool:
        """Node ``i``'s usage row as this tracker has it differs from ``row``."""
        return any(col[i] != v for col, v in zip(self._tu, row, strict=True))

    def set_row(self, i: int, row: list[float]) -> None:
        """Node ``i``'s usage row is ``row`` now."""
        for col, v in zip(self._tu, row, strict=True):
            col[i] = v

    def row_of(self, i: int) -> list[float]:
        """Node ``i``'s usage row as this tracker has it (a copy)."""
        return [col[i] for col in self._tu]

    def undo_log(self, entry: tuple, horizon: float) -> None:
        """Log ``entry`` = ``(time, node, previous usage row, was known)``; once more than 64 entries are logged, the
        oldest before ``horizon`` go (entries are in time order)."""
        if self._ring is None:
            undo = self.undo
            undo.append(entry)
            if len(undo) > 64:
                while undo[0][0] < horizon:
                    undo.popleft()
            return
        st, gi = self._ring
        gr = st.gr
        cap = st.undo.shape[1]
        if gr[gi, GR_ULEN] >= cap:
            st.grow_undo()
            cap = st.undo.shape[1]
        ring = st.undo[gi]
        q = (gr[gi, GR_UHEAD] + gr[gi, GR_ULEN]) % cap
        t, i, row, kn = entry
        ring[q, 0] = t
        ring[q, 1] = i
        ring[q, 2] = 1.0 if kn else 0.0
        ring[q, 3:] = row
        gr[gi, GR_ULEN] += 1
        if gr[gi, GR_ULEN] > 64:
            while ring[gr[gi, GR_UHEAD], 0] < horizon:
                gr[gi, GR_UHEAD] = (gr[gi, GR_UHEAD] + 1) % cap
                gr[gi, GR_ULEN] -= 1

    def undo_clear(self) -> None:
        """Empty the undo log (a calm spell begins or ends)."""
        if self._ring is None:
            self.undo = deque()
        else:
            st, gi = self._ring
            st.gr[gi, GR_UHEAD] = 0
            st.gr[gi, GR_ULEN] = 0

    def undo_entries(self) -> list[tuple]:
        """The undo log's entries in time order: ``(time, node, previous usage row, was known)``."""
        if self._ring is None:
            return list(self.undo)
        st, gi = self._ring
        cap = st.undo.shape[1]
        h, n = int(st.gr[gi, GR_UHEAD]), int(st.gr[gi, GR_ULEN])
        ring = st.undo[gi]
        out = []
        for q in range(n):
            e = ring[(h + q) % cap]
            out.append((float(e[0]), int(e[1]), e[3:].tolist(), bool(e[2])))
        return out

    def on_start(self, now: float) -> None:
        self._rows[0][:, F_LAST_SEEN] = now  # everyone gets a full timeout before being suspected
        self.port.send(self.arbitrator, TrackerUp(self.index))
        cad = self.cad
        if cad is None or cad.eager:
            self.port.set_timer(self.check_interval, ("check",))
            self.port.set_timer(self.stats_interval, ("stats",))
            self.port.set_timer(self.alive_interval, ("alive",))
            return
        # fast-forward: alive signals are virtual; checks run only when they can find something (_arm_check)
        self.port.set_timer(self.stats_interval, ("stats",))
        self.alive_chain = Chain(Period(self.alive_interval), now + self.alive_interval)
        self.check_chain = Chain(Period(self.check_interval), now + self.check_interval)

    # --- messages ----------------------------------------------------------------------------------------------
    def on_message(self, msg: Any, now: float) -> None:
        tp = type(msg)
        if tp is Heartbeat:
            self._heartbeat(msg, now)
        elif tp is JMHeartbeat:
            self.stats["jm_heartbeats"] += 1
            if msg.final:
                self.jms.pop(msg.jm, None)
                if self.uncovered.pop(msg.jm, None) is not None:
                    self._arm_check(now)
            else:
                self.jms[msg.jm] = [msg.job, msg.attempt, now]
                self.port.send(msg.jm, JMHeartbeatReply(self.load, self.central))
        elif tp is Forwarding:
            was = self.forward
            self.forward = msg.on
            if self.cad is not None and msg.on != was:
                self.vf_changed(now)
        elif tp is LoadInfo:
            self.load = msg.load
            self.central = msg.central
        elif tp is ExpectJM:
            for addr, job, att in msg.jms:
                if addr not in self.jms:
                    self.jms[addr] = [job, att, now]
                    if self.check_chain is not None and not self.cad.eager and not self.cad.covers(addr, self.index):
                        self.uncovered[addr] = now
                        self._arm_check(now)
        elif tp is ReportAck:
            self.unacked.pop(msg.rid, None)
        elif tp is ArbitratorUp:
            for r in self.unacked.values():
                self.stats["reports_resent"] += 1
                self.port.send(self.arbitrator, r)
            dead = np.flatnonzero(self.dead)
            if dead.size:  # a new arbitrator knows no failed node: it must not wait for them (queue._strand)
                self._rid += 1
                self._report(Report(self.index, self._rid, "nodes", nodes=(dead + self.lo).tolist()))
        else:
            super().on_message(msg, now)

    def _heartbeat(self, msg: Heartbeat, now: float) -> None:
        if len(msg.nodes) == 1:
            self._heartbeat1(msg, now)
            return
        lo = self.lo
        self.stats["heartbeats"] += len(msg.nodes)
        fwd: list[int] = []
        rest: list[int] = []
        need = self.need
        users = msg.users
        free_rows = _rows(msg.free)
        used_rows = _rows(msg.used)
        for k, node in enumerate(msg.nodes):
            i = node - lo
            if self.dead[i]:
                self.stats["heartbeats_from_dead"] += 1
                rest.append(k)
                continue
            self.last_seen[i] = now
            row = used_rows[k]
            if self.cad is not None and self.cad.calm and (not self.known[i] or self.row_differs(i, row)):
                self.cad.content_change(self, i, row, now)
            self.set_row(i, row)
            self.known[i] = True
            if users:
                self._users(i, users[k])
            f = free_rows[k]
            has_free = all(a >= b for a, b in zip(f, need, strict=True)) and any(a > _EPS for a in f)
            if self.forward and (has_free or self.fwd_free[i]):
                fwd.append(k)
            else:
                rest.append(k)
            self.fwd_free[i] = has_free
        if fwd:
            self.stats["forwarded"] += len(fwd)
            free = np.asarray(msg.free, dtype=np.float64)
            if len(fwd) == len(msg.nodes):
                self.port.send(self.arbitrator, ForwardedHeartbeat(self.index, self.group, msg.nodes, free, msg.acks))
            else:
                self.port.send(
                    self.arbitrator,
                    ForwardedHeartbeat(
                        self.index, self.group, [msg.nodes[k] for k in fwd], free[fwd], [msg.acks[k] for k in fwd]
                    ),
                )
        if rest:
            self.stats["answered"] += len(rest)
            nodes = [msg.nodes[k] for k in rest]
            cad = self.cad
            if cad is not None and not cad.eager:  # fast-forward: the reply only ends the nodes' wait (cadence.py)
                cad.groups[self.index].replies_due(nodes, now + cad.d_tn)
                cad.count(HeartbeatReply, 1)
            else:
                self.port.send(self.group, HeartbeatReply(nodes))

    def _heartbeat1(self, msg: Heartbeat, now: float) -> None:
        """:meth:`_heartbeat` of one node's heartbeat (the common case), step for step."""
        free, used = msg.free[0], msg.used[0]
        self.on_message_hb1(
            (
                msg.nodes[0],
                free if type(free) is list else free.tolist(),
                used if type(used) is list else used.tolist(),
                msg.acks[0],
                msg.users[0] if msg.users else None,
            ),
            now,
        )

    def on_message_hb1(self, hb: tuple, now: float) -> None:
        """One node's heartbeat ``(node, free row, used row, ack, per-user usage or None)``: what :meth:`_heartbeat`
        does with a :class:`Heartbeat` of one node, step for step. Node managers deliver their periodic heartbeats
        here directly in the simulator (``SimPort.route``: the same event, no message object)."""
        node, free, row, ack, users = hb
        if self.heard(node, free, row, ack, self.has_free(free, self.need), now, users):
            return
        cad = self.cad
        if cad is not None and not cad.eager:  # fast-forward: the reply only ends the node's wait (cadence.py)
            nm = cad.groups[self.index]
            nm._vr[node - nm.lo].append(now + cad.d_tn)  # nm.replies_due([node], now + cad.d_tn)
            cad.count(HeartbeatReply, 1)
        else:
            self.port.send(self.group, HeartbeatReply([node]))

    def heard(
        self,
        node: int,
        free: list[float],
        row: list[float],
        ack: int,
        has_free: bool,
        now: float,
        users: dict | None = None,
    ) -> bool:
        """One node's heartbeat (``has_free``: its free row holds the smallest allocation and something is free):
        the view is updated and the heartbeat forwarded to the arbitrator (True: the arbitrator replies) or answered
        (False: counted here; the reply is the caller's)."""
        i = node - self.lo
        st = self.stats
        st["heartbeats"] += 1
        if self.n_dead and self.dead[i]:
            st["heartbeats_from_dead"] += 1
            forward = False
        else:
            self.last_seen[i] = now
            cad = self.cad
            if cad is not None and cad.calm and (not self.known[i] or self.row_differs(i, row)):
                cad.content_change(self, i, row, now)
            self.set_row(i, row)
            self.known[i] = True
            if users is not None:
                self._users(i, users)
            forward = self.forward and (has_free or self.fwd_free[i])
            self.fwd_free[i] = has_free
        if forward:
            st["forwarded"] += 1
            self.port.send(
                self.arbitrator,
                ForwardedHeartbeat(self.index, self.group, [node], np.array([free], dtype=np.float64), [ack]),
            )
            return True
        st["answered"] += 1
        return False

    def _users(self, i: int, new: dict) -> None:
        old = self.node_users[i]
        if not old and not new:
            return
        uu = self.user_used
        for u, v in old.items():
            uu[u] = uu[u] - v
        for u, v in new.items():
            p = uu.get(u)
            uu[u] = v.copy() if p is None else p + v
        self.node_users[i] = new

    # --- timers ------------------------------------------------------------------------------------------------
    def on_timer(self, key: Hashable, now: float) -> None:
        kind = key[0]
        if kind == "vhb":
            self._virtual_forward(key, now)
        elif kind == "stats":
            cad = self.cad
            if cad is not None and self.index == 0 and not cad.eager:
                cad.maybe_calm(now)  # statistics that carry no news become virtual (cadence.py)
            self._send_stats()
            if cad is None or not cad.calm:
                self.port.set_timer(self.stats_interval, ("stats",))
        elif kind == "alive":
            self.port.send(self.supervisor, Alive(self.address))
            self.port.set_timer(self.alive_interval, ("alive",))
        elif kind == "check":
            self._check(now)
            if self.check_chain is not None and not self.cad.eager:
                self._check_at = None
                self._arm_check(now)
            else:
                self.port.set_timer(self.check_interval, ("check",))

    def _report(self, r: Report) -> None:
        self.unacked[r.rid] = r
        self.port.send(self.arbitrator, r)

    def _check(self, now: float) -> None:
        silent = (~self.dead) & (now - np.array(self.last_seen) > self.node_timeout)
        if self.cad is not None and silent.any():
            silent &= np.asarray(self.cad.groups[self.index].dormant) == 0  # heard from, virtually
        if silent.any():
            idx = np.flatnonzero(silent)
            self.dead[idx] = True
            self.n_dead = int(self.dead.sum())
            for i in idx.tolist():
                self.known[i] = False
                self.set_row(i, [0.0] * len(self._tu))
                self.fwd_free[i] = False
                for u, v in self.node_users[i].items():
                    self.user_used[u] = self.user_used[u] - v
                self.node_users[i] = {}
            self.stats["nodes_lost"] += int(idx.size)
            self._rid += 1
            self._report(Report(self.index, self._rid, "nodes", nodes=(idx + self.lo).tolist()))
        lost = [a for a, (_, _, last) in self.jms.items() if now - last > self.jm_timeout]
        if lost and self.check_chain is not None and not self.cad.eager:
            lost = [a for a in lost if not self.cad.covers(a, self.index)]  # heard from, virtually
        for a in lost:
            self.uncovered.pop(a, None)
        for a in lost:
            job, att, _ = self.jms.pop(a)
            self.stats["jms_lost"] += 1
            self._rid += 1
            self._report(Report(self.index, self._rid, "jm", job=job, attempt=att))
        for r in list(self.unacked.values()):  # resend what the arbitrator has not acknowledged
            if r.rid <= self._rid - len(lost) - (1 if silent.any() else 0):
                self.stats["reports_resent"] += 1
                self.port.send(self.arbitrator, r)

    # --- fast-forward: forwarding the virtual heartbeats of dormant nodes (cadence.py) ----------------------------
    def vf_changed(self, now: float) -> None:
        """Forwarding turned on or off, or the dormant nodes with free resources changed: (re)arm the next virtual
        heartbeat to forward (while forwarding is on)."""
        vf = self._vf
        if vf is not None:
            self.port.cancel_timer(vf[4])
            self._vf = None
        if self.forward:
            self._vf_arm(now, -1)

    def vf_added(self, i: int, now: float) -> None:
        """Dormant node ``i`` (local to the node managers) joined the free wheel, or its rank changed: what
        :meth:`vf_changed` does, without a rescan when the armed heartbeat stays the first one.

        The armed heartbeat is the smallest key over the wheel (every key a first arrival after the last rearm, none
        of which has come yet), so only node ``i``'s own key can displace it; if ``i`` is the armed node itself, its
        key changed: rescan."""
        vf = self._vf
        if vf is None or not self.forward or vf[2] == i:
            self.vf_changed(now)
            return
        key = self._vf_key(i, now, -1)
        if key < vf[:4]:
            self.port.cancel_timer(vf[4])
            arrival, rank_, _, tick = key
            self._vf = (arrival, rank_, i, tick, self.port.set_timer_at(arrival, ("vhb", i, rank_, tick)))

    def vf_removed(self, i: int, now: float) -> None:
        """Dormant node ``i`` left the free wheel: :meth:`vf_changed`, without a rescan unless ``i`` was armed (the
        smallest key over the others is still the armed one)."""
        vf = self._vf
        if vf is not None and self.forward and vf[2] != i:
            return
        self.vf_changed(now)

    def _vf_key(self, i: int, after: float, after_rank: int) -> tuple[float, int, int, float]:
        """``(arrival, rank, node, tick)`` of node ``i``'s first virtual heartbeat arriving after ``(after,
        after_rank)``: the key :meth:`_vf_arm` computes for each node of the wheel (the same steps)."""
        nm = self.cad.groups[self.index]
        d = self.cad.d_nt
        y = after - d - 8 * math.ulp(after)
        h = nm.hb
        memo_k, memo_t = nm.memo_k, nm.memo_t
        per = self.cad.hb
        t = nm.anchor[i]  # nm.next_virtual(i, y)
        if not t > y:
            k0 = memo_k[i]
            t0 = memo_t[i]
            if t0 > y:
                k0, t0 = 0, t
            fast = per._fast
            if fast is not None and fast[0] <= t0 and y + h < fast[1]:  # last_le(t0, y), its first case
                delta = fast[2]
                k = int((y - t0) / delta)
                while k > 0 and t0 + k * delta > y:
                    k -= 1
                while t0 + (k + 1) * delta <= y:
                    k += 1
                t = t0 + k * delta
            else:
                k, t = per.last_le(t0, y)
            memo_k[i] = k0 + k
            memo_t[i] = t
            t = t + h
        arr = t + d
        r = nm.rank[i]
        while arr < after or (arr == after and r <= after_rank):  # (arr, r) <= (after, after_rank)
            t = t + h
            arr = t + d
        return arr, r, i, t

    def _vf_arm(self, after: float, after_rank: int) -> None:
        """Arm the first virtual heartbeat of a dormant node with free resources arriving after (after, after_rank).

        :meth:`FreeWheel.next_after` with the key ``(arrival, rank, node, tick)`` of each candidate's first virtual
        heartbeat after ``(after, after_rank)`` (``NodeManagers.next_virtual``), the loops inlined."""
        nm = self.cad.groups[self.index]
        wheel = nm.wheel
        if not wheel.size:
            return
        d = self.cad.d_nt
        y = after - d - 8 * math.ulp(after)
        if nm.kernels and not nm.pywheel:  # the packed wheel's compiled scan (k_vf_arm), unless a lookup is not covered
            st = self.cad.state
            out = self._vf_out
            r = st.vf_arm(*st.kargs, self.index, after, after_rank, y, d, out)
            if r != FALLBACK:
                if r == VF_FOUND:
                    arrival, rank_, i, tick = out.tolist()
                    i = int(i)
                    rank_ = int(rank_)
                    handle = self.port.set_timer_at(arrival, ("vhb", i, rank_, tick))
                    self._vf = (arrival, rank_, i, tick, handle)
                return
        h = nm.hb
        anchor = nm.anchor
        memo_k, memo_t = nm.memo_k, nm.memo_t
        rank = nm.rank
        per = self.cad.hb
        last_le = per.last_le
        nb = wheel.nb
        width = wheel.h / nb
        buckets = wheel.buckets
        b0 = (wheel.bucket(y) - 2) % nb
        best = None
        ba = math.inf  # best[0]
        # A node's ticks keep its anchor's phase to within rounding far below ``margin`` when every tick is an exact
        # addition (a power-of-two period; at most one rounding per binade crossed): its next tick after ``y`` is
        # ``y + gap`` (``gap`` in (0, h] from the phases) to within ``margin`` unless the gap is near 0 or h.
        margin = 1e-6 if math.frexp(h)[0] == 0.5 and h < 16.0 else math.inf
        limit = math.inf if margin < math.inf else -math.inf  # prefilter only with an exact period
        yph = math.fmod(y, h)
        fmod = math.fmod
        for j in range(nb + 4):
            if (j - 4) * width > ba - y:
                break
            for i in buckets[(b0 + j) % nb]:
                t = anchor[i]  # nm.next_virtual(i, y)
                if not t > y:
                    if ba < limit:  # its next tick (its anchor's phase) arrives clearly after the best: skip it
                        gap = fmod(t, h) - yph
                        if gap <= 0.0:
                            gap += h
                        if margin < gap < h - margin and y + gap + d > ba + margin:
                            continue
                    k0 = memo_k[i]
                    t0 = memo_t[i]
                    if t0 > y:
                        k0, t0 = 0, t
                    fast = per._fast
                    if fast is not None and fast[0] <= t0 and y + h < fast[1]:  # last_le(t0, y), its first case
                        delta = fast[2]
                        k = int((y - t0) / delta)
                        while k > 0 and t0 + k * delta > y:
                            k -= 1
                        while t0 + (k + 1) * delta <= y:
                            k += 1
                        t = t0 + k * delta
                    else:
                        k, t = last_le(t0, y)
                    memo_k[i] = k0 + k
                    memo_t[i] = t
                    t = t + h
                arr = t + d
                if arr > ba:
                    continue  # its key (arrival first) cannot be the smallest
                r = rank[i]
                while arr < after or (arr == after and r <= after_rank):  # (arr, r) <= (after, after_rank)
                    t = t + h
                    arr = t + d
                if arr < ba or (arr == ba and (r, i, t) < best[1:]):
                    ba = arr
                    best = (arr, r, i, t)
        if best is None:
            return
        arrival, rank_, i, tick = best
        handle = self.port.set_timer_at(arrival, ("vhb", i, rank_, tick))
        self._vf = (arrival, rank_, i, tick, handle)

    def _virtual_forward(self, key: tuple, now: float) -> None:
        """A dormant node's virtual heartbeat arrives while forwarding is on: forward it (a real message)."""
        _, i, rank, tick = key
        self._vf = None
        nm = self.cad.groups[self.index]
        if self.forward and nm.dormant[i] and nm.rank[i] == rank:
            self.stats["heartbeats"] += 1
            self.stats["forwarded"] += 1
            self.last_seen[nm.lo + i - self.lo] = now
            nm.fwd_tick[i] = tick
            nm.fwd_count[i] += 1
            nodes, free, acks = nm.virtual_row(i)
            self.port.send(self.arbitrator, ForwardedHeartbeat(self.index, self.group, nodes, free, acks))
        if self.forward:
            self._vf_arm(now, rank)

    # --- fast-forward: checks only when they can find something, virtual alive signals (cadence.py) -----------
    def _arm_check(self, now: float) -> None:
        """Arm the first check that can detect something: an unacknowledged report to resend, or a job-manager
        entry no running job manager refreshes (the first check after its timeout). Dormant nodes and running job
        managers are heard from, so no other check finds anything."""
        cc = self.check_chain
        due = math.inf
        if self.unacked:
            due = cc.next_after(now)
        for last in self.uncovered.values():
            t = cc.next_after(max(now, last + self.jm_timeout - 2 * self.check_interval))
            while not t - last > self.jm_timeout:
                t = t + self.check_interval
            due = min(due, t)
        armed = self._check_at
        if armed is not None and armed[0] == due:
            return
        if armed is not None:
            self.port.cancel_timer(armed[1])
            self._check_at = None
        if due < math.inf:
            self._check_at = (due, self.port.set_timer_at(due, ("check",)))

    def jm_covered(self, address: str) -> None:
        """A job manager at ``address`` started: it heartbeats this tracker (if its node is in this share)."""
        if address in self.uncovered and self.cad.covers(address, self.index):
            del self.uncovered[address]
            self._arm_check(self.cad.engine.now)

    def go_eager(self, now: float) -> None:
        """Fast-forward ends: alive signals and checks are real timers again (cadence.py)."""
        if self.alive_chain is None:
            return
        cad = self.cad
        eager_alive(self, self.alive_chain, cad.d_ts, now)
        armed = self._check_at
        if armed is not None:
            self.port.cancel_timer(armed[1])
            self._check_at = None
        self.port.set_timer_at(self.check_chain.next_after(now), ("check",))

    def settle(self, now: float) -> None:
        """Count the virtual alive signals sent up to ``now`` (end of the run)."""
        if self.alive_chain is not None:
            self.cad.count(Alive, self.alive_chain.count_le(now))

    def _send_stats(self) -> None:
        self.port.send(self.arbitrator, self.content(self.used, self.known))

    def content(self, used: list[list[float]], known: list[bool]) -> TrackerStats:
        """The statistics this tracker reports for the given per-node usage rows and knowledge."""
        used = np.array(used, dtype=np.float64).reshape(self.n, -1)
        known = np.array(known, dtype=bool)
        live = ~self.dead
        total = self.phys[live].sum(axis=0)
        used_sum = used[live & known].sum(axis=0)
        complete = bool(known[live].all())
        users = {u: v.copy() for u, v in self.user_used.items() if (v > _EPS).any()}
        return TrackerStats(self.index, used_sum, total, users, complete)

    def content_at(self, tick: float) -> TrackerStats:
        """What this tracker's statistics said at stats tick ``tick`` (fast-forward: undo the changes logged since)."""
        later = [e for e in self.undo_entries() if e[0] > tick]
        if not later:
            return self.content(self.used, self.known)
        used = [list(r) for r in self.used.tolist()]
        known = list(self.known)
        for _, i, row, kn in reversed(later):
            used[i] = row
            known[i] = kn
        return self.content(used, known)
