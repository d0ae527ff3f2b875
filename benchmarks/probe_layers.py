"""Benchmark: the whole-model probe fit - every layer of a model at one (n_train, n_val, p) - on the batched engine
(:func:`empirical.probes.fit_layers` with ``device``) against today's per-layer numpy ``RaptorProbe`` and the
paper's scikit-learn loop, in the same run on the same data.

The L layers are synthetic hidden-state-like matrices (:func:`empirical.testing.synthetic_hidden_states`: low-rank
factors, isotropic noise, outlier dimensions, a class shift that grows with depth) sharing their labels, as the
layers of one model on one dataset.  For each row it reports the median seconds per layer over ``--repeats`` and
the exactness columns of ``benchmarks/probe_path.py`` against the numpy ``RaptorProbe`` (itself checked against
tight references there): layers whose selected C differs, grid points whose validation accuracy differs, and the
largest relative coefficient difference.

Usage::

    python benchmarks/probe_layers.py --quick                       # small smoke run on the CPU
    python benchmarks/probe_layers.py --device cuda --layers 32 --shape 3600,1200,4096
    python benchmarks/probe_layers.py --device cpu --threads 2 --layers 4 --shape 1200,400,1024
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from empirical.probes import RaptorProbe, fit_layers
from empirical.testing import synthetic_hidden_states


def model_layers(L, n_train, n_val, p, seed=0):
    """(H (L, n, p), y (n,), split) of a synthetic model: the class shift grows with depth."""
    H, y = [], None
    for layer in range(L):
        Htr, ytr, Hv, yv = synthetic_hidden_states(n_train, n_val, p, shift=0.5 + 2.0 * layer / max(L - 1, 1),
                                                   seed=seed)
        H.append(np.vstack([Htr, Hv]))
        y = np.concatenate([ytr, yv])
    train, val = np.arange(n_train), np.arange(n_train, n_train + n_val)
    return np.stack(H), y, (train, val, np.arange(0))


def exactness(fit, reference) -> tuple:
    """Two ``fit_layers`` results compared layer by layer: (layers whose selected C differs, grid points whose
    validation accuracy differs, largest |coef difference| / max |reference coef| over the layers)."""
    layers = sorted(reference.probes)
    other_C = sum(fit.probes[k].C_ != reference.probes[k].C_ for k in layers)
    other_acc = sum(int(np.sum(fit.probes[k].path_val_accuracy_ != reference.probes[k].path_val_accuracy_))
                    for k in layers)
    coef = max(float(np.abs(fit.probes[k].coef_ - reference.probes[k].coef_).max()
                     / np.abs(reference.probes[k].coef_).max()) for k in layers)
    return int(other_C), int(other_acc), coef


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run(L, shape, device, repeats, threads, paper):
    n_train, n_val, p = shape
    H, y, split = model_layers(L, n_train, n_val, p)
    rows = []
    with threadpool_limits(threads):
        try:
            import torch
            torch.set_num_threads(threads)
        except ImportError:
            pass
        variants = {"numpy RaptorProbe (per layer)": dict(), f"engine ({device})": dict(device=device)}
        if paper:
            variants["paper's loop (per layer)"] = dict(estimator=RaptorProbe(solver="paper"))
        fits, times = {}, {name: [] for name in variants}
        for _ in range(repeats):  # interleaved
            for name, kw in variants.items():
                seconds, fits[name] = _timed(lambda: fit_layers(H, y, split=split, progress=False, **kw))
                times[name].append(seconds)
        reference = fits["numpy RaptorProbe (per layer)"]
        for name, fit in fits.items():
            diff_C, diff_acc, coef = exactness(fit, reference)
            rows.append(dict(method=name, layers=L, n_train=n_train, n_val=n_val, p=p, threads=threads,
                             seconds_per_layer=float(np.median(times[name])) / L,
                             ratio_to_numpy=float(np.median(times["numpy RaptorProbe (per layer)"])
                                                  / np.median(times[name])),
                             layers_with_other_C=int(diff_C), grid_points_other_accuracy=int(diff_acc),
                             max_rel_coef_diff=coef))
    return rows


def print_table(rows):
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--shape", default="1200,400,1024", help="n_train,n_val,p")
    ap.add_argument("--device", default="cpu", help="engine device (cpu, cuda, auto)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-paper", action="store_true", help="skip the paper's loop (slow at large p)")
    ap.add_argument("--quick", action="store_true", help="3 layers at (300, 100, 256), 1 repeat")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    shape = (300, 100, 256) if args.quick else tuple(int(v) for v in args.shape.split(","))
    L, repeats = (3, 1) if args.quick else (args.layers, args.repeats)
    rows = run(L, shape, args.device, repeats, args.threads, paper=not args.no_paper)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
