"""The steering measurement's protocol constants and gates, without torch (docs/steering.md).

What a measurement counts as a test and as an acceptable operating point: the number of null (random) directions
of the directions-as-unit rank test and of the control (:data:`N_RANDOM`, :data:`MIN_RANDOM`,
:data:`N_RANDOM_SELECTION`, :data:`MIN_CONTROL`), its level (:data:`NULL_ALPHA`) and seed streams
(:data:`NULL_STREAMS`), the generation budget (:data:`N_GENERATE`) and the gates of an operating point
(:func:`passes_gates`).  The measurement itself (:mod:`empirical.llm.steering_eval`, torch) and the pure-pandas
selection and timing modules (:mod:`empirical.llm.steering_selection`, :mod:`empirical.llm.steering_cost`) read them
from here, so that choosing an operating point from a saved table never imports torch.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["MIN_RANDOM", "N_RANDOM", "N_RANDOM_SELECTION", "MIN_CONTROL", "NULL_ALPHA", "NULL_STREAMS", "MASS_GATE",
           "PERPLEXITY_GATE", "DISTINCT2_GATE", "N_GENERATE", "passes_gates"]

#: Null (random) directions per (setting, direction, half), at least: the rank p-value 1 / (N + 1) can reach
#: 0.025 only with N >= 39, and the directions come in antithetic pairs (+r, -r), so N >= 40 and even.
MIN_RANDOM = 40
#: Null directions of the rank test by default (50 antithetic pairs; smallest p = 1/101): in a staged run only the
#: tested points (:func:`rank_test_points`) get them, on the report half; :func:`evaluate_steering` reads them for
#: every setting and both halves.
N_RANDOM = 100
#: Random directions of the control elsewhere in a staged run (the selection half's screen and candidates, the
#: report half's rows that are not tested: the first ones of the report stream): the random mean that the
#: concept-specific shift subtracts and the gates read, not a test (no rank p); antithetic, even, at least
#: :data:`MIN_CONTROL`.
N_RANDOM_SELECTION = 10
#: The least number of control directions (one antithetic pair).
MIN_CONTROL = 2
#: One-sided level of the rank test (a concept direction beats the null when its rank p is below it).
NULL_ALPHA = 0.025
#: Seed streams of the null directions: the selection half and the report half draw different directions.
NULL_STREAMS = {"selection": 0, "report": 1}
#: Gates of the operating point: steered mass >= MASS_GATE x unsteered mass, perplexity ratio <= PERPLEXITY_GATE
#: and (repetition) steered distinct-2 >= DISTINCT2_GATE x unsteered distinct-2, the last two where generated.
MASS_GATE = 0.5
#: see :data:`MASS_GATE`
PERPLEXITY_GATE = 1.5
#: see :data:`MASS_GATE` (a continuation repeating its bigrams, "good good good ...", has distinct-2 near 0)
DISTINCT2_GATE = 0.8
#: Generation prompts of a measurement by default (the fluency gates read the selection half's 32 continuations).
N_GENERATE = 64


def passes_gates(rows: pd.DataFrame) -> pd.Series:
    """The gates of an operating point on table rows: answer mass and, where generated, fluency (perplexity ratio)
    and repetition (distinct-2); a row passes only when every gate passes.

    Parameters
    ----------
    rows : pandas.DataFrame
        Metric rows (:data:`METRIC_COLUMNS`).

    Returns
    -------
    pandas.Series of bool
        Steered answer mass >= :data:`MASS_GATE` x the unsteered one, perplexity ratio <=
        :data:`PERPLEXITY_GATE` and steered distinct-2 >= :data:`DISTINCT2_GATE` x the unsteered one where they
        were measured (NaN passes; tables without the distinct-2 columns pass that gate).
    """
    ratio = rows["perplexity_ratio"]
    passed = (rows["answer_mass_steered"] >= MASS_GATE * rows["answer_mass_unsteered"]) & \
        (ratio.isna() | (ratio <= PERPLEXITY_GATE))
    if {"distinct2_steered", "distinct2_unsteered"} <= set(rows.columns):
        steered, unsteered = rows["distinct2_steered"], rows["distinct2_unsteered"]
        passed &= steered.isna() | unsteered.isna() | (steered >= DISTINCT2_GATE * unsteered)
    return passed
