"""Accuracy (Prop. 3.2 with m = alpha/sigma) and Bayes accuracy against mpmath."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cgmt
from cgmt import reference


@pytest.mark.parametrize("m, kappa", [(0.3, 1.0), (2.0, 5.0), (40.0, 20.0), (0.01, 0.1), (-1.0, 2.0)])
def test_accuracy_matches_mpmath(m, kappa):
    assert cgmt.accuracy_from_margin(m, kappa) == pytest.approx(float(reference.accuracy(m, kappa)), abs=1e-14)


@pytest.mark.parametrize("kappa", [0.0, 0.5, 3.0, 20.0])
def test_bayes_accuracy_matches_mpmath(kappa):
    import mpmath as mp

    ref = 2 * mp.quad(lambda z: mp.npdf(z) / (1 + mp.exp(-kappa * z)), [0, 1, 8, mp.inf])
    assert cgmt.bayes_accuracy(kappa) == pytest.approx(float(ref), abs=1e-14)


def test_accuracy_vectorised_and_limits():
    m = np.array([[0.0, 1.0, 10.0, np.inf]])
    k = np.array([[1.0], [4.0]])
    acc = cgmt.accuracy_from_margin(m, k)
    assert acc.shape == (2, 4)
    np.testing.assert_allclose(acc[:, 0], 0.5, atol=1e-15)
    assert np.all(np.diff(acc, axis=1) > 0)  # increasing in m
    np.testing.assert_allclose(acc[:, 3], [cgmt.bayes_accuracy(1.0), cgmt.bayes_accuracy(4.0)], rtol=1e-15)
    assert cgmt.bayes_accuracy(0.0) == pytest.approx(0.5, abs=1e-15)


def test_accuracy_bad_input():
    with pytest.raises(ValueError, match="kappa"):
        cgmt.accuracy_from_margin(1.0, -1.0)
    with pytest.raises(ValueError, match="m"):
        cgmt.accuracy_from_margin(float("nan"), 1.0)
    with pytest.raises(ValueError, match="kappa must be finite"):
        cgmt.accuracy_from_margin(1.0, float("inf"))


@settings(max_examples=200, deadline=None)
@given(m=st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.inf, -np.inf, 0.0])),
       kappa=st.floats(0.0, 1e3))
def test_accuracy_scalar_fast_path_equals_array_path(m, kappa):
    """A float pair takes the unchecked scalar path (the solvers' results); it must equal the checked array path."""
    scalar = cgmt.accuracy_from_margin(m, kappa)
    assert isinstance(scalar, float)
    assert scalar == cgmt.accuracy_from_margin(np.array([m]), np.array([kappa]))[0]
