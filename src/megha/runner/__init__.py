"""Run wiring: load a run's inputs, wire a registered scheduler into the engine, feed the trace, collect results.

This package sits above the engine (:mod:`megha.sim`), the schedulers and the metrics recorder, and below the
commands (CLI, experiments, sweeps, live comparisons) that run simulations.
"""

from megha.metrics.result import RunResult
from megha.runner.inputs import load_inputs, stream
from megha.runner.simulate import simulate, simulate_inputs

__all__ = ["RunResult", "load_inputs", "simulate", "simulate_inputs", "stream"]
