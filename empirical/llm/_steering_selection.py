"""Choosing where to steer from a measured table: the operating point per method and layer choice, and the default.

:func:`select_operating_points` picks, per group, the strength with the largest concept-specific shift under the
gates (:func:`~empirical.llm.passes_gates`: answer mass >= ``MASS_GATE`` x the unsteered one,
perplexity ratio <= ``PERPLEXITY_GATE``) on the selection half of the prompts and reports it on the other half;
:func:`default_setting` picks the default setting from such a table (docs/steering.md). The table comes from
:mod:`empirical.llm._steering_eval`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._steering_protocol import NULL_ALPHA, passes_gates
from ._steering_settings import PAPER_SETTING

__all__ = ["select_operating_points", "default_setting"]


# --------------------------------------------------------------------------------------------- selection
def select_operating_points(table: pd.DataFrame, by=("dataset", "method", "layer_choice", "kind", "positions",
                                                     "direction")) -> pd.DataFrame:
    """Per group ``by``, the strength with the largest concept-specific shift on the *selection* half among rows
    passing the gates (answer mass >= MASS_GATE x unsteered; perplexity ratio <= PERPLEXITY_GATE where measured;
    the dataset's read-out measurable), reported by its *report*-half row. Rows of a staged run's screen
    (``stage`` = 'screen': read-out only, never generated) are not operating points. Groups where no strength
    passes are left out.

    Parameters
    ----------
    table : pandas.DataFrame
        Metric rows of both halves (:data:`METRIC_COLUMNS`, from :func:`evaluate_steering` or
        :func:`evaluate_staged`).
    by : sequence of str
        Columns defining the groups.

    Returns
    -------
    pandas.DataFrame
        The report-half rows of the chosen settings, with ``selection_shift`` (the selection half's value).
    """
    need = {"half", "setting", "concept_specific_shift", "answer_mass_steered", "answer_mass_unsteered",
            "perplexity_ratio", "measurable", *by}
    missing = sorted(need - set(table.columns))
    if missing:
        raise ValueError(f"the steering table lacks columns {missing}")
    selection = table[table["half"] == "selection"]
    if "stage" in selection:
        selection = selection[selection["stage"] != "screen"]
    gate = passes_gates(selection) & selection["measurable"].astype(bool)
    chosen = []
    for key, group in selection[gate].groupby(list(by), sort=False):
        best = group.loc[group["concept_specific_shift"].idxmax()]
        match = np.ones(len(table), bool)
        for col in (*by, "setting"):
            match &= (table[col] == best[col]).to_numpy()
        report = table[match & (table["half"] == "report").to_numpy()]
        if len(report) != 1:
            raise ValueError(f"setting {best['setting']!r} has {len(report)} report-half rows, expected 1")
        chosen.append(report.assign(selection_shift=float(best["concept_specific_shift"])))
    if not chosen:
        return table.iloc[:0].assign(selection_shift=pd.Series(dtype=float))
    return pd.concat(chosen, ignore_index=True)


def default_setting(table: pd.DataFrame, method: str = "RAPTOR") -> dict:
    """The default steering setting chosen from a measured table: among ``method``'s settings that pass the
    gates on the selection half of every measurable dataset and direction, the one with the largest mean
    selection-half concept-specific shift; it becomes the default when it beats the null directions on every
    measurable dataset and direction of the report half (rank p ``null_p`` < :data:`NULL_ALPHA`; a table without
    the rank: every per-prompt interval above 0), else the paper's protocol (:data:`PAPER_SETTING`) stays, with the
    reason. The report half only confirms, it never chooses.

    Parameters
    ----------
    table : pandas.DataFrame
        Metric rows of both halves (:data:`METRIC_COLUMNS`).
    method : str
        The method whose settings compete.

    Returns
    -------
    dict
        ``setting`` (a name), ``beats_random`` (bool), ``shift`` (the chosen setting's mean report-half
        concept-specific shift, NaN without a candidate) and ``reason``.
    """
    points = select_operating_points(table[table["method"] == method], by=("dataset", "method", "setting",
                                                                           "direction"))
    if not len(points):
        return dict(setting=PAPER_SETTING, beats_random=False, shift=math.nan,
                    reason=f"no {method} setting passes the gates on a measurable dataset")
    # a setting qualifies when it passed the gates on every measurable dataset and direction of the method
    measured = table[(table["method"] == method) & table["measurable"].astype(bool) & (table["half"] == "selection")]
    n_needed = len(measured[["dataset", "direction"]].drop_duplicates())
    complete = [(name, g) for name, g in points.groupby("setting") if len(g) == n_needed]
    if not complete:
        return dict(setting=PAPER_SETTING, beats_random=False, shift=math.nan,
                    reason=f"no {method} setting passes the gates on every measurable dataset and direction")
    name, g = max(complete, key=lambda item: item[1]["selection_shift"].mean())
    shift = float(g["concept_specific_shift"].mean())
    ranked = "null_p" in g.columns and bool(g["null_p"].notna().all())
    beats = (g["null_p"] < NULL_ALPHA) if ranked else (g["concept_specific_low"] > 0)
    if not bool(beats.all()):
        return dict(setting=PAPER_SETTING, beats_random=False, shift=shift,
                    reason=f"the {method} setting chosen on the selection half ({name}) does not beat the random "
                           f"control on every measurable dataset and direction of the report half ({shift:+.3f})")
    return dict(setting=name, beats_random=True, shift=shift,
                reason="largest selection-half concept-specific shift under the gates; on the report half it "
                       + ("ranks above the null directions (rank p < 0.025)" if ranked else
                          "its intervals lie above the random control"))
