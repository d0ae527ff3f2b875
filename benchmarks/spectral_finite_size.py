"""Finite-size bias of the spectral Monte Carlo at the dimension of its test (tests/test_spectral_theory.py).

The test ``test_monte_carlo_agrees_on_random_spectra`` compares ``sims.compare_spectral`` at p = 300 with the
p -> infinity spectral theory on random power-law spectra.  Its finite-size allowance (``MC_ALLOWANCE`` in that
file) is not tuned: it is the bound this script measures (defaults: 16 random cases and seed 109151's, 600
replicates each, about 15 min on one core).  For ``--cases`` random cases drawn from the
test's own box (``case``: same generator as the test) it runs ``--replicates`` independent replicates at ``--p`` and
prints, per quantity, the relative bias b = (mean - theory) / |theory| of every case with its standard error, the
coefficient of variation of one replicate (sd / |theory|), the skewness of the replicates, and the bound
max over cases of |b| + 2.33 se (each case's one-sided 99 % upper confidence bound on |bias|).

Writes the raw replicates (``--out``, CSV) so that a later run can pool them (``--from-csv``).

Usage: python benchmarks/spectral_finite_size.py [--p 300] [--cases 16] [--replicates 600] [--out raw.csv]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats
from threadpoolctl import threadpool_limits

from cgmt._spectrum import Spectrum
from sims._spectral import SPECTRAL_QUANTITIES, measure_spectral_replicate, spectral_theory_values

DELTAS = (0.5, 1.5)
LAMS = (0.02, 0.2)


def case(seed, p=300):
    """The test's random case for a seed: (spectrum, feature_scale); the same draws as the test."""
    gen = np.random.default_rng(seed)
    s = Spectrum.power_law(p, exponent=gen.uniform(0.3, 1.5), kappa=gen.uniform(1.0, 3.0),
                           teacher_exponent=gen.uniform(0.0, 1.5))
    return s, gen.uniform(0.5, 2.0, p)


def simulate(cases, p, replicates, seed):
    rows = []
    with threadpool_limits(1):
        for c, (case_seed, delta, lam) in enumerate(cases):
            spectrum, scale = case(case_seed, p)
            theory = spectral_theory_values(delta, lam, spectrum, feature_scale=scale)
            t0 = time.perf_counter()
            for r, ss in enumerate(np.random.SeedSequence([seed, c]).spawn(replicates)):
                rec = measure_spectral_replicate(delta, lam, spectrum, ss, feature_scale=scale)
                if not rec["success"]:
                    raise RuntimeError(f"case {case_seed}: a fit missed its tolerance")
                rows += [dict(seed=case_seed, delta=delta, lam=lam, p=p, replicate=r, quantity=q, value=rec[q],
                              theory=theory[q]) for q in SPECTRAL_QUANTITIES]
            print(f"case {c}: seed {case_seed}, delta {delta}, lam {lam}: "
                  f"{(time.perf_counter() - t0) / replicates:.3f} s per replicate", flush=True)
    return pd.DataFrame(rows)


def analyze(raw):
    g = raw.groupby(["seed", "delta", "lam", "p", "quantity"], sort=False)
    t = g.agg(mean=("value", "mean"), sd=("value", lambda v: v.std(ddof=1)), R=("value", "size"),
              skew=("value", lambda v: stats.skew(v)), theory=("theory", "first")).reset_index()
    scale = t.theory.abs()
    t["rel_bias"] = (t["mean"] - t.theory) / scale
    t["rel_se"] = t.sd / np.sqrt(t.R) / scale
    t["cv"] = t.sd / scale
    t["t"] = t.rel_bias / t.rel_se
    t["upper99"] = t.rel_bias.abs() + stats.norm.ppf(0.99) * t.rel_se
    summary = t.groupby("quantity", sort=False).agg(
        cases=("t", "size"), max_abs_rel_bias=("rel_bias", lambda b: b.abs().max()), max_upper99=("upper99", "max"),
        mean_t=("t", "mean"), max_abs_t=("t", lambda x: x.abs().max()), cv_min=("cv", "min"), cv_max=("cv", "max"),
        max_abs_skew=("skew", lambda s: s.abs().max())).reindex(list(SPECTRAL_QUANTITIES))
    return t, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=300)
    ap.add_argument("--cases", type=int, default=16)
    ap.add_argument("--replicates", type=int, default=600)
    ap.add_argument("--seed", type=int, default=20260601, help="root of the cases' and the replicates' streams")
    ap.add_argument("--extra-case", action="append", default=["109151,1.5,0.02"],
                    help="seed,delta,lam of a case to include besides the random ones (repeatable)")
    ap.add_argument("--out", default="spectral_finite_size.csv")
    ap.add_argument("--from-csv", nargs="+", default=None, help="analyse (pooled) raw CSVs instead of simulating")
    args = ap.parse_args(argv)
    if args.from_csv:
        raw = pd.concat([pd.read_csv(f) for f in args.from_csv], ignore_index=True)
    else:
        gen = np.random.default_rng(args.seed)
        cases = [(int(s), float(d), float(lam)) for s, d, lam in (x.split(",") for x in args.extra_case)]
        cases += [(int(gen.integers(0, 10 ** 6)), float(gen.choice(DELTAS)), float(gen.choice(LAMS)))
                  for _ in range(args.cases)]
        raw = simulate(cases, args.p, args.replicates, args.seed)
        raw.to_csv(args.out, index=False)
    per_case, summary = analyze(raw)
    pd.set_option("display.width", 220)
    fmt = {"float_format": lambda x: f"{x:.4g}"}
    print(per_case.to_string(index=False, **fmt))
    print("\nper quantity over the cases (relative to |theory|):")
    print(summary.to_string(**fmt))
    return per_case, summary


if __name__ == "__main__":
    main()
