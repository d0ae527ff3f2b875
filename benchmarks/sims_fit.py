"""Replicate fits per second: our exact solver (``sims.fit_ridge_logistic`` -> ``empirical.logistic._solver``)
against scikit-learn ``LogisticRegression(C=1/(delta*lam), fit_intercept=False)`` on the same data,
in the same run, at (n, p) in {(500, 1000), (2000, 1000), (4000, 2000)}.

Matching tolerance: ours stops at Euclidean gradient norm <= 1e-10 of the theory objective
F = (1/n) sum loss + lam/(2p)||beta||^2.  scikit-learn minimises exactly F (its objective with
C = 1/(delta lam) is the mean loss + ||w||^2/(2 C n)) and stops when the largest gradient component is
<= tol, so we pass tol = 1e-10 / sqrt(p), which implies the same Euclidean bound (lbfgs may still stop
earlier on its relative function-decrease test); we print the gradient norm each solver actually
reached on F and its relative distance to our solution.  Both lbfgs (sklearn's default) and
newton-cholesky (sklearn's exact Newton) are timed.  BLAS is limited to one thread for every solver.

Usage: python benchmarks/sims_fit.py [--repeats 3] [--lam 0.1 1.0] [--kappa 2]
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning  # scikit-learn's own fits, timed here
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits
from timing import median_time

from sims._data import sample
from sims._fit import fit_ridge_logistic, objective_gradient

SIZES = [(500, 1000), (2000, 1000), (4000, 2000)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lam", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--kappa", type=float, default=2.0)
    ap.add_argument("--solvers", nargs="+", default=["lbfgs", "newton-cholesky"])
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    header = (f"{'n':>5} {'p':>5} {'lam':>6} | {'ours fits/s':>11} {'grad':>8} | "
              f"{'sklearn':>15} {'fits/s':>8} {'grad':>8} {'rel.diff':>8} | {'ratio':>6}")
    print(header)
    print("-" * len(header))
    ratios = {s: [] for s in args.solvers}
    with threadpool_limits(1):
        for n, p in SIZES:
            for lam in args.lam:
                data = sample(n, p, args.kappa, np.random.SeedSequence([n, p, int(lam * 1000)]))
                t_ours, ours = median_time(lambda: fit_ridge_logistic(data.X, data.y, lam), args.repeats)
                for solver in args.solvers:
                    sk = LogisticRegression(C=p / (lam * n), fit_intercept=False, tol=1e-10 / np.sqrt(p),
                                            max_iter=100_000, solver=solver)
                    t_sk, fitted = median_time(lambda: sk.fit(data.X, data.y), args.repeats)
                    coef = fitted.coef_.ravel()
                    g_sk = np.linalg.norm(objective_gradient(data.X, data.y, coef, lam))
                    rel = np.linalg.norm(coef - ours.coef) / np.linalg.norm(ours.coef)
                    ratio = t_sk / t_ours
                    ratios[solver].append(ratio)
                    print(f"{n:>5} {p:>5} {lam:>6g} | {1/t_ours:>11.2f} {ours.grad_norm:>8.1e} | "
                          f"{solver:>15} {1/t_sk:>8.2f} {g_sk:>8.1e} {rel:>8.1e} | {ratio:>6.2f}x"
                          + ("" if g_sk <= 1e-10 else "  (sklearn stopped above 1e-10)"), flush=True)
    for solver, r in ratios.items():
        print(f"median speed ratio (sklearn {solver} time / ours): {np.median(r):.2f}x "
              f"(min {np.min(r):.2f}x, max {np.max(r):.2f}x)")


if __name__ == "__main__":
    main()
