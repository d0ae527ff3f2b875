"""Finite-size study: how |simulation - theory| falls with the dimension p at fixed (delta, lam, kappa).

The raw per-replicate measurements (:func:`simulate_raw`) are kept separate from the theory
(:func:`analyze`), so a long simulation can be cached and re-analysed.  The per-replicate error
|x_r - theory| has a fluctuation part O(p^{-1/2}) (the estimator's order parameters concentrate at the
CLT rate) and a bias part (typically O(1/p)); ``analyze`` reports the root-mean-square error over
replicates, the bias of the mean with its standard error, and the least-squares slope of
log(rmse) against log(p) per point and quantity (expected about -1/2).
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from empirical.common.checks import as_seed_sequence
from empirical.common.resources import check_n_jobs

from ._compare import run_replicate, theory_values

#: hard points (near separability, small lambda, large kappa) used by default
HARD_POINTS = ((0.5, 0.01, 5.0), (1.0, 0.01, 5.0), (1.0, 0.1, 2.0))
DEFAULT_PS = (250, 500, 1000, 2000, 4000)
STUDY_QUANTITIES = ("alpha", "sigma", "gamma", "margin", "accuracy_formula")


def simulate_raw(points=HARD_POINTS, ps=DEFAULT_PS, replicates: int = 8, seed=0, *, n_jobs: int = 1,
                 progress: bool = True, **measure_kwargs) -> pd.DataFrame:
    """One row per (point, p, replicate) with every measured quantity (no theory involved).

    ``points``: iterable of (delta, lam, kappa).  Seeds: child i of ``SeedSequence(seed)`` for the
    i-th (point, p) pair in ``itertools.product(points, ps)`` order, then one grandchild per replicate.
    Defaults skip the stability fits (stability=False, subsample=False) unless overridden.

    Parameters
    ----------
    points : iterable of (delta, lam, kappa), default=HARD_POINTS
        The theory points simulated.
    ps : iterable of int, default=DEFAULT_PS
        Dimensions.
    replicates : int, default=8
        Replicates per (point, p).
    seed : int or SeedSequence, default=0
        Root seed (see above).
    n_jobs : int, default=1
        joblib workers (each fit single-threaded when > 1).
    progress : bool, default=True
        Show a progress bar.
    **measure_kwargs
        Passed to :func:`sims.measure_replicate`.

    Returns
    -------
    pandas.DataFrame
        One row per (point, p, replicate): ``delta``, ``lam``, ``kappa``, ``p``, ``replicate`` and the measured
        quantities of :func:`sims.measure_replicate`, sorted by kappa, delta, lam, p, replicate.
    """
    n_jobs = check_n_jobs(n_jobs)
    measure_kwargs.setdefault("stability", False)
    measure_kwargs.setdefault("subsample", False)
    pairs = list(itertools.product([tuple(map(float, pt)) for pt in points], [int(p) for p in ps]))
    root = as_seed_sequence(seed, "seed")
    children = root.spawn(len(pairs))
    tasks, meta = [], []
    # largest p first, so the expensive tasks do not straggle at the end
    order = sorted(range(len(pairs)), key=lambda i: -pairs[i][1] * max(1.0, pairs[i][0][0]))
    for i in order:
        (d, lam, k), p = pairs[i]
        for r, s in enumerate(children[i].spawn(int(replicates))):
            tasks.append((((d, lam, k, p), s), measure_kwargs))
            meta.append(dict(delta=d, lam=lam, kappa=k, p=p, replicate=r))
    gen = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(run_replicate)(t, n_jobs != 1) for t in tasks)
    rows = [dict(m, **res) for m, res in zip(meta, tqdm(gen, total=len(tasks), disable=not progress,
                                                        desc="finite-size"))]
    return pd.DataFrame.from_records(rows).sort_values(["kappa", "delta", "lam", "p", "replicate"],
                                                    ignore_index=True)


def loglog_slope(p, err) -> float:
    """Least-squares slope of log(err) against log(p).

    Parameters
    ----------
    p, err : arrays of positive floats
        Dimensions and the errors measured at them (same length, at least 2).

    Returns
    -------
    float
        The slope (e.g. -0.5 for err ~ p^-1/2).

    Examples
    --------
    >>> round(loglog_slope([100, 400], [0.2, 0.1]), 6)
    -0.5
    """
    x, y = np.log(np.asarray(p, float)), np.log(np.asarray(err, float))
    return float(np.polyfit(x, y, 1)[0])


def analyze(raw: pd.DataFrame, theory=theory_values, quantities=STUDY_QUANTITIES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Raw replicate rows -> (table, slopes).

    table: one row per (point, p, quantity) with mean, se, theory, bias = mean - theory,
    rmse = sqrt(mean_r (x_r - theory)^2), rel_rmse = rmse/|theory|.
    slopes: one row per (point, quantity) with the log-log slope of rmse against p, and of |bias|.

    Parameters
    ----------
    raw : pandas.DataFrame
        From :func:`simulate_raw`.
    theory : callable
        (delta, lam, kappa) -> {quantity: value}.
    quantities : sequence of str, default=STUDY_QUANTITIES
        Columns of ``raw`` analysed.

    Returns
    -------
    (table, slopes) : (pandas.DataFrame, pandas.DataFrame)
        As described above.
    """
    recs = []
    for (k, d, lam), grp in raw.groupby(["kappa", "delta", "lam"]):
        th = theory(d, lam, k)
        for p, g in grp.groupby("p"):
            for q in quantities:
                x = g[q].to_numpy(float)
                err = x - th[q]
                recs.append(dict(kappa=k, delta=d, lam=lam, p=int(p), quantity=q, replicates=len(x),
                                 mean=x.mean(), se=x.std(ddof=1) / np.sqrt(len(x)), theory=th[q],
                                 bias=err.mean(), rmse=np.sqrt(np.mean(err**2)),
                                 rel_rmse=np.sqrt(np.mean(err**2)) / abs(th[q])))
    table = pd.DataFrame.from_records(recs)
    srecs = []
    for (k, d, lam, q), g in table.groupby(["kappa", "delta", "lam", "quantity"]):
        srecs.append(dict(kappa=k, delta=d, lam=lam, quantity=q, rmse_slope=loglog_slope(g.p, g.rmse),
                          abs_bias_slope=loglog_slope(g.p, np.abs(g.bias))))
    return table, pd.DataFrame.from_records(srecs)
