"""sims._data: the teacher-student model and reproducibility (the ablation protocol: test_ablation_protocol.py)."""
import numpy as np
import pytest
from _chance import normal_threshold
from scipy import stats

from sims import replicate_seeds, sample


def test_teacher_norm_and_direction():
    d = sample(50, 300, 2.5, 1)
    assert d.X.shape == (50, 300) and d.y.shape == (50,)
    assert np.isclose(d.beta_star @ d.beta_star, 300 * 2.5**2, rtol=1e-12)
    assert np.isclose(np.linalg.norm(d.v), 1.0) and np.allclose(d.beta_star, 2.5 * np.sqrt(300) * d.v)
    assert set(np.unique(d.y)) <= {-1.0, 1.0}


def test_reproducible_and_independent_streams():
    a, b = sample(40, 30, 1.0, 7), sample(40, 30, 1.0, 7)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y) and np.array_equal(a.v, b.v)
    s1, s2 = replicate_seeds(7, 2)
    c, d = sample(40, 30, 1.0, s1), sample(40, 30, 1.0, s2)
    assert not np.allclose(c.X, d.X) and not np.allclose(c.v, d.v)
    # replicate streams are themselves reproducible
    e = sample(40, 30, 1.0, replicate_seeds(7, 2)[0])
    assert np.array_equal(c.X, e.X)


def test_design_covariance_is_identity_over_p():
    """Chance failure rate <= 1e-6 per run (any seed): the mean squared norm by its exact chi^2_{np} quantiles at
    2e-7, the sample covariance entry by entry (Bonferroni): the 50 diagonal entries by the exact chi^2_n quantiles
    at 3e-7, the 1225 off-diagonal ones (variance 1/n, a sum of 4000 products: normal up to a kurtosis correction of
    ~8 % at this quantile) by the normal quantile at 4e-7.  It was 50 x P(|chi^2_n / n - 1| > 6 / sqrt(n)) = 1.1e-3
    (the 6 / sqrt(n) bound is 4.2 sd of a diagonal entry)."""
    n, p = 4000, 50
    d = sample(n, p, 1.0, 3)
    sq = np.sum(d.X**2, axis=1)  # ||x_i||^2 ~ chi2_p / p, so n p mean(sq) ~ chi2_{np}
    lo, hi = stats.chi2.ppf([1e-7, 1 - 1e-7], n * p) / (n * p)
    assert lo <= sq.mean() <= hi
    C = d.X.T @ d.X / n * p      # sample covariance of sqrt(p) x: I_p up to O(1/sqrt(n))
    diag_rate, off_rate = 3e-7, 4e-7
    lo, hi = stats.chi2.ppf([diag_rate / (2 * p), 1 - diag_rate / (2 * p)], n) / n
    assert np.all((lo <= np.diag(C)) & (np.diag(C) <= hi)), np.diag(C)
    off = C[np.triu_indices(p, 1)]
    assert np.max(np.abs(off)) <= normal_threshold(off.size, off_rate) / np.sqrt(n)


def test_logistic_labels_match_teacher():
    """E[y U] with U = x'beta* ~ N(0, kappa^2) and E[y|U] = tanh(U/2), against Gauss-Hermite; balanced classes.
    Chance failure rate <= 1e-6 per run (any seed): two means of n = 40000 iid draws (CLT), each by the normal
    quantile at 5e-7 (z = 5.03; it was 5.0, 1.1e-6)."""
    n, p, kappa = 40000, 10, 2.0
    d = sample(n, p, kappa, 11, )
    U = d.X @ d.beta_star
    t, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    expected = np.sum(w * kappa * t * np.tanh(kappa * t / 2))
    yu = d.y * U
    z = normal_threshold(2, 1e-6)
    assert abs(yu.mean() - expected) < z * yu.std() / np.sqrt(n)
    assert abs(np.mean(d.y)) < z / np.sqrt(n)  # symmetric teacher: balanced classes, var(y) = 1


def test_fresh_data_same_teacher():
    d = sample(20, 30, 1.5, 1)
    t = sample(10, 30, 1.5, 2, beta_star=d.beta_star)
    assert np.array_equal(t.beta_star, d.beta_star)
    with pytest.raises(ValueError, match="beta_star"):
        sample(10, 30, 1.0, 2, beta_star=d.beta_star)  # wrong norm for kappa=1


@pytest.mark.parametrize("kwargs,name", [(dict(n=0, p=3, kappa=1.0), "n"), (dict(n=3, p=0, kappa=1.0), "p"),
                                         (dict(n=3, p=3, kappa=-1.0), "kappa"),
                                         (dict(n=3, p=3, kappa=float("nan")), "kappa")])
def test_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sample(rng=0, **kwargs)
    with pytest.raises(ValueError, match="replicates"):
        replicate_seeds(0, 0)
