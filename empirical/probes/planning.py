"""How many labels does a concept need: the protocol of ``raptor plan`` as one library call.

From a labelled pool of a dataset (the rest of its rows unlabelled), per layer: the pool model
(:func:`~empirical.probes.estimate_pool_model`: Sigma from every row, the teacher from the
pool), the forecast accuracy at ``target_n`` labelled rows with its interval (the default forecaster,
``capped_power_law``: the pool's learning curve under the theory's ceiling, its interval calibrated on held-out
datasets, :func:`forecast_curve`; or the spectral theory alone,
:func:`~empirical.probes.learning_curves.predict_learning_curve`), the theory's best C there, and, for a target
accuracy, the labels needed
(:func:`~empirical.probes.learning_curves.labels_needed`, read off the curve up to :data:`PLAN_REACH` x
``target_n``). Conventions: layer l is the output of decoder block l (as extracted); accuracies are fractions of
test rows; sizes are labelled rows. docs/learning_curves.md.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from empirical.common.checks import as_generator, check_choice, check_int

from ._label_forecast import (
    FORECASTER,
    HELD_OUT_ERROR,
    HELD_OUT_MULTIPLES,
    HELD_OUT_QUANTILES,
    check_forecast_level,
    forecast_curve,
    forecast_scale,
    held_out_quantile,
)
from ._spectral_prediction import estimate_pool_model
from .learning_curves import backtest_error, labels_needed, predict_learning_curve, theory_best_C
from .structure import stratified_subsample

#: the forecaster's names are public here (its implementation module is underscored)
__all__ = ["PLAN_FOLDS", "PLAN_REACH", "FORECASTERS", "LabelPlan", "label_pool", "plan_labels", "forecast_curve",
           "forecast_scale", "check_forecast_level", "held_out_quantile", "HELD_OUT_QUANTILES", "HELD_OUT_ERROR"]

#: cross-validation folds of the pool model (every class needs this many labelled rows)
PLAN_FOLDS = 5
#: the labels needed are read off a predicted curve up to this multiple of ``target_n``
PLAN_REACH = 64
#: the forecasters :func:`plan_labels` offers: the default (held-out best, docs/learning_curves.md) and the spectral
#: theory alone
FORECASTERS = (FORECASTER, "spectral")


@dataclass(frozen=True)
class LabelPlan:
    """What :func:`plan_labels` predicts for one dataset.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per layer: ``layer``, ``labels``, ``unlabeled``, ``pool_cv_accuracy``, ``target_n``,
        ``predicted_accuracy``, ``low``, ``high`` (the forecaster's interval: calibrated on held-out datasets for
        ``capped_power_law``; for ``spectral``, widened by the pool's backtest error,
        :func:`~empirical.probes.learning_curves.backtest_error`), ``C_star`` (the theory's best C at
        ``target_n``), ``kappa``, ``chance_factor``, ``model_error`` (``spectral``: the backtest error per doubling
        of the labels; NaN, with a warning, when a class of the pool has fewer than 2 x ``folds`` rows; NaN for
        ``capped_power_law``), ``forecaster``, ``held_out_error`` (``capped_power_law``: its mean absolute error on
        held-out datasets at the nearest calibrated multiple; NaN for ``spectral``), ``teacher``, ``level``
        and, with a target accuracy, ``target_accuracy``, ``labels_needed`` (and its ``_optimistic`` /
        ``_pessimistic`` ends; inf when not reached within ``reachable_within``).
    best_layer : int
        The layer with the highest predicted accuracy at ``target_n`` (the first of equal ones).
    predicted_accuracy, low, high, C_star : float
        Its prediction, interval (``level``) and C.
    target_n : int
        Labelled rows the prediction is for.
    reachable_within : float
        The largest training size the curve was predicted at (``PLAN_REACH`` x ``target_n``).
    fewest_labels_layer : int or None
        With a target accuracy: the layer that reaches it with the fewest labels (None if none does).
    fewest_labels : float or None
        Those labels.
    """

    table: pd.DataFrame = field(repr=False)
    best_layer: int
    predicted_accuracy: float
    low: float
    high: float
    C_star: float
    target_n: int
    reachable_within: float
    fewest_labels_layer: int | None = None
    fewest_labels: float | None = None


def label_pool(y, n_labels: int, seed: int = 0, *, folds: int = PLAN_FOLDS, dataset: str = "") -> np.ndarray:
    """The labelled pool: ``n_labels`` rows drawn stratified (the other rows are the unlabelled ones).

    Parameters
    ----------
    y : array_like of shape (N,)
        Binary labels of every row.
    n_labels : int
        Labelled rows to draw (``--labels``), below N.
    seed : int, default=0
        Seed of the draw.
    folds : int, default=PLAN_FOLDS
        Rows each class needs (the pool model's cross-validation folds).
    dataset : str, optional
        The dataset's name, for the messages.

    Returns
    -------
    ndarray of int
        Row indices of the pool (in the order drawn).

    Raises
    ------
    ValueError
        ``n_labels`` not below N, or a class with fewer than ``folds`` rows in the pool (names ``--labels``).

    Examples
    --------
    >>> y = np.r_[np.zeros(50, int), np.ones(50, int)]
    >>> pool = label_pool(y, 20, seed=0)
    >>> len(pool), int(y[pool].sum())
    (20, 10)
    """
    y = np.asarray(y)
    rng = as_generator(seed, "seed")
    name = f" of dataset {dataset!r}" if dataset else ""
    if n_labels >= len(y):
        raise ValueError(f"--labels must be smaller than the {len(y)} rows{name} (the rows left over are the "
                         f"unlabelled rows whose hidden states estimate the covariance), got {n_labels}")
    pool = stratified_subsample(y, n_labels, rng)
    least = min(np.unique(y[pool], return_counts=True)[1]) if len(np.unique(y[pool])) == 2 else 0
    if least < folds:
        raise ValueError(f"--labels must draw a pool with {folds} rows of each class (the pool's cross-validation), "
                         f"got {n_labels}: the pool drawn from the rows{name} has {least} row(s) of its rarer class")
    return pool


def plan_labels(H, y, pool, target_n: int, *, layers=None, forecaster: str = FORECASTER, teacher: str = "calibrated",
                level: float = 0.9, n_boot: int = 200, target_accuracy: float | None = None, random_state: int = 0,
                folds: int = PLAN_FOLDS, reach: float = PLAN_REACH, progress: bool = False) -> LabelPlan:
    """Predict, per layer, the accuracy at ``target_n`` labels (and the labels a target accuracy needs) from a pool.

    Parameters
    ----------
    H : array of shape (L + 1, N, p) or mapping of int to (N, p) arrays
        Hidden states of every row (layer l = output of decoder block l).
    y : array_like of shape (N,)
        Binary labels; only the pool's are read.
    pool : array of int
        Rows of the labelled pool (:func:`label_pool`); every other row is unlabelled.
    target_n : int
        Labelled rows to predict for, larger than the pool.
    layers : iterable of int, optional
        Layers to plan (default 1..L).
    forecaster : {"capped_power_law", "spectral"}, default="capped_power_law"
        ``capped_power_law``: the pool's learning curve capped at the theory's ceiling, with an interval calibrated
        on held-out datasets at levels 0.8 / 0.9 / 0.95 (:func:`forecast_curve`);
        ``spectral``: the theory alone (:func:`~empirical.probes.learning_curves.predict_learning_curve`).
    teacher : {"calibrated", "deconvolved"}, default="calibrated"
        The pool model's teacher estimator.
    level : float in (0, 1), default=0.9
        Level of the prediction intervals (``capped_power_law``: 0.8, 0.9 or 0.95).
    n_boot : int, default=200
        Bootstrap replicates of the pool model (the ``spectral`` forecaster's interval).
    target_accuracy : float in (0.5, 1), optional
        Also read the labels needed to reach it.
    random_state : int, default=0
        Seed of the pool model's folds and bootstrap.
    folds : int, default=PLAN_FOLDS
        Cross-validation folds of the pool model.
    reach : float, default=PLAN_REACH
        The curve runs up to ``reach`` x ``target_n``.
    progress : bool, default=False
        Show a progress bar over layers.

    Returns
    -------
    LabelPlan

    Raises
    ------
    ValueError
        ``target_n`` not above the pool's size (names ``--target-n``), or a bad pool.
    """
    y = np.asarray(y)
    pool = np.asarray(pool, dtype=int)
    forecaster = check_choice(forecaster, "forecaster", FORECASTERS)
    spectral = forecaster == "spectral"
    if not spectral:  # before any model work
        level = check_forecast_level(level)
    target_n = check_int(target_n, "target_n", minimum=2)
    folds = check_int(folds, "folds", minimum=2)
    if target_n <= len(pool):
        raise ValueError(f"--target-n must be larger than --labels ({len(pool)}; the pool's own accuracy is "
                         f"measured, not predicted), got {target_n}")
    n_rows = len(y)
    layers = list(range(1, len(H))) if layers is None else [int(layer) for layer in layers]
    rest = np.setdiff1d(np.arange(n_rows), pool)
    grid = np.unique(np.r_[np.geomspace(len(pool), reach * target_n, 25), target_n])
    at = int(np.flatnonzero(grid == target_n)[0])
    # the backtest cross-validates each half of the pool: each class needs 2 x folds labelled rows
    backtested = spectral and int(np.unique(y[pool], return_counts=True)[1].min()) >= 2 * folds
    error = np.nan
    held_out = HELD_OUT_ERROR[int(np.argmin(np.abs(np.log2(target_n / len(pool)) - np.log2(HELD_OUT_MULTIPLES))))]
    if spectral and not backtested:
        warnings.warn(f"--labels {len(pool)}: the pool has fewer than {2 * folds} rows of a class, too few for the "
                      "backtest of the intervals (backtest_error); the intervals leave out the theory's error on "
                      "these features (model_error NaN)", RuntimeWarning, stacklevel=2)
    rows = []
    for layer in tqdm(layers, desc="plan layers", disable=not progress, leave=False):
        X = np.asarray(H[layer], dtype=np.float64)
        pool_model = estimate_pool_model(X[pool], y[pool], teacher=teacher, H_unlabeled=X[rest],
                                         random_state=random_state, n_boot=n_boot if spectral else 0, folds=folds)
        if backtested:
            error = backtest_error(pool_model, X[pool], y[pool], H_unlabeled=X[rest], folds=folds,
                                   random_state=random_state)
        if spectral:
            curve = predict_learning_curve(pool_model, grid, level=level,
                                           model_error=0.0 if np.isnan(error) else error)
            C_star = float(curve.C_star[at])
        else:
            curve = forecast_curve(X[pool], y[pool], grid, pool_model, level=level, random_state=random_state)
            C_star = theory_best_C(pool_model, target_n)
        row = dict(layer=layer, labels=len(pool), unlabeled=rest.size,
                   pool_cv_accuracy=float(pool_model.cv_accuracy.max()), target_n=target_n,
                   predicted_accuracy=float(curve.accuracy[at]), low=float(curve.low[at]),
                   high=float(curve.high[at]), C_star=C_star, kappa=pool_model.kappa,
                   chance_factor=pool_model.chance_factor, model_error=error, forecaster=forecaster,
                   held_out_error=np.nan if spectral else held_out, teacher=teacher, level=level)
        if target_accuracy is not None:
            need = labels_needed(curve, target_accuracy)
            row.update(target_accuracy=target_accuracy, labels_needed=need["n"],
                       labels_needed_optimistic=need["n_optimistic"], labels_needed_pessimistic=need["n_pessimistic"])
        rows.append(row)
    table = pd.DataFrame(rows)
    best = table.loc[table.predicted_accuracy.idxmax()]
    extra = {}
    if target_accuracy is not None:
        reached = table[np.isfinite(table.labels_needed)]
        if len(reached):
            first = reached.loc[reached.labels_needed.idxmin()]
            extra = dict(fewest_labels_layer=int(first.layer), fewest_labels=float(first.labels_needed))
    return LabelPlan(table=table, best_layer=int(best.layer), predicted_accuracy=float(best.predicted_accuracy),
                     low=float(best.low), high=float(best.high), C_star=float(best.C_star), target_n=target_n,
                     reachable_within=float(grid[-1]), **extra)
