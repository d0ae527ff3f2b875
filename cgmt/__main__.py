"""Command line: ``python -m cgmt solve|sweep`` (also installed as ``cgmt``).

Convention: x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, P(y=1|x) = sigmoid(x'beta*), delta = n/p,
estimator argmin (1/n) sum log(1+exp(-y x'beta)) + lam/(2p)||beta||^2, z = beta/sqrt(p),
alpha = <z_hat, beta*/||beta*||>, sigma = ||z_hat - alpha v||, margin m = alpha/sigma,
accuracy = 2 E[sigmoid(kappa Z) Phi(m Z)], alpha_salehi = alpha/kappa.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from .solver import mle, solve
from .sweep import sweep

_CONVENTION = __doc__.split("\n\n", 1)[1]


def _floats(text):
    """'0.5,1,2' or 'geom:1e-6:1e3:50' or 'lin:0.5:5:10' -> array."""
    text = text.strip()
    for kind, fn in (("geom:", np.geomspace), ("lin:", np.linspace)):
        if text.startswith(kind):
            parts = text[len(kind):].split(":")
            if len(parts) != 3:
                raise argparse.ArgumentTypeError(f"expected {kind}START:STOP:NUM, got {text!r}")
            return fn(float(parts[0]), float(parts[1]), int(parts[2]))
    try:
        return np.array([float(t) for t in text.split(",") if t.strip()])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _parser():
    p = argparse.ArgumentParser(prog="cgmt", description="CGMT fixed point of ridge logistic regression.\n\n" + _CONVENTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("solve", help="solve one point and print the result")
    s.add_argument("--delta", type=float, required=True, help="n/p (> 0)")
    s.add_argument("--lam", type=float, default=None, help="ridge strength (> 0); omit with --mle")
    s.add_argument("--kappa", type=float, required=True, help="signal strength (>= 0)")
    s.add_argument("--mle", action="store_true", help="unregularized MLE (lam = 0; needs delta > delta*(kappa))")
    s.add_argument("--tol", type=float, default=1e-10)
    s.add_argument("--strict", action="store_true", help="exit with an error if not converged")
    w = sub.add_parser("sweep", help="grid sweep; writes CSV (and optionally a plot)")
    for name, hlp in (("deltas", "n/p values"), ("lams", "ridge strengths"), ("kappas", "signal strengths")):
        w.add_argument(f"--{name}", type=_floats, required=True,
                       help=f"{hlp}: comma list, geom:START:STOP:NUM or lin:START:STOP:NUM")
    w.add_argument("--out", required=True, help="CSV path")
    w.add_argument("--plot", default=None, help="optional figure path (accuracy vs lam)")
    w.add_argument("--n-jobs", type=int, default=1)
    w.add_argument("--no-progress", action="store_true")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "solve":
            if args.mle:
                r = mle(args.delta, args.kappa, strict=args.strict, tol=args.tol)
            else:
                if args.lam is None:
                    raise ValueError("lam is required (or pass --mle)")
                r = solve(args.delta, args.lam, args.kappa, strict=args.strict, tol=args.tol)
            print(r)
            return 0 if r.success else 1
        df = sweep(args.deltas, args.lams, args.kappas, n_jobs=args.n_jobs, progress=not args.no_progress)
        tmp = args.out + ".tmp"
        df.to_csv(tmp, index=False)
        os.replace(tmp, args.out)
        print(f"wrote {len(df)} rows to {args.out} ({int((~df['success']).sum())} not converged)")
        if args.plot:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(6, 4))
            for (k, d), g in df.groupby(["kappa", "delta"]):
                ax.plot(g["lam"], g["accuracy"], label=f"kappa={k:g}, delta={d:g}")
            ax.set_xscale("log")
            ax.set_xlabel("lambda")
            ax.set_ylabel("asymptotic test accuracy")
            if df.groupby(["kappa", "delta"]).ngroups <= 12:
                ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(args.plot, dpi=120)
            print(f"wrote {args.plot}")
        return 0
    except ValueError as exc:
        print(f"cgmt: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
