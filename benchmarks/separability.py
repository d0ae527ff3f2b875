"""Benchmark: the separability diagnostic with and without stopping at the first separating C (same run).

:func:`empirical.probes.separability` fits LinearSVC at C = 1e4, 1e6, 1e8 and calls a layer separable when
some C reaches zero training error. ``stop_when_separated=True`` (what ``python -m paper_figures`` uses)
skips the remaining C once one separates: the verdict is the same by construction, the later fits are
saved. Both routes run on the same data, interleaved; the median seconds of each, the ratio and both
verdicts are printed.

Data: hidden-state-like rows (:func:`empirical.testing.synthetic_hidden_states`), 600 x 576 like a
SmolLM2 training split at 500 per class, where the barely separable layers make LinearSVC slow.

Usage::

    python benchmarks/separability.py                 # 3 interleaved repeats
    python benchmarks/separability.py --shift 0.5     # weaker class signal
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

from empirical.probes import separability
from empirical.testing import synthetic_hidden_states


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shift", type=float, default=1.0, help="class mean shift (larger: nearly separable)")
    args = ap.parse_args(argv)
    X, y, _, _ = synthetic_hidden_states(600, 0, 576, args.shift, seed=0)
    times, verdicts = {"every C": [], "stop at first": []}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings are counted in the results
        for _ in range(args.repeats):
            for name, stop in (("every C", False), ("stop at first", True)):
                t0 = time.perf_counter()
                r = separability(X, y, stop_when_separated=stop)
                times[name].append(time.perf_counter() - t0)
                verdicts[name] = (r.separable, [s["C"] for s in r.svm])
    t_all, t_stop = statistics.median(times["every C"]), statistics.median(times["stop at first"])
    print(f"separability diagnostic, 600 x 576, median of {args.repeats}:")
    print(f"  every C: {t_all:.2f} s   stop at first separating C: {t_stop:.2f} s   ratio {t_all / t_stop:.2f}x")
    for name, (sep, Cs) in verdicts.items():
        print(f"  {name}: separable={sep}, C run: {Cs}")


if __name__ == "__main__":
    main()
