"""Job-manager containers placed by random sampling (``jm_placement="sampling"``): the thesis's Sparrow (ch. 4).

Instead of waiting for a forwarded heartbeat, the arbitrator samples ``jm_samples`` random live nodes for each queued
job-manager container (power of two choices); the least loaded responder gets it, and a round without responders
is sampled again after ``sampling_timeout``. Rounds end as the job managers' rounds do (``round_end``).

:class:`JMSampling` is a part of :class:`~megha.schedulers.macrm.arbitrator.ResourceArbitrator`: it owns the open
rounds ``_jm_sampling`` and their tokens.
"""

from __future__ import annotations

import numpy as np

from megha.schedulers.macrm.messages import (
    SampleDecision,
    SampleInquiry,
    SampleReply,
    empty_containers,
)
from megha.schedulers.macrm.policy import round_action
from megha.schedulers.macrm.queue import Item

_EPS = 1e-9


class JMSampling:
    """Sampling rounds for job-manager containers (the thesis's Sparrow)."""

    def _sample_jms(self, now: float) -> None:
        """Sample ``jm_samples`` random live nodes for each queued job-manager container (power of two choices);
        the least loaded responder gets it, a round without responders is sampled again after the timeout. The
        round ends as the job managers' rounds do (``round_end``; one responder is "enough")."""
        live = np.flatnonzero(~self.view.dead)
        if live.size == 0:
            return
        pending = len(self._jm_sampling)
        for it in self._items():
            if not it.is_jm or it.taken or it.removed or it.sampling is not None:
                continue
            if (
                self.jm_limit is not None
                and ((self.jm_used > _EPS).any() or pending)
                and not (self.jm_used + (pending + 1) * self.jm_demand <= self.jm_limit + _EPS).all()
            ):
                break
            k = min(self.jm_samples, int(live.size))
            nodes = np.sort(self.port.rng.choice(live, size=k, replace=False))
            self._jm_token += 1
            token = ("arb", self.epoch, self._jm_token)
            it.sampling = token
            grp = self.group_of[nodes]
            for g in np.unique(grp).tolist():
                self.port.send(
                    self.groups[g],
                    SampleInquiry(self.address, it.job, it.attempt, token, nodes[grp == g].tolist(), self.jm_demand),
                )
            timer = self.port.set_timer(self.sampling_timeout, ("jmsample", token))
            self._jm_sampling[token] = {
                "item": it,
                "n": int(k),
                "resp": [],
                "free": [],
                "timer": timer,
                "deferred": False,
            }
            self.stats["jm_samplings"] += 1
            pending += 1

    def _jm_reply(self, msg: SampleReply, now: float) -> None:
        s = self._jm_sampling.get(msg.token)
        if s is None:  # too late (or a previous incarnation's): release the nodes holding for us
            self._jm_cancel(msg.token, list(msg.nodes))
            return
        s["resp"].extend(msg.nodes)
        s["free"].append(np.asarray(msg.free, dtype=np.float64) / np.maximum(np.asarray(msg.capacity), _EPS))
        act = round_action(self.round_end, len(s["resp"]), s["n"], lambda: True)  # any responder holds the container
        if act == "place":
            self._jm_decide(msg.token, now)
        elif act == "defer" and not s["deferred"]:
            s["deferred"] = True  # answers arriving at this same instant are still compared
            self.port.set_timer(0.0, ("jmsample", msg.token))

    def _jm_cancel(self, token: tuple, nodes: list[int], skip: int = -1) -> None:
        grp = self.group_of[nodes] if nodes else np.zeros(0, dtype=np.int64)
        for g in np.unique(grp).tolist():
            sel = [n for n, x in zip(nodes, grp.tolist(), strict=True) if x == g and n != skip]
            if sel:
                self.port.send(self.groups[g], SampleDecision(token, empty_containers(self.n_res), sel))

    def _jm_decide(self, token: tuple, now: float) -> None:
        s = self._jm_sampling.pop(token)
        self.port.cancel_timer(s["timer"])
        it: Item = s["item"]
        it.sampling = None
        resp: list[int] = s["resp"]
        if it.removed or it.taken or self.central or not resp:
            self._jm_cancel(token, resp)
            if not resp:
                self.stats["jm_sampling_failures"] += 1
            self._jm_scan = True  # sample again (or leave it to the scheduler actors in centralized mode)
            return
        free_frac = np.concatenate(s["free"]).min(axis=1)
        node = int(resp[int(np.argmax(free_frac))])  # the least loaded responder
        c = self._allocate([(it, 0)], [node], now)
        self._take_from(it, [0])
        g = int(self.group_of[node])
        self.port.send(
            self.groups[g], SampleDecision(token, c, [n for n in resp if n != node and int(self.group_of[n]) == g])
        )
        others = [n for n in resp if int(self.group_of[n]) != g]
        self._jm_cancel(token, others)
