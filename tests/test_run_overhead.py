"""What every run pays outside the scheduler: the command's imports, the eligible-worker counts, the figures."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from megha.model import workload as W


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_cli_attaches_optional_commands_only_when_asked():
    out = _python(
        "import sys, megha.cli as c\n"
        "print('megha.sweep' in sys.modules, 'megha.live.cli' in sys.modules)\n"
        "app = c.app\n"
        "print('megha.sweep' in sys.modules, 'megha.live.cli' in sys.modules)\n"
        "print(sorted(n for n in (x.name for x in app.registered_commands) if n))\n"
    )
    before, after, names = out.splitlines()
    assert before == "False False"
    assert after == "True True"
    assert "sweep" in names and "schedulers" in names


def test_eligible_counts_equal_pairwise_comparison():
    rng = np.random.default_rng(3)
    for trial in range(40):
        bits = int(rng.integers(1, 23))
        tm = (rng.integers(0, 2**bits, size=3000) & rng.integers(0, 2**bits, size=3000)).astype(np.uint32)
        if trial % 3 == 0:  # constraint bits that do not start at bit 0
            tm <<= np.uint32(rng.integers(1, 6))
        wm = rng.integers(0, 2**26, size=200).astype(np.uint32)
        got = W.eligible_worker_counts(tm, None, wm, None)
        want = ((tm[:, None] & ~wm[None, :]) == 0).sum(axis=1)
        assert got.dtype == np.int64
        assert np.array_equal(got, want)


def test_run_result_carries_the_eligible_counts_the_summary_uses():
    from megha.config import RunConfig
    from megha.metrics import summary as S
    from megha.metrics.report import summarize
    from megha.runner import simulate

    res = simulate(RunConfig(scheduler="sparrow", trace="sample:YH_small", workers=200, max_jobs=30))
    assert res.eligible is not None
    assert np.array_equal(res.eligible, S.eligible_workers(res.workload, res.datacenter))
    assert np.array_equal(res.feasible, res.eligible > 0)
    doc = summarize(res)
    res.eligible = None  # the summary counts them itself: the same table
    assert summarize(res)["starvation"] == doc["starvation"]


def test_lean_matplotlib_import_draws_the_same_pixels(tmp_path):
    code = (
        "import sys, numpy as np\n"
        "from megha.metrics import plots\n"
        "plots.LEAN_IMPORT = sys.argv[1] == '1'\n"
        "plots.save_cdfs({'a': np.random.default_rng(0).lognormal(size=500)}, sys.argv[2], title='t')\n"
    )
    files = []
    for lean in ("0", "1"):
        path = tmp_path / f"cdf{lean}.png"
        subprocess.run([sys.executable, "-c", code, lean, str(path)], check=True)
        files.append(path.read_bytes())
    assert files[0] == files[1]
