"""The edits of activation steering: additive edits and GCAV's per-sample strength, as forward hooks on the
decoder blocks (the paper's GCAV section and its steering protocol appendix).

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
  :class:`~empirical.probes.ConceptVectors` (or any mapping layer ->
  :class:`~empirical.probes.LinearProbe`, whose ``coef``, ``intercept``, ``direction``
  are w, b, v); ``fit_layers(...).concept_vectors()`` and ``load_concept_vectors`` make one.
* GCAV strength (the paper's steer-towards algorithm): with ``g* = logit(p*)`` and ``s = w.v``,
  ``alpha = (g* - g(h)) / s`` if the state is not in the target region, else 0
  (towards: target ``P_m >= p* = 0.9999``; away: ``P_m <= p* = 0.0001``). Layers whose ``s <= 0``
  or whose probe test accuracy is below ``tau`` are skipped. Layers are processed in increasing
  order within one forward pass, so each sees the already-steered upstream state.
* Arithmetic is float64; the edited state is stored in the model dtype, so the logit recomputed
  from the stored state differs from g* by at most the rounding bound
  ``eps(dtype)/2 * sum_i |w_i h_i|`` (``round_tol``); success is judged up to that bound.

The paper's measurement of these edits in probe coordinates is :mod:`empirical.llm._steering`; what the
model then says, :mod:`empirical.llm._steering_eval`; generation, :mod:`empirical.llm._generation`.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import numpy as np
import torch

from empirical.common.checks import check_scalar

from ..common.arrays import as_real_array
from ..probes import LinearProbe
from ._gcav import GcavRule, describe_skipped, gcav_alpha, target_logit
from ._hooks import HookSet, block_output_tensor, decoder_blocks, replace_block_output, require_decoder

#: The API (the hook builders and ``model_positions`` are the internals of the two context managers)
__all__ = ["additive_steering", "gcav_steering", "SteerState", "NoLayerSteeredWarning"]


def _finite_edit(edited: torch.Tensor, where: str) -> torch.Tensor:
    """``edited`` if every entry is finite; ``ValueError`` otherwise (an edit too large for the model's dtype would
    make every later logit NaN)."""
    if not bool(torch.isfinite(edited).all()):
        raise ValueError(f"steering {where} made the hidden state non-finite in {edited.dtype} (the edit "
                         "alpha * v exceeds the dtype's range); lower alpha")
    return edited


def model_positions(model) -> int | None:
    """The most positions (tokens) the model's config allows in one sequence.

    Parameters
    ----------
    model : transformers model
        A loaded model; only its ``config`` is read.

    Returns
    -------
    int or None
        The config's ``max_position_embeddings`` or ``n_positions``; None if it has neither (no limit is known).
    """
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
    >>> from empirical.llm import generate
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


class SteerState:
    """Shared state of the GCAV hooks of one steered run: per-row last index of the prompt pass and the record sink.

    Attributes
    ----------
    last : torch.Tensor of shape (B,) or None
        Last real position of each row of a right-padded prompt batch (None: the last position of every pass).
    rows : list of int or None
        Prompt ids of the batch rows (for the records).
    records : list of dict
        One dict per steered (layer, row) of a recorded pass (see :func:`gcav_steering`).
    recording : bool
        Whether the hooks append records (``compare_generations`` turns it off).
    first_pass : bool
        True until the first steered forward pass has run.
    """

    def __init__(self):
        self.last = None  # tensor (B,) of last real positions for right-padded prompt batches
        self.rows = None  # prompt ids of the batch rows
        self.records = []
        self.recording = True
        self.first_pass = True


class NoLayerSteeredWarning(UserWarning):
    """Steering was requested but no layer qualifies (tau, or w.v <= 0 everywhere): nothing is edited."""


def _gcav_hook(layer: int, probe: LinearProbe, rule: GcavRule, state: SteerState):
    """Forward hook of GCAV steering at one layer: moves the probe logit of the edited positions to
    ``logit(rule.target)`` along the probe's direction when it is outside the target region, and records the pair."""
    p_target, direction, positions = rule.target, rule.direction, rule.positions
    slope, g_star = probe.slope, target_logit(p_target)
    weights = torch.as_tensor(probe.coef, dtype=torch.float64)
    direction_vector = torch.as_tensor(probe.direction, dtype=torch.float64)
    intercept = probe.intercept

    def strength(logits):
        """GCAV's strength per logit: the one formula, :func:`empirical.llm.gcav_alpha` (float64 on the host)."""
        if not bool(torch.isfinite(logits).all()):
            raise ValueError(f"probe logits at layer {layer} are not finite (the hidden states or the probe weights "
                             "overflow float64); steering cannot compute a strength")
        alpha = gcav_alpha(logits.detach().cpu().numpy(), slope, direction, p_target)
        return torch.as_tensor(alpha, dtype=torch.float64, device=logits.device)

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
def gcav_steering(model, probes, rule: GcavRule | str = "towards", state: SteerState | None = None) -> Iterator:
    """GCAV adaptive steering at every layer of ``probes`` (a ConceptVectors or mapping layer -> LinearProbe).

    Yields the hook state; ``state.records`` collects, for each steered forward pass and row, a dict
    with the layer, the logit before, alpha, the logit recomputed from the stored edited state and
    the rounding tolerance (only for the last position of the prompt pass when ``state.last`` is set
    by :func:`steer_prompts`, else for the last position of every pass).

    Parameters
    ----------
    model : transformers causal LM
        A decoder-only model (e.g. ``AutoModelForCausalLM``); its decoder blocks get the forward hooks.
    probes : ConceptVectors or mapping of int to LinearProbe
        The probe of each steered layer (layer l = output of decoder block l, 1..L).
    rule : GcavRule or {"towards", "away"}, default="towards"
        Direction, target probability, reliability threshold ``tau`` and positions
        (:class:`~empirical.llm.GcavRule`; a direction alone is ``GcavRule(direction)``).
    state : optional
        The hook state to fill (``steer_prompts`` passes its own).

    Yields
    ------
    SteerState
        The hook state (``active_layers``, ``skipped_layers``, ``records``); hooks are removed on exit.
    """
    require_decoder(model, "steering")
    rule = GcavRule.of(rule)
    blocks = decoder_blocks(model)
    active, skipped = rule.layers(probes, len(blocks))
    if not active:
        warnings.warn(f"GCAV steering edits no layer: {describe_skipped(probes, rule.tau, skipped)}",
                      NoLayerSteeredWarning, stacklevel=3)
    state = state or SteerState()
    state.active_layers, state.skipped_layers = active, skipped
    hooks = HookSet()
    try:
        for layer in active:
            hook = _gcav_hook(layer, probes[layer], rule, state)
            hooks.add(blocks[layer - 1].register_forward_hook(hook))
        yield state
    finally:
        hooks.remove()
