"""The verdict rules of the claims table (paper_figures.verdicts): each rule on data whose verdict is known,
p-values against scipy's tests on the same data, and the Holm step against a published example."""
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
    assert verdicts.majority(5, 5).verdict == INCONCLUSIVE  # p = 1/32 > 0.025: five datasets cannot establish it
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
