"""Constraint matching on packed bit vectors, shared by Megha's GMs and PigeonC's masters.

:class:`SegmentedIndex` lays an ordered list of *segments* (Megha partitions, Pigeon groups) out on one
packed vector, each segment starting on a 64-bit word boundary, and keeps one vector per placement
constraint (bit set = the worker has that machine constraint). For a task with constraint mask ``m`` the
AND of its constraint vectors is computed once and cached, so matching a task against an availability
vector is one AND over the whole datacenter followed by a per-segment "any" (Algorithm 1 of both papers).

Worker choice inside a segment is a :class:`Policy`: ``random`` (uniform over suitable free workers),
``min-constraints`` (the suitable worker with the fewest machine constraints, lowest index on ties — the
IoT 2023 paper's best-fit heuristic) or ``first`` (lowest index; deterministic, for tests).

:class:`WaitQueue` is a FIFO of waiting tasks indexed by constraint mask: handing a freed worker to the
first queued task that fits costs a few vector operations over the *distinct* masks waiting, not a scan
of the whole queue.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import numpy as np

from megha.model import bitset
from megha.model.constraints import MASK_DTYPE, NUM_CONSTRAINTS, popcount


class Policy(StrEnum):
    """How a worker is chosen among the suitable free workers of a segment."""

    RANDOM = "random"
    MIN_CONSTRAINTS = "min-constraints"
    FIRST = "first"


class FastRandom:
    """Uniform integers from a seeded generator, drawn in blocks (one numpy call per 4,096 draws).

    Deterministic for a given generator state; much cheaper per draw than ``Generator.integers``.
    """

    __slots__ = ("_buf", "_i", "rng")

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._buf: list[float] = []
        self._i = 0

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``."""
        if self._i >= len(self._buf):
            self._buf = self.rng.random(4096).tolist()
            self._i = 0
        u = self._buf[self._i]
        self._i += 1
        return min(int(u * n), n - 1)

    def peek(self) -> float:
        """The uniform number in ``[0, 1)`` that the next :meth:`below` will use, not consumed (see :meth:`skip`)."""
        if self._i >= len(self._buf):
            self._buf = self.rng.random(4096).tolist()
            self._i = 0
        return self._buf[self._i]

    def skip(self) -> None:
        """Consume the number :meth:`peek` returned (``below(n)`` is then ``min(int(u * n), n - 1)`` of it)."""
        self._i += 1


class SegmentedIndex:
    """Packed constraint vectors over segments of workers (each segment word-aligned)."""

    def __init__(self, segment_workers: list[np.ndarray], worker_masks: np.ndarray, cache_size: int = 1 << 16):
        """``segment_workers[s]`` lists the (global) worker ids of segment ``s`` in bit order."""
        self.n_segments = len(segment_workers)
        sizes = np.array([len(s) for s in segment_workers], dtype=np.int64)
        words = (sizes + 63) // 64
        self.seg_size = sizes
        self.seg_word_start = np.zeros(self.n_segments + 1, dtype=np.int64)
        np.cumsum(words, out=self.seg_word_start[1:])
        self.n_words = int(self.seg_word_start[-1])
        self.n_bits = self.n_words * 64
        self.uniform_words = int(words[0]) if words.size and (words == words[0]).all() else 0
        n_workers_total = int(worker_masks.size)
        self.bit_of_worker = np.full(n_workers_total, -1, dtype=np.int64)
        self.worker_at_bit = np.full(self.n_bits, -1, dtype=np.int64)
        self.segment_of_bit = np.repeat(np.arange(self.n_segments), words * 64)
        for s, ws in enumerate(segment_workers):
            ws = np.asarray(ws, dtype=np.int64)
            base = int(self.seg_word_start[s]) * 64
            bits = base + np.arange(ws.size)
            self.worker_at_bit[bits] = ws
            self.bit_of_worker[ws] = bits
        valid = self.worker_at_bit >= 0
        wm = np.zeros(self.n_bits, dtype=MASK_DTYPE)
        wm[valid] = worker_masks[self.worker_at_bit[valid]]
        self.mask_at_bit = wm
        # weight for the min-constraints policy; padding bits never get chosen
        self.weight_at_bit = np.where(valid, popcount(wm), NUM_CONSTRAINTS + 1).astype(np.int32)
        self.valid = bitset.pack(valid)
        self.constraint_vectors = np.stack(
            [bitset.pack(valid & ((wm >> np.uint32(k)) & 1).astype(bool)) for k in range(NUM_CONSTRAINTS)]
        )
        self._cache: dict[int, np.ndarray] = {}
        self._cache_size = cache_size

    # --- static matching ------------------------------------------------------------------------------
    def static_vector(self, mask: int) -> np.ndarray:
        """Workers (anywhere) that have every constraint in ``mask`` (cached, do not modify)."""
        v = self._cache.get(mask)
        if v is None:
            m = int(mask)
            if m >> NUM_CONSTRAINTS:  # a constraint no worker can have
                v = np.zeros(self.n_words, dtype=np.uint64)
                m = 0
            else:
                v = self.valid.copy()
            k = 0
            while m:
                if m & 1:
                    np.bitwise_and(v, self.constraint_vectors[k], out=v)
                m >>= 1
                k += 1
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[mask] = v
        return v

    def candidates(self, avail: np.ndarray, mask: int) -> np.ndarray:
        """Available workers that satisfy ``mask`` (a new vector)."""
        return np.bitwise_and(avail, self.static_vector(mask))

    def segments_with(self, cand: np.ndarray) -> np.ndarray:
        """Boolean per segment: does ``cand`` have a set bit in it."""
        if self.uniform_words:
            return cand.reshape(self.n_segments, self.uniform_words).any(axis=1)
        return np.logical_or.reduceat(cand != 0, self.seg_word_start[:-1])

    def pick(self, cand: np.ndarray, seg: int, policy: Policy, rnd: FastRandom) -> int:
        """A worker (global id) of segment ``seg`` among the set bits of ``cand``, or -1."""
        lo = int(self.seg_word_start[seg])
        return self.pick_in(cand[lo : int(self.seg_word_start[seg + 1])], lo, policy, rnd)

    def pick_in(self, sub: np.ndarray, lo: int, policy: Policy, rnd: FastRandom) -> int:
        """:meth:`pick` given only the segment's candidate words ``sub`` and the segment's first word ``lo``."""
        if policy is Policy.RANDOM:
            b = _random_bit(sub.tolist(), rnd)
        elif policy is Policy.MIN_CONSTRAINTS:
            b = bitset.min_weight_set(sub, self.weight_at_bit[lo * 64 : lo * 64 + sub.size * 64])
        else:
            b = bitset.first_set(sub)
        if b < 0:
            return -1
        return int(self.worker_at_bit[lo * 64 + b])

    # --- availability helpers -------------------------------------------------------------------------
    def all_available(self) -> np.ndarray:
        """A fresh bit vector with every worker of the index set."""
        return self.valid.copy()

    def none_available(self) -> np.ndarray:
        """A fresh bit vector with no worker set."""
        return np.zeros(self.n_words, dtype=np.uint64)

    def set_worker(self, vec: np.ndarray, worker: int, value: bool) -> None:
        """Set (``value`` true) or clear worker ``worker``'s bit in ``vec``."""
        b = int(self.bit_of_worker[worker])
        if value:
            bitset.set_bit(vec, b)
        else:
            bitset.clear_bit(vec, b)

    def has_worker(self, vec: np.ndarray, worker: int) -> bool:
        """Whether worker ``worker``'s bit is set in ``vec``."""
        return bitset.test_bit(vec, int(self.bit_of_worker[worker]))

    def pack_workers(self, workers_bool: np.ndarray) -> np.ndarray:
        """Pack a boolean array indexed by global worker id into this index's bit layout."""
        bits = np.zeros(self.n_bits, dtype=bool)
        valid = self.worker_at_bit >= 0
        bits[valid] = workers_bool[self.worker_at_bit[valid]]
        return bitset.pack(bits)


def _random_bit(words: list[int], rnd: FastRandom) -> int:
    """Uniformly random set bit of a short list of 64-bit words (Python ints), or -1."""
    counts = [w.bit_count() for w in words]
    total = sum(counts)
    if total == 0:
        return -1
    r = rnd.below(total)
    for j, c in enumerate(counts):
        if r < c:
            return j * 64 + bitset.nth_set_in_word(words[j], r)
        r -= c
    return -1  # pragma: no cover


_INF = np.iinfo(np.int64).max
_FF = None


def _first_fit() -> Callable[[np.ndarray, np.ndarray, int, int], int]:
    """The compiled first-fit kernel (numba), loaded on first use."""
    global _FF
    if _FF is None:
        from megha.model._kernels import first_fit

        _FF = first_fit
    return _FF


class WaitQueue:
    """FIFO of waiting tasks, indexed by constraint mask for fast first-fit on a freed worker.

    Entries are arbitrary objects (typically tuples); each is queued with its constraint mask. Order is
    FIFO by a sequence number; :meth:`push_front` puts an entry before everything queued (a task returned
    by an inconsistency goes back to the head of the queue).
    """

    def __init__(self) -> None:
        self._slot_of: dict[int, int] = {}
        self._masks = np.zeros(16, dtype=MASK_DTYPE)
        self._heads = np.full(16, _INF, dtype=np.int64)
        self._buckets: list[deque] = []
        self._n_slots = 0
        self._back = 0
        self._front = 0
        self._len = 0
        self._empty_slots = 0

    def __len__(self) -> int:
        return self._len

    def _slot(self, mask: int) -> int:
        s = self._slot_of.get(mask)
        if s is None:
            s = self._n_slots
            if s == self._masks.size:
                self._masks = np.resize(self._masks, 2 * s)
                heads = np.full(2 * s, _INF, dtype=np.int64)
                heads[:s] = self._heads
                self._heads = heads
            self._masks[s] = mask
            self._heads[s] = _INF
            self._buckets.append(deque())
            self._slot_of[mask] = s
            self._n_slots += 1
            self._empty_slots += 1
        return s

    def push_back(self, entry: Any, mask: int) -> None:
        """Queue ``entry`` (placement constraint ``mask``) behind every entry."""
        s = self._slot(int(mask))
        self._back += 1
        b = self._buckets[s]
        if not b:
            self._heads[s] = self._back
            self._empty_slots -= 1
        b.append((self._back, entry))
        self._len += 1

    def push_front(self, entry: Any, mask: int) -> None:
        """Queue ``entry`` (placement constraint ``mask``) ahead of every entry."""
        s = self._slot(int(mask))
        self._front -= 1
        b = self._buckets[s]
        if not b:
            self._empty_slots -= 1
        b.appendleft((self._front, entry))
        self._heads[s] = self._front
        self._len += 1

    def _take(self, s: int, i: int = 0) -> Any:
        b = self._buckets[s]
        if i == 0:
            _, entry = b.popleft()
        else:
            _, entry = b[i]
            del b[i]
        self._len -= 1
        if b:
            self._heads[s] = b[0][0]
        else:
            self._heads[s] = _INF
            self._empty_slots += 1
            if self._empty_slots > 64 and self._empty_slots * 2 > self._n_slots:
                self._compact()
        return entry

    def _compact(self) -> None:
        keep = [s for s in range(self._n_slots) if self._buckets[s]]
        masks = self._masks[keep]
        heads = self._heads[keep]
        self._buckets = [self._buckets[s] for s in keep]
        n = len(keep)
        self._masks = np.zeros(max(16, 2 * n), dtype=MASK_DTYPE)
        self._heads = np.full(max(16, 2 * n), _INF, dtype=np.int64)
        self._masks[:n] = masks
        self._heads[:n] = heads
        self._slot_of = {int(m): i for i, m in enumerate(masks.tolist())}
        self._n_slots = n
        self._empty_slots = 0

    def pop_first_fitting(self, worker_mask: int) -> Any | None:
        """Remove and return the earliest entry whose mask the worker satisfies, or None."""
        if not self._len:
            return None
        s = _first_fit()(self._masks, self._heads, self._n_slots, ~int(worker_mask) & 0xFFFFFFFF)
        if s < 0:
            return None
        return self._take(s)

    def pop_first_fitting_inv(self, inverted_worker_mask: int) -> Any | None:
        """:meth:`pop_first_fitting` given ``~worker_mask & 0xFFFFFFFF`` as an int (saves the conversion)."""
        if not self._len:
            return None
        s = (
            _FF(self._masks, self._heads, self._n_slots, inverted_worker_mask)
            if _FF
            else _first_fit()(self._masks, self._heads, self._n_slots, inverted_worker_mask)
        )
        if s < 0:
            return None
        return self._take(s)

    def pop_first_fitting_where(self, worker_mask: int, accept: Callable[[Any], bool], limit: int = 64) -> Any | None:
        """Like :meth:`pop_first_fitting`, but the entry must also pass ``accept(entry)`` (e.g. resources).

        Looks at up to ``limit`` entries per constraint mask; returns None when none is accepted.
        """
        if not self._len:
            return None
        n = self._n_slots
        compat = np.flatnonzero(((self._masks[:n] & ~np.uint32(worker_mask)) == 0) & (self._heads[:n] != _INF))
        best = None
        for s in compat.tolist():
            for i, (seq, entry) in enumerate(self._buckets[s]):
                if i >= limit or (best is not None and seq >= best[0]):
                    break
                if accept(entry):
                    best = (seq, s, i)
                    break
        if best is None:
            return None
        return self._take(best[1], best[2])

    def pop_front(self) -> Any | None:
        """Remove and return the earliest entry, or None."""
        if not self._len:
            return None
        s = int(self._heads[: self._n_slots].argmin())
        return self._take(s)

    def pop_heads(self, k: int) -> list[tuple[int, int, object]]:
        """Remove the earliest entry of each of the ``k`` constraint masks queued longest, in FIFO order.

        Returns ``(seq, mask, entry)`` items; :meth:`unpop` puts them back where they were. Unlike ``k`` calls of
        :meth:`pop_front`, this yields ``k`` *different* constraint masks (candidates for a preemption that
        are not all blocked by the same missing constraint).
        """
        n = self._n_slots
        if not self._len or k <= 0:
            return []
        heads = self._heads[:n]
        live = int((heads != _INF).sum())
        k = min(k, live)
        pick = np.argpartition(heads, k - 1)[:k] if k < n else np.arange(n)
        pick = pick[np.argsort(heads[pick], kind="stable")]
        return self._take_heads([int(m) for m in self._masks[pick].tolist()])

    def pop_heads_fitting_any(self, worker_masks: np.ndarray, k: int) -> list[tuple[int, int, object]]:
        """:meth:`pop_heads` restricted to constraint masks that at least one of ``worker_masks`` satisfies."""
        n = self._n_slots
        if not self._len or k <= 0 or not len(worker_masks):
            return []
        from megha.model._kernels import suited_slots

        inv = ~np.asarray(worker_masks, dtype=MASK_DTYPE)
        ok = np.flatnonzero(suited_slots(self._masks, self._heads, n, inv))
        if ok.size > k:
            ok = ok[np.argpartition(self._heads[ok], k - 1)[:k]]
        ok = ok[np.argsort(self._heads[ok], kind="stable")]
        return self._take_heads([int(m) for m in self._masks[ok].tolist()])

    def _take_heads(self, masks: list[int]) -> list[tuple[int, int, object]]:
        out = []
        for m in masks:  # by mask: taking an entry may compact the slots
            s = self._slot_of[m]
            seq = int(self._heads[s])
            out.append((seq, m, self._take(s)))
        return out

    def unpop(self, items: list[tuple[int, int, object]]) -> None:
        """Put back entries taken by :meth:`pop_heads`, each at its old place in the FIFO order."""
        for seq, m, entry in items:
            s = self._slot(m)
            b = self._buckets[s]
            if not b:
                self._empty_slots -= 1
            i = 0
            while i < len(b) and b[i][0] < seq:
                i += 1
            b.insert(i, (seq, entry))
            self._heads[s] = b[0][0]
            self._len += 1

    def entries(self) -> list[Any]:
        """All entries in FIFO order (for inspection and tests; not fast)."""
        items = [it for b in self._buckets for it in b]
        return [e for _, e in sorted(items, key=lambda x: x[0])]

    def remove_where(self, pred: Callable[[Any], bool]) -> list[Any]:
        """Remove and return every entry for which ``pred(entry)`` is true."""
        out = []
        for s, b in enumerate(self._buckets):
            if not b:
                continue
            kept = deque(it for it in b if not pred(it[1]))
            removed = len(b) - len(kept)
            if removed:
                out.extend(e for _, e in b if pred(e))
                self._buckets[s] = kept
                self._len -= removed
                if kept:
                    self._heads[s] = kept[0][0]
                else:
                    self._heads[s] = _INF
                    self._empty_slots += 1
        return out
