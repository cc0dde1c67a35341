"""Placement constraints (Sharma et al., SoCC 2011, as used by the Megha papers).

There are 21 constraints, ids 0..20. A worker has a set of *machine* constraints and a task a set of
*placement* constraints; a task fits a worker iff the task's set is a subset of the worker's set.
Both sets are stored as ``uint32`` bit masks (bit ``k`` set = constraint ``k`` present), so
"fits" is ``task_mask & ~worker_mask == 0``.

Task constraints are synthesized per task exactly as the reference simulators do (DESIGN §3.2):

1. draw a task type uniformly from {1, 2, 3, 4};
2. draw a statistical cluster 1..10 with weights ``TASK_OCCURRENCE[:, type]`` (table T2);
3. include constraint ``j`` independently with probability ``TCFV[cluster, j] / 100`` (table T1).

Everything is vectorized and deterministic for a given ``numpy.random.Generator`` state.
"""

from __future__ import annotations

import numpy as np

NUM_CONSTRAINTS = 21
"""Number of placement constraints in the Sharma et al. model."""

MASK_DTYPE = np.uint32

#: T1 — constraint frequency (percent) per statistical cluster (rows 1..10) and constraint (cols 0..20).
TCFV = np.array(
    [
        [8, 7, 7, 10, 23, 20, 30, 1, 3, 1, 4, 3, 2, 1, 4, 2, 9, 8, 11, 25, 29],
        [7.5, 6.6, 6.6, 9.4, 21.6, 18.8, 28.2, 0.9, 2.8, 0.9, 3.8, 2.8, 1.9, 0.9, 3.8, 1.9, 8.5, 7.5, 10.3, 23.5, 27.3],
        [7.8, 6.9, 6.9, 9.8, 22.5, 19.6, 29.4, 1, 2.9, 1, 3.9, 2.9, 2, 1, 3.9, 2, 8.8, 7.8, 10.8, 24.5, 28.4],
        [5.8, 5, 5, 7.2, 16.6, 14.4, 21.6, 0.7, 2.2, 0.7, 2.9, 2.2, 1.4, 0.7, 2.9, 1.4, 6.5, 5.8, 7.9, 18, 20.9],
        [
            9.7,
            8.5,
            8.5,
            12.1,
            27.8,
            24.2,
            36.3,
            1.2,
            3.6,
            1.2,
            4.8,
            3.6,
            2.4,
            1.2,
            4.8,
            2.4,
            10.9,
            9.7,
            13.3,
            30.2,
            35.1,
        ],
        [6.6, 5.7, 5.7, 8.2, 18.9, 16.4, 24.6, 0.8, 2.5, 0.8, 3.3, 2.5, 1.6, 0.8, 3.3, 1.6, 7.4, 6.6, 9, 20.5, 23.8],
        [8.7, 7.6, 7.6, 10.9, 25.1, 21.8, 32.7, 1.1, 3.3, 1.1, 4.4, 3.3, 2.2, 1.1, 4.4, 2.2, 9.8, 8.7, 12, 27.3, 31.6],
        [4.7, 4.1, 4.1, 5.9, 13.6, 11.8, 17.7, 0.6, 1.8, 0.6, 2.4, 1.8, 1.2, 0.6, 2.4, 1.2, 5.3, 4.7, 6.5, 14.8, 17.1],
        [5.7, 5, 5, 7.1, 16.3, 14.2, 21.3, 0.7, 2.1, 0.7, 2.8, 2.1, 1.4, 0.7, 2.8, 1.4, 6.4, 5.7, 7.8, 17.8, 20.6],
        [7.2, 6.3, 6.3, 9, 20.6, 17.9, 26.9, 0.9, 2.7, 0.9, 3.6, 2.7, 1.8, 0.9, 3.6, 1.8, 8.1, 7.2, 9.9, 22.4, 26],
    ],
    dtype=np.float64,
)

#: T2 — probability of statistical cluster (rows 1..10) given task type (cols 1..4); columns sum to 1.
TASK_OCCURRENCE = np.array(
    [
        [0.039628712871287115, 0.12043316831683168, 0.13037128712871288, 0.11675742574257425],
        [0.1404950495049505, 0.07971534653465345, 0.16081683168316832, 0.12047029702970297],
        [0.05905940594059404, 0.11016089108910891, 0.1506683168316832, 0.13383663366336634],
        [0.12032178217821782, 0.12043316831683168, 0.049306930693069295, 0.09658415841584157],
        [0.08987623762376236, 0.09976485148514852, 0.16081683168316832, 0.11675742574257425],
        [0.11004950495049505, 0.09976485148514852, 0.12047029702970297, 0.1101980198019802],
        [0.08987623762376236, 0.059294554455445535, 0.028886138613861374, 0.049306930693069295],
        [0.1404950495049505, 0.13033415841584156, 0.049306930693069295, 0.10388613861386138],
        [0.12032178217821782, 0.09011138613861384, 0.12047029702970297, 0.09980198019801981],
        [0.08987623762376236, 0.08998762376237622, 0.028886138613861374, 0.052400990099009885],
    ],
    dtype=np.float64,
)

#: Fraction of the papers' 10,000 workers that have each machine constraint 0..20 (DESIGN §3.2).
MACHINE_FRACTIONS = np.array(
    [
        0.376,
        0.657,
        0.156,
        0.377,
        0.683,
        0.111,
        0.284,
        0.155,
        0.703,
        0.733,
        0.487,
        0.470,
        0.317,
        0.080,
        0.693,
        0.151,
        0.563,
        0.276,
        0.668,
        0.700,
        1.0,
    ],
    dtype=np.float64,
)

_BITS = (np.uint32(1) << np.arange(NUM_CONSTRAINTS, dtype=np.uint32)).astype(MASK_DTYPE)


def expected_task_constraint_frequency() -> np.ndarray:
    """Probability that a synthesized task carries each constraint (exact, from T1 and T2)."""
    cluster_given_type = TASK_OCCURRENCE / TASK_OCCURRENCE.sum(axis=0, keepdims=True)
    p_cluster = cluster_given_type.mean(axis=1)  # task type is uniform over 4 types
    return p_cluster @ (TCFV / 100.0)


def synthesize_task_constraints(n: int, rng: np.random.Generator, chunk: int = 1 << 18) -> np.ndarray:
    """Draw placement-constraint masks for ``n`` tasks (DESIGN §3.2, tables T1/T2).

    Returns a ``uint32`` array of bit masks. Deterministic given the generator state; generated in
    chunks so memory stays bounded for multi-million-task traces. Within a chunk the per-constraint draws are
    taken and turned into masks a block of rows at a time (the same numbers: a generator's doubles come in
    sequence however a request is split), so the temporaries stay in cache.
    """
    out = np.empty(n, dtype=MASK_DTYPE)
    cum = np.cumsum(TASK_OCCURRENCE / TASK_OCCURRENCE.sum(axis=0, keepdims=True), axis=0).T  # (4, 10)
    cum[:, -1] = 1.0
    probs = TCFV / 100.0
    block = 1 << 14
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        m = hi - lo
        task_type = rng.integers(0, 4, size=m)
        u = rng.random(m)
        for a in range(0, m, block):
            b = min(m, a + block)
            cluster = (u[a:b, None] > cum[task_type[a:b]]).sum(axis=1)  # inverse-CDF draw, 0..9
            draws = rng.random((b - a, NUM_CONSTRAINTS)) < probs[cluster]
            out[lo + a : lo + b] = bits_to_masks(draws)
    return out


def synthesize_machine_constraints(n: int, rng: np.random.Generator, fractions: np.ndarray | None = None) -> np.ndarray:
    """Draw machine-constraint masks for ``n`` workers; constraint ``k`` with probability ``fractions[k]``."""
    p = MACHINE_FRACTIONS if fractions is None else np.asarray(fractions, dtype=np.float64)
    if p.shape != (NUM_CONSTRAINTS,):
        raise ValueError(f"machine constraint fractions need {NUM_CONSTRAINTS} values, got {p.shape}")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("machine constraint fractions must lie in [0, 1]")
    return bits_to_masks(rng.random((n, NUM_CONSTRAINTS)) < p)


def bits_to_masks(bits: np.ndarray) -> np.ndarray:
    """Convert a boolean ``(n, k)`` matrix (``k <= 32``) to ``uint32`` masks: bit ``j`` set where column ``j`` is."""
    bits = np.asarray(bits, dtype=bool)
    packed = np.packbits(bits, axis=1, bitorder="little")  # (n, ceil(k / 8)) bytes, column j at bit j % 8
    out = np.zeros(bits.shape[0], dtype=MASK_DTYPE)
    for i in range(packed.shape[1]):
        out |= packed[:, i].astype(MASK_DTYPE) << MASK_DTYPE(8 * i)
    return out


def masks_to_bits(masks: np.ndarray, k: int = NUM_CONSTRAINTS) -> np.ndarray:
    """Convert ``uint32`` masks to a boolean ``(n, k)`` matrix."""
    masks = np.asarray(masks, dtype=MASK_DTYPE)
    return (masks[:, None] & _BITS[None, :k]) != 0


def mask_of(ids: list[int] | tuple[int, ...]) -> int:
    """Bit mask of a list of constraint ids."""
    m = 0
    for i in ids:
        if not 0 <= i < NUM_CONSTRAINTS:
            raise ValueError(f"constraint id {i} outside 0..{NUM_CONSTRAINTS - 1}")
        m |= 1 << i
    return m


def ids_of(mask: int) -> list[int]:
    """Constraint ids present in a mask."""
    return [i for i in range(NUM_CONSTRAINTS) if mask >> i & 1]


def popcount(masks: np.ndarray) -> np.ndarray:
    """Number of constraints in each mask."""
    return np.bitwise_count(np.asarray(masks, dtype=MASK_DTYPE)).astype(np.int32)


def fits(task_mask: np.ndarray | int, worker_mask: np.ndarray | int) -> np.ndarray | bool:
    """True where the task's constraints are a subset of the worker's."""
    return (np.asarray(task_mask, dtype=MASK_DTYPE) & ~np.asarray(worker_mask, dtype=MASK_DTYPE)) == 0
