"""VQS's universal partition of job sizes and its reduced configuration set (Psychas & Ghaderi §V).

Our copy of the paper lost its formulas; DESIGN §5.7 gives a reconstruction from the text, implemented
here and kept configurable (``J``, custom cut points, ``split_tail``, the configuration-set kind, the
reserved share).

**Partition** (paper eq. 6). Cut points ``2/(3·2^m)`` and ``1/2^m`` give the intervals, largest first::

    I_1 = (2/3, 1], I_2 = (1/2, 2/3], I_3 = (1/3, 1/2], I_4 = (1/4, 1/3], I_5 = (1/6, 1/4], I_6 = (1/8, 1/6], …

i.e. ``I_{2m-1} = (2/(3·2^{m-1}), 1/2^{m-1}]`` and ``I_{2m} = (1/2^m, 2/(3·2^{m-1})]`` for ``m = 1..J``:
2J virtual queues. Jobs of size ≤ 1/2^J go to the last queue with their size rounded up to 1/2^J (the
paper's text: "jobs whose sizes fall in (0, 1/2^J] are placed in the last virtual queue, and their sizes
are rounded up"), which keeps the count at 2J as the text says. ``split_tail=True`` gives those jobs a
queue of their own instead (2J + 1 queues, DESIGN's literal reading).

**Reduced configurations** (paper Definition 5, eq. 7), with ``u_j`` the upper end of interval j::

    K_RED = { ⌊1/u_j⌋ · e_j : every type j }
          ∪ { e_r + ⌊(1/3)/u_j⌋ · e_j : every type j with u_j ≤ 1/3 }      (r = the type (1/2, 2/3])

In a configuration with ``e_r`` the server reserves 2/3 of its capacity for one type-r job and packs the
other type into the remaining 1/3. The weight of a configuration is ``Σ_j k_j · Q_j`` (Q_j = number of
jobs in virtual queue j). ``kind="pure"`` keeps only the single-type configurations (the "natural" but
weaker design the paper discusses after Theorem 3).

**How the reconstruction was checked against the paper's two instability examples (§VII-A)** — both are
unit tests (``tests/test_packing_partition.py``) and reproductions (``megha reproduce psychas-unstable-*``):

1. Fig. 3(a): one server, sizes a ∈ (1/3, 1/2] and b ∈ (1/2, 2/3] (we use 0.4 and 0.6), equally likely.
   The paper says VQS "can either schedule two jobs of size a or one job of size b", so (1, 1) must *not*
   be in K_RED although a + b ≤ 1. Under this reconstruction the configurations touching only these two
   types are exactly 2·e_a (⌊1/(1/2)⌋ = 2) and 1·e_b (⌊1/(2/3)⌋ = 1); the mixed configuration e_b + k·e_a
   does not exist because u_a = 1/2 > 1/3. Hence VQS supports at most 4μ/3 (time-sharing 2μ on a and μ on
   b) while BF-J/S and VQS-BF support 2μ — the paper's "unstable for any arrival rate greater than 4μ/3",
   which is also the tightness of the 2/3 bound.
2. Fig. 3(b): sizes a ∈ (1/6, 1/5] and b ∈ (1/3, 1/2] (we use 0.2 and 0.45), a twice as likely, fixed
   service times. The paper says VQS "will always schedule either five jobs of size a or two of size b".
   Here the pure configurations are 4·e_a (⌊1/(1/4)⌋ = 4, since a's interval is (1/6, 1/4]) and 2·e_b; the
   mixed ones need a type-(1/2, 2/3] job, whose queue is empty, so their weight Q_a < 4·Q_a never wins.
   Because jobs keep their real sizes, the server keeps taking head-of-line a's "until no more fit": five
   of size 0.2 — exactly the paper's "five jobs of size a". The departure-rate vectors are (5/T, 0) and
   (0, 2/T), whose convex hull contains the arrival vector for λT < 10/3, while the Best-Fit variants stick
   to 2a + b with rates (2/T, 1/T), below the arrivals (2λ/3, λ/3) for λT > 3.

Both statements of the paper follow from this partition and configuration set and would fail under the
nearby alternatives (e.g. allowing u_j ≤ 1/2 in mixed configurations makes VQS stable in example 1;
upper-rounding without keeping real sizes gives four, not five, jobs of size a in example 2).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from megha.errors import InputError
from megha.schedulers.packing.structures import UNIT, quantize

_EPS = 1e-12


@dataclass(frozen=True)
class Partition:
    """Intervals of (0, 1], largest first: type k is ``(cuts[k], cuts[k-1]]`` with cuts[-1] = 1.

    ``cuts`` are strictly decreasing in (0, 1); the last type is ``(0, cuts[-1]]``. Jobs smaller than
    ``min_size`` are rounded up to it (they occupy ``min_size`` of a server).
    """

    cuts: tuple[float, ...]
    min_size: float = 0.0

    def __post_init__(self) -> None:
        c = self.cuts
        if any(not (0.0 < x < 1.0) for x in c):
            raise InputError(f"partition cut points must lie in (0, 1), got {list(c)}")
        if any(c[i] <= c[i + 1] for i in range(len(c) - 1)):
            raise InputError(f"partition cut points must be strictly decreasing, got {list(c)}")
        if not (0.0 <= self.min_size < 1.0):
            raise InputError(f"partition min_size must be in [0, 1), got {self.min_size}")
        # ascending quantized lower bounds for bisection: type of x = T-1 - #(bounds < x)
        object.__setattr__(self, "_asc", [quantize(x) for x in reversed(c)])
        object.__setattr__(self, "_min_units", quantize(self.min_size) if self.min_size > 0 else 0)

    @property
    def n_types(self) -> int:
        """The number of job types (intervals)."""
        return len(self.cuts) + 1

    def upper(self, k: int) -> float:
        """Upper end u_k of interval k (the upper-rounded size of its jobs)."""
        return 1.0 if k == 0 else self.cuts[k - 1]

    def lower(self, k: int) -> float:
        """Lower end of interval ``k`` (0 for the last)."""
        return self.cuts[k] if k < len(self.cuts) else 0.0

    def lower_units(self, k: int) -> int:
        """Quantized lower end of interval k (0 for the last)."""
        return quantize(self.cuts[k]) if k < len(self.cuts) else 0

    def type_of(self, units: int) -> int:
        """Type (virtual-queue index) of a job of the given size in units."""
        return len(self._asc) - bisect_left(self._asc, units)

    def effective(self, units: int) -> int:
        """Size a job occupies under VQS: its real size, or ``min_size`` if smaller."""
        m = self._min_units
        return m if units < m else units

    def type_of_real(self, x: float) -> int:
        """Type of a job of real size ``x`` (quantized first)."""
        return self.type_of(quantize(x))

    def describe(self) -> list[str]:
        """Each type's interval as text, ``(lower, upper]``."""
        return [f"({self.lower(k):.4g}, {self.upper(k):.4g}]" for k in range(self.n_types)]


def universal_partition(J: int, split_tail: bool = False) -> Partition:
    """The paper's universal partition with parameter ``J`` (2J virtual queues; see module doc)."""
    if J < 2:
        raise InputError(f"VQS partition parameter J must be >= 2, got {J}")
    if J > 40:
        raise InputError(f"VQS partition parameter J must be <= 40, got {J}")
    cuts: list[float] = []
    for m in range(1, J + 1):
        cuts.append(2.0 / (3.0 * 2 ** (m - 1)))  # lower end of I_{2m-1}
        if m < J or split_tail:
            cuts.append(1.0 / 2**m)  # lower end of I_{2m}
    return Partition(tuple(cuts), min_size=1.0 / 2**J)


def custom_partition(cuts: list[float], min_size: float = 0.0) -> Partition:
    """A partition from explicit cut points (any order; duplicates are an error)."""
    c = sorted(cuts, reverse=True)
    return Partition(tuple(c), min_size=min_size)


@dataclass(frozen=True)
class Config:
    """A server configuration: ``k_res`` jobs of the reserved type ``res`` (or none) and ``k_other`` of ``other``.

    ``space`` is the capacity (units) the ``other`` type may fill: all of it, or 1 − reserve in a mixed
    configuration.
    """

    res: int
    k_res: int
    other: int
    k_other: int
    space: int

    def label(self, p: Partition) -> str:
        """The configuration as text: how many jobs of which interval, the reserved type marked."""
        parts = []
        if self.res >= 0:
            parts.append(f"{self.k_res}×{p.describe()[self.res]}(reserved)")
        if self.other >= 0:
            parts.append(f"{self.k_other}×{p.describe()[self.other]}")
        return " + ".join(parts)


class ConfigSet:
    """A finite set of configurations with the max-weight choice of VQS."""

    def __init__(self, partition: Partition, kind: str = "reduced", reserve: float = 2.0 / 3.0) -> None:
        if kind not in ("reduced", "pure"):
            raise InputError(f"VQS configuration set must be 'reduced' or 'pure', got {kind!r}")
        if not (0.5 <= reserve < 1.0):
            raise InputError(f"VQS reserve must be in [0.5, 1), got {reserve}")
        self.partition = partition
        self.kind = kind
        self.reserve = reserve
        T = partition.n_types
        # the reserved type: the interval (1/2, reserve]
        self.res_type = -1
        for k in range(T):
            if abs(partition.upper(k) - reserve) < 1e-9 and abs(partition.lower(k) - 0.5) < 1e-9:
                self.res_type = k
        configs: list[Config] = []
        for k in range(T):
            n = math.floor(1.0 / partition.upper(k) + 1e-9)
            configs.append(Config(-1, 0, k, n, UNIT))
        self.reserve_units = quantize(reserve)
        if kind == "reduced" and self.res_type >= 0:
            rest = 1.0 - reserve
            space = UNIT - self.reserve_units
            for k in range(T):
                u = partition.upper(k)
                if u <= rest + 1e-9:
                    configs.append(Config(self.res_type, 1, k, math.floor(rest / u + 1e-9), space))
        self.configs = configs
        # flat arrays for the weight loop
        self._res = [c.res for c in configs]
        self._kr = [c.k_res for c in configs]
        self._oth = [c.other for c in configs]
        self._ko = [c.k_other for c in configs]
        self._memo: dict[tuple[int, ...], int] = {}
        # with one non-empty virtual queue t, a configuration's weight is its count of type t times Q_t: the answer is
        # the first configuration with the largest such count (-1 if none holds type t)
        self._single: list[int] = []
        for t in range(T):
            best, bk = -1, 0
            for c in range(len(configs)):
                k = (self._ko[c] if self._oth[c] == t else 0) + (self._kr[c] if self._res[c] == t else 0)
                if k > bk:
                    best, bk = c, k
            self._single.append(best)

    def __len__(self) -> int:
        return len(self.configs)

    def weight(self, c: int, q: list[int]) -> int:
        """The weight of configuration ``c`` under queue lengths ``q``: Σ jobs of a type it holds × that type's queue
        length."""
        r = self._res[c]
        w = self._ko[c] * q[self._oth[c]]
        if r >= 0:
            w += self._kr[c] * q[r]
        return w

    def best(self, q: list[int]) -> int:
        """Index of the max-weight configuration for queue lengths ``q`` (first on ties), -1 if all are 0.

        Memoized by the queue-length vector (a scheduler asks again and again between queue changes); with a single
        non-empty virtual queue, a table lookup."""
        nz = -1
        for t, v in enumerate(q):
            if v:
                if nz >= 0:
                    nz = -2
                    break
                nz = t
        if nz == -1:
            return -1
        if nz >= 0:
            return self._single[nz]
        key = tuple(q)
        c = self._memo.get(key)
        if c is None:
            if len(self._memo) >= 1 << 16:
                self._memo.clear()
            c = self._memo[key] = self._best(q)
        return c

    def _best(self, q: list[int]) -> int:
        best, bw = -1, 0
        res, kr, oth, ko = self._res, self._kr, self._oth, self._ko
        for c in range(len(res)):
            w = ko[c] * q[oth[c]]
            r = res[c]
            if r >= 0:
                w += kr[c] * q[r]
            if w > bw:
                best, bw = c, w
        return best
