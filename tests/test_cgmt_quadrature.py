"""Quadrature rules: exactness on polynomials, refinement, agreement with mpmath."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from cgmt import reference
from cgmt.equations import conditional_kernels, expectations
from cgmt.quadrature import gauss_hermite, gaussian_rule


def _gauss_moment(k):
    return 0.0 if k % 2 else float(math.prod(range(k - 1, 0, -2)))


@given(st.lists(st.tuples(st.floats(-12, 12), st.floats(1e-6, 5.0)), max_size=3), st.integers(0, 8))
def test_composite_rule_exact_on_polynomials(features, k):
    z, w = gaussian_rule(features, order=10)
    # truncation at |z| = 9 costs 2 E[Z^k; Z > 9] <= 1e-11 for k <= 8 (exact on panels otherwise)
    assert np.sum(w * z ** k) == pytest.approx(_gauss_moment(k), rel=1e-12, abs=1e-13)


@given(st.integers(1, 40), st.integers(0, 79))
def test_gauss_hermite_exact(n, k):
    if k >= 2 * n:
        return
    z, w = gauss_hermite(n)
    # rounding: the terms w z^k have size up to sum(w |z|^k)
    assert np.sum(w * z ** k) == pytest.approx(_gauss_moment(k), abs=1e-13 * np.sum(w * np.abs(z) ** k))


def test_refinement_resolves_sharp_sigmoid():
    kappa = 20.0
    z, w = gaussian_rule([(0.0, math.pi / kappa)], order=10)
    val = np.sum(w / (1 + np.exp(-kappa * np.abs(z))))
    import mpmath as mp

    ref = 2 * mp.quad(lambda t: mp.npdf(t) / (1 + mp.exp(-kappa * t)), [0, 0.05, 0.5, 2, mp.inf])
    assert val == pytest.approx(float(ref), abs=1e-14)


@pytest.mark.parametrize("u, alpha, sigma, kappa", [(0.3, 0.8, 1.1, 2.0), (-1.2, 3.0, 2.0, 10.0),
                                                     (0.05, 0.5, 0.05, 20.0), (2.0, 0.2, 0.3, 0.5)])
def test_conditional_kernels_match_mpmath(u, alpha, sigma, kappa):
    fast = conditional_kernels(u, alpha, sigma, kappa)
    ref = reference.kernels(u, alpha, sigma, kappa, dps=25)
    for f, r in zip(fast, ref):
        assert f == pytest.approx(float(r), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name, position", [("alpha", 0), ("sigma", 1), ("gamma", 2), ("kappa", 3)])
def test_the_reference_checks_its_arguments_on_the_fast_module_domain(name, position):
    """cgmt.reference computes what cgmt.equations does, on the same domain (|order parameters| <= ORDER_MAX, kappa
    <= KAPPA_MAX): beyond it both refuse at once, naming the argument (the reference computed for 13 s at alpha =
    1e300 before), the expectations and the conditional kernels alike."""
    from cgmt.equations import ORDER_MAX
    from cgmt.validation import KAPPA_MAX

    args = [0.8, 1.1, 1.3, 2.0]
    args[position] = 10 * (KAPPA_MAX if name == "kappa" else ORDER_MAX)
    for fn in (expectations, reference.expectations):
        with pytest.raises(ValueError, match=name):
            fn(*args)
    if name != "gamma":  # the kernels have no gamma
        kernel_args = [0.3, args[0], args[1], args[3]]
        for fn in (conditional_kernels, reference.kernels):
            with pytest.raises(ValueError, match=name):
                fn(*kernel_args)


def test_expectations_match_mpmath_kappa_zero():
    fast = expectations(0.0, 1.1, 1.3, 0.0)
    ref = reference.expectations(0.0, 1.1, 1.3, 0.0, dps=16)
    for f, r in zip(fast, ref):
        assert f == pytest.approx(float(r), rel=1e-12)


@pytest.mark.parametrize("args", [(0.8, 1.1, 1.3, 2.0), (3.0, 2.0, 50.0, 10.0), (0.6, 3.1, 1.9e7, 20.0)])
def test_expectations_stable_under_order_doubling(args):
    a = np.array(expectations(*args, quad_order=10))
    b = np.array(expectations(*args, quad_order=20))
    np.testing.assert_allclose(a, b, rtol=5e-12)


def test_expectations_match_mpmath_kappa_positive():
    """Full (E1, E2, E3c) at kappa = 2 against mpmath arithmetic on a fixed high-order rule (~7 s)."""
    args = (0.8, 1.1, 1.3, 2.0)
    fast = expectations(*args)
    ref = reference.expectations_gl(*args, dps=16, n=14, width=1.5, L=9)
    for f, r in zip(fast, ref):
        assert f == pytest.approx(float(r), rel=1e-12)
