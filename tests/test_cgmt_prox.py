"""Logistic prox: identity, bracket, monotonicity, Moreau identity, derivatives, mpmath pin."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from cgmt import reference
from cgmt.prox import prox_logistic, prox_scalar, prox_with_derivatives, sigmoid

magnitude = st.floats(min_value=-6.0, max_value=6.0)  # |V| up to 1e6
log_gamma = st.floats(min_value=-8.0, max_value=8.0)  # gamma in [1e-8, 1e8]
sign = st.sampled_from([-1.0, 1.0])


def _v(sgn, lm):
    return sgn * 10.0 ** lm


@given(sign, magnitude, log_gamma)
def test_prox_identity_and_bracket(sgn, lm, lg):
    v, g = _v(sgn, lm), 10.0 ** lg
    eta = prox_scalar(v, g)
    # Backward error of the evaluated residual plus its conditioning: a root known to a few ulp of eta leaves a
    # residual of f'(eta) |eta| eps, f' = 1 + g s'(eta) (e.g. v = 339.8, g = 19,400: f' = 334, eta within 1.8 ulp
    # of mpmath's root, residual 5.7e-13).
    fprime = 1.0 + g * sigmoid(eta) * sigmoid(-eta)
    scale = abs(v) + g * sigmoid(eta) + abs(eta) + fprime * abs(eta)
    assert abs(eta + g * sigmoid(eta) - v) <= 8e-16 * scale
    lo, hi = v - g * sigmoid(v), v - g * sigmoid(v - g)
    tol = 4e-16 * max(abs(v), g, 1.0)
    assert lo - tol <= eta <= hi + tol


@given(sign, magnitude, st.floats(min_value=1e-12, max_value=1.0), log_gamma)
def test_prox_monotone(sgn, lm, rel, lg):
    v, g = _v(sgn, lm), 10.0 ** lg
    w = v + rel * max(1.0, abs(v))
    assert prox_scalar(w, g) >= prox_scalar(v, g)


def _conj_prox(v, g):
    """prox_{rho*/g}(v/g) by bisection on w in (0, 1): logit(w) + g w = v (independent of cgmt.prox)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if math.log(mid) - math.log1p(-mid) + g * mid - v > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def _rho(t):
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


def _rho_star(w):
    return (w * math.log(w) if w > 0 else 0.0) + ((1 - w) * math.log1p(-w) if w < 1 else 0.0)


@given(st.floats(min_value=-30, max_value=30), st.floats(min_value=-3.0, max_value=3.0))
def test_moreau_identity(v, lg):
    g = 10.0 ** lg
    eta = prox_scalar(v, g)
    w = _conj_prox(v, g)
    # Moreau decomposition: v = prox_{g rho}(v) + g prox_{rho*/g}(v/g)
    assert eta + g * w == pytest.approx(v, abs=1e-12 * max(1.0, abs(v), g))
    # Moreau envelopes: M_{g rho}(v) + M_{rho*/g}(v/g) = v^2 / (2 g)
    env = _rho(eta) + (eta - v) ** 2 / (2 * g)
    env_star = _rho_star(w) + g / 2 * (w - v / g) ** 2
    assert env + env_star == pytest.approx(v * v / (2 * g), rel=1e-9, abs=1e-9)


def test_prox_matches_mpmath():
    rng = np.random.default_rng(3)
    for _ in range(60):
        v = rng.choice([-1, 1]) * 10 ** rng.uniform(-3, 6)
        g = 10 ** rng.uniform(-8, 8)
        ref = float(reference.prox(v, g, dps=30))
        assert abs(prox_scalar(v, g) - ref) <= 1e-12 * max(1.0, abs(ref))


def test_prox_derivatives_match_finite_differences():
    for v, g in [(0.3, 1.7), (-2.0, 40.0), (5.0, 0.2)]:
        eta, d, dv, dvv, dg = prox_with_derivatives(v, g)
        h = 1e-5
        assert d == pytest.approx((prox_scalar(v + h, g) - prox_scalar(v - h, g)) / (2 * h), rel=1e-7)
        dp = prox_with_derivatives(v + h, g)[1]
        dm = prox_with_derivatives(v - h, g)[1]
        assert dv == pytest.approx((dp - dm) / (2 * h), rel=1e-6, abs=1e-12)
        dvp = prox_with_derivatives(v + h, g)[2]
        dvm = prox_with_derivatives(v - h, g)[2]
        assert dvv == pytest.approx((dvp - dvm) / (2 * h), rel=1e-5, abs=1e-10)
        assert dg == pytest.approx((prox_scalar(v, g + h) - prox_scalar(v, g - h)) / (2 * h), rel=1e-7)


def test_prox_vectorised_and_reflection():
    v = np.linspace(-50, 50, 101)
    out = prox_logistic(v, 7.0)
    assert out.shape == v.shape
    np.testing.assert_array_equal(out, [prox_scalar(x, 7.0) for x in v])
    # reflection symmetry prox(v) = -prox(gamma - v)
    np.testing.assert_allclose(out, -prox_logistic(7.0 - v, 7.0), atol=1e-13)
    assert prox_logistic(1.5, 0.0) == 1.5
    with pytest.raises(ValueError, match="gamma"):
        prox_logistic(1.0, -1.0)
    with pytest.raises(ValueError, match="v"):
        prox_logistic(np.nan, 1.0)
