"""Exact Newton solver for L2-regularized (ridge) logistic regression.

Objective (scikit-learn convention, intercept unpenalized)::

    f(w, b) = C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 * ||w||_2^2,   y_i in {-1, +1}

Default method (``method="auto"``): Newton's method whose linear systems are solved inexactly by
conjugate gradients (:func:`empirical.path.newton_pcg`, the project's one Newton-CG implementation),
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
from scipy.special import expit

__all__ = ["fit_l2_logistic", "logistic_objective"]

_ARMIJO = 1e-4


def logistic_objective(X, y, C, w, b=0.0):
    """Value of ``C * sum log(1 + exp(-y (X w + b))) + 0.5 ||w||^2`` (y in {-1, +1})."""
    m = y * (X @ w + b)
    return float(C * np.logaddexp(0.0, -m).sum() + 0.5 * w @ w)


def _check_inputs(X, y, C, tol, max_iter):
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n_samples, n_features); got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must be 1-D with len(y) == X.shape[0] == {X.shape[0]}; got shape {y.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be non-empty; got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite values")
    if not np.all((y == 1.0) | (y == -1.0)):
        raise ValueError("y must contain only -1 and +1")
    if not (np.isfinite(C) and C > 0):
        raise ValueError(f"C must be a finite positive number; got {C!r}")
    if not (tol > 0):
        raise ValueError(f"tol must be positive; got {tol!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1; got {max_iter!r}")
    return X, y


def _loss_terms(z, y):
    """Return loss sum, dl/dz (= r) and d2l/dz2 (= d) for train logits z."""
    m = y * z
    s = expit(-m)  # sigma(-m)
    loss = np.logaddexp(0.0, -m).sum()
    r = -y * s
    d = s * (1.0 - s)
    return loss, r, d


def _result(w, b, nit, gnorm, tol, msg_extra="", status=None, fun=None):
    if status is None:
        status = 0 if gnorm <= tol else 1
    msgs = {
        0: "converged: relative gradient norm <= tol",
        1: "maximum number of Newton iterations reached",
        2: "line search could not decrease the objective (round-off floor reached)",
    }
    return OptimizeResult(
        coef=w,
        intercept=float(b),
        x=np.concatenate([w, [b]]),
        fun=fun,
        nit=int(nit),
        grad_norm=float(gnorm),
        success=bool(status == 0),
        status=int(status),
        message=msgs[status] + (f" ({msg_extra})" if msg_extra else "") + f"; grad_norm={gnorm:.3e}, nit={nit}",
    )


def _newton_primal(X, y, C, w, b, fit_intercept, tol, max_iter):
    n, p = X.shape
    z = X @ w + b
    loss, r, d = _loss_terms(z, y)
    f = C * loss + 0.5 * w @ w
    nit = 0
    status = None
    while True:
        gw = w + C * (X.T @ r)
        gb = C * r.sum() if fit_intercept else 0.0
        gnorm = np.sqrt(gw @ gw + gb * gb) / max(1.0, np.sqrt(w @ w))
        if gnorm <= tol or nit >= max_iter:
            break
        Xd = X * d[:, None]
        H = C * (X.T @ Xd)
        H[np.diag_indices_from(H)] += 1.0
        if fit_intercept:
            h = C * Xd.sum(axis=0)
            hbb = C * d.sum()
            Hfull = np.empty((p + 1, p + 1))
            Hfull[:p, :p] = H
            Hfull[:p, p] = h
            Hfull[p, :p] = h
            Hfull[p, p] = hbb + 1e-300
            g = np.concatenate([gw, [gb]])
        else:
            Hfull, g = H, gw
        try:
            step = linalg.cho_solve(linalg.cho_factor(Hfull, check_finite=False), g, check_finite=False)
        except linalg.LinAlgError:
            # intercept direction numerically flat (separable data, tiny curvature): regularize it
            Hfull[np.diag_indices_from(Hfull)] += 1e-12 * np.abs(np.diag(Hfull)).max()
            step = linalg.lstsq(Hfull, g, check_finite=False)[0]
        dw = step[:p]
        db = step[p] if fit_intercept else 0.0
        dz = X @ dw + db
        slope = -(g @ step)
        t = 1.0
        accepted = False
        for _ in range(60):
            w_new = w - t * dw
            z_new = z - t * dz
            loss_new, r_new, d_new = _loss_terms(z_new, y)
            f_new = C * loss_new + 0.5 * w_new @ w_new
            if f_new <= f + _ARMIJO * t * slope:
                accepted = True
            elif f_new - f <= 1e-14 * max(1.0, abs(f)):
                # objective differences at round-off level: accept if the gradient shrinks
                gw_new = w_new + C * (X.T @ r_new)
                gb_new = C * r_new.sum() if fit_intercept else 0.0
                accepted = np.sqrt(gw_new @ gw_new + gb_new**2) < np.sqrt(g @ g)
            if accepted:
                break
            t *= 0.5
        nit += 1
        if not accepted:
            status = 2
            break
        w, b, z, f, r, d = w_new, b - t * db, z_new, f_new, r_new, d_new
    return _result(w, b, nit, gnorm, tol, status=status, fun=f)


def _woodbury_T(K, c, sqd, C, cho):
    """T(c) = c - C D^1/2 M^-1 D^1/2 K c with M = I + C D^1/2 K D^1/2 (so H_ww^-1 X'c = X' T(c))."""
    Kc = K @ c
    return c - C * sqd * linalg.cho_solve(cho, sqd * Kc, check_finite=False)


def newton_dual(K, y, C, alpha, b, fit_intercept=True, tol=1e-10, max_iter=100):
    """Newton on ``w = X' alpha`` given the Gram matrix ``K = X X'``; returns (alpha, b, nit, gnorm, status, f).

    ``gnorm`` uses the same scaling as :func:`fit_l2_logistic` (``||w||^2 = alpha' K alpha``).
    """
    n = K.shape[0]
    Ka = K @ alpha
    z = Ka + b
    loss, r, d = _loss_terms(z, y)
    f = C * loss + 0.5 * alpha @ Ka
    nit = 0
    status = None
    while True:
        gamma = alpha + C * r  # grad_w = X' gamma
        Kg = K @ gamma
        gb = C * r.sum() if fit_intercept else 0.0
        wnorm2 = max(alpha @ Ka, 0.0)
        gnorm = np.sqrt(max(gamma @ Kg, 0.0) + gb * gb) / max(1.0, np.sqrt(wnorm2))
        if gnorm <= tol or nit >= max_iter:
            break
        sqd = np.sqrt(d)
        M = C * (sqd[:, None] * K * sqd[None, :])
        M[np.diag_indices(n)] += 1.0
        cho = linalg.cho_factor(M, check_finite=False)
        t1 = gamma - C * sqd * linalg.cho_solve(cho, sqd * Kg, check_finite=False)
        if fit_intercept:
            cd = C * d
            t2 = _woodbury_T(K, cd, sqd, C, cho)
            Kt2 = K @ t2
            s = C * d.sum() - cd @ Kt2
            num = gb - cd @ (K @ t1)
            db = num / s if s > 1e-300 else 0.0
            beta = t1 - t2 * db
        else:
            db = 0.0
            beta = t1
        Kb = K @ beta
        dz = Kb + db
        g_dot_step = gamma @ Kb + gb * db  # <grad, step> in (w, b) coordinates
        slope = -g_dot_step
        t = 1.0
        accepted = False
        for _ in range(60):
            a_new = alpha - t * beta
            Ka_new = Ka - t * Kb
            z_new = z - t * dz
            loss_new, r_new, d_new = _loss_terms(z_new, y)
            f_new = C * loss_new + 0.5 * a_new @ Ka_new
            if f_new <= f + _ARMIJO * t * slope:
                accepted = True
            elif f_new - f <= 1e-14 * max(1.0, abs(f)):
                gam_new = a_new + C * r_new
                gb_new = C * r_new.sum() if fit_intercept else 0.0
                accepted = (gam_new @ (K @ gam_new) + gb_new**2) < (gamma @ Kg + gb * gb)
            if accepted:
                break
            t *= 0.5
        nit += 1
        if not accepted:
            status = 2
            break
        alpha, Ka, b, z, f, r, d = a_new, Ka_new, b - t * db, z_new, f_new, r_new, d_new
    return alpha, b, nit, gnorm, status, f


_PCG_MAX_ITER = 30  # Newton-PCG steps before falling back to direct Newton (it needs < 15 in practice)


def _fit_pcg(X, y, C, w0, b0, fit_intercept, tol, max_iter):
    """Newton-CG (:func:`empirical.path.newton_pcg`): matrix-free first, then with a stale Cholesky
    preconditioner on the reduced design.

    Returns (w, b, nit, gnorm, status, f); status 0 converged, 1 not (yet) converged."""
    from .path import PathContext, newton_pcg, reduce_design  # path imports this module

    # 1. matrix-free Newton-CG on X itself (O(np) per CG step, no factorization): enough when the
    #    Hessian is well conditioned; stops (status 4) as soon as CG needs too many iterations
    ctx = PathContext(X)
    res = newton_pcg(ctx, y, C, np.zeros(X.shape[1]) if w0 is None else w0.copy(), b0,
                     fit_intercept=fit_intercept, tol=tol, max_iter=max_iter, matrix_free=True, factor=False)
    nit0 = res.nit
    if res.status == 0 or nit0 >= max_iter:
        f = float(C * np.logaddexp(0.0, -y * res.logits).sum() + 0.5 * res.coef @ res.coef)
        return res.coef, res.intercept, nit0, res.grad_norm, (0 if res.status == 0 else 1), f
    if nit0 > 0:
        w0, b0 = res.coef, res.intercept
    del ctx
    # 2. Newton with a stale-Cholesky preconditioner, on the row-span-reduced design when n < p
    design = reduce_design(X)
    if w0 is None:
        a = np.zeros(design.rank)
    elif design.K is None:
        a = w0.copy()
    else:  # least-squares projection of w0 onto the row span (the minimizer lies there)
        a = design.project(X @ w0)
    ctx = PathContext(design.Z)
    res = newton_pcg(ctx, y, C, a, b0, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter - nit0)
    f = float(C * np.logaddexp(0.0, -y * res.logits).sum() + 0.5 * res.coef @ res.coef)
    return design.back(res.coef), res.intercept, nit0 + res.nit, res.grad_norm, (0 if res.status == 0 else 1), f


def fit_l2_logistic(X, y, C, *, fit_intercept=False, w0=None, b0=0.0, tol=1e-10, max_iter=100, method="auto"):
    """Minimize ``C * sum_i log(1 + exp(-y_i (x_i'w + b))) + 0.5 ||w||^2`` exactly by Newton's method.

    Parameters
    ----------
    X : (n, p) array; y : (n,) array with values in {-1, +1}; C : float > 0 (C = 1/lambda).
    fit_intercept : fit an unpenalized intercept ``b`` (default False: b = 0).
    w0, b0 : optional warm start.  When n < p ``w0`` is projected onto the row span of X
        (the minimizer lies there, so the projection only moves the start closer to it).
    tol : stop when ``||grad f(w, b)||_2 / max(1, ||w||_2) <= tol`` (see module docstring).
    max_iter : maximum number of Newton iterations.
    method : "auto" (the default and fastest: Newton whose systems are solved by conjugate gradients
        preconditioned with a reused Cholesky factor of an earlier Hessian, on the row-span-reduced design
        when n < p, see :func:`empirical.path.newton_pcg`; falls back to direct Newton if it has not
        converged after 30 steps), or direct Newton with a fresh factorization every step: "primal"
        ((p+1)-dimensional Hessian), "dual" (Woodbury with the Gram matrix) or "direct" (primal when
        n >= p, dual otherwise; the independent reference the path solver's tests compare against).

    Returns
    -------
    scipy.optimize.OptimizeResult with ``coef`` (p,), ``intercept`` (float; 0.0 without intercept),
    ``x`` (coef and intercept concatenated), ``fun``, ``nit``, ``grad_norm``, ``success``, ``status``
    (0 converged, 1 max_iter reached, 2 round-off floor reached before tol) and ``message``.
    """
    X, y = _check_inputs(X, y, C, tol, max_iter)
    n, p = X.shape
    if method not in ("auto", "primal", "dual", "direct"):
        raise ValueError(f"method must be 'auto', 'primal', 'dual' or 'direct'; got {method!r}")
    if method == "direct":
        method = "primal" if n >= p else "dual"
    if w0 is not None:
        w0 = np.asarray(w0, dtype=np.float64)
        if w0.shape != (p,) or not np.all(np.isfinite(w0)):
            raise ValueError(f"w0 must be a finite array of shape ({p},); got shape {w0.shape}")
    b0 = float(b0) if fit_intercept else 0.0
    C = float(C)
    max_iter = int(max_iter)
    nit0 = 0
    if method == "auto":
        try:
            w, b, nit0, gnorm, status, f = _fit_pcg(X, y, C, w0, b0, fit_intercept, tol, min(max_iter, _PCG_MAX_ITER))
        except linalg.LinAlgError:
            w, b, status = w0, b0, 1
        else:
            if status == 0 or nit0 >= max_iter:
                return _result(w, b, nit0, gnorm, tol, status=status, fun=f)
        w0, b0 = w, b  # not converged: finish with direct Newton from the PCG iterate
    use_dual = method == "dual" or (method == "auto" and n < p)
    if not use_dual:
        w = np.zeros(p) if w0 is None else w0.copy()
        res = _newton_primal(X, y, C, w, b0, fit_intercept, tol, max_iter - nit0)
        res.nit += nit0
        return res
    K = X @ X.T
    if w0 is None:
        alpha = np.zeros(n)
    else:  # least-squares projection of w0 onto the row span
        Kr = K + (1e-12 * max(np.trace(K) / n, 1e-300)) * np.eye(n)
        alpha = linalg.cho_solve(linalg.cho_factor(Kr, check_finite=False), X @ w0, check_finite=False)
    alpha, b, nit, gnorm, status, f = newton_dual(K, y, C, alpha, b0, fit_intercept, tol, max_iter - nit0)
    return _result(X.T @ alpha, b, nit + nit0, gnorm, tol, status=status, fun=f)
