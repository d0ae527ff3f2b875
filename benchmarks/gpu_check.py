"""GPU checks: what no CPU run of the test suite covers (needs a CUDA device; skips cleanly without one).

Six sections, figures written to ``$OUT`` (or ``--out``) as ``gpu_check.json`` and ``gpu_check.md`` (rewritten as
each section finishes, so a call stopped at its time limit keeps what it measured):

1. ``agreement``: a tiny random Llama (built from a config, saved, loaded back with
   :func:`empirical.llm.load_model`) extracted with :func:`empirical.llm.hidden_states`
   on CPU in float32 (the reference), on CUDA in float32, and on CUDA in bfloat16 with
   ``device_map="auto"``; per-layer relative error against the reference (float32: <= 1e-5;
   bfloat16: <= 8 bf16 ulps = 8 * 2**-8 relative Frobenius, row cosine >= 0.999), prefix sharing on
   and off, and the disk cache with CUDA models (fill, memory-mapped reload equal to the uncached
   run, the float32 and bfloat16 entries kept apart by the dtype in the key).
2. ``throughput``: a random-init model of 7B width (LlamaConfig hidden 4096, intermediate 11008,
   32 heads, ``--layers`` blocks, vocabulary 32000) through ``hidden_states``: tokens/s in bfloat16 on
   CUDA at several batch sizes (``max_batch_tokens`` raised to fit the batch, and the CPU-tuned default
   of 512), the plain base-model forward on the same batches (no hooks, no copies) for the overhead,
   CUDA float32, and the device's CPU in float32 on a small sample (``--cpu-sample 0``: none), for the ratio.
   The first pass of each run is reported apart: with PyTorch's cuDNN attention each new (batch, length) shape
   costs a one-off graph build; the default length buckets (:func:`empirical.llm._extract.bucket_length`) run
   first, then exact lengths, each on a fresh prompt set.
3. ``probe``: :class:`empirical.probes.RaptorProbe` at p = 4096 on Gaussian two-class data (fit time,
   test accuracy), against scikit-learn ``LogisticRegression`` on the same objective at the selected C
   and at C = 1 (coefficients, objective values, accuracy), and the probe's dominant dense kernels
   (Gram matrix, weighted Hessian, Cholesky) timed in float64 with numpy on the CPU and with torch on
   the GPU (the numpy solver on the CPU).
4. ``kernels``: the batched engine's kernels at one Newton step of ``--engine-shape`` rows (Hessian, Cholesky,
   Newton-step solve, the validation rows' triangular solve; batched and one layer at a time) and a profile of a
   short batched path (its top CUDA kernels).
5. ``engine``: the batched exact path engine (:func:`empirical.probes.fit_layers` with ``device``) on every layer
   of a synthetic model, ``--engine-layers`` layers for each of ``--engine-widths`` at ``--engine-shape``
   (default 32 x p = 4096 and 80 x p = 8192 at (3600, 1200)), against the numpy ``RaptorProbe`` on
   ``--engine-checked`` of the layers (``benchmarks/probe_layers.py``'s ``run_at_scale``): seconds per layer,
   ratio, the exactness columns, peak GPU memory; a width that would overrun ``--engine-budget`` seconds runs
   fewer layers.

0. ``tests``: the batched engine's tests on the device (``pytest tests/test_batched_engine.py --engine-device
   cuda``) and the LLM tests with their tiny models on CUDA (this file as a pytest plugin, below), each in a
   subprocess under ``--tests-budget`` seconds, whole logs kept beside the figures.

Medians over ``--repeats``. Usage (the device machine of this workplace, or any CUDA host)::

    python benchmarks/gpu_check.py                     # all sections, figures to $OUT or ./gpu_check_out
    python benchmarks/gpu_check.py --device cpu --quick   # small CPU smoke run of the same code

Loaded as a pytest plugin (``PYTHONPATH=benchmarks pytest -p gpu_check tests/test_extract.py``) it
builds the test suite's tiny models (:func:`empirical.testing.tiny_model`, ``tiny_encoder``) on CUDA
instead of the CPU, so the LLM tests exercise CUDA tensors (without a CUDA device it changes nothing).
"""
from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

BF16_ULP = 2.0 ** -8
BF16_TOL = 8 * BF16_ULP  # relative Frobenius error allowed for bfloat16 against float32
FP32_TOL = 1e-5
WORDS = ("the a is in of to and not true false city movie review good bad great awful film plot actor coin "
         "heads flips yes no people world news report says new old man woman dog cat house car road day night "
         "paris france rome italy very really quite funny boring loved hated . , ? !").split()


# ---------------------------------------------------------------------------------------------- pytest plugin
def pytest_configure(config):
    """As a pytest plugin: the tiny test models are moved to CUDA (nothing changes without a CUDA device)."""
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    import empirical.testing as testing

    def on_cuda(build):
        @functools.wraps(build)
        def wrapper(*args, **kwargs):
            return build(*args, **kwargs).to("cuda")
        return wrapper

    testing.tiny_model = on_cuda(testing.tiny_model)
    testing.tiny_encoder = on_cuda(testing.tiny_encoder)


# ---------------------------------------------------------------------------------------------- helpers
def _median_time(fn, repeats, sync=None):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        if sync is not None:
            sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def _prompts(rng, n, lo, hi, prefix=""):
    """``n`` word sequences of ``lo``..``hi`` words from the tiny tokenizer's vocabulary (one token each)."""
    return [" ".join(([prefix] if prefix else []) + list(rng.choice(WORDS, int(rng.integers(lo, hi + 1)))))
            for _ in range(n)]


def _rel(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-300))


def _min_cosine(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    num = (a * ref).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(ref, axis=-1)
    return float((num / np.maximum(den, 1e-300)).min())


def environment(device):
    import scipy
    import sklearn
    import torch
    import transformers
    from threadpoolctl import threadpool_info

    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "transformers": transformers.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
           "scikit-learn": sklearn.__version__, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
           "cpu": platform.processor() or platform.machine(), "device": str(device),
           "blas": [{k: d.get(k) for k in ("internal_api", "num_threads", "version", "architecture")}
                    for d in threadpool_info()]}
    try:
        env["cpu_model"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                                if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   multiprocessors=props.multi_processor_count,
                   tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32))
    return env


# ---------------------------------------------------------------------------------------------- 1. agreement
def check_agreement(device, tmp, quick):
    """Tiny Llama: CUDA float32 and CUDA bfloat16 (device_map="auto") against CPU float32; the cache on CUDA."""
    import torch

    from empirical.llm import hidden_states, load_model
    from empirical.llm._hooks import input_device
    from empirical.testing import tiny_model, tiny_tokenizer

    cuda = torch.device(device).type == "cuda"
    tok = tiny_tokenizer()
    n_layers, hidden = (3, 64) if quick else (6, 128)
    folder = Path(tmp) / "tiny-llama"
    tiny_model("llama", seed=0, n_layers=n_layers, hidden=hidden).save_pretrained(folder)
    tok.save_pretrained(folder)
    rng = np.random.default_rng(0)
    prompts = _prompts(rng, 16 if quick else 48, 2, 40, prefix="task detect sarcasm .")

    cpu32, _ = load_model(str(folder), device="cpu")
    dev32, _ = load_model(str(folder), device=device)
    bf16, _ = (load_model(str(folder), device_map="auto", dtype="bfloat16") if cuda
               else load_model(str(folder), device=device, dtype="bfloat16"))
    run = functools.partial(hidden_states, tokenizer=tok, prompts=prompts, layers="all", batch_size=8,
                            progress=False)
    ref = run(cpu32)
    H32 = run(dev32)
    Hbf = run(bf16)
    Hbf_noprefix = run(bf16, share_prefix=False)

    out = {"model": f"tiny Llama, {n_layers} blocks, hidden {hidden}, random init (seed 0)",
           "prompts": len(prompts), "bf16_device_map": {str(k): str(v) for k, v in
                                                        (getattr(bf16, "hf_device_map", None) or {}).items()},
           "bf16_input_device": str(input_device(bf16)), "bf16_param_dtype": str(next(bf16.parameters()).dtype)}
    layers = []
    for layer in range(ref.shape[0]):
        layers.append({"layer": layer, "fp32_rel": _rel(H32[layer], ref[layer]),
                       "bf16_rel": _rel(Hbf[layer], ref[layer]),
                       "bf16_min_cosine": _min_cosine(Hbf[layer], ref[layer]),
                       "bf16_prefix_vs_noprefix_rel": _rel(Hbf[layer], Hbf_noprefix[layer])})
    out["layers"] = layers
    out["fp32_max_rel"] = max(r["fp32_rel"] for r in layers)
    out["bf16_max_rel"] = max(r["bf16_rel"] for r in layers)
    out["bf16_min_cosine"] = min(r["bf16_min_cosine"] for r in layers)
    out["bf16_prefix_max_rel"] = max(r["bf16_prefix_vs_noprefix_rel"] for r in layers)

    cache_dir = Path(tmp) / "cache"
    t0 = time.perf_counter()
    filled = run(bf16, cache=cache_dir, label="gpucheck")
    t_fill = time.perf_counter() - t0
    t0 = time.perf_counter()
    reloaded = run(bf16, cache=cache_dir, label="gpucheck")
    t_hit = time.perf_counter() - t0
    fp32_entry = run(dev32, cache=cache_dir, label="gpucheck")
    entries = sorted(p.name for p in cache_dir.rglob("*.npy"))
    out["cache"] = {
        "fill_vs_uncached_max_abs": float(np.abs(np.asarray(filled) - Hbf).max()),
        "reload_equal_to_fill": bool(np.array_equal(np.asarray(reloaded), np.asarray(filled))),
        "reload_is_memmap": isinstance(reloaded, np.memmap) or isinstance(getattr(reloaded, "base", None), np.memmap),
        "fill_s": t_fill, "hit_s": t_hit,
        "fp32_entry_rel_to_cpu": _rel(fp32_entry, ref),
        "npy_files": entries,
    }
    c = out["cache"]
    out["checks"] = {
        "fp32 device == cpu (rel <= 1e-5)": out["fp32_max_rel"] <= FP32_TOL,
        "bf16 within 8 ulps (rel <= 0.03125)": out["bf16_max_rel"] <= BF16_TOL,
        "bf16 row cosine >= 0.999": out["bf16_min_cosine"] >= 0.999,
        "bf16 embeddings within 1 ulp": layers[0]["bf16_rel"] <= BF16_ULP,
        "bf16 prefix sharing == no sharing (8 ulps)": out["bf16_prefix_max_rel"] <= BF16_TOL,
        "cache fill == uncached run": c["fill_vs_uncached_max_abs"] <= 1e-6 * float(np.abs(Hbf).max()),
        "cache reload == fill": c["reload_equal_to_fill"],
        "fp32 and bf16 entries apart (dtype in key)": c["fp32_entry_rel_to_cpu"] <= FP32_TOL and len(entries) >= 2,
    }
    if cuda:
        out["checks"]["device_map='auto' puts the model on cuda"] = input_device(bf16).type == "cuda"
    del cpu32, dev32, bf16
    return out


# ---------------------------------------------------------------------------------------------- 2. throughput
def _wide_llama(layers, quick):
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, heads = (256, 688, 4) if quick else (4096, 11008, 32)
    return LlamaConfig(vocab_size=32000, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=4096,
                       bos_token_id=2, eos_token_id=3, pad_token_id=0), LlamaForCausalLM


def _flops_per_token(cfg, mean_len):
    """Forward FLOPs per token of the base model (no LM head): 2 x block weights + attention scores."""
    d, f, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    kv = cfg.num_key_value_heads * (d // cfg.num_attention_heads)
    weights = L * (2 * d * d + 2 * d * kv + 3 * d * f)
    return 2 * weights + L * 2 * 2 * mean_len * d  # QK' and AV over about mean_len keys (upper bound, causal halves it)


def check_throughput(device, quick, repeats, layers, cpu_sample):
    import torch

    from empirical.llm import hidden_states
    from empirical.llm._extract import pad_right, tokenize_prompts
    from empirical.llm._hooks import base_model
    from empirical.testing import tiny_tokenizer

    cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else None
    tok = tiny_tokenizer()
    cfg, cls = _wide_llama(layers, quick)
    rng = np.random.default_rng(1)
    n_prompts = 64 if quick else 512
    prompts = _prompts(rng, n_prompts, 63, 127)  # + <bos>: 64..128 tokens
    ids = tokenize_prompts(tok, prompts)
    ntok = sum(len(x) for x in ids)
    max_len = max(len(x) for x in ids)
    fpt = _flops_per_token(cfg, ntok / len(ids))
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):
        model = cls(cfg)
    model = model.to(torch.bfloat16).eval()
    if sync:
        sync()
    out = {"config": {k: getattr(cfg, k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                                   "num_attention_heads", "num_key_value_heads", "vocab_size")},
           "parameters": sum(p.numel() for p in model.parameters()), "build_s": time.perf_counter() - t0,
           "prompts": len(prompts), "tokens": ntok, "min_len": min(len(x) for x in ids), "max_len": max_len,
           "gflop_per_token": fpt / 1e9, "repeats": repeats, "runs": []}
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    def record(what, dtype, where, bs, mbt, times, tokens):
        med = statistics.median(times)
        row = {"what": what, "dtype": dtype, "device": where, "batch_size": bs, "max_batch_tokens": mbt,
               "median_s": med, "times_s": times, "tokens": tokens, "tokens_per_s": tokens / med,
               "model_tflops": tokens * fpt / med / 1e12}
        out["runs"].append(row)
        print(f"  {what:<22} {dtype:<9} {where:<5} bs={bs:<4} mbt={mbt:<6} {row['tokens_per_s']:>10.0f} tok/s "
              f"({row['model_tflops']:.1f} TFLOP/s)", flush=True)

    def extraction(m, the_prompts, bs, mbt, reps, bucket=None):
        hidden_states(m, tok, the_prompts[: 2 * bs], batch_size=bs, max_batch_tokens=mbt, progress=False,
                      bucket_lengths=bucket)  # warm-up
        _, times, H = _median_time(lambda: hidden_states(m, tok, the_prompts, batch_size=bs, max_batch_tokens=mbt,
                                                         progress=False, bucket_lengths=bucket), reps)
        assert H.shape == (cfg.num_hidden_layers, len(the_prompts), cfg.hidden_size) and np.isfinite(H).all()
        return times

    # the first pass meets most (batch, length) shapes for the first time: the default length buckets (a handful
    # of shapes) first, then exact lengths (one shape per batch), each on a fresh prompt set of the same lengths
    # (buckets first: the exact-length pass would also build the few bucket shapes and warm them)
    for name, seed, bucket in (("hidden_states, length buckets", 2, None), ("hidden_states, exact lengths", 3, False)):
        fresh = _prompts(np.random.default_rng(seed), n_prompts, 63, 127)
        record(name, "bfloat16", device, 8, 8 * max_len, extraction(model, fresh, 8, 8 * max_len, repeats, bucket),
               sum(len(x) for x in tokenize_prompts(tok, fresh)))
    for bs in (8, 32, 128):
        record("hidden_states", "bfloat16", device, bs, bs * max_len, extraction(model, prompts, bs, bs * max_len,
                                                                                 repeats), ntok)
    record("hidden_states", "bfloat16", device, 32, 512, extraction(model, prompts, 32, 512, repeats), ntok)

    # the base model's plain forward on the same length-sorted batches of 32: no hooks, no copies to the host
    core = base_model(model)
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    batches = [pad_right([ids[i] for i in order[k:k + 32]], 0, model.device) for k in range(0, len(order), 32)]

    def plain():
        with torch.inference_mode():
            for b_ids, b_mask, _ in batches:
                core(input_ids=b_ids, attention_mask=b_mask, use_cache=False)
    plain()
    _, times, _ = _median_time(plain, repeats, sync)
    record("plain forward (no hooks)", "bfloat16", device, 32, 32 * max_len, times, ntok)
    if cuda:
        out["peak_gpu_memory_gib_bf16"] = torch.cuda.max_memory_allocated() / 2**30

    model = model.to(torch.float32)
    if cuda:
        record("hidden_states", "float32", device, 32, 32 * max_len, extraction(model, prompts, 32, 32 * max_len,
                                                                               repeats), ntok)
        model = model.to("cpu")
        torch.cuda.empty_cache()
    sample = prompts[:cpu_sample]
    sample_tok = sum(len(x) for x in ids[:cpu_sample])
    threads = torch.get_num_threads()
    out["cpu_threads"] = threads
    for bs in (8, 32) if cpu_sample else ():
        record("hidden_states", "float32", "cpu", bs, bs * max_len,
               extraction(model, sample, bs, bs * max_len, max(2, min(repeats, 3))), sample_tok)
    runs = {(r["what"], r["dtype"], r["device"], r["batch_size"], r["max_batch_tokens"]): r["tokens_per_s"]
            for r in out["runs"]}
    if cuda:
        best_gpu = max(v for (w, d, dev, *_), v in runs.items() if w == "hidden_states" and d == "bfloat16"
                       and dev != "cpu")
        cpu_rates = [v for (w, d, dev, *_), v in runs.items() if dev == "cpu"]
        if cpu_rates:
            out["gpu_bf16_over_cpu_fp32"] = best_gpu / max(cpu_rates)
        out["hidden_states_over_plain_forward_bs32"] = (
            runs[("hidden_states", "bfloat16", device, 32, 32 * max_len)]
            / runs[("plain forward (no hooks)", "bfloat16", device, 32, 32 * max_len)])
    del model
    return out


# ---------------------------------------------------------------------------------------------- 3. probe
def _gaussian(rng, n, p, delta):
    """Two classes N(+-delta/2 u, I_p) along a random unit u: Bayes accuracy Phi(delta / 2)."""
    y = rng.integers(0, 2, n)
    u = rng.standard_normal(p)
    u /= np.linalg.norm(u)
    return rng.standard_normal((n, p)) + np.outer(2 * y - 1, u) * (delta / 2), y, u


def _objective(X, y_signed, w, b, C):
    return float(C * np.logaddexp(0.0, -y_signed * (X @ w + b)).sum() + 0.5 * w @ w)


def _sklearn_fit(X, y_signed, C, solver, tol):
    from sklearn.linear_model import LogisticRegression

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(C=C, solver=solver, tol=tol, max_iter=10_000).fit(X, y_signed)
    return clf.coef_[0].copy(), float(clf.intercept_[0]), time.perf_counter() - t0, int(np.max(clf.n_iter_))


def check_probe(device, quick, repeats, sizes, p, delta, n_test):
    import torch
    from scipy.stats import norm

    from empirical.logistic import fit_l2_logistic
    from empirical.probes import RaptorProbe

    cuda = torch.device(device).type == "cuda"
    out = {"p": p, "delta": delta, "bayes_accuracy": float(norm.cdf(delta / 2)), "n_test": n_test,
           "solver_device": "cpu (numpy/scipy; empirical.probes does not import torch)", "sizes": []}
    for n in sizes:
        rng = np.random.default_rng(n)
        X, y, u = _gaussian(rng, n + n_test, p, delta)
        Xte, yte = X[n:], y[n:]
        n_tr = int(0.8 * n)
        Xtr, ytr, Xv, yv = X[:n_tr], y[:n_tr], X[n_tr:n], y[n_tr:n]
        reps = repeats if n <= 4000 else max(1, min(repeats, 3))
        t_fit, times, probe = _median_time(lambda: RaptorProbe().fit(Xtr, ytr, Xv, yv), reps)
        row = {"n": n, "n_train": n_tr, "n_val": n - n_tr, "raptor_fit_s": t_fit, "raptor_fit_times_s": times,
               "C": probe.C_, "val_accuracy": probe.best_val_accuracy_, "test_accuracy": float(probe.score(Xte, yte)),
               "cosine_to_truth": float(abs(probe.concept_vector_ @ u)),
               "path_newton_steps": int(probe.path_n_iter_.sum())}
        t0 = time.perf_counter()
        paper = RaptorProbe(solver="paper").fit(Xtr, ytr, Xv, yv)
        row.update(paper_solver_fit_s=time.perf_counter() - t0, paper_solver_C=paper.C_,
                   paper_solver_test_accuracy=float(paper.score(Xte, yte)))

        # the refit problem in standardized coordinates, solved by scikit-learn
        mu, s = probe.scaler_mean_, probe.scaler_scale_
        Xfit = (np.vstack([Xtr, Xv]) - mu) / s
        yfit = np.where(np.concatenate([ytr, yv]) > 0, 1.0, -1.0)
        Xte_s = (Xte - mu) / s
        yte_pm = np.where(yte > 0, 1.0, -1.0)
        comparisons = []
        for C in (probe.C_, 1.0):
            if C == probe.C_:
                w, b, ours_s = probe.coef_std_, probe.intercept_std_, float("nan")
            else:
                t0 = time.perf_counter()
                res = fit_l2_logistic(Xfit, yfit, C, fit_intercept=True)
                w, b, ours_s = res.coef, res.intercept, time.perf_counter() - t0
            f_ours = _objective(Xfit, yfit, w, b, C)
            acc_ours = float(np.mean(np.sign(Xte_s @ w + b) == yte_pm))
            for solver, tol in (("newton-cholesky", 1e-10), ("lbfgs", 1e-4)):
                ws, bs, sk_s, sk_it = _sklearn_fit(Xfit, yfit, C, solver, tol)
                comparisons.append({
                    "C": C, "sklearn_solver": solver, "sklearn_tol": tol, "sklearn_s": sk_s, "sklearn_iter": sk_it,
                    "ours_single_fit_s": ours_s, "coef_rel_diff": _rel(w, ws), "intercept_diff": abs(b - bs),
                    "objective_ours": f_ours, "objective_sklearn": _objective(Xfit, yfit, ws, bs, C),
                    "test_acc_ours": acc_ours, "test_acc_sklearn": float(np.mean(np.sign(Xte_s @ ws + bs) == yte_pm)),
                    "test_sign_agreement": float(np.mean(np.sign(Xte_s @ w + b) == np.sign(Xte_s @ ws + bs)))})
        row["vs_sklearn"] = comparisons
        row["kernels"] = _kernels(Xfit, cuda, device)
        out["sizes"].append(row)
        print(f"  n={n}: RAPTOR {t_fit:.2f}s C={probe.C_:.3g} test acc {row['test_accuracy']:.4f}; paper solver "
              f"{row['paper_solver_fit_s']:.2f}s; coef rel diff vs sklearn newton-cholesky at C_ "
              f"{comparisons[0]['coef_rel_diff']:.2e}", flush=True)
    return out


def _kernels(X, cuda, device):
    """The probe's dense float64 kernels: numpy on the CPU, and torch on the GPU (when there is one)."""
    import torch

    n, p = X.shape
    weights = np.random.default_rng(0).uniform(0.05, 0.25, n)
    H = (X.T * weights) @ X + np.eye(p)
    K = X @ X.T
    out = {}

    def time_np(fn, reps=3):
        return _median_time(fn, reps)[0]

    out["cpu_gram_s"] = time_np(lambda: X @ X.T)
    out["cpu_weighted_hessian_s"] = time_np(lambda: (X.T * weights) @ X)
    out["cpu_cholesky_p_s"] = time_np(lambda: np.linalg.cholesky(H))
    out["cpu_cholesky_n_s"] = time_np(lambda: np.linalg.cholesky(K + np.eye(n)))
    if cuda:
        Xg = torch.from_numpy(X).to(device)
        wg = torch.from_numpy(weights).to(device)
        Hg, Kg = torch.from_numpy(H).to(device), torch.from_numpy(K).to(device)
        eye_n = torch.eye(n, dtype=torch.float64, device=device)
        sync = torch.cuda.synchronize
        for name, fn in (("gpu_gram_s", lambda: Xg @ Xg.T), ("gpu_weighted_hessian_s", lambda: (Xg.T * wg) @ Xg),
                         ("gpu_cholesky_p_s", lambda: torch.linalg.cholesky(Hg)),
                         ("gpu_cholesky_n_s", lambda: torch.linalg.cholesky(Kg + eye_n))):
            fn()
            sync()
            out[name] = _median_time(fn, 5, sync)[0]
        out["gpu_gram_matches_cpu"] = bool(np.allclose((Xg @ Xg.T).cpu().numpy(), K, rtol=1e-10, atol=1e-8))
        t0 = time.perf_counter()
        torch.from_numpy(X).to(device)
        sync()
        out["host_to_gpu_copy_s"] = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------------------------------------- report
def _markdown(res):
    lines = ["# gpu_check", ""]
    env = res["environment"]
    lines.append("Environment: " + ", ".join(f"{k} {v}" for k, v in env.items() if k != "blas"))
    lines.append("")
    if "agreement" in res:
        a = res["agreement"]
        lines += ["## Extraction agreement (tiny Llama)", "",
                  f"{a['model']}, {a['prompts']} prompts; bf16 device map {a['bf16_device_map']}", "",
                  "| layer | CUDA fp32 rel | CUDA bf16 rel | bf16 min row cosine | bf16 prefix vs none |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['layer']} | {r['fp32_rel']:.2e} | {r['bf16_rel']:.2e} | {r['bf16_min_cosine']:.6f} | "
                  f"{r['bf16_prefix_vs_noprefix_rel']:.2e} |" for r in a["layers"]]
        lines += ["", "| check | result |", "| --- | --- |"]
        lines += [f"| {k} | {'pass' if v else 'FAIL'} |" for k, v in a["checks"].items()]
        lines += ["", f"cache: {a['cache']}", ""]
    if "throughput" in res:
        t = res["throughput"]
        lines += ["## Extraction throughput (7B-width random Llama)", "",
                  f"config {t['config']}, {t['parameters'] / 1e9:.2f} B parameters, {t['prompts']} prompts, "
                  f"{t['tokens']} tokens ({t['min_len']}..{t['max_len']} per prompt), "
                  f"{t['gflop_per_token']:.2f} GFLOP/token", "",
                  "| what | dtype | device | batch | max_batch_tokens | first pass s | median s | tokens/s | TFLOP/s |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['what']} | {r['dtype']} | {r['device']} | {r['batch_size']} | {r['max_batch_tokens']} | "
                  f"{r['times_s'][0]:.3f} | {r['median_s']:.3f} | {r['tokens_per_s']:.0f} | {r['model_tflops']:.1f} |"
                  for r in t["runs"]]
        lines += ["", ", ".join(f"{k} {v:.3g}" for k, v in t.items() if k in (
            "gpu_bf16_over_cpu_fp32", "hidden_states_over_plain_forward_bs32", "peak_gpu_memory_gib_bf16")), ""]
    if "probe" in res:
        pr = res["probe"]
        lines += ["## RaptorProbe at p = %d (solver on the %s)" % (pr["p"], pr["solver_device"]), "",
                  f"Gaussian classes, Bayes accuracy {pr['bayes_accuracy']:.3f}, {pr['n_test']} test rows", "",
                  "| n | RAPTOR fit s | C | test acc | paper solver s | paper test acc |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['n']} | {r['raptor_fit_s']:.2f} | {r['C']:.3g} | {r['test_accuracy']:.4f} | "
                  f"{r['paper_solver_fit_s']:.2f} | {r['paper_solver_test_accuracy']:.4f} |" for r in pr["sizes"]]
        lines += ["",
                  "| n | C | sklearn | sklearn s | coef rel diff | objective ours | objective sklearn | test acc ours "
                  "/ sklearn |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['n']} | {c['C']:.3g} | {c['sklearn_solver']} tol {c['sklearn_tol']:g} | "
                  f"{c['sklearn_s']:.2f} | {c['coef_rel_diff']:.2e} | {c['objective_ours']:.10g} | "
                  f"{c['objective_sklearn']:.10g} | {c['test_acc_ours']:.4f} / {c['test_acc_sklearn']:.4f} |"
                  for r in pr["sizes"] for c in r["vs_sklearn"]]
        lines += ["", "kernels (float64): " + "; ".join(f"n={r['n']}: " + ", ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in r["kernels"].items())
            for r in pr["sizes"]), ""]
    if "tests" in res:
        lines += ["## Tests on the device", "", "| tests | summary | exit |", "| --- | --- | --- |"]
        lines += [f"| {name} | {r['summary']} | {r['returncode']} |" for name, r in res["tests"].items()]
        lines.append("")
    if "kernels" in res:
        kr = res["kernels"]
        lines += [f"## The engine's kernels (n = {kr['n']}, m = {kr['m']}, k = {kr['k']}, {kr['layers']} layers)", "",
                  "| kernel | ms |", "| --- | --- |"]
        lines += [f"| {name} | {sec * 1e3:.2f} |" for name, sec in kr["seconds"].items()]
        lines += ["", f"short path: {kr['short_path_s']:.2f} s, {kr['short_path_newton_steps']} Newton steps, "
                      f"{kr.get('short_path_factorizations')} factorizations, {kr.get('short_path_cg')} CG "
                      "iterations", ""]
        if "profile" in kr:
            lines += ["```", kr["profile"], "```", ""]
    if res.get("engine"):
        rows = res["engine"]
        lines += ["## Batched engine (every layer of a model)", "",
                  "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in r.values()) + " |"
                  for r in rows]
        lines.append("")
    return "\n".join(lines)


LLM_TEST_FILES = ("tests/test_extract.py", "tests/test_steering.py", "tests/test_steering_eval.py",
                  "tests/test_encoders.py", "tests/test_scale_out.py", "tests/test_errors_llm.py",
                  "tests/test_models.py", "tests/test_cli.py")


def check_tests(device, quick, out_dir, budget_s):
    """The test suite's device-relevant parts on ``device``: the batched engine's tests (``--engine-device``) and,
    unless ``quick``, the LLM tests with their tiny models on CUDA (this file as a pytest plugin).  Each runs in a
    subprocess with a time limit; its whole log goes to ``out_dir`` (``tests_engine.log``, ``tests_llm.log``) and
    its summary line into the results."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "benchmarks"),
                                                       os.environ.get("PYTHONPATH", "")]))
    runs = {"engine": ["tests/test_batched_engine.py", "--engine-device", device]}
    if not quick:
        runs["llm"] = ["-n", "8", "-p", "gpu_check", *LLM_TEST_FILES]
    out, started = {}, time.perf_counter()
    for name, args in runs.items():
        left = budget_s - (time.perf_counter() - started)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
        try:
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=max(left, 1.0))
            log, code = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:  # its output is bytes even with text=True
            parts = [p.decode(errors="replace") if isinstance(p, bytes) else (p or "")
                     for p in (exc.stdout, exc.stderr)]
            log, code = "".join(parts) + "\n(stopped at the time limit)", None
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"tests_{name}.log").write_text(log)
        summary = next((line for line in reversed(log.splitlines()) if " passed" in line or " failed" in line), "")
        out[name] = {"command": " ".join(cmd), "returncode": code, "summary": summary.strip("= ")}
        print(f"  {name}: {out[name]['summary'] or 'no summary'} (exit {code})", flush=True)
    return out


def check_engine_kernels(device, quick, shape):
    """The engine's kernels at one Newton step of (n, m) = ``shape`` rows (k = n + 1 coordinates), two layers:
    forming the Hessian (batched matmul), its Cholesky factor, the Newton step and the validation rows' triangular
    solve, each as one batched call and as one call per layer, the one-column solve against two products with an
    explicit inverse of the factor (and making it), and the reduction of (n, n + 496) rows (QR against Gram +
    Cholesky); then a profile of a short batched path (12 grid
    points, 2 layers at p = n + 496): its top CUDA kernels and its Newton steps."""
    import torch

    from empirical.logistic import batched

    n, m = (200, 60) if quick else shape
    k, B = n + 1, 2
    cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else None
    gen = torch.Generator(device=device).manual_seed(0)
    Z1 = torch.randn(B, n, k, dtype=torch.float64, device=device, generator=gen) / np.sqrt(k)
    Zv1 = torch.randn(B, m, k, dtype=torch.float64, device=device, generator=gen) / np.sqrt(k)
    curv = torch.rand(B, n, dtype=torch.float64, device=device, generator=gen) * 0.25
    g = torch.randn(B, k, 1, dtype=torch.float64, device=device, generator=gen)
    eye = torch.eye(k, dtype=torch.float64, device=device)
    out = {"n": n, "m": m, "k": k, "layers": B, "seconds": {}}

    def form():
        return eye + 10.0 * (Z1.transpose(1, 2) @ (Z1 * curv.unsqueeze(2)))
    H = form()
    L = torch.linalg.cholesky_ex(H)[0]

    ops = {"form Hessian (bmm)": form,
           "cholesky_ex batched": lambda: torch.linalg.cholesky_ex(H),
           "cholesky_ex per layer": lambda: [torch.linalg.cholesky_ex(H[i:i + 1]) for i in range(B)],
           "cholesky_solve batched (1 rhs)": lambda: torch.cholesky_solve(g, L),
           "cholesky_solve per layer": lambda: [torch.cholesky_solve(g[i:i + 1], L[i:i + 1]) for i in range(B)],
           "solve_triangular batched (m rhs)": lambda: torch.linalg.solve_triangular(L, Zv1.transpose(1, 2),
                                                                                     upper=False),
           "solve_triangular per layer": lambda: [
               torch.linalg.solve_triangular(L[i:i + 1], Zv1[i:i + 1].transpose(1, 2), upper=False) for i in range(B)]}
    # the one-column solves (latency-bound triangular sweeps on a GPU) against an explicit inverse of the factor,
    # made once per factorization (k right-hand sides) and applied by two matrix-vector products
    Li = torch.linalg.solve_triangular(L[:1], eye.expand(1, k, k), upper=False)
    ops.update({"inverse of one factor (k rhs)": lambda: torch.linalg.solve_triangular(L[:1], eye.expand(1, k, k),
                                                                                         upper=False),
                "cholesky_solve one layer (1 rhs)": lambda: torch.cholesky_solve(g[:1], L[:1]),
                # what the engine calls since 2026-11-28 (batched._cholesky_solve): on the CPU at k = 3601 14x
                # faster than cholesky_solve, which copies the factor first
                "two triangular solves one layer (1 rhs)": lambda: batched._cholesky_solve(g[:1], L[:1]),
                "two products with the inverse": lambda: Li.transpose(1, 2) @ (Li @ g[:1])})
    # the reduction of n < p rows (the engine's QR of X') against Gram + Cholesky (what the numpy path uses)
    X = torch.randn(B, n, n + 496, dtype=torch.float64, device=device, generator=gen)
    ops.update({"reduction: QR of X' batched": lambda: torch.linalg.qr(X.transpose(1, 2)),
                "reduction: QR of X' per layer": lambda: [torch.linalg.qr(X[i].T) for i in range(B)],
                "reduction: Gram X X' + Cholesky": lambda: torch.linalg.cholesky_ex(X @ X.transpose(1, 2))})
    for name, fn in ops.items():
        fn()
        if sync:
            sync()
        med, _, _ = _median_time(fn, 3 if quick else 5, sync)
        out["seconds"][name] = med
        print(f"  {name:<34} {med * 1e3:9.2f} ms", flush=True)
    # a short path, profiled
    rng = np.random.default_rng(0)
    p = n + 496
    X = rng.standard_normal((B, n + m, p))
    y = np.where(X[0, :, 0] + 0.5 * rng.standard_normal(n + m) > 0, 1.0, -1.0)
    X = (X - X[:, :n].mean(axis=1, keepdims=True)) / X[:, :n].std(axis=1, keepdims=True)
    Cs = np.logspace(-4, -1, 12)
    batched.batched_path(X[:, :n], y[:n], X[:, n:], y[n:], Cs[:2], device=device)  # warm
    if sync:
        sync()
    t0 = time.perf_counter()
    path = batched.batched_path(X[:, :n], y[:n], X[:, n:], y[n:], Cs, device=device)
    out["short_path_s"] = time.perf_counter() - t0
    out["short_path_newton_steps"] = int(path.nit.sum())
    out["short_path_factorizations"], out["short_path_cg"] = int(path.n_factorizations), int(path.n_cg)
    print(f"  short path: {out['short_path_s']:.2f} s, {out['short_path_newton_steps']} Newton steps, "
          f"{path.n_factorizations} factorizations, {path.n_cg} CG iterations ({len(Cs)} grid points x {B} layers)",
          flush=True)
    if cuda:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            batched.batched_path(X[:, :n], y[:n], X[:, n:], y[n:], Cs[:6], device=device)
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=60)
        out["profile"] = table
        print(table, flush=True)
    return out


def check_engine(device, quick, layers, shape, widths, checked, budget_s, rows):
    """Rows of ``benchmarks/probe_layers.py`` at scale (:func:`probe_layers.run_at_scale`): the engine on ``device``
    over every layer, the numpy ``RaptorProbe`` on ``checked`` layers, for each width in ``widths`` with its layer
    count in ``layers``, appended to ``rows`` as they finish.  A width whose projected time (the last width's
    seconds per layer, scaled by the width) would overrun ``budget_s`` runs fewer layers (its row's ``layers``)."""
    from probe_layers import run_at_scale

    if quick:
        rows.append(run_at_scale(2, (200, 60, 128), device, checked=1))
        return rows
    started = time.perf_counter()
    for p, L in zip(widths, layers):
        if rows:
            left = budget_s - (time.perf_counter() - started)
            last = rows[-1]
            per_layer = last["seconds_per_layer"] * p / last["p"] + 1.0  # + host work per layer (data, checks)
            reference = checked * last["numpy_seconds_per_layer"] * p / last["p"]
            fits = int((left - reference - 30.0) // per_layer)
            if fits < L:
                print(f"  p={p}: {L} layers projected at {per_layer * L + reference:.0f} s, {left:.0f} s left: "
                      f"running {max(fits, 2)}", flush=True)
                L = max(fits, 2)
        rows.append(run_at_scale(L, (*shape, p), device, checked=checked, progress=True))
        print("  ", rows[-1], flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default; skips without one) or cpu for a smoke run")
    ap.add_argument("--quick", action="store_true", help="small models and data (smoke run)")
    ap.add_argument("--out", default=None, help="output folder (default $OUT, else ./gpu_check_out)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--layers", type=int, default=4, help="blocks of the 7B-width model")
    ap.add_argument("--cpu-sample", type=int, default=32, help="prompts of the CPU throughput sample (0: none)")
    ap.add_argument("--sizes", default="2000,8000", help="probe sample sizes n (train + validation)")
    ap.add_argument("--p", type=int, default=4096)
    ap.add_argument("--sections", default="tests,agreement,throughput,probe,kernels,engine")
    ap.add_argument("--engine-layers", default="32,80", help="layers of the engine check, one count per width")
    ap.add_argument("--engine-checked", type=int, default=3, help="layers the numpy reference fits per width")
    ap.add_argument("--engine-budget", type=float, default=300.0, help="seconds the engine section may take")
    ap.add_argument("--engine-shape", default="3600,1200", help="n_train,n_val of the engine check")
    ap.add_argument("--tests-budget", type=float, default=200.0, help="seconds the tests section may take")
    ap.add_argument("--engine-widths", default="4096,8192", help="hidden sizes p of the engine check")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("gpu_check: skipped (torch is not installed)")
        return 0
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: skipped (no CUDA device; `--device cpu --quick` runs a CPU smoke test)")
        return 0
    from empirical.common.files import atomic_write_text, write_json

    out_dir = Path(args.out or os.environ.get("OUT") or "gpu_check_out")
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    res = {"environment": environment(args.device), "command": " ".join(sys.argv)}
    print(res["environment"], flush=True)

    def save():
        write_json(out_dir / "gpu_check.json", res)
        atomic_write_text(out_dir / "gpu_check.md", _markdown(res))

    with tempfile.TemporaryDirectory() as tmp:
        if "tests" in sections:
            print("tests:", flush=True)
            res["tests"] = check_tests(args.device, args.quick, out_dir, args.tests_budget)
            save()
        if "agreement" in sections:
            print("agreement:", flush=True)
            res["agreement"] = check_agreement(args.device, tmp, args.quick)
            print("  checks:", res["agreement"]["checks"], flush=True)
        if "throughput" in sections:
            print("throughput:", flush=True)
            res["throughput"] = check_throughput(args.device, args.quick, args.repeats, args.layers, args.cpu_sample)
        if "probe" in sections:
            print("probe:", flush=True)
            sizes = [int(s) for s in args.sizes.split(",")]
            res["probe"] = check_probe(args.device, args.quick, args.repeats, sizes, args.p, 2.56, 2000)
        if "kernels" in sections:
            print("kernels:", flush=True)
            res["kernels"] = check_engine_kernels(args.device, args.quick,
                                                  tuple(int(v) for v in args.engine_shape.split(",")))
            save()
        if "engine" in sections:
            print("engine:", flush=True)
            res["engine"] = []  # filled row by row: a run stopped at its time limit keeps the widths it finished
            try:
                check_engine(args.device, args.quick, [int(v) for v in args.engine_layers.split(",")],
                             tuple(int(v) for v in args.engine_shape.split(",")),
                             [int(v) for v in args.engine_widths.split(",")], args.engine_checked,
                             args.engine_budget, res["engine"])
            finally:
                save()
    save()
    print(_markdown(res))
    failed = [k for k, v in res.get("agreement", {}).get("checks", {}).items() if not v]
    if failed:
        print("gpu_check: FAILED checks:", failed)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
