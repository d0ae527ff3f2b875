"""Ridge logistic regression on anisotropic Gaussian features: ``cgmt.solve_spectral``.

Model (derivation and conventions: ``docs/spectral_theory.md``).  Rows x ~ N(0, Sigma/p), Sigma
positive semi-definite with eigenpairs (omega_i, u_i); teacher P(y = +1 | x) = sigmoid(x'beta*); the
estimator of :func:`cgmt.solve`, argmin (1/n) sum log(1 + e^{-y x'beta}) + lam/(2p) ||beta||^2,
delta = n/p.  Normalisation: Sigma = I is the isotropic model of :func:`cgmt.solve`; for standardized
features Sigma is the correlation matrix, so tr(Sigma)/p = 1 (the code accepts any scale).
Teacher weights t_i = (u_i'beta*)^2 / p, so kappa^2 = rho = beta*'Sigma beta*/p = sum_i omega_i t_i.

Order parameters: m = beta_hat'Sigma beta*/p, q = beta_hat'Sigma beta_hat/p, V (the prox parameter
gamma).  In the isotropic variables of :func:`cgmt.solve`, alpha = m/kappa and
sigma = sqrt(q - m^2/kappa^2): the test score x'beta_hat = alpha Z + sigma W with teacher score
kappa Z, so accuracy, margin alpha/sigma and alignment are the isotropic formulas.  With L = delta lam,
D_i = L + Vh omega_i, the fixed point is

    V = (1/p) sum omega_i / D_i,     m = mh sum t_i omega_i^2 / D_i,
    q - m^2/rho = qh (1/p) sum omega_i^2 / D_i^2 + mh^2 rho Var_pi(omega/D),   pi_i = t_i omega_i / rho,
    qh = 2 delta E1 / V^2,   mh = -2 delta E2 / V,   Vh = 2 delta E3c / V,

with the channel expectations (E1, E2, E3c) of :mod:`cgmt.equations` at (alpha, sigma, gamma = V, kappa):
the channel is exactly the isotropic one, only the spectral sums are new.  At Sigma = I these are the
three equations of :func:`cgmt.solve`.

The estimator is distributed as the effective ridge solution
beta_hat = (L + Vh Sigma)^{-1} (mh Sigma beta* + Sigma^{1/2} zeta), zeta ~ N(0, qh I_p), which gives every
quadratic overlap (``euclidean_alignment``; the two-replica theory in :mod:`cgmt._spectral_stability`).
"""
from __future__ import annotations

import math

import numpy as np

from empirical.common.checks import check_real_array, check_scalar
from empirical.common.failures import quiet, report

from ._newton import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    DIRECT_TRIES,
    ISOTROPIC_START_KAPPA_MAX,
    PATH_TOL,
    Problem,
    drive,
    finish,
    warm_start_reaches,
)
from ._solver import solve, start_point
from .equations import SPECTRAL_SUMS, spectral_sums_into
from .quadrature import DEFAULT_ORDER
from .result import CGMTResult
from .validation import check_lam, check_lams, check_solver_counts, check_spectral_delta

__all__ = ["solve_spectral", "solve_spectral_path", "check_spectrum", "spectral_sums"]

# --------------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------------
#: The supported scale of Sigma: its mean eigenvalue tr(Sigma)/p lies in ``[SIGMA_SCALE_MIN, SIGMA_SCALE_MAX]``.
#: Measured (solve_spectral at delta 2, lam 0.1, Sigma = c I): converged from c = 1e-20 to 1e12; at 1e20 the solve
#: did not return within a minute, at 1e-200 and below it divided by zero.  Inside, Sigma = c I with lam c gives
#: the isotropic answer at every scale (tests/test_theory_domain.py); normalise Sigma to mean 1 where possible.
SIGMA_SCALE_MIN, SIGMA_SCALE_MAX = 1e-12, 1e12


def check_spectrum(eigenvalues, teacher_weights) -> tuple[np.ndarray, np.ndarray]:
    """Validate (eigenvalues, teacher_weights): equal-length finite 1-D arrays, omega >= 0, t >= 0, rho > 0, and
    Sigma's scale (mean eigenvalue) in ``[SIGMA_SCALE_MIN, SIGMA_SCALE_MAX]``.

    Parameters
    ----------
    eigenvalues : array_like, shape (p,)
        Eigenvalues omega_i of Sigma (>= 0: Sigma must be positive semi-definite).
    teacher_weights : array_like, shape (p,)
        t_i = (u_i'beta*)^2 / p (>= 0).

    Returns
    -------
    (ndarray, ndarray)
        Float copies.

    Raises
    ------
    ValueError
        Naming the argument: not 1-D, empty, length mismatch, NaN/inf, a negative eigenvalue (Sigma not
        PSD), a negative teacher weight, rho = sum omega_i t_i = 0 (zero teacher, or a teacher only in
        the null space of Sigma), or Sigma's scale outside its domain.

    Examples
    --------
    >>> check_spectrum([1.0, -0.5], [1.0, 1.0])
    Traceback (most recent call last):
    ...
    ValueError: eigenvalues must be >= 0 (Sigma must be positive semi-definite), got -0.5 at index 1
    """
    out = []
    for value, name in ((eigenvalues, "eigenvalues"), (teacher_weights, "teacher_weights")):
        arr = check_real_array(value, name).copy()
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
        if np.any(arr < 0):
            i = int(np.argmax(arr < 0))
            what = " (Sigma must be positive semi-definite)" if name == "eigenvalues" else ""
            raise ValueError(f"{name} must be >= 0{what}, got {float(arr[i])!r} at index {i}")
        out.append(arr)
    omega, t = out
    if omega.size != t.size:
        raise ValueError(f"eigenvalues and teacher_weights must have the same length, got {omega.size} and {t.size}")
    if not np.any(omega > 0):
        raise ValueError(f"eigenvalues must not all be zero (Sigma = 0 has no features), got {omega!r:.60}")
    scale = float(np.mean(omega))
    if not SIGMA_SCALE_MIN <= scale <= SIGMA_SCALE_MAX:
        raise ValueError(f"eigenvalues: Sigma's scale (mean eigenvalue) must lie in [{SIGMA_SCALE_MIN:g}, "
                         f"{SIGMA_SCALE_MAX:g}] (the solver's measured domain; normalise Sigma to mean 1 and scale lam "
                         f"with it), got {scale:g}")
    rho = float(np.dot(omega, t))
    if not rho > 0:
        raise ValueError("teacher_weights give a zero teacher: rho = sum(eigenvalues * teacher_weights) = 0 "
                         "(beta* = 0 or beta* in the null space of Sigma); the model needs a signal")
    return omega, t


# --------------------------------------------------------------------------------------------
# the spectral sums
# --------------------------------------------------------------------------------------------
def spectral_sums(L: float, v_hat: float, eigenvalues, teacher_weights) -> dict:
    """The spectral side of the fixed point at (L = delta lam, Vh) and its derivatives in Vh.

    Parameters
    ----------
    L : float
        delta * lam (> 0).
    v_hat : float
        The conjugate Vh (>= 0).
    eigenvalues, teacher_weights : ndarray
        As checked by :func:`check_spectrum`.

    Returns
    -------
    dict
        ``V`` = (1/p) sum omega/D and ``dV``; ``A1`` = sum t omega^2/D (m = mh A1) and ``dA1``;
        ``B2`` = (1/p) sum omega^2/D^2 and ``dB2``; ``C`` = rho Var_pi(omega/D) (>= 0, computed without
        cancellation) and ``dC``; ``rho``.  ``d*`` are derivatives with respect to Vh.

    Examples
    --------
    >>> s = spectral_sums(0.5, 1.5, np.ones(4), np.full(4, 0.25))
    >>> round(s["V"], 12), round(s["A1"], 12), s["C"]
    (0.5, 0.5, 0.0)
    """
    out = np.empty(len(SPECTRAL_SUMS))
    spectral_sums_into(float(L), float(v_hat), np.ascontiguousarray(eigenvalues, dtype=float),
                       np.ascontiguousarray(teacher_weights, dtype=float), out)
    return dict(zip(SPECTRAL_SUMS, (float(v) for v in out)))


class _SpectralSystem(Problem):
    """The anisotropic problem: a :class:`cgmt._newton.Problem` with a spectrum (residuals:
    :func:`cgmt.equations.spectral_res_jac_y`; ``extra`` = (q_hat, m_hat, V_hat))."""

    def __init__(self, delta, lam, omega, t, quad_order):
        super().__init__(delta, lam, math.sqrt(float(np.dot(omega, t))), quad_order, omega, t)
        self.rho = self.kappa ** 2

    def maps(self, alpha, sigma, gamma, lam):
        """One undamped fixed-point map (alpha, sigma, gamma) -> (alpha', sigma', V') (read off the residuals)."""
        r, _, _ = self(self.to_y(alpha, sigma, gamma), lam)
        tau = math.hypot(alpha, sigma)
        return alpha + r[1] * tau, sigma * math.sqrt(max(r[0] + 1.0, 1e-300)), gamma / (r[2] + 1.0)


def _large_lambda_start(system, lam):
    """Fixed point at a large lam by plain iteration (a strong contraction there), to PATH_TOL."""
    gamma = float(system.omega.mean()) / (system.delta * lam)
    alpha, sigma = 1e-3 * gamma, 1e-3 * gamma
    for _ in range(DEFAULT_MAX_ITER):
        a2, s2, g2 = system.maps(alpha, sigma, gamma, lam)
        change = max(abs(a2 - alpha) / max(abs(a2), s2), abs(s2 - sigma) / s2, abs(g2 - gamma) / g2)
        alpha, sigma, gamma = a2, s2, g2
        if change < PATH_TOL:
            break
    return system.to_y(alpha, sigma, gamma)


def _spectral_fields(system, y, hats) -> dict:
    """The spectral problem's own fields of its :class:`CGMTResult` (:func:`cgmt._newton.finish` adds the rest)."""
    alpha, sigma, gamma = (float(v) for v in system.to_x(y))
    qh, mh, vh = (float(v) for v in hats)
    kappa = system.kappa
    tau = math.hypot(alpha, sigma)
    # Euclidean overlaps from the effective estimator (L + Vh Sigma)^{-1} (mh Sigma beta* + Sigma^{1/2} zeta)
    omega, t = system.omega, system.t
    d = system.delta * system.lam + vh * omega
    w_dot_teacher = mh * float(np.dot(t, omega / d))
    w_norm2 = mh * mh * float(np.dot(t, (omega / d) ** 2)) + qh * float(np.mean(omega / d ** 2))
    teacher_norm2 = float(t.sum())
    return dict(alpha_salehi=alpha / kappa, m=alpha * kappa, q=tau * tau, V=gamma, m_hat=mh, q_hat=qh, V_hat=vh,
                rho=system.rho, euclidean_alignment=w_dot_teacher / math.sqrt(w_norm2 * teacher_norm2),
                p=int(omega.size))


def solve_spectral(delta, lam, eigenvalues, teacher_weights, *, x0=None, strict=False, tol=DEFAULT_TOL,
                   max_iter=DEFAULT_MAX_ITER, quad_order=DEFAULT_ORDER) -> CGMTResult:
    """Solve the ridge-logistic fixed point for features x ~ N(0, Sigma/p) (Gaussian covariate model).

    Parameters
    ----------
    delta : float
        n / p (> 0).
    lam : float
        Ridge strength (> 0) in (1/n) sum log(1 + e^{-y x'beta}) + lam/(2p) ||beta||^2, as in :func:`cgmt.solve`.
    eigenvalues : array_like, shape (p,)
        Eigenvalues omega_i of Sigma (>= 0).  Sigma = I gives :func:`cgmt.solve`.
    teacher_weights : array_like, shape (p,)
        t_i = (u_i'beta*)^2 / p on the matching eigenvectors; kappa^2 = sum omega_i t_i.
    x0 : (alpha, sigma, gamma) or CGMTResult, optional
        Warm start (e.g. the solution at a neighbouring lam).
    strict : bool, default=False
        Raise :class:`cgmt.ConvergenceError` instead of returning ``success=False``.
    tol : float, default=1e-10
        Largest relative residual accepted.
    max_iter : int, default=100
        Newton iterations per stage.
    quad_order : int, default=10
        Gauss-Legendre points per panel of the channel quadrature (as in :func:`cgmt.solve`).

    Returns
    -------
    CGMTResult
        The fields of :func:`cgmt.solve` in its isotropic variables (``alpha`` = m/kappa,
        ``sigma`` = sqrt(q - m^2/kappa^2), ``gamma`` = V, ``margin``, ``accuracy`` (test accuracy of
        sign(x'beta_hat) on fresh data), ``alignment`` = m/(kappa sqrt(q)) (correlation of the student
        and teacher scores, the cosine in the Sigma metric), ``stability`` (its square, independent
        samples)), plus ``m``, ``q``, ``V``, ``rho`` = kappa^2, the conjugates ``m_hat``, ``q_hat``,
        ``V_hat``, ``euclidean_alignment`` = cos(beta_hat, beta*) in the coordinates of x, and ``p``.

    Raises
    ------
    ValueError
        Bad input (see :func:`check_spectrum`), delta <= 0 or lam <= 0.
    cgmt.ConvergenceError
        With ``strict=True`` when the residual stays above ``tol``.

    Examples
    --------
    >>> import cgmt
    >>> r = solve_spectral(2.0, 0.1, np.ones(100), np.full(100, 4.0 / 100))
    >>> iso = cgmt.solve(2.0, 0.1, 2.0)
    >>> abs(r.accuracy - iso.accuracy) < 1e-10, r.success
    (True, True)
    """
    delta = check_spectral_delta(delta)
    lam = check_lam(lam)
    omega, t = check_spectrum(eigenvalues, teacher_weights)
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    max_iter, quad_order = check_solver_counts(max_iter, quad_order)
    system = _SpectralSystem(delta, lam, omega, t, quad_order)
    starts = []
    if x0 is not None:
        starts.append(start_point(x0))
    elif system.kappa <= ISOTROPIC_START_KAPPA_MAX:
        # the isotropic solution at the same (delta, lam, kappa) is a good start unless Sigma is very anisotropic
        with quiet():  # a failed start only means continuation
            iso = solve(delta, lam, system.kappa, tol=PATH_TOL)
        if iso.success:
            starts.append(system.to_y(iso.alpha, iso.sigma, iso.gamma * float(omega.mean())))
    y, r, hats, nit, status = drive(system, tol, max_iter, start=lambda lm: _large_lambda_start(system, lm),
                                    starts=starts, start_iters=max_iter if x0 is not None else DIRECT_TRIES,
                                    polish=True)
    out = finish(system, y, r, nit, status, tol, **_spectral_fields(system, y, hats))
    return report(out, strict, "cgmt.solve_spectral", delta=delta, lam=lam, p=omega.size)


def solve_spectral_path(delta, lams, eigenvalues, teacher_weights, *, strict=False, **options) -> list:
    """:func:`solve_spectral` along a grid of lam, warm-started from large to small lam.

    Parameters
    ----------
    delta : float
        n / p (> 0).
    lams : array_like of float > 0
        The ridge strengths, a non-empty 1-D array in any order (solved from the largest down, each from the
        previous converged solution when that is within one continuation step (:data:`PATH_MAX_STEP` in log lam),
        else cold; a failed warm start is solved again cold).
    eigenvalues, teacher_weights : array_like
        As in :func:`solve_spectral`.
    strict : bool, default=False
        Raise :class:`cgmt.ConvergenceError` at the first lam whose solve failed (a failed warm start is first
        solved again cold); otherwise each failure warns :class:`cgmt.ConvergenceWarning` and its result has
        ``success=False``.
    **options
        Passed to :func:`solve_spectral` (not ``x0``).

    Returns
    -------
    list of CGMTResult
        In the order of ``lams``.

    Examples
    --------
    >>> path = solve_spectral_path(1.0, [1.0, 0.1, 0.01], np.ones(50), np.full(50, 1.0 / 50))
    >>> [round(r.accuracy, 4) for r in path]
    [0.5641, 0.5606, 0.5549]
    """
    if np.ndim(lams) != 1:
        raise ValueError(f"lams must be a non-empty 1-D array, got shape {np.shape(lams)}")
    lams = check_lams(lams)
    if "x0" in options:
        raise ValueError("solve_spectral_path chains its own warm starts; do not pass x0")
    omega, t = check_spectrum(eigenvalues, teacher_weights)
    out = [None] * lams.size
    prev = None
    for i in np.argsort(-lams, kind="stable"):
        if prev is None or not warm_start_reaches(lams[i], prev.lam):
            res = solve_spectral(delta, lams[i], omega, t, strict=strict, **options)
        else:
            with quiet():
                res = solve_spectral(delta, lams[i], omega, t, x0=prev, strict=False, **options)
            if not res.success:  # a failed warm start: solve cold
                res = solve_spectral(delta, lams[i], omega, t, strict=strict, **options)
        out[i] = res
        prev = res if res.success else None
    return out
