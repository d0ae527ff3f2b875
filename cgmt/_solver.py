"""Solve the ridge-logistic CGMT fixed point: ``cgmt.solve(delta, lam, kappa)``.

Unknowns are handled as y = (m, log sigma, log gamma) with alpha = m sigma: in the separable
regime at small lam, alpha, sigma and gamma diverge (gamma ~ 1/lam) while the margin m levels
off, so y stays well scaled.  Algorithm:

1. Newton's method on the relative residuals (:mod:`cgmt.equations`) with the analytic Jacobian and
   a backtracking line search on ||r||, from ``x0`` if given;
2. otherwise (or if that fails) a few Newton steps from the large-lam asymptotics evaluated at the
   target lam, and if those do not converge, continuation in lam, starting at a large lam where the
   asymptotics alpha ~ kappa E[s'(kappa Z)]/lam, sigma ~ 1/(2 lam sqrt(delta)),
   gamma ~ 1/(delta lam) are accurate, marching down in log lam with a secant predictor and an
   adaptive step;
3. a damped fixed-point iteration (sigma^2 <- 2 delta E1, alpha <- -2 kappa delta E2, gamma from
   the third residual, the gamma equation of docs/theory.md, by bracketing) as last resort.

The Newton, continuation and constants are those of :mod:`cgmt._newton` (shared with
:func:`cgmt.solve_spectral`); the result type, status table and failure convention those of
:mod:`cgmt.result`.  The result is reported as converged only if max |r_i| <= tol.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.optimize import OptimizeResult

from empirical.common.checks import check_scalar
from empirical.common.failures import CONVERGED, ITERATION_LIMIT, NO_PROGRESS, report

from ._newton import (
    COARSE_KAPPA_MAX,
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    POLISH_TOL,
    Problem,
    bracketed_root,
    damped_newton,
    drive,
    finish,
)
from ._threshold import separability_threshold
from .quadrature import DEFAULT_ORDER, gaussian_rule
from .result import CGMTResult
from .validation import check_delta, check_kappa, check_lam, check_solver_counts

__all__ = ["solve", "mle", "start_point"]  # CGMTResult: cgmt.result; damped_newton, march_lambda: cgmt._newton

@lru_cache(maxsize=256)
def _mean_sprime(kappa):
    z, w = gaussian_rule([(0.0, math.pi / kappa)] if kappa > 0 else [], order=20)
    e = np.exp(-np.abs(kappa * z))
    return float(np.sum(w * e / (1 + e) ** 2))


def large_lambda_guess(delta, lam, kappa):
    """Leading-order (lam -> inf) fixed point (alpha, sigma, gamma)."""
    return (kappa * _mean_sprime(kappa) / lam, 1.0 / (2.0 * lam * math.sqrt(delta)), 1.0 / (delta * lam))


class _System(Problem):
    """The isotropic problem of :func:`solve`: a :class:`cgmt._newton.Problem` without a spectrum."""

    def __init__(self, delta, lam, kappa, quad_order):
        super().__init__(delta, lam, kappa, quad_order)


def _fixed_point(system, y0, tol, max_iter, damping=0.5):
    """Damped fixed-point iteration (fallback): sigma and alpha from the sigma and alpha equations, gamma from the
    gamma equation (the three residuals of :mod:`cgmt.equations`, in that order)."""
    alpha, sigma, gamma = system.to_x(y0)

    def r3(lg):
        r, _, _ = system(np.array([alpha / sigma, math.log(sigma), lg]))
        return r[2]

    r = np.full(3, np.inf)
    e2 = np.zeros(1)
    for it in range(1, max_iter + 1):
        lg = math.log(gamma)
        lo, hi = lg - 1.0, lg + 1.0
        for _ in range(60):
            if r3(lo) < 0:
                break
            lo -= 2.0
        for _ in range(60):
            if r3(hi) > 0:
                break
            hi += 2.0
        try:
            gamma = math.exp(bracketed_root(r3, lo, hi, xtol=1e-14)[0])
        except ValueError:
            return system.to_y(alpha, sigma, gamma), r, e2, it, NO_PROGRESS
        y = system.to_y(alpha, sigma, gamma)
        r, _, e2 = system(y)
        if np.max(np.abs(r)) <= tol:
            return y, r, e2, it, CONVERGED
        tau = math.hypot(alpha, sigma)
        s_new = sigma * math.sqrt(max(r[0] + 1.0, 1e-12))
        a_new = alpha + r[1] * tau
        sigma = (1 - damping) * sigma + damping * s_new
        alpha = (1 - damping) * alpha + damping * a_new
    return system.to_y(alpha, sigma, gamma), r, e2, max_iter, ITERATION_LIMIT


def _large_lambda_start(system):
    """``start(lam)``: the large-lam asymptotics of :func:`large_lambda_guess` in the solver variables."""
    def guess(lam):
        return system.to_y(*large_lambda_guess(system.delta, lam, system.kappa))
    return guess


def start_point(x0):
    """Solver variables y = (alpha/sigma, log sigma, log gamma) of a warm start (None stays None).

    Parameters
    ----------
    x0 : (alpha, sigma, gamma), CGMTResult or None
        The warm start of :func:`solve`.

    Returns
    -------
    ndarray of shape (3,) or None
        (alpha/sigma, log sigma, log gamma); None when ``x0`` is None.

    Raises
    ------
    ValueError
        Wrong length, non-finite, sigma <= 0 or gamma <= 0.
    """
    if x0 is None:
        return None
    if isinstance(x0, OptimizeResult) and "alpha" in x0:
        a, s, g = x0.alpha, x0.sigma, x0.gamma
    else:
        arr = np.asarray(x0, dtype=float).ravel()
        if arr.size != 3:
            raise ValueError(f"x0 must be (alpha, sigma, gamma) or a CGMTResult, got {x0!r:.60}")
        a, s, g = arr
    if not (np.isfinite(a) and np.isfinite(s) and np.isfinite(g)) or s <= 0 or g <= 0:
        raise ValueError(f"x0 must be finite with sigma > 0 and gamma > 0, got {(a, s, g)!r}")
    return _System.to_y(a, s, g)


def _solve(delta, lam, kappa, *, x0, tol, max_iter, quad_order, check_quadrature=False):
    system = _System(delta, lam, kappa, quad_order)
    y0 = start_point(x0)
    guess = _large_lambda_start(system)  # also the direct guess at the target, before continuation
    y, r, e2, nit, status = drive(system, tol, max_iter, start=guess, direct_guess=guess,
                                  starts=() if y0 is None else (y0,), coarse=kappa <= COARSE_KAPPA_MAX,
                                  fallback=_fixed_point)
    alpha = float(system.to_x(y)[0])
    out = finish(system, y, r, nit, status, tol,
                 alpha_salehi=alpha / kappa if kappa > 0 else -2.0 * system.delta * float(e2[0]))
    if check_quadrature:
        # re-solve on the rule with twice the order, to rounding-level residual, from this solution
        fine = system.with_order(2 * quad_order)
        yf, rf, _, _, _ = damped_newton(fine, y, POLISH_TOL, max_iter)
        xf = np.array(fine.to_x(yf))
        scale = np.array([max(abs(out.alpha), out.sigma), out.sigma, out.gamma])
        out["quadrature_change"] = float(np.max(np.abs(xf - out.x) / scale))
        out["quadrature_residual"] = float(np.max(np.abs(rf)))
    return out


def solve(delta, lam, kappa, *, strict=False, x0=None, tol=DEFAULT_TOL, max_iter=DEFAULT_MAX_ITER,
          quad_order=DEFAULT_ORDER, check_quadrature=False) -> CGMTResult:
    """Solve the CGMT fixed point of ridge logistic regression (convention: docs/theory.md).

    Parameters
    ----------
    delta : float
        n / p, > 0.
    lam : float
        Ridge strength >= 0 in (1/n) sum loss + lam/(2p) ||beta||^2, within [LAM_MIN, LAM_MAX] of
        :mod:`cgmt.validation`; lam = 0 (the MLE, as :func:`cgmt.mle`) only for
        delta > separability_threshold(kappa).
    kappa : float
        Signal strength >= 0, ||beta*||^2 = p kappa^2.
    strict : bool, default=False
        Raise :class:`ConvergenceError` instead of returning success=False (which warns
        :class:`cgmt.ConvergenceWarning`; :func:`empirical.common.failures.report`).
    x0 : (alpha, sigma, gamma) or CGMTResult, optional
        Warm start (e.g. the solution at a nearby lam); without one the solver starts from the large-lam
        asymptotics and continues in lam.
    tol : float, default=1e-10
        Largest max relative residual accepted (see :mod:`cgmt.equations`).
    max_iter : int, default=100
        Newton iterations per solve stage.
    quad_order : int, default=10
        Gauss-Legendre points per quadrature panel, in [2, 200] (the default 10 is accurate to ~1e-12, 20 to
        ~1e-15; doubling it checks the quadrature).
    check_quadrature : bool, default=False
        Re-solve with 2 * quad_order and report ``quadrature_change`` (max change of alpha, sigma, gamma
        relative to (max(|alpha|, sigma), sigma, gamma)) and ``quadrature_residual``.

    Returns
    -------
    CGMTResult
        The order parameters and everything derived from them (see :class:`CGMTResult`).

    Raises
    ------
    ValueError
        An argument outside its domain, or lam = 0 where the MLE does not exist.
    ConvergenceError
        ``strict`` and the fixed point was not found to ``tol``.

    Examples
    --------
    >>> r = solve(delta=2.0, lam=0.1, kappa=2.0)
    >>> round(r.alpha, 4), round(r.sigma, 4), round(r.accuracy, 4), bool(r.success)
    (0.927, 0.9863, 0.6745, True)
    """
    delta = check_delta(delta)
    lam = check_lam(lam, allow_zero=True)
    kappa = check_kappa(kappa)
    if lam == 0.0:
        dstar = separability_threshold(kappa)
        if delta <= dstar:
            raise ValueError(
                f"lam must lie in (0, inf) when delta <= delta*(kappa={kappa}) = {dstar:.6g} (lam = 0 is the MLE, "
                f"which does not exist there), got lam=0.0 at delta={delta}")
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    max_iter, quad_order = check_solver_counts(max_iter, quad_order)
    out = _solve(delta, lam, kappa, x0=x0, tol=tol, max_iter=max_iter, quad_order=quad_order,
                 check_quadrature=bool(check_quadrature))
    return report(out, strict, "cgmt.solve", delta=delta, lam=lam, kappa=kappa)


def mle(delta, kappa, *, strict=False, tol=DEFAULT_TOL, max_iter=DEFAULT_MAX_ITER,
        quad_order=DEFAULT_ORDER) -> CGMTResult:
    """Fixed point of the unregularized logistic MLE (lam = 0); same result type as :func:`solve`.

    Parameters
    ----------
    delta : float
        n/p; must exceed :func:`cgmt.separability_threshold` (kappa), else the data are separable and
        ``ValueError`` asks for lam > 0.
    kappa : float >= 0
        Signal strength.
    strict, tol, max_iter, quad_order
        As for :func:`solve`.

    Returns
    -------
    CGMTResult
        The fixed point at lam = 0 (``alpha_salehi`` is the MLE's coefficient on beta*).

    Examples
    --------
    >>> r = mle(5.0, 5 ** 0.5)
    >>> round(r.alpha_salehi, 4), bool(r.success)
    (1.4994, True)
    """
    delta = check_delta(delta)
    kappa = check_kappa(kappa)
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    dstar = separability_threshold(kappa)
    if delta <= dstar:
        raise ValueError(
            f"the MLE does not exist: for kappa={kappa} the data are separable when delta <= "
            f"delta*={dstar:.6g} (got delta={delta}); use cgmt.solve with lam > 0")
    max_iter, quad_order = check_solver_counts(max_iter, quad_order)
    out = _solve(delta, 0.0, kappa, x0=None, tol=tol, max_iter=max_iter, quad_order=quad_order)
    return report(out, strict, "cgmt.mle", delta=delta, kappa=kappa)
