"""Experiment: the path's Newton systems solved by the primal stale-factor CG (the library's) and by a dual-space CG.

The Newton system of the ridge-logistic objective without intercept on a reduced design ``Z`` (n x r, r <= n),
``(I + Z'EZ) x = g`` with ``E = C diag(d)``, has the dual form ``x = g - Z'S M^-1 S Z g``, ``M = I + S K S``,
``S = E^1/2``, ``K = Z Z'``.  A dual CG would take one ``symv`` over the float32 ``K`` per iteration instead of the
primal Hessian product's two ``trmv``, and factor its preconditioner ``I + S0 K S0`` with one ``potrf`` and no
``lauum`` (``benchmarks/probe_floor.py --dual`` times both kernels).  This script measures what the kernels cannot
tell: how many CG iterations and factorizations each needs on the same sequence of Newton systems, under the same
policy (a stale preconditioner until CG needs more than ``--max-cg`` iterations, then a factorization at the current
weights), to the same relative residual of the primal system (the dual's is ``||Z'S r_M||``).

The sequence: the paper's grid of C, warm-started Newton steps (the primal solution advances the iterate) until the
gradient is below 1e-6 relative.  The dual preconditioner is the stale factor of ``M0`` scaled by ``T = (E/E0)^1/2``
(``T M0 T``, so that ``M = T M0 T + I - T^2``: ``--scaling weights``) or by ``(sum E / sum E0)^1/2`` (``scalar``,
the same iterates as none).  Results are in docs/probe.md ("The one-thread goal on the spiked model against the
floor").

Usage::

    python benchmarks/probe_dual_cg.py --case spiked --shape 3600,4096
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from probe_floor import _dual_factor, _dual_product
from probe_path import CASES
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

from empirical.logistic import reduce_design
from empirical.logistic._newton import loss_terms
from empirical.logistic._pcg import PathContext, _pcg, _Precond
from empirical.numerics import standardize, standardize_stats


class PrimalSolver:
    """The library's stale Cholesky-factor preconditioned CG (``_Precond``, ``_pcg``) without intercept."""

    def __init__(self, ctx, rtol, max_cg):
        self.ctx, self.rtol, self.max_cg = ctx, rtol, max_cg
        self.prec, self.factorizations, self.cg, self.seconds = None, 0, 0, 0.0

    def solve(self, d, C, g):
        started = time.perf_counter()
        if self.prec is None:
            self.prec = _Precond(self.ctx, d, C, False)
            self.factorizations += 1
        x, _, its, ok, _ = _pcg(self.ctx, d, C, g, 0.0, self.prec, False, self.rtol, self.max_cg)
        self.cg += its
        if not ok:
            self.prec = _Precond(self.ctx, d, C, False)
            self.factorizations += 1
            x, _, its, ok, _ = _pcg(self.ctx, d, C, g, 0.0, self.prec, False, self.rtol, 4 * self.max_cg + 20)
            self.cg += its
        self.seconds += time.perf_counter() - started
        return x


class DualSolver:
    """CG on ``M y = S Z g`` preconditioned by the stale ``T M0 T``, then ``x = g - Z'S y``."""

    def __init__(self, ctx, K32, rtol, max_cg, scaling="weights"):
        self.ctx, self.K32, self.rtol, self.max_cg, self.scaling = ctx, K32, rtol, max_cg, scaling
        self.L, self.e0, self.factorizations, self.cg, self.seconds = None, None, 0, 0, 0.0

    def _factor(self, e):
        self.L, info = _dual_factor(self.K32, np.sqrt(e))
        if info != 0:
            raise np.linalg.LinAlgError(f"potrf failed (info {info})")
        self.e0 = e.copy()
        self.factorizations += 1

    def _precondition(self, r, T):
        v = blas.strsv(self.L, (r / T).astype(np.float32), lower=1)
        return blas.strsv(self.L, v, lower=1, trans=1, overwrite_x=1).astype(np.float64) / T

    def _cg(self, e, g, maxit):
        S = np.sqrt(e)
        T = np.sqrt(e / self.e0) if self.scaling == "weights" else np.full_like(e, np.sqrt(e.sum() / self.e0.sum()))
        b = S * self.ctx.mul(g)
        gnorm = np.linalg.norm(g)
        yd, r = np.zeros_like(b), b.copy()
        z = self._precondition(r, T)
        p, rz = z.copy(), r @ z
        for it in range(1, maxit + 1):
            q = _dual_product(self.K32, S, p)
            alpha = rz / (p @ q)
            yd += alpha * p
            r -= alpha * q
            if np.linalg.norm(self.ctx.rmul(S * r)) <= self.rtol * gnorm:  # the primal residual: -Z'S r
                return g - self.ctx.rmul(S * yd), it, True
            z = self._precondition(r, T)
            rz_new = r @ z
            p = z + (rz_new / rz) * p
            rz = rz_new
        return None, maxit, False

    def solve(self, d, C, g):
        started = time.perf_counter()
        e = C * d
        if self.L is None:
            self._factor(e)
        x, its, ok = self._cg(e, g, self.max_cg)
        self.cg += its
        if not ok:
            self._factor(e)
            x, its, ok = self._cg(e, g, 4 * self.max_cg + 20)
            self.cg += its
        self.seconds += time.perf_counter() - started
        return x


def compare(X, y, Cs, rtol=1e-3, max_cg=6, scaling="weights", newton_tol=1e-6, max_newton=10):
    """Both solvers on the Newton systems of the path over ``Cs`` (rows ``X`` standardized, labels ``y`` in
    {-1, +1}).  Returns a dict: ``systems``, per solver ``cg``, ``factorizations``, ``factorized_at`` (grid
    indices), ``seconds``, and ``largest_step_difference`` (relative, dual against primal)."""
    design = reduce_design(X)
    ctx = PathContext.from_design(design, validation=False)
    Zd = design.Z
    K32 = np.asfortranarray(Zd @ Zd.T, dtype=np.float32)
    del Zd
    primal, dual = PrimalSolver(ctx, rtol, max_cg), DualSolver(ctx, K32, rtol, max_cg, scaling)
    at = {"primal": [], "dual": []}
    a = np.zeros(ctx.shape[1])
    systems, worst = 0, 0.0
    for k, C in enumerate(Cs):
        for _ in range(max_newton):
            _, res, d = loss_terms(ctx.mul(a), y)
            g = a + C * ctx.rmul(res)
            if np.linalg.norm(g) <= newton_tol * max(1.0, np.linalg.norm(a)):
                break
            before = primal.factorizations, dual.factorizations
            xp, xd = primal.solve(d, C, g), dual.solve(d, C, g)
            for name, solver, n0 in (("primal", primal, before[0]), ("dual", dual, before[1])):
                if solver.factorizations > n0:
                    at[name].append(k)
            worst = max(worst, np.linalg.norm(xd - xp) / np.linalg.norm(xp))
            a = a - xp
            systems += 1
    return {"systems": systems, "largest_step_difference": worst,
            **{name: {"cg": s.cg, "factorizations": s.factorizations, "factorized_at": at[name],
                      "seconds": s.seconds} for name, s in (("primal", primal), ("dual", dual))}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="spiked", choices=sorted(CASES))
    ap.add_argument("--shape", default="3600,4096", help="n_train,p (n_train < p: a reduced design)")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--max-cg", type=int, default=6)
    ap.add_argument("--scaling", choices=["weights", "scalar"], default="weights")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    n, p = (int(v) for v in args.shape.split(","))
    Htr, ytr, _, _ = CASES[args.case](n, 1, p, 0)
    mu, s = standardize_stats(Htr)
    with threadpool_limits(args.threads):
        out = compare(standardize(Htr, mu, s), 2.0 * ytr - 1, np.logspace(-4, 2, 100), args.rtol, args.max_cg,
                      args.scaling)
    print(f"{args.case} {args.shape}, {args.threads} thread(s), rtol {args.rtol}, max CG {args.max_cg}, "
          f"scaling {args.scaling}: {out['systems']} Newton systems, steps agree to "
          f"{out['largest_step_difference']:.1e}")
    print("| solver | CG iterations | factorizations | at grid points | seconds |")
    print("|---|---|---|---|---|")
    for name in ("primal", "dual"):
        r = out[name]
        print(f"| {name} | {r['cg']} | {r['factorizations']} | {r['factorized_at']} | {r['seconds']:.2f} |")
    return out


if __name__ == "__main__":
    main()
