"""Student's t quantiles for the marts' intervals and change points, from scipy.

scipy.stats is imported on first use, not with this module: it costs about 0.8 s of start-up, and every process that
loads the pipeline's definitions (the CLI, the daemon, the code server, each run worker) imports the marts, while
only a refresh that builds intervals or change points needs a quantile."""

from __future__ import annotations


def t_quantile(q: float, df: float) -> float:
    """The q quantile of Student's t with `df` degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(q, df))
