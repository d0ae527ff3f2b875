"""The exact estimator of the theory, solved by the project's one exact solver.

beta_hat = argmin_beta (1/n) sum_i log(1 + exp(-y_i x_i' beta)) + lam / (2 p) ||beta||^2   (no intercept).

Multiplying the objective by p / lam gives C sum_i log(1 + exp(-y_i x_i' beta)) + ||beta||^2 / 2 with
C = p / (lam n) = 1 / (delta lam): the objective of ``empirical.logistic.fit_l2_logistic`` (and of
scikit-learn's ``LogisticRegression(C=1/(delta*lam), fit_intercept=False)``), which we call.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import OptimizeResult
from scipy.special import expit

from cgmt.validation import check_lam
from empirical.common.arrays import check_matrix, check_signed_labels, check_vector
from empirical.common.checks import check_bool, check_scalar
from empirical.common.failures import CONVERGED, ITERATION_LIMIT, quiet, report
from empirical.logistic import fit_l2_logistic  # the project's one exact solver


def _check_xy(X, y):
    X = check_matrix(X, "X")
    return X, check_signed_labels(y, X.shape[0], "y")


def check_fit_point(X, y, beta, lam) -> tuple:
    """``(X, y, beta, lam)`` checked: a finite design, labels in {-1, +1}, a finite ``beta`` of shape (p,) and
    ``lam >= 0`` in the theory's domain (:func:`cgmt.validation.check_lam`); ValueError naming the argument.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        Design.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    beta : ndarray of shape (p,)
        Coefficients.
    lam : float
        Ridge strength (0: the MLE).

    Returns
    -------
    tuple
        ``(X, y, beta, lam)`` as float64 arrays and a float.
    """
    X, y = _check_xy(X, y)
    beta = check_vector(beta, "beta", size=X.shape[1])
    return X, y, beta, check_lam(lam, allow_zero=True)


def objective_gradient(X, y, beta, lam) -> np.ndarray:
    """Gradient of (1/n) sum log(1 + exp(-y x'beta)) + lam/(2p) ||beta||^2 (the theory's objective).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The design.
    y : ndarray of shape (n,)
        Labels in {-1, +1} (not checked here).
    beta : ndarray of shape (p,)
        Where the gradient is taken.
    lam : float
        Ridge strength (theory convention).

    Returns
    -------
    ndarray of shape (p,)
        The gradient in beta.

    Examples
    --------
    >>> X, y = np.eye(2), np.array([1.0, -1.0])
    >>> objective_gradient(X, y, np.zeros(2), 0.1)
    array([-0.25,  0.25])
    """
    X, y, beta, lam = check_fit_point(X, y, beta, lam)
    n, p = X.shape
    margins = y * (X @ beta)
    return -(X.T @ (y * expit(-margins))) / n + (lam / p) * beta


def fit_ridge_logistic(X, y, lam, *, w0=None, tol: float = 1e-10, strict: bool = False) -> OptimizeResult:
    """Fit the theory's ridge-logistic estimator exactly (no intercept), y in {-1, +1}.

    Returns an ``OptimizeResult`` with ``coef`` (beta_hat, shape (p,)), ``z`` (= beta_hat / sqrt(p)),
    ``grad_norm`` (Euclidean norm of the gradient of the theory's objective (1/n) sum loss +
    lam/(2p)||beta||^2 at beta_hat), ``solver_grad_norm`` (the solver's own, on C sum loss + ||beta||^2/2,
    which is p/lam times the former), ``nit``, ``success`` (grad_norm <= tol), ``message``, ``C``.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        Training data (no intercept in the theory's model).
    y : ndarray of shape (n,)
        Labels in {-1, +1} (ValueError otherwise).
    lam : float > 0
        Ridge strength of (1/n) sum loss + lam/(2p) ||beta||^2 (the solver's C is p / (lam n)).
    w0 : ndarray (p,), optional
        Warm start.
    tol : float, default=1e-10
        Required ``grad_norm``.
    strict : bool, default=False
        Raise :class:`cgmt.ConvergenceError` when the fit fails; otherwise a failure warns
        :class:`cgmt.ConvergenceWarning` and the result has ``success=False``
        (:func:`empirical.common.failures.report`; callers that read ``success`` themselves wrap the call in
        :func:`empirical.common.failures.quiet`).

    Returns
    -------
    OptimizeResult
        The fields listed above, plus ``status`` (0 on success, else 1; the codes of
        :data:`empirical.common.failures.STATUS_MESSAGES`) and ``lam``.

    Examples
    --------
    >>> from sims import sample
    >>> data = sample(200, 50, 2.0, 0)
    >>> fit = fit_ridge_logistic(data.X, data.y, 0.1)
    >>> bool(fit.success), fit.z.shape
    (True, (50,))
    """
    X, y = _check_xy(X, y)
    lam = check_lam(lam)
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    n, p = X.shape
    C = p / (lam * n)  # = 1 / (delta lam)
    # The solver's tolerance is on its own gradient, p/lam times ours: ask for the stricter of both.
    solver_tol = min(tol, tol * p / lam)
    with quiet():  # this function decides success on its own gradient, and reports below
        res = fit_l2_logistic(X, y, C, fit_intercept=False, w0=w0, tol=solver_tol)
    beta = np.asarray(res.coef, dtype=float).ravel()
    gnorm = float(np.linalg.norm(objective_gradient(X, y, beta, lam)))
    if not gnorm <= tol and np.all(np.isfinite(beta)):
        # the solver's criterion is relative to max(1, ||beta||): polish once from its answer
        # (Newton is quadratically convergent there, so this costs one or two iterations)
        scale = max(1.0, float(np.linalg.norm(beta)))
        with quiet():
            res2 = fit_l2_logistic(X, y, C, fit_intercept=False, w0=beta, tol=solver_tol / scale * 1e-2)
        beta2 = np.asarray(res2.coef, dtype=float).ravel()
        g2 = float(np.linalg.norm(objective_gradient(X, y, beta2, lam)))
        if g2 < gnorm:
            res, beta, gnorm = res2, beta2, g2
    success = bool(np.all(np.isfinite(beta)) and gnorm <= tol)
    message = (f"converged: gradient norm {gnorm:.3g} <= {tol:.1g}" if success else
               f"not converged: gradient norm {gnorm:.3g} > {tol:.1g} after {res.nit} iterations "
               f"(solver: {getattr(res, 'message', '')})")
    result = OptimizeResult(coef=beta, z=beta / np.sqrt(p), grad_norm=gnorm,
                            solver_grad_norm=float(getattr(res, "grad_norm", np.nan)),
                            nit=int(getattr(res, "nit", -1)), success=success,
                            status=CONVERGED if success else ITERATION_LIMIT,
                            message=message, C=C, lam=lam)
    return report(result, check_bool(strict, "strict"), "sims.fit_ridge_logistic", n=n, p=p, lam=lam)
