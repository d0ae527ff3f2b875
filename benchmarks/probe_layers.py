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


class ModelLayers:
    """The L layers of a synthetic model, made one at a time on access (``H[layer]``, as a memory-mapped cache):
    layer ``l`` is :func:`empirical.testing.synthetic_hidden_states` at ``shift = 0.5 + 2 l / (L - 1)`` with the
    same seed, so the layers share their noise and labels and the class shift grows with depth.  That data is
    affine in the shift, so two draws (shift 0 and 1) give every layer exactly, up to rounding: the host holds two
    (n, p) arrays instead of L."""

    def __init__(self, L, n_train, n_val, p, seed=0):
        parts = [synthetic_hidden_states(n_train, n_val, p, shift=s, seed=seed) for s in (0.0, 1.0)]
        (a_tr, y_tr, a_v, y_v), (b_tr, _, b_v, _) = parts
        self.base = np.vstack([a_tr, a_v])
        self.signal = np.vstack([b_tr, b_v]) - self.base
        self.shifts = [0.5 + 2.0 * layer / max(L - 1, 1) for layer in range(L)]
        self.y = np.concatenate([y_tr, y_v])

    def __len__(self):
        return len(self.shifts)

    def __getitem__(self, layer):
        return self.base + self.shifts[layer] * self.signal


def model_layers(L, n_train, n_val, p, seed=0):
    """(H, y (n,), split) of a synthetic model (:class:`ModelLayers`, each layer an (n, p) array on access)."""
    H = ModelLayers(L, n_train, n_val, p, seed)
    train, val = np.arange(n_train), np.arange(n_train, n_train + n_val)
    return H, H.y, (train, val, np.arange(0))


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


def _checked_layers(L, checked):
    """``checked`` layer positions spread over ``range(L)`` (first and last included)."""
    checked = max(1, min(checked, L))
    return sorted({round(i * (L - 1) / max(checked - 1, 1)) for i in range(checked)})


def run_at_scale(L, shape, device, checked=3, threads=None, progress=False):
    """A whole model at scale: the engine on all ``L`` layers in one timed pass, the numpy ``RaptorProbe`` on
    ``checked`` of them (spread over depth) for the ratio and the exactness columns.

    One pass each (a whole model is minutes of numpy); a small engine fit first warms the device up (CUDA context,
    library handles) and is reported apart.  The row ends with the engine's seconds by phase
    (:attr:`empirical.probes.PerLayerFit.engine_seconds`, ``<phase>_s``).  ``threads`` None leaves the BLAS its
    default (every core)."""
    import torch

    n_train, n_val, p = shape
    started = time.perf_counter()
    H, y, split = model_layers(L, n_train, n_val, p)
    data_s = time.perf_counter() - started
    cuda = torch.device(device).type == "cuda"
    with threadpool_limits(threads):
        if threads is not None:
            torch.set_num_threads(threads)
        small, y_small, split_small = model_layers(2, 200, 60, 128, seed=1)
        warm_s, _ = _timed(lambda: fit_layers(small, y_small, split=split_small, progress=False, device=device))
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        engine_s, fit = _timed(lambda: fit_layers(H, y, split=split, progress=progress, device=device))
        peak_gib = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
        sub = _checked_layers(L, checked)
        numpy_s, reference = _timed(lambda: fit_layers(H, y, layers=sub, split=split, progress=False))
    diff_C, diff_acc, coef = exactness(fit, reference)
    return dict(method=f"engine ({device})", layers=L, n_train=n_train, n_val=n_val, p=p,
                threads=threads if threads is not None else "default", engine_total_s=engine_s,
                seconds_per_layer=engine_s / L, numpy_seconds_per_layer=numpy_s / len(sub),
                ratio_to_numpy=(numpy_s / len(sub)) / (engine_s / L), layers_checked=len(sub),
                layers_with_other_C=int(diff_C), grid_points_other_accuracy=int(diff_acc), max_rel_coef_diff=coef,
                warm_up_s=warm_s, data_s=data_s, peak_device_memory_gib=peak_gib,
                **{f"{phase}_s": s for phase, s in fit.engine_seconds.items()})


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
