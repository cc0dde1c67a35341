"""The Python API in a few lines: one run, its tables and CDF, a comparison, a tiny sweep.

python examples/api/quickstart.py            # about 10 s; writes quickstart_cdf.png and megha-sweep/api-tiny/
"""

import matplotlib

matplotlib.use("Agg")  # a script: write files, no window (a notebook needs nothing of the kind)

import megha

# one simulation: the CLI's `megha simulate -s megha -t sample:YH_small -w 1000 --seed 1`
r = megha.simulate(scheduler="megha", trace="sample:YH_small", workers=1000, seed=1)
print(r)
print(r.jobs.head())  # one row per job: arrival, ideal (longest task), completion, delay (seconds)
print(r.tasks[["job", "start", "end", "worker", "allocation"]].head())
print("mean utilization:", r.summary["utilization_mean"], "p99 delay (s):", r.summary["delay"]["p99"])

# scheduler options are keyword arguments; run settings (gms, lms, max_jobs, network_delay, ...) too
r2 = megha.simulate("megha", "sample:GOOG_subtrace", workers=5000, gms=2, lms=2, max_jobs=100, heartbeat=10)
ax = r2.plot_cdf()
r.plot_cdf(ax=ax, label="megha on YH_small")
ax.figure.savefig("quickstart_cdf.png")

# the same workload through several schedulers: a DataFrame, one row per scheduler
df = megha.compare(["megha", "sparrow"], trace="sample:YH_small", workers=1000)
print(df[["delay_p50", "delay_p99", "utilization_mean"]])

# a sweep from a dict (or a .toml file): the results table, one row per run
table = megha.sweep(
    {
        "sweep": {"name": "api-tiny"},
        "base": {"trace": "sample:YH_small", "workers": 500},
        "grid": {"scheduler": ["megha", "sparrow"], "seed": [0, 1]},
    },
    workers=1,
    force=True,
    report=False,
)
print(table[["scheduler", "seed", "status", "delay_p50", "delay_p99"]])
