"""The null of the steering measurement (docs/steering.md): random directions and the rank test that makes the
directions the unit of inference.

* **Isotropic null**: :func:`random_units` draws one Gaussian unit direction per layer, reproducibly by ``(seed,
  stream, draw)``; :func:`null_units` turns them into the antithetic pairs (+r, -r) of one half (the selection and
  report halves draw on different streams, :data:`~empirical.llm._steering_protocol.NULL_STREAMS`).
* **Covariance-matched null**: :func:`state_factors` factors each layer's state covariance, :func:`matched_units`
  draws unit directions from that distribution (streams
  :data:`~empirical.llm._steering_protocol.MATCHED_STREAMS`).
* **The rank test**: :func:`rank_p_value` ranks the concept direction's shift among the null directions' shifts;
  :func:`rank_test_points` picks, on the selection half, the rows a staged run tests; :func:`matched_shifts` and
  :func:`null_table` give the per-draw shifts of a measurement (:data:`NULL_COLUMNS`).

The measurement that applies them is :mod:`empirical.llm._steering_eval`; this module needs no torch.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from empirical.common.checks import check_real_array, check_seed

from ._steering_protocol import MATCHED_STREAMS, NULL_STREAMS, passes_gates

#: (matched_shifts and null_table read a measurement's values: the measurement's own helpers, not an API)
__all__ = ["NULL_COLUMNS", "random_units", "null_units", "state_factors", "matched_units", "rank_p_value",
           "rank_test_points"]

#: The columns of the per-draw null table (``steering_text_null.csv``): one row per (dataset, method, setting,
#: direction, half, null_kind) and null direction; ``draw`` r's direction is ``sign`` x the pair ``r // 2``'s Gaussian
#: draw, ``shift`` its mean answer log-odds shift over the half's prompts, signed towards the target; ``null_kind``
#: 'isotropic' (:func:`null_units`) or 'matched' (:func:`matched_units`; tables written before it have no column:
#: isotropic).
NULL_COLUMNS = ["dataset", "method", "setting", "direction", "half", "stream", "draw", "sign", "shift", "null_kind"]


def random_units(layers, hidden_size: int, seed: int, n_random: int, stream=None) -> list:
    """``n_random`` draws of one random unit vector per layer; draw ``r`` depends only on ``(seed, stream, r)``.

    Parameters
    ----------
    layers : iterable of int
        The layers to draw for (drawn in ascending order within each draw).
    hidden_size : int
        Dimension of each vector.
    seed : int
        Seed; draw ``r`` uses ``numpy.random.default_rng([seed, r])`` (``[seed, stream, r]`` with a stream).
    n_random : int
        Number of draws.
    stream : int, optional
        An independent stream of draws for the same seed (:data:`NULL_STREAMS`: one per half).

    Returns
    -------
    list of dict of int to ndarray
        One ``{layer: unit vector (hidden_size,)}`` per draw (Gaussian directions, Euclidean norm 1).

    Examples
    --------
    >>> a, b = random_units([1, 2], 4, seed=3, n_random=5), random_units([1, 2], 4, seed=3, n_random=6)
    >>> bool(np.array_equal(a[4][2], b[4][2])), round(float(np.linalg.norm(a[0][1])), 6)
    (True, 1.0)
    """
    seed = check_seed(seed, "seed")
    draws = []
    for r in range(int(n_random)):
        rng = np.random.default_rng([seed, r] if stream is None else [seed, int(stream), r])
        units = {}
        for layer in sorted(layers):
            u = rng.standard_normal(hidden_size)
            units[layer] = u / np.linalg.norm(u)
        draws.append(units)
    return draws


def null_units(layers, hidden_size: int, seed: int, n_random: int, half: str) -> list:
    """The null directions of one half: ``n_random`` (even) unit directions per layer in antithetic pairs, draw
    ``2k`` = +u_k and draw ``2k + 1`` = -u_k, u_k from :func:`random_units` on the half's seed stream
    (:data:`NULL_STREAMS`), so the selection half and the report half never share a draw.

    Parameters
    ----------
    layers : iterable of int
        The layers to draw for.
    hidden_size : int
        Dimension of each vector.
    seed : int
        Seed of the measurement.
    n_random : int
        Number of directions, even (``n_random // 2`` pairs).
    half : {"selection", "report"}
        Whose stream.

    Returns
    -------
    list of dict of int to ndarray
        ``n_random`` ``{layer: unit vector}``; the antithetic sign of draw r is ``(-1) ** r``.

    Examples
    --------
    >>> a = null_units([1], 4, seed=0, n_random=4, half="selection")
    >>> bool(np.array_equal(a[1][1], -a[0][1])), len(a)
    (True, 4)
    >>> b = null_units([1], 4, seed=0, n_random=4, half="report")
    >>> bool(np.allclose(a[0][1], b[0][1]))
    False
    """
    if half not in NULL_STREAMS:
        raise ValueError(f"half must be one of {sorted(NULL_STREAMS)}, got {half!r}")
    if int(n_random) % 2:
        raise ValueError(f"n_random (--n-random) must be even (antithetic pairs +r, -r), got {n_random}")
    pairs = random_units(layers, hidden_size, seed, int(n_random) // 2, stream=NULL_STREAMS[half])
    return [{layer: sign * u for layer, u in units.items()} for units in pairs for sign in (1.0, -1.0)]


def state_factors(H, rows, layers) -> dict:
    """Square-root factors of each layer's state covariance: ``F = (X - mean)^T / sqrt(n - 1)`` of the states ``X``
    (n, p) of ``rows``, so that ``F z`` with ``z ~ N(0, I_n)`` is a Gaussian draw with the states' sample covariance
    (the covariance-matched null of :func:`matched_units`).

    Parameters
    ----------
    H : array (L+1, n_all, p)
        Hidden states per layer.
    rows : array of int
        The rows to estimate the covariance from (at least 2; :func:`evaluate_dataset`: train + validation).
    layers : iterable of int
        The layers.

    Returns
    -------
    dict of int to ndarray (p, n) float32
        One factor per layer.

    Examples
    --------
    >>> H = np.random.default_rng(0).standard_normal((2, 50, 3)) * [1.0, 2.0, 0.0]
    >>> F = state_factors(H, np.arange(50), [1])[1]
    >>> bool(np.allclose(F @ F.T, np.cov(H[1].T), atol=1e-5))
    True
    """
    rows = np.asarray(rows, dtype=int)
    if rows.size < 2:
        raise ValueError(f"state_factors needs at least 2 rows to estimate a covariance, got {rows.size}")
    out = {}
    for layer in layers:
        X = check_real_array(np.asarray(H[layer][rows], dtype=np.float64), f"H[{layer}]")
        out[int(layer)] = ((X - X.mean(0)).T / math.sqrt(len(rows) - 1)).astype(np.float32)
    return out


def matched_units(factors, seed: int, n_random: int, half: str) -> list:
    """The covariance-matched null directions of one half: ``n_random`` (even) unit directions per layer drawn from
    the layer's own state distribution (``F z / |F z|``, ``z ~ N(0, I)``, ``F`` from :func:`state_factors`), in
    antithetic pairs (draw ``2k`` = +u_k, ``2k + 1`` = -u_k); pair k of a half uses
    ``numpy.random.default_rng([seed, MATCHED_STREAMS[half], k])`` (:data:`MATCHED_STREAMS`: apart from the isotropic
    streams and from the other half's). Applied at the concept edit's |alpha| like the isotropic null
    (:func:`null_units`): the same norm, a direction the states actually vary along.

    Parameters
    ----------
    factors : mapping of int to ndarray (p, m)
        Per layer a factor ``F`` with ``F F^T`` = the states' covariance.
    seed : int
        Seed of the measurement.
    n_random : int
        Number of directions, even.
    half : {"selection", "report"}
        Whose stream.

    Returns
    -------
    list of dict of int to ndarray
        ``n_random`` ``{layer: unit vector (p,)}``.

    Examples
    --------
    >>> F = {1: np.diag([1.0, 0.0, 0.0])}  # the states vary along the first axis only
    >>> u = matched_units(F, seed=0, n_random=2, half="report")
    >>> [round(abs(float(v[1][0])), 6) for v in u], bool(np.array_equal(u[1][1], -u[0][1]))
    ([1.0, 1.0], True)
    """
    seed = check_seed(seed, "seed")
    if half not in MATCHED_STREAMS:
        raise ValueError(f"half must be one of {sorted(MATCHED_STREAMS)}, got {half!r}")
    if int(n_random) % 2:
        raise ValueError(f"n_random_matched must be even (antithetic pairs +r, -r), got {n_random}")
    factors = {layer: np.asarray(factors[layer], dtype=np.float64) for layer in sorted(factors)}
    draws = []
    for k in range(int(n_random) // 2):
        rng = np.random.default_rng([seed, MATCHED_STREAMS[half], k])
        units = {}
        for layer, F in factors.items():
            u = F @ rng.standard_normal(F.shape[1])
            norm = np.linalg.norm(u)
            if not norm > 0:
                raise ValueError(f"layer {layer}'s states do not vary: no covariance-matched direction")
            units[layer] = u / norm
        draws += [units, {layer: -u for layer, u in units.items()}]
    return draws


def rank_p_value(concept: float, null) -> tuple:
    """The concept direction's shift ranked among the null (random) directions' shifts, the directions being the
    unit of inference: ``p = (1 + #{null >= concept}) / (1 + N)`` and ``p_opposite = (1 + #{null <= concept}) /
    (1 + N)`` (ties count against the claim in both; exact under the null that the concept direction is one more
    draw from the same distribution).

    Parameters
    ----------
    concept : float
        The concept direction's shift, signed towards the target.
    null : array-like of float, shape (N,)
        The null directions' shifts on the same prompts, same sign convention; NaN entries are not allowed.

    Returns
    -------
    (int, float, float)
        The rank (1 = above every null shift; ``1 + #{null >= concept}``), p and p_opposite; ``(0, nan, nan)``
        when ``concept`` is NaN or there is no null shift.

    Examples
    --------
    >>> rank_p_value(3.0, [1.0, 2.0, 3.0, 0.0])
    (2, 0.4, 1.0)
    >>> rank_p_value(5.0, np.zeros(39))[1]
    0.025
    """
    if isinstance(concept, (bool, np.bool_)) or not isinstance(concept, (int, float, np.integer, np.floating)):
        raise TypeError(f"concept must be a real number (the concept direction's shift), got {concept!r}")
    null = np.ravel(check_real_array(null, "null"))  # finite floats, naming the argument
    if not np.isfinite(concept) or not null.size:
        return 0, math.nan, math.nan
    above, below = int(np.sum(null >= concept)), int(np.sum(null <= concept))
    n = null.size
    return 1 + above, (1 + above) / (1 + n), (1 + below) / (1 + n)



def rank_test_points(rows: pd.DataFrame, by=("dataset", "method", "direction")) -> pd.DataFrame:
    """The rows the rank test reads, chosen on the selection half before the report half is read: per group
    ``by``, the candidate (``stage`` != 'screen') with the largest concept-specific shift among those passing the
    gates (:func:`passes_gates`) on a measurable read-out. It is the operating point of its group
    (:func:`~empirical.llm.select_operating_points`) with the largest selection shift, the row
    the claim reads per dataset and direction (``paper_figures.claims.steering_text_claim``, RAPTOR); only these
    get :data:`N_RANDOM` null directions on the report half in :func:`evaluate_staged`.

    Parameters
    ----------
    rows : pandas.DataFrame
        Selection-half metric rows (:data:`METRIC_COLUMNS`).
    by : sequence of str
        Columns defining the groups.

    Returns
    -------
    pandas.DataFrame
        One row per group that has a passing candidate.
    """
    selection = rows[rows["half"] == "selection"]
    if "stage" in selection:
        selection = selection[selection["stage"] != "screen"]
    passed = selection[passes_gates(selection) & selection["measurable"].astype(bool)]
    ranked = passed.sort_values("concept_specific_shift", ascending=False, kind="stable")
    return ranked.groupby(list(by), sort=False).head(1)


def matched_shifts(results, sel, sign, ld0) -> np.ndarray:
    """Each covariance-matched null direction's mean shift over the prompts ``sel`` (the draws read on all of them).

    Parameters
    ----------
    results : dict
        One entry's per-prompt values (``"matched"``: the answer log-odds per draw and prompt, NaN where not read).
    sel : array of bool
        The prompts of the half.
    sign : float
        +1 towards, -1 away (shifts signed towards the target).
    ld0 : array of float
        The unsteered answer log-odds of every prompt.

    Returns
    -------
    ndarray
        One mean shift per matched direction read on every prompt of ``sel``.
    """
    matched = results["matched"][:, sel]
    read = np.isfinite(matched).all(1) if matched.size else np.zeros(len(matched), bool)
    return (sign * (matched[read] - ld0[sel])).mean(1)


def null_table(measurement, table: pd.DataFrame) -> pd.DataFrame:
    """The per-draw null shifts of every tested (method, setting, direction, half) row of ``table``: those with a
    rank p (>= :data:`~empirical.llm.MIN_RANDOM` draws; :data:`NULL_COLUMNS`).

    Parameters
    ----------
    measurement : _Measurement
        The measurement the rows come from (its per-prompt ``results``, ``halves``, unsteered ``ld0`` and
        ``dataset``; :mod:`empirical.llm._steering_eval`).
    table : pandas.DataFrame
        Its metric rows (:data:`~empirical.llm._steering_report.METRIC_COLUMNS`).

    Returns
    -------
    pandas.DataFrame
        One row per null direction of each tested row, isotropic and (where tested) covariance-matched.
    """
    m = measurement
    out = []
    for r in table.itertuples():
        res = m.results.get((r.method, r.setting, r.direction))
        if res is None or r.half not in NULL_STREAMS or not np.isfinite(r.null_p):
            continue
        sign = 1.0 if r.direction == "towards" else -1.0
        sel = (m.halves == r.half) & np.isfinite(res["ld"])
        read = np.isfinite(res["rand"][:, sel]).all(1)
        nulls = [("isotropic", NULL_STREAMS[r.half], (sign * (res["rand"][read][:, sel] - m.ld0[sel])).mean(1))]
        if np.isfinite(getattr(r, "matched_null_p", math.nan)):
            nulls.append(("matched", MATCHED_STREAMS[r.half], matched_shifts(res, sel, sign, m.ld0)))
        for kind, stream, null in nulls:
            out.append(pd.DataFrame(dict(dataset=m.dataset, method=r.method, setting=r.setting,
                                         direction=r.direction, half=r.half, stream=stream,
                                         draw=np.arange(len(null)), sign=np.where(np.arange(len(null)) % 2, -1, 1),
                                         shift=null, null_kind=kind)))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=NULL_COLUMNS)
