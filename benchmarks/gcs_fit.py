"""Benchmark: GCS probes on a shared Gram matrix vs one exact fit per probe (same run, same subsets).

A GCS fit solves ``n_probes`` ridge-logistic problems on random class-balanced subsets of the same
standardized training rows.  ``reference`` calls :func:`empirical.logistic.fit_l2_logistic` on every
subset (what ``GCSProbe`` did before); ``ours`` is :func:`empirical.logistic.fit_l2_logistic_rows`
(dual Newton on blocks of one Gram matrix).  Both solve the same objective to the same tolerance; the
largest relative coefficient difference is printed next to the median times and their ratio.

Data: hidden-state-like synthetic rows (low-rank factors + noise + a few large-variance dimensions, a
mean shift along a random direction), 600 x 576 like the SmolLM2 training split, 480-row subsets.

Usage::

    python benchmarks/gcs_fit.py                 # 20 probes, 5 repeats, 1 thread
    python benchmarks/gcs_fit.py --probes 100 --repeats 3
"""
from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from empirical.logistic import fit_l2_logistic, fit_l2_logistic_rows
from empirical.testing import synthetic_hidden_states
from empirical.validation import standardize_stats

from timing import median_time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    X, y, _, _ = synthetic_hidden_states(600, 0, 576, shift=1.0, seed=0)
    mu, s = standardize_stats(X)
    Xs, ypm = (X - mu) / s, np.where(y > 0, 1.0, -1.0)
    rng = np.random.default_rng(0)
    pos, neg = np.flatnonzero(ypm > 0), np.flatnonzero(ypm < 0)
    subsets = [np.concatenate([rng.choice(pos, 240, replace=False), rng.choice(neg, 240, replace=False)])
               for _ in range(args.probes)]
    with threadpool_limits(args.threads):
        t_ref, ref = median_time(lambda: [fit_l2_logistic(Xs[r], ypm[r], 1.0, fit_intercept=True, tol=1e-8)
                                          for r in subsets], args.repeats)
        t_ours, ours = median_time(lambda: fit_l2_logistic_rows(Xs, ypm, 1.0, subsets, fit_intercept=True, tol=1e-8),
                                   args.repeats)
    err = max(np.abs(a.coef - b.coef).max() / np.abs(b.coef).max() for a, b in zip(ours, ref))
    print(f"{args.probes} probes, 480 of 600 rows, p = 576, {args.threads} thread(s), median of {args.repeats}:")
    print(f"  reference (one fit per probe): {t_ref:.3f} s   ours (shared Gram): {t_ours:.3f} s   "
          f"ratio {t_ref / t_ours:.2f}x   max relative coefficient difference {err:.1e}")


if __name__ == "__main__":
    main()
