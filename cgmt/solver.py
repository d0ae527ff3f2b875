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
   eq. (3) by bracketing) as last resort.

The result is reported as converged only if max |r_i| <= tol.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit
from scipy.optimize import OptimizeResult, brentq

from .accuracy import accuracy_from_margin
from .equations import quadrature_rule, res_jac_y
from .quadrature import DEFAULT_ORDER, MAX_PANEL, TRUNCATION, gaussian_rule
from .threshold import separability_threshold
from .validation import check_delta, check_kappa, check_lam, check_scalar

__all__ = ["CGMTResult", "ConvergenceError", "solve", "mle", "damped_newton", "march_lambda", "start_point"]


class ConvergenceError(RuntimeError):
    """Raised by ``solve(..., strict=True)`` when the fixed point is not found to tolerance.

    Parameters
    ----------
    message : str
    result : CGMTResult, optional
        The unconverged result (``.result``).
    """

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class CGMTResult(OptimizeResult):
    """Fixed point of the ridge-logistic CGMT system (SciPy ``OptimizeResult``).

    Fields: ``alpha`` (= <z_hat, v>), ``sigma`` (= ||z_hat - alpha v||), ``gamma`` (prox parameter),
    ``margin`` m = alpha/sigma, ``accuracy`` (the accuracy proposition at m), ``alignment`` alpha/sqrt(alpha^2+sigma^2),
    ``stability`` alpha^2/(alpha^2+sigma^2) (independent samples), ``alpha_salehi`` (= alpha/kappa,
    coefficient on beta*), ``delta``, ``lam``, ``kappa``, ``x`` = [alpha, sigma, gamma], ``fun``
    (relative residuals), ``residual`` (max |fun|), ``success``, ``status`` (see ``STATUS_MESSAGES``:
    0 ok, 1 iteration limit, 2 no progress, 3 continuation failed), ``message``, ``nit`` (Newton
    iterations), ``nfev``, ``quad_order``.

    ``converged`` and ``iterations`` are read-only aliases of ``success`` and ``nit``, kept for one
    release for code written against earlier versions (they are not stored fields).

    Examples
    --------
    >>> r = solve(2.0, 0.1, 2.0)
    >>> r.success == r.converged, r.nit == r.iterations, "converged" in r
    (True, True, False)
    """

    @property
    def converged(self) -> bool:
        """Alias of ``success`` (deprecated name, kept for one release)."""
        return bool(self["success"])

    @property
    def iterations(self) -> int:
        """Alias of ``nit`` (deprecated name, kept for one release)."""
        return int(self["nit"])

    def __repr__(self):
        keys = ("alpha", "sigma", "gamma", "margin", "accuracy", "alignment", "stability", "alpha_salehi",
                "delta", "lam", "kappa", "success", "residual", "nit", "message")
        w = max(len(k) for k in keys)
        return "\n".join(f"{k.rjust(w)}: {self.get(k)!r}" for k in keys if k in self)

    __str__ = __repr__


@lru_cache(maxsize=256)
def _mean_sprime(kappa):
    z, w = gaussian_rule([(0.0, math.pi / kappa)] if kappa > 0 else [], order=20)
    e = np.exp(-np.abs(kappa * z))
    return float(np.sum(w * e / (1 + e) ** 2))


def large_lambda_guess(delta, lam, kappa):
    """Leading-order (lam -> inf) fixed point (alpha, sigma, gamma)."""
    return (kappa * _mean_sprime(kappa) / lam, 1.0 / (2.0 * lam * math.sqrt(delta)), 1.0 / (delta * lam))


class _System:
    """Residuals/Jacobian in y = (m, log sigma, log gamma) with evaluation counting."""

    def __init__(self, delta, lam, kappa, quad_order):
        self.delta, self.lam, self.kappa = delta, lam, kappa
        self.rule = quadrature_rule(quad_order)
        self.nfev = 0

    @staticmethod
    def to_x(y):
        sigma = math.exp(y[1])
        return y[0] * sigma, sigma, math.exp(y[2])

    @staticmethod
    def to_y(alpha, sigma, gamma):
        return np.array([alpha / sigma, math.log(sigma), math.log(gamma)])

    def __call__(self, y, lam=None):
        r = np.empty(3)
        jy = np.empty((3, 3))
        xg, wg, gz1, gw1, gz2, gw2 = self.rule
        e2 = res_jac_y(np.asarray(y, dtype=float), self.delta, self.lam if lam is None else float(lam), self.kappa,
                       xg, wg, gz1, gw1, gz2, gw2, TRUNCATION, MAX_PANEL, r, jy)
        self.nfev += 1
        return r, jy, e2


@njit(cache=True)
def _max_abs(r):
    """max |r_i| (NaN if any entry is NaN)."""
    m = 0.0
    for i in range(r.size):
        if r[i] != r[i]:
            return np.nan
        m = max(m, abs(r[i]))
    return m


@njit(cache=True)
def _solve3(a, b, out):
    """Solve the 3 x 3 system a x = b by Gaussian elimination with partial pivoting; False if singular."""
    m = a.copy()
    v = b.copy()
    for k in range(3):
        p = k
        for i in range(k + 1, 3):
            if abs(m[i, k]) > abs(m[p, k]):
                p = i
        if m[p, k] == 0.0 or not math.isfinite(m[p, k]):
            return False
        if p != k:
            for j in range(3):
                m[k, j], m[p, j] = m[p, j], m[k, j]
            v[k], v[p] = v[p], v[k]
        for i in range(k + 1, 3):
            f = m[i, k] / m[k, k]
            for j in range(k, 3):
                m[i, j] -= f * m[k, j]
            v[i] -= f * v[k]
    for i in range(2, -1, -1):
        acc = v[i]
        for j in range(i + 1, 3):
            acc -= m[i, j] * out[j]
        out[i] = acc / m[i, i]
    return True


_SINGULAR = 4  # internal status of _newton_core: singular Jacobian, finish in Python (lstsq step)


@njit(cache=True)
def _newton_core(y, delta, lam, kappa, xg, wg, gz1, gw1, gz2, gw2, L, H, tol, maxiter, r, jy, e2out):
    """Damped Newton of :func:`_newton` in one compiled call; y, r, jy, e2out[0] updated in place.

    Returns (nit, status, nfev); status _SINGULAR leaves (y, r, jy) at the last accepted iterate.
    """
    rt = np.empty(3)
    jt = np.empty((3, 3))
    yt = np.empty(3)
    step = np.empty(3)
    e2out[0] = res_jac_y(y, delta, lam, kappa, xg, wg, gz1, gw1, gz2, gw2, L, H, r, jy)
    nfev = 1
    nrm = _max_abs(r)
    if not math.isfinite(nrm):
        return 0, 2, nfev
    for it in range(1, maxiter + 1):
        if nrm <= tol:
            return it - 1, 0, nfev
        if not _solve3(jy, r, step):
            return it - 1, _SINGULAR, nfev
        for i in range(3):
            step[i] = -step[i]
            if not math.isfinite(step[i]):
                return it, 2, nfev
        # trust limits: sigma and gamma change by at most e^2 per step, m by max(1, |m|)
        scale = max(abs(step[1]) / 2.0, abs(step[2]) / 2.0, abs(step[0]) / max(1.0, abs(y[0])), 1.0)
        for i in range(3):
            step[i] /= scale
        t = 1.0
        accepted = False
        e2t = 0.0
        nt = 0.0
        for _ in range(30):
            for i in range(3):
                yt[i] = y[i] + t * step[i]
            e2t = res_jac_y(yt, delta, lam, kappa, xg, wg, gz1, gw1, gz2, gw2, L, H, rt, jt)
            nfev += 1
            nt = _max_abs(rt)
            if math.isfinite(nt) and nt <= (1.0 - 1e-4 * t) * nrm:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            return it, 2, nfev
        y[:] = yt
        r[:] = rt
        jy[:, :] = jt
        e2out[0] = e2t
        nrm = nt
    return maxiter, 0 if nrm <= tol else 1, nfev


def _newton(system, y0, tol, maxiter, lam=None):
    """Damped Newton; returns (y, r, e2, nit, status).

    Runs in one compiled call (:func:`_newton_core`); only a singular Jacobian hands over to the
    Python loop :func:`damped_newton` (least-squares step).
    """
    y = np.array(y0, dtype=float)
    r = np.empty(3)
    jy = np.empty((3, 3))
    e2 = np.zeros(1)
    xg, wg, gz1, gw1, gz2, gw2 = system.rule
    nit, status, nfev = _newton_core(y, system.delta, system.lam if lam is None else float(lam), system.kappa,
                                     xg, wg, gz1, gw1, gz2, gw2, TRUNCATION, MAX_PANEL, float(tol), int(maxiter),
                                     r, jy, e2)
    system.nfev += nfev
    if status == _SINGULAR:
        y, r, e2v, nit2, status = damped_newton(system, y, tol, max(1, maxiter - nit), lam)
        return y, r, e2v, nit + nit2, status
    return y, r, e2[0], nit, status


def damped_newton(system, y0, tol, maxiter, lam=None):
    """Damped Newton on max |r| with trust limits and a least-squares step for a singular Jacobian.

    Parameters
    ----------
    system : callable
        ``system(y, lam) -> (r, jacobian, extra)`` in the variables y = (m, log sigma, log gamma).
    y0 : array (3,)
    tol : float
        Stop when max |r| <= tol.
    maxiter : int
    lam : float, optional
        Passed to ``system``.

    Returns
    -------
    tuple
        (y, r, extra, nit, status) with status 0 (converged), 1 (iteration limit), 2 (no progress).
    """
    y = np.array(y0, dtype=float)
    r, jy, e2 = system(y, lam)
    nrm = np.max(np.abs(r))
    if not np.isfinite(nrm):
        return y, r, e2, 0, 2
    for it in range(1, maxiter + 1):
        if nrm <= tol:
            return y, r, e2, it - 1, 0
        try:
            step = -np.linalg.solve(jy, r)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(jy, r, rcond=None)[0]
        if not np.all(np.isfinite(step)):
            return y, r, e2, it, 2
        # trust limits: sigma and gamma change by at most e^2 per step, m by max(1, |m|)
        scale = max(abs(step[1]) / 2.0, abs(step[2]) / 2.0, abs(step[0]) / max(1.0, abs(y[0])), 1.0)
        step /= scale
        t = 1.0
        accepted = False
        for _ in range(30):
            yt = y + t * step
            rt, jt, e2t = system(yt, lam)
            nt = np.max(np.abs(rt))
            if np.isfinite(nt) and nt <= (1.0 - 1e-4 * t) * nrm:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            # accept a rounding-level stall if we are already at tolerance-ish
            return y, r, e2, it, 2
        y, r, jy, e2, nrm = yt, rt, jt, e2t, nt
    return y, r, e2, maxiter, 0 if nrm <= tol else 1


def _fixed_point(system, y0, tol, maxiter, damping=0.5):
    """Damped fixed-point iteration (fallback): sigma, alpha from eqs. (1)-(2), gamma from eq. (3)."""
    alpha, sigma, gamma = system.to_x(y0)

    def r3(lg):
        r, _, _ = system(np.array([alpha / sigma, math.log(sigma), lg]))
        return r[2]

    r = np.full(3, np.inf)
    e2 = 0.0
    for it in range(1, maxiter + 1):
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
            gamma = math.exp(brentq(r3, lo, hi, xtol=1e-14))
        except ValueError:
            return system.to_y(alpha, sigma, gamma), r, e2, it, 2
        y = system.to_y(alpha, sigma, gamma)
        r, _, e2 = system(y)
        if np.max(np.abs(r)) <= tol:
            return y, r, e2, it, 0
        tau = math.hypot(alpha, sigma)
        s_new = sigma * math.sqrt(max(r[0] + 1.0, 1e-12))
        a_new = alpha + r[1] * tau
        sigma = (1 - damping) * sigma + damping * s_new
        alpha = (1 - damping) * alpha + damping * a_new
    return system.to_y(alpha, sigma, gamma), r, e2, maxiter, 1


_TOL_PATH = 1e-6  # residual accepted at intermediate continuation points
DIRECT_TRIES = 12  # Newton iterations tried from the asymptotic guess before continuation


PATH_ORDER_RATIO = 0.5  # continuation / warm-start predictor rule: this fraction of quad_order


def _path_order(quad_order):
    return max(4, int(round(PATH_ORDER_RATIO * quad_order)))


def _start_lambda(delta):
    return 20.0 * max(1.0, 1.0 / delta)


def _continuation(system, lam_target, tol, maxiter, lam_start=None, y_start=None):
    """March lam from lam_start (asymptotic start) down to lam_target; returns like _newton + nit sum."""
    delta, kappa = system.delta, system.kappa
    if lam_start is None:
        lam_start = max(_start_lambda(delta), lam_target)
    if y_start is None:
        y_start = system.to_y(*large_lambda_guess(delta, lam_start, kappa))
    total = 0
    if lam_target > 0 and lam_target < lam_start:
        # often Newton converges directly from the asymptotic guess at the target: try briefly
        y0 = system.to_y(*large_lambda_guess(delta, lam_target, kappa))
        y, r, e2, nit, status = _newton(system, y0, tol, DIRECT_TRIES, lam=lam_target)
        if status == 0:
            return y, r, e2, nit, 0
        total += nit
    y, r, e2, nit, status = _newton(system, y_start, tol if lam_start == lam_target else _TOL_PATH, maxiter,
                                    lam=lam_start)
    total += nit
    if status != 0:
        return y, r, e2, total, 3
    y, r, e2, nit, status = march_lambda(lambda y0, tl, lam: _newton(system, y0, tl, maxiter, lam=lam),
                                         y, r, e2, lam_start, lam_target if lam_target > 0 else 1e-12, tol, _TOL_PATH)
    total += nit
    if status != 0:
        return y, r, e2, total, status
    if lam_target == 0.0:
        y, r, e2, nit, status = _newton(system, y, tol, maxiter, lam=0.0)
        return y, r, e2, total + nit, status
    return y, r, e2, total, 0


def march_lambda(newton, y, r, extra, lam_start, lam_target, tol, path_tol):
    """Continuation in log lam from a solution at ``lam_start`` down to ``lam_target``.

    Secant predictor from the last two solutions, a retry without it, step halving on failure and
    doubling after easy steps (at most a factor 1e4 per step).  Intermediate points are solved to
    ``path_tol``, the last one to ``tol``.

    Parameters
    ----------
    newton : callable
        ``newton(y0, tol, lam) -> (y, r, extra, nit, status)`` (status 0 = converged).
    y, r, extra
        The solution at ``lam_start``.
    lam_start, lam_target : float
        lam_target <= lam_start.
    tol, path_tol : float

    Returns
    -------
    tuple
        (y, r, extra, nit, status) at ``lam_target``; status 3 if the steps became too small (then the
        last converged point is returned).
    """
    total = 0
    t_end = math.log(lam_target)
    t = math.log(lam_start)
    prev = None  # (t, y) of the previous converged point, for the secant predictor
    h = -math.log(30.0)
    while t > t_end + 1e-12:
        tn = max(t + h, t_end)
        yp = y + (y - prev[1]) * (tn - t) / (t - prev[0]) if prev is not None else y.copy()
        last = tn <= t_end + 1e-12
        yn, rn, en, nitn, st = newton(yp, tol if last else path_tol, math.exp(tn))
        total += nitn
        if st != 0 and prev is not None:  # retry without the predictor
            yn, rn, en, nitn, st = newton(y, tol if last else path_tol, math.exp(tn))
            total += nitn
        if st != 0:
            h /= 2.0
            if abs(h) < 1e-4:
                return y, r, extra, total, 3
            continue
        prev = (t, y)
        t, y, r, extra = tn, yn, rn, en
        if nitn <= 3:
            h = max(2.0 * h, -math.log(1e4))
    return y, r, extra, total, 0


def start_point(x0):
    """Solver variables y = (alpha/sigma, log sigma, log gamma) of a warm start (None stays None).

    Parameters
    ----------
    x0 : (alpha, sigma, gamma), CGMTResult or None

    Returns
    -------
    ndarray (3,) or None

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
            raise ValueError("x0 must be (alpha, sigma, gamma) or a CGMTResult")
        a, s, g = arr
    if not (np.isfinite(a) and np.isfinite(s) and np.isfinite(g)) or s <= 0 or g <= 0:
        raise ValueError("x0 must be finite with sigma > 0 and gamma > 0")
    return _System.to_y(a, s, g)


STATUS_MESSAGES = {
    0: "converged",
    1: "iteration limit reached",
    2: "no further progress (line search failed)",
    3: "continuation in lambda failed",
}


def _finish(system, y, r, e2, nit, status, tol, quad_order):
    alpha, sigma, gamma = (float(t) for t in system.to_x(y))
    e2 = float(e2)
    delta, lam, kappa = system.delta, system.lam, system.kappa
    res = float(np.max(np.abs(r)))
    conv = bool(np.isfinite(res) and res <= tol)
    if conv:
        status = 0
    elif status == 0:
        status = 1
    tau = math.hypot(alpha, sigma)
    m = alpha / sigma
    msg = STATUS_MESSAGES[status] + f" (max relative residual {res:.3e}, tol {tol:.1e}, {nit} Newton iterations)"
    out = CGMTResult(
        alpha=alpha, sigma=sigma, gamma=gamma, margin=m,
        accuracy=float(accuracy_from_margin(m, kappa)),
        alignment=alpha / tau, stability=(alpha / tau) ** 2,
        alpha_salehi=alpha / kappa if kappa > 0 else -2.0 * delta * e2,
        delta=delta, lam=lam, kappa=kappa,
        x=np.array([alpha, sigma, gamma]), fun=np.asarray(r, dtype=float), residual=res,
        success=conv, status=status, message=msg, nit=int(nit), nfev=system.nfev, quad_order=quad_order,
    )
    return out


def _solve(delta, lam, kappa, *, strict, x0, tol, maxiter, quad_order, check_quadrature=False):
    system = _System(delta, lam, kappa, quad_order)
    y0 = start_point(x0)
    nit_total = 0
    best = None
    if y0 is not None:
        # warm start: Newton on the half-order rule to _TOL_PATH, then polish at full order
        path = _System(delta, lam, kappa, _path_order(quad_order))
        y1, r, e2, nit, status = _newton(path, y0, _TOL_PATH, maxiter)
        nit_total += nit
        system.nfev += path.nfev
        y, r, e2, nit, status = _newton(system, y1 if status == 0 else y0, tol, maxiter)
        nit_total += nit
        best = (y, r, e2, status)
    if best is None or best[3] != 0:
        # continuation on a cheaper rule (intermediate points need only _TOL_PATH), then polish
        path = _System(delta, lam, kappa, _path_order(quad_order))
        y, r, e2, nit, status = _continuation(path, lam, _TOL_PATH, maxiter)
        nit_total += nit
        system.nfev += path.nfev
        if status == 0:
            y, r, e2, nit, status = _newton(system, y, tol, maxiter)
            nit_total += nit
        if best is None or status == 0 or np.max(np.abs(r)) < np.max(np.abs(best[1])):
            best = (y, r, e2, status)
    if best[3] != 0:
        y, r, e2, nit, status = _fixed_point(system, best[0], tol, maxiter)
        nit_total += nit
        if status == 0 or np.max(np.abs(r)) < np.max(np.abs(best[1])):
            best = (y, r, e2, status)
        if best[3] != 0:  # polish with Newton from the fixed-point iterate
            y, r, e2, nit, status = _newton(system, best[0], tol, maxiter)
            nit_total += nit
            if status == 0 or np.max(np.abs(r)) < np.max(np.abs(best[1])):
                best = (y, r, e2, status)
    out = _finish(system, best[0], best[1], best[2], nit_total, best[3], tol, quad_order)
    if check_quadrature:
        # re-solve on the rule with twice the order, to rounding-level residual, from this solution
        fine = _System(delta, lam, kappa, 2 * quad_order)
        yf, rf, _, _, stf = _newton(fine, best[0], 1e-14, maxiter)
        xf = np.array(fine.to_x(yf))
        scale = np.array([max(abs(out.alpha), out.sigma), out.sigma, out.gamma])
        out["quadrature_change"] = float(np.max(np.abs(xf - out.x) / scale))
        out["quadrature_residual"] = float(np.max(np.abs(rf)))
    if strict and not out.success:
        raise ConvergenceError(
            f"cgmt.solve(delta={delta}, lam={lam}, kappa={kappa}) did not converge: {out.message}", out)
    return out


def solve(delta, lam, kappa, *, strict=False, x0=None, tol=1e-10, maxiter=100, quad_order=DEFAULT_ORDER,
          check_quadrature=False) -> CGMTResult:
    """Solve the CGMT fixed point of ridge logistic regression (convention: docs/theory.md).

    Parameters
    ----------
    delta : float > 0       n / p.
    lam : float >= 0        ridge strength in (1/n) sum loss + lam/(2p) ||beta||^2; lam = 0 (the MLE,
                            as :func:`cgmt.mle`) only for delta > separability_threshold(kappa).
    kappa : float >= 0      signal strength, ||beta*||^2 = p kappa^2.
    strict : bool           raise :class:`ConvergenceError` instead of returning success=False.
    x0 : (alpha, sigma, gamma) or CGMTResult, optional    warm start.
    tol : float             max relative residual accepted (see :mod:`cgmt.equations`).
    maxiter : int           Newton iterations per solve stage.
    quad_order : int        Gauss-Legendre points per quadrature panel (the default 10 is accurate to ~1e-12, 20 to
                            ~1e-15; doubling it checks the quadrature).
    check_quadrature : bool re-solve with 2 * quad_order and report ``quadrature_change`` (max change
                            of alpha, sigma, gamma relative to (max(|alpha|, sigma), sigma, gamma)) and
                            ``quadrature_residual``.

    Returns
    -------
    CGMTResult
        The order parameters and everything derived from them (see :class:`CGMTResult`).

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
                f"lam must lie in (0, inf) here: lam = 0 is the MLE, which does not exist for "
                f"delta <= delta*(kappa={kappa}) = {dstar:.6g} (got delta={delta})")
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    if int(maxiter) != maxiter or maxiter < 1:
        raise ValueError(f"maxiter must be a positive integer, got {maxiter!r}")
    if int(quad_order) != quad_order or not 2 <= quad_order <= 200:
        raise ValueError(f"quad_order must be an integer in [2, 200], got {quad_order!r}")
    return _solve(delta, lam, kappa, strict=strict, x0=x0, tol=tol, maxiter=int(maxiter),
                  quad_order=int(quad_order), check_quadrature=bool(check_quadrature))


def mle(delta, kappa, *, strict=False, tol=1e-10, maxiter=100, quad_order=DEFAULT_ORDER) -> CGMTResult:
    """Fixed point of the unregularized logistic MLE (lam = 0); same result type as :func:`solve`.

    Parameters
    ----------
    delta : float
        n/p; must exceed :func:`cgmt.separability_threshold` (kappa), else the data are separable and
        ``ValueError`` asks for lam > 0.
    kappa : float >= 0
        Signal strength.
    strict, tol, maxiter, quad_order
        As for :func:`solve`.

    Returns
    -------
    CGMTResult

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
    return _solve(delta, 0.0, kappa, strict=strict, x0=None, tol=tol, maxiter=int(maxiter),
                  quad_order=int(quad_order))
