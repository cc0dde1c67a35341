"""The papers' experiments, reproducible by name with ``megha reproduce ID``.

Each module in this package registers one or more experiments with
:func:`megha.experiments.registry.experiment`; the registry imports every module on first use.
"""
