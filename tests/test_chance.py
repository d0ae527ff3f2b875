"""The suite's Monte Carlo agreement rule (tests/_chance.py) tested on simulated data where the theory holds exactly,
its power against a real 2 % error, and the suite's budget of chance failures.

Each check here that itself decides on random numbers compares a count of simulated trials with the binomial
distribution at a tail of 1e-7 on each side (seeded; chance failure rate <= 1e-6 per run in all, registered in
``CHANCE_RATES``).
"""
from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from _chance import (
    CHANCE_RATES,
    SUITE_RATE,
    UNRATED,
    assert_mc_agrees,
    mc_check,
    mc_table,
    normal_threshold,
    rejection_probability,
    rule_fails,
    t_threshold,
)
from scipy import stats

TAIL = 1e-7  # each binomial bound below is exceeded by chance with probability <= TAIL


def _binomial_range(n, p):
    """[lo, hi] that Binomial(n, p) leaves with probability <= 2 TAIL."""
    return stats.binom.ppf(TAIL, n, p), stats.binom.isf(TAIL, n, p)


def test_threshold_is_the_bonferroni_student_t_quantile():
    assert t_threshold(6, 8, 1e-5) == pytest.approx(stats.t.ppf(1 - 1e-5 / 16, 5), rel=1e-9)
    assert 2 * stats.t.sf(t_threshold(40, 24, 1e-5), 39) * 24 == pytest.approx(1e-5, rel=1e-9)
    # more replicates: towards the normal quantile; more comparisons or a smaller rate: larger
    assert t_threshold(6, 24) > t_threshold(40, 24) > t_threshold(10 ** 6, 24) > normal_threshold(24, 1e-5)
    assert t_threshold(10 ** 6, 24) == pytest.approx(normal_threshold(24, 1e-5), rel=1e-4)
    assert t_threshold(40, 48) > t_threshold(40, 24) and t_threshold(40, 24, 1e-6) > t_threshold(40, 24, 1e-5)
    for bad in ((1, 8, 1e-5), (6, 0, 1e-5), (6, 8, 0.0), (6, 8, 1.0)):
        with pytest.raises(ValueError):
            t_threshold(*bad)


def test_the_table_check_reports_each_t_statistic_against_its_threshold():
    rng = np.random.default_rng(0)
    samples = {"a": rng.normal(1.0, 0.1, 40), "b": rng.normal(5.0, 1.0, 40), "c": rng.normal(0.0, 1.0, 40)}
    table = mc_table(samples, {"a": 1.0, "b": 5.0, "c": float("nan")})
    checked = assert_mc_agrees(table, comparisons=3)
    assert checked.ok.all() and np.allclose(checked.threshold, t_threshold(40, 3))
    assert checked.t.iloc[0] == pytest.approx((samples["a"].mean() - 1.0) / (samples["a"].std(ddof=1) / math.sqrt(40)))
    wrong = table.assign(theory=[1.5, 5.0, float("nan")])
    with pytest.raises(AssertionError, match=r"(?s)Bonferroni over 3 comparisons.*threshold.*\ba\b.*False"):
        assert_mc_agrees(wrong, comparisons=3, context="demo")
    # an allowance (a number, per quantity, or a function of the row) widens the limit by exactly that much
    near = table.assign(theory=[samples["a"].mean() + checked.limit.iloc[0] + 0.02, 5.0, float("nan")])
    assert not mc_check(near, comparisons=3).ok.iloc[0]
    for allowance in (0.03, {"a": 0.03}, lambda row: 0.03 if row["quantity"] == "a" else 0.0):
        assert mc_check(near, comparisons=3, allowance=allowance).ok.all()
    assert not mc_check(table.assign(se=np.nan), comparisons=3).ok.iloc[0]  # no standard error: not agreement


def _trials(rng, n, replicates, sd, corr=0.0):
    """n trials of `replicates` draws of len(sd) Gaussian quantities (equicorrelated `corr`), mean 0."""
    k = len(sd)
    common = rng.standard_normal((n, replicates, 1))
    x = math.sqrt(corr) * common + math.sqrt(1 - corr) * rng.standard_normal((n, replicates, k))
    return x * np.asarray(sd)


def _run_rule(x, theory, rate, comparisons, allowance=0.0):
    """Fraction of trials in which the rule fails some quantity, and the per-trial failures."""
    R = x.shape[1]
    mean, se = x.mean(axis=1), x.std(axis=1, ddof=1) / math.sqrt(R)
    fails = rule_fails(mean - theory, se, R, comparisons, rate, allowance).any(axis=1)
    return fails


@pytest.mark.parametrize("replicates", [6, 100])
def test_false_failure_rate_where_the_theory_holds_exactly(replicates):
    """Replicates ~ Normal(theory, sd) exactly: with 24 independent quantities the rule fails a trial with
    probability 1 - (1 - rate / 24)^24 (just under the rate: Bonferroni is exact up to overlaps), with correlated
    quantities and with a bias as large as the allowance at most the rate.  Checked at rate 0.05 (measurable: 20,000
    trials, 5,000 with 100 replicates) with 6 replicates, where Student's t matters (the normal quantile would fail
    ~28 % of trials), and with 100.  The same formula at rate 1e-5 is what the tests use; its tail is the t
    distribution's by construction."""
    rng = np.random.default_rng(20260601 + replicates)
    n, k, rate = 20_000 if replicates < 20 else 5_000, 24, 0.05
    sd = np.linspace(0.01, 3.0, k)
    theory = np.zeros(k)
    exact = 1 - (1 - rate / k) ** k
    allowance = 0.3 * sd  # a bias exactly at the allowance, in every quantity

    def count(corr=0.0, bias=0.0, allow=0.0):
        return sum(_run_rule(_trials(rng, 1000, replicates, sd, corr) + bias, theory, rate, k, allow).sum()
                   for _ in range(n // 1000))

    lo, hi = _binomial_range(n, exact)
    independent = count()
    assert lo <= independent <= hi, (independent / n, exact)
    correlated = count(corr=0.8)
    assert correlated <= _binomial_range(n, rate)[1], correlated / n
    biased = count(bias=allowance, allow=allowance)
    assert biased <= _binomial_range(n, rate)[1], biased / n
    if replicates == 6:  # the normal quantile in place of t's: far too many failures
        x = _trials(rng, n, replicates, sd)
        z = normal_threshold(k, rate)
        naive = (np.abs(x.mean(1)) > z * x.std(1, ddof=1) / math.sqrt(replicates)).any(axis=1)
        assert naive.mean() > 0.2


def test_per_comparison_tail_at_a_small_rate():
    """One quantity, 100 replicates, rate 1e-3: 400,000 trials give ~400 failures, the t tail to +-25 %."""
    rng = np.random.default_rng(7)
    n = 400_000
    fails = np.zeros(0, bool)
    for _ in range(8):
        x = rng.standard_normal((n // 8, 100))
        fails = np.r_[fails, rule_fails(x.mean(1), x.std(1, ddof=1) / 10.0, 100, 1, 1e-3)]
    lo, hi = _binomial_range(n, 1e-3)
    assert lo <= fails.sum() <= hi


def test_power_function_matches_simulation_and_the_noncentral_t():
    """``rejection_probability`` (used to state each test's power) against simulated trials, with and without an
    allowance, and against scipy's noncentral t where that applies."""
    d, R, K = 0.6, 100, 24
    c = t_threshold(R, K)
    nct = stats.nct.sf(c, R - 1, d * math.sqrt(R)) + stats.nct.cdf(-c, R - 1, d * math.sqrt(R))
    assert rejection_probability(d, R, K) == pytest.approx(nct, rel=1e-6)
    assert rejection_probability(0.0, R, K) * K == pytest.approx(1e-5, rel=1e-6)
    rng = np.random.default_rng(11)
    n = 20_000
    for shift, allowance in ((0.6, 0.0), (0.8, 0.2), (0.5, 0.05)):
        x = rng.standard_normal((n, R)) + shift
        fails = rule_fails(x.mean(1), x.std(1, ddof=1) / math.sqrt(R), R, K, 1e-5, allowance)
        p = rejection_probability(shift, R, K, allowance_over_sd=allowance)
        lo, hi = _binomial_range(n, p)
        assert lo <= fails.sum() <= hi, (shift, allowance, fails.mean(), p)


def test_budget_of_chance_failures():
    """Every test registered in CHANCE_RATES (and in UNRATED, the ones still without a computed rate) exists, and the
    suite's chance failures sum to <= SUITE_RATE."""
    assert 0 < sum(CHANCE_RATES.values()) <= SUITE_RATE, sum(CHANCE_RATES.values())
    assert not set(CHANCE_RATES) & set(UNRATED)
    root = Path(__file__).parent
    for key in [*CHANCE_RATES, *UNRATED]:
        path, _, name = key.partition("::")
        tree = ast.parse((root.parent / path).read_text())
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in names, key
    assert all(0 < rate <= 3e-5 for rate in CHANCE_RATES.values())


# One replicate's coefficient of variation (sd / |theory|) at p = 300 over the spectral test's box, median and largest
# of 17 cases (benchmarks/spectral_finite_size.py, 600 replicates each): the inputs of that test's power statement.
SPECTRAL_CV = {"alpha": (0.0979, 0.1980), "sigma": (0.0707, 0.1232), "margin": (0.1133, 0.2230),
               "accuracy": (0.0144, 0.0270), "alignment": (0.0365, 0.1256), "euclidean_alignment": (0.1488, 0.3621),
               "cos_subsample": (0.0818, 0.1210), "cos_subsample_raw": (0.0932, 0.1346)}
# the relative error each quantity's check detects with 90 % power at the median case, as stated in
# tests/test_spectral_theory.py
SPECTRAL_MDE = {"accuracy": 0.014, "alignment": 0.042, "cos_subsample": 0.089, "alpha": 0.098,
                "cos_subsample_raw": 0.099, "sigma": 0.100, "euclidean_alignment": 0.153, "margin": 0.155}


def test_the_spectral_tests_stated_power():
    """The power numbers stated in tests/test_spectral_theory.py follow from its design (R, K, rate, allowance) and
    the measured spread of one replicate: a 2 % error in the accuracy is found with power 1.00 at the median case and
    0.54 at the noisiest; the other quantities' 90 %-power errors are those stated (none reaches 2 %)."""
    from scipy.optimize import brentq
    from test_spectral_theory import MC_ALLOWANCE, MC_EXAMPLES, MC_RATE, MC_REPLICATES

    R, K = MC_REPLICATES, len(MC_ALLOWANCE) * MC_EXAMPLES
    assert t_threshold(R, K, MC_RATE) == pytest.approx(5.94, abs=0.005)

    def power(q, rel_error, cv):
        return rejection_probability(rel_error / cv, R, K, MC_RATE, allowance_over_sd=MC_ALLOWANCE[q] / cv)

    med, worst = SPECTRAL_CV["accuracy"]
    assert power("accuracy", 0.02, med) > 0.995 and round(power("accuracy", 0.02, worst), 2) == 0.54
    for q, stated in SPECTRAL_MDE.items():
        mde = brentq(lambda x: power(q, x, SPECTRAL_CV[q][0]) - 0.9, 1e-4, 2.0)
        assert mde == pytest.approx(stated, abs=0.0006), (q, mde)
        assert (mde <= 0.02) == (q == "accuracy")
