"""Per-task fingerprints of every registered scheduler on small fixed runs: did a change alter any result?

    python benchmarks/fingerprints.py                       # compare with benchmarks/fingerprints.json
    python benchmarks/fingerprints.py --only megha,sparrow  # a few schedulers
    python benchmarks/fingerprints.py --update              # write the current fingerprints as the baseline

A run's fingerprint hashes every task's decision, start, end, worker and completion times (see
:mod:`megha.metrics.fingerprint`). Speed and structure work must leave every fingerprint unchanged; a change of
semantics made on purpose updates the baseline in its own commit, which says why. Exit status 1 when a
fingerprint differs from the baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.runner import simulate
from megha.schedulers import registry

BASELINE = Path(__file__).with_name("fingerprints.json")


def cases() -> dict[str, RunConfig]:
    """Small but non-trivial runs: queues form, constraints bite, several GMs/LMs or masters interact."""
    out: dict[str, RunConfig] = {}
    for name in registry.names():
        spec = registry.get(name)
        if "slot" in spec.modes:
            out[f"{name}/fb-slot"] = RunConfig(
                scheduler=name, trace="sample:synthetic_FB_sub_2000jobs", workers=300, max_jobs=80, gms=3, lms=3, seed=1
            )
        if "resource" in spec.modes:
            out[f"{name}/fb-resource"] = RunConfig(
                scheduler=name,
                trace="sample:synthetic_FB_sub_2000jobs",
                workers=30,
                max_jobs=40,
                gms=2,
                lms=2,
                seed=2,
                resources=True,
                constraints=False,
                capacity={"cpu": 8.0, "mem": 4.0},
                demand={"cpu": 1.0, "mem": 0.25},
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated scheduler names")
    ap.add_argument("--update", action="store_true", help="write the fingerprints as the new baseline")
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    base = json.loads(args.baseline.read_text()) if args.baseline.is_file() else {}
    now: dict[str, str] = {}
    differ = []
    for key, cfg in cases().items():
        if only and cfg.scheduler not in only:
            continue
        t = time.process_time()
        fp = fingerprint(simulate(cfg))
        now[key] = fp
        old = base.get(key)
        mark = "new" if old is None else ("same" if old == fp else "DIFFERENT")
        if mark == "DIFFERENT":
            differ.append(key)
        print(f"{key:28s} {fp}  {mark:9s} ({time.process_time() - t:.1f} CPU-s)", flush=True)
    if args.update:
        base.update(now)
        args.baseline.write_text(json.dumps(dict(sorted(base.items())), indent=1) + "\n")
        print(f"wrote {args.baseline}")
        return 0
    if differ:
        print(f"{len(differ)} fingerprint(s) differ from {args.baseline.name}: {', '.join(differ)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
