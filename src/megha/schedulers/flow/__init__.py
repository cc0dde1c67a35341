"""Sirius: min-cost max-flow scheduling (seed 002) — work in progress."""
