"""Unlabelled minor ticks drawn by one moved Tick (metrics.plots.light_minor_ticks) give the figure Matplotlib draws
with a Tick per location."""

from __future__ import annotations

import io

import numpy as np

from megha.metrics import plots


def _pixels(data: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def _cdf_figure() -> object:
    rng = np.random.default_rng(3)
    vals = np.concatenate([np.zeros(50), rng.lognormal(2.0, 3.0, 5000)])
    fig, ax = plots.new_figure(6.4, 4.2, dpi=80)
    plots.draw_cdfs(ax, {"a": vals, "b": vals * 3}, title="delays")
    fig.subplots_adjust(*plots.RUN_MARGINS)
    return fig


def _plain_png(fig: object) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def test_a_log_cdf_looks_the_same_with_moved_minor_ticks():
    plain = _pixels(_plain_png(_cdf_figure()))
    fig = _cdf_figure()
    plots.light_minor_ticks(fig)
    assert fig.axes[0].xaxis.get_minorticklocs().size == 0  # the axis no longer builds them itself
    light = _pixels(_plain_png(fig))
    # the same pixels (identical with Matplotlib 3.11; where grid lines cross, another drawing order could move a
    # pixel by one level)
    assert np.abs(light.astype(int) - plain.astype(int)).max() <= 1


def test_labelled_minor_ticks_of_a_short_log_axis_are_left_to_matplotlib():
    fig, ax = plots.new_figure(4, 3, dpi=60)
    ax.plot([2.0, 5.0], [1, 2])
    plots.log_axis(ax, "x")  # less than a decade: Matplotlib labels minor ticks
    fig.canvas.draw()
    before = ax.xaxis.get_minorticklocs()
    plots.light_minor_ticks(fig)
    assert np.array_equal(ax.xaxis.get_minorticklocs(), before) and before.size


def test_shared_log_axes_each_keep_their_minor_ticks():
    def figure() -> object:
        fig, axes = plots.new_panels(2, width=3, height=3, dpi=60, sharey=True)
        for k, ax in enumerate(axes):
            ax.plot([0, 1, 2], [1e-3, 1e2 * (k + 1), 1e4])
            ax.grid(True, which="both", alpha=0.3)
            plots.log_axis(ax, "y")
        fig.subplots_adjust(0.15, 0.15, 0.95, 0.9)
        return fig

    plain = _pixels(_plain_png(figure()))
    fig = figure()
    plots.light_minor_ticks(fig)
    light = _pixels(_plain_png(fig))
    # compositing order of crossing grid lines may move a pixel by one level; nothing more
    assert np.abs(light.astype(int) - plain.astype(int)).max() <= 1
