"""GCAV steering: closed-form strength, exact landing on logit(p*) from the edited hidden state
(towards and away), skip rules, upstream ordering, clean hook removal, metrics and generation."""
import math
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy.optimize import brentq

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import _edits as E, _gcav as GC, _generation as G, _prompts as PR, _steering as S
from empirical.llm._extract import hidden_states
from empirical.llm._hooks import decoder_blocks
from empirical.probes._concept_vectors import LinearProbe
from empirical.testing import tiny_model, tiny_tokenizer

PROMPTS = ["the city of paris is in france .", "a great movie", "coin flips heads up ? yes",
           "i loved this film", "bad", "the dog and the cat was very funny"]
G_TOWARDS, G_AWAY = math.log(0.9999 / 0.0001), math.log(0.0001 / 0.9999)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _probes(seed, p=32, layers=(1, 2, 3), bias=0.0, acc=None):
    rng = np.random.default_rng(seed)
    return {layer: LinearProbe(rng.normal(size=p), bias, test_accuracy=acc) for layer in layers}


# ---------------------------------------------------------------- closed form
@given(g=st.floats(-50, 50), s=st.floats(1e-3, 1e3), p=st.floats(1e-6, 1 - 1e-6))
def test_gcav_alpha_closed_form(g, s, p):
    gs = math.log(p) - math.log1p(-p)
    for direction in ("towards", "away"):
        a = float(GC.gcav_alpha(g, s, direction, p))
        in_target = g >= gs if direction == "towards" else g <= gs
        if in_target:
            assert a == 0.0
        else:
            assert math.isclose(g + a * s, gs, rel_tol=1e-12, abs_tol=1e-9)
            # minimal |alpha| meeting the constraint: the constraint function's root (brentq reference)
            root = brentq(lambda x: (g + x * s) - gs, -1e6, 1e6, xtol=1e-14, rtol=1e-14)
            assert math.isclose(a, root, rel_tol=1e-9, abs_tol=1e-9)
            assert (a > 0) == (direction == "towards")
    assert float(GC.gcav_alpha(g, -s, "towards", p)) == 0.0 and float(GC.gcav_alpha(g, 0.0, "away", p)) == 0.0


@given(acc=st.dictionaries(st.integers(1, 6), st.floats(0, 1), min_size=1), tau=st.floats(0, 1))
def test_one_reliability_rule_for_gcav_and_the_cli(acc, tau):
    """The reliability threshold is one rule (``gcav.reliable_layers``): GCAV's layer choice (probe test accuracy)
    and ``raptor steer --tau`` (validation accuracy) keep exactly the layers it keeps for the same accuracies."""
    from empirical.cli import _tau_filter
    from empirical.probes._concept_vectors import ConceptVectors

    kept, below = GC.reliable_layers(acc, tau)
    assert sorted(kept + below) == sorted(acc) and all(acc[k] >= tau for k in kept) and all(acc[b] < tau for b in below)
    probes = {layer: LinearProbe(np.eye(4)[0] * 2.0, 0.0, direction=np.eye(4)[0], test_accuracy=a)
              for layer, a in acc.items()}  # w.v > 0: only the threshold skips a layer
    assert GC.steerable_layers(probes, tau, L=6)[0] == kept
    vectors = {"RAPTOR": ConceptVectors(probes, method="RAPTOR").with_statistics(validation_accuracy=acc)}
    if kept:
        assert sorted(_tau_filter(vectors, tau)["RAPTOR"].layers) == kept
    else:
        with pytest.raises(ValueError, match="no layer can be steered for RAPTOR"):
            _tau_filter(vectors, tau)


def test_gcav_rule_is_one_validated_object():
    """GCAV's direction, target, threshold and positions travel as one frozen object; a direction is its shorthand,
    and the default target follows the direction (it is resolved, not stored), also through ``replace``."""
    import dataclasses

    rule = GC.GcavRule()
    assert GC.GcavRule.of("towards") == rule and GC.GcavRule.of(rule) is rule
    assert rule.target == GC.P_TOWARDS and dataclasses.replace(rule, direction="away").target == GC.P_AWAY
    assert GC.GcavRule("away", 0.2).target == 0.2 and GC.GcavRule(tau=np.float32(0.5)).tau == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.tau = 0.5
    for bad, message in ((dict(direction="up"), "direction must be"), (dict(p_target=0.0), "p_target must lie"),
                         (dict(tau=-0.1), "tau must lie"), (dict(positions=None), "positions must be")):
        with pytest.raises(ValueError, match=message):
            GC.GcavRule(**bad)


def test_gcav_alpha_errors():
    with pytest.raises(ValueError, match="direction"):
        GC.gcav_alpha(0.0, 1.0, "up")
    with pytest.raises(ValueError, match="p_target"):
        GC.gcav_alpha(0.0, 1.0, "towards", 1.0)
    with pytest.raises(ValueError, match="finite"):
        GC.gcav_alpha(np.nan, 1.0, "towards")
    with pytest.raises(ValueError, match="zero"):
        LinearProbe(np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="finite"):
        LinearProbe(np.array([1.0, np.inf]), 0.0)


# ---------------------------------------------------------------- exact landing
def _edited_states(model, tok, prompt, probes, direction, p_target=None):
    """Run one prompt under GCAV steering and capture each steered block's stored output."""
    blocks = decoder_blocks(model)
    caps = {}
    with E.gcav_steering(model, probes, GC.GcavRule(direction, p_target)) as state:
        hs = [blocks[layer - 1].register_forward_hook(
                  lambda m, a, o, layer=layer: caps.__setitem__(layer, o[0, -1].double().numpy()))
              for layer in probes]  # registered after the steering hooks: they see the edited output
        try:
            with torch.inference_mode():
                model(**tok([prompt], return_tensors="pt"))
        finally:
            for h in hs:
                h.remove()
    return caps, state.records


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("direction", ["towards", "away"])
def test_edited_state_lands_on_target_logit(arch, direction, tok):
    model = tiny_model(arch, seed=11, dtype=torch.float64)
    probes = _probes(0)
    g_star = G_TOWARDS if direction == "towards" else G_AWAY
    for prompt in PROMPTS[:4]:
        caps, records = _edited_states(model, tok, prompt, probes, direction)
        assert [r["layer"] for r in records] == [1, 2, 3]  # increasing order within one pass
        for r in records:
            g = probes[r["layer"]].logit(caps[r["layer"]])
            assert r["alpha"] != 0.0
            assert abs(g - g_star) < 1e-6  # the recomputed probe logit equals logit(p*)
            assert abs(g - r["logit_after"]) < 1e-9


def test_float32_model_within_rounding_bound(tok):
    model = tiny_model("qwen2", seed=12)
    probes = _probes(1)
    for direction, g_star in (("towards", G_TOWARDS), ("away", G_AWAY)):
        df = S.steer_prompts(model, tok, PROMPTS, probes, direction, batch_size=4, progress=False)
        err = (df["logit_after"] - g_star).abs()
        assert (err <= df["round_tol"]).all() and df["round_tol"].max() < 1e-4
        assert df["success"].all()


def test_already_in_target_skips_and_filters(tok):
    model = tiny_model("llama", seed=13, dtype=torch.float64)
    base = hidden_states(model, tok, PROMPTS, progress=False).astype(np.float64)
    rng = np.random.default_rng(2)
    w = rng.normal(size=32)
    g1 = base[0] @ w
    b = G_TOWARDS - np.median(g1)  # half of the prompts already past the target at layer 1
    probes = {1: LinearProbe(w, b, test_accuracy=0.9),
              2: LinearProbe(rng.normal(size=32), 0.0, test_accuracy=0.6),  # below tau
              3: LinearProbe(w, 0.0, direction=-w / np.linalg.norm(w), test_accuracy=0.95)}  # w.v < 0
    df = S.steer_prompts(model, tok, PROMPTS, probes, GC.GcavRule("towards", tau=0.7), batch_size=4, progress=False)
    assert df.attrs["active_layers"] == [1]
    assert df.attrs["skipped_layers"] == {2: "test accuracy below tau", 3: "w.v <= 0"}
    already = (g1 + b) >= G_TOWARDS
    assert 0 < already.sum() < len(PROMPTS)
    got = df.sort_values("prompt")
    np.testing.assert_array_equal(got["intervened"].to_numpy(), ~already)
    assert (got.loc[got["prompt"].isin(np.flatnonzero(already)), "alpha"] == 0).all()
    np.testing.assert_allclose(got["logit_before"], g1 + b, atol=1e-9)
    m = S.steering_metrics(df)
    assert m["success_rate"] == 1.0 and m["intervention_rate"] == pytest.approx((~already).mean())
    with pytest.raises(ValueError, match="test_accuracy"):
        S.steer_prompts(model, tok, PROMPTS, {1: LinearProbe(w, 0.0)}, GC.GcavRule(tau=0.5), progress=False)
    with pytest.raises(ValueError, match="only a direction"):
        S.steer_prompts(model, tok, PROMPTS, {1: LinearProbe(None, None, w)}, progress=False)


def test_downstream_layers_see_steered_upstream_state(tok):
    model = tiny_model("gemma", seed=14, dtype=torch.float64)
    probes = _probes(3, layers=(1, 3))
    df = S.steer_prompts(model, tok, PROMPTS, probes, "away", batch_size=3, progress=False)
    with E.gcav_steering(model, {1: probes[1]}, "away"):
        H3 = np.stack([hidden_states(model, tok, [p], layers=[3], progress=False)[0, 0] for p in PROMPTS])
    plain3 = hidden_states(model, tok, PROMPTS, layers=[3], progress=False)[0]
    got = df[df["layer"] == 3].sort_values("prompt")["logit_before"].to_numpy()
    np.testing.assert_allclose(got, probes[3].logit(H3), atol=1e-8)
    assert np.abs(got - probes[3].logit(plain3)).max() > 1e-3  # differs from the unsteered state


def test_hooks_removed_cleanly(tok):
    model = tiny_model("llama", seed=15)
    enc = tok(PROMPTS[:1], return_tensors="pt")
    with torch.inference_mode():
        ref = model(**enc).logits.clone()
    probes = _probes(4)
    with pytest.raises(RuntimeError):
        with E.gcav_steering(model, probes, "towards"):
            with torch.inference_mode():
                steered = model(**enc).logits.clone()
            raise RuntimeError("user error inside the block")
    assert not (steered == ref).all()
    with E.additive_steering(model, {2: np.ones(32)}, alpha=3.0):
        pass
    assert all(len(b._forward_hooks) == 0 for b in decoder_blocks(model))
    with torch.inference_mode():
        assert torch.equal(model(**enc).logits, ref)


@pytest.mark.parametrize("positions", ["last", "all"])
def test_fixed_additive_steering(positions, tok):
    model = tiny_model("gpt2", seed=16, dtype=torch.float64)
    v = np.random.default_rng(5).normal(size=32)
    blocks = decoder_blocks(model)
    enc = tok(PROMPTS[:1], return_tensors="pt")
    caps = {}

    def run():
        h = blocks[1].register_forward_hook(
            lambda m, a, o: caps.__setitem__("x", (o[0] if isinstance(o, tuple) else o)[0].numpy().copy()))
        with torch.inference_mode():
            model(**enc)
        h.remove()
        return caps["x"]

    plain = run()
    with E.additive_steering(model, {2: v}, alpha=2.5, positions=positions):
        edited = run()
    expect = plain.copy()
    if positions == "last":
        expect[-1] += 2.5 * v
    else:
        expect += 2.5 * v
    np.testing.assert_allclose(edited, expect, atol=1e-12)
    with pytest.raises(ValueError, match="layer"):
        with E.additive_steering(model, {9: v}):
            pass


def test_metrics_and_hard_layers():
    import pandas as pd

    recs = [dict(prompt=i, layer=layer, logit_before=0.0, alpha=a, logit_after=G_TOWARDS, round_tol=1e-12)
            for i, (layer, a) in enumerate([(1, 0.0), (1, 2.0), (2, 5.0), (2, 7.0), (3, 1.0), (3, 100.0), (4, 3.0)])]
    df = S._records_frame(recs, "towards", 0.9999)
    df.loc[6, "logit_after"] = G_TOWARDS - 1.0  # one failure
    df = S._records_frame(df[list(recs[0])].to_dict("records"), "towards", 0.9999)
    m = S.steering_metrics(df)
    a = np.array([2.0, 5.0, 7.0, 1.0, 100.0, 3.0])
    assert m["n_pairs"] == 7 and m["success_rate"] == pytest.approx(6 / 7)
    assert m["intervention_rate"] == pytest.approx(6 / 7)
    assert m["alpha_median"] == pytest.approx(np.median(a)) and m["alpha_max"] == 100.0
    assert m["alpha_p90"] == pytest.approx(np.percentile(a, 90))
    assert m["alpha_median_all"] == pytest.approx(np.median(np.r_[0.0, a]))
    hl = S.hard_layers(df)
    assert hl["by_median"] == [(3, 50.5), (2, 6.0), (4, 3.0)]
    assert hl["by_max"] == [(3, 100.0), (2, 7.0), (4, 3.0)]
    empty = S.steering_metrics(pd.DataFrame())
    assert empty["n_pairs"] == 0 and set(empty) == set(m)


def test_generation_side_by_side(tok):
    model = tiny_model("llama", seed=17)
    probes = _probes(6)
    rows = G.compare_generations(model, tok, PROMPTS[:2], probes, "towards", max_new_tokens=4, progress=False)
    assert [r["prompt"] for r in rows] == PROMPTS[:2]
    for r in rows:
        assert r["original"] == G.generate(model, tok, r["prompt"], 4)  # hooks gone afterwards
        assert isinstance(r["steered"], str) and r["steered"]
    assert any(r["steered"] != r["original"] for r in rows)


def test_probe_from_estimator():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(7)
    X = rng.normal(size=(80, 5))
    y = (X[:, 0] + 0.3 * rng.normal(size=80) > 0).astype(int)
    est = LogisticRegression().fit(X, y)
    pr = LinearProbe.from_estimator(est, test_accuracy=0.9)
    np.testing.assert_allclose(pr.logit(X), est.decision_function(X), atol=1e-10)
    assert pr.slope == pytest.approx(np.linalg.norm(est.coef_))
    est.concept_vector_ = -est.coef_.ravel() / np.linalg.norm(est.coef_)
    assert LinearProbe.from_estimator(est).slope < 0


def test_select_prompts_balanced_and_single_class():
    labels = np.array([0, 1, 0, 0, 1, 0, 0])
    candidates = np.array([6, 5, 4, 3, 2, 1, 0])
    picked = PR.select_prompts(labels, candidates, 6)
    assert picked.tolist() == [6, 4, 5, 1, 3, 2]  # alternating 0/1 from the candidates' order, then the rest
    assert labels[picked[:4]].tolist() == [0, 1, 0, 1]
    assert PR.select_prompts(labels, candidates, 10, prompt_class=1).tolist() == [4, 1]
    assert len(PR.select_prompts(labels, candidates, 100)) == 7
    with pytest.raises(ValueError, match="prompt_class"):
        PR.select_prompts(labels, candidates, 3, prompt_class="2")
    with pytest.raises(ValueError, match="n must"):
        PR.select_prompts(labels, candidates, 0)
