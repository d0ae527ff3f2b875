"""sims.fit_ridge_logistic (via empirical.logistic._solver) against scikit-learn, and the leave-one-out gamma."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.linear_model import LogisticRegression

from sims import fit_ridge_logistic, loo_gamma, objective_gradient, sample


@settings(max_examples=12)
@given(n=st.integers(20, 240), p=st.integers(10, 120), lam=st.floats(1e-3, 1e2), kappa=st.floats(0, 6),
       seed=st.integers(0, 2**16))
def test_matches_sklearn_on_the_same_objective(n, p, lam, kappa, seed):
    d = sample(n, p, kappa, seed)
    if len(np.unique(d.y)) < 2:
        return
    res = fit_ridge_logistic(d.X, d.y, lam)
    assert res.success and res.grad_norm <= 1e-10, res.message
    C = 1.0 / ((n / p) * lam)
    # scikit-learn's exact Newton solver on the same objective: agrees to round-off
    nc = LogisticRegression(C=C, fit_intercept=False, solver="newton-cholesky", tol=1e-14, max_iter=1000)
    ref = nc.fit(d.X, d.y).coef_.ravel()
    scale = max(1.0, np.linalg.norm(res.coef))
    assert np.linalg.norm(ref - res.coef) <= 1e-7 * scale
    # scikit-learn's default solver at a tight tolerance: agrees to its own (looser) accuracy, and its
    # gradient of the theory objective is never smaller than ours by more than round-off
    lb = LogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=100000).fit(d.X, d.y).coef_.ravel()
    assert np.linalg.norm(lb - res.coef) <= 1e-4 * scale
    assert np.linalg.norm(objective_gradient(d.X, d.y, lb, lam)) >= 0.1 * res.grad_norm


def test_objective_scaling_C_is_one_over_delta_lambda():
    # fit_ridge_logistic passes C = 1/(delta lam) to the solver: check that its answer is stationary for
    # the theory objective (1/n) sum loss + lam/(2p)|b|^2, with a finite-difference gradient
    d = sample(60, 40, 2.0, 4)
    lam = 0.3
    res = fit_ridge_logistic(d.X, d.y, lam)

    def F(b):
        return np.mean(np.logaddexp(0, -d.y * (d.X @ b))) + lam / (2 * 40) * b @ b
    e = np.eye(40)
    h = 1e-5
    fd = np.array([(F(res.coef + h * e[j]) - F(res.coef - h * e[j])) / (2 * h) for j in range(40)])
    assert np.max(np.abs(fd)) < 1e-9
    g = objective_gradient(d.X, d.y, res.coef + 0.01, lam)
    fd2 = np.array([(F(res.coef + 0.01 + h * e[j]) - F(res.coef + 0.01 - h * e[j])) / (2 * h) for j in range(40)])
    assert np.allclose(g, fd2, atol=1e-9)


@pytest.mark.parametrize("n,p", [(300, 120), (80, 120)])  # primal (n >= p) and Woodbury (n < p) branches
def test_loo_gamma_equals_brute_force(n, p):
    d = sample(n, p, 3.0, 9)
    lam = 0.05
    beta = fit_ridge_logistic(d.X, d.y, lam).coef
    s = d.X @ beta
    w = 1 / (1 + np.exp(-s)) / (1 + np.exp(s))
    q = []
    for i in range(n):
        keep = np.arange(n) != i
        H = (d.X[keep].T * w[keep]) @ d.X[keep] + lam * n / p * np.eye(p)
        q.append(d.X[i] @ np.linalg.solve(H, d.X[i]))
    assert np.isclose(loo_gamma(d.X, d.y, beta, lam), np.mean(q), rtol=1e-9)


def test_loo_gamma_large_lambda_limit():
    # gamma -> 1/(delta lam) * mean ||x_i||^2 as lam -> infinity (the theory's gamma ~ 1/(delta lam))
    n, p, lam = 200, 100, 1e4
    d = sample(n, p, 1.0, 2)
    beta = fit_ridge_logistic(d.X, d.y, lam).coef
    g = loo_gamma(d.X, d.y, beta, lam)
    assert np.isclose(g * (n / p) * lam, np.mean(np.sum(d.X**2, 1)), rtol=1e-3)


def test_loo_gamma_predicts_leave_one_out_refits():
    # the defining property: x_i'b_hat - x_i'b_hat_{-i} = gamma_i y_i sigmoid(-y_i x_i'b_hat) up to the
    # curvature change between b_hat and b_hat_{-i} (second order, small at moderate lam)
    n, p, lam = 200, 100, 1.0
    d = sample(n, p, 2.0, 5)
    beta = fit_ridge_logistic(d.X, d.y, lam).coef
    s = d.X @ beta
    w = 1 / (1 + np.exp(-s)) / (1 + np.exp(s))
    H = (d.X.T * w) @ d.X + lam * n / p * np.eye(p)
    for i in range(0, n, 40):
        keep = np.arange(n) != i
        # the left-out objective has n-1 points but the same ridge lam n/p in the unnormalised scale
        b_i = fit_ridge_logistic(d.X[keep], d.y[keep], lam * n / (n - 1)).coef
        hi = d.X[i] @ np.linalg.solve(H, d.X[i])
        gi = hi / (1 - w[i] * hi)
        jump = s[i] - d.X[i] @ b_i
        pred = gi * d.y[i] / (1 + np.exp(d.y[i] * s[i]))
        assert abs(jump - pred) <= 0.05 * abs(pred) + 1e-8


@pytest.mark.parametrize("lam", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_lambda(lam):
    d = sample(10, 5, 1.0, 0)
    with pytest.raises(ValueError, match="lam"):
        fit_ridge_logistic(d.X, d.y, lam)


def test_bad_data():
    d = sample(10, 5, 1.0, 0)
    with pytest.raises(ValueError, match="y"):
        fit_ridge_logistic(d.X, (d.y + 1) / 2, 1.0)
    X = d.X.copy()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        fit_ridge_logistic(X, d.y, 1.0)


def test_a_fit_that_misses_its_tolerance_warns_or_raises_and_the_replicate_reads_it_quietly():
    """sims.fit_ridge_logistic follows the one failure convention (empirical.common.failures.report):
    ConvergenceWarning and success=False, or ConvergenceError with strict=True; measure_replicate reads ``success``
    itself, quietly."""
    import warnings

    from empirical.common.failures import ConvergenceError, ConvergenceWarning
    from sims import measure_replicate, sample

    data = sample(200, 50, 2.0, 0)
    with pytest.warns(ConvergenceWarning, match="sims.fit_ridge_logistic"):
        assert not fit_ridge_logistic(data.X, data.y, 0.1, tol=1e-300).success  # below the round-off floor
    with pytest.raises(ConvergenceError):
        fit_ridge_logistic(data.X, data.y, 0.1, tol=1e-300, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        rec = measure_replicate(2.0, 0.1, 2.0, 50, 0, tol=1e-300, stability=False, subsample=False, gamma=False)
    assert rec["success"] is False
