"""Solver tests: residuals, Jacobian, symmetry, limits, bad input, strict mode."""
import math

import numpy as np
import pytest

import cgmt
from cgmt.equations import residual_and_jacobian, residuals


def test_solution_fields_and_residual():
    r = cgmt.solve(2.0, 0.1, 2.0)
    assert r.success and r.status == 0
    assert r.residual <= 1e-10
    assert np.max(np.abs(residuals(r.alpha, r.sigma, r.gamma, 2.0, 0.1, 2.0))) <= 1e-10
    assert r.margin == pytest.approx(r.alpha / r.sigma, rel=1e-15)
    assert r.alignment == pytest.approx(r.alpha / math.hypot(r.alpha, r.sigma), rel=1e-15)
    assert r.stability == pytest.approx(r.alignment ** 2, rel=1e-15)
    assert r.alpha_salehi == pytest.approx(r.alpha / 2.0, rel=1e-15)
    assert r.accuracy == pytest.approx(cgmt.accuracy_from_margin(r.margin, 2.0), rel=1e-15)
    assert isinstance(r.nit, int) and isinstance(r.message, str)
    assert 0.5 < r.accuracy < cgmt.bayes_accuracy(2.0)


def test_jacobian_matches_finite_differences():
    x = np.array([0.8, 1.1, 1.3])
    p = (2.0, 0.1, 2.0)
    _, jac = residual_and_jacobian(*x, *p)
    num = np.zeros((3, 3))
    for j in range(3):
        h = 1e-6 * x[j]
        xp, xm = x.copy(), x.copy()
        xp[j] += h
        xm[j] -= h
        num[:, j] = (residuals(*xp, *p) - residuals(*xm, *p)) / (2 * h)
    np.testing.assert_allclose(jac, num, rtol=1e-6, atol=1e-8)


def test_kappa_zero_symmetry():
    r = cgmt.solve(3.0, 0.01, 0.0)
    assert r.success and r.alpha == 0.0
    assert r.accuracy == pytest.approx(0.5, abs=1e-15)
    assert np.isfinite(r.alpha_salehi)


def test_large_lambda_asymptotics():
    d, lam, k = 2.0, 1e3, 1.5
    r = cgmt.solve(d, lam, k)
    assert r.sigma == pytest.approx(1 / (2 * lam * math.sqrt(d)), rel=1e-2)
    assert r.gamma == pytest.approx(1 / (d * lam), rel=1e-2)


def test_warm_start_agrees_with_cold():
    cold = cgmt.solve(1.5, 0.02, 3.0)
    warm = cgmt.solve(1.5, 0.03, 3.0, x0=cold)
    cold2 = cgmt.solve(1.5, 0.03, 3.0)
    assert warm.success and warm.nit < cold2.nit
    np.testing.assert_allclose(warm.x, cold2.x, rtol=1e-9)


@pytest.mark.parametrize("args", [(0.05, 1e-6, 20.0), (100.0, 1e-6, 20.0), (2.0, 0.1, 2.0), (0.5, 1e-5, 0.0)])
def test_check_quadrature_reports_small_change(args):
    r = cgmt.solve(*args, check_quadrature=True)
    assert r.success and r.quadrature_residual <= 1e-13
    assert r.quadrature_change <= 1e-10


def test_fixed_point_fallback_converges():
    from cgmt._solver import _fixed_point, _System

    ref = cgmt.solve(2.0, 0.1, 2.0)
    system = _System(2.0, 0.1, 2.0, 10)
    y0 = system.to_y(1.3 * ref.alpha, 0.8 * ref.sigma, 2.0 * ref.gamma)
    y, r, _, _, status = _fixed_point(system, y0, 1e-7, 200)
    assert status == 0 and np.max(np.abs(r)) <= 1e-7
    np.testing.assert_allclose(system.to_x(y), ref.x, rtol=1e-5)


def test_quadrature_order_doubling_does_not_change_answer():
    a = cgmt.solve(0.5, 1e-3, 8.0)
    b = cgmt.solve(0.5, 1e-3, 8.0, quad_order=20, x0=a, tol=1e-14)
    assert b.success and b.residual <= 1e-14
    np.testing.assert_allclose(a.x, b.x, rtol=1e-10)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(delta=0.0, lam=1.0, kappa=1.0), "delta"),
        (dict(delta=-1.0, lam=1.0, kappa=1.0), "delta"),
        (dict(delta=float("nan"), lam=1.0, kappa=1.0), "delta"),
        (dict(delta=1.0, lam=-1.0, kappa=1.0), "lam"),
        (dict(delta=1.0, lam=0.0, kappa=1.0), "lam"),  # separable: no MLE
        (dict(delta=1.0, lam=float("inf"), kappa=1.0), "lam"),
        (dict(delta=1.0, lam=1.0, kappa=-0.1), "kappa"),
        (dict(delta=1.0, lam=1.0, kappa=float("nan")), "kappa"),
        (dict(delta="a", lam=1.0, kappa=1.0), "delta"),
    ],
)
def test_bad_input_names_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cgmt.solve(**kwargs)


def test_lam_zero_is_the_mle_when_it_exists():
    r = cgmt.solve(5.0, 0.0, 1.0)
    np.testing.assert_allclose(r.x, cgmt.mle(5.0, 1.0).x, rtol=1e-12)
    with pytest.raises(ValueError, match=r"lam must lie in \(0, inf\)"):
        cgmt.solve(2.2, 0.0, 1.0)  # delta*(1) = 2.278


def test_strict_mode_raises_on_non_convergence():
    # one Newton iteration from a far start cannot reach 1e-10
    r = cgmt.solve(2.0, 0.1, 2.0, x0=(5.0, 5.0, 50.0), max_iter=1)
    # non-strict: the continuation rescues or the result says why not; never a silent NaN
    assert np.isfinite(r.residual)
    assert r.success == (r.residual <= 1e-10)
    # tol = 1e-300 is unreachable unless the residual rounds to exactly 0.0 (which can happen at a
    # lucky point), so require the strict error at the points where the residual is not exactly zero
    raised = 0
    for delta, lam, kappa in [(2.0, 0.1, 2.0), (0.7, 0.03, 3.0), (5.0, 1.3, 1.1)]:
        try:
            r = cgmt.solve(delta, lam, kappa, tol=1e-300, strict=True)
        except cgmt.ConvergenceError as err:
            raised += 1
            assert err.result is not None and not err.result.success
            assert err.result.residual > 0
            assert "residual" in str(err)
        else:
            assert r.residual == 0.0 and r.success
    assert raised >= 1
