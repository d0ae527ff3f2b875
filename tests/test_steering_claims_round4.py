"""Issue 53 §5, steering: state what was measured. The rank test's MDE read from the null draws, the methods compared
on the ranks the run computed (and said to run against the paper's thesis where they do), the covariance-matched null
beside the isotropic one, and a VADER control of several random directions: measured on a tiny model, read by the
claims when the table has them and named as missing when it does not, and costed by the timing model."""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import empirical.llm  # noqa: E402
from empirical.llm import _steering_null as SN
from empirical.llm._steering_protocol import MATCHED_STREAMS, MIN_RANDOM, NULL_STREAMS, SteeringProtocol, SteeringRun
from paper_figures import claims as C, verdicts as V

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "docs" / "results" / "tables"


def _committed():
    summary = pd.read_csv(TABLES / "steering_text_summary.csv")
    null = pd.read_csv(TABLES / "steering_text_null.csv")
    return summary, null


def _rank_p(concept, null):
    """The rank p of steering_eval.rank_p_value, torch-free: (1 + #{null >= concept}) / (1 + N)."""
    return (1 + int(np.sum(np.asarray(null) >= concept))) / (1 + len(null))


# ------------------------------------------------------------------------------------------------ the MDE
def test_rank_test_mde_is_the_critical_draw_of_the_rank_test_not_a_normal_quantile():
    """The MDE is the shift the rank test needs: just above it p < ALPHA, at it not (N = 100: the second largest
    draw); with a heavy-tailed null the normal approximation's quantile sits below that critical value."""
    rng = np.random.default_rng(3)
    null = rng.standard_t(2, size=100)
    crit = C.rank_test_mde(null, 0.0)
    assert crit == np.sort(null)[-2]
    assert _rank_p(crit + 1e-9, null) < V.ALPHA <= _rank_p(crit, null)
    se = 0.05
    assert C.rank_test_mde(null, se) == pytest.approx(crit + stats.norm.ppf(V.POWER) * se)
    normal = C.normal_rank_mde(null.mean(), null.std(ddof=1), 0.0)
    assert normal != pytest.approx(crit, abs=0.05)  # the approximation is not the test's threshold
    assert math.isnan(C.rank_test_mde(np.arange(38.0), se))  # 38 draws cannot give p < 0.025
    assert math.isnan(C.rank_test_mde(np.r_[np.arange(99.0), np.nan], se))


def test_the_steering_claims_mde_comes_from_the_committed_null_draws():
    """On the committed tables the claim's MDE is RAPTOR's critical draw (the second largest of its 100 report-half
    draws) plus z_0.8 x its shift's SE; without the per-draw table the normal approximation is used and named."""
    summary, null = _committed()
    (claim,) = C.steering_text_claim(summary, null)
    raptor = summary[(summary.method == "RAPTOR") & (summary.direction == "towards")].iloc[0]
    kind = null["null_kind"].fillna("isotropic") if "null_kind" in null else pd.Series("isotropic", index=null.index)
    needed = []
    for each in kind.unique():  # the isotropic null and, beside it, the covariance-matched one: every test must pass
        draws = null[(null.method == "RAPTOR") & (null.direction == "towards") & (kind == each)]["shift"].to_numpy()
        assert len(draws) == 100, each  # the report half's draws
        needed.append(np.sort(draws)[-2] + stats.norm.ppf(V.POWER) * raptor.answer_logodds_shift_se)
    expected = max(needed)  # the claim's MDE is the largest of its tests' (verdicts.every_setting)
    assert claim["test"].mde == pytest.approx(expected)
    assert "normal approximation" not in claim["ours"]
    (fallback,) = C.steering_text_claim(summary)
    approximations = [C.normal_rank_mde(raptor[f"{prefix}null_mean"], raptor[f"{prefix}null_sd"],
                                        raptor.answer_logodds_shift_se)
                      for _, prefix, _ in C.STEERING_NULLS if f"{prefix}null_mean" in raptor]
    assert fallback["test"].mde == pytest.approx(max(approximations))
    assert "mde by normal approximation: no per-draw null table" in fallback["ours"]
    assert fallback["test"].mde < claim["test"].mde  # the approximation understated what the test needs


# ------------------------------------------------------------------------------------------------ the comparison
def test_the_reviewers_numbers_recompute_from_the_committed_summary():
    """STSA, the only measurable dataset: xRFM ranks 1/101 both ways within every gate; DiffMeans 1/101 towards but
    over the perplexity gate on the report half; RAPTOR 5/101 towards (p 0.0495), nothing within the gates away; GCS
    nowhere; RAPTOR's VADER change is negative (-0.11 ± 0.06) but its 95 % interval includes 0."""
    from empirical.llm._steering_protocol import passes_gates

    summary, _ = _committed()
    points = summary[summary.setting != "not measurable"].set_index(["method", "direction"])
    assert set(summary.loc[summary.setting != "not measurable", "dataset"]) == {"stsa"}
    assert sorted(points.index) == [("DiffMeans", "towards"), ("RAPTOR", "towards"), ("xRFM", "away"),
                                    ("xRFM", "towards")]
    gates = dict(zip(points.index, passes_gates(points.reset_index())))
    assert gates == {("RAPTOR", "towards"): True, ("DiffMeans", "towards"): False, ("xRFM", "away"): True,
                     ("xRFM", "towards"): True}
    assert points.loc[("DiffMeans", "towards"), "perplexity_ratio"] > 1.5
    assert (points.loc[[("xRFM", "away"), ("xRFM", "towards"), ("DiffMeans", "towards")], "null_rank"] == 1).all()
    raptor = points.loc[("RAPTOR", "towards")]
    assert raptor.null_rank == 5 and round(raptor.null_p, 4) == 0.0495
    assert round(raptor.vader_shift, 2) == -0.11 and round(raptor.vader_se, 2) == 0.06
    half = stats.t.ppf(0.975, int(raptor.n_generated) - 1) * raptor.vader_se
    assert raptor.vader_shift - half < 0 < raptor.vader_shift + half


def test_the_comparison_row_says_the_committed_run_runs_against_the_thesis():
    summary, _ = _committed()
    (row,) = C.steering_comparison_claim(summary)
    assert row["test"] is None and row["family"] == "extension" and row["datasets"] == "1"
    ours = row["ours"]
    # each rank among the isotropic null's draws, then among the covariance-matched null's (the run at 3546048)
    assert "stsa towards: xRFM rank 1/101 (p 0.0099; matched 4/101, p 0.0396), VADER +0.13, within every gate" in ours
    assert "RAPTOR rank 5/101 (p 0.0495; matched 7/101, p 0.0693), VADER -0.11, within every gate" in ours
    assert ("DiffMeans rank 1/101 (p 0.0099; matched 1/101, p 0.0099), VADER -0.24, fails perplexity x1.66 > 1.5 on "
            "the report half") in ours
    assert "stsa away: xRFM rank 1/101" in ours and "RAPTOR no setting within the gates" in ours
    assert "GCS no setting within the gates" in ours
    assert "behind a baseline within the gates in 2 of 2 settings" in ours and "ahead in 0" in ours
    assert ours.endswith("runs against the paper's thesis that stable vectors give more reliable control")
    # the claims table carries it next to the steering row (built from the tables, not typed)
    rows = C.claim_rows(ROOT / "docs" / "results")
    assert any(r["claim"] == row["claim"] and r["ours"] == ours for r in rows)


def _point(method, direction, p, rank, **kw):
    return dict(dict(dataset="stsa", method=method, setting=f"additive-best-k0.2-{method}", direction=direction,
                     half="report", selection_shift=1.0, null_p=p, null_rank=rank, n_random=100,
                     null_p_opposite=1.0, answer_logodds_shift=1.0, answer_logodds_shift_se=0.02, null_mean=0.0,
                     null_sd=0.3, concept_specific_shift=1.0, concept_specific_low=0.9, concept_specific_high=1.1,
                     random_control_shift=0.0, answer_mass_unsteered=0.2, answer_mass_steered=0.2,
                     perplexity_ratio=1.1, distinct2_unsteered=0.9, distinct2_steered=0.9, measurable=True), **kw)


def test_the_comparison_row_reads_ranks_within_the_gates_both_ways():
    ahead = pd.DataFrame([_point("RAPTOR", "towards", 1 / 101, 1), _point("xRFM", "towards", 5 / 101, 5),
                          _point("DiffMeans", "towards", 1 / 101, 1, perplexity_ratio=2.0)])
    (row,) = C.steering_comparison_claim(ahead, methods=("RAPTOR", "DiffMeans", "xRFM"))
    assert "ahead in 1 (stsa towards)" in row["ours"] and "in line with the paper's thesis" in row["ours"]
    assert "behind a baseline within the gates in 0 of 1" in row["ours"]  # DiffMeans' rank 1 is over the gate
    gated = ahead.assign(perplexity_ratio=[2.0, 1.1, 2.0])  # RAPTOR over the gate: behind xRFM
    (row,) = C.steering_comparison_claim(gated, methods=("RAPTOR", "DiffMeans", "xRFM"))
    assert "in 1 of 1 settings (stsa towards (xRFM))" in row["ours"] and "runs against" in row["ours"]
    assert C.steering_comparison_claim(None) == [] and C.steering_comparison_claim(ahead.drop(columns="null_p")) == []


# ------------------------------------------------------------------------------------------------ the new columns
def _raptor_summary(**kw):
    return pd.DataFrame([_point("RAPTOR", "towards", 1 / 101, 1, **kw)])


def test_the_claim_needs_the_covariance_matched_null_too_where_the_table_has_it():
    """Beating the isotropic null alone is not enough once the matched null is measured: each (dataset, direction)
    enters the intersection twice; an older table says the matched null was not measured."""
    (old,) = C.steering_text_claim(_raptor_summary())
    assert old["test"].verdict == "holds" and "covariance-matched null not measured in this table" in old["ours"]
    weak = _raptor_summary(matched_null_p=0.3, matched_null_p_opposite=0.7, matched_null_rank=30,
                           n_random_matched=100, matched_null_mean=0.5, matched_null_sd=0.4)
    (claim,) = C.steering_text_claim(weak)
    assert claim["test"].verdict == "inconclusive" and claim["test"].p == 0.3
    assert claim["test"].rule == "every setting (permutation rank, 2 settings)"
    assert "rank 1 of 101, p = 0.0099; covariance-matched: rank 30 of 101, p = 0.3" in claim["ours"]
    # its MDE from its own draws when the per-draw table has them (null_kind 'matched'), the larger one binding
    draws = pd.DataFrame(dict(dataset="stsa", method="RAPTOR", setting="additive-best-k0.2-RAPTOR", direction="towards",
                              half="report", shift=np.r_[np.linspace(0, 1, 100), np.linspace(0, 3, 100)],
                              null_kind=["isotropic"] * 100 + ["matched"] * 100))
    (read,) = C.steering_text_claim(weak, draws)
    assert read["test"].mde == pytest.approx(np.linspace(0, 3, 100)[-2] + stats.norm.ppf(V.POWER) * 0.02)
    (row,) = C.steering_comparison_claim(weak, methods=("RAPTOR",))
    assert "RAPTOR rank 1/101 (p 0.0099; matched 30/101, p 0.3)" in row["ours"]


def test_the_vader_control_states_its_draws_and_which_way_the_text_moved():
    base = dict(vader_shift=-0.11, vader_se=0.06, vader_random_shift=0.05, n_generated=32)
    (one,) = C.steering_text_claim(_raptor_summary(**base))
    assert "VADER -0.11 ± 0.06 vs random +0.05 (one random direction: no spread)" in one["ours"]
    assert "the text moves against the target in the estimate only (95 % interval [-0.23, +0.01] includes 0)" \
        in one["ours"]
    (many,) = C.steering_text_claim(_raptor_summary(**base, n_vader_random=10, vader_random_se=0.03))
    assert "vs random +0.05 ± 0.03 over 10 random directions" in many["ours"]
    (clear,) = C.steering_text_claim(_raptor_summary(**dict(base, vader_shift=-0.3)))
    assert "the text moves against the target (95 % interval" in clear["ours"]


# ------------------------------------------------------------------------------------------------ the cost
def test_the_timing_model_costs_the_new_draws_and_the_section_stays_within_the_hour():
    from empirical.llm import _steering_cost as SC
    from paper_figures import steering_text as ST

    costs = dict(token=0.0, step=1.0, fit=dict(RAPTOR=0.0))
    kw = dict(methods=("RAPTOR",), costs=costs)

    def protocol(**fields):
        return SteeringProtocol(n_prompts=10, n_candidates=1, n_twins=0, n_generate=4, max_new_tokens=3, **fields)

    est = SC.estimate_seconds(protocol(n_random_matched=40, n_text_random=5), **kw, sentiment=True)
    assert est["matched"] == 2 * 41 * 5  # two tested points x (40 draws + the concept edit) x 5 report prompts
    assert est["text"] == 4 * 2 * 2 * 3  # 4 more draws x 2 report rows x 2 report prompts x 3 tokens
    assert SC.estimate_seconds(protocol(n_random_matched=40, n_text_random=5), **kw)["text"] == 0  # not sentiment
    assert SC.estimate_seconds(protocol(n_random_matched=0), **kw)["matched"] == 0
    assert ST.FULL["n_random_matched"] >= 100 and ST.FULL["n_text_random"] >= 2
    stages = ST.stage_seconds()
    assert stages["matched"] > 0 and stages["text"] > 0  # STSA, the measurable dataset, is a sentiment dataset
    assert ST.full_run_seconds() <= 3600


def test_the_protocol_checks_the_new_fields():
    from empirical.llm._steering_protocol import N_TEXT_RANDOM

    default = SteeringProtocol()
    assert default.n_random_matched == default.n_random and default.n_text_random == N_TEXT_RANDOM >= 2
    assert SteeringProtocol(n_random_matched=0).n_random_matched == 0
    for bad in (MIN_RANDOM - 2, MIN_RANDOM + 1):
        with pytest.raises(ValueError, match="n_random_matched"):
            SteeringProtocol(n_random_matched=bad)
    for bad in (0, default.n_random + 2):
        with pytest.raises(ValueError, match="n_text_random"):
            SteeringProtocol(n_text_random=bad)


# ------------------------------------------------------------------------------------------------ the measurement
PROMPTS = ["review : a great movie .", "review : bad film .", "review : i loved this film .",
           "review : awful boring movie .", "review : loved it", "review : the actor was bad",
           "review : really very good film", "review : i hated this plot"]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]
WORDS = ("good", "bad")
STEM = " the answer is"
L, P, N = 3, 32, MIN_RANDOM


@pytest.fixture(scope="module")
def SE():
    """The measurement module (needs the [llm] extra: torch and transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from empirical.llm import _steering_eval as steering_eval

    return steering_eval


def test_matched_directions_come_from_the_states_distribution():
    """Unit norm, antithetic, in the span the states vary in, reproducible, and drawn on streams of their own."""
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.standard_normal((P, 3)))[0]  # the states vary in a 3-dimensional subspace
    H = np.stack([rng.standard_normal((60, 3)) @ basis.T * s + 5.0 for s in (1.0, 2.0)])
    factors = SN.state_factors(H, np.arange(60), [1])
    np.testing.assert_allclose(factors[1].astype(float) @ factors[1].T, np.cov(H[1].T), atol=1e-4)
    draws = SN.matched_units(factors, seed=0, n_random=N, half="report")
    U = np.stack([d[1] for d in draws])
    np.testing.assert_allclose(np.linalg.norm(U, axis=1), 1.0)
    np.testing.assert_array_equal(U[1::2], -U[::2])
    np.testing.assert_allclose(np.linalg.norm(U @ basis, axis=1), 1.0)  # no component off the states' span
    again = SN.matched_units(factors, seed=0, n_random=N, half="report")
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(draws, again))
    other = np.stack([d[1] for d in SN.matched_units(factors, seed=0, n_random=N, half="selection")])
    assert np.abs(U @ other.T).max() < 0.9999
    assert set(MATCHED_STREAMS.values()).isdisjoint(NULL_STREAMS.values())
    iso = np.stack([d[1] for d in SN.null_units([1], P, seed=0, n_random=N, half="report")])
    assert np.linalg.norm(iso @ basis, axis=1).mean() < 0.6  # isotropic draws mostly leave the span


@pytest.fixture(scope="module")
def model_tok(SE):
    from empirical.testing import tiny_model, tiny_tokenizer

    return tiny_model("llama", seed=7, n_layers=L), tiny_tokenizer()


def _unembedding(model, tok):
    from empirical.llm import _answer_readout as AR

    head = model.get_output_embeddings().weight.detach().double().numpy()
    good, bad = (AR.answer_token_ids(tok, WORDS)[i][0] for i in (0, 1))
    return head[good] - head[bad]


@pytest.mark.llm
def test_the_matched_null_is_measured_beside_the_isotropic_one_and_is_the_stronger_control(SE, model_tok):
    """The concept word's unembedding direction beats every isotropic direction (rank 1), but not directions drawn
    from states that vary along that very direction: the matched null then holds copies of the concept edit, so its
    rank p is far from 1 / (N + 1). The isotropic numbers do not change when the matched null is added, its per-draw
    rows reproduce the table's rank, and without states it is not measured (NaN, 0 draws)."""
    from empirical.llm import _steering_settings as SS
    from empirical.probes import ConceptVectors, LinearProbe

    model, tok = model_tok
    concept = _unembedding(model, tok)
    unit = concept / np.linalg.norm(concept)
    from empirical.llm._steering_target import SteeringTarget

    vectors = {"RAPTOR": ConceptVectors({L: LinearProbe(concept, 0.0, test_accuracy=0.9, validation_accuracy=0.9,
                                                        state_norm=5.0)})}
    setting = SS.SteeringSetting("additive", "all", 2.0, "answer")

    def run(factors):
        protocol = SteeringProtocol(stem=STEM, directions=("towards",), n_random=N, seed=0, batch_size=8)
        target = SteeringTarget("dataset", PROMPTS, LABELS, WORDS, state_factors=factors)
        return SE.evaluate_steering(model, tok, target, vectors, [setting], protocol=protocol)

    plain, _ = run(None)
    assert (plain.n_random_matched == 0).all() and plain.matched_null_p.isna().all()
    aligned = {layer: unit[:, None].astype(np.float32) for layer in range(1, L + 1)}  # states vary along the concept
    table, per_prompt = run(aligned)
    iso = ["null_rank", "null_p", "null_mean", "null_sd", "answer_logodds_shift"]
    pd.testing.assert_frame_equal(table[iso], plain[iso])
    assert (table.null_rank == 1).all() and (table.n_random_matched == N).all()
    assert (table.matched_null_p > 0.2).all()  # half the matched draws are the concept edit itself
    null = per_prompt["null"]
    assert set(null.null_kind) == {"isotropic", "matched"} and list(null.columns) == SN.NULL_COLUMNS
    for r in table.itertuples():
        shifts = null[(null.half == r.half) & (null.null_kind == "matched")]
        assert len(shifts) == N and set(shifts.stream) == {MATCHED_STREAMS[r.half]}
        assert (r.matched_null_rank, r.matched_null_p) == SN.rank_p_value(r.answer_logodds_shift,
                                                                          shifts["shift"].to_numpy())[:2]


@pytest.mark.llm
def test_a_staged_sweep_reads_the_matched_null_and_several_vader_directions_on_the_report_half(SE, model_tok,
                                                                                                monkeypatch):
    """Only the tested points get the matched null (stage 'matched', report half); a sentiment dataset's report rows
    continue ``n_text_random`` random directions for VADER (its SE over them), the selection half one."""
    from empirical.llm import _answer_readout as AR, _steering_settings as SS
    from empirical.probes import ConceptVectors, LinearProbe

    monkeypatch.setattr(empirical.llm, "MIN_AUC", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_AUC", 0.0)  # a tiny random model's read-out tracks nothing; measure it anyway
    monkeypatch.setattr(empirical.llm, "MAX_AUC_P", 1.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MAX_AUC_P", 1.0)
    monkeypatch.setattr(empirical.llm, "MIN_MASS", 0.0)  # front door first (undo restores its original)
    monkeypatch.setattr(AR, "MIN_MASS", 0.0)
    from empirical.llm._steering_target import SteeringTarget

    for module in (SE, SN):  # gibberish text: every row passes the gates (the staged run's and the rank test's)
        monkeypatch.setattr(module, "passes_gates", lambda rows: pd.Series(True, index=rows.index))
    model, tok = model_tok
    vectors = {"RAPTOR": ConceptVectors({L: LinearProbe(_unembedding(model, tok), 0.0, test_accuracy=0.9,
                                                        validation_accuracy=0.9, state_norm=5.0)})}
    settings = [SS.SteeringSetting("additive", "all", k, "answer") for k in (1.0, 2.0)]
    H = np.random.default_rng(1).standard_normal((L + 1, 40, P)).astype(np.float32)
    stages = []
    target = SteeringTarget("dataset", PROMPTS, LABELS, WORDS, generation_prompts=PROMPTS, sentiment=True,
                            state_factors=SN.state_factors(H, np.arange(40), range(1, L + 1)))
    table, per_prompt = SE.evaluate_staged(
        model, tok, target, vectors, settings,
        protocol=SteeringProtocol(stem=STEM, n_random=N, n_random_selection=4, n_random_matched=N, n_text_random=4,
                                  seed=0, batch_size=8, n_candidates=1, n_twins=0, stage2_positions=(),
                                  max_new_tokens=4),
        run=SteeringRun(on_stage=lambda stage, entries, idx: stages.append(stage)))
    assert "matched" in stages and stages.index("matched") == stages.index("null") + 1
    report, selection = table[table.half == "report"], table[table.half == "selection"]
    tested = report[report.null_p.notna()]
    assert len(tested) == 2 and (tested.n_random_matched == N).all() and tested.matched_null_p.notna().all()
    assert selection.matched_null_p.isna().all() and (selection.n_random_matched == 0).all()
    generated = report[report.n_generated > 0]
    assert len(generated) and (generated.n_vader_random == 4).all() and generated.vader_random_se.notna().all()
    assert (selection.loc[selection.n_generated > 0, "n_vader_random"] == 1).all()
    null = per_prompt["null"]
    assert set(null.null_kind) == {"isotropic", "matched"} and set(null.half) == {"report"}
