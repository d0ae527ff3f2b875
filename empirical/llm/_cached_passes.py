"""Batched, key/value-cached forward passes of a causal LM with an edit per pass: what the steering measurement
(:mod:`empirical.llm._steering_eval`) runs.

A prompt batch is left-padded (:class:`Batch`); the prompt pass, the stem's head and the answer position are
separate passes sharing the key/value cache, so an edit can act on any of them (:func:`edited_passes`:
``prompt``, ``answer`` or ``all``) while the unsteered cache of the others is reused. :class:`SettingEdit` turns
one steering setting and direction into per-pass contexts (the concept edit and its random controls, GCAV strengths
replayed); :func:`read_answer` reads the log-probs at the answer position, :func:`generate_greedy` continues a batch
greedily, :func:`continuation_nll` scores a continuation under the unsteered model. Layer l is the output of decoder
block l (:mod:`empirical.llm._hooks`); the cache goes in under the keyword the model takes
(:func:`~empirical.llm._hooks.cache_argument`).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from ..probes import ConceptVectors
from ._hooks import cache_argument, output_cache
from ._steering_settings import SteeringSetting

try:  # transformers >= 4.36
    from transformers import DynamicCache
except ImportError:  # pragma: no cover
    DynamicCache = None

__all__ = ["Batch", "forward_pass", "SettingEdit", "edited_passes", "read_answer", "prompt_state", "generate_greedy",
           "continuation_nll", "until_eos"]



def _kv(cache):
    return [(k, v) for k, v, *_ in cache]


def _cache(kv, model):
    return None if kv is None else DynamicCache([(k, v) for k, v in kv], config=model.config)


class Batch:
    """Left-padded token ids of a batch of prompts with the running attention mask and positions.

    Parameters
    ----------
    rows : list of list of int
        Token ids of each prompt.
    device : torch.device
        Where the tensors go (the model's input device).
    pad_id : int
        The padding token id (masked out).

    Attributes
    ----------
    ids, mask, positions : torch.Tensor of shape (B, width)
        Left-padded ids, attention mask (1 on real tokens) and position ids (0 at each row's first real token).
    device : torch.device
        Where the tensors are.
    """

    def __init__(self, rows, device, pad_id):
        width = max(len(r) for r in rows)
        self.ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        self.mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            self.ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
            self.mask[i, width - len(r):] = 1
        self.ids, self.mask = self.ids.to(device), self.mask.to(device)
        self.positions = (self.mask.cumsum(-1) - 1).clamp(min=0)
        self.device = device

    def repeat(self, times: int) -> "Batch":
        """The batch stacked ``times`` times along the rows (row ``r * B + i`` is row ``i``)."""
        out = object.__new__(Batch)
        out.ids, out.mask = self.ids.repeat(times, 1), self.mask.repeat(times, 1)
        out.positions, out.device = self.positions.repeat(times, 1), self.device
        return out


def _logprobs_last(model, hidden: torch.Tensor) -> torch.Tensor:
    """log-softmax of the LM head at the last position (the head runs on one position, not the whole sequence)."""
    logits = model.get_output_embeddings()(hidden[:, -1]).double()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return torch.log_softmax(logits, dim=-1)


def forward_pass(model, core, ids, mask, positions, kv, context=None, head=True):
    """One forward pass of ``ids`` after the cached ``kv`` under an optional edit.

    Parameters
    ----------
    model : transformers causal LM
        The model (its LM head and config).
    core : torch.nn.Module
        Its base model (:func:`~empirical.llm._hooks.base_model`), which runs the passes.
    ids, mask, positions : torch.Tensor
        The new tokens (B, T), the attention mask over cache and new tokens, their position ids (B, T).
    kv : list of (key, value) or None
        The key/value cache so far (None: from scratch).
    context : callable or None
        A factory of the edit's context manager (:class:`SettingEdit`), or None for an unsteered pass.
    head : bool, default=True
        Also return the log-probs at the last position.

    Returns
    -------
    kv : list of (key, value)
        The cache after the pass.
    logprobs : torch.Tensor of shape (B, vocab) or None
        log-softmax of the LM head at the last position (float64).
    alphas : dict of int to ndarray of shape (B,), or None
        The GCAV strengths the edit recorded per layer and row (hidden-state units), None if it records none.
    """
    alphas = None
    with (context() if context is not None else contextlib.nullcontext()) as state:
        out = core(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                   **{cache_argument(core): _cache(kv, model)})
        if state is not None and hasattr(state, "records"):
            alphas = {}
            for record in state.records:
                alphas.setdefault(record["layer"], [0.0] * ids.shape[0])[record["prompt"]] = record["alpha"]
            alphas = {layer: np.asarray(a) for layer, a in alphas.items()}
    return _kv(output_cache(out)), (_logprobs_last(model, out.last_hidden_state) if head else None), alphas


@dataclass
class SettingEdit:
    """What one setting does in one direction: the concept edit and its random controls, as per-pass contexts.

    Parameters
    ----------
    model : transformers causal LM
        The steered model.
    setting : SteeringSetting
        GCAV (target ``strength``; away: 1 - strength) or additive (``strength`` x the layer's median norm).
    probes : ConceptVectors
        The method's probes (directions; for GCAV, weights; for additive, each layer's ``state_norm``).
    layers : list of int
        The steered layers.
    direction : {"towards", "away"}
        Push the concept up or down.

    Attributes
    ----------
    sign : float
        +1 towards, -1 away.
    """

    model: object
    setting: SteeringSetting
    probes: ConceptVectors
    layers: list
    direction: str

    @property
    def sign(self):
        return 1.0 if self.direction == "towards" else -1.0

    def concept(self):
        """The concept edit of one pass (a context factory; :meth:`~empirical.llm.EditKind.concept`)."""
        return self.setting.edit_kind.concept(self)

    def random(self, units, alphas=None):
        """The random control: ``units`` (layer -> unit vector) at the concept run's |alpha| (GCAV: ``alphas``
        recorded for this pass, per row; additive: the fixed strengths)."""
        return self.setting.edit_kind.random(self, units, alphas)

    def random_stacked(self, draws, alphas, rows: int):
        """All random controls of the answer-position edit in one pass: ``draws`` (one layer -> unit vector dict
        per draw) stacked draw by draw over a batch of ``rows`` rows repeated ``len(draws)`` times, at the concept
        run's |alpha| (GCAV: ``alphas`` of the answer pass, per row; additive: the fixed strengths)."""
        return self.setting.edit_kind.random_stacked(self, draws, alphas, rows)


def edited_passes(positions: str) -> tuple:
    """Which passes an edit at ``positions`` changes.

    Parameters
    ----------
    positions : {"prompt", "answer", "all"}
        The setting's positions.

    Returns
    -------
    (bool, bool, bool)
        Whether the prompt pass, the stem-head pass and the answer pass are edited.
    """
    return {"prompt": (True, False, False), "answer": (False, False, True), "all": (True, True, True)}[positions]


def read_answer(model, core, batch, head_ids, answer_id, base_kv, edits, seg):
    """Log-probs at the answer position with ``edits`` on the passes ``seg``, reusing the unsteered cache elsewhere.

    Parameters
    ----------
    model : transformers causal LM
        The model (its LM head and config).
    core : torch.nn.Module
        Its base model (:func:`~empirical.llm._hooks.base_model`), which runs the passes.
    batch : Batch
        The prompts.
    head_ids : list of int
        The stem's tokens before the answer position.
    answer_id : int
        The stem's last token (its output is the answer distribution).
    base_kv : (kv, kv)
        The unsteered caches after the prompt and after the stem head.
    edits : (callable or None, callable or None, callable or None)
        The edit's context factory per pass (prompt, stem head, answer).
    seg : (bool, bool, bool)
        Which passes are edited (:func:`edited_passes`).

    Returns
    -------
    logprobs : torch.Tensor of shape (B, vocab)
        At the answer position (float64).
    alphas : list of three dict or None
        The GCAV strengths recorded in each pass.
    """
    B = batch.ids.shape[0]
    n_head = len(head_ids)
    ones = lambda n: torch.ones((B, n), dtype=torch.long, device=batch.device)  # noqa: E731
    step = lambda start, n: (batch.positions[:, -1:] + 1 + start + torch.arange(n, device=batch.device))  # noqa: E731
    head = torch.tensor([head_ids] * B, dtype=torch.long, device=batch.device).reshape(B, n_head)
    answer = torch.full((B, 1), answer_id, dtype=torch.long, device=batch.device)
    alphas = [None, None, None]
    if seg[0]:
        kv, _, alphas[0] = forward_pass(model, core, batch.ids, batch.mask, batch.positions, None, edits[0], head=False)
    else:
        kv = base_kv[0]
    if seg[0] or seg[1]:
        if n_head:
            kv, _, alphas[1] = forward_pass(model, core, head, torch.cat([batch.mask, ones(n_head)], 1),
                                            step(0, n_head), kv, edits[1] if seg[1] else None, head=False)
    else:
        kv = base_kv[1]
    _, lp, alphas[2] = forward_pass(model, core, answer, torch.cat([batch.mask, ones(n_head + 1)], 1),
                                    step(n_head, 1), kv, edits[2] if seg[2] else None)
    return lp, alphas


def prompt_state(model, core, batch, context=None):
    """The prompt pass split as the answer-position edit needs it.

    Parameters
    ----------
    model : transformers causal LM
        The model (its LM head and config).
    core : torch.nn.Module
        Its base model (:func:`~empirical.llm._hooks.base_model`), which runs the passes.
    batch : Batch
        The prompts.
    context : callable or None
        The edit's context factory for the last column's pass (None: unsteered).

    Returns
    -------
    kv_head : list of (key, value) or None
        The unsteered cache of every column but the last (None for one-column batches).
    kv : list of (key, value)
        The cache after the last column.
    logprobs : torch.Tensor of shape (B, vocab)
        At the last position (its argmax is the first new token).
    alphas : dict or None
        The GCAV strengths of the last column's pass.
    """
    kv_head = None
    if batch.ids.shape[1] > 1:
        kv_head, _, _ = forward_pass(model, core, batch.ids[:, :-1], batch.mask[:, :-1], batch.positions[:, :-1], None,
                                     head=False)
    kv, lp, alphas = forward_pass(model, core, batch.ids[:, -1:], batch.mask, batch.positions[:, -1:], kv_head, context)
    return kv_head, kv, lp, alphas


def generate_greedy(model, core, batch, n_new, edit, seg, base):
    """Greedy continuation of a left-padded batch, with an edit on the chosen passes.

    Parameters
    ----------
    model : transformers causal LM
        The model (its LM head and config).
    core : torch.nn.Module
        Its base model (:func:`~empirical.llm._hooks.base_model`), which runs the passes.
    batch : Batch
        The prompts.
    n_new : int
        Tokens to generate.
    edit : callable or None
        ``edit(t)`` gives the context factory of pass ``t`` (-1: the prompt pass, t >= 0: the pass of generated
        token t) or None.
    seg : (bool, bool, bool)
        Which passes it changes (:func:`edited_passes`): ``prompt`` the whole prompt pass, ``answer`` the last
        prompt position (it yields the first new token) and every generated token's pass, ``all`` both.
    base : tuple
        The unsteered :func:`prompt_state`.

    Returns
    -------
    ids : torch.Tensor of shape (B, n_new)
        The generated token ids.
    alphas : list of dict or None
        The GCAV strengths of each pass in order (None where the pass was not edited or records none).
    """
    kv_head, kv, lp, _ = base
    alphas = []
    if seg[0]:
        kv, lp, a = forward_pass(model, core, batch.ids, batch.mask, batch.positions, None, edit(-1))
        alphas.append(a)
    elif seg[2]:
        kv, lp, a = forward_pass(model, core, batch.ids[:, -1:], batch.mask, batch.positions[:, -1:], kv_head, edit(-1))
        alphas.append(a)
    B = batch.ids.shape[0]
    mask, out = batch.mask, []
    for t in range(n_new):
        token = lp.argmax(-1, keepdim=True)
        out.append(token)
        if t == n_new - 1:
            break
        mask = torch.cat([mask, torch.ones((B, 1), dtype=torch.long, device=batch.device)], 1)
        kv, lp, a = forward_pass(model, core, token, mask, batch.positions[:, -1:] + 1 + t, kv,
                                 edit(t) if seg[2] else None)
        alphas.append(a)
    return torch.cat(out, 1), alphas


def continuation_nll(model, core, batch, prompt_state, new_ids, eos_id):
    """Per-row mean negative log-likelihood of a continuation under the unsteered model.

    Parameters
    ----------
    model : transformers causal LM
        The model (its LM head and config).
    core : torch.nn.Module
        Its base model (:func:`~empirical.llm._hooks.base_model`), which runs the passes.
    batch : Batch
        The prompts.
    prompt_state : (kv, logprobs)
        The unsteered cache and last-position log-probs of the prompt pass.
    new_ids : torch.Tensor of shape (B, n)
        The continuation.
    eos_id : int or None
        The end-of-sequence token: tokens after the first EOS are not scored.

    Returns
    -------
    nll : ndarray of shape (B,)
        Mean negative log-likelihood per scored token (nats).
    keep : torch.Tensor of shape (B, n)
        1 for the scored tokens (:func:`until_eos`).
    """
    kv, lp0 = prompt_state
    B, n = new_ids.shape
    nll = -lp0.gather(1, new_ids[:, :1])  # (B, 1)
    if n > 1:
        mask = torch.cat([batch.mask, torch.ones((B, n - 1), dtype=torch.long, device=batch.device)], 1)
        out = core(input_ids=new_ids[:, :-1], attention_mask=mask,
                   position_ids=batch.positions[:, -1:] + 1 + torch.arange(n - 1, device=batch.device),
                   use_cache=True, **{cache_argument(core): _cache(kv, model)})
        lp = torch.log_softmax(model.get_output_embeddings()(out.last_hidden_state).double(), -1)
        nll = torch.cat([nll, -lp.gather(2, new_ids[:, 1:, None])[..., 0]], 1)
    per_token = nll
    keep = until_eos(new_ids, eos_id)
    return ((per_token * keep).sum(1) / keep.sum(1)).cpu().numpy(), keep


def until_eos(ids, eos_id):
    """1 for tokens up to and including the first EOS, 0 after.

    Parameters
    ----------
    ids : torch.Tensor of shape (B, n)
        Token ids.
    eos_id : int or None
        The end-of-sequence token (None: every token counts).

    Returns
    -------
    torch.Tensor of shape (B, n), float64
    """
    if eos_id is None:
        return torch.ones_like(ids, dtype=torch.float64)
    is_eos = (ids == eos_id).long()
    after = (is_eos.cumsum(1) - is_eos) > 0
    return (~after).double()
