"""The pool-based spectral predictor on synthetic Gaussian-covariate data, where the theory is exact."""
import numpy as np
import pytest

from cgmt.spectral import Spectrum
from empirical.probes.spectral_evaluation import evaluate_split
from empirical.probes.spectral_prediction import (estimate_pool_model, predict_lambda_star, predict_path,
                                                  predict_stability, predict_sweep)
from sims.spectral import sample_spectral


@pytest.fixture(scope="module")
def gaussian_pool():
    s = Spectrum.power_law(60, exponent=1.0, kappa=3.0, teacher_exponent=0.5)
    X, y = sample_spectral(3000, s, 0)
    # raw features: standardized Gaussian features times per-feature scales plus offsets
    scale = np.linspace(0.5, 3.0, 60)
    H = X * np.sqrt(60) * scale + 5.0
    return s, H, (y > 0).astype(int)


@pytest.mark.parametrize("teacher", ["deconvolved", "calibrated", "pool_fit"])
def test_pool_model_recovers_the_signal(gaussian_pool, teacher):
    s, H, y = gaussian_pool
    model = estimate_pool_model(H[:1500], y[:1500], teacher=teacher)
    assert model.p == 60 and model.n_pool == 1500
    if teacher != "pool_fit":  # the raw pool fit is shrunk by its ridge, the others are calibrated
        assert abs(model.kappa - s.kappa) / s.kappa < 0.25
    Cs = np.logspace(-3, 1, 5)
    predicted = predict_path(model, 600, Cs)
    truth = [r.accuracy for r in s.solve_path(600 / 60, 1.0 / (Cs * 600))]
    tol = 0.03 if teacher != "pool_fit" else 0.08
    assert np.max(np.abs(predicted - truth)) < tol


def test_predictions_have_the_right_shape_and_range(gaussian_pool):
    _, H, y = gaussian_pool
    model = estimate_pool_model(H[:800], y[:800], teacher="calibrated")
    sweep = predict_sweep(model, [0.2, 0.5, 0.9], 1.0)
    assert sweep.shape == (3,) and np.all((0.5 < sweep) & (sweep < 1))
    st = predict_stability(model, 1.0)
    assert st.success and 0 < st.cosine_raw < 1
    assert predict_lambda_star([0.01, 0.1, 1.0], [0.7, 0.8, 0.8]) == 0.1


def test_evaluate_split_on_gaussian_data(gaussian_pool):
    s, H, y = gaussian_pool
    r = evaluate_split(H[:1000], y[:1000], 0, Cs=np.logspace(-3, 1, 4), fractions=(0.3, 0.9), sweep_repeats=1, K=4,
                       teachers=("calibrated",), covariances=("sample",))
    assert r["path"].shape == (4,) and r["sweep"].shape == (2,)
    pred = r["pred"]["spectral/calibrated/sample"]
    assert np.mean(np.abs(pred["path"] - r["path"])) < 0.05  # 200 test points: sd of one accuracy ~0.03
    assert abs(pred["stability"] - r["stability"]) < 0.1
    assert "isotropic" in r["pred"]


def test_evaluate_split_refit_protocol_measures_raptor_runs(gaussian_pool):
    _, H, y = gaussian_pool
    kw = dict(Cs=np.logspace(-2, 1, 3), fractions=(0.3, 0.6, 0.9), sweep_repeats=1, K=4, teachers=("calibrated",),
              covariances=("sample",))
    refit = evaluate_split(H[:1000], y[:1000], 0, stability_protocol="subsample_refit", **kw)
    train_only = evaluate_split(H[:1000], y[:1000], 0, **kw)
    for r in (refit, train_only):
        assert abs(r["pred"]["spectral/calibrated/sample"]["stability"] - r["stability"]) < 0.1
    with pytest.raises(ValueError, match="stability_protocol"):
        evaluate_split(H[:200], y[:200], 0, stability_protocol="bootstrap", **kw)


@pytest.mark.parametrize("kwargs, match", [(dict(teacher="oracle"), "teacher"), (dict(covariance="oas"), "covariance")])
def test_bad_options(gaussian_pool, kwargs, match):
    _, H, y = gaussian_pool
    with pytest.raises(ValueError, match=match):
        estimate_pool_model(H[:100], y[:100], **kwargs)


def test_bad_pool():
    with pytest.raises(ValueError, match="H_pool"):
        estimate_pool_model(np.full((10, 3), np.nan), np.arange(10) % 2)
    with pytest.raises(ValueError, match="y_pool"):
        estimate_pool_model(np.ones((10, 3)), np.zeros(9))
