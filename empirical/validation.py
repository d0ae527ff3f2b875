"""Input validation shared by the probe, baselines and diagnostics (clear ValueErrors)."""
from __future__ import annotations

import numpy as np

__all__ = ["check_matrix", "check_binary_labels", "check_grid", "stratified_split", "standardize_stats"]


def check_matrix(X, name="X", n_rows=None):
    """Float64 2-D finite array; ValueError naming ``name`` otherwise."""
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric 2-D array: {exc}") from None
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features); got {A.ndim}-D shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{name} must have at least one sample and one feature; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if n_rows is not None and A.shape[0] != n_rows:
        raise ValueError(f"{name} has {A.shape[0]} rows but the labels have {n_rows} entries (mismatched lengths)")
    return A


def check_binary_labels(y, n, name="y", classes=None):
    """Return (classes, y_pm) with y_pm in {-1, +1} (classes[1] -> +1).

    Labels may be any two values; more than two or only one class raises ValueError."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} entries but X has {n} rows (mismatched lengths)")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if classes is None:
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"{name} has only one class ({classes.tolist()}); a binary probe needs two")
        if classes.size > 2:
            raise ValueError(f"{name} has {classes.size} classes; RAPTOR probes are binary (exactly two labels)")
    else:
        extra = np.setdiff1d(np.unique(y), classes)
        if extra.size:
            raise ValueError(f"{name} contains labels {extra.tolist()} not among the training classes {classes.tolist()}")
    y_pm = np.where(y == classes[1], 1.0, -1.0)
    return classes, y_pm


def check_grid(Cs):
    """Validate a grid of inverse regularization strengths C (non-empty, finite, > 0)."""
    Cs = np.atleast_1d(np.asarray(Cs, dtype=np.float64))
    if Cs.ndim != 1 or Cs.size == 0:
        raise ValueError("Cs must be a non-empty 1-D grid of positive values")
    if not np.all(np.isfinite(Cs)) or np.any(Cs <= 0):
        raise ValueError(f"Cs must contain only finite positive values (C = 1/lambda > 0); got min {Cs.min()!r}")
    return Cs


def check_min_per_class(y_pm, where, minimum=2):
    for label in (-1.0, 1.0):
        k = int(np.sum(y_pm == label))
        if k < minimum:
            raise ValueError(f"the {where} split has {k} example(s) of a class; at least {minimum} are needed")


def stratified_split(y, fraction, random_state, where=("train", "validation")):
    """Stratified index split (sklearn ``train_test_split``); returns (idx_a, idx_b) with |idx_b| ~ fraction."""
    from sklearn.model_selection import train_test_split

    if not (0.0 < fraction < 1.0):
        raise ValueError(f"split fraction must be in (0, 1); got {fraction!r}")
    idx = np.arange(len(y))
    _, counts = np.unique(y, return_counts=True)
    if counts.min() < 2:
        raise ValueError(f"a class has {counts.min()} example(s); a stratified {where[0]}/{where[1]} split needs >= 2")
    try:
        a, b = train_test_split(idx, test_size=fraction, stratify=y, random_state=random_state)
    except ValueError as exc:
        raise ValueError(f"cannot make a stratified {where[0]}/{where[1]} split: {exc}") from None
    return np.sort(a), np.sort(b)


def standardize_stats(X):
    """Train-split mean and population standard deviation (zero std replaced by 1)."""
    mu = X.mean(axis=0)
    s = X.std(axis=0)
    s = np.where(s > 0, s, 1.0)
    return mu, s
