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
    """The figures a run writes (CDF, utilization, starvation) are the same bytes whether Matplotlib was imported
    lean (no ``set()`` signatures, no docstring substitutions) or as usual."""
    code = (
        "import sys, numpy as np\n"
        "import megha.metrics\n"
        "from megha.metrics import plots, report\n"
        "megha.metrics.lean_plot_import = sys.argv[1] == '1'\n"
        "out = sys.argv[2]\n"
        "rng = np.random.default_rng(0)\n"
        "plots.save_cdfs({'a': rng.lognormal(size=500)}, out + '/cdf.png', title='t')\n"
        "t = np.linspace(0.0, 100.0, 300)\n"
        "ser = {'time': t.tolist(), 'utilization': rng.random(300).tolist()}\n"
        "u = {'window_start': 0.0, 'mean': 0.5, 'series': ser}\n"
        "report.plot_utilization({'a': u}, out + '/util.png', title='t')\n"
        "rows = (('1', 0.01), ('2-10', 0.5), ('11-100', 2.0))\n"
        "b = [{'workers': w, 'jobs': 3, 'p50': p, 'p99': 10 * p} for w, p in rows]\n"
        "report.plot_starvation({'a': {'buckets': b}}, out + '/starv.png', title='t')\n"
        "import matplotlib.lines\n"
        "print(megha.metrics.lean_plot_import == ('%(' in (matplotlib.lines.Line2D.__init__.__doc__ or '')))\n"
    )
    figures = []
    for lean in ("0", "1"):
        d = tmp_path / lean
        d.mkdir()
        out = subprocess.run([sys.executable, "-c", code, lean, str(d)], check=True, capture_output=True, text=True)
        assert out.stdout.split() == ["True"]  # the lean import did skip the docstring substitutions
        figures.append({name: (d / name).read_bytes() for name in ("cdf.png", "util.png", "starv.png")})
    assert figures[0] == figures[1]


def test_task_constraints_are_the_draws_of_the_row_by_row_rule():
    """Block-wise synthesis gives the masks of the plain rule: per chunk a task type, a uniform for the cluster and
    a (chunk, 21) matrix of uniforms compared with the cluster's frequencies."""
    from megha.model import constraints as K

    def reference(n: int, rng: np.random.Generator, chunk: int) -> np.ndarray:
        out = np.empty(n, dtype=np.uint32)
        cum = np.cumsum(K.TASK_OCCURRENCE / K.TASK_OCCURRENCE.sum(axis=0, keepdims=True), axis=0).T
        cum[:, -1] = 1.0
        for lo in range(0, n, chunk):
            m = min(n, lo + chunk) - lo
            task_type = rng.integers(0, 4, size=m)
            cluster = (rng.random(m)[:, None] > cum[task_type]).sum(axis=1)
            draws = rng.random((m, K.NUM_CONSTRAINTS)) < K.TCFV[cluster] / 100.0
            out[lo : lo + m] = (draws.astype(np.uint32) << np.arange(K.NUM_CONSTRAINTS, dtype=np.uint32)).sum(
                axis=1, dtype=np.uint32
            )
        return out

    for n, chunk in ((0, 1 << 18), (1, 1 << 18), (40_000, 1 << 18), (40_000, 15_000), (70_001, 1 << 15)):
        for seed in (0, 7):
            got = K.synthesize_task_constraints(n, np.random.default_rng(seed), chunk=chunk)
            assert got.dtype == np.uint32
            assert np.array_equal(got, reference(n, np.random.default_rng(seed), chunk)), (n, chunk, seed)
    bits = np.random.default_rng(1).random((500, 21)) < 0.4
    for k in (0, 1, 8, 9, 21):
        want = (bits[:, :k].astype(np.uint32) << np.arange(k, dtype=np.uint32)).sum(axis=1, dtype=np.uint32)
        assert np.array_equal(K.bits_to_masks(bits[:, :k]), want)


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


def test_a_run_without_faults_does_not_import_the_fault_machinery():
    out = _python(
        "import sys\n"
        "from megha.config import RunConfig\n"
        "from megha.runner import simulate\n"
        "simulate(RunConfig(scheduler='sparrow', trace='sample:YH_small', workers=200, max_jobs=5))\n"
        "print('megha.runner.faults' in sys.modules, 'megha.model.faults' in sys.modules)\n"
    )
    assert out.split() == ["False", "False"]


def test_slot_mode_utilization_series_equals_the_weighted_sweep():
    """Without weights the series counts starts and ends up to each instant; it is the same step function, to the
    bit, as the general sweep (weights of one, in time order) over random runs with shared instants, unstarted
    tasks and preempted runs."""
    from types import SimpleNamespace

    from megha.metrics import summary as S

    rng = np.random.default_rng(5)
    for trial in range(30):
        n = int(rng.integers(1, 400))
        start = rng.integers(0, 50, size=n).astype(np.float64) * (0.5 if trial % 2 else 1.0)
        end = start + rng.integers(0, 20, size=n)
        start[rng.random(n) < 0.1] = np.nan
        end[rng.random(n) < 0.05] = np.inf
        runs = []
        for _ in range(int(rng.integers(0, 4))):
            ids = rng.choice(n, size=int(rng.integers(1, 5)), replace=False)
            st = rng.integers(0, 40, size=ids.size).astype(np.float64)
            st[rng.random(ids.size) < 0.2] = np.nan
            runs.append((ids, st, None, float(np.nanmax(np.r_[st, 0.0]) + rng.integers(0, 5))))
        rec = SimpleNamespace(start=start, end=end, n=n, preempted_runs=runs)
        total = float(rng.integers(1, 60))
        got = S.utilization_series(rec, total)
        want = S.utilization_series(rec, total, np.ones(n))
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), trial


def test_megha_help_loads_neither_numpy_nor_pydantic():
    """``megha --help`` lists the commands (optional ones included) without loading what only a run needs; the
    ``megha`` process collects garbage in larger batches (cli._lighter_gc)."""
    code = (
        "import atexit, gc, sys\n"
        "import megha.cli as c\n"
        "atexit.register(lambda: print('numpy' in sys.modules, 'pydantic' in sys.modules, gc.get_threshold()[0],"
        " file=sys.stderr))\n"
        "sys.argv = ['megha', '--help']\n"
        "c.main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0
    assert "simulate" in out.stdout and "reproduce" in out.stdout
    from megha.cli import GC_YOUNG_THRESHOLD

    assert out.stderr.split() == ["False", "False", str(GC_YOUNG_THRESHOLD)]
