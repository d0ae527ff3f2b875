"""Exact Newton solver for L2-regularized (ridge) logistic regression.

Objective (scikit-learn convention, intercept unpenalized)::

    f(w, b) = C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 * ||w||_2^2,   y_i in {-1, +1}

Default method (``method="auto"``): Newton's method whose linear systems are solved inexactly by
conjugate gradients (:func:`empirical.logistic._pcg.newton_pcg`, the project's one Newton-CG implementation),
in up to three stages, each continuing from the previous iterate:

1. matrix-free, Jacobi-preconditioned CG on X itself (O(np) per CG step, no factorization), while CG
   converges within a fixed number of iterations (well-conditioned Hessians);
2. otherwise CG preconditioned with a stale Cholesky factor of an earlier Hessian, on the
   row-span-reduced design when n < p (refactored only when CG needs many iterations);
3. if that has not converged after 30 Newton steps, direct Newton as below.

Convergence is always decided on the float64 gradient, so the answer meets the same ``tol`` as direct
Newton; only the search directions are inexact.  Direct Newton (``method="primal"`` or ``"dual"``)
uses one of two equivalent formulations:

* primal (n >= p): Newton on (w, b) with a Cholesky factorization of the (p+1)-dimensional Hessian;
* dual / Gram form (n < p): the solution lies in the span of the training rows, ``w = X' alpha``,
  and each Newton system is solved in n dimensions through the Woodbury identity with the Gram
  matrix ``K = X X'`` (formed once).

Both use a backtracking (Armijo) line search, so they converge from any start, including on
linearly separable data (the ridge term keeps the minimizer finite).

Convergence measure (``grad_norm``): the Euclidean norm of the full gradient of ``f`` with respect to
``(w, b)`` divided by ``max(1, ||w||_2)``.  Because ``f`` restricted to ``w`` (with ``b`` profiled out)
is 1-strongly convex, ``||w - w*||_2 <= ||grad_w f||_2`` when ``b`` is optimal for ``w``; the
reported ``grad_norm`` is therefore (up to the intercept coupling) a bound on the *relative* error
of ``w`` when ``||w|| >= 1`` and on the absolute error otherwise.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.optimize import OptimizeResult

from empirical.common.checks import check_choice, check_scalar
from empirical.common.failures import CONVERGED, ITERATION_LIMIT, STATUS_MESSAGES, is_success, quiet, report

from ..common.arrays import check_matrix, check_signed_labels, check_vector
from ._design import reduce_design
from ._newton import check_problem, direct_newton, dual_inverse, dual_start, loss_terms, newton_dual, principal_solver
from ._pcg import PathContext, newton_pcg

__all__ = ["fit_l2_logistic", "fit_l2_logistic_rows", "logistic_objective"]


def logistic_objective(X, y, C, w, b=0.0) -> float:
    """Value of ``C * sum log(1 + exp(-y (X w + b))) + 0.5 ||w||^2`` (y in {-1, +1}).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The design.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float
        Weight of the summed loss (C = 1/lambda for sum loss + lambda/2 ||w||^2).
    w : ndarray of shape (p,)
        The coefficients.
    b : float, default=0.0
        The intercept (not penalised).

    Returns
    -------
    float
        The objective value.

    Examples
    --------
    >>> round(logistic_objective(np.eye(2), np.array([1.0, -1.0]), 1.0, np.zeros(2)), 6)
    1.386294
    """
    X = check_matrix(X, "X")
    y = check_signed_labels(y, X.shape[0], "y")
    C = check_scalar(C, "C", low=0.0)
    b = check_scalar(b, "b")
    w = check_vector(w, "w", size=X.shape[1])
    m = y * (X @ w + b)
    return float(C * np.logaddexp(0.0, -m).sum() + 0.5 * w @ w)


def _result(w, b, nit, gnorm, status, fun):
    return OptimizeResult(coef=w, intercept=float(b), x=np.concatenate([w, [b]]), fun=fun, nit=int(nit),
                          grad_norm=float(gnorm), success=is_success(status), status=int(status),
                          message=f"{STATUS_MESSAGES[status]}; grad_norm={gnorm:.3e}, nit={nit}")


_PCG_MAX_ITER = 30  # Newton-PCG steps before falling back to direct Newton (it needs < 15 in practice)


def _fit_pcg(X, y, C, w0, b0, fit_intercept, tol, max_iter):
    """Newton-CG (:func:`empirical.logistic._pcg.newton_pcg`): matrix-free first, then with a stale
    Cholesky preconditioner on the reduced design.

    Returns (w, b, nit, gnorm, status, f); status 0 converged, 1 not (yet) converged."""
    # 1. matrix-free Newton-CG on X itself (O(np) per CG step, no factorization): enough when the
    #    Hessian is well conditioned; stops (status 4) as soon as CG needs too many iterations
    ctx = PathContext(X)
    # (polish: one step past tol, as the refit's; an inexact last step only just crosses it, which leaves small
    # coefficients ~tol / ||w|| from the minimizer)
    res = newton_pcg(ctx, y, C, np.zeros(X.shape[1]) if w0 is None else w0.copy(), b0,
                     fit_intercept=fit_intercept, tol=tol, max_iter=max_iter, matrix_free=True, factor=False, polish=1)
    nit0 = res.nit
    if res.status == CONVERGED or nit0 >= max_iter:
        f = float(C * np.logaddexp(0.0, -y * res.logits).sum() + 0.5 * res.coef @ res.coef)
        status = CONVERGED if res.status == CONVERGED else ITERATION_LIMIT
        return res.coef, res.intercept, nit0, res.grad_norm, status, f
    if nit0 > 0:
        w0, b0 = res.coef, res.intercept
    del ctx
    # 2. Newton with a stale-Cholesky preconditioner, on the row-span-reduced design when n < p
    design = reduce_design(X)
    if w0 is None:
        a = np.zeros(design.rank)
    elif not design.reduced:
        a = w0.copy()
    else:  # least-squares projection of w0 onto the row span (the minimizer lies there)
        a = design.project(X @ w0)
    ctx = PathContext.from_design(design, validation=False)
    res = newton_pcg(ctx, y, C, a, b0, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter - nit0,
                     polish=int(not res.grad_norm <= tol))  # (no second extra step after the first stage's)
    f = float(C * np.logaddexp(0.0, -y * res.logits).sum() + 0.5 * res.coef @ res.coef)
    status = CONVERGED if res.status == CONVERGED else ITERATION_LIMIT
    return design.back(res.coef), res.intercept, nit0 + res.nit, res.grad_norm, status, f


def fit_l2_logistic(X, y, C, *, fit_intercept=False, w0=None, b0=0.0, tol=1e-10, max_iter=100,
                    method="auto", strict=False) -> OptimizeResult:
    """Minimize ``C * sum_i log(1 + exp(-y_i (x_i'w + b))) + 0.5 ||w||^2`` exactly by Newton's method.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The design (finite; checked by :func:`empirical.common.arrays.check_matrix`).
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float
        Weight of the summed loss, finite and > 0 (C = 1/lambda for sum loss + lambda/2 ||w||^2; the theory's
        per-sample convention (1/n) sum loss + lam/(2p) ||w||^2 has C = p / (lam n), see :mod:`sims._fit`).
    fit_intercept : bool, default=False
        Fit an unpenalized intercept ``b`` (False: b = 0).
    w0 : ndarray of shape (p,), optional
        Warm start for ``w``.  When n < p the preconditioned stage of ``method="auto"`` works in the row span
        of X and projects its start onto it (the minimizer lies there, so the projection only moves the
        start closer to it).
    b0 : float, default=0.0
        Warm start for ``b`` (ignored without intercept).
    tol : float, default=1e-10
        Stop when ``||grad f(w, b)||_2 / max(1, ||w||_2) <= tol`` (see module docstring).  ``method="auto"``'s
        Newton-CG takes one more step once it is met (its inexact last step only just crosses ``tol``, which leaves
        small coefficients ~``tol / ||w||`` from the minimizer); the direct methods' exact last step lands far inside.
    max_iter : int, default=100
        Maximum number of Newton iterations over all stages.
    method : {"auto", "primal", "dual", "direct"}, default="auto"
        "auto" (the default and fastest: Newton whose systems are solved by conjugate gradients, matrix-free
        first, then preconditioned with a reused Cholesky factor of an earlier Hessian on the row-span-reduced
        design when n < p, see :func:`empirical.logistic._pcg.newton_pcg`; falls back to direct Newton if it
        has not converged after 30 steps), or direct Newton with a fresh factorization every step: "primal"
        ((p+1)-dimensional Hessian), "dual" (Woodbury with the Gram matrix) or "direct" (primal when
        n >= p, dual otherwise; the independent reference the path solver's tests compare against).
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` when the solve fails; otherwise that failure warns
        :class:`~empirical.common.failures.ConvergenceWarning` and the result has ``success=False`` (the one failure
        convention, :func:`empirical.common.failures.report`).

    Returns
    -------
    scipy.optimize.OptimizeResult
        With ``coef`` (p,), ``intercept`` (float; 0.0 without intercept), ``x`` (coef and intercept
        concatenated), ``fun`` (the objective), ``nit``, ``grad_norm``, ``success``, ``status`` (0 converged,
        1 max_iter reached, 2 round-off floor reached before tol; the project's
        :data:`empirical.common.failures.STATUS_MESSAGES`) and ``message``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((50, 4))
    >>> y = np.where(X[:, 0] + 0.5 * rng.standard_normal(50) > 0, 1.0, -1.0)
    >>> res = fit_l2_logistic(X, y, 1.0, fit_intercept=True)
    >>> res.success, bool(res.grad_norm <= 1e-10), res.coef.shape
    (True, True, (4,))
    """
    X, y, C, tol, max_iter, w0, b0 = check_problem(X, y, C, tol, max_iter, w0, b0)
    n, p = X.shape
    method = check_choice(method, "method", ("auto", "primal", "dual", "direct"))
    b0 = b0 if fit_intercept else 0.0
    nit0 = 0
    if method == "auto":
        try:
            w, b, nit0, gnorm, status, f = _fit_pcg(X, y, C, w0, b0, fit_intercept, tol, min(max_iter, _PCG_MAX_ITER))
        except linalg.LinAlgError:
            w, b, status = w0, b0, ITERATION_LIMIT
        else:
            if status == CONVERGED or nit0 >= max_iter:
                return report(_result(w, b, nit0, gnorm, status, f), strict, "empirical.fit_l2_logistic", C=C)
        w0, b0 = w, b  # not converged: finish with direct Newton from the PCG iterate
    form = {"primal": "primal", "dual": "dual"}.get(method)
    w, b, nit, gnorm, status, f = direct_newton(X, y, C, w0, b0, fit_intercept=fit_intercept, tol=tol,
                                                max_iter=max_iter - nit0, form=form)
    return report(_result(w, b, nit + nit0, gnorm, status, f), strict, "empirical.fit_l2_logistic", C=C)


def _fit_rows_dual(X, y, C, K, z0, b0, fit_intercept, tol, max_iter, solve=None):
    """Dual Newton on one subset (rows ``X``, Gram block ``K``) from the start with logits ``z0 + b0``
    (``solve``: the start's ``M^-1``, see :func:`empirical.logistic._newton.dual_start`); the answer is
    checked on the primal gradient.  Returns the result, or None if it misses ``tol``."""
    n = len(y)
    try:
        a, b = dual_start(K, y, C, z0, b0, fit_intercept, solve=solve)
        Ka = K @ a
        f = C * np.logaddexp(0.0, -y * (Ka + b)).sum() + 0.5 * a @ Ka
        if not f <= C * n * np.log(2.0):  # worse than w = 0 (or not finite): start from zero instead
            a, b = np.zeros(n), 0.0
        a, b, nit, _, status, _ = newton_dual(K, y, C, a, b, fit_intercept, tol, max_iter - 1)
    except linalg.LinAlgError:
        return None
    # the convergence test of fit_l2_logistic, on the primal gradient in the original coordinates
    w = X.T @ a
    z = X @ w + b
    loss, r, _ = loss_terms(z, y)
    gw = w + C * (X.T @ r)
    gb = C * r.sum() if fit_intercept else 0.0
    wnorm2 = w @ w
    gnorm = np.sqrt(gw @ gw + gb * gb) / max(1.0, np.sqrt(wnorm2))
    if status is not None or not gnorm <= tol:
        return None
    return _result(w, b, nit + 1, gnorm, 0, float(C * loss + 0.5 * wnorm2))


def fit_l2_logistic_rows(X, y, C, rows, *, gram=None, fit_intercept=True, tol=1e-10, max_iter=100,
                         strict=False) -> list:
    """Fit :func:`fit_l2_logistic`'s problem on many row subsets of one design, sharing its Gram matrix.

    For a subset of ``m < p`` rows the minimizer is ``w = X[rows]' a`` (it lies in the row span), so
    Newton runs on ``a`` with the subset's block of the Gram matrix ``G = X X'``, computed once for all
    subsets: a step costs one m x m Cholesky factorization instead of O(m p^2), whatever the rank of the
    block.  With four or more such subsets, each starts with the full Newton step from one loose fit on
    all ``n`` rows (``C`` scaled by ``m / n``); that step lands in the subset's row span without a
    projection, and its system is a principal block of one ``n x n`` matrix whose inverse serves every
    subset (a Schur complement of the ``n - m`` left-out rows instead of a factorization).  Used by
    :class:`empirical.probes.GCSProbe`, whose probes are fits on random subsets of the same training
    rows.  Each answer is accepted only if its gradient in the original coordinates, computed from
    ``X[rows]``, meets ``tol`` (the convergence test of :func:`fit_l2_logistic`); subsets with ``m >= p``
    rows, and any subset that misses ``tol``, are solved by :func:`fit_l2_logistic` from scratch.  So
    every result solves the same objective to the same tolerance as :func:`fit_l2_logistic` on
    ``X[rows]``; only the path to it differs.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The design every subset is taken from.
    y : ndarray of shape (n,)
        Its labels in {-1, +1}.
    C : float
        Weight of the summed loss (> 0), the same for every subset, as in :func:`fit_l2_logistic`.
    rows : sequence of integer index arrays
        The subsets (each non-empty, indices in [0, n)).
    gram : ndarray of shape (n, n), optional
        ``X @ X.T`` if the caller has it.
    fit_intercept : bool, default=True
        As in :func:`fit_l2_logistic` (note the different default).
    tol, max_iter
        As in :func:`fit_l2_logistic`.
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` at the first subset whose fit failed; otherwise
        each failed subset warns :class:`~empirical.common.failures.ConvergenceWarning` and its result has
        ``success=False``.

    Returns
    -------
    list of scipy.optimize.OptimizeResult
        One per subset, in order, as :func:`fit_l2_logistic` returns them.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((40, 60))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> subsets = [rng.choice(40, 30, replace=False) for _ in range(3)]
    >>> fast = fit_l2_logistic_rows(X, y, 1.0, subsets)
    >>> slow = fit_l2_logistic(X[subsets[0]], y[subsets[0]], 1.0, fit_intercept=True)
    >>> bool(np.allclose(fast[0].coef, slow.coef, atol=1e-8)), fast[0].success
    (True, True)
    """
    X, y, C, tol, max_iter, _, _ = check_problem(X, y, C, tol, max_iter)
    n, p = X.shape
    subsets = [np.asarray(r, dtype=np.intp) for r in rows]
    for r in subsets:
        if r.ndim != 1 or r.size < 1 or r.min() < 0 or r.max() >= n:
            raise ValueError(f"rows must hold non-empty 1-d arrays of row indices in [0, {n}), got {r!r:.60}")
    small = [len(r) for r in subsets if len(r) < p]
    z_ref, b_ref, Minv = np.zeros(n), 0.0, None
    if small:
        if gram is None:
            gram = X @ X.T
        m = float(np.median(small))
    if len(small) >= 4:
        # shared start: a loose fit on all rows (C scaled to the subsets' share of the loss terms); it
        # costs about two subset fits and saves about a third of each (measured at 480 of 600 rows)
        with quiet():  # a start, used only where finite
            ref = fit_l2_logistic(X, y, C * m / n, fit_intercept=fit_intercept, tol=1e-4, max_iter=max_iter)
        if np.all(np.isfinite(ref.coef)) and np.isfinite(ref.intercept):
            z_ref, b_ref = X @ ref.coef, ref.intercept
        # every subset's first Newton system is then a principal block of M = I + C D^1/2 G D^1/2 at the
        # reference curvatures: one inverse of M (~n^3 flops) serves them all when it costs less than
        # factoring each block (~m^3 / 3)
        if len(small) * m**3 > 3 * n**3:
            Minv = dual_inverse(gram, loss_terms(z_ref + b_ref, y)[2], C)
    results = []
    for r in subsets:
        res = None
        if len(r) < p:
            solve = principal_solver(Minv, r) if Minv is not None and len(np.unique(r)) == len(r) else None
            K = np.take(np.take(gram, r, axis=0), r, axis=1)
            res = _fit_rows_dual(X[r], y[r], C, K, z_ref[r], b_ref, fit_intercept, tol, max_iter, solve)
        if res is None:
            with quiet():  # reported below, with the subset's index
                res = fit_l2_logistic(X[r], y[r], C, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter)
        results.append(res)
    for i, res in enumerate(results):
        report(res, strict, "empirical.logistic.fit_l2_logistic_rows", subset=i, C=C)
    return results
