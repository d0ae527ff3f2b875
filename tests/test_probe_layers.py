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
