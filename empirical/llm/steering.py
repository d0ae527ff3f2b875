"""Additive activation steering with GCAV per-sample strength (paper: sec:gcav, app:steer-protocol).

Conventions
-----------
* Layer l (1..L) is the output of decoder block l; steering at layer l edits that output through a
  forward hook (blocks returning a tensor or a tuple are both handled). Hooks are removed when the
  context manager exits, also on errors.
* Edit: ``h <- h + alpha * v``. ``positions="last"`` (default, as the paper edits h_{l,T}) edits the
  last position of every forward call: the prompt's last token on the first pass and, during
  generation with a KV cache, each newly generated token. ``positions="all"`` edits every position.
* Probe at layer l: raw-space logistic probe ``g(h) = w.h + b``, ``P_m = sigmoid(g)``; ``v`` is the
  concept vector (default ``w / ||w||``). Any linear probe works: a :class:`LayerProbe` holds
  ``(w, b, v, test_accuracy)``; :meth:`LayerProbe.from_estimator` reads an estimator exposing
  ``coef_`` (raw omega), ``intercept_`` and optionally ``concept_vector_`` (e.g. ``RaptorProbe``).
* GCAV strength (``alg:steer_towards``): with ``g* = logit(p*)`` and ``s = w.v``,
  ``alpha = (g* - g(h)) / s`` if the state is not in the target region, else 0
  (towards: target ``P_m >= p* = 0.9999``; away: ``P_m <= p* = 0.0001``). Layers whose ``s <= 0``
  or whose probe test accuracy is below ``tau`` are skipped. Layers are processed in increasing
  order within one forward pass, so each sees the already-steered upstream state.
* Arithmetic is float64; the edited state is stored in the model dtype, so the logit recomputed
  from the stored state differs from g* by at most the rounding bound
  ``eps(dtype)/2 * sum_i |w_i h_i|`` (``round_tol``); success is judged up to that bound.

Metrics (``steering_metrics``), over evaluated layer-prompt pairs (active layers x prompts, read
at each prompt's last token on the prompt pass): success rate (target region reached), intervention
rate (alpha != 0), and |alpha| median / p90 / max over the pairs where steering was applied
(``*_all`` variants include the zero-strength pairs).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np

from .hooks import HookSet, block_output_tensor, decoder_blocks, replace_block_output

__all__ = [
    "LayerProbe",
    "P_TOWARDS",
    "P_AWAY",
    "gcav_alpha",
    "additive_steering",
    "gcav_steering",
    "steer_prompts",
    "steering_metrics",
    "hard_layers",
    "generate",
    "compare_generations",
]

P_TOWARDS = 0.9999
P_AWAY = 0.0001


def _logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def _check_direction(direction, p_target):
    if direction not in ("towards", "away"):
        raise ValueError(f"direction must be 'towards' or 'away', got {direction!r}")
    if p_target is None:
        p_target = P_TOWARDS if direction == "towards" else P_AWAY
    p_target = float(p_target)
    if not 0.0 < p_target < 1.0:
        raise ValueError(f"p_target must lie in (0, 1), got {p_target}")
    return p_target


@dataclass
class LayerProbe:
    """A raw-space linear probe at one layer: logit ``w.h + b``; concept vector ``v``."""

    w: np.ndarray
    b: float
    v: np.ndarray | None = None
    test_accuracy: float | None = None

    def __post_init__(self):
        self.w = np.asarray(self.w, dtype=np.float64).ravel()
        self.b = float(np.ravel(self.b)[0]) if np.ndim(self.b) else float(self.b)
        if not np.all(np.isfinite(self.w)) or not math.isfinite(self.b):
            raise ValueError("probe weights w and bias b must be finite")
        nw = np.linalg.norm(self.w)
        if nw == 0:
            raise ValueError("probe weights w are all zero; there is no concept direction")
        self.v = self.w / nw if self.v is None else np.asarray(self.v, dtype=np.float64).ravel()
        if self.v.shape != self.w.shape or not np.all(np.isfinite(self.v)):
            raise ValueError(f"v must be a finite vector of shape {self.w.shape}, got {self.v.shape}")

    @classmethod
    def from_estimator(cls, est, test_accuracy=None, v=None):
        """From a fitted linear estimator (``coef_`` in raw space, ``intercept_``, ``concept_vector_``)."""
        w = np.asarray(est.coef_, dtype=np.float64).ravel()
        b = float(np.ravel(est.intercept_)[0])
        if v is None:
            v = getattr(est, "concept_vector_", None)
        return cls(w, b, None if v is None else np.asarray(v).ravel(), test_accuracy)

    @property
    def slope(self) -> float:
        """``s = w.v``: change of the logit per unit of alpha."""
        return float(self.w @ self.v)

    def logit(self, H) -> np.ndarray:
        return np.asarray(H, dtype=np.float64) @ self.w + self.b


def gcav_alpha(g, slope, direction="towards", p_target=None):
    """Minimal strength moving logit ``g`` to ``logit(p_target)`` along a direction of slope ``s = w.v``.

    Returns 0 where the state already is in the target region (towards: ``g >= g*``; away:
    ``g <= g*``) and where ``slope <= 0`` (the layer is skipped).
    """
    p_target = _check_direction(direction, p_target)
    g = np.asarray(g, dtype=np.float64)
    g_star = _logit(p_target)
    if not np.all(np.isfinite(g)):
        raise ValueError("probe logits must be finite")
    if slope <= 0:
        return np.zeros_like(g)
    need = g < g_star if direction == "towards" else g > g_star
    return np.where(need, (g_star - g) / slope, 0.0)


@contextlib.contextmanager
def additive_steering(model, vectors: dict, alpha=1.0, positions="last"):
    """Fixed additive steering ``h <- h + alpha * v`` at the given layers (dict layer -> vector).

    ``alpha`` is a number or a dict layer -> number. ``"last"`` edits the sequence's last position,
    so feed unpadded (single) or left-padded inputs. Removed cleanly on exit.
    """
    import torch

    blocks = decoder_blocks(model)
    L = len(blocks)
    hooks = HookSet()
    try:
        for layer, vec in vectors.items():
            if not 1 <= int(layer) <= L:
                raise ValueError(f"steering layer must be in 1..{L}, got {layer}")
            a = float(alpha[layer] if isinstance(alpha, dict) else alpha)
            v = torch.as_tensor(np.asarray(vec), dtype=torch.float64).ravel()

            def hook(m, args, out, v=v, a=a):
                h = block_output_tensor(out)
                if v.numel() != h.shape[-1]:
                    raise ValueError(f"steering vector has {v.numel()} entries, hidden size is {h.shape[-1]}")
                delta = (a * v).to(h.dtype).to(h.device)
                h = h.clone()
                if positions == "all":
                    h += delta
                elif positions == "last":
                    h[:, -1, :] += delta
                else:
                    raise ValueError(f"positions must be 'last' or 'all', got {positions!r}")
                return replace_block_output(out, h)

            hooks.add(blocks[int(layer) - 1].register_forward_hook(hook))
        yield hooks
    finally:
        hooks.remove()


class _SteerState:
    """Shared state of the GCAV hooks: per-row last index of the prompt pass and the record sink."""

    def __init__(self):
        self.last = None  # tensor (B,) of last real positions for right-padded prompt batches
        self.rows = None  # prompt ids of the batch rows
        self.records = []
        self.recording = True
        self.first_pass = True


def _select_layers(probes, tau, L):
    active, skipped = [], {}
    for layer in sorted(probes):
        pr = probes[layer]
        if not 1 <= int(layer) <= L:
            raise ValueError(f"probe layer must be in 1..{L}, got {layer}")
        if tau is not None:
            if pr.test_accuracy is None:
                raise ValueError(f"tau={tau} needs test_accuracy for every probe; layer {layer} has none")
            if pr.test_accuracy < tau:
                skipped[layer] = "test accuracy below tau"
                continue
        if pr.slope <= 0:
            skipped[layer] = "w.v <= 0"
            continue
        active.append(int(layer))
    return active, skipped


@contextlib.contextmanager
def gcav_steering(model, probes: dict, direction="towards", p_target=None, tau=None, positions="last",
                  state: _SteerState | None = None):
    """GCAV adaptive steering at every layer in ``probes`` (dict layer -> :class:`LayerProbe`).

    Yields the hook state; ``state.records`` collects, for each steered forward pass and row, a dict
    with the layer, the logit before, alpha, the logit recomputed from the stored edited state and
    the rounding tolerance (only for the last position of the prompt pass when ``state.last`` is set
    by :func:`steer_prompts`, else for the last position of every pass).
    """
    import torch

    p_target = _check_direction(direction, p_target)
    if positions not in ("last", "all"):
        raise ValueError(f"positions must be 'last' or 'all', got {positions!r}")
    g_star = _logit(p_target)
    blocks = decoder_blocks(model)
    active, skipped = _select_layers(probes, tau, len(blocks))
    st = state or _SteerState()
    st.active_layers, st.skipped_layers = active, skipped
    hooks = HookSet()
    try:
        for layer in active:
            pr = probes[layer]
            s = pr.slope
            w = torch.as_tensor(pr.w, dtype=torch.float64)
            v = torch.as_tensor(pr.v, dtype=torch.float64)

            def hook(m, args, out, layer=layer, w=w, v=v, b=pr.b, s=s):
                h = block_output_tensor(out)
                if w.numel() != h.shape[-1]:
                    raise ValueError(f"probe at layer {layer} has {w.numel()} weights, hidden size is {h.shape[-1]}")
                wd, vd = w.to(h.device), v.to(h.device)
                B, T = h.shape[0], h.shape[1]
                rows = torch.arange(B, device=h.device)
                prompt_pass = st.last is not None and len(st.last) == B and T > int(st.last.max())
                last = st.last.to(h.device) if prompt_pass else torch.full((B,), T - 1, device=h.device)
                h64 = h.to(torch.float64)
                if positions == "last":
                    sel = h64[rows, last]  # (B, p)
                    g = sel @ wd + b
                    need = g < g_star if direction == "towards" else g > g_star
                    alpha = torch.where(need, (g_star - g) / s, torch.zeros_like(g))
                    new = h.clone()
                    new[rows, last] = (sel + alpha[:, None] * vd).to(h.dtype)
                else:
                    g_all = h64 @ wd + b  # (B, T)
                    need = g_all < g_star if direction == "towards" else g_all > g_star
                    a_all = torch.where(need, (g_star - g_all) / s, torch.zeros_like(g_all))
                    new = (h64 + a_all[..., None] * vd).to(h.dtype)
                    g, alpha = g_all[rows, last], a_all[rows, last]
                if st.recording:
                    stored = new[rows, last].to(torch.float64)
                    g_after = stored @ wd + b
                    eps = torch.finfo(h.dtype).eps
                    tol = 0.5 * eps * (stored.abs() @ wd.abs()) + 1e-12 * abs(g_star)
                    for i in range(B):
                        st.records.append({
                            "prompt": int(st.rows[i]) if st.rows is not None else i,
                            "layer": layer,
                            "logit_before": float(g[i]),
                            "alpha": float(alpha[i]),
                            "logit_after": float(g_after[i]),
                            "round_tol": float(tol[i]),
                        })
                return replace_block_output(out, new)

            hooks.add(blocks[layer - 1].register_forward_hook(hook))
        yield st
    finally:
        hooks.remove()


def _records_frame(records, direction, p_target):
    import pandas as pd

    df = pd.DataFrame(records)
    if df.empty:
        return df
    g_star = _logit(p_target)
    df["intervened"] = df["alpha"] != 0.0
    if direction == "towards":
        df["success"] = df["logit_after"] >= g_star - df["round_tol"]
    else:
        df["success"] = df["logit_after"] <= g_star + df["round_tol"]
    df["p_before"] = 1.0 / (1.0 + np.exp(-df["logit_before"]))
    df["p_after"] = 1.0 / (1.0 + np.exp(-df["logit_after"]))
    df["abs_alpha"] = df["alpha"].abs()
    df.attrs["g_star"] = g_star
    return df


def steer_prompts(model, tokenizer, prompts, probes, direction="towards", p_target=None, tau=None,
                  positions="last", batch_size=16, progress=True):
    """GCAV-steer a prompt set and record every evaluated (layer, prompt) pair.

    Returns a pandas DataFrame with columns ``prompt, layer, logit_before, alpha, logit_after,
    round_tol, intervened, success, p_before, p_after, abs_alpha`` (the metrics' input), with
    ``attrs`` holding the active and skipped layers.
    """
    import torch
    from tqdm.auto import tqdm

    from .extract import _batches, _pad_right, tokenize_prompts

    p_target = _check_direction(direction, p_target)
    token_ids = tokenize_prompts(tokenizer, prompts)
    core = model.base_model if getattr(model, "base_model", None) is not None else model
    device = next(model.parameters()).device
    st = _SteerState()
    order = sorted(range(len(token_ids)), key=lambda i: -len(token_ids[i]))
    with gcav_steering(model, probes, direction, p_target, tau, positions, state=st), torch.inference_mode():
        bar = tqdm(total=len(order), desc=f"steer {direction}", unit="prompt", disable=not progress, leave=False)
        for idx in _batches(order, token_ids, batch_size, 1 << 30, 0):
            ids, mask, last = _pad_right([token_ids[i] for i in idx], 0, device)
            st.last, st.rows = last, idx
            core(input_ids=ids, attention_mask=mask, use_cache=False)
            bar.update(len(idx))
        bar.close()
    df = _records_frame(st.records, direction, p_target)
    df.attrs.update(active_layers=st.active_layers, skipped_layers=st.skipped_layers, direction=direction,
                    p_target=p_target)
    return df


def steering_metrics(records) -> dict:
    """Success rate, intervention rate and |alpha| median/p90/max over evaluated layer-prompt pairs."""
    df = records
    n = int(len(df))
    if n == 0:
        nan = float("nan")
        return {"n_pairs": 0, "n_layers": 0, "layers": "--", "success_rate": nan, "intervention_rate": nan,
                "alpha_median": nan, "alpha_p90": nan, "alpha_max": nan, "alpha_median_all": nan,
                "alpha_p90_all": nan, "max_abs_logit_error": nan}
    a = df.loc[df["intervened"], "abs_alpha"].to_numpy()
    a_all = df["abs_alpha"].to_numpy()
    q = (lambda x, p: float(np.percentile(x, p)) if len(x) else 0.0)
    return {
        "n_pairs": n,
        "n_layers": int(df["layer"].nunique()),
        "layers": f"{int(df['layer'].min())}-{int(df['layer'].max())}",
        "success_rate": float(df["success"].mean()),
        "intervention_rate": float(df["intervened"].mean()),
        "alpha_median": q(a, 50),
        "alpha_p90": q(a, 90),
        "alpha_max": float(a.max()) if len(a) else 0.0,
        "alpha_median_all": q(a_all, 50),
        "alpha_p90_all": q(a_all, 90),
        "max_abs_logit_error": float(np.max(np.abs(df.loc[df["intervened"], "logit_after"] - df.attrs["g_star"])))
        if df["intervened"].any() and "g_star" in df.attrs else float("nan"),
    }


def hard_layers(records, k: int = 3) -> dict:
    """Top-k layers by median and by max |alpha| (over pairs where steering was applied)."""
    df = records[records["intervened"]] if len(records) else records
    if len(df) == 0:
        return {"by_median": [], "by_max": []}
    grp = df.groupby("layer")["abs_alpha"]
    med, mx = grp.median(), grp.max()
    top = lambda s: [(int(l), float(x)) for l, x in s.sort_values(ascending=False).head(k).items()]
    return {"by_median": top(med), "by_max": top(mx)}


def generate(model, tokenizer, prompt, max_new_tokens=20, **gen_kwargs) -> str:
    """Greedy completion of one prompt (the new text only)."""
    import torch

    enc = tokenizer(prompt, return_tensors="pt").to(next(model.parameters()).device)
    kw = dict(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    kw.update(gen_kwargs)
    with torch.inference_mode():
        out = model.generate(**enc, **kw)
    return tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def compare_generations(model, tokenizer, prompts, probes, direction="towards", p_target=None, tau=None,
                        positions="last", max_new_tokens=20, progress=True):
    """Original and GCAV-steered greedy completions side by side (list of dicts)."""
    from tqdm.auto import tqdm

    rows = []
    for prompt in tqdm(list(prompts), desc=f"generate {direction}", disable=not progress, leave=False):
        original = generate(model, tokenizer, prompt, max_new_tokens)
        st = _SteerState()
        st.recording = False
        with gcav_steering(model, probes, direction, p_target, tau, positions, state=st):
            steered = generate(model, tokenizer, prompt, max_new_tokens)
        rows.append({"prompt": prompt, "direction": direction, "original": original, "steered": steered})
    return rows
