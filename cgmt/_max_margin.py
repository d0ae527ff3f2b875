"""The max-margin limit of ridge logistic regression: ``cgmt.max_margin(delta, kappa)``.

On separable data the ridge-logistic direction tends to the hard-margin (max-margin) classifier as lam -> 0 (Rosset,
Zhu and Hastie 2004).  For delta < delta*(kappa) the data of the teacher-student model are separable, and the
proportional-limit max margin is known (Montanari, Ruan, Sohn and Yan 2019; Deng, Kammoun and Thrampoulidis 2019 for
the Gaussian teacher-student model).  In this package's convention (docs/theory.md) with W = y sqrt(p) <x, v>
(density 2 phi(w) s(kappa w)) and G ~ N(0, 1) independent, a unit direction u = rho v + sqrt(1 - rho^2) u_perp
reaches the margin kappa_m = min_i y_i sqrt(p) <x_i, u> with probability -> 1 iff (Gordon's comparison)

    delta E[(kappa_m - rho W - sqrt(1 - rho^2) G)_+^2] <= 1 - rho^2.

With the effective margin m = rho / sqrt(1 - rho^2) (the ``margin`` alpha/sigma of :class:`cgmt.CGMTResult`) and
c = kappa_m / sqrt(1 - rho^2) this reads delta g(c, m) <= 1 with

    g(c, m) = E[(a + G)_+^2] = E_W[(a^2 + 1) Phi(a) + a phi(a)],   a = c - m W,

so the max margin is max over m of c(m) / sqrt(1 + m^2), c(m) the root of delta g(c, m) = 1.  Its stationarity
condition, with psi(a) = 2 (a Phi(a) + phi(a)) = d/da E[(a + G)_+^2], is

    (1 + m^2) E[W psi(a)] = c m E[psi(a)].

The program solves the inner equation for c by Brent's method and the outer one for m by Brent's method on a
bracket found by doubling (one-dimensional quadrature in W, the closed form in G).  At c = 0 (kappa_m = 0) the
constraint is the separability condition delta E[(G - t W)_+^2] <= 1 of :func:`cgmt.separability_threshold`, so
kappa_m -> 0 as delta -> delta*(kappa).  Derivation and checks: docs/theory.md, "The max-margin limit".
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from empirical.common.failures import CONVERGED, ITERATION_LIMIT, report

from ._accuracy import accuracy_from_margin
from ._newton import bracketed_root
from ._threshold import separability_threshold
from .quadrature import DEFAULT_ORDER, gaussian_rule
from .result import CGMTResult, outcome
from .validation import check_delta, check_kappa, check_quad_order

__all__ = ["max_margin"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: the outer bracket's doubling stops here: a margin m = alpha/sigma above it is alignment 1 - 5e-25 (not resolved
#: in float64)
_M_MAX = 1e12


def _w_rule(kappa, c, m, order):
    """Nodes and weights with sum(wts * f(z)) ~ E f(W), W of density 2 phi(w) s(kappa w), refined at the teacher's
    sigmoid (scale pi / kappa) and where a = c - m W changes sign (scale 1 / m)."""
    feats = []
    if kappa > 0:
        feats.append((0.0, math.pi / kappa))
    if m > 0 and abs(c / m) < 12.0:
        feats.append((c / m, 1.0 / m))
    z, w = gaussian_rule(feats, order=order)
    e = np.exp(-np.abs(kappa * z))
    s = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return z, 2.0 * w * s


def _moments(c, m, kappa, order):
    """(g, E psi, E W psi) at (c, m): see the module docstring."""
    z, wts = _w_rule(kappa, c, m, order)
    a = c - m * z
    cdf = ndtr(a)
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * a * a)
    g = float(np.sum(wts * ((a * a + 1.0) * cdf + a * pdf)))
    psi = 2.0 * (a * cdf + pdf)
    return g, float(np.sum(wts * psi)), float(np.sum(wts * z * psi))


def _inner(m, delta, kappa, order):
    """c(m): the root of delta g(c, m) = 1 (g increases in c from 0 to infinity)."""
    def f(c):
        return delta * _moments(c, m, kappa, order)[0] - 1.0
    lo, hi = -1.0, 1.0
    while f(lo) > 0.0:
        lo *= 2.0
    while f(hi) < 0.0:
        hi *= 2.0
    c, _, _ = bracketed_root(f, lo, hi, xtol=1e-15, max_iter=200)
    return c


def _stationarity(m, delta, kappa, order):
    """(1 + m^2) E[W psi] - c m E[psi] at c = c(m), relative to its scale (positive below the optimal m)."""
    c = _inner(m, delta, kappa, order)
    _, e_psi, e_wpsi = _moments(c, m, kappa, order)
    return ((1.0 + m * m) * e_wpsi - c * m * e_psi) / ((1.0 + m * m) * e_psi)


def max_margin(delta, kappa, *, strict=False, quad_order=DEFAULT_ORDER) -> CGMTResult:
    """The max-margin (hard-margin SVM) classifier's fixed point, the lam -> 0 limit of :func:`cgmt.solve` on
    separable data (delta < :func:`cgmt.separability_threshold` (kappa)).

    The direction is normalized (||z_hat|| = 1): ``alpha`` = rho is its cosine with the teacher and ``sigma`` =
    sqrt(1 - rho^2); the ridge solution's alpha and sigma both grow like log(1/lam) while their ratio, the alignment
    and the accuracy converge to these (Rosset, Zhu and Hastie 2004).  Convention and equations: docs/theory.md, "The
    max-margin limit".

    Parameters
    ----------
    delta : float
        n / p, in (0, delta*(kappa)): below the separability threshold, where the max-margin classifier exists.
    kappa : float
        Signal strength >= 0 (||beta*||^2 = p kappa^2).
    strict : bool, default=False
        Raise :class:`ConvergenceError` instead of returning ``success=False`` (which warns).
    quad_order : int, default=10
        Gauss-Legendre points per quadrature panel.

    Returns
    -------
    CGMTResult
        ``alpha`` = rho, ``sigma`` = sqrt(1 - rho^2), ``gamma`` = inf (the prox step of the ridge fixed point
        diverges like 1/lam), ``margin`` = rho / sqrt(1 - rho^2), ``accuracy`` (the accuracy proposition at that
        margin), ``alignment`` = rho, ``stability`` = rho^2, ``alpha_salehi`` = rho / kappa (NaN at kappa = 0), and
        ``geometric_margin`` = kappa_m = lim min_i y_i sqrt(p) <x_i, u>, u the unit max-margin direction.  ``fun``
        holds the relative residuals of the constraint delta g = 1 and of the stationarity condition; ``x`` is
        (alpha, sigma, inf).

    Raises
    ------
    ValueError
        ``delta >= delta*(kappa)``: the data are not separable, there is no max-margin classifier (the lam -> 0 limit
        is then the MLE, :func:`cgmt.mle`); or an argument outside its domain.
    ConvergenceError
        ``strict`` and the stationarity condition was not solved.

    Examples
    --------
    >>> r = max_margin(1.0, 2.0)
    >>> round(r.geometric_margin, 4), round(r.alignment, 4), round(r.accuracy, 4)
    (0.6226, 0.4625, 0.6143)
    """
    delta = check_delta(delta)
    kappa = check_kappa(kappa)
    order = check_quad_order(quad_order)
    dstar = separability_threshold(kappa)
    if delta >= dstar:
        raise ValueError(
            f"delta must lie below the separability threshold delta*(kappa={kappa}) = {dstar:.6g} for a max-margin "
            f"classifier to exist (the data are not linearly separable there; the lam -> 0 limit is the MLE, "
            f"cgmt.mle), got delta={delta!r}")
    nit = 0
    if kappa == 0.0:
        m, converged = 0.0, True  # no teacher: the max-margin direction is orthogonal to any fixed v by symmetry
    else:
        def f(mm):
            return _stationarity(mm, delta, kappa, order)
        lo, hi = 0.0, 1.0
        while f(hi) > 0.0 and hi < _M_MAX:
            lo, hi = hi, 2.0 * hi
        if hi >= _M_MAX:
            raise ValueError(f"the max-margin direction at delta={delta!r}, kappa={kappa!r} aligns with the teacher "
                             f"to within float64 (margin alpha/sigma above {_M_MAX:g}); not resolved")
        m, nit, converged = bracketed_root(f, lo, hi, xtol=1e-14, max_iter=200)
    c = _inner(m, delta, kappa, order)
    g, e_psi, e_wpsi = _moments(c, m, kappa, order)
    fun = np.array([delta * g - 1.0, ((1.0 + m * m) * e_wpsi - c * m * e_psi) / ((1.0 + m * m) * e_psi)])
    tol = 1e-10
    res, success, status, msg = outcome(fun, CONVERGED if converged else ITERATION_LIMIT, nit, tol)
    rho = m / math.sqrt(1.0 + m * m)
    sigma = 1.0 / math.sqrt(1.0 + m * m)
    out = CGMTResult(
        alpha=rho, sigma=sigma, gamma=math.inf, margin=m, accuracy=float(accuracy_from_margin(m, kappa)),
        alignment=rho, stability=rho * rho, alpha_salehi=rho / kappa if kappa > 0 else math.nan,
        geometric_margin=c * sigma, delta=delta, lam=0.0, kappa=kappa,
        x=np.array([rho, sigma, math.inf]), fun=fun, residual=res, success=success, status=status, message=msg,
        nit=int(nit), nfev=0, quad_order=order)
    return report(out, strict, "cgmt.max_margin", delta=delta, kappa=kappa)

