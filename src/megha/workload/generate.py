"""Synthetic workloads of a chosen offered load for any datacenter size (Poisson arrivals).

:func:`poisson_workload` draws jobs arriving as a Poisson process, with heavy-tailed job sizes and task durations,
at the rate that offers ``load`` of ``workers`` single-slot workers:
``rate = load × workers / (mean tasks per job × mean task duration)``. The number of jobs follows from the
number of tasks asked for, so the same ``tasks_per_worker`` gives workloads that grow in proportion to the
datacenter — what a scaling benchmark needs. Placement constraints are not drawn here (the runner synthesizes
them per task from the run's seed, as for every trace).
"""

from __future__ import annotations

import numpy as np

from megha.model.workload import Workload


def poisson_workload(
    workers: int,
    load: float = 0.7,
    tasks_per_worker: float = 20.0,
    mean_tasks: float = 20.0,
    mean_duration: float = 60.0,
    seed: int = 0,
) -> Workload:
    """Jobs offering ``load`` of ``workers`` workers, ``tasks_per_worker × workers`` tasks in all.

    Job sizes are geometric (at least 1) with mean ``mean_tasks``; task durations are log-normal (sigma 1) with mean
    ``mean_duration`` seconds, rounded to milliseconds; arrivals start at 0.
    """
    if workers < 1 or not load > 0 or tasks_per_worker <= 0 or mean_tasks < 1 or mean_duration <= 0:
        raise ValueError("workers >= 1, load > 0, tasks_per_worker > 0, mean_tasks >= 1, mean_duration > 0")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5CA1E]))
    n_jobs = max(1, round(tasks_per_worker * workers / mean_tasks))
    sizes = rng.geometric(1.0 / mean_tasks, n_jobs).astype(np.int64)  # support 1, 2, ...; mean mean_tasks
    sigma = 1.0
    mu = np.log(mean_duration) - sigma**2 / 2
    durations = np.round(rng.lognormal(mu, sigma, int(sizes.sum())), 3)
    durations = np.maximum(durations, 0.001)
    rate = load * workers / (float(sizes.mean()) * float(durations.mean()))
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n_jobs))
    arrivals = np.round(arrivals - arrivals[0], 3)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    mean = np.add.reduceat(durations, first) / sizes
    return Workload(
        job_arrival=arrivals.astype(np.float64),
        job_num_tasks=sizes,
        job_mean_duration=mean,
        task_duration=durations.astype(np.float64),
        name=f"poisson-{workers}w-{load:g}",
        meta={"generator": "poisson_workload", "load": load, "workers": workers, "seed": seed},
    )
