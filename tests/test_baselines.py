"""Baselines share one interface: fit(X, y, X_val, y_val) -> unit concept_vector_, decision_function, fit_time_."""
import numpy as np
import pytest

from empirical import DiffMeans, GCSProbe, LogRegCVProbe, RaptorProbe, XRFMProbe
from empirical.logistic import fit_l2_logistic
from empirical.testing import gcs_per_probe_reference


def data(n=120, p=12, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.standard_normal((n, p)) * np.linspace(0.5, 3, p) + 5
    X[:, 0] += 2.0 * (2 * y - 1)
    return X[:90], y[:90], X[90:], y[90:]


FACTORIES = [
    lambda: RaptorProbe(Cs=np.logspace(-3, 1, 10)),
    lambda: DiffMeans(),
    lambda: LogRegCVProbe(Cs=np.logspace(-3, 1, 10)),
    lambda: GCSProbe(n_probes=10),
    pytest.param(lambda: XRFMProbe(bandwidths=(10.0,), iters=2), marks=pytest.mark.filterwarnings("ignore")),
]


@pytest.mark.parametrize("factory", FACTORIES)
def test_common_interface(factory):
    X, y, Xv, yv = data()
    est = factory().fit(X, y, Xv, yv)
    v = est.concept_vector_
    assert v.shape == (X.shape[1],) and np.isclose(np.linalg.norm(v), 1.0)
    assert (X[y == 1] @ v).mean() > (X[y == 0] @ v).mean()  # oriented to the positive class
    assert abs(v[0]) > 0.5  # the planted direction dominates
    d = est.decision_function(Xv)
    assert d.shape == (len(Xv),) and np.all(np.isfinite(d))
    assert np.mean(est.predict(Xv) == yv) > 0.75
    assert est.fit_time_ > 0


def test_difference_of_means_exact():
    X, y, Xv, yv = data()
    est = DiffMeans(use_validation=False).fit(X, y, Xv, yv)
    diff = X[y == 1].mean(0) - X[y == 0].mean(0)
    np.testing.assert_allclose(est.concept_vector_, diff / np.linalg.norm(diff))
    mid = 0.5 * (X[y == 1].mean(0) + X[y == 0].mean(0))
    assert abs(est.decision_function(mid[None])[0]) < 1e-9


def test_logregcv_uses_predefined_split_and_matches_raptor_selection():
    X, y, Xv, yv = data(seed=1)
    Cs = np.logspace(-3, 1, 10)
    cv = LogRegCVProbe(Cs=Cs, tol=1e-10, max_iter=10_000).fit(X, y, Xv, yv)
    rp = RaptorProbe(Cs=Cs).fit(X, y, X_val=Xv, y_val=yv)
    assert cv.C_ in Cs
    # both score validation accuracy on the same split; LogisticRegressionCV breaks ties by the first
    # best C in its grid (ascending) = RAPTOR's default rule
    assert cv.C_ == rp.C_
    assert np.abs(cv.concept_vector_ @ rp.concept_vector_) > 1 - 1e-5


def test_gcs_mean_of_folded_back_probes():
    X, y, Xv, yv = data(seed=2)
    g = GCSProbe(n_probes=5, n_samples=40, random_state=3).fit(X, y, Xv, yv)
    assert g.weights_.shape == (5, X.shape[1]) and g.var_.shape == (X.shape[1],)
    np.testing.assert_allclose(g.mean_, g.weights_.mean(0))
    # first probe reproduced independently: same class-balanced subset, exact C=1 fit, fold-back
    rng = np.random.default_rng(3)
    y_signed = np.where(y == 1, 1.0, -1.0)
    pos, neg = np.flatnonzero(y_signed > 0), np.flatnonzero(y_signed < 0)
    idx = np.concatenate([rng.choice(pos, 20, replace=False), rng.choice(neg, 20, replace=False)])
    mu, s = X.mean(0), X.std(0)
    r = fit_l2_logistic((X[idx] - mu) / s, y_signed[idx], 1.0, fit_intercept=True)
    np.testing.assert_allclose(g.weights_[0], r.coef / s, rtol=1e-6, atol=1e-9)


def test_bad_inputs():
    X, y, Xv, yv = data()
    with pytest.raises(ValueError, match="X_val"):
        LogRegCVProbe().fit(X, y, Xv[:0], yv[:0])
    with pytest.raises(ValueError, match="together"):
        LogRegCVProbe().fit(X, y, Xv)
    with pytest.raises(ValueError, match="n_samples"):
        GCSProbe(n_samples=10_000).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        DiffMeans().fit(np.full_like(X, np.nan), y)
    with pytest.raises(ValueError, match="not fitted"):
        DiffMeans().decision_function(X)


@pytest.mark.parametrize("estimator", [DiffMeans(), LogRegCVProbe(Cs=[0.1, 1.0]), GCSProbe(n_probes=3)],
                         ids=lambda e: type(e).__name__)
def test_baselines_pass_scikit_learn_estimator_checks(estimator):
    import warnings

    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    assert failed == {}


def test_baselines_clone_and_serve_as_structure_oracle():
    from sklearn.base import clone

    from empirical.probes.structure import cross_fit_oracle

    X, y, Xv, yv = data(seed=4)
    gcs = GCSProbe(n_probes=4, C=0.5, random_state=7)
    twin = clone(gcs)
    assert twin is not gcs and twin.get_params() == gcs.get_params()
    U_pool, U_test, info = cross_fit_oracle(X, y, Xv, DiffMeans(), folds=3)
    assert U_pool.shape == (len(X),) and U_test.shape == (len(Xv),) and info["oof_accuracy"] > 0.75


@pytest.mark.parametrize("estimator, match", [
    (GCSProbe(n_probes=0), "n_probes"),
    (LogRegCVProbe(max_iter=0), "max_iter"),
    (RaptorProbe(max_iter=0), "max_iter"),
    (RaptorProbe(tol=-1.0), "tol"),
    (DiffMeans(use_validation="yes"), "use_validation"),
])
def test_parameters_are_validated_declaratively(estimator, match):
    X, y, Xv, yv = data()
    with pytest.raises(ValueError, match=match):
        estimator.fit(X, y, Xv, yv)


@pytest.mark.parametrize("n,p,shift,C", [(100, 150, 1.0, 1.0), (200, 180, 1.0, 1.0), (200, 180, 3.0, 100.0),
                                         (120, 150, 0.3, 0.01), (160, 40, 1.0, 1.0)])
def test_gcs_probes_equal_separate_exact_fits_on_their_subsets(n, p, shift, C):
    """GCSProbe's shared-Gram route gives the probes, their Gaussian and the decision function that one
    fit_l2_logistic per probe gives (same subsets, same rng): n < p, n > p > subset size, nearly
    separable with large C, small C, and subsets larger than p (the primal route)."""
    from empirical.testing import synthetic_hidden_states

    X, y, _, _ = synthetic_hidden_states(n, 0, p, shift, seed=n + p)
    X[:, 1] = X[:, 0]  # duplicated column: rank-deficient Gram blocks
    gcs = GCSProbe(n_probes=12, C=C, random_state=5).fit(X, y)
    W, B = gcs_per_probe_reference(X, y, 12, C, 5)
    for k in range(12):
        np.testing.assert_allclose(gcs.weights_[k], W[k], rtol=0, atol=1e-6 * np.abs(W[k]).max())
    scale = np.abs(W.mean(axis=0)).max()
    np.testing.assert_allclose(gcs.mean_, W.mean(axis=0), rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(gcs.var_, W.var(axis=0), rtol=0, atol=1e-6 * np.abs(W.var(axis=0)).max())
    assert gcs.intercept_ == pytest.approx(B.mean(), rel=1e-6, abs=1e-6 * max(1.0, np.abs(B).max()))
    ref_vector = W.mean(axis=0) / np.linalg.norm(W.mean(axis=0))
    assert abs(gcs.concept_vector_ @ ref_vector) == pytest.approx(1.0, abs=1e-9)
