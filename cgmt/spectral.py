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
quadratic overlap (``euclidean_alignment``; the two-replica theory in :mod:`cgmt.spectral_stability`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .accuracy import accuracy_from_margin
from .equations import N_TERMS, expectation_terms, quadrature_rule, stein_gradients
from .quadrature import DEFAULT_ORDER, MAX_PANEL, TRUNCATION
from .solver import STATUS_MESSAGES, CGMTResult, ConvergenceError, damped_newton, march_lambda, solve, start_point
from .validation import check_delta, check_int, check_lam, check_real_array, check_scalar

__all__ = ["Spectrum", "solve_spectral", "solve_spectral_path", "check_spectrum", "spectral_sums"]

#: relative size of negative eigenvalues treated as rounding (clipped to 0) by Spectrum.from_covariance
EIGEN_ROUNDING = 1e-10
_TOL_PATH = 1e-7


# --------------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------------
def check_spectrum(eigenvalues, teacher_weights) -> tuple[np.ndarray, np.ndarray]:
    """Validate (eigenvalues, teacher_weights): equal-length finite 1-D arrays, omega >= 0, t >= 0, rho > 0.

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
        PSD), a negative teacher weight, or rho = sum omega_i t_i = 0 (zero teacher, or a teacher only in
        the null space of Sigma).

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
        raise ValueError("eigenvalues must not all be zero (Sigma = 0 has no features)")
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
    omega = eigenvalues
    tw = teacher_weights * omega
    a = omega / (L + v_hat * omega)
    a2 = a * a
    rho = float(tw.sum())
    A1 = float(np.dot(tw, a))
    abar = A1 / rho
    dev = a - abar
    return {
        "V": float(a.mean()), "dV": -float(a2.mean()),
        "A1": A1, "dA1": -float(np.dot(tw, a2)),
        "B2": float(a2.mean()), "dB2": -2.0 * float(np.dot(a2, a)) / a.size,
        "C": float(np.dot(tw, dev * dev)), "dC": -2.0 * float(np.dot(tw, dev * a2)),
        "rho": rho,
    }


class _SpectralSystem:
    """Residuals/Jacobian of the spectral fixed point in y = (alpha/sigma, log sigma, log gamma).

    Residuals (relative; equal to 0 exactly at the fixed point):
    r1 = sigma'^2/sigma^2 - 1, r2 = (alpha' - alpha)/tau, r3 = gamma/V' - 1, where (alpha', sigma', V')
    are the spectral maps of the hats computed from the channel at (alpha, sigma, gamma).
    """

    def __init__(self, delta, lam, omega, t, quad_order):
        self.delta, self.lam = float(delta), float(lam)
        self.omega, self.t = omega, t
        self.rho = float(np.dot(omega, t))
        self.kappa = math.sqrt(self.rho)
        self.rule = quadrature_rule(quad_order)
        self.terms = np.empty(N_TERMS)
        self.nfev = 0

    to_x = staticmethod(lambda y: (y[0] * math.exp(y[1]), math.exp(y[1]), math.exp(y[2])))

    @staticmethod
    def to_y(alpha, sigma, gamma):
        return np.array([alpha / sigma, math.log(sigma), math.log(gamma)])

    def hats(self, alpha, sigma, gamma):
        """(qh, mh, Vh) and their gradients in (alpha, sigma, gamma)."""
        t = self.terms
        kappa, delta = self.kappa, self.delta
        expectation_terms(alpha, sigma, gamma, kappa, *self.rule, TRUNCATION, MAX_PANEL, t)
        e1, e2, e3 = t[0], t[1], t[2]
        grad = np.empty((3, 3))
        stein_gradients(t, alpha, sigma, kappa, grad)
        d1, d2, d3 = grad
        g2 = gamma * gamma
        qh = 2.0 * delta * e1 / g2
        mh = -2.0 * delta * e2 / gamma
        vh = 2.0 * delta * e3 / gamma
        dqh = 2.0 * delta * d1 / g2
        dqh[2] -= 2.0 * qh / gamma
        dmh = -2.0 * delta * d2 / gamma
        dmh[2] -= mh / gamma
        dvh = 2.0 * delta * d3 / gamma
        dvh[2] -= vh / gamma
        return qh, mh, vh, dqh, dmh, dvh

    def __call__(self, y, lam=None):
        lam = self.lam if lam is None else float(lam)
        self.nfev += 1
        alpha, sigma, gamma = self.to_x(y)
        qh, mh, vh, dqh, dmh, dvh = self.hats(alpha, sigma, gamma)
        s = spectral_sums(self.delta * lam, vh, self.omega, self.t)
        kappa = self.kappa
        sig2p = qh * s["B2"] + mh * mh * s["C"]
        alpha_p = mh * s["A1"] / kappa
        vp = s["V"]
        tau = math.hypot(alpha, sigma)
        r = np.array([sig2p / (sigma * sigma) - 1.0, (alpha_p - alpha) / tau, gamma / vp - 1.0])
        dsig2p = s["B2"] * dqh + 2.0 * mh * s["C"] * dmh + (qh * s["dB2"] + mh * mh * s["dC"]) * dvh
        dalpha_p = (s["A1"] * dmh + mh * s["dA1"] * dvh) / kappa
        jac = np.empty((3, 3))
        jac[0] = dsig2p / (sigma * sigma)
        jac[0, 1] -= 2.0 * sig2p / sigma ** 3
        jac[1] = dalpha_p / tau - (alpha_p - alpha) / tau ** 3 * np.array([alpha, sigma, 0.0])
        jac[1, 0] -= 1.0 / tau
        jac[2] = -gamma / (vp * vp) * s["dV"] * dvh
        jac[2, 2] += 1.0 / vp
        jy = np.empty((3, 3))
        jy[:, 0] = jac[:, 0] * sigma
        jy[:, 1] = jac[:, 0] * alpha + jac[:, 1] * sigma
        jy[:, 2] = jac[:, 2] * gamma
        return r, jy, (qh, mh, vh)

    def maps(self, alpha, sigma, gamma, lam):
        """One undamped fixed-point map (alpha, sigma, gamma) -> (alpha', sigma', V')."""
        qh, mh, vh, *_ = self.hats(alpha, sigma, gamma)
        s = spectral_sums(self.delta * lam, vh, self.omega, self.t)
        return mh * s["A1"] / self.kappa, math.sqrt(max(qh * s["B2"] + mh * mh * s["C"], 1e-300)), s["V"]


def _large_lambda_start(system, lam):
    """Fixed point at a large lam by plain iteration (a strong contraction there)."""
    omega = system.omega
    gamma = float(omega.mean()) / (system.delta * lam)
    alpha, sigma = 1e-3 * gamma, 1e-3 * gamma
    for _ in range(200):
        a2, s2, g2 = system.maps(alpha, sigma, gamma, lam)
        change = max(abs(a2 - alpha) / max(abs(a2), s2), abs(s2 - sigma) / s2, abs(g2 - gamma) / g2)
        alpha, sigma, gamma = a2, s2, g2
        if change < 1e-6:
            break
    return system.to_y(alpha, sigma, gamma)


def _continuation(system, lam_target, tol, maxiter):
    """March log lam down from a large lam with a secant predictor and adaptive steps."""
    delta = system.delta
    lam = max(20.0 * max(1.0, 1.0 / delta) * max(1.0, float(system.omega.max())), lam_target)
    y = _large_lambda_start(system, lam)
    y, r, hats, total, status = damped_newton(system, y, tol if lam == lam_target else _TOL_PATH, maxiter, lam)
    if status != 0:
        return y, r, hats, total, 3
    y, r, hats, nit, status = march_lambda(lambda y0, tl, lm: damped_newton(system, y0, tl, maxiter, lm),
                                           y, r, hats, lam, lam_target, tol, _TOL_PATH)
    return y, r, hats, total + nit, status


def _finish(system, y, r, hats, nit, status, tol, quad_order):
    alpha, sigma, gamma = (float(v) for v in system.to_x(y))
    qh, mh, vh = (float(v) for v in hats)
    res = float(np.max(np.abs(r)))
    conv = bool(np.isfinite(res) and res <= tol)
    status = 0 if conv else (1 if status == 0 else status)
    kappa = system.kappa
    tau = math.hypot(alpha, sigma)
    margin = alpha / sigma
    # Euclidean overlaps from the effective estimator (L + Vh Sigma)^{-1} (mh Sigma beta* + Sigma^{1/2} zeta)
    omega, t = system.omega, system.t
    d = system.delta * system.lam + vh * omega
    w_dot_teacher = mh * float(np.dot(t, omega / d))
    w_norm2 = mh * mh * float(np.dot(t, (omega / d) ** 2)) + qh * float(np.mean(omega / d ** 2))
    teacher_norm2 = float(t.sum())
    msg = STATUS_MESSAGES[status] + f" (max relative residual {res:.3e}, tol {tol:.1e}, {nit} Newton iterations)"
    return CGMTResult(
        alpha=alpha, sigma=sigma, gamma=gamma, margin=margin,
        accuracy=float(accuracy_from_margin(margin, kappa)),
        alignment=alpha / tau, stability=(alpha / tau) ** 2, alpha_salehi=alpha / kappa,
        m=alpha * kappa, q=tau * tau, V=gamma, m_hat=mh, q_hat=qh, V_hat=vh, rho=system.rho,
        euclidean_alignment=w_dot_teacher / math.sqrt(w_norm2 * teacher_norm2),
        delta=system.delta, lam=system.lam, kappa=kappa, p=int(omega.size),
        x=np.array([alpha, sigma, gamma]), fun=np.asarray(r, dtype=float), residual=res,
        success=conv, status=status, message=msg, nit=int(nit), nfev=system.nfev, quad_order=quad_order,
    )


def solve_spectral(delta, lam, eigenvalues, teacher_weights, *, x0=None, strict=False, tol=1e-10,
                   maxiter=100, quad_order=DEFAULT_ORDER) -> CGMTResult:
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
    strict : bool
        Raise :class:`cgmt.ConvergenceError` instead of returning ``success=False``.
    tol : float
        Largest relative residual accepted (default 1e-10).
    maxiter : int
        Newton iterations per stage.
    quad_order : int
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
    delta = check_delta(delta)
    lam = check_lam(lam)
    omega, t = check_spectrum(eigenvalues, teacher_weights)
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    maxiter = check_int(maxiter, "maxiter")
    quad_order = check_int(quad_order, "quad_order", minimum=2)
    system = _SpectralSystem(delta, lam, omega, t, quad_order)
    best = None
    starts = []
    if x0 is not None:
        starts.append(start_point(x0))
    else:
        # the isotropic solution at the same (delta, lam, kappa) is a good start unless Sigma is very anisotropic
        iso = solve(delta, lam, system.kappa, tol=1e-6) if system.kappa <= 50 else None
        if iso is not None and iso.success:
            starts.append(system.to_y(iso.alpha, iso.sigma, iso.gamma * float(omega.mean())))
    nit_total = 0
    for y0 in starts:
        y, r, hats, nit, status = damped_newton(system, y0, tol, maxiter if x0 is not None else 25)
        nit_total += nit
        best = (y, r, hats, status)
        if status == 0:
            break
    if best is None or best[3] != 0:
        y, r, hats, nit, status = _continuation(system, lam, tol, maxiter)
        nit_total += nit
        if best is None or status == 0 or np.max(np.abs(r)) < np.max(np.abs(best[1])):
            best = (y, r, hats, status)
    if best[3] == 0:  # polish: up to two more Newton steps towards rounding level (quadratic convergence)
        y, r, hats, nit, _ = damped_newton(system, best[0], min(tol, 1e-14), 2)
        nit_total += nit
        if np.max(np.abs(r)) < np.max(np.abs(best[1])):
            best = (y, r, hats, 0)
    out = _finish(system, *best[:3], nit_total, best[3], tol, quad_order)
    if strict and not out.success:
        raise ConvergenceError(f"cgmt.solve_spectral(delta={delta}, lam={lam}, p={omega.size}) did not converge: "
                               f"{out.message}", out)
    return out


def solve_spectral_path(delta, lams, eigenvalues, teacher_weights, **options) -> list:
    """:func:`solve_spectral` along a grid of lam, warm-started from large to small lam.

    Parameters
    ----------
    delta : float
    lams : array_like of float > 0
    eigenvalues, teacher_weights : array_like
        As in :func:`solve_spectral`.
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
    lams = np.asarray(lams, dtype=float)
    if lams.ndim != 1 or lams.size == 0:
        raise ValueError(f"lams must be a non-empty 1-D array, got shape {lams.shape}")
    if "x0" in options:
        raise ValueError("solve_spectral_path chains its own warm starts; do not pass x0")
    omega, t = check_spectrum(eigenvalues, teacher_weights)
    out = [None] * lams.size
    prev = None
    for i in np.argsort(-lams, kind="stable"):
        res = solve_spectral(delta, lams[i], omega, t, x0=prev, **options)
        if not res.success and prev is not None:  # a failed warm start: solve cold
            res = solve_spectral(delta, lams[i], omega, t, **options)
        out[i] = res
        prev = res if res.success else None
    return out


# --------------------------------------------------------------------------------------------
# spectra
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spectrum:
    """Eigen-decomposition of Sigma and the teacher's coordinates in it: the input of the spectral theory.

    Build it with :meth:`from_covariance`, :meth:`from_eigenpairs`, :meth:`power_law`, :meth:`spiked`
    or :meth:`isotropic`; solve with :meth:`solve` (which calls :func:`solve_spectral`).

    Attributes
    ----------
    eigenvalues : ndarray, shape (p,)
        omega_i, in decreasing order.
    teacher_weights : ndarray, shape (p,)
        t_i = (u_i'beta*)^2 / p.
    teacher_coordinates : ndarray, shape (p,)
        Signed b_i = u_i'beta*/sqrt(p) (t = b^2); needed only for overlaps in a non-spectral metric.
    eigenvectors : ndarray, shape (p, p) or None
        Columns u_i (None: the standard basis, as for the named families).

    Examples
    --------
    >>> s = Spectrum.power_law(200, exponent=1.0, kappa=2.0)
    >>> s.p, round(s.kappa, 12), round(float(s.eigenvalues.mean()), 12)
    (200, 2.0, 1.0)
    """

    eigenvalues: np.ndarray
    teacher_weights: np.ndarray
    teacher_coordinates: np.ndarray
    eigenvectors: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        omega, t = check_spectrum(self.eigenvalues, self.teacher_weights)
        b = np.array(self.teacher_coordinates, dtype=float)
        if b.shape != t.shape or not np.allclose(b * b, t, rtol=1e-8, atol=1e-300):
            raise ValueError("teacher_coordinates must have the shape of teacher_weights with "
                             "teacher_coordinates**2 == teacher_weights")
        if self.eigenvectors is not None:
            u = np.array(self.eigenvectors, dtype=float)
            if u.shape != (omega.size, omega.size):
                raise ValueError(f"eigenvectors must be ({omega.size}, {omega.size}), got {u.shape}")
            object.__setattr__(self, "eigenvectors", u)
        for name, arr in (("eigenvalues", omega), ("teacher_weights", t), ("teacher_coordinates", b)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    # ---- constructors
    @classmethod
    def from_eigenpairs(cls, eigenvalues, eigenvectors, teacher) -> "Spectrum":
        """From eigenvalues, eigenvectors (columns) and the teacher beta* (in the coordinates of x).

        Parameters
        ----------
        eigenvalues : array_like, shape (p,)
        eigenvectors : array_like, shape (p, p)
            Orthonormal columns u_i.
        teacher : array_like, shape (p,)
            beta*, scaled so that P(y = +1 | x) = sigmoid(x'beta*) with x ~ N(0, Sigma/p).

        Returns
        -------
        Spectrum
        """
        omega = np.asarray(eigenvalues, dtype=float)
        u = np.asarray(eigenvectors, dtype=float)
        beta = np.asarray(teacher, dtype=float)
        if u.ndim != 2 or u.shape[0] != u.shape[1] or u.shape[0] != omega.size:
            raise ValueError(f"eigenvectors must be a ({omega.size}, {omega.size}) matrix, got {u.shape}")
        if beta.shape != omega.shape:
            raise ValueError(f"teacher must have shape {omega.shape}, got {beta.shape}")
        if not np.all(np.isfinite(beta)):
            raise ValueError("teacher must be finite")
        order = np.argsort(-omega, kind="stable")
        omega, u = omega[order], u[:, order]
        b = u.T @ beta / math.sqrt(omega.size)
        return cls(omega, b * b, b, u)

    @classmethod
    def from_covariance(cls, covariance, teacher) -> "Spectrum":
        """From Sigma (p x p, symmetric PSD; eigenvalues above -1e-10 max|omega| are rounding and clipped to 0).

        Parameters
        ----------
        covariance : array_like, shape (p, p)
        teacher : array_like, shape (p,)
            beta* (see :meth:`from_eigenpairs`).

        Returns
        -------
        Spectrum

        Examples
        --------
        >>> Spectrum.from_covariance(np.eye(3), [2.0, 0.0, 0.0]).teacher_weights.round(12).tolist()
        [1.333333333333, 0.0, 0.0]
        """
        cov = np.asarray(covariance, dtype=float)
        if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
            raise ValueError(f"covariance must be a square matrix, got shape {cov.shape}")
        if not np.all(np.isfinite(cov)):
            raise ValueError("covariance must be finite (no NaN or inf)")
        scale = max(float(np.abs(cov).max()), 1e-300)
        if not np.allclose(cov, cov.T, rtol=0, atol=1e-10 * scale):
            raise ValueError("covariance must be symmetric")
        omega, u = np.linalg.eigh((cov + cov.T) / 2)
        if omega.min() < -EIGEN_ROUNDING * max(abs(omega).max(), 1e-300):
            raise ValueError(f"covariance must be positive semi-definite, smallest eigenvalue {omega.min():.3g}")
        return cls.from_eigenpairs(np.clip(omega, 0.0, None), u, teacher)

    @classmethod
    def _family(cls, omega, profile, kappa):
        kappa = check_scalar(kappa, "kappa", low=0.0, low_open=True)
        omega = omega / omega.mean()
        t = profile / float(np.dot(omega, profile)) * kappa ** 2
        return cls(omega, t, np.sqrt(t))

    @classmethod
    def isotropic(cls, p, kappa) -> "Spectrum":
        """Sigma = I_p with a teacher of norm^2 = p kappa^2 spread evenly (the model of :func:`cgmt.solve`)."""
        p = check_int(p, "p")
        return cls._family(np.ones(p), np.ones(p), kappa)

    @classmethod
    def power_law(cls, p, exponent=1.0, kappa=1.0, teacher_exponent=0.0) -> "Spectrum":
        """omega_i proportional to i^-exponent (mean 1), t_i proportional to i^-teacher_exponent, kappa^2 = sum omega t.

        Parameters
        ----------
        p : int
        exponent : float >= 0
        kappa : float > 0
        teacher_exponent : float
            0 spreads the teacher evenly over the eigen-directions; > 0 puts it on the top ones.

        Returns
        -------
        Spectrum
        """
        p = check_int(p, "p")
        exponent = check_scalar(exponent, "exponent", low=0.0)
        teacher_exponent = check_scalar(teacher_exponent, "teacher_exponent")
        i = np.arange(1, p + 1, dtype=float)
        return cls._family(i ** -exponent, i ** -teacher_exponent, kappa)

    @classmethod
    def spiked(cls, p, spikes=(25.0,) * 5, kappa=1.0, teacher="spikes") -> "Spectrum":
        """A bulk of equal eigenvalues plus spikes (scaled to mean 1); the teacher on the spikes, the bulk or both.

        Parameters
        ----------
        p : int
            Dimension (> number of spikes).
        spikes : sequence of float
            Spike eigenvalues relative to a bulk eigenvalue of 1 (before scaling to mean 1).
        kappa : float > 0
        teacher : {"spikes", "bulk", "flat"}
            Where the teacher's weight lies (evenly within it).

        Returns
        -------
        Spectrum
        """
        p = check_int(p, "p")
        spikes = np.asarray(spikes, dtype=float)
        if spikes.ndim != 1 or spikes.size >= p or np.any(~np.isfinite(spikes)) or np.any(spikes <= 0):
            raise ValueError(f"spikes must be fewer than p = {p} positive finite numbers, got {spikes!r}")
        omega = np.concatenate([np.sort(spikes)[::-1], np.ones(p - spikes.size)])
        k = spikes.size
        profiles = {"spikes": np.r_[np.ones(k), np.zeros(p - k)], "bulk": np.r_[np.zeros(k), np.ones(p - k)],
                    "flat": np.ones(p)}
        if teacher not in profiles:
            raise ValueError(f"teacher must be 'spikes', 'bulk' or 'flat', got {teacher!r}")
        return cls._family(omega, profiles[teacher], kappa)

    # ---- derived quantities
    @property
    def p(self) -> int:
        """Dimension."""
        return int(self.eigenvalues.size)

    @property
    def kappa(self) -> float:
        """Signal strength sqrt(beta*'Sigma beta*/p)."""
        return math.sqrt(float(np.dot(self.eigenvalues, self.teacher_weights)))

    @property
    def participation_ratio(self) -> float:
        """(sum omega)^2 / sum omega^2: the effective number of dimensions (p for Sigma = I)."""
        return float(self.eigenvalues.sum() ** 2 / np.dot(self.eigenvalues, self.eigenvalues))

    def teacher_basis(self):
        """(eigenvectors, signed coordinates); the identity basis if no eigenvectors are stored."""
        u = self.eigenvectors if self.eigenvectors is not None else np.eye(self.p)
        return u, self.teacher_coordinates

    def teacher(self) -> np.ndarray:
        """beta* in the coordinates of x (sqrt(p) U b)."""
        u, b = self.teacher_basis()
        return math.sqrt(self.p) * (u @ b)

    def covariance(self) -> np.ndarray:
        """Sigma = U diag(omega) U'."""
        u, _ = self.teacher_basis()
        return (u * self.eigenvalues) @ u.T

    def scaled(self, kappa) -> "Spectrum":
        """The same spectrum and teacher direction with signal strength ``kappa``."""
        kappa = check_scalar(kappa, "kappa", low=0.0, low_open=True)
        c = kappa / self.kappa
        return Spectrum(self.eigenvalues, self.teacher_weights * c * c, self.teacher_coordinates * c,
                        self.eigenvectors)

    def solve(self, delta, lam, **options) -> CGMTResult:
        """:func:`solve_spectral` on this spectrum."""
        return solve_spectral(delta, lam, self.eigenvalues, self.teacher_weights, **options)

    def solve_path(self, delta, lams, **options) -> list:
        """:func:`solve_spectral_path` on this spectrum."""
        return solve_spectral_path(delta, lams, self.eigenvalues, self.teacher_weights, **options)
