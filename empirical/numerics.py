"""Small numerical helpers shared by the probes, ``sims`` and the LLM pipeline: the paper's split seed and the
stratified split, overflow-safe norms and unit vectors, overflow-safe standardization.
"""
from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

from .common.arrays import MIN_MAGNITUDE, as_real_array, check_matrix
from .common.checks import check_random_state

__all__ = ["PAPER_SPLIT_SEED", "stratified_split", "safe_norm", "unit_vector", "standardize_stats"]

#: The paper's seed 42, its one name: the seed of the fixed train/validation/test split
#: (:func:`empirical.probes.paper_split`, the tools' and the main job's split; the main job's repeats add more
#: seeds) and the default seed of the estimators' own validation splits.
PAPER_SPLIT_SEED = 42

def stratified_split(y, fraction: float, random_state, where=("train", "validation")) -> tuple[np.ndarray, np.ndarray]:
    """Stratified index split (scikit-learn ``train_test_split``); returns sorted ``(idx_a, idx_b)``
    with ``|idx_b| ~ fraction * len(y)``.

    Parameters
    ----------
    y : array (n,)
        Labels (stratification).
    fraction : float in (0, 1)
        Share of the second part.
    random_state : int, RandomState instance or None
        As for scikit-learn's ``train_test_split``.
    where : (str, str), default=("train", "validation")
        Names of the two parts, used in messages.

    Returns
    -------
    (idx_a, idx_b) : sorted ndarrays of int
        Indices into ``y`` of the two parts (disjoint, covering every row).

    Examples
    --------
    >>> a, b = stratified_split(np.arange(10) % 2, 0.2, random_state=0)
    >>> len(a), len(b)
    (8, 2)
    """
    if not (0.0 < fraction < 1.0):
        raise ValueError(f"fraction must lie in (0, 1), got {fraction!r}")
    random_state = check_random_state(random_state)
    y = np.asarray(as_real_array(y, "y", labels=True))
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of labels, got shape {y.shape}")
    idx = np.arange(len(y))
    _, counts = np.unique(y, return_counts=True)
    if counts.min() < 2:
        raise ValueError(f"y must have at least 2 examples of each class for a stratified {where[0]}/{where[1]} "
                         f"split, got {counts.min()}")
    try:
        a, b = train_test_split(idx, test_size=fraction, stratify=y, random_state=random_state)
    except ValueError as exc:
        raise ValueError(f"cannot make a stratified {where[0]}/{where[1]} split: {exc}") from None
    return np.sort(a), np.sort(b)

#: column magnitudes whose squares (and sums of n of them) stay normal float64 numbers: 2^-400 .. 2^400
_SAFE_LOW, _SAFE_HIGH = 2.0 ** -400, 2.0 ** 400


def _power_of_two_scale(largest: np.ndarray) -> np.ndarray:
    """Powers of two ``c`` with ``largest / c`` in [1, 2) (1 where ``largest`` is 0): dividing by them is exact."""
    exponent = np.frexp(largest)[1]
    return np.where(largest > 0, np.ldexp(1.0, exponent - 1), 1.0)

def safe_norm(v) -> float:
    """Euclidean norm of a vector without overflow or underflow (exact power-of-two prescaling).

    ``np.linalg.norm`` squares the entries, so it returns ``inf`` for entries ~1e200 and 0 for ~1e-200.

    Parameters
    ----------
    v : array-like
        The vector (flattened).

    Returns
    -------
    float
        ``||v||_2``; 0.0 for an empty or zero vector, NaN or inf when ``v`` has such entries.

    Examples
    --------
    >>> safe_norm(np.array([3e200, 4e200])) / 1e200, float(np.linalg.norm(np.array([3.0, 4.0])))
    (5.0, 5.0)
    """
    v = np.asarray(v, dtype=np.float64).ravel()
    if v.size == 0:
        return 0.0
    largest = float(np.max(np.abs(v)))
    if not np.isfinite(largest) or largest == 0.0:
        return largest
    scale = float(_power_of_two_scale(np.array(largest)))
    return float(np.linalg.norm(v / scale)) * scale

def unit_vector(v, name: str = "vector") -> np.ndarray:
    """``v / ||v||`` (computed by :func:`safe_norm`); ``ValueError`` naming ``name`` when ``v`` is zero or not finite.

    Parameters
    ----------
    v : array-like
        The vector.
    name : str, default="vector"
        Its name, used in the message.

    Returns
    -------
    ndarray
        The unit vector, float64, of the shape of ``v``.

    Raises
    ------
    ValueError
        ``v`` is zero or has a non-finite norm.

    Examples
    --------
    >>> unit_vector([0.0, 2e-200])
    array([0., 1.])
    """
    try:
        v = np.asarray(as_real_array(v, name), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        if name in str(exc):
            raise
        raise ValueError(f"{name} must be a real vector, got {type(v).__name__} ({exc})") from None
    norm = safe_norm(v)
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError(f"{name} must be a finite non-zero vector (else there is no direction: constant or "
                         f"degenerate features?), got a {'zero' if norm == 0.0 else 'non-finite'} vector")
    return v / norm

def constant_to_rounding(v) -> bool:
    """Whether the series ``v`` is constant up to rounding: its spread is at most 1e-12 of its magnitude (at least
    1).  A correlation with such a series is a coefficient of rounding noise (Pearson: SciPy's
    ``NearConstantInputWarning``; Spearman: the ranks of the noise): the callers report NaN instead.  A helper of
    the package's correlations (finite float input), not API.

    Examples
    --------
    >>> constant_to_rounding([0.75, 0.75 + 1e-16, 0.75]), constant_to_rounding([0.6, 0.7])
    (True, False)
    """
    v = np.asarray(v, dtype=float)
    return bool(v.size == 0 or np.ptp(v) <= 1e-12 * max(1.0, float(np.max(np.abs(v)))))


def standardize_stats(X, *, check_input: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and population standard deviation of ``X`` (the std of a constant column replaced by 1).

    Computed on columns divided by a power of two near their largest magnitude (exact), so the
    squares inside the standard deviation neither overflow nor underflow; results are bit-identical
    to ``X.mean(0), X.std(0)`` wherever those do not.

    A column whose standard deviation is below :data:`~empirical.common.arrays.MIN_MAGNITUDE` (1e-100, the smallest
    magnitude the data checks accept) is treated as constant, as a zero one is: its scale is 1.  Dividing by such a
    spread would multiply the column by more than ``1 / MIN_MAGNITUDE = MAX_MAGNITUDE`` (1e100), and every direction
    fitted on the standardized columns is folded back to ``X``'s units by that factor (``w / scale``): a column of
    subnormal noise (1e-310: ``1 / scale`` overflows to inf) or of entries near 1e-200 (weights near 1e200) made
    the concept vector infinite or refused, although the column carries nothing float64 products can resolve
    next to entries of the accepted magnitudes (products of two such entries underflow).  With scale 1 the column
    stays at its own tiny magnitude, so its fitted weight is negligible and the direction is that of the other
    columns.  Columns of any spread at or above 1e-100 are standardized as before (``X * 1e-90`` keeps its
    direction).

    Parameters
    ----------
    X : ndarray (n, p)
        The (training) rows (checked by :func:`check_matrix`: finite, 2-D, non-empty).
    check_input : bool, default=True
        Check ``X``.  An estimator's ``fit``, which validated its rows once at its boundary, passes False (as
        scikit-learn's ``check_input``); ``X`` must then be a finite float64 matrix.

    Returns
    -------
    (mean, scale) : (ndarray (p,), ndarray (p,))
        Column means and standard deviations (ddof=0), a standard deviation below ``MIN_MAGNITUDE`` (a zero one
        too) replaced by 1.

    Examples
    --------
    >>> mean, scale = standardize_stats(np.array([[1.0, 5.0], [3.0, 5.0]]))
    >>> mean.tolist(), scale.tolist()
    ([2.0, 5.0], [1.0, 1.0])
    """
    if check_input:
        X = check_matrix(X, "X")
    largest = np.maximum(X.max(axis=0), -X.min(axis=0))  # no |X| copy
    if np.all((largest == 0) | ((largest >= _SAFE_LOW) & (largest <= _SAFE_HIGH))):
        # no square can overflow or underflow to zero: the prescaling would change no bit, and costs a copy of X
        mean, scale = X.mean(axis=0), X.std(axis=0)
    else:
        column_scale = _power_of_two_scale(largest)
        scaled = X / column_scale
        mean = scaled.mean(axis=0) * column_scale
        scale = scaled.std(axis=0) * column_scale
    scale = np.where(scale >= MIN_MAGNITUDE, scale, 1.0)  # below: constant to float64 (see the docstring)
    return mean, scale


def standardize(X, mean, scale) -> np.ndarray:
    """``(X - mean) / scale`` as one new array: the difference is divided in place, so no second
    temporary of ``X``'s size is made (the bits are those of ``(X - mean) / scale``).  Not API (not in
    ``__all__``): the callers' rows are validated at their boundary.

    Parameters
    ----------
    X : ndarray (n, p)
        Rows (validated by the caller).
    mean, scale : ndarray (p,)
        As returned by :func:`standardize_stats`.

    Examples
    --------
    >>> X = np.array([[1.0, 5.0], [3.0, 5.0]])
    >>> standardize(X, *standardize_stats(X)).tolist()
    [[-1.0, 0.0], [1.0, 0.0]]
    """
    out = np.subtract(X, mean, dtype=np.result_type(X, mean, scale))
    out /= scale
    return out
