"""Benchmark: the kernel floor of RAPTOR's exact path at one (n_train, n_val, p) - what the algorithm cannot avoid.

It times, with the library's own objects (``reduce_design``, the triangular and stacked designs of
``empirical.logistic._factors``, the preconditioner of ``empirical.logistic._pcg``), on two Gaussian classes, each
kernel the certified path and its refit must run at least once, and adds them up the way one fit uses them:

* the reduction: standardizing the rows, the Gram blocks ``X X'`` and ``X Xv'``, the Cholesky factor of ``X X'``
  (with the centring deflation, as ``reduce_design`` makes it) and the triangular solve that maps the validation
  rows;
* the path, with the fewest operations a grid point can take (one Newton step, one CG iteration): two float64
  gradient products ``Z' r``, one float64 step product ``Z dw``, one validation product ``Zv a``, two
  preconditioner solves (the certificate's, which also starts CG, and the one after the step), one float32
  Hessian product; times the 100 grid points, plus one preconditioner factorization (``lauum`` + ``potrf``);
* the refit: the extension of the design (``Xv Xv'``, ``Zv Zv'``, a pivoted Cholesky factor) and one Newton step
  with one CG iteration preconditioned by the ridge term (no factorization: at small C* the refit makes none).
  The factorization of the stacked design, which a refit at larger C* adds, is timed and printed, not counted.

``--dual`` also times the two kernels that a dual-space Newton-CG would put in their place (docs/probe.md, "The
one-thread goal on the spiked model against the floor"): the product with the preconditioned dual operator
``M v = v + s * (K (s * v))`` (one ``symv`` over the float32 Gram ``K = X X'`` instead of the primal Hessian
product's two ``trmv`` over the triangular design) and the factorization of ``I + S K S`` (a scaling and one
``potrf``, no ``lauum``).  Neither is part of the floor.

Measured floors are the medians over ``--repeats``; compare them with ``RaptorProbe()`` and the paper's loop of
``benchmarks/probe_path.py`` at the same shape and threads.

Usage::

    python benchmarks/probe_floor.py --shape 3600,1200,4096 --threads 1 2 [--dual]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.linalg import blas, lapack
from threadpoolctl import threadpool_limits
from timing import median_time

from empirical.logistic import reduce_design
from empirical.logistic._design import _gram_factor, extend_design
from empirical.logistic._factors import gemv
from empirical.logistic._pcg import PathContext, _hessvec, _Precond
from empirical.numerics import standardize, standardize_stats

GRID_POINTS = 100


def _median(fn, repeats):
    """Median seconds of `repeats` calls (the benchmarks' shared `timing.median_time`)."""
    return median_time(fn, repeats)[0]


def _dual_product(K32, s, v):
    """``v + s * (K (s * v))`` with a float32 ``symv`` (the dual operator's product, for ``--dual``)."""
    u = (s * v).astype(np.float32)
    return v + s * blas.ssymv(1.0, K32, u, lower=1).astype(np.float64)


def _dual_factor(K32, s):
    """The float32 Cholesky factor of ``I + S K S`` (the dual preconditioner, for ``--dual``)."""
    s32 = s.astype(np.float32)
    M = K32 * s32[:, None]
    M *= s32[None, :]
    M[np.diag_indices(len(s))] += 1.0
    return lapack.spotrf(M, lower=1, clean=0, overwrite_a=1)


def kernels(n_train, n_val, p, repeats=5, seed=0, dual=False):
    """Seconds of each kernel (median over ``repeats``) at the shape, on two Gaussian classes (``dual``: and the
    dual-space kernels of the module docstring, named ``dual: ...``)."""
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((n_train + n_val, p))
    Htr, Hv = H[:n_train], H[n_train:]
    mu, s = standardize_stats(Htr)
    X, Xv = standardize(Htr, mu, s), standardize(Hv, mu, s)
    design = reduce_design(X, Xv, check_input=False)
    ctx = PathContext.from_design(design)
    r = design.rank
    a, d = rng.standard_normal(r) * 1e-3, np.full(n_train, 0.2)
    t, g = rng.standard_normal(n_train), rng.standard_normal(r)
    prec = _Precond(ctx, d, 1e-2, True)
    full = extend_design(design, X, Xv)
    full_ctx = PathContext.from_design(full, validation=False)
    af, df = rng.standard_normal(full.rank) * 1e-3, np.full(n_train + n_val, 0.2)
    K = X @ X.T
    KvT = X @ Xv.T
    val_map = _gram_factor(K, True)[2]
    k = {
        "standardize": _median(lambda: (standardize(Htr, mu, s), standardize(Hv, mu, s)), repeats),
        "gram X X'": _median(lambda: X @ X.T, repeats),
        "gram X Xv'": _median(lambda: X @ Xv.T, repeats),
        "cholesky of X X'": _median(lambda: _gram_factor(K, True), repeats),
        "validation map (trsm)": _median(lambda: val_map(KvT.copy()), repeats),  # (it overwrites its argument)
        "float64 Z a": _median(lambda: ctx.mul(a), 5 * repeats),
        "float64 Z' t": _median(lambda: ctx.rmul(t), 5 * repeats),
        "float64 Zv a": _median(lambda: gemv(ctx.Zv, a), 5 * repeats),
        "preconditioner solve": _median(lambda: prec.solve(g, 0.1), 5 * repeats),
        "float32 Hessian product": _median(lambda: _hessvec(ctx, d, 1e-2, g, 0.1), 5 * repeats),
        "preconditioner factorization": _median(lambda: _Precond(ctx, d, 1e-2, True), repeats),
        "refit: design extension": _median(lambda: extend_design(design, X, Xv), repeats),
        "refit: factorization": _median(lambda: _Precond(full_ctx, df, 1e-2, True), repeats),
        "refit: Newton step products": _median(lambda: (full_ctx.mul(af), full_ctx.rmul(df), full_ctx.mul(af),
                                                        full_ctx.mul32(af.astype(np.float32)),
                                                        full_ctx.rmul32(df.astype(np.float32))), repeats),
    }
    if dual:
        K32 = np.asfortranarray(K, dtype=np.float32)
        sd = np.sqrt(1e-2 * d)
        k["dual: operator product (symv)"] = _median(lambda: _dual_product(K32, sd, t), 5 * repeats)
        k["dual: preconditioner factorization (scale + potrf)"] = _median(lambda: _dual_factor(K32, sd), repeats)
    return k


def floor(k):
    """The floor of one fit (s) from the kernel seconds ``k``: (reduction, path, refit, total)."""
    reduction = (k["standardize"] + k["gram X X'"] + k["gram X Xv'"] + k["cholesky of X X'"]
                 + k["validation map (trsm)"])
    per_point = (2 * k["float64 Z' t"] + k["float64 Z a"] + k["float64 Zv a"] + 2 * k["preconditioner solve"]
                 + k["float32 Hessian product"])
    path = GRID_POINTS * per_point + k["preconditioner factorization"]
    refit = k["refit: design extension"] + k["refit: Newton step products"]  # (no factorization: see the docstring)
    return reduction, path, refit, reduction + path + refit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="3600,1200,4096", help="n_train,n_val,p")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dual", action="store_true", help="also time the dual-space kernels (not in the floor)")
    ap.add_argument("--json", help="also write the kernels and floors to this JSON file")
    args = ap.parse_args(argv)
    shape = tuple(int(v) for v in args.shape.split(","))
    out = {}
    for threads in args.threads:
        with threadpool_limits(threads):
            k = kernels(*shape, repeats=args.repeats, dual=args.dual)
        reduction, path, refit, total = floor(k)
        out[threads] = dict(kernels_s=k, reduction_s=reduction, path_s=path, refit_s=refit, total_s=total)
    print(f"| kernel at {shape} | " + " | ".join(f"{t} thread(s), ms" for t in args.threads) + " |")
    print("|---|" + "---|" * len(args.threads))
    for name in out[args.threads[0]]["kernels_s"]:
        print(f"| {name} | " + " | ".join(f"{1e3 * out[t]['kernels_s'][name]:.2f}" for t in args.threads) + " |")
    for part in ("reduction_s", "path_s", "refit_s", "total_s"):
        print(f"| **floor: {part[:-2]}** (s) | " + " | ".join(f"{out[t][part]:.2f}" for t in args.threads) + " |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


if __name__ == "__main__":
    main()
