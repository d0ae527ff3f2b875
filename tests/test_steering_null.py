"""Random directions as the unit of inference (empirical.llm._steering_null, measured by _steering_eval): the rank
p-value on known inputs, the antithetic, per-half null directions, a concept direction that is special (the concept
word's unembedding direction ranks first, p = 1 / (N + 1)) and one that is not (a random direction: not
significant), and the per-draw null table."""
from __future__ import annotations

import os

import numpy as np
import pytest

import empirical.llm  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import (  # noqa: E402
    _answer_readout as AR,
    _steering_eval as SE,
    _steering_null as SN,
    _steering_protocol as SP,
    _steering_settings as SS,
)
from empirical.llm._steering_protocol import SteeringProtocol, SteeringRun  # noqa: E402
from empirical.llm._steering_target import SteeringTarget  # noqa: E402
from empirical.probes import ConceptVectors, LinearProbe  # noqa: E402
from empirical.testing import tiny_model, tiny_tokenizer  # noqa: E402

PROMPTS = ["review : a great movie .", "review : bad film .", "review : i loved this film .",
           "review : awful boring movie .", "review : loved it", "review : the actor was bad",
           "review : really very good film", "review : i hated this plot"]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]
WORDS = ("good", "bad")
STEM = " the answer is"
L = 3
N = SP.MIN_RANDOM
TARGET = SteeringTarget("dataset", PROMPTS, LABELS, WORDS)


def test_rank_p_value_on_known_inputs():
    assert SN.rank_p_value(10.0, np.arange(9.0)) == (1, 0.1, 1.0)  # above all nine: 1 / (1 + 9)
    assert SN.rank_p_value(-1.0, np.arange(9.0)) == (10, 1.0, 0.1)  # below all: the opposite holds
    rank, p, p_opp = SN.rank_p_value(4.0, np.arange(9.0))  # ties count as >= and as <=
    assert (rank, p, p_opp) == (6, 0.6, 0.6)
    assert SN.rank_p_value(1.0, np.zeros(39))[1] == 0.025  # N = 39 is the least that reaches 0.025
    assert np.isnan(SN.rank_p_value(float("nan"), np.zeros(3))[1])
    with pytest.raises(ValueError, match="null must not contain NaN"):
        SN.rank_p_value(1.0, [0.0, float("nan")])


def test_null_directions_are_antithetic_and_differ_between_halves():
    sel = SN.null_units([1, 2], 16, seed=0, n_random=N, half="selection")
    rep = SN.null_units([1, 2], 16, seed=0, n_random=N, half="report")
    assert len(sel) == len(rep) == N
    for r in range(0, N, 2):
        assert np.array_equal(sel[r + 1][2], -sel[r][2])  # +r, -r
    assert all(np.linalg.norm(u[1]) == pytest.approx(1.0) for u in sel)
    S, R = (np.stack([u[1] for u in d]) for d in (sel, rep))
    assert np.abs(S @ R.T).max() < 0.99  # no report draw equals (or negates) a selection draw
    with pytest.raises(ValueError, match=r"n_random \(--n-random\) must be even"):
        SN.null_units([1], 4, seed=0, n_random=41, half="report")


@pytest.fixture(scope="module")
def model_tok():
    return tiny_model("llama", seed=7, n_layers=L), tiny_tokenizer()


def _measure(model_tok, direction, seed=0, half_table=False):
    model, tok = model_tok
    vectors = {"RAPTOR": ConceptVectors({L: LinearProbe(direction, 0.0, test_accuracy=0.9, validation_accuracy=0.9,
                                                        state_norm=5.0)})}
    setting = SS.SteeringSetting("additive", "all", 2.0, "answer")
    return SE.evaluate_steering(model, tok, TARGET, vectors, [setting],
                                protocol=SteeringProtocol(stem=STEM, directions=("towards",), n_random=N, seed=seed,
                                                          batch_size=8))


@pytest.mark.llm
def test_a_special_direction_ranks_first(model_tok):
    """The concept word's unembedding direction (minus the opposite's) moves the answer log-odds more than every
    random direction of the same strength: rank 1, p = 1 / (N + 1) on both halves (each with its own draws)."""
    model, tok = model_tok
    head = model.get_output_embeddings().weight.detach().double().numpy()
    good, bad = (AR.answer_token_ids(tok, WORDS)[i][0] for i in (0, 1))
    table, per_prompt = _measure(model_tok, head[good] - head[bad])
    assert (table.null_rank == 1).all() and np.allclose(table.null_p, 1 / (N + 1))
    assert (table.null_p < 0.025).all() and (table.null_stream == [0, 1]).all()
    null = per_prompt["null"]
    assert list(null.columns) == SN.NULL_COLUMNS and len(null) == 2 * N
    assert set(null.groupby("half").draw.nunique()) == {N} and set(null.sign) == {-1, 1}
    # the report half reads other draws than the selection half: its null shifts are not the selection half's
    sel, rep = (null[null.half == h]["shift"].to_numpy() for h in ("selection", "report"))
    assert not np.allclose(np.sort(sel), np.sort(rep))
    for half, row in table.set_index("half").iterrows():
        shifts = null[null.half == half]["shift"].to_numpy()
        assert row.null_p == SN.rank_p_value(row.answer_logodds_shift, shifts)[1]
        assert row.null_mean == pytest.approx(shifts.mean()) and row.random_control_shift == pytest.approx(
            shifts.mean())


@pytest.mark.llm
def test_a_random_direction_is_not_special(model_tok):
    """A concept direction drawn from the null's own distribution (a Gaussian direction, at the same strength) is
    one more draw: its rank p is not piled at 1 / (N + 1) as a special direction's is (rank 1 in both halves of every
    seed, the test above).  Chance failure rate <= 2e-6 per run (any seed): under the null a half's p is at its
    minimum 1 / (N + 1) < 0.025 with probability 1 / (N + 1) = 1/41 (the shift odd in the direction to first order, as
    the antithetic null assumes), so a seed shows it in either half with probability <= 2/41 whatever the halves'
    dependence, and 5 or more of 6 independent seeds with probability 6 (2/41)^5 + (2/41)^6 = 1.7e-6.  It used to
    require p >= 0.025 in both halves of seed 0 (chance failure ~ 2/41 = 0.05 for a seed drawn anew) and a mean p in
    (0.1, 0.9) over 4 seeds (up to 2e-3 if the halves' p's are strongly dependent)."""
    seeds = 6
    at_minimum = 0
    for seed in range(seeds):
        direction = np.random.default_rng([99, seed]).standard_normal(32)
        table, _ = _measure(model_tok, direction, seed=seed)
        at_minimum += bool((table.null_p < 0.025).any())
    assert at_minimum <= seeds - 2, at_minimum


def _rows(dataset, auc_p):
    rows = []
    for k in (0.1, 0.4):
        for half in ("selection", "report"):
            rows.append(dict(dataset=dataset, method="RAPTOR", setting=f"additive-best-k{k}-answer", kind="additive",
                             layer_choice="best", strength=k, positions="answer", direction="towards", half=half,
                             n_prompts=50, concept_specific_shift=k, concept_specific_low=k - 0.01,
                             concept_specific_high=k + 0.01, random_control_shift=0.0, answer_mass_unsteered=0.2,
                             answer_mass_steered=0.2, perplexity_ratio=1.1, auc_unsteered=0.7, auc_p_value=auc_p,
                             measurable=auc_p <= 0.025))
    return rows


def test_read_out_validity_is_holm_corrected_over_the_datasets():
    """Three datasets with p = 0.001, 0.012, 0.02 (each measurable alone): Holm gives 0.003, 0.024, 0.024 -> all
    stay; with p = 0.02 on two more the adjusted p of the last ones exceeds 0.025 and they are not measurable."""
    import pandas as pd

    from paper_figures.steering_text import summary

    s = summary(pd.DataFrame(_rows("a", 0.001) + _rows("b", 0.012) + _rows("c", 0.02)))
    assert set(s.loc[s.setting != "not measurable", "dataset"]) == {"a", "b", "c"}
    np.testing.assert_allclose(s.groupby("dataset").auc_p_holm.first(), [0.003, 0.024, 0.024])
    s = summary(pd.DataFrame(_rows("a", 0.001) + _rows("b", 0.02) + _rows("c", 0.02) + _rows("d", 0.5)))
    assert set(s.loc[s.setting != "not measurable", "dataset"]) == {"a"}
    assert sorted(s.loc[s.setting == "not measurable", "dataset"]) == ["b", "c", "d"]
    assert not s.loc[s.setting == "not measurable", "measurable"].any()


def test_repetitive_text_fails_the_distinct2_gate():
    """Both fluency gates must pass: a continuation that repeats itself ("good good good ...", distinct-2 near 0)
    fails the repetition gate even with a perplexity ratio inside its gate; fluent text passes both."""
    import pandas as pd

    varied = AR.distinct_ngram_ratio(list(range(32)))  # every bigram new: 1.0
    repetitive = AR.distinct_ngram_ratio([7] * 32)  # one bigram repeated: 1 / 31
    assert varied == 1.0 and repetitive < 0.05
    rows = pd.DataFrame(dict(answer_mass_steered=[0.2] * 4, answer_mass_unsteered=[0.2] * 4,
                             perplexity_ratio=[1.1, 1.1, 3.0, np.nan], distinct2_unsteered=[varied] * 4,
                             distinct2_steered=[varied, repetitive, varied, np.nan]))
    assert SP.passes_gates(rows).tolist() == [True, False, False, True]  # the last: nothing generated
    assert SP.passes_gates(rows.drop(columns=["distinct2_steered", "distinct2_unsteered"])).tolist() == [
        True, True, False, True]  # an old table without the columns: the perplexity gate only
    assert SP.DISTINCT2_GATE * varied > repetitive


@pytest.mark.llm
def test_only_the_tested_points_carry_the_rank_null(model_tok, monkeypatch):
    """A staged run spends the N-draw null only on the tested points (per method and direction, chosen on the
    selection half): their report rows have N report-stream draws, a rank p and per-draw rows; every other row
    has the small control (no rank p), and the claim reads exactly the tested rows."""

    from paper_figures.claims import steering_text_claim
    from paper_figures.steering_text import summary

    monkeypatch.setattr(empirical.llm, "MIN_AUC", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 0.0)  # a tiny random model's read-out tracks nothing; measure it anyway
    monkeypatch.setattr(empirical.llm, "MAX_AUC_P", 1.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MAX_AUC_P", 1.0)
    monkeypatch.setattr(empirical.llm, "MIN_MASS", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_MASS", 0.0)
    model, tok = model_tok
    head = model.get_output_embeddings().weight.detach().double().numpy()
    good, bad = (AR.answer_token_ids(tok, WORDS)[i][0] for i in (0, 1))
    vectors = {"RAPTOR": ConceptVectors({L: LinearProbe(head[good] - head[bad], 0.0, test_accuracy=0.9,
                                                        validation_accuracy=0.9, state_norm=5.0)})}
    settings = [SS.SteeringSetting("additive", "all", k, "answer") for k in (0.5, 1.0, 2.0)]
    calls = []
    table, per_prompt = SE.evaluate_staged(
        model, tok, TARGET, vectors, settings,
        protocol=SteeringProtocol(stem=STEM, n_random=N, n_random_selection=4, seed=0, batch_size=8, n_candidates=2,
                                  n_twins=1, stage2_positions=("all",)),
        run=SteeringRun(on_stage=lambda stage, entries, idx: calls.append((stage, len(entries)))))
    keys = ["method", "setting", "direction"]
    tested = SN.rank_test_points(table)
    assert len(tested) >= 1 and ("null", len(tested)) in calls
    tested_keys = set(map(tuple, tested[keys].to_numpy()))
    report = table[table.half == "report"]
    is_tested = np.array([tuple(k) in tested_keys for k in report[keys].to_numpy()])
    assert is_tested.sum() == len(tested) and (~is_tested).any()  # a report row that is not tested
    assert (report.n_random[is_tested] == N).all() and report.null_p[is_tested].notna().all()
    assert (report.n_random[~is_tested] == 4).all() and report.null_p[~is_tested].isna().all()
    selection = table[table.half == "selection"]
    assert (selection.n_random == 4).all() and selection.null_p.isna().all()  # a control, not a test
    null = per_prompt["null"]
    assert set(null.half) == {"report"} and set(null.stream) == {SP.NULL_STREAMS["report"]}
    assert set(map(tuple, null[keys].drop_duplicates().to_numpy())) == tested_keys
    for r in report[is_tested].itertuples():
        shifts = null[(null.setting == r.setting) & (null.direction == r.direction)]["shift"].to_numpy()
        assert len(shifts) == N and r.null_p == SN.rank_p_value(r.answer_logodds_shift, shifts)[1]
    # the claim reads the tested rows: RAPTOR's largest selection shift per dataset and direction
    s = summary(table.assign(dataset="stsa"))
    raptor = s[s.method == "RAPTOR"]
    best = raptor.loc[raptor.groupby(["dataset", "direction"])["selection_shift"].idxmax()]
    assert set(map(tuple, best[keys].to_numpy())) == tested_keys
    (claim,) = steering_text_claim(s)
    assert claim["test"] is not None and f"of {N + 1}, p = " in claim["ours"]


@pytest.mark.llm
def test_the_validity_gate_takes_the_callers_adjusted_p_and_can_stop_after_validity(model_tok, monkeypatch):
    """``validity_only`` returns the validity row whatever its outcome (the first pass of a multi-dataset run);
    ``auc_p_adjusted`` replaces the own p in the gate: an own p of 0.001 adjusted to 0.03 stops at validity (the row
    keeps the own p), adjusted to 0.01 it is measured."""
    monkeypatch.setattr(SE, "read_out_validity", lambda ld, labels, mass: (0.8, 0.001, 0.2, True))
    model, tok = model_tok
    head = model.get_output_embeddings().weight.detach().double().numpy()
    good, bad = (AR.answer_token_ids(tok, WORDS)[i][0] for i in (0, 1))
    vectors = {"RAPTOR": ConceptVectors({L: LinearProbe(head[good] - head[bad], 0.0, test_accuracy=0.9,
                                                        validation_accuracy=0.9, state_norm=5.0)})}
    settings = [SS.SteeringSetting("additive", "all", 1.0, "answer")]

    def staged(**kw):
        stages = []
        table, _ = SE.evaluate_staged(model, tok, TARGET, vectors, settings,
                                      protocol=SteeringProtocol(stem=STEM, n_random=N, n_random_selection=4,
                                                                batch_size=8, n_candidates=1, n_twins=0,
                                                                stage2_positions=()),
                                      run=SteeringRun(on_stage=lambda stage, entries, idx: stages.append(stage), **kw))
        return table, stages

    table, stages = staged(validity_only=True)
    assert stages == ["validity"] and len(table) == 1 and bool(table.measurable[0]) and table.auc_p_value[0] == 0.001
    table, stages = staged(auc_p_adjusted=0.03)
    assert stages == ["validity"] and not table.measurable[0] and table.auc_p_value[0] == 0.001
    table, stages = staged(auc_p_adjusted=0.01)
    assert "screen" in stages and table.measurable.all()
    with pytest.raises(ValueError, match="auc_p_adjusted"):
        staged(auc_p_adjusted=1.5)
