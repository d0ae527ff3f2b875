"""empirical.probes._curve_families: the learning-curve databases' POW4, MMF4 and WBL4 families, fitted to
accuracies, and pool_curves, which fits them beside the power law to a pool's subsample accuracies."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import curve_fit

from empirical.probes._curve_families import CURVE_FAMILIES, FittedCurve, fit_curve_family
from empirical.probes.learning_curves import FAMILY_BOOT, POOL_CURVE_METHODS, pool_curves, power_law_curve
from empirical.testing import synthetic_hidden_states

SIZES = np.array([100.0, 160.0, 220.0, 280.0, 340.0, 400.0])
#: A generating curve of each family (the LCDB formulas, module docstring) in the scaled size x = n / 400.
TRUTH = {"pow4": lambda x: 0.9 - 0.2 * (x + 0.1) ** -0.8,
         "mmf4": lambda x: (0.5 * 0.3 + 0.9 * x ** 1.5) / (0.3 + x ** 1.5),
         "wbl4": lambda x: 0.88 - 0.3 * np.exp(-2.0 * x ** 0.9)}


@pytest.mark.parametrize("family", CURVE_FAMILIES)
def test_a_family_recovers_its_own_curve(family):
    x = SIZES / SIZES.max()
    curve = fit_curve_family(SIZES, TRUTH[family](x), family)
    assert curve.family == family and curve.n_scale == SIZES.max()
    assert np.max(np.abs(curve(SIZES) - TRUTH[family](x))) < 2e-3


@pytest.mark.parametrize("family", CURVE_FAMILIES)
def test_the_fit_is_a_least_squares_optimum_against_scipy_curve_fit(family):
    """An independent optimizer (scipy's curve_fit, Levenberg-Marquardt-free trust region, other starts) on the
    same bounded formula finds no fit with a clearly smaller sum of squares."""
    rng = np.random.default_rng(3)
    x = SIZES / SIZES.max()
    acc = TRUTH[family](x) + 0.01 * rng.standard_normal(SIZES.size)
    ours = fit_curve_family(SIZES, acc, family)
    sse = float(np.sum((ours(SIZES) - acc) ** 2))
    forms = {"pow4": (lambda x, a, b, c, d: a - b * (x + d) ** (-c), ([0, 0, 1e-3, 0], [1, 50, 3, 10]),
                      [(0.9, 0.1, 0.5, 0.2), (0.8, 0.3, 2.0, 1.0)]),
             "mmf4": (lambda x, a, b, c, d: (a * b + c * x ** d) / (b + x ** d), ([0, 1e-6, 0, 1e-3], [1, 1e3, 1, 5]),
                      [(0.4, 0.5, 0.9, 1.0), (0.6, 5.0, 0.95, 3.0)]),
             "wbl4": (lambda x, a, b, c, d: c - b * np.exp(-a * x ** d), ([1e-6, 0, 0, 1e-3], [1e3, 1, 1, 5]),
                      [(1.0, 0.2, 0.9, 1.0), (5.0, 0.5, 0.85, 0.5)])}
    form, bounds, starts = forms[family]
    best = np.inf
    for start in starts:
        try:
            theta, _ = curve_fit(form, x, acc, p0=start, bounds=bounds, maxfev=20000)
        except RuntimeError:
            continue
        values = form(x, *theta)
        if family == "mmf4" and theta[2] < theta[0] or family == "wbl4" and theta[1] > theta[2]:
            continue  # outside our family's constraints (non-decreasing, >= 0)
        best = min(best, float(np.sum((np.clip(values, 0, 1) - acc) ** 2)))
    assert sse <= best * (1 + 1e-3) + 1e-10


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CURVE_FAMILIES),
       st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=5, max_size=5))
def test_any_fit_is_a_non_decreasing_accuracy(family, accuracies):
    """On any accuracies at five sizes the fitted curve is non-decreasing in n and stays in [0, 1], as the power
    law's b >= 0 makes it: more labels never forecast less accuracy."""
    curve = fit_curve_family(SIZES[:5], accuracies, family)
    grid = np.geomspace(50, 1e6, 200)
    values = curve(grid)
    assert np.all(np.isfinite(values)) and np.all((values >= 0) & (values <= 1))
    assert np.all(np.diff(values) >= -1e-9)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=[1, 2, 3, 4], accuracy=[0.5] * 4, family="pow5"), "family must be one of"),
    (dict(n=[1, 2, 3], accuracy=[0.5] * 3, family="wbl4"), "at least 4 distinct training sizes"),
    (dict(n=[1, 2, 3, 4], accuracy=[0.5] * 3, family="mmf4"), "accuracy must have one value per size"),
    (dict(n=[0, 2, 3, 4], accuracy=[0.5] * 4, family="pow4"), r"n \(the training sizes\) must be finite and > 0, got"),
    (dict(n=[1, 2, 3, 4], accuracy=[0.5, np.nan, 0.5, 0.5], family="pow4"), "accuracy must be finite"),
])
def test_bad_input_names_its_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_curve_family(**kwargs)


def test_a_start_of_another_family_is_refused():
    with pytest.raises(ValueError, match="start must be a pow4 fit to start a pow4 fit, got a wbl4 fit"):
        fit_curve_family(SIZES, TRUTH["pow4"](SIZES / 400), "pow4", start=FittedCurve("wbl4", (1, 0.1, 0.9, 1), 400))


def test_pool_curves_fit_every_family_from_one_set_of_subsample_probes():
    """The power law of pool_curves is the power_law_curve of the same pool bit for bit (one code path, the same
    draws), and every LCDB family comes back as a LearningCurve with an interval around its point."""
    H, y, _, _ = synthetic_hidden_states(240, 0, 12, shift=1.0, seed=4)
    curves = pool_curves(H, y, [240, 960], repeats=2, n_boot=8, random_state=5)
    assert tuple(curves) == POOL_CURVE_METHODS
    alone = power_law_curve(H, y, [240, 960], repeats=2, n_boot=8, random_state=5)
    np.testing.assert_array_equal(curves["power_law"].accuracy, alone.accuracy)
    np.testing.assert_array_equal(curves["power_law"].low, alone.low)
    for family in CURVE_FAMILIES:
        c = curves[family]
        assert c.method == family and c.draws.shape == (min(8, FAMILY_BOOT), 2)
        assert np.all(c.low <= c.accuracy) and np.all(c.accuracy <= c.high)
        assert c.accuracy[1] >= c.accuracy[0]


def test_pool_curves_refuses_unknown_methods_and_too_few_sizes():
    H, y, _, _ = synthetic_hidden_states(200, 0, 8, shift=1.0, seed=0)
    with pytest.raises(ValueError, match="methods must be among"):
        pool_curves(H, y, [400], methods=("pow5",), n_boot=0)
    with pytest.raises(ValueError, match="at least 4 distinct subsample sizes"):
        pool_curves(H, y, [400], methods=("pow4",), fractions=(0.3, 0.5, 0.7), n_boot=0)
    assert set(pool_curves(H, y, [400], methods=("power_law",), fractions=(0.3, 0.5, 0.7), repeats=1,
                           n_boot=0)) == {"power_law"}
