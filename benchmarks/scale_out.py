"""Benchmark: the sweeps on a Dask cluster (joblib's dask backend) against the same calls run locally.

Times, in the same run, ``fit_layers`` (RAPTOR on every layer of a hidden-state stack), the
stability protocol (K RAPTOR refits) and ``cgmt.sweep`` three ways: sequential (``n_jobs=1``), local
joblib processes (``n_jobs=2``) and a ``dask.distributed.LocalCluster`` of two single-threaded workers
bound to 127.0.0.1 (``with joblib.parallel_config(backend="dask"): ... n_jobs=-1``); checks that the
results agree, and prints medians and the ratios to the sequential run. A real cluster is the same
code with ``Client("tcp://scheduler:8786")`` instead of the LocalCluster.

Data: synthetic hidden-state-like matrices (``empirical.testing.synthetic_hidden_states``) of SmolLM2's
shape: 30 layers of 1000 x 576, the class signal growing with depth.

Usage::

    python benchmarks/scale_out.py                   # 1000 x 576, 30 layers, 3 repeats
    python benchmarks/scale_out.py --quick           # 400 x 128, 8 layers, 1 repeat
"""
from __future__ import annotations

import argparse
import time

import joblib
import numpy as np
from dask.distributed import Client, LocalCluster
from threadpoolctl import threadpool_limits
from timing import median_time

import cgmt
from empirical.probes import RaptorProbe, fit_layers, stability
from empirical.testing import synthetic_hidden_states


def _data(n, p, layers, seed=0):
    stack, y = [], None
    for layer in range(layers):
        X, y_tr, Xv, y_v = synthetic_hidden_states(n // 2, n // 2, p, shift=0.5 + 0.05 * layer, seed=seed)
        stack.append(np.vstack([X, Xv]))
        y = np.concatenate([y_tr, y_v])
    return np.stack(stack), (y > 0).astype(int)


def _jobs(H, y):
    grid = dict(deltas=np.linspace(0.5, 4, 8), lams=np.logspace(-3, 1, 25), kappas=[1.0, 2.0, 4.0])
    return {
        "fit_layers": lambda n_jobs: fit_layers(H, y, n_jobs=n_jobs, progress=False).summary.test_accuracy.to_numpy(),
        "stability (K=8)": lambda n_jobs: stability(RaptorProbe(), H[len(H) // 2], y, K=8, n_jobs=n_jobs).vectors,
        "cgmt.sweep (600 pts)": lambda n_jobs: cgmt.sweep(**grid, n_jobs=n_jobs, progress=False)["accuracy"].to_numpy(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args(argv)
    n, p, layers, repeats = (400, 128, 8, 1) if args.quick else (1000, 576, 30, 3)
    repeats = args.repeats or repeats
    H, y = _data(n, p, layers)
    jobs = _jobs(H, y)
    rows = []
    with threadpool_limits(1):
        for name, job in jobs.items():
            seq, ref = median_time(lambda: job(1), repeats)
            loc, out_local = median_time(lambda: job(2), repeats)
            rows.append([name, seq, loc, None, np.allclose(out_local, ref, atol=1e-10)])
    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster):
        start = time.perf_counter() - t0
        with joblib.parallel_config(backend="dask"):
            for row, (name, job) in zip(rows, jobs.items()):
                row[3], out = median_time(lambda: job(-1), repeats)
                row[4] = row[4] and np.allclose(out, job(1), atol=1e-10)
    print(f"data: {layers} layers x {n} x {p}; medians of {repeats}; LocalCluster start {start:.1f} s")
    print(f"{'job':24s} {'sequential':>11s} {'joblib x2':>10s} {'dask x2':>9s} {'seq/joblib':>11s} {'seq/dask':>9s} "
          f"agree")
    for name, seq, loc, dsk, agree in rows:
        print(f"{name:24s} {seq:10.2f}s {loc:9.2f}s {dsk:8.2f}s {seq / loc:11.2f} {seq / dsk:9.2f} {agree}")


if __name__ == "__main__":
    main()
