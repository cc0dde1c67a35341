"""Megha: federated datacenter task scheduling — the Megha scheduler and its peers on one simulator."""

__version__ = "0.1.0"
