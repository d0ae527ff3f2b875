"""Per-layer probing: one probe per layer of a hidden-state stack H (L, n, p) on one shared split.

Layer index convention: ``H[l]`` is whatever the caller stacked as layer ``l`` (for stacks from
:mod:`empirical.llm._extract`: the output of decoder block ``l``); the summary reports ``l``.  Layers
are fitted in parallel with joblib: switch the backend (e.g. to a Dask cluster) with
``joblib.parallel_config(backend=...)`` around the call.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.model_selection import StratifiedGroupKFold
from tqdm.auto import tqdm

from empirical.common.resources import check_n_jobs

from ..common.arrays import as_real_array, check_binary_labels, check_matrix
from ..common.checks import check_random_state, error_context
from ..numerics import PAPER_SPLIT_SEED, stratified_split
from ._concept_vectors import DEFAULT_LAYER_CONVENTION, ConceptVectors, LinearProbe
from ._raptor import RaptorProbe, fit_on_engine
from ._registry import check_fit_contract

__all__ = ["fit_layers", "paper_split", "grouped_split", "PerLayerFit", "PAPER_SPLIT_SEED"]


def paper_split(y, fractions=(0.6, 0.2, 0.2),
                random_state=PAPER_SPLIT_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paper's fixed stratified train/val/test split (default 0.6/0.2/0.2, seed 42).

    Parameters
    ----------
    y : array of shape (n,)
        Labels (stratification).
    fractions : three positive floats summing to 1, default=(0.6, 0.2, 0.2)
        Train, validation and test fractions.
    random_state : int, default=PAPER_SPLIT_SEED (42)
        Seed of both stratified cuts.

    Returns
    -------
    (train, val, test) : sorted index arrays
        Disjoint row indices covering every row; test is cut first, then validation from the rest.

    Examples
    --------
    >>> train, val, test = paper_split(np.arange(100) % 2)
    >>> len(train), len(val), len(test)
    (60, 20, 20)
    """
    fr = np.asarray(fractions, dtype=float)
    if fr.shape != (3,) or np.any(fr <= 0) or not np.isclose(fr.sum(), 1.0):
        raise ValueError(f"fractions must be three positive numbers summing to 1, got {fractions!r}")
    y = np.asarray(as_real_array(y, "y", labels=True))
    trval, te = stratified_split(y, fr[2], random_state, where=("train+val", "test"))
    a, b = stratified_split(y[trval], fr[1] / (fr[0] + fr[1]), random_state, where=("train", "validation"))
    return trval[a], trval[b], te


def grouped_split(y, groups, fractions=(0.6, 0.2, 0.2),
                  random_state=PAPER_SPLIT_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stratified train/val/test split that keeps every group on one side (e.g. Counterfact's subject).

    Counterfact states each subject once truly and once falsely; the paper's random split
    (:func:`paper_split`) puts the two partners on both sides, so a probe is tested on the negation of
    statements it was trained on.  Here whole groups go to one part: test is one fold of
    ``round(1 / fractions[2])`` of ``sklearn.model_selection.StratifiedGroupKFold`` (shuffled with
    ``random_state``), validation one fold of the rest in the same way, so the shares are close to
    ``fractions`` (exactly so when the group sizes allow).

    Parameters
    ----------
    y : array of shape (n,)
        Labels (stratification).
    groups : array of shape (n,)
        Group of every row (any hashable values); rows of one group never straddle two parts.
    fractions : three positive floats summing to 1, default=(0.6, 0.2, 0.2)
        Target train, validation and test fractions.
    random_state : int, default=PAPER_SPLIT_SEED (42)
        Seed of the fold assignment.

    Returns
    -------
    (train, val, test) : sorted index arrays
        Disjoint row indices covering every row, each group in one part only.

    Examples
    --------
    >>> y = np.tile([1, 0], 50)                  # 50 subjects, a true and a false statement each
    >>> subject = np.repeat(np.arange(50), 2)
    >>> train, val, test = grouped_split(y, subject)
    >>> len(train), len(val), len(test)
    (60, 20, 20)
    >>> set(subject[train]) & set(subject[test])
    set()
    """
    fr = np.asarray(fractions, dtype=float)
    if fr.shape != (3,) or np.any(fr <= 0) or not np.isclose(fr.sum(), 1.0):
        raise ValueError(f"fractions must be three positive numbers summing to 1, got {fractions!r}")
    random_state = check_random_state(random_state)
    y, groups = np.asarray(as_real_array(y, "y", labels=True)), np.asarray(as_real_array(groups, "groups", labels=True))
    if groups.shape != y.shape:
        raise ValueError(f"groups must have one entry per label (y has shape {y.shape}), got shape {groups.shape}")
    if np.unique(groups).size < 3:
        raise ValueError(f"groups must hold at least 3 distinct groups for a grouped train/val/test split, got "
                         f"{np.unique(groups).size}")

    def one_fold(idx, share):
        k = max(2, int(round(1.0 / share)))
        folds = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=random_state)
        rest, held = next(folds.split(np.zeros(idx.size), y[idx], groups[idx]))
        return idx[rest], idx[held]

    trval, te = one_fold(np.arange(y.size), fr[2])
    tr, va = one_fold(trval, fr[1] / (fr[0] + fr[1]))
    for part, name in ((tr, "train"), (va, "validation"), (te, "test")):
        if np.unique(y[part]).size < 2:
            raise ValueError(f"grouped split: the {name} part holds a single class; too few groups per class")
    return np.sort(tr), np.sort(va), np.sort(te)


@dataclass(frozen=True)
class PerLayerFit:
    """Result of :func:`fit_layers`: one fitted estimator per layer, a per-layer table and the best layer.

    Attributes
    ----------
    probes : dict of int to estimator
        ``{layer: fitted estimator}``, in the order of :func:`fit_layers`' ``layers`` (ascending by default).
    summary : pandas.DataFrame
        One row per layer, in the same order: ``layer``, ``val_accuracy``, ``test_accuracy``, ``C``,
        ``lambda_`` (NaN for estimators without a ridge strength), ``fit_time_s`` (seconds), ``best``.
    best_layer : int
        The layer with the best validation accuracy (ties: the first in that order, i.e. the lowest layer
        by default; the first layer when no layer has a validation accuracy).
    split : (ndarray, ndarray, ndarray)
        The (train, validation, test) row indices shared by every layer.
    engine_seconds : dict or None
        With ``device`` (the batched engine), wall-clock seconds of the whole fit by phase, summed over the batches
        of layers: ``"prepare_wait"`` (waiting for the host to read, validate and standardize a batch: the first
        batch's whole preparation, then what the overlap with the device did not hide), ``"to_device"``,
        ``"reduction"``, ``"path"``, ``"refit"``, ``"finish"`` (:func:`~empirical.probes._raptor.fit_on_engine`)
        and ``"rows"`` (each layer's test accuracy and checks, on the host).  None when the layers were not fitted
        on the engine (no ``device``, or no validation rows).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.arange(100) % 2
    >>> H = np.stack([rng.standard_normal((100, 4)) + 2.0 * y[:, None]])
    >>> fit = fit_layers(H, y, Cs=[1.0], progress=False)
    >>> sorted(fit.probes), bool(fit.concept_vectors()[0].test_accuracy == fit.summary.test_accuracy[0])
    ([0], True)
    """

    probes: dict
    summary: pd.DataFrame
    best_layer: int
    split: tuple
    engine_seconds: dict | None = None

    def concept_vectors(self, *, method: str = "raptor", model: str | None = None,
                        layer_convention: str = DEFAULT_LAYER_CONVENTION, metadata: dict | None = None
                        ) -> ConceptVectors:
        """The fitted probes as :class:`ConceptVectors`, with each layer's test accuracy.

        Linear estimators (``coef_``, ``intercept_``) give steerable probes; others (xRFM) give their
        concept vector only."""
        accuracy = dict(zip(self.summary["layer"], self.summary["test_accuracy"]))
        probes = {}
        for layer, estimator in self.probes.items():
            test_accuracy = None if np.isnan(accuracy[layer]) else float(accuracy[layer])
            if hasattr(estimator, "coef_"):
                probes[layer] = LinearProbe.from_estimator(estimator, test_accuracy)
            else:
                probes[layer] = LinearProbe(None, None, estimator.concept_vector_, test_accuracy)
        return ConceptVectors(probes, method=method, model=model, layer_convention=layer_convention,
                              metadata=metadata or {})


def _check_split(split, n: int) -> tuple:
    if len(split) != 3:
        raise ValueError(f"split must be a (train, val, test) tuple of index arrays, got {len(split)} arrays")
    split = tuple(np.asarray(s, dtype=int) for s in split)
    all_rows = np.concatenate(split)
    if all_rows.size and (all_rows.min() < 0 or all_rows.max() >= n):
        raise ValueError(f"split indices must be in [0, {n}), got {all_rows.min()}..{all_rows.max()}")
    if np.unique(all_rows).size != all_rows.size:
        raise ValueError("split index sets overlap")
    return split


def _check_direction(estimator, n_features: int, layer) -> None:
    """The fitted direction must be a finite, non-zero vector of the layer's width: a method that returns a zero or
    NaN direction is stopped here, naming the method and the layer, not later in steering or saving."""
    what = type(estimator).__name__
    direction = getattr(estimator, "concept_vector_", None)
    if direction is None:
        raise ValueError(f"method {what} fitted at layer {layer} has no concept_vector_ (every probe method sets it)")
    d = np.asarray(direction)
    if d.shape != (n_features,) or not np.issubdtype(d.dtype, np.number):
        raise ValueError(f"method {what} fitted at layer {layer}: concept_vector_ must be a vector of {n_features} "
                         f"numbers, got shape {d.shape} ({d.dtype})")
    if not np.all(np.isfinite(d)):
        raise ValueError(f"method {what} fitted at layer {layer}: its concept_vector_ is not finite (NaN or inf)")
    if not np.any(d):
        raise ValueError(f"method {what} fitted at layer {layer}: its concept_vector_ is zero (no concept direction)")


def _fit_one(estimator, X, y, split, layer, seed=None, dataset=None):
    with error_context(dataset=dataset, layer=layer, split_seed=seed):
        return _fit_one_unlabelled(estimator, X, y, split, layer)


def _fit_one_unlabelled(estimator, X, y, split, layer):
    train, val, test = split
    X = check_matrix(X, f"H[{layer}]")  # names the layer of a bad stack (NaN, overflow)
    started = time.perf_counter()
    if len(val):
        estimator.fit(X[train], y[train], X[val], y[val])
    else:
        estimator.fit(X[train], y[train])
    return _layer_row(estimator, X, y, split, layer, getattr(estimator, "fit_time_", time.perf_counter() - started))


def _prepare_batch(estimator, H, y, split, layers, seed):
    """The host's part of a batched engine pass: each layer read, validated and standardized by a clone of the
    RaptorProbe (``(probes, prepared, stacks)``)."""
    train, val, _ = split
    probes, prepared, stacks = [], [], []
    for layer in layers:
        with error_context(layer=layer, split_seed=seed):
            X = check_matrix(H[layer], f"H[{layer}]")
            probe = clone(estimator)
            prepared.append(probe._prepare(X[train], y[train], X[val], y[val]))
            probes.append(probe)
            stacks.append(X)
    return probes, prepared, stacks


def _fit_prepared_on_engine(batch, y, split, layers, seed, device):
    """(rows, seconds by phase) of the clones of a RaptorProbe fitted on ``layers`` by one batched engine pass
    (:func:`fit_on_engine`)."""
    probes, prepared, stacks = batch
    started = time.perf_counter()
    with error_context(layer=f"{layers[0]}-{layers[-1]}", split_seed=seed):
        phases = fit_on_engine(probes, prepared, device)
    finished = time.perf_counter()
    seconds = (finished - started) / len(layers)
    out = []
    for probe, X, layer in zip(probes, stacks, layers):
        probe.fit_time_ = seconds
        with error_context(layer=layer, split_seed=seed):
            out.append(_layer_row(probe, X, y, split, layer, seconds))
    return out, dict(phases, rows=time.perf_counter() - finished)


def _fit_on_engine_pipelined(estimator, H, y, split, batches, seed, device, bar):
    """(rows, seconds by phase: :attr:`PerLayerFit.engine_seconds`) of every batch of layers on the engine, the next
    batch's host preparation (reading, validation, standardization: ~0.6 s per layer at (4800, 4096) on one core)
    overlapping the device's work on this one.  At most two batches are prepared on the host at once; an error in
    either part surfaces here, naming its layer."""
    results, seconds = [], {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        upcoming = pool.submit(_prepare_batch, estimator, H, y, split, batches[0], seed)
        for j, layers in enumerate(batches):
            waited = time.perf_counter()
            batch = upcoming.result()
            seconds["prepare_wait"] = seconds.get("prepare_wait", 0.0) + time.perf_counter() - waited
            if j + 1 < len(batches):
                upcoming = pool.submit(_prepare_batch, estimator, H, y, split, batches[j + 1], seed)
            rows, phases = _fit_prepared_on_engine(batch, y, split, layers, seed, device)
            results += rows
            for phase, s in phases.items():
                seconds[phase] = seconds.get(phase, 0.0) + s
            bar.update(len(layers))
    return results, seconds


def _layer_row(estimator, X, y, split, layer, seconds):
    """(estimator, summary row) of a fitted layer probe: validation and test accuracy, C, fit time."""
    _, val, test = split
    _check_direction(estimator, X.shape[1], layer)
    nan = float("nan")
    C = float(getattr(estimator, "C_", nan))
    row = dict(layer=layer, val_accuracy=float(getattr(estimator, "best_val_accuracy_", nan)),
               test_accuracy=estimator.score(X[test], y[test]) if len(test) else nan, C=C,
               lambda_=float(getattr(estimator, "lambda_", 1.0 / C)), fit_time_s=float(seconds))
    if np.isnan(row["val_accuracy"]) and len(val):
        row["val_accuracy"] = estimator.score(X[val], y[val])
    return estimator, row


def _check_layer_shapes(H, layers) -> dict:
    """``{layer: (n, p)}`` of the layers to fit, all checked together before any fit: every layer a 2-D array and
    every layer with the same number of rows (the labels' and the shared split's); widths may differ (the engine
    fits each width in its own passes).  The ``ValueError`` names the layer and both shapes."""
    shapes = {}
    for layer in layers:
        shape = tuple(np.shape(H[layer]))
        if len(shape) != 2:
            raise ValueError(f"H must have shape (L, n, p) (or be a sequence of (n, p) arrays), got layer {layer} of "
                             f"shape {shape}")
        shapes[layer] = shape
    first = layers[0]
    for layer in layers:
        if shapes[layer][0] != shapes[first][0]:
            raise ValueError(f"H must have the same rows in every layer (one per label, one shared split), got layer "
                             f"{layer} of shape {shapes[layer]} and layer {first} of {shapes[first]}")
    return shapes


def fit_layers(H, y, *, layers=None, estimator=None, split=None, fractions=(0.6, 0.2, 0.2),
               random_state=PAPER_SPLIT_SEED, n_jobs=1, progress=True, device=None, **probe_params) -> PerLayerFit:
    """Fit one probe per layer of a hidden-state stack, on one split shared by all layers.

    Parameters
    ----------
    H : array of shape (L, n, p), or a sequence of (n, p) arrays
        Hidden states; ``H[l]`` is layer ``l`` (for :mod:`empirical.llm._extract` stacks: the output of
        decoder block ``l``, ``H[0]`` the token embeddings).  Memory-mapped arrays are read layer by layer.  The
        layers of a sequence may differ in width p, not in rows n (all checked, against ``y`` too, before any fit).
    y : array of shape (n,)
        Binary labels.
    layers : sequence of int, optional
        Which layers to fit (default all); the summary reports these indices.
    estimator : concept probe, optional
        Any estimator with ``fit(X, y, X_val, y_val)`` (checked before any fit:
        :func:`empirical.probes._registry.check_fit_contract`), ``score`` and ``concept_vector_``; cloned per layer.
        Default ``RaptorProbe(**probe_params)``.
    split : (train, val, test) index arrays, optional
        Default: the paper's fixed stratified split (:func:`paper_split` with ``fractions``, ``random_state``).
    fractions : three positive floats summing to 1, default=(0.6, 0.2, 0.2)
        Train, validation and test fractions of the default split (ignored with ``split``).
    random_state : int, default=PAPER_SPLIT_SEED (42)
        Seed of the default split (ignored with ``split``; the estimators keep their own seeds).
    n_jobs : int, default=1
        joblib workers (switch the backend, e.g. to Dask, with ``joblib.parallel_config``).
    progress : bool, default=True
        Show a progress bar.
    device : {None, "auto", "cpu", "cuda", "cuda:N"}, default None
        Fit the default RaptorProbe (or a given one) on the batched torch engine on this device: every layer's
        certified path, selection and refit in batched passes of as many layers of one width as fit in 2 GB
        (:func:`empirical.logistic.batched.layer_batches`), with the numpy solver's results.  None: one numpy fit
        per layer (``n_jobs`` workers).
    **probe_params
        Parameters of the default :class:`RaptorProbe` (not allowed together with ``estimator``).

    Returns
    -------
    PerLayerFit
        The fitted estimators (each fitted on the train rows, with the validation rows as ``X_val`` when there
        are any, and scored on the test rows), the per-layer table and the best layer.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.arange(100) % 2
    >>> H = np.stack([rng.standard_normal((100, 4)) + shift * y[:, None] for shift in (0.0, 2.0)])
    >>> fit = fit_layers(H, y, Cs=[0.1, 1.0], progress=False)
    >>> fit.best_layer, list(fit.summary.columns[:3])
    (1, ['layer', 'val_accuracy', 'test_accuracy'])
    >>> fit.concept_vectors().layers
    [0, 1]
    """
    n_jobs = check_n_jobs(n_jobs)
    if isinstance(H, (str, bytes, Mapping)) or not hasattr(H, "__len__") or not hasattr(H, "__getitem__"):
        raise TypeError(f"H must be an array of shape (L, n, p) or a sequence of (n, p) arrays (one per layer), got "
                        f"{type(H).__name__}")
    if isinstance(H, np.ndarray) and H.ndim != 3:
        raise ValueError(f"H must have shape (L, n, p), got {H.shape}")
    n_layers = len(H)
    if n_layers == 0:
        raise ValueError("H must have at least one layer, got none")
    if layers is None:
        layers = list(range(n_layers))
    elif isinstance(layers, (str, bytes)) or not all(isinstance(layer, (int, np.integer))
                                                     and not isinstance(layer, bool)
                                                     for layer in np.ravel(np.asarray(layers, dtype=object))):
        raise ValueError(f"layers must be a list of integer layer indices in [0, {n_layers}), got {layers!r}")
    else:
        layers = [int(layer) for layer in np.ravel(np.asarray(layers, dtype=object))]
    bad = [layer for layer in layers if not 0 <= layer < n_layers]
    if bad or not layers:
        raise ValueError(f"layers must be a non-empty list of indices in [0, {n_layers}), got {bad or layers}")
    repeated = sorted({layer for layer in layers if layers.count(layer) > 1})
    if repeated:
        raise ValueError(f"layers must be distinct (one probe per layer), got {repeated} more than once")
    shapes = _check_layer_shapes(H, layers)
    first = shapes[layers[0]]
    y = np.asarray(as_real_array(y, "y", labels=True))  # a tensor, a frame or a list of labels, checked once
    check_binary_labels(y, first[0], "y")
    if estimator is None:
        estimator = RaptorProbe(**probe_params)
    elif probe_params:
        raise ValueError(f"probe parameters {sorted(probe_params)} go with the default RaptorProbe; "
                         "set them on the estimator instead")
    check_fit_contract(estimator, f"estimator {type(estimator).__name__}")
    if device is not None:
        if not isinstance(estimator, RaptorProbe) or estimator.solver != "exact":
            raise ValueError(f"device={device!r} runs the exact RaptorProbe solver; the estimator is "
                             f"{estimator!r}")
        estimator = clone(estimator).set_params(device=device)
        estimator._validate_params()  # the engine's batches call no fit: its parameters are checked here, once
    given_split = split
    split = paper_split(y, fractions, random_state) if split is None else _check_split(split, first[0])
    seed = random_state if given_split is None else None  # a given split: the caller names its seed
    if device is not None and len(split[1]):
        from ..logistic.batched import layer_batches  # torch: only with a device
        rows = len(split[0]) + len(split[1])
        batches = []  # one engine pass shares the layers' width: layers of each width, in batches that fit
        for width in dict.fromkeys(shapes[layer][1] for layer in layers):
            group = [layer for layer in layers if shapes[layer][1] == width]
            batches += [[group[i] for i in batch] for batch in layer_batches(len(group), rows, width)]
        with tqdm(total=len(layers), desc="layers", disable=not progress) as bar:
            results, engine_seconds = _fit_on_engine_pipelined(estimator, H, y, split, batches, seed, device, bar)
        by_layer = {row["layer"]: (est, row) for est, row in results}
        results = [by_layer[layer] for layer in layers]  # the order of ``layers``, whatever the widths' batches
    else:
        engine_seconds = None
        jobs = (delayed(_fit_one)(clone(estimator), H[layer], y, split, layer, seed) for layer in layers)
        results = Parallel(n_jobs=n_jobs)(tqdm(jobs, desc="layers", total=len(layers), disable=not progress))
    summary = pd.DataFrame([row for _, row in results])
    best = int(summary["layer"].iloc[int(np.nanargmax(summary["val_accuracy"].to_numpy()))]) \
        if summary["val_accuracy"].notna().any() else layers[0]
    summary["best"] = summary["layer"] == best
    summary.attrs["best_layer"] = best
    return PerLayerFit(probes={layer: est for layer, (est, _) in zip(layers, results)}, summary=summary,
                       best_layer=best, split=split, engine_seconds=engine_seconds)
