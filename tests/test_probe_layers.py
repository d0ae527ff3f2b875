"""fit_layers over a (L, n, p) stack and the paper's fixed split."""
import numpy as np
import pytest

from empirical import RaptorProbe, fit_layers, paper_split


def stack(seed=0):
    rng = np.random.default_rng(seed)
    n, p = 100, 8
    y = rng.integers(0, 2, n)
    base = rng.standard_normal((n, p))
    layers = [base + s * np.outer(2 * y - 1, np.eye(p)[0]) for s in (0.0, 0.8, 2.5)]
    return np.stack(layers), y


def test_paper_split_fractions_and_stratification():
    y = np.r_[np.zeros(60), np.ones(40)]
    tr, va, te = paper_split(y)
    assert (len(tr), len(va), len(te)) == (60, 20, 20)
    assert len(np.intersect1d(tr, te)) == 0 and len(np.intersect1d(va, te)) == 0
    assert y[te].mean() == pytest.approx(0.4) and y[va].mean() == pytest.approx(0.4)
    np.testing.assert_array_equal(paper_split(y)[2], te)  # fixed seed 42


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_fit_layers_summary_and_consistency(n_jobs):
    H, y = stack()
    Cs = np.logspace(-3, 1, 8)
    from joblib import parallel_config

    with parallel_config(backend="threading"):  # any joblib backend; threads keep the test fast
        res = fit_layers(H, y, Cs=Cs, n_jobs=n_jobs, progress=False)
    s = res.summary
    assert list(s.columns[:6]) == ["layer", "val_accuracy", "test_accuracy", "C", "lambda_", "fit_time_s"]
    assert len(res.probes) == 3 and res.best_layer == 2 and s["best"].sum() == 1
    assert s.loc[2, "val_accuracy"] > s.loc[0, "val_accuracy"]
    tr, va, te = res.split
    single = RaptorProbe(Cs=Cs).fit(H[1][tr], y[tr], X_val=H[1][va], y_val=y[va])
    np.testing.assert_allclose(res.probes[1].coef_, single.coef_)
    assert s.loc[1, "test_accuracy"] == np.mean(single.predict(H[1][te]) == y[te])


def test_fit_layers_given_split_and_bad_input():
    H, y = stack(1)
    split = (np.arange(0, 60), np.arange(60, 80), np.arange(80, 100))
    res = fit_layers(H, y, split=split, Cs=[0.1, 1.0], progress=False)
    assert res.split[0].tolist() == list(range(60))
    with pytest.raises(ValueError, match="overlap"):
        fit_layers(H, y, split=(np.arange(60), np.arange(50, 80), np.arange(80, 100)), progress=False)
    with pytest.raises(ValueError, match="shape"):
        fit_layers(H[0], y)


def test_grouped_split_keeps_every_group_on_one_side_and_is_stratified():
    from empirical.probes import grouped_split
    rng = np.random.default_rng(0)
    subject = np.repeat(rng.permutation(300), 2)      # Counterfact-like: two statements per subject
    y = np.tile([1, 0], 300)
    for seed in (0, 1, 42):
        tr, va, te = grouped_split(y, subject, random_state=seed)
        assert len(np.intersect1d(tr, va)) == len(np.intersect1d(tr, te)) == len(np.intersect1d(va, te)) == 0
        assert len(tr) + len(va) + len(te) == len(y)
        parts = [set(subject[idx]) for idx in (tr, va, te)]
        assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
        assert abs(len(te) / len(y) - 0.2) < 0.02 and abs(len(va) / len(y) - 0.2) < 0.02
        assert abs(y[te].mean() - 0.5) < 0.05
    # the paper's split does put partners on both sides: the grouped split is what changes that
    from empirical.probes import paper_split
    tr, _, te = paper_split(y, random_state=0)
    assert set(subject[tr]) & set(subject[te])


def test_grouped_split_rejects_mismatched_or_too_few_groups():
    from empirical.probes import grouped_split
    y = np.tile([1, 0], 10)
    with pytest.raises(ValueError, match="groups"):
        grouped_split(y, np.arange(5))
    with pytest.raises(ValueError, match="groups"):
        grouped_split(y, np.zeros(20))


def test_raptor_without_refit_fits_the_training_split_only():
    from empirical.logistic import fit_l2_logistic
    from empirical.probes import RaptorProbe
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((120, 4)), np.arange(120) % 2
    X[:, 0] += y
    Xtr, ytr, Xv, yv = X[:80], y[:80], X[80:], y[80:]
    probe = RaptorProbe(Cs=[0.01, 1.0], refit=False).fit(Xtr, ytr, Xv, yv)
    mu, s = Xtr.mean(0), Xtr.std(0)
    ref = fit_l2_logistic((Xtr - mu) / s, 2 * ytr - 1, probe.C_, fit_intercept=True, tol=1e-12)
    np.testing.assert_allclose(probe.coef_std_, ref.coef, rtol=1e-6, atol=1e-9)
    refit = RaptorProbe(Cs=[0.01, 1.0]).fit(Xtr, ytr, Xv, yv)
    assert not np.allclose(refit.coef_std_, probe.coef_std_)
