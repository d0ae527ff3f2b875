"""Benchmark: our batched extraction vs the naive reference loop, same model, texts and run.

The reference is the Concept-Depth way: one prompt at a time through the full causal LM with
``output_hidden_states=True`` (all positions of all layers kept, logits computed), then the last
token of each layer read out. Ours: :func:`empirical.llm.hidden_states` (sorted-length
batches, base model without LM head, last-token hooks), no disk cache. Both produce the same
numbers (checked here on layers 1..L-1, where ``hidden_states[l]`` is the block output; the
reference's last entry is final-normed in transformers 5.x and is compared after the norm).

Prints tokens/s of each, the ratio (median over repeats), and the max abs difference.

    python benchmarks/extract.py --dataset stsa --n 64 --threads 2 --repeats 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def naive_reference(model, tokenizer, prompts):
    """One example at a time, all hidden states kept (as the Concept-Depth code does)."""
    import torch

    kept = []
    with torch.no_grad():
        for p in prompts:
            enc = tokenizer(p, return_tensors="pt")
            out = model(**enc, output_hidden_states=True)
            kept.append([h[0].numpy().copy() for h in out.hidden_states])  # all positions, all layers
    # read out the last token of layers 1..L
    return np.stack([np.stack([hs[layer][-1] for hs in kept]) for layer in range(1, len(kept[0]))]).astype(np.float32)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--dataset", default="stsa")
    ap.add_argument("--n", type=int, default=64, help="number of prompts (first n/2 of each class)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default=None, help="model dtype of the reference (default float32)")
    ap.add_argument("--ours-dtype", default=None,
                    help="model dtype of our run (default: same as --dtype); e.g. bfloat16 on AVX512-BF16 CPUs")
    args = ap.parse_args(argv)

    import torch

    from empirical.llm import datasets, hidden_states, load_model
    from empirical.llm._extract import tokenize_prompts

    torch.set_num_threads(args.threads)
    model, tok = load_model(args.model, device="cpu", dtype=args.dtype)
    ours_model = model if args.ours_dtype in (None, args.dtype) else load_model(args.model, device="cpu",
                                                                               dtype=args.ours_dtype)[0]
    ds = datasets.load(args.dataset, max_per_class=max(1, args.n // 2))
    prompts = ds.prompts[: args.n]
    ntok = sum(len(x) for x in tokenize_prompts(tok, prompts))
    print(f"model={args.model} dataset={args.dataset} prompts={len(prompts)} tokens={ntok} "
          f"threads={args.threads} batch={args.batch_size} reference dtype={next(model.parameters()).dtype} "
          f"ours dtype={next(ours_model.parameters()).dtype}")

    # warm-up (allocator, kernels)
    hidden_states(ours_model, tok, prompts[:4], batch_size=4, progress=False)
    naive_reference(model, tok, prompts[:2])

    t_ours, t_ref = [], []
    for r in range(args.repeats):
        t = time.perf_counter()
        ours = hidden_states(ours_model, tok, prompts, batch_size=args.batch_size, progress=False)
        t_ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        ref = naive_reference(model, tok, prompts)
        t_ref.append(time.perf_counter() - t)
        print(f"repeat {r}: ours {t_ours[-1]:.2f}s ({ntok / t_ours[-1]:.0f} tok/s)  "
              f"reference {t_ref[-1]:.2f}s ({ntok / t_ref[-1]:.0f} tok/s)  ratio {t_ref[-1] / t_ours[-1]:.2f}x")
    L = ours.shape[0]
    diff = float(np.abs(ours[: L - 1] - ref[: L - 1]).max())
    with torch.no_grad():
        normed = model.model.norm(torch.from_numpy(ours[L - 1])).numpy() if hasattr(model, "model") else None
    last = float(np.abs(normed - ref[L - 1]).max()) if normed is not None else float("nan")
    med_o, med_r = statistics.median(t_ours), statistics.median(t_ref)
    rel = diff / float(np.abs(ref[: L - 1]).max())
    print(f"max |ours - reference| layers 1..L-1: {diff:.2e} (relative to max |h|: {rel:.1e}); "
          f"layer L after final norm: {last:.2e}")
    print(f"median tokens/s: ours {ntok / med_o:.0f}, reference {ntok / med_r:.0f}; "
          f"speed-up ratio {med_r / med_o:.2f}x")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
