"""What every ``cgmt`` solver returns: :class:`CGMTResult`, and the verdict of a fixed-point solve (:func:`outcome`).

Every fixed-point solver of the package (:func:`cgmt.solve`, :func:`cgmt.mle`, :func:`cgmt.solve_spectral`,
the cross fixed points of :mod:`cgmt.stability` and :mod:`cgmt._spectral_stability`) reports a SciPy
``OptimizeResult`` with ``success``, ``status`` (a key of :data:`STATUS_MESSAGES`), ``message`` and ``nit``
(except the cross fixed point of :mod:`cgmt._spectral_stability`, which reports ``nfev`` and no ``nit``).
On failure it either raises :class:`ConvergenceError` (``strict=True``) or returns ``success=False`` after
warning the project's :class:`ConvergenceWarning` (:func:`report`).  The status table and the failure
convention are the project's (:mod:`empirical.common.failures`).
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import OptimizeResult

from empirical.common.checks import check_scalar
from empirical.common.failures import CONVERGED, ITERATION_LIMIT, OUT_OF_LIMITS, STATUS_MESSAGES

__all__ = ["CGMTResult"]  # outcome, within_limits: the solvers' helpers, not API


class CGMTResult(OptimizeResult):
    """Fixed point of the ridge-logistic CGMT system (SciPy ``OptimizeResult``).

    Built by the solvers (a ``dict`` of the fields below, read as attributes); conventions of docs/theory.md:
    z_hat = beta_hat / sqrt(p), v = beta* / ||beta*|| (unit teacher direction).

    Attributes
    ----------
    alpha : float
        <z_hat, v>, the component of the estimate along the teacher.
    sigma : float
        ||z_hat - alpha v||, the component orthogonal to the teacher (> 0).
    gamma : float
        The prox parameter of the fixed point (> 0).
    margin : float
        m = alpha / sigma.
    accuracy : float
        Test accuracy of sign(x'beta_hat) on fresh data (the accuracy proposition at m and kappa).
    alignment : float
        alpha / sqrt(alpha^2 + sigma^2), the cosine between estimate and teacher.
    stability : float
        alpha^2 / (alpha^2 + sigma^2): the expected cosine between two estimates fitted on independent samples.
    alpha_salehi : float
        The coefficient on beta* (alpha / kappa; at kappa = 0, -2 delta E2), Salehi et al.'s alpha.
    delta, lam, kappa : float
        The point solved: n / p, ridge strength, signal strength.
    x : ndarray of shape (3,)
        [alpha, sigma, gamma].
    fun : ndarray of shape (3,)
        The relative residuals at ``x`` (:func:`cgmt.equations.residuals`).
    residual : float
        max |fun|; ``success`` is ``residual <= tol``.
    success : bool
        Whether the fixed point was found to the tolerance asked for.
    status : int
        A key of :data:`STATUS_MESSAGES` (0: converged).
    message : str
        The status message with the residual, tolerance and iteration count.
    nit : int
        Newton iterations over every stage.
    nfev : int
        Residual evaluations.
    quad_order : int
        Gauss-Legendre points per quadrature panel.

    Notes
    -----
    :func:`cgmt.solve` with ``check_quadrature=True`` adds ``quadrature_change`` and ``quadrature_residual``;
    :func:`cgmt.solve_spectral` adds the fields it documents.

    Examples
    --------
    >>> import cgmt
    >>> r = cgmt.solve(2.0, 0.1, 2.0)
    >>> bool(r.success), r.status, STATUS_MESSAGES[r.status], "converged" in r
    (True, 0, 'converged', False)
    """

    def __repr__(self):
        keys = ("alpha", "sigma", "gamma", "margin", "accuracy", "alignment", "stability", "alpha_salehi",
                "delta", "lam", "kappa", "success", "residual", "nit", "message")
        w = max(len(k) for k in keys)
        return "\n".join(f"{k.rjust(w)}: {self.get(k)!r}" for k in keys if k in self)

    __str__ = __repr__


#: slack on the accuracy limits of :func:`within_limits` (the quadrature's accuracy is ~1e-12)
LIMIT_SLACK = 1e-9


def within_limits(accuracy: float, bayes: float, sigma: float, gamma: float) -> bool:
    """Whether a fixed point's answer respects the limits every solution has: ``1/2 <= accuracy <= bayes``
    (a ridge estimator is never worse than chance on a symmetric teacher, nor better than the Bayes rule),
    ``sigma > 0`` and ``gamma > 0``; each to :data:`LIMIT_SLACK`.

    Parameters
    ----------
    accuracy : float
        The solution's test accuracy.
    bayes : float
        The Bayes accuracy of its teacher (:func:`cgmt.bayes_accuracy`).
    sigma, gamma : float
        The solution's noise scale and prox step.

    Returns
    -------
    bool

    Examples
    --------
    >>> within_limits(0.81, 0.83, 0.5, 1.0), within_limits(0.84, 0.83, 0.5, 1.0)
    (True, False)
    """
    accuracy, bayes, sigma, gamma = (check_scalar(v, k, allow_nan=True) for k, v in
                                     dict(accuracy=accuracy, bayes=bayes, sigma=sigma, gamma=gamma).items())
    return bool(0.5 - LIMIT_SLACK <= accuracy <= bayes + LIMIT_SLACK and sigma > 0 and gamma > 0)


def outcome(r, status: int, nit: int, tol: float, *, limits=None) -> tuple[float, bool, int, str]:
    """The verdict of a Newton-type solve: (residual, success, status, message).

    Success is decided here and only here: max |r| <= tol, and the answer within its limits.  A solver status 0
    whose residual is above ``tol`` becomes 1 (iteration limit); a converged residual overrides any failure
    status; a converged answer outside its limits (:func:`within_limits`) is status 5.

    Parameters
    ----------
    r : array_like
        Final relative residuals.
    status : int
        The solver's status (a key of :data:`STATUS_MESSAGES`).
    nit : int
        Newton iterations, for the message.
    tol : float
        Largest max |r| accepted as converged.
    limits : bool, optional
        Whether the answer is within its limits (:func:`within_limits`); None: not checked.

    Returns
    -------
    residual : float
        max |r| (NaN propagates: a NaN residual is a failure).
    success : bool
        ``residual <= tol``.
    status : int
        0 on success; otherwise the solver's status, or 1 if the solver claimed 0.
    message : str
        :data:`STATUS_MESSAGES` [status] with the residual, ``tol`` and ``nit``.

    Examples
    --------
    >>> outcome([1e-12, -3e-12, 0.0], 2, 5, 1e-10)[1:3]
    (True, 0)
    >>> outcome([1e-3, 0.0, 0.0], 0, 100, 1e-10)[1:3]
    (False, 1)
    """
    res = float(np.max(np.abs(r)))
    success = bool(np.isfinite(res) and res <= tol)
    status = CONVERGED if success else (ITERATION_LIMIT if status == CONVERGED else int(status))
    if success and limits is False:
        success, status = False, OUT_OF_LIMITS
    message = STATUS_MESSAGES[status] + f" (max relative residual {res:.3e}, tol {tol:.1e}, {nit} Newton iterations)"
    return res, success, status, message
