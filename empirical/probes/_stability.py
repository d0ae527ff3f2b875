"""Directional stability of concept vectors under training-data ablation (the paper's robustness protocol).

For each of K runs, one draw of the project's single ablation protocol
(:func:`cgmt.ablation.ablation_split`: drop ``drop`` of the labelled pool uniformly at random, re-split
the rest into train/validation, stratified, validation fraction ``val_fraction``), then a fresh
estimator is fitted with ``fit(X_train, y_train, X_val, y_val)`` and its unit ``concept_vector_`` kept.
The score is the mean absolute pairwise cosine

    Robust = 2 / (K (K - 1)) sum_{r < s} |<v_r, v_s>|,

which ignores the sign of a direction (a concept axis, not an oriented vector).  The two-replica
theory :func:`cgmt.stability` predicts it for the same protocol.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from tqdm.auto import tqdm

from cgmt.ablation import ablation_split
from cgmt.validation import check_fraction
from empirical.common.checks import check_int, check_scalar, check_seed
from empirical.common.resources import check_n_jobs

from ..common.arrays import as_real_array, check_binary_labels, check_matrix
from ..numerics import safe_norm, unit_vector
from ._registry import check_fit_contract

__all__ = ["stability", "mean_abs_pairwise_cosine", "StabilityResult"]


@dataclass(frozen=True)
class StabilityResult:
    """Result of :func:`stability`.

    Attributes
    ----------
    vectors : ndarray of shape (K, p)
        The runs' unit concept vectors.
    mean_abs_cos : float
        Mean absolute pairwise cosine of the runs (the paper's stability; the stability tables name its column
        ``robust``).
    ci : (float, float)
        Bootstrap percentile interval of ``mean_abs_cos`` (resampling runs); it always contains it.
    fit_times : ndarray of shape (K,)
        Seconds per fit (NaN where the estimator reports no ``fit_time_``).
    seed : int
        The protocol's seed.
    K : int
        Number of runs.
    """

    vectors: np.ndarray
    mean_abs_cos: float
    ci: tuple
    fit_times: np.ndarray
    seed: int
    K: int


#: most bootstrap resamples :func:`stability` draws (a percentile interval is stable long before)
MAX_BOOTSTRAP = 1_000_000


def mean_abs_pairwise_cosine(V) -> float:
    """Mean of ``|cos(v_r, v_s)|`` over pairs r < s of the rows of V (rows normalized here).

    Parameters
    ----------
    V : array (K, p), K >= 2
        Concept vectors as rows (any norms, any signs).

    Returns
    -------
    float

    Examples
    --------
    >>> mean_abs_pairwise_cosine([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    0.3333333333333333
    """
    V = np.asarray(as_real_array(V, "V"), dtype=float)
    if V.ndim != 2 or V.shape[0] < 2:
        raise ValueError(f"V must hold at least two vectors (K >= 2) as rows of a 2-D array, got shape {V.shape}")
    if not np.all(np.isfinite(V)):
        raise ValueError("V must be finite, got NaN or infinite entries")
    norms = np.array([[safe_norm(row)] for row in V])
    if np.any(norms == 0):
        raise ValueError("V contains a zero vector; its cosine is undefined")
    cosines = np.abs((V / norms) @ (V / norms).T)
    return float(cosines[np.triu_indices(V.shape[0], 1)].mean())


def _bootstrap_ci(cosines, n_boot, level, rng):
    """Percentile interval by resampling runs; pairs of a run with its own copy are excluded."""
    K = cosines.shape[0]
    stats = np.empty(n_boot)
    for b in range(n_boot):
        idx = rng.integers(0, K, K)
        sub = cosines[np.ix_(idx, idx)]
        distinct = np.triu(idx[:, None] != idx[None, :], 1)
        stats[b] = sub[distinct].mean() if distinct.any() else np.nan
    lo, hi = np.nanpercentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def _estimator_maker(estimator):
    """A callable returning a fresh unfitted estimator: a class or factory is called, an instance cloned.  The
    estimator must accept ``fit(X, y, X_val, y_val)`` (:func:`empirical.probes._registry.check_fit_contract`; a
    factory is called once to check what it makes)."""
    if inspect.isclass(estimator) or not hasattr(estimator, "fit"):
        if not callable(estimator):
            raise ValueError(f"estimator must be an estimator, a class or a factory, got {estimator!r}")
        if inspect.isclass(estimator):
            check_fit_contract(estimator, f"estimator {estimator.__name__}")
        else:
            made = estimator()
            check_fit_contract(made, f"the estimator made by the factory {estimator!r}")
        return estimator
    check_fit_contract(estimator, f"estimator {type(estimator).__name__}")
    return lambda: clone(estimator)


def _ablation_run(make_estimator, X, y, train, val, run):
    """One run of the protocol: fit on ``train`` (validation ``val``); (unit concept vector, fit seconds)."""
    fitted = make_estimator().fit(X[train], y[train], X[val], y[val])
    return (unit_vector(fitted.concept_vector_, f"concept_vector_ of run {run}"),
            float(getattr(fitted, "fit_time_", np.nan)))


def stability(estimator, X_pool, y_pool, K: int = 20, drop: float = 0.2, val_fraction: float = 0.2, seed: int = 0,
              n_boot: int = 1000, level: float = 0.95, progress: bool = False, n_jobs: int = 1) -> StabilityResult:
    """Run the K-run ablation protocol and score the directional stability of the concept vectors.

    Parameters
    ----------
    estimator : concept probe, class or callable
        An unfitted estimator (cloned for every run), its class, or a factory returning a fresh one; it
        must accept ``fit(X, y, X_val, y_val)`` (checked before the runs:
        :func:`empirical.probes._registry.check_fit_contract`) and set ``concept_vector_``.
    X_pool, y_pool : arrays of shape (N, p) and (N,)
        The labelled pool (train and validation together), raw hidden states.
    K : int >= 2
        Number of ablation runs.
    drop, val_fraction : float in [0, 1)
        Share of the pool dropped per run, and the validation share of the rest.
    seed : int
        Seed of the protocol (the runs' subsets); the bootstrap uses ``seed + 1``.
    n_boot : int
        Bootstrap resamples of the interval.
    level : float in (0, 1)
        Confidence level of the interval.
    progress : bool
        Show a progress bar over the runs.
    n_jobs : int
        Runs fitted in parallel (joblib; ``-1`` all cores, and any joblib backend, e.g. Dask:
        ``with joblib.parallel_config(backend="dask"): stability(..., n_jobs=-1)``). The runs' subsets
        are drawn first from ``seed``, so the result does not depend on ``n_jobs``.

    Returns
    -------
    StabilityResult

    Examples
    --------
    >>> from empirical.probes import DiffMeans
    >>> rng = np.random.default_rng(0)
    >>> y = np.arange(120) % 2
    >>> X = rng.standard_normal((120, 5)) + 2.0 * y[:, None] * np.eye(5)[0]
    >>> result = stability(DiffMeans(), X, y, K=4, n_boot=100)
    >>> result.vectors.shape, result.mean_abs_cos > 0.9
    ((4, 5), True)
    """
    n_jobs = check_n_jobs(n_jobs)
    X = check_matrix(X_pool, "X_pool")
    y = np.asarray(y_pool)
    check_binary_labels(y, X.shape[0], "y_pool")
    K = check_int(K, "K", minimum=2)
    n_boot = check_int(n_boot, "n_boot", minimum=1, maximum=MAX_BOOTSTRAP)  # each resample costs a K x K average
    level = check_scalar(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    drop, val_fraction = check_fraction(drop, "drop"), check_fraction(val_fraction, "val_fraction")
    seed = check_seed(seed, "seed")  # an int: the bootstrap draws from seed + 1
    make_estimator = _estimator_maker(estimator)
    rng = np.random.default_rng(seed)
    splits = [ablation_split(y, rng, drop=drop, val_fraction=val_fraction) for _ in range(K)]
    runs = (delayed(_ablation_run)(make_estimator, X, y, train, val, run)
            for run, (train, val) in enumerate(splits, start=1))
    results = Parallel(n_jobs=n_jobs)(tqdm(runs, desc="stability runs", total=K, disable=not progress))
    V = np.array([vector for vector, _ in results])
    times = [seconds for _, seconds in results]
    robust = mean_abs_pairwise_cosine(V)
    lo, hi = _bootstrap_ci(np.abs(V @ V.T), n_boot, level, np.random.default_rng(seed + 1))
    # the bootstrap means and ``robust`` are computed differently: rounding may put ``robust`` 1e-16 outside
    ci = (min(lo, robust), max(hi, robust)) if np.isfinite(robust) else (lo, hi)
    return StabilityResult(vectors=V, mean_abs_cos=robust, ci=ci, fit_times=np.array(times),
                           seed=seed, K=K)
