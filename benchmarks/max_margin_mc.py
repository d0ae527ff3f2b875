"""Monte Carlo check of ``cgmt.max_margin``: exact hard-margin fits (``sims.fit_max_margin``: the least-distance
program by SciPy's Lawson-Hanson NNLS) against the max-margin fixed point, with error bars.

Usage::

    python benchmarks/max_margin_mc.py --ps 200 400 --replicates 40

Prints, per (delta, kappa) and p: the fraction of replicates that are separable, and the mean +- standard error of
the alignment <w/||w||, v> and of the geometric margin sqrt(p)/||w|| over the separable ones, beside the theory.
The last points sit next to the separability threshold delta*(kappa), where the finite-p replicates are separable
only part of the time and the margin (conditioned on separability) is biased up at finite p.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

POINTS = [(0.5, 0.0), (1.0, 1.0), (1.0, 2.0), (0.2, 5.0), (4.0, 5.0), (2.5, 2.0), (2.85, 2.0)]


def main(argv=None):
    import cgmt
    import sims
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ps", nargs="+", type=int, default=[200, 400])
    parser.add_argument("--replicates", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print("| delta | kappa | delta* | p | separable | alignment MC | theory | z | geometric margin MC | theory | z | "
          "s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for delta, kappa in POINTS:
        theory = cgmt.max_margin(delta, kappa)
        for p in args.ps:
            t0 = time.perf_counter()
            rows = [sims.measure_max_margin(delta, kappa, p, s)
                    for s in sims.replicate_seeds([args.seed, p], args.replicates)]
            sep = [r for r in rows if r["separable"]]
            a = np.array([r["alignment"] for r in sep])
            g = np.array([r["geometric_margin"] for r in sep])
            sa, sg = a.std(ddof=1) / np.sqrt(a.size), g.std(ddof=1) / np.sqrt(g.size)
            dstar = cgmt.separability_threshold(kappa)
            print(f"| {delta:g} | {kappa:g} | {dstar:.4g} | {p} | {len(sep)}/{len(rows)} | "
                  f"{a.mean():.4f} +- {sa:.4f} | {theory.alignment:.4f} | {(a.mean() - theory.alignment) / sa:+.2f} | "
                  f"{g.mean():.4f} +- {sg:.4f} | {theory.geometric_margin:.4f} | "
                  f"{(g.mean() - theory.geometric_margin) / sg:+.2f} | {time.perf_counter() - t0:.1f} |", flush=True)


if __name__ == "__main__":
    main()
