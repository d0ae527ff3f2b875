"""Grid sweeps of the fixed point: ``cgmt.sweep(deltas, lams, kappas)`` -> tidy pandas DataFrame.

Each (delta, kappa) pair is one task: its lams are solved from the largest to the smallest, each
warm-started from a secant prediction through the previous two solutions (continuation in lam); tasks run in parallel
with joblib (``n_jobs``), with a tqdm progress bar over tasks.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from empirical.common.checks import check_int, check_positive_array
from empirical.common.failures import ConvergenceError, quiet
from empirical.common.resources import check_n_jobs

from ._newton import warm_start_reaches
from ._solver import solve
from .quadrature import DEFAULT_ORDER
from .validation import MAX_POINTS, check_delta, check_grid_size, check_kappa, check_lams

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["sweep", "COLUMNS"]

COLUMNS = ["delta", "lam", "kappa", "alpha", "sigma", "gamma", "margin", "accuracy", "alignment",
           "stability", "alpha_salehi", "success", "residual", "nit", "message"]


def _row(r):
    return {c: r[c] for c in COLUMNS}


def _y(r):
    return np.array([r.alpha / r.sigma, np.log(r.sigma), np.log(r.gamma)])


def _predict(hist, lam):
    """Secant predictor in (m, log sigma, log gamma) along log lam from the last two solutions; None (a cold start)
    when the last solution is no warm start for ``lam`` (:func:`cgmt._newton.warm_start_reaches`)."""
    if not hist or not warm_start_reaches(lam, hist[-1][0]):
        return None
    if len(hist) == 1:
        return hist[-1][1]
    (l1, r1), (l2, r2) = hist[-2], hist[-1]
    t = (np.log(lam) - np.log(l2)) / (np.log(l2) - np.log(l1))
    y = _y(r2) + t * (_y(r2) - _y(r1))
    sigma = float(np.exp(y[1]))
    return (y[0] * sigma, sigma, float(np.exp(y[2])))


def _task(delta, kappa, lams, tol, quad_order, max_iter):
    rows = []
    hist = []  # converged (lam, result) pairs, for warm starts
    for lam in sorted(lams, reverse=True):
        with quiet():  # failures are rows with success=False
            r = solve(delta, lam, kappa, x0=_predict(hist, lam), tol=tol, quad_order=quad_order, max_iter=max_iter)
        if r.success:
            hist = (hist + [(lam, r)])[-2:]
        rows.append(_row(r))
    return rows


def sweep(deltas, lams, kappas, *, n_jobs=1, progress=True, tol=1e-10, quad_order=DEFAULT_ORDER, max_iter=100,
          strict=False, max_points: int | None = MAX_POINTS) -> pd.DataFrame:
    """Solve on the Cartesian grid deltas x lams x kappas; one row per point, sorted by (kappa, delta, lam).

    Parameters
    ----------
    deltas, lams, kappas : float or array of floats
        The grid (delta, lam > 0; kappa >= 0); duplicates are removed.
    n_jobs : int
        > 1 (or -1 for all cores) runs the (delta, kappa) tasks in parallel processes (joblib; switch the
        backend with ``joblib.parallel_config``).
    progress : bool
        Show a progress bar.
    tol, quad_order, max_iter
        As for :func:`cgmt.solve`; along lam each task warm-starts from its neighbours.
    strict : bool
        Raise :class:`cgmt.ConvergenceError` if any point did not converge; otherwise such rows have
        ``success = False`` and their residual and message.
    max_points : int or None
        Refuse grids of more points than this (``MAX_POINTS``; None: no limit) before any work.

    Returns
    -------
    pandas.DataFrame
        One row per point with the columns ``COLUMNS`` (delta, lam, kappa, alpha, sigma, gamma, margin,
        accuracy, alignment, stability, alpha_salehi, success, residual, nit, message).

    Examples
    --------
    >>> table = sweep([1.0, 2.0], [0.1, 1.0], 2.0, progress=False)
    >>> table.shape, bool(table["success"].all())
    ((4, 15), True)
    """
    d = check_positive_array(deltas, "deltas").ravel()
    k = check_positive_array(kappas, "kappas", allow_zero=True).ravel()
    for name, values, check in (("deltas", d, check_delta), ("kappas", k, check_kappa)):  # the theory's domain
        for i, v in enumerate(values.tolist()):
            check(v, f"{name}[{i}]")
    d, k = np.unique(d), np.unique(k)
    lm = np.unique(check_lams(lams))
    n_jobs = check_n_jobs(n_jobs)
    max_iter = check_int(max_iter, "max_iter")
    if max_points is not None:
        max_points = check_int(max_points, "max_points")
    check_grid_size(d.size * lm.size * k.size, max_points, "the sweep grid (deltas x lams x kappas)")
    tasks = list(itertools.product(d.tolist(), k.tolist()))
    lam_list = lm.tolist()
    if n_jobs == 1:
        it = (_task(dd, kk, lam_list, tol, quad_order, max_iter) for dd, kk in tasks)
    else:
        it = Parallel(n_jobs=n_jobs, return_as="generator")(
            delayed(_task)(dd, kk, lam_list, tol, quad_order, max_iter) for dd, kk in tasks)
    if progress:
        it = tqdm(it, total=len(tasks), desc="cgmt sweep", unit="(delta,kappa)")
    rows = [row for chunk in it for row in chunk]
    import pandas as pd  # deferred: pandas costs 0.3 s of import cgmt, and only a sweep's table needs it

    df = pd.DataFrame(rows, columns=COLUMNS).sort_values(["kappa", "delta", "lam"], ignore_index=True)
    if strict and not df["success"].all():
        bad = df.loc[~df["success"], ["delta", "lam", "kappa", "residual"]]
        raise ConvergenceError(f"{len(bad)} grid point(s) did not converge:\n{bad.head(10).to_string()}")
    return df
