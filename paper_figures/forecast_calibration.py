"""The forecaster's held-out evidence (issue 54, docs/learning_curves.md "The forecaster"): the interval of ``raptor
plan``'s forecaster calibrated leave-one-dataset-out, and every forecaster judged with the datasets as the unit.

Reads the learning-curve section's evaluations (:func:`paper_figures.learning_curves.evaluate_setting` rows with
``dataset``, ``layer``, ``pool``, ``draw``); fits nothing but the conformal quantiles.

* :func:`held_out_intervals`: the forecaster's (:data:`FORECASTER`) 90 % interval for each dataset, with its q taken
  from the *other* datasets only (split-conformal: the dataset-weighted ``level`` quantile of |error| / scale at the
  same multiple, :func:`empirical.probes.planning.forecast_scale`), so that its coverage is that of a dataset the
  calibration never saw.
* :func:`calibration_table`: per level and multiple, q over every dataset (what the library's
  :data:`empirical.probes.planning.HELD_OUT_QUANTILES` should be) beside the library's, and the held-out coverage.
* :func:`forecaster_table`: per forecaster and multiple, with the datasets as the unit: the mean over datasets of the
  per-dataset MAE, the bias, the interval's coverage pooled and on the worst dataset, the share of pool draws whose
  forecast best layer is within 1 point of the true best, and against each baseline ("no gain", the power law, the
  best of POW4 / MMF4 / WBL4 per dataset) the datasets it wins on and the mean paired MAE difference with its 95 %
  t-interval over datasets.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from empirical.probes import CURVE_FAMILIES
from empirical.probes.planning import HELD_OUT_MULTIPLES, HELD_OUT_QUANTILES, forecast_scale

from .verdicts import mean_interval

#: the forecaster ``raptor plan`` uses (its method name in the evaluations)
FORECASTER = "capped_power_law"
#: the levels the library's interval is calibrated at
LEVELS = tuple(sorted(HELD_OUT_QUANTILES))
#: the interval's level in the tables (the others are in the calibration table)
LEVEL = 0.9
#: the baselines every forecaster is compared with; ``families_best`` is the best of CURVE_FAMILIES per dataset
BASELINES = ("no_gain", "power_law", "families_best")
#: best-layer agreement: the forecast best layer's true accuracy within this of the true best
LAYER_TOLERANCE = 0.01


def _dataset_weighted_quantile(scores, datasets, level) -> float:
    """The ``level`` quantile of ``scores`` with each dataset's settings weighing 1 in all (the lower one at a tie)."""
    scores, datasets = np.asarray(scores, dtype=float), pd.Series(np.asarray(datasets))
    weights = 1.0 / datasets.map(datasets.value_counts()).to_numpy(dtype=float)
    order = np.argsort(scores, kind="stable")
    cumulative = np.cumsum(weights[order]) / weights.sum()
    return float(scores[order][min(int(np.searchsorted(cumulative, level)), order.size - 1)])


def _scored(raw: pd.DataFrame) -> pd.DataFrame:
    """The forecaster's rows with their scale (own pool, test set and pool accuracy) and score |error| / scale."""
    rows = raw[raw["method"] == FORECASTER]
    scale = forecast_scale(rows["accuracy"].to_numpy(), rows["pool_accuracy"].to_numpy(), rows["pool"].to_numpy(),
                           rows["n_test"].to_numpy())
    return rows.assign(scale=scale, score=np.abs(rows["accuracy"] - rows["truth"]) / scale)


def held_out_intervals(raw: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """``raw`` with the forecaster's ``low`` / ``high`` replaced by its leave-one-dataset-out conformal interval.

    Parameters
    ----------
    raw : DataFrame
        The section's evaluations (``dataset``, ``multiple``, ``method``, ``accuracy``, ``truth``, ``pool``,
        ``n_test``, ``pool_accuracy``).
    level : float, default=0.9
        The interval's level.

    Returns
    -------
    DataFrame
        A copy; the forecaster's rows get ``q`` (from the other datasets at the same multiple) and the interval
        ``accuracy -/+ q x scale`` clipped to [0, 1].  A dataset alone at its multiple keeps its native interval
        (no other dataset to calibrate on).
    """
    out = raw.copy()
    scored = _scored(raw)
    for (multiple, dataset), rows in scored.groupby(["multiple", "dataset"]):
        others = scored[(scored["multiple"] == multiple) & (scored["dataset"] != dataset)]
        if others.empty:
            continue
        q = _dataset_weighted_quantile(others["score"], others["dataset"], level)
        half = q * rows["scale"]
        out.loc[rows.index, "q"] = q
        out.loc[rows.index, "low"] = np.clip(rows["accuracy"] - half, 0.0, 1.0)
        out.loc[rows.index, "high"] = np.clip(rows["accuracy"] + half, 0.0, 1.0)
    return out


def calibration_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per level and multiple: q over every dataset, the library's q, and the held-out coverage (pooled, worst).

    Parameters
    ----------
    raw : DataFrame
        As for :func:`held_out_intervals`.

    Returns
    -------
    DataFrame
        ``level, multiple, datasets, settings, q, library_q, coverage_held_out, coverage_held_out_min,
        worst_dataset``.
    """
    scored = _scored(raw)
    rows = []
    for level in LEVELS:
        for multiple, at in scored.groupby("multiple"):
            covered = []
            for dataset, own in at.groupby("dataset"):
                others = at[at["dataset"] != dataset]
                if others.empty:
                    continue
                q = _dataset_weighted_quantile(others["score"], others["dataset"], level)
                covered.append((dataset, float((own["score"] <= q).mean()), len(own)))
            library = (float(np.interp(np.log2(multiple), np.log2(HELD_OUT_MULTIPLES), HELD_OUT_QUANTILES[level]))
                       if multiple in HELD_OUT_MULTIPLES else np.nan)
            worst = min(covered, key=lambda c: c[1]) if covered else (None, np.nan, 0)
            rows.append(dict(level=level, multiple=int(multiple), datasets=at["dataset"].nunique(), settings=len(at),
                             q=_dataset_weighted_quantile(at["score"], at["dataset"], level), library_q=library,
                             coverage_held_out=(np.average([c[1] for c in covered], weights=[c[2] for c in covered])
                                                if covered else np.nan),
                             coverage_held_out_min=worst[1], worst_dataset=worst[0]))
    return pd.DataFrame(rows)


def _best_layer_agreement(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (method, multiple, dataset): the share of (pool, draw) cells whose forecast best layer is within
    :data:`LAYER_TOLERANCE` of the true best."""
    rows = []
    for (method, multiple, dataset, pool, draw), cell in raw.groupby(["method", "multiple", "dataset", "pool",
                                                                      "draw"]):
        if cell["layer"].nunique() < 2:
            continue
        picked = cell.loc[cell["accuracy"].idxmax()]
        rows.append(dict(method=method, multiple=multiple, dataset=dataset,
                         agree=float(cell["truth"].max() - picked["truth"] <= LAYER_TOLERANCE)))
    if not rows:
        return pd.DataFrame(columns=["method", "multiple", "dataset", "agree"])
    return pd.DataFrame(rows).groupby(["method", "multiple", "dataset"], as_index=False)["agree"].mean()


def forecaster_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Every forecaster at every multiple, with the datasets as the unit (module docstring).

    Parameters
    ----------
    raw : DataFrame
        The evaluations, the forecaster's interval already the held-out one (:func:`held_out_intervals`).

    Returns
    -------
    DataFrame
        ``method, multiple, datasets, mae, bias, coverage, coverage_min, best_layer_within_1pt`` and, per baseline
        ``B`` of :data:`BASELINES`, ``wins_B`` (datasets with a lower MAE than B's), ``d_B``, ``d_B_low``,
        ``d_B_high`` (mean over datasets of the MAE minus B's, 95 % t-interval); sorted by multiple and MAE.
    """
    raw = raw.assign(error=raw["accuracy"] - raw["truth"],
                     covered=(raw["low"] <= raw["truth"]) & (raw["truth"] <= raw["high"]))
    per = raw.groupby(["method", "multiple", "dataset"]).agg(
        mae=("error", lambda e: float(np.mean(np.abs(e)))), bias=("error", "mean"), coverage=("covered", "mean"),
        settings=("error", "size")).reset_index()
    per = per.merge(_best_layer_agreement(raw), on=["method", "multiple", "dataset"], how="left")
    families = (per[per["method"].isin(CURVE_FAMILIES)].groupby(["multiple", "dataset"], as_index=False)["mae"].min()
                .assign(method="families_best"))
    reference = pd.concat([per[["method", "multiple", "dataset", "mae"]], families], ignore_index=True)
    rows = []
    for (method, multiple), own in per.groupby(["method", "multiple"]):
        pooled = raw[(raw["method"] == method) & (raw["multiple"] == multiple)]["covered"].mean()
        row = dict(method=method, multiple=int(multiple), datasets=len(own), mae=own["mae"].mean(),
                   bias=own["bias"].mean(), coverage=float(pooled), coverage_min=own["coverage"].min(),
                   best_layer_within_1pt=own["agree"].mean())
        mine = own.set_index("dataset")["mae"]
        for baseline in BASELINES:
            theirs = reference[(reference["method"] == baseline)
                               & (reference["multiple"] == multiple)].set_index("dataset")["mae"]
            common = mine.index.intersection(theirs.index)
            diff = (mine[common] - theirs[common]).to_numpy()
            mean, low, high = mean_interval(diff, 0.95) if diff.size else (np.nan, np.nan, np.nan)
            row.update({f"wins_{baseline}": int(np.sum(diff < 0)), f"d_{baseline}": mean, f"d_{baseline}_low": low,
                        f"d_{baseline}_high": high})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["multiple", "mae"], ignore_index=True)
