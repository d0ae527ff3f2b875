"""Separability threshold delta*(kappa) of logistic data (Candes-Sur phase transition).

Separability (Candes & Sur 2020, no intercept): with W = y <x, v> (density 2 phi(w) s(kappa w)) and
G ~ N(0, 1) independent,

    h(kappa) = min_t E[(G - t W)_+^2],      delta*(kappa) = 1 / h(kappa),

and the data are linearly separable with probability -> 1 iff delta < delta*(kappa).  At kappa = 0,
h = E[G_+^2] = 1/2, so delta* = 2 (Cover's theorem); delta* increases with kappa (to infinity as
kappa -> infinity).  For delta > delta* the unregularized MLE exists and is the lam = 0 fixed point
(:func:`cgmt.mle`).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import ndtr

from empirical.common.failures import ConvergenceError

from ._newton import bracketed_root
from .quadrature import gaussian_rule
from .validation import check_kappa

__all__ = ["separability_threshold", "candes_sur_h"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@lru_cache(maxsize=1024)
def _w_rule(kappa):
    z, w = gaussian_rule([(0.0, math.pi / kappa)] if kappa > 0 else [], order=30)
    e = np.exp(-np.abs(kappa * z))
    s = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return z, 2.0 * w * s  # E f(W) = sum(wts * f(z))


def _objective(t, z, wts):
    c = t * z
    tail = ndtr(-c)
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * c * c)
    return float(np.sum(wts * ((1.0 + c * c) * tail - c * pdf)))


def _derivative(t, z, wts):
    c = t * z
    pos = _INV_SQRT_2PI * np.exp(-0.5 * c * c) - c * ndtr(-c)  # E[(G - c)_+]
    return float(-2.0 * np.sum(wts * z * pos))


def candes_sur_h(kappa) -> tuple[float, float]:
    """(h, t*) with h(kappa) = min_t E[(G - t W)_+^2] (see the module docstring).

    Parameters
    ----------
    kappa : float
        Signal strength, >= 0.

    Returns
    -------
    h : float
        h(kappa) = 1 / delta*(kappa).
    t_star : float
        The minimising t (0 at kappa = 0).

    Examples
    --------
    >>> candes_sur_h(0.0)
    (0.5, 0.0)
    >>> [round(x, 4) for x in candes_sur_h(2.0)]
    [0.3449, 0.7809]
    """
    kappa = check_kappa(kappa)
    if kappa == 0.0:
        return 0.5, 0.0
    z, wts = _w_rule(kappa)
    hi = 1.0
    while _derivative(hi, z, wts) < 0.0:
        hi *= 2.0
        if hi > 1e12:
            raise ValueError(f"kappa={kappa} is too large for the separability threshold computation")
    t, _, converged = bracketed_root(lambda s: _derivative(s, z, wts), 0.0, hi, xtol=1e-15, rtol=1e-15, max_iter=500)
    if not converged:
        raise ConvergenceError(f"the separability threshold at kappa={kappa}: Brent's method did not converge in 500 "
                               "iterations")
    return _objective(t, z, wts), t


def separability_threshold(kappa) -> float:
    """delta*(kappa): for delta < delta* the data are separable (the MLE does not exist) with probability -> 1.

    Parameters
    ----------
    kappa : float >= 0
        Signal strength (``||beta*||^2 = p kappa^2``).

    Returns
    -------
    float
        The threshold on delta = n/p.

    Examples
    --------
    >>> separability_threshold(0.0)
    2.0
    >>> round(separability_threshold(2.0), 3)
    2.899
    """
    return 1.0 / candes_sur_h(kappa)[0]
