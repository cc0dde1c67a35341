"""Shared fixtures: small traces and datacenters written by the tests themselves (no ../shared needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    """Five small jobs; two share an arrival time."""
    p = tmp_path / "tiny.tr"
    p.write_text("0.0 2 1.5 1.0 2.0\n0.5 1 3.0 3.0\n0.5 3 1.0 1.0 1.0 1.0\n2.0 2 0.75 0.5 1.0\n10.0 1 4.25 4.25\n")
    return p
