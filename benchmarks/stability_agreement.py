"""Two-replica stability theory (cgmt.stability) versus Monte Carlo (sims) over a 3 x 4 x 4 grid.

For every (kappa, delta, lam) and replicate: draw a pool of n = delta p samples (sims.sample), fit the
full pool, an independent pool of the same size, and K ablation runs of the paper's protocol
(cgmt.ablation.ablation_split: drop 20%, stratified 80/20 re-split, train part); measure

    cos_independent     cos(full fit, independent fit)
    cos_subsample       mean over the K(K-1)/2 pairs of ablation runs (the paper's robustness metric)
    cos_full_subsample  mean over the K ablation runs of cos(full fit, run)

(all cosines are positive here, so |cos| = cos).  Replicate means give the standard errors.  The
theory is cgmt.stability.stability(delta, lam, kappa, protocol) with delta the POOL ratio, plus the
paper's independent-sample formula alpha^2/(alpha^2+sigma^2) at the runs' own delta (0.64 delta)
for contrast.

Usage:  python benchmarks/stability_agreement.py [--p 1000] [--replicates 4] [--runs 3]
        [--raw raw.csv] [--out table.csv]
The Monte Carlo part is cached in --raw (rows appended atomically), so an interrupted run resumes.
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time

import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from empirical.common.files import atomic_path

KAPPAS = (1.0, 2.0, 4.0)
DELTAS = (0.5, 1.0, 2.0, 4.0)
LAMS = (0.01, 0.1, 1.0, 10.0)


def simulate_replicate(delta, lam, kappa, p, seed, runs=3, drop=0.2, val_fraction=0.2):
    """One replicate (``sims.simulate_stability_replicate``)."""
    from sims import simulate_stability_replicate

    return simulate_stability_replicate(delta, lam, kappa, p, seed, runs=runs, drop=drop, val_fraction=val_fraction)


def _append_atomic(path, rows):
    old = pd.read_csv(path) if os.path.exists(path) else None
    new = pd.DataFrame(rows)
    df = new if old is None else pd.concat([old, new], ignore_index=True)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)


def run_mc(p, replicates, runs, raw, seed=2026):
    points = list(itertools.product(KAPPAS, DELTAS, LAMS))
    done = set()
    if os.path.exists(raw):
        old = pd.read_csv(raw)
        if not {"kappa", "delta", "lam", "rep", "p"} <= set(old.columns):
            raise ValueError(f"--raw {raw}: not a table written by this script")
        done = {(r.kappa, r.delta, r.lam, int(r.rep)) for r in old.itertuples() if r.p == p}
    todo = [(i, pt, r) for i, pt in enumerate(points) for r in range(replicates) if (*pt, r) not in done]
    # cheap points first so partial results cover the whole grid early
    todo.sort(key=lambda t: (t[2], t[1][1]))
    with threadpool_limits(1):
        for i, (k, d, lam), r in tqdm(todo, desc=f"MC p={p}"):
            row = simulate_replicate(d, lam, k, p, [seed, i, r], runs=runs)
            row.update(kappa=k, delta=d, lam=lam, rep=r, p=p)
            _append_atomic(raw, [row])


def theory_table():
    from cgmt.stability import stability

    recs = []
    for k, d, lam in tqdm(list(itertools.product(KAPPAS, DELTAS, LAMS)), desc="theory"):
        t0 = time.perf_counter()
        sub = stability(d, lam, k, "subsample", strict=True)
        recs.append(dict(kappa=k, delta=d, lam=lam,
                         th_cos_subsample=sub.cosine,
                         th_cos_full_subsample=stability(d, lam, k, "full_vs_subsample", strict=True).cosine,
                         th_cos_independent=stability(d, lam, k, "independent", strict=True).cosine,
                         paper_formula_subsample=sub.independent_formula,
                         seconds=time.perf_counter() - t0))
    return pd.DataFrame(recs)


def compare(raw, theory):
    g = raw.groupby(["kappa", "delta", "lam"])
    out = []
    for (k, d, lam), grp in g:
        th = theory[(theory.kappa == k) & (theory.delta == d) & (theory.lam == lam)].iloc[0]
        rec = dict(kappa=k, delta=d, lam=lam, R=len(grp))
        for q in ("cos_subsample", "cos_full_subsample", "cos_independent"):
            x = grp[q].to_numpy()
            rec[f"mc_{q}"] = x.mean()
            rec[f"se_{q}"] = x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else float("nan")
            rec[f"th_{q}"] = th[f"th_{q}"]
            rec[f"err_{q}"] = x.mean() - th[f"th_{q}"]
        rec["paper_formula_subsample"] = th["paper_formula_subsample"]
        rec["err_paper_formula_subsample"] = rec["mc_cos_subsample"] - th["paper_formula_subsample"]
        out.append(rec)
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=1000)
    ap.add_argument("--replicates", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3, help="ablation runs per replicate (K)")
    ap.add_argument("--raw", default="stability_mc_raw.csv")
    ap.add_argument("--out", default="stability_agreement.csv")
    ap.add_argument("--skip-mc", action="store_true", help="only compare an existing --raw table")
    a = ap.parse_args(argv)
    if not a.skip_mc:
        run_mc(a.p, a.replicates, a.runs, a.raw)
    raw = pd.read_csv(a.raw)
    raw = raw[raw.p == a.p]
    theory = theory_table()
    print(f"theory: median {theory.seconds.median() * 1e3:.0f} ms per grid point (three protocols)")
    tab = compare(raw, theory)
    tab.to_csv(a.out, index=False)
    pd.set_option("display.width", 200)
    cols = ["kappa", "delta", "lam", "R", "mc_cos_subsample", "se_cos_subsample", "th_cos_subsample",
            "paper_formula_subsample", "mc_cos_full_subsample", "se_cos_full_subsample",
            "th_cos_full_subsample", "mc_cos_independent", "se_cos_independent", "th_cos_independent"]
    print(tab[cols].to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    for q in ("cos_subsample", "cos_full_subsample", "cos_independent"):
        e = tab[f"err_{q}"].abs()
        z = (tab[f"err_{q}"] / tab[f"se_{q}"]).abs()
        print(f"{q:20s} max |MC - theory| = {e.max():.4f}  median {e.median():.4f}  max |z| = {z.max():.2f}")
    e = tab["err_paper_formula_subsample"].abs()
    print(f"paper formula on the subsample protocol: max |MC - formula| = {e.max():.4f}, "
          f"median {e.median():.4f}, ratio MC/formula in "
          f"[{(tab.mc_cos_subsample / tab.paper_formula_subsample).min():.2f}, "
          f"{(tab.mc_cos_subsample / tab.paper_formula_subsample).max():.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
