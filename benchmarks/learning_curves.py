"""Benchmark: one layer's learning-curve prediction (pool model + 10 targets) on one core.

Synthetic Gaussian hidden states at SmolLM2's width (p = 576, rotated power-law covariance, a logistic teacher),
a labelled pool of 400 rows plus 2,800 unlabelled rows.  Times, single-threaded (threadpoolctl), the median over
``--repeats`` of :func:`empirical.probes.estimate_pool_model` (``n_boot`` = 200) followed by
:func:`empirical.probes.learning_curves.predict_learning_curve` at 10 targets (400 .. 3,200), for the
``calibrated`` and ``deconvolved`` teachers.  Goal (issue 25): <= 2 s per layer on one core.

Then one layer of ``raptor plan`` (:func:`empirical.probes.planning.plan_labels`, the 25-point curve up to 64x the
target of 8x the pool) with each forecaster, in the same run: ``spectral`` (the previous default: the pool model with
its bootstrap, the pool's backtest and the theory's curve) against ``capped_power_law`` (the default since issue 54:
the pool model without bootstrap, the pool's subsample curve capped at the theory's ceiling); the ratio of their
medians is printed.  Goal (issue 54): <= 5 s per layer at a pool of 400 on one core.

Run: python benchmarks/learning_curves.py [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from cgmt._spectrum import Spectrum
from empirical.probes import estimate_pool_model
from empirical.probes.learning_curves import predict_learning_curve
from empirical.probes.planning import FORECASTERS, plan_labels
from sims._spectral import sample_spectral

GOAL_SECONDS = 2.0
PLAN_GOAL_SECONDS = 5.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one repeat, calibrated teacher only")
    ap.add_argument("--p", type=int, default=576)
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    p = args.p
    base = Spectrum.power_law(p, 1.0, 2.0, teacher_exponent=0.5)
    U = np.linalg.qr(np.random.default_rng(0).standard_normal((p, p)))[0]
    s = Spectrum.from_eigenpairs(base.eigenvalues, U, U @ (base.teacher_coordinates * np.sqrt(p)))
    X, y = sample_spectral(8 * args.pool, s, 1)
    H, y = X * np.sqrt(p), (y > 0).astype(int)
    targets = np.geomspace(args.pool, 8 * args.pool, 10)
    teachers = ("calibrated",) if args.quick else ("calibrated", "deconvolved")
    repeats = 1 if args.quick else args.repeats
    with threadpool_limits(1):
        estimate_pool_model(H[:100], y[:100], teacher="calibrated", n_boot=0)  # warm-up (compiled kernels)
        for teacher in teachers:
            times = []
            for r in range(repeats):
                t0 = time.perf_counter()
                model = estimate_pool_model(H[:args.pool], y[:args.pool], teacher=teacher,
                                            H_unlabeled=H[args.pool:], random_state=r)
                curve = predict_learning_curve(model, targets)
                times.append(time.perf_counter() - t0)
            t = float(np.median(times))
            print(f"{teacher:12s} p={p} pool={args.pool}: {t:.2f} s per layer (model + 10 targets, one core; goal "
                  f"<= {GOAL_SECONDS:g} s: {'met' if t <= GOAL_SECONDS else 'missed'}); accuracy at 8x "
                  f"{curve.accuracy[-1]:.3f} [{curve.low[-1]:.3f}, {curve.high[-1]:.3f}]")
        medians = {}
        layers = np.stack([H, H])  # plan_labels reads layers 1..L of (L + 1, N, p): one layer
        pool = np.arange(args.pool)
        for forecaster in FORECASTERS[::-1]:
            times = []
            for r in range(repeats):
                t0 = time.perf_counter()
                plan = plan_labels(layers, y, pool, 8 * args.pool, layers=[1], forecaster=forecaster, random_state=r)
                times.append(time.perf_counter() - t0)
            medians[forecaster] = float(np.median(times))
            t = medians[forecaster]
            print(f"raptor plan, {forecaster:16s}: {t:.2f} s per layer (one core; goal <= {PLAN_GOAL_SECONDS:g} s: "
                  f"{'met' if t <= PLAN_GOAL_SECONDS else 'missed'}); accuracy at 8x {plan.predicted_accuracy:.3f} "
                  f"[{plan.low:.3f}, {plan.high:.3f}]")
        print(f"capped_power_law / spectral time: {medians['capped_power_law'] / medians['spectral']:.2f}")


if __name__ == "__main__":
    main()
