"""The one damped-Newton / continuation driver of ``cgmt``: every fixed point of the package is solved here.

A *problem* (:class:`Problem`) is a three-equation fixed point in the variables y = (alpha/sigma, log sigma,
log gamma): the isotropic system of :func:`cgmt.solve` or the anisotropic one of :func:`cgmt.solve_spectral`
(eigenvalues ``omega``, teacher weights ``t``).  Both are evaluated by :func:`cgmt.equations.problem_res_jac_y`
as ``fn(y, args)`` (optimistix's form; ``args`` is :meth:`Problem.args`, whose first entry says which problem), so
one compiled Newton loop (:func:`_newton_core`) serves both.

Stages (each returns ``(y, r, extra, nit, status)`` with ``status`` a key of
:data:`empirical.common.failures.STATUS_MESSAGES`):

- :func:`damped_newton`: Newton on the relative residuals with trust limits (sigma and gamma change by at
  most e^TRUST_LOG per step, alpha/sigma by max(1, |alpha/sigma|)), an Armijo backtracking line search on
  max |r| and a least-squares step where the Jacobian is singular;
- :func:`march_lambda`: continuation in log lam with a secant predictor and an adaptive step;
- :func:`continuation`: a large-lam start marched down to the target (optionally after a few direct Newton
  steps from a guess at the target);
- :func:`drive`: the stage order every solver of the package uses (given starts, continuation, a fallback
  iteration, a polish), written once; a solver only says which stages its problem takes.

All constants of the driver are the module constants below; the solvers choose none of their own.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy.optimize import brentq

from empirical.common.checks import check_positive_array, check_real_array
from empirical.common.failures import CONTINUATION_FAILED, CONVERGED, ITERATION_LIMIT, NO_PROGRESS

from ._accuracy import accuracy_from_margin, bayes_accuracy
from .equations import ISOTROPIC, SPECTRAL, problem_res_jac_y, quadrature_rule
from .result import CGMTResult, outcome, within_limits
from .validation import check_delta, check_kappa, check_lam, check_quad_order

__all__ = ["Problem", "drive", "damped_newton", "march_lambda", "continuation", "DEFAULT_TOL", "DEFAULT_MAX_ITER",
           "PATH_TOL", "POLISH_TOL"]
# not API (the driver's own tuning and helpers, importable for cgmt's solvers): improves, path_order, bracketed_root,
# ARMIJO,
# MAX_BACKTRACKS, TRUST_LOG, DIRECT_TRIES, warm_start_reaches, POLISH_STEPS, PATH_ORDER_RATIO, ISOTROPIC_START_KAPPA_MAX

#: default largest relative residual accepted at the answer
DEFAULT_TOL = 1e-10
#: default Newton iterations per stage
DEFAULT_MAX_ITER = 100
#: residual accepted at intermediate continuation points and warm-start predictors
PATH_TOL = 1e-6
#: residual a final polish aims at (rounding level)
POLISH_TOL = 1e-14
#: sufficient decrease of the line search: accept max|r(y + t s)| <= (1 - ARMIJO t) max|r(y)|
ARMIJO = 1e-4
#: step sizes the line search tries (1, 1/2, 1/4, ...) before "no further progress"
MAX_BACKTRACKS = 30
#: trust limit: a Newton step changes log sigma and log gamma by at most this
TRUST_LOG = 2.0
#: Newton iterations tried from an approximate start at the target (the large-lam asymptotics, the
#: isotropic solution for a spectrum) before continuation
DIRECT_TRIES = 12
#: the direct start is tried only for a target lam >= DIRECT_LAMBDA_RATIO times the continuation's start: below it
#: the large-lam asymptotics are far from the answer, the direct Newton steps fail, and each failed step costs
#: MAX_BACKTRACKS evaluations (at delta = 217, lam = 4e-15, kappa = 692: 0.35 s of a 1.05 s solve)
DIRECT_LAMBDA_RATIO = 1e-6
#: Newton steps of the final polish towards POLISH_TOL (quadratic convergence: two are enough)
POLISH_STEPS = 2
#: continuation: first step, largest step and smallest step in log lam; a step solved in at most
#: EASY_STEP_NIT iterations doubles the next one
PATH_FIRST_STEP = math.log(30.0)
PATH_MAX_STEP = math.log(1e4)
PATH_MIN_STEP = 1e-4
#: the coarse rule's march (:func:`drive` with ``coarse``) gives up at its first failed step and hands over to
#: the full rule: where the coarse rule's error approaches PATH_TOL (sharp kernels, kappa >~ 50 next to the
#: separability threshold) its path stalls while the full rule's does not, and halving the step to PATH_MIN_STEP
#: cost thousands of evaluations (e.g. 5,400 at delta = kappa = 100, lam = 1e-8, against 55 on the full rule).
#: Three failures (until 2026-11-29) cost the slowest random solves twice their time (benchmarks/cgmt_domain.py)
COARSE_MAX_FAILURES = 1
#: the isotropic solver uses the coarse rule only for kappa <= COARSE_KAPPA_MAX: above it the coarse rule's error
#: reaches 1e-3 to 1e-1 (alpha at delta = 100, lam = 1e-8, kappa = 500: 1e-3; delta = 1004, lam = 2.5e-5,
#: kappa = 813: 10 %), its march stalls, and the slowest random solves and sweeps at kappa in (100, 1e3] took
#: twice as long with it as without it
COARSE_KAPPA_MAX = 100.0
EASY_STEP_NIT = 3
#: Newton iterations allowed at an intermediate continuation point: from the secant predictor a point converges in
#: 2-6; one that has not in this many is a step too long, which march_lambda halves (instead of spending max_iter)
PATH_STEP_MAX_ITER = 20
#: continuation starts at START_LAMBDA * max(1, 1/delta) (times the largest eigenvalue, if above 1)
START_LAMBDA = 20.0
#: smallest lam a march reaches when the target is lam = 0 (the MLE), which is then solved directly
LAMBDA_FLOOR = 1e-12
#: warm starts and continuation of a problem solved with ``coarse=True`` (:func:`drive`) run on a quadrature rule of
#: this fraction of the target's order (at least 4 points per panel), then Newton polishes on the full rule
PATH_ORDER_RATIO = 0.5
#: a spectrum (:func:`cgmt.solve_spectral`) whose kappa is at most this starts from the isotropic solution at the
#: same (delta, lam, kappa); above it the isotropic solve itself is hard and the start is rarely close
ISOTROPIC_START_KAPPA_MAX = 50.0

_EMPTY = np.empty(0)


class Problem:
    """One fixed point: residuals/Jacobian in y = (m, log sigma, log gamma) with evaluation counting.

    Parameters
    ----------
    delta, lam : float
        n / p and the ridge strength (the target of continuation).
    kappa : float
        Signal strength (sqrt(rho) for a spectrum).
    quad_order : int
        Gauss-Legendre points per panel of the channel quadrature.
    eigenvalues, teacher_weights : ndarray, optional
        The spectrum (:mod:`cgmt._spectral`); omitted for the isotropic problem.

    Attributes
    ----------
    delta, lam, kappa : float
        As given (converted to float).
    quad_order : int
        As given.
    rule : tuple of ndarray
        The quadrature rule (:func:`cgmt.equations.quadrature_rule`).
    omega, t : ndarray
        Eigenvalues and teacher weights (empty arrays for the isotropic problem).
    nfev : int
        Residual evaluations so far.
    n_extra : int
        Length of ``extra``: 1 (E2) for the isotropic problem, 3 (q_hat, m_hat, V_hat) for the spectral one.
    """

    def __init__(self, delta, lam, kappa, quad_order, eigenvalues=None, teacher_weights=None):
        self.delta, self.lam = check_delta(delta), check_lam(lam, allow_zero=True)
        self.kappa = check_kappa(kappa)
        self.quad_order = check_quad_order(quad_order)
        self.rule = quadrature_rule(self.quad_order)
        self.omega = _EMPTY if eigenvalues is None else np.ascontiguousarray(
            check_positive_array(eigenvalues, "eigenvalues", allow_zero=True).ravel())
        self.t = _EMPTY if teacher_weights is None else np.ascontiguousarray(
            check_real_array(teacher_weights, "teacher_weights", low=0.0).ravel())
        if self.t.size != self.omega.size:
            raise ValueError(f"teacher_weights must have one entry per entry of eigenvalues ({self.omega.size}), got "
                             f"{self.t.size}")
        self.kind = ISOTROPIC if eigenvalues is None else SPECTRAL
        self.n_extra = 1 if self.kind == ISOTROPIC else 3
        self.nfev = 0

    def with_order(self, quad_order) -> "Problem":
        """The same problem on another quadrature rule (fresh evaluation count)."""
        return Problem(self.delta, self.lam, self.kappa, quad_order,
                       None if self.kind == ISOTROPIC else self.omega, None if self.kind == ISOTROPIC else self.t)

    def args(self, lam=None) -> tuple:
        """The ``args`` of :func:`cgmt.equations.problem_res_jac_y` at ``lam`` (default the problem's)."""
        return (self.kind, self.lam if lam is None else float(lam), self.delta, self.kappa, self.omega, self.t,
                *self.rule)

    @staticmethod
    def to_x(y):
        """(alpha, sigma, gamma) of the solver variables y."""
        sigma = math.exp(y[1])
        return y[0] * sigma, sigma, math.exp(y[2])

    @staticmethod
    def to_y(alpha, sigma, gamma):
        """Solver variables y of (alpha, sigma, gamma)."""
        return np.array([alpha / sigma, math.log(sigma), math.log(gamma)])

    def __call__(self, y, lam=None):
        """(r, jacobian in y, extra) at ``y`` and ``lam`` (default the problem's)."""
        r = np.empty(3)
        jy = np.empty((3, 3))
        extra = np.zeros(self.n_extra)
        problem_res_jac_y(np.asarray(y, dtype=float), self.args(lam), r, jy, extra)
        self.nfev += 1
        return r, jy, extra

    def start_lambda(self) -> float:
        """Where continuation starts: large enough for the large-lam asymptotics."""
        top = float(self.omega.max()) if self.kind == SPECTRAL else 1.0
        return START_LAMBDA * max(1.0, 1.0 / self.delta) * max(1.0, top)


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


@njit(cache=True)
def _newton_core(y, args, tol, max_iter, r, jy, extra):
    """The damped Newton loop in one compiled call on ``fn(y, args)`` (:func:`cgmt.equations.problem_res_jac_y`);
    y, r, jy, extra updated in place.

    Returns (nit, status, nfev) with status CONVERGED, ITERATION_LIMIT or NO_PROGRESS (no further progress).
    """
    rt = np.empty(3)
    jt = np.empty((3, 3))
    et = np.empty(extra.size)
    yt = np.empty(3)
    step = np.empty(3)
    problem_res_jac_y(y, args, r, jy, extra)
    nfev = 1
    nrm = _max_abs(r)
    if not math.isfinite(nrm):
        return 0, NO_PROGRESS, nfev
    bar = np.empty(3)
    for it in range(1, max_iter + 1):
        if nrm <= tol:
            return it - 1, CONVERGED, nfev
        exact = _solve3(jy, r, step)
        if not exact:
            step[:] = np.linalg.lstsq(jy, r, -1.0)[0]
        for i in range(3):
            step[i] = -step[i]
            if not math.isfinite(step[i]):
                return it, NO_PROGRESS, nfev
        w0 = 1.0 / max(1.0, abs(y[0]))  # the step's norm: y[0] relative, the logs absolute
        full = max(abs(step[0]) * w0, abs(step[1]), abs(step[2]))
        scale = max(abs(step[1]) / TRUST_LOG, abs(step[2]) / TRUST_LOG, abs(step[0]) * w0, 1.0)
        for i in range(3):
            step[i] /= scale
        s = 1.0
        accepted = False
        nt = 0.0
        for _ in range(MAX_BACKTRACKS):
            for i in range(3):
                yt[i] = y[i] + s * step[i]
            problem_res_jac_y(yt, args, rt, jt, et)
            nfev += 1
            nt = _max_abs(rt)
            if math.isfinite(nt) and nt <= (1.0 - ARMIJO * s) * nrm:
                accepted = True
                break
            # Deuflhard's natural monotonicity test (affine covariant): the simplified Newton correction
            # J(y)^-1 r(y_t) shrinks.  It accepts the steps that a residual test refuses where J is nearly
            # singular (the MLE's corner: cond ~1e8, where the residual's curvature dominates its linear decrease)
            if exact and math.isfinite(nt) and _solve3(jy, rt, bar):
                if max(abs(bar[0]) * w0, abs(bar[1]), abs(bar[2])) <= (1.0 - 0.5 * s / scale) * full:
                    accepted = True
                    break
            s *= 0.5
        if not accepted:
            return it, NO_PROGRESS, nfev
        y[:] = yt
        r[:] = rt
        jy[:, :] = jt
        extra[:] = et
        nrm = nt
    return max_iter, CONVERGED if nrm <= tol else ITERATION_LIMIT, nfev


def warm_start_reaches(lam, lam_from) -> bool:
    """Whether a solution at ``lam_from`` is a warm start for ``lam``: within one continuation step
    (:data:`PATH_MAX_STEP` in log lam).

    Across more, Newton from the old solution is worse than a cold solve, which marches in lam from the large-lam
    asymptotics: at delta = 0.075, kappa = 68, four lams from 5e17 to 5e-27 took 2.0 s warm-started and 0.04 s cold
    (:func:`cgmt.sweep`); on a spiked spectrum (p = 51, delta = 0.0056) four lams from 4e25 to 6e-29 took 4.7 s
    warm-started (50-154 Newton iterations each) and 0.13 s cold (:func:`cgmt.solve_spectral_path`).

    Examples
    --------
    >>> warm_start_reaches(0.1, 1.0), warm_start_reaches(1e-6, 1.0)
    (True, False)
    """
    return abs(math.log(lam) - math.log(lam_from)) <= PATH_MAX_STEP


def damped_newton(problem, y0, tol, max_iter, lam=None):
    """Damped Newton on max |r| with trust limits and a least-squares step for a singular Jacobian.

    Parameters
    ----------
    problem : Problem
        The fixed point; its ``nfev`` is increased by the evaluations made here.
    y0 : array_like of shape (3,)
        Start, in the solver variables y = (alpha/sigma, log sigma, log gamma) (copied, not modified).
    tol : float
        Stop when max |r| <= tol.
    max_iter : int
        Most Newton iterations.
    lam : float, optional
        Solve at this lam instead of the problem's (continuation).

    Returns
    -------
    y : ndarray of shape (3,)
        The last accepted iterate.
    r : ndarray of shape (3,)
        Its relative residuals.
    extra : ndarray
        E2 (isotropic) or (q_hat, m_hat, V_hat) (spectral) at ``y``.
    nit : int
        Newton iterations made.
    status : int
        0 (converged), 1 (iteration limit), 2 (no progress: non-finite residual or step, or the line search
        failed).

    Examples
    --------
    >>> from cgmt import solve
    >>> s = solve(2.0, 0.1, 2.0)
    >>> problem = Problem(2.0, 0.1, 2.0, 10)
    >>> y, r, extra, nit, status = damped_newton(problem, Problem.to_y(1.1 * s.alpha, s.sigma, s.gamma), 1e-10, 50)
    >>> status, round(float(Problem.to_x(y)[0]), 4)
    (0, 0.927)
    """
    y = np.array(y0, dtype=float)
    r = np.empty(3)
    jy = np.empty((3, 3))
    extra = np.zeros(problem.n_extra)
    nit, status, nfev = _newton_core(y, problem.args(lam), float(tol), int(max_iter), r, jy, extra)
    problem.nfev += nfev
    return y, r, extra, nit, status


def improves(candidate, best) -> bool:
    """Whether the stage result ``candidate`` = (y, r, extra, status) replaces ``best`` (None: nothing yet).

    A converged stage always does; otherwise the smaller max |r| wins.

    Parameters
    ----------
    candidate : tuple
        (y, r, extra, status) of the stage just run.
    best : tuple or None
        (y, r, extra, status) of the best stage so far; None before the first.

    Returns
    -------
    bool or numpy.bool_
        True when ``candidate`` should become the best (a NumPy bool when the residuals were compared).

    Examples
    --------
    >>> bool(improves((None, [1e-3, 0, 0], None, 1), (None, [1e-2, 0, 0], None, 1)))
    True
    >>> improves((None, [1e-1, 0, 0], None, 2), None)
    True
    """
    return best is None or candidate[3] == CONVERGED or np.max(np.abs(candidate[1])) < np.max(np.abs(best[1]))


def march_lambda(newton, y, r, extra, lam_start, lam_target, tol, path_tol=PATH_TOL, max_failures=None):
    """Continuation in log lam from a solution at ``lam_start`` down to ``lam_target``.

    Secant predictor from the last two solutions, a retry without it, step halving on failure and
    doubling after easy steps (at most PATH_MAX_STEP per step).  Intermediate points are solved to
    ``path_tol``, the last one to ``tol``.

    Parameters
    ----------
    newton : callable
        ``newton(y0, tol, lam, final) -> (y, r, extra, nit, status)`` (status 0 = converged; ``final`` is True at
        ``lam_target``, where the solve may take more iterations than at an intermediate point).
    y, r, extra : ndarray
        The solution at ``lam_start`` (as :func:`damped_newton` returns it).
    lam_start, lam_target : float
        0 < lam_target <= lam_start.
    tol : float
        Residual accepted at ``lam_target``.
    path_tol : float, default=PATH_TOL
        Residual accepted at the intermediate points.
    max_failures : int, optional
        Give up after this many failed steps (default: only when the step falls below PATH_MIN_STEP).

    Returns
    -------
    tuple
        (y, r, extra, nit, status) at ``lam_target`` with ``nit`` the Newton iterations of every step; status 3
        if the steps became smaller than PATH_MIN_STEP (then the last converged point is returned, which is
        not at ``lam_target``).
    """
    total = failures = 0
    t_end = math.log(lam_target)
    t = math.log(lam_start)
    prev = None  # (t, y) of the previous converged point, for the secant predictor
    h = -PATH_FIRST_STEP
    while t > t_end + 1e-12:
        tn = max(t + h, t_end)
        yp = y + (y - prev[1]) * (tn - t) / (t - prev[0]) if prev is not None else y.copy()
        last = tn <= t_end + 1e-12
        yn, rn, en, nitn, st = newton(yp, tol if last else path_tol, math.exp(tn), last)
        total += nitn
        if st != CONVERGED and prev is not None:  # retry without the predictor
            yn, rn, en, nitn, st = newton(y, tol if last else path_tol, math.exp(tn), last)
            total += nitn
        if st != CONVERGED:
            h /= 2.0
            failures += 1
            if abs(h) < PATH_MIN_STEP or (max_failures is not None and failures >= max_failures):
                return y, r, extra, total, CONTINUATION_FAILED
            continue
        prev = (t, y)
        t, y, r, extra = tn, yn, rn, en
        if nitn <= EASY_STEP_NIT:
            h = max(2.0 * h, -PATH_MAX_STEP)
    return y, r, extra, total, CONVERGED


def _at_target(problem, y, nit, status):
    """A failed continuation's last iterate with its residuals at the *target* lam: the iterate was solved at
    another lam, and its own residual there (up to PATH_TOL, and by chance far below ``tol``) must not be reported,
    or compared with other stages, as the target's."""
    r, _, extra = problem(y)
    return y, r, extra, nit, status


def continuation(problem, tol, max_iter, start, direct_guess=None, max_failures=None):
    """Solve ``problem`` at its lam by marching down from a large lam.

    Parameters
    ----------
    problem : Problem
        The fixed point; its ``lam`` is the target (0 allowed: the march then stops at LAMBDA_FLOOR and a
        final Newton solve goes to lam = 0).
    tol : float
        Residual accepted at the target.
    max_iter : int
        Newton iterations per stage.
    start : callable
        ``start(lam) -> y``: a start at a large lam (e.g. the asymptotics).
    direct_guess : callable, optional
        ``direct_guess(lam) -> y``: first try DIRECT_TRIES Newton iterations from it at the target.
    max_failures : int, optional
        As for :func:`march_lambda`.

    Returns
    -------
    tuple
        (y, r, extra, nit, status); status 3 if continuation failed (the start at the large lam or the march
        did not converge), and at lam = 0 the status of the final Newton solve.
    """
    lam_target = problem.lam
    lam_start = max(problem.start_lambda(), lam_target)
    total = 0
    if direct_guess is not None and lam_start * DIRECT_LAMBDA_RATIO <= lam_target < lam_start:
        y, r, extra, nit, status = damped_newton(problem, direct_guess(lam_target), tol, DIRECT_TRIES)
        if status == CONVERGED:
            return y, r, extra, nit, CONVERGED
        total += nit
    y, r, extra, nit, status = damped_newton(problem, start(lam_start), tol if lam_start == lam_target else PATH_TOL,
                                             max_iter, lam=lam_start)
    total += nit
    if status != CONVERGED:
        return _at_target(problem, y, total, CONTINUATION_FAILED)
    y, r, extra, nit, status = march_lambda(
        lambda y0, tl, lam, final: damped_newton(problem, y0, tl, max_iter if final else min(max_iter,
                                                                                             PATH_STEP_MAX_ITER),
                                                 lam=lam),
        y, r, extra, lam_start, lam_target if lam_target > 0 else LAMBDA_FLOOR, tol, PATH_TOL, max_failures)
    total += nit
    if status != CONVERGED:
        return _at_target(problem, y, total, status)
    if lam_target == 0.0:
        return _to_zero(problem, y, tol, max_iter, total)
    return y, r, extra, total, CONVERGED


def _to_zero(problem, y_floor, tol, max_iter, total):
    """The last stage of a march to lam = 0 (the MLE): Newton at lam = 0 from the linear extrapolation of the
    solutions at LAMBDA_FLOOR and 2 LAMBDA_FLOOR (the solution is analytic in lam at 0, so the extrapolation's error
    is O(LAMBDA_FLOOR^2)), else from the solution at LAMBDA_FLOOR.

    Near the MLE's degenerate corner (kappa of hundreds, delta a little above delta*) two of the three equations
    become nearly dependent (Jacobian condition ~1e8): the O(LAMBDA_FLOOR) shift to lam = 0 then moves the answer by
    ~0.4 %, and damped Newton from the LAMBDA_FLOOR solution creeps there in ~200 backtracked iterations (4.3 s at
    delta = 1004, kappa = 813), while from the extrapolation it converges in 2 (8 ms).
    """
    y2, _, _, nit2, status2 = damped_newton(problem, y_floor, tol, PATH_STEP_MAX_ITER, lam=2.0 * LAMBDA_FLOOR)
    total += nit2
    if status2 == CONVERGED:
        y, r, extra, nit, status = damped_newton(problem, 2.0 * y_floor - y2, tol, PATH_STEP_MAX_ITER, lam=0.0)
        total += nit
        if status == CONVERGED:
            return y, r, extra, total, CONVERGED
    y, r, extra, nit, status = damped_newton(problem, y_floor, tol, max_iter, lam=0.0)
    return y, r, extra, total + nit, status


def path_order(quad_order) -> int:
    """The coarse rule's order for a target rule of ``quad_order`` points per panel (:data:`PATH_ORDER_RATIO`).

    Parameters
    ----------
    quad_order : int
        The target's Gauss-Legendre points per panel.

    Returns
    -------
    int
        At least 4.
    """
    return max(4, int(round(PATH_ORDER_RATIO * quad_order)))


def drive(problem, tol, max_iter, *, start, starts=(), start_iters=None, direct_guess=None, coarse=False,
          fallback=None, polish=False):
    """Solve ``problem`` at its lam: the one stage order of every fixed point of ``cgmt``.

    1. **Given starts** (a warm start, or an approximate solution such as the isotropic one for a spectrum): Newton
       from each until one converges (with ``coarse``, first to :data:`PATH_TOL` on the coarse rule, then on the
       full rule from that iterate, or from the start if the coarse solve failed).
    2. **Continuation** (:func:`continuation`) when no start converged: from ``start`` at a large lam (after a few
       direct Newton steps from ``direct_guess`` at the target, if given); with ``coarse``, on the coarse rule to
       :data:`PATH_TOL`, then Newton on the full rule.
    3. **Fallback** when still not converged: ``fallback(problem, y, tol, max_iter)`` (a damped fixed-point
       iteration) from the best iterate, then Newton from the best iterate.
    4. **Polish** (``polish``): :data:`POLISH_STEPS` more Newton steps towards :data:`POLISH_TOL` from a converged
       answer, kept when they lower the residual.

    Each stage's result replaces the best so far when it converged or has a smaller residual (:func:`improves`).

    Parameters
    ----------
    problem : Problem
        The fixed point (its ``nfev`` counts every evaluation, those on the coarse rule included).
    tol : float
        Largest relative residual accepted.
    max_iter : int
        Newton iterations per stage.
    start : callable
        ``start(lam) -> y`` at a large lam, where continuation begins.
    starts : sequence of ndarray, default=()
        Starts tried first, in the solver variables y.
    start_iters : int, optional
        Newton iterations from each start (default ``min(max_iter, PATH_STEP_MAX_ITER)``).
    direct_guess : callable, optional
        As for :func:`continuation`.
    coarse : bool, default=False
        Run the starts and the continuation on the coarse rule (:func:`path_order`) first.
    fallback : callable, optional
        ``fallback(problem, y0, tol, max_iter) -> (y, r, extra, nit, status)``: the last resort.
    polish : bool, default=False
        Polish a converged answer.

    Returns
    -------
    tuple
        (y, r, extra, nit, status) of the best stage, ``nit`` the Newton (and fallback) iterations of every stage.

    Examples
    --------
    >>> problem = Problem(2.0, 0.1, 2.0, 10)
    >>> y, r, extra, nit, status = drive(problem, 1e-10, 100, start=lambda lam: Problem.to_y(0.1 / lam, 0.1 / lam,
    ...                                                                                        0.5 / lam))
    >>> status, round(float(Problem.to_x(y)[0]), 4)
    (0, 0.927)
    """
    # a given start that has not converged in PATH_STEP_MAX_ITER iterations is a poor one (a good warm start converges
    # in a few): continuation is then cheaper than more of its iterations, each of up to MAX_BACKTRACKS evaluations
    iters = min(max_iter, PATH_STEP_MAX_ITER) if start_iters is None else start_iters
    nit_total, best = 0, None

    def coarse_stage(run):
        """``run(coarse problem)`` on a fresh coarse rule, its evaluations counted on ``problem``."""
        nonlocal nit_total
        cheap = problem.with_order(path_order(problem.quad_order))
        y, r, extra, nit, status = run(cheap)
        nit_total += nit
        problem.nfev += cheap.nfev
        return y, r, extra, nit, status

    for y0 in starts:
        if coarse:
            y1, _, _, _, status = coarse_stage(lambda cheap: damped_newton(cheap, y0, PATH_TOL, max_iter))
            y0 = y1 if status == CONVERGED else y0
        y, r, extra, nit, status = damped_newton(problem, y0, tol, iters)
        nit_total += nit
        if improves((y, r, extra, status), best):
            best = (y, r, extra, status)
        if status == CONVERGED:
            break
    if best is None or best[3] != CONVERGED:
        status = CONTINUATION_FAILED
        if coarse:
            y, r, extra, _, status = coarse_stage(lambda cheap: continuation(cheap, PATH_TOL, max_iter, start,
                                                                              direct_guess=direct_guess,
                                                                              max_failures=COARSE_MAX_FAILURES))
            if status == CONVERGED:
                y, r, extra, nit, status = damped_newton(problem, y, tol, max_iter)
                nit_total += nit
        if status != CONVERGED:
            # the coarse rule's error can exceed PATH_TOL where the kernels are sharp (kappa >~ 50 next to the
            # separability threshold), and its path then stalls although the full rule's does not: march on the
            # full rule (without the direct start, which the coarse stage has tried)
            y, r, extra, nit, status = continuation(problem, tol, max_iter, start,
                                                    direct_guess=None if coarse else direct_guess)
            nit_total += nit
        if improves((y, r, extra, status), best):
            best = (y, r, extra, status)
    if best[3] != CONVERGED and fallback is not None:
        for stage in (fallback, damped_newton):  # the fixed-point iteration, then Newton from its iterate
            if best[3] == CONVERGED:
                break
            y, r, extra, nit, status = stage(problem, best[0], tol, max_iter)
            nit_total += nit
            if improves((y, r, extra, status), best):
                best = (y, r, extra, status)
    if polish and best[3] == CONVERGED:  # a few more Newton steps towards rounding level (quadratic convergence)
        y, r, extra, nit, _ = damped_newton(problem, best[0], min(tol, POLISH_TOL), POLISH_STEPS)
        nit_total += nit
        if np.max(np.abs(r)) < np.max(np.abs(best[1])):
            best = (y, r, extra, CONVERGED)
    return best[0], best[1], best[2], nit_total, best[3]


def finish(problem, y, r, nit, status, tol, **fields) -> CGMTResult:
    """The one result of a fixed-point solve (isotropic or spectral): the order parameters at ``y``, the accuracy,
    the verdict (:func:`cgmt.result.outcome`, with the limits every answer respects) and ``fields``, the problem's
    own quantities (``alpha_salehi``; the spectral overlaps).

    Parameters
    ----------
    problem : Problem
        The solved problem (its ``delta``, ``lam``, ``kappa``, ``quad_order``, ``nfev``).
    y : ndarray of shape (3,)
        The final iterate, in (m, log sigma, log gamma).
    r : ndarray of shape (3,)
        Its residuals.
    nit, status : int
        Newton iterations and the driver's status (:data:`empirical.common.failures.STATUS_MESSAGES`).
    tol : float
        The tolerance the residual is judged against.
    **fields
        Added to the result.

    Returns
    -------
    CGMTResult
    """
    alpha, sigma, gamma = (float(v) for v in problem.to_x(y))
    kappa = problem.kappa
    tau = math.hypot(alpha, sigma)
    margin = alpha / sigma
    accuracy = float(accuracy_from_margin(margin, kappa))
    limits = within_limits(accuracy, bayes_accuracy(kappa), sigma, gamma)
    res, success, status, message = outcome(r, status, nit, tol, limits=limits)
    return CGMTResult(alpha=alpha, sigma=sigma, gamma=gamma, margin=margin, accuracy=accuracy,
                      alignment=alpha / tau, stability=(alpha / tau) ** 2, **fields,
                      delta=problem.delta, lam=problem.lam, kappa=kappa,
                      x=np.array([alpha, sigma, gamma]), fun=np.asarray(r, dtype=float), residual=res,
                      success=success, status=status, message=message, nit=int(nit), nfev=problem.nfev,
                      quad_order=problem.quad_order)


def bracketed_root(f, lo, hi, *, xtol, rtol=8.881784197001252e-16, max_iter=100) -> tuple:
    """The root of a scalar equation inside a sign-changing bracket: the one root finder of ``cgmt``'s
    one-dimensional stages (the fixed-point fallback's gamma, the stability theories' cross covariance, the
    separability threshold), SciPy's Brent method.

    Parameters
    ----------
    f : callable
        ``f(x) -> float``; ``f(lo)`` and ``f(hi)`` must differ in sign.
    lo, hi : float
        The bracket.
    xtol, rtol : float
        Brent's absolute and relative tolerances (``rtol`` defaults to SciPy's, 4 machine epsilons).
    max_iter : int, default=100
        Most iterations.

    Returns
    -------
    (float, int, bool)
        The root, the iterations made and whether Brent's method converged.

    Raises
    ------
    ValueError
        When ``f(lo)`` and ``f(hi)`` have the same sign (SciPy's message).

    Examples
    --------
    >>> root, nit, converged = bracketed_root(lambda x: x * x - 2.0, 0.0, 2.0, xtol=1e-15)
    >>> round(root, 12), converged
    (1.414213562373, True)
    """
    root, info = brentq(f, lo, hi, xtol=xtol, rtol=rtol, maxiter=max_iter, full_output=True, disp=False)
    return root, info.iterations, info.converged
