"""Steering measured by what the model says: answer log-odds with random-direction controls and fluency, for every
setting of a sweep, on held-out prompts (docs/steering.md).

The measurement (as CAA and ActAdd measure steering), per setting and direction, on the answer read-out of
:mod:`empirical.llm._answer_readout` (LD, the answer log-odds):

* **Shift**, signed towards the target (``towards``: up, ``away``: down): ``answer_logodds_shift`` (mean change of
  LD and its standard error over prompts), ``answer_prob_shift`` (change of sigmoid(LD)), ``moved_fraction`` (share
  of prompts that moved the intended way) and ``answer_mass`` (steered and unsteered).
* **Null directions, the unit of inference.** The same edit along ``n_random`` (>= 40, default 100) random unit
  directions per layer, in antithetic pairs (+r, -r), at the same |alpha| per layer, row and position (GCAV
  strengths are replayed from the concept run), drawn afresh for each half (:func:`null_units`: the report half
  never reuses the selection half's draws). A staged run (:func:`evaluate_staged`) spends them only on the tested
  points (:func:`rank_test_points`, report half) and reads :data:`N_RANDOM_SELECTION` control draws elsewhere
  (no rank p). The concept direction's shift is ranked among theirs: ``null_rank``, ``null_p`` = (1 + #{null >=
  concept}) / (1 + N) and ``null_p_opposite`` (:func:`rank_p_value`); the per-draw shifts are the ``"null"``
  table (:data:`NULL_COLUMNS`).
* **Covariance-matched null**, beside the isotropic one: where the measurement is given the layers' states
  (``state_factors``, :func:`state_factors`; :func:`evaluate_dataset` passes those of the rows the vectors were fitted
  on), ``n_random_matched`` further directions per layer drawn from the layer's own state distribution (a Gaussian
  with the states' covariance, :func:`matched_units`), antithetic, at the same |alpha|, on the same points as the
  isotropic rank test: ``matched_null_rank``, ``matched_null_p``, ``matched_null_p_opposite``, ``matched_null_mean``,
  ``matched_null_sd``, ``n_random_matched`` (rows ``null_kind`` = 'matched' of the null table). An isotropic
  direction in R^p barely touches the few directions the states occupy; a matched one moves the state as the data
  vary.
* **Per-prompt interval (secondary).** ``random_control_shift``: the null directions' mean shift;
  ``concept_specific_shift`` = concept minus null mean shift, paired per prompt, with its 95 % t-interval;
  ``opposite_sign_shift``: the other direction's LD change expressed in this row's sign (a concept effect flips
  with the sign, so it should be negative).
* **Validity of the read-out** per dataset (:func:`~empirical.llm._answer_readout.read_out_validity`): a dataset
  whose read-out is not measurable is reported, not averaged in.
* **Fluency**: ``kl_answer``, the KL divergence of the steered next-token distribution from the unsteered one at
  the answer position; with generation (``generation_prompts``): greedy continuations, their perplexity under the
  unsteered model (``perplexity_ratio`` = steered / unsteered, geometric means) and ``distinct2``.
* **Open-ended sentiment** (``sentiment=True``): the continuations are scored with VADER after the answer words
  are masked; ``vader_shift`` is the paired change of the compound score, signed towards the target, against
  ``n_text_random`` random directions (``vader_random_shift``: their mean, ``vader_random_se``: its standard error
  over the draws, ``n_vader_random``). Other concepts have no offline scorer.
* **Positions** (every row names them): ``prompt`` (the prompt's positions), ``answer`` (the answer position of
  the read-out, the generated tokens during generation) or ``all`` (prompt, stem and answer / generated tokens).
  Additive edits change every position of the chosen passes, GCAV edits the last position of each chosen pass
  (the paper's h_T: the prompt's last token, the answer position, each generated token).

The settings are :class:`~empirical.llm.SteeringSetting` (:mod:`empirical.llm._steering_settings`).
:func:`evaluate_steering` measures them (the batched, cached passes of :mod:`empirical.llm._cached_passes`; the
prompt's key/value cache is shared by every answer-position setting), :func:`evaluate_staged` in stages (screen,
candidates, generation), and :func:`evaluate_dataset` on one dataset from its hidden states. The operating point and
the default are chosen from the table by :mod:`empirical.llm._steering_selection`; the timing model is
:mod:`empirical.llm._steering_cost`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy import stats
from scipy.special import expit
from tqdm.auto import tqdm

from empirical.common.checks import (
    check_bool,
    check_int,
    check_random_state,
    check_real_array,
    check_scalar,
    check_seed,
)
from empirical.common.resources import check_n_jobs

from ..probes import PAPER_SPLIT_SEED, ConceptVectors, fit_layers, get_method, method_names, paper_split
from . import datasets
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
from ._extract import check_prompts, tokenize_prompts
from ._hooks import base_model, decoder_blocks, input_device, position_limit, require_decoder
from ._prompts import select_prompts, split_halves
from ._steering_protocol import (  # the protocol object, its constants and gates (torch-free home)
    MASS_GATE,
    MATCHED_STREAMS,
    MIN_RANDOM,
    NULL_STREAMS,
    SteeringProtocol,
    passes_gates,
)
from ._steering_settings import SteeringSetting, check_settings, choose_layers

__all__ = ["NEUTRAL_PROMPTS", "NULL_COLUMNS", "rank_p_value", "null_units", "state_factors", "matched_units",
           "METRIC_COLUMNS", "random_units", "evaluate_steering", "screen_candidates", "rank_test_points",
           "evaluate_staged", "method_vectors", "given_vectors", "evaluate_dataset"]

#: Neutral open-ended prompts without label words (sentiment steering is scored on their continuations).
NEUTRAL_PROMPTS = (
    "Write one sentence about a film you saw.",
    "Describe the last movie you watched in one sentence.",
    "Tell me about a book you read recently.",
    "Write a short review of a restaurant.",
    "Describe your weekend in one sentence.",
    "Write one sentence about the weather today.",
    "Tell me about a song you heard.",
    "Write a sentence about a city you visited.",
    "Describe a meal you cooked.",
    "Write one sentence about your neighbour's garden.",
    "Tell me about a television show.",
    "Describe a walk in the park.",
    "Write a sentence about a concert.",
    "Describe a train journey in one sentence.",
    "Tell me about a museum you went to.",
    "Write one sentence about a new phone.",
    "Write one sentence about a bus ride.",
    "Write one sentence about a bicycle.",
    "Write one sentence about a library.",
    "Write one sentence about a bakery.",
    "Write one sentence about a football match.",
    "Write one sentence about a river.",
    "Write one sentence about a mountain trail.",
    "Write one sentence about a school play.",
    "Write one sentence about a birthday party.",
    "Write one sentence about a beach.",
    "Write one sentence about a rainy afternoon.",
    "Write one sentence about a painting.",
    "Write one sentence about a video game.",
    "Write one sentence about a coffee shop.",
    "Write one sentence about a wedding.",
    "Write one sentence about a podcast.",
    "Write one sentence about a market.",
    "Write one sentence about a hotel.",
    "Write one sentence about a flight.",
    "Write one sentence about a theatre play.",
    "Write one sentence about a festival.",
    "Write one sentence about a zoo.",
    "Write one sentence about a kitchen.",
    "Write one sentence about a job interview.",
    "Write one sentence about a classroom.",
    "Write one sentence about a lake.",
    "Write one sentence about a road trip.",
    "Write one sentence about a shop.",
    "Write one sentence about a cat.",
    "Write one sentence about a dog.",
    "Write one sentence about a holiday.",
    "Write one sentence about a bridge.",
    "Write one sentence about a farm.",
    "Write one sentence about a hospital visit.",
    "Write one sentence about a hike.",
    "Write one sentence about a snowy morning.",
    "Write one sentence about a family dinner.",
    "Write one sentence about a laptop.",
    "Write one sentence about a pair of shoes.",
    "Write one sentence about a newspaper article.",
    "Write one sentence about a board game.",
    "Write one sentence about a dance class.",
    "Write one sentence about a picnic.",
    "Write one sentence about a radio programme.",
    "Write one sentence about a documentary.",
    "Write one sentence about a sports car.",
    "Write one sentence about a village.",
    "Write one sentence about an office.",
)
#: Rows of one stacked pass of the null directions (a batch of B prompts runs in chunks of STACK_ROWS // B draws).
STACK_ROWS = 512

#: The columns of ``steer_metrics.csv`` in order.
METRIC_COLUMNS = [
    "dataset", "method", "setting", "kind", "layer_choice", "layers", "strength", "positions", "direction", "half",
    "stage", "n_prompts", "answer_logodds_shift", "answer_logodds_shift_se", "answer_prob_shift", "moved_fraction",
    "answer_mass_unsteered", "answer_mass_steered", "random_control_shift", "random_control_se", "n_random",
    "concept_specific_shift", "concept_specific_se", "concept_specific_low", "concept_specific_high",
    "opposite_sign_shift", "kl_answer", "alpha_median", "alpha_max", "n_generated", "perplexity_unsteered",
    "perplexity_steered", "perplexity_ratio", "perplexity_ratio_low", "perplexity_ratio_high",
    "perplexity_ratio_random", "distinct2_unsteered", "distinct2_steered",
    "distinct2_random", "vader_shift", "vader_se", "vader_random_shift", "vader_random_se", "n_vader_random",
    "auc_unsteered", "auc_p_value", "measurable", "stem", "null_rank", "null_p", "null_p_opposite", "null_mean",
    "null_sd", "null_stream", "n_random_matched", "matched_null_rank", "matched_null_p", "matched_null_p_opposite",
    "matched_null_mean", "matched_null_sd"]
#: The columns of the per-draw null table (``steering_text_null.csv``): one row per (dataset, method, setting,
#: direction, half, null_kind) and null direction; ``draw`` r's direction is ``sign`` x the pair ``r // 2``'s Gaussian
#: draw, ``shift`` its mean answer log-odds shift over the half's prompts, signed towards the target; ``null_kind``
#: 'isotropic' (:func:`null_units`) or 'matched' (:func:`matched_units`; tables written before it have no column:
#: isotropic).
NULL_COLUMNS = ["dataset", "method", "setting", "direction", "half", "stream", "draw", "sign", "shift", "null_kind"]


def random_units(layers, hidden_size: int, seed: int, n_random: int, stream=None) -> list:
    """``n_random`` draws of one random unit vector per layer; draw ``r`` depends only on ``(seed, stream, r)``.

    Parameters
    ----------
    layers : iterable of int
        The layers to draw for (drawn in ascending order within each draw).
    hidden_size : int
        Dimension of each vector.
    seed : int
        Seed; draw ``r`` uses ``numpy.random.default_rng([seed, r])`` (``[seed, stream, r]`` with a stream).
    n_random : int
        Number of draws.
    stream : int, optional
        An independent stream of draws for the same seed (:data:`NULL_STREAMS`: one per half).

    Returns
    -------
    list of dict of int to ndarray
        One ``{layer: unit vector (hidden_size,)}`` per draw (Gaussian directions, Euclidean norm 1).

    Examples
    --------
    >>> a, b = random_units([1, 2], 4, seed=3, n_random=5), random_units([1, 2], 4, seed=3, n_random=6)
    >>> bool(np.array_equal(a[4][2], b[4][2])), round(float(np.linalg.norm(a[0][1])), 6)
    (True, 1.0)
    """
    seed = check_seed(seed, "seed")
    draws = []
    for r in range(int(n_random)):
        rng = np.random.default_rng([seed, r] if stream is None else [seed, int(stream), r])
        units = {}
        for layer in sorted(layers):
            u = rng.standard_normal(hidden_size)
            units[layer] = u / np.linalg.norm(u)
        draws.append(units)
    return draws


def null_units(layers, hidden_size: int, seed: int, n_random: int, half: str) -> list:
    """The null directions of one half: ``n_random`` (even) unit directions per layer in antithetic pairs, draw
    ``2k`` = +u_k and draw ``2k + 1`` = -u_k, u_k from :func:`random_units` on the half's seed stream
    (:data:`NULL_STREAMS`), so the selection half and the report half never share a draw.

    Parameters
    ----------
    layers : iterable of int
        The layers to draw for.
    hidden_size : int
        Dimension of each vector.
    seed : int
        Seed of the measurement.
    n_random : int
        Number of directions, even (``n_random // 2`` pairs).
    half : {"selection", "report"}
        Whose stream.

    Returns
    -------
    list of dict of int to ndarray
        ``n_random`` ``{layer: unit vector}``; the antithetic sign of draw r is ``(-1) ** r``.

    Examples
    --------
    >>> a = null_units([1], 4, seed=0, n_random=4, half="selection")
    >>> bool(np.array_equal(a[1][1], -a[0][1])), len(a)
    (True, 4)
    >>> b = null_units([1], 4, seed=0, n_random=4, half="report")
    >>> bool(np.allclose(a[0][1], b[0][1]))
    False
    """
    if half not in NULL_STREAMS:
        raise ValueError(f"half must be one of {sorted(NULL_STREAMS)}, got {half!r}")
    if int(n_random) % 2:
        raise ValueError(f"n_random (--n-random) must be even (antithetic pairs +r, -r), got {n_random}")
    pairs = random_units(layers, hidden_size, seed, int(n_random) // 2, stream=NULL_STREAMS[half])
    return [{layer: sign * u for layer, u in units.items()} for units in pairs for sign in (1.0, -1.0)]


def state_factors(H, rows, layers) -> dict:
    """Square-root factors of each layer's state covariance: ``F = (X - mean)^T / sqrt(n - 1)`` of the states ``X``
    (n, p) of ``rows``, so that ``F z`` with ``z ~ N(0, I_n)`` is a Gaussian draw with the states' sample covariance
    (the covariance-matched null of :func:`matched_units`).

    Parameters
    ----------
    H : array (L+1, n_all, p)
        Hidden states per layer.
    rows : array of int
        The rows to estimate the covariance from (at least 2; :func:`evaluate_dataset`: train + validation).
    layers : iterable of int
        The layers.

    Returns
    -------
    dict of int to ndarray (p, n) float32
        One factor per layer.

    Examples
    --------
    >>> H = np.random.default_rng(0).standard_normal((2, 50, 3)) * [1.0, 2.0, 0.0]
    >>> F = state_factors(H, np.arange(50), [1])[1]
    >>> bool(np.allclose(F @ F.T, np.cov(H[1].T), atol=1e-5))
    True
    """
    rows = np.asarray(rows, dtype=int)
    if rows.size < 2:
        raise ValueError(f"state_factors needs at least 2 rows to estimate a covariance, got {rows.size}")
    out = {}
    for layer in layers:
        X = check_real_array(np.asarray(H[layer][rows], dtype=np.float64), f"H[{layer}]")
        out[int(layer)] = ((X - X.mean(0)).T / math.sqrt(len(rows) - 1)).astype(np.float32)
    return out


def matched_units(factors, seed: int, n_random: int, half: str) -> list:
    """The covariance-matched null directions of one half: ``n_random`` (even) unit directions per layer drawn from
    the layer's own state distribution (``F z / |F z|``, ``z ~ N(0, I)``, ``F`` from :func:`state_factors`), in
    antithetic pairs (draw ``2k`` = +u_k, ``2k + 1`` = -u_k); pair k of a half uses
    ``numpy.random.default_rng([seed, MATCHED_STREAMS[half], k])`` (:data:`MATCHED_STREAMS`: apart from the isotropic
    streams and from the other half's). Applied at the concept edit's |alpha| like the isotropic null
    (:func:`null_units`): the same norm, a direction the states actually vary along.

    Parameters
    ----------
    factors : mapping of int to ndarray (p, m)
        Per layer a factor ``F`` with ``F F^T`` = the states' covariance.
    seed : int
        Seed of the measurement.
    n_random : int
        Number of directions, even.
    half : {"selection", "report"}
        Whose stream.

    Returns
    -------
    list of dict of int to ndarray
        ``n_random`` ``{layer: unit vector (p,)}``.

    Examples
    --------
    >>> F = {1: np.diag([1.0, 0.0, 0.0])}  # the states vary along the first axis only
    >>> u = matched_units(F, seed=0, n_random=2, half="report")
    >>> [round(abs(float(v[1][0])), 6) for v in u], bool(np.array_equal(u[1][1], -u[0][1]))
    ([1.0, 1.0], True)
    """
    seed = check_seed(seed, "seed")
    if half not in MATCHED_STREAMS:
        raise ValueError(f"half must be one of {sorted(MATCHED_STREAMS)}, got {half!r}")
    if int(n_random) % 2:
        raise ValueError(f"n_random_matched must be even (antithetic pairs +r, -r), got {n_random}")
    factors = {layer: np.asarray(factors[layer], dtype=np.float64) for layer in sorted(factors)}
    draws = []
    for k in range(int(n_random) // 2):
        rng = np.random.default_rng([seed, MATCHED_STREAMS[half], k])
        units = {}
        for layer, F in factors.items():
            u = F @ rng.standard_normal(F.shape[1])
            norm = np.linalg.norm(u)
            if not norm > 0:
                raise ValueError(f"layer {layer}'s states do not vary: no covariance-matched direction")
            units[layer] = u / norm
        draws += [units, {layer: -u for layer, u in units.items()}]
    return draws


def rank_p_value(concept: float, null) -> tuple:
    """The concept direction's shift ranked among the null (random) directions' shifts, the directions being the
    unit of inference: ``p = (1 + #{null >= concept}) / (1 + N)`` and ``p_opposite = (1 + #{null <= concept}) /
    (1 + N)`` (ties count against the claim in both; exact under the null that the concept direction is one more
    draw from the same distribution).

    Parameters
    ----------
    concept : float
        The concept direction's shift, signed towards the target.
    null : array-like of float, shape (N,)
        The null directions' shifts on the same prompts, same sign convention; NaN entries are not allowed.

    Returns
    -------
    (int, float, float)
        The rank (1 = above every null shift; ``1 + #{null >= concept}``), p and p_opposite; ``(0, nan, nan)``
        when ``concept`` is NaN or there is no null shift.

    Examples
    --------
    >>> rank_p_value(3.0, [1.0, 2.0, 3.0, 0.0])
    (2, 0.4, 1.0)
    >>> rank_p_value(5.0, np.zeros(39))[1]
    0.025
    """
    if isinstance(concept, (bool, np.bool_)) or not isinstance(concept, (int, float, np.integer, np.floating)):
        raise TypeError(f"concept must be a real number (the concept direction's shift), got {concept!r}")
    null = np.ravel(check_real_array(null, "null"))  # finite floats, naming the argument
    if not np.isfinite(concept) or not null.size:
        return 0, math.nan, math.nan
    above, below = int(np.sum(null >= concept)), int(np.sum(null <= concept))
    n = null.size
    return 1 + above, (1 + above) / (1 + n), (1 + below) / (1 + n)


def _sem(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def _t_interval(x, level=0.95) -> tuple:
    x = np.asarray(x, dtype=float)
    if len(x) < 2:
        return math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, len(x) - 1) * _sem(x)
    return float(x.mean() - half), float(x.mean() + half)


def _gmean(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.exp(np.mean(np.log(x)))) if len(x) else math.nan


class _Measurement:
    """One prompt set made ready to measure: checked inputs, token ids, the plan (method, setting, layers), the
    random draws; :meth:`readouts` and :meth:`generate` measure any entries (method, setting, layers, direction)
    on any subset of the prompts and keep the per-prompt values (NaN where not measured), :meth:`rows` turns them
    into table rows. :func:`evaluate_steering` measures everything, :func:`evaluate_staged` in stages."""

    def __init__(self, model, tokenizer, prompts, labels, vectors, validation_accuracy, norms, settings, *,
                 answer_words, protocol, generation_prompts=None, sentiment=False, dataset="dataset", progress=False,
                 staged=False, state_factors=None):
        require_decoder(model, "steering")
        if not isinstance(protocol, SteeringProtocol):
            raise ValueError(f"protocol must be a SteeringProtocol, got {type(protocol).__name__}")
        prompts = check_prompts(prompts)
        labels = np.asarray(labels)
        if labels.shape != (len(prompts),) or not np.all(np.isin(labels, (0, 1))):
            raise ValueError(f"labels must be {len(prompts)} values in {{0, 1}}, one per prompt")
        settings = check_settings(settings)
        self.protocol = protocol
        self.n_random = protocol.n_random
        #: control directions of the selection half (the report half's control: the first ones of its stream)
        self.n_control = protocol.n_control(staged=staged)
        self.batch_size = protocol.batch_size
        stem, directions, max_new_tokens, seed = protocol.stem, protocol.directions, protocol.max_new_tokens, \
            protocol.seed
        self.concept_ids, self.opposite_ids = answer_token_ids(tokenizer, answer_words)
        self.prompt_ids = tokenize_prompts(tokenizer, prompts)
        stem_ids = tokenizer(stem, add_special_tokens=False)["input_ids"]
        if not stem_ids:
            raise ValueError(f"stem (--stem) {stem!r} tokenizes to no tokens")
        limit = position_limit(model) or model_positions(model)
        self.gen_ids = None
        if generation_prompts is not None:
            self.gen_ids = tokenize_prompts(tokenizer, check_prompts(generation_prompts, "generation_prompts"))
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
        self.model, self.tokenizer, self.labels = model, tokenizer, labels
        self.answer_words, self.stem = tuple(answer_words), stem
        self.directions, self.dataset = tuple(directions), dataset
        self.max_new_tokens, self.sentiment, self.progress = max_new_tokens, sentiment, progress
        n_layers = len(decoder_blocks(model))
        hidden_size = int(model.get_output_embeddings().weight.shape[1])
        self.core, self.device = base_model(model), input_device(model)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.eos = tokenizer.eos_token_id
        self.n_layers = n_layers
        self.set_vectors(vectors, validation_accuracy, norms, settings)
        #: the null directions of each half (different seed streams: the report half never reuses a draw)
        self.draws = {half: null_units(range(1, n_layers + 1), hidden_size, seed,
                                       self.n_control if half == "selection" else self.n_random, half)
                      for half in NULL_STREAMS}
        #: the covariance-matched null (drawn per half when first read; none without the layers' states)
        self.factors = None if not state_factors or not protocol.n_random_matched else dict(state_factors)
        self.n_matched = protocol.n_random_matched if self.factors else 0
        if self.factors:
            missing = [layer for layer in range(1, n_layers + 1) if layer not in self.factors]
            wrong = [layer for layer, F in self.factors.items() if np.shape(F)[0] != hidden_size]
            if missing or wrong:
                raise ValueError(f"state_factors must hold a ({hidden_size}, m) factor for every layer 1..{n_layers}; "
                                 f"missing {missing[:5]}, wrong size {wrong[:5]}")
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

    def set_vectors(self, vectors, validation_accuracy, norms, settings) -> None:
        """The plan (method, setting, layers) of every method's concept vectors and setting; an empty ``vectors``
        gives an empty plan (the unsteered read-out only, e.g. the validity stage before any vector is fitted)."""
        plan = []
        for method, probes in vectors.items():
            has_coef = all(probes[layer].coef is not None for layer in probes)
            for setting in settings:
                if setting.edit_kind.needs_weights and not has_coef:
                    continue
                layers = choose_layers(setting, probes, validation_accuracy.get(method, {}), self.n_layers)
                if setting.edit_kind.needs_norms:
                    missing = [layer for layer in layers if layer not in norms]
                    if missing:
                        raise ValueError(f"setting {setting.name!r} is {setting.kind}: norms lack layers {missing}")
                plan.append((method, setting, layers))
        self.vectors, self.norms, self.plan = vectors, norms, plan

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
                    edit = SettingEdit(model, setting, self.vectors[method], layers, direction, self.norms)
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
                    edit = SettingEdit(model, setting, self.vectors[method], layers, direction, self.norms)
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

    # ----------------------------------------------------------------------------------------- rows
    def rows(self, entries, half, stage) -> list:
        """One table row per entry on the prompts of ``half`` it was read on (:data:`METRIC_COLUMNS`)."""
        auc, mass_all, measurable = self.validity()
        out = []
        for method, setting, layers, direction in entries:
            res = self.results[(method, setting.name, direction)]
            other = self.results.get((method, setting.name, "away" if direction == "towards" else "towards"))
            sign = 1.0 if direction == "towards" else -1.0
            sel = (self.halves == half) & np.isfinite(res["ld"])
            if not sel.any():
                raise ValueError(f"{setting.name} ({method}, {direction}) was not read on the {half} half")
            ld0 = self.ld0[sel]
            shift = sign * (res["ld"][sel] - ld0)
            read = np.isfinite(res["rand"][:, sel]).all(1)  # the draws read on every prompt of the half
            rand = sign * (res["rand"][read][:, sel] - ld0)
            specific = shift - rand.mean(0)
            null = rand.mean(1)  # per null direction: its mean shift over the half's prompts
            # a rank test only with >= MIN_RANDOM draws; fewer are a control (its mean), not a test
            rank, p_null, p_opposite = (rank_p_value(float(shift.mean()), null) if read.sum() >= MIN_RANDOM
                                        else (0, math.nan, math.nan))
            low, high = _t_interval(specific)
            a = np.asarray(res["alpha"])
            opposite = math.nan
            if other is not None and np.isfinite(other["ld"][sel]).all():
                opposite = float(np.mean(sign * (other["ld"][sel] - ld0)))
            row = dict(dataset=self.dataset, method=method, setting=setting.name, kind=setting.kind,
                       layer_choice=setting.layer_choice, layers=",".join(map(str, layers)),
                       strength=setting.strength, positions=setting.positions, direction=direction, half=half,
                       stage=stage, n_prompts=int(sel.sum()), answer_logodds_shift=float(shift.mean()),
                       answer_logodds_shift_se=_sem(shift),
                       answer_prob_shift=float(np.mean(sign * (expit(res["ld"][sel]) - expit(ld0)))),
                       moved_fraction=float(np.mean(shift > 0)), answer_mass_unsteered=float(self.mass0[sel].mean()),
                       answer_mass_steered=float(res["mass"][sel].mean()),
                       random_control_shift=float(rand.mean()), random_control_se=_sem(rand.mean(0)),
                       n_random=int(read.sum()), concept_specific_shift=float(specific.mean()),
                       concept_specific_se=_sem(specific), concept_specific_low=low, concept_specific_high=high,
                       opposite_sign_shift=opposite, kl_answer=float(res["kl"][sel].mean()),
                       alpha_median=float(np.median(a)) if a.size else math.nan,
                       alpha_max=float(a.max()) if a.size else math.nan,
                       auc_unsteered=auc, auc_p_value=self.auc_p, measurable=measurable, stem=self.stem,
                       n_generated=0, null_rank=rank, null_p=p_null, null_p_opposite=p_opposite,
                       null_mean=float(null.mean()), null_sd=float(null.std(ddof=1)),
                       null_stream=NULL_STREAMS[half], **self._matched_row(res, sel, sign, float(shift.mean())))
            fixed = setting.edit_kind.fixed_strengths(setting, layers, self.norms)
            if fixed is not None:
                strengths = np.abs(list(fixed.values()))
                row.update(alpha_median=float(np.median(strengths)), alpha_max=float(strengths.max()))
            key = (method, setting.name, direction)
            if key in self.generated:
                row.update(self._generation_row(self.generated[key], sign, half))
            out.append(row)
        return out

    def _matched_shifts(self, res, sel, sign) -> np.ndarray:
        """Each covariance-matched null direction's mean shift over the prompts ``sel`` (those read on all)."""
        matched = res["matched"][:, sel]
        read = np.isfinite(matched).all(1) if matched.size else np.zeros(len(matched), bool)
        return (sign * (matched[read] - self.ld0[sel])).mean(1)

    def _matched_row(self, res, sel, sign, shift) -> dict:
        """The covariance-matched null's columns of a row: its rank test (with >= :data:`MIN_RANDOM` draws read;
        NaN otherwise, ``n_random_matched`` = the draws read)."""
        null = self._matched_shifts(res, sel, sign)
        rank, p, p_opposite = rank_p_value(shift, null) if len(null) >= MIN_RANDOM else (0, math.nan, math.nan)
        return dict(n_random_matched=len(null), matched_null_rank=rank, matched_null_p=p,
                    matched_null_p_opposite=p_opposite, matched_null_mean=float(null.mean()) if len(null) else math.nan,
                    matched_null_sd=float(null.std(ddof=1)) if len(null) > 1 else math.nan)

    def _generation_row(self, stores, sign, half) -> dict:
        u, s, r = self.gen0, stores["concept"], stores["random"]
        sel = (self.gen_halves == half) & np.isfinite(s["nll"])
        if not sel.any():
            return dict(n_generated=0)
        ppl0, ppl1, ppl_r = (np.exp(x["nll"][sel]) for x in (u, s, r))
        # the ratio of geometric means is exp of the mean per-prompt log ratio: its 95 % interval over prompts
        low, high = np.exp(_t_interval(s["nll"][sel] - u["nll"][sel]))
        row = dict(n_generated=int(sel.sum()), perplexity_unsteered=_gmean(ppl0), perplexity_steered=_gmean(ppl1),
                   perplexity_ratio=_gmean(ppl1) / _gmean(ppl0), perplexity_ratio_low=float(low),
                   perplexity_ratio_high=float(high), perplexity_ratio_random=_gmean(ppl_r) / _gmean(ppl0),
                   distinct2_unsteered=float(u["distinct2"][sel].mean()),
                   distinct2_steered=float(s["distinct2"][sel].mean()),
                   distinct2_random=float(r["distinct2"][sel].mean()))
        if self.sentiment and np.isfinite(s["vader"][sel]).all():
            change = sign * (s["vader"][sel] - u["vader"][sel])
            draws = stores["vader_random"][:, sel]
            draws = draws[np.isfinite(draws).all(1)]  # the random directions continued on every prompt of the half
            per_draw = (sign * (draws - u["vader"][sel])).mean(1)  # each direction's mean change
            row.update(vader_shift=float(change.mean()), vader_se=_sem(change),
                       vader_random_shift=float(per_draw.mean()), vader_random_se=_sem(per_draw),
                       n_vader_random=len(per_draw))
        return row

    def null_rows(self, table: pd.DataFrame) -> pd.DataFrame:
        """The per-draw null shifts of every tested (method, setting, direction, half) row of ``table``: those with
        a rank p (>= :data:`MIN_RANDOM` draws; :data:`NULL_COLUMNS`)."""
        out = []
        for r in table.itertuples():
            res = self.results.get((r.method, r.setting, r.direction))
            if res is None or r.half not in NULL_STREAMS or not np.isfinite(r.null_p):
                continue
            sign = 1.0 if r.direction == "towards" else -1.0
            sel = (self.halves == r.half) & np.isfinite(res["ld"])
            read = np.isfinite(res["rand"][:, sel]).all(1)
            nulls = [("isotropic", NULL_STREAMS[r.half], (sign * (res["rand"][read][:, sel] - self.ld0[sel])).mean(1))]
            if np.isfinite(getattr(r, "matched_null_p", math.nan)):
                nulls.append(("matched", MATCHED_STREAMS[r.half], self._matched_shifts(res, sel, sign)))
            for kind, stream, null in nulls:
                out.append(pd.DataFrame(dict(dataset=self.dataset, method=r.method, setting=r.setting,
                                             direction=r.direction, half=r.half, stream=stream,
                                             draw=np.arange(len(null)), sign=np.where(np.arange(len(null)) % 2, -1, 1),
                                             shift=null, null_kind=kind)))
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=NULL_COLUMNS)

    def per_prompt(self, table=None) -> dict:
        out = {"unsteered": dict(ld=self.ld0, mass=self.mass0, half=self.halves), **self.results}
        if table is not None:
            out["null"] = self.null_rows(table)
        return out


def _table(rows) -> pd.DataFrame:
    return pd.DataFrame(rows).reindex(columns=METRIC_COLUMNS)


def evaluate_steering(model, tokenizer, prompts, labels, vectors: dict, validation_accuracy: dict, norms: dict,
                      settings, *, answer_words, protocol: SteeringProtocol | None = None, generation_prompts=None,
                      sentiment: bool = False, dataset: str = "dataset", progress: bool = False,
                      state_factors=None) -> tuple:
    """Measure every (method, setting, direction) on every prompt, both halves (see the module docstring;
    :func:`evaluate_staged` measures a sweep in stages).

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompts : list of str
        Held-out prompts, ordered as :func:`~empirical.llm.select_prompts` gives them (classes
        alternating); :func:`split_halves` assigns the selection and report halves.
    labels : array of 0/1
        Their labels (1 = the concept), for the read-out's AUC.
    vectors : mapping of str to ConceptVectors
        Per method its concept vectors; a method whose vectors have no probe weights gets only additive settings.
    validation_accuracy : mapping of str to (mapping of int to float)
        Per method, each layer's validation accuracy (ranks ``best`` and ``top3``).
    norms : mapping of int to float
        Median hidden-state norm per layer (additive strengths are multiples of it).
    settings : iterable of SteeringSetting
        The ways to steer (e.g. :func:`sweep_settings`).
    answer_words : (str, str)
        The concept word and its opposite (the dataset's ``answer_words``).
    protocol : SteeringProtocol, optional
        The read-out stem, directions, random directions (``n_random`` null directions per setting, direction and
        half, antithetic, drawn anew for each half: :func:`null_units`; here they are also the control, and
        ``n_random_selection`` is not used), seed, generation length and batch size (default:
        ``SteeringProtocol()``).  Each direction gets its own rows; ``max_new_tokens`` must leave the longest
        generation prompt within the model's positions.
    generation_prompts : list of str, optional
        Prompts continued greedily (perplexity, distinct-2, VADER; each also under the first random direction);
        None: no generation. Even-indexed ones belong to the selection half, odd ones to the report half.
    sentiment : bool
        Score the continuations with VADER (answer words masked).
    dataset : str
        Name written into the table.
    progress : bool
        Show progress bars.
    state_factors : mapping of int to ndarray (p, m), optional
        The layers' state covariance factors (:func:`state_factors`, every layer 1..L): every row then also gets the
        covariance-matched null (``protocol.n_random_matched`` draws per half, :func:`matched_units`); None: not
        measured (its columns NaN).

    Returns
    -------
    (pandas.DataFrame, dict)
        The metrics (one row per method, setting, direction and half; :data:`METRIC_COLUMNS`, ``stage`` = 'all')
        and the per-prompt arrays (``"unsteered"``: LD and mass; ``(method, setting, direction)``: LD, mass, KL,
        null LD per draw (n_random, n_prompts), each prompt read under its half's draws; ``"null"``: the per-draw
        null shifts of every table row, :data:`NULL_COLUMNS`).
    """
    m = _Measurement(model, tokenizer, prompts, labels, vectors, validation_accuracy, norms, settings,
                     answer_words=answer_words, protocol=SteeringProtocol() if protocol is None else protocol,
                     generation_prompts=generation_prompts, sentiment=sentiment, dataset=dataset, progress=progress,
                     state_factors=state_factors)
    entries = m.entries()
    m.readouts(entries, m.prompts_of(None))
    m.more_draws(entries, m.prompts_of(None), null="matched")
    if m.gen_ids is not None:
        m.generate(entries, np.arange(len(m.gen_ids)), text_draws=m.n_text_random)
    rows = [row for entry in entries for half in ("selection", "report") for row in m.rows([entry], half, "all")]
    table = _table(rows)
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


def rank_test_points(rows: pd.DataFrame, by=("dataset", "method", "direction")) -> pd.DataFrame:
    """The rows the rank test reads, chosen on the selection half before the report half is read: per group
    ``by``, the candidate (``stage`` != 'screen') with the largest concept-specific shift among those passing the
    gates (:func:`passes_gates`) on a measurable read-out. It is the operating point of its group
    (:func:`~empirical.llm.select_operating_points`) with the largest selection shift, the row
    the claim reads per dataset and direction (``paper_figures.claims.steering_text_claim``, RAPTOR); only these
    get :data:`N_RANDOM` null directions on the report half in :func:`evaluate_staged`.

    Parameters
    ----------
    rows : pandas.DataFrame
        Selection-half metric rows (:data:`METRIC_COLUMNS`).
    by : sequence of str
        Columns defining the groups.

    Returns
    -------
    pandas.DataFrame
        One row per group that has a passing candidate.
    """
    selection = rows[rows["half"] == "selection"]
    if "stage" in selection:
        selection = selection[selection["stage"] != "screen"]
    passed = selection[passes_gates(selection) & selection["measurable"].astype(bool)]
    ranked = passed.sort_values("concept_specific_shift", ascending=False, kind="stable")
    return ranked.groupby(list(by), sort=False).head(1)


def _key(entry) -> tuple:
    """(method, setting name, direction) of an entry (method, setting, layers, direction)."""
    return entry[0], entry[1].name, entry[3]


def _keys(rows: pd.DataFrame) -> set:
    """(method, setting, direction) of table rows."""
    return set(zip(rows["method"], rows["setting"], rows["direction"]))


def evaluate_staged(model, tokenizer, prompts, labels, vectors, validation_accuracy, norms: dict, settings, *,
                    answer_words, protocol: SteeringProtocol | None = None, fit_vectors=None, generation_prompts=None,
                    sentiment: bool = False, dataset: str = "dataset", progress: bool = False, on_stage=None,
                    validity_only: bool = False, auc_p_adjusted: float | None = None, state_factors=None) -> tuple:
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
       selection half) get the rest of the report stream's ``n_random`` null directions and a rank p; with
       ``state_factors``, also the ``n_random_matched`` covariance-matched ones and their rank p (``on_stage``
       'matched').

    Random directions: the screen and candidates read ``protocol.n_random_selection`` (:data:`N_RANDOM_SELECTION`)
    draws of the selection stream, the report half's rows the first ``n_random_selection`` of the report stream (a
    control: its mean, no rank p) and the tested points all ``n_random`` of it (the rank test). The VADER control of
    a sentiment dataset continues the first draw of the selection stream and the first ``protocol.n_text_random`` of
    the report stream.

    No report-half prompt is read before stage 3. ``settings`` must edit the answer positions; the concept vectors
    are given (``vectors``, ``validation_accuracy``) or fitted by ``fit_vectors()``, called only when the read-out is
    valid (a dataset that stops at validity fits nothing); ``on_stage(stage, entries, prompt_indices)`` is called
    before each measurement and before the lazy fit (stage ``fit``; a hook for progress, timing and tests).

    Parameters
    ----------
    model, tokenizer, prompts, labels, norms
        As for :func:`evaluate_steering`.
    vectors : mapping of str to ConceptVectors, or None
        As for :func:`evaluate_steering`; None with ``fit_vectors``.
    validation_accuracy : mapping of str to (mapping of int to float) or None
        As for :func:`evaluate_steering`; None with ``fit_vectors``.
    settings : iterable of SteeringSetting
        The sweep; every setting must edit the ``"answer"`` positions.
    answer_words, generation_prompts, sentiment, dataset, progress
        As for :func:`evaluate_steering`.
    protocol : SteeringProtocol, optional
        As for :func:`evaluate_steering`, and the sweep's stages: ``n_random_selection`` (the control),
        ``n_candidates`` (kept per method and direction after the screen, :func:`screen_candidates`), ``n_twins``
        (how many of the best candidates, at most ``n_candidates``, also run at ``stage2_positions``) and
        ``twin_methods`` (whose candidates get twins; default every method).
    fit_vectors : callable, optional
        A function of no argument returning ``(vectors, validation_accuracy)``, called only when the read-out is
        valid; give it or ``vectors``, not both.
    on_stage : callable, optional
        ``on_stage(stage, entries, prompt_indices)``, called before each stage (see above).
    validity_only : bool, default=False
        Stop after the validity stage whatever its outcome (its one row; ``measurable`` is the dataset's own test):
        the first pass of a caller that corrects the validity tests of several datasets before it measures any.
    auc_p_adjusted : float in [0, 1], optional
        The dataset's validity p after the caller's multiplicity correction: the gate then compares it, not the
        dataset's own p, with :data:`~empirical.llm.MAX_AUC_P`
        (:func:`~empirical.llm._answer_readout.validity_decision`); the row still records the own p.
    state_factors : mapping of int to ndarray (p, m), optional
        As for :func:`evaluate_steering`: the tested points' covariance-matched null (report half).

    Returns
    -------
    (pandas.DataFrame, dict)
        As :func:`evaluate_steering`; a setting screened out has only its selection-half 'screen' row.
    """
    protocol = SteeringProtocol() if protocol is None else protocol
    if not isinstance(protocol, SteeringProtocol):
        raise ValueError(f"protocol must be a SteeringProtocol, got {type(protocol).__name__}")
    stage2_positions, twin_methods = protocol.stage2_positions, protocol.twin_methods
    n_candidates, n_twins = protocol.n_candidates, protocol.n_twins
    other = [s.name for s in check_settings(settings) if s.positions != "answer"]
    if other:
        raise ValueError(f"staged settings must edit the answer positions (stage 2 adds {tuple(stage2_positions)}), "
                         f"got {other[:3]}")
    lazy = fit_vectors is not None
    if lazy == (vectors is not None) or (lazy and validation_accuracy is not None):  # a declared option conflict
        raise ValueError("give the concept vectors (vectors, validation_accuracy) or fit_vectors, not both")
    if lazy and not callable(fit_vectors):
        raise ValueError(f"fit_vectors must be a function returning (vectors, validation_accuracy), got "
                         f"{type(fit_vectors).__name__}")
    validity_only = check_bool(validity_only, "validity_only")
    if auc_p_adjusted is not None:
        auc_p_adjusted = check_scalar(auc_p_adjusted, "auc_p_adjusted", low=0.0, high=1.0)
    m = _Measurement(model, tokenizer, prompts, labels, {} if lazy else vectors, validation_accuracy, norms, settings,
                     answer_words=answer_words, protocol=protocol, generation_prompts=generation_prompts,
                     sentiment=sentiment, dataset=dataset, progress=progress, staged=True, state_factors=state_factors)
    notify = on_stage or (lambda stage, entries, idx: None)
    selection, report = m.prompts_of("selection"), m.prompts_of("report")
    notify("validity", [], np.arange(len(m.halves)))
    m.readouts([], np.arange(len(m.halves)))
    auc, mass, measurable = m.validity()
    if auc_p_adjusted is not None:
        measurable = validity_decision(auc, auc_p_adjusted, mass)
    if validity_only or not measurable:
        return _table([dict(dataset=dataset, method="--", setting="unsteered", half="all", stage="validity",
                            n_prompts=len(m.halves), answer_mass_unsteered=mass, auc_unsteered=auc,
                            auc_p_value=m.auc_p, measurable=measurable,
                            stem=protocol.stem, n_random=m.n_random, n_generated=0)]), m.per_prompt(_table([]))
    if lazy:
        notify("fit", [], np.arange(0))
        m.set_vectors(*fit_vectors(), norms, settings)
    # stage 1: the whole grid at the answer position, selection half
    screen = m.entries()
    notify("screen", screen, selection)
    m.readouts(screen, selection)
    screened = _table(m.rows(screen, "selection", "screen"))
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
        read = _table(m.rows(twins, "selection", "candidate"))
        keep = _keys(read[passes_gates(read)])
        kept = [e for e in twins if _key(e) in keep]
    generated = candidates + kept
    if m.gen_ids is not None and generated:
        gen_selection = np.flatnonzero(m.gen_halves == "selection")
        notify("generate", generated, gen_selection)
        m.generate(generated, gen_selection)
    candidates += twins
    measured = _table(m.rows(candidates, "selection", "candidate")) if candidates else screened.iloc[:0]
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
    rows = [r for r in m.rows(screen, "selection", "screen") if (r["method"], r["setting"], r["direction"]) not in seen]
    rows += m.rows(candidates, "selection", "candidate") + m.rows(finals, "report", "report")
    table = _table(rows)
    return table, m.per_prompt(table)


# --------------------------------------------------------------------------------------------- one dataset
#: Estimator parameters of the steering comparison's methods where they differ from the registry's defaults (GCS:
#: 50 probes instead of 100, half the cost; the paper's steering section passes its own).
STEERING_METHOD_PARAMS = {"GCS": {"n_probes": 50}}


def method_vectors(H, y, split, methods=("RAPTOR", "DiffMeans", "GCS", "xRFM"), layers=None, method_params=None,
                   progress: bool = False, n_jobs: int = 1) -> tuple:
    """Concept vectors and validation accuracies per method on ``layers`` (default 1..L) of hidden states ``H``
    (L+1, n, p), fitted on the split's train/validation rows (xRFM: directions only, it has no linear probe).

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
    (dict of str to ConceptVectors, dict of str to dict of int to float)
        Per method its concept vectors, and its validation accuracy per layer.
    """
    n_jobs = check_n_jobs(n_jobs)
    layers = list(range(1, H.shape[0])) if layers is None else list(layers)
    unknown = [m for m in methods if m not in method_names("steering")]  # the registry's steering comparison
    if unknown:
        raise ValueError(f"methods must be among {sorted(method_names('steering'))}, got {unknown}")
    params = STEERING_METHOD_PARAMS if method_params is None else method_params
    if not hasattr(params, "get") or not all(isinstance(v, dict) for v in params.values()):
        raise ValueError(f"method_params must map method names to dicts of estimator parameters, got {params!r}")
    vectors, accuracy = {}, {}
    for method in methods:
        estimator = get_method(method).estimator(**params.get(method, {}))
        fit = fit_layers(H, y, layers=layers, split=split, progress=progress and method == "RAPTOR", n_jobs=n_jobs,
                         estimator=estimator)
        accuracy[method] = dict(zip(fit.summary["layer"].astype(int), fit.summary["val_accuracy"].astype(float)))
        vectors[method] = fit.concept_vectors(method=method.lower())  # xRFM: its direction only (no linear probe)
    return vectors, accuracy


def given_vectors(probes: ConceptVectors, H, y, split, method: str = "RAPTOR") -> tuple:
    """Saved concept vectors (``raptor steer --probe-file``) in the form :func:`method_vectors` returns fitted ones:
    with each layer's accuracy on the split's validation rows (the layer rule never reads test data).

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
    (dict of str to ConceptVectors, dict of str to dict of int to float)
        ``{method: probes}`` and ``{method: {layer: validation accuracy}}``.

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
    return {method: probes}, {method: accuracy}


def evaluate_dataset(model, tokenizer, dataset, H, settings, *, protocol: SteeringProtocol | None = None,
                     eval_dataset=None, n_prompts: int = 100, methods=("RAPTOR", "DiffMeans", "GCS", "xRFM"),
                     vectors=None, answer_words=None, split_seed: int = PAPER_SPLIT_SEED, method_params=None,
                     progress: bool = False, staged: bool = False, n_jobs: int = 1, on_stage=None,
                     validity_only: bool = False, auc_p_adjusted: float | None = None) -> tuple:
    """Steering of one dataset, end to end: answer words checked first, concept vectors fitted on the
    train/validation split of ``H`` (unless ``vectors`` = (vectors, validation accuracies) is given), held-out
    prompts (``eval_dataset``'s rows, e.g. ``stsa.binary.test``, else the test split; classes alternating), median
    state norms and state covariance factors (:func:`state_factors`: the covariance-matched null) of train +
    validation, then :func:`evaluate_steering`. Generation: the neutral prompts for
    sentiment datasets (VADER), else the first ``protocol.n_generate`` held-out prompts; ``n_generate=0`` skips it.
    ``staged`` runs :func:`evaluate_staged` (a sweep: ``paper_figures --only steering_text``; the vectors are
    fitted after the validity stage, only for a valid read-out; ``on_stage`` as there), else
    :func:`evaluate_steering`; ``n_jobs`` fits the layers in parallel.

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
    eval_dataset : ConceptDataset, optional
        Where the held-out prompts come from (default: the test split of ``dataset``).
    n_prompts : int >= 2
        Held-out prompts.
    methods : sequence of str
        Methods whose concept vectors are fitted (:func:`method_vectors`).
    vectors : (dict, dict), optional
        Precomputed ``(vectors, validation accuracies)`` as :func:`method_vectors` returns them (e.g. those the
        empirical section saved: :func:`paper_figures.output.load_saved_vectors`); nothing is fitted then.
    answer_words : str or pair of str, optional
        As for :func:`check_answer_words` (default: the dataset's).
    protocol : SteeringProtocol, optional
        How the measurement is made (default ``SteeringProtocol()``): as for :func:`evaluate_steering` or, with
        ``staged``, :func:`evaluate_staged`; ``n_generate`` generation prompts (0: no generation).
    split_seed : int
        Seed of :func:`empirical.probes.paper_split`.
    method_params, progress, n_jobs
        As for :func:`method_vectors` (``progress`` also shows the measurement's bars).
    staged : bool
        Run :func:`evaluate_staged` instead of :func:`evaluate_steering`.
    on_stage, validity_only, auc_p_adjusted
        As for :func:`evaluate_staged` (only with ``staged``).

    Returns
    -------
    (pandas.DataFrame, dict)
        As :func:`evaluate_steering`.
    """
    n_jobs = check_n_jobs(n_jobs)
    split_seed = check_random_state(split_seed, "split_seed")
    protocol = SteeringProtocol() if protocol is None else protocol
    if not isinstance(protocol, SteeringProtocol):
        raise ValueError(f"protocol must be a SteeringProtocol, got {type(protocol).__name__}")
    if not staged and (validity_only is not False or auc_p_adjusted is not None):  # a declared option conflict
        raise ValueError("validity_only and auc_p_adjusted gate a staged measurement: pass staged=True")
    words = check_answer_words(dataset.name, answer_words)
    n_prompts = check_int(n_prompts, "n_prompts (--n-prompts)", minimum=2)
    n_generate = protocol.n_generate
    answer_token_ids(tokenizer, words)  # before any model work
    y = np.asarray(dataset.labels)
    split = paper_split(y, random_state=split_seed)
    def fit():
        return method_vectors(H, y, split, methods=methods, method_params=method_params, progress=progress,
                              n_jobs=n_jobs)

    pool = np.sort(np.r_[split[0], split[1]])
    norms = {layer: float(np.median(np.linalg.norm(np.asarray(H[layer][pool], dtype=np.float32), axis=1)))
             for layer in range(1, H.shape[0])}
    # the covariance-matched null's distribution: the states of the rows the vectors are fitted on
    factors = state_factors(H, pool, range(1, H.shape[0])) if protocol.n_random_matched else None
    if eval_dataset is not None:
        source, candidates = eval_dataset, np.arange(len(eval_dataset))
    else:
        source, candidates = dataset, split[2]
    chosen = select_prompts(source.labels, candidates, n_prompts)
    prompts = [source.prompts[i] for i in chosen]
    # a registered sentiment concept (the dataset registry's ``sentiment``; a user table is not one)
    sentiment = dataset.name in datasets.dataset_names() and datasets.get_dataset(dataset.name).sentiment
    if sentiment and n_generate > len(NEUTRAL_PROMPTS):
        raise ValueError(f"n_generate (--generate) must be at most the {len(NEUTRAL_PROMPTS)} neutral prompts of a "
                         f"sentiment dataset, got {n_generate}")
    generation = None
    if n_generate:
        generation = list(NEUTRAL_PROMPTS[:n_generate]) if sentiment else prompts[:n_generate]
    settings = check_settings(settings)
    kw = dict(answer_words=words, protocol=protocol, generation_prompts=generation, sentiment=sentiment,
              dataset=dataset.name, progress=progress, state_factors=factors)
    labels = np.asarray(source.labels)[chosen]
    if staged:  # without given vectors, they are fitted only when the read-out is valid
        given, accuracy = (None, None) if vectors is None else vectors
        return evaluate_staged(model, tokenizer, prompts, labels, given, accuracy, norms, settings,
                               fit_vectors=fit if vectors is None else None, on_stage=on_stage,
                               validity_only=validity_only, auc_p_adjusted=auc_p_adjusted, **kw)
    return evaluate_steering(model, tokenizer, prompts, labels, *(fit() if vectors is None else vectors), norms,
                             settings, **kw)
