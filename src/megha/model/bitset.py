"""Packed bit vectors on numpy ``uint64`` words.

Bit ``i`` of a vector lives in word ``i >> 6`` at position ``i & 63`` (little-endian bit order), so a
vector of ``n`` bits takes ``ceil(n / 64)`` words and the padding bits of the last word are always 0.

These are the matching primitives of the Megha paper (Algorithm 1): AND the constraint vectors of a
task's placement constraints with an availability vector, then pick a set bit — the first one, a
uniformly random one, or the one with the smallest weight (the Minimum-Constraints policy, weight =
number of machine constraints of the worker).
"""

from __future__ import annotations

import numpy as np

WORD_BITS = 64
_ONE = np.uint64(1)


def words_for(n_bits: int) -> int:
    """Number of 64-bit words needed for ``n_bits`` bits."""
    return (n_bits + WORD_BITS - 1) // WORD_BITS


def zeros(n_bits: int) -> np.ndarray:
    """An all-zero vector of ``n_bits`` bits."""
    return np.zeros(words_for(n_bits), dtype=np.uint64)


def pack(bools: np.ndarray) -> np.ndarray:
    """Pack a boolean array into ``uint64`` words (bit ``i`` = ``bools[i]``)."""
    bools = np.asarray(bools, dtype=bool)
    n_words = words_for(bools.size)
    by = np.packbits(bools, bitorder="little")
    buf = np.zeros(n_words * 8, dtype=np.uint8)
    buf[: by.size] = by
    return buf.view("<u8").astype(np.uint64, copy=False)


def ones(n_bits: int) -> np.ndarray:
    """A vector with bits ``0..n_bits-1`` set."""
    return pack(np.ones(n_bits, dtype=bool))


def unpack(words: np.ndarray, n_bits: int | None = None) -> np.ndarray:
    """Unpack words into a boolean array of ``n_bits`` (default: all bits of the words)."""
    by = np.ascontiguousarray(words, dtype="<u8").view(np.uint8)
    bits = np.unpackbits(by, bitorder="little").view(bool)
    return bits if n_bits is None else bits[:n_bits]


def set_indices(words: np.ndarray) -> np.ndarray:
    """Indices of the set bits, ascending."""
    return np.flatnonzero(unpack(words))


def count(words: np.ndarray) -> int:
    """Number of set bits."""
    return int(np.bitwise_count(words).sum())


def and_all(vectors: list[np.ndarray] | tuple[np.ndarray, ...], out: np.ndarray | None = None) -> np.ndarray:
    """Bitwise AND of one or more vectors of equal length."""
    it = iter(vectors)
    first = next(it)
    res = first.copy() if out is None else np.copyto(out, first) or out
    for v in it:
        np.bitwise_and(res, v, out=res)
    return res


def test_bit(words: np.ndarray, i: int) -> bool:
    """Whether bit ``i`` is set."""
    return bool(int(words[i >> 6]) >> (i & 63) & 1)


def set_bit(words: np.ndarray, i: int) -> None:
    """Set bit ``i`` in place."""
    words[i >> 6] |= _ONE << np.uint64(i & 63)


def clear_bit(words: np.ndarray, i: int) -> None:
    """Clear bit ``i`` in place."""
    words[i >> 6] &= ~(_ONE << np.uint64(i & 63))


def _lowest_bit(w: int) -> int:
    return (w & -w).bit_length() - 1


def first_set(words: np.ndarray) -> int:
    """Index of the lowest set bit, or -1 when the vector is empty."""
    nz = np.flatnonzero(words)
    if nz.size == 0:
        return -1
    j = int(nz[0])
    return j * WORD_BITS + _lowest_bit(int(words[j]))


def nth_set_in_word(w: int, r: int) -> int:
    """Position of the ``r``-th (0-based) set bit of the Python int ``w``."""
    for _ in range(r):
        w &= w - 1
    return _lowest_bit(w)


def random_set(words: np.ndarray, rng: np.random.Generator) -> int:
    """A uniformly random set bit, or -1 when the vector is empty."""
    counts = np.bitwise_count(words)
    total = int(counts.sum())
    if total == 0:
        return -1
    r = int(rng.integers(total))
    cum = np.cumsum(counts)
    j = int(np.searchsorted(cum, r, side="right"))
    before = int(cum[j - 1]) if j else 0
    return j * WORD_BITS + nth_set_in_word(int(words[j]), r - before)


def min_weight_set(words: np.ndarray, weights: np.ndarray) -> int:
    """The set bit with the smallest ``weights[i]`` (lowest index on ties), or -1 when empty.

    ``weights`` is indexed by bit position and must cover every bit that can be set.
    """
    idx = set_indices(words)
    if idx.size == 0:
        return -1
    return int(idx[np.argmin(weights[idx])])
