"""Run metrics: the task recorder, derived tables and summaries, counters, fingerprints, figures and reports."""

#: import Matplotlib without the documentation of its artist classes (:func:`megha.metrics.plots._figure_class`):
#: the ``megha`` command sets it, its figures go to files and nobody reads ``help(Line2D.set)`` in that process. It
#: lives here so that setting it loads nothing (the plots module loads numpy, which ``megha --help`` does not need)
lean_plot_import = False
