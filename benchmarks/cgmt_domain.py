"""Every ``cgmt`` entry point over its whole accepted domain: success rate, time per point, every failure.

Draws random points of the domain each entry point's checks accept (``cgmt.validation``: delta in (0, DELTA_MAX]
((0, SPECTRAL_DELTA_MAX] for the spectral entry points),
lam in [LAM_MIN, LAM_MAX], kappa in [0, KAPPA_MAX]; spectra: power laws, spiked, with zero eigenvalues, condition
numbers up to 1e12) and calls it as a user would.  A point counts as

- ``ok``: the call returned ``success=True`` (or a finite value, for the functions without a status);
- ``refused``: a ``ValueError`` whose message gives the documented mathematical reason (the MLE below the
  separability threshold, the max margin above it): the domain a user can reach is that of the checks, so a refusal
  is only counted as correct where the docstring documents it;
- ``failed``: anything else (``success=False``, another exception, or the per-point time limit).

Usage::

    python benchmarks/cgmt_domain.py --points 10000 --jobs 2 --out domain.csv     # every entry point
    python benchmarks/cgmt_domain.py --entries solve max_margin --points 2000
    python benchmarks/cgmt_domain.py --points 10000 --first 2000 --out more.csv   # continue a run of 2000
    python benchmarks/cgmt_domain.py --table-from domain.csv more.csv              # one table of both

The table it prints (per entry point: points, ok, refused, failed, success rate over the accepted domain, median and
p99 seconds of the converged and of the failed points) is docs/theory.md's coverage table.
"""
from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: documented refusals: (entry point, a fragment of the message that gives the mathematical reason)
DOCUMENTED_REFUSALS = {
    "mle": "the MLE does not exist",
    "max_margin": "below the separability threshold",
}


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def _log_uniform(rng, lo, hi):
    return float(10.0 ** rng.uniform(math.log10(lo), math.log10(hi)))


def _delta(rng):
    from cgmt.validation import DELTA_MAX
    return _log_uniform(rng, 1e-3, DELTA_MAX)


def _lam(rng):
    from cgmt.validation import LAM_MAX, LAM_MIN
    return _log_uniform(rng, LAM_MIN, LAM_MAX)


def _kappa(rng):
    from cgmt.validation import KAPPA_MAX
    return 0.0 if rng.random() < 0.05 else _log_uniform(rng, 1e-3, KAPPA_MAX)


def _spectrum(rng):
    """A random spectrum of a random family: power law, spiked, with zero eigenvalues, or badly conditioned."""
    from cgmt import Spectrum
    p = int(rng.integers(2, 400))
    kind = rng.choice(["power", "spiked", "zeros", "condition"])
    kappa = _log_uniform(rng, 1e-2, 1e2)
    if kind == "power":
        return dict(kind=kind, p=p), Spectrum.power_law(p, exponent=float(rng.uniform(0, 3)), kappa=kappa,
                                                       teacher_exponent=float(rng.uniform(-1, 2)))
    if kind == "spiked":
        k = int(rng.integers(1, max(2, p // 4)))
        spikes = tuple(_log_uniform(rng, 1.0, 1e4) for _ in range(k))
        return dict(kind=kind, p=p), Spectrum.spiked(max(p, k + 1), spikes=spikes, kappa=kappa,
                                                    teacher=str(rng.choice(["spikes", "bulk", "both"])))
    omega = 10.0 ** rng.uniform(-6 if kind == "zeros" else -12, 0, size=p)
    if kind == "zeros":
        omega[rng.random(p) < 0.5] = 0.0
        omega[0] = 1.0
    t = rng.random(p)
    scale = _log_uniform(rng, 1e-3, 1e3)
    return dict(kind=kind, p=p, cond=float(omega.max() / omega[omega > 0].min())), \
        Spectrum.from_eigenpairs(omega * scale, np.eye(p), np.sqrt(t * p) * kappa / math.sqrt(max(
            float(np.sum(omega * scale * t)), 1e-300)))


def _draw(entry, rng):
    """(description, thunk) of one random point of ``entry``'s accepted domain."""
    import cgmt
    if entry == "solve":
        d, lam, k = _delta(rng), _lam(rng), _kappa(rng)
        return dict(delta=d, lam=lam, kappa=k), lambda: cgmt.solve(d, lam, k)
    if entry == "mle":
        k = _kappa(rng)
        d = cgmt.separability_threshold(k) * _log_uniform(rng, 1.0 + 1e-6, 1e5)
        d = min(d, 1e6)
        return dict(delta=d, kappa=k), lambda: cgmt.mle(d, k)
    if entry == "max_margin":
        k = _kappa(rng)
        d = cgmt.separability_threshold(k) * _log_uniform(rng, 1e-6, 1.0 - 1e-9)
        return dict(delta=d, kappa=k), lambda: cgmt.max_margin(d, k)
    if entry == "separability_threshold":
        k = _kappa(rng)
        return dict(kappa=k), lambda: cgmt.separability_threshold(k)
    if entry == "optimal_lambda":
        d, k = _delta(rng), _log_uniform(rng, 1e-3, 1e3)
        return dict(delta=d, kappa=k), lambda: cgmt.optimal_lambda(d, k)
    if entry == "stability":
        d, lam, k = _delta(rng), _lam(rng), _kappa(rng)
        protocol = str(rng.choice(["subsample", "independent"]))
        return dict(delta=d, lam=lam, kappa=k, protocol=protocol), lambda: cgmt.stability(d, lam, k, protocol)
    if entry == "sweep":
        d, k = _delta(rng), _kappa(rng)
        lams = np.sort(10.0 ** rng.uniform(-30, 30, size=4))
        return dict(delta=d, kappa=k, lams=lams.tolist()), lambda: cgmt.sweep([d], lams, [k], progress=False)
    from cgmt.validation import SPECTRAL_DELTA_MAX
    desc, spec = _spectrum(rng)
    d, lam = _log_uniform(rng, 1e-3, SPECTRAL_DELTA_MAX), _lam(rng)
    desc.update(delta=d, lam=lam)
    if entry == "solve_spectral":
        return desc, lambda: spec.solve(d, lam)
    if entry == "solve_spectral_path":
        lams = np.sort(10.0 ** rng.uniform(-30, 30, size=4))[::-1]
        desc["lams"] = lams.tolist()
        return desc, lambda: cgmt.solve_spectral_path(d, lams, spec.eigenvalues, spec.teacher_weights)
    if entry == "spectral_stability":
        return desc, lambda: cgmt.spectral_stability(d, lam, spec, "subsample")
    raise ValueError(f"unknown entry point {entry!r}")


ENTRIES = ("solve", "mle", "max_margin", "separability_threshold", "optimal_lambda", "sweep", "stability",
           "solve_spectral", "solve_spectral_path", "spectral_stability")


def _verdict(entry, value):
    """'ok' or 'failed' for a returned value."""
    if entry == "separability_threshold":
        return "ok" if math.isfinite(value) and value >= 2.0 else "failed"
    if entry == "sweep":
        return "ok" if bool(value["success"].all()) else "failed"
    if entry == "solve_spectral_path":
        return "ok" if all(r.success for r in value) else "failed"
    return "ok" if bool(value.success) else "failed"


def _run_point(task):
    entry, seed, limit = task
    warnings.simplefilter("ignore")
    rng = np.random.default_rng([seed, ENTRIES.index(entry)])
    try:
        desc, thunk = _draw(entry, rng)
    except ValueError as exc:  # the drawn spectrum itself is outside the accepted domain: not a point
        return entry, seed, {"draw": str(exc)[:120]}, "not drawn", 0.0, str(exc)[:200]
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    signal.alarm(limit)
    try:
        value = thunk()
        verdict, message = _verdict(entry, value), ""
        if verdict == "failed":
            message = str(getattr(value, "message", ""))[:200]
    except _Timeout:
        verdict, message = "failed", f"time limit {limit} s"
    except ValueError as exc:
        documented = DOCUMENTED_REFUSALS.get(entry)
        verdict = "refused" if documented and documented in str(exc) else "failed"
        message = f"ValueError: {exc}"[:200]
    except Exception as exc:  # noqa: BLE001 - every other exception is a failure to report
        verdict, message = "failed", f"{type(exc).__name__}: {exc}"[:200]
    finally:
        signal.alarm(0)
    return entry, seed, desc, verdict, time.perf_counter() - t0, message


def _warm_up(entries):
    """Compile (or load from Numba's cache) every kernel the entry points use, once, before any point is timed: in
    a fresh clone the first points of each worker otherwise carry the ~13 s cold compile (on 2026-11-29 four of the
    first `solve` points "took" 25-30 s, 0.003 s each when warm)."""
    t0 = time.perf_counter()
    for entry in entries:
        _run_point((entry, 10 ** 9, 600))
    print(f"  warm-up (compiling the kernels): {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", nargs="+", default=list(ENTRIES), choices=ENTRIES)
    parser.add_argument("--points", type=int, default=10000, help="points per entry point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=60, help="per-point time limit, seconds")
    parser.add_argument("--out", type=Path, help="CSV of every point")
    parser.add_argument("--first", type=int, default=0,
                        help="index of the first point (continue a run: its points are 0 .. first - 1)")
    parser.add_argument("--table-from", type=Path, nargs="+", metavar="CSV",
                        help="print the table of earlier runs' --out files (same seed; points counted once) and exit")
    args = parser.parse_args(argv)
    import pandas as pd

    if args.table_from:
        df = pd.concat([pd.read_csv(f) for f in args.table_from]).drop_duplicates(["entry", "seed"])
        _report(df, [e for e in ENTRIES if e in set(df.entry)], "merged from " + ", ".join(map(str, args.table_from)))
        return
    _warm_up(args.entries)
    rows = []
    with mp.get_context("fork").Pool(args.jobs) as pool:  # the workers inherit the warm JIT
        for entry in args.entries:
            tasks = [(entry, args.seed * 10 ** 7 + i, args.limit) for i in range(args.first, args.points)]
            t0 = time.perf_counter()
            for k, res in enumerate(pool.imap_unordered(_run_point, tasks, chunksize=8), 1):
                rows.append(dict(zip(("entry", "seed", "point", "verdict", "seconds", "message"), res)))
                if k % max(1, len(tasks) // 10) == 0:
                    print(f"  {entry}: {k}/{len(tasks)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr,
                          flush=True)
    df = pd.DataFrame(rows)
    if args.out:
        df.assign(point=df.point.astype(str)).to_csv(args.out, index=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    _report(df, args.entries, f"commit {commit}, points {args.first} .. {args.points - 1} per entry point, seed "
                              f"{args.seed}, {args.jobs} processes, time limit {args.limit} s per point")


def _report(df, entries, source):
    """Print the coverage table of the points in ``df``, then every failure and every point slower than 1 s."""
    print(f"cgmt domain coverage, {time.strftime('%Y-%m-%d')}, {source}")
    print("| entry point | points | ok | refused (documented) | failed | success | median s (ok) | p99 s (ok) | "
          "max s (ok) | median s (failed) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for entry in entries:
        sub = df[(df.entry == entry) & (df.verdict != "not drawn")]
        ok, ref, bad = (sub[sub.verdict == v] for v in ("ok", "refused", "failed"))
        rate = (len(ok) + len(ref)) / max(1, len(sub))
        med_bad = f"{bad.seconds.median():.3g}" if len(bad) else "--"
        print(f"| {entry} | {len(sub)} | {len(ok)} | {len(ref)} | {len(bad)} | {100 * rate:.2f} % | "
              f"{ok.seconds.median():.3g} | {ok.seconds.quantile(0.99):.3g} | {ok.seconds.max():.3g} | {med_bad} |")
    bad = df[df.verdict == "failed"]
    if len(bad):
        print(f"\nfailures ({len(bad)}):")
        for row in bad.itertuples():
            print(f"  {row.entry} {row.point} {row.seconds:.2f} s: {row.message}")
    slow = df[(df.verdict != "failed") & (df.seconds > 1.0)]
    if len(slow):
        print(f"\nslower than 1 s ({len(slow)}):")
        for row in slow.itertuples():
            print(f"  {row.entry} {row.point} {row.seconds:.2f} s")


if __name__ == "__main__":
    main()
