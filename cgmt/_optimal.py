"""The ridge strength that maximizes the asymptotic test accuracy: ``cgmt.optimal_lambda``.

The accuracy depends on the fit only through m = alpha/sigma and is increasing in m, so we
maximize m over log(lam) in the given bounds: a coarse log-grid (warm-started from large lam
down), then bounded Brent refinement around the best grid point.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import OptimizeResult, minimize_scalar

from empirical.common.checks import check_int, check_scalar
from empirical.common.failures import quiet, report

from ._solver import solve
from .quadrature import DEFAULT_ORDER
from .validation import check_delta, check_kappa, check_lam

__all__ = ["optimal_lambda"]


#: Most points of :func:`optimal_lambda`'s bracketing grid (each is one fixed-point solve, ~1 ms).
MAX_GRID = 100_000

def optimal_lambda(delta, kappa, *, bounds=(1e-6, 1e3), n_grid=19, xatol=1e-6,
                   quad_order=DEFAULT_ORDER, strict=False) -> OptimizeResult:
    """Maximizer of the asymptotic test accuracy over lam in ``bounds`` (log-scale search).

    Parameters
    ----------
    delta : float > 0
        n / p.
    kappa : float > 0
        Signal strength (at kappa = 0 the accuracy is 1/2 for every lam).
    bounds : (float, float)
        Search interval of lam (theory convention, (1/n) sum loss + lam/(2p) ||beta||^2).
    n_grid : int
        Points of the coarse log-grid scan before the bounded refinement.
    xatol : float
        Tolerance in log(lam).
    quad_order : int
        Quadrature order of every solve.
    strict : bool, default=False
        Raise :class:`cgmt.ConvergenceError` when no grid point converges or the maximizer's solve failed;
        otherwise that failure warns :class:`cgmt.ConvergenceWarning` and the result has ``success=False`` (the one
        failure convention, :func:`empirical.common.failures.report`).

    Returns
    -------
    OptimizeResult
        ``lam`` (= ``x``), ``accuracy``, ``margin``, ``solution`` (the :class:`CGMTResult` at ``lam``),
        ``at_boundary`` (True if the maximizer is an endpoint of ``bounds``), ``success``, ``message``, ``nfev``.

    Examples
    --------
    >>> best = optimal_lambda(2.0, 2.0)
    >>> round(best.lam, 3), round(best.accuracy, 4), bool(best.success)
    (0.162, 0.6749, True)
    """
    delta = check_delta(delta)
    kappa = check_kappa(kappa)
    if kappa == 0.0:
        raise ValueError(f"kappa must be > 0 for optimal_lambda (at kappa = 0 the accuracy is 1/2 for every lam), "
                         f"got {kappa!r}")
    lo = check_lam(bounds[0], name="bounds[0]")
    hi = check_scalar(check_lam(bounds[1], name="bounds[1]"), "bounds[1]", low=lo, low_open=True)
    # a bracket needs a point on each side of the best
    n_grid = check_int(n_grid, "n_grid", minimum=3, maximum=MAX_GRID)
    xatol = check_scalar(xatol, "xatol", low=0.0, low_open=True)
    grid = np.exp(np.linspace(math.log(hi), math.log(lo), n_grid))
    sols = []
    prev = None
    for lam in grid:
        with quiet():  # failed grid points are skipped below
            prev = solve(delta, lam, kappa, x0=prev, quad_order=quad_order)
        sols.append(prev)
    margins = np.array([s.margin if s.success else -np.inf for s in sols])
    if not np.any(np.isfinite(margins)):
        return report(OptimizeResult(x=np.nan, lam=np.nan, success=False, message="no grid point converged",
                                     nfev=len(sols)), strict, "cgmt.optimal_lambda", delta=delta, kappa=kappa)
    i = int(np.argmax(margins))
    cache = {}

    def neg_margin(t):
        near = min(range(len(grid)), key=lambda j: abs(math.log(grid[j]) - t))
        start = cache.get("last", sols[near])
        with quiet():
            r = solve(delta, math.exp(t), kappa, x0=start, quad_order=quad_order)
        cache[t] = r
        if r.success:
            cache["last"] = r
            return -r.margin
        return np.inf

    nfev = len(sols)
    a = math.log(grid[min(i + 1, len(grid) - 1)])
    b = math.log(grid[max(i - 1, 0)])
    best_t, best = math.log(grid[i]), sols[i]
    if b > a:
        opt = minimize_scalar(neg_margin, bounds=(a, b), method="bounded", options={"xatol": xatol})
        nfev += opt.nfev
        if opt.fun < -best.margin and opt.x in cache:
            best_t, best = opt.x, cache[opt.x]
    lam = math.exp(best_t)
    at_boundary = bool(abs(best_t - math.log(lo)) < 1e-3 or abs(best_t - math.log(hi)) < 1e-3)
    msg = "maximizer at the boundary of bounds" if at_boundary else "interior maximizer"
    result = OptimizeResult(x=lam, lam=lam, accuracy=best.accuracy, margin=best.margin, solution=best,
                            at_boundary=at_boundary, success=bool(best.success), message=msg, nfev=nfev)
    return report(result, strict, "cgmt.optimal_lambda", delta=delta, kappa=kappa)
