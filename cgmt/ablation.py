"""The paper's ablation protocol and its combinatorics: one definition for the experiments and the theory.

One ablation run on a labelled pool of N samples (the paper's robustness experiment):

1. drop ``round(drop N)`` samples uniformly at random (not stratified);
2. re-split the kept ``n_keep = N - round(drop N)`` samples into train and validation with
   scikit-learn's stratified ``train_test_split(test_size=val_fraction)``: ``n_val =
   ceil(val_fraction n_keep)`` validation samples, ``n_train = n_keep - n_val`` training samples;
3. fit on the training part (the validation part tunes the ridge strength in the paper).

:func:`ablation_split` *is* this protocol; ``empirical.probes.stability``, ``sims`` and
``paper_figures`` call it.  Two independent runs share E|T1 cap T2| training samples, which
:func:`expected_ablation_overlap` gives exactly for a finite pool and :func:`protocol_fractions` in the
limit N -> infinity (as fractions of the pool, the inputs of the two-replica theory
:func:`cgmt.stability`): every run trains on f = (1 - drop)(1 - val_fraction) of the pool (0.64 with
the defaults) and two runs share f^2 of it (0.4096).
"""
from __future__ import annotations

import math

import numpy as np

from empirical.common.checks import as_generator, check_int

from .validation import check_fraction

__all__ = ["PROTOCOLS", "ablation_sizes", "ablation_split", "protocol_fractions", "expected_ablation_overlap"]

#: the resampling protocols of :func:`protocol_fractions` and :func:`cgmt.stability`
PROTOCOLS = ("independent", "subsample", "full_vs_subsample", "subsample_refit")


def ablation_sizes(n: int, *, drop: float = 0.2, val_fraction: float = 0.2) -> tuple[int, int, int]:
    """Sizes ``(n_keep, n_train, n_val)`` of one ablation run on a pool of ``n`` samples.

    ``n_keep = n - round(drop n)``, ``n_val = ceil(val_fraction n_keep)`` (scikit-learn's rule for a
    fractional ``test_size``), ``n_train = n_keep - n_val``.  Every run of :func:`ablation_split` has
    exactly these sizes.

    Parameters
    ----------
    n : int
        Size of the labelled pool (>= 1).
    drop : float in [0, 1)
        Fraction of the pool dropped uniformly at random.
    val_fraction : float in [0, 1)
        Validation fraction of the stratified re-split of the kept samples.

    Returns
    -------
    (int, int, int)
        ``n_keep``, ``n_train``, ``n_val``.

    Examples
    --------
    >>> ablation_sizes(1000)
    (800, 640, 160)
    >>> ablation_sizes(60, val_fraction=0.0)
    (48, 48, 0)
    """
    n = check_int(n, "n")
    drop = check_fraction(drop, "drop")
    val_fraction = check_fraction(val_fraction, "val_fraction")
    n_keep = n - int(round(drop * n))
    if n_keep < 1:
        raise ValueError(f"drop must leave at least one sample of the pool of {n}, got {drop!r}")
    n_val = math.ceil(val_fraction * n_keep) if val_fraction > 0 else 0
    return n_keep, n_keep - n_val, n_val


def ablation_split(y, rng, *, drop: float = 0.2, val_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """One run of the paper's ablation protocol on a labelled pool: sorted (train, validation) indices.

    Drops ``round(drop N)`` of the N samples uniformly at random, then re-splits the kept ones with
    scikit-learn's ``train_test_split(test_size=val_fraction, stratify=y[kept], random_state=seed)``,
    where ``seed`` is an integer drawn from ``rng`` after the permutation (this draw order is part of
    the protocol: it fixes the runs for a given seed).  With ``val_fraction=0`` the kept samples are
    the training set and the validation set is empty.  The sizes are :func:`ablation_sizes` (N).

    Parameters
    ----------
    y : array-like of shape (N,)
        Labels of the pool (any discrete values; the re-split is stratified by them).
    rng : numpy Generator, SeedSequence or int seed
        Source of randomness (a Generator is advanced, so consecutive calls give independent runs).
    drop : float in [0, 1)
        Fraction of the pool dropped uniformly at random (the paper: 0.2).
    val_fraction : float in [0, 1)
        Validation fraction of the stratified re-split (the paper: 0.2).

    Returns
    -------
    train, val : ndarray of int
        Sorted indices into ``y``; disjoint.

    Raises
    ------
    ValueError
        For a bad ``drop``, ``val_fraction``, ``rng`` or ``y``, and when the stratified re-split is
        impossible: a class with fewer than 2 kept samples, or fewer validation or training samples
        than classes.

    Examples
    --------
    >>> y = np.array([0] * 37 + [1] * 23)
    >>> train, val = ablation_split(y, 0)
    >>> len(train), len(val), np.intersect1d(train, val).size
    (38, 10, 0)
    >>> train, val = ablation_split(y, np.random.default_rng(1), val_fraction=0.0)
    >>> len(train), len(val)
    (48, 0)
    """
    drop = check_fraction(drop, "drop")
    val_fraction = check_fraction(val_fraction, "val_fraction")
    gen = as_generator(rng)
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"y must be a non-empty 1-D array of labels, got shape {y.shape}")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y must be finite, got NaN or infinite labels")
    n = y.shape[0]
    n_keep, n_train, n_val = ablation_sizes(n, drop=drop, val_fraction=val_fraction)
    keep = np.sort(gen.permutation(n)[:n_keep])
    if val_fraction == 0.0:
        return keep, np.empty(0, dtype=keep.dtype)
    seed = int(gen.integers(2**31 - 1))
    classes, counts = np.unique(y[keep], return_counts=True)
    if counts.min() < 2:
        raise ValueError(f"y must have at least 2 kept samples of each class for the stratified re-split, got "
                         f"{counts.min()} of class {classes[np.argmin(counts)]!r} after dropping "
                         f"{n - n_keep} of {n} (a larger pool or a smaller drop helps)")
    _check_resplit_sizes(n_train, n_val, classes.size, val_fraction)
    from sklearn.model_selection import train_test_split  # scikit-learn only where a split is drawn

    train, val = train_test_split(keep, test_size=val_fraction, stratify=y[keep], random_state=seed)
    return np.sort(train), np.sort(val)


def _check_resplit_sizes(n_train, n_val, n_classes, val_fraction):
    """scikit-learn's stratified split needs at least one training and one validation sample per class."""
    if min(n_val, n_train) < n_classes:
        raise ValueError(f"val_fraction must leave at least one validation and one training sample per class "
                         f"({n_classes} classes), got {val_fraction!r}: {n_train} training and {n_val} "
                         f"validation samples of {n_train + n_val} kept")


def protocol_fractions(protocol: str = "subsample", *, drop: float = 0.2,
                       val_fraction: float = 0.2) -> tuple[float, float, float]:
    """Training-set sizes and overlap ``(f1, f2, f12)`` as fractions of the pool, N -> infinity.

    Every ablation run trains on f = (1 - drop)(1 - val_fraction) of the pool; the runs are
    independent and each sample is equally likely (probability f) to be in a run's training set, so
    two runs share E|T1 cap T2| = sum_i P(i in T1) P(i in T2) = f^2 N.

    - ``"independent"``: two fits on independent pools of the full size: (1, 1, 0);
    - ``"subsample"``: two ablation runs on one pool: (f, f, f^2);
    - ``"full_vs_subsample"``: the fit on the whole pool against one ablation run: (1, f, f);
    - ``"subsample_refit"``: two ablation runs of :class:`empirical.probes.RaptorProbe`, whose concept vector
      is refit at the selected C on the run's train + validation rows, i.e. on all kept rows:
      (1 - drop, 1 - drop, (1 - drop)^2).

    Parameters
    ----------
    protocol : {"independent", "subsample", "full_vs_subsample", "subsample_refit"}, default="subsample"
        Which two fits are compared (the list above).
    drop, val_fraction : float in [0, 1), default=0.2
        As in :func:`ablation_split`.

    Returns
    -------
    f1, f2, f12 : float
        The two training-set sizes and their expected overlap, as fractions of the pool.

    Examples
    --------
    >>> [round(f, 4) for f in protocol_fractions("subsample")]
    [0.64, 0.64, 0.4096]
    >>> protocol_fractions("independent")
    (1.0, 1.0, 0.0)
    >>> [round(f, 4) for f in protocol_fractions("subsample_refit")]
    [0.8, 0.8, 0.64]
    """
    drop = check_fraction(drop, "drop")
    val_fraction = check_fraction(val_fraction, "val_fraction")
    f = (1.0 - drop) * (1.0 - val_fraction)
    if protocol == "independent":
        return 1.0, 1.0, 0.0
    if protocol == "subsample":
        return f, f, f * f
    if protocol == "full_vs_subsample":
        return 1.0, f, f
    if protocol == "subsample_refit":
        kept = 1.0 - drop
        return kept, kept, kept * kept
    raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")


def _expected_train_counts(k_pos, k_neg, n_train):
    """Expected per-class training counts of the stratified re-split of k_pos + k_neg kept samples.

    scikit-learn's ``StratifiedShuffleSplit`` allots the training counts by ``_approximate_mode``:
    the floors of the proportional shares, the one missing sample (two classes) to the class with the
    larger remainder, to either with probability 1/2 on a tie.
    """
    counts = np.array([k_pos, k_neg], dtype=float)
    share = counts / counts.sum() * n_train
    floored = np.floor(share)
    out = floored.copy()
    if int(n_train - floored.sum()) > 0:  # two classes: the remainders sum to 1
        remainder = share - floored
        if remainder[0] == remainder[1]:
            out += 0.5
        else:
            out[int(np.argmax(remainder))] += 1.0
    return out


def expected_ablation_overlap(n_pos: int, n_neg: int, *, drop: float = 0.2,
                              val_fraction: float = 0.2) -> tuple[int, float]:
    """Exact training size and expected overlap E|T1 cap T2| of two independent :func:`ablation_split` runs.

    The kept class counts are hypergeometric; given them, the stratified re-split's expected training
    counts follow scikit-learn's allotment (see :func:`ablation_split`).  By exchangeability a sample of
    class c is in a run's training set with probability pi_c = E[n_train_c] / N_c, and the runs are
    independent, so E|T1 cap T2| = sum_c N_c pi_c^2 >= n_train^2 / N (equality when pi_+ = pi_-).

    Parameters
    ----------
    n_pos, n_neg : int
        Class sizes of the pool; each must be at least ``round(drop N) + 2`` when ``val_fraction > 0``,
        so that every run can stratify (:func:`ablation_split` raises otherwise).
    drop, val_fraction : float in [0, 1)
        As in :func:`ablation_split`.

    Returns
    -------
    n_train : int
        Training-set size of every run.
    overlap : float
        E|T1 cap T2|.

    Examples
    --------
    >>> n_train, overlap = expected_ablation_overlap(37, 23)
    >>> n_train, round(overlap, 3), round(n_train ** 2 / 60, 3)
    (38, 24.067, 24.067)
    """
    n_pos = check_int(n_pos, "n_pos")
    n_neg = check_int(n_neg, "n_neg")
    n = n_pos + n_neg
    n_keep, n_train, _ = ablation_sizes(n, drop=drop, val_fraction=val_fraction)
    n_drop = n - n_keep
    if val_fraction > 0:
        if min(n_pos, n_neg) < n_drop + 2:
            raise ValueError(f"n_pos and n_neg must each be >= round(drop N) + 2 = {n_drop + 2} so that every "
                             f"run can stratify, got {n_pos} and {n_neg}")
        _check_resplit_sizes(n_train, n_keep - n_train, 2, val_fraction)
    kept_pos = np.arange(max(0, n_keep - n_neg), min(n_pos, n_keep) + 1)
    from scipy.stats import hypergeom  # deferred: scipy.stats costs 0.65 s of import cgmt

    weights = hypergeom(n, n_pos, n_keep).pmf(kept_pos)
    e_pos = 0.0
    e_neg = 0.0
    for k, w in zip(kept_pos, weights):
        counts = _expected_train_counts(k, n_keep - k, n_train) if val_fraction > 0 else (k, n_keep - k)
        e_pos += w * counts[0]
        e_neg += w * counts[1]
    pi_pos, pi_neg = e_pos / n_pos, e_neg / n_neg
    return n_train, float(n_pos * pi_pos ** 2 + n_neg * pi_neg ** 2)
