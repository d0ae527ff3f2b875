"""Steering measured by what the model says (empirical.llm._steering_eval): a known answer (the concept word's
unembedding direction raises its log-odds), a zero edit gives exactly 0, random controls reproducible by seed,
batching does not change the read-out, selection reads only the selection half, and bad input fails early."""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pandas as pd
import pytest

import empirical.llm  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import (  # noqa: E402
    _answer_readout as AR,
    _prompts as PR,
    _steering_cost as SC,
    _steering_eval as SE,
    _steering_null as SN,
    _steering_report as SR,
    _steering_selection as SEL,
    _steering_settings as SS,
)
from empirical.llm._steering_protocol import MIN_RANDOM, SteeringProtocol, SteeringRun  # noqa: E402
from empirical.llm._steering_target import SteeringTarget  # noqa: E402
from empirical.probes import ConceptVectors, LinearProbe  # noqa: E402
from empirical.testing import tiny_model, tiny_tokenizer  # noqa: E402

pytestmark = pytest.mark.llm

PROMPTS = ["review : a great movie .", "review : bad film .", "review : i loved this film .",
           "review : awful boring movie .", "review : loved it", "review : the actor was bad",
           "review : really very good film", "review : i hated this plot"]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]
WORDS = ("good", "bad")
STEM = " the answer is"
L = 3


@pytest.fixture(scope="module")
def setup():
    model, tok = tiny_model("llama", seed=7, n_layers=L), tiny_tokenizer()
    rng = np.random.default_rng(0)
    probes = ConceptVectors({layer: LinearProbe(rng.standard_normal(32), 0.1, test_accuracy=0.9)
                             for layer in range(1, L + 1)})
    accuracy = {"RAPTOR": {1: 0.7, 2: 0.9, 3: 0.8}}
    return model, tok, probes, accuracy


def _protocol(**fields):
    """The tests' protocol: the short stem, 4 prompts a batch, the fewest null directions of a rank test."""
    return SteeringProtocol(**{"stem": STEM, "batch_size": 4, "n_random": MIN_RANDOM, **fields})


def _measured(vectors, accuracy, norms):
    """``vectors`` with each probe's validation accuracy and hidden-state norm (what the measurement reads)."""
    return {m: cv.with_statistics(validation_accuracy=accuracy, state_norms=norms) for m, cv in vectors.items()}


def _run(setup, settings, vectors=None, norms=None, n=8, measure=None, **kw):
    """A measurement of the first ``n`` prompts; keywords that are protocol fields build its SteeringProtocol, the
    target's (``generation_prompts``, ``sentiment``) its SteeringTarget, the others its SteeringRun."""
    model, tok, probes, accuracy = setup
    vectors = _measured(vectors or {"RAPTOR": probes}, accuracy["RAPTOR"],
                        norms or {layer: 1.0 for layer in range(1, L + 1)})
    fields = {f.name for f in dataclasses.fields(SteeringProtocol)}
    protocol = _protocol(**{k: v for k, v in kw.items() if k in fields})
    of_target = ("generation_prompts", "sentiment")
    target = SteeringTarget("dataset", PROMPTS[:n], LABELS[:n], WORDS, **{k: kw[k] for k in of_target if k in kw})
    run = SteeringRun(**{k: v for k, v in kw.items() if k not in fields and k not in of_target})
    return (measure or SE.evaluate_steering)(model, tok, target, vectors, settings, protocol=protocol, run=run)


def test_answer_words_cover_case_and_space_variants():
    tok = tiny_tokenizer()
    concept, opposite = AR.answer_token_ids(tok, ("Good", "BAD"))
    assert tok.convert_ids_to_tokens(concept) == ["good"] and tok.convert_ids_to_tokens(opposite) == ["bad"]
    assert AR.check_answer_words("stsa") == ("Positive", "Negative")
    assert AR.check_answer_words("mine", "Yes, No") == ("Yes", "No")


def test_steering_along_the_concept_words_unembedding_raises_its_log_odds(setup):
    model, tok, _, _ = setup
    head = model.get_output_embeddings().weight.detach().double().numpy()
    good, bad = (AR.answer_token_ids(tok, WORDS)[i][0] for i in (0, 1))
    direction = head[good] - head[bad]
    vectors = {"unembedding": ConceptVectors({L: LinearProbe(direction, 0.0, test_accuracy=0.9)})}
    setting = SS.SteeringSetting("additive", "all", 2.0, "answer")
    table, per_prompt = _run(setup, [setting], vectors=vectors, norms={L: 5.0})
    for direction in ("towards", "away"):
        rows = table[table.direction == direction]
        assert (rows.answer_logodds_shift > 0.5).all() and (rows.moved_fraction == 1.0).all()
        assert (rows.concept_specific_low > 0).all()  # beats the random directions of the same strength
        assert (rows.opposite_sign_shift < 0).all()  # the other sign moves the other way
    towards = per_prompt[("unembedding", setting.name, "towards")]["ld"]
    assert np.all(towards > per_prompt["unsteered"]["ld"])


def test_a_zero_edit_gives_exactly_zero(setup):
    setting = SS.SteeringSetting("additive", "best", 1.0, "all")
    table, _ = _run(setup, [setting], norms={layer: 0.0 for layer in range(1, L + 1)},
                    generation_prompts=PROMPTS[:4], max_new_tokens=4, sentiment=True)
    for col in ("answer_logodds_shift", "answer_prob_shift", "random_control_shift", "concept_specific_shift",
                "kl_answer", "moved_fraction", "vader_shift"):
        assert (table[col] == 0.0).all(), col
    assert (table.perplexity_ratio == 1.0).all() and (table.answer_mass_steered == table.answer_mass_unsteered).all()


def test_random_controls_are_reproducible_by_seed(setup):
    settings = [SS.SteeringSetting("additive", "top3", 0.5, "answer"),
                SS.SteeringSetting("gcav", "all", 0.99, "answer")]
    a, _ = _run(setup, settings, seed=3, directions=("towards",))
    b, _ = _run(setup, settings, seed=3, directions=("towards",))
    c, _ = _run(setup, settings, seed=4, directions=("towards",))
    assert a.random_control_shift.tolist() == b.random_control_shift.tolist()
    assert not np.allclose(a.random_control_shift, c.random_control_shift)
    first = SN.random_units([1, 2], 8, seed=3, n_random=5)
    assert all(np.array_equal(first[r][2], SN.random_units([1, 2], 8, seed=3, n_random=7)[r][2]) for r in range(5))


def test_batching_does_not_change_the_read_out(setup):
    settings = [SS.SteeringSetting("gcav", "all", 0.99, "all"), SS.SteeringSetting("additive", "best", 0.5, "prompt")]
    _, one = _run(setup, settings, n=4, batch_size=1, directions=("towards",))
    _, four = _run(setup, settings, n=4, batch_size=3, directions=("towards",))
    np.testing.assert_allclose(one["unsteered"]["ld"], four["unsteered"]["ld"], atol=1e-5)
    for key in [k for k in one if k not in ("unsteered", "null")]:
        np.testing.assert_allclose(one[key]["ld"], four[key]["ld"], atol=1e-5)
        np.testing.assert_allclose(one[key]["rand"], four[key]["rand"], atol=1e-5)
    # the read-out equals a plain forward pass of prompt + stem
    model, tok, _, _ = setup
    ids = tok(PROMPTS[0] + STEM, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        lp = torch.log_softmax(model(input_ids=ids).logits[:, -1].double(), -1)
    ld, _ = AR.answer_logodds(lp, *AR.answer_token_ids(tok, WORDS))
    assert one["unsteered"]["ld"][0] == pytest.approx(ld[0], abs=1e-5)


def test_the_table_has_the_named_columns(setup):
    table, _ = _run(setup, SS.sweep_settings(k_grid=(0.2,), p_grid=(0.99,), gcav_layers=("best",),
                                             additive_layers=("best",)), generation_prompts=PROMPTS[:2],
                    max_new_tokens=3)
    assert list(table.columns) == SR.METRIC_COLUMNS
    assert set(table.half) == {"selection", "report"} and set(table.positions) == {"answer"}
    assert (table.n_prompts == 4).all() and (table.n_generated == 1).all()
    assert table.perplexity_ratio.notna().all() and table.vader_shift.isna().all()  # no VADER unless sentiment


def _table(selection_shift, report_shift, mass=(0.5, 0.5), ppl=(1.0, 1.0)):
    rows = []
    for i, (sel, rep) in enumerate(zip(selection_shift, report_shift)):
        for half, shift in (("selection", sel), ("report", rep)):
            rows.append(dict(dataset="d", method="RAPTOR", layer_choice="best", kind="additive", positions="answer",
                             direction="towards", setting=f"k{i}", half=half, concept_specific_shift=shift,
                             concept_specific_low=shift - 0.01, answer_mass_unsteered=0.5,
                             answer_mass_steered=mass[i], perplexity_ratio=ppl[i], measurable=True))
    return pd.DataFrame(rows)


def test_selection_reads_only_the_selection_half():
    chosen = SEL.select_operating_points(_table([0.1, 0.3], [0.2, -0.5]))
    assert chosen.setting.tolist() == ["k1"] and chosen.concept_specific_shift.tolist() == [-0.5]
    assert chosen.selection_shift.tolist() == [0.3]
    assert SEL.select_operating_points(_table([0.1, 0.3], [9.0, 0.0])).setting.tolist() == ["k1"]  # report ignored
    assert SEL.select_operating_points(_table([0.4, 0.3], [0.2, -0.5])).setting.tolist() == ["k0"]
    # the gates: a setting that breaks the answer mass or the fluency is not chosen
    assert SEL.select_operating_points(_table([0.1, 0.3], [0.2, 0.5], mass=(0.5, 0.2))).setting.tolist() == ["k0"]
    assert SEL.select_operating_points(_table([0.1, 0.3], [0.2, 0.5], ppl=(1.0, 2.0))).setting.tolist() == ["k0"]


def test_default_setting_needs_a_shift_above_the_random_control():
    assert SEL.default_setting(_table([0.1, 0.3], [0.2, 0.5]))["setting"] == "k1"
    none = SEL.default_setting(_table([0.1, 0.3], [-0.2, 0.0]))
    assert none["setting"] == SS.PAPER_SETTING and not none["beats_random"] and "random control" in none["reason"]


def test_perplexity_is_the_models_own_loss(setup):
    model, tok, _, _ = setup
    table, _ = _run(setup, [SS.SteeringSetting("additive", "best", 0.1, "answer")], generation_prompts=PROMPTS[:1],
                    max_new_tokens=5, directions=("towards",))
    ids = tok(PROMPTS[0], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        full = model.generate(input_ids=ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
        labels = full.clone()
        labels[0, :ids.shape[1]] = -100
        loss = float(model(input_ids=full, labels=labels).loss)
    row = table[table.half == "selection"].iloc[0]
    assert row.perplexity_unsteered == pytest.approx(np.exp(loss), rel=1e-4)


def test_vader_masks_the_label_words():
    assert AR.vader_scores(["Positive"])[0] > 0.3
    assert AR.vader_scores(["Positive", "positive ."], mask_words=["Positive"]).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="boost"), "kind must be"), (dict(kind="additive", positions="first"), "positions"),
    (dict(kind="additive", layers="middle"), "layers must be"),
    (dict(kind="additive", strength=50.0), r"strength \(multiple k"),
    (dict(kind="additive", strength=0.0), r"strength \(multiple k"),
    (dict(kind="gcav", strength=1.0), r"strength \(GCAV target"),
    (dict(kind="gcav", strength=float("nan")), r"strength \(GCAV target")])
def test_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SS.SteeringSetting(**kwargs)


def test_bad_answer_words():
    with pytest.raises(ValueError, match=r"--answer-words.*'mydata' has no answer pair"):
        AR.check_answer_words("mydata")
    with pytest.raises(ValueError, match=r"answer word 'Positive' \(--answer-words\) is not one token"):
        AR.answer_token_ids(tiny_tokenizer(), ("Positive", "Negative"))
    with pytest.raises(ValueError, match="must be two"):
        AR.check_answer_words(None, "Yes")


def test_bad_input_fails_before_model_work(setup, monkeypatch):
    setting = [SS.SteeringSetting("additive", "best", 0.1, "answer")]
    with pytest.raises(ValueError, match=r"n_random \(--n-random\) must be an integer >= 40"):
        _run(setup, setting, n_random=39)
    with pytest.raises(ValueError, match=r"n_random \(--n-random\) must be even"):
        _run(setup, setting, n_random=41)
    # the staged run's control is not a test: its own name and minimum (>= 2, even, at most n_random)
    staged = dict(measure=SE.evaluate_staged)
    with pytest.raises(ValueError, match=r"n_random_selection \(the selection half's control, not a test\) must be "
                                         r"an integer >= 2"):
        _run(setup, setting, n_random_selection=0, **staged)
    for bad in (5, 42):
        with pytest.raises(ValueError, match=r"must be even \(antithetic pairs\) and at most n_random"):
            _run(setup, setting, n_random_selection=bad, **staged)
    with pytest.raises(ValueError, match=r"stem \(--stem\)"):
        _run(setup, setting, stem="  ")
    gpt2, tok = tiny_model("gpt2", seed=1), tiny_tokenizer()
    calls = []
    gpt2.register_forward_hook(lambda *a: calls.append(1))
    probes = {"R": ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.9, validation_accuracy=0.9,
                                                  state_norm=1.0)})}
    long = ["review : " + "good " * 300]
    with pytest.raises(ValueError, match=r"prompt 0 has 303 tokens plus 3 of the stem.*--stem"):
        SE.evaluate_steering(gpt2, tok, SteeringTarget("dataset", long, [1], WORDS), probes, setting,
                             protocol=SteeringProtocol(stem=STEM))
    with pytest.raises(ValueError, match=r"max_new_tokens \(--max-new-tokens\) must be at most the model's 256"):
        SE.evaluate_steering(gpt2, tok, SteeringTarget("dataset", PROMPTS, LABELS, WORDS,
                                                       generation_prompts=PROMPTS[:1]),
                             probes, setting, protocol=SteeringProtocol(stem=STEM, max_new_tokens=500))
    assert not calls
    monkeypatch.setattr(AR, "MIN_MASS_STEM", 0.9)  # no stem gives the words 90 % of the mass on a random model
    with pytest.raises(ValueError,
                       match=r"the stem \(--stem\) ' the answer is' gives the answer words .* no probability"):
        _run(setup, setting)


def test_paper_figures_summary_figure_and_claim(tmp_path):
    from paper_figures.claims import steering_text_claim
    from paper_figures.steering_text import default_table, plot, summary

    rows = []
    for method, shift in (("RAPTOR", 0.4), ("xRFM", 0.1)):
        for k in (0.1, 0.4):
            for half in ("selection", "report"):
                rows.append(dict(dataset="stsa", method=method, setting=f"additive-best-k{k}-answer", kind="additive",
                                 layer_choice="best", strength=k, positions="answer", direction="towards", half=half,
                                 n_prompts=50, concept_specific_shift=shift * k, concept_specific_low=shift * k - 0.01,
                                 concept_specific_high=shift * k + 0.01, random_control_shift=0.0,
                                 answer_mass_unsteered=0.2, answer_mass_steered=0.2, perplexity_ratio=1 + k,
                                 auc_unsteered=0.8, measurable=True, answer_logodds_shift=shift * k, n_random=100,
                                 null_rank=1, null_p=1 / 101, null_p_opposite=1.0, vader_shift=-0.02, vader_se=0.1,
                                 vader_random_shift=0.28))
    rows.append(dict(rows[0], dataset="coinflip", auc_unsteered=0.5, measurable=False))
    table = pd.DataFrame(rows)
    s = summary(table)
    assert set(s.loc[s.method == "RAPTOR", "setting"]) == {"additive-best-k0.4-answer"}
    assert s.loc[s.dataset == "coinflip", "setting"].tolist() == ["not measurable"]
    (claim,) = steering_text_claim(s)
    assert claim["test"].verdict == "holds" and "not measurable" in claim["ours"] and "coinflip" in claim["ours"]
    assert claim["test"].rule == "every setting (permutation rank, 1 settings)"
    assert "shift +0.16, rank 1 of 101, p = 0.0099" in claim["ours"]
    assert "text: VADER -0.02 ± 0.10 vs random +0.28" in claim["ours"]
    # a measurable direction where no RAPTOR setting passes the gates (only xRFM steers away) is named and counted
    away = table[(table.method == "xRFM") & (table.dataset == "stsa")].assign(direction="away")
    (both,) = steering_text_claim(summary(pd.concat([table, away], ignore_index=True)))
    assert "stsa away: no RAPTOR setting passes the gates" in both["ours"]
    assert both["test"].rule == "every setting (permutation rank, 2 settings)" and both["test"].verdict != "holds"
    # the minimal detectable shift: the null's 97.5 % quantile plus z_0.8 x the concept shift's own se (nats)
    (powered,) = steering_text_claim(s.assign(null_mean=0.1, null_sd=0.5, answer_logodds_shift_se=0.02))
    assert powered["test"].mde == pytest.approx(0.1 + 1.959964 * 0.5 + 0.841621 * 0.02, abs=1e-5)
    assert powered["mde_unit"] == "nats"
    (ranked_low,) = steering_text_claim(s.assign(null_rank=60, null_p=0.6, null_p_opposite=0.41))
    assert ranked_low["test"].verdict == "inconclusive"  # the rank decides, not the per-prompt interval
    (old,) = steering_text_claim(s.drop(columns=["null_rank", "null_p", "null_p_opposite"]))
    assert old["test"] is None and "has not run" in old["ours"]  # a table from before the test: no verdict
    path = plot(table, tmp_path)
    assert path.is_file() and path.stat().st_size > 10_000
    chosen = default_table(table)  # chosen on the selection half, its report-half rows per measurable dataset
    assert chosen.setting.tolist() == ["additive-best-k0.4-answer"] and chosen.dataset.tolist() == ["stsa"]
    assert chosen.beats_random.all() and chosen.concept_specific_low.iloc[0] > 0
    old = table.drop(columns=["null_rank", "null_p", "null_p_opposite"])  # a table from before the rank test
    assert default_table(old).setting.tolist() == ["additive-best-k0.4-answer"]
    worse = default_table(old.assign(concept_specific_low=-1.0))  # no interval above 0: the paper's setting
    assert worse.setting.tolist() == [SS.PAPER_SETTING] and not worse.beats_random.any()
    unranked = default_table(table.assign(null_p=0.5, null_p_opposite=0.5))  # the rank decides, not the interval
    assert unranked.setting.tolist() == [SS.PAPER_SETTING] and not unranked.beats_random.any()
    (absent,) = steering_text_claim(None)  # a run without the measurement says so; it claims nothing
    assert absent["test"] is None and absent["ours"].startswith("not tested here")


def test_staged_screens_gates_and_reads_the_report_half_last(setup, monkeypatch):
    """Stage 2 sees only candidates that kept the answer mass, and no report-half prompt is read (or generated)
    before the operating points are chosen; a broken edit (huge strength) never reaches stage 2."""
    monkeypatch.setattr(empirical.llm, "MIN_AUC", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 0.0)  # a random model's read-out tracks nothing; measure it anyway
    monkeypatch.setattr(empirical.llm, "MAX_AUC_P", 1.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MAX_AUC_P", 1.0)
    monkeypatch.setattr(empirical.llm, "MIN_MASS", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_MASS", 0.0)
    # a tiny random model's answer barely moves: a gate at the unsteered mass splits the two signs of each edit
    monkeypatch.setattr(SE, "MASS_GATE", 1.0)
    model, tok, _, _ = setup
    head = model.get_output_embeddings().weight.detach().double().numpy()
    words = set(AR.answer_token_ids(tok, WORDS)[0] + AR.answer_token_ids(tok, WORDS)[1])
    other = next(i for i in range(5, head.shape[0]) if i not in words)  # pushing another token breaks the answer
    vectors = {"RAPTOR": ConceptVectors({L: LinearProbe(head[other], 0.0, test_accuracy=0.9)})}
    settings = [SS.SteeringSetting("additive", "all", k, "answer") for k in (0.05, 0.5, 9.0)]
    calls = []
    table, _ = _run(setup, settings, vectors=vectors, norms={L: 20.0},
                    generation_prompts=PROMPTS[:4], max_new_tokens=3, n_candidates=2,
                    on_stage=lambda stage, entries, idx: calls.append((stage, [(e[1].name, e[3]) for e in entries],
                                                                      list(idx))),
                    measure=SE.evaluate_staged)
    halves = PR.split_halves(len(PROMPTS))
    stages = [c[0] for c in calls]
    assert stages[:3] == ["validity", "screen", "candidate"] and "report" in stages
    first_report = stages.index("report")
    for stage, _, idx in calls[1:first_report]:  # before the choice: selection-half prompts only
        half = np.where(np.arange(4) % 2 == 0, "selection", "report") if stage == "generate" else halves
        assert set(half[idx]) == {"selection"}, stage
    screen = table[table.stage == "screen"]
    broken = list(zip(*[screen[screen.answer_mass_steered < screen.answer_mass_unsteered][c]
                        for c in ("setting", "direction")]))
    assert broken, "one sign of an edit lowers the answer mass"
    later = [entry for _, entries, _ in calls[2:] for entry in entries]
    assert not any(entry in broken for entry in later)
    # report rows exist exactly for the candidates that passed both gates, and selection picks among them
    assert set(table[table.half == "report"].stage) == {"report"}
    chosen = SEL.select_operating_points(table)
    assert len(chosen) and set(chosen.setting) <= set(table[table.half == "report"].setting)


def test_staged_stops_at_a_dataset_whose_read_out_is_not_valid(setup, monkeypatch):
    monkeypatch.setattr(empirical.llm, "MIN_AUC", 1.01)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 1.01)  # nothing is measurable
    calls = []
    table, _ = _run(setup, [SS.SteeringSetting("additive", "best", 0.5, "answer")], measure=SE.evaluate_staged,
                    on_stage=lambda stage, entries, idx: calls.append(stage))
    assert calls == ["validity"] and table.stage.tolist() == ["validity"] and not table.measurable.any()


def test_staged_fits_the_vectors_only_for_a_valid_read_out(setup, monkeypatch):
    """Vectors given as a function are fitted after the validity stage, and only when the read-out is valid."""
    model, tok, probes, accuracy = setup
    fits = []

    def fit():
        fits.append(1)
        return _measured({"RAPTOR": probes}, accuracy["RAPTOR"], {layer: 1.0 for layer in range(1, L + 1)})

    def run():
        return SE.evaluate_staged(model, tok, SteeringTarget("dataset", PROMPTS, LABELS, WORDS), fit,
                                  [SS.SteeringSetting("additive", "best", 0.5, "answer")],
                                  protocol=_protocol(n_candidates=1, stage2_positions=("all",)))

    monkeypatch.setattr(empirical.llm, "MIN_AUC", 1.01)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 1.01)  # nothing is measurable: nothing is fitted
    table, _ = run()
    assert fits == [] and table.stage.tolist() == ["validity"]
    monkeypatch.setattr(empirical.llm, "MIN_AUC", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 0.0)
    monkeypatch.setattr(empirical.llm, "MAX_AUC_P", 1.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MAX_AUC_P", 1.0)
    monkeypatch.setattr(empirical.llm, "MIN_MASS", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_MASS", 0.0)
    table, _ = run()
    assert fits == [1] and "candidate" in set(table.stage)  # measured past validity


def test_position_twins_only_for_the_twin_methods(setup, monkeypatch):
    monkeypatch.setattr(empirical.llm, "MIN_AUC", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 0.0)
    monkeypatch.setattr(empirical.llm, "MAX_AUC_P", 1.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MAX_AUC_P", 1.0)
    monkeypatch.setattr(empirical.llm, "MIN_MASS", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_MASS", 0.0)
    monkeypatch.setattr(SE, "MASS_GATE", 0.0)
    _, _, probes, _ = setup
    vectors = {"RAPTOR": probes, "DiffMeans": probes}
    setting = [SS.SteeringSetting("additive", "best", 0.5, "answer")]
    for twin_methods, expected in ((None, {"RAPTOR", "DiffMeans"}), (("RAPTOR",), {"RAPTOR"})):
        table, _ = _run(setup, setting, vectors=vectors, measure=SE.evaluate_staged, n_candidates=1,
                        stage2_positions=("all",), twin_methods=twin_methods)
        assert set(table[table.positions == "all"].method) == expected
        assert set(table[table.positions == "answer"].method) == {"RAPTOR", "DiffMeans"}


def test_screen_candidates_keeps_the_best_that_keep_the_mass():
    rows = pd.DataFrame(dict(dataset="d", method="R", direction="towards", half="selection",
                             setting=["a", "b", "c", "d"], concept_specific_shift=[0.1, 0.9, 0.5, 0.3],
                             answer_mass_unsteered=0.4, answer_mass_steered=[0.4, 0.1, 0.3, 0.2]))
    assert SE.screen_candidates(rows, 2).setting.tolist() == ["c", "d"]  # b breaks the answer (0.1 < 0.5 x 0.4)


def test_generation_has_a_random_control_and_steers_the_first_new_token(setup):
    model, tok, probes, accuracy = setup
    head = model.get_output_embeddings().weight.detach().double().numpy()
    good = AR.answer_token_ids(tok, WORDS)[0][0]
    vectors = {"unembedding": ConceptVectors({L: LinearProbe(head[good], 0.0, test_accuracy=0.9)})}
    table, _ = _run(setup, [SS.SteeringSetting("additive", "all", 9.0, "answer")], vectors=vectors,
                    norms={L: 10.0}, generation_prompts=PROMPTS[:2], max_new_tokens=1, directions=("towards",))
    # one new token: only the edit of the last prompt position can change it (the first token is steered)
    row = table[table.half == "selection"].iloc[0]
    assert row.perplexity_ratio != 1.0 and np.isfinite(row.perplexity_ratio_random)
    assert np.isfinite(row.distinct2_random)


def test_the_timing_model_counts_the_work():
    costs = dict(token=1.0, step=0.0, fit=dict(RAPTOR=0.0))
    ten = SteeringProtocol(n_prompts=10)
    base = SC.estimate_seconds(ten, prompt_tokens=6, methods=("RAPTOR",), costs=costs)
    # only prompt tokens cost: validity 10 x 6, three half passes 5 x 6, twins 1 x 1 x 2 x 2 twins x (1 + 10 control
    # directions) x 5 x 6; the null: one tested point per direction (upper bound: a twin) x (100 - 10 + 1) x 5 x 6
    assert base["validity"] == 60 and base["screen"] == 30 and base["candidate"] == 30 + 4 * 11 * 5 * 6
    assert base["null"] == 2 * 91 * 5 * 6 and base["report"] == 30 + 4 * 11 * 5 * 6
    assert SC.estimate_seconds(ten, prompt_tokens=6, methods=("RAPTOR",), costs=costs,
                               tested_twins=False)["null"] == 0  # answer-position tested points: steps only
    assert SC.estimate_seconds(SteeringProtocol(n_prompts=10, n_twins=0), prompt_tokens=6, methods=("RAPTOR",),
                               costs=costs)["candidate"] == 30
    longer = SC.estimate_seconds(ten, prompt_tokens=12, methods=("RAPTOR",), costs=costs)
    assert longer["total"] == pytest.approx(2 * base["total"])  # linear in the prompt's tokens
    assert SC.estimate_seconds(SteeringProtocol(n_prompts=10, twin_methods=("RAPTOR",)), prompt_tokens=6,
                               methods=("RAPTOR", "GCS"), costs=dict(costs, fit=dict(RAPTOR=0.0, GCS=0.0)),
                               )["candidate"] == base["candidate"]  # GCS: no twins
    assert set(SC.estimate_seconds(measurable=False)) == {"validity", "total"}  # nothing fitted
    from paper_figures.__main__ import section_seconds
    from paper_figures.steering_text import full_run_seconds
    assert section_seconds("steering_text") == round(full_run_seconds())


def test_read_out_validity_needs_an_auc_above_chance_not_only_above_the_threshold():
    """An AUC of ~0.55 on 100 prompts is within noise of chance (se ~0.058): the one-sided Mann-Whitney test refuses
    it; a clear separation passes; the AUC and p-value are scipy's / scikit-learn's."""
    from scipy.stats import mannwhitneyu
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 50)
    weak = rng.normal(size=100) + 0.18 * y  # population AUC ~0.55
    auc, p, mass, ok = AR.read_out_validity(weak, y, np.full(100, 0.2))
    assert auc == pytest.approx(roc_auc_score(y, weak))
    assert p == pytest.approx(mannwhitneyu(weak[y == 1], weak[y == 0], alternative="greater").pvalue)
    assert p > AR.MAX_AUC_P and not ok
    strong = rng.normal(size=100) + 1.5 * y
    assert AR.read_out_validity(strong, y, np.full(100, 0.2))[3]
    assert not AR.read_out_validity(strong, y, np.full(100, 0.001))[3]  # no answer mass
    assert not AR.read_out_validity(-strong, y, np.full(100, 0.2))[3]  # tracks the opposite: not the concept
    assert math.isnan(AR.read_out_validity(strong, np.ones(100), np.full(100, 0.2))[0])  # one class


def test_stacked_random_controls_equal_one_pass_per_draw(setup):
    """The answer-position controls run as one pass of n_random x rows; they equal one pass per draw (GCAV replays
    the concept run's per-row |alpha|, additive the fixed strength) to float32 rounding."""
    model, tok, probes, accuracy = setup
    settings = [SS.SteeringSetting("gcav", "all", 0.99, "answer"), SS.SteeringSetting("additive", "top3", 0.5,
                                                                                        "answer")]
    results = []
    for stacked in (True, False):
        m = SE._Measurement(model, tok, SteeringTarget("d", PROMPTS, LABELS, WORDS),
                            _measured({"RAPTOR": probes}, accuracy["RAPTOR"], {k: 1.0 for k in (1, 2, 3)}), settings,
                            protocol=_protocol(directions=("towards", "away"), n_random=40, seed=2, max_new_tokens=4,
                                               batch_size=3))
        m.stack_controls = stacked
        m.readouts(m.entries(), np.arange(len(PROMPTS)))
        results.append(m.results)
    for key, res in results[0].items():
        np.testing.assert_array_equal(res["ld"], results[1][key]["ld"])  # the concept pass is the same pass
        # float32 model: a different batch shape rounds differently (as in test_batching_does_not_change_the_read_out)
        np.testing.assert_allclose(res["rand"], results[1][key]["rand"], rtol=0, atol=1e-5)
        assert np.isfinite(res["rand"]).all() and np.ptp(res["rand"], axis=0).max() > 0  # the draws differ


def test_additive_steering_takes_one_direction_per_row(setup):
    """A (rows, hidden) vector edits each row along its own direction: the same as editing each row alone."""
    from empirical.llm._edits import additive_steering

    model, tok, _, _ = setup
    ids = tok(["review : a great movie .", "review : bad film ."], return_tensors="pt", padding=True)["input_ids"]
    rng = np.random.default_rng(1)
    V = rng.standard_normal((2, 32))
    with torch.inference_mode():
        with additive_steering(model, {2: V}, alpha=3.0, positions="all"):
            both = model(input_ids=ids).logits
        for i in range(2):
            with additive_steering(model, {2: V[i]}, alpha=3.0, positions="all"):
                alone = model(input_ids=ids[i:i + 1]).logits
            torch.testing.assert_close(both[i:i + 1], alone, rtol=0, atol=1e-5)
        with pytest.raises(ValueError, match="per-row steering vectors"):
            with additive_steering(model, {2: rng.standard_normal((3, 32))}):
                model(input_ids=ids)


@pytest.mark.parametrize("staged", [True, False])
def test_evaluate_dataset_uses_given_vectors_and_fits_nothing(setup, monkeypatch, staged):
    """Vectors saved by the empirical section (a (vectors, validation accuracy) pair) are used as given, staged or
    not: nothing is fitted (the full run once failed here: the staged path took the pair for a mapping)."""
    from empirical.llm.datasets import ConceptDataset

    monkeypatch.setattr(empirical.llm, "MIN_AUC", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 0.0)
    monkeypatch.setattr(empirical.llm, "MAX_AUC_P", 1.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MAX_AUC_P", 1.0)
    monkeypatch.setattr(empirical.llm, "MIN_MASS", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_MASS", 0.0)
    monkeypatch.setattr(SE, "method_vectors", lambda *a, **k: pytest.fail("fitted although vectors were given"))
    model, tok, probes, accuracy = setup
    ds = ConceptDataset("toy", PROMPTS * 5, LABELS * 5)
    H = np.random.default_rng(1).standard_normal((L + 1, len(ds), 32)).astype(np.float32)
    stages = []
    table, _ = SE.evaluate_dataset(model, tok, ds, H, [SS.SteeringSetting("additive", "best", 0.5, "answer")],
                                   vectors={"RAPTOR": probes.with_statistics(validation_accuracy=accuracy["RAPTOR"])},
                                   protocol=_protocol(n_generate=0, n_candidates=1, stage2_positions=("all",),
                                                      n_prompts=4),
                                   run=SteeringRun(methods=("RAPTOR",), answer_words=WORDS, staged=staged,
                                                   on_stage=lambda stage, entries, idx: stages.append(stage)))
    assert set(table.method) == {"RAPTOR"} and table.answer_logodds_shift.notna().any()
    if staged:
        assert "candidate" in stages


def test_the_default_setting_is_the_one_the_published_measurement_chose():
    """``raptor steer``'s default is the setting the committed full run chose (docs/results/tables/
    steering_text_default.csv, written by paper_figures from the measurement, never typed by hand); without a
    published measurement it is the paper's."""
    from pathlib import Path

    published = Path(__file__).resolve().parents[1] / "docs" / "results" / "tables" / "steering_text_default.csv"
    if not published.exists():
        assert SS.DEFAULT_SETTING == SS.PAPER_SETTING
        return
    chosen = pd.read_csv(published)
    assert chosen.setting.nunique() == 1
    expected = chosen.setting.iloc[0] if chosen.beats_random.all() else SS.PAPER_SETTING
    assert SS.DEFAULT_SETTING == expected
    assert SS.named_setting(SS.DEFAULT_SETTING).name == SS.DEFAULT_SETTING


def test_raptor_steer_help_names_the_default_and_every_preset():
    import argparse
    import contextlib
    import io

    from empirical.cli import build_parser

    parser = build_parser()
    steer = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["steer"]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        steer.print_help()
    flat = " ".join(text.getvalue().split())
    assert f"default {SS.DEFAULT_SETTING}" in flat.replace("- ", "-")
    assert all(name in flat for name in SS.PRESETS)
