"""Additive activation steering with GCAV per-sample strength (the paper's GCAV section and its steering
protocol appendix).

Conventions
-----------
* Layer l (1..L) is the output of decoder block l; steering at layer l edits that output through a
  forward hook (blocks returning a tensor or a tuple are both handled). Hooks are removed when the
  context manager exits, also on errors.
* Edit: ``h <- h + alpha * v``. ``positions="last"`` (default, as the paper edits h_{l,T}) edits the
  last position of every forward call: the prompt's last token on the first pass and, during
  generation with a KV cache, each newly generated token. ``positions="all"`` edits every position.
* Probe at layer l: raw-space logistic probe ``g(h) = w.h + b``, ``P_m = sigmoid(g)``; ``v`` is the
  concept vector (default ``w / ||w||``). The probes come as the project's one concept-vector object,
  :class:`~empirical.probes.concept_vectors.ConceptVectors` (or any mapping layer ->
  :class:`~empirical.probes.concept_vectors.LinearProbe`, whose ``coef``, ``intercept``, ``direction``
  are w, b, v); ``fit_layers(...).concept_vectors()`` and ``load_concept_vectors`` make one.
* GCAV strength (the paper's steer-towards algorithm): with ``g* = logit(p*)`` and ``s = w.v``,
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
import warnings
from collections.abc import Iterator

import numpy as np
import pandas as pd
import torch
from scipy.special import expit
from tqdm.auto import tqdm

from cgmt.validation import check_int, check_scalar

from ..probes.concept_vectors import LinearProbe
from ..validation import as_real_array
from .extract import check_positions, check_prompts, length_batches, pad_right, tokenize_prompts
from .hooks import (
    HookSet,
    block_output_tensor,
    decoder_blocks,
    input_device,
    position_limit,
    replace_block_output,
    require_decoder,
)

__all__ = [
    "select_prompts",
    "P_TOWARDS",
    "P_AWAY",
    "gcav_alpha",
    "additive_steering",
    "gcav_steering",
    "steerable_layers",
    "describe_skipped",
    "NoLayerSteeredWarning",
    "steer_prompts",
    "steering_metrics",
    "hard_layers",
    "generate",
    "generate_ids",
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


def select_prompts(labels, candidates, n: int, prompt_class="both") -> np.ndarray:
    """Indices of ``n`` steering prompts among ``candidates`` (e.g. the test split).

    Parameters
    ----------
    labels : array of shape (N,)
        Binary 0/1 labels of all examples.
    candidates : array of int
        Indices to choose from, in their order.
    n : int
        How many prompts (fewer if there are fewer candidates).
    prompt_class : "both", 0 or 1
        ``"both"`` alternates the two classes, class 0 first, so any ``n`` is balanced, then continues
        with the rest of the larger class; 0 or 1 takes that class only.

    Returns
    -------
    ndarray of int
        Up to ``n`` entries of ``candidates`` (indices into ``labels``), in the order described above.

    Examples
    --------
    >>> select_prompts(np.array([0, 0, 0, 1, 1]), np.arange(5), 4)
    array([0, 3, 1, 4])
    >>> select_prompts(np.array([0, 0, 0, 1, 1]), np.arange(5), 5, prompt_class=1)
    array([3, 4])
    """
    labels = np.asarray(labels)
    candidates = np.asarray(candidates, dtype=int)
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if prompt_class == "both":
        zeros, ones = candidates[labels[candidates] == 0], candidates[labels[candidates] == 1]
        k = min(len(zeros), len(ones))
        order = np.r_[np.column_stack([zeros[:k], ones[:k]]).ravel(), zeros[k:], ones[k:]].astype(int)
    elif prompt_class in (0, 1):
        order = candidates[labels[candidates] == prompt_class]
    else:
        raise ValueError(f"prompt_class must be 'both', 0 or 1, got {prompt_class!r}")
    return order[: int(n)]


def gcav_alpha(g, slope, direction="towards", p_target=None) -> np.ndarray:
    """Minimal strength moving logit ``g`` to ``logit(p_target)`` along a direction of slope ``s = w.v``.

    Returns 0 where the state already is in the target region (towards: ``g >= g*``; away:
    ``g <= g*``) and where ``slope <= 0`` (the layer is skipped).

    Parameters
    ----------
    g : float or ndarray
        Probe logits ``w.h + b`` before the edit.
    slope : float
        ``s = w.v``, the change of the logit per unit of alpha.
    direction : {"towards", "away"}
        Push the probe probability up to ``p_target`` (towards) or down to it (away).
    p_target : float in (0, 1), optional
        Target probability (default 0.9999 towards, 0.0001 away).

    Returns
    -------
    ndarray
        alpha per logit, so that ``g + alpha s = logit(p_target)`` where an edit is needed.

    Examples
    --------
    >>> gcav_alpha(np.array([0.0, 20.0]), 2.0).round(4)  # logit(0.9999) = 9.2102
    array([4.6051, 0.    ])
    """
    p_target = _check_direction(direction, p_target)
    g = np.asarray(as_real_array(g, "probe logits"), dtype=np.float64)
    g_star = _logit(p_target)
    if not np.all(np.isfinite(g)):
        raise ValueError("probe logits must be finite")
    slope = check_scalar(slope, "slope")
    if slope <= 0:
        return np.zeros_like(g)
    need = g < g_star if direction == "towards" else g > g_star
    return np.where(need, (g_star - g) / slope, 0.0)


def _finite_edit(edited: torch.Tensor, where: str) -> torch.Tensor:
    """``edited`` if every entry is finite; ``ValueError`` otherwise (an edit too large for the model's dtype would
    make every later logit NaN)."""
    if not bool(torch.isfinite(edited).all()):
        raise ValueError(f"steering {where} made the hidden state non-finite in {edited.dtype} (the edit "
                         "alpha * v exceeds the dtype's range); lower alpha")
    return edited


def model_positions(model) -> int | None:
    """The model's positions (``max_position_embeddings`` or ``n_positions``), None if its config has neither."""
    return getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)


def additive_hook(vector: torch.Tensor, strength, positions: str = "last"):
    """Forward hook adding ``strength * vector`` to a decoder block's output (last or all positions).

    ``vector`` is one direction (hidden_size,) for every row, or one per batch row (rows, hidden_size);
    ``strength`` is a number, or a 1-D tensor with one strength per batch row (the rows of every forward
    pass the hook sees)."""
    if positions not in ("last", "all"):
        raise ValueError(f"positions must be 'last' or 'all', got {positions!r}")
    per_row = isinstance(strength, torch.Tensor)
    label = "per row" if per_row else f"{strength:g}"

    def hook(module, args, output):
        hidden = block_output_tensor(output)
        if vector.shape[-1] != hidden.shape[-1]:
            raise ValueError(f"steering vector has {vector.shape[-1]} entries, hidden size is {hidden.shape[-1]}")
        if vector.dim() == 2 and vector.shape[0] != hidden.shape[0]:
            raise ValueError(f"{vector.shape[0]} per-row steering vectors for a batch of {hidden.shape[0]} rows")
        if per_row and strength.shape[0] != hidden.shape[0]:
            raise ValueError(f"{strength.shape[0]} per-row strengths for a batch of {hidden.shape[0]} rows")
        delta = (strength[:, None] * vector if per_row else strength * vector).to(hidden.dtype).to(hidden.device)
        hidden = hidden.clone()
        if positions == "all":
            hidden += delta[:, None, :] if delta.dim() == 2 else delta
        else:
            hidden[:, -1, :] += delta
        return replace_block_output(output, _finite_edit(hidden, f"with strength {label}"))

    return hook


@contextlib.contextmanager
def additive_steering(model, vectors: dict, alpha=1.0, positions="last") -> Iterator[HookSet]:
    """Fixed additive steering ``h <- h + alpha * v`` at the given layers (dict layer -> vector).

    ``alpha`` is a number or a dict layer -> number. ``"last"`` edits the sequence's last position,
    so feed unpadded (single) or left-padded inputs. Removed cleanly on exit.

    Parameters
    ----------
    model : transformers causal LM
        A decoder-only model (e.g. ``AutoModelForCausalLM``); its decoder blocks get the forward hooks.
    vectors : dict of int to array (hidden_size,) or (rows, hidden_size)
        Direction per layer (layer l = output of decoder block l, 1..L); a 2-D array gives one direction per
        batch row (e.g. several random controls stacked in one batch).
    alpha : float or dict of int to float (or to a 1-D array)
        Strength, in hidden-state units along the given vector; an array gives one strength per batch row.
    positions : {"last", "all"}
        Edit the last position of every forward call (the prompt's last token, then each generated token
        with a KV cache), or every position.

    Yields
    ------
    HookSet
        The registered hooks (removed on exit).

    Examples
    --------
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0), tiny_tokenizer()
    >>> with additive_steering(model, {2: np.ones(32)}, alpha=4.0):
    ...     text = generate(model, tokenizer, "a good film", max_new_tokens=3)
    >>> isinstance(text, str)
    True
    """
    require_decoder(model, "steering")
    blocks = decoder_blocks(model)
    hooks = HookSet()
    try:
        for layer, vec in vectors.items():
            if not 1 <= int(layer) <= len(blocks):
                raise ValueError(f"steering layer must be in 1..{len(blocks)}, got {layer}")
            strength = alpha[layer] if isinstance(alpha, dict) else alpha
            if np.ndim(strength) == 1:
                strength = torch.as_tensor(as_real_array(strength, f"alpha (layer {layer})"), dtype=torch.float64)
                if not bool(torch.isfinite(strength).all()):
                    raise ValueError(f"alpha (layer {layer}) must be finite, got NaN or infinite entries")
            else:
                strength = check_scalar(strength, f"alpha (layer {layer})")
            vec = np.asarray(as_real_array(vec, f"the steering vector of layer {layer}"), dtype=np.float64)
            if not np.all(np.isfinite(vec)):
                raise ValueError(f"the steering vector of layer {layer} must be finite, got NaN or infinite entries")
            if vec.ndim > 2 or vec.size == 0:
                raise ValueError(f"the steering vector of layer {layer} must be one direction (hidden_size,) or one "
                                 f"per row (rows, hidden_size), got shape {vec.shape}")
            vector = torch.as_tensor(vec, dtype=torch.float64)
            vector = vector if vec.ndim == 2 and vec.shape[0] > 1 else vector.ravel()
            hooks.add(blocks[int(layer) - 1].register_forward_hook(additive_hook(vector, strength, positions)))
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


class NoLayerSteeredWarning(UserWarning):
    """Steering was requested but no layer qualifies (tau, or w.v <= 0 everywhere): nothing is edited."""


def steerable_layers(probes, tau, L: int) -> tuple[list, dict]:
    """The layers GCAV steering edits, and why the others are skipped.

    Parameters
    ----------
    probes : ConceptVectors or mapping of int to LinearProbe
        Probes with ``coef`` and ``intercept`` (layer l = output of decoder block l, 1..L).
    tau : float in [0, 1] or None
        Reliability threshold on the probes' ``test_accuracy``.
    L : int
        Number of decoder blocks of the model.

    Returns
    -------
    (list of int, dict of int to str)
        Active layers (ascending) and ``{skipped layer: reason}``.

    Examples
    --------
    >>> from empirical.probes import LinearProbe
    >>> steerable_layers({1: LinearProbe([1.0], 0.0, test_accuracy=0.6),
    ...                   2: LinearProbe([1.0], 0.0, test_accuracy=0.9)}, tau=0.8, L=4)
    ([2], {1: 'test accuracy below tau'})
    """
    if tau is not None:
        tau = check_scalar(tau, "tau", low=0.0, high=1.0)
    if not hasattr(probes, "items") or not len(probes):
        raise ValueError(f"probes must be a non-empty ConceptVectors or mapping {{layer: LinearProbe}}, got {probes!r}")
    active, skipped = [], {}
    for layer in sorted(probes):
        pr = probes[layer]
        if not isinstance(pr, LinearProbe):
            raise ValueError(f"probes[{layer}] must be a LinearProbe (see ConceptVectors), got {type(pr).__name__}")
        if pr.coef is None:
            raise ValueError(f"probes[{layer}] holds only a direction; GCAV steering needs the probe's coef and "
                             "intercept (fit them, e.g. fit_layers(...).concept_vectors())")
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


def describe_skipped(probes, tau, skipped: dict) -> str:
    """One phrase on why layers were skipped (``skipped`` from :func:`steerable_layers`), for warnings and the CLI.

    Parameters
    ----------
    probes : ConceptVectors or mapping of int to LinearProbe
        The probes the layers were chosen from (their ``test_accuracy`` is quoted).
    tau : float or None
        The reliability threshold that was applied.
    skipped : dict of int to str
        ``{skipped layer: reason}`` as returned by :func:`steerable_layers`.

    Returns
    -------
    str
        The reasons joined by "; " (layers below ``tau``, with the best skipped probe's accuracy; layers with
        ``w.v <= 0``), or ``"no probe given"`` when ``skipped`` has neither.

    Examples
    --------
    >>> from empirical.probes import LinearProbe
    >>> probes = {1: LinearProbe([1.0], 0.0, test_accuracy=0.6)}
    >>> describe_skipped(probes, 0.8, steerable_layers(probes, 0.8, L=2)[1])
    'tau=0.8 excludes 1 layer(s) (the best probe test accuracy is 0.600, at layer 1)'
    """
    below = [layer for layer, why in skipped.items() if why == "test accuracy below tau"]
    parts = []
    if below:
        best = max(below, key=lambda layer: probes[layer].test_accuracy)
        parts.append(f"tau={tau:g} excludes {len(below)} layer(s) (the best probe test accuracy is "
                     f"{probes[best].test_accuracy:.3f}, at layer {best})")
    flat = [layer for layer, why in skipped.items() if why == "w.v <= 0"]
    if flat:
        parts.append(f"{len(flat)} layer(s) have w.v <= 0")
    return "; ".join(parts) or "no probe given"


def gcav_hook(layer: int, probe: LinearProbe, g_star: float, direction: str, positions: str, state: _SteerState):
    """Forward hook of GCAV steering at one layer: moves the probe logit of the edited positions to
    ``g_star`` along the probe's direction when it is outside the target region, and records the pair."""
    slope = probe.slope
    weights = torch.as_tensor(probe.coef, dtype=torch.float64)
    direction_vector = torch.as_tensor(probe.direction, dtype=torch.float64)
    intercept = probe.intercept

    def strength(logits):
        need = logits < g_star if direction == "towards" else logits > g_star
        return torch.where(need, (g_star - logits) / slope, torch.zeros_like(logits))

    def hook(module, args, output):
        hidden = block_output_tensor(output)
        if weights.numel() != hidden.shape[-1]:
            raise ValueError(f"probe at layer {layer} has {weights.numel()} weights, hidden size is {hidden.shape[-1]}")
        w, v = weights.to(hidden.device), direction_vector.to(hidden.device)
        batch, length = hidden.shape[0], hidden.shape[1]
        rows = torch.arange(batch, device=hidden.device)
        prompt_pass = state.last is not None and len(state.last) == batch and length > int(state.last.max())
        last = state.last.to(hidden.device) if prompt_pass else torch.full((batch,), length - 1, device=hidden.device)
        hidden64 = hidden.to(torch.float64)
        if positions == "last":
            selected = hidden64[rows, last]  # (B, p)
            logits = selected @ w + intercept
            alpha = strength(logits)
            edited = hidden.clone()
            edited[rows, last] = (selected + alpha[:, None] * v).to(hidden.dtype)
        else:
            all_logits = hidden64 @ w + intercept  # (B, T)
            all_alpha = strength(all_logits)
            edited = (hidden64 + all_alpha[..., None] * v).to(hidden.dtype)
            logits, alpha = all_logits[rows, last], all_alpha[rows, last]
        if not bool(torch.isfinite(logits).all()):
            raise ValueError(f"probe logits at layer {layer} are not finite (the hidden states or the probe weights "
                             "overflow float64); steering cannot compute a strength")
        if state.recording:
            stored = edited[rows, last].to(torch.float64)
            logits_after = stored @ w + intercept
            rounding = 0.5 * torch.finfo(hidden.dtype).eps * (stored.abs() @ w.abs()) + 1e-12 * abs(g_star)
            for i in range(batch):
                state.records.append({
                    "prompt": int(state.rows[i]) if state.rows is not None else i,
                    "layer": layer,
                    "logit_before": float(logits[i]),
                    "alpha": float(alpha[i]),
                    "logit_after": float(logits_after[i]),
                    "round_tol": float(rounding[i]),
                })
        return replace_block_output(output, _finite_edit(edited, f"at layer {layer}"))

    return hook


@contextlib.contextmanager
def gcav_steering(model, probes, direction="towards", p_target=None, tau=None, positions="last",
                  state: _SteerState | None = None) -> Iterator:
    """GCAV adaptive steering at every layer of ``probes`` (a ConceptVectors or mapping layer -> LinearProbe).

    Yields the hook state; ``state.records`` collects, for each steered forward pass and row, a dict
    with the layer, the logit before, alpha, the logit recomputed from the stored edited state and
    the rounding tolerance (only for the last position of the prompt pass when ``state.last`` is set
    by :func:`steer_prompts`, else for the last position of every pass).

    Parameters
    ----------
    model : transformers causal LM
        A decoder-only model (e.g. ``AutoModelForCausalLM``); its decoder blocks get the forward hooks.
    probes, direction, p_target, tau, positions
        As for :func:`steer_prompts`.
    state : optional
        The hook state to fill (``steer_prompts`` passes its own).

    Yields
    ------
    _SteerState
        The hook state (``active_layers``, ``skipped_layers``, ``records``); hooks are removed on exit.
    """
    require_decoder(model, "steering")
    p_target = _check_direction(direction, p_target)
    if positions not in ("last", "all"):
        raise ValueError(f"positions must be 'last' or 'all', got {positions!r}")
    g_star = _logit(p_target)
    blocks = decoder_blocks(model)
    active, skipped = steerable_layers(probes, tau, len(blocks))
    if not active:
        warnings.warn(f"GCAV steering edits no layer: {describe_skipped(probes, tau, skipped)}", NoLayerSteeredWarning,
                      stacklevel=3)
    state = state or _SteerState()
    state.active_layers, state.skipped_layers = active, skipped
    hooks = HookSet()
    try:
        for layer in active:
            hook = gcav_hook(layer, probes[layer], g_star, direction, positions, state)
            hooks.add(blocks[layer - 1].register_forward_hook(hook))
        yield state
    finally:
        hooks.remove()


def _records_frame(records, direction, p_target):
    df = pd.DataFrame(records)
    if df.empty:
        return df
    g_star = _logit(p_target)
    df["intervened"] = df["alpha"] != 0.0
    if direction == "towards":
        df["success"] = df["logit_after"] >= g_star - df["round_tol"]
    else:
        df["success"] = df["logit_after"] <= g_star + df["round_tol"]
    df["p_before"] = expit(df["logit_before"].to_numpy())
    df["p_after"] = expit(df["logit_after"].to_numpy())
    df["abs_alpha"] = df["alpha"].abs()
    df.attrs["g_star"] = g_star
    return df


def steer_prompts(model, tokenizer, prompts, probes, direction="towards", p_target=None, tau=None,
                  positions="last", batch_size=16, progress=True) -> pd.DataFrame:
    """GCAV-steer a prompt set and record every evaluated (layer, prompt) pair.

    Returns a pandas DataFrame with columns ``prompt, layer, logit_before, alpha, logit_after,
    round_tol, intervened, success, p_before, p_after, abs_alpha`` (the metrics' input), with
    ``attrs`` holding the active and skipped layers.

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompts : list of str
        The prompts; each is steered and recorded at its own last token (right-padded batches).
    probes : ConceptVectors or mapping of int to LinearProbe
        The probe of each steered layer (layer l = output of decoder block l, 1..L); their ``coef`` and
        ``intercept`` define the logit, ``direction`` the edit.
    direction : {"towards", "away"}
        Push the probe probability above or below ``p_target``.
    p_target : float in (0, 1), optional
        Target probability (default 0.9999 towards, 0.0001 away).
    tau : float, optional
        Skip layers whose probe ``test_accuracy`` is below ``tau``.
    positions : {"last", "all"}
        Edit the last position of every forward call, or every position.
    batch_size : int
        Prompts per forward pass.
    progress : bool
        Show a progress bar.

    Returns
    -------
    pandas.DataFrame
        One row per (active layer, prompt) pair with the columns above; ``prompt`` is the index into ``prompts``,
        ``alpha`` is in hidden-state units along the probe's ``direction``, logits are natural-log odds.
        ``attrs``: ``active_layers``, ``skipped_layers``, ``direction``, ``p_target`` (and ``g_star`` when
        there are rows).

    Examples
    --------
    >>> import numpy as np
    >>> from empirical.probes import ConceptVectors, LinearProbe
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0), tiny_tokenizer()
    >>> probes = ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.9),
    ...                          2: LinearProbe(-np.ones(32), 0.5, test_accuracy=0.95)})
    >>> pairs = steer_prompts(model, tokenizer, ["a good film", "a bad film"], probes, progress=False)
    >>> len(pairs), bool(pairs["success"].all())
    (4, True)
    """
    p_target = _check_direction(direction, p_target)
    token_ids = tokenize_prompts(tokenizer, prompts)
    check_positions(model, token_ids)
    core = model.base_model if getattr(model, "base_model", None) is not None else model
    device = input_device(model)
    st = _SteerState()
    order = sorted(range(len(token_ids)), key=lambda i: -len(token_ids[i]))
    with gcav_steering(model, probes, direction, p_target, tau, positions, state=st), torch.inference_mode():
        bar = tqdm(total=len(order), desc=f"steer {direction}", unit="prompt", disable=not progress, leave=False)
        for idx in length_batches(order, token_ids, batch_size, 1 << 30, 0):
            ids, mask, last = pad_right([token_ids[i] for i in idx], 0, device)
            st.last, st.rows = last, idx
            core(input_ids=ids, attention_mask=mask, use_cache=False)
            bar.update(len(idx))
        bar.close()
    df = _records_frame(st.records, direction, p_target)
    df.attrs.update(active_layers=st.active_layers, skipped_layers=st.skipped_layers, direction=direction,
                    p_target=p_target)
    return df


def steering_metrics(records) -> dict:
    """Success rate, intervention rate and |alpha| median/p90/max over evaluated layer-prompt pairs.

    Parameters
    ----------
    records : pandas.DataFrame
        The output of :func:`steer_prompts`.

    Returns
    -------
    dict
        ``n_pairs``, ``n_layers``, ``layers`` ("first-last"), ``success_rate``, ``intervention_rate``,
        ``alpha_median``, ``alpha_p90``, ``alpha_max`` (over pairs with an edit), ``alpha_median_all``,
        ``alpha_p90_all`` (all pairs), ``max_abs_logit_error`` (NaN values when there are no pairs).

    Examples
    --------
    >>> import numpy as np
    >>> from empirical.probes import ConceptVectors, LinearProbe
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0), tiny_tokenizer()
    >>> probes = ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.9),
    ...                          2: LinearProbe(-np.ones(32), 0.5, test_accuracy=0.95)})
    >>> metrics = steering_metrics(steer_prompts(model, tokenizer, ["a good film"], probes, progress=False))
    >>> metrics["n_pairs"], metrics["success_rate"], metrics["layers"]
    (2, 1.0, '1-2')
    """
    df = records
    n = int(len(df))
    if n == 0:
        nan = float("nan")
        return {"n_pairs": 0, "n_layers": 0, "layers": "--", "success_rate": nan, "intervention_rate": nan,
                "alpha_median": nan, "alpha_p90": nan, "alpha_max": nan, "alpha_median_all": nan,
                "alpha_p90_all": nan, "max_abs_logit_error": nan}
    a = df.loc[df["intervened"], "abs_alpha"].to_numpy()
    a_all = df["abs_alpha"].to_numpy()

    def q(x, p):
        return float(np.percentile(x, p)) if len(x) else 0.0

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
    """Top-k layers by median and by max |alpha| (over pairs where steering was applied).

    Parameters
    ----------
    records : pandas.DataFrame
        The output of :func:`steer_prompts`.
    k : int
        How many layers.

    Returns
    -------
    dict
        ``by_median`` and ``by_max``: lists of (layer, |alpha|), largest first.
    """
    df = records[records["intervened"]] if len(records) else records
    if len(df) == 0:
        return {"by_median": [], "by_max": []}
    grp = df.groupby("layer")["abs_alpha"]
    med, mx = grp.median(), grp.max()

    def top(s):
        return [(int(layer), float(x)) for layer, x in s.sort_values(ascending=False).head(k).items()]

    return {"by_median": top(med), "by_max": top(mx)}


def generate_ids(model, tokenizer, prompt, max_new_tokens=20, **gen_kwargs) -> tuple[list, list]:
    """Greedy generation from one prompt: (prompt token ids, generated token ids; EOS included if produced).

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompt : str
        One prompt, tokenized by ``tokenizer`` as is (with its default special tokens).
    max_new_tokens : int >= 1
        At most the model's positions (``max_position_embeddings`` / ``n_positions``) minus the prompt's tokens.
    **gen_kwargs
        Passed to ``model.generate`` (override the greedy defaults).

    Returns
    -------
    (list of int, list of int)
        The prompt's token ids and the generated ones (at most ``max_new_tokens``; EOS included if produced).
    """
    require_decoder(model, "generation")
    (prompt,) = check_prompts([prompt], "prompt")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens")
    enc = tokenizer(prompt, return_tensors="pt").to(input_device(model))
    # a learned position table is a hard limit; otherwise the configured context (rotary models) bounds the text
    limit = position_limit(model) or model_positions(model)
    n_prompt = int(enc["input_ids"].shape[1])
    if limit and n_prompt + max_new_tokens > limit:
        raise ValueError(f"max_new_tokens must be at most the model's {limit} positions minus the prompt's "
                         f"{n_prompt} tokens = {max(limit - n_prompt, 0)}, got {max_new_tokens}")
    kw = dict(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    kw.update(gen_kwargs)
    with torch.inference_mode():
        out = model.generate(**enc, **kw)
    prompt_ids = enc["input_ids"][0].tolist()
    return prompt_ids, out[0, len(prompt_ids):].tolist()


def generate(model, tokenizer, prompt, max_new_tokens=20, **gen_kwargs) -> str:
    """Greedy completion of one prompt (the new text only); see :func:`generate_ids`.

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompt : str
        One prompt.
    max_new_tokens : int >= 1
        Tokens to generate at most (bounded by the model's positions, see :func:`generate_ids`).
    **gen_kwargs
        Passed to ``model.generate`` (override the greedy defaults).

    Returns
    -------
    str
        The generated tokens decoded without special tokens (the prompt is not included).
    """
    return tokenizer.decode(generate_ids(model, tokenizer, prompt, max_new_tokens, **gen_kwargs)[1],
                            skip_special_tokens=True)


def compare_generations(model, tokenizer, prompts, probes, direction="towards", p_target=None, tau=None,
                        positions="last", max_new_tokens=20, progress=True) -> list:
    """Original and GCAV-steered greedy completions side by side.

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompts : list of str
        Prompts, each generated from on its own (no batching).
    probes, direction, p_target, tau, positions
        As for :func:`steer_prompts`.
    max_new_tokens : int
        Tokens to generate at most per completion (see :func:`generate_ids`).
    progress : bool
        Show a progress bar.

    Returns
    -------
    list of dict
        ``prompt``, ``direction``, ``original``, ``steered`` per prompt.

    Examples
    --------
    >>> import numpy as np
    >>> from empirical.probes import ConceptVectors, LinearProbe
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0), tiny_tokenizer()
    >>> probes = ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.9),
    ...                          2: LinearProbe(-np.ones(32), 0.5, test_accuracy=0.95)})
    >>> rows = compare_generations(model, tokenizer, ["a good film"], probes, max_new_tokens=3, progress=False)
    >>> sorted(rows[0])
    ['direction', 'original', 'prompt', 'steered']
    """
    rows = []
    for prompt in tqdm(check_prompts(prompts), desc=f"generate {direction}", disable=not progress, leave=False):
        original = generate(model, tokenizer, prompt, max_new_tokens)
        st = _SteerState()
        st.recording = False
        with gcav_steering(model, probes, direction, p_target, tau, positions, state=st):
            steered = generate(model, tokenizer, prompt, max_new_tokens)
        rows.append({"prompt": prompt, "direction": direction, "original": original, "steered": steered})
    return rows
