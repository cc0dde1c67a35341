"""Run metrics: the task recorder, derived tables and summaries, counters, fingerprints, figures and reports."""

#: import Matplotlib lean in every plot of this process (:data:`megha.metrics.plots.LEAN_IMPORT`): the ``megha``
#: command sets it, its figures go to files. It lives here so that setting it loads nothing (the plots module loads
#: numpy, which ``megha --help`` does not need)
lean_plot_import = False
