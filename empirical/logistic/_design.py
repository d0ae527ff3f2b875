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

from ..common.arrays import as_real_array, check_matrix
from ._factors import StackedFactor, TriangularFactor

__all__ = ["ReducedDesign", "reduce_design", "extend_design"]


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
    project : callable or None
        Train logits ``X w`` (w in the row span) -> reduced coordinates ``a`` (when reduced).
    coef_map : callable or None
        ``a`` -> dual coefficients ``c`` with ``w = X' c`` (when reduced).
    tri : TriangularFactor or StackedFactor or None
        The structure of ``Z`` when it came from a Cholesky factor (:mod:`empirical.logistic._factors`): the solvers'
        products use it.
    reduced : bool
        Whether the rows were reduced (n < p, or stacked by :func:`extend_design`); False when ``Z`` is ``X``
        itself.  The design does not store the n x n Gram matrix (104 MB at n = 3600) for the whole fit.

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
    project: Callable | None = None
    coef_map: Callable | None = None
    tri: TriangularFactor | None = None
    reduced: bool = False

    @cached_property
    def Z(self) -> np.ndarray:
        """The reduced train design (n, r), dense."""
        return self.dense if self.dense is not None else self.tri.dense()

    @property
    def rank(self) -> int:
        """Dimension r of the reduced coordinates."""
        return self.tri.shape[1] if self.dense is None else self.dense.shape[1]


def _solve_right_lower_t(L, Bt):
    """``Bt L'^-1`` (= ``(L^-1 Bt')'``) for a lower-triangular ``L``, in the memory of ``Bt`` (Fortran order: no
    copy)."""
    return blas.dtrsm(1.0, L, Bt, side=1, lower=1, trans_a=1, overwrite_b=1)


def _gram_factor(K, centred):
    """Factor K = Z Z' (Z: n x r).  Returns (Z, coef_map, val_map, project, tri) where, for the basis
    ``w = X' coef_map(a)``, ``X w = Z a`` and ``||w|| = ||a||``; ``val_map(X Xv')`` gives ``Zv`` with
    ``Xv w = Zv a`` (a may be a vector or a matrix of column vectors).  ``val_map`` overwrites its argument (a
    C-ordered float64 array of the caller's): ``Zv`` (m, r) is computed in its memory, in Fortran order, with no
    n x m temporary."""
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
        # Q K Q = K - v u' - u v': the rank-2 update of the trailing block's lower triangle in place (syr2; forming
        # the whole Q K Q took three passes and as many n x n temporaries, 0.42 s against 0.04 s at n = 3600)
        # (K is symmetric: the transpose of a row-order copy of the block is the block in Fortran order, and that
        # copy reads rows, not columns: 0.05 s against 0.45 s for asfortranarray at n = 3600)
        QKQ = blas.dsyr2(-1.0, v[1:], u[1:], a=np.ascontiguousarray(K[1:, 1:]).T, lower=1, overwrite_a=1)
        L, info = lapack.dpotrf(QKQ, lower=1, clean=1, overwrite_a=1)
        if info == 0 and ok(L):  # else: not positive definite to working precision (pivoted fallback below)
            def coef_map(a):
                u = np.zeros((n,) + a.shape[1:])
                u[1:] = linalg.solve_triangular(L, a, trans="T", lower=True, check_finite=False)
                return Qmul(u)

            def val_map(KvT):  # Zv = (L^-1 (Q KvT)[1:])': Q by a rank-1 update and L by a right-sided trsm, in place
                Bt = blas.dger(-beta, v @ KvT, v, a=KvT.T, overwrite_a=1)  # (Q KvT)', Fortran order
                return _solve_right_lower_t(L, Bt[:, 1:])

            def project(t):  # least-squares a with Z a = t
                return linalg.solve_triangular(L, Qmul(t)[1:], lower=True, check_finite=False)

            tri = TriangularFactor(np.asfortranarray(L), v, beta, 1)
            return None, coef_map, val_map, project, tri
    else:
        try:
            L = linalg.cholesky(K, lower=True, check_finite=False)
            if ok(L):
                return (None,
                        lambda a: linalg.solve_triangular(L, a, trans="T", lower=True, check_finite=False),
                        lambda KvT: _solve_right_lower_t(L, KvT.T),
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



def _check_rows(Xv, name: str, p: int) -> np.ndarray:
    """Rows of ``p`` features: :func:`check_matrix`, an empty ``(0, p)`` block allowed."""
    rows = np.asarray(as_real_array(Xv, name))
    if rows.ndim == 2 and rows.shape[0] == 0 and rows.shape[1] == p:
        return rows.astype(np.float64)
    rows = check_matrix(rows, name)
    if rows.shape[1] != p:
        raise ValueError(f"{name} must have the {p} features of X, got {rows.shape[1]}")
    return rows


def reduce_design(X, Xv=None, *, check_input=True) -> ReducedDesign:
    """Reduce (X, Xv) to an isometric design of dimension rank(X) (only when n < p).

    Parameters
    ----------
    X : ndarray (n, p)
        Training rows.
    Xv : ndarray (m, p), optional
        Validation rows, mapped into the same coordinates.
    check_input : bool, default=True
        Validate ``X`` and ``Xv`` (same features; no rows allowed).  The path solvers, which
        validated their rows at their boundary, pass False (as scikit-learn's ``check_input``); ``X`` must then be
        a finite float64 matrix.

    Returns
    -------
    ReducedDesign
        When n >= p, ``X`` itself (``back`` is the identity, ``reduced`` is False).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((5, 40))
    >>> X -= X.mean(axis=0)
    >>> d = reduce_design(X)
    >>> d.rank, bool(np.allclose(d.Z @ d.Z.T, X @ X.T))
    (4, True)
    """
    if check_input:  # every array argument, also where n >= p returns them unused (issue 52: a text Xv was kept)
        X = check_matrix(X, "X")
        Xv = None if Xv is None else _check_rows(Xv, "Xv", X.shape[1])
    n, p = X.shape
    if Xv is None:
        Xv = np.empty((0, p))
    if n >= p:
        return ReducedDesign(X, Xv, back=lambda a: a)
    K = X @ X.T
    centred = bool(np.abs(X.sum(axis=0)).max() <= 1e-8 * max(1.0, X.max(), -X.min()) * n)  # no |X| copy
    Z, coef_map, val_map, project, tri = _gram_factor(K, centred)
    if Xv.shape[0]:
        Zv = val_map(X @ Xv.T)  # (val_map overwrites its argument)
    else:
        Zv = np.empty((0, Z.shape[1] if tri is None else tri.shape[1]))
    return ReducedDesign(Z, Zv, back=lambda a: X.T @ coef_map(a), project=project, coef_map=coef_map, tri=tri,
                         reduced=True)



def extend_design(design: ReducedDesign, X, Xv) -> ReducedDesign:
    """Reduced design of the stacked rows (X; Xv) from the train design by a block Cholesky update.

    With ``Z Z' = X X'`` and ``Zv Z' = Xv X'`` (the train design), ``[[Z, 0], [Zv, L]]`` with ``L L' = Xv Xv' -
    Zv Zv'`` (the validation rows' Gram outside the train row span; ``L`` (m, k) from a pivoted Cholesky factor, k
    its numerical rank: k < m when the validation rows are dependent on the train rows, e.g. n + m > p) is an
    isometric design of the stacked rows; a train solution ``a0`` is ``(a0, 0)`` in it.  Costs one m x m Gram and
    pivoted Cholesky factor instead of refactoring all n + m rows, and keeps the train design's triangular
    structure (a :class:`~empirical.logistic._factors.StackedFactor`).

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
    ReducedDesign
        The design of the n + m stacked rows, of rank r + k (no validation rows of its own).

    Raises
    ------
    ValueError
        When ``design`` was not reduced (n >= p: it is ``X`` itself).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, Xv = rng.standard_normal((4, 30)), rng.standard_normal((2, 30))
    >>> both = extend_design(reduce_design(X, Xv), X, Xv)
    >>> both.rank, bool(np.allclose(both.Z @ both.Z.T, np.vstack([X, Xv]) @ np.vstack([X, Xv]).T))
    (6, True)
    >>> inside = extend_design(reduce_design(X, 2 * X[:2]), X, 2 * X[:2])   # rows in the train span: k = 0
    >>> inside.rank
    4
    """
    if design.coef_map is None:
        raise ValueError("extend_design: the design was not reduced (n >= p); fit on the stacked rows directly")
    Zv = design.Zv
    n, r, m = X.shape[0], design.rank, Xv.shape[0]
    Kvv = Xv @ Xv.T
    scale = max(np.trace(Kvv) / max(m, 1), 1e-300) if m else 1.0
    S = Kvv - Zv @ Zv.T
    if m:
        # a pivot of S below 1e-13 x the mean squared validation norm is rounding (the train factor's pivoted
        # fallback uses the same), or below the rounding that an ill-conditioned train factor leaves in Zv Zv'
        # (~ eps cond(K) relative, cond(K) estimated from the factor's diagonal); and there are at most p - r more
        # coordinates
        diag = np.abs(np.diag(design.tri.T)) if design.tri is not None and r else np.ones(1)
        cond = (diag.max() / max(diag.min(), 1e-300)) ** 2
        tol = max(1e-13, 100 * np.finfo(float).eps * cond) * scale
        Lp, piv, k, _ = lapack.dpstrf(S, lower=1, tol=tol)
        # (LAPACK's dpstrf always takes its first pivot, even below tol: count the pivots above it)
        k = min(int(np.sum(np.diag(Lp)[:k] ** 2 > tol)), X.shape[1] - r)
        idx = piv[:k] - 1
        L = np.zeros((m, k))
        L[piv - 1] = np.tril(Lp)[:, :k]  # S = L L' (rows back in the validation order)
        L11 = L[idx]  # lower triangular (k, k)
    else:
        k, idx, L, L11 = 0, np.zeros(0, dtype=int), np.zeros((0, 0)), np.zeros((0, 0))
    coef_map = design.coef_map

    def back(a):
        c2 = np.zeros(m)
        c2[idx] = linalg.solve_triangular(L11, a[r:], trans="T", lower=True, check_finite=False)
        return X.T @ coef_map(a[:r] - Zv.T @ c2) + Xv.T @ c2

    E = np.hstack([Zv, L])
    if design.tri is not None:
        return ReducedDesign(None, np.empty((0, r + k)), back=back, tri=StackedFactor(design.tri, E), reduced=True)
    Zf = np.zeros((n + m, r + k))
    Zf[:n, :r] = design.Z
    Zf[n:] = E
    return ReducedDesign(Zf, np.empty((0, r + k)), back=back, reduced=True)
