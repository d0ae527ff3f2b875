"""Finite-size study: |simulation - theory| against p in {250, 500, 1000, 2000, 4000} at hard points
(small lambda near separability, kappa = 5, and a moderate reference point).

Prints, per point and quantity, the root-mean-square error over replicates and the bias of the mean
(with its standard error) at each p, and the least-squares log-log slope of the rmse against p
(expected about -1/2).  Writes the raw replicates and the table as CSV and a log-log plot as PNG.
Several raw CSVs (e.g. from separate runs with different seeds) can be pooled with --from-csv.

Usage: python benchmarks/sims_finite_size.py [--replicates 8] [--out-dir finite_size] [--from-csv a.csv b.csv]
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

import cgmt
from sims import HARD_POINTS, analyze_finite_size, simulate_raw


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--ps", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--out-dir", default="finite_size")
    ap.add_argument("--from-csv", nargs="+", default=None, help="analyse (pooled) raw CSVs instead of simulating")
    args = ap.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.from_csv:
        raw = pd.concat([pd.read_csv(f) for f in args.from_csv], ignore_index=True)
        # recompute the formula column from the raw alpha, sigma with the current cgmt
        raw["accuracy_formula"] = [cgmt.accuracy_from_margin(m, k) for m, k in zip(raw.margin, raw.kappa)]
    else:
        raw = simulate_raw(HARD_POINTS, args.ps, args.replicates, args.seed, n_jobs=args.n_jobs, n_test=2000)
        raw.to_csv(os.path.join(args.out_dir, "raw.csv"), index=False)
    table, slopes = analyze_finite_size(raw)
    table.to_csv(os.path.join(args.out_dir, "table.csv"), index=False)
    pd.set_option("display.width", 200)
    fmt = {"float_format": lambda x: f"{x:.4g}"}
    print(table.assign(bias_over_se=table.bias / table.se)[
        ["kappa", "delta", "lam", "p", "quantity", "replicates", "theory", "mean", "bias", "bias_over_se", "rmse",
         "rel_rmse"]].to_string(index=False, **fmt))
    print("\nlog-log slopes of rmse (and |bias|) against p:")
    print(slopes.to_string(index=False, **fmt))
    pooled = table.assign(lp=np.log(table.p), lr=np.log(table.rel_rmse))
    # pooled slope: common slope with a separate intercept per (point, quantity) (within-group centring)
    g = pooled.groupby(["kappa", "delta", "lam", "quantity"])
    x = pooled.lp - g.lp.transform("mean")
    y = pooled.lr - g.lr.transform("mean")
    common = float((x * y).sum() / (x * x).sum())
    print(f"\ncommon slope over all points and quantities: {common:.3f}  "
          f"(median of per-series slopes {slopes.rmse_slope.median():.3f})")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for (k, d, lam, q), s in table.groupby(["kappa", "delta", "lam", "quantity"]):
            ax.loglog(s.p, s.rel_rmse, "o-", ms=3, lw=1, label=f"{q} (k={k:g}, d={d:g}, l={lam:g})")
        ps = np.array(sorted(table.p.unique()), float)
        ax.loglog(ps, 0.5 * (ps / ps[0]) ** -0.5 * table.rel_rmse.max(), "k--", lw=2, label="slope -1/2")
        ax.set(xlabel="p", ylabel="relative rmse |sim - theory| / |theory|", title="finite-size study")
        ax.legend(fontsize=5, ncol=2)
        fig.tight_layout()
        tmp = os.path.join(args.out_dir, ".finite_size.png.tmp")
        fig.savefig(tmp, format="png", dpi=120)
        os.replace(tmp, os.path.join(args.out_dir, "finite_size.png"))
    except ImportError:
        pass
    return table, slopes, common


if __name__ == "__main__":
    main()
