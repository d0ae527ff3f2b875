"""The separability tables of the run: the paper's per-layer LinearSVC/perceptron verdict
(:func:`separability_table`) and the shuffled-label control with the exact LP test (:func:`separability_control_table`,
:func:`separability_control_summary`), shared by the ``empirical`` section (training rows) and the
``learning_curves`` section (2.5 (p + 1) non-test rows, where random labels no longer separate).
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from empirical.common.checks import MAX_SEED, check_seed
from empirical.common.resources import check_n_jobs
from empirical.probes import separability, separability_lp, shuffled_label_control


def separability_row(name, layer, X, y) -> dict:
    """One layer's separability verdict (:func:`empirical.probes.separability`, stopping at the first C that
    separates).

    Parameters
    ----------
    name : str
        The dataset's name.
    layer : int
        The layer index (0 = embeddings).
    X : ndarray (n, p)
        The layer's hidden states of the rows tested.
    y : ndarray (n,)
        Their labels.

    Returns
    -------
    dict
        ``dataset, layer, separable, perc_zero, convergence_warnings``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # counted in the result and reported in the table
        r = separability(X, y, stop_when_separated=True)  # same verdict; the later C are not run
    return dict(dataset=name, layer=layer, separable=bool(r.separable), perc_zero=bool(r.perc_zero),
                convergence_warnings=int(r.n_convergence_warnings))


def separability_table(name, H, y, split, progress=True, n_jobs=1) -> pd.DataFrame:
    """Per layer: LinearSVC zero training error at some C in {1e4, 1e6, 1e8} (tried in that order, stopping at the
    first that separates; convergence warnings count the C tried); perceptron within 2000 epochs
    (:func:`empirical.probes.separability` on the training split; ``n_jobs`` layers in parallel).

    Parameters
    ----------
    name : str
        The dataset's name.
    H : ndarray (L, n, p)
        Hidden states of every layer (0 = embeddings, skipped).
    y : ndarray (n,)
        Labels.
    split : tuple of ndarray
        (train, validation, test) row indices; the training rows are tested.
    progress : bool, default=True
        Show a progress bar.
    n_jobs : int, default=1
        Layers tested in parallel.

    Returns
    -------
    pandas.DataFrame
        One :func:`separability_row` per layer.
    """
    n_jobs = check_n_jobs(n_jobs)
    tr = split[0]
    jobs = (delayed(separability_row)(name, layer, np.asarray(H[layer][tr], dtype=np.float64), y[tr])
            for layer in range(1, H.shape[0]))
    rows = Parallel(n_jobs=n_jobs)(tqdm(jobs, desc=f"{name}: separability", total=H.shape[0] - 1,
                                        disable=not progress, leave=False))
    return pd.DataFrame(rows)


def control_row(name, layer, X, y, labels, rows, seed) -> dict:
    """One exact LP separability test (:func:`empirical.probes.separability_lp`) on real or shuffled labels.

    Parameters
    ----------
    name : str
        The dataset's name.
    layer : int
        The layer index.
    X : ndarray (n, p)
        The rows tested.
    y : ndarray (n,)
        Their labels.
    labels : {"real", "shuffled"}
        Test the labels as given, or a permutation of them (class counts kept).
    rows : str
        The name of the row set (``train``, ``all``, ``non-test``), copied into the row.
    seed : int
        Seed of the permutation.

    Returns
    -------
    dict
        ``dataset, layer, labels, rows, n, p, n_over_p, separable, decided, min_total_slack``.
    """
    seed = check_seed(seed, "seed", maximum=MAX_SEED)
    r = separability_lp(X, y) if labels == "real" else shuffled_label_control(X, y, random_state=seed,
                                                                              test=separability_lp)
    return dict(dataset=name, layer=layer, labels=labels, rows=rows, n=int(X.shape[0]), p=int(X.shape[1]),
                n_over_p=X.shape[0] / X.shape[1], separable=bool(r.separable), decided=bool(r.success),
                min_total_slack=float(r.fun))


def separability_control_table(name, H, y, split, layers, seed=0, progress=True, n_jobs=1) -> pd.DataFrame:
    """The shuffled-label control of the separability claim on ``layers``, with the exact LP test
    (:func:`empirical.probes.separability_lp`) for all four cases: real and shuffled labels (a permutation, class
    counts kept; :func:`empirical.probes.shuffled_label_control`) on the training rows, and on every row of the
    dataset (train + validation + test: the largest n this run has), so separability is read against what random
    labels of the same size do, with one test.  (The paper's LinearSVC ladder needs 60-75 s per barely separable
    layer at n = 1,000; the LP 2-4 s.)  Columns: dataset, layer, labels (real/shuffled), rows (train/all), n, p,
    n_over_p, separable, decided (the LP finished), min_total_slack.

    Parameters
    ----------
    name : str
        The dataset's name.
    H : ndarray (L, n, p)
        Hidden states of every layer.
    y : ndarray (n,)
        Labels.
    split : tuple of ndarray
        (train, validation, test) row indices.
    layers : sequence of int
        The layers tested.
    seed : int, default=0
        Base seed of the permutations (``seed + layer``).
    progress : bool, default=True
        Show a progress bar.
    n_jobs : int, default=1
        Tests run in parallel.

    Returns
    -------
    pandas.DataFrame
        One :func:`control_row` per layer and case.
    """
    n_jobs = check_n_jobs(n_jobs)
    seed = check_seed(seed, "seed", maximum=MAX_SEED)  # layer l's shuffled control uses seed + l
    tr = split[0]
    every = np.arange(len(y))
    cases = [("real", "train", tr), ("shuffled", "train", tr), ("real", "all", every), ("shuffled", "all", every)]
    jobs = (delayed(control_row)(name, layer, np.asarray(H[layer][idx], dtype=np.float64), y[idx], labels, rows,
                                  seed + layer)
            for layer in layers for labels, rows, idx in cases)
    rows = Parallel(n_jobs=n_jobs)(tqdm(jobs, desc=f"{name}: separability control", total=len(cases) * len(layers),
                                        disable=not progress, leave=False))
    return pd.DataFrame(rows)


def separability_control_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, row set (train / all) and labels (real / shuffled): layers tested, separable layers, layers
    the LP left undecided, n, p and n/p, from the per-layer control rows (one exact test for all four cases).

    Parameters
    ----------
    rows : pandas.DataFrame
        :func:`control_row` rows.

    Returns
    -------
    pandas.DataFrame
        ``dataset, rows, labels, layers, separable, undecided, n, p, n_over_p``.
    """
    g = rows.groupby(["dataset", "rows", "labels"])
    return g.agg(layers=("layer", "size"), separable=("separable", "sum"),
                 undecided=("decided", lambda d: int((~d.astype(bool)).sum())), n=("n", "first"),
                 p=("p", "first")).reset_index().assign(n_over_p=lambda d: d.n / d.p)
