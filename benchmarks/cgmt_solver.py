"""Benchmark: cgmt.solve versus a straightforward SciPy implementation of the same equations.

The reference is what a researcher would write: tensor 2-D Gauss-Hermite (numpy), a vectorised
Newton prox, and scipy.optimize.root (hybr, finite-difference Jacobian) on the equations
sigma^2 = 2 delta E[...], alpha = -2 kappa delta E[...], 1 - 1/delta + gamma lam = E[...].

Prints: median time per point cold and warm-started (ours), median time per point (reference),
the speed ratio, agreement between the two, and the wall time of a 100 x 100 (delta, lam) grid at
kappa = 2 on 2 worker processes, with the largest residual on the grid.

Run: python benchmarks/cgmt_solver.py [--quick]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.optimize import root

import cgmt


def _sig(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class ScipyReference:
    def __init__(self, n_gh=100):
        z, w = np.polynomial.hermite_e.hermegauss(n_gh)
        w = w / np.sqrt(2 * np.pi)
        self.z1, self.z2 = np.meshgrid(z, z, indexing="ij")
        self.w = np.outer(w, w)

    def prox(self, v, g):
        eta = v - g * _sig(v)
        for _ in range(60):
            s = _sig(eta)
            eta = eta - (eta + g * s - v) / (1 + g * s * (1 - s))
        return eta

    def equations(self, x, delta, lam, kappa):
        a, s, g = x
        z1, z2, w = self.z1, self.z2, self.w
        v = a * z1 + s * z2
        eta = self.prox(v, g)
        sk = _sig(-kappa * z1)
        dsk = _sig(kappa * z1) * _sig(-kappa * z1)
        se = _sig(eta)
        return [
            s * s - 2 * delta * np.sum(w * sk * (v - eta) ** 2),
            a + 2 * kappa * delta * np.sum(w * dsk * eta),
            1 - 1 / delta + g * lam - np.sum(w * 2 * sk / (1 + g * se * (1 - se))),
        ]

    def solve(self, delta, lam, kappa, x0=(0.5, 1.0, 1.0)):
        sol = root(self.equations, x0, args=(delta, lam, kappa), method="hybr", options={"xtol": 1e-12})
        return sol


def _median_time(fn, points, repeat=1, clock=time.process_time):
    """Median over points of the best-of-``repeat`` time (CPU time by default: the machine is shared)."""
    ts = []
    out = []
    for i, p in enumerate(points):
        best = np.inf
        for _ in range(repeat):
            t = clock()
            r = fn(i, *p)
            best = min(best, clock() - t)
        ts.append(best)
        out.append(r)
    return float(np.median(ts)), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller grid (20 x 20) and fewer reference points")
    ap.add_argument("--n-jobs", type=int, default=2)
    args = ap.parse_args(argv)

    cgmt.solve(2.0, 0.1, 2.0)  # compile / load the Numba cache
    rng = np.random.default_rng(0)
    n_ref = 4 if args.quick else 10
    pts = [(float(d), float(lam), 2.0) for d, lam in zip(np.exp(rng.uniform(np.log(0.5), np.log(20), n_ref)),
                                                      np.exp(rng.uniform(np.log(1e-2), np.log(10), n_ref)))]
    ref = ScipyReference()
    t_ref, ref_out = _median_time(lambda i, d, lam, k: ref.solve(d, lam, k), pts)
    t_cold, ours = _median_time(lambda i, d, lam, k: cgmt.solve(d, lam, k), pts, repeat=3)
    agree = []
    for r, s in zip(ours, ref_out):
        if s.success:
            agree.append(np.max(np.abs(np.asarray(s.x) - r.x) / np.abs(r.x)))
    # warm: neighbour on a 100-point log-lambda grid
    ratio = (1e3 / 1e-6) ** (1 / 99)
    warm_pts = [(d, lam * ratio, k) for d, lam, k in pts]
    t_warm, warm = _median_time(lambda i, d, lam, k: cgmt.solve(d, lam, k, x0=ours[i]), warm_pts, repeat=3)
    print(f"points: {len(pts)} random (delta in [0.5, 20], lam in [1e-2, 10], kappa = 2)")
    print("times are CPU seconds of this process (best of 3 for ours), median over points")
    print(f"SciPy reference (2-D Gauss-Hermite 100x100 + scipy.optimize.root): median {t_ref * 1e3:9.2f} ms/point,"
          f" {sum(s.success for s in ref_out)}/{len(pts)} converged")
    print(f"cgmt.solve cold:                       median {t_cold * 1e3:9.3f} ms/point")
    print(f"cgmt.solve warm (neighbouring lambda):  median {t_warm * 1e3:9.3f} ms/point")
    print(f"speed ratio reference/ours: cold {t_ref / t_cold:8.1f}x   warm {t_ref / t_warm:8.1f}x")
    print(f"agreement with the reference (max rel. diff of alpha, sigma, gamma): "
          f"median {np.median(agree):.1e}, max {np.max(agree):.1e} (reference Gauss-Hermite error)")
    print(f"max residual ours (cold, warm): {max(r.residual for r in ours):.1e}, {max(r.residual for r in warm):.1e}")

    n = 20 if args.quick else 100
    deltas = np.geomspace(0.05, 100, n)
    lams = np.geomspace(1e-6, 1e3, n)
    cgmt.sweep(deltas[:2], lams[:3], [2.0], n_jobs=args.n_jobs, progress=False)  # warm up the workers
    t = time.perf_counter()
    df = cgmt.sweep(deltas, lams, [2.0], n_jobs=args.n_jobs, progress=False)
    wall = time.perf_counter() - t
    t = time.perf_counter()
    t_grid1 = time.process_time()
    sub = cgmt.sweep(deltas[::10], lams, [2.0], n_jobs=1, progress=False)
    cpu1 = (time.process_time() - t_grid1) / len(sub)
    print(f"grid {n} x {n} (delta in [0.05, 100], lam in [1e-6, 1e3], kappa = 2), n_jobs={args.n_jobs}: "
          f"wall {wall:.2f} s ({wall / len(df) * 1e3:.2f} ms/point wall), converged {int(df.success.sum())}/{len(df)},"
          f" max residual {df.residual.max():.1e}")
    print(f"grid CPU time per point (serial, every 10th delta row): {cpu1 * 1e3:.2f} ms/point"
          f" -> {cpu1 * n * n / 2:.1f} s for the full grid on 2 unloaded cores")
    print(f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
