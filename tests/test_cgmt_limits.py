"""lam -> 0 limit: separability threshold, MLE, Sur-Candes check, and delta -> infinity."""
import math

import numpy as np
import pytest

import cgmt
from cgmt import conventions


def test_threshold_cover_and_monotone():
    assert cgmt.separability_threshold(0.0) == pytest.approx(2.0, abs=1e-14)
    ks = [0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0]
    ds = [cgmt.separability_threshold(k) for k in ks]
    assert ds[0] > 2.0 and np.all(np.diff(ds) > 0)


def test_threshold_consistent_with_fixed_point():
    """Below delta*, gamma ~ c/lam diverges (separable); above, ridge -> MLE as lam -> 0."""
    k = 2.0
    dstar = cgmt.separability_threshold(k)
    below = [cgmt.solve(0.9 * dstar, lam, k) for lam in (1e-5, 1e-6)]
    above = [cgmt.solve(1.1 * dstar, lam, k) for lam in (1e-5, 1e-6)]
    assert below[1].gamma / below[0].gamma > 5.0  # gamma ~ c / lam
    assert above[1].gamma / above[0].gamma < 1.01  # gamma -> MLE value
    m = cgmt.mle(1.1 * dstar, k)
    r = cgmt.solve(1.1 * dstar, 1e-6, k)
    assert m.success and m.lam == 0.0
    np.testing.assert_allclose(r.x, m.x, rtol=1e-3)


def test_threshold_matches_lp_separability():
    """Monte Carlo: LP feasibility of y_i x_i'b >= 1 at p = 120, 30% either side of delta*(1)."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(0)
    k, p = 1.0, 120
    dstar = cgmt.separability_threshold(k)

    def separable(delta):
        n = int(delta * p)
        x = rng.standard_normal((n, p)) / math.sqrt(p)
        v = np.zeros(p)
        v[0] = k * math.sqrt(p)
        y = np.where(rng.random(n) < 1 / (1 + np.exp(-x @ v)), 1.0, -1.0)
        res = linprog(np.zeros(p), A_ub=-(y[:, None] * x), b_ub=-np.ones(n), bounds=(None, None), method="highs")
        return res.status == 0

    assert all(separable(0.7 * dstar) for _ in range(3))
    assert not any(separable(1.3 * dstar) for _ in range(3))


def test_sur_candes_values():
    """Sur & Candes (2019): p/n = 0.2, gamma^2 = 5 -> inflation alpha = 1.499 (sigma_SC = 4.744)."""
    r = cgmt.mle(5.0, math.sqrt(5.0))
    assert r.success
    assert r.alpha_salehi == pytest.approx(1.499, abs=5e-4)
    assert r.sigma == pytest.approx(2.121, abs=5e-4)
    sc = conventions.to_sur_candes(r.delta, r.kappa, r.alpha, r.sigma, r.gamma)
    assert sc["kappa_sc"] == pytest.approx(0.2) and sc["gamma_sc"] ** 2 == pytest.approx(5.0)
    assert sc["alpha_sc"] == pytest.approx(1.499, abs=5e-4)
    assert sc["sigma_sc"] == pytest.approx(4.744, abs=1e-3)


def test_mle_refuses_separable_regime():
    with pytest.raises(ValueError, match="lam > 0"):
        cgmt.mle(1.5, 0.0)
    with pytest.raises(ValueError, match="delta"):
        cgmt.mle(-1.0, 1.0)


def test_accuracy_tends_to_bayes_as_delta_grows():
    k, lam = 2.0, 1e-4
    gaps = [cgmt.bayes_accuracy(k) - cgmt.solve(d, lam, k).accuracy for d in (10.0, 100.0, 1000.0, 1e4)]
    assert np.all(np.diff(gaps) < 0) and gaps[-1] > 0
    assert gaps[-1] < 2e-4
