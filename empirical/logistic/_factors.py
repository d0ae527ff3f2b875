"""Structured reduced designs: products with ``Z`` that read half its numbers.

A reduced design built from a Cholesky factor (:func:`empirical.logistic.reduce_design`, n < p) is
``Z = Q [0; T]``: a lower-triangular ``T`` under ``lead`` zero rows, turned by the Householder reflector ``Q`` of
the centring deflation.  The refit's design of the stacked (train; validation) rows
(:func:`empirical.logistic._design.extend_design`) is that design over a block of dense validation rows.  The
Newton-PCG solver (:mod:`empirical.logistic._pcg`) needs four things of a design, which these classes give
without forming ``Z``:

- ``matvec(a) = Z a`` and ``rmatvec(t) = Z' t``: one triangular product (``trmv``: r^2 / 2 numbers read, half a
  dense ``gemv``) and O(n) more;
- ``weighted_gram(c)``: the lower triangle of ``Z' diag(c) Z`` for the preconditioner: one ``lauum`` of the
  triangular ``diag(sqrt(c)) T`` (r^3 / 3 flops, a third of a ``syrk``) and a rank-2 update;
- ``row_norms()`` (the certificate's radius) and ``dense()`` (the QR fallback of the preconditioner, tests).

Each works in the precision of its arrays; ``astype(np.float32)`` gives the copy whose products the conjugate
gradients use.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

__all__ = ["TriangularFactor", "StackedFactor", "gemv", "gemm"]


def gemv(A, x, trans=False):
    """``A @ x`` (``trans``: ``A.T @ x``) by SciPy's BLAS, in ``A``'s precision, without copying ``A``.

    The solvers' hot loop calls SciPy's BLAS (``trmv``, ``trsv``, ``potrf``); numpy ships its own OpenBLAS, whose
    idle threads spin for a while after each call.  Interleaving the two libraries' multi-threaded calls made the
    path ~1.3x *slower* on 2 threads than on 1 (measured at (3600, 1200, 4096)), so every product in the loop goes
    through one library.

    Parameters
    ----------
    A : ndarray of shape (n, r), float32 or float64
        The matrix (C- or Fortran-ordered; neither is copied).
    x : ndarray of shape (r,) (``trans``: (n,))
        The vector, cast to ``A``'s precision.
    trans : bool, default=False
        Multiply by ``A.T``.

    Returns
    -------
    ndarray
        The product, in ``A``'s precision.

    Examples
    --------
    >>> A = np.arange(6.0).reshape(2, 3)
    >>> gemv(A, np.ones(3)), gemv(A, np.ones(2), trans=True)
    (array([ 3., 12.]), array([3., 5., 7.]))
    """
    A = np.asarray(A)
    fn = blas.sgemv if A.dtype == np.float32 else blas.dgemv
    x = np.ascontiguousarray(x, dtype=A.dtype)
    if A.shape[0] == 0 or A.shape[1] == 0:
        return np.zeros(A.shape[1] if trans else A.shape[0], dtype=A.dtype)
    if A.flags.f_contiguous:
        return fn(1.0, A, x, trans=int(trans))
    return fn(1.0, np.ascontiguousarray(A).T, x, trans=int(not trans))  # A.T is Fortran-ordered


def gemm(A, B, trans=False):
    """``A @ B`` (``trans``: ``A.T @ B``) by SciPy's BLAS, in ``A``'s precision, without copying ``A`` (as
    :func:`gemv`, for a block of vectors: the path's low-rank preconditioner's sketch and products).

    Parameters
    ----------
    A : ndarray of shape (n, r), float32 or float64
        The matrix (C- or Fortran-ordered; neither is copied).
    B : ndarray of shape (r, k) (``trans``: (n, k))
        The block, cast to ``A``'s precision (copied to Fortran order when it is not).
    trans : bool, default=False
        Multiply by ``A.T``.

    Returns
    -------
    ndarray of shape (n, k) (``trans``: (r, k))
        The product, in ``A``'s precision.

    Examples
    --------
    >>> A = np.arange(6.0).reshape(2, 3)
    >>> gemm(A, np.ones((3, 1))).ravel(), gemm(A, np.ones((2, 1)), trans=True).ravel()
    (array([ 3., 12.]), array([3., 5., 7.]))
    """
    A = np.asarray(A)
    fn = blas.sgemm if A.dtype == np.float32 else blas.dgemm
    B = np.asfortranarray(B, dtype=A.dtype)
    if A.size == 0 or B.size == 0:
        return np.zeros((A.shape[1] if trans else A.shape[0], B.shape[1]), dtype=A.dtype)
    if A.flags.f_contiguous:
        return fn(1.0, A, B, trans_a=int(trans))
    return fn(1.0, np.ascontiguousarray(A).T, B, trans_a=int(not trans))  # A.T is Fortran-ordered


def _trmv(T, u, trans=0):
    """``T u`` (``trans=1``: ``T' u``) for a lower-triangular ``T``, in its precision."""
    return (blas.strmv if T.dtype == np.float32 else blas.dtrmv)(T, np.ascontiguousarray(u, dtype=T.dtype),
                                                                  lower=1, trans=trans)


@dataclass(frozen=True)
class TriangularFactor:
    """``Z = Q [0; T]``: ``T`` (r, r) lower triangular (Fortran order), ``lead`` (0 or 1) zero rows above it, and
    ``Q = I - beta v v'`` (``beta = 0``: ``Q = I``), so ``Z`` is (lead + r, r).

    Parameters
    ----------
    T : ndarray of shape (r, r)
        Lower-triangular factor (its strict upper triangle is ignored), float64 or float32.
    v : ndarray of shape (lead + r,)
        The reflector's vector (float64).
    beta : float
        The reflector's scale, ``2 / (v'v)``, or 0 for no reflector.
    lead : int
        Zero rows above ``T`` (1 after the centring deflation, else 0).

    Examples
    --------
    >>> from empirical.logistic import reduce_design
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

    def astype(self, dtype) -> TriangularFactor:
        """The same structure with ``T`` in ``dtype`` (the reflector stays float64)."""
        return replace(self, T=np.asfortranarray(self.T, dtype=dtype))

    def dense(self) -> np.ndarray:
        """``Z`` itself (n, r), float64."""
        Z = np.zeros(self.shape)
        Z[self.lead:] = self.T
        if self.beta:
            Z -= np.outer(self.v, self.beta * (self.v @ Z))
        return Z

    def row_norms(self) -> np.ndarray:
        """The Euclidean norms of ``Z``'s rows: row i of ``Q [0; T]`` is ``m_i - beta v_i u``, with ``m_i`` the
        row of ``[0; T]`` and ``u = T' v``."""
        T = np.asarray(self.T, dtype=np.float64)
        sq = np.zeros(self.shape[0])
        sq[self.lead:] = np.einsum("ij,ij->i", T, T)
        if self.beta:
            u = _trmv(T, self.v[self.lead:], trans=1)
            mu = np.zeros(self.shape[0])
            mu[self.lead:] = _trmv(T, u)
            sq += -2.0 * self.beta * self.v * mu + (self.beta * self.v) ** 2 * (u @ u)
        return np.sqrt(np.maximum(sq, 0.0))

    def _reflect(self, t):
        """``Q t`` for a vector or the columns of a matrix ``t`` (``Q`` is symmetric: also ``Q' t``)."""
        return t - np.multiply.outer(self.v, self.beta * (self.v @ t)) if self.beta else t

    def matvec(self, a) -> np.ndarray:
        """``Z a``."""
        u = _trmv(self.T, a)
        if self.lead:
            u = np.concatenate([np.zeros(self.lead, dtype=u.dtype), u])
        return self._reflect(u)

    def rmatvec(self, t) -> np.ndarray:
        """``Z' t``."""
        return _trmv(self.T, self._reflect(t)[self.lead:], trans=1)

    def matmat(self, A) -> np.ndarray:
        """``Z A`` for ``A`` of shape (r, k): one triangular ``trmm`` (level 3: k columns cost far less than k
        ``trmv``), in ``T``'s precision (the reflector's term in float64)."""
        trmm = blas.strmm if self.T.dtype == np.float32 else blas.dtrmm
        U = trmm(1.0, self.T, np.asfortranarray(A, dtype=self.T.dtype), lower=1)
        if self.lead:
            U = np.vstack([np.zeros((self.lead, U.shape[1]), dtype=U.dtype), U])
        return self._reflect(U)

    def rmatmat(self, B) -> np.ndarray:
        """``Z' B`` for ``B`` of shape (n, k), as :meth:`matmat`."""
        trmm = blas.strmm if self.T.dtype == np.float32 else blas.dtrmm
        return trmm(1.0, self.T, np.asfortranarray(self._reflect(B)[self.lead:], dtype=self.T.dtype), lower=1,
                    trans_a=1)

    def weighted_gram(self, c) -> np.ndarray:
        """The lower triangle of ``Z' diag(c) Z`` (c >= 0), (r, r) in Fortran order; the strict upper triangle is 0.

        ``Q diag(c) Q = diag(c) - beta (v g' + g v') + beta^2 (v'g) v v'`` with ``g = c v``, so the product is
        ``T' diag(c[lead:]) T`` (``lauum`` of the triangular ``diag(sqrt(c)) T``) plus a symmetric rank-2 term."""
        T = self.T
        lauum, syr2 = (lapack.slauum, blas.ssyr2) if T.dtype == np.float32 else (lapack.dlauum, blas.dsyr2)
        S = np.asfortranarray(T * np.sqrt(c[self.lead:]).astype(T.dtype)[:, None])
        G, info = lauum(S, lower=1, overwrite_c=1)
        if info != 0:
            raise linalg.LinAlgError(f"lauum failed (info {info})")
        if self.beta:
            g = c * self.v
            tv, tg = _trmv(T, self.v[self.lead:], trans=1), _trmv(T, g[self.lead:], trans=1)
            m = tg - 0.5 * self.beta * float(self.v @ g) * tv
            G = syr2(-self.beta, tv, m.astype(T.dtype), a=G, lower=1, overwrite_a=1)
        return G


@dataclass(frozen=True)
class StackedFactor:
    """``Z = [[Z_top, 0], [E]]``: the rows of a :class:`TriangularFactor` ``top`` (n, r), padded with zero
    columns, over dense rows ``E`` (m, r + k): the refit's design of the stacked (train; validation) rows.

    Parameters
    ----------
    top : TriangularFactor
        The train rows' design (n, r).
    E : ndarray of shape (m, r + k)
        The validation rows' design ``[Zv, L]`` (C-ordered), in the precision of ``top``.

    Examples
    --------
    >>> from empirical.logistic import reduce_design
    >>> from empirical.logistic._design import extend_design
    >>> rng = np.random.default_rng(0)
    >>> X, Xv = rng.standard_normal((6, 20)), rng.standard_normal((3, 20))
    >>> both = extend_design(reduce_design(X, Xv), X, Xv)
    >>> a = rng.standard_normal(both.rank)
    >>> bool(np.allclose(both.tri.matvec(a), both.Z @ a))
    True
    """

    top: TriangularFactor
    E: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        """``Z``'s shape (n + m, r + k)."""
        return (self.top.shape[0] + self.E.shape[0], self.E.shape[1])

    def astype(self, dtype) -> StackedFactor:
        """The same structure with its arrays in ``dtype``."""
        return StackedFactor(self.top.astype(dtype), np.ascontiguousarray(self.E, dtype=dtype))

    def dense(self) -> np.ndarray:
        """``Z`` itself, float64."""
        n, r = self.top.shape
        Z = np.zeros(self.shape)
        Z[:n, :r] = self.top.dense()
        Z[n:] = self.E
        return Z

    def row_norms(self) -> np.ndarray:
        """The Euclidean norms of ``Z``'s rows."""
        E = np.asarray(self.E, dtype=np.float64)
        return np.concatenate([self.top.row_norms(), np.sqrt(np.einsum("ij,ij->i", E, E))])

    def matvec(self, a) -> np.ndarray:
        """``Z a``."""
        a = np.asarray(a, dtype=self.E.dtype)
        top = self.top.matvec(a[:self.top.shape[1]])
        return np.concatenate([top, gemv(self.E, a).astype(top.dtype, copy=False)])

    def rmatvec(self, t) -> np.ndarray:
        """``Z' t``."""
        n, r = self.top.shape
        out = gemv(self.E, t[n:], trans=True)
        out[:r] += self.top.rmatvec(t[:n])
        return out

    def weighted_gram(self, c) -> np.ndarray:
        """The lower triangle of ``Z' diag(c) Z`` (c >= 0): the top's (``lauum``) plus a ``syrk`` of the dense
        rows."""
        n, r = self.top.shape
        dtype = self.E.dtype
        G = np.zeros((self.shape[1],) * 2, dtype=dtype, order="F")
        G[:r, :r] = self.top.weighted_gram(c[:n])
        syrk = blas.ssyrk if dtype == np.float32 else blas.dsyrk
        S = self.E * np.sqrt(c[n:]).astype(dtype)[:, None]
        return syrk(1.0, S.T, trans=0, lower=1, beta=1.0, c=G, overwrite_c=1)  # S' S; S.T is Fortran-ordered
