"""The arbitrator's view of free resources (the rack-actor, thesis §3.2.2) and the scheduler actors' matching.

:class:`FreeView` holds, per node, the free resources of its last forwarded heartbeat minus the allocations the
arbitrator committed since that the node had not yet seen (allocations carry a per-node sequence number that
heartbeats acknowledge), so the view never counts the same room twice. Commits are atomic (one message at a time)
and optimistic (Fig. 3.10): a scheduler actor matches a request against a *copy* of the view, and its commit is
checked against the view as it is at commit time — placements that no longer fit are conflicts. All-or-nothing
(gang) commits apply every placement or none; incremental commits apply those that fit.
"""

from __future__ import annotations

from collections import deque

import numpy as np

_EPS = 1e-9


class FreeView:
    """Free resources of the nodes whose heartbeats the arbitrator has received."""

    def __init__(self, n_nodes: int, n_res: int) -> None:
        self.free = np.zeros((n_nodes, n_res))
        self.present = np.zeros(n_nodes, dtype=bool)  # a heartbeat was received and the node is alive
        self.dead = np.zeros(n_nodes, dtype=bool)
        self.n_dead = 0
        self.inflight: list[deque | None] = [None] * n_nodes  # (seq, demand) not yet acknowledged by the node
        self.next_seq = [0] * n_nodes
        self.version = 0

    def _pending(self, node: int, ack: int) -> np.ndarray | None:
        q = self.inflight[node]
        if not q:
            return None
        while q and q[0][0] <= ack:
            q.popleft()
        if not q:
            return None
        return np.sum([d for _, d in q], axis=0)

    def heartbeat(self, nodes: list[int], free: np.ndarray, acks: list[int]) -> list[int]:
        """Apply forwarded heartbeats; returns the nodes whose free resources grew (new matches may exist)."""
        grew: list[int] = []
        for k, node in enumerate(nodes):
            if self.dead[node]:
                continue
            f = free[k]
            pend = self._pending(node, acks[k])
            if pend is not None:
                f = f - pend
            # (f > free[node] + eps).any() on floats: a heartbeat is one node's row, where NumPy's calls cost more
            if not self.present[node] or any(
                a > b + _EPS for a, b in zip(f.tolist(), self.free[node].tolist(), strict=True)
            ):
                grew.append(node)
            self.free[node] = f
            self.present[node] = True
        if grew:
            self.version += 1
        return grew

    def fits(self, node: int, demand: np.ndarray) -> bool:
        """Whether ``demand`` fits in what the view holds free on ``node`` (a node not heard from fits nothing)."""
        return bool(self.present[node] and (self.free[node] + _EPS >= demand).all())

    def assign(self, node: int, demand: np.ndarray) -> int:
        """Book ``demand`` on ``node``; returns the allocation's sequence number."""
        self.free[node] -= demand
        self.next_seq[node] += 1
        seq = self.next_seq[node]
        q = self.inflight[node]
        if q is None:
            q = self.inflight[node] = deque()
        q.append((seq, np.array(demand, dtype=np.float64)))
        return seq

    def rejected(self, node: int, seq: int, real_free: np.ndarray) -> bool:
        """A node refused allocation ``seq`` and reported its real free resources; returns True if it grew."""
        if self.dead[node]:
            return False
        pend = self._pending(node, seq)
        f = real_free if pend is None else real_free - pend
        grew = bool((f > self.free[node] + _EPS).any())
        self.free[node] = f
        if grew:
            self.version += 1
        return grew

    def kill(self, node: int) -> None:
        """``node`` failed: it holds nothing from now on and its allocations in flight are dropped."""
        self.n_dead += not self.dead[node]
        self.dead[node] = True
        self.present[node] = False
        self.free[node] = 0.0
        self.inflight[node] = None

    def usable(self) -> np.ndarray:
        """The nodes the scheduler actors may match against: heard from and alive."""
        return self.present & ~self.dead

    def commit(self, nodes: np.ndarray, demands: np.ndarray, all_or_nothing: bool) -> np.ndarray:
        """Atomically apply placements ``nodes[i] ← demands[i]`` that still fit; returns which were applied.

        All-or-nothing: if any placement conflicts, none is applied.
        """
        n = len(nodes)
        ok = np.zeros(n, dtype=bool)
        if all_or_nothing:
            need: dict[int, np.ndarray] = {}
            for i in range(n):
                w = int(nodes[i])
                need[w] = need[w] + demands[i] if w in need else demands[i].copy()
            if all(self.fits(w, d) for w, d in need.items()):
                ok[:] = True
            return ok
        for i in range(n):
            ok[i] = self.fits(int(nodes[i]), demands[i])
            if ok[i]:
                self.free[int(nodes[i])] -= demands[i]  # provisional: the caller books them with assign()
        for i in np.flatnonzero(ok).tolist():
            self.free[int(nodes[i])] += demands[i]
        return ok


def match(
    snap: np.ndarray,
    usable: np.ndarray,
    demands: np.ndarray,
    masks: np.ndarray,
    worker_masks: np.ndarray,
    rng: np.random.Generator,
    best_fit: bool = False,
) -> np.ndarray:
    """Place each task on a node of the view copy ``snap`` (modified in place) with room for it; -1 = no room.

    Tasks with the same demand and mask are placed together, the groups with the fewest suitable nodes first. A node
    is chosen at random among the suitable ones (randomness keeps parallel actors from piling onto the same nodes),
    or, with ``best_fit``, the suitable node with the least room first (packs tightly: used to retry a gang).
    """
    k = demands.shape[0]
    out = np.full(k, -1, dtype=np.int64)
    if k == 0:
        return out
    key = np.concatenate([demands, masks.astype(np.float64)[:, None]], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    groups = []
    for g in range(uniq.shape[0]):
        idx = np.flatnonzero(inv == g)
        m = int(masks[idx[0]])
        cand = usable.copy()
        if m:
            cand &= (np.uint32(m) & ~worker_masks) == 0
        groups.append((int(cand.sum()), g, idx, cand))
    groups.sort(key=lambda x: (x[0], x[1]))
    for _, _, idx, cand in groups:
        d = demands[idx[0]]
        pos = d > _EPS
        todo = idx.size
        at = 0
        while todo > 0:
            if pos.any():
                slots = np.floor((snap[:, pos] + _EPS) / d[pos]).min(axis=1)
                slots = np.where(cand, slots, 0).astype(np.int64)
            else:
                slots = np.where(cand, todo, 0).astype(np.int64)
            nodes = np.flatnonzero(slots > 0)
            if nodes.size == 0:
                break
            if best_fit:
                room = snap[nodes][:, pos].sum(axis=1) if pos.any() else np.zeros(nodes.size)
                node = int(nodes[np.argmin(room)])
                take = np.full(min(todo, int(slots[node])), node, dtype=np.int64)
            else:
                take = rng.permutation(nodes)[:todo]
            out[idx[at : at + take.size]] = take
            np.subtract.at(snap, take, d)
            at += take.size
            todo -= take.size
    return out
