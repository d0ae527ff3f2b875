"""Logistic sigmoid family and the proximal map of rho(t) = log(1 + e^t), Numba-jitted.

Convention: ``eta = prox_{gamma rho}(v) = argmin_t rho(t) + (t - v)^2 / (2 gamma)``, i.e. the unique
root of ``eta + gamma * sigmoid(eta) = v`` (gamma > 0).  Facts used by the solver:

* bracket: ``v - gamma sigmoid(v) <= eta <= v - gamma sigmoid(v - gamma)``;
* reflection: ``prox_{gamma rho}(v) = -prox_{gamma rho}(gamma - v)`` (from sigmoid(-t) = 1 - sigmoid(t)),
  so the kernel only ever solves with ``v <= gamma / 2``;
* derivatives: ``d eta / d v = D = 1 / (1 + gamma sigmoid'(eta))``,
  ``d eta / d gamma = -sigmoid(eta) D``.

Plain Newton 2-cycles for large gamma; the kernel starts from a Lambert-W approximation of the
root and safeguards every Newton step by bisection inside a shrinking bracket.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from empirical.common.checks import check_real_array

#: The API: :func:`prox_logistic` (vectorised, checks its arguments).  The scalar Numba kernels (``sigmoid``,
#: ``sigmoid_d1`` .. ``sigmoid_d3``, ``prox_scalar``, ``prox_near``, ``prox_with_derivatives``) are compiled for
#: the solvers' inner loops, take already checked floats (a NaN in gives a NaN out) and are not API.
__all__ = ["prox_logistic"]

_EPS = 2.220446049250313e-16


@njit(cache=True, fastmath=False)
def sigmoid(x):
    """sigmoid(x) = 1 / (1 + e^-x), evaluated without overflow.

    Parameters
    ----------
    x : float
        The argument (a scalar: this is a Numba kernel).

    Returns
    -------
    float
        sigmoid(x), in [0, 1].
    """
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True)
def sigmoid_d1(x):
    """sigmoid'(x) = sigmoid(x) sigmoid(-x) (even in x).

    Parameters
    ----------
    x : float
        The argument (a scalar).

    Returns
    -------
    float
        sigmoid'(x), in [0, 1/4].
    """
    e = math.exp(-abs(x))
    return e / ((1.0 + e) * (1.0 + e))


@njit(cache=True)
def sigmoid_d2(x):
    """sigmoid''(x) = -sigmoid'(x) tanh(x / 2) (odd in x).

    Parameters
    ----------
    x : float
        The argument (a scalar).

    Returns
    -------
    float
        sigmoid''(x).
    """
    return -sigmoid_d1(x) * math.tanh(0.5 * x)


@njit(cache=True)
def sigmoid_d3(x):
    """sigmoid'''(x) = sigmoid'(x) (tanh(x/2)^2 - 2 sigmoid'(x)).

    Parameters
    ----------
    x : float
        The argument (a scalar).

    Returns
    -------
    float
        sigmoid'''(x).
    """
    s1 = sigmoid_d1(x)
    t = math.tanh(0.5 * x)
    return s1 * (t * t - 2.0 * s1)


@njit(cache=True)
def _lambert_w_of_exp(logx):
    """Approximate W(e^logx) (principal branch, x > 0) to a few per cent; a Newton start only."""
    if logx < 30.0:
        x = math.exp(logx)
        l1 = math.log1p(x)
        return l1 * (1.0 - math.log1p(l1) / (2.0 + l1))
    ll = math.log(logx)
    return logx - ll + ll / logx


@njit(cache=True)
def _prox_low(v, g):
    """Root of eta + g sigmoid(eta) = v for g > 0 and v <= g / 2 (safeguarded Newton)."""
    return _prox_low_from(v, g, np.nan)


@njit(cache=True)
def _prox_low_from(v, g, x):
    """As :func:`_prox_low`, starting Newton at ``x`` if it lies inside the bracket (else as usual)."""
    lo = v - g * sigmoid(v)
    hi = v - g * sigmoid(v - g)
    if not hi > lo:
        return 0.5 * (lo + hi)
    if not (x > lo and x < hi):
        # start: eta ~ v - W(g e^v) (exact when sigmoid(eta) ~ e^eta, i.e. eta << 0)
        if g < 1e-3:
            x = v - g * sigmoid(v - g * sigmoid(v))
        else:
            x = v - _lambert_w_of_exp(v + math.log(g))
        if not (x > lo and x < hi):
            x = 0.5 * (lo + hi)
    for _ in range(200):
        e = math.exp(-abs(x))
        sx = 1.0 / (1.0 + e) if x >= 0.0 else e / (1.0 + e)
        f = x + g * sx - v
        if f > 0.0:
            hi = x
        elif f < 0.0:
            lo = x
        else:
            return x
        fp = 1.0 + g * e / ((1.0 + e) * (1.0 + e))
        dx = f / fp
        xn = x - dx
        if xn > lo and xn < hi:
            x = xn
            if abs(dx) <= 1e-9 * abs(x) + 1e-300:  # relative: eta may be << 1
                # Newton is in its quadratic regime: one more step lands at rounding level
                e = math.exp(-abs(x))
                sx = 1.0 / (1.0 + e) if x >= 0.0 else e / (1.0 + e)
                dx2 = (x + g * sx - v) / (1.0 + g * e / ((1.0 + e) * (1.0 + e)))
                if abs(dx2) <= abs(dx):
                    x -= dx2
                break
        else:
            x = 0.5 * (lo + hi)
        if hi - lo <= 4.0 * _EPS * abs(x) + 1e-300:
            break
    return x


@njit(cache=True)
def prox_scalar(v, gamma):
    """prox_{gamma rho}(v) for scalar float v and gamma >= 0 (gamma = 0 returns v).

    Parameters
    ----------
    v : float
        The point (finite; not checked: this is a Numba kernel, :func:`prox_logistic` checks).
    gamma : float
        The prox scale, >= 0.

    Returns
    -------
    float
        eta, the root of ``eta + gamma * sigmoid(eta) = v`` (``v`` itself when gamma <= 0).
    """
    if gamma <= 0.0:
        return v
    if v > 0.5 * gamma:
        return -_prox_low(gamma - v, gamma)
    return _prox_low(v, gamma)


@njit(cache=True)
def prox_near(v, gamma, guess):
    """prox_{gamma rho}(v) with Newton started at ``guess`` (e.g. extrapolated from a nearby v).

    Same safeguards and stopping rule as :func:`prox_scalar` (a guess outside the bracket, or NaN,
    falls back to its start), so the two agree to rounding.

    Parameters
    ----------
    v : float
        The point.
    gamma : float
        The prox scale, >= 0.
    guess : float
        Newton start for eta (NaN: none, as :func:`prox_scalar`).

    Returns
    -------
    float
        eta = prox_{gamma rho}(v) (``v`` itself when gamma <= 0).
    """
    if gamma <= 0.0:
        return v
    if v > 0.5 * gamma:
        return -_prox_low_from(gamma - v, gamma, -guess)
    return _prox_low_from(v, gamma, guess)


@njit(cache=True)
def _prox_array(v, g, out):
    for i in range(v.size):
        out[i] = prox_scalar(v[i], g[i])


@njit(cache=True)
def prox_with_derivatives(v, gamma):
    """Return (eta, D, D_v, D_vv, eta_gamma) at scalar (v, gamma) with D = d eta/d v.

    D = 1/(1 + gamma s'(eta)), D_v = -gamma s''(eta) D^3,
    D_vv = -gamma s'''(eta) D^4 + 3 gamma^2 s''(eta)^2 D^5, eta_gamma = -s(eta) D.

    Parameters
    ----------
    v : float
        The point.
    gamma : float
        The prox scale, >= 0.

    Returns
    -------
    eta, D, D_v, D_vv, eta_gamma : float
        The prox, its first derivative in v, the first and second derivatives of D in v, and d eta / d gamma.
    """
    eta = prox_scalar(v, gamma)
    s1 = sigmoid_d1(eta)
    s2 = sigmoid_d2(eta)
    s3 = sigmoid_d3(eta)
    d = 1.0 / (1.0 + gamma * s1)
    dv = -gamma * s2 * d * d * d
    dvv = -gamma * s3 * d ** 4 + 3.0 * gamma * gamma * s2 * s2 * d ** 5
    return eta, d, dv, dvv, -sigmoid(eta) * d


def prox_logistic(v, gamma):
    """Vectorised prox_{gamma rho}(v), rho(t) = log(1 + e^t); broadcasts v and gamma.

    Parameters
    ----------
    v : float or array_like
        The points; finite.
    gamma : float or array_like
        The prox scales; finite and >= 0 (0 returns ``v``).  Broadcast against ``v``.

    Returns
    -------
    float or ndarray
        eta with ``eta + gamma * sigmoid(eta) = v``: a float for scalar input, else an ndarray of the broadcast
        shape.

    Raises
    ------
    ValueError
        A non-finite ``v`` or ``gamma``, or ``gamma < 0``.

    Examples
    --------
    >>> eta = prox_logistic(3.0, 2.0)
    >>> round(eta, 6), round(eta + 2.0 * sigmoid(eta), 12)
    (1.396685, 3.0)
    >>> prox_logistic([0.5, 3.0], 0.0)
    array([0.5, 3. ])
    """
    va = check_real_array(v, "v")
    ga = check_real_array(gamma, "gamma", low=0.0)
    vb, gb = np.broadcast_arrays(va, ga)
    vf = np.ascontiguousarray(vb, dtype=float).ravel()
    gf = np.ascontiguousarray(gb, dtype=float).ravel()
    out = np.empty_like(vf)
    _prox_array(vf, gf, out)
    if vb.ndim == 0:
        return float(out[0])
    return out.reshape(vb.shape)
