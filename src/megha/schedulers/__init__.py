"""Scheduler families, one sub-package each; see :mod:`megha.schedulers.registry`."""
