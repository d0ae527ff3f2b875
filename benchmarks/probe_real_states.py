"""Exactness and speed of the batched engine on real hidden states: every layer of the default model on each of the
seven benchmark datasets (the empirical section's rows: up to 500 examples per class, the paper's split, seed 42),
fitted by the numpy ``RaptorProbe`` per layer and by the engine (:func:`empirical.probes.fit_layers` with
``device``), in the same run.

Per dataset it reports the seconds of each (one run each, interleaved per dataset) and the exactness columns of
``benchmarks/probe_layers.py``: layers whose selected C differs, grid points whose validation accuracy differs, and
the largest relative coefficient difference over the layers.  The hidden states come from the extraction cache
(``RAPTOR_CACHE``; extracted once, with a progress bar, when absent).

Usage::

    python benchmarks/probe_real_states.py                    # the seven datasets, engine on the CPU, 1 thread
    python benchmarks/probe_real_states.py --datasets stsa --device cuda --threads 2
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from probe_layers import exactness  # the exactness columns of benchmarks/probe_layers.py
from threadpoolctl import threadpool_limits

from empirical.probes import fit_layers, paper_split
from paper_figures.learning_curves import DATASETS as SIX, load_hidden

DATASETS = (*SIX, "coinflip")


def compare(H, y, device, threads):
    """One dataset: (numpy seconds, engine seconds, layers with another C, grid points with another validation
    accuracy, largest relative coefficient difference)."""
    split = paper_split(y, random_state=42)
    with threadpool_limits(threads):
        import torch
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        reference = fit_layers(H, y, split=split, progress=False)
        t1 = time.perf_counter()
        engine = fit_layers(H, y, split=split, progress=False, device=device)
        t2 = time.perf_counter()
    return (t1 - t0, t2 - t1, len(reference.probes), *exactness(engine, reference))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--device", default="cpu", help="engine device (cpu, cuda, auto)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-per-class", type=int, default=500)
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    rows = []
    print("| dataset | n | p | layers | numpy s | engine s | ratio | layers other C | grid points other acc "
          "| max rel coef diff |\n|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for name in args.datasets:
        H, y, _ = load_hidden(names=[name], progress=True, max_per_class=args.max_per_class)[name]
        H = H[1:]  # decoder blocks 1..L (layer 0, the token embeddings, is not probed by the paper)
        t_np, t_eng, L, other_C, other_acc, coef = compare(H, np.asarray(y), args.device, args.threads)
        row = dict(dataset=name, n=int(H.shape[1]), p=int(H.shape[2]), layers=L, numpy_s=t_np, engine_s=t_eng,
                   ratio=t_np / t_eng, layers_other_C=other_C, grid_points_other_accuracy=other_acc,
                   max_rel_coef_diff=coef)
        rows.append(row)
        print(f"| {name} | {row['n']} | {row['p']} | {L} | {t_np:.1f} | {t_eng:.1f} | {t_np / t_eng:.2f} | "
              f"{other_C} | {other_acc} | {coef:.2g} |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
