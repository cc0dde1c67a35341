"""Compiled (numba) scans of the packing policies under placement constraints.

With constraints a server-side or job-side query can no longer stop at the first candidate of a sorted index:
incompatible candidates are skipped, and with thousands of distinct constraint masks no per-mask index stays
small. These kernels do the skipping as one tight loop over flat arrays (server free room and complemented
masks, or the queued jobs' sizes and masks) and stop at the first hit where the query allows it.

Masks are passed as plain ints (numpy scalars would send every call through numba's slow dispatch path).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_INF = np.iinfo(np.int64).max


@njit(cache=True, nogil=True)
def k_first_fit_blocks(room: np.ndarray, inv: np.ndarray, bmax: np.ndarray, lo: int, x: int, mask: int) -> int:
    """Lowest server ``s >= lo`` with ``room[s] >= x`` and ``mask & inv[s] == 0``, or -1, skipping the blocks of 64
    servers whose room bound ``bmax`` is below ``x``; a block scanned whole gets its exact maximum as the new bound
    (bounds may be stale only upwards)."""
    m = np.uint32(mask & 0xFFFFFFFF)
    n = room.size
    for b in range(lo >> 6, bmax.size):
        if bmax[b] < x:
            continue
        start = b * 64
        hi = min(start + 64, n)
        whole = start >= lo
        if not whole:
            start = lo
        mx = 0
        for s in range(start, hi):
            r = room[s]
            if r > mx:
                mx = r
            if r >= x and (inv[s] & m) == 0:
                return s
        if whole:
            bmax[b] = mx
    return -1


@njit(cache=True, nogil=True)
def k_best_fit_blocks(room: np.ndarray, inv: np.ndarray, bmax: np.ndarray, x: int, mask: int) -> int:
    """Server with the least ``room >= x`` compatible with ``mask`` (lowest id on ties), or -1, skipping the blocks of
    64 servers whose room bound ``bmax`` is below ``x``; a block scanned to its end gets its exact maximum as the new
    bound (bounds may be stale only upwards)."""
    m = np.uint32(mask & 0xFFFFFFFF)
    n = room.size
    best = -1
    br = _INF
    for b in range(bmax.size):
        if bmax[b] < x:
            continue
        lo = b * 64
        hi = min(lo + 64, n)
        mx = 0
        for s in range(lo, hi):
            r = room[s]
            if r > mx:
                mx = r
            if x <= r < br and (inv[s] & m) == 0:
                best = s
                br = r
                if r == x:  # nothing is tighter, and a lower id with the same room would have come first
                    return best
        bmax[b] = mx
    return best


@njit(cache=True, nogil=True)
def k_first_fit_any(
    room: np.ndarray, inv: np.ndarray, lo: int, hi: int, xs: np.ndarray, masks: np.ndarray, alive: np.ndarray
) -> int:
    """Lowest server in ``[lo, hi)`` that fits at least one live job ``i`` (``xs[i]``, ``masks[i]``), or -1."""
    k = xs.size
    xmin = _INF
    for i in range(k):
        if alive[i] and xs[i] < xmin:
            xmin = xs[i]
    if xmin == _INF:
        return -1
    for s in range(lo, hi):
        r = room[s]
        if r < xmin:
            continue
        v = inv[s]
        for i in range(k):
            if alive[i] and xs[i] <= r and (masks[i] & v) == 0:
                return s
    return -1


@njit(cache=True, nogil=True)
def k_best_job(
    size: np.ndarray,
    mask: np.ndarray,
    typ: np.ndarray,
    alive: np.ndarray,
    lo: int,
    top: int,
    room: int,
    inv: int,
    t: int,
) -> tuple[int, int]:
    """``(best, first)``: the position in ``[lo, top)`` of the largest live job (first among equals) with size <=
    room, ``mask & inv == 0`` and type ``t`` (any type if ``t < 0``), or -1; and the position of the first such job
    of any size (``top`` if none): no live job in ``[lo, first)`` fits. A hit of size ``room`` ends the scan: no
    later job can be larger."""
    v = np.uint32(inv & 0xFFFFFFFF)
    best = -1
    first = top
    bx = 0
    for p in range(lo, top):
        if alive[p]:
            x = size[p]
            if bx < x <= room and (mask[p] & v) == 0 and (t < 0 or typ[p] == t):
                if best < 0:
                    first = p
                best = p
                bx = x
                if x == room:
                    break
    return best, first


@njit(cache=True, nogil=True)
def k_first_empty_fit(
    empty: np.ndarray, inv: np.ndarray, lo: int, mask_a: int, use_a: bool, mask_b: int, use_b: bool
) -> int:
    """Lowest empty server ``s >= lo`` compatible with job mask ``mask_a`` (if ``use_a``) or ``mask_b`` (if
    ``use_b``), or -1. Blocks of 64 servers are tested without branches first (most servers are busy or do not
    fit); an unused mask is all ones, which only a server with every attribute passes, and that server passes the
    used mask too."""
    if not (use_a or use_b):
        return -1
    a = np.uint32(mask_a & 0xFFFFFFFF) if use_a else np.uint32(0xFFFFFFFF)
    b = np.uint32(mask_b & 0xFFFFFFFF) if use_b else np.uint32(0xFFFFFFFF)
    n = empty.size
    for start in range(lo, n, 64):
        hi = min(start + 64, n)
        hit = False
        for s in range(start, hi):
            v = inv[s]
            hit |= empty[s] & (((v & a) == 0) | ((v & b) == 0))
        if hit:
            for s in range(start, hi):
                v = inv[s]
                if empty[s] and ((v & a) == 0 or (v & b) == 0):
                    return s
    return -1


@njit(cache=True, nogil=True)
def k_fit_departed(
    size: np.ndarray,
    mask: np.ndarray,
    alive: np.ndarray,
    lo: int,
    hi: int,
    dep_room: np.ndarray,
    dep_inv: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """BF-J's first step: the live jobs at positions in ``[lo, hi)``, in order, each to the tightest of the given
    servers that fits it (first on ties), updating ``dep_room`` in place; returns (job positions, server indexes,
    first) where no live job in ``[lo, first)`` fits any of the servers as given: the first placement's position,
    else ``hi`` (``lo`` if no server has room)."""
    nd = dep_room.size
    pos = np.empty(max(hi - lo, 0), dtype=np.int64)
    srv = np.empty(max(hi - lo, 0), dtype=np.int64)
    k = 0
    top = 0
    for i in range(nd):
        top = max(top, dep_room[i])
    first = hi if top > 0 else lo
    for p in range(lo, hi):
        if top <= 0:
            break
        if not alive[p]:
            continue
        x = size[p]
        if x > top:
            continue
        m = mask[p]
        best = -1
        br = _INF
        for i in range(nd):
            r = dep_room[i]
            if x <= r < br and (m & dep_inv[i]) == 0:
                best = i
                br = r
        if best >= 0:
            if k == 0:
                first = p
            pos[k] = p
            srv[k] = best
            k += 1
            dep_room[best] -= x
            if br == top:
                top = 0
                for i in range(nd):
                    top = max(top, dep_room[i])
    return pos[:k], srv[:k], first


@njit(cache=True, nogil=True)
def k_vqs_room(oth: np.ndarray, avail: np.ndarray, t: int, x: int, server_bits: int) -> np.ndarray:
    """VQS under constraints: the servers of configuration type ``t`` (``oth``) whose configuration room ``avail`` is
    at least ``x``, by room then index, largest first (the order of the unconstrained ``by_avail[t]`` index)."""
    n = oth.size
    k = 0
    for s in range(n):
        if oth[s] == t and avail[s] >= x:
            k += 1
    keys = np.empty(k, dtype=np.int64)
    k = 0
    for s in range(n):
        if oth[s] == t and avail[s] >= x:
            keys[k] = (avail[s] << server_bits) | s
            k += 1
    keys.sort()
    out = np.empty(k, dtype=np.int64)
    mask = (np.int64(1) << server_bits) - 1
    for i in range(k):
        out[i] = keys[k - 1 - i] & mask
    return out


@njit(cache=True, nogil=True)
def k_vqs_next(
    cand: np.ndarray,
    i: int,
    inv: np.ndarray,
    used: np.ndarray,
    avail: np.ndarray,
    oth: np.ndarray,
    nres: np.ndarray,
    hx: np.ndarray,
    hm: np.ndarray,
    r: int,
    unit: int,
) -> int:
    """VQS under constraints: the first position ``p >= i`` of ``cand`` whose server a fill would serve, or -1.

    A server ``s`` is served if it waits for its reserved job (``nres[s]``) and the head of the reserved queue
    ``r`` fits its free room and its mask, or if the head of its configuration's other queue ``oth[s]`` fits its
    configuration's room ``avail[s]``, its free room and its mask. ``hx[t]``/``hm[t]``: size and mask of the head
    of virtual queue ``t`` (``hx[t] < 0``: empty). Servers before the answer would be filled with nothing."""
    rx = hx[r] if r >= 0 else -1
    rm = hm[r] if r >= 0 else 0
    for p in range(i, cand.size):
        s = cand[p]
        v = np.int64(inv[s])
        room = unit - used[s]
        if nres[s] != 0 and 0 <= rx <= room and (rm & v) == 0:
            return p
        o = oth[s]
        if o >= 0:
            x = hx[o]
            if 0 <= x <= avail[s] and x <= room and (hm[o] & v) == 0:
                return p
    return -1


@njit(cache=True, nogil=True)
def k_slot_bits(bits: np.ndarray, k: int, mask: int, on: bool) -> None:
    """Set (``on``) or clear slot ``k``'s bit in the per-mask-bit slot sets ``bits[b]`` of every bit ``b`` of
    ``mask``."""
    w = k >> 6
    one = np.uint64(1) << np.uint64(k & 63)
    for b in range(32):
        if (mask >> b) & 1:
            if on:
                bits[b, w] |= one
            else:
                bits[b, w] &= ~one


#: st[ST_BITS + b]: how many non-empty groups' masks have bit ``b`` (a bit no group has is skipped by the scans)
ST_BITS = 3
ST_LEN = ST_BITS + 32
# the index of a power of two's bit by a de Bruijn multiplication (a float log2 per group cost more)
_DEBRUIJN = np.uint64(0x03F79D71B4CA8B09)
_CTZ = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _CTZ[(((1 << _i) * 0x03F79D71B4CA8B09) & 0xFFFFFFFFFFFFFFFF) >> 58] = _i


@njit(cache=True, nogil=True)
def _bit_index(low: np.uint64) -> int:
    """The index of the single bit set in ``low``."""
    return _CTZ[(low * _DEBRUIJN) >> np.uint64(58)]


@njit(cache=True, nogil=True)
def _count_bits(st: np.ndarray, mask: int, d: int) -> None:
    """Add ``d`` to the per-bit counts of non-empty groups (``st[ST_BITS + b]``) of every bit ``b`` of ``mask``."""
    for b in range(32):
        if (mask >> b) & 1:
            st[ST_BITS + b] += d


@njit(cache=True, nogil=True)
def _compat_words(st: np.ndarray, abits: np.ndarray, inv: int) -> np.ndarray:
    """The non-empty groups' slots whose mask fits a server with complemented mask ``inv``, as words of 64 slots: the
    complement of the union of the per-mask-bit slot sets ``abits[b]`` of ``inv``'s bits (only the bits some group
    has), the slots past the ``st[2]`` non-empty ones cleared. One pass per bit over contiguous words."""
    nact = st[2]
    nw = (nact + 63) >> 6
    good = np.empty(nw, dtype=np.uint64)
    ones = ~np.uint64(0)
    for w in range(nw):
        good[w] = ones
    for b in range(32):
        if (inv >> b) & 1 and st[ST_BITS + b] > 0:
            for w in range(nw):
                good[w] &= ~abits[b, w]
    rest = nact & 63
    if rest:
        good[nw - 1] &= (np.uint64(1) << np.uint64(rest)) - np.uint64(1)
    return good


@njit(cache=True, nogil=True)
def _group_best(st: np.ndarray, abits: np.ndarray, A: np.ndarray, room: int, inv: int, t: int) -> int:
    """Over the non-empty groups of interchangeable jobs: the oldest position of the group with the largest size <=
    room (oldest among equals) whose mask fits ``inv`` and of type ``t`` (any if ``t < 0``), or -1. Only the groups
    whose mask fits are visited (:func:`_compat_words`)."""
    good = _compat_words(st, abits, inv)
    best = -1
    bx = 0
    for w in range(good.size):
        g = good[w]
        while g:
            low = g & (~g + np.uint64(1))
            g ^= low
            k = (w << 6) + _bit_index(low)
            x = A[A_SIZE, k]
            if 0 < x <= room and x >= bx and (t < 0 or A[A_TYP, k] == t):
                h = A[A_HEAD, k]
                if x > bx or h < best:
                    best = h
                    bx = x
    return best


# --- MaskedJobs' state in three packed arrays (one argument each: numba's dispatch costs per argument) -------------
# P[row, position]: the queued jobs
P_SIZE, P_MASK, P_TYP, P_ID, P_ALIVE, P_GRP, P_NEXT = 0, 1, 2, 3, 4, 5, 6
P_ROWS = 7
# G[row, group]: the groups of interchangeable jobs (same size, mask, type)
G_SIZE, G_MASK, G_TYP, G_HEAD, G_TAIL, G_COUNT, G_SLOT, G_ACT = 0, 1, 2, 3, 4, 5, 6, 7
G_ROWS = 8
# A[row, slot]: the non-empty groups, dense (G_ACT[slot] is the group, G_SLOT[group] its slot)
A_SIZE, A_MASK, A_TYP, A_HEAD = 0, 1, 2, 3
A_ROWS = 4
# st: top (next free position), lo (no live job below it), nact (non-empty groups), then per mask bit the number of
# non-empty groups whose mask has it (ST_BITS)


@njit(cache=True, nogil=True)
def _next_untaken(P: np.ndarray, p: int, hi: int) -> int:
    """The next live position after ``p`` in its group's chain that is below ``hi``, or -1 (the jobs a call has taken
    so far are always the oldest of their groups, so the chain after ``p`` holds none of them)."""
    q = P[P_NEXT, p]
    while q >= 0 and q < hi and P[P_ALIVE, q] == 0:
        q = P[P_NEXT, q]
    return q if (q >= 0 and q < hi) else -1


@njit(cache=True, nogil=True)
def k_fit_departed_bits(
    st: np.ndarray,
    prefix: int,
    P: np.ndarray,
    G: np.ndarray,
    A: np.ndarray,
    abits: np.ndarray,
    hi: int,
    servers: np.ndarray,
    room_all: np.ndarray,
    inv_all: np.ndarray,
    out: np.ndarray,
) -> int:
    """:func:`k_fit_departed` on MaskedJobs' state: the live jobs at positions below ``hi``, in insertion order, each
    to the tightest of the ``servers`` (free room ``room_all[s]``, complemented mask ``inv_all[s]``, read, not
    written) that fits it (first on ties); writes ``[job id, index in servers]`` rows in placement order to ``out``
    (room for every live job: each is placed at most once) and returns their number (no array to box on return).

    Rooms only shrink, so the next placement is always the oldest not yet taken job that fits some server: the
    ``prefix`` oldest positions are scanned first (a fitting job there is the oldest), else, per server with room,
    the groups whose mask fits it (the complement of the per-mask-bit slot sets ``abits`` of the server's missing
    attributes) give their oldest job, the group's head or, for a group a job was taken from, the next one."""
    nd = servers.size
    dep_room = np.empty(nd, dtype=np.int64)
    dep_inv = np.empty(nd, dtype=np.int64)
    for d in range(nd):
        dep_room[d] = room_all[servers[d]]
        dep_inv[d] = inv_all[servers[d]]
    k = 0
    lo = st[1]
    top = min(st[0], hi)
    pend = min(top, lo + prefix)
    # groups a job was taken from in this call (active slot -> its next candidate position, -1: none left)
    ovk = np.empty(4, dtype=np.int64)
    ovp = np.empty(4, dtype=np.int64)
    nov = 0
    while True:
        rmax = 0
        for d in range(nd):
            if dep_room[d] > rmax:
                rmax = dep_room[d]
        if rmax <= 0:
            break
        bp = -1
        # 1) the oldest positions, scanned in order (skipping the jobs already taken: none is live in a chain
        # before its group's candidate)
        for p in range(lo, pend):
            if P[P_ALIVE, p] == 0:
                continue
            x = P[P_SIZE, p]
            if x > rmax:
                continue
            kk = G[G_SLOT, P[P_GRP, p]]
            cand = A[A_HEAD, kk]
            for i in range(nov):
                if ovk[i] == kk:
                    cand = ovp[i]
            if cand < 0 or p < cand:  # taken already
                continue
            m = P[P_MASK, p]
            for d in range(nd):
                if x <= dep_room[d] and (m & dep_inv[d]) == 0:
                    bp = p
                    break
            if bp >= 0:
                break
        # 2) the groups, per server with room
        if bp < 0:
            for d in range(nd):
                room = dep_room[d]
                if room <= 0:
                    continue
                words = _compat_words(st, abits, dep_inv[d])
                for w in range(words.size):
                    good = words[w]
                    while good:
                        low = good & (~good + np.uint64(1))
                        good ^= low
                        kk = (w << 6) + _bit_index(low)
                        if A[A_SIZE, kk] > room:
                            continue
                        cand = A[A_HEAD, kk]
                        for i in range(nov):
                            if ovk[i] == kk:
                                cand = ovp[i]
                        if 0 <= cand < top and (bp < 0 or cand < bp):
                            bp = cand
        if bp < 0:
            break
        x = P[P_SIZE, bp]
        m = P[P_MASK, bp]
        best = -1
        br = _INF
        for d in range(nd):
            r = dep_room[d]
            if x <= r < br and (m & dep_inv[d]) == 0:
                best = d
                br = r
        out[k, 0] = P[P_ID, bp]
        out[k, 1] = best
        k += 1
        dep_room[best] -= x
        kk = G[G_SLOT, P[P_GRP, bp]]
        nxt = _next_untaken(P, bp, top)
        found = False
        for i in range(nov):
            if ovk[i] == kk:
                ovp[i] = nxt
                found = True
        if not found:
            if nov == ovk.size:
                a2 = np.empty(2 * nov, dtype=np.int64)
                b2 = np.empty(2 * nov, dtype=np.int64)
                a2[:nov] = ovk
                b2[:nov] = ovp
                ovk = a2
                ovp = b2
            ovk[nov] = kk
            ovp[nov] = nxt
            nov += 1
    return k


@njit(cache=True, nogil=True)
def _mj_link(p: int, g: int, st: np.ndarray, P: np.ndarray, G: np.ndarray, A: np.ndarray, abits: np.ndarray) -> None:
    """Append position ``p`` to group ``g``'s chain; a group that was empty joins the dense active list."""
    P[P_GRP, p] = g
    P[P_NEXT, p] = -1
    if G[G_COUNT, g] == 0:
        G[G_HEAD, g] = p
        k = st[2]
        m = G[G_MASK, g]
        G[G_ACT, k] = g
        G[G_SLOT, g] = k
        A[A_SIZE, k] = G[G_SIZE, g]
        A[A_MASK, k] = m
        A[A_TYP, k] = G[G_TYP, g]
        A[A_HEAD, k] = p
        st[2] = k + 1
        if m:
            k_slot_bits(abits, k, m, True)
            _count_bits(st, m, 1)
    else:
        P[P_NEXT, G[G_TAIL, g]] = p
    G[G_TAIL, g] = p
    G[G_COUNT, g] += 1


@njit(cache=True, nogil=True)
def k_mj_add_many(
    jobs: np.ndarray,
    xs: np.ndarray,
    ms: np.ndarray,
    ts: np.ndarray,
    gs: np.ndarray,
    st: np.ndarray,
    P: np.ndarray,
    G: np.ndarray,
    A: np.ndarray,
    abits: np.ndarray,
) -> np.ndarray:
    """Append jobs at positions ``st[0]...`` in order (the caller made room for all) and link each into its group
    ``gs[i]``; returns their positions."""
    n = jobs.size
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        p = st[0]
        P[P_SIZE, p] = xs[i]
        P[P_MASK, p] = ms[i]
        P[P_TYP, p] = ts[i]
        P[P_ID, p] = jobs[i]
        P[P_ALIVE, p] = 1
        st[0] = p + 1
        _mj_link(p, gs[i], st, P, G, A, abits)
        out[i] = p
    return out


@njit(cache=True, nogil=True)
def k_mj_relink(
    n: int, grps: np.ndarray, st: np.ndarray, P: np.ndarray, G: np.ndarray, A: np.ndarray, abits: np.ndarray
) -> None:
    """Link positions ``0..n-1`` into their groups ``grps`` in order (after a compaction)."""
    for p in range(n):
        _mj_link(p, grps[p], st, P, G, A, abits)


@njit(cache=True, nogil=True)
def k_mj_remove(p: int, st: np.ndarray, P: np.ndarray, G: np.ndarray, A: np.ndarray, abits: np.ndarray) -> None:
    """Unlink the job at position ``p``: its group's oldest live position moves on, an emptied group leaves the
    dense active list (swapped with the last), and ``st[1]`` skips a dead prefix."""
    P[P_ALIVE, p] = 0
    if p == st[1]:
        lo = p + 1
        top = st[0]
        while lo < top and P[P_ALIVE, lo] == 0:
            lo += 1
        st[1] = lo
    g = P[P_GRP, p]
    c = G[G_COUNT, g] - 1
    G[G_COUNT, g] = c
    if c == 0:
        k = G[G_SLOT, g]
        last = st[2] - 1
        h = G[G_ACT, last]
        G[G_ACT, k] = h
        G[G_SLOT, h] = k
        mk = A[A_MASK, k]
        ml = A[A_MASK, last]
        if mk:
            k_slot_bits(abits, k, mk, False)
            _count_bits(st, mk, -1)
        if ml:
            k_slot_bits(abits, last, ml, False)
            if k != last:
                k_slot_bits(abits, k, ml, True)
        for r in range(A_ROWS):
            A[r, k] = A[r, last]
        G[G_SLOT, g] = -1
        st[2] = last
        G[G_HEAD, g] = -1
    elif G[G_HEAD, g] == p:
        q = P[P_NEXT, p]
        while P[P_ALIVE, q] == 0:
            q = P[P_NEXT, q]
        G[G_HEAD, g] = q
        A[A_HEAD, G[G_SLOT, g]] = q


@njit(cache=True, nogil=True)
def k_mj_best(
    st: np.ndarray, prefix: int, P: np.ndarray, A: np.ndarray, abits: np.ndarray, room: int, inv: int, t: int
) -> int:
    """MaskedJobs' query: the id of the largest live job of size <= room (oldest among equals) fitting mask ``inv``
    (of type ``t`` if ``t >= 0``), or -1. The ``prefix`` oldest positions first: a fitting job there that fills the
    room is the answer (no job is larger, and every older one is smaller or does not fit); else the groups decide."""
    p = _mj_best_pos(st, prefix, P, A, abits, room, inv, t)
    return -1 if p < 0 else P[P_ID, p]


@njit(cache=True, nogil=True)
def _mj_best_pos(
    st: np.ndarray, prefix: int, P: np.ndarray, A: np.ndarray, abits: np.ndarray, room: int, inv: int, t: int
) -> int:
    """:func:`k_mj_best`'s answer as a position (-1: none)."""
    if room <= 0:  # every job needs at least one unit
        return -1
    lo = st[1]
    hi = min(st[0], lo + prefix)
    p, _ = k_best_job(P[P_SIZE], P[P_MASK], P[P_TYP], P[P_ALIVE], lo, hi, room, inv, t)
    if p < 0 or P[P_SIZE, p] != room:
        p = _group_best(st, abits, A, room, inv, t)
    return p


@njit(cache=True, nogil=True)
def k_mj_fill(
    st: np.ndarray,
    prefix: int,
    P: np.ndarray,
    G: np.ndarray,
    A: np.ndarray,
    abits: np.ndarray,
    room: int,
    inv: int,
    lims: np.ndarray,
    out: np.ndarray,
) -> int:
    """One server (free ``room``, complemented mask ``inv``) takes queued jobs: for each ``(type, limit)`` row of
    ``lims`` in order, the largest fitting job of that type (any type if ``type < 0``) until ``limit`` of them or none
    fits; each job leaves the queue. Writes ``[job id, type, size]`` rows in placement order to ``out`` (room for
    every live job: each is taken at most once) and returns their number (an int: no array to box on return)."""
    k = 0
    for r in range(lims.shape[0]):
        t = lims[r, 0]
        n = 0
        while n < lims[r, 1]:
            p = _mj_best_pos(st, prefix, P, A, abits, room, inv, t)
            if p < 0:
                break
            x = P[P_SIZE, p]
            out[k, 0] = P[P_ID, p]
            out[k, 1] = P[P_TYP, p]
            out[k, 2] = x
            k += 1
            k_mj_remove(p, st, P, G, A, abits)
            room -= x
            n += 1
    return k


@njit(cache=True, nogil=True)
def _mj_oldest_pos(
    st: np.ndarray, prefix: int, P: np.ndarray, A: np.ndarray, abits: np.ndarray, room: int, inv: int
) -> int:
    """The position of the oldest live job of size <= room whose mask fits ``inv``, or -1: the ``prefix`` oldest
    positions first (every position below ``st[1]`` is dead, so a hit there is the oldest), else the oldest head of
    the non-empty groups whose mask fits (the complement of the per-mask-bit slot sets ``abits`` of ``inv``'s bits)."""
    lo = st[1]
    hi = min(st[0], lo + prefix)
    for p in range(lo, hi):
        if P[P_ALIVE, p] != 0 and P[P_SIZE, p] <= room and (P[P_MASK, p] & inv) == 0:
            return p
    good = _compat_words(st, abits, inv)
    best = -1
    for w in range(good.size):
        g = good[w]
        while g:
            low = g & (~g + np.uint64(1))
            g ^= low
            k = (w << 6) + _bit_index(low)
            if A[A_SIZE, k] <= room:
                h = A[A_HEAD, k]
                if best < 0 or h < best:
                    best = h
    return best


@njit(cache=True, nogil=True)
def k_mj_take_oldest(
    st: np.ndarray,
    prefix: int,
    P: np.ndarray,
    G: np.ndarray,
    A: np.ndarray,
    abits: np.ndarray,
    room: int,
    inv: int,
    out: np.ndarray,
) -> int:
    """One server (free ``room``, complemented mask ``inv``) takes the queued jobs in insertion order, each that fits
    what room is left (BF-J's step over the servers with departures when there is one such server: a job that does
    not fit now never fits later, rooms only shrink); each job leaves the queue. Writes ``[job id, size]`` rows in
    placement order to ``out`` (room for every live job) and returns their number."""
    k = 0
    while room > 0:
        p = _mj_oldest_pos(st, prefix, P, A, abits, room, inv)
        if p < 0:
            break
        x = P[P_SIZE, p]
        out[k, 0] = P[P_ID, p]
        out[k, 1] = x
        k += 1
        k_mj_remove(p, st, P, G, A, abits)
        room -= x
    return k


@njit(cache=True, nogil=True)
def k_best_fit_take_many(
    room: np.ndarray,
    inv: np.ndarray,
    bmax: np.ndarray,
    jobs: np.ndarray,
    st: np.ndarray,
    P: np.ndarray,
    G: np.ndarray,
    A: np.ndarray,
    abits: np.ndarray,
    out: np.ndarray,
) -> int:
    """BF-J over queued jobs in order, as a loop of :func:`k_best_fit_blocks` calls would do it: each job (row ``i`` of
    ``jobs``: ``[position in MaskedJobs, size, mask]``) goes to the compatible server with the least room that fits
    it (lowest id on ties), whose room falls by its size, and leaves the queue (:func:`k_mj_remove`); a job that fits
    nowhere stays. Writes ``[i, server]`` rows in placement order to ``out`` and returns their number."""
    k = 0
    for i in range(jobs.shape[0]):
        x = jobs[i, 1]
        s = k_best_fit_blocks(room, inv, bmax, x, jobs[i, 2])
        if s < 0:
            continue
        room[s] -= x
        k_mj_remove(jobs[i, 0], st, P, G, A, abits)
        out[k, 0] = i
        out[k, 1] = s
        k += 1
    return k
