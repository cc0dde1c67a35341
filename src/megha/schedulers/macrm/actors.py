"""The arbitrator's scheduler actors (thesis §3.2.2, Figs 3.9-3.10): parallel matching, optimistic commits.

``actors`` scheduler actors serve the central queue in *centralized* mode, and gang requests in any mode: each
takes the next request (policy order), matches it against a copy of the view of free resources
(:func:`~megha.schedulers.macrm.view.match`; ``match_cost`` + ``match_cost_per_task`` × tasks of simulated time),
then commits atomically against the view as it is then — all-or-nothing for gang requests, incremental otherwise;
conflicting placements go back to the queue and are matched again. A request that finds no room is *blocked* until
the view grows (and retried every ``retry_interval``: matching is heuristic). A gang that could not fit even in an
empty cluster is served incrementally instead (resource hoarding).

:class:`SchedulerActors` is a part of :class:`~megha.schedulers.macrm.arbitrator.ResourceArbitrator`: it owns
``idle``, ``busy`` and the retry timer, and commits into the arbitrator's view and outgoing allocations.
"""

from __future__ import annotations

import numpy as np

from megha.schedulers.macrm.messages import (
    Containers,
    select_containers,
)
from megha.schedulers.macrm.queue import Item
from megha.schedulers.macrm.view import match

_EPS = 1e-9


class SchedulerActors:
    """Parallel scheduler actors with optimistic, atomic commits against the view."""

    def _check_gang(self, it: Item) -> None:
        """A gang that could not fit even if every task left the cluster (only the job managers' containers stay)
        would wait forever (resource hoarding): serve it incrementally instead."""
        if not it.gang or self.capacity is None or len(it.tasks) < 2:
            return
        room = self.capacity.copy()
        for rec in self.jobs.values():
            if rec.status == "running" and rec.node >= 0:
                room[rec.node] -= self.jm_demand
        fit = match(room, ~self.view.dead, it.demands, it.masks, self.worker_masks, self.port.rng, best_fit=True)
        if (fit < 0).any():
            it.gang = False
            it.blocked = False
            self.stats["gang_infeasible"] += 1

    def _unblock(self, nodes: list[int]) -> None:
        """Requests blocked for lack of room may fit the nodes whose free resources grew."""
        f = self.view.free[nodes]
        wm = self.worker_masks[nodes]
        for q in self.queues.values():
            for it in q.values():
                if (
                    it.blocked
                    and (((f + _EPS >= it.min_dem).all(axis=1)) & ((np.uint32(it.and_mask) & ~wm) == 0)).any()
                ):
                    it.blocked = False
                    self._dirty = True

    def _dispatch(self, now: float) -> None:
        """Give idle scheduler actors the next requests (policy order) they can match."""
        self._dirty = False
        if not self.idle or not self.n_queued:
            return
        central = self.central
        view = self.view
        usable = view.usable()
        for it in self._items():
            if not self.idle:
                break
            if it.taken or it.blocked or it.removed or not (central or it.gang) or it.sampling is not None:
                continue
            if it.is_jm and not self._jm_room():
                continue
            snap = view.free.copy()  # the actor's copy of the view of free resources
            nodes = match(snap, usable, it.demands, it.masks, self.worker_masks, self.port.rng)
            matched = nodes >= 0
            if it.gang and not matched.all():  # a tighter packing may still hold the whole gang
                nodes = match(
                    view.free.copy(), usable, it.demands, it.masks, self.worker_masks, self.port.rng, best_fit=True
                )
                matched = nodes >= 0
            if (it.gang and not matched.all()) or not matched.any():
                it.blocked = True  # wait until the view grows (and retry now and then: matching is heuristic)
                self.stats["actor_match_failures"] += 1
                if not self._retry_armed:
                    self._retry_armed = True
                    self.port.set_timer(self.retry_interval, ("retry",))
                continue
            actor = self.idle.pop()
            it.taken = True
            self.busy[actor] = (it, nodes)
            self.stats["actor_matches"] += 1
            self.port.set_timer(self.match_cost + self.match_cost_per_task * len(it.tasks), ("commit", actor))

    def _commit(self, actor: int, now: float) -> None:
        it, nodes = self.busy.pop(actor)
        self.idle.append(actor)
        it.taken = False
        if it.removed:
            self._dispatch(now)
            return
        if it.is_jm and not self._jm_room():
            self._dispatch(now)
            return
        sel = np.flatnonzero(nodes >= 0)
        ok = self.view.commit(nodes[sel], it.demands[sel], all_or_nothing=it.gang)
        n_bad = int((~ok).sum())
        if n_bad:
            self.stats["commit_conflicts"] += n_bad
            self.stats["conflict_retries"] += 1
            if it.gang:
                self.stats["gang_conflicts"] += 1
        good = sel[ok].tolist()
        if good:
            self.stats["actor_commits"] += 1
            rows = [(it, k) for k in good]
            c = self._allocate(rows, [int(nodes[k]) for k in good], now)
            self._add_out(c)
            self._take_from(it, good)
        self._dispatch(now)

    def _add_out(self, c: Containers) -> None:
        if not len(c):
            return
        g = self.group_of[c.nodes]
        for grp in np.unique(g).tolist():
            idx = np.flatnonzero(g == grp).tolist()
            self._out.setdefault(grp, []).append(c if len(idx) == len(c) else select_containers(c, idx))
