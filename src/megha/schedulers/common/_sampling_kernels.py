"""Compiled probe sampling (numba): all of a job's probe draws in one call, the same numbers as NumPy's.

:meth:`~megha.schedulers.common.sampling.ProbeSampler.sample` made a few NumPy calls per task group (a
``Generator.choice`` without replacement, ``np.full``, ...), about 20 µs each. :func:`sample_groups` does the same
steps in one compiled call and draws from the same ``numpy.random.Generator`` through its bit generator, exactly
as NumPy does:

* a bounded integer in ``[0, rng]`` is Lemire's method on the bit generator's 32-bit output (``next_uint32``, whose
  spare half-word the bit generator keeps) when ``rng < 2**32 - 1`` — what ``Generator.integers`` and the
  internal draws of ``Generator.choice`` and ``shuffle`` do for such ranges;
* ``choice(a, k, replace=False)`` (no ``p``, ``shuffle=True``): Floyd's algorithm over ``len(a)`` with an
  open-addressing set of ``2**ceil(log2(1.2 k))`` slots, then a Fisher-Yates shuffle of the ``k`` picks; for a
  population above 10,000 with ``k > len(a) // 50``, a partial Fisher-Yates shuffle of the whole range instead,
  whose last ``k`` entries are the picks.

Tests compare both with NumPy draw for draw (outputs and the generator's state after). Imported lazily so the CLI
starts fast.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit
from numba.extending import intrinsic

_U32_MAX = 0xFFFFFFFF


def bit_source(rng: np.random.Generator) -> tuple[int, int]:
    """``(next_uint32, state)``: the address of the generator's 32-bit draw function and the state it takes (NumPy's
    documented ``BitGenerator.ctypes`` interface). Passing these two integers costs nothing, where numba's own
    unboxing of a ``Generator`` argument costs ~25 µs per call; the generator must outlive their use."""
    iface = rng.bit_generator.ctypes
    return int(ctypes.cast(iface.next_uint32, ctypes.c_void_p).value), int(iface.state_address)


@intrinsic
def next_uint32(typingctx: Any, fn: Any, state: Any) -> tuple[Any, Any]:
    """Call the bit generator's ``next_uint32(state)`` given both as integers (see :func:`bit_source`)."""
    from numba.core import types

    sig = types.uint32(fn, state)

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: tuple) -> ir.Instruction:
        fnptr, st = args
        voidp = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [voidp])
        f = builder.inttoptr(fnptr, fnty.as_pointer())
        return builder.call(f, [builder.inttoptr(st, voidp)])

    return sig, codegen


@njit(cache=True, inline="always")
def _bounded(bitgen: tuple, rng: int) -> int:
    """A uniform integer in ``[0, rng]`` (``0 <= rng < 2**32 - 1``), as NumPy draws it (Lemire, 32-bit)."""
    if rng == 0:
        return np.int64(0)
    excl = np.uint64(rng + 1)
    m = np.uint64(next_uint32(bitgen[0], bitgen[1])) * excl
    left = m & np.uint64(_U32_MAX)
    if left < excl:
        threshold = np.uint64((_U32_MAX - rng) % (rng + 1))
        while left < threshold:
            m = np.uint64(next_uint32(bitgen[0], bitgen[1])) * excl
            left = m & np.uint64(_U32_MAX)
    return np.int64(m >> np.uint64(32))


@njit(cache=True)
def _choice_idx(bitgen: tuple, pop: int, k: int, out: np.ndarray, at: int) -> None:
    """Positions ``Generator.choice(pop, k, replace=False)`` returns, written to ``out[at:at + k]``."""
    if k == 0:
        return
    if pop > 10000 and k > pop // 50:  # NumPy's tail shuffle
        idx = np.arange(pop)
        first = max(pop - k, 1)
        for i in range(pop - 1, first - 1, -1):
            j = _bounded(bitgen, i)
            tmp = idx[j]
            idx[j] = idx[i]
            idx[i] = tmp
        for i in range(k):
            out[at + i] = idx[pop - k + i]
        return
    # Floyd's algorithm, with the same open-addressing set (its probe order decides nothing but must not fail)
    set_size = int(1.2 * k)
    mask = 1
    while mask < set_size:
        mask = (mask << 1) | 1
    empty = np.uint64(0xFFFFFFFFFFFFFFFF)
    hs = np.full(mask + 1, empty, dtype=np.uint64)
    for j in range(pop - k, pop):
        val = _bounded(bitgen, j)
        loc = val & mask
        while hs[loc] != empty and hs[loc] != np.uint64(val):
            loc = (loc + 1) & mask
        if hs[loc] == empty:
            hs[loc] = val
            out[at + j - pop + k] = val
        else:
            loc = j & mask
            while hs[loc] != empty:
                loc = (loc + 1) & mask
            hs[loc] = j
            out[at + j - pop + k] = j
    for i in range(k - 1, 0, -1):  # shuffle=True
        j = _bounded(bitgen, i)
        tmp = out[at + j]
        out[at + j] = out[at + i]
        out[at + i] = tmp


@njit(cache=True)
def sample_groups(
    fn: int,
    state: int,
    worker_masks: np.ndarray,
    gmasks: np.ndarray,
    groups: np.ndarray,
    flat: np.ndarray,
    exact_limit: float,
    seen: np.ndarray,
    stamp: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Probe targets of one job's task groups: what ``ProbeSampler.sample`` computes, in its order and with its
    draws. ``groups`` holds four rows, one entry per group: the distinct probes wanted, the probes needed, the
    workers satisfying its mask (``elig_count``), and where their ids start in ``flat`` (``elig_start``, in
    increasing order; given for every group drawn exactly — fewer eligible workers than ``exact_limit``, i.e.
    ``exact_below * n``, or than twice its distinct probes — or probed again, more probes needed than distinct
    ones; else -1). ``(fn, state)``: the generator's :func:`bit_source`. ``seen`` (one entry per worker) and
    ``stamp[0]`` are scratch kept between calls: entries below the stamp are free. Returns ``(workers, groups)``."""
    bitgen = (fn, state)
    want = groups[0]
    need = groups[1]
    elig_count = groups[2]
    elig_start = groups[3]
    n = worker_masks.size
    G = gmasks.size
    cap = 0
    for g in range(G):
        cap += max(min(want[g], elig_count[g]), need[g])
    out_w = np.empty(cap, dtype=np.int64)
    out_g = np.empty(cap, dtype=np.int32)
    pos = 0
    distinct = np.zeros(G, dtype=np.int64)
    rej = np.empty(G, dtype=np.int64)
    n_rej = 0
    # 1. groups drawn exactly, in group order; the others wait for the rejection pass
    for g in range(G):
        e = elig_count[g]
        s = min(want[g], e)
        distinct[g] = s
        if s <= 0:
            continue
        if e < exact_limit or 2 * s > e:
            st = elig_start[g]
            if s == e:
                for i in range(s):
                    out_w[pos + i] = flat[st + i]
            else:
                _choice_idx(bitgen, e, s, out_w, pos)
                for i in range(s):
                    out_w[pos + i] = flat[st + out_w[pos + i]]
            for i in range(s):
                out_g[pos + i] = g
            pos += s
        else:
            rej[n_rej] = g
            n_rej += 1
    # 2. rejection: uniform draws over all workers, one block per group, then each group's first distinct fits
    if n_rej:
        r = np.empty(n_rej, dtype=np.int64)
        total = 0
        for i in range(n_rej):
            g = rej[i]
            r[i] = math.ceil(distinct[g] * n / elig_count[g] * 1.3) + 8
            total += r[i]
        cands = np.empty(total, dtype=np.int64)
        for i in range(total):  # Generator.integers(0, n, total)
            cands[i] = _bounded(bitgen, n - 1)
        base = stamp[0]  # seen[w] == base + i + 1: candidate w taken by rejection group i
        stamp[0] = base + n_rej + 1
        got = np.zeros(n_rej, dtype=np.int64)
        block = np.empty(n_rej, dtype=np.int64)  # where each group's picks start in the output
        c = 0
        for i in range(n_rej):
            g = rej[i]
            gm = gmasks[g]
            s = distinct[g]
            block[i] = pos
            for _ in range(r[i]):
                w = cands[c]
                c += 1
                if got[i] < s and (gm & ~worker_masks[w]) == 0 and seen[w] != base + i + 1:
                    seen[w] = base + i + 1
                    out_w[pos] = w
                    out_g[pos] = g
                    pos += 1
                    got[i] += 1
        for i in range(n_rej):  # unlucky draws: complete exactly among the eligible workers not drawn
            g = rej[i]
            more = distinct[g] - got[i]
            if more <= 0:
                continue
            for j in range(block[i], block[i] + got[i]):  # the group's picks (later groups reuse the stamps)
                seen[out_w[j]] = -1
            gm = gmasks[g]
            rest = np.empty(n, dtype=np.int64)
            k = 0
            for w in range(n):
                if (gm & ~worker_masks[w]) == 0 and seen[w] != -1:
                    rest[k] = w
                    k += 1
            for j in range(block[i], block[i] + got[i]):
                seen[out_w[j]] = 0
            _choice_idx(bitgen, k, more, out_w, pos)
            for j in range(more):
                out_w[pos + j] = rest[out_w[pos + j]]
                out_g[pos + j] = g
            pos += more
    # 3. fewer eligible workers than tasks: probe some of them again (Generator.integers(0, e, extra))
    for g in range(G):
        extra = need[g] - distinct[g]
        if extra > 0:
            st = elig_start[g]
            e = elig_count[g]
            for j in range(extra):
                out_w[pos + j] = flat[st + _bounded(bitgen, e - 1)]
                out_g[pos + j] = g
            pos += extra
    return out_w[:pos], out_g[:pos]
