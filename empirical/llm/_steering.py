"""GCAV steering measured in probe coordinates, as the paper measures it: steer a prompt set, record every
(layer, prompt) pair, and summarise success and strength (the paper's steering protocol appendix).

The edits themselves (conventions: layer index, positions, GCAV strength, rounding) are
:mod:`empirical.llm._edits`. Success here is true by construction (GCAV sets the probe logit to its
target); what the model then says is measured by :mod:`empirical.llm._steering_eval`.

Metrics (``steering_metrics``), over evaluated layer-prompt pairs (active layers x prompts, read
at each prompt's last token on the prompt pass): success rate (target region reached), intervention
rate (alpha != 0), and |alpha| median / p90 / max over the pairs where steering was applied
(``*_all`` variants include the zero-strength pairs).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy.special import expit
from tqdm.auto import tqdm

from ._edits import SteerState, gcav_steering
from ._extract import check_positions, length_batches, pad_right, tokenize_prompts
from ._gcav import GcavRule, target_logit
from ._hooks import input_device

__all__ = ["steer_prompts", "steering_metrics", "hard_layers"]


def _records_frame(records, direction, p_target):
    df = pd.DataFrame(records)
    if df.empty:
        return df
    g_star = target_logit(p_target)
    df["intervened"] = df["alpha"] != 0.0
    if direction == "towards":
        df["success"] = df["logit_after"] >= g_star - df["round_tol"]
    else:
        df["success"] = df["logit_after"] <= g_star + df["round_tol"]
    df["p_before"] = expit(df["logit_before"].to_numpy())
    df["p_after"] = expit(df["logit_after"].to_numpy())
    df["abs_alpha"] = df["alpha"].abs()
    df.attrs["g_star"] = g_star
    return df


def steer_prompts(model, tokenizer, prompts, probes, rule: GcavRule | str = "towards", batch_size=16,
                  progress=True) -> pd.DataFrame:
    """GCAV-steer a prompt set and record every evaluated (layer, prompt) pair.

    Returns a pandas DataFrame with columns ``prompt, layer, logit_before, alpha, logit_after,
    round_tol, intervened, success, p_before, p_after, abs_alpha`` (the metrics' input), with
    ``attrs`` holding the active and skipped layers.

    Parameters
    ----------
    model, tokenizer : transformers causal LM and its tokenizer
        A decoder-only model and the tokenizer it was trained with.
    prompts : list of str
        The prompts; each is steered and recorded at its own last token (right-padded batches).
    probes : ConceptVectors or mapping of int to LinearProbe
        The probe of each steered layer (layer l = output of decoder block l, 1..L); their ``coef`` and
        ``intercept`` define the logit, ``direction`` the edit.
    rule : GcavRule or {"towards", "away"}, default="towards"
        GCAV's rule (:class:`~empirical.llm.GcavRule`): the direction (push the probe probability above or below
        the target), the target probability ``p_target`` (default 0.9999 towards, 0.0001 away), the reliability
        threshold ``tau`` on the probes' ``test_accuracy`` and the edited positions; a direction alone is
        ``GcavRule(direction)``.
    batch_size : int
        Prompts per forward pass.
    progress : bool
        Show a progress bar.

    Returns
    -------
    pandas.DataFrame
        One row per (active layer, prompt) pair with the columns above; ``prompt`` is the index into ``prompts``,
        ``alpha`` is in hidden-state units along the probe's ``direction``, logits are natural-log odds.
        ``attrs``: ``active_layers``, ``skipped_layers``, ``direction``, ``p_target`` (and ``g_star`` when
        there are rows).

    Examples
    --------
    >>> import numpy as np
    >>> from empirical.probes import ConceptVectors, LinearProbe
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0), tiny_tokenizer()
    >>> probes = ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.9),
    ...                          2: LinearProbe(-np.ones(32), 0.5, test_accuracy=0.95)})
    >>> pairs = steer_prompts(model, tokenizer, ["a good film", "a bad film"], probes, progress=False)
    >>> len(pairs), bool(pairs["success"].all())
    (4, True)
    """
    rule = GcavRule.of(rule)
    direction, p_target = rule.direction, rule.target
    token_ids = tokenize_prompts(tokenizer, prompts)
    check_positions(model, token_ids)
    core = model.base_model if getattr(model, "base_model", None) is not None else model
    device = input_device(model)
    st = SteerState()
    order = sorted(range(len(token_ids)), key=lambda i: -len(token_ids[i]))
    with gcav_steering(model, probes, rule, state=st), torch.inference_mode():
        bar = tqdm(total=len(order), desc=f"steer {direction}", unit="prompt", disable=not progress, leave=False)
        for idx in length_batches(order, token_ids, batch_size, 1 << 30, 0):
            ids, mask, last = pad_right([token_ids[i] for i in idx], 0, device)
            st.last, st.rows = last, idx
            core(input_ids=ids, attention_mask=mask, use_cache=False)
            bar.update(len(idx))
        bar.close()
    df = _records_frame(st.records, direction, p_target)
    df.attrs.update(active_layers=st.active_layers, skipped_layers=st.skipped_layers, direction=direction,
                    p_target=p_target)
    return df


def steering_metrics(records) -> dict:
    """Success rate, intervention rate and |alpha| median/p90/max over evaluated layer-prompt pairs.

    Parameters
    ----------
    records : pandas.DataFrame
        The output of :func:`steer_prompts`.

    Returns
    -------
    dict
        ``n_pairs``, ``n_layers``, ``layers`` ("first-last"), ``success_rate``, ``intervention_rate``,
        ``alpha_median``, ``alpha_p90``, ``alpha_max`` (over pairs with an edit), ``alpha_median_all``,
        ``alpha_p90_all`` (all pairs), ``max_abs_logit_error`` (NaN values when there are no pairs).

    Examples
    --------
    >>> import numpy as np
    >>> from empirical.probes import ConceptVectors, LinearProbe
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0), tiny_tokenizer()
    >>> probes = ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.9),
    ...                          2: LinearProbe(-np.ones(32), 0.5, test_accuracy=0.95)})
    >>> metrics = steering_metrics(steer_prompts(model, tokenizer, ["a good film"], probes, progress=False))
    >>> metrics["n_pairs"], metrics["success_rate"], metrics["layers"]
    (2, 1.0, '1-2')
    """
    df = records
    n = int(len(df))
    if n == 0:
        nan = float("nan")
        return {"n_pairs": 0, "n_layers": 0, "layers": "--", "success_rate": nan, "intervention_rate": nan,
                "alpha_median": nan, "alpha_p90": nan, "alpha_max": nan, "alpha_median_all": nan,
                "alpha_p90_all": nan, "max_abs_logit_error": nan}
    a = df.loc[df["intervened"], "abs_alpha"].to_numpy()
    a_all = df["abs_alpha"].to_numpy()

    def q(x, p):
        return float(np.percentile(x, p)) if len(x) else 0.0

    return {
        "n_pairs": n,
        "n_layers": int(df["layer"].nunique()),
        "layers": f"{int(df['layer'].min())}-{int(df['layer'].max())}",
        "success_rate": float(df["success"].mean()),
        "intervention_rate": float(df["intervened"].mean()),
        "alpha_median": q(a, 50),
        "alpha_p90": q(a, 90),
        "alpha_max": float(a.max()) if len(a) else 0.0,
        "alpha_median_all": q(a_all, 50),
        "alpha_p90_all": q(a_all, 90),
        "max_abs_logit_error": float(np.max(np.abs(df.loc[df["intervened"], "logit_after"] - df.attrs["g_star"])))
        if df["intervened"].any() and "g_star" in df.attrs else float("nan"),
    }


def hard_layers(records, k: int = 3) -> dict:
    """Top-k layers by median and by max |alpha| (over pairs where steering was applied).

    Parameters
    ----------
    records : pandas.DataFrame
        The output of :func:`steer_prompts`.
    k : int
        How many layers.

    Returns
    -------
    dict
        ``by_median`` and ``by_max``: lists of (layer, |alpha|), largest first.
    """
    df = records[records["intervened"]] if len(records) else records
    if len(df) == 0:
        return {"by_median": [], "by_max": []}
    grp = df.groupby("layer")["abs_alpha"]
    med, mx = grp.median(), grp.max()

    def top(s):
        return [(int(layer), float(x)) for layer, x in s.sort_values(ascending=False).head(k).items()]

    return {"by_median": top(med), "by_max": top(mx)}


