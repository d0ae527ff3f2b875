"""Agreement table: Monte Carlo versus ``cgmt`` over a 3 x 4 x 4 grid of (kappa, delta, lambda) at p = 1000.

For alpha, sigma, gamma, accuracy (and the independent-sample cosine) it prints the maximum |z| over the
grid, the maximum relative error |mean - theory| / |theory|, and the worst points; the full tidy table
is written as CSV.  z = (mean - theory) / se with se the Monte Carlo standard error over replicates.

Usage: python benchmarks/sims_agreement.py [--p 1000] [--replicates 8] [--n-jobs 1] [--out agreement.csv]
"""
from __future__ import annotations

import argparse

import pandas as pd

from sims import compare_grid

KAPPAS = (0.5, 2.0, 5.0)
DELTAS = (0.5, 1.0, 2.0, 5.0)
LAMS = (0.01, 0.1, 1.0, 10.0)
REPORTED = ("alpha", "sigma", "gamma", "accuracy", "accuracy_formula", "cos_independent")


def summarize_agreement(table: pd.DataFrame, quantities=REPORTED) -> pd.DataFrame:
    t = table[table.quantity.isin(quantities)].copy()
    t["abs_z"] = t.z.abs()
    t["rel_err"] = (t["mean"] - t.theory).abs() / t.theory.abs()
    rows = []
    for q in quantities:
        g = t[t.quantity == q]
        if g.empty:
            continue
        wz, wr = g.loc[g.abs_z.idxmax()], g.loc[g.rel_err.idxmax()]
        rows.append(dict(quantity=q, points=len(g), max_abs_z=g.abs_z.max(), median_abs_z=g.abs_z.median(),
                         frac_abs_z_gt_3=float((g.abs_z > 3).mean()), max_rel_err=g.rel_err.max(),
                         median_rel_err=g.rel_err.median(),
                         worst_z_at=f"k={wz.kappa:g},d={wz.delta:g},l={wz.lam:g}",
                         worst_rel_at=f"k={wr.kappa:g},d={wr.delta:g},l={wr.lam:g}"))
    return pd.DataFrame.from_records(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=1000)
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--seed", type=int, default=20260522)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--n-test", type=int, default=4000)
    ap.add_argument("--out", default="sims_agreement.csv")
    ap.add_argument("--from-csv", default=None, help="re-summarize a previously written table")
    args = ap.parse_args(argv)
    if args.from_csv:
        table = pd.read_csv(args.from_csv)
    else:
        table = compare_grid(DELTAS, LAMS, KAPPAS, args.p, args.replicates, args.seed, n_jobs=args.n_jobs,
                             n_test=args.n_test, stability=True, subsample=False)
        table.to_csv(args.out, index=False)
    pd.set_option("display.width", 200)
    print(f"p = {int(table.p.iloc[0])}, replicates = {int(table.replicates.iloc[0])}, "
          f"{table.groupby(['kappa', 'delta', 'lam']).ngroups} grid points, "
          f"all fits converged: {bool(table.success.all())}")
    print(summarize_agreement(table).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    worst = table[table.quantity.isin(REPORTED[:4])].assign(abs_z=lambda d: d.z.abs())
    print("\nten largest |z|:")
    print(worst.nlargest(10, "abs_z")[["kappa", "delta", "lam", "quantity", "mean", "se", "theory", "z"]]
          .to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
