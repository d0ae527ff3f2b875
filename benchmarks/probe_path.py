"""Benchmark: RAPTOR's certified exact path vs the paper's scikit-learn loop (same run, same data).

For each (n_train, n_val, p) and data model it times (data models, ``--cases``):

* ``noisy`` / ``separable``: synthetic hidden-state-like matrices (low-rank factors + isotropic noise + a few
  large-variance, offset outlier dimensions; class signal a mean shift along a random direction, of norm 1 / 3);
* ``factor``: a rank-32 factor model plus isotropic noise, labels drawn from a logistic teacher in the factor span;
* ``spiked``: a spiked power-law covariance (eigenvalues ~ k^-1 plus three spikes, random eigenbasis), labels drawn
  from a logistic teacher;
* ``gauss``: two Gaussian classes N(+-mu/2, I) with ||mu|| = 1 (separation 1), balanced;

the last three are the data models of the issue on probes at our users' scale.  It times

* ``reference``: the paper's procedure - scikit-learn lbfgs ``warm_start`` loop over
  ``np.logspace(-4, 2, 100)`` at default tolerance + refit at the chosen C
  (``RaptorProbe(solver="paper")``; same standardization and fold-back);
* ``ours``: ``RaptorProbe()`` (certified exact path + tight refit);
* ``gram``: one Gram matrix of the train+val rows (``X X'`` if n < p, else ``X'X``) - the lower-bound kernel.

Medians over ``--repeats`` interleaved runs.  Exactness is checked against a tightly converged
reference (``fit_l2_logistic(method="direct")``: direct Newton, independent of the path code, at tol 1e-10 for every C,
warm-started): number of grid points whose
validation accuracy differs, whether the selected C agrees, and the refit's relative coefficient
error; the same comparison is reported for the paper's (unconverged) loop.

Usage::

    python benchmarks/probe_path.py                 # all four shapes, both cases, 5 repeats, 1 thread
    python benchmarks/probe_path.py --quick         # small shapes, 2 repeats
    python benchmarks/probe_path.py --threads 2 --shapes 600,200,576
    python benchmarks/probe_path.py --shapes 3600,1200,4096 --cases factor spiked gauss --repeats 3
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from empirical import RaptorProbe
from empirical.logistic import fit_l2_logistic
from empirical.testing import synthetic_hidden_states

SHAPES = [(600, 200, 576), (2400, 800, 576), (600, 200, 4096), (2400, 800, 4096)]


def _logistic_labels(rng, logits):
    return (rng.random(len(logits)) < 1.0 / (1.0 + np.exp(-logits))).astype(int)


def _split(X, y, n_train):
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def factor_teacher(n_train, n_val, p, seed=0, rank=32):
    """Rank-32 factors (loadings of scale 3) plus unit isotropic noise; labels from a logistic teacher in the factor
    span whose logits have unit root-mean-square times 2."""
    rng = np.random.default_rng(seed)
    n = n_train + n_val
    loadings = 3.0 * rng.standard_normal((p, rank))
    X = rng.standard_normal((n, rank)) @ loadings.T + rng.standard_normal((n, p))
    beta = loadings @ rng.standard_normal(rank)
    beta /= np.linalg.norm(X @ beta) / np.sqrt(n)
    return _split(X, _logistic_labels(rng, 2.0 * (X @ beta)), n_train)


def spiked_power_law_teacher(n_train, n_val, p, seed=0, alpha=1.0, spikes=(50.0, 20.0, 10.0)):
    """Covariance with eigenvalues ~ k^-alpha (trace p) plus three spikes in a random orthonormal basis; labels from
    a logistic teacher (random direction, logits of root-mean-square 3)."""
    rng = np.random.default_rng(seed)
    n = n_train + n_val
    k = np.arange(1, p + 1, dtype=float)
    eig = p * k**-alpha / np.sum(k**-alpha)
    eig[:len(spikes)] += spikes
    basis, _ = np.linalg.qr(rng.standard_normal((p, p)))
    X = (rng.standard_normal((n, p)) * np.sqrt(eig)) @ basis.T
    beta = rng.standard_normal(p)
    beta /= np.linalg.norm(X @ beta) / np.sqrt(n)
    return _split(X, _logistic_labels(rng, 3.0 * (X @ beta)), n_train)


def two_gaussians(n_train, n_val, p, seed=0, separation=1.0):
    """Two balanced classes N(+-mu/2, I_p), ||mu|| = separation."""
    rng = np.random.default_rng(seed)
    n = n_train + n_val
    y = rng.permutation(np.arange(n) % 2)
    mu = rng.standard_normal(p)
    mu *= separation / np.linalg.norm(mu)
    X = rng.standard_normal((n, p)) + np.outer(2 * y - 1, mu / 2)
    return _split(X, y, n_train)


#: data model name -> (n_train, n_val, p, seed) -> (H_train, y_train, H_val, y_val)
CASES = {
    "noisy": lambda n_train, n_val, p, seed: synthetic_hidden_states(n_train, n_val, p, 1.0, seed=seed),
    "separable": lambda n_train, n_val, p, seed: synthetic_hidden_states(n_train, n_val, p, 3.0, seed=seed),
    "factor": factor_teacher,
    "spiked": spiked_power_law_teacher,
    "gauss": two_gaussians,
}


def tight_reference(Htr, ytr, Hv, yv, Cs, C_refit=None):
    mu, s = Htr.mean(0), Htr.std(0)
    s[s == 0] = 1
    X, Xv = (Htr - mu) / s, (Hv - mu) / s
    y_signed, yv_signed = 2.0 * ytr - 1, 2.0 * yv - 1
    acc, w, b = [], None, 0.0
    for C in Cs:
        r = fit_l2_logistic(X, y_signed, C, fit_intercept=True, w0=w, b0=b, tol=1e-10, method="direct")
        w, b = r.coef, r.intercept
        acc.append(np.mean(np.where(Xv @ w + b > 0, 1.0, -1.0) == yv_signed))
    acc = np.array(acc)
    best = np.flatnonzero(acc == acc.max())[0]
    C_ref = Cs[best] if C_refit is None else C_refit
    r = fit_l2_logistic(np.vstack([X, Xv]), np.r_[y_signed, yv_signed], C_ref, fit_intercept=True, tol=1e-10,
                         method="direct")
    return acc, Cs[best], r.coef


def time_it(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run(shapes, cases, repeats, threads, check, seed):
    rows = []
    with threadpool_limits(limits=threads):
        info = [{k: d.get(k) for k in ("internal_api", "num_threads", "version")} for d in threadpool_info()]
        print(f"BLAS/OpenMP pools (limited to {threads} thread(s)): {info}")
        for shape in shapes:
            for case in cases:
                Htr, ytr, Hv, yv = CASES[case](*shape, seed)
                Hall = np.vstack([Htr, Hv])
                t_ref, t_ours, t_gram = [], [], []
                for _ in range(repeats):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        dt, ref = time_it(lambda: RaptorProbe(solver="paper").fit(Htr, ytr, X_val=Hv, y_val=yv))
                    t_ref.append(dt)
                    dt, ours = time_it(lambda: RaptorProbe().fit(Htr, ytr, X_val=Hv, y_val=yv))
                    t_ours.append(dt)
                    dt, _ = time_it(lambda: Hall @ Hall.T if shape[2] > shape[0] else Hall.T @ Hall)
                    t_gram.append(dt)
                row = dict(n_train=shape[0], n_val=shape[1], p=shape[2], case=case,
                           ref_s=statistics.median(t_ref), ours_s=statistics.median(t_ours),
                           gram_s=statistics.median(t_gram), C_ours=ours.C_, C_paper=ref.C_,
                           best_val_acc=ours.best_val_accuracy_)
                row["ratio"] = row["ref_s"] / row["ours_s"]
                row["ours_over_gram"] = row["ours_s"] / row["gram_s"]
                if check:
                    acc, C_tight, w_tight = tight_reference(Htr, ytr, Hv, yv, ours.Cs_)
                    row.update(
                        mismatch_ours=int(np.sum(acc != ours.path_val_accuracy_)),
                        mismatch_paper=int(np.sum(acc != ref.path_val_accuracy_)),
                        C_agree_ours=bool(C_tight == ours.C_), C_agree_paper=bool(C_tight == ref.C_),
                        refit_rel_err=float(np.linalg.norm(ours.coef_std_ - w_tight) / np.linalg.norm(w_tight)))
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def print_table(rows):
    print("\n| n_train | n_val | p | case | paper loop (s) | ours (s) | ratio | Gram (s) | ours/Gram |"
          " path mismatches ours / paper | C* agrees ours / paper | refit rel. err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        chk = (f"{r['mismatch_ours']} / {r['mismatch_paper']} | {r['C_agree_ours']} / {r['C_agree_paper']} | "
               f"{r['refit_rel_err']:.1e}") if "mismatch_ours" in r else "- | - | -"
        print(f"| {r['n_train']} | {r['n_val']} | {r['p']} | {r['case']} | {r['ref_s']:.3f} | {r['ours_s']:.3f} | "
              f"{r['ratio']:.1f}x | {r['gram_s']:.3f} | {r['ours_over_gram']:.1f} | {chk} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="*", default=None, help="n_train,n_val,p triples")
    ap.add_argument("--cases", nargs="*", default=["noisy", "separable"], choices=list(CASES), help="data models")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl) for both methods")
    ap.add_argument("--no-check", action="store_true", help="skip the tight-reference exactness check")
    ap.add_argument("--quick", action="store_true", help="small shapes, 2 repeats")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    shapes = SHAPES if not args.shapes else [tuple(int(v) for v in s.split(",")) for s in args.shapes]
    repeats = args.repeats
    if args.quick:
        shapes, repeats = [(300, 100, 288), (300, 100, 1024)], 2
    rows = run(shapes, args.cases, repeats, args.threads, not args.no_check, args.seed)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
