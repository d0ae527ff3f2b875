"""The theory's domain is checked, and its answers respect their limits (issue "Guarantees as properties", section 4).

Grouped by pattern: domain checks (an input outside its measured domain is refused up front, naming the argument).
"""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from scipy import integrate, special

import cgmt
from cgmt.validation import DELTA_MAX, KAPPA_MAX, check_kappa


# --------------------------------------------------------------------------------------------------------------
# domain checks
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kappa", [1e4, 1e9, 1e14, 1e300])
def test_kappa_beyond_domain_is_refused_naming_kappa(kappa):
    # at kappa = 1e14 the solver used to return the kappa = 0 answer (accuracy 0.5) with success=True; between 1e3
    # and 1e8 it failed or took seconds on ~1 point in 5 (benchmarks/cgmt_domain.py)
    with pytest.raises(ValueError, match=r"kappa must lie in \[0, 1000\].*noiseless"):
        cgmt.solve(2.0, 0.1, kappa)


def test_kappa_domain_edge_is_accepted_and_at_the_noiseless_limit():
    """At KAPPA_MAX the accuracy is the noiseless teacher's to within the label-flip probability 1 - Bayes: the
    accuracy against noisy labels and against clean ones differ by at most P(y != sign(x'beta*))."""
    assert check_kappa(KAPPA_MAX) == KAPPA_MAX
    edge = cgmt.solve(2.0, 0.1, KAPPA_MAX)
    flip = 1.0 - _bayes_accuracy(KAPPA_MAX)
    assert edge.success and 5e-4 < flip < 6e-4
    assert abs(edge.accuracy - (1.0 - np.arccos(edge.alignment) / np.pi)) <= flip


@pytest.mark.parametrize("delta", [1e7, 1e12, 1e300])
def test_delta_beyond_domain_is_refused_naming_delta(delta):
    # at delta = 1e300 the solver used to divide by zero (a raw ZeroDivisionError from the CLI)
    with pytest.raises(ValueError, match="delta must lie in"):
        cgmt.solve(delta, 0.1, 2.0)


def _bayes_accuracy(kappa):
    """P(sign(x'beta*) = y) for P(y=1|x) = sigmoid(x'beta*), x'beta* ~ N(0, kappa^2): E[sigmoid(|kappa z|)]."""
    return integrate.quad(lambda z: special.expit(kappa * abs(z)) * np.exp(-z * z / 2) / np.sqrt(2 * np.pi),
                          -np.inf, np.inf)[0]


@pytest.mark.parametrize("lam", [1e-3, 0.1, 10.0])
def test_delta_domain_edge_reaches_the_bayes_accuracy(lam):
    """delta -> infinity: the ridge estimator's direction converges to the teacher's, so the accuracy is the Bayes
    accuracy of the logistic teacher (an independent quadrature)."""
    edge = cgmt.solve(DELTA_MAX, lam, 2.0)
    assert edge.success and edge.accuracy == pytest.approx(_bayes_accuracy(2.0), abs=1e-5)


# --------------------------------------------------------------------------------------------------------------
# limits and monotonicity inside the domain
# --------------------------------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(delta=st.floats(0.05, 100.0), lam=st.floats(1e-4, 100.0), k1=st.floats(0.0, 50.0), k2=st.floats(0.0, 50.0))
def test_accuracy_is_non_decreasing_in_kappa(delta, lam, k1, k2):
    lo, hi = sorted((k1, k2))
    a, b = cgmt.solve(delta, lam, lo), cgmt.solve(delta, lam, hi)
    assert a.success and b.success
    assert b.accuracy >= a.accuracy - 1e-9


@settings(max_examples=20, deadline=None)
@given(log_lam=st.floats(-30.0, 30.0), kappa=st.floats(0.1, 50.0))
def test_delta_limit_reaches_the_bayes_accuracy_at_every_lam(log_lam, kappa):
    """delta -> infinity at any ridge strength: by the teacher's symmetry the population minimizer is along the
    teacher, so the accuracy tends to the Bayes accuracy (an independent quadrature) from below."""
    r = cgmt.solve(DELTA_MAX, 10.0 ** log_lam, kappa)
    gap = _bayes_accuracy(kappa) - r.accuracy
    assert r.success and -1e-9 <= gap <= 1e-5  # measured: at most 8e-6 (kappa = 50, lam >= 1e4)


@settings(max_examples=20, deadline=None)
@given(delta=st.floats(0.05, 100.0), log_lam=st.floats(-4.0, 4.0))
def test_kappa_limit_is_the_noiseless_answer(delta, log_lam):
    """kappa -> infinity: labels are sign(x'beta*), the accuracy against clean labels is 1 - angle / pi of the
    estimator's alignment; at the domain's edge the accuracy against the teacher's labels is within the label-flip
    probability 1 - Bayes of it, and at least the accuracy at kappa = KAPPA_MAX / 10 (non-decreasing in kappa)."""
    lam = 10.0 ** log_lam
    edge, inside = cgmt.solve(delta, lam, KAPPA_MAX), cgmt.solve(delta, lam, KAPPA_MAX / 10)
    assert edge.success and inside.success
    flip = 1.0 - _bayes_accuracy(KAPPA_MAX)
    assert abs(edge.accuracy - (1.0 - np.arccos(edge.alignment) / np.pi)) <= flip
    assert edge.accuracy >= inside.accuracy - 1e-9


@settings(max_examples=30, deadline=None)
@given(log_delta=st.floats(-3.0, np.log10(DELTA_MAX)), log_lam=st.floats(-30.0, 30.0),
       log_kappa=st.floats(-3.0, np.log10(KAPPA_MAX)))
@example(log_delta=2.0, log_lam=-8.0, log_kappa=2.0)  # the coarse rule's path stalled next to delta*(100) = 98.5
@example(log_delta=np.log10(838.0), log_lam=np.log10(1.05e-7), log_kappa=np.log10(9.32e7) - 5)
def test_every_converged_answer_is_within_its_limits(log_delta, log_lam, log_kappa):
    """Over the whole domain: success, and 1/2 <= accuracy <= Bayes accuracy, sigma > 0, gamma > 0."""
    r = cgmt.solve(10.0 ** log_delta, 10.0 ** log_lam, 10.0 ** log_kappa)
    assert r.success
    assert 0.5 - 1e-9 <= r.accuracy <= _bayes_accuracy(r.kappa) + 1e-9 and r.sigma > 0 and r.gamma > 0


def test_success_needs_the_answer_within_its_limits():
    """A converged residual is not enough: an answer outside its limits is status 5, success False."""
    from cgmt.result import outcome, within_limits
    from empirical.common.failures import STATUS_MESSAGES

    assert outcome([0.0, 0.0, 0.0], 0, 3, 1e-10, limits=True)[1:3] == (True, 0)
    assert outcome([0.0, 0.0, 0.0], 0, 3, 1e-10, limits=False)[1:3] == (False, 5)
    assert "limits" in STATUS_MESSAGES[5]
    assert not within_limits(0.49, 0.8, 1.0, 1.0) and not within_limits(0.81, 0.8, 1.0, 1.0)
    assert not within_limits(0.7, 0.8, 0.0, 1.0) and not within_limits(0.7, 0.8, 1.0, -1.0)
    assert not within_limits(float("nan"), 0.8, 1.0, 1.0)


# --------------------------------------------------------------------------------------------------------------
# success is never reported for degenerate work: a validation split that cannot select C
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows", ["one class", "one row"])
def test_a_validation_split_that_cannot_select_C_is_refused(rows):
    from empirical import RaptorProbe
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 5)), np.arange(40) % 2
    Xv, yv = (rng.standard_normal((6, 5)), np.ones(6, dtype=int)) if rows == "one class" else \
        (rng.standard_normal((1, 5)), np.array([1]))
    with pytest.raises(ValueError, match=r"validation \(X_val, y_val\) split must have at least 1 example"):
        RaptorProbe(Cs=[0.1, 1.0]).fit(X, y, Xv, yv)


@pytest.mark.parametrize("argument,kwargs", [("teacher_exponent", dict(teacher_exponent=-1e3)),
                                             ("teacher_exponent", dict(teacher_exponent=1e3)),
                                             ("exponent", dict(exponent=1e3))])
def test_power_law_spectrum_refuses_exponents_beyond_float64_naming_them(argument, kwargs):
    from cgmt import Spectrum
    with pytest.raises(ValueError, match=f"^{argument} must lie in"):
        Spectrum.power_law(100, **kwargs)
    assert Spectrum.power_law(100, exponent=2.0, teacher_exponent=-3.0).p == 100  # inside: unchanged


def test_learning_curve_sizes_beyond_the_theory_domain_are_refused_naming_n_values():
    from empirical.probes._spectral_prediction import estimate_pool_model
    from empirical.probes.learning_curves import predict_learning_curve
    rng = np.random.default_rng(0)
    H, y = rng.standard_normal((200, 20)), np.arange(200) % 2
    H[:, 0] += y
    model = estimate_pool_model(H, y, teacher="calibrated", n_boot=0)
    with pytest.raises(ValueError, match="^n_values must be at most"):  # used to blame lam, never passed
        predict_learning_curve(model, [1e300])
    assert predict_learning_curve(model, [400]).accuracy[0] > 0.5


def test_raptor_plan_refuses_a_huge_target_n_before_any_model_work(capsys):
    from empirical import cli
    with pytest.raises(SystemExit) as exit_:  # argparse's exit 2, before any model is loaded
        cli.main(["plan", "--target-n", str(10 ** 18), "--dataset", "stsa", "--out", "unused"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1:]
    assert len(err) == 1 and "--target-n" in err[0]


@pytest.mark.parametrize("scale", [1e-300, 1e-20, 1e20, 1e300])
def test_sigma_scale_beyond_domain_is_refused_naming_eigenvalues(scale):
    # 1e-300 divided by zero; 1e20 did not return within a minute
    with pytest.raises(ValueError, match="^eigenvalues: Sigma's scale"):
        cgmt.solve_spectral(2.0, 0.1, np.full(50, scale), np.full(50, 0.02))


@settings(max_examples=8, deadline=None)
@given(log_c=st.floats(-12.0, 12.0), delta=st.floats(0.3, 10.0), kappa=st.floats(0.3, 4.0))
def test_spectral_solver_equals_the_isotropic_one_for_sigma_c_identity_at_every_scale(log_c, delta, kappa):
    """x ~ N(0, c I / p) is x~ sqrt(c) with x~ isotropic: the same estimator at lam / c, the same accuracy."""
    c, p, lam = 10.0 ** log_c, 40, 0.1
    iso = cgmt.solve(delta, lam, kappa)
    spec = cgmt.solve_spectral(delta, lam * c, np.full(p, c), np.full(p, kappa ** 2 / (c * p)))
    assert iso.success and spec.success
    assert spec.accuracy == pytest.approx(iso.accuracy, abs=1e-7)


@pytest.mark.parametrize("call", [
    lambda d: cgmt.solve_spectral(d, 0.1, np.ones(20), np.full(20, 0.2)),
    lambda d: cgmt.solve_spectral_path(d, [1.0, 0.1], np.ones(20), np.full(20, 0.2)),
    lambda d: cgmt.spectral_stability(d, 0.1, cgmt.Spectrum.isotropic(20, 1.0)),
    lambda d: cgmt.Spectrum.power_law(20).solve(d, 0.1),
])
def test_spectral_delta_beyond_its_domain_is_refused_with_the_reason(call):
    """Every spectral entry point refuses delta > SPECTRAL_DELTA_MAX (the residual's rounding floor, ~ delta x eps,
    reaches the tolerance: 18 of ~2,750 random solves above 3.8e4 stopped at 1.2e-10 to 5.5e-10) and accepts it."""
    from cgmt.validation import SPECTRAL_DELTA_MAX
    with pytest.raises(ValueError, match=r"delta must lie in \(0, 10000\] for the spectral theory.*rounding"):
        call(2 * SPECTRAL_DELTA_MAX)
    out = call(SPECTRAL_DELTA_MAX)
    results = out if isinstance(out, list) else [out]
    assert all(r.success for r in results)
