"""RaptorProbe: exactness against tight references, fold-back identity, rules, estimator API, bad input."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.linear_model import LogisticRegression

from empirical import RaptorProbe, select_C
from empirical.logistic import fit_l2_logistic


def raw_states(n, p, shift=1.5, seed=0, labels=(0, 1)):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    u = rng.standard_normal(p)
    u /= np.linalg.norm(u)
    H = rng.standard_normal((n, 4)) @ rng.standard_normal((4, p)) * 2 + rng.standard_normal((n, p))
    H += np.outer(2 * y - 1, u) * shift
    H[:, 0] = 40 * H[:, 0] + 7  # large-variance outlier dimension
    H[:, 1] *= 0.05  # s < 1: where the paper's max(s, 1) fold-back differs
    return H, np.asarray(labels)[y]


def tight_reference(Xtr, ytr, Xv, yv, Cs):
    mu, s = Xtr.mean(0), Xtr.std(0)
    s[s == 0] = 1
    A, Av = (Xtr - mu) / s, (Xv - mu) / s
    acc, w, b = [], None, 0.0
    for C in Cs:
        r = fit_l2_logistic(A, ytr, C, fit_intercept=True, w0=w, b0=b, tol=1e-10, method="direct")
        w, b = r.coef, r.intercept
        acc.append(np.mean(np.where(Av @ w + b > 0, 1, -1) == yv))
    return np.array(acc), mu, s


@pytest.mark.parametrize("n,p,shift", [(150, 20, 1.0), (100, 120, 1.5), (100, 60, 6.0)])
def test_matches_tight_reference_and_sklearn_refit(n, p, shift):
    H, y = raw_states(n, p, shift, seed=p)
    y_signed = 2.0 * y - 1
    tr, va = np.arange(0, int(0.75 * n)), np.arange(int(0.75 * n), n)
    Cs = np.logspace(-4, 2, 30)
    probe = RaptorProbe(Cs=Cs).fit(H[tr], y[tr], X_val=H[va], y_val=y[va])
    acc, mu, s = tight_reference(H[tr], y_signed[tr], H[va], y_signed[va], Cs)
    np.testing.assert_array_equal(probe.path_val_accuracy_, acc)
    ties = np.flatnonzero(acc == acc.max())
    assert probe.C_ == Cs[ties[0]] and probe.lambda_ == 1 / probe.C_
    # refit on train+val with train-only scaler, against scikit-learn at a tight tolerance
    A = (np.vstack([H[tr], H[va]]) - mu) / s
    sk = LogisticRegression(C=probe.C_, solver="newton-cholesky", tol=1e-14, max_iter=1000)
    sk.fit(A, np.r_[y_signed[tr], y_signed[va]])
    np.testing.assert_allclose(probe.coef_std_, sk.coef_[0], rtol=0, atol=1e-6 * np.linalg.norm(sk.coef_[0]))
    np.testing.assert_allclose(probe.scaler_mean_, mu)
    np.testing.assert_allclose(probe.scaler_scale_, s)


@settings(max_examples=20)
@given(seed=st.integers(0, 10_000), scale=st.floats(1e-3, 1e3), offset=st.floats(-100, 100))
def test_fold_back_identity_exact(seed, scale, offset):
    H, y = raw_states(60, 10, seed=seed)
    H = H * scale + offset
    probe = RaptorProbe(Cs=np.logspace(-2, 1, 6)).fit(H, y)
    Hn = np.random.default_rng(seed).standard_normal((9, 10)) * scale + offset
    std_logit = ((Hn - probe.scaler_mean_) / probe.scaler_scale_) @ probe.coef_std_ + probe.intercept_std_
    raw_logit = probe.decision_function(Hn)
    # 1e-10 relative, plus the float64 round-off of the raw dot product itself (|omega| . |h| * 1e-9
    # covers p=10 terms with large offsets, where omega @ h and b_raw cancel)
    assert np.all(np.abs(raw_logit - std_logit) <= 1e-10 * np.maximum(1.0, np.abs(std_logit)) + 1e-9 * (
        np.abs(probe.coef_) @ np.abs(Hn).T))


def test_paper_max1_fold_back_breaks_identity_when_s_below_one():
    H, y = raw_states(80, 10, seed=3)
    exact = RaptorProbe(Cs=np.logspace(-2, 1, 6)).fit(H, y)
    paper = RaptorProbe(Cs=np.logspace(-2, 1, 6), fold_back="paper_max1").fit(H, y)
    s = exact.scaler_scale_
    assert np.any(s < 1)
    np.testing.assert_allclose(paper.coef_ * np.maximum(s, 1), exact.coef_ * s)
    std_logit = ((H - exact.scaler_mean_) / s) @ exact.coef_std_ + exact.intercept_std_
    assert np.max(np.abs(paper.decision_function(H) - std_logit)) > 1e-3
    np.testing.assert_allclose(exact.decision_function(H), std_logit, rtol=1e-9, atol=1e-9)


def test_concept_vector_unit_and_oriented_and_string_labels():
    H, y = raw_states(100, 15, seed=4, labels=("neg", "pos"))
    probe = RaptorProbe(Cs=np.logspace(-3, 1, 10)).fit(H, y)
    v = probe.concept_vector_
    assert np.isclose(np.linalg.norm(v), 1.0)
    assert (H[y == "pos"] @ v).mean() > (H[y == "neg"] @ v).mean()
    assert set(probe.predict(H)) <= {"neg", "pos"}
    assert probe.score(H, y) > 0.7
    proba = probe.predict_proba(H)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert np.all((proba[:, 1] > 0.5) == (probe.predict(H) == "pos"))


def test_default_split_is_stratified_seed_42_and_deterministic():
    H, y = raw_states(100, 8, seed=5)
    a = RaptorProbe(Cs=np.logspace(-2, 1, 5)).fit(H, y)
    b = RaptorProbe(Cs=np.logspace(-2, 1, 5)).fit(H, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert RaptorProbe().get_params()["random_state"] == 42 and RaptorProbe().val_fraction == 0.2
    assert len(RaptorProbe().fit(H, y).path_val_accuracy_) == 100


def test_tie_rules():
    Cs = np.array([10.0, 0.1, 1.0, 0.01])
    acc = np.array([0.9, 0.9, 0.8, 0.7])
    assert select_C(Cs, acc, "most_regularized") == 1
    assert select_C(Cs, acc, "first") == 0
    asc = np.sort(Cs)
    acc2 = np.array([0.5, 0.9, 0.9, 0.9])
    assert select_C(asc, acc2, "first") == select_C(asc, acc2, "most_regularized") == 1


def test_fallback_without_validation_warns_and_uses_C1():
    H, y = raw_states(60, 8, seed=6)
    with pytest.warns(UserWarning, match="fallback"):
        probe = RaptorProbe(val_fraction=0.0).fit(H, y)
    assert probe.C_ == 1.0 and probe.fallback_
    mu, s = H.mean(0), H.std(0)
    r = fit_l2_logistic((H - mu) / s, 2.0 * y - 1, 1.0, fit_intercept=True)
    np.testing.assert_allclose(probe.coef_std_, r.coef, atol=1e-9 * np.linalg.norm(r.coef))


def test_paper_solver_option_runs_and_reports_path():
    H, y = raw_states(80, 10, seed=7)
    p = RaptorProbe(Cs=np.logspace(-3, 1, 8), solver="paper").fit(H, y)
    assert p.path_val_accuracy_.shape == (8,) and np.isfinite(p.coef_).all()


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(RaptorProbe(Cs=np.logspace(-2, 1, 6)), on_fail=None)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert failed == []


@pytest.mark.parametrize(
    "X,y,kw,match",
    [
        (np.full((10, 3), np.nan), np.arange(10) % 2, {}, "NaN|infinity"),
        (np.ones((10, 3)), np.zeros(10), {}, "one class"),
        (np.random.default_rng(0).standard_normal((12, 3)), np.arange(12) % 3, {}, "binary"),
        (np.ones((10, 3)), np.arange(9) % 2, {}, "inconsistent|mismatch"),
        (np.ones(10), np.arange(10) % 2, {}, "2D|2-D"),
        (np.random.default_rng(0).standard_normal((10, 3)), np.r_[np.zeros(9), 1], {}, "example"),
        (np.random.default_rng(0).standard_normal((10, 3)), np.arange(10) % 2, {"Cs": []}, "non-empty"),
        (np.random.default_rng(0).standard_normal((10, 3)), np.arange(10) % 2, {"Cs": [1.0, -1.0]}, "positive"),
        (np.random.default_rng(0).standard_normal((10, 3)), np.arange(10) % 2, {"tie_break": "last"}, "tie_break"),
        (np.random.default_rng(0).standard_normal((10, 3)), np.arange(10) % 2, {"val_fraction": 1.5}, "val_fraction"),
    ],
)
def test_bad_input(X, y, kw, match):
    with pytest.raises(ValueError, match=match):
        RaptorProbe(**kw).fit(X, y)


def test_bad_validation_split():
    H, y = raw_states(40, 5, seed=8)
    with pytest.raises(ValueError, match="together"):
        RaptorProbe().fit(H, y, X_val=H)
    with pytest.raises(ValueError, match="features"):
        RaptorProbe().fit(H, y, X_val=H[:, :3], y_val=y)
    with pytest.raises(ValueError, match="not among"):
        RaptorProbe().fit(H, y, X_val=H, y_val=y + 5)


def test_score_before_refit_is_the_train_only_probe_at_the_selected_C():
    """The equal-data variant costs nothing: the path's train-only solution at C* scores exactly as a probe fitted
    without the refit (same path, same C*), and differs from the refit probe."""
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((240, 30)), np.arange(240) % 2
    X[:, 0] += 0.8 * y
    tr, va, te = np.arange(0, 120), np.arange(120, 180), np.arange(180, 240)
    refit = RaptorProbe().fit(X[tr], y[tr], X[va], y[va])
    train_only = RaptorProbe(refit=False).fit(X[tr], y[tr], X[va], y[va])
    assert refit.C_ == train_only.C_
    assert refit.score_before_refit(X[te], y[te]) == train_only.score(X[te], y[te])
    assert train_only.score_before_refit(X[te], y[te]) == train_only.score(X[te], y[te])
    assert not np.allclose(refit.coef_, train_only.coef_)
    with pytest.raises(ValueError, match="one label per row"):
        refit.score_before_refit(X[te], y[te][:-1])
    with pytest.raises(ValueError, match="solver='exact'"):
        RaptorProbe(solver="paper", Cs=[0.1, 1.0]).fit(X[tr], y[tr], X[va], y[va]).score_before_refit(X[te], y[te])
