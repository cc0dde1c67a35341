"""Parameter sweeps: many simulations from one file, on local cores or a Ray cluster, with one table and report.

``megha sweep FILE.toml`` expands a grid and/or list of runs (:mod:`megha.sweep.spec`), runs what is not finished
yet (:mod:`megha.sweep.runner`) on a process pool or on Ray (:mod:`megha.sweep.engines`), then writes the results
table (:mod:`megha.sweep.aggregate`) and a static HTML report (:mod:`megha.sweep.report`).
"""

from megha.sweep.runner import SweepResult, run_sweep
from megha.sweep.spec import RunPlan, SweepSpec, load, parse

__all__ = ["RunPlan", "SweepResult", "SweepSpec", "load", "parse", "run_sweep"]
