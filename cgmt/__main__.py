"""Command line: ``python -m cgmt solve|sweep`` (also installed as ``cgmt``).

Convention: x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, P(y=1|x) = sigmoid(x'beta*), delta = n/p,
estimator argmin (1/n) sum log(1+exp(-y x'beta)) + lam/(2p)||beta||^2, z = beta/sqrt(p),
alpha = <z_hat, beta*/||beta*||>, sigma = ||z_hat - alpha v||, margin m = alpha/sigma,
accuracy = 2 E[sigmoid(kappa Z) Phi(m Z)], alpha_salehi = alpha/kappa.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np

from empirical.common.cli_args import (
    IMAGE_SUFFIXES,
    add_version,
    enforce_options,
    holding_outputs,
    int_in,
    number_in,
    output_path,
    subparser,
    worker_count,
)
from empirical.common.cli_errors import debug_requested, run_command
from empirical.common.files import atomic_path, check_write_target

from ._solver import mle, solve
from ._sweep import sweep
from .validation import LAM_MAX, LAM_MIN, MAX_POINTS

_CONVENTION = __doc__.split("\n\n", 1)[1]


#: most values one NUM of geom:/lin: may ask for (the sweep's own limit is on the whole grid)
MAX_AXIS = 100_000


def _floats(text):
    """'0.5,1,2' or 'geom:1e-6:1e3:50' or 'lin:0.5:5:10' -> array (NUM <= MAX_AXIS, checked before allocating)."""
    text = text.strip()
    for kind, fn in (("geom:", np.geomspace), ("lin:", np.linspace)):
        if text.startswith(kind):
            parts = text[len(kind):].split(":")
            if len(parts) != 3:
                raise argparse.ArgumentTypeError(f"expected {kind}START:STOP:NUM, got {text!r}")
            try:
                start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected {kind}START:STOP:NUM with numbers and an integer NUM, "
                                                 f"got {text!r}") from None
            if not 1 <= num <= MAX_AXIS:
                raise argparse.ArgumentTypeError(f"NUM must be in 1..{MAX_AXIS} values per axis, got {num}")
            if not (math.isfinite(start) and math.isfinite(stop)):
                raise argparse.ArgumentTypeError(f"START and STOP must be finite numbers, got {text!r}")
            if kind == "geom:" and (start <= 0 or stop <= 0):
                raise argparse.ArgumentTypeError(f"geom: needs START, STOP > 0, got {text!r}")
            return fn(start, stop, num)
    try:
        values = np.array([float(t) for t in text.split(",") if t.strip()])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if values.size == 0:
        raise argparse.ArgumentTypeError(f"expected at least one number, got {text!r}")
    if not np.isfinite(values).all():
        raise argparse.ArgumentTypeError(f"expected finite numbers, got {text!r}")
    return values


def _check_writable(option: str, path: str) -> Path:
    """Fail before the work if ``path`` cannot be written (missing directory, a directory, a device or FIFO, no
    permission)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise ValueError(f"{option} {path!r} is a directory; give a file name")
    check_write_target(target)  # a device or FIFO is never replaced by a regular file
    if not target.parent.is_dir():
        raise ValueError(f"{option} {path!r}: directory {str(target.parent)!r} does not exist")
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ValueError(f"{option} {path!r} is not writable")
    return target


#: per subcommand: which options apply in which mode and which exclude each other
#: (empirical.common.cli_args.enforce_options);
#: every subcommand has one (an empty table says: no relations)
OPTIONS = {
    "solve": {"excludes": [("--mle", "--lam")]},  # the MLE is lam = 0
    "sweep": {"distinct": ["--deltas", "--lams", "--kappas"]},  # a repeated grid value is not a second point
}


def _parser():
    p = argparse.ArgumentParser(prog="cgmt",
                                description="CGMT fixed point of ridge logistic regression.\n\n" + _CONVENTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("solve", help="solve one point and print the result")
    s.add_argument("--delta", type=number_in(0.0, low_open=True), required=True, help="n/p (> 0)")
    s.add_argument("--lam", type=number_in(LAM_MIN, LAM_MAX), default=None,
                   help="ridge strength (> 0; the domain is cgmt.validation.LAM_MIN..LAM_MAX); not with --mle")
    s.add_argument("--kappa", type=number_in(0.0), required=True, help="signal strength (>= 0)")
    s.add_argument("--mle", action="store_true", help="unregularized MLE (lam = 0; needs delta > delta*(kappa))")
    s.add_argument("--tol", type=number_in(0.0, 0.1, low_open=True), default=1e-10, help="in (0, 0.1]")
    s.add_argument("--strict", action="store_true", help="exit with an error if not converged")
    w = sub.add_parser("sweep", help="grid sweep; writes CSV (and optionally a plot)")
    for name, hlp in (("deltas", "n/p values"), ("lams", "ridge strengths"), ("kappas", "signal strengths")):
        w.add_argument(f"--{name}", type=_floats, required=True,
                       help=f"{hlp}: comma list, geom:START:STOP:NUM or lin:START:STOP:NUM")
    w.add_argument("--out", type=output_path("file", (".csv",)), required=True, help="CSV path (FILE.csv)")
    w.add_argument("--plot", type=output_path("file", IMAGE_SUFFIXES), default=None,
                   help=f"optional figure path (accuracy vs lam), written in the format its name says: "
                        f"{', '.join(IMAGE_SUFFIXES)}")
    w.add_argument("--n-jobs", type=worker_count(), default=1, help="parallel workers (at most the CPU cores)")
    w.add_argument("--max-points", type=int_in(1), default=MAX_POINTS,
                   help=f"refuse grids with more points (default {MAX_POINTS}, about half an hour per core)")
    w.add_argument("--no-progress", action="store_true")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error (also CGMT_DEBUG=1)")
    add_version(p)
    return p


def main(argv=None):
    """Run the ``cgmt`` command; returns the exit code (0 success, 1 not converged, 2 bad input, 130
    interrupted; :mod:`empirical.common.cli_errors`)."""
    parser = _parser()
    args = parser.parse_args(argv)
    command = subparser(parser, args.cmd)
    enforce_options(command, args, OPTIONS[args.cmd])
    return run_command(lambda: holding_outputs(command, args, lambda: _run(args)), "cgmt",
                       debug=debug_requested(args.debug, "CGMT_DEBUG"))


def _run(args) -> int:
    if args.cmd == "solve":
        if args.mle:
            r = mle(args.delta, args.kappa, strict=args.strict, tol=args.tol)
        else:
            if args.lam is None:
                raise ValueError("lam is required (or pass --mle)")
            r = solve(args.delta, args.lam, args.kappa, strict=args.strict, tol=args.tol)
        print(r)
        return 0 if r.success else 1
    out = _check_writable("--out", args.out)
    plot = _check_writable("--plot", args.plot) if args.plot else None
    df = sweep(args.deltas, args.lams, args.kappas, n_jobs=args.n_jobs, progress=not args.no_progress,
               max_points=args.max_points)
    with atomic_path(out, ".csv") as tmp:
        df.to_csv(tmp, index=False)
    print(f"wrote {len(df)} rows to {args.out} ({int((~df['success']).sum())} not converged)")
    if plot is not None:
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
        with atomic_path(plot, plot.suffix) as tmp:  # the format the name says (checked when parsed)
            fig.savefig(tmp, dpi=120, format=plot.suffix[1:].lower())
        plt.close(fig)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
