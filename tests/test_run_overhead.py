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


def test_recorder_combined_one_task_reports_equal_the_separate_calls():
    from megha.metrics.recorder import TaskRecorder

    arrival = np.zeros(4)
    a, b = TaskRecorder(arrival), TaskRecorder(arrival)
    done_a, done_b = [], []
    a.on_all_done, b.on_all_done = (lambda: done_a.append(1)), (lambda: done_b.append(1))
    a.expect(4)
    b.expect(4)
    for t in range(4):
        a.decided_one(t, 1.0 + t)
        a.launched_one(t, 0.5, 1.5 + t, 10 + t)
        b.decided_launched_one(t, 1.0 + t, 0.5, 1.5 + t, 10 + t)
    for t in range(4):
        a.finished_one(t, 5.0 + t)
        a.completion_known_one(t, 5.5 + t)
        b.finished_known_one(t, 5.0 + t, 5.5 + t)
    assert done_a == done_b == [1]
    assert a.running == b.running == 0 and a.outstanding == b.outstanding == 0
    for col in ("scheduled", "start", "end", "known", "worker", "comm"):
        assert np.array_equal(getattr(a, col), getattr(b, col), equal_nan=True), col
