"""The Newton kernel of the ridge-logistic solver: loss terms, line searches, preconditioned CG, Newton-PCG,
and the direct Newton method kept as the independent test oracle.

Problem (scikit-learn convention, intercept unpenalized, y in {-1, +1})::

    min_{w, b}  C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 ||w||^2

- :func:`newton_pcg`: Newton whose systems are solved by conjugate gradients, preconditioned with a
  *stale* float32 Cholesky factor of an earlier Hessian (refactored only when CG needs too many
  iterations) or, matrix-free, by the Hessian's diagonal; exact line minimization along the step;
  optional certification of validation signs (see :mod:`empirical.logistic.path`).
- :func:`direct_newton`: Newton with a fresh factorization every step and a backtracking (Armijo)
  line search: primal ((p+1)-dimensional Hessian) or dual (Woodbury identity with the Gram matrix
  ``K = X X'``, n dimensions).  Slow but simple: the reference the fast paths are tested against.
  Its dual step (:func:`_dual_direction`) also drives :func:`empirical.logistic.fit_l2_logistic_rows`,
  with a start step from a point outside the row span (:func:`dual_start`) whose system may come
  from a shared inverse (:func:`principal_solver`); those fits are tested against the primal solvers.

Every solver here reports a ``status`` from :data:`STATUS_MESSAGES`.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from scipy.linalg.blas import ssyrk, strsv
from scipy.optimize import OptimizeResult
from scipy.special import expit

__all__ = ["STATUS_MESSAGES", "loss_terms", "armijo_backtrack", "direct_newton", "newton_pcg", "PathContext",
           "newton_dual", "dual_start", "dual_inverse", "principal_solver"]

#: status -> message of every solver of this family (fit_l2_logistic, newton_pcg, direct_newton, refit)
STATUS_MESSAGES = {
    0: "converged: relative gradient norm <= tol",
    1: "maximum number of Newton iterations reached",
    2: "line search could not decrease the objective (round-off floor reached)",
    3: "validation signs certified before reaching tol",
    4: "matrix-free CG needed too many iterations (continue with a factorized preconditioner)",
}
#: sufficient-decrease constant of the Armijo rule
ARMIJO = 1e-4


def loss_terms(z, y):
    """Return loss sum, dl/dz (= r) and d2l/dz2 (= d) for train logits z."""
    m = y * z
    s = expit(-m)  # sigma(-m)
    loss = np.logaddexp(0.0, -m).sum()
    r = -y * s
    d = s * (1.0 - s)
    return loss, r, d



def armijo_backtrack(f, slope, trial, grad_norm2, max_halvings=60):
    """Backtracking (Armijo) line search shared by the direct Newton methods.

    ``trial(t)`` returns ``(f_new, state, grad_norm2_new)`` at step length ``t`` (``grad_norm2_new`` a
    callable, evaluated only when needed).  A step is accepted on sufficient decrease
    ``f_new <= f + ARMIJO t slope`` or, when objective differences are at round-off level, if the squared
    gradient norm shrinks below ``grad_norm2``.  Returns ``(t, state)``, or ``(None, None)`` when no
    step of the ``max_halvings`` halvings is accepted.
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
            status = 2
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
    """The inverse of the dual system matrix ``M = I + C D^1/2 K D^1/2`` (from its Cholesky factor)."""
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
            status = 2
            break
        alpha, Ka, z, r, d, f = state
        b = b - t * db
    return alpha, b, nit, gnorm, status, f



def direct_newton(X, y, C, w0=None, b0=0.0, *, fit_intercept=True, tol=1e-10, max_iter=100, form=None) -> tuple:
    """Direct Newton (fresh factorization every step, Armijo backtracking): the independent reference.

    Parameters
    ----------
    X : ndarray (n, p); y : ndarray (n,) in {-1, +1}; C : float > 0
        The problem (see the module docstring).
    w0, b0 : optional warm start (``w0`` is projected onto the row span of X in the dual form).
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
        ``status`` as in :data:`STATUS_MESSAGES` (0, 1 or 2), ``f`` the objective value.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((30, 3)), np.where(np.arange(30) % 2, 1.0, -1.0)
    >>> w, b, nit, grad_norm, status, f = direct_newton(X, y, 1.0)
    >>> status, bool(grad_norm <= 1e-10)
    (0, True)
    """
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
    return w, b, nit, gnorm, (0 if gnorm <= tol else 1) if status is None else status, f


class _Precond:
    """Cholesky factor of the Hessian I + C Z'DZ (+ intercept, via its Schur complement) at some (C, D).

    Formed from float32 products and factored in float32; each application is two float32 triangular
    solves (one pass over r^2 numbers each).  Forming an explicit inverse (potri) costs twice the
    factorization and saves less than that over a factor's lifetime (measured at r = 576 and 2400).
    It is only a preconditioner and the metric of the certificate's estimate (with a safety factor), so
    its precision does not limit the exactness of the solutions.
    """

    def __init__(self, Z, d, C, fit_intercept, Z32=None):
        n, r = Z.shape
        self.C = C
        self.fit_intercept = fit_intercept
        Zs = Z32 if Z32 is not None else Z.astype(np.float32)
        S = Zs * np.sqrt(C * d).astype(np.float32)[:, None]
        H = ssyrk(1.0, S.T, trans=0, lower=0)  # upper triangle of S'S (half the flops of S.T @ S)
        H[np.diag_indices(r)] += 1.0
        U, info = lapack.spotrf(H, lower=0, clean=0, overwrite_a=1)
        if info != 0:
            raise linalg.LinAlgError("preconditioner factorization failed")
        self.U = np.asfortranarray(U)  # H = U'U (upper triangle)
        if fit_intercept:
            h = C * (Z.T @ d)
            self.u = self.solve_w(h)
            self.s = max(C * d.sum() - h @ self.u, 1e-300)
            self.h = h

    def solve_w(self, v):
        y = strsv(self.U, v.astype(np.float32), trans=1, lower=0)
        return strsv(self.U, y, trans=0, lower=0, overwrite_x=1).astype(np.float64)

    def solve(self, vw, vb):
        xw0 = self.solve_w(vw)
        if not self.fit_intercept:
            return xw0, 0.0
        xb = (vb - self.h @ xw0) / self.s
        return xw0 - self.u * xb, xb


class _DiagPrec:
    """Jacobi preconditioner diag(I + C Z'DZ) (and C sum d for the intercept) for matrix-free Newton-CG."""

    def __init__(self, Z2, d, C, fit_intercept):
        self.fit_intercept = fit_intercept
        self.inv_w = 1.0 / (1.0 + C * (Z2.T @ d.astype(Z2.dtype)).astype(np.float64))
        self.inv_b = 1.0 / max(C * d.sum(), 1e-300) if fit_intercept else 0.0

    def solve(self, vw, vb):
        return self.inv_w * vw, self.inv_b * vb


def _hessvec(Z, d, C, vw, vb):
    if Z.dtype == np.float32:
        t = d * ((Z @ vw.astype(np.float32)) + vb)
        return vw + C * (Z.T @ t.astype(np.float32)), C * t.sum()
    t = d * (Z @ vw + vb)
    return vw + C * (Z.T @ t), C * t.sum()


def _pcg(Z, d, C, gw, gb, prec, fit_intercept, rtol, maxit, atol=0.0):
    """Solve H x = g by preconditioned CG to ||residual|| <= max(rtol ||g||, atol).

    Returns (xw, xb, iterations, converged, residual norm)."""
    xw = np.zeros_like(gw)
    xb = 0.0
    rw, rb = gw.copy(), (gb if fit_intercept else 0.0)
    zw, zb = prec.solve(rw, rb)
    pw, pb = zw.copy(), zb
    rz = rw @ zw + rb * zb
    g2 = np.sqrt(gw @ gw + gb * gb)
    for it in range(1, maxit + 1):
        Hw, Hb = _hessvec(Z, d, C, pw, pb)
        if not fit_intercept:
            Hb = 0.0
        pHp = pw @ Hw + pb * Hb
        alpha = rz / pHp
        xw += alpha * pw
        xb += alpha * pb
        rw -= alpha * Hw
        rb -= alpha * Hb
        rn = np.sqrt(rw @ rw + rb * rb)
        if rn <= max(rtol * g2, atol):
            return xw, xb, it, True, rn
        zw, zb = prec.solve(rw, rb)
        rz_new = rw @ zw + rb * zb
        beta = rz_new / rz
        rz = rz_new
        pw = zw + beta * pw
        pb = zb + beta * pb
    return xw, xb, maxit, False, rn






class PathContext:
    """Per-design constants reused across Newton-PCG calls and grid points: the design ``Z`` and
    validation design ``Zv``, a float32 copy for CG products, row norms, the cached preconditioner."""

    def __init__(self, Z, Zv=None):
        self.Z = Z
        self.Zv = Zv
        self.Z32 = Z.astype(np.float32)  # CG matrix-vector products only (directions, not gradients)
        self.R = float(np.sqrt(np.max(np.einsum("ij,ij->i", Z, Z)) + 1.0)) if Z.shape[0] else 1.0
        self.zv_norm = np.sqrt(np.einsum("ij,ij->i", Zv, Zv)) if Zv is not None else None
        self.prec = None
        self.Z2 = None  # squared float32 design (Jacobi preconditioner of matrix-free Newton-CG)
        self.matrix_free_failed = False  # matrix-free CG has needed more than matrix_free_max_cg iterations
        self.matrix_free_max_cg = 60  # about the cost of one preconditioner factorization when r is ~ 500+


def _line_min(z, dz, y, C, a, dw, iters=20):
    """argmin_t of C sum log(1 + exp(-y (z - t dz))) + 0.5 ||a - t dw||^2 (convex) by safeguarded 1-D Newton."""
    ydz = y * dz
    adw, dw2 = a @ dw, dw @ dw
    lo, hi, t = 0.0, np.inf, 1.0
    for _ in range(iters):
        m = y * z - t * ydz
        s = expit(-m)
        g1 = C * (s @ ydz) - adw + t * dw2
        if g1 > 0:
            hi = t
        else:
            lo = t
        g2 = C * ((s * (1.0 - s)) @ (ydz * ydz)) + dw2
        t_new = t - g1 / g2 if g2 > 0 else np.inf
        if not (lo < t_new < hi):
            t_new = 0.5 * (lo + hi) if np.isfinite(hi) else 2.0 * max(t, 1.0)
        if abs(t_new - t) <= 1e-6 * max(1.0, t):
            return t_new
        t = t_new
    return t


def _val_norm(ctx, C, fit_intercept):
    """Estimate of ||(z_v, 1)||_{H^-1} for every validation row: ||z_v||^2 + (1 + ||u|| ||z_v||)^2 / s,
    with u = H_ww^-1 h and s the intercept's Schur complement taken from the stale factor (s rescaled
    to the current C)."""
    if not fit_intercept:
        return ctx.zv_norm
    prec = ctx.prec
    un = np.sqrt(prec.u @ prec.u)
    return np.sqrt(ctx.zv_norm**2 + (1.0 + un * ctx.zv_norm) ** 2 / (prec.s * C / prec.C))



def newton_pcg(ctx, y, C, a, b, *, fit_intercept=True, tol=1e-10, max_iter=100, pcg_rtol=1e-3, max_pcg=None,
               yv=None, safety=10.0, matrix_free=False, factor=True, z0=None, min_newton=1) -> OptimizeResult:
    """Newton with stale-Cholesky preconditioned CG on the (reduced) design of ``ctx``.

    Parameters
    ----------
    ctx : PathContext
        The design ``Z`` (n, r), optional validation design ``Zv``, and cached state (preconditioner).
    y : ndarray (n,)
        Training labels in {-1, +1}.
    C : float > 0
        Inverse ridge strength (objective ``C sum loss + ||a||^2 / 2``).
    a, b : ndarray (r,), float
        Start (coefficients in the coordinates of ``Z``, intercept).
    fit_intercept : bool
        Fit the unpenalized intercept.
    tol : float
        Stop when ``||grad|| / max(1, ||a||) <= tol`` (the scaling of :func:`fit_l2_logistic`).
    max_iter : int
        Newton steps at most.
    pcg_rtol : float
        Relative residual at which CG stops (inexact Newton).
    max_pcg : int, optional
        CG iterations before the stale preconditioner is refactored at the current Hessian (default 8
        when n >= 2r, else 12: a factorization costs ~r^3/3 flops, a CG iteration ~4nr).
    yv : ndarray (m,), optional
        Validation labels: stop as soon as every validation logit's sign is certified (status 3).
    safety : float
        Factor on the certification bound (validation logit error <= safety * decrement * ||(z_v, 1)||_{H^-1}).
    matrix_free : bool
        (only without ``yv``) solve the Newton systems by Jacobi-preconditioned CG, O(nr) per iteration
        and no factorization; on the first CG failure switch to the stale Cholesky preconditioner or,
        with ``factor=False``, stop with status 4 (the caller continues with a factorization).
    factor : bool
        Allow factorizing a preconditioner.
    z0 : ndarray (n,), optional
        Train logits ``Z a + b`` when already known (saves one pass over ``Z``).
    min_newton : int
        Newton steps taken before certification is tried.

    Returns
    -------
    OptimizeResult
        ``coef`` (r,), ``intercept``, ``nit``, ``grad_norm``, ``success`` (status 0 or 3), ``status`` and
        ``message`` (:data:`STATUS_MESSAGES`), ``certified``, ``val_logits`` (at the certified iterate),
        ``logits`` (train), ``n_factorizations``, ``n_cg``.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> Z = rng.standard_normal((40, 3))
    >>> y = np.where(Z[:, 0] > 0, 1.0, -1.0)
    >>> res = newton_pcg(PathContext(Z), y, 1.0, np.zeros(3), 0.0)
    >>> res.status, bool(res.grad_norm <= 1e-10)
    (0, True)
    """
    Z, Zv = ctx.Z, ctx.Zv
    if max_pcg is None:
        # CG iterations before refactoring the preconditioner: a factorization costs ~r^3/3 flops and a
        # CG iteration ~4 n r, so refactor sooner when n >> r (measured: 8 vs 12 saves ~25% of the path
        # at n = 4 r, and costs up to 10% at n ~ r)
        max_pcg = 8 if Z.shape[0] >= 2 * Z.shape[1] else 12
    z = Z @ a + b if z0 is None else z0
    nit = n_fact = n_cg = 0
    certified = False
    status = 1
    val_logits = Zv @ a + b if (yv is not None) else None
    loss, residuals, d = loss_terms(z, y)
    while True:
        gw = a + C * (Z.T @ residuals)
        gb = C * residuals.sum() if fit_intercept else 0.0
        w_norm = np.sqrt(a @ a)
        gnorm = np.sqrt(gw @ gw + gb * gb) / max(1.0, w_norm)
        if gnorm <= tol:
            status = 0
            break
        if yv is not None and ctx.prec is not None:
            # certificate: nu~ = ||g||_{P^-1} (stale preconditioner P ~ Hessian) estimates the Newton
            # decrement; inside the self-concordance region (R nu <= 0.1) the minimizer lies within
            # ~1.3 nu (Hessian norm), so each validation logit moves by at most 1.3 nu ||(z_v,1)||_{H^-1}
            pw, pb = ctx.prec.solve(gw, gb)
            decrement = np.sqrt(max(gw @ pw + gb * pb, 0.0))
            if ctx.R * decrement <= 0.1 and (nit >= min_newton or decrement <= 1e-7 * max(1.0, w_norm)):
                val_norm = _val_norm(ctx, C, fit_intercept)
                if np.all(np.abs(val_logits) > safety * 1.3 * decrement * val_norm):
                    certified = True
                    status = 3
                    break
        if nit >= max_iter:
            status = 1
            break
        use_matrix_free = matrix_free and yv is None and not ctx.matrix_free_failed
        if use_matrix_free:
            if ctx.Z2 is None:
                ctx.Z2 = ctx.Z32 * ctx.Z32
            jac = _DiagPrec(ctx.Z2, d, C, fit_intercept)
            dw, db, its, ok, rnorm = _pcg(ctx.Z32, d, C, gw, gb, jac, fit_intercept, pcg_rtol,
                                          ctx.matrix_free_max_cg)
            n_cg += its
            if not ok:
                ctx.matrix_free_failed = True
                use_matrix_free = False
                if not factor:
                    status = 4
                    break
        if ctx.prec is None and not use_matrix_free:
            ctx.prec = _Precond(Z, d, C, fit_intercept, ctx.Z32)
            n_fact += 1
        # CG accuracy: enough for the certificate (residual well below the smallest validation margin
        # over its norm bound) but never looser than an inexact-Newton forcing term of 0.1
        atol = 0.0
        if yv is not None:
            vmax = float(np.max(_val_norm(ctx, C, fit_intercept))) if len(val_logits) else 1.0
            atol = min(0.1 * gnorm * max(1.0, w_norm), 0.05 * np.min(np.abs(val_logits)) / (safety * 1.3 * vmax))
        if not use_matrix_free:
            dw, db, its, ok, rnorm = _pcg(ctx.Z32, d, C, gw, gb, ctx.prec, fit_intercept, pcg_rtol, max_pcg, atol)
            n_cg += its
        if not ok:
            ctx.prec = _Precond(Z, d, C, fit_intercept, ctx.Z32)
            n_fact += 1
            dw, db, its, ok, rnorm = _pcg(ctx.Z32, d, C, gw, gb, ctx.prec, fit_intercept, pcg_rtol, 4 * max_pcg + 20,
                                          atol)
            n_cg += its
        nu2 = max(gw @ dw + gb * db, 0.0)
        nu = np.sqrt(nu2)
        dz = Z @ dw + db
        f = C * loss + 0.5 * w_norm * w_norm
        t = 1.0
        if ctx.R * nu > 0.1:  # damped phase: exact line search along the Newton direction
            t = _line_min(z, dz, y, C, a, dw)
        for _ in range(50):
            a_new = a - t * dw
            z_new = z - t * dz
            loss_new, r_new, d_new = loss_terms(z_new, y)
            f_new = C * loss_new + 0.5 * a_new @ a_new
            if f_new <= f - 1e-4 * t * nu2 or f_new - f <= 1e-14 * max(1.0, abs(f)):
                break
            t *= 0.5
        a, b, z, loss, residuals, d = a_new, b - t * db, z_new, loss_new, r_new, d_new
        nit += 1
        if yv is not None:
            val_logits = Zv @ a + b
    return OptimizeResult(coef=a, intercept=float(b), nit=nit, grad_norm=float(gnorm), success=status in (0, 3),
                          status=status, message=f"{STATUS_MESSAGES[status]}; grad_norm={gnorm:.3e}, nit={nit}",
                          n_factorizations=n_fact, n_cg=n_cg, certified=certified, val_logits=val_logits, logits=z)
