"""Synthetic hidden-state-like matrices for tests, benchmarks and examples (no model needed)."""
from __future__ import annotations

import numpy as np


def synthetic_hidden_states(n_tr, n_val, p, shift, seed=0, rank=32, n_out=4):
    """Low-rank factors plus isotropic noise plus ``n_out`` large-variance, shifted outlier dimensions,
    with the class signal ``shift * (2y - 1) u`` along a random unit direction ``u`` (raw units).

    Returns ``(H_train, y_train, H_val, y_val)`` with labels in {0, 1}; the first ``n_tr`` rows are the
    training split.  Larger ``shift`` makes the data (nearly) separable.
    """
    rng = np.random.default_rng(seed)
    n = n_tr + n_val
    L = rng.standard_normal((p, rank)) * np.linspace(3, 0.3, rank)
    y = rng.integers(0, 2, n)
    u = rng.standard_normal(p)
    u /= np.linalg.norm(u)
    H = rng.standard_normal((n, rank)) @ L.T + rng.standard_normal((n, p)) + np.outer(2 * y - 1, u) * shift
    out = rng.choice(p, n_out, replace=False)
    H[:, out] = 50 * H[:, out] + 100
    return H[:n_tr], y[:n_tr], H[n_tr:], y[n_tr:]
