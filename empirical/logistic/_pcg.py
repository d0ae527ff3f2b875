"""The Newton-PCG kernel of the ridge-logistic solver: Newton whose systems are solved by preconditioned CG.

Problem as in :mod:`empirical.logistic._newton` (scikit-learn convention, intercept unpenalized, y in {-1, +1})::

    min_{w, b}  C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 ||w||^2

- :class:`PathContext`: the per-design constants one design's fits share across calls and grid points (the
  design and validation design, a float32 copy for CG products, row norms, the cached preconditioner);
- :func:`newton_pcg`: Newton whose systems are solved by conjugate gradients, preconditioned with a
  *stale* float32 Cholesky factor of an earlier Hessian (refactored only when CG needs too many
  iterations), with the ridge term plus a low-rank (Nystrom) approximation of the data term (the path's start,
  :class:`_NystromPrec`), or, matrix-free, by the Hessian's diagonal; exact line minimization along the step;
  optional certification of validation signs (see :mod:`empirical.logistic._path`).

It drives :func:`empirical.logistic.fit_l2_logistic`, :func:`empirical.logistic.logistic_path` and
:func:`empirical.logistic.refit`, reports a ``status`` from :data:`empirical.common.failures.STATUS_MESSAGES`
and is tested against :func:`empirical.logistic._newton.direct_newton`.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from scipy.linalg.blas import dtrsv, ssyrk, strsv
from scipy.optimize import OptimizeResult
from scipy.special import expit

from empirical.common.failures import (
    CG_EXHAUSTED,
    CONVERGED,
    ITERATION_LIMIT,
    NO_PROGRESS,
    SIGNS_CERTIFIED,
    STATUS_MESSAGES,
    is_success,
)

from ._factors import gemm, gemv
from ._newton import ARMIJO, HALVINGS, loss_terms

#: The API: :func:`newton_pcg`.  :class:`PathContext` is the path solvers' cache of one design's products, built
#: from designs they checked: not API.
__all__ = ["newton_pcg"]


_EPS = np.finfo(np.float64).eps
#: The validation-sign certificate (shared with the batched engine, :mod:`empirical.logistic.batched`): inside the
#: self-concordance region ``R nu <= RADIUS`` the minimizer lies within ``DISTANCE x nu`` (Hessian norm) of the
#: iterate, and a sign is certified when its logit exceeds ``SAFETY x DISTANCE x nu x ||(z_v, 1)||_{H^-1}``.
RADIUS, DISTANCE, SAFETY = 0.1, 1.3, 10.0
#: step-by-step updated logits are recomputed before a verdict when their rounding drift exceeds this many times
#: the rounding of one fresh computation (eps x their magnitude): only after steps far larger than the logits
_DRIFT_FACTOR = 1e3
#: a Schur complement below this fraction of C sum d has lost its digits to cancellation in float32
_SCHUR_FLOOR = 1e-4
#: Sketch size of the path's first preconditioner (:class:`_NystromPrec`), at most a quarter of the rank.  A factor
#: model's or hidden states' few large directions fit in it; the sketch costs two level-3 triangular products and
#: r x k work (~0.06-0.08 s at r = 3600 on 2 threads, against ~0.3 s for a factorization).
NYSTROM_RANK = 64
#: CG iterations per Newton system with the low-rank preconditioner before it is sketched again (once) or a
#: factorization is made: its iteration costs a third of one with a factor (no triangular solves), so it may take
#: more than ``max_pcg``.
NYSTROM_MAX_CG = 12
#: The sketch is kept only when its largest eigenvalue exceeds its smallest by this factor (else the ridge term alone)
NYSTROM_GAP = 4.0


class _Precond:
    """Cholesky factor of the Hessian I + C Z'DZ (+ intercept, via its Schur complement) at some (C, D).

    Formed from float32 products and factored in float32 (in float64, by a QR that never forms the Hessian,
    when float32 cannot hold it: large C on separable data); each application is two triangular
    solves (one pass over r^2 numbers each).  Forming an explicit inverse (potri) costs twice the
    factorization and saves less than that over a factor's lifetime (measured at r = 576 and 2400).
    It is only a preconditioner and the metric of the certificate's estimate (with a safety factor), so
    its precision does not limit the exactness of the solutions.
    """

    def __init__(self, ctx, d, C, fit_intercept):
        n, r = ctx.shape
        self.C = C
        self.fit_intercept = fit_intercept
        #: the factor's triangle: H = U'U with U upper (lower=False), or H = L L' with L lower (lower=True)
        self.lower = ctx.tri is not None
        if self.lower:  # triangular design: lauum + rank-2 update, a third of the syrk's flops
            H = ctx.tri32.weighted_gram(C * d)
        else:
            S = ctx.Z32 * np.sqrt(C * d).astype(np.float32)[:, None]
            H = ssyrk(1.0, S.T, trans=0, lower=0)  # upper triangle of S'S (half the flops of S.T @ S)
        H[np.diag_indices(r)] += 1.0
        U, info = lapack.spotrf(H, lower=int(self.lower), clean=0, overwrite_a=1)
        #: a float64 factor of the Hessian itself (the QR route), exact to float64 rounding: no CG needed
        self.exact = False
        if info == 0:
            self.U = np.asfortranarray(U)
            if fit_intercept:
                self.h = C * ctx.rmul(d)
                self.u = self.solve_w(self.h)
                self.s = C * d.sum() - self.h @ self.u  # Schur complement of the intercept
        if info != 0 or (fit_intercept and not self.s > _SCHUR_FLOOR * C * d.sum()):
            self._factor_by_qr(ctx.Z, d, C, fit_intercept, r)  # the dense design, built on first use
        if fit_intercept:
            # a numerically singular intercept block (every d underflowed, or the constant lies in the span of
            # C D Z): regularize the preconditioner, and never certify with it (see _val_norm)
            floor = 1e-12 * max(1.0, C * d.sum())
            self.singular = not self.s >= floor
            self.s = max(self.s, floor)

    def _factor_by_qr(self, Z, d, C, fit_intercept, r):
        """The same factor in float64 without forming the Hessian: float32 cannot hold I + C Z'DZ when C d spans
        more than ~7 decades (large C on separable data, where most d underflow), and the Schur complement
        C sum d - h'H^-1 h then cancels.  R of the QR of [sqrt(C D) (Z, 1); (I, 0)] has R'R = the Hessian of
        (w, b); its leading block R11 factors the w-block, and u = R11^-1 r12, s = r22^2 are exact."""
        sqrt_cd = np.sqrt(C * d)
        top = np.asarray(Z, dtype=np.float64) * sqrt_cd[:, None]
        if fit_intercept:
            top = np.hstack([top, sqrt_cd[:, None]])
        bottom = np.eye(r, top.shape[1])
        R = linalg.qr(np.vstack([top, bottom]), mode="r", overwrite_a=True, check_finite=False)[0][:top.shape[1]]
        if not np.all(np.isfinite(R)):
            raise linalg.LinAlgError("preconditioner factorization failed: the Hessian is not finite")
        R = R * np.where(np.diag(R) < 0, -1.0, 1.0)[:, None]
        self.U = np.asfortranarray(R[:r, :r])
        self.lower = False
        self.exact = True
        if fit_intercept:
            r12 = R[:r, r]
            self.h = self.U.T @ r12
            self.u = linalg.solve_triangular(self.U, r12, lower=False, check_finite=False)
            self.s = R[r, r] ** 2
    def solve_w(self, v):
        first, second = (0, 1) if self.lower else (1, 0)  # L L' x = v, or U'U x = v
        lower = int(self.lower)
        if self.U.dtype == np.float64:
            return dtrsv(self.U, dtrsv(self.U, v, trans=first, lower=lower), trans=second, lower=lower, overwrite_x=1)
        v32, scale = _unit(v)
        y = strsv(self.U, v32, trans=first, lower=lower)
        return scale * strsv(self.U, y, trans=second, lower=lower, overwrite_x=1).astype(np.float64)

    #: a factor can always be used (its Schur complement is floored); see :class:`_NystromPrec`
    usable = True

    def _couple_intercept(self, C):
        """The intercept's row and column at ``C`` for a preconditioner that follows C with fixed weights ``d``
        (``zd = Z'd``, ``d_sum``): ``h = C Z'd``, ``u = solve_w(h)`` and the Schur complement ``s = C sum d - h'u``;
        ``usable`` is False when ``s`` is not positive (lost to cancellation)."""
        self.usable = True
        if self.fit_intercept:
            self.h = C * self.zd
            self.u = self.solve_w(self.h)
            self.s = C * self.d_sum - self.h @ self.u
            self.usable = bool(self.s > _SCHUR_FLOOR * C * self.d_sum)

    def at(self, C):
        """The preconditioner to use at inverse ridge strength ``C``: a factor stays as it was made (stale)."""
        return self

    def solve(self, vw, vb):
        xw0 = self.solve_w(vw)
        if not self.fit_intercept:
            return xw0, 0.0
        xb = (vb - self.h @ xw0) / self.s
        return xw0 - self.u * xb, xb


class _NystromPrec(_Precond):
    """The Hessian with its data term replaced by a rank-k Nystrom approximation from below:
    P = [[I + C M_k, h], [h', C sum d]], h = C Z'd, with M_k = U diag(lam) U' <= Z'DZ.

    No factorization.  ``M_k = G G'/C`` is the Nystrom approximation of ``Z'DZ`` in its square-root form
    (:func:`_nystrom`): ``G = B'Q`` with ``B = (C D)^1/2 Z`` and ``Q`` an orthonormal basis of a float32 sketch
    ``B Omega`` (k Gaussian columns; a float32 and a float64 ``trmm`` on a triangular design, ~0.06 s at r = 3600 and
    k = 64 on one thread against ~0.5 s for a factorization); applying ``P^-1`` costs two products with the r x k
    ``U`` (Woodbury) instead of two triangular solves.  Since ``Q Q' <= I``, ``M_k <= Z'DZ`` whatever the sketch and
    its float32 rounding (up to the float64 rounding of ``G``, ``Q`` and the SVD, as for the Hessian itself), so
    ``P <= H`` at the weights ``d`` it was built with, and the certificate's estimates in its metric are conservative
    there, as with a factor of H.  At another C it is rescaled (:meth:`at`): ``I + C M_k`` follows C exactly, and only
    the drift of the weights separates it from the Hessian, as for a stale factor.  CG preconditioned with it needs few
    iterations while the data term beyond its top k eigenvalues, ``C lambda_{k+1}(Z'DZ)``, is small: the start of the
    path, and much further on data whose covariance has a few large directions (a factor model, hidden states'
    outlier dimensions), where k = 0 (the ridge term alone) gives up at once.  ``usable`` is False when the
    intercept's Schur complement ``C sum d - h'(I + C M_k)^-1 h`` is not positive: factor instead.

    Parameters
    ----------
    ctx : PathContext
        The design.
    d : ndarray (n,)
        The weights of the data term.
    C : float
        The inverse ridge strength it is built at.
    fit_intercept : bool
        With the intercept's row and column.
    rank : int
        Sketch size k (0: the ridge term alone; at most r).
    seed : int, default=0
        Seed of the random sketch (fixed: the same data give the same iterates).
    """

    def __init__(self, ctx, d, C, fit_intercept, rank, seed=0):
        r = ctx.shape[1]
        self.fit_intercept = fit_intercept
        self.exact = False
        self.singular = False
        self.rank = min(int(rank), r)
        self.d_sum = float(d.sum())
        self._d = d
        self.zd = ctx.rmul(d) if fit_intercept else None
        self.U, self.lam0, self.C0 = np.zeros((r, 0)), np.zeros(0), C
        if self.rank > 0:
            self.U, self.lam0 = _nystrom(ctx, C * d, self.rank, seed)
            if not self.lam0.size or self.lam0.min() > self.lam0.max() / NYSTROM_GAP:
                # no few large directions (a flat spectrum, as two Gaussian classes'): the low-rank part would
                # precondition no better than the ridge term alone and cost a product per CG iteration
                self.rank, self.U, self.lam0 = 0, np.zeros((r, 0)), np.zeros(0)
        self.C = None
        self.at(C)

    def at(self, C):
        """The same approximation at inverse ridge strength ``C`` (in place; returns self)."""
        if C != self.C:
            self.C = C
            self.lam = self.lam0 * (C / self.C0)
            self.shrink = self.lam / (1.0 + self.lam)
            self._couple_intercept(C)
        return self

    def built_at(self, C, d) -> bool:
        """Whether it was sketched at this very (C, d)."""
        return C == self.C0 and (d is self._d or np.array_equal(d, self._d))

    def solve_w(self, v):
        v = np.array(v, dtype=np.float64)
        if self.lam.size:
            v -= gemv(self.U, self.shrink * gemv(self.U, v, trans=True))
        return v


class _PaddedPrec(_Precond):
    """A train design's preconditioner carried to the refit's stacked design: ``inner`` (a factor or a
    :class:`_NystromPrec` of the train Hessian, on the first r coordinates) and the identity on the k coordinates
    the validation rows add, with the intercept's row and column of the stacked data at ``(C, d)``.

    The stacked Hessian is the train Hessian plus the validation rows' term ``C E'D_vE`` (a quarter of the data at the
    paper's split, of the same distribution), so a train preconditioner made near the refit's C leaves CG a short
    spectrum where the refit would otherwise factor the stacked Hessian (a ``lauum`` of the train triangle, a
    ``syrk`` of the validation rows and a Cholesky factor of order r + k).  Only a preconditioner: the refit's
    stopping rule is the float64 gradient's.

    Parameters
    ----------
    inner : _Precond
        The train design's preconditioner (order r; rescaled with C when it is low-rank).
    ctx : PathContext
        The stacked design (order r + k).
    d : ndarray (n + m,)
        The stacked rows' weights at the refit's start.
    C : float
        The refit's inverse ridge strength.
    fit_intercept : bool
        With the intercept's row and column.
    """

    def __init__(self, inner, ctx, d, C, fit_intercept):
        self.inner = inner
        self.r = inner.U.shape[0]
        self.fit_intercept = fit_intercept
        self.exact = False
        self.singular = False
        self.d_sum = float(d.sum())
        self.zd = ctx.rmul(d) if fit_intercept else None
        self.C = None
        self.at(C)

    def at(self, C):
        """The same preconditioner at inverse ridge strength ``C`` (in place; returns self)."""
        if C != self.C:
            self.C = C
            self.inner = self.inner.at(C)
            self._couple_intercept(C)
        return self

    def solve_w(self, v):
        out = np.array(v, dtype=np.float64)
        out[:self.r] = self.inner.solve_w(out[:self.r])
        return out


def _nystrom(ctx, c, k, seed):
    """``(U, lam)``, ``U`` (r, j) orthonormal and ``lam > 0`` (j <= k), with ``U diag(lam) U' = G G' <= Z' diag(c) Z``
    in exact arithmetic on the computed ``Q`` and ``G``: the Nystrom approximation in its square-root form.

    With ``B = diag(sqrt(c)) Z`` (so ``Z' diag(c) Z = B'B``) and ``Omega`` (r, k) Gaussian, the Nystrom approximation
    ``A Omega (Omega' A Omega)^+ Omega' A`` of ``A = B'B`` is ``B' Q Q' B`` with ``Q`` an orthonormal basis of
    ``B Omega`` (n, k).  Since ``Q Q' <= I`` for *any* orthonormal ``Q``, ``G G' = B' Q Q' B <= B'B`` whatever the
    basis, so the sketch ``B Omega`` that finds it may be float32 (one level-3 product, ``ctx.mulmat32``), and only
    ``G = B'Q`` is float64 (``ctx.rmulmat``): there is no k x k core to invert and no shift.  The stabilized Nystrom
    of Tropp, Yurtsever, Udell & Cevher (2017, Algorithm 3) used before adds ``nu Omega`` to a float32 sketch of
    ``A Omega`` and subtracts ``nu`` from the captured eigenvalues only: its approximation is ``<= A + nu (I - U U')``,
    not ``<= A`` (in exact arithmetic too, by up to ~``nu``, ~1e-7 of ``||A Omega||``), and its float32 rounding was
    covered by no bound.  Here what remains is the float64 rounding of ``G``, of ``Q``'s orthogonality and of the SVD,
    ``O((n k^1.5 + r k) eps)`` of ``trace(A)`` (the tests' ``_float64_rounding``).  Beyond the sketch, the QR of the
    n x k sketch, one float64 product with ``Z'`` and the SVD of the r x k ``G``: 0.063 s against 0.048 s for the
    stabilized sketch (two float32 products) and 0.48 s for a factorization at r = 3599 and k = 64 on one thread
    (medians of 5 on a shared machine).  Directions below the float32 resolution of the sketch
    (``lam <= sqrt(r) eps32 max(lam)``) are dropped (dropping any keeps ``G G' <= A``).  Empty when ``c`` is zero or
    the SVD fails.
    """
    r = ctx.shape[1]
    w = np.sqrt(c)
    top = float(np.max(w, initial=0.0))
    if not (top > 0.0 and np.isfinite(top)):
        return np.zeros((r, 0)), np.zeros(0)
    omega = np.asfortranarray(np.random.default_rng(seed).standard_normal((r, k)) / np.sqrt(r), dtype=np.float32)
    # the sketch only spans the basis: its scale (w / top, in [0, 1], neither overflows nor underflows float32) and
    # its rounding do not enter G G' <= A
    sketch = (w / top).astype(np.float32)[:, None] * ctx.mulmat32(omega)
    # Householder (SciPy's LAPACK, as every product here): orthonormal to float64 rounding whatever the sketch's rank
    Q = linalg.qr(np.asarray(sketch, dtype=np.float64), mode="economic", overwrite_a=True, check_finite=False)[0]
    G = ctx.rmulmat(w[:, None] * Q)
    try:
        U, sig, _ = linalg.svd(G, full_matrices=False, check_finite=False)
    except (linalg.LinAlgError, ValueError):
        return np.zeros((r, 0)), np.zeros(0)
    lam = sig * sig
    keep = lam > np.sqrt(r) * np.finfo(np.float32).eps * float(np.max(lam, initial=0.0))
    return np.asfortranarray(U[:, keep]), lam[keep]


class _DiagPrec:
    """Diagonal preconditioner of matrix-free Newton-CG: Jacobi, diag(I + C Z'DZ), or (``Z2`` None) the identity,
    and C sum d for the intercept.

    Jacobi suits a design in its own coordinates (the rows ``X``, :func:`empirical.logistic.fit_l2_logistic`).  A
    reduced design's coordinates are those of a Cholesky factor, whose column norms fall from the first column to
    the last; there the ridge term ``I`` of the Hessian is the better preconditioner (measured on the refit at
    (4800, 4096): 22 and 37 CG iterations with the identity against 21 and 127 with Jacobi, two data models).
    """

    def __init__(self, Z2, d, C, fit_intercept):
        self.fit_intercept = fit_intercept
        self.inv_w = 1.0 if Z2 is None else 1.0 / (1.0 + C * gemv(Z2, d, trans=True).astype(np.float64))
        self.inv_b = 1.0 / max(C * d.sum(), 1e-300) if fit_intercept else 0.0

    def solve(self, vw, vb):
        return self.inv_w * vw, self.inv_b * vb


def _unit(v):
    """``v`` divided by its largest magnitude (1 for a zero vector), as float32, and that magnitude: float32
    products of the unit vector neither overflow nor underflow whatever the scale of ``v`` (large C)."""
    scale = float(np.max(np.abs(v), initial=0.0)) or 1.0
    return (v / scale).astype(np.float32), scale


def _hessvec(ctx, d, C, vw, vb):
    """The Hessian times (vw, vb), with float32 products with the design (CG directions, not gradients)."""
    v32, scale = _unit(np.append(vw, vb))
    t = d * (ctx.mul32(v32[:-1]) + v32[-1]).astype(np.float64)
    t32, t_scale = _unit(t)
    return vw + (C * scale * t_scale) * ctx.rmul32(t32).astype(np.float64), C * scale * t.sum()


def _pcg(ctx, d, C, gw, gb, prec, fit_intercept, rtol, maxit, atol=0.0, pg=None):
    """Solve H x = g by preconditioned CG to ||residual|| <= max(rtol ||g||, atol).

    ``pg``: ``prec.solve(gw, gb)`` when the caller has it (the certificate's estimate), saving one application.
    Returns (xw, xb, iterations, converged, residual norm)."""
    xw = np.zeros_like(gw)
    xb = 0.0
    rw, rb = gw.copy(), (gb if fit_intercept else 0.0)
    zw, zb = prec.solve(rw, rb) if pg is None else pg
    pw, pb = zw.copy(), zb
    rz = rw @ zw + rb * zb
    g2 = rn = np.sqrt(gw @ gw + gb * gb)
    for it in range(1, maxit + 1):
        Hw, Hb = _hessvec(ctx, d, C, pw, pb)
        if not fit_intercept:
            Hb = 0.0
        pHp = pw @ Hw + pb * Hb
        if not (np.isfinite(pHp) and pHp > 0.0 and np.isfinite(rz)):  # float32 products lost the curvature
            return xw, xb, it, False, rn
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
    validation design ``Zv``, a float32 copy for CG products, row norms, the cached preconditioner.

    Parameters
    ----------
    Z : ndarray (n, p) or None
        Training design (float64) the solvers fit on (None: given by ``tri``).
    Zv : ndarray (n_val, p), optional
        Validation design in the same coordinates (its row norms feed the validation-sign certificate).
    tri : TriangularFactor or StackedFactor, optional
        The structure of ``Z`` (:attr:`empirical.logistic.ReducedDesign.tri`, :mod:`empirical.logistic._factors`):
        products with ``Z`` and the preconditioner's Gram then read half the numbers.
    """

    def __init__(self, Z, Zv=None, tri=None):
        self._Z = Z
        self.Zv = Zv
        self.tri = tri
        self.shape = Z.shape if tri is None else tri.shape
        # float32 copies for CG products only (directions, not gradients)
        if tri is None:
            self.Z32, self.tri32 = Z.astype(np.float32), None
            row_norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
        else:
            self.Z32, self.tri32 = None, tri.astype(np.float32)
            row_norms = tri.row_norms()
        self.R = float(np.sqrt(np.max(row_norms) ** 2 + 1.0)) if self.shape[0] else 1.0
        self.zv_norm = np.sqrt(np.einsum("ij,ij->i", Zv, Zv)) if Zv is not None else None
        self.prec = None
        self.Z2 = None  # squared float32 design (Jacobi preconditioner of matrix-free Newton-CG on a dense design)
        self.matrix_free_failed = False  # matrix-free CG has needed more than matrix_free_max_cg iterations
        self.matrix_free_max_cg = 60  # about the cost of one preconditioner factorization when r is ~ 500+

    @classmethod
    def from_design(cls, design, validation=True):
        """The context of a :class:`~empirical.logistic.ReducedDesign` (its triangular structure when it has one;
        ``validation=False``: without its validation rows)."""
        return cls(design.dense, design.Zv if validation else None, design.tri)

    @property
    def Z(self):
        """The dense design (built from the triangular structure on first use: only the QR fallback needs it)."""
        if self._Z is None:
            self._Z = self.tri.dense()
        return self._Z

    def mul(self, a):
        """``Z a`` (float64)."""
        return gemv(self.Z, a) if self.tri is None else self.tri.matvec(a)

    def rmul(self, t):
        """``Z' t`` (float64)."""
        return gemv(self.Z, t, trans=True) if self.tri is None else self.tri.rmatvec(t)

    def mul32(self, v):
        """``Z v`` in float32 (``v`` float32)."""
        return gemv(self.Z32, v) if self.tri is None else self.tri32.matvec(v)

    def rmul32(self, t):
        """``Z' t`` in float32 (``t`` float32)."""
        return gemv(self.Z32, t, trans=True) if self.tri is None else self.tri32.rmatvec(t)

    def mulmat32(self, V):
        """``Z V`` in float32 (``V`` (r, k) float32: a block of vectors, one level-3 product)."""
        return gemm(self.Z32, V) if self.tri is None else self.tri32.matmat(V)

    def rmulmat(self, T):
        """``Z' T`` in float64 (``T`` (n, k)): one level-3 product (the low-rank preconditioner's factor)."""
        return gemm(self._Z, T, trans=True) if self.tri is None else self.tri.rmatmat(T)


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


def _drifted(drift, z) -> bool:
    return drift > _DRIFT_FACTOR * _EPS * (1.0 + float(np.max(np.abs(z), initial=0.0)))


def _val_norm(ctx, C, fit_intercept):
    """Estimate of ||(z_v, 1)||_{H^-1} for every validation row: ||z_v||^2 + (1 + ||u|| ||z_v||)^2 / s,
    with u = H_ww^-1 h and s the intercept's Schur complement taken from the stale factor (s rescaled
    to the current C)."""
    if not fit_intercept:
        return ctx.zv_norm
    prec = ctx.prec
    if prec.singular:
        return np.full_like(ctx.zv_norm, np.inf)
    un = np.sqrt(prec.u @ prec.u)
    return np.sqrt(ctx.zv_norm**2 + (1.0 + un * ctx.zv_norm) ** 2 / (prec.s * C / prec.C))


def newton_pcg(ctx, y, C, a, b, *, fit_intercept=True, tol=1e-10, max_iter=100, pcg_rtol=1e-3, max_pcg=None,
               yv=None, safety=SAFETY, matrix_free=False, factor=True, z0=None, min_newton=1,
               polish=0) -> OptimizeResult:
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
    polish : int, default=0
        Newton steps taken after the gradient first meets ``tol`` (within ``max_iter``).  An inexact step only just
        crosses ``tol``, and where the Hessian is ill-conditioned (an intercept nearly in the span of the rows) the
        coefficients are then ``H^-1 grad`` from the minimizer, ~1e-9 relative on real hidden states; one more step
        lands far inside ``tol`` (the error is multiplied by ``pcg_rtol``), as an exact Newton step does.  For a fit
        whose coefficients are the product (the refit), not the certified path.
    max_pcg : int, optional
        CG iterations before the stale preconditioner is refactored at the current Hessian (default 8
        when n >= 2r, else 12: a factorization costs ~r^3/3 flops, a CG iteration ~4nr).
    yv : ndarray (m,), optional
        Validation labels: stop as soon as every validation logit's sign is certified (status 6).
    safety : float
        Factor on the certification bound (validation logit error <= safety * decrement * ||(z_v, 1)||_{H^-1}).
    matrix_free : bool
        (only without ``yv``) solve the Newton systems by diagonally preconditioned CG (Jacobi on a dense design,
        the identity on a triangular one: :class:`_DiagPrec`), O(nr) per iteration and no factorization; when CG
        needs more than ``ctx.matrix_free_max_cg`` iterations, switch to the stale Cholesky preconditioner or,
        with ``factor=False``, stop with status 7 (the caller continues with a factorization).
    factor : bool
        Allow factorizing a preconditioner.
    z0 : ndarray (n,), optional
        Train logits ``Z a + b`` when already known (saves one pass over ``Z``).
    min_newton : int
        Newton steps taken before certification is tried.

    Returns
    -------
    OptimizeResult
        ``coef`` (r,), ``intercept``, ``nit``, ``grad_norm``, ``success`` (status 0 or 6:
        :data:`~empirical.common.failures.SUCCESS`), ``status`` and
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
    Zv = ctx.Zv
    if max_pcg is None:
        # CG iterations before refactoring the preconditioner: a factorization costs ~r^3/3 flops and a
        # CG iteration ~4 n r, so refactor sooner when n >> r (measured: 8 vs 12 saves ~25% of the path
        # at n = 4 r, and costs up to 10% at n ~ r); a triangular design's factorization costs a third of the
        # syrk (lauum), so 6 there (measured at (3600, 1200, 4096), three data models: 12-29% faster than 12)
        max_pcg = 6 if ctx.tri is not None else 8 if ctx.shape[0] >= 2 * ctx.shape[1] else 12
    if ctx.prec is not None:
        ctx.prec = ctx.prec.at(C)  # a low-rank preconditioner follows C; a factor stays as it was made
        if not ctx.prec.usable:
            ctx.prec = None
    z = ctx.mul(a) + b if z0 is None else z0
    nit = n_fact = n_cg = 0
    certified = False
    status = ITERATION_LIMIT
    val_logits = gemv(Zv, a) + b if (yv is not None) else None
    loss, residuals, d = loss_terms(z, y)
    # bound on |z - (Z a + b)| from updating z step by step (rounding: eps x the magnitudes added); z is recomputed
    # before a verdict only when the bound could matter (steps of very different sizes: large C far from the
    # optimum), so the common path keeps the saving of the extrapolated / updated logits
    drift = 0.0 if z0 is None else 16 * _EPS * float(np.max(np.abs(z0), initial=0.0))  # extrapolated logits
    while True:
        pg = None  # the stale preconditioner applied to this gradient, when the certificate computes it
        gw = a + C * ctx.rmul(residuals)
        gb = C * residuals.sum() if fit_intercept else 0.0
        w_norm = np.sqrt(a @ a)
        gnorm = np.sqrt(gw @ gw + gb * gb) / max(1.0, w_norm)
        if gnorm <= tol:
            if _drifted(drift, z):
                # success is decided on logits recomputed from (a, b): after steps of very different sizes
                # the updated z can drift from Z a + b by more than tol
                z, drift = ctx.mul(a) + b, 0.0
                loss, residuals, d = loss_terms(z, y)
                continue
            if polish <= 0 or nit >= max_iter:
                status = CONVERGED
                break
            polish -= 1
        if yv is not None and ctx.prec is not None:
            # certificate: nu_stale = ||g||_{P^-1} (stale preconditioner P ~ Hessian) estimates the Newton
            # decrement; inside the self-concordance region (R nu <= 0.1) the minimizer lies within
            # ~1.3 nu (Hessian norm), so each validation logit moves by at most 1.3 nu ||(z_v,1)||_{H^-1}
            pg = pw, pb = ctx.prec.solve(gw, gb)
            nu_stale = np.sqrt(max(gw @ pw + gb * pb, 0.0))
            if ctx.R * nu_stale <= RADIUS and (nit >= min_newton or nu_stale <= 1e-7 * max(1.0, w_norm)):
                val_norm = _val_norm(ctx, C, fit_intercept)
                if np.all(np.abs(val_logits) > safety * DISTANCE * nu_stale * val_norm):
                    if _drifted(drift, z):  # nu_stale too is taken at the recomputed logits
                        z, drift = ctx.mul(a) + b, 0.0
                        loss, residuals, d = loss_terms(z, y)
                        continue
                    certified = True
                    status = SIGNS_CERTIFIED
                    break
        if nit >= max_iter:
            status = ITERATION_LIMIT
            break
        use_matrix_free = matrix_free and yv is None and not ctx.matrix_free_failed
        if use_matrix_free:
            if ctx.Z2 is None and ctx.tri is None:
                Z32 = ctx.Z.astype(np.float32) if ctx.Z32 is None else ctx.Z32
                ctx.Z2 = Z32 * Z32
            jac = _DiagPrec(ctx.Z2, d, C, fit_intercept)  # the identity on a triangular design (Z2 None)
            dw, db, its, ok, rnorm = _pcg(ctx, d, C, gw, gb, jac, fit_intercept, pcg_rtol,
                                          ctx.matrix_free_max_cg)
            n_cg += its
            if not ok:
                ctx.matrix_free_failed = True
                use_matrix_free = False
                if not factor:
                    status = CG_EXHAUSTED
                    break
        fresh = False
        if ctx.prec is None and not use_matrix_free:
            ctx.prec = _Precond(ctx, d, C, fit_intercept)
            n_fact += 1
            fresh = True
        # CG accuracy: enough for the certificate (residual well below the smallest validation margin
        # over its norm bound) but never looser than an inexact-Newton forcing term of 0.1
        atol = 0.0
        if yv is not None:
            slack = float(np.min(np.abs(val_logits) / _val_norm(ctx, C, fit_intercept))) if len(val_logits) else 1.0
            atol = min(0.1 * gnorm * max(1.0, w_norm), 0.05 * slack / (safety * DISTANCE))
        if not use_matrix_free:
            if fresh and ctx.prec.exact:  # a float64 factor of this very Hessian: the exact Newton step
                (dw, db), ok = ctx.prec.solve(gw, gb), True
            else:
                low_rank = isinstance(ctx.prec, _NystromPrec)
                dw, db, its, ok, rnorm = _pcg(ctx, d, C, gw, gb, ctx.prec, fit_intercept, pcg_rtol,
                                              NYSTROM_MAX_CG if low_rank else max_pcg, atol, pg=pg)
                n_cg += its
                if not ok and low_rank and ctx.prec.rank and not ctx.prec.built_at(C, d):
                    # the weights have drifted from the sketch's: sketch again once before factoring
                    sketch = _NystromPrec(ctx, d, C, fit_intercept, ctx.prec.rank)
                    if sketch.usable:
                        ctx.prec = sketch
                        dw, db, its, ok, rnorm = _pcg(ctx, d, C, gw, gb, sketch, fit_intercept, pcg_rtol,
                                                      NYSTROM_MAX_CG, atol)
                        n_cg += its
        if not ok:
            ctx.prec = _Precond(ctx, d, C, fit_intercept)
            n_fact += 1
            if ctx.prec.exact:
                dw, db = ctx.prec.solve(gw, gb)
            else:
                dw, db, its, ok, rnorm = _pcg(ctx, d, C, gw, gb, ctx.prec, fit_intercept, pcg_rtol,
                                              4 * max_pcg + 20, atol)
                n_cg += its
        nu2 = max(gw @ dw + gb * db, 0.0)
        nu = np.sqrt(nu2)
        dz = ctx.mul(dw) + db
        f = C * loss + 0.5 * w_norm * w_norm
        t = 1.0
        if ctx.R * nu > RADIUS:  # damped phase: exact line search along the Newton direction
            t = _line_min(z, dz, y, C, a, dw)
        for _ in range(HALVINGS):
            a_new = a - t * dw
            z_new = z - t * dz
            loss_new, r_new, d_new = loss_terms(z_new, y)
            f_new = C * loss_new + 0.5 * a_new @ a_new
            if f_new <= f - ARMIJO * t * nu2 or f_new - f <= 1e-14 * max(1.0, abs(f)):
                break
            t *= 0.5
        else:  # no step decreases the objective: the round-off floor (status 2, as for direct_newton)
            status = NO_PROGRESS
            break
        a, b, z, loss, residuals, d = a_new, b - t * db, z_new, loss_new, r_new, d_new
        drift += _EPS * (np.max(np.abs(z_new), initial=0.0) + t * np.max(np.abs(dz), initial=0.0))
        nit += 1
        if yv is not None:
            val_logits = gemv(Zv, a) + b
    return OptimizeResult(coef=a, intercept=float(b), nit=nit, grad_norm=float(gnorm), success=is_success(status),
                          status=status, message=f"{STATUS_MESSAGES[status]}; grad_norm={gnorm:.3e}, nit={nit}",
                          n_factorizations=n_fact, n_cg=n_cg, certified=certified, val_logits=val_logits, logits=z)
