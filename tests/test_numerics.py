"""empirical.numerics and the magnitude check: the fast paths give the bits of the careful ones."""
import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import arrays

from empirical.common.arrays import MIN_MAGNITUDE, check_magnitude
from empirical.numerics import _power_of_two_scale, standardize_stats


def _prescaled(X):
    """The prescaled computation (columns divided by a power of two near their largest magnitude, exact); a spread
    below MIN_MAGNITUDE is a constant column's (scale 1)."""
    c = _power_of_two_scale(np.max(np.abs(X), axis=0))
    scaled = X / c
    scale = scaled.std(axis=0) * c
    return scaled.mean(axis=0) * c, np.where(scale >= MIN_MAGNITUDE, scale, 1.0)


@given(st.integers(1, 40), st.integers(1, 8), st.integers(0, 2**32 - 1),
       st.lists(st.floats(-300, 98), min_size=8, max_size=8))
def test_standardize_stats_gives_the_bits_of_the_prescaled_computation(n, p, seed, exponents):
    """Columns of every magnitude from 1e-300 to the largest that check_matrix accepts (1e100): where no square
    can overflow or underflow the statistics are computed without the prescaling copy, bit for bit the same."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, p)) + rng.standard_normal(p)) * 10.0 ** np.array([0.0] + exponents)[:p]
    mean, scale = standardize_stats(X)
    ref_mean, ref_scale = _prescaled(X)
    np.testing.assert_array_equal(mean, ref_mean)
    np.testing.assert_array_equal(scale, ref_scale)


@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 6)),
              elements=st.floats(-1e100, 1e100, allow_nan=False)))
def test_check_magnitude_reads_the_largest_entry_without_a_copy(A):
    """max(max A, -min A) is max |A|: the check passes and refuses exactly where the |A| reduction would."""
    largest = float(np.max(np.abs(A)))
    if 0.0 < largest < 1e-100:
        try:
            check_magnitude(A, "A")
        except ValueError as exc:
            assert "at least" in str(exc)
        else:
            raise AssertionError("a tiny array passed")
    else:
        assert check_magnitude(A, "A") is A
