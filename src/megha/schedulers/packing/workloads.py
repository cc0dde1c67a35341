"""Workloads of the packing experiments: synthetic slotted jobs and traces cut into slots.

* Arrivals: a Poisson number of jobs per slot (:func:`poisson_arrivals`).
* Service times: geometric with a given mean (support 1, 2, …) or fixed (:func:`geometric_service`,
  :func:`fixed_service`).
* Sizes: discrete values with probabilities, or uniform on an interval (:func:`discrete_sizes`,
  :func:`uniform_sizes`).
* Traces: :func:`from_trace` turns a :class:`~megha.model.workload.Workload` (arrival and duration in
  seconds) into slots of a given length with a traffic-scaling factor, with sizes from the trace's requests
  (max reduction) or synthesized (:func:`google_2011_requests`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from megha.errors import InputError
from megha.model.workload import Workload
from megha.schedulers.packing.slotted import SlotWorkload


def poisson_arrivals(rate: float, horizon: int, rng: np.random.Generator) -> np.ndarray:
    """Arrival slot of every job when each slot of [0, horizon) brings Poisson(rate) jobs."""
    if rate < 0 or horizon < 0:
        raise InputError(f"Poisson arrivals need rate >= 0 and horizon >= 0 (got {rate}, {horizon})")
    counts = rng.poisson(rate, size=horizon)
    return np.repeat(np.arange(horizon, dtype=np.int64), counts)


def geometric_service(mean: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Geometric service times with the given mean (≥ 1): P(S = k) = (1-μ)^(k-1) μ, μ = 1/mean."""
    if mean < 1:
        raise InputError(f"geometric service: mean must be >= 1 slot, got {mean}")
    return rng.geometric(1.0 / mean, size=n).astype(np.int64)


def fixed_service(slots: int, n: int) -> np.ndarray:
    """Service times of ``slots`` (>= 1) slots for ``n`` jobs."""
    if slots < 1:
        raise InputError(f"fixed service: must be >= 1 slot, got {slots}")
    return np.full(n, int(slots), dtype=np.int64)


def discrete_sizes(
    values: Sequence[float], probs: Sequence[float] | None, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Sizes drawn from ``values`` with probabilities ``probs`` (uniform if None)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or (v <= 0).any() or (v > 1).any():
        raise InputError(f"discrete sizes must lie in (0, 1], got {v.tolist()}")
    p = None
    if probs is not None:
        p = np.asarray(probs, dtype=np.float64)
        if p.size != v.size or (p < 0).any() or p.sum() <= 0:
            raise InputError(f"discrete sizes: bad probabilities {p.tolist()} for values {v.tolist()}")
        p = p / p.sum()
    return v[rng.choice(v.size, size=n, p=p)]


def uniform_sizes(lo: float, hi: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Sizes uniform on [lo, hi] ⊂ (0, 1]."""
    if not (0 < lo <= hi <= 1):
        raise InputError(f"uniform sizes need 0 < lo <= hi <= 1, got [{lo}, {hi}]")
    return rng.uniform(lo, hi, size=n)


def synthetic(
    rate: float,
    horizon: int,
    rng: np.random.Generator,
    sizes: tuple = ("uniform", 0.1, 0.9),
    service: tuple = ("geometric", 100.0),
    name: str = "synthetic",
) -> SlotWorkload:
    """A slotted workload: Poisson(rate) jobs per slot over ``horizon`` slots.

    ``sizes`` is ``("uniform", lo, hi)`` or ``("discrete", values, probs)``; ``service`` is
    ``("geometric", mean)`` or ``("fixed", slots)``. Draw order (arrivals, sizes, service) is fixed so
    equal seeds give equal workloads.
    """
    arr = poisson_arrivals(rate, horizon, rng)
    n = arr.size
    kind = sizes[0]
    if kind == "uniform":
        sz = uniform_sizes(float(sizes[1]), float(sizes[2]), n, rng)
    elif kind == "discrete":
        sz = discrete_sizes(sizes[1], sizes[2] if len(sizes) > 2 else None, n, rng)
    else:
        raise InputError(f"unknown size distribution {kind!r} (uniform, discrete)")
    if service[0] == "geometric":
        sv = geometric_service(float(service[1]), n, rng)
    elif service[0] == "fixed":
        sv = fixed_service(int(service[1]), n)
    else:
        raise InputError(f"unknown service distribution {service[0]!r} (geometric, fixed)")
    return SlotWorkload(
        arr, sz, sv, name=name, meta={"rate": rate, "horizon": horizon, "sizes": list(sizes), "service": list(service)}
    )


def mean_size(sizes: tuple) -> float:
    """Mean of a size distribution spec of :func:`synthetic`."""
    if sizes[0] == "uniform":
        return (float(sizes[1]) + float(sizes[2])) / 2
    v = np.asarray(sizes[1], dtype=np.float64)
    p = np.ones(v.size) if len(sizes) < 3 or sizes[2] is None else np.asarray(sizes[2], dtype=np.float64)
    return float((v * p).sum() / p.sum())


# --- Google 2011 requests ------------------------------------------------------------------------------
# The Google 2011 trace normalizes CPU and memory requests to the largest machine (= 1). Published
# characterizations (Reiss et al., SoCC 2012; Liu & Cho 2012; the paper's Fig. 1) report requests
# concentrated on a few hundred discrete values, CPU requests mostly ≤ 0.1 with modes at 1/80, 1/32, 1/16
# and a thin tail to 0.5, and memory requests with a median near 1.5 % and a heavy tail. The table below
# is a stand-in with that shape (it is not the trace: use a converted trace file with cpu/mem columns for
# the real requests). Tasks of one job share their request, as in the trace.
_GOOGLE_CPU = np.array([0.00625, 0.0125, 0.01875, 0.025, 0.03125, 0.0625, 0.125, 0.25, 0.5])
_GOOGLE_CPU_P = np.array([0.08, 0.35, 0.10, 0.12, 0.10, 0.13, 0.07, 0.04, 0.01])
_GOOGLE_MEM_MEDIAN = 0.0155
_GOOGLE_MEM_SIGMA = 1.1


def google_2011_requests(n_jobs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Synthesized per-job (cpu, mem) requests normalized to the largest machine (see the table above)."""
    jitter = rng.integers(-2, 3, size=n_jobs) / 64.0  # spreads the modes into many discrete values
    cpu = _GOOGLE_CPU[rng.choice(_GOOGLE_CPU.size, size=n_jobs, p=_GOOGLE_CPU_P)] * (1.0 + jitter)
    mem = np.exp(rng.normal(np.log(_GOOGLE_MEM_MEDIAN), _GOOGLE_MEM_SIGMA, size=n_jobs))
    mem = np.clip(np.round(mem * 4096) / 4096, 1 / 4096, 0.75)
    return np.clip(cpu, 1 / 1600, 1.0), mem


def from_trace(
    w: Workload,
    slot_seconds: float,
    scale: float = 1.0,
    sizes: np.ndarray | None = None,
    name: str | None = None,
) -> SlotWorkload:
    """Cut a trace into slots: arrival slot = ⌊(arrival − t0) / scale / slot⌋, service = ⌈duration / slot⌉.

    ``scale`` is the paper's traffic scaling (arrival times divided by it: more jobs per unit of time).
    ``sizes`` gives one size per task (or ``[T, R]``); by default the trace's requests reduced with
    max(demand/1) are used, which needs requests normalized to the server capacity.
    """
    if slot_seconds <= 0 or scale <= 0:
        raise InputError(f"slot length and traffic scaling must be > 0 (got {slot_seconds}, {scale})")
    if sizes is None:
        if w.task_demand is None:
            raise InputError(f"{w.name}: the trace has no resource requests; give sizes")
        sizes = w.task_demand.max(axis=1)
    sizes = np.asarray(sizes, dtype=np.float64)
    if sizes.shape[0] != w.n_tasks:
        raise InputError(f"{w.name}: {sizes.shape[0]} sizes for {w.n_tasks} tasks")
    t_arr = w.task_arrival
    t0 = float(t_arr.min()) if t_arr.size else 0.0
    arr = np.floor((t_arr - t0) / scale / slot_seconds + 1e-9).astype(np.int64)
    svc = np.maximum(np.ceil(w.task_duration / slot_seconds - 1e-9), 1).astype(np.int64)
    order = np.argsort(arr, kind="stable")
    return SlotWorkload(
        arr[order],
        sizes[order],
        svc[order],
        name=name or w.name,
        meta={"slot_seconds": slot_seconds, "scale": scale, "task_order": order},
    )
