"""Test and example fixtures that need no model hub: tiny random models and synthetic hidden states.

- :func:`tiny_model`, :func:`tiny_tokenizer`: tiny randomly initialised causal LMs (Llama, Qwen2,
  GPT-2, Gemma shapes) built from configs, and an offline word-level tokenizer built with the
  ``tokenizers`` library from a fixed word list (torch/transformers imported on call);
  :func:`tiny_encoder`: a tiny random BERT encoder (no head).
- :func:`synthetic_hidden_states`: hidden-state-like matrices (numpy only) for tests and benchmarks.
- :func:`gcs_per_probe_reference`: the route ``GCSProbe.fit`` replaced (one fit per probe), which the tests
  and ``benchmarks/gcs_fit.py`` compare it with.
"""
from __future__ import annotations

import numpy as np

from .logistic import fit_l2_logistic
from .numerics import standardize, standardize_stats

ARCHS = ("llama", "qwen2", "gpt2", "gemma")

_WORDS = (
    "the a an is in of to and or not true false city statement judge movie review good bad great awful "
    "film plot actor coin heads up flips does flip still yes no hate speech comment sarcasm sentence "
    "paris france rome italy berlin germany madrid spain this that it was very really quite funny boring "
    "love loved hated people world news report says new old man woman dog cat house car road day night "
    "i you we they he she what why how answer according above below task detect help me identify . , ? !"
).split()


def tiny_tokenizer(chat_template: bool = True):
    """A word-level fast tokenizer (whitespace/punctuation split, unknown words -> <unk>, adds <bos>)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<bos>", "<eos>"]
    vocab = {t: i for i, t in enumerate(specials + sorted(set(_WORDS)))}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
                                  pad_token="<pad>")
    if chat_template:
        tok.chat_template = (
            "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} . {% endfor %}"
            "{% if add_generation_prompt %}answer : {% endif %}"
        )
    return tok


def tiny_model(arch: str = "llama", seed: int = 0, n_layers: int = 3, hidden: int = 32, vocab_size: int | None = None,
               dtype=None):
    """A randomly initialised causal LM of the given architecture family (eval mode)."""
    import torch
    from transformers import AutoModelForCausalLM, GemmaConfig, GPT2Config, LlamaConfig, Qwen2Config

    V = vocab_size or len(tiny_tokenizer(False).get_vocab())
    common = dict(vocab_size=V, bos_token_id=2, eos_token_id=3, pad_token_id=0)
    if arch == "llama":
        cfg = LlamaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=n_layers,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, **common)
    elif arch == "qwen2":
        cfg = Qwen2Config(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=n_layers,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, **common)
    elif arch == "gpt2":
        cfg = GPT2Config(n_embd=hidden, n_layer=n_layers, n_head=4, n_positions=256, **common)
    elif arch == "gemma":
        cfg = GemmaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=n_layers,
                          num_attention_heads=4, num_key_value_heads=1, head_dim=hidden // 4,
                          max_position_embeddings=256, **common)
    else:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()

def tiny_encoder(seed: int = 0, n_layers: int = 3, hidden: int = 32, vocab_size: int | None = None):
    """A randomly initialised BERT encoder (``BertModel``, no head; eval mode) for the tiny tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    V = vocab_size or len(tiny_tokenizer(False).get_vocab())
    cfg = BertConfig(vocab_size=V, hidden_size=hidden, num_hidden_layers=n_layers, num_attention_heads=4,
                     intermediate_size=2 * hidden, max_position_embeddings=256, pad_token_id=0)
    torch.manual_seed(seed)
    return BertModel(cfg).eval()


def synthetic_hidden_states(n_tr, n_val, p, shift, seed=0, rank=32, n_out=4):
    """Low-rank factors plus isotropic noise plus ``n_out`` large-variance, shifted outlier dimensions,
    with the class signal ``shift * (2y - 1) u`` along a random unit direction ``u`` (raw units).

    Returns ``(H_train, y_train, H_val, y_val)`` with labels in {0, 1}; the first ``n_tr`` rows are the
    training split.  Larger ``shift`` makes the data (nearly) separable.
    """
    rng = np.random.default_rng(seed)
    n = n_tr + n_val
    L = rng.standard_normal((p, rank)) * np.linspace(3, 0.3, rank)
    y = rng.integers(0, 2, n)
    u = rng.standard_normal(p)
    u /= np.linalg.norm(u)
    H = rng.standard_normal((n, rank)) @ L.T + rng.standard_normal((n, p)) + np.outer(2 * y - 1, u) * shift
    out = rng.choice(p, n_out, replace=False)
    H[:, out] = 50 * H[:, out] + 100
    return H[:n_tr], y[:n_tr], H[n_tr:], y[n_tr:]


def gcs_per_probe_reference(X, y, n_probes, C=1.0, random_state=0):
    """``GCSProbe.fit`` before the shared Gram matrix: one :func:`empirical.logistic.fit_l2_logistic` per probe
    from scratch, with the same random subsets (same rng calls in the same order).

    Returns ``(W, B)``: the probes' raw-space weights, shape (n_probes, p), and intercepts, shape (n_probes,).
    """
    y_signed = np.where(y > 0, 1.0, -1.0)
    pos, neg = np.flatnonzero(y_signed > 0), np.flatnonzero(y_signed < 0)
    half = min(2000, 2 * int(0.8 * min(len(pos), len(neg)))) // 2
    mu, s = standardize_stats(X)
    Xs = standardize(X, mu, s)
    rng = np.random.default_rng(random_state)
    W, B = np.empty((n_probes, X.shape[1])), np.empty(n_probes)
    for k in range(n_probes):
        idx = np.concatenate([rng.choice(pos, half, replace=False), rng.choice(neg, half, replace=False)])
        res = fit_l2_logistic(Xs[idx], y_signed[idx], C, fit_intercept=True, tol=1e-8)
        W[k] = res.coef / s
        B[k] = res.intercept - W[k] @ mu
    return W, B
