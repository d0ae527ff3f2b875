"""Asymptotic test accuracy (the paper's accuracy proposition, corrected) and the Bayes accuracy.

Test scores: teacher U = kappa Z, learned S = alpha Z + sigma W (Z, W iid N(0, 1)), so with the
effective margin m = alpha / sigma

    Acc(m, kappa) = E[s(kappa Z) Phi(m Z) + s(-kappa Z) (1 - Phi(m Z))] = 2 E[s(kappa Z) Phi(m Z)],

(s = sigmoid, Phi = N(0, 1) cdf).  Acc(0, kappa) = 1/2, Acc is increasing in m, and
Acc(+inf, kappa) = E[s(kappa |Z|)] is the Bayes accuracy.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit

from empirical.common.checks import check_real_array

from .quadrature import DEFAULT_ORDER, MAX_PANEL, TRUNCATION, build_edges, edge_capacity, fill_rule, gauss_legendre
from .validation import check_quad_order

__all__ = ["accuracy_from_margin", "bayes_accuracy"]

_SQRT1_2 = 1.0 / math.sqrt(2.0)


@njit(cache=True)
def _acc_kernel(m, kappa, xg, wg, L, H, out):
    cen = np.zeros(2)
    scl = np.empty(2)
    # both features sit at z = 0: the sigmoid poles (+-i pi/kappa) and the scale 1/|m| of Phi(m z)
    scl[0] = math.pi / kappa if kappa > 0.0 else H / 2.0
    scl[1] = 1.0 / abs(m) if m != 0.0 else H / 2.0
    for j in range(2):
        if scl[j] > H / 2.0:
            scl[j] = H / 2.0  # always keep z = 0 as a panel edge (Phi(m z) is a step at m = inf)
        if scl[j] < 1e-12:
            scl[j] = 1e-12
    ebuf = np.empty(out.size)
    ne = build_edges(-L, L, H, cen, scl, ebuf)
    nodes = np.empty((ne - 1) * xg.size)
    weights = np.empty((ne - 1) * xg.size)
    nn = fill_rule(ebuf, ne, xg, wg, True, nodes, weights)
    acc = 0.0
    for i in range(nn):
        z = nodes[i]
        if math.isinf(m):
            ph = 1.0 if (z > 0.0) == (m > 0.0) else 0.0
        else:
            ph = 0.5 * math.erfc(-m * z * _SQRT1_2)
        kz = kappa * z
        if kz >= 0.0:
            sk = 1.0 / (1.0 + math.exp(-kz))
        else:
            e = math.exp(kz)
            sk = e / (1.0 + e)
        acc += weights[i] * sk * ph
    return 2.0 * acc


@njit(cache=True)
def _acc_vec(m, k, xg, wg, L, H, cap, out):
    buf = np.empty(cap)
    for i in range(m.size):
        out[i] = _acc_kernel(m[i], k[i], xg, wg, L, H, buf)


def accuracy_from_margin(m, kappa, quad_order=2 * DEFAULT_ORDER) -> float | np.ndarray:
    """Asymptotic test accuracy 2 E[sigmoid(kappa Z) Phi(m Z)] for effective margin m = alpha/sigma.

    Parameters
    ----------
    m : float or array
        Effective margin alpha/sigma (any real, +-inf allowed).
    kappa : float or array, >= 0 and finite
        Signal strength; broadcasts with ``m``.
    quad_order : int
        Gauss-Legendre points per panel.

    Returns
    -------
    float or ndarray
        The accuracy (a float for scalar input), accurate to ~1e-15 (composite Gauss-Legendre refined at z = 0).

    Examples
    --------
    >>> round(accuracy_from_margin(1.0, 2.0), 4), round(accuracy_from_margin(0.0, 2.0), 12)
    (0.6809, 0.5)
    """
    quad_order = check_quad_order(quad_order)
    if isinstance(m, float) and isinstance(kappa, float) and not math.isnan(m) and 0.0 <= kappa < math.inf:
        # scalar fast path (a solver's result): the checks below cost ~3x the quadrature itself
        xg, wg = gauss_legendre(quad_order)
        return float(_acc_kernel(m, kappa, np.asarray(xg), np.asarray(wg), TRUNCATION, MAX_PANEL,
                                 np.empty(edge_capacity(2))))
    ma = check_real_array(m, "m", allow_inf=True)
    ka = check_real_array(kappa, "kappa", low=0.0)
    mb, kb = np.broadcast_arrays(ma, ka)
    mf = np.ascontiguousarray(mb, dtype=float).ravel()
    kf = np.ascontiguousarray(kb, dtype=float).ravel()
    out = np.empty_like(mf)
    xg, wg = gauss_legendre(quad_order)
    _acc_vec(mf, kf, np.asarray(xg), np.asarray(wg), TRUNCATION, MAX_PANEL, edge_capacity(2), out)
    if mb.ndim == 0:
        return float(out[0])
    return out.reshape(mb.shape)


def bayes_accuracy(kappa) -> float | np.ndarray:
    """Bayes accuracy E[sigmoid(kappa |Z|)] of the logistic teacher (= accuracy at m = +inf).

    Parameters
    ----------
    kappa : float or array, >= 0
        Signal strength.

    Returns
    -------
    float or ndarray

    Examples
    --------
    >>> round(bayes_accuracy(2.0), 4)
    0.778
    """
    if isinstance(kappa, (int, float)) and not isinstance(kappa, bool):
        return _bayes_scalar(float(kappa))  # every solve checks its answer against it (cgmt.result.within_limits)
    return accuracy_from_margin(np.inf, kappa)


@lru_cache(maxsize=4096)
def _bayes_scalar(kappa: float) -> float:
    return float(accuracy_from_margin(np.inf, kappa))
