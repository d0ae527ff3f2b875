"""What steering does to the generated text: concept shift, fluency and cost of a steering setting.

For held-out prompts, the model generates greedily without and with steering; then, with the
*unsteered* model (no hook is active while scoring):

* **concept shift**: each continuation is scored as a new example of the concept: wrapped in the
  dataset's template (``{text}`` -> the continuation), its last-token hidden state at the scorer's
  layer goes through the scorer probe (a RAPTOR probe of a layer that the setting does not steer).
  ``shift`` = P(concept | steered continuation) - P(concept | unsteered continuation), signed so that a
  move towards the target is positive (``towards``: up, ``away``: down). Reported: ``shift_mean`` and
  ``shift_fraction`` (share of prompts whose continuation moved towards the target);
* **fluency**: ``perplexity`` of each continuation under the unsteered model given its prompt (the
  geometric mean over prompts, steered and unsteered), and the ``distinct2`` repetition measure (unique
  token bigrams / bigrams of the continuation; 1 = no repeated bigram; continuations shorter than two
  tokens count as 1);
* **cost**: ``|alpha|`` median / p90 / max over the steered (layer, prompt) pairs, as
  :func:`~empirical.llm.steering.steering_metrics` reports them (GCAV settings only).

A :class:`SteeringSetting` names what is compared: GCAV (the paper's adaptive strength, target
``p_target``) or a fixed-strength additive edit (``strength`` times the median hidden-state norm of the
layer, the common practice of activation-steering libraries), on the layers ``"all"`` (every qualifying
layer, the paper), ``"best"`` (the probe-best layer) or ``"top3"``, at the last or all positions.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.special import expit
from tqdm.auto import tqdm

from cgmt.validation import check_scalar

from ..probes.concept_vectors import ConceptVectors, LinearProbe
from .datasets import apply_template
from .extract import check_prompts, hidden_states
from .hooks import decoder_blocks, input_device
from .steering import additive_steering, gcav_steering, generate_ids, steerable_layers

__all__ = ["SteeringSetting", "PRESETS", "DEFAULT_SETTING", "ContinuationScorer", "choose_layers", "distinct_ngram_ratio",
           "continuation_perplexity", "evaluate_setting", "compare_settings"]


@dataclass(frozen=True)
class SteeringSetting:
    """One way to steer.

    Parameters
    ----------
    name : str
    kind : {"gcav", "additive"}
        GCAV adaptive strength, or a fixed additive edit ``h += strength * median_norm(layer) * v``.
    layers : {"all", "best", "top3"} or tuple of int
        Which layers (among those whose probe qualifies; the scorer's layer is always excluded).
    p_target : float in (0, 1), optional
        GCAV target probability (default 0.9999 towards, 0.0001 away, the paper's).
    positions : {"last", "all"}
        Edit the last position of every forward call, or every position (prompt and generated tokens).
    strength : float
        Additive settings: multiple of the layer's median hidden-state norm.
    """

    name: str
    kind: str = "gcav"
    layers: object = "all"
    p_target: float | None = None
    positions: str = "last"
    strength: float = 0.0

    def __post_init__(self):
        if self.kind not in ("gcav", "additive"):
            raise ValueError(f"kind must be 'gcav' or 'additive', got {self.kind!r}")
        if self.positions not in ("last", "all"):
            raise ValueError(f"positions must be 'last' or 'all', got {self.positions!r}")
        if not (self.layers in ("all", "best", "top3") or (isinstance(self.layers, tuple) and self.layers)):
            raise ValueError(f"layers must be 'all', 'best', 'top3' or a tuple of layer indices, got {self.layers!r}")
        if self.kind == "additive":
            check_scalar(self.strength, "strength", low=0.0, low_open=True)


#: the compared settings (``paper`` is the paper's protocol)
PRESETS = {
    "paper": SteeringSetting("paper", "gcav", "all"),
    "all-0.99": SteeringSetting("all-0.99", "gcav", "all", p_target=0.99),
    "top3-0.99": SteeringSetting("top3-0.99", "gcav", "top3", p_target=0.99),
    "best-0.9999": SteeringSetting("best-0.9999", "gcav", "best"),
    "best-0.99": SteeringSetting("best-0.99", "gcav", "best", p_target=0.99),
    "best-0.9": SteeringSetting("best-0.9", "gcav", "best", p_target=0.9),
    "best-0.99-allpos": SteeringSetting("best-0.99-allpos", "gcav", "best", p_target=0.99, positions="all"),
    "additive-0.1": SteeringSetting("additive-0.1", "additive", "best", strength=0.1),
    "additive-0.3": SteeringSetting("additive-0.3", "additive", "best", strength=0.3),
}
#: the paper's protocol stays the default until a validated text scorer supports another (docs/steering.md)
DEFAULT_SETTING = "paper"


def distinct_ngram_ratio(ids, n: int = 2) -> float:
    """Unique n-grams / n-grams of a token sequence (1.0 when it has fewer than ``n`` tokens).

    Examples
    --------
    >>> distinct_ngram_ratio([1, 2, 1, 2, 1, 2]), distinct_ngram_ratio([1, 2, 3, 4]), distinct_ngram_ratio([7])
    (0.4, 1.0, 1.0)
    """
    ids = list(ids)
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def continuation_perplexity(model, prompt_ids, new_ids) -> float:
    """exp(mean negative log-likelihood) of ``new_ids`` given ``prompt_ids`` under ``model`` (no hooks must be active)."""
    if not new_ids:
        raise ValueError("the continuation is empty; its perplexity is undefined")
    ids = torch.tensor([list(prompt_ids) + list(new_ids)], device=input_device(model))
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].double()
    nll = torch.nn.functional.cross_entropy(logits, ids[0, len(prompt_ids):], reduction="mean")
    return float(torch.exp(nll))


class ContinuationScorer:
    """P(concept) of a text as a new example: template applied, unsteered hidden state at ``layer``, probe.

    Parameters
    ----------
    model, tokenizer : the (unsteered) decoder and its tokenizer
    template : str
        The dataset's prompt template (``{text}`` marks the example).
    probe : LinearProbe
        A probe with coef and intercept at ``layer`` (raw hidden-state space).
    layer : int
        Layer of the probe (output of decoder block ``layer``).
    """

    def __init__(self, model, tokenizer, template: str, probe: LinearProbe, layer: int):
        if probe.coef is None:
            raise ValueError("the scorer needs a probe with coef and intercept, not a bare direction")
        self.model, self.tokenizer, self.template, self.probe, self.layer = model, tokenizer, template, probe, int(layer)

    def __call__(self, texts) -> np.ndarray:
        """Probabilities of the concept for each text (an empty text is scored as the bare template)."""
        prompts = [apply_template(self.template, t if t.strip() else "") or " " for t in texts]
        H = hidden_states(self.model, self.tokenizer, prompts, layers=[self.layer], progress=False)[0]
        return expit(self.probe.logit(H))


def choose_layers(setting: SteeringSetting, probes: ConceptVectors, tau, L: int, exclude: int) -> list:
    """The layers ``setting`` steers, never ``exclude`` (the scorer's layer): GCAV needs steerable probes
    (coef, w.v > 0, tau); an additive edit only a direction. ``"best"`` / ``"top3"`` rank by test accuracy."""
    if setting.kind == "gcav":
        active, _ = steerable_layers(probes, tau, L)
    else:
        active = [layer for layer in probes if 1 <= layer <= L and
                  (tau is None or (probes[layer].test_accuracy is not None and probes[layer].test_accuracy >= tau))]
    candidates = [layer for layer in active if layer != exclude]
    if not candidates:
        raise ValueError(f"setting {setting.name!r}: no steerable layer besides the scorer's layer {exclude}")
    if setting.layers == "all":
        return candidates
    ranked = sorted(candidates, key=lambda layer: (-(probes[layer].test_accuracy or 0.0), layer))
    if setting.layers == "best":
        return ranked[:1]
    if setting.layers == "top3":
        return sorted(ranked[:3])
    chosen = [layer for layer in setting.layers if layer in candidates]
    if not chosen:
        raise ValueError(f"setting {setting.name!r}: none of layers {setting.layers} can be steered")
    return chosen


@contextlib.contextmanager
def _steering(model, setting, probes, layers, direction, norms):
    """The setting's hooks; yields the GCAV hook state (its ``records`` hold every edit's alpha) or None."""
    if setting.kind == "gcav":
        with gcav_steering(model, {layer: probes[layer] for layer in layers}, direction, setting.p_target,
                           None, setting.positions) as state:
            yield state
    else:
        sign = 1.0 if direction == "towards" else -1.0
        with additive_steering(model, {layer: probes[layer].direction for layer in layers},
                               {layer: sign * setting.strength * norms[layer] for layer in layers}, setting.positions):
            yield None


def evaluate_setting(model, tokenizer, prompts, probes: ConceptVectors, setting: SteeringSetting, direction: str,
                     scorer: ContinuationScorer, *, norms=None, tau=None, max_new_tokens: int = 24,
                     unsteered=None, progress: bool = True) -> tuple[dict, pd.DataFrame]:
    """Generate with and without ``setting`` and measure the output (see the module docstring).

    Parameters
    ----------
    model, tokenizer : decoder and tokenizer
    prompts : list of str
    probes : ConceptVectors
        Probes with coef/intercept and ``test_accuracy`` (GCAV and the layer choice read them); any method's.
    setting : SteeringSetting
    direction : {"towards", "away"}
    scorer : ContinuationScorer
        Its layer is never steered.
    norms : mapping of int to float, optional
        Median hidden-state norm per layer (needed by additive settings).
    tau : float, optional
        Reliability threshold on the probes' test accuracy.
    max_new_tokens : int
    unsteered : list of (prompt_ids, new_ids), optional
        Reuse unsteered generations (they do not depend on the setting).
    progress : bool

    Returns
    -------
    (dict, pandas.DataFrame)
        Summary (``shift_mean`` and its standard error ``shift_se`` over prompts, ``shift_fraction``, ``perplexity_steered``, ``perplexity_unsteered``,
        ``perplexity_ratio``, ``distinct2_steered``, ``distinct2_unsteered``, ``alpha_median``, ``alpha_p90``,
        ``alpha_max``, ``layers``, ...) and the per-prompt table (texts, probabilities, perplexities).
    """
    if direction not in ("towards", "away"):
        raise ValueError(f"direction must be 'towards' or 'away', got {direction!r}")
    prompts = check_prompts(prompts)
    L = len(decoder_blocks(model))
    layers = choose_layers(setting, probes, tau, L, scorer.layer)
    if setting.kind == "additive" and (norms is None or any(layer not in norms for layer in layers)):
        raise ValueError(f"setting {setting.name!r} is additive: give norms (median hidden-state norm) for layers {layers}")
    if unsteered is None:
        unsteered = [generate_ids(model, tokenizer, p, max_new_tokens) for p in prompts]
    steered, alphas = [], []
    for prompt in tqdm(prompts, desc=f"{setting.name} {direction}", disable=not progress, leave=False):
        with _steering(model, setting, probes, layers, direction, norms) as state:
            steered.append(generate_ids(model, tokenizer, prompt, max_new_tokens))
        if state is not None:
            alphas += [abs(r["alpha"]) for r in state.records if r["alpha"] != 0.0]
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    text0 = [decode(new) for _, new in unsteered]
    text1 = [decode(new) for _, new in steered]
    p0, p1 = scorer(text0), scorer(text1)
    sign = 1.0 if direction == "towards" else -1.0
    ppl0 = [continuation_perplexity(model, pi, ni) if ni else math.nan for pi, ni in unsteered]
    ppl1 = [continuation_perplexity(model, pi, ni) if ni else math.nan for pi, ni in steered]
    table = pd.DataFrame(dict(prompt=prompts, unsteered=text0, steered=text1, p_unsteered=p0, p_steered=p1,
                              shift=sign * (p1 - p0), perplexity_unsteered=ppl0, perplexity_steered=ppl1,
                              distinct2_unsteered=[distinct_ngram_ratio(n) for _, n in unsteered],
                              distinct2_steered=[distinct_ngram_ratio(n) for _, n in steered]))
    gmean = lambda x: float(np.exp(np.nanmean(np.log(np.asarray(x, dtype=float)))))  # noqa: E731
    a = np.asarray(alphas)
    summary = dict(setting=setting.name, kind=setting.kind, direction=direction,
                   layers=",".join(map(str, layers)), n_layers=len(layers), n_prompts=len(prompts),
                   scorer_layer=scorer.layer, shift_mean=float(table["shift"].mean()),
                   shift_se=float(table["shift"].std(ddof=1) / np.sqrt(len(table))) if len(table) > 1 else math.nan,
                   shift_fraction=float((table["shift"] > 0).mean()),
                   perplexity_unsteered=gmean(ppl0), perplexity_steered=gmean(ppl1),
                   perplexity_ratio=gmean(ppl1) / gmean(ppl0),
                   distinct2_unsteered=float(table.distinct2_unsteered.mean()),
                   distinct2_steered=float(table.distinct2_steered.mean()),
                   alpha_median=float(np.median(a)) if a.size else 0.0,
                   alpha_p90=float(np.percentile(a, 90)) if a.size else 0.0,
                   alpha_max=float(a.max()) if a.size else 0.0)
    return summary, table


def compare_settings(model, tokenizer, prompts, vectors: dict, direction: str, scorer: ContinuationScorer, *,
                     settings=None, norms=None, tau=None, max_new_tokens: int = 24,
                     progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """:func:`evaluate_setting` for every (method, setting); the unsteered generations are shared.

    Parameters
    ----------
    vectors : mapping of str to ConceptVectors
        Per method (``"RAPTOR"``, ``"GCS"``, ...) its probes; a method without probe weights (coef None)
        gets only the additive settings.
    settings : iterable of SteeringSetting, optional
        Default: every preset.

    Returns
    -------
    (pandas.DataFrame, dict)
        One summary row per (method, setting) and ``{(method, setting name): per-prompt table}``.
    """
    settings = list(PRESETS.values()) if settings is None else list(settings)
    prompts = check_prompts(prompts)
    unsteered = [generate_ids(model, tokenizer, p, max_new_tokens) for p in prompts]
    rows, tables = [], {}
    for method, probes in vectors.items():
        has_coef = all(probe.coef is not None for probe in probes.values())
        for setting in settings:
            if setting.kind == "gcav" and not has_coef:
                continue
            summary, table = evaluate_setting(model, tokenizer, prompts, probes, setting, direction, scorer, norms=norms,
                                              tau=tau, max_new_tokens=max_new_tokens, unsteered=unsteered,
                                              progress=progress)
            rows.append(dict(method=method, **summary))
            tables[(method, setting.name)] = table
    return pd.DataFrame(rows), tables
