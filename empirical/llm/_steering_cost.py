"""The timing model of the steering measurement: seconds for a prompt set, from unit costs measured on the
default model (:data:`COST_SECONDS`, docs/steering.md, Cost).
"""
from __future__ import annotations

from collections.abc import Mapping

from empirical.common.checks import check_bool, check_choice, check_int, check_scalar, check_sequence

from ._steering_protocol import STEERING_METHODS, SteeringProtocol

# --------------------------------------------------------------------------------------------- cost

__all__ = ["COST_SECONDS", "estimate_seconds"]

#: Seconds per unit of work on SmolLM2-135M-Instruct, CPU, 2 idle cores, calibrated on the full steering run
#: (docs/steering.md, Cost): a prompt token of a batched full pass (``token``), one row of a one-token step with
#: the LM head (``step``: an answer read-out, a generated token, a token of its perplexity) and the concept vectors
#: of one dataset (1000 examples, 30 layers, one core) per method (``fit``: the per-fit medians of the main job; 0
#: when the empirical section's saved vectors are loaded). Earlier values (8.7 ms, 13.7 ms) were measured under a
#: load of 4-6 and overestimated the idle run 2-3x; pass ``costs`` to rescale for another machine.
COST_SECONDS = dict(token=2.9e-3, step=7.5e-3, fit=dict(RAPTOR=8.0, DiffMeans=0.2, GCS=51.0, xRFM=71.0))


def estimate_seconds(protocol: SteeringProtocol | None = None, *, prompt_tokens: float = 60.0, n_settings: int = 67,
                     methods=STEERING_METHODS, sentiment: bool = False, measurable: bool = True,
                     tested_twins: bool = True, costs=None) -> dict:
    """Seconds one dataset of :func:`evaluate_dataset` (staged) takes, by stage, from the work its ``protocol`` does
    and :data:`COST_SECONDS`; an upper bound (every candidate passes every gate).

    Work per stage (``h`` = n_prompts / 2, ``T`` = ``prompt_tokens`` (prompt + stem), ``E`` = 1 +
    n_random_selection read-outs per edit (the concept and its control), ``N`` = n_random - n_random_selection + 1
    (the tested points' further null directions and the concept edit read again), ``C`` = methods x directions x
    n_candidates, ``W`` = twin methods (default: every method) x directions x n_twins x stage-2 positions, ``P`` =
    twin methods x directions when ``tested_twins`` (the upper bound: their tested point is a prompt / all-position
    twin, which re-runs the prompt per draw) else 0, ``g`` = n_generate / 2, ``M`` = n_random_matched + 1 (the
    covariance-matched null and the concept edit read again; 0 without it), ``X`` = n_text_random - 1 for a
    ``sentiment`` dataset, else 0 (the VADER control's further random directions, report half); a dataset that is
    not ``measurable`` stops after validity and fits nothing; every count but ``T``, the settings and the methods is
    the protocol's):

    ========== ==================================================================================
    validity   n_prompts x T tokens + n_prompts steps (unsteered read-out)
    fit        the methods' concept vectors on every layer
    screen     h x T tokens + n_settings x directions x E x h steps
    candidate  h x T tokens + W x E x h x T tokens (prompt / all positions re-run the prompt)
    generate   per half: (C + W) x 2 (concept, random) x g x max_new_tokens x 2 (generate, perplexity) steps
    report     h x T tokens + C x E x h steps + W x E x h x T tokens
    null       (methods x directions - P) x N x h steps + P x N x h x T tokens (one tested point per method and
               direction: :func:`~empirical.llm._steering_null.rank_test_points`)
    matched    as ``null`` with M for N (the tested points' covariance-matched null)
    text       X x (C + W) x g x max_new_tokens steps (greedy continuations scored by VADER only)
    ========== ==================================================================================

    Parameters
    ----------
    protocol : SteeringProtocol, optional
        The measurement (default ``SteeringProtocol()``): its ``n_prompts``, ``directions``, ``n_random``,
        ``n_random_selection``, ``n_random_matched``, ``n_text_random``, ``n_candidates``, ``n_twins``,
        ``stage2_positions``, ``twin_methods`` (among ``methods``), ``n_generate`` and ``max_new_tokens``.
    prompt_tokens : float
        Mean tokens per held-out prompt, the answer stem included.
    n_settings : int
        Settings of the screen.
    methods : sequence of str
        Methods fitted (keys of ``costs["fit"]``).
    sentiment : bool
        Whether the dataset is scored with VADER (only then are ``n_text_random`` directions continued).
    measurable : bool
        Whether the read-out passes validity (False: only the validity stage runs).
    tested_twins : bool
        Whether each twin method's tested point is a twin (the upper bound) or an answer-position setting.
    costs : dict, optional
        Unit costs in seconds, with the keys of :data:`COST_SECONDS` (default :data:`COST_SECONDS`).

    Returns
    -------
    dict
        Seconds per stage and ``total``.

    Examples
    --------
    >>> protocol = SteeringProtocol(n_prompts=20, n_candidates=1, n_generate=4, max_new_tokens=12)
    >>> t = estimate_seconds(protocol, prompt_tokens=60.0, n_settings=3, methods=("RAPTOR",),
    ...                      costs=dict(token=0.01, step=0.01, fit=dict(RAPTOR=10.0)))
    >>> round(t["screen"], 1), round(t["total"], 1), round(t["matched"], 1)
    (12.6, 2893.5, 1212.0)
    """
    protocol = SteeringProtocol() if protocol is None else protocol
    if not isinstance(protocol, SteeringProtocol):
        raise ValueError(f"protocol must be a SteeringProtocol, got {type(protocol).__name__}")
    costs = _check_costs(COST_SECONDS if costs is None else costs)
    n_settings = check_int(n_settings, "n_settings", minimum=1)
    prompt_tokens = check_scalar(prompt_tokens, "prompt_tokens", low=0.0, high=1e9, low_open=True)
    measurable, tested_twins = check_bool(measurable, "measurable"), check_bool(tested_twins, "tested_twins")
    sentiment = check_bool(sentiment, "sentiment")
    methods = check_sequence(methods, "methods", lambda v, n: check_choice(v, n, costs["fit"]))
    twin_methods = protocol.twin_methods
    if twin_methods is not None:
        twin_methods = check_sequence(twin_methods, "twin_methods", lambda v, n: check_choice(v, n, methods),
                                      allow_empty=True)
    n_prompts, n_directions, n_candidates = protocol.n_prompts, len(protocol.directions), protocol.n_candidates
    n_random, n_random_selection = protocol.n_random, protocol.n_random_selection
    n_generate, max_new_tokens = protocol.n_generate, protocol.max_new_tokens
    token, step = costs["token"], costs["step"]
    T, h, E = prompt_tokens, n_prompts / 2, 1 + n_random_selection
    N = n_random - n_random_selection + 1
    C = len(methods) * n_directions * n_candidates
    twin_methods = methods if twin_methods is None else [m for m in methods if m in twin_methods]
    W = len(twin_methods) * n_directions * min(protocol.n_twins, n_candidates) * len(protocol.stage2_positions)
    P = len(twin_methods) * n_directions if tested_twins and W else 0
    g = n_generate / 2
    out = dict(validity=n_prompts * (T * token + step))
    if measurable:
        out["fit"] = float(sum(costs["fit"][m] for m in methods))
        gen = 2 * ((C + W) * 2 * g * max_new_tokens * 2 + g * max_new_tokens * 2) * step
        out.update(screen=h * T * token + n_settings * n_directions * E * h * step,
                   candidate=h * T * token + W * E * h * T * token, generate=gen,
                   report=h * T * token + C * E * h * step + W * E * h * T * token,
                   null=(len(methods) * n_directions - P) * N * h * step + P * N * h * T * token)
        M = protocol.n_random_matched + 1 if protocol.n_random_matched else 0
        X = protocol.n_text_random - 1 if sentiment else 0
        out.update(matched=(len(methods) * n_directions - P) * M * h * step + P * M * h * T * token,
                   text=X * (C + W) * g * max_new_tokens * step)
    out["total"] = float(sum(out.values()))
    return out


def _check_costs(costs) -> dict:
    """``costs`` as :func:`estimate_seconds` documents it: ``token`` and ``step`` seconds and ``fit`` seconds per
    method, each finite and >= 0 (ValueError / TypeError naming ``costs[...]``)."""
    if not isinstance(costs, Mapping) or not {"token", "step", "fit"} <= set(costs):
        raise TypeError(f"costs must be a mapping with the keys 'token', 'step' and 'fit', got {costs!r:.80}")
    fit = costs["fit"]
    if not isinstance(fit, Mapping) or not fit:
        raise TypeError(f"costs['fit'] must be a non-empty mapping of method name to seconds, got {fit!r:.80}")
    for method in fit:
        if not isinstance(method, str) or not method.strip():
            raise ValueError(f"costs['fit'] keys must be method names, got {method!r:.60}")
    return dict(token=check_scalar(costs["token"], "costs['token']", low=0.0, high=1e9),
                step=check_scalar(costs["step"], "costs['step']", low=0.0, high=1e9),
                fit={m: check_scalar(v, f"costs['fit'][{m!r}]", low=0.0, high=1e9) for m, v in fit.items()})
