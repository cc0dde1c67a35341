"""Run configuration: one validated model that the CLI, sweeps and tests build runs from.

Every run writes its fully resolved configuration (with defaults and scheduler options filled in) into
``summary.json``, so a run can be repeated exactly.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class RunConfig(BaseModel):
    """What to simulate: scheduler, workload, datacenter, seed and delay model."""

    model_config = ConfigDict(extra="forbid")

    scheduler: str = Field(description="registered scheduler name, e.g. 'megha'")
    trace: str = Field(description="path of a .tr / .tr.gz / .parquet workload, or 'sample:NAME'")
    cluster: str | None = Field(None, description="cluster file (Megha or PigeonC JSON), or 'sample:NAME'")
    workers: int | None = Field(None, ge=1, description="generate a datacenter of this many workers")
    gms: int | None = Field(None, ge=1, description="number of Global Masters (Megha) / schedulers")
    lms: int | None = Field(None, ge=1, description="number of Local Masters (Megha) / masters")
    seed: int = Field(0, description="seed of every random choice in the run")
    constraints: bool = Field(True, description="synthesize placement constraints (tasks and generated workers)")
    machine_fractions: list[float] | None = Field(
        None, description="generated workers: probability of each of the 21 machine constraints (default: papers')"
    )
    machine_profiles: list[list[float]] | None = Field(
        None, description="generated workers: several fraction vectors; each LM cluster draws one at random"
    )
    truncate_durations: bool = Field(False, description="truncate task durations to whole seconds (reference quirk)")
    dephase: bool = Field(True, description="shift jobs sharing an arrival time by +0.01 s each (reference quirk)")
    resources: bool = Field(False, description="resource mode: workers have CPU/memory, tasks have requests")
    capacity: dict[str, float] = Field(default_factory=lambda: {"cpu": 64.0, "mem": 16.0})
    demand: dict[str, float] = Field(
        default_factory=lambda: {"cpu": 1.0, "mem": 0.25},
        description="per-task request in resource mode when the trace has none",
    )
    network_delay: float = Field(0.0005, ge=0, description="one-way network delay in seconds")
    worker_report_delay: float = Field(
        0.0, ge=0, description="delay of a worker's completion report to its own master (reference: 0)"
    )
    processing: dict[str, float] = Field(
        default_factory=dict, description="per-message processing cost (s) by component kind, e.g. {'gm': 1e-5}"
    )
    processing_per_item: dict[str, float] = Field(
        default_factory=dict, description="extra processing cost (s) per task in a message, by component kind"
    )
    processing_model: Literal["none", "measured"] = Field(
        "none",
        description="per-message processing costs: 'none', or 'measured' (the CPU costs measured on the real "
        "components, shipped in megha/data/processing_costs.json; processing entries above override them by kind)",
    )
    max_jobs: int | None = Field(None, ge=1, description="use only the first N jobs of the trace")
    load_scale: float = Field(1.0, gt=0, description="divide inter-arrival times by this factor")
    stall_timeout: float = Field(
        3600.0, gt=0, description="stop a run when no task runs or starts for this long while tasks wait"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="scheduler-specific options")
    faults: str | dict[str, Any] | None = Field(
        None,
        description="fault schedule: a TOML file ([[fault]] / [[random]] entries, see megha.model.faults) or the "
        "same as a table; summary.json then reports what the faults cost under 'faults'",
    )

    @field_validator("machine_fractions")
    @classmethod
    def _fractions(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and (len(v) != 21 or any(not 0 <= x <= 1 for x in v)):
            raise ValueError("needs 21 probabilities in [0, 1]")
        return v

    @field_validator("machine_profiles")
    @classmethod
    def _profiles(cls, v: list[list[float]] | None) -> list[list[float]] | None:
        if v is not None:
            for p in v:
                cls._fractions(p)
        return v

    @field_validator("capacity", "demand")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if x < 0:
                raise ValueError(f"{k} must be >= 0")
        return v
