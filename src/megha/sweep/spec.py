"""Sweep files: a base configuration, a grid and/or a list of runs, expanded into validated run plans.

A sweep file (TOML, or the same structure as a dict) looks like::

    [sweep]
    name = "megha-size"          # optional; default: the file name
    plots = false                # per-run delay_cdf.png (the HTML report has the plots anyway)

    [base]                       # RunConfig fields shared by every run (see megha.config.RunConfig)
    scheduler = "megha"
    trace = "sample:GOOG_subtrace"
    max_jobs = 200
    options = { heartbeat = 10 }

    [grid]                       # every combination of these lists (a scalar counts as a one-value list)
    workers = [1000, 5000, 10000]
    seed = [0, 1]
    "options.policy" = ["random", "min-constraints"]   # a scheduler option (or: [grid.options] policy = [...])

    [[runs]]                     # explicit runs, each crossed with the grid; values are taken literally
    scheduler = "megha"
    [[runs]]
    scheduler = "sparrow"

Every run is ``base ⊕ runs[i] ⊕ grid point`` (later wins; dotted keys such as ``options.heartbeat`` or
``capacity.cpu`` set one entry of a dict field). Only ``[grid]`` expands lists: in ``[base]`` and ``[[runs]]`` a
list is a value (e.g. ``options.shares = [0.5, 0.5]``); to vary a list-valued option, give a list of lists in
the grid. Without ``cluster`` or ``workers`` a run uses the bundled 10,000-worker datacenter, like
``megha simulate``.

Each run gets a stable id made of its varying parameters and a hash of its fully resolved configuration, so
``--resume`` recognizes a finished run even after the sweep file was reordered or extended.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megha.errors import InputError

#: Accepted spellings of RunConfig fields (the ``megha simulate`` option names).
ALIASES = {"truncate": "truncate_durations", "opt": "options", "scheduler_options": "options"}
_SECTIONS = {"sweep", "base", "grid", "runs"}
_SWEEP_KEYS = {"name", "plots", "csv"}


@dataclass(frozen=True)
class RunPlan:
    """One run of a sweep: its position, id, varying parameters and complete configuration."""

    index: int
    id: str
    params: dict[str, Any]
    config: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The plan as a JSON-ready dict (read back by :meth:`from_json`)."""
        return {"index": self.index, "id": self.id, "params": self.params, "config": self.config}

    @staticmethod
    def from_json(d: dict[str, Any]) -> RunPlan:
        """The plan written by :meth:`to_json`."""
        return RunPlan(int(d["index"]), str(d["id"]), dict(d["params"]), dict(d["config"]))


@dataclass
class SweepSpec:
    """A parsed sweep file (not yet expanded)."""

    name: str
    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    plots: bool = False
    csv: bool = False
    source: str = "<dict>"
    raw: dict[str, Any] = field(default_factory=dict)

    def expand(self) -> list[RunPlan]:
        """Every run of the sweep, validated; raises InputError naming the run and the bad field."""
        return expand(self)


def _flatten(d: dict[str, Any], prefix: str = "", lists_are_values: bool = True) -> dict[str, Any]:
    """Nested tables → dotted keys. Dict-valued RunConfig fields stay whole unless written as sub-tables."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{key}.", lists_are_values))
        else:
            out[key] = v
    return out


def _canon_key(key: str, where: str) -> str:
    head, _, rest = key.partition(".")
    head = ALIASES.get(head.replace("-", "_"), head.replace("-", "_"))
    from megha.config import RunConfig

    if head not in RunConfig.model_fields:
        known = ", ".join(sorted(RunConfig.model_fields))
        raise InputError(
            f"{where}: unknown run setting {key!r} (RunConfig fields: {known}; "
            f"scheduler options go under 'options.NAME')"
        )
    return f"{head}.{rest}" if rest else head


def parse(doc: dict[str, Any], source: str = "<dict>", default_name: str = "sweep") -> SweepSpec:
    """Check the structure of a sweep document and return its :class:`SweepSpec`."""
    if not isinstance(doc, dict):
        raise InputError(f"{source}: a sweep must be a table/object")
    unknown = set(doc) - _SECTIONS
    if unknown:
        raise InputError(f"{source}: unknown section(s) {sorted(unknown)}; expected [sweep], [base], [grid], [[runs]]")
    meta = doc.get("sweep", {})
    if not isinstance(meta, dict):
        raise InputError(f"{source}: [sweep] must be a table")
    bad = set(meta) - _SWEEP_KEYS
    if bad:
        raise InputError(f"{source}: [sweep]: unknown key(s) {sorted(bad)} (known: {sorted(_SWEEP_KEYS)})")
    base_raw = doc.get("base", {})
    if not isinstance(base_raw, dict):
        raise InputError(f"{source}: [base] must be a table")
    base: dict[str, Any] = {}
    for k, v in base_raw.items():
        ck = _canon_key(k, f"{source}: [base]")
        if isinstance(v, dict) and "." not in ck and ck != "options":
            base[ck] = v  # e.g. capacity = {cpu = 64, mem = 16}
        elif isinstance(v, dict) and ck == "options":
            for ok, ov in v.items():
                base[f"options.{ok}"] = ov
        else:
            base[ck] = v
    grid_raw = doc.get("grid", {})
    if not isinstance(grid_raw, dict):
        raise InputError(f"{source}: [grid] must be a table")
    grid: dict[str, list[Any]] = {}
    for k, v in _flatten(grid_raw).items():
        ck = _canon_key(k, f"{source}: [grid]")
        vals = v if isinstance(v, list) else [v]
        if not vals:
            raise InputError(f"{source}: [grid]: {k!r} is an empty list (no run would be made)")
        grid[ck] = vals
    runs_raw = doc.get("runs", [])
    if isinstance(runs_raw, dict):
        runs_raw = [runs_raw]
    if not isinstance(runs_raw, list) or not all(isinstance(r, dict) for r in runs_raw):
        raise InputError(f"{source}: [[runs]] must be an array of tables")
    runs: list[dict[str, Any]] = []
    for i, r in enumerate(runs_raw):
        entry: dict[str, Any] = {}
        for k, v in r.items():
            ck = _canon_key(k, f"{source}: runs[{i}]")
            if ck == "options" and isinstance(v, dict):
                for ok, ov in v.items():
                    entry[f"options.{ok}"] = ov
            else:
                entry[ck] = v
        runs.append(entry)
    if not base and not grid and not runs:
        raise InputError(
            f"{source}: the sweep defines no run: give [base] settings, a [grid] of values or [[runs]] entries"
        )
    if meta.get("name"):
        name = check_name(str(meta["name"]), f"{source}: [sweep] name")
    else:  # from the file name: made plain
        name = re.sub(r"[^A-Za-z0-9_.+=@, -]", "_", default_name).lstrip(".").replace("..", "_") or "sweep"
    return SweepSpec(
        name=name,
        base=base,
        grid=grid,
        runs=runs,
        plots=bool(meta.get("plots", False)),
        csv=bool(meta.get("csv", False)),
        source=source,
        raw=doc,
    )


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+=@, -]*$")


def check_name(name: str, where: str = "sweep name") -> str:
    """A sweep name is a plain name (it becomes the directory ``megha-sweep/NAME``): no path separators, no
    leading dot, no ``..``."""
    if not _PLAIN_NAME.match(name) or ".." in name or len(name) > 128:
        raise InputError(
            f"{where}: {name!r} is not a plain name (letters, digits, '_', '-', '.', no '/' or leading '.'); "
            f"use --out to choose another directory"
        )
    return name


def load(path: str | Path) -> SweepSpec:
    """Read a sweep file (``.toml`` or ``.json``)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"{p}: cannot read sweep file: {e.strerror or e}") from e
    if p.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from e
    else:
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"{p}: not valid TOML: {e}") from e
    return parse(doc, str(p), default_name=p.stem)


def _apply(cfg: dict[str, Any], key: str, value: Any) -> None:
    head, _, rest = key.partition(".")
    if not rest:
        cfg[head] = value
        return
    sub = cfg.get(head)
    if sub is None:
        from megha.config import RunConfig

        default = RunConfig.model_fields[head].get_default(call_default_factory=True)
        sub = dict(default) if isinstance(default, dict) else {}
    elif not isinstance(sub, dict):
        raise InputError(f"cannot set {key!r}: {head!r} is not a table")
    else:
        sub = dict(sub)
    parts = rest.split(".")
    node = sub
    for part in parts[:-1]:
        nxt = node.get(part)
        node[part] = dict(nxt) if isinstance(nxt, dict) else {}
        node = node[part]
    node[parts[-1]] = value
    cfg[head] = sub


def _get(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _slug(params: dict[str, Any], limit: int = 64) -> str:
    parts = []
    for k, v in sorted(params.items()):
        short = k.removeprefix("options.")
        val = v if isinstance(v, str | int | float | bool) or v is None else json.dumps(v, separators=(",", ":"))
        if isinstance(val, str) and val.startswith("sample:"):
            val = val[len("sample:") :]
        if isinstance(val, str) and "/" in val:
            val = val.rsplit("/", 1)[-1]
        parts.append(f"{short}-{val}")
    s = re.sub(r"[^A-Za-z0-9._=-]+", "", "_".join(parts))
    return s[:limit].rstrip("_-.") or "run"


def hash_of(run_id: str) -> str:
    """The configuration hash at the end of a run id."""
    return run_id.rsplit("__", 1)[-1]


def config_hash(config: dict[str, Any]) -> str:
    """Stable short hash of a resolved run configuration."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def resolve_config(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate one run's settings (RunConfig and the scheduler's options) and fill in defaults."""
    from pydantic import ValidationError

    from megha.config import RunConfig
    from megha.schedulers import registry

    data = dict(raw)
    data.setdefault("scheduler", "megha")
    data.setdefault("trace", "sample:GOOG_subtrace")
    if data.get("cluster") is None and data.get("workers") is None:
        from megha.samples import DEFAULT_CLUSTER

        data["cluster"] = DEFAULT_CLUSTER
    try:
        cfg = RunConfig(**data)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        raise InputError(f"{where}: invalid configuration: {msgs}") from None
    try:
        spec = registry.get(cfg.scheduler)
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    except KeyError:
        raise InputError(f"{where}: unknown scheduler {cfg.scheduler!r} (see `megha schedulers`)") from None
    try:
        registry.parse_options(spec, cfg.options)
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    mode = "resource" if cfg.resources else "slot"
    if mode not in spec.modes:
        raise InputError(f"{where}: scheduler {cfg.scheduler!r} does not support {mode} mode")
    return cfg.model_dump(mode="json")


def expand(spec: SweepSpec) -> list[RunPlan]:
    """The sweep's runs in order: for each ``[[runs]]`` entry (or one empty entry), every grid point."""
    entries = spec.runs or [{}]
    keys = list(spec.grid)
    points = list(itertools.product(*(spec.grid[k] for k in keys))) if keys else [()]
    varying_entry_keys: list[str] = []
    if len(entries) > 1:
        for e in entries:
            for k in e:
                if (
                    k not in varying_entry_keys
                    and len({json.dumps(x.get(k), sort_keys=True, default=str) for x in entries}) > 1
                ):
                    varying_entry_keys.append(k)
    varying_grid = [k for k in keys if len(spec.grid[k]) > 1]
    plans: list[RunPlan] = []
    seen: dict[str, int] = {}
    for e_i, entry in enumerate(entries):
        for point in points:
            idx = len(plans)
            where = f"{spec.source}: run {idx}" + (f" (runs[{e_i}])" if spec.runs else "")
            cfg: dict[str, Any] = {}
            try:
                for k, v in [*spec.base.items(), *entry.items(), *zip(keys, point, strict=True)]:
                    _apply(cfg, k, v)
            except InputError as err:
                raise InputError(f"{where}: {err}") from None
            resolved = resolve_config(cfg, where)
            params: dict[str, Any] = {}
            for k in varying_entry_keys:
                params[k] = entry[k] if k in entry else _get(resolved, k)
            for k in varying_grid:
                params[k] = point[keys.index(k)]
            h = config_hash(resolved)
            if h in seen:
                raise InputError(
                    f"{where}: same configuration as run {seen[h]} (a duplicated value in the grid or runs?)"
                )
            seen[h] = idx
            plans.append(RunPlan(idx, f"{_slug(params)}__{h}", params, resolved))
    return plans


def param_names(plans: list[RunPlan]) -> list[str]:
    """The varying parameters of a sweep, in first-seen order."""
    out: list[str] = []
    for p in plans:
        for k in p.params:
            if k not in out:
                out.append(k)
    return out


PLAN_FILE = "sweep.json"


def load_plans(out: Path) -> tuple[dict[str, Any], list[RunPlan]]:
    """The plan saved in a sweep directory."""
    p = out / PLAN_FILE
    if not p.is_file():
        raise InputError(f"{out}: not a sweep directory (no {PLAN_FILE})")
    doc = json.loads(p.read_text())
    return doc, [RunPlan.from_json(r) for r in doc["runs"]]
