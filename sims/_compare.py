"""Monte Carlo versus theory: replicates in parallel, tidy tables with standard errors and z-scores."""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

import cgmt
from cgmt.validation import check_grid_size, check_lam, check_lams
from empirical.common.checks import as_seed_sequence, check_int, check_positive_array
from empirical.common.failures import ConvergenceWarning
from empirical.common.resources import check_n_jobs

from ._measure import QUANTITIES, measure_replicate

#: the ``cgmt.solve`` field that predicts each measured quantity (None: no prediction in the theory)
THEORY_FIELD = {
    "alpha": "alpha", "sigma": "sigma", "gamma": "gamma", "margin": "margin", "alignment": "alignment",
    "accuracy": "accuracy", "accuracy_formula": "accuracy", "cos_independent": "stability",
    "cos_subsample": None, "cos_full_subsample": None,  # from cgmt.stability (two-replica theory)
}


def theory_values(delta, lam, kappa, *, drop: float = 0.2, val_fraction: float = 0.2) -> dict:
    """The ``cgmt`` predictions for every quantity of ``QUANTITIES``.

    ``cgmt.solve`` gives alpha, sigma, gamma, margin, alignment, accuracy and the independent-sample
    cosine (``stability``); the two ablation cosines come from the two-replica theory
    ``cgmt.stability(delta, lam, kappa, protocol, drop=, val_fraction=)`` (NaN where that solve fails).

    Parameters
    ----------
    delta, lam, kappa : float
        The point (theory convention, see :mod:`cgmt`).
    drop, val_fraction : float, default=0.2
        The ablation protocol (:func:`cgmt.ablation.ablation_split`).

    Returns
    -------
    dict
        quantity -> prediction.

    Examples
    --------
    >>> values = theory_values(2.0, 0.1, 2.0)
    >>> round(values["alpha"], 4), round(values["cos_subsample"], 4)
    (0.927, 0.731)
    """
    res = cgmt.solve(delta, lam, kappa, strict=True)  # no theory value without the fixed point
    out = {q: (float(res[f]) if f is not None else float("nan")) for q, f in THEORY_FIELD.items()}
    for q, protocol in (("cos_subsample", "subsample"), ("cos_full_subsample", "full_vs_subsample")):
        st = cgmt.stability(delta, lam, kappa, protocol, drop=drop, val_fraction=val_fraction)
        out[q] = float(st.cosine) if st.success else float("nan")
    return out


def run_replicate(task, limit_threads):
    (point, seed), kwargs = task
    if limit_threads:
        with threadpool_limits(1):
            return measure_replicate(*point, seed, **kwargs)
    return measure_replicate(*point, seed, **kwargs)


def _point_seeds(seed, n_points, replicates):
    root = as_seed_sequence(seed, "seed")
    return [pt.spawn(replicates) for pt in root.spawn(n_points)]


def summarize(rows: list[dict], theory: dict, meta: dict) -> pd.DataFrame:
    """Replicate dicts -> tidy table: quantity, mean, se, theory, z (+ meta columns, replicates, sd).

    Parameters
    ----------
    rows : list of dict
        :func:`sims.measure_replicate` outputs of one point.
    theory : dict
        quantity -> prediction (:func:`theory_values`).
    meta : dict
        Columns added to every row (the point).

    Returns
    -------
    pandas.DataFrame
        One row per quantity measured (not NaN in every replicate): the ``meta`` columns, ``quantity``,
        ``mean``, ``se``, ``theory``, ``z``, ``sd`` and ``replicates`` (se, sd and z are NaN with one replicate).
    """
    recs = []
    R = len(rows)
    for q in QUANTITIES:
        x = np.array([r[q] for r in rows], dtype=float)
        if np.all(np.isnan(x)):
            continue
        mean = float(np.mean(x))
        sd = float(np.std(x, ddof=1)) if R > 1 else float("nan")
        se = sd / math.sqrt(R) if R > 1 else float("nan")
        th = theory.get(q, float("nan"))
        z = (mean - th) / se if (se > 0 and np.isfinite(th)) else float("nan")
        recs.append(dict(meta, quantity=q, mean=mean, se=se, theory=th, z=z, sd=sd, replicates=R))
    return pd.DataFrame.from_records(recs)


#: most replicate fits :func:`compare_grid` runs unless told otherwise
MAX_FITS = 100_000


def compare_grid(deltas, lams, kappas, p: int, replicates: int, seed=0, *, n_jobs: int = 1,
                 progress: bool = True, theory=theory_values, max_fits: int | None = MAX_FITS,
                 **measure_kwargs) -> pd.DataFrame:
    """``compare`` over the Cartesian grid deltas x lams x kappas, one progress bar for all replicates.

    Point i of the grid (in ``itertools.product(kappas, deltas, lams)`` order) gets the i-th child of
    ``SeedSequence(seed)`` and its replicates that child's children, so results are reproducible for a
    given grid.  Returns the concatenated tidy table with columns kappa, delta, lam, p, quantity, mean,
    se, theory, z, sd, replicates, n, success (all replicates reached gradient norm <= tol).
    ``theory``: callable (delta, lam, kappa) -> {quantity: value}; default the ``cgmt`` predictions.

    Parameters
    ----------
    deltas, lams, kappas : float or array of floats
        The grid.
    p, replicates, seed, n_jobs, progress, theory, **measure_kwargs
        As for :func:`compare`.
    max_fits : int or None
        Refuse grids needing more replicate fits than this (``MAX_FITS``; None: no limit) before any work.

    Returns
    -------
    pandas.DataFrame
        The concatenated tables; it warns
        ``cgmt.ConvergenceWarning`` for a point whose fits did not all converge.
    """
    n_jobs = check_n_jobs(n_jobs)
    deltas = check_positive_array(deltas, "deltas")
    lams = check_lams(lams)
    kappas = check_positive_array(kappas, "kappas", allow_zero=True)
    points = [(float(d), float(lam), float(k)) for k, d, lam in itertools.product(kappas, deltas, lams)]
    p = check_int(p, "p", minimum=2)
    replicates = check_int(replicates, "replicates", minimum=2)  # standard errors need two
    check_grid_size(len(points) * replicates, max_fits, "the simulation grid (points x replicates)", "max_fits=...")
    seeds = _point_seeds(seed, len(points), replicates)
    tasks = [(((d, lam, k, int(p)), s), measure_kwargs) for (d, lam, k), ss in zip(points, seeds) for s in ss]
    par = Parallel(n_jobs=n_jobs, return_as="generator")
    gen = par(delayed(run_replicate)(t, n_jobs != 1) for t in tasks)
    results = list(tqdm(gen, total=len(tasks), disable=not progress, desc=f"sims p={p}"))
    tables = []
    for i, (d, lam, k) in enumerate(points):
        rows = results[i * replicates:(i + 1) * replicates]
        meta = dict(kappa=k, delta=d, lam=lam, p=int(p))
        th = (theory(d, lam, k, drop=measure_kwargs.get("drop", 0.2),
                     val_fraction=measure_kwargs.get("val_fraction", 0.2))
              if theory is theory_values else theory(d, lam, k))
        tab = summarize(rows, th, meta)
        tab["n"] = rows[0]["n"]
        tab["success"] = all(r["success"] for r in rows)
        if not tab["success"].iloc[0]:
            worst = max(r["max_grad_norm"] for r in rows)
            warnings.warn(f"sims: some fits at delta={d}, lam={lam}, kappa={k}, p={p} stopped at gradient norm "
                          f"{worst:.3g} > tol (see the 'success' column)", ConvergenceWarning, stacklevel=2)
        tables.append(tab)
    return pd.concat(tables, ignore_index=True)


def compare(delta, lam, kappa, p: int, replicates: int, seed=0, *, n_jobs: int = 1, progress: bool = True,
            theory=theory_values, **measure_kwargs) -> pd.DataFrame:
    """Simulate ``replicates`` independent replicates at one (delta, lam, kappa, p) and compare to theory.

    Returns a tidy ``DataFrame``, one row per quantity (alpha, sigma, gamma, margin, alignment,
    accuracy, accuracy_formula, cos_independent, cos_subsample, cos_full_subsample; a quantity that was not
    measured, NaN in every replicate, has no row), with columns
    ``quantity``, ``mean``, ``se`` (standard error of the mean over replicates), ``theory`` (the
    ``cgmt`` prediction, NaN where none exists) and ``z = (mean - theory) / se``, plus the point.
    ``measure_kwargs`` go to :func:`sims.measure_replicate` (n_test, stability, subsample, ...).

    Parameters
    ----------
    delta, lam, kappa : float
        The point (theory convention, see :mod:`cgmt`).
    p : int
        Dimension of the simulation (n = round(delta p)).
    replicates : int >= 2
        Independent replicates (standard errors need two).
    seed : int or SeedSequence
        Root seed; every replicate gets its own child stream.
    n_jobs : int
        joblib workers (each fit single-threaded).
    progress : bool
        Show a progress bar.
    theory : callable
        (delta, lam, kappa, ...) -> dict of predictions (default :func:`theory_values`).
    **measure_kwargs
        Passed to :func:`sims.measure_replicate` (``n_test``, ``stability``, ``subsample``, ...).

    Returns
    -------
    pandas.DataFrame
        The table described above, with the columns of :func:`compare_grid`.

    Examples
    --------
    >>> table = compare(2.0, 0.1, 2.0, p=50, replicates=2, seed=0, progress=False, stability=False)
    >>> list(table.columns[:6]), len(table)
    (['kappa', 'delta', 'lam', 'p', 'quantity', 'mean'], 9)
    """
    n_jobs = check_n_jobs(n_jobs)
    return compare_grid([delta], [check_lam(lam)], [kappa], p, replicates, seed, n_jobs=n_jobs, progress=progress,
                        theory=theory, **measure_kwargs)


def agreement(table: pd.DataFrame, *, k: float = 4.0, allowance=None) -> pd.Series:
    """Row-wise check |mean - theory| <= k se + allowance (rows without a theory value count as True).

    ``allowance``: None (0), a number, or a callable (row) -> number (e.g. a finite-size allowance).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare` or :func:`compare_grid`.
    k : float
        Standard errors allowed.
    allowance : None, float or callable
        Added to the allowed difference: None (0), a number, or ``allowance(row) -> number``.

    Returns
    -------
    pandas.Series of bool
        One entry per row of ``table``: whether the simulation agrees with the theory.

    Examples
    --------
    >>> table = compare(2.0, 0.1, 2.0, p=50, replicates=2, progress=False, stability=False)
    >>> bool(agreement(table, k=10).all())
    True
    """
    def ok(row):
        if not np.isfinite(row["theory"]):
            return True
        a = 0.0 if allowance is None else (allowance(row) if callable(allowance) else float(allowance))
        return bool(abs(row["mean"] - row["theory"]) <= k * row["se"] + a)
    return table.apply(ok, axis=1)
