"""Exact tick times of a periodic timer, without simulating each tick.

A component that re-arms a timer of ``h`` seconds every time it fires ticks at ``t_{k+1} = fl(t_k + h)``: one IEEE
double addition per tick (the engine's ``now + delay``). Over a long run those additions round, so ``t_k`` is not
``t_0 + k·h``. :class:`Period` reproduces the rounded sequence in O(1) per binade instead of O(k):

Within a binade ``[2^(E-1), 2^E)`` every double is a multiple of the binade's ulp ``u = 2^(E-53)``, so while
``t + h`` stays in the binade, ``fl(t + h) = t + δ_E`` with the same ``δ_E = u·round(h/u)`` for every ``t`` of the
binade (unless ``h/u`` lies exactly half-way between two integers: then round-half-even depends on ``t`` and the
binade is walked tick by tick). So the ticks of a binade are ``t + j·δ_E`` exactly (every such sum is a multiple of
``u`` below ``2^E``), and only the step that leaves the binade is computed as a float addition. A run of 10^6 s
crosses about 20 binades; a tick query costs a few integer operations.
"""

from __future__ import annotations

import math
from fractions import Fraction

_TWO53 = 1 << 53


class Period:
    """The tick sequence ``t_{k+1} = fl(t_k + h)`` of a timer with period ``h`` (seconds, > 0, finite)."""

    __slots__ = ("_bin", "_fast", "h")

    def __init__(self, h: float) -> None:
        h = float(h)
        if not (h > 0.0 and math.isfinite(h)):
            raise ValueError(f"a period must be a positive finite number of seconds, got {h}")
        self.h = h
        self._bin: dict[int, tuple | None] = {}
        self._fast: tuple[float, float, float] | None = None  # (2^(E-1), 2^E, δ) of the last uniform binade seen

    def _binade(self, e: int) -> tuple | None:
        """``(c, rnum, rden, fast)`` for the binade of frexp exponent ``e`` (step ``δ = c·u``, ``h/u = rnum/rden``,
        ``fast = (2^(E-1), 2^E, δ)``), or None when ticks there must be computed one by one."""
        try:
            return self._bin[e]
        except KeyError:
            pass
        out = None
        lo = math.ldexp(1.0, e - 1)
        if self.h < lo:  # several ticks per binade: the uniform step applies
            r = Fraction(self.h) / Fraction(2) ** (e - 53)
            fl = r.numerator // r.denominator
            frac = r - fl
            if frac != Fraction(1, 2):
                c = fl + (1 if frac > Fraction(1, 2) else 0)
                if c > 0:
                    out = (c, r.numerator, r.denominator, (lo, math.ldexp(1.0, e), math.ldexp(float(c), e - 53)))
        self._bin[e] = out
        return out

    def step(self, t: float) -> float:
        """The tick after ``t``."""
        return t + self.h

    def _in_binade(self, t: float) -> tuple[int, float, float] | None:
        """``(n, δ, last)``: ticks ``t + j·δ`` for ``j = 1..n`` are exact (``last = t + n·δ``); None: step singly."""
        if t <= 0.0:
            return None
        e = math.frexp(t)[1]
        b = self._bin.get(e, 0)
        if b == 0:
            b = self._binade(e)
        if b is None:
            return None
        c, rnum, rden, fast = b
        ti = int(math.ldexp(t, 53 - e))  # t / u, an integer
        num = (_TWO53 - ti) * rden - rnum  # steps j with ti + j·c + h/u < 2^53
        if num <= 0:
            return 0, 0.0, t
        n = -(-num // (rden * c))
        self._fast = fast
        return n, fast[2], t + math.ldexp(float(n * c), e - 53)

    def advance(self, t: float, k: int) -> float:
        """The tick ``k`` ticks after ``t``."""
        while k > 0:
            b = self._in_binade(t)
            if b is None or b[0] == 0:
                t = t + self.h
                k -= 1
                continue
            n, delta, last = b
            if k <= n:
                return t + k * delta
            t = last
            k -= n
        return t

    def last_le(self, t: float, at: float) -> tuple[int, float]:
        """``(k, t_k)`` for the last tick ``t_k <= at`` counting from ``t = t_0`` (which must be ``<= at``)."""
        if t > at:
            raise ValueError(f"tick {t} is after {at}")
        h = self.h
        fast = self._fast
        if fast is not None and fast[0] <= t and at + h < fast[1]:
            # t and every tick up to the one after ``at`` lie in the cached binade: ticks are t + j·δ there
            delta = fast[2]
            j = int((at - t) / delta)
            while j > 0 and t + j * delta > at:
                j -= 1
            while t + (j + 1) * delta <= at:
                j += 1
            return j, t + j * delta
        k = 0
        while True:
            b = self._in_binade(t)
            if b is None or b[0] == 0:
                nt = t + h
                if nt > at:
                    return k, t
                t = nt
                k += 1
                continue
            n, delta, last = b
            if at < last:  # the answer is in this binade: t + j·δ <= at < t + (j + 1)·δ
                j = int((at - t) / delta)  # at - t is exact (Sterbenz), the quotient within one of j
                while j > 0 and t + j * delta > at:
                    j -= 1
                while j < n and t + (j + 1) * delta <= at:
                    j += 1
                return k + j, t + j * delta
            t = last
            k += n
            if last < self._fast[1]:  # still in the binade, where no step is uniform any more: one rounded step
                nt = t + h
                if nt > at:
                    return k, t
                t = nt
                k += 1

    def count_le(self, t: float, at: float) -> int:
        """How many ticks ``t_0 = t, t_1, ...`` are ``<= at`` (0 if ``t > at``)."""
        if t > at:
            return 0
        return self.last_le(t, at)[0] + 1
