"""The verdict rules of the claims table (paper_figures.verdicts): each rule on data whose verdict is known,
p-values against scipy's tests on the same data, and the Holm step against a published example."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from paper_figures import claims, verdicts
from paper_figures.verdicts import FAILS, HOLDS, INCONCLUSIVE


def _interval(values):
    return claims.seed_interval(values, test_train_ratio=0.0)  # the plain t interval over the values


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=12).filter(lambda v: np.std(v) > 1e-3))
def test_p_values_from_the_interval_equal_scipys_one_sample_t_test(values):
    mean, low, high = _interval(values)
    p_gt, p_lt = verdicts.t_test_from_interval(mean, low, high, df=len(values) - 1)
    assert p_gt == pytest.approx(stats.ttest_1samp(values, 0.0, alternative="greater").pvalue, rel=1e-6, abs=1e-12)
    assert p_lt == pytest.approx(stats.ttest_1samp(values, 0.0, alternative="less").pvalue, rel=1e-6, abs=1e-12)


def test_superiority_holds_above_zero_fails_below_and_is_inconclusive_across():
    rng = np.random.default_rng(0)
    for shift, expected in ((0.05, HOLDS), (-0.05, FAILS), (0.0, INCONCLUSIVE)):
        v = shift + 0.002 * rng.standard_normal(8) if shift else np.array([0.01, -0.01] * 4)
        mean, low, high = _interval(v)
        assert verdicts.superiority(mean, low, high, df=7).verdict == expected
        # the opposite direction swaps holds and does not hold
        flipped = {HOLDS: FAILS, FAILS: HOLDS, INCONCLUSIVE: INCONCLUSIVE}[expected]
        assert verdicts.superiority(mean, low, high, df=7, direction=-1).verdict == flipped


@pytest.mark.parametrize("mean,expected", [(-0.005, HOLDS), (-0.03, FAILS), (-0.01, INCONCLUSIVE)])
def test_non_inferiority_is_judged_against_the_margin(mean, expected):
    # half-width 0.004 around the mean: the lower bound against -0.01 decides
    test = verdicts.non_inferiority(mean, mean - 0.004, mean + 0.004, df=4, margin=0.01)
    assert test.verdict == expected and "margin 0.01" in test.rule


def test_majority_is_a_sign_test_and_six_datasets_need_six_wins():
    assert verdicts.majority(6, 6).verdict == HOLDS  # p = 1/64
    assert verdicts.majority(5, 6).verdict == INCONCLUSIVE  # p = 7/64
    # p = 1/32 > 0.025: five datasets cannot establish it, so the design gets no verdict (not "inconclusive")
    assert verdicts.majority(5, 5).verdict == "--" and not verdicts.majority(5, 5).decidable
    assert verdicts.majority(0, 6).verdict == FAILS
    assert verdicts.majority(5, 6).p == pytest.approx(stats.binomtest(5, 6, 0.5, alternative="greater").pvalue)


def test_every_setting_is_an_intersection_union_test():
    good, bad, unsure = verdicts.Test("s", 0.001, 0.99), verdicts.Test("s", 0.999, 0.001), verdicts.Test("s", 0.3, 0.3)
    assert verdicts.every_setting([good, good]).verdict == HOLDS
    assert verdicts.every_setting([good, unsure]).verdict == INCONCLUSIVE
    assert verdicts.every_setting([good, bad]).verdict == FAILS
    assert verdicts.every_setting([good, good]).p == pytest.approx(0.001)


def test_holm_matches_the_textbook_example_and_keeps_nan_out():
    assert verdicts.holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = verdicts.holm([0.01, np.nan, 0.02])
    assert np.isnan(adjusted[1]) and adjusted[[0, 2]].tolist() == pytest.approx([0.02, 0.02])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20))
def test_holm_never_lowers_a_p_value_and_keeps_the_order(p):
    adjusted = verdicts.holm(p)
    assert np.all(adjusted >= np.asarray(p) - 1e-15) and np.all(adjusted <= 1.0)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(adjusted[order]) >= -1e-15)


def test_apply_holm_demotes_a_marginal_holds_when_many_claims_are_tested():
    marginal = verdicts.Test("s", 0.015, 0.985)
    strong = verdicts.Test("s", 1e-6, 1.0)
    alone, v_alone = verdicts.apply_holm([marginal, None])
    assert v_alone == [HOLDS, "--"]
    many, v_many = verdicts.apply_holm([marginal, verdicts.Test("s", 0.02, 0.98), strong, strong])
    assert v_many == [INCONCLUSIVE, INCONCLUSIVE, HOLDS, HOLDS] and many[:2].tolist() == pytest.approx([0.03, 0.03])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=12).filter(lambda v: np.std(v) > 1e-3))
def test_a_superiority_verdict_never_disagrees_with_its_printed_95_percent_interval(values):
    """holds exactly when the 95 % interval lies above 0, does not hold exactly when it lies below 0."""
    mean, low, high = _interval(values)
    verdict = verdicts.superiority(mean, low, high, df=len(values) - 1).verdict
    if low > 1e-9:
        assert verdict == HOLDS
    elif high < -1e-9:
        assert verdict == FAILS
    elif low < -1e-9 and high > 1e-9:
        assert verdict == INCONCLUSIVE


# --- test families, one rule both ways, power ------------------------------------------------------------------
def test_the_smallest_p_of_a_sign_test_decides_whether_a_design_can_decide():
    for n in range(1, 9):
        t = verdicts.majority(n, n)
        assert t.min_p == pytest.approx(0.5 ** n) and t.p == pytest.approx(0.5 ** n)
        assert t.decidable == (n >= 6)  # 1/64 < 0.025 <= 1/32
    assert "1/32" not in verdicts.majority(5, 5).reason and "0.0312" in verdicts.majority(5, 5).reason


@pytest.mark.parametrize("n", [6, 8, 12, 30])
def test_sign_test_mde_gives_the_stated_power_by_simulation(n):
    q = verdicts.sign_test_mde(n)
    rng = np.random.default_rng(n)
    wins = rng.binomial(n, q, size=20000)
    rejects = {int(k): verdicts.majority(int(k), n).p < verdicts.ALPHA for k in np.unique(wins)}
    rejected = np.mean([rejects[int(k)] for k in wins])
    assert rejected == pytest.approx(verdicts.POWER, abs=0.02)
    # a slightly smaller share has less than the stated power
    assert stats.binom.sf(np.flatnonzero(stats.binom.sf(np.arange(n + 1) - 1, n, 0.5) < verdicts.ALPHA).min() - 1,
                          n, q - 0.01) < verdicts.POWER


def test_t_mde_gives_the_stated_power_by_simulation():
    """An effect equal to the stated MDE is detected in 80 % of replications of the same design."""
    rng = np.random.default_rng(1)
    sd, k = 0.02, 5
    probe = _interval(rng.normal(0.0, sd, k))
    mde = verdicts.superiority(*probe, df=k - 1).mde
    assert mde > 0
    # the MDE is computed from the observed se; replicate at the se the interval implies
    se = 0.5 * (probe[2] - probe[1]) / stats.t.ppf(0.975, k - 1)
    t_crit = stats.t.ppf(1 - verdicts.ALPHA, k - 1)
    power = stats.nct.sf(t_crit, k - 1, mde / se)  # exact power of the one-sided t test at that effect
    assert power == pytest.approx(verdicts.POWER, abs=0.03)


def test_a_non_inferiority_mde_is_the_superiority_mde_less_the_margin():
    sup = verdicts.superiority(0.0, -0.01, 0.01, df=4)
    ni = verdicts.non_inferiority(0.0, -0.01, 0.01, df=4, margin=0.01)
    assert ni.mde == pytest.approx(sup.mde - 0.01)


def test_majority_counts_interval_decisions_not_point_estimates():
    # 4 datasets establish the claim, 1 the opposite, 1 undecided: the opposite is tested on 1 of 6, not 2 of 6
    t = verdicts.majority(4, 6, opposite=1)
    assert t.p == pytest.approx(stats.binomtest(4, 6, 0.5, alternative="greater").pvalue)
    assert t.p_opposite == pytest.approx(stats.binomtest(1, 6, 0.5, alternative="greater").pvalue)
    with pytest.raises(ValueError, match="counts"):
        verdicts.majority(4, 6, opposite=3)


def test_every_setting_corrects_its_opposite_for_the_number_of_settings():
    borderline = verdicts.Test("s", 0.9, 0.02)  # one setting alone would establish the opposite
    calm = verdicts.Test("s", 0.3, 0.7)
    assert borderline.verdict == FAILS
    combined = verdicts.every_setting([borderline, calm, calm])
    assert combined.p_opposite == pytest.approx(0.06) and combined.verdict == INCONCLUSIVE


def test_holm_runs_within_families_and_both_ways():
    strong = verdicts.Test("s", 0.004, 0.996)
    against = verdicts.Test("s", 0.996, 0.004)
    # one family of 4: 0.004 x 4 = 0.016 < 0.025 holds; 0.004 x 4 for the opposite too
    _, v = verdicts.apply_holm([strong, strong, against, against])
    assert v == [HOLDS, HOLDS, FAILS, FAILS]
    # the same rows beside 8 unrelated claims in their own family: the Holm step of the first family is unchanged
    noise = [verdicts.Test("s", 0.5, 0.5)] * 8
    adjusted, v = verdicts.apply_holm([strong, strong, against, against, *noise],
                                      ["paper"] * 4 + ["extension"] * 8)
    assert v[:4] == [HOLDS, HOLDS, FAILS, FAILS] and adjusted[0] == pytest.approx(0.016)
    # ... but in one family of 12 they are demoted, both ways (the opposite is Holm-adjusted as well)
    _, v = verdicts.apply_holm([strong, strong, against, against, *noise])
    assert v[:4] == [INCONCLUSIVE] * 4


def test_undecidable_rows_get_no_verdict_and_do_not_count_in_their_family():
    weak = verdicts.majority(5, 5)  # cannot decide
    marginal = verdicts.Test("s", 0.02, 0.98)
    adjusted, v = verdicts.apply_holm([weak, marginal], ["paper", "paper"])
    assert v == ["--", HOLDS] and np.isnan(adjusted[0]) and adjusted[1] == pytest.approx(0.02)


def test_a_permutation_test_with_too_few_draws_cannot_decide():
    """The steering claim's Test carries min_p = 1 / (N + 1): fewer than 39 draws cannot reach 0.025."""
    assert not verdicts.Test("permutation rank", 1 / 21, 1.0, min_p=1 / 21).decidable
    assert verdicts.Test("permutation rank", 1 / 101, 1.0, min_p=1 / 101).verdict == HOLDS


def test_reachability_is_judged_after_the_family_correction():
    """Issue 53 section 4: a six-dataset sign test (smallest p 1/64) and a rank among 100 draws (1/101) pass the
    Holm step of a family of several tests only if other claims hold first: ``--`` with that reason, not
    "inconclusive"; alone in its family the same design is decidable.  A t test (smallest p 0) is unaffected."""
    t_test = verdicts.superiority(0.02, 0.01, 0.03, df=4)
    six = verdicts.majority(6, 6)
    rank = verdicts.Test("permutation rank", 1 / 101, 1.0, min_p=1 / 101)
    alone = verdicts.in_families([six])[0]
    assert alone.decidable and alone.verdict == "holds"
    tests = verdicts.in_families([t_test, six, rank], ["a", "a", "a"])
    assert [t.family_tests for t in tests] == [3, 3, 3]
    assert tests[0].decidable and not tests[1].decidable and not tests[2].decidable
    assert "only if other claims of the family hold first" in tests[1].reason and "1/" not in tests[1].reason
    _, v = verdicts.apply_holm([t_test, six, rank], ["a", "a", "a"])
    assert v == ["holds", "--", "--"]
    _, v = verdicts.apply_holm([t_test, six], ["a", "b"])  # other families do not count
    assert v == ["holds", "holds"]


def test_a_design_that_cannot_detect_the_papers_effect_is_not_decidable():
    """Issue 53 section 6: the stability rows' MDE (0.11-0.16 mean |cos|) exceeds the gaps the paper reports;
    such a row carries ``--`` and says both numbers."""
    test = verdicts.superiority(0.03, -0.08, 0.14, df=2)
    assert test.decidable
    weak = dataclasses.replace(test, paper_effect=0.035)
    assert test.mde > 0.035 and not weak.decidable and weak.verdict == "--"
    assert "paper's effect (+0.035)" in weak.reason
    assert dataclasses.replace(test, paper_effect=test.mde + 0.01).decidable
