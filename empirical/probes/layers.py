"""Fit one RAPTOR probe per layer of a hidden-state stack H (L, n, p), in parallel with joblib.

Layer index convention: ``H[l]`` is whatever the caller stacked as layer ``l`` (0-based position in
the stack); the summary table reports that position.  Switch the joblib backend (e.g. to a cluster)
with ``joblib.parallel_config(backend=...)`` around the call.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from ..validation import check_binary_labels, stratified_split
from .raptor import RaptorProbe

__all__ = ["fit_layers", "paper_split", "LayerProbes"]


def paper_split(y, fractions=(0.6, 0.2, 0.2), random_state=42):
    """The paper's fixed stratified train/val/test split (default 0.6/0.2/0.2, seed 42).

    Returns sorted index arrays (train, val, test)."""
    fr = np.asarray(fractions, dtype=float)
    if fr.shape != (3,) or np.any(fr <= 0) or not np.isclose(fr.sum(), 1.0):
        raise ValueError(f"fractions must be three positive numbers summing to 1; got {fractions!r}")
    y = np.asarray(y)
    trval, te = stratified_split(y, fr[2], random_state, where=("train+val", "test"))
    a, b = stratified_split(y[trval], fr[1] / (fr[0] + fr[1]), random_state, where=("train", "validation"))
    return trval[a], trval[b], te


@dataclass
class LayerProbes:
    """Result of :func:`fit_layers`: fitted probes, a per-layer summary and the best layer."""

    probes: list
    summary: pd.DataFrame
    best_layer: int
    split: tuple


def _fit_one(Hl, y, split, params, layer):
    tr, va, te = split
    probe = RaptorProbe(**params)
    probe.fit(Hl[tr], y[tr], X_val=Hl[va], y_val=y[va])
    test_acc = float(np.mean(probe.predict(Hl[te]) == y[te])) if len(te) else float("nan")
    row = dict(layer=layer, val_accuracy=probe.best_val_accuracy_, test_accuracy=test_acc, C=probe.C_,
               lambda_=probe.lambda_, fit_time_s=probe.fit_time_)
    return probe, row


def fit_layers(H, y, *, split=None, fractions=(0.6, 0.2, 0.2), random_state=42, n_jobs=1, progress=True,
               **probe_params):
    """Fit a :class:`RaptorProbe` on every layer of ``H`` (shape (L, n, p)).

    ``split`` is a (train, val, test) tuple of index arrays; by default the paper's fixed stratified
    split (``fractions``, ``random_state``) shared by all layers.  ``probe_params`` go to
    :class:`RaptorProbe`.  The best layer maximizes validation accuracy (ties: lowest layer index).
    Returns :class:`LayerProbes` whose ``summary`` has columns layer, val_accuracy, test_accuracy,
    C, lambda_, fit_time_s (seconds)."""
    H = np.asarray(H)
    if H.ndim != 3:
        raise ValueError(f"H must have shape (L, n, p); got {H.shape}")
    L, n, _ = H.shape
    if L == 0:
        raise ValueError("H has no layers")
    y = np.asarray(y)
    check_binary_labels(y, n, "y")
    if split is None:
        split = paper_split(y, fractions, random_state)
    else:
        if len(split) != 3:
            raise ValueError("split must be a (train, val, test) tuple of index arrays")
        split = tuple(np.asarray(s, dtype=int) for s in split)
        allidx = np.concatenate(split)
        if allidx.size and (allidx.min() < 0 or allidx.max() >= n):
            raise ValueError(f"split indices must be in [0, {n})")
        if np.unique(allidx).size != allidx.size:
            raise ValueError("split index sets overlap")
    it = range(L)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="layers", total=L)
    out = Parallel(n_jobs=n_jobs)(delayed(_fit_one)(H[l], y, split, probe_params, l) for l in it)
    probes = [o[0] for o in out]
    summary = pd.DataFrame([o[1] for o in out])
    best = int(summary["layer"].iloc[int(np.argmax(summary["val_accuracy"].to_numpy()))])
    summary["best"] = summary["layer"] == best
    summary.attrs["best_layer"] = best
    return LayerProbes(probes=probes, summary=summary, best_layer=best, split=split)
