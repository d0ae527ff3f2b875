"""Two-replica theory of directional stability: the cosine between two ridge-logistic probes fitted
on overlapping subsets of one labelled pool (derivation: ``docs/stability_theory.md``).

Convention (identical to :func:`cgmt.solve`): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, labels from
P(y = +1 | x) = sigmoid(x'beta*); estimator k minimises (1/n_k) sum_{i in S_k} log(1 + e^{-y_i x_i'beta})
+ lam/(2p) ||beta||^2 on its own training set S_k (same lam, per-sample-averaged loss, so the
scikit-learn C of run k is 1/(delta_k lam)); z_k = beta_k/sqrt(p) = alpha_k v + z_k_perp.
delta_k = |S_k|/p, delta_12 = |S_1 cap S_2|/p.

Each replica has its own single-estimator solution (alpha_k, sigma_k, gamma_k) at delta_k.  The
noise cross-covariance sigma_12 = lim <z_1_perp, z_2_perp> solves the scalar fixed point

    sigma_12 = delta_12 E[ 2 sigmoid(-kappa U) h_1(V_1) h_2(V_2) ],  h_k(V) = V - prox_{gamma_k rho}(V),
    V_k = alpha_k U + xi_k,  (xi_1, xi_2) ~ N(0, [[sigma_1^2, sigma_12], [sigma_12, sigma_2^2]]),

(U ~ N(0, 1) independent of xi), and the limiting cosine between the two unit directions is

    cos = (alpha_1 alpha_2 + sigma_12) / sqrt((alpha_1^2 + sigma_1^2)(alpha_2^2 + sigma_2^2)).

With delta_12 = 0 this is the paper's independent-sample formula alpha^2/(alpha^2 + sigma^2)
(the paper's stability formula); for the paper's ablation pairs (delta_12 = 0.64 delta_k) it is
much larger.

Public API: :func:`stability` (protocols), :func:`pair_stability` (arbitrary subset sizes and
overlap), :func:`cross_noise_covariance`, :func:`cross_expectation`; the protocols' training fractions and
overlaps live in :mod:`cgmt.ablation` (:func:`~cgmt.ablation.protocol_fractions`,
:func:`~cgmt.ablation.expected_ablation_overlap`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy.optimize import OptimizeResult

from empirical.common.checks import check_real_array, check_scalar
from empirical.common.failures import CONVERGED, CROSS_FAILED, STATUS_MESSAGES, ConvergenceError, quiet, report

from ._newton import bracketed_root
from ._solver import solve
from .ablation import protocol_fractions
from .equations import prox_branch_points
from .prox import prox_scalar, sigmoid, sigmoid_d1
from .quadrature import DEFAULT_ORDER, MAX_PANEL, TRUNCATION, build_edges, edge_capacity, fill_rule, gauss_legendre
from .validation import check_delta, check_kappa, check_lam, check_quad_order

__all__ = [
    "stability",
    "pair_stability",
    "cross_noise_covariance",
    "cross_expectation",
]

_MIN_SCALE = 1e-10
#: points of the G table per unit of the scale hypot(su, 1 / kappa) on which G varies (cubic Hermite; at 32 the
#: self-check of equation (1) holds to 1e-9 at the four points of tests/test_stability_theory.py)
TABLE_DENSITY = 32
#: fewest points of the G table
TABLE_MIN = 401
#: saturation window of G: for mu > 0, G(mu) <= 2 Phi(-mu / (2 su)) + 2 exp(-kappa mu / 2) (split on the event
#: su N < -mu / 2), so at |mu| >= 2 (SATURATION_Z su + SATURATION_LOG / kappa) G is within 7e-18 of 0 or 2
#: (G(-mu) = 2 - G(mu)): below the last bit of double precision, so the table stops there and extends by constants
SATURATION_Z = 8.7  # Phi(-8.7) = 1.7e-18
SATURATION_LOG = 41.0  # exp(-41) = 1.6e-18
#: the table's size at its widest: 2 * window * TABLE_DENSITY / hypot(su, 1 / kappa)
#: <= 4 TABLE_DENSITY hypot(SATURATION_Z, SATURATION_LOG) (Cauchy-Schwarz), so it always has its full density
TABLE_MAX = int(math.ceil(4 * TABLE_DENSITY * math.hypot(SATURATION_Z, SATURATION_LOG))) + 2


# --------------------------------------------------------------------------------------------
# quadrature kernels
# --------------------------------------------------------------------------------------------
@njit(cache=True)
def _g_kernel(mu, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww):
    """(G, G') at mu: G(mu) = E_N[2 sigmoid(-kappa (mu + su N))], N ~ N(0, 1); G' = dG/dmu."""
    if su * kappa < 1e-12:
        return 2.0 * sigmoid(-kappa * mu), -2.0 * kappa * sigmoid_d1(kappa * mu)
    cen[0] = -mu / su
    scl[0] = max(math.pi / (kappa * su), _MIN_SCALE)
    ne = build_edges(-L, L, H, cen, scl, ebuf)
    nn = fill_rule(ebuf, ne, xg, wg, True, wn, ww)
    g = 0.0
    gp = 0.0
    for i in range(nn):
        t = kappa * (mu + su * wn[i])
        g += ww[i] * sigmoid(-t)
        gp += ww[i] * sigmoid_d1(t)
    return 2.0 * g, -2.0 * kappa * gp


@njit(cache=True)
def _g_table(mmax, npts, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww, gv, gd):
    h = 2.0 * mmax / (npts - 1)
    for j in range(npts):
        gv[j], gd[j] = _g_kernel(-mmax + j * h, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww)
    return h


@njit(cache=True)
def _g_interp(mu, mmax, h, npts, gv, gd):
    """Cubic Hermite interpolation of G tabulated at ``npts`` points (constant extension outside the table)."""
    if mu <= -mmax:
        return gv[0]
    x = (mu + mmax) / h
    j = int(x)
    if j >= npts - 1:
        return gv[npts - 1]
    t = x - j
    t2 = t * t
    t3 = t2 * t
    return ((2 * t3 - 3 * t2 + 1) * gv[j] + (t3 - 2 * t2 + t) * h * gd[j]
            + (-2 * t3 + 3 * t2) * gv[j + 1] + (t3 - t2) * h * gd[j + 1])


@njit(cache=True)
def _cross_kernel(a1, s1, g1, a2, s2, g2, s12, kappa, xg, wg, L, H, ntab, bufs):
    """E[2 sigmoid(-kappa U) h1(V1) h2(V2)] for the joint Gaussian law in the module docstring.

    Change of variables: V1 = tau1 A, V2 = tau2 (r A + s B) with A, B iid N(0, 1),
    tau_k^2 = alpha_k^2 + sigma_k^2, r = corr(V1, V2); U | (A, B) ~ N(cA A + cB B, su^2), so the
    sigmoid is integrated analytically into G (tabulated).  Outer rule in A refined at the branch
    points of h1 (Im V = +-pi) and at the centre of G; inner rule in B refined at those of h2 and G.
    """
    ebuf, cen, scl, wn, ww, an, aw, bn, bw, gv, gd = bufs
    tau1 = math.sqrt(a1 * a1 + s1 * s1)
    tau2 = math.sqrt(a2 * a2 + s2 * s2)
    r = (a1 * a2 + s12) / (tau1 * tau2)
    if r > 1.0:
        r = 1.0
    if r < -1.0:
        r = -1.0
    s = math.sqrt(max(0.0, 1.0 - r * r))
    cA = a1 / tau1
    degenerate = s < 1e-9
    cB = 0.0 if degenerate else (a2 / tau2 - r * a1 / tau1) / s
    su = math.sqrt(max(0.0, 1.0 - cA * cA - cB * cB))
    # G table on |mu| <= mmax: every node (|A|, |B| <= L) up to G's saturation window (constant beyond it),
    # TABLE_DENSITY points per unit of the scale hypot(su, 1 / kappa) on which G varies (<= TABLE_MAX = ntab points)
    mmax = L * (abs(cA) + abs(cB)) + 1e-9
    if kappa > 0.0:
        mmax = min(mmax, 2.0 * (SATURATION_Z * su + SATURATION_LOG / kappa))
    gscale = math.hypot(su, math.pi / kappa) if kappa > 0.0 else H
    tscale = math.hypot(su, 1.0 / kappa) if kappa > 0.0 else H
    npts = min(ntab, max(TABLE_MIN, int(math.ceil(2.0 * mmax * TABLE_DENSITY / tscale)) + 1))
    gh = _g_table(mmax, npts, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww, gv, gd)
    c1m, c1p = prox_branch_points(g1)
    c2m, c2p = prox_branch_points(g2)
    # outer rule in A
    cen[0] = c1m / tau1
    scl[0] = math.pi / tau1
    cen[1] = c1p / tau1
    scl[1] = math.pi / tau1
    cen[2] = 0.0
    scl[2] = max(gscale / max(abs(cA) + abs(cB), 1e-300), _MIN_SCALE)
    ne = build_edges(-L, L, H, cen[:3], scl[:3], ebuf)
    na = fill_rule(ebuf, ne, xg, wg, True, an, aw)
    total = 0.0
    for i in range(na):
        A = an[i]
        v1 = tau1 * A
        h1 = v1 - prox_scalar(v1, g1)
        if h1 == 0.0:
            continue
        if degenerate:
            v2 = tau2 * A
            total += aw[i] * _g_interp(cA * A, mmax, gh, npts, gv, gd) * h1 * (v2 - prox_scalar(v2, g2))
            continue
        cen[0] = (c2m / tau2 - r * A) / s
        scl[0] = math.pi / (tau2 * s)
        cen[1] = (c2p / tau2 - r * A) / s
        scl[1] = math.pi / (tau2 * s)
        nf = 2
        if abs(cB) > 1e-12:
            cen[2] = -cA * A / cB
            scl[2] = max(gscale / abs(cB), _MIN_SCALE)
            nf = 3
        ne = build_edges(-L, L, H, cen[:nf], scl[:nf], ebuf)
        nb = fill_rule(ebuf, ne, xg, wg, True, bn, bw)
        inner = 0.0
        for j in range(nb):
            v2 = tau2 * (r * A + s * bn[j])
            inner += bw[j] * _g_interp(cA * A + cB * bn[j], mmax, gh, npts, gv, gd) * (v2 - prox_scalar(v2, g2))
        total += aw[i] * h1 * inner
    return total


def _buffers(order, ntab):
    xg, wg = gauss_legendre(order)
    cap = edge_capacity(3, 2 * TRUNCATION)
    nmax = (cap - 1) * order
    bufs = (np.empty(cap), np.empty(3), np.empty(3), np.empty(nmax), np.empty(nmax), np.empty(nmax),
            np.empty(nmax), np.empty(nmax), np.empty(nmax), np.empty(ntab), np.empty(ntab))
    return np.asarray(xg), np.asarray(wg), bufs


def _table_size(kappa):
    # the buffers: TABLE_DENSITY points per unit of G's scale hypot(su, 1 / kappa) over |mu| <= 2L, or over G's
    # saturation window, whichever is narrower (the kernel fills only what its own su needs); at most TABLE_MAX
    if kappa <= 0:
        return TABLE_MIN
    return int(min(TABLE_MAX, max(TABLE_MIN, math.ceil(2 * 2 * TRUNCATION * TABLE_DENSITY * kappa) + 1)))


def cross_expectation(sol1, sol2, sigma12: float, kappa: float, *, quad_order: int = DEFAULT_ORDER) -> float:
    """E[2 sigmoid(-kappa U) h_1(V_1) h_2(V_2)] (see the module docstring) at a given sigma_12.

    At sigma_12 = sigma^2 for two identical replicas this equals sigma^2 / delta (the single-estimator
    equation (1) of :mod:`cgmt.equations`).

    Parameters
    ----------
    sol1, sol2 : (float, float, float)
        (alpha, sigma, gamma) of each replica, e.g. from :func:`cgmt.solve`.
    sigma12 : float
        Noise cross-covariance, in [0, sigma_1 sigma_2].
    kappa : float
        Signal strength (>= 0).
    quad_order : int, default=DEFAULT_ORDER (10)
        Gauss-Legendre points per panel of the composite rules (at most ``cgmt.validation.MAX_QUAD_ORDER``).

    Returns
    -------
    float

    Examples
    --------
    >>> import cgmt
    >>> sol = cgmt.solve(2.0, 0.1, 1.0)
    >>> x = (sol.alpha, sol.sigma, sol.gamma)
    >>> round(2.0 * cross_expectation(x, x, sol.sigma ** 2, 1.0) / sol.sigma ** 2, 8)
    1.0
    """
    a1, s1, g1 = (float(x) for x in sol1)
    a2, s2, g2 = (float(x) for x in sol2)
    ntab = _table_size(kappa)
    xg, wg, bufs = _buffers(check_quad_order(quad_order), ntab)
    return float(_cross_kernel(a1, s1, g1, a2, s2, g2, float(sigma12), float(kappa), xg, wg,
                               TRUNCATION, MAX_PANEL, ntab, bufs))


# --------------------------------------------------------------------------------------------
# the cross fixed point
# --------------------------------------------------------------------------------------------
#: relative residual |F(sigma_12) - sigma_12| / (sigma_1 sigma_2) accepted as converged
RESIDUAL_TOL = 1e-9


def _check_solution(sol, name):
    """A replica's fixed point ``(alpha, sigma, gamma)``: three finite numbers, sigma >= 0 and gamma > 0."""
    x = check_real_array(sol, name)
    if x.shape != (3,):
        raise ValueError(f"{name} must be (alpha, sigma, gamma), three numbers, got shape {x.shape}")
    if x[1] < 0 or x[2] <= 0:
        raise ValueError(f"{name} must have sigma >= 0 and gamma > 0 (a fixed point of cgmt.solve), got {tuple(x)}")
    return x


def _cross_result(sigma12, residual, ok, nit, nfev, rhs_at_zero):
    status = CONVERGED if ok else CROSS_FAILED
    message = (f"{STATUS_MESSAGES[status]}: |F(sigma12) - sigma12| / (sigma1 sigma2) = {residual:.2e} "
               f"after {nfev} evaluations")
    return OptimizeResult(sigma12=float(sigma12), success=bool(ok), status=status, message=message, nit=int(nit),
                          nfev=int(nfev), residual=float(residual), rhs_at_zero=float(rhs_at_zero))


def cross_noise_covariance(sol1, sol2, delta12: float, kappa: float, *, quad_order: int = DEFAULT_ORDER,
                           xtol: float = 1e-13, strict: bool = False) -> OptimizeResult:
    """Solve sigma_12 = delta_12 E[2 sigmoid(-kappa U) h_1(V_1) h_2(V_2)] on [0, sigma_1 sigma_2].

    The right-hand side F is increasing in sigma_12 (Price's theorem: F' = delta_12 E[2 s(-kU) h1' h2'] > 0,
    h_k' in (0, 1)), F(0) >= 0 and F(sigma_1 sigma_2) <= sigma_1 sigma_2 delta_12 / sqrt(delta_1 delta_2)
    (Cauchy-Schwarz with equation (1)), so the root is bracketed and found by Brent's method.

    Parameters
    ----------
    sol1, sol2 : (float, float, float)
        (alpha, sigma, gamma) of each replica.
    delta12 : float
        Overlap of the two training sets over the dimension, |S_1 cap S_2| / p.
    kappa : float
        Signal strength (>= 0).
    quad_order : int, default=DEFAULT_ORDER (10)
        Gauss-Legendre points per panel of the composite rules (at most ``cgmt.validation.MAX_QUAD_ORDER``).
    xtol : float
        Absolute tolerance of the root relative to sigma_1 sigma_2.
    strict : bool, default=False
        Raise :class:`cgmt.ConvergenceError` when the root is not found; otherwise that failure warns
        :class:`cgmt.ConvergenceWarning` and the result has ``success=False`` (the one failure convention,
        :func:`empirical.common.failures.report`).

    Returns
    -------
    OptimizeResult
        ``sigma12``; ``success``, ``status`` (:data:`STATUS_MESSAGES`), ``message``, ``nit`` (Brent
        iterations), ``nfev`` (evaluations of F), ``residual`` = |F(sigma12) - sigma12| / (sigma1 sigma2)
        and ``rhs_at_zero`` = F(0).

    Examples
    --------
    >>> import cgmt
    >>> s1, s2 = cgmt.solve(2.0, 0.1, 1.0), cgmt.solve(1.28, 0.1, 1.0)
    >>> res = cross_noise_covariance(s1.x, s2.x, 0.8192, 1.0)
    >>> res.success, round(res.sigma12 / (s1.sigma * s2.sigma), 4)
    (True, 0.4605)
    """
    sol1, sol2 = _check_solution(sol1, "sol1"), _check_solution(sol2, "sol2")
    delta12 = check_scalar(delta12, "delta12", low=0.0)
    kappa = check_kappa(kappa)
    xtol = check_scalar(xtol, "xtol", low=0.0, low_open=True)
    result = _cross_noise_covariance(sol1, sol2, delta12, kappa, check_quad_order(quad_order), xtol)
    return report(result, strict, "cgmt.stability.cross_noise_covariance", delta12=delta12, kappa=kappa)


def _cross_noise_covariance(sol1, sol2, delta12, kappa, quad_order, xtol):
    """:func:`cross_noise_covariance` on checked arguments, without the failure convention (its callers report)."""
    a1, s1, g1 = (float(x) for x in sol1)
    a2, s2, g2 = (float(x) for x in sol2)
    hi = s1 * s2
    if delta12 == 0.0 or hi == 0.0:
        return _cross_result(0.0, 0.0, True, 0, 0, 0.0)
    ntab = _table_size(kappa)
    xg, wg, bufs = _buffers(quad_order, ntab)
    nfev = 0

    def rhs(s12):
        nonlocal nfev
        nfev += 1
        return delta12 * _cross_kernel(a1, s1, g1, a2, s2, g2, s12, float(kappa), xg, wg,
                                       TRUNCATION, MAX_PANEL, ntab, bufs)

    f0 = rhs(0.0)
    gap_at_top = rhs(hi) - hi
    # Identical training sets: F(hi) = hi is the single-estimator equation (1), which the solve satisfies
    # only to its residual tolerance (1e-10 relative), so the top of the bracket is the root whenever
    # F(hi) - hi is within that accuracy (a real overlap deficit 1 - delta12/delta shows up at O(1)).
    if gap_at_top >= -RESIDUAL_TOL * hi:
        return _cross_result(hi, abs(gap_at_top) / hi, True, 0, nfev, f0)
    if f0 > 0:
        root, nit, root_found = bracketed_root(lambda s: rhs(s) - s, 0.0, hi, xtol=xtol * max(hi, 1e-300),
                                               rtol=1e-15)
    else:
        root, nit, root_found = 0.0, 0, True
    residual = abs(rhs(root) - root) / hi
    return _cross_result(root, residual, root_found and residual <= RESIDUAL_TOL, nit, nfev, f0)


def _single(delta, lam, kappa, solve_options):
    with quiet():  # a failure raises below
        sol = solve(delta, lam, kappa, **solve_options)
    if not sol.success:
        raise ConvergenceError(f"cgmt.solve did not converge at delta={delta}, lam={lam}, kappa={kappa}: "
                               f"{sol.message}", sol)
    return float(sol.alpha), float(sol.sigma), float(sol.gamma)


def pair_stability(delta1: float, delta2: float, delta12: float, lam: float, kappa: float, *,
                   quad_order: int = DEFAULT_ORDER, strict: bool = False, **solve_options) -> OptimizeResult:
    """Limiting cosine of two ridge-logistic fits (same lam) on sets of sizes delta_k p sharing delta_12 p samples.

    Parameters
    ----------
    delta1, delta2 : float
        Training-set sizes over the dimension (> 0).
    delta12 : float
        Their overlap over the dimension, in [0, min(delta1, delta2)].
    lam : float
        Common ridge strength (> 0; theory convention, per-sample-averaged loss).
    kappa : float
        Signal strength (>= 0).
    quad_order : int, default=DEFAULT_ORDER (10)
        Gauss-Legendre points per panel of every quadrature rule: the cross expectation's and the two
        single-estimator solves' (:func:`cgmt.solve`'s ``quad_order``); the answer changes by < 1e-9 when doubled
        (tests/test_stability_theory.py::test_quadrature_converged).
    strict : bool, default=False
        Raise :class:`cgmt.ConvergenceError` when the cross fixed point fails; otherwise that failure warns
        :class:`cgmt.ConvergenceWarning` and the result has ``success=False``
        (:func:`empirical.common.failures.report`, the one failure convention).  (A single-estimator solve that
        fails raises ``ConvergenceError`` whatever ``strict`` is: there is no cosine without it.)
    **solve_options
        Passed to :func:`cgmt.solve` for the two single-estimator solutions (``tol``, ``max_iter``, ...).

    Returns
    -------
    OptimizeResult
        ``cosine``; per replica ``alpha1, sigma1, gamma1, alpha2, sigma2, gamma2``; ``sigma12`` (noise
        cross-covariance) and ``noise_correlation`` = sigma12 / (sigma1 sigma2);
        ``independent_formula`` = alpha1 alpha2 / (tau1 tau2) (the paper's independent-sample stability
        formula, i.e. sigma12 = 0); the inputs ``delta1, delta2, delta12, lam, kappa``; and the cross
        fixed point's ``success``, ``status`` (:data:`STATUS_MESSAGES`), ``message``, ``nit``, ``nfev``,
        ``residual``.

    Examples
    --------
    >>> r = pair_stability(1.28, 1.28, 0.8192, 0.1, 1.0)
    >>> r.success, round(r.cosine, 4), round(r.independent_formula, 4)
    (True, 0.6556, 0.1672)
    """
    delta1 = check_delta(delta1, "delta1")
    delta2 = check_delta(delta2, "delta2")
    delta12 = check_scalar(delta12, "delta12", low=0.0)
    lam = check_lam(lam)
    kappa = check_kappa(kappa)
    quad_order = check_quad_order(quad_order)
    solve_options = {**solve_options, "quad_order": quad_order}
    if delta12 > min(delta1, delta2) * (1 + 1e-12):
        raise ValueError(f"delta12 must be <= min(delta1, delta2) = {min(delta1, delta2)} (the overlap cannot "
                         f"exceed the smaller set), got {delta12!r}")
    delta12 = min(delta12, delta1, delta2)
    x1 = _single(delta1, lam, kappa, solve_options)
    x2 = x1 if delta2 == delta1 else _single(delta2, lam, kappa, solve_options)
    # sigma_12 is symmetric in the two fits, but the quadrature of the cross expectation is built around
    # the first one (accurate to ~1e-9 relative); a canonical order (larger set first) makes the
    # answer exactly symmetric in the arguments.
    first, second = (x1, x2) if delta1 >= delta2 else (x2, x1)
    cross = _cross_noise_covariance(first, second, delta12, kappa, quad_order, 1e-13)
    s12 = cross.sigma12
    a1, s1, g1 = x1
    a2, s2, g2 = x2
    t1, t2 = math.hypot(a1, s1), math.hypot(a2, s2)
    cos = (a1 * a2 + s12) / (t1 * t2)
    result = OptimizeResult(cosine=float(min(1.0, cos)), sigma12=s12,
                          noise_correlation=s12 / (s1 * s2) if s1 * s2 > 0 else 0.0,
                          independent_formula=a1 * a2 / (t1 * t2),
                          alpha1=a1, sigma1=s1, gamma1=g1, alpha2=a2, sigma2=s2, gamma2=g2,
                          delta1=delta1, delta2=delta2, delta12=delta12, lam=lam, kappa=kappa,
                          success=cross.success, status=cross.status, message=cross.message, nit=cross.nit,
                          nfev=cross.nfev, residual=cross.residual)
    return report(result, strict, "cgmt.pair_stability", delta1=delta1, delta2=delta2, delta12=delta12, lam=lam,
                  kappa=kappa)


def stability(delta: float, lam: float, kappa: float, protocol: str = "subsample", *, drop: float = 0.2,
              val_fraction: float = 0.2, quad_order: int = DEFAULT_ORDER, strict: bool = False,
              **solve_options) -> OptimizeResult:
    """Predicted (limiting) cosine between two probes' unit directions under a resampling protocol.

    The protocols (training-set fractions of the pool from :func:`cgmt.ablation.protocol_fractions`):

    - ``"independent"``: two fits on independent pools of size N (the paper's formula
      alpha^2/(alpha^2+sigma^2) at delta);
    - ``"subsample"``: two runs of the paper's ablation protocol (:func:`cgmt.ablation.ablation_split`:
      each run trains on f = (1-drop)(1-val_fraction) of the pool, two runs share f^2 of it); the
      paper's robustness score (mean absolute pairwise cosine of the runs) estimates this;
    - ``"full_vs_subsample"``: the fit on the whole pool versus one ablation run (nested sets);
    - ``"subsample_refit"``: two ablation runs of ``RaptorProbe``, whose vectors are refit on each run's
      kept rows (train + validation): fractions (1 - drop, 1 - drop, (1 - drop)^2).

    Parameters
    ----------
    delta : float
        N/p: the size of the labelled pool (the paper's train cup val) over the dimension.
    lam : float
        Common ridge strength (> 0; theory convention, per-sample-averaged loss).
    kappa : float
        Signal strength (>= 0).
    protocol : {"independent", "subsample", "full_vs_subsample", "subsample_refit"}, default="subsample"
        Which two fits are compared (the list above).
    drop, val_fraction : float in [0, 1), default=0.2
        The ablation protocol's parameters (the paper: 0.2 and 0.2).
    quad_order, strict, **solve_options
        As in :func:`pair_stability`.

    Returns
    -------
    OptimizeResult
        The :func:`pair_stability` result plus ``protocol`` and ``fractions`` (f1, f2, f12).  Its
        ``independent_formula`` is the paper's formula evaluated for the two fits actually compared.

    Examples
    --------
    >>> r = stability(2.0, 0.1, 1.0, "subsample")
    >>> r.success, round(r.cosine, 4), [round(f, 4) for f in r.fractions]
    (True, 0.6556, [0.64, 0.64, 0.4096])
    >>> round(stability(2.0, 0.1, 1.0, "independent").cosine, 4)
    0.2487
    """
    f1, f2, f12 = protocol_fractions(protocol, drop=drop, val_fraction=val_fraction)
    delta = check_delta(delta)
    res = pair_stability(f1 * delta, f2 * delta, f12 * delta, lam, kappa, quad_order=quad_order, strict=strict,
                         **solve_options)
    res["protocol"] = protocol
    res["fractions"] = (f1, f2, f12)
    return res
