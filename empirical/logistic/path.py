"""Fast exact regularization path for ridge-logistic regression with validation-sign certification.

Problem at each grid value C (scikit-learn convention, intercept unpenalized, y in {-1, +1})::

    min_{w, b}  C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 ||w||^2

Method (see docs/probe.md for the full description):

1. **Reduction.**  The minimizer lies in the span of the training rows, so the problem is solved in
   ``r = rank(X) <= min(n, p)`` coordinates.  When ``n < p`` the Gram matrix ``K = X X'`` is factored
   once (``K = Z Z'``, Cholesky after deflating the constant vector that centring puts in its null
   space; pivoted Cholesky as fallback), giving an isometric ``n x r`` design ``Z`` and validation
   design ``Zv``; when ``n >= p`` the design is ``X`` itself.
2. **Predictor.**  Each C starts from a polynomial extrapolation in ``log C`` of the previous solutions.
3. **Corrector.**  Newton steps whose linear systems are solved by conjugate gradients preconditioned
   with a *stale* Cholesky factor of an earlier Hessian (refactored only when CG needs too many
   iterations), a float32 Cholesky factor applied by two triangular solves.
4. **Certification.**  A grid point is finished as soon as every validation logit's sign is certified:
   with Newton decrement ``nu`` the distance to the exact minimizer is at most ``~nu`` in the Hessian
   norm (generalized self-concordance of the logistic loss with the ridge term making the Hessian
   ``>= I``), which bounds each validation logit's error by ``safety * nu * ||(z_v, 1)||_{H^-1}``.
   Points whose margin is within the bound are refined by further Newton steps, up to ``tol``.
   The validation accuracies along the path are thus those of the exact minimizers; the benchmark
   ``benchmarks/probe_path.py`` and the tests compare them against tightly converged references.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from scipy.linalg.blas import ssyrk, strsv
from scipy.optimize import OptimizeResult
from scipy.special import expit

from .solver import _loss_terms

__all__ = ["ReducedDesign", "reduce_design", "logistic_path", "newton_pcg", "refit"]


class ReducedDesign:
    """Isometric low-dimensional copy of a training design.

    ``Z`` (n, r) and ``Zv`` (m, r) satisfy ``Z a = X w`` and ``Zv a = Xv P w`` for ``w = back(a)`` with
    ``||w|| = ||a||`` (P = projection on the training row span, which contains every minimizer).
    """

    def __init__(self, Z, Zv, back, K=None, project=None):
        self.project = project  # train logits X w (w in the row span) -> reduced coordinates a
        self.KvT = None
        self.Z = Z
        self.Zv = Zv
        self.back = back
        self.K = K  # Z Z' when it is available (n < p)

    @property
    def rank(self):
        return self.Z.shape[1]


def _gram_factor(K, centred):
    """Factor K = Z Z' (Z: n x r).  Returns (Z, coef_map, val_map) where, for the basis
    ``w = X' coef_map(a)``, ``X w = Z a`` and ``||w|| = ||a||``; ``val_map(X Xv')`` gives ``Zv`` with
    ``Xv w = Zv a`` (a may be a vector or a matrix of column vectors)."""
    n = K.shape[0]
    scale = max(np.trace(K) / n, 1e-300)

    def ok(L):
        return np.min(np.abs(np.diag(L))) > 1e-7 * np.sqrt(scale)

    if centred and n > 1:
        # Householder reflector Q (Q = Q' = Q^-1) with Q 1 proportional to e1: since K 1 = 0 for
        # row-centred data, Q K Q has a zero first row and column; factor the rest.
        v = np.full(n, 1.0 / np.sqrt(n))
        v[0] += 1.0
        beta = 2.0 / (v @ v)

        def Qmul(A):  # Q A for vector or matrix A
            return A - beta * np.multiply.outer(v, v @ A)

        Kv = K @ v
        u = beta * Kv - 0.5 * beta * beta * (v @ Kv) * v
        QKQ = K - np.outer(v, u)
        QKQ -= np.outer(u, v)  # Q K Q = K - v u' - u v'
        try:
            L = linalg.cholesky(QKQ[1:, 1:], lower=True, check_finite=False)
            if ok(L):
                Lfull = np.zeros((n, n - 1))
                Lfull[1:] = L

                def coef_map(a):
                    u = np.zeros((n,) + a.shape[1:])
                    u[1:] = linalg.solve_triangular(L, a, trans="T", lower=True, check_finite=False)
                    return Qmul(u)

                def val_map(KvT):
                    return linalg.solve_triangular(L, Qmul(KvT)[1:], lower=True, check_finite=False).T

                def project(t):  # least-squares a with Z a = t
                    return linalg.solve_triangular(L, Qmul(t)[1:], lower=True, check_finite=False)

                return Qmul(Lfull), coef_map, val_map, project
        except linalg.LinAlgError:
            pass
    else:
        try:
            L = linalg.cholesky(K, lower=True, check_finite=False)
            if ok(L):
                return (L,
                        lambda a: linalg.solve_triangular(L, a, trans="T", lower=True, check_finite=False),
                        lambda KvT: linalg.solve_triangular(L, KvT, lower=True, check_finite=False).T,
                        lambda t: linalg.solve_triangular(L, t, lower=True, check_finite=False))
        except linalg.LinAlgError:
            pass
    # rank-deficient (duplicate rows etc.): pivoted Cholesky with rank detection
    Lp, piv, rank, _ = lapack.dpstrf(K, lower=1, tol=1e-13 * scale)
    piv = piv - 1
    L = np.tril(Lp)[:, :rank]
    Z = np.empty((n, rank))
    Z[piv] = L
    L11 = L[:rank]
    idx = piv[:rank]

    def coef_map(a):
        c = np.zeros((n,) + a.shape[1:])
        c[idx] = linalg.solve_triangular(L11, a, trans="T", lower=True, check_finite=False)
        return c

    def val_map(KvT):
        return linalg.solve_triangular(L11, KvT[idx], lower=True, check_finite=False).T

    def project(t):
        return linalg.solve_triangular(L11, t[idx], lower=True, check_finite=False)

    return Z, coef_map, val_map, project


def reduce_design(X, Xv=None, *, K=None, KvT=None):
    """Reduce (X, Xv) to an isometric design of dimension rank(X) (only when n < p).

    ``K = X X'`` and ``KvT = X Xv'`` may be passed when already known."""
    n, p = X.shape
    if Xv is None:
        Xv = np.empty((0, p))
    if n >= p:
        return ReducedDesign(X, Xv, back=lambda a: a, K=None, project=lambda t: None)
    if K is None:
        K = X @ X.T
    centred = bool(np.abs(X.sum(axis=0)).max() <= 1e-8 * max(1.0, np.abs(X).max()) * n)
    Z, coef_map, val_map, project = _gram_factor(K, centred)
    if Xv.shape[0]:
        if KvT is None:
            KvT = X @ Xv.T
        Zv = val_map(KvT)
    else:
        Zv = np.empty((0, Z.shape[1]))
    d = ReducedDesign(Z, Zv, back=lambda a: X.T @ coef_map(a), K=K, project=project)
    d.KvT = KvT
    d.coef_map = coef_map
    return d


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
    """Per-design constants reused across grid points (norms, float32 copy, cached preconditioner)."""

    def __init__(self, Z, Zv=None):
        self.Z = Z
        self.Zv = Zv
        self.Z32 = Z.astype(np.float32)  # CG matrix-vector products only (directions, not gradients)
        self.R = float(np.sqrt(np.max(np.einsum("ij,ij->i", Z, Z)) + 1.0)) if Z.shape[0] else 1.0
        self.zv_norm = np.sqrt(np.einsum("ij,ij->i", Zv, Zv)) if Zv is not None else None
        self.prec = None
        self.Z2 = None  # squared float32 design (Jacobi preconditioner of matrix-free Newton-CG)
        self.mf_failed = False  # matrix-free CG has needed more than mf_maxit iterations
        self.mf_maxit = 60  # about the cost of one preconditioner factorization when r is ~ 500+


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
               yv=None, safety=10.0, matrix_free=False, factor=True, z0=None, min_newton=1):
    """Newton with stale-Cholesky PCG on the reduced design of ``ctx``.

    ``grad_norm`` has the scaling of :func:`empirical.solver.fit_l2_logistic` (relative to max(1, ||w||)).
    With validation labels ``yv`` (in {-1, +1}) it stops as soon as every validation logit's sign is
    certified (status 3) and reports the certified iterate's ``val_logits``.

    ``matrix_free`` (only without ``yv``): solve the Newton systems by Jacobi-preconditioned CG, which
    costs O(n r) per iteration and no factorization; on the first CG failure switch to the stale
    Cholesky preconditioner, or, with ``factor=False``, stop with status 4 (the caller then continues
    from the returned iterate with a factorization, e.g. on a smaller reduced design).
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
    loss, rres, d = _loss_terms(z, y)
    while True:
        gw = a + C * (Z.T @ rres)
        gb = C * rres.sum() if fit_intercept else 0.0
        wn = np.sqrt(a @ a)
        gnorm = np.sqrt(gw @ gw + gb * gb) / max(1.0, wn)
        if gnorm <= tol:
            status = 0
            break
        if yv is not None and ctx.prec is not None:
            # certificate: nu~ = ||g||_{P^-1} (stale preconditioner P ~ Hessian) estimates the Newton
            # decrement; inside the self-concordance region (R nu <= 0.1) the minimizer lies within
            # ~1.3 nu (Hessian norm), so each validation logit moves by at most 1.3 nu ||(z_v,1)||_{H^-1}
            pw, pb = ctx.prec.solve(gw, gb)
            nut = np.sqrt(max(gw @ pw + gb * pb, 0.0))
            if ctx.R * nut <= 0.1 and (nit >= min_newton or nut <= 1e-7 * max(1.0, wn)):
                vn = _val_norm(ctx, C, fit_intercept)
                if np.all(np.abs(val_logits) > safety * 1.3 * nut * vn):
                    certified = True
                    status = 3
                    break
        if nit >= max_iter:
            status = 1
            break
        mf = matrix_free and yv is None and not ctx.mf_failed
        if mf:
            if ctx.Z2 is None:
                ctx.Z2 = ctx.Z32 * ctx.Z32
            jac = _DiagPrec(ctx.Z2, d, C, fit_intercept)
            dw, db, its, ok, rnorm = _pcg(ctx.Z32, d, C, gw, gb, jac, fit_intercept, pcg_rtol,
                                          ctx.mf_maxit)
            n_cg += its
            if not ok:
                ctx.mf_failed = True
                mf = False
                if not factor:
                    status = 4
                    break
        if ctx.prec is None and not mf:
            ctx.prec = _Precond(Z, d, C, fit_intercept, ctx.Z32)
            n_fact += 1
        # CG accuracy: enough for the certificate (residual well below the smallest validation margin
        # over its norm bound) but never looser than an inexact-Newton forcing term of 0.1
        atol = 0.0
        if yv is not None:
            vmax = float(np.max(_val_norm(ctx, C, fit_intercept))) if len(val_logits) else 1.0
            atol = min(0.1 * gnorm * max(1.0, wn), 0.05 * np.min(np.abs(val_logits)) / (safety * 1.3 * vmax))
        if not mf:
            dw, db, its, ok, rnorm = _pcg(ctx.Z32, d, C, gw, gb, ctx.prec, fit_intercept, pcg_rtol, max_pcg, atol)
            n_cg += its
        if not ok:
            ctx.prec = _Precond(Z, d, C, fit_intercept, ctx.Z32)
            n_fact += 1
            dw, db, its, ok, rnorm = _pcg(ctx.Z32, d, C, gw, gb, ctx.prec, fit_intercept, pcg_rtol, 4 * max_pcg + 20, atol)
            n_cg += its
        nu2 = max(gw @ dw + gb * db, 0.0)
        nu = np.sqrt(nu2)
        dz = Z @ dw + db
        f = C * loss + 0.5 * wn * wn
        t = 1.0
        if ctx.R * nu > 0.1:  # damped phase: exact line search along the Newton direction
            t = _line_min(z, dz, y, C, a, dw)
        for _ in range(50):
            a_new = a - t * dw
            z_new = z - t * dz
            loss_new, r_new, d_new = _loss_terms(z_new, y)
            f_new = C * loss_new + 0.5 * a_new @ a_new
            if f_new <= f - 1e-4 * t * nu2 or f_new - f <= 1e-14 * max(1.0, abs(f)):
                break
            t *= 0.5
        a, b, z, loss, rres, d = a_new, b - t * db, z_new, loss_new, r_new, d_new
        nit += 1
        if yv is not None:
            val_logits = Zv @ a + b
    return OptimizeResult(coef=a, intercept=float(b), nit=nit, grad_norm=float(gnorm), success=status in (0, 3),
                          status=status, n_factorizations=n_fact, n_cg=n_cg, certified=certified,
                          val_logits=val_logits, logits=z)


def logistic_path(X, y, Xv, yv, Cs, *, fit_intercept=True, tol=1e-10, max_iter=100, design=None,
                  certify=True, order=3, min_newton=1):
    """Validation accuracy of the exact ridge-logistic minimizer at every C in ``Cs`` (ascending order).

    Returns an OptimizeResult with ``val_accuracy`` (len(Cs),), ``n_iter`` (Newton steps per C),
    ``certified`` (validation signs certified before reaching ``tol``), ``grad_norm``,
    ``coef_reduced`` (len(Cs), r) and ``intercept`` (len(Cs),) of the (certified, not necessarily
    tightly converged) iterates in the reduced coordinates of ``design`` (map with ``design.back``),
    ``n_factorizations``, ``n_cg`` and ``design``.
    """
    Cs = np.asarray(Cs, dtype=np.float64)
    if design is None:
        design = reduce_design(X, Xv)
    ctx = PathContext(design.Z, design.Zv)
    n, r = design.Z.shape
    order_idx = np.argsort(Cs)
    logC = np.log(Cs[order_idx])
    hist_t, hist_a, hist_b, hist_z = [], [], [], []
    a = np.zeros(r)
    b = 0.0
    acc = np.empty(len(Cs))
    coefs = np.empty((len(Cs), r))
    intercepts = np.empty(len(Cs))
    nits = np.zeros(len(Cs), dtype=int)
    certified = np.zeros(len(Cs), dtype=bool)
    grad_norms = np.empty(len(Cs))
    n_fact = n_cg = 0
    for k, idx in enumerate(order_idx):
        C = Cs[idx]
        t = logC[k]
        if hist_t:
            m = min(len(hist_t), order)
            ts = np.array(hist_t[-m:])
            A = np.array(hist_a[-m:])
            B = np.array(hist_b[-m:])
            # Lagrange extrapolation in log C
            wts = np.ones(m)
            for i in range(m):
                for j in range(m):
                    if i != j:
                        wts[i] *= (t - ts[j]) / (ts[i] - ts[j])
            a = wts @ A
            b = float(wts @ B)
            # the train logits are linear in (a, b): extrapolate them too (saves one pass over Z)
            z0 = wts @ np.array(hist_z[-m:])
        else:
            z0 = None
        res = newton_pcg(ctx, y, C, a, b, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter,
                         yv=yv if certify else None, z0=z0, min_newton=min_newton)
        n_fact += res.n_factorizations
        n_cg += res.n_cg
        a, b = res.coef, res.intercept
        hist_t.append(t)
        hist_a.append(a)
        hist_b.append(b)
        hist_z.append(res.logits)
        if len(hist_t) > order:
            hist_t.pop(0), hist_a.pop(0), hist_b.pop(0), hist_z.pop(0)
        coefs[idx] = a
        intercepts[idx] = b
        vl = res.val_logits if res.val_logits is not None else ctx.Zv @ a + b
        acc[idx] = np.mean(np.where(vl > 0, 1.0, -1.0) == yv)
        nits[idx] = res.nit
        certified[idx] = res.certified
        grad_norms[idx] = res.grad_norm
    return OptimizeResult(val_accuracy=acc, n_iter=nits, coef_reduced=coefs, intercept=intercepts, certified=certified, grad_norm=grad_norms,
                          n_factorizations=n_fact, n_cg=n_cg, design=design,
                          success=bool(np.all(certified | (grad_norms <= tol))))


def _extend_design(design, X, Xv):
    """Reduced design of the stacked rows (X; Xv) from the train design by a block Cholesky update.

    With ``Z Z' = X X'`` and ``Zv Z' = Xv X'`` (the train design), ``[[Z, 0], [Zv, Lvv]]`` with
    ``Lvv Lvv' = Xv Xv' - Zv Zv'`` (the validation rows' Gram outside the train row span) is an isometric
    design of the stacked rows; a train solution ``a0`` is ``(a0, 0)`` in it.  Costs one m x m Gram
    and Cholesky instead of refactoring all n + m rows.  Returns None when the validation rows are
    (numerically) dependent on the train rows (then the caller refactors from scratch)."""
    Z, Zv = design.Z, design.Zv
    Kvv = Xv @ Xv.T
    m = Kvv.shape[0]
    scale = max(np.trace(Kvv) / max(m, 1), 1e-300) if m else 1.0
    S = Kvv - Zv @ Zv.T
    try:
        Lvv = linalg.cholesky(S, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return None
    if m and np.min(np.abs(np.diag(Lvv))) <= 1e-7 * np.sqrt(scale):
        return None
    n, r = Z.shape
    Zf = np.zeros((n + m, r + m))
    Zf[:n, :r] = Z
    Zf[n:, :r] = Zv
    Zf[n:, r:] = Lvv
    coef_map = design.coef_map

    def back(a):
        c2 = linalg.solve_triangular(Lvv, a[r:], trans="T", lower=True, check_finite=False)
        return X.T @ coef_map(a[:r] - Zv.T @ c2) + Xv.T @ c2

    return ReducedDesign(Zf, np.empty((0, r + m)), back=back)


def refit(X, y, Xv, yv, C, design, a0, b0, *, fit_intercept=True, tol=1e-10, max_iter=100):
    """Tightly converged fit on train+validation rows at one C, warm-started from a train-only
    solution ``(a0, b0)`` in the reduced coordinates of ``design`` (the train design).

    Reuses the train Gram blocks, so only the validation-validation block is new.  Returns an
    OptimizeResult with ``coef`` (p,) in the original coordinates, ``intercept``, ``nit``,
    ``grad_norm``, ``success``, ``status``, ``message``."""
    Xf = np.vstack([X, Xv])
    yf = np.concatenate([y, yv])
    n, p = Xf.shape
    if design.K is None or n >= p:
        w0 = design.back(a0)
        full = reduce_design(Xf)
        a_start = w0 if full.K is None else full.project(Xf @ w0)
    elif (full := _extend_design(design, X, Xv)) is not None:
        a_start = np.concatenate([a0, np.zeros(full.rank - len(a0))])
    else:
        K = np.empty((n, n))
        m = X.shape[0]
        K[:m, :m] = design.K
        K[:m, m:] = design.KvT
        K[m:, :m] = design.KvT.T
        K[m:, m:] = Xv @ Xv.T
        full = reduce_design(Xf, K=K)
        a_start = full.project(np.concatenate([design.Z @ a0, design.Zv @ a0]))
    ctx = PathContext(full.Z)
    res = newton_pcg(ctx, yf, C, a_start, b0, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter)
    msg = {0: "converged: relative gradient norm <= tol", 1: "maximum number of Newton iterations reached"}
    return OptimizeResult(coef=full.back(res.coef), intercept=res.intercept, nit=res.nit, grad_norm=res.grad_norm,
                          success=res.status == 0, status=res.status,
                          message=msg.get(res.status, "stopped") + f"; grad_norm={res.grad_norm:.3e}, nit={res.nit}")
