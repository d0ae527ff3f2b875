"""Benchmark: one GCS fit (``GCSProbe.fit``) vs the per-probe route it replaced (same run, same subsets).

A GCS fit solves ``n_probes`` ridge-logistic problems (C = 1, intercept, tol 1e-8) on random
class-balanced subsets of the same standardized training rows and folds them back to raw units.

* ``reference``: the previous ``GCSProbe.fit`` (:func:`empirical.testing.gcs_per_probe_reference`) - one
  :func:`empirical.logistic.fit_l2_logistic` per probe from scratch, the same rng calls in the same order;
* ``ours``: ``GCSProbe.fit`` - :func:`empirical.logistic.fit_l2_logistic_rows` (dual Newton on blocks of
  one Gram matrix of the train rows, every subset started from one fit on all rows).

Both solve the same objective to the same tolerance; the largest relative differences of the probes
(``weights_``), their mean (``mean_``) and the mean intercept are printed with the median seconds per
fit of each and the ratio reference / ours.

Data: hidden-state-like rows (:func:`empirical.testing.synthetic_hidden_states`: correlated low-rank
factors + noise + a few large-variance outlier dimensions, a class mean shift), 600 x 576 like a
SmolLM2 training split, 480-row subsets (the default ``n_samples``).

Usage::

    python benchmarks/gcs_fit.py                  # 100 probes, 3 interleaved repeats, 1 thread
    python benchmarks/gcs_fit.py --probes 20 --repeats 5 --threads 2
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from empirical import GCSProbe
from empirical.testing import gcs_per_probe_reference, synthetic_hidden_states


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl) for both routes")
    ap.add_argument("--shift", type=float, default=1.0, help="class mean shift (larger: nearly separable)")
    args = ap.parse_args(argv)
    X, y, _, _ = synthetic_hidden_states(600, 0, 576, args.shift, seed=0)
    times = {"reference": [], "ours": []}
    with threadpool_limits(args.threads):
        for _ in range(args.repeats):  # interleaved, so load changes hit both routes alike
            t0 = time.perf_counter()
            W, B = gcs_per_probe_reference(X, y, args.probes)
            times["reference"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            gcs = GCSProbe(n_probes=args.probes).fit(X, y)
            times["ours"].append(time.perf_counter() - t0)
    d_w = max(np.abs(a - b).max() / np.abs(b).max() for a, b in zip(gcs.weights_, W))
    d_mean = np.abs(gcs.mean_ - W.mean(axis=0)).max() / np.abs(W.mean(axis=0)).max()
    d_b = abs(gcs.intercept_ - B.mean()) / max(1.0, abs(B.mean()))
    t_ref, t_ours = statistics.median(times["reference"]), statistics.median(times["ours"])
    print(f"GCS fit, {args.probes} probes on 480 of 600 rows, p = 576, {args.threads} thread(s), "
          f"median of {args.repeats}:")
    print(f"  reference (one fit per probe): {t_ref:.2f} s   ours (GCSProbe.fit): {t_ours:.2f} s   "
          f"ratio {t_ref / t_ours:.2f}x")
    print(f"  max relative difference: weights {d_w:.1e}, mean {d_mean:.1e}, intercept {d_b:.1e}")


if __name__ == "__main__":
    main()
