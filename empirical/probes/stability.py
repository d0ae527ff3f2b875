"""Directional stability under training-data ablation (paper ``sec:exp_robust``, ``eq:robust_cos_abs``).

For each of K runs: drop ``drop`` of the labeled pool (train+val) at random (stratified), re-split the
rest into train/val (stratified, ``val_fraction``), refit a fresh estimator from ``estimator_factory()``
via ``fit(X_tr, y_tr, X_val, y_val)`` and keep its unit ``concept_vector_``.  The score is the mean
absolute pairwise cosine ``2 / (K (K-1)) sum_{r<s} |<v_r, v_s>|``.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import OptimizeResult

from ..validation import check_binary_labels, check_matrix, stratified_split

__all__ = ["stability", "mean_abs_pairwise_cosine"]


def mean_abs_pairwise_cosine(V):
    """Mean of |cos(v_r, v_s)| over pairs r < s of the rows of V (rows normalized here)."""
    V = np.asarray(V, dtype=float)
    if V.ndim != 2 or V.shape[0] < 2:
        raise ValueError(f"need at least two vectors (K >= 2) as rows of a 2-D array; got shape {V.shape}")
    nrm = np.linalg.norm(V, axis=1, keepdims=True)
    if np.any(nrm == 0):
        raise ValueError("a concept vector is zero; cosine undefined")
    G = np.abs((V / nrm) @ (V / nrm).T)
    iu = np.triu_indices(V.shape[0], 1)
    return float(G[iu].mean())


def _bootstrap_ci(G, n_boot, level, rng):
    """Percentile CI by resampling runs; pairs of a run with its own copy are excluded."""
    K = G.shape[0]
    stats = np.empty(n_boot)
    for bi in range(n_boot):
        idx = rng.integers(0, K, K)
        sub = G[np.ix_(idx, idx)]
        mask = np.triu(idx[:, None] != idx[None, :], 1)
        stats[bi] = sub[mask].mean() if mask.any() else np.nan
    lo, hi = np.nanpercentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def stability(estimator_factory, X_pool, y_pool, K=20, drop=0.2, val_fraction=0.2, seed=0, n_boot=1000,
              level=0.95, progress=False):
    """Run the K-fold ablation protocol; returns an OptimizeResult with ``vectors`` (K, p),
    ``robust`` (mean |pairwise cosine|), ``ci`` (bootstrap percentile interval at ``level``),
    ``fit_times`` (s) and ``seed``."""
    X = check_matrix(X_pool, "X_pool")
    y = np.asarray(y_pool)
    check_binary_labels(y, X.shape[0], "y_pool")
    if int(K) < 2:
        raise ValueError(f"K must be >= 2; got {K!r}")
    if not (0.0 <= drop < 1.0):
        raise ValueError(f"drop must be in [0, 1); got {drop!r}")
    rng = np.random.default_rng(seed)
    vectors, times = [], []
    runs = range(int(K))
    if progress:
        from tqdm.auto import tqdm

        runs = tqdm(runs, desc="stability runs")
    for _ in runs:
        s1, s2 = (int(v) for v in rng.integers(0, 2**31 - 1, 2))
        keep = np.arange(len(y)) if drop == 0 else stratified_split(y, drop, s1, where=("kept", "dropped"))[0]
        tr, va = stratified_split(y[keep], val_fraction, s2)
        tr, va = keep[tr], keep[va]
        est = estimator_factory()
        est.fit(X[tr], y[tr], X[va], y[va])
        v = np.asarray(est.concept_vector_, dtype=float)
        vectors.append(v / np.linalg.norm(v))
        times.append(float(getattr(est, "fit_time_", np.nan)))
    V = np.array(vectors)
    G = np.abs(V @ V.T)
    robust = mean_abs_pairwise_cosine(V)
    ci = _bootstrap_ci(G, int(n_boot), level, np.random.default_rng(seed + 1))
    return OptimizeResult(vectors=V, robust=robust, ci=ci, fit_times=np.array(times), seed=seed, K=int(K),
                          success=True)
