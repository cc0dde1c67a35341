"""Task lifecycles from event streams (Google 2011 ``task_events``, Google 2019 ``instance_events``).

A task (job id, task index) runs from a SCHEDULE event to the next FINISH event of the same task; EVICT, FAIL,
KILL and LOST end an attempt without a result, and the task may be scheduled again. Each task that finished
becomes one Megha task with

* duration = FINISH time − the matching SCHEDULE time;
* CPU and memory request = the SCHEDULE event's request columns (the FINISH event's when those are empty);
* priority = the SCHEDULE event's priority.

A job arrives at its first SUBMIT event (or its first SCHEDULE when its submission precedes the trace).
Tasks whose SCHEDULE is at time 0 were running before the trace started (unknown duration) and are dropped, as
are attempts that did not finish; the counts are reported.

Matching is vectorized per batch. When the input is in time order (Google publishes the 2011 parts that way) the
matcher keeps only the tasks that are running between batches, so memory is bounded by the running tasks plus
the output. When a batch goes back in time (an unordered export), :class:`OutOfOrder` is raised and the converter
switches to ``ordered=False``: the SCHEDULE/FINISH/end events are kept (about 40 bytes each; other events are
dropped) and matched after one sort at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

INT64_MAX = np.iinfo(np.int64).max
_IDX_BITS = 24


class OutOfOrder(Exception):
    """The event stream is not in time order (see the module docstring)."""


@dataclass(frozen=True)
class EventCodes:
    submit: int
    schedule: int
    finish: int
    ends: tuple[int, ...]


@dataclass
class MatchedTasks:
    """Finished tasks: per task its job slot, index, schedule/finish times (µs), requests and priority."""

    job_slot: np.ndarray
    index: np.ndarray
    t_schedule: np.ndarray
    t_finish: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    priority: np.ndarray
    job_ids: np.ndarray  # source job id of each slot
    job_submit: np.ndarray  # first SUBMIT time of each slot (INT64_MAX if none seen)
    job_user: np.ndarray  # user code of each slot (-1 unknown)
    dropped: dict[str, int] = field(default_factory=dict)
    events: int = 0


class EventMatcher:
    """Feed batches of events; get the finished tasks."""

    def __init__(self, codes: EventCodes, ordered: bool = True, max_jobs: int | None = None) -> None:
        self.codes = codes
        self.ordered = ordered
        self.max_jobs = max_jobs if ordered else None  # unordered: first appearance is not arrival order
        self.slot_of: dict[int, int] = {}
        self.job_ids: list[int] = []
        self.job_submit = np.full(1024, INT64_MAX, dtype=np.int64)
        self.job_user = np.full(1024, -1, dtype=np.int64)
        self.pending: dict[int, tuple[int, float, float, int]] = {}
        self.out: list[tuple[np.ndarray, ...]] = []
        self.kept: list[tuple[np.ndarray, ...]] = []  # unordered mode: relevant events
        self.t_max = -1
        self.events = 0
        self.pos = 0
        self.dropped = {
            "attempts_not_finished": 0,
            "started_before_trace": 0,
            "finish_without_schedule": 0,
            "negative_duration": 0,
            "events_of_later_jobs": 0,
        }
        self.relevant = np.array([codes.schedule, codes.finish, *codes.ends], dtype=np.int64)

    # -- job bookkeeping -----------------------------------------------------------------------------------
    def _slots(self, job: np.ndarray) -> np.ndarray:
        uniq, inv = np.unique(job, return_inverse=True)
        slot_of = self.slot_of
        slots = np.empty(uniq.size, dtype=np.int64)
        limit = self.max_jobs
        for i, j in enumerate(uniq.tolist()):
            s = slot_of.get(j)
            if s is None:
                if limit is not None and len(self.job_ids) >= limit:
                    slots[i] = -1
                    continue
                s = slot_of[j] = len(self.job_ids)
                self.job_ids.append(j)
            slots[i] = s
        n = len(self.job_ids)
        if n > self.job_submit.size:
            size = max(n, 2 * self.job_submit.size)
            self.job_submit = np.concatenate([self.job_submit, np.full(size - self.job_submit.size, INT64_MAX)])
            self.job_user = np.concatenate([self.job_user, np.full(size - self.job_user.size, -1)])
        return slots[inv.ravel()]

    def feed(
        self,
        t: np.ndarray,
        job: np.ndarray,
        idx: np.ndarray,
        typ: np.ndarray,
        cpu: np.ndarray,
        mem: np.ndarray,
        prio: np.ndarray,
        user: np.ndarray,
    ) -> None:
        """One batch of events (numpy arrays of equal length; NaN / -1 for missing values)."""
        n = t.size
        self.events += n
        if n == 0:
            return
        if (idx < 0).any() or (idx >= 1 << _IDX_BITS).any():
            bad = int(idx[(idx < 0) | (idx >= 1 << _IDX_BITS)][0])
            raise ValueError(f"task index {bad} out of range 0..{(1 << _IDX_BITS) - 1}")
        real = (t > 0) & (t < INT64_MAX)
        if self.ordered and real.any():
            lo = int(t[real].min())
            if lo < self.t_max:
                raise OutOfOrder(f"event at t={lo} after one at t={self.t_max}")
            self.t_max = max(self.t_max, int(t[real].max()))
        slot = self._slots(job)
        keep = slot >= 0
        if not keep.all():
            self.dropped["events_of_later_jobs"] += int((~keep).sum())
            t, idx, typ, cpu, mem, prio, user, slot = (a[keep] for a in (t, idx, typ, cpu, mem, prio, user, slot))
        codes = self.codes
        sub = typ == codes.submit
        if sub.any():
            np.minimum.at(self.job_submit, slot[sub], t[sub])
        known = user >= 0
        if known.any():
            s = slot[known]
            unset = self.job_user[s] < 0
            self.job_user[s[unset]] = user[known][unset]
        rel = np.isin(typ, self.relevant)
        key = (slot[rel] << _IDX_BITS) | idx[rel]
        pos = np.arange(self.pos, self.pos + n, dtype=np.int64)[: t.size][rel]
        self.pos += n
        ev = (key, t[rel], typ[rel], cpu[rel], mem[rel], prio[rel], pos)
        if self.ordered:
            self._match(*ev)
        else:
            self.kept.append(ev)

    # -- matching -------------------------------------------------------------------------------------------
    def _match(
        self,
        key: np.ndarray,
        t: np.ndarray,
        typ: np.ndarray,
        cpu: np.ndarray,
        mem: np.ndarray,
        prio: np.ndarray,
        pos: np.ndarray,
    ) -> None:
        if key.size == 0:
            return
        c = self.codes
        order = np.lexsort((pos, t, key))
        ks, ts, ty, cs, ms, ps = key[order], t[order], typ[order], cpu[order], mem[order], prio[order]
        first = np.r_[True, ks[1:] != ks[:-1]]
        last = np.r_[ks[1:] != ks[:-1], True]
        fin = ty == c.finish
        prev_sched = np.zeros_like(fin)
        prev_sched[1:] = (ty[:-1] == c.schedule) & ~first[1:]
        # finishes whose schedule is in this batch
        m_in = fin & prev_sched
        i_fin = np.flatnonzero(m_in)
        i_sch = i_fin - 1
        parts = [(ks[i_fin], ts[i_sch], ts[i_fin], cs[i_sch], ms[i_sch], ps[i_sch], cs[i_fin], ms[i_fin], ps[i_fin])]
        # finishes whose schedule came in an earlier batch
        m_carry = fin & first
        if m_carry.any():
            i_c = np.flatnonzero(m_carry)
            got = [self.pending.get(k) for k in ks[i_c].tolist()]
            ok = np.array([g is not None for g in got], dtype=bool)
            if ok.any():
                vals = [g for g in got if g is not None]
                i_ok = i_c[ok]
                parts.append(
                    (
                        ks[i_ok],
                        np.array([v[0] for v in vals], dtype=np.int64),
                        ts[i_ok],
                        np.array([v[1] for v in vals]),
                        np.array([v[2] for v in vals]),
                        np.array([v[3] for v in vals], dtype=np.int64),
                        cs[i_ok],
                        ms[i_ok],
                        ps[i_ok],
                    )
                )
            self.dropped["finish_without_schedule"] += int((~ok).sum())
        self.dropped["finish_without_schedule"] += int((fin & ~first & ~prev_sched).sum())
        # attempts ended by EVICT/FAIL/KILL/LOST right after a SCHEDULE
        self.dropped["attempts_not_finished"] += int((~fin & (ty != c.schedule) & prev_sched).sum())
        for k, t_s, t_f, c_s, m_s, p_s, c_f, m_f, p_f in parts:
            if k.size == 0:
                continue
            cpu_v = np.where(np.isnan(c_s), c_f, c_s)
            mem_v = np.where(np.isnan(m_s), m_f, m_s)
            pr = np.where(p_s < 0, p_f, p_s)
            before = t_s <= 0
            neg = (t_f < t_s) & ~before
            good = ~before & ~neg
            self.dropped["started_before_trace"] += int(before.sum())
            self.dropped["negative_duration"] += int(neg.sum())
            self.out.append(
                (
                    k[good] >> _IDX_BITS,
                    k[good] & ((1 << _IDX_BITS) - 1),
                    t_s[good],
                    t_f[good],
                    cpu_v[good],
                    mem_v[good],
                    pr[good],
                )
            )
        # carry running tasks to the next batch
        pend = self.pending
        ended_carry = first & ~fin & (ty != c.schedule)
        if ended_carry.any():
            self.dropped["attempts_not_finished"] += sum(k in pend for k in ks[ended_carry].tolist())
        sched_last = last & (ty == c.schedule)
        if sched_last.any():
            i = np.flatnonzero(sched_last)
            pend.update(
                zip(
                    ks[i].tolist(),
                    zip(ts[i].tolist(), cs[i].tolist(), ms[i].tolist(), ps[i].tolist(), strict=True),
                    strict=True,
                )
            )
        other_last = last & (ty != c.schedule)
        if other_last.any():
            for k in ks[other_last].tolist():
                pend.pop(k, None)

    def result(self) -> MatchedTasks:
        """The finished tasks (call once, after the last batch)."""
        if not self.ordered and self.kept:
            ev = [np.concatenate(cols) for cols in zip(*self.kept, strict=True)]
            self.kept = []
            self._match(*ev)
        self.dropped["attempts_not_finished"] += len(self.pending)
        self.pending = {}
        n = len(self.job_ids)
        if self.out:
            cols = [np.concatenate(c) for c in zip(*self.out, strict=True)]
        else:
            cols = [np.zeros(0, dtype=np.int64)] * 4 + [np.zeros(0)] * 2 + [np.zeros(0, dtype=np.int64)]
        return MatchedTasks(
            job_slot=cols[0],
            index=cols[1],
            t_schedule=cols[2],
            t_finish=cols[3],
            cpu=cols[4],
            mem=cols[5],
            priority=cols[6],
            job_ids=np.array(self.job_ids, dtype=np.int64),
            job_submit=self.job_submit[:n].copy(),
            job_user=self.job_user[:n].copy(),
            dropped={k: v for k, v in self.dropped.items() if v},
            events=self.events,
        )
