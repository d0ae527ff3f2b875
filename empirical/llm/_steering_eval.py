"""Steering measured by what the model says: answer log-odds with random-direction controls and fluency, for every
setting of a sweep, on held-out prompts (docs/steering.md).

The measurement (as CAA and ActAdd measure steering), per setting and direction, on the answer read-out of
:mod:`empirical.llm._answer_readout` (LD, the answer log-odds):

* **Shift**, signed towards the target (``towards``: up, ``away``: down): ``answer_logodds_shift`` (mean change of
  LD and its standard error over prompts), ``answer_prob_shift`` (change of sigmoid(LD)), ``moved_fraction`` (share
  of prompts that moved the intended way) and ``answer_mass`` (steered and unsteered).
* **Null directions, the unit of inference.** The same edit along ``n_random`` (>= 40, default 100) random unit
  directions per layer, in antithetic pairs (+r, -r), at the same |alpha| per layer, row and position (GCAV
  strengths are replayed from the concept run), drawn afresh for each half
  (:func:`~empirical.llm._steering_null.null_units`: the report half never reuses the selection half's draws). A
  staged run (:func:`evaluate_staged`) spends them only on the tested points
  (:func:`~empirical.llm._steering_null.rank_test_points`, report half) and reads :data:`N_RANDOM_SELECTION` control
  draws elsewhere (no rank p). The concept direction's shift is ranked among theirs: ``null_rank``, ``null_p`` = (1 +
  #{null >= concept}) / (1 + N) and ``null_p_opposite`` (:func:`~empirical.llm._steering_null.rank_p_value`); the
  per-draw shifts are the ``"null"`` table (:data:`~empirical.llm.NULL_COLUMNS`).
* **Covariance-matched null**, beside the isotropic one: where the target carries the layers' states
  (``state_factors``, :func:`~empirical.llm._steering_null.state_factors`; :func:`evaluate_dataset` gives those of
  the rows the vectors were fitted on), ``n_random_matched`` further directions per layer drawn from the layer's own
  state distribution (a Gaussian with the states' covariance, :func:`~empirical.llm._steering_null.matched_units`),
  antithetic, at the same |alpha|, on the same points as the isotropic rank test: ``matched_null_rank``,
  ``matched_null_p``, ``matched_null_p_opposite``, ``matched_null_mean``, ``matched_null_sd``, ``n_random_matched``
  (rows ``null_kind`` = 'matched' of the null table). An isotropic direction in R^p barely touches the few
  directions the states occupy; a matched one moves the state as the data vary.
* **Per-prompt interval (secondary).** ``random_control_shift``: the null directions' mean shift;
  ``concept_specific_shift`` = concept minus null mean shift, paired per prompt, with its 95 % t-interval;
  ``opposite_sign_shift``: the other direction's LD change expressed in this row's sign (a concept effect flips
  with the sign, so it should be negative).
* **Validity of the read-out** per dataset (:func:`~empirical.llm._answer_readout.read_out_validity`): a dataset
  whose read-out is not measurable is reported, not averaged in.
* **Fluency**: ``kl_answer``, the KL divergence of the steered next-token distribution from the unsteered one at
  the answer position; with generation (the target's ``generation_prompts``): greedy continuations, their
  perplexity under the unsteered model (``perplexity_ratio`` = steered / unsteered, geometric means) and
  ``distinct2``.
* **Open-ended sentiment** (a target's ``sentiment``): the continuations are scored with VADER after the answer words
  are masked; ``vader_shift`` is the paired change of the compound score, signed towards the target, against
  ``n_text_random`` random directions (``vader_random_shift``: their mean, ``vader_random_se``: its standard error
  over the draws, ``n_vader_random``). Other concepts have no offline scorer.
* **Positions** (every row names them): ``prompt`` (the prompt's positions), ``answer`` (the answer position of
  the read-out, the generated tokens during generation) or ``all`` (prompt, stem and answer / generated tokens).
  Additive edits change every position of the chosen passes, GCAV edits the last position of each chosen pass
  (the paper's h_T: the prompt's last token, the answer position, each generated token).

The inputs are objects: what is steered, :class:`~empirical.llm.SteeringTarget`
(:mod:`empirical.llm._steering_target`, built from the dataset registry); the concept vectors, one
:class:`~empirical.probes.ConceptVectors` per method whose probes carry their validation accuracy and the layer's
hidden-state norm; the settings, :class:`~empirical.llm.SteeringSetting` (:mod:`empirical.llm._steering_settings`);
how it is measured, :class:`~empirical.llm.SteeringProtocol`; and how it runs, :class:`~empirical.llm.SteeringRun`.
:func:`evaluate_steering` measures every setting (the batched, cached passes of :mod:`empirical.llm._cached_passes`;
the prompt's key/value cache is shared by every answer-position setting), :func:`evaluate_staged` in stages (screen,
candidates, generation), and :func:`evaluate_dataset` one dataset from its hidden states. This module is the
measurement; the null directions and the rank test are :mod:`empirical.llm._steering_null`, the table rows
:mod:`empirical.llm._steering_report`. The operating point and the default are chosen from the table by
:mod:`empirical.llm._steering_selection`; the timing model is :mod:`empirical.llm._steering_cost`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from empirical.common.checks import check_int
from empirical.common.resources import check_n_jobs

from ..probes import ConceptVectors, fit_layers, get_method, method_names, paper_split
from ._answer_readout import (
    answer_logodds,
    answer_token_ids,
    answer_word_variants,
    check_answer_mass,
    check_answer_words,
    distinct_ngram_ratio,
    read_out_validity,
    vader_scores,
    validity_decision,
)
from ._cached_passes import (
    Batch,
    SettingEdit,
    continuation_nll,
    edited_passes,
    forward_pass,
    generate_greedy,
    prompt_state,
    read_answer,
    until_eos,
)
from ._edits import model_positions
from ._extract import tokenize_prompts
from ._hooks import base_model, decoder_blocks, input_device, position_limit, require_decoder
from ._prompts import split_halves
from ._steering_null import matched_units, null_table, null_units, rank_test_points, state_factors
from ._steering_protocol import (  # the protocol object, its constants and gates (torch-free home)
    MASS_GATE,
    NULL_STREAMS,
    STEERING_METHODS,
    SteeringProtocol,
    SteeringRun,
    passes_gates,
)
from ._steering_report import metric_rows, metric_table
from ._steering_settings import SteeringSetting, check_settings, choose_layers
from ._steering_target import SteeringTarget

__all__ = ["evaluate_steering", "screen_candidates", "evaluate_staged", "method_vectors", "given_vectors",
           "evaluate_dataset"]

#: Rows of one stacked pass of the null directions (a batch of B prompts runs in chunks of STACK_ROWS // B draws).
STACK_ROWS = 512


class _Measurement:
    """One prompt set made ready to measure: checked inputs, token ids, the plan (method, setting, layers), the
    random draws; :meth:`readouts` and :meth:`generate` measure any entries (method, setting, layers, direction)
    on any subset of the prompts and keep the per-prompt values (NaN where not measured), which
    :func:`~empirical.llm._steering_report.metric_rows` turns into table rows and
    :func:`~empirical.llm._steering_null.null_table` into the per-draw null. :func:`evaluate_steering` measures
    everything, :func:`evaluate_staged` in stages.

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    target : SteeringTarget
        The held-out prompts, labels, answer words, generation prompts, sentiment and state factors.
    vectors : mapping of str to ConceptVectors
        Per method its concept vectors (:meth:`set_vectors`).
    settings : iterable of SteeringSetting
        The ways to steer.
    protocol : SteeringProtocol
        How the measurement is made.
    progress : bool
        Show progress bars.
    staged : bool
        A staged sweep (its control reads ``protocol.n_random_selection`` draws).
    """

    def __init__(self, model, tokenizer, target, vectors, settings, *, protocol, progress=False, staged=False):
        require_decoder(model, "steering")
        if not isinstance(protocol, SteeringProtocol):
            raise ValueError(f"protocol must be a SteeringProtocol, got {type(protocol).__name__}")
        if not isinstance(target, SteeringTarget):
            raise ValueError(f"target must be a SteeringTarget, got {type(target).__name__}")
        prompts = target.prompts
        settings = check_settings(settings)
        self.protocol = protocol
        self.n_random = protocol.n_random
        #: control directions of the selection half (the report half's control: the first ones of its stream)
        self.n_control = protocol.n_control(staged=staged)
        self.batch_size = protocol.batch_size
        stem, directions, max_new_tokens, seed = protocol.stem, protocol.directions, protocol.max_new_tokens, \
            protocol.seed
        self.concept_ids, self.opposite_ids = answer_token_ids(tokenizer, target.answer_words)
        self.prompt_ids = tokenize_prompts(tokenizer, list(prompts))
        stem_ids = tokenizer(stem, add_special_tokens=False)["input_ids"]
        if not stem_ids:
            raise ValueError(f"stem (--stem) {stem!r} tokenizes to no tokens")
        limit = position_limit(model) or model_positions(model)
        self.gen_ids = None
        if target.generation_prompts is not None:
            self.gen_ids = tokenize_prompts(tokenizer, list(target.generation_prompts))
        if limit:
            longest = max(range(len(prompts)), key=lambda i: len(self.prompt_ids[i]))
            if len(self.prompt_ids[longest]) + len(stem_ids) > limit:
                raise ValueError(f"prompt {longest} has {len(self.prompt_ids[longest])} tokens plus {len(stem_ids)} of "
                                 f"the stem, more than the model's {limit} positions; shorten the prompts (--n-prompts "
                                 "picks others) or the stem (--stem)")
            if self.gen_ids is not None and max(map(len, self.gen_ids)) + max_new_tokens > limit:
                raise ValueError(f"max_new_tokens (--max-new-tokens) must be at most the model's {limit} positions "
                                 f"minus the longest generation prompt's {max(map(len, self.gen_ids))} tokens, got "
                                 f"{max_new_tokens}")
        self.model, self.tokenizer, self.labels = model, tokenizer, target.labels
        self.answer_words, self.stem = tuple(target.answer_words), stem
        self.directions, self.dataset = tuple(directions), target.name
        self.max_new_tokens, self.sentiment, self.progress = max_new_tokens, target.sentiment, progress
        n_layers = len(decoder_blocks(model))
        hidden_size = int(model.get_output_embeddings().weight.shape[1])
        self.core, self.device = base_model(model), input_device(model)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.eos = tokenizer.eos_token_id
        self.n_layers = n_layers
        self.set_vectors(vectors, settings)
        #: the null directions of each half (different seed streams: the report half never reuses a draw)
        self.draws = {half: null_units(range(1, n_layers + 1), hidden_size, seed,
                                       self.n_control if half == "selection" else self.n_random, half)
                      for half in NULL_STREAMS}
        #: the covariance-matched null (drawn per half when first read; none without the layers' states)
        factors = target.state_factors
        self.factors = None if not factors or not protocol.n_random_matched else dict(factors)
        self.n_matched = protocol.n_random_matched if self.factors else 0
        if self.factors:
            missing = [layer for layer in range(1, n_layers + 1) if layer not in self.factors]
            wrong = [layer for layer, F in self.factors.items() if np.shape(F)[0] != hidden_size]
            if missing or wrong:
                raise ValueError(f"state_factors (of the target) must hold a ({hidden_size}, m) factor for every layer "
                                 f"1..{n_layers}, got missing layers {missing[:5]} and layers of another size "
                                 f"{wrong[:5]}")
        self._matched = {}
        self.n_text_random = protocol.n_text_random
        n = len(prompts)
        self.halves = split_halves(n)
        self.head_ids, self.answer_id = stem_ids[:-1], stem_ids[-1]
        self.ld0, self.mass0 = np.full(n, np.nan), np.full(n, np.nan)
        self.auc_p = math.nan
        #: answer-position random controls run as stacked passes (draws x the batch's rows, at most ``stack_rows``
        #: rows a pass; the same numbers as one pass per draw to rounding, ~40 % less time per row on a CPU)
        self.stack_controls, self.stack_rows = True, STACK_ROWS
        self.results, self.generated = {}, {}
        if self.gen_ids is not None:
            self.gen_halves = np.where(np.arange(len(self.gen_ids)) % 2 == 0, "selection", "report")
            self.gen0 = self._gen_store()

    def set_vectors(self, vectors, settings) -> None:
        """The plan (method, setting, layers) of every method's concept vectors and setting; an empty ``vectors``
        gives an empty plan (the unsteered read-out only, e.g. the validity stage before any vector is fitted).

        Parameters
        ----------
        vectors : mapping of str to ConceptVectors
            Per method its concept vectors: ``best`` and ``top3`` rank layers by their probes'
            ``validation_accuracy``, a kind that ``needs_norms`` (additive) reads their ``state_norm``, and a method
            without probe weights gets no kind that ``needs_weights`` (GCAV).
        settings : list of SteeringSetting
            The ways to steer.
        """
        plan = []
        for method, probes in vectors.items():
            has_coef = all(probes[layer].coef is not None for layer in probes)
            for setting in settings:
                if setting.edit_kind.needs_weights and not has_coef:
                    continue
                layers = choose_layers(setting, probes, self.n_layers)
                if setting.edit_kind.needs_norms:
                    missing = [layer for layer in layers if probes[layer].state_norm is None]
                    if missing:
                        raise ValueError(f"setting {setting.name!r} is {setting.kind}: the probes of layers {missing} "
                                         "have no state_norm (the layer's median hidden-state norm)")
                plan.append((method, setting, layers))
        self.vectors, self.plan = vectors, plan

    # ----------------------------------------------------------------------------------------- entries
    def entries(self, plan=None) -> list:
        """(method, setting, layers, direction) of every plan item (default: the whole plan) and direction."""
        return [(m, s, layers, d) for m, s, layers in (self.plan if plan is None else plan) for d in self.directions]

    def prompts_of(self, half) -> np.ndarray:
        """Indices of the prompts of ``half`` ('selection', 'report' or None for all)."""
        return np.arange(len(self.halves)) if half is None else np.flatnonzero(self.halves == half)

    def _result(self, key):
        n = len(self.halves)
        if key not in self.results:
            self.results[key] = dict(ld=np.full(n, np.nan), mass=np.full(n, np.nan), kl=np.full(n, np.nan),
                                     rand=np.full((self.n_random, n), np.nan),  # NaN: draw not read
                                     matched=np.full((self.n_matched, n), np.nan), alpha=[])
        return self.results[key]

    def matched_draws(self, half) -> list:
        """The covariance-matched null directions of ``half`` (:func:`matched_units`, drawn once)."""
        if half not in self._matched:
            self._matched[half] = matched_units(self.factors, self.protocol.seed, self.n_matched, half)
        return self._matched[half]

    # ----------------------------------------------------------------------------------------- read-outs
    def readouts(self, entries, idx, draws=slice(None)) -> None:
        """The answer read-out of the unsteered model and of every entry (and its null directions ``draws``, a
        slice of those of each prompt's half; default all) on prompts ``idx``: batches of similar length within a
        half; the prompt's key/value cache is shared by every answer-position edit. A draw already read is read
        again (the same number), so a slice starting where an earlier one ended adds draws (:meth:`more_draws`)."""
        idx = np.asarray([int(i) for i in idx], dtype=int)
        for half in NULL_STREAMS:
            chosen = idx[self.halves[idx] == half] if idx.size else idx
            if chosen.size:
                first = range(len(self.draws[half]))[draws]
                self._readouts(entries, chosen, self.draws[half][draws], first.start if len(first) else 0)

    def more_draws(self, entries, idx, null: str = "isotropic") -> None:
        """The null directions of ``entries`` on prompts ``idx`` beyond those already read (the report half's
        control -> the rank test's ``n_random``; ``null="matched"``: the covariance-matched null, all
        ``n_random_matched`` of it): only the random passes run, the concept edit is read once (before)."""
        if null not in ("isotropic", "matched"):
            raise ValueError(f"null must be 'isotropic' or 'matched', got {null!r}")
        if null == "matched" and not self.n_matched:
            return
        store = "rand" if null == "isotropic" else "matched"
        idx = np.asarray([int(i) for i in idx], dtype=int)
        for half in NULL_STREAMS:
            chosen = idx[self.halves[idx] == half] if idx.size else idx
            if not chosen.size or not entries:
                continue
            draws = self.draws[half] if null == "isotropic" else self.matched_draws(half)
            res = [self._result(_key(e)) for e in entries]
            done = min(int(np.isfinite(r[store][:, chosen]).all(1).sum()) for r in res)
            if done < len(draws):
                self._readouts(entries, chosen, draws[done:], done, concept=False, store=store)

    def _readouts(self, entries, idx, draws, offset=0, concept=True, store="rand") -> None:
        model, core, device = self.model, self.core, self.device
        order = sorted((int(i) for i in idx), key=lambda i: -len(self.prompt_ids[i]))
        words = (self.concept_ids, self.opposite_ids)
        bar = tqdm(total=len(order), desc=f"{self.dataset} answer log-odds ({len(entries)} edits)",
                   disable=not self.progress, leave=False)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start:start + self.batch_size]
                batch = Batch([self.prompt_ids[i] for i in rows], device, self.pad)
                B, n_head = len(rows), len(self.head_ids)
                kv_prompt, _, _ = forward_pass(model, core, batch.ids, batch.mask, batch.positions, None, head=False)
                kv_head = kv_prompt
                if n_head:
                    kv_head, _, _ = forward_pass(model, core, torch.tensor([self.head_ids] * B, device=device),
                                                 torch.cat([batch.mask, torch.ones((B, n_head), dtype=torch.long,
                                                                                   device=device)], 1),
                                                 batch.positions[:, -1:] + 1 + torch.arange(n_head, device=device),
                                                 kv_prompt, head=False)
                base = (kv_prompt, kv_head)
                stacked = {}  # chunk size -> (batch, base) repeated once per draw of a chunk, made when needed
                chunk = max(1, self.stack_rows // B)
                lp0, _ = read_answer(model, core, batch, self.head_ids, self.answer_id, base, (None,) * 3,
                                     (False, False, False))
                first = not np.isfinite(self.ld0).any()
                self.ld0[rows], self.mass0[rows] = answer_logodds(lp0, *words)
                if first:  # a stem the model does not answer after fails on the first batch
                    check_answer_mass(self.mass0[rows], self.stem, self.answer_words)
                for method, setting, layers, direction in entries:
                    seg = edited_passes(setting.positions)
                    edit = SettingEdit(model, setting, self.vectors[method], layers, direction)
                    res = self._result((method, setting.name, direction))
                    lp, alphas = read_answer(model, core, batch, self.head_ids, self.answer_id, base,
                                             (edit.concept(),) * 3, seg)  # (again for more draws: GCAV's |alpha|)
                    if concept:
                        res["ld"][rows], res["mass"][rows] = answer_logodds(lp, *words)
                        res["kl"][rows] = (lp.exp() * (lp - lp0)).sum(-1).clamp(min=0).cpu().numpy()
                        for a in alphas:
                            if a:
                                res["alpha"] += [float(x) for v in a.values() for x in np.abs(v)]
                    if self.stack_controls and seg == (False, False, True):  # answer only: draws stacked
                        for first_draw in range(0, len(draws), chunk):
                            part = draws[first_draw:first_draw + chunk]
                            R = len(part)
                            if R not in stacked:
                                stacked[R] = (batch.repeat(R), tuple([(k.repeat(R, 1, 1, 1), v.repeat(R, 1, 1, 1))
                                                                      for k, v in kv] for kv in base))
                            edits = (None, None, edit.random_stacked(part, alphas[2], B))
                            lp_r, _ = read_answer(model, core, stacked[R][0], self.head_ids, self.answer_id,
                                                  stacked[R][1], edits, seg)
                            res[store][offset + first_draw:offset + first_draw + R, rows] = \
                                answer_logodds(lp_r, *words)[0].reshape(R, B)
                        continue
                    for r, units in enumerate(draws):
                        edits = tuple(edit.random(units, a) for a in alphas)
                        lp_r, _ = read_answer(model, core, batch, self.head_ids, self.answer_id, base, edits, seg)
                        res[store][offset + r, rows] = answer_logodds(lp_r, *words)[0]
                bar.update(len(rows))
        bar.close()

    def validity(self) -> tuple:
        """(AUC of the unsteered LD against the labels, mean unsteered mass, measurable) over the prompts read
        (:func:`read_out_validity`)."""
        seen = np.isfinite(self.ld0)
        check_answer_mass(self.mass0[seen], self.stem, self.answer_words)
        auc, p_value, mass, measurable = read_out_validity(self.ld0[seen], self.labels[seen], self.mass0[seen])
        self.auc_p = p_value
        return auc, mass, measurable

    # ----------------------------------------------------------------------------------------- generation
    def _gen_store(self):
        n = len(self.gen_ids)
        return dict(nll=np.full(n, np.nan), distinct2=np.full(n, np.nan), vader=np.full(n, np.nan),
                    text=np.full(n, None, object))

    def _measure(self, new, base, batch, rows, store):
        nll, keep = continuation_nll(self.model, self.core, batch, base[1:3], new, self.eos)
        kept = [new[i, :int(keep[i].sum())].tolist() for i in range(len(rows))]
        store["nll"][rows] = nll
        store["distinct2"][rows] = [distinct_ngram_ratio(k) for k in kept]
        texts = self.tokenizer.batch_decode(kept, skip_special_tokens=True)
        store["text"][rows] = texts
        if self.sentiment:
            mask_words = [v.strip() for w in self.answer_words for v in answer_word_variants(w)]
            store["vader"][rows] = vader_scores(texts, mask_words)

    def generate(self, entries, idx, text_draws: int = 1) -> None:
        """Greedy continuations of the generation prompts ``idx``: unsteered, under every entry and under its random
        control (the first null draw of the prompt's half at the concept edit's |alpha| per layer, pass and row),
        each scored by its perplexity under the unsteered model, distinct-2 and (sentiment) VADER; a sentiment
        dataset's VADER control continues and scores the first ``text_draws`` null draws of the half (the first
        one as above; the others for VADER only, no perplexity)."""
        if self.gen_ids is None:
            raise ValueError("no generation prompts were given")
        text_draws = check_int(text_draws, "text_draws", minimum=1)
        idx = np.asarray([int(i) for i in idx], dtype=int)
        for half in NULL_STREAMS:
            chosen = idx[self.gen_halves[idx] == half] if idx.size else idx
            if chosen.size:
                self._generate(entries, chosen.tolist(), self.draws[half][:text_draws if self.sentiment else 1])

    def _vader_of(self, new, rows, store, draw) -> None:
        """VADER of the continuations ``new`` of generation prompts ``rows`` (cut after the first EOS, answer words
        masked) into row ``draw`` of ``store``."""
        keep = until_eos(new, self.eos)
        texts = self.tokenizer.batch_decode([new[i, :int(keep[i].sum())].tolist() for i in range(len(rows))],
                                            skip_special_tokens=True)
        mask_words = [v.strip() for w in self.answer_words for v in answer_word_variants(w)]
        store[draw, rows] = vader_scores(texts, mask_words)

    def _generate(self, entries, idx, draws) -> None:
        model, core = self.model, self.core
        bar = tqdm(total=len(entries), desc=f"{self.dataset} generation", disable=not self.progress, leave=False)
        with torch.inference_mode():
            for start in range(0, len(idx), self.batch_size):
                rows = idx[start:start + self.batch_size]
                batch = Batch([self.gen_ids[i] for i in rows], self.device, self.pad)
                base = prompt_state(model, core, batch)
                if not np.isfinite(self.gen0["nll"][rows]).all():
                    new, _ = generate_greedy(model, core, batch, self.max_new_tokens, None, (False, False, False), base)
                    self._measure(new, base, batch, rows, self.gen0)
                for method, setting, layers, direction in entries:
                    key = (method, setting.name, direction)
                    if key not in self.generated:
                        self.generated[key] = dict(concept=self._gen_store(), random=self._gen_store(),
                                                   vader_random=np.full((self.n_random, len(self.gen_ids)), np.nan))
                    seg = edited_passes(setting.positions)
                    edit = SettingEdit(model, setting, self.vectors[method], layers, direction)
                    concept = edit.concept()
                    new, alphas = generate_greedy(model, core, batch, self.max_new_tokens, lambda t: concept, seg, base)
                    self._measure(new, base, batch, rows, self.generated[key]["concept"])
                    for d, units in enumerate(draws):  # the random control (text-level: every draw, VADER only)
                        new, _ = generate_greedy(model, core, batch, self.max_new_tokens,
                                                 lambda t: edit.random(units, alphas[t + 1]), seg, base)
                        if d == 0:
                            self._measure(new, base, batch, rows, self.generated[key]["random"])
                            self.generated[key]["vader_random"][0, rows] = self.generated[key]["random"]["vader"][rows]
                        else:
                            self._vader_of(new, rows, self.generated[key]["vader_random"], d)
                    if start == 0:
                        bar.update(1)
        bar.close()

    def per_prompt(self, table=None) -> dict:
        """The per-prompt values: ``"unsteered"`` (LD, mass, half), one entry per (method, setting, direction) and,
        given the metric ``table``, ``"null"`` (:func:`~empirical.llm._steering_null.null_table`)."""
        out = {"unsteered": dict(ld=self.ld0, mass=self.mass0, half=self.halves), **self.results}
        if table is not None:
            out["null"] = null_table(self, table)
        return out
def _check_run(run, staged: bool) -> SteeringRun:
    """``run`` (default ``SteeringRun()``) checked for a measurement that is (``staged``) or is not a staged sweep: the
    validity gate's fields (``validity_only``, ``auc_p_adjusted``) gate a staged one only."""
    run = SteeringRun() if run is None else run
    if not isinstance(run, SteeringRun):
        raise ValueError(f"run must be a SteeringRun, got {type(run).__name__}")
    if not staged and (run.validity_only is not False or run.auc_p_adjusted is not None):  # a declared conflict
        raise ValueError("validity_only and auc_p_adjusted gate a staged measurement: pass staged=True")
    return run


def evaluate_steering(model, tokenizer, target: SteeringTarget, vectors, settings, *,
                      protocol: SteeringProtocol | None = None, run: SteeringRun | None = None) -> tuple:
    """Measure every (method, setting, direction) on every prompt, both halves (see the module docstring;
    :func:`evaluate_staged` measures a sweep in stages).

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    target : SteeringTarget
        What is steered: the held-out prompts and labels, the answer words, the generation prompts (each also
        continued under the first random direction), whether VADER scores them (``sentiment``) and the layers'
        state covariance factors (every row then also gets the covariance-matched null, ``protocol.n_random_matched``
        draws per half; without them its columns are NaN).
    vectors : mapping of str to ConceptVectors
        Per method its concept vectors; their probes carry each layer's validation accuracy (ranks ``best`` and
        ``top3``) and median hidden-state norm (additive strengths are multiples of it); a method whose vectors
        have no probe weights gets only the kinds that need none (additive).
    settings : iterable of SteeringSetting
        The ways to steer (e.g. :func:`~empirical.llm.sweep_settings`).
    protocol : SteeringProtocol, optional
        The read-out stem, directions, random directions (``n_random`` null directions per setting, direction and
        half, antithetic, drawn anew for each half: :func:`~empirical.llm._steering_null.null_units`; here they are
        also the control, and ``n_random_selection`` is not used), seed, generation length and batch size (default:
        ``SteeringProtocol()``).  Each direction gets its own rows; ``max_new_tokens`` must leave the longest
        generation prompt within the model's positions.
    run : SteeringRun, optional
        Its ``progress`` (progress bars); the staged fields (``validity_only``, ``auc_p_adjusted``) are refused.

    Returns
    -------
    (pandas.DataFrame, dict)
        The metrics (one row per method, setting, direction and half;
        :data:`~empirical.llm._steering_report.METRIC_COLUMNS`, ``stage`` = 'all') and the per-prompt arrays
        (``"unsteered"``: LD and mass; ``(method, setting, direction)``: LD, mass, KL, null LD per draw (n_random,
        n_prompts), each prompt read under its half's draws; ``"null"``: the per-draw null shifts of every table
        row, :data:`~empirical.llm.NULL_COLUMNS`).
    """
    run = _check_run(run, staged=False)
    m = _Measurement(model, tokenizer, target, vectors, settings,
                     protocol=SteeringProtocol() if protocol is None else protocol, progress=run.progress)
    entries = m.entries()
    m.readouts(entries, m.prompts_of(None))
    m.more_draws(entries, m.prompts_of(None), null="matched")
    if m.gen_ids is not None:
        m.generate(entries, np.arange(len(m.gen_ids)), text_draws=m.n_text_random)
    rows = [row for entry in entries for half in ("selection", "report")
            for row in metric_rows(m, [entry], half, "all")]
    table = metric_table(rows)
    return table, m.per_prompt(table)


def screen_candidates(table: pd.DataFrame, n_candidates: int = 2,
                      by=("dataset", "method", "direction")) -> pd.DataFrame:
    """Stage 1 -> 2 of :func:`evaluate_staged`: per group ``by`` (default: per method and direction, over all its
    kinds, layer choices and strengths), the ``n_candidates`` selection-half rows with the
    largest concept-specific shift among those whose steered answer mass is at least MASS_GATE x the unsteered one
    (a setting that breaks the answer is never a candidate). Returns those rows.

    Parameters
    ----------
    table : pandas.DataFrame
        Metric rows (:data:`METRIC_COLUMNS`), e.g. the screen stage's.
    n_candidates : int >= 1
        Rows kept per group.
    by : sequence of str
        Columns defining the groups.

    Returns
    -------
    pandas.DataFrame
        The kept selection-half rows, by decreasing ``concept_specific_shift`` (empty when none passes the gate).
    """
    n_candidates = check_int(n_candidates, "n_candidates", minimum=1)
    selection = table[table["half"] == "selection"]
    passed = selection[selection["answer_mass_steered"] >= MASS_GATE * selection["answer_mass_unsteered"]]
    if not len(passed):
        return passed
    ranked = passed.sort_values("concept_specific_shift", ascending=False, kind="stable")
    return ranked.groupby(list(by), sort=False).head(n_candidates)



def _key(entry) -> tuple:
    """(method, setting name, direction) of an entry (method, setting, layers, direction)."""
    return entry[0], entry[1].name, entry[3]


def _keys(rows: pd.DataFrame) -> set:
    """(method, setting, direction) of table rows."""
    return set(zip(rows["method"], rows["setting"], rows["direction"]))



def evaluate_staged(model, tokenizer, target: SteeringTarget, vectors, settings, *,
                    protocol: SteeringProtocol | None = None, run: SteeringRun | None = None) -> tuple:
    """A strength sweep measured in stages (as AxBench and CAA screen before they generate).

    0. **Validity**: the unsteered read-out of every prompt; a dataset whose read-out does not track the concept
       (:data:`MIN_AUC`, :data:`MIN_MASS`) stops here (one row, ``stage`` = 'validity').
    1. **Screen** (``stage`` = 'screen'): every (method, setting, direction) of ``settings`` (answer positions
       only) read at the answer position with its random controls, on the selection half.
    2. **Candidates** (``stage`` = 'candidate', selection half): per method and direction the ``n_candidates``
       settings with the largest concept-specific shift that keep the answer mass
       (:func:`screen_candidates`), plus the same edits at ``stage2_positions`` for the best ``n_twins`` of them
       (read-out and controls; they re-run the prompt, the costly part); those keeping the mass get the
       generation metrics (perplexity, distinct-2, VADER, with a random-direction
       control) on the selection half of the generation prompts.
    3. **Report** (``stage`` = 'report', report half): every candidate that passes both gates (answer mass,
       perplexity ratio) on the selection half, read and generated on the report half. The operating point of
       each group (:func:`select_operating_points`) is one of them, chosen on the selection half.
    4. **Null** (report half, ``on_stage`` 'null'): the tested points (:func:`rank_test_points`, chosen on the
       selection half) get the rest of the report stream's ``n_random`` null directions and a rank p; with the
       target's ``state_factors``, also the ``n_random_matched`` covariance-matched ones and their rank p (``on_stage``
       'matched').

    Random directions: the screen and candidates read ``protocol.n_random_selection`` (:data:`N_RANDOM_SELECTION`)
    draws of the selection stream, the report half's rows the first ``n_random_selection`` of the report stream (a
    control: its mean, no rank p) and the tested points all ``n_random`` of it (the rank test). The VADER control of
    a sentiment dataset continues the first draw of the selection stream and the first ``protocol.n_text_random`` of
    the report stream.

    No report-half prompt is read before stage 3. ``settings`` must edit the answer positions; the concept vectors
    are given (``vectors``) or fitted by ``vectors()``, called only when the read-out is valid (a dataset that
    stops at validity fits nothing); ``run.on_stage(stage, entries, prompt_indices)`` is called before each
    measurement and before the lazy fit (stage ``fit``; a hook for progress, timing and tests).

    Parameters
    ----------
    model, tokenizer, target
        As for :func:`evaluate_steering`.
    vectors : mapping of str to ConceptVectors, or callable
        As for :func:`evaluate_steering`, or a function of no argument returning them, called only when the read-out
        is valid.
    settings : iterable of SteeringSetting
        The sweep; every setting must edit the ``"answer"`` positions.
    protocol : SteeringProtocol, optional
        As for :func:`evaluate_steering`, and the sweep's stages: ``n_random_selection`` (the control),
        ``n_candidates`` (kept per method and direction after the screen, :func:`screen_candidates`), ``n_twins``
        (how many of the best candidates, at most ``n_candidates``, also run at ``stage2_positions``) and
        ``twin_methods`` (whose candidates get twins; default every method).
    run : SteeringRun, optional
        ``progress``; ``on_stage`` (see above); ``validity_only`` (stop after the validity stage whatever its
        outcome: its one row, ``measurable`` the dataset's own test; the first pass of a caller that corrects the
        validity tests of several datasets before it measures any); ``auc_p_adjusted`` (the dataset's validity p
        after the caller's multiplicity correction: the gate then compares it, not the dataset's own p, with
        :data:`~empirical.llm.MAX_AUC_P`, :func:`~empirical.llm._answer_readout.validity_decision`; the row still
        records the own p).

    Returns
    -------
    (pandas.DataFrame, dict)
        As :func:`evaluate_steering`; a setting screened out has only its selection-half 'screen' row.
    """
    protocol = SteeringProtocol() if protocol is None else protocol
    if not isinstance(protocol, SteeringProtocol):
        raise ValueError(f"protocol must be a SteeringProtocol, got {type(protocol).__name__}")
    run = _check_run(run, staged=True)
    stage2_positions, twin_methods = protocol.stage2_positions, protocol.twin_methods
    n_candidates, n_twins = protocol.n_candidates, protocol.n_twins
    other = [s.name for s in check_settings(settings) if s.positions != "answer"]
    if other:
        raise ValueError(f"staged settings must edit the answer positions (stage 2 adds {tuple(stage2_positions)}), "
                         f"got {other[:3]}")
    lazy = callable(vectors) and not isinstance(vectors, Mapping)
    if not lazy and not isinstance(vectors, Mapping):
        raise ValueError("vectors must be a mapping of method name to ConceptVectors, or a function of no argument "
                         f"returning one, got {type(vectors).__name__}")
    m = _Measurement(model, tokenizer, target, {} if lazy else vectors, settings, protocol=protocol,
                     progress=run.progress, staged=True)
    notify = run.stage
    selection, report = m.prompts_of("selection"), m.prompts_of("report")
    notify("validity", [], np.arange(len(m.halves)))
    m.readouts([], np.arange(len(m.halves)))
    auc, mass, measurable = m.validity()
    if run.auc_p_adjusted is not None:
        measurable = validity_decision(auc, run.auc_p_adjusted, mass)
    if run.validity_only or not measurable:
        validity = dict(dataset=m.dataset, method="--", setting="unsteered", half="all", stage="validity",
                        n_prompts=len(m.halves), answer_mass_unsteered=mass, auc_unsteered=auc, auc_p_value=m.auc_p,
                        measurable=measurable, stem=protocol.stem, n_random=m.n_random, n_generated=0)
        return metric_table([validity]), m.per_prompt(metric_table([]))
    if lazy:
        notify("fit", [], np.arange(0))
        m.set_vectors(vectors(), settings)
    # stage 1: the whole grid at the answer position, selection half
    screen = m.entries()
    notify("screen", screen, selection)
    m.readouts(screen, selection)
    screened = metric_table(metric_rows(m, screen, "selection", "screen"))
    # stage 2: the candidates, their prompt / all-position twins, generation, selection half
    chosen = screen_candidates(screened, n_candidates)
    keys = _keys(chosen)
    candidates = [e for e in screen if _key(e) in keys]
    twin_from = screened if twin_methods is None else screened[screened["method"].isin(list(twin_methods))]
    best = _keys(screen_candidates(twin_from, min(n_twins, n_candidates))) if n_twins else set()
    twins = [(method, SteeringSetting(s.kind, s.layers, s.strength, p), layers, d)
             for method, s, layers, d in candidates if _key((method, s, layers, d)) in best for p in stage2_positions]
    kept = []
    if twins:
        notify("candidate", twins, selection)
        m.readouts(twins, selection)
        read = metric_table(metric_rows(m, twins, "selection", "candidate"))
        keep = _keys(read[passes_gates(read)])
        kept = [e for e in twins if _key(e) in keep]
    generated = candidates + kept
    if m.gen_ids is not None and generated:
        gen_selection = np.flatnonzero(m.gen_halves == "selection")
        notify("generate", generated, gen_selection)
        m.generate(generated, gen_selection)
    candidates += twins
    measured = metric_table(metric_rows(m, candidates, "selection", "candidate")) if candidates else screened.iloc[:0]
    # stage 3: every candidate passing both gates on the selection half, read and generated on the report half
    passing = _keys(measured[passes_gates(measured)])
    finals = [e for e in candidates if _key(e) in passing]
    tested = _keys(rank_test_points(measured)) & passing
    if finals:
        notify("report", finals, report)
        m.readouts(finals, report, slice(0, m.n_control))  # the control: the report stream's first draws
        rank = [e for e in finals if _key(e) in tested]
        if rank:  # the rank test's null: the tested points only, the rest of the report stream's n_random draws
            notify("null", rank, report)
            m.more_draws(rank, report)
            if m.n_matched:  # and the covariance-matched null beside it
                notify("matched", rank, report)
                m.more_draws(rank, report, null="matched")
        if m.gen_ids is not None:
            gen_report = np.flatnonzero(m.gen_halves == "report")
            notify("generate-report", finals, gen_report)
            m.generate(finals, gen_report, text_draws=m.n_text_random)
    seen = {_key(e) for e in candidates}
    rows = [r for r in metric_rows(m, screen, "selection", "screen")
            if (r["method"], r["setting"], r["direction"]) not in seen]
    rows += metric_rows(m, candidates, "selection", "candidate") + metric_rows(m, finals, "report", "report")
    table = metric_table(rows)
    return table, m.per_prompt(table)



# --------------------------------------------------------------------------------------------- one dataset
#: Estimator parameters of the steering comparison's methods where they differ from the registry's defaults (GCS:
#: 50 probes instead of 100, half the cost; the paper's steering section passes its own).
STEERING_METHOD_PARAMS = {"GCS": {"n_probes": 50}}


def method_vectors(H, y, split, methods=STEERING_METHODS, layers=None, method_params=None,
                   progress: bool = False, n_jobs: int = 1) -> dict:
    """Concept vectors per method on ``layers`` (default 1..L) of hidden states ``H`` (L+1, n, p), fitted on the
    split's train/validation rows (xRFM: directions only, it has no linear probe), each probe carrying its
    validation accuracy.

    Parameters
    ----------
    H : array (L+1, n, p)
        Hidden states per layer (layer 0 = the embeddings' output, layer l = the output of decoder block l).
    y : array (n,)
        Binary labels.
    split : (array of int, array of int, array of int)
        Train, validation and test row indices (:func:`empirical.probes.paper_split`); the test rows are not used.
    methods : sequence of str
        Steering methods of the registry (``method_names("steering")``).
    layers : iterable of int, optional
        Layers to fit (default 1..L).
    method_params : mapping of str to dict, optional
        Estimator parameters per method name (default :data:`STEERING_METHOD_PARAMS`); a method not named gets its
        registry defaults.
    progress : bool
        Show RAPTOR's progress bar.
    n_jobs : int
        Layers fitted in parallel.

    Returns
    -------
    dict of str to ConceptVectors
        Per method its concept vectors, each probe with its
        :attr:`~empirical.probes.LinearProbe.validation_accuracy`.
    """
    n_jobs = check_n_jobs(n_jobs)
    layers = list(range(1, H.shape[0])) if layers is None else list(layers)
    unknown = [m for m in methods if m not in method_names("steering")]  # the registry's steering comparison
    if unknown:
        raise ValueError(f"methods must be among {sorted(method_names('steering'))}, got {unknown}")
    params = STEERING_METHOD_PARAMS if method_params is None else method_params
    if not hasattr(params, "get") or not all(isinstance(v, dict) for v in params.values()):
        raise ValueError(f"method_params must map method names to dicts of estimator parameters, got {params!r}")
    vectors = {}
    for method in methods:
        estimator = get_method(method).estimator(**params.get(method, {}))
        fit = fit_layers(H, y, layers=layers, split=split, progress=progress and method == "RAPTOR", n_jobs=n_jobs,
                         estimator=estimator)
        accuracy = dict(zip(fit.summary["layer"].astype(int), fit.summary["val_accuracy"].astype(float)))
        # xRFM: its direction only (no linear probe)
        vectors[method] = fit.concept_vectors(method=method.lower()).with_statistics(validation_accuracy=accuracy)
    return vectors


def given_vectors(probes: ConceptVectors, H, y, split, method: str = "RAPTOR") -> dict:
    """Saved concept vectors (``raptor steer --probe-file``) in the form :func:`method_vectors` returns fitted ones:
    each probe with its accuracy on the split's validation rows (the layer rule never reads test data).

    Parameters
    ----------
    probes : ConceptVectors
        The saved vectors; every layer needs probe weights (``coef``), not only a direction.
    H : array (L+1, n, p)
        Hidden states per layer (layer l = the output of decoder block l).
    y : array (n,)
        Binary labels.
    split : (array of int, array of int, array of int)
        Train, validation and test row indices; only the validation rows are read.
    method : str, default="RAPTOR"
        The name the vectors are reported under.

    Returns
    -------
    dict of str to ConceptVectors
        ``{method: probes}``, each probe with its :attr:`~empirical.probes.LinearProbe.validation_accuracy`.

    Raises
    ------
    ValueError
        A layer holds only a direction (names ``--probe-file`` and the layer), or the vectors' hidden size is not
        ``H``'s (:meth:`ConceptVectors.check_provenance`).
    """
    probes.check_provenance("--probe-file", n_features=np.shape(H)[-1])  # another model's vectors: named here
    _, validation, _ = split
    y = np.asarray(y)
    accuracy = {}
    for layer, probe in probes.items():
        if probe.coef is None:
            raise ValueError(f"--probe-file layer {layer} holds only a direction; the answer read-out needs probe "
                             "weights")
        scores = probe.logit(np.asarray(H[layer][validation], dtype=np.float64))
        accuracy[layer] = float(np.mean((scores > 0) == y[validation]))
    return {method: probes.with_statistics(validation_accuracy=accuracy)}


def evaluate_dataset(model, tokenizer, dataset, H, settings, *, protocol: SteeringProtocol | None = None,
                     vectors=None, run: SteeringRun | None = None) -> tuple:
    """Steering of one dataset, end to end: answer words checked first, concept vectors fitted on the
    train/validation split of ``H`` (unless ``vectors`` are given), each probe given the median hidden-state norm of
    its layer over train + validation (:attr:`~empirical.probes.LinearProbe.state_norm`), the target
    (:meth:`SteeringTarget.from_dataset <empirical.llm.SteeringTarget.from_dataset>`: the held-out prompts, the
    generation prompts, the answer words, and the state covariance factors of train + validation,
    :func:`~empirical.llm._steering_null.state_factors`: the covariance-matched null), then
    :func:`evaluate_steering`, or with ``run.staged`` :func:`evaluate_staged` (a sweep: ``paper_figures --only
    steering_text``; the vectors are fitted after the validity stage, only for a valid read-out).

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        The model ``H`` was extracted from, and its tokenizer.
    dataset : ConceptDataset
        The dataset (``name``, ``prompts``, ``labels``) whose hidden states ``H`` are.
    H : array (L+1, n, p)
        Hidden states of ``dataset`` per layer (layer 0 = the embeddings' output, layer l = the output of decoder
        block l).
    settings : iterable of SteeringSetting
        The ways to steer.
    protocol : SteeringProtocol, optional
        How the measurement is made (default ``SteeringProtocol()``): as for :func:`evaluate_steering` or, staged,
        :func:`evaluate_staged`; ``n_prompts`` held-out prompts, ``n_generate`` generation prompts (0: no
        generation).
    vectors : mapping of str to ConceptVectors, optional
        Precomputed concept vectors whose probes carry their validation accuracy (as :func:`method_vectors`
        returns them, e.g. those the empirical section saved: :func:`paper_figures.output.load_saved_vectors`);
        nothing is fitted then.
    run : SteeringRun, optional
        Where the held-out prompts (``eval_dataset``) and answer words come from, the split seed, how the vectors
        are fitted (``methods``, ``method_params``, ``n_jobs``, ``progress``: :func:`method_vectors`), ``staged``
        and, staged, ``on_stage``, ``validity_only`` and ``auc_p_adjusted`` (as for :func:`evaluate_staged`).

    Returns
    -------
    (pandas.DataFrame, dict)
        As :func:`evaluate_steering`.
    """
    protocol = SteeringProtocol() if protocol is None else protocol
    if not isinstance(protocol, SteeringProtocol):
        raise ValueError(f"protocol must be a SteeringProtocol, got {type(protocol).__name__}")
    run = _check_run(run, staged=run is not None and isinstance(run, SteeringRun) and run.staged)
    words = check_answer_words(dataset.name, run.answer_words)
    answer_token_ids(tokenizer, words)  # before any model work
    y = np.asarray(dataset.labels)
    split = paper_split(y, random_state=run.split_seed)
    pool = np.sort(np.r_[split[0], split[1]])
    norms = {layer: float(np.median(np.linalg.norm(np.asarray(H[layer][pool], dtype=np.float32), axis=1)))
             for layer in range(1, H.shape[0])}

    def measured(vectors) -> dict:  # each probe with its layer's median state norm
        return {method: cv.with_statistics(state_norms=norms) for method, cv in vectors.items()}

    def fit() -> dict:
        return measured(method_vectors(H, y, split, methods=run.methods, method_params=run.method_params,
                                       progress=run.progress, n_jobs=run.n_jobs))

    # the covariance-matched null's distribution: the states of the rows the vectors are fitted on
    factors = state_factors(H, pool, range(1, H.shape[0])) if protocol.n_random_matched else None
    target = SteeringTarget.from_dataset(dataset, split, protocol, eval_dataset=run.eval_dataset, answer_words=words,
                                         state_factors=factors)
    settings = check_settings(settings)
    if run.staged:  # without given vectors, they are fitted only when the read-out is valid
        return evaluate_staged(model, tokenizer, target, fit if vectors is None else measured(vectors), settings,
                               protocol=protocol, run=run)
    return evaluate_steering(model, tokenizer, target, fit() if vectors is None else measured(vectors), settings,
                             protocol=protocol, run=run)
