"""Steering measured on the generated text: known answers for the concept-shift scorer (no steering ->
zero shift; a positive example scores positive), perplexity against the model's own loss, distinct-n,
and a full comparison on a tiny model."""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import steering_eval as SE  # noqa: E402
from empirical.llm.steering import generate_ids  # noqa: E402
from empirical.llm.extract import hidden_states  # noqa: E402
from empirical.probes import fit_layers  # noqa: E402
from empirical.testing import tiny_model, tiny_tokenizer  # noqa: E402

pytestmark = pytest.mark.llm

POS = ["a great movie", "i loved this film", "great plot and a funny actor", "really very good film", "loved it"]
NEG = ["bad film", "awful boring movie", "i hated this plot", "the actor was bad", "boring and awful"]
TEMPLATE = "review : {text} . good or bad ?"


@pytest.fixture(scope="module")
def setup():
    model, tok = tiny_model("llama", seed=7, n_layers=4), tiny_tokenizer()
    texts = [t + " " + "." * (k % 3) for k in range(8) for t in POS] + [t + " " + "!" * (k % 3) for k in range(8) for t in NEG]
    y = np.r_[np.ones(40, int), np.zeros(40, int)]
    H = hidden_states(model, tok, [TEMPLATE.replace("{text}", t) for t in texts], layers="all", progress=False)
    vectors = fit_layers(H, y, layers=range(1, 5), Cs=np.logspace(-2, 2, 12), progress=False).concept_vectors()
    best = max(vectors.layers, key=lambda layer: (vectors[layer].test_accuracy, layer))
    scorer = SE.ContinuationScorer(model, tok, TEMPLATE, vectors[best], best)
    return model, tok, vectors, scorer


def test_distinct_ngram_ratio():
    assert SE.distinct_ngram_ratio([5, 5, 5, 5]) == pytest.approx(1 / 3)
    assert SE.distinct_ngram_ratio([1, 2, 3]) == 1.0 and SE.distinct_ngram_ratio([]) == 1.0


def test_a_known_positive_text_scores_positive(setup):
    _, _, _, scorer = setup
    p_pos, p_neg = scorer(POS), scorer(NEG)
    assert np.mean(p_pos) > 0.5 > np.mean(p_neg)
    assert np.mean(p_pos > p_neg) >= 0.8


def test_perplexity_equals_the_models_own_loss(setup):
    model, tok, _, _ = setup
    prompt_ids, new_ids = generate_ids(model, tok, "review : a great movie .", 6)
    ids = torch.tensor([prompt_ids + new_ids])
    labels = ids.clone()
    labels[0, :len(prompt_ids)] = -100
    with torch.inference_mode():
        loss = float(model(input_ids=ids, labels=labels).loss)
    assert SE.continuation_perplexity(model, prompt_ids, new_ids) == pytest.approx(np.exp(loss), rel=1e-5)
    with pytest.raises(ValueError, match="empty"):
        SE.continuation_perplexity(model, prompt_ids, [])


def test_no_steering_gives_zero_shift(setup):
    model, tok, vectors, scorer = setup
    null = SE.SteeringSetting("null", "additive", "best", strength=1.0)
    layers = [layer for layer in vectors.layers if layer != scorer.layer]
    summary, table = SE.evaluate_setting(model, tok, [f"review : {t} ." for t in POS[:3]], vectors, null, "towards",
                                         scorer, norms={layer: 0.0 for layer in layers}, max_new_tokens=5,
                                         progress=False)
    assert (table.steered == table.unsteered).all()
    assert summary["shift_mean"] == 0.0 and summary["shift_fraction"] == 0.0 and summary["perplexity_ratio"] == 1.0


def test_compare_settings_on_a_tiny_model(setup):
    model, tok, vectors, scorer = setup
    prompts = [f"review : {t} ." for t in NEG[:3]]
    norms = {layer: 5.0 for layer in vectors.layers}
    settings = [SE.PRESETS["paper"], SE.PRESETS["best-0.99"], SE.PRESETS["additive-0.3"]]
    table, per_prompt = SE.compare_settings(model, tok, prompts, {"RAPTOR": vectors}, "towards", scorer,
                                            settings=settings, norms=norms, max_new_tokens=6, progress=False)
    assert list(table.setting) == ["paper", "best-0.99", "additive-0.3"]
    assert {"shift_mean", "shift_fraction", "perplexity_steered", "perplexity_ratio", "distinct2_steered"} <= set(table)
    assert str(scorer.layer) not in table.loc[table.setting == "paper", "layers"].item().split(",")
    assert table.loc[table.setting == "best-0.99", "n_layers"].item() == 1
    assert table.loc[table.setting == "paper", "alpha_max"].item() > 0  # p* = 0.9999 needs edits on these prompts
    assert table.loc[table.setting == "additive-0.3", "alpha_max"].item() == 0  # fixed strength: no GCAV alpha
    assert np.isfinite(table[["shift_mean", "perplexity_steered"]].to_numpy()).all()
    assert set(per_prompt) == {("RAPTOR", "paper"), ("RAPTOR", "best-0.99"), ("RAPTOR", "additive-0.3")}


@pytest.mark.parametrize("kwargs, message", [(dict(kind="boost"), "kind must be"), (dict(positions="first"), "positions"),
                                             (dict(layers="middle"), "layers must be"),
                                             (dict(kind="additive", strength=0.0), "strength must lie in")])
def test_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SE.SteeringSetting("x", **kwargs)


def test_additive_needs_norms(setup):
    model, tok, vectors, scorer = setup
    with pytest.raises(ValueError, match="give norms"):
        SE.evaluate_setting(model, tok, ["review : bad ."], vectors, SE.PRESETS["additive-0.1"], "towards", scorer,
                            progress=False)


def test_paper_figures_steering_plot(tmp_path):
    import pandas as pd

    from paper_figures.steering_text import plot

    table = pd.DataFrame(dict(dataset=["stsa"] * 3, method=["RAPTOR", "GCS", "xRFM"], setting=["paper", "paper", "additive-0.1"],
                              direction=["towards", "away", "towards"], shift_mean=[0.1, -0.05, 0.0],
                              perplexity_ratio=[1.2, 0.9, 1.0]))
    path = plot(table, tmp_path)
    assert path.is_file() and path.stat().st_size > 10_000
