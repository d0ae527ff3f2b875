"""Chance failures of the test suite: the one rule for Monte Carlo against theory, and the suite's budget.

A test that decides on random numbers can fail although the code is right.  Each such test states its *chance
failure rate*: the probability, over the draw of its seed (any seed, not only the one CI happens to use; the ``ci``
Hypothesis profile is derandomized, ``explore`` is not), that it fails with correct code.  ``CHANCE_RATES`` lists
them; their sum, the suite's rate per run, is at most ``SUITE_RATE`` = 1e-4 (tests/test_chance.py checks the sum and
that every entry names a real test).  ``UNRATED`` lists the tests that decide on random numbers whose rate is not
computed yet, with why.

The Monte Carlo agreement rule (``mc_check``, ``assert_mc_agrees``)
-------------------------------------------------------------------
Quantity j of one example has R_j independent replicates with mean m_j and standard error s_j = sd_j / sqrt(R_j)
(sd with ddof 1); the theory predicts theta_j.  With t_j = (m_j - theta_j) / s_j the check fails iff, for some j,

    |m_j - theta_j| > c_j s_j + a_j,    c_j = F^{-1}_{t, R_j - 1}(1 - rate / (2 K)),

F_{t, nu} the Student t distribution with nu = R_j - 1 degrees of freedom (s_j is estimated from the replicates),
K the number of comparisons one run of the test makes (quantities x examples, Hypothesis's explicit examples
included), ``rate`` the test's failure rate for Gaussian replicates (default ``DEFAULT_RATE`` = 1e-5; see "Skewed
replicates" for the rate a test states), and a_j >= 0 an allowance for
the finite-size bias (0 unless measured: a bound on |E m_j - theta_j| at the test's dimension, with the study that
measured it named where it is used).  If the replicates are Gaussian and |E m_j - theta_j| <= a_j, then
P(|m_j - theta_j| > c_j s_j + a_j) <= P(|t_{R_j - 1}| > c_j) = rate / K, and by the union bound (Bonferroni, valid
for any dependence between the quantities) the run fails with probability <= rate.

The rule's power against a real error Delta = E m - theta (``rejection_probability``): with d = Delta sqrt(R) / sd
and e = a sqrt(R) / sd, P(reject) = E_u[Phi(-c u - e - d) + Phi(-c u - e + d)], u = s sqrt(R) / sd distributed as
sqrt(chi^2_{R-1} / (R - 1)); with e = 0 this is the noncentral t tail P(|T_{R-1}(d)| > c).

For large-sample tests whose statistic is (close to) Gaussian with a known or precisely estimated scale,
``normal_threshold`` gives the same Bonferroni quantile of the standard normal.

Skewed replicates
-----------------
The rate above is exact for Gaussian replicates.  Simulation replicates are often skewed, and at the small levels
per comparison that the Bonferroni correction asks for, the tail of |t| is then fatter than Student's, by more the
further out it is read (the error of the t approximation is O(skewness^2 / R) in relative terms, times a power of
the threshold).  ``SKEW_INFLATION`` is P(|t| > c) / (its Student-t value) measured by simulation (gamma-distributed
replicates of the given skewness, 1e7-2e7 trials; and, in brackets, bootstrap trials from 600 real replicates of the
spectral test's alignment, skewness -1.06).  A test states its rate as the sum over its comparisons of
rate / K x the inflation for that quantity's largest measured skewness at the level rate / K.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
from scipy import integrate, stats

#: (replicates, skewness) -> {two-sided level per comparison: measured P(|t| > c) / level}; see the docstring
SKEW_INFLATION = {
    (100, 1.06): {4.2e-6: 8.3, 4.2e-7: 17.6, 4.2e-8: 43},  # bootstrap: 1e-6: 8.5, 1e-7: 23
    (100, 0.6): {4.2e-6: 3.2, 4.2e-7: 5.2, 4.2e-8: 10.7},
    (100, 0.4): {4.2e-6: 1.7, 4.2e-7: 1.9},
    (24, 0.35): {4.2e-6: 1.8, 4.2e-7: 1.9},
    (24, 0.66): {5.6e-6: 5.4, 5.6e-7: 8.2, 1.7e-7: 10.6},
    (20, 0.5): {1.1e-5: 2.7, 1.1e-6: 3.2},
}

#: the most chance failures per run of the whole suite (the sum of ``CHANCE_RATES``)
SUITE_RATE = 1e-4
#: a Monte Carlo agreement test's own failure rate unless it states another
DEFAULT_RATE = 1e-5


def t_threshold(replicates: int, comparisons: int, rate: float = DEFAULT_RATE) -> float:
    """c = t^{-1}_{R-1}(1 - rate / (2K)): the two-sided Bonferroni quantile of Student's t with R - 1 df."""
    if replicates < 2 or comparisons < 1 or not 0 < rate < 1:
        raise ValueError(f"need replicates >= 2, comparisons >= 1, 0 < rate < 1; got {replicates}, {comparisons}, "
                         f"{rate}")
    return float(stats.t.isf(rate / (2 * comparisons), replicates - 1))


def normal_threshold(comparisons: int, rate: float) -> float:
    """z = Phi^{-1}(1 - rate / (2K)): the two-sided Bonferroni quantile of the standard normal."""
    if comparisons < 1 or not 0 < rate < 1:
        raise ValueError(f"need comparisons >= 1, 0 < rate < 1; got {comparisons}, {rate}")
    return float(stats.norm.isf(rate / (2 * comparisons)))


def mc_table(samples: Mapping[str, np.ndarray], theory: Mapping[str, float]) -> pd.DataFrame:
    """Replicate values per quantity -> the table ``mc_check`` reads: quantity, mean, se, theory, replicates."""
    rows = []
    for q, x in samples.items():
        x = np.asarray(x, dtype=float)
        rows.append(dict(quantity=q, mean=float(x.mean()), se=float(x.std(ddof=1) / math.sqrt(x.size)),
                         theory=float(theory[q]), replicates=int(x.size)))
    return pd.DataFrame(rows)


Allowance = None | float | Mapping[str, float] | Callable[[pd.Series], float]


def _allowance(row, allowance: Allowance) -> float:
    if allowance is None:
        return 0.0
    if callable(allowance):
        return float(allowance(row))
    if isinstance(allowance, Mapping):
        return float(allowance.get(row["quantity"], 0.0))
    return float(allowance)


def rule_fails(diff, se, replicates, comparisons: int, rate: float = DEFAULT_RATE, allowance=0.0):
    """The rule on arrays (broadcast): True where |diff| > t_threshold(replicates, comparisons, rate) x se +
    allowance (or either is NaN), diff = mean - theory.  ``mc_check`` applies it to a table; tests/test_chance.py
    to simulated trials."""
    R = np.asarray(replicates)
    c = np.vectorize(lambda r: t_threshold(int(r), comparisons, rate), otypes=[float])(R) if R.ndim else \
        t_threshold(int(R), comparisons, rate)
    return ~(np.abs(diff) <= c * np.asarray(se) + np.asarray(allowance))  # NaN fails


def mc_check(table: pd.DataFrame, *, comparisons: int, rate: float = DEFAULT_RATE,
             allowance: Allowance = None) -> pd.DataFrame:
    """The rule applied row by row to a table with columns quantity, mean, se, theory and replicates (the tables of
    ``sims.compare``, ``sims.compare_spectral`` and ``mc_table``): adds t, threshold, allowance, limit
    (threshold x se + allowance) and ok.  Rows without a finite theory value are ok (nothing to compare)."""
    out = table.copy()
    out["t"] = (out["mean"] - out["theory"]) / out["se"]
    out["threshold"] = [t_threshold(int(r), comparisons, rate) for r in out["replicates"]]
    out["allowance"] = [_allowance(row, allowance) for _, row in out.iterrows()]
    out["limit"] = out["threshold"] * out["se"] + out["allowance"]
    fails = rule_fails((out["mean"] - out["theory"]).to_numpy(), out["se"].to_numpy(), out["replicates"].to_numpy(),
                       comparisons, rate, out["allowance"].to_numpy())
    out["ok"] = ~np.isfinite(out["theory"].to_numpy()) | ~fails
    return out


def assert_mc_agrees(table: pd.DataFrame, *, comparisons: int, rate: float = DEFAULT_RATE,
                     allowance: Allowance = None, context: str = "") -> pd.DataFrame:
    """``mc_check``, asserting every row ok; the message shows each quantity's t statistic against its threshold."""
    checked = mc_check(table, comparisons=comparisons, rate=rate, allowance=allowance)
    if not checked["ok"].all():
        cols = ["quantity", "mean", "theory", "se", "replicates", "t", "threshold", "allowance", "limit", "ok"]
        shown = checked[[c for c in cols if c in checked.columns]].to_string(index=False, float_format="%.5g")
        raise AssertionError(f"Monte Carlo disagrees with the theory{' (' + context + ')' if context else ''}: "
                             f"|mean - theory| > threshold x se + allowance (Student t, Bonferroni over "
                             f"{comparisons} comparisons, failure rate {rate:g} per run)\n{shown}")
    return checked


def rejection_probability(shift_over_sd: float, replicates: int, comparisons: int, rate: float = DEFAULT_RATE,
                          allowance_over_sd: float = 0.0) -> float:
    """P(the rule rejects one quantity) when E m - theta = shift_over_sd x sd and a = allowance_over_sd x sd, sd the
    standard deviation of one replicate (Gaussian replicates)."""
    R = int(replicates)
    c = t_threshold(R, comparisons, rate)
    d = shift_over_sd * math.sqrt(R)
    e = allowance_over_sd * math.sqrt(R)
    nu = R - 1

    def integrand(u):  # u = s / (sd / sqrt(R)), density of sqrt(chi2_nu / nu)
        dens = stats.chi2.pdf(nu * u * u, nu) * 2 * nu * u
        return dens * (stats.norm.cdf(-c * u - e - d) + stats.norm.cdf(-c * u - e + d))

    lo, hi = math.sqrt(stats.chi2.ppf(1e-12, nu) / nu), math.sqrt(stats.chi2.isf(1e-12, nu) / nu)
    return float(integrate.quad(integrand, lo, hi, limit=200, epsabs=1e-12)[0])


#: Every test that decides on random numbers and its chance failure rate per run (the probability, over its seed,
#: that it fails with correct code; the derivation is in the test's docstring or comment).  Sum <= SUITE_RATE.
CHANCE_RATES = {
    "tests/test_spectral_theory.py::test_monte_carlo_agrees_on_random_spectra": 2e-5,
    "tests/test_sims_theory.py::test_simulation_agrees_with_theory": 1e-5,
    "tests/test_sims_theory.py::test_paper_uncorrected_alpha_fails_the_same_check": 5e-6,
    "tests/test_sims_theory.py::test_stability_cosines_and_their_order": 6e-6,
    "tests/test_sims_theory.py::test_fresh_test_accuracy_estimates_the_formula_at_empirical_margin": 1e-6,
    "tests/test_sims_data.py::test_design_covariance_is_identity_over_p": 1e-6,
    "tests/test_sims_data.py::test_logistic_labels_match_teacher": 1e-6,
    "tests/test_stability_theory.py::test_theory_agrees_with_simulation": 1e-5,  # the three points together
    "tests/test_stability_theory.py::test_independent_formula_is_rejected_on_the_subsample_protocol": 1e-12,
    "tests/test_stability_theory.py::test_cross_expectation_against_plain_monte_carlo": 1e-6,
    "tests/test_ablation_protocol.py::test_theory_overlap_is_the_protocols_expected_overlap": 2e-6,  # two cases
    "tests/test_ablation_protocol.py::test_overlap_check_rejects_the_balanced_formula": 1.1e-6,
    "tests/test_learning_curves_section.py::test_shuffled_labels_are_not_separable_at_two_and_a_half_times_p": 7.5e-7,
    "tests/test_steering_null.py::test_a_random_direction_is_not_special": 2e-6,
    "tests/test_learning_curves.py::test_isotropic_curve_is_the_isotropic_theory_on_isotropic_data": 1e-6,
    "tests/test_learning_curves.py::test_intervals_cover_the_truth_and_narrow_with_the_pool": 1e-6,
    "tests/test_learning_curves.py::test_intervals_are_honest_90_percent_ones_from_weak_to_clear_concepts": 7e-6,
    "tests/test_learning_curves.py::test_prediction_converges_to_the_truth_as_the_pool_grows": 1e-6,  # estimated
    "tests/test_learning_curves.py::test_no_signal_predicts_chance": 1e-6,  # estimated
    "tests/test_spectral_prediction.py::test_pool_model_recovers_the_signal": 3e-6,  # estimated, three teachers
    "tests/test_stability_protocol.py::test_stability_protocol_raptor_and_dom": 1e-9,  # estimated: 9 sd
    "tests/test_stability_theory.py::test_participation_ratio": 1e-9,  # estimated: > 20 sd
    "tests/test_max_margin.py::test_exact_hard_margin_fits_agree_with_the_theory": 1e-5,  # as it states (Gaussian)
    "tests/test_chance.py::test_false_failure_rate_where_the_theory_holds_exactly": 1.2e-6,  # both cases
    "tests/test_chance.py::test_per_comparison_tail_at_a_small_rate": 2e-7,
    "tests/test_chance.py::test_power_function_matches_simulation_and_the_noncentral_t": 6e-7,
}

#: Tests that decide on random numbers whose rate is not computed yet, with why; each is a candidate for the rule.
UNRATED = {
    "tests/test_spectral_prediction.py::test_evaluate_split_on_gaussian_data": "0.6 < sweep[0] <= sweep[1] + 0.05: "
    "the spread of the pool-CV sweep over seeds is not measured",
    "tests/test_spectral_prediction.py::test_evaluate_split_predictions_use_no_test_row": "mean |pool_cv - truth| "
    "< 0.06: not measured over seeds",
    "tests/test_spectral_prediction.py::test_raptor_protocol_is_the_reported_stability": "|predicted - measured "
    "stability| < 0.1: not measured over seeds",
    "tests/test_stability_theory.py::test_real_embedding_stability_on_synthetic_layers": "kappa_hat within 25 %, "
    "errors < 0.05 / > 0.2, Spearman 1 over 4 layers: not measured over seeds",
    "tests/test_learning_curves.py::test_baselines_and_best_layer": "the clean layer predicted best against 3x noise: "
    "large margin, not measured",
    "tests/test_learning_curves.py::test_plan_labels_picks_the_clean_layer_and_reads_the_labels_needed": "large "
    "margin, not measured",
    "tests/test_learning_curves_section.py::test_section_writes_its_table_and_figure_and_resumes": "truth > 0.5 on "
    "synthetic layers: not measured",
    "tests/test_sims_fit.py::test_loo_gamma_predicts_leave_one_out_refits": "a second-order approximation within 5 % "
    "on one seeded sample: not measured over seeds",
}
