"""The direct Newton methods of the ridge-logistic solver, and what every solver of the family shares.

Problem (scikit-learn convention, intercept unpenalized, y in {-1, +1})::

    min_{w, b}  C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 ||w||^2

- :func:`direct_newton`: Newton with a fresh factorization every step and a backtracking (Armijo)
  line search: primal ((p+1)-dimensional Hessian) or dual (Woodbury identity with the Gram matrix
  ``K = X X'``, n dimensions).  Slow but simple: the reference the fast paths are tested against.
  Its dual step (:func:`_dual_direction`) also drives :func:`empirical.logistic.fit_l2_logistic_rows`,
  with a start step from a point outside the row span (:func:`dual_start`) whose system may come
  from a shared inverse (:func:`principal_solver`); those fits are tested against the primal solvers.
- shared by every solver of the family: the loss terms (:func:`loss_terms`) and the Armijo rule
  (:func:`armijo_backtrack`); the statuses are the project's one table
  (:data:`empirical.common.failures.STATUS_MESSAGES`).

The fast path's kernel, Newton with preconditioned conjugate gradients (:func:`empirical.logistic._pcg.newton_pcg`),
is in :mod:`empirical.logistic._pcg`.  Every solver of the family reports a ``status`` from
:data:`empirical.common.failures.STATUS_MESSAGES`.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from scipy.special import expit

from empirical.common.checks import check_int, check_scalar
from empirical.common.failures import CONVERGED, ITERATION_LIMIT, NO_PROGRESS

from ..common.arrays import C_MAX, C_MIN, TOL_MAX, check_matrix, check_signed_labels, check_vector

#: The API: the independent reference solver.  The other functions (``loss_terms``,
#: ``armijo_backtrack``, ``newton_dual``, ``dual_start``, ``dual_inverse``, ``principal_solver``) are the kernels
#: of the solvers' inner loops: they take inputs their callers checked (:func:`check_problem`) and are not API.
__all__ = ["direct_newton", "check_problem", "check_solver", "MAX_ITER"]

#: Most Newton iterations a solver of this family accepts (each is a factorization; 100 is the default).
MAX_ITER = 100_000

#: sufficient-decrease constant of the Armijo rule, and the step lengths a backtracking tries (1, 1/2, ...; every
#: solver of the family: :func:`armijo_backtrack`, :func:`empirical.logistic._pcg.newton_pcg`, the batched engine)
ARMIJO, HALVINGS = 1e-4, 60


def loss_terms(z, y):
    """Return loss sum, dl/dz (= r) and d2l/dz2 (= d) for train logits z.

    Parameters
    ----------
    z : ndarray (n,)
        Training logits ``x_i' w + b``.
    y : ndarray (n,)
        Labels in {-1, +1}.

    Returns
    -------
    loss : float
        ``sum_i log(1 + exp(-y_i z_i))``, not multiplied by C.
    r : ndarray (n,)
        First derivatives of each row's loss in its logit, ``-y_i sigmoid(-y_i z_i)``.
    d : ndarray (n,)
        Second derivatives (curvatures), ``sigmoid(-y_i z_i) (1 - sigmoid(-y_i z_i))``, in (0, 1/4].
    """
    m = y * z
    s = expit(-m)  # sigma(-m)
    loss = np.logaddexp(0.0, -m).sum()
    r = -y * s
    d = s * (1.0 - s)
    return loss, r, d


def armijo_backtrack(f, slope, trial, grad_norm2, max_halvings=HALVINGS):
    """Backtracking (Armijo) line search shared by the direct Newton methods.

    ``trial(t)`` returns ``(f_new, state, grad_norm2_new)`` at step length ``t`` (``grad_norm2_new`` a
    callable, evaluated only when needed).  A step is accepted on sufficient decrease
    ``f_new <= f + ARMIJO t slope`` or, when objective differences are at round-off level, if the squared
    gradient norm shrinks below ``grad_norm2``.  Returns ``(t, state)``, or ``(None, None)`` when no
    step of the ``max_halvings`` halvings is accepted.

    Parameters
    ----------
    f : float
        Objective value at the current point (step length 0).
    slope : float
        Directional derivative of the objective along the step at t = 0 (negative for a descent direction).
    trial : callable
        ``t -> (f_new, state, grad_norm2_new)`` as above; ``state`` is handed back for the accepted step.
    grad_norm2 : float
        Squared gradient norm at the current point (the round-off fallback's reference).
    max_halvings : int
        Step lengths tried: 1, 1/2, 1/4, ... (``max_halvings`` of them).

    Returns
    -------
    t : float or None
        The accepted step length, None when none was accepted.
    state : object or None
        The ``state`` that ``trial(t)`` returned for it.
    """
    t = 1.0
    for _ in range(max_halvings):
        f_new, state, grad_norm2_new = trial(t)
        if f_new <= f + ARMIJO * t * slope:
            return t, state
        if f_new - f <= 1e-14 * max(1.0, abs(f)) and grad_norm2_new() < grad_norm2:
            return t, state
        t *= 0.5
    return None, None


def _newton_primal(X, y, C, w, b, fit_intercept, tol, max_iter):
    """Direct Newton on (w, b) with a Cholesky factorization of the (p+1)-dimensional Hessian."""
    n, p = X.shape
    z = X @ w + b
    loss, r, d = loss_terms(z, y)
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

        def trial(t, w=w, z=z, dw=dw, dz=dz):
            w_new, z_new = w - t * dw, z - t * dz
            loss_new, r_new, d_new = loss_terms(z_new, y)

            def grad_norm2():  # objective differences at round-off level: does the gradient shrink?
                gw_new = w_new + C * (X.T @ r_new)
                gb_new = C * r_new.sum() if fit_intercept else 0.0
                return gw_new @ gw_new + gb_new**2

            f_new = C * loss_new + 0.5 * w_new @ w_new
            return f_new, (w_new, z_new, r_new, d_new, f_new), grad_norm2

        t, state = armijo_backtrack(f, -(g @ step), trial, g @ g)
        nit += 1
        if t is None:
            status = NO_PROGRESS
            break
        w, z, r, d, f = state
        b = b - t * db
    return w, b, nit, gnorm, status, f


def _dual_factor(K, d, C, work):
    """Upper Cholesky factor (Fortran-ordered, in ``work``, an (n, n) float64 scratch array) of the
    dual system matrix ``M = I + C D^1/2 K D^1/2``; M >= I is positive definite whatever the rank of ``K``."""
    n = len(d)
    csqd = np.sqrt(C * d)
    M = np.multiply(K, csqd[:, None], out=work)
    M *= csqd
    M.flat[:: n + 1] += 1.0
    # M is symmetric, so its transpose is the Fortran-ordered copy LAPACK factors in place
    U, info = lapack.dpotrf(M.T, lower=0, clean=0, overwrite_a=1)
    if info != 0:
        raise linalg.LinAlgError("dual Newton system is not positive definite")
    return U


def _dual_system(K, d, C, work):
    """``V -> M^-1 V`` for the dual system matrix ``M = I + C D^1/2 K D^1/2`` (factored in ``work``)."""
    U = _dual_factor(K, d, C, work)
    return lambda V: lapack.dpotrs(U, V, lower=0)[0]


def dual_inverse(K, d, C):
    """The inverse of the dual system matrix ``M = I + C D^1/2 K D^1/2`` (from its Cholesky factor).

    Parameters
    ----------
    K : ndarray (n, n)
        Gram matrix ``X X'`` of the training rows.
    d : ndarray (n,)
        Loss curvatures at the current logits (:func:`loss_terms`); ``D = diag(d)``.
    C : float > 0
        Inverse ridge strength (scikit-learn convention, module docstring).

    Returns
    -------
    ndarray (n, n)
        ``M^-1``, symmetric (both triangles filled).

    Raises
    ------
    scipy.linalg.LinAlgError
        When the Cholesky factorization fails (M not numerically positive definite).
    """
    U = _dual_factor(K, d, C, np.empty_like(K))
    inv, info = lapack.dpotri(U, lower=0, overwrite_c=1)
    if info != 0:
        raise linalg.LinAlgError("dual Newton system is not positive definite")
    return np.triu(inv) + np.triu(inv, 1).T


def _dual_direction(K, d, C, gamma, Kgamma, gb, fit_intercept, work=None, solve=None):
    """Newton direction of the dual form: ``(beta, K beta, db)`` with ``(X' beta, db) = H^-1 (X' gamma, gb)``.

    ``H`` is the Hessian of the objective in ``(w, b)`` at curvatures ``d``; ``H_ww^-1 X' c = X' T(c)`` with
    ``T(c) = c - C D^1/2 M^-1 D^1/2 K c`` and ``M = I + C D^1/2 K D^1/2`` (Woodbury), the intercept
    eliminated by its Schur complement.  ``solve`` (``V -> M^-1 V``) if the caller has one, else ``M``
    is factored in ``work`` (:func:`_dual_system`).
    """
    if solve is None:
        solve = _dual_system(K, d, C, np.empty_like(K) if work is None else work)
    sqd = np.sqrt(d)
    cd = C * d
    rhs = np.column_stack([sqd * Kgamma, sqd * (K @ cd)]) if fit_intercept else (sqd * Kgamma)[:, None]
    sol = solve(rhs)
    t1 = gamma - C * sqd * sol[:, 0]
    if not fit_intercept:
        return t1, K @ t1, 0.0
    t2 = cd - C * sqd * sol[:, 1]
    Kt1, Kt2 = K @ t1, K @ t2
    s = C * d.sum() - cd @ Kt2
    db = (gb - cd @ Kt1) / s if s > 1e-300 else 0.0
    return t1 - t2 * db, Kt1 - Kt2 * db, db


def dual_start(K, y, C, z0, b0, fit_intercept=True, solve=None):
    """One full Newton step from a point ``w0`` outside the row span, given only its logits ``z0 = X w0``.

    The Hessian maps the row span and its complement to themselves (identity on the complement), so
    the Newton step from ``w0`` equals the one from its projection onto the row span, and the new
    point ``X' alpha`` lies in the span: ``alpha = -T(C (r - d z0))`` corrected for the intercept (see
    :func:`_dual_direction`; ``r``, ``d`` at the logits ``z0 + b0``).  Needs neither ``w0`` nor the
    projection's least-squares solve with ``K``.  ``solve`` as in :func:`_dual_direction`.  Returns
    ``(alpha, b)``.

    Parameters
    ----------
    K : ndarray (n, n)
        Gram matrix ``X X'`` of the training rows.
    y : ndarray (n,)
        Labels in {-1, +1}.
    C : float > 0
        Inverse ridge strength (module docstring).
    z0 : ndarray (n,)
        Logits ``X w0`` of the starting point, without the intercept.
    b0 : float
        Intercept of the starting point.
    fit_intercept : bool
        Step the unpenalized intercept too (else the returned b is 0).
    solve : callable, optional
        ``V -> M^-1 V`` for the dual system matrix ``M = I + C D^1/2 K D^1/2`` at the curvatures of the logits
        ``z0 + b0`` (e.g. :func:`principal_solver`); by default M is factored here.

    Returns
    -------
    alpha : ndarray (n,)
        Dual coefficients of the new point, ``w = X' alpha``.
    b : float
        Its intercept (0.0 without ``fit_intercept``).
    """
    _, r, d = loss_terms(z0 + b0, y)
    gamma = C * (r - d * z0)
    gb = C * r.sum() - C * (d @ z0) if fit_intercept else 0.0
    beta, _, db = _dual_direction(K, d, C, gamma, K @ gamma, gb, fit_intercept, solve=solve)
    return -beta, (b0 - db) if fit_intercept else 0.0


def principal_solver(Minv, rows):
    """``V -> M[rows][:, rows]^-1 V`` from ``Minv = M^-1`` (M symmetric positive definite, n x n; ``rows``
    distinct indices).

    The inverse of a principal block is the Schur complement of the other rows' block in ``Minv``:
    ``Minv_SS - Minv_SO Minv_OO^-1 Minv_OS`` (S = rows, O = the others), so each block costs one
    factorization of the others' (n - m) x (n - m) block instead of an m x m one.

    Parameters
    ----------
    Minv : ndarray (n, n)
        Inverse of a symmetric positive definite matrix M (e.g. :func:`dual_inverse`).
    rows : array of int
        Distinct indices S of the principal block; the rows of V follow their order.

    Returns
    -------
    callable
        ``V -> M[S][:, S]^-1 V`` for V of shape (m,) or (m, k), m = ``len(rows)``.
    """
    n = Minv.shape[0]
    mask = np.ones(n, dtype=bool)
    mask[rows] = False
    other = np.flatnonzero(mask)
    if len(other) == 0:
        return lambda V: (Minv @ _embed(V, rows, n))[rows]
    Minv_O = np.take(Minv, other, axis=1)
    cho = linalg.cho_factor(np.take(Minv_O, other, axis=0), check_finite=False)

    def solve(V):
        U = Minv @ _embed(V, rows, n)
        return U[rows] - np.take(Minv_O, rows, axis=0) @ linalg.cho_solve(cho, U[other], check_finite=False)

    return solve


def _embed(V, rows, n):
    out = np.zeros((n,) + V.shape[1:])
    out[rows] = V
    return out


def newton_dual(K, y, C, alpha, b, fit_intercept=True, tol=1e-10, max_iter=100):
    """Newton on ``w = X' alpha`` given the Gram matrix ``K = X X'``; returns (alpha, b, nit, gnorm, status, f).

    ``gnorm`` uses the same scaling as :func:`fit_l2_logistic` (``||w||^2 = alpha' K alpha``).

    Parameters
    ----------
    K : ndarray (n, n)
        Gram matrix ``X X'`` of the training rows.
    y : ndarray (n,)
        Labels in {-1, +1}.
    C : float > 0
        Inverse ridge strength (module docstring).
    alpha : ndarray (n,)
        Starting dual coefficients (``w = X' alpha``).
    b : float
        Starting intercept.
    fit_intercept : bool
        Fit the unpenalized intercept.
    tol : float
        Stop when ``||grad f(w, b)|| / max(1, ||w||) <= tol``.
    max_iter : int
        Newton steps at most.

    Returns
    -------
    alpha : ndarray (n,)
        Final dual coefficients.
    b : float
        Final intercept.
    nit : int
        Newton steps taken.
    gnorm : float
        Relative gradient norm ``||grad f(w, b)|| / max(1, ||w||)`` at the returned point.
    status : int or None
        2 when the line search failed (see :data:`STATUS_MESSAGES`), else None: the caller tells 0 (converged)
        from 1 (``max_iter`` reached) by comparing ``gnorm`` with ``tol``.
    f : float
        Objective value ``C sum loss + ||w||^2 / 2`` at the returned point.
    """
    work = np.empty_like(K)  # receives M and its factor at every step
    Ka = K @ alpha
    z = Ka + b
    loss, r, d = loss_terms(z, y)
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
        beta, Kb, db = _dual_direction(K, d, C, gamma, Kg, gb, fit_intercept, work)
        dz = Kb + db
        g_dot_step = gamma @ Kb + gb * db  # <grad, step> in (w, b) coordinates

        def trial(t, alpha=alpha, Ka=Ka, z=z, beta=beta, Kb=Kb, dz=dz):
            a_new, Ka_new, z_new = alpha - t * beta, Ka - t * Kb, z - t * dz
            loss_new, r_new, d_new = loss_terms(z_new, y)

            def grad_norm2():
                gamma_new = a_new + C * r_new
                gb_new = C * r_new.sum() if fit_intercept else 0.0
                return gamma_new @ (K @ gamma_new) + gb_new**2

            f_new = C * loss_new + 0.5 * a_new @ Ka_new
            return f_new, (a_new, Ka_new, z_new, r_new, d_new, f_new), grad_norm2

        t, state = armijo_backtrack(f, -g_dot_step, trial, gamma @ Kg + gb * gb)
        nit += 1
        if t is None:
            status = NO_PROGRESS
            break
        alpha, Ka, z, r, d, f = state
        b = b - t * db
    return alpha, b, nit, gnorm, status, f


def check_solver(tol, max_iter) -> tuple:
    """The checked stopping rule of every ridge-logistic solver (:func:`check_problem`, the path solvers and their
    refits): ``tol`` in ``(0, TOL_MAX]`` and ``max_iter`` in ``1 .. MAX_ITER``.

    Parameters
    ----------
    tol : float
        Relative gradient-norm tolerance.
    max_iter : int
        Newton steps at most (per grid point for a path).

    Returns
    -------
    (tol, max_iter)
        A Python float and int.

    Examples
    --------
    >>> check_solver(1e-10, 100)
    (1e-10, 100)
    """
    return (check_scalar(tol, "tol", low=0.0, high=TOL_MAX, low_open=True),
            check_int(max_iter, "max_iter", maximum=MAX_ITER))


def check_problem(X, y, C, tol, max_iter, w0=None, b0=0.0) -> tuple:
    """The checked inputs of a ridge-logistic fit: the one validation of :func:`direct_newton` and
    :func:`empirical.logistic.fit_l2_logistic`.

    Parameters
    ----------
    X : array-like (n, p)
        Design (:func:`empirical.common.arrays.check_matrix`).
    y : array-like (n,)
        Labels in {-1, +1}.
    C : float
        Inverse ridge strength in ``[C_MIN, C_MAX]``.
    tol : float
        Gradient tolerance in ``(0, TOL_MAX]``.
    max_iter : int
        Newton steps, ``1 .. MAX_ITER``.
    w0 : array-like (p,), optional
        Warm start of the coefficients (finite).
    b0 : float, default=0.0
        Warm start of the intercept (finite).

    Returns
    -------
    (X, y, C, tol, max_iter, w0, b0)
        float64 arrays and Python scalars (``w0`` None when not given).

    Examples
    --------
    >>> check_problem(np.eye(2), [1, -1], 1.0, 1e-10, 0)
    Traceback (most recent call last):
    ...
    ValueError: max_iter must be an integer >= 1, got 0
    """
    X = check_matrix(X, "X")
    y = check_signed_labels(y, X.shape[0], "y")
    C = check_scalar(C, "C", low=C_MIN, high=C_MAX)
    tol, max_iter = check_solver(tol, max_iter)
    if w0 is not None:
        w0 = check_vector(w0, "w0", size=X.shape[1])
    b0 = check_scalar(b0, "b0")
    return X, y, C, tol, max_iter, w0, b0


def direct_newton(X, y, C, w0=None, b0=0.0, *, fit_intercept=True, tol=1e-10, max_iter=100, form=None) -> tuple:
    """Direct Newton (fresh factorization every step, Armijo backtracking): the independent reference.

    Parameters
    ----------
    X : ndarray (n, p)
        Training design (see the module docstring).
    y : ndarray (n,)
        Labels in {-1, +1}.
    C : float > 0
        Inverse ridge strength (scikit-learn convention, module docstring).
    w0, b0 : ndarray (p,) and float, optional
        Warm start (default w = 0, b = 0); ``w0`` is projected onto the row span of X in the dual form.
    fit_intercept : bool
        Fit the unpenalized intercept ``b``.
    tol : float
        Stop when ``||grad f(w, b)|| / max(1, ||w||) <= tol``.
    max_iter : int
        Newton steps at most.
    form : {"primal", "dual"}, optional
        Primal ((p+1)-dimensional Hessian) or dual (Woodbury with ``K = X X'``, n dimensions); default
        primal when n >= p.

    Returns
    -------
    (w, b, nit, grad_norm, status, f)
        ``status`` as in :data:`STATUS_MESSAGES` (CONVERGED, ITERATION_LIMIT or NO_PROGRESS), ``f`` the objective
        value.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((30, 3)), np.where(np.arange(30) % 2, 1.0, -1.0)
    >>> w, b, nit, grad_norm, status, f = direct_newton(X, y, 1.0)
    >>> status, bool(grad_norm <= 1e-10)
    (0, True)
    """
    X, y, C, tol, max_iter, w0, b0 = check_problem(X, y, C, tol, max_iter, w0, b0)
    if form not in (None, "primal", "dual"):
        raise ValueError(f"form must be 'primal', 'dual' or None, got {form!r}")
    n, p = X.shape
    form = form or ("primal" if n >= p else "dual")
    if form == "primal":
        w = np.zeros(p) if w0 is None else np.array(w0, dtype=np.float64)
        w, b, nit, gnorm, status, f = _newton_primal(X, y, C, w, b0, fit_intercept, tol, max_iter)
    else:
        K = X @ X.T
        if w0 is None:
            alpha = np.zeros(n)
        else:  # least-squares projection of w0 onto the row span
            ridge = (1e-12 * max(np.trace(K) / n, 1e-300)) * np.eye(n)
            alpha = linalg.cho_solve(linalg.cho_factor(K + ridge, check_finite=False), X @ w0, check_finite=False)
        alpha, b, nit, gnorm, status, f = newton_dual(K, y, C, alpha, b0, fit_intercept, tol, max_iter)
        w = X.T @ alpha
    return w, b, nit, gnorm, (CONVERGED if gnorm <= tol else ITERATION_LIMIT) if status is None else status, f
