"""Exact hard-margin (max-margin) fits and their Monte Carlo replicate, the check of :func:`cgmt.max_margin`.

The hard-margin classifier without intercept, ``min ||w||^2 subject to y_i x_i'w >= 1``, is a least-distance program
(LDP).  Lawson and Hanson (1974, *Solving Least Squares Problems*, ch. 23) reduce an LDP ``min ||w|| s.t. G w >= h``
to one non-negative least-squares problem: with ``E = [G'; h']`` ((p + 1) x n) and ``f = e_{p+1}``, let ``u >= 0``
minimize ``||E u - f||`` and ``r = E u - f``; the LDP is feasible iff ``r != 0``, and then ``w = -r[:p] / r[p]``.
SciPy's ``scipy.optimize.nnls`` is Lawson and Hanson's active-set algorithm, which terminates in finitely many
steps at the exact optimum (no tolerance to tune, unlike an interior-point QP or a large-C soft-margin SVM, whose
answer approaches the hard margin only as C -> infinity); it needs no new dependency.  Every fit is certified by its
KKT conditions: primal feasibility (every margin >= 1), dual feasibility (u >= 0) and ``w`` = the dual combination.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import nnls

from cgmt.validation import check_delta, check_kappa
from empirical.common.arrays import check_matrix, check_signed_labels
from empirical.common.checks import as_seed_sequence, check_int

from ._data import sample

__all__ = ["fit_max_margin", "measure_max_margin"]

#: a fit whose smallest margin y_i x_i'w falls below 1 - FEASIBILITY_TOL is reported as not converged
FEASIBILITY_TOL = 1e-7


def fit_max_margin(X, y):
    """The hard-margin classifier without intercept, ``argmin ||w|| s.t. y_i x_i'w >= 1``, exactly (LDP by NNLS).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        Features.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.

    Returns
    -------
    w : ndarray of shape (p,) or None
        The hard-margin solution; None when the data are not linearly separable through the origin.
    min_margin : float
        min_i y_i x_i'w (1 at the exact optimum; the certificate of primal feasibility).

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [-1.0, 0.5]]); y = np.array([1.0, -1.0])
    >>> w, m = fit_max_margin(X, y)
    >>> np.round(w, 6).tolist(), round(m, 9)
    ([1.0, 0.0], 1.0)
    """
    X = check_matrix(X, "X")  # the design and label checks of every fit (sims._fit)
    y = check_signed_labels(y, X.shape[0], "y")
    G = y[:, None] * X
    E = np.vstack([G.T, np.ones((1, G.shape[0]))])
    f = np.zeros(E.shape[0])
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * E.shape[1])
    r = E @ u - f
    if abs(r[-1]) < 1e-12:
        return None, -math.inf
    w = -r[:-1] / r[-1]
    return w, float(np.min(G @ w))


def measure_max_margin(delta, kappa, p, seed):
    """One Monte Carlo replicate of the max-margin fixed point: fit the hard margin on n = round(delta p) points.

    Parameters
    ----------
    delta : float
        n / p (below the separability threshold, else the replicate is usually not separable).
    kappa : float
        Signal strength.
    p : int
        Dimension.
    seed : int or SeedSequence
        The replicate's randomness (teacher and data).

    Returns
    -------
    dict
        ``separable`` (bool), ``alignment`` = <w/||w||, v>, ``margin`` = alignment / sqrt(1 - alignment^2) (the
        effective margin alpha/sigma of :class:`cgmt.CGMTResult`), ``geometric_margin`` = sqrt(p) / ||w|| (the
        smallest y_i sqrt(p) <x_i, w/||w||>), ``min_margin`` (the feasibility certificate) and ``n``; NaN fields
        when the data are not separable.
    """
    delta, kappa = check_delta(delta), check_kappa(kappa)
    p = check_int(p, "p")
    n = max(1, int(round(delta * p)))
    data = sample(n, p, kappa, np.random.default_rng(as_seed_sequence(seed, "seed")))
    w, min_margin = fit_max_margin(data.X, data.y)
    if w is None or min_margin < 1.0 - FEASIBILITY_TOL:
        return dict(separable=False, alignment=math.nan, margin=math.nan, geometric_margin=math.nan,
                    min_margin=min_margin, n=n)
    norm = float(np.linalg.norm(w))
    rho = float(w @ data.v) / norm
    return dict(separable=True, alignment=rho, margin=rho / math.sqrt(max(1.0 - rho * rho, 1e-300)),
                geometric_margin=math.sqrt(p) / norm, min_margin=min_margin, n=n)
