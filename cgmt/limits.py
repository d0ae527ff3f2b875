"""The lam -> 0 limit: separability threshold (Candes-Sur phase transition) and the MLE fixed point.

Separability (Candes & Sur 2020, no intercept): with W = y <x, v> (density 2 phi(w) s(kappa w)) and
G ~ N(0, 1) independent,

    h(kappa) = min_t E[(G - t W)_+^2],      delta*(kappa) = 1 / h(kappa),

and the data are linearly separable with probability -> 1 iff delta < delta*(kappa).  At kappa = 0,
h = E[G_+^2] = 1/2, so delta* = 2 (Cover's theorem); delta* increases with kappa (to infinity as
kappa -> infinity).  For delta > delta* the unregularized MLE exists and is the lam = 0 fixed point.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr

from ._checks import check_delta, check_kappa, check_scalar
from .quadrature import DEFAULT_ORDER, gaussian_rule
from .solver import ConvergenceError, _solve

__all__ = ["separability_threshold", "mle", "candes_sur_h"]

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


def candes_sur_h(kappa):
    """(h, t*) with h(kappa) = min_t E[(G - t W)_+^2] (see the module docstring)."""
    kappa = check_kappa(kappa)
    if kappa == 0.0:
        return 0.5, 0.0
    z, wts = _w_rule(kappa)
    hi = 1.0
    while _derivative(hi, z, wts) < 0.0:
        hi *= 2.0
        if hi > 1e12:
            raise ValueError(f"kappa={kappa} is too large for the separability threshold computation")
    t = brentq(lambda s: _derivative(s, z, wts), 0.0, hi, xtol=1e-15, rtol=1e-15, maxiter=500)
    return _objective(t, z, wts), t


def separability_threshold(kappa):
    """delta*(kappa): for delta < delta* the data are separable (MLE does not exist) w.p. -> 1."""
    return 1.0 / candes_sur_h(kappa)[0]


def mle(delta, kappa, *, strict=False, tol=1e-10, maxiter=100, quad_order=DEFAULT_ORDER):
    """Fixed point of the unregularized logistic MLE (lam = 0); same result type as :func:`cgmt.solve`.

    Raises ValueError (asking for lam > 0) when delta <= separability_threshold(kappa).
    """
    delta = check_delta(delta)
    kappa = check_kappa(kappa)
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    dstar = separability_threshold(kappa)
    if delta <= dstar:
        raise ValueError(
            f"the MLE does not exist: for kappa={kappa} the data are separable when delta <= "
            f"delta*={dstar:.6g} (got delta={delta}); use cgmt.solve with lam > 0")
    return _solve(delta, 0.0, kappa, strict=strict, x0=None, tol=tol, maxiter=int(maxiter),
                  quad_order=int(quad_order))


__all__ += ["ConvergenceError"]
