"""The report of the steering measurement: its per-prompt values turned into the rows of ``steer_metrics.csv``
(:data:`METRIC_COLUMNS`; docs/steering.md).

:func:`metric_rows` gives one row per (method, setting, layers, direction) entry on the prompts of one half: the
shift of the answer log-odds and its random control, the rank tests against the isotropic and the
covariance-matched null (:mod:`empirical.llm._steering_null`), the |alpha| of the edit, the read-out's validity and,
where continuations were generated, fluency, repetition and VADER; :func:`metric_table` orders them as the table.
The measurement whose values it reads is :mod:`empirical.llm._steering_eval`; this module needs no torch.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from ._steering_null import matched_shifts, rank_p_value
from ._steering_protocol import MIN_RANDOM, NULL_STREAMS

#: (metric_rows and metric_table read a measurement's values: the measurement's own helpers, not an API)
__all__ = ["METRIC_COLUMNS"]

#: The columns of ``steer_metrics.csv`` in order.
METRIC_COLUMNS = [
    "dataset", "method", "setting", "kind", "layer_choice", "layers", "strength", "positions", "direction", "half",
    "stage", "n_prompts", "answer_logodds_shift", "answer_logodds_shift_se", "answer_prob_shift", "moved_fraction",
    "answer_mass_unsteered", "answer_mass_steered", "random_control_shift", "random_control_se", "n_random",
    "concept_specific_shift", "concept_specific_se", "concept_specific_low", "concept_specific_high",
    "opposite_sign_shift", "kl_answer", "alpha_median", "alpha_max", "n_generated", "perplexity_unsteered",
    "perplexity_steered", "perplexity_ratio", "perplexity_ratio_low", "perplexity_ratio_high",
    "perplexity_ratio_random", "distinct2_unsteered", "distinct2_steered",
    "distinct2_random", "vader_shift", "vader_se", "vader_random_shift", "vader_random_se", "n_vader_random",
    "auc_unsteered", "auc_p_value", "measurable", "stem", "null_rank", "null_p", "null_p_opposite", "null_mean",
    "null_sd", "null_stream", "n_random_matched", "matched_null_rank", "matched_null_p", "matched_null_p_opposite",
    "matched_null_mean", "matched_null_sd"]


def _sem(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def _t_interval(x, level=0.95) -> tuple:
    x = np.asarray(x, dtype=float)
    if len(x) < 2:
        return math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, len(x) - 1) * _sem(x)
    return float(x.mean() - half), float(x.mean() + half)


def _gmean(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.exp(np.mean(np.log(x)))) if len(x) else math.nan



def metric_rows(measurement, entries, half: str, stage: str) -> list:
    """One table row per entry on the prompts of ``half`` it was read on (:data:`METRIC_COLUMNS`).

    Parameters
    ----------
    measurement : _Measurement
        The measurement whose per-prompt values are read (:mod:`empirical.llm._steering_eval`).
    entries : list of (str, SteeringSetting, list of int, str)
        The (method, setting, layers, direction) entries.
    half : {"selection", "report"}
        Whose prompts.
    stage : str
        The ``stage`` column (``all``, ``screen``, ``candidate``, ``report``).

    Returns
    -------
    list of dict
        One row per entry.

    Raises
    ------
    ValueError
        An entry that was not read on ``half``.
    """
    m = measurement
    auc, mass_all, measurable = m.validity()
    out = []
    for method, setting, layers, direction in entries:
        res = m.results[(method, setting.name, direction)]
        other = m.results.get((method, setting.name, "away" if direction == "towards" else "towards"))
        sign = 1.0 if direction == "towards" else -1.0
        sel = (m.halves == half) & np.isfinite(res["ld"])
        if not sel.any():
            raise ValueError(f"{setting.name} ({method}, {direction}) was not read on the {half} half")
        ld0 = m.ld0[sel]
        shift = sign * (res["ld"][sel] - ld0)
        read = np.isfinite(res["rand"][:, sel]).all(1)  # the draws read on every prompt of the half
        rand = sign * (res["rand"][read][:, sel] - ld0)
        specific = shift - rand.mean(0)
        null = rand.mean(1)  # per null direction: its mean shift over the half's prompts
        # a rank test only with >= MIN_RANDOM draws; fewer are a control (its mean), not a test
        rank, p_null, p_opposite = (rank_p_value(float(shift.mean()), null) if read.sum() >= MIN_RANDOM
                                    else (0, math.nan, math.nan))
        low, high = _t_interval(specific)
        a = np.asarray(res["alpha"])
        opposite = math.nan
        if other is not None and np.isfinite(other["ld"][sel]).all():
            opposite = float(np.mean(sign * (other["ld"][sel] - ld0)))
        row = dict(dataset=m.dataset, method=method, setting=setting.name, kind=setting.kind,
                   layer_choice=setting.layer_choice, layers=",".join(map(str, layers)),
                   strength=setting.strength, positions=setting.positions, direction=direction, half=half,
                   stage=stage, n_prompts=int(sel.sum()), answer_logodds_shift=float(shift.mean()),
                   answer_logodds_shift_se=_sem(shift),
                   answer_prob_shift=float(np.mean(sign * (expit(res["ld"][sel]) - expit(ld0)))),
                   moved_fraction=float(np.mean(shift > 0)), answer_mass_unsteered=float(m.mass0[sel].mean()),
                   answer_mass_steered=float(res["mass"][sel].mean()),
                   random_control_shift=float(rand.mean()), random_control_se=_sem(rand.mean(0)),
                   n_random=int(read.sum()), concept_specific_shift=float(specific.mean()),
                   concept_specific_se=_sem(specific), concept_specific_low=low, concept_specific_high=high,
                   opposite_sign_shift=opposite, kl_answer=float(res["kl"][sel].mean()),
                   alpha_median=float(np.median(a)) if a.size else math.nan,
                   alpha_max=float(a.max()) if a.size else math.nan,
                   auc_unsteered=auc, auc_p_value=m.auc_p, measurable=measurable, stem=m.stem,
                   n_generated=0, null_rank=rank, null_p=p_null, null_p_opposite=p_opposite,
                   null_mean=float(null.mean()), null_sd=float(null.std(ddof=1)),
                   null_stream=NULL_STREAMS[half], **_matched_row(m, res, sel, sign, float(shift.mean())))
        fixed = setting.edit_kind.fixed_strengths(setting, m.vectors[method], layers)
        if fixed is not None:
            strengths = np.abs(list(fixed.values()))
            row.update(alpha_median=float(np.median(strengths)), alpha_max=float(strengths.max()))
        key = (method, setting.name, direction)
        if key in m.generated:
            row.update(_generation_row(m, m.generated[key], sign, half))
        out.append(row)
    return out


def _matched_row(m, res, sel, sign, shift) -> dict:
    """The covariance-matched null's columns of a row: its rank test (with >= :data:`MIN_RANDOM` draws read;
    NaN otherwise, ``n_random_matched`` = the draws read)."""
    null = matched_shifts(res, sel, sign, m.ld0)
    rank, p, p_opposite = rank_p_value(shift, null) if len(null) >= MIN_RANDOM else (0, math.nan, math.nan)
    return dict(n_random_matched=len(null), matched_null_rank=rank, matched_null_p=p,
                matched_null_p_opposite=p_opposite, matched_null_mean=float(null.mean()) if len(null) else math.nan,
                matched_null_sd=float(null.std(ddof=1)) if len(null) > 1 else math.nan)


def _generation_row(m, stores, sign, half) -> dict:
    u, s, r = m.gen0, stores["concept"], stores["random"]
    sel = (m.gen_halves == half) & np.isfinite(s["nll"])
    if not sel.any():
        return dict(n_generated=0)
    ppl0, ppl1, ppl_r = (np.exp(x["nll"][sel]) for x in (u, s, r))
    # the ratio of geometric means is exp of the mean per-prompt log ratio: its 95 % interval over prompts
    low, high = np.exp(_t_interval(s["nll"][sel] - u["nll"][sel]))
    row = dict(n_generated=int(sel.sum()), perplexity_unsteered=_gmean(ppl0), perplexity_steered=_gmean(ppl1),
               perplexity_ratio=_gmean(ppl1) / _gmean(ppl0), perplexity_ratio_low=float(low),
               perplexity_ratio_high=float(high), perplexity_ratio_random=_gmean(ppl_r) / _gmean(ppl0),
               distinct2_unsteered=float(u["distinct2"][sel].mean()),
               distinct2_steered=float(s["distinct2"][sel].mean()),
               distinct2_random=float(r["distinct2"][sel].mean()))
    if m.sentiment and np.isfinite(s["vader"][sel]).all():
        change = sign * (s["vader"][sel] - u["vader"][sel])
        draws = stores["vader_random"][:, sel]
        draws = draws[np.isfinite(draws).all(1)]  # the random directions continued on every prompt of the half
        per_draw = (sign * (draws - u["vader"][sel])).mean(1)  # each direction's mean change
        row.update(vader_shift=float(change.mean()), vader_se=_sem(change),
                   vader_random_shift=float(per_draw.mean()), vader_random_se=_sem(per_draw),
                   n_vader_random=len(per_draw))
    return row


def metric_table(rows) -> pd.DataFrame:
    """Metric rows as the table: the columns of :data:`METRIC_COLUMNS`, in order (NaN where a row has none).

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`metric_rows`.

    Returns
    -------
    pandas.DataFrame
    """
    return pd.DataFrame(rows).reindex(columns=METRIC_COLUMNS)
