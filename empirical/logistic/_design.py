"""Design reduction for the ridge-logistic solver: an isometric copy of the training rows in rank(X) dimensions.

The minimizer of the ridge-logistic objective lies in the span of the training rows, so when
``n < p`` the problem is solved in ``r = rank(X) <= n`` coordinates: the Gram matrix ``K = X X'`` is
factored once (``K = Z Z'``, Cholesky after deflating the constant vector that centring puts in its
null space; pivoted Cholesky as fallback), giving an isometric ``n x r`` design ``Z`` and validation
design ``Zv``; when ``n >= p`` the design is ``X`` itself.  :func:`extend_design` appends validation
rows by a block Cholesky update (the refit on train + validation).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

from ..common.arrays import check_matrix

__all__ = ["ReducedDesign", "reduce_design", "extend_design"]


@dataclass(frozen=True)
class TriangularFactor:
    """The structure of a reduced design built from a Cholesky factor: ``Z = Q [0; T]``.

    ``T`` (r, r) is lower triangular, ``[0; T]`` puts ``lead`` zero rows (0 or 1) above it, and
    ``Q = I - beta v v'`` is the Householder reflector of the centring deflation (``beta = 0``: ``Q = I``).  Products
    with ``Z`` then cost one triangular product (r^2 / 2 numbers read, half a dense product) and two dot products,
    and the weighted Gram ``Z' D Z`` one triangular ``lauum`` (r^3 / 3 flops, a third of a ``syrk``) and a rank-2
    update.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((6, 20))
    >>> X -= X.mean(axis=0)
    >>> design = reduce_design(X)
    >>> a = rng.standard_normal(design.rank)
    >>> bool(np.allclose(design.tri.matvec(a), design.Z @ a))
    True
    """

    T: np.ndarray
    v: np.ndarray
    beta: float
    lead: int

    @property
    def shape(self) -> tuple[int, int]:
        """``Z``'s shape (n, r)."""
        return (self.lead + self.T.shape[0], self.T.shape[1])

    def dense(self) -> np.ndarray:
        """``Z`` itself (n, r)."""
        Z = np.zeros(self.shape)
        Z[self.lead:] = self.T
        if self.beta:
            Z -= np.outer(self.v, self.beta * (self.v @ Z))
        return Z

    def row_norms(self) -> np.ndarray:
        """The Euclidean norms of ``Z``'s rows, without forming it: row i of ``Q [0; T]`` is
        ``m_i - beta v_i u`` with ``m_i`` the row of ``[0; T]`` and ``u = T' v``."""
        sq = np.zeros(self.shape[0])
        sq[self.lead:] = np.einsum("ij,ij->i", self.T, self.T)
        if self.beta:
            u = _tri_rt(self.T, self.v[self.lead:])
            mu = np.zeros(self.shape[0])
            mu[self.lead:] = blas.dtrmv(self.T, u, lower=1)
            sq += -2.0 * self.beta * self.v * mu + (self.beta * self.v) ** 2 * (u @ u)
        return np.sqrt(np.maximum(sq, 0.0))

    def _reflect(self, t):
        return t - (self.beta * (self.v @ t)) * self.v if self.beta else t

    def matvec(self, a, T=None):
        """``Z a`` (``T``: the factor in another precision, e.g. float32 for CG products)."""
        T = self.T if T is None else T
        u = (blas.strmv if T.dtype == np.float32 else blas.dtrmv)(T, np.asarray(a, dtype=T.dtype), lower=1)
        if self.lead:
            u = np.concatenate([np.zeros(self.lead, dtype=u.dtype), u])
        return self._reflect(u)

    def rmatvec(self, t, T=None):
        """``Z' t``."""
        return _tri_rt(self.T if T is None else T, self._reflect(t)[self.lead:])

    def weighted_gram(self, c, T=None):
        """The lower triangle of ``Z' diag(c) Z`` (c >= 0), in the precision of ``T`` (Fortran order).

        ``Q diag(c) Q = diag(c) - beta (v g' + g v') + beta^2 (v'g) v v'`` with ``g = c v``, so the product is
        ``T' diag(c_lead:) T`` (``lauum`` of the triangular ``diag(sqrt(c)) T``) plus a symmetric rank-2 term."""
        T = self.T if T is None else T
        lauum, syr2 = (lapack.slauum, blas.ssyr2) if T.dtype == np.float32 else (lapack.dlauum, blas.dsyr2)
        S = np.asfortranarray(T * np.sqrt(c[self.lead:]).astype(T.dtype)[:, None])
        G, info = lauum(S, lower=1, overwrite_c=1)
        if info != 0:
            raise linalg.LinAlgError(f"lauum failed (info {info})")
        if self.beta:
            g = c * self.v
            tv, tg = _tri_rt(T, self.v[self.lead:]), _tri_rt(T, g[self.lead:])
            m = tg - 0.5 * self.beta * float(self.v @ g) * tv
            G = syr2(-self.beta, tv, m.astype(T.dtype), a=G, lower=1, overwrite_a=1)
        return G


def _tri_rt(T, u):
    """``T' u`` for a lower-triangular ``T``."""
    return (blas.strmv if T.dtype == np.float32 else blas.dtrmv)(T, np.ascontiguousarray(u, dtype=T.dtype),
                                                                  lower=1, trans=1)


@dataclass(frozen=True)
class ReducedDesign:
    """Isometric low-dimensional copy of a training design (built complete by :func:`reduce_design`).

    ``Z`` (n, r) and ``Zv`` (m, r) satisfy ``Z a = X w`` and ``Zv a = Xv P w`` for ``w = back(a)`` with
    ``||w|| = ||a||`` (P = projection on the training row span, which contains every minimizer).

    Attributes
    ----------
    dense : ndarray or None
        ``Z`` when it is stored dense; None when it is built from ``tri`` on first use of :attr:`Z` (the solvers
        never need it).
    Zv : ndarray
        Reduced validation design.
    back : callable
        Reduced coordinates ``a`` (r,) -> weights ``w`` (p,).
    K : ndarray or None
        ``X X'`` when the design was reduced (n < p), else None (``Z`` is ``X`` itself).
    KvT : ndarray or None
        ``X Xv'`` when reduced with validation rows.
    project : callable or None
        Train logits ``X w`` (w in the row span) -> reduced coordinates ``a`` (when reduced).
    coef_map : callable or None
        ``a`` -> dual coefficients ``c`` with ``w = X' c`` (when reduced).
    tri : TriangularFactor or None
        The triangular structure of ``Z`` (when it came from a Cholesky factor): the solvers' products use it.

    Examples
    --------
    >>> X = np.random.default_rng(0).standard_normal((3, 10))
    >>> design = reduce_design(X)
    >>> a = np.ones(design.rank)
    >>> bool(np.allclose(X @ design.back(a), design.Z @ a)), round(float(np.linalg.norm(design.back(a))), 6)
    (True, 1.732051)
    """

    dense: np.ndarray | None
    Zv: np.ndarray
    back: Callable
    K: np.ndarray | None = None
    KvT: np.ndarray | None = None
    project: Callable | None = None
    coef_map: Callable | None = None
    tri: TriangularFactor | None = None

    @cached_property
    def Z(self) -> np.ndarray:
        """The reduced train design (n, r), dense."""
        return self.dense if self.dense is not None else self.tri.dense()

    @property
    def rank(self) -> int:
        """Dimension r of the reduced coordinates."""
        return self.tri.T.shape[1] if self.dense is None else self.dense.shape[1]


def _gram_factor(K, centred):
    """Factor K = Z Z' (Z: n x r).  Returns (Z, coef_map, val_map, project, tri) where, for the basis
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
                def coef_map(a):
                    u = np.zeros((n,) + a.shape[1:])
                    u[1:] = linalg.solve_triangular(L, a, trans="T", lower=True, check_finite=False)
                    return Qmul(u)

                def val_map(KvT):
                    return linalg.solve_triangular(L, Qmul(KvT)[1:], lower=True, check_finite=False).T

                def project(t):  # least-squares a with Z a = t
                    return linalg.solve_triangular(L, Qmul(t)[1:], lower=True, check_finite=False)

                tri = TriangularFactor(np.asfortranarray(L), v, beta, 1)
                return None, coef_map, val_map, project, tri
        except linalg.LinAlgError:
            pass
    else:
        try:
            L = linalg.cholesky(K, lower=True, check_finite=False)
            if ok(L):
                return (None,
                        lambda a: linalg.solve_triangular(L, a, trans="T", lower=True, check_finite=False),
                        lambda KvT: linalg.solve_triangular(L, KvT, lower=True, check_finite=False).T,
                        lambda t: linalg.solve_triangular(L, t, lower=True, check_finite=False),
                        TriangularFactor(np.asfortranarray(L), np.zeros(n), 0.0, 0))
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

    return Z, coef_map, val_map, project, None



def reduce_design(X, Xv=None, *, K=None, KvT=None, check_input=True) -> ReducedDesign:
    """Reduce (X, Xv) to an isometric design of dimension rank(X) (only when n < p).

    Parameters
    ----------
    X : ndarray (n, p)
        Training rows.
    Xv : ndarray (m, p), optional
        Validation rows, mapped into the same coordinates.
    K, KvT : ndarray, optional
        ``X X'`` and ``X Xv'`` when already known.
    check_input : bool, default=True
        Validate ``X``.  The path solvers, which validated their rows at their boundary, pass False (as
        scikit-learn's ``check_input``); ``X`` must then be a finite float64 matrix.

    Returns
    -------
    ReducedDesign
        When n >= p, ``X`` itself (``back`` is the identity, ``K`` is None).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((5, 40))
    >>> X -= X.mean(axis=0)
    >>> d = reduce_design(X)
    >>> d.rank, bool(np.allclose(d.Z @ d.Z.T, X @ X.T))
    (4, True)
    """
    X = check_matrix(X, "X") if check_input else X
    n, p = X.shape
    if Xv is None:
        Xv = np.empty((0, p))
    if n >= p:
        return ReducedDesign(X, Xv, back=lambda a: a)
    if K is None:
        K = X @ X.T
    centred = bool(np.abs(X.sum(axis=0)).max() <= 1e-8 * max(1.0, np.abs(X).max()) * n)
    Z, coef_map, val_map, project, tri = _gram_factor(K, centred)
    if Xv.shape[0]:
        if KvT is None:
            KvT = X @ Xv.T
        Zv = val_map(KvT)
    else:
        Zv = np.empty((0, Z.shape[1] if tri is None else tri.shape[1]))
    return ReducedDesign(Z, Zv, back=lambda a: X.T @ coef_map(a), K=K, KvT=KvT, project=project,
                         coef_map=coef_map, tri=tri)



def extend_design(design: ReducedDesign, X, Xv) -> ReducedDesign | None:
    """Reduced design of the stacked rows (X; Xv) from the train design by a block Cholesky update.

    With ``Z Z' = X X'`` and ``Zv Z' = Xv X'`` (the train design), ``[[Z, 0], [Zv, Lvv]]`` with
    ``Lvv Lvv' = Xv Xv' - Zv Zv'`` (the validation rows' Gram outside the train row span) is an isometric
    design of the stacked rows; a train solution ``a0`` is ``(a0, 0)`` in it.  Costs one m x m Gram
    and Cholesky instead of refactoring all n + m rows.

    Parameters
    ----------
    design : ReducedDesign
        The reduced train design, built by :func:`reduce_design` with ``Xv`` (so it has ``Zv`` and
        ``coef_map``: only a reduced design, n < p, can be extended).
    X : ndarray of shape (n, p)
        The training rows it was built from.
    Xv : ndarray of shape (m, p)
        The validation rows appended.

    Returns
    -------
    ReducedDesign or None
        The design of the n + m stacked rows (no validation rows of its own), or None when the validation
        rows are (numerically) dependent on the train rows (then the caller refactors from scratch).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, Xv = rng.standard_normal((4, 30)), rng.standard_normal((2, 30))
    >>> both = extend_design(reduce_design(X, Xv), X, Xv)
    >>> both.rank, bool(np.allclose(both.Z @ both.Z.T, np.vstack([X, Xv]) @ np.vstack([X, Xv]).T))
    (6, True)
    """
    Zv = design.Zv
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
    n, r = X.shape[0], design.rank
    coef_map = design.coef_map

    def back(a):
        c2 = linalg.solve_triangular(Lvv, a[r:], trans="T", lower=True, check_finite=False)
        return X.T @ coef_map(a[:r] - Zv.T @ c2) + Xv.T @ c2

    if design.tri is not None:  # [[T, 0], [Zv, Lvv]] is lower triangular, and Q acts on the train rows only
        t = design.tri
        Tf = np.zeros((r + m, r + m), order="F")
        Tf[:r, :r] = t.T
        Tf[r:, :r] = Zv
        Tf[r:, r:] = Lvv
        tri = TriangularFactor(Tf, np.concatenate([t.v, np.zeros(m)]), t.beta, t.lead)
        return ReducedDesign(None, np.empty((0, r + m)), back=back, tri=tri)
    Zf = np.zeros((n + m, r + m))
    Zf[:n, :r] = design.Z
    Zf[n:, :r] = Zv
    Zf[n:, r:] = Lvv
    return ReducedDesign(Zf, np.empty((0, r + m)), back=back)

