"""The structure, two-replica, learning-curve and finite-size rows of the claims table test the paper's words (issue 53
section 4), on synthetic tables shaped like the published ones."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from paper_figures import claims, output
from paper_figures.predictor_claims import LEARNING_PREDICTOR, predictor_claims

FINITE_SIZE_CLAIM = "simulation converges to the theory as p grows (bias falls with p)"


def _one(rows, word):
    (row,) = [r for r in rows if word in r["claim"]]
    return row


# ---------------------------------------------------------------------------------------------------------------
# structure: the paper's correlation claim and our MAE comparison are two rows
# ---------------------------------------------------------------------------------------------------------------
def test_the_structure_correlation_is_the_papers_row_and_the_mae_comparison_an_extension(tmp_path):
    """The paper claims a correlation along delta (Spearman, Pearson), not a win over a power law: its row shows the
    medians as reproduced and says a monotone learning curve reaches them too; the MAE test is ours (the old builder
    made one paper-family row of the MAE test)."""
    rho, r = [1.0, 1.0, 0.6, 0.771, 0.986, 0.812], [0.969, 0.996, 0.726, 0.675, 0.929, 0.955]
    base_rho, base_r = [1.0, 1.0, 0.943, 0.771, 0.986, 0.812], [0.967, 0.994, 0.887, 0.668, 0.908, 0.974]
    mae = [0.062, 0.085, 0.067, 0.009, 0.046, 0.131]
    output.save_table(pd.DataFrame(dict(dataset=np.repeat(["stsa", "common", "hateeval"], 2), layer=[10, 20] * 3,
                                        rho_s=rho, r=r, mae=mae, baseline_rho_s=base_rho, baseline_r=base_r,
                                        baseline_mae=[0.018, 0.007, 0.028, 0.075, 0.016, 0.009])),
                      tmp_path, "structure_summary")
    rows = [r for r in predictor_claims(tmp_path / "tables") if r["area"] == "structure"]
    assert len(rows) == 2
    correlation, versus = _one(rows, "track the measured ones"), _one(rows, "beats a power-law")
    assert correlation["family"] == "paper" and correlation["test"] is None
    assert "Spearman 0.86" in correlation["paper"] and "Pearson 0.90" in correlation["paper"]
    assert f"median Spearman {np.median(rho):.2f} [" in correlation["ours"]
    assert f"median Pearson {np.median(r):.2f} [" in correlation["ours"] and "reproduced" in correlation["ours"]
    assert (f"monotone in delta by construction, reaches median Spearman {np.median(base_rho):.2f} and Pearson "
            f"{np.median(base_r):.2f}") in correlation["ours"]
    assert versus["family"] == "extension" and "0.86" not in versus["paper"] and versus["test"] is not None
    table = claims.claims_table(tmp_path).set_index("claim")
    assert table.loc[correlation["claim"], "verdict"] == "--" and table.loc[versus["claim"], "family"] == "extension"


# ---------------------------------------------------------------------------------------------------------------
# the two-replica theory on real layers: Spearman beside the MAE, for both formulas
# ---------------------------------------------------------------------------------------------------------------
def test_the_layer_stability_row_shows_the_papers_spearman_beside_ours(tmp_path):
    records = {"hateeval": (0.590, 0.084, 0.148, 0.224), "sarcasm": (0.024, 0.095, 0.140, 0.250),
               "stsa": (0.548, 0.905, 0.114, 0.328)}
    for name, (rho, paper_rho, mae, paper_mae) in records.items():
        output.save_json(dict(dataset=name, n_layers=8, predicted_spearman=rho, paper_formula_spearman=paper_rho,
                              mean_abs_error=mae, paper_formula_mean_abs_error=paper_mae), tmp_path,
                         f"stability_theory_corr_{name}")
    row = claims.claims_table(tmp_path).set_index("claim").loc[
        "isotropic two-replica theory predicts real per-layer stability"]
    assert "stsa: Spearman 0.55 (paper's formula 0.91), mean abs error 0.114 (paper's formula 0.328)" in row.ours
    assert "ranks the layers better (higher Spearman) on 2/3 datasets (sarcasm, stsa)" in row.ours
    assert row.verdict == "--"


# ---------------------------------------------------------------------------------------------------------------
# learning curves: the datasets are the units; bias, coverage count and the no-gain forecast are reported
# ---------------------------------------------------------------------------------------------------------------
DATASETS = ("common", "counterfact", "hateeval", "sarcasm", "stsa")


def _learning_tables(tmp_path, gains, coverage, bias, no_gain_bias, flat="counterfact"):
    """``learning_curves_by_draw`` at the goal cell (5 draws per dataset; the power law's MAE above the theory's by
    the dataset's gain, the draws nearly alike) and ``learning_curves`` (bias at 2x, 4x, 8x: 0.4, 0.7 and 1 times
    ``bias`` for the theory and ``no_gain_bias`` for "no gain", except on ``flat``, where the theory's forecast is
    the pool's accuracy plus 0.001)."""
    rng = np.random.default_rng(5)
    rows = []
    for name, gain, cov in zip(DATASETS, gains, coverage):
        for draw in range(5):
            theory = 0.03 + 0.001 * rng.standard_normal()
            power_law = theory + gain + 0.001 * rng.standard_normal()
            for method, mae in ((LEARNING_PREDICTOR, theory), ("power_law", power_law), ("no_gain", theory + 0.02)):
                rows.append(dict(dataset=name, pool=400, multiple=8, draw=draw, method=method, mae=mae,
                                 coverage=cov[draw] if method == LEARNING_PREDICTOR else 0.5, layers=10))
    output.save_table(pd.DataFrame(rows), tmp_path, "learning_curves_by_draw")
    summary = []
    for name, b, nb in zip(DATASETS, bias, no_gain_bias):
        for multiple, share in ((2, 0.4), (4, 0.7), (8, 1.0)):
            summary += [dict(dataset=name, pool=400, multiple=multiple, method="no_gain", bias=nb * share),
                        dict(dataset=name, pool=400, multiple=multiple, method=LEARNING_PREDICTOR,
                             bias=nb * share + 0.001 if name == flat else b * share)]
    output.save_table(pd.DataFrame(summary), tmp_path, "learning_curves")


def test_the_learning_curve_test_takes_the_datasets_as_units(tmp_path):
    """Four datasets gain 0.02 and one loses 0.02, each over nearly identical draws: stratified by dataset (the old
    test) the interval excludes 0; with the datasets as the units (t over 5 datasets, 4 df) it does not."""
    gains = (0.02, -0.02, 0.02, 0.02, 0.02)
    _learning_tables(tmp_path, gains, [[0.9] * 5] * 5, [-0.02] * 5, [-0.05] * 5)
    rows = predictor_claims(tmp_path / "tables")
    power = _one(rows, "power-law learning curve fitted")
    by_draw = output.load_table(tmp_path, "learning_curves_by_draw")
    wide = by_draw.pivot_table(index=["dataset", "draw"], columns="method", values="mae")
    per_dataset = (wide["power_law"] - wide[LEARNING_PREDICTOR]).groupby(level="dataset").mean()
    expected = stats.ttest_1samp(per_dataset, 0.0, alternative="greater").pvalue
    assert power["test"].p == pytest.approx(expected, rel=1e-9) and power["test"].verdict == "inconclusive"
    assert "over 5 datasets (the units" in power["ours"] and "the other way on counterfact" in power["ours"]
    assert "as fixed strata (scope: these datasets only" in power["ours"]


def test_the_learning_curve_goal_row_reports_bias_coverage_and_a_no_gain_forecast(tmp_path):
    # coverage of common: the mean of its draws is 0.8 less one bit (0.7999999999999999), on the goal's bound
    coverage = [[0.6, 0.7, 0.8, 0.9, 1.0], [0.7] * 5, [1.0] * 5, [0.98] * 5, [0.86] * 5]
    bias = (-0.026, -0.067, -0.005, -0.006, -0.024)
    _learning_tables(tmp_path, (0.02,) * 5, coverage, bias, [-0.047, -0.069, -0.027, -0.047, -0.062])
    goal = _one(predictor_claims(tmp_path / "tables"), "learning curve's goal")
    assert "in the goal's 0.8-0.97 on 2/5 datasets" in goal["ours"]
    summary = output.load_table(tmp_path, "learning_curves")
    at_goal = summary[(summary.multiple == 8) & (summary.method == LEARNING_PREDICTOR)].bias
    assert f"forecast bias (predicted - measured) negative on 5/5 datasets, mean {at_goal.mean():+.3f}" in goal["ours"]
    assert "counterfact: the forecast is 'no gain' at 2x, 4x, 8x" in goal["ours"]
    assert "the weak-concept case is not handled" in goal["ours"] and goal["test"] is None
    assert goal["ours"].count("the forecast is 'no gain'") == 1  # the datasets whose forecast rises are not named


# ---------------------------------------------------------------------------------------------------------------
# finite size: every p, t with n - 2 degrees of freedom
# ---------------------------------------------------------------------------------------------------------------
PS = (25, 50, 100, 200, 400)


def _finite_size_tables(tmp_path, sigma_bias, se=0.0014):
    """``finite_size_convergence`` (alpha within its noise at every p, sigma biased as given) and the slopes table
    the section writes from it (its bias slope over the leading run of resolved p, known-variance standard error)."""
    alpha_bias = (-0.0020, 0.0011, -0.0016, 0.0009, 0.0012)
    conv = pd.DataFrame([dict(delta=2.0, lam=0.1, kappa=2.0, p=p, quantity=q, bias=b, abs_error=abs(b), se=se)
                         for q, biases in (("alpha", alpha_bias), ("sigma", sigma_bias)) for p, b in zip(PS, biases)])
    output.save_table(conv, tmp_path, "finite_size_convergence")
    resolved = int(np.argmin(np.abs(sigma_bias) > 3 * se)) if not (np.abs(sigma_bias) > 3 * se).all() else len(PS)
    x, y = np.log(PS[:resolved]), np.log(np.abs(sigma_bias[:resolved]))
    w = (np.abs(sigma_bias[:resolved]) / se) ** 2
    xm = np.sum(w * x) / np.sum(w)
    slope, slope_se = np.sum(w * (x - xm) * y) / np.sum(w * (x - xm) ** 2), 1 / np.sqrt(np.sum(w * (x - xm) ** 2))
    output.save_table(pd.DataFrame(dict(delta=2.0, lam=0.1, kappa=2.0, quantity=["alpha", "sigma"],
                                        std_slope=[-0.5, -0.5], std_slope_se=0.007,
                                        abs_error_slope=[np.nan, slope], abs_error_slope_se=[np.nan, slope_se],
                                        resolved_ps=[0, resolved], resolved_p_max=[0, PS[resolved - 1]])),
                      tmp_path, "finite_size_slopes")


def _independent_wls_p(bias, se):
    """One-sided p of slope < 0: weighted least squares of log|bias| on log p (delta-method weights), residual
    variance max(1, chi^2 / (n - 2)), t with n - 2 df, by the normal equations."""
    X = np.column_stack([np.ones(len(PS)), np.log(PS)])
    W = np.diag((np.abs(bias) / se) ** 2)
    y = np.log(np.abs(bias))
    cov = np.linalg.inv(X.T @ W @ X)
    beta = cov @ X.T @ W @ y
    resid = y - X @ beta
    scale = max(1.0, float(resid @ W @ resid) / (len(PS) - 2))
    return stats.t.cdf(beta[1] / np.sqrt(cov[1, 1] * scale), len(PS) - 2)


def test_the_finite_size_slope_uses_every_p_with_t_at_n_minus_2_df(tmp_path):
    """The published shape: sigma's bias resolved at p <= 100, within 1.5 SE at 200, -2.7 SE at 400.  The old
    builder fitted the three resolved p with a normal quantile (p ~ 1e-20); now every p enters, t with 3 df."""
    sigma_bias = np.array([-0.0273, -0.01225, -0.0080, -0.00136, -0.00468])
    _finite_size_tables(tmp_path, sigma_bias)
    row = claims.claims_table(tmp_path).set_index("claim").loc[FINITE_SIZE_CLAIM]
    assert row.p == pytest.approx(_independent_wls_p(sigma_bias, 0.0014), rel=1e-9) and row.p > 1e-3
    assert "over all 5 p (25-400; t with 3 df" in row.ours and "tested on 1 of 2 quantities (sigma" in row.ours
    assert "alpha bias not resolved at >= 3 p" in row.ours and "not tested" in row.ours


def test_a_bias_that_rises_again_at_large_p_is_not_called_falling(tmp_path):
    """Resolved and falling at p <= 100, resolved again and larger at p = 400: the old builder saw only the leading
    run (holds); over every p the slope is not below 0."""
    sigma_bias = np.array([-0.0273, -0.0122, -0.0080, -0.0021, -0.0150])
    _finite_size_tables(tmp_path, sigma_bias)
    row = claims.claims_table(tmp_path).set_index("claim").loc[FINITE_SIZE_CLAIM]
    assert row.verdict_per_claim == "inconclusive" and row.p > 0.025
    assert "-0.0150 (-10.7 SE, above the bias at p = 200" in row.ours
