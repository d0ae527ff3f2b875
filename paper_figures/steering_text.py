"""Steering measured by what the model says (docs/steering.md): the answer log-odds after a fixed stem, against
random directions of the same strength, for RAPTOR, difference of means, GCS (GCAV and additive settings) and xRFM
(additive only), over a strength sweep; the operating point of each method and layer choice is selected on one half
of the held-out prompts and reported on the other (:mod:`empirical.llm._steering_eval`).

Writes ``tables/steering_text_<dataset>.csv`` (every method x setting x direction x half: ``steer_metrics.csv``'s
columns), ``tables/steering_text_summary.csv`` (the selected operating points, report half) and
``tables/steering_text_default.csv`` (the default setting chosen from the measurement, with its report-half
shifts: :func:`default_table`), ``tables/steering_text_null.csv`` (the per-draw shifts of the null directions of
every tested row, the directions-as-unit test, isotropic and covariance-matched: ``dataset, method, setting,
direction, half, stream, draw, sign, shift, null_kind``,
:data:`empirical.llm.NULL_COLUMNS`; per dataset ``steering_text_null_<dataset>.csv``),
``tables/steering_text_timing.csv`` and ``figures/steering_text.png`` (concept-specific shift vs perplexity ratio,
report half, towards and away apart: :func:`plot`). Resumable per dataset.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd

from empirical.llm import (
    PERPLEXITY_GATE,
    SteeringProtocol,
    SteeringRun,
    datasets,
    default_setting,
    estimate_seconds,
    passes_gates,
    select_operating_points,
    sweep_settings,
)
from empirical.probes import get_method

from .output import draws_figures, load_saved_vectors, load_table, save_figure, save_table
from .style import method_color
from .verdicts import holm

#: every dataset with an answer pair; those whose read-out is not valid are reported as not measurable
DATASETS = ("stsa", "cities", "common", "counterfact", "hateeval", "sarcasm", "coinflip")
METHODS = ("RAPTOR", "DiffMeans", "GCS", "xRFM")
#: The full run: 100 held-out prompts (50 per class; selection and report halves of 50), 64 generation prompts of
#: 32 new tokens (32 greedy continuations per half, the fluency and repetition gates' sample), the best screened
#: setting per method and direction goes to stage 2 (``n_candidates`` = 1), every setting at the answer positions
#: (no prompt / all-position twins: a twin that is the tested point re-runs the prompt for each of its 100 null
#: directions, 76 of the 190 minutes the timing model gave the earlier design, docs/steering.md, Cost); 100 null
#: directions (50 antithetic pairs, the report half's stream) for the tested point of each method and direction (the
#: rank test), 10 (``N_RANDOM_SELECTION``) as the random control everywhere else; beside the isotropic null, 100
#: covariance-matched directions (the layer's own state distribution) for the same tested points; 10 random
#: directions (``N_TEXT_RANDOM``, five antithetic pairs) as the VADER control of a sentiment dataset's report rows.
#: Upper bound of the timing model: :func:`full_run_seconds` (<= 60 min on two cores, a test).
FULL = dict(datasets=DATASETS, methods=METHODS, n_prompts=100, n_generate=64, max_new_tokens=32, gcs_probes=100,
            n_random=100, n_random_selection=10, n_random_matched=100, n_text_random=10,
            n_candidates=1, stage2_positions=(), twin_methods=())
#: ``--quick``: a look at the pipeline, not a measurement (one dataset, RAPTOR, 8 prompts, every stage; 40 null
#: directions for the tested points, the least whose rank p can reach 0.025, isotropic and covariance-matched; 4 as
#: the control; 2 for VADER).
QUICK = dict(datasets=("stsa",), methods=("RAPTOR",), n_prompts=8, n_generate=2, max_new_tokens=8, gcs_probes=20,
             n_random=40, n_random_selection=4, n_random_matched=40, n_text_random=2,
             n_candidates=1, stage2_positions=("all",), twin_methods=("RAPTOR",))


#: Mean prompt tokens per dataset (SmolLM2's tokenizer, first 300 prompts): the timing model's input.
PROMPT_TOKENS = dict(stsa=55.0, cities=19.5, common=22.8, counterfact=19.4, hateeval=63.1, sarcasm=108.0,
                     coinflip=89.3)
#: Tokens of the answer stem (the timing model reads prompt + stem tokens).
STEM_TOKENS = 5


def scale_protocol(scale) -> SteeringProtocol:
    """The measurement protocol of a scale (:data:`FULL`, :data:`QUICK` or a dict with their keys): what
    :func:`dataset_table` measures and :func:`stage_seconds` times.

    Parameters
    ----------
    scale : dict
        Its ``n_prompts``, ``n_generate``, ``max_new_tokens``, ``n_random``, ``n_random_selection``,
        ``n_random_matched``, ``n_text_random``, ``n_candidates``, ``stage2_positions`` and ``twin_methods``.

    Returns
    -------
    SteeringProtocol
        With prompts in batches of 50.
    """
    return SteeringProtocol(n_prompts=scale["n_prompts"], n_generate=scale["n_generate"],
                            max_new_tokens=scale["max_new_tokens"], batch_size=50, n_random=scale["n_random"],
                            n_random_selection=scale["n_random_selection"],
                            n_random_matched=scale["n_random_matched"], n_text_random=scale["n_text_random"],
                            n_candidates=scale["n_candidates"], stage2_positions=scale["stage2_positions"],
                            twin_methods=scale["twin_methods"])


#: The datasets the committed run measured past the validity stage (``docs/results/tables/steering_text_timing.csv``,
#: a test checks it): the others stop after the unsteered read-out, which is what :func:`full_run_seconds` assumes by
#: default.  The section applies Holm over the 7 read-out tests before it measures (:func:`run`): in the published
#: run (c6d2a14) only STSA stays measurable (Sarcasm's own p 0.011 does not survive Holm).  At 9a33f49 the section
#: gated each dataset on its own test, so Sarcasm was measured too (19 min) and then reported as not measurable.
MEASURABLE = ("stsa",)


def stage_seconds(scale=None, measurable=MEASURABLE, tested_twins=True) -> dict:
    """The timing model's seconds for the section per stage, summed over the scale's datasets
    (:func:`empirical.llm.estimate_seconds`, an upper bound: every candidate passing every gate, the
    concept vectors fitted rather than loaded, RAPTOR's tested point a prompt / all-position twin where the scale
    has twins unless ``tested_twins`` is False).

    Parameters
    ----------
    scale : dict, optional
        :data:`FULL` (default) or :data:`QUICK`, or a dict with their keys.
    measurable : sequence of str or None
        The datasets whose read-out is valid (they run every stage; the others only the validity read-out);
        default :data:`MEASURABLE`, None: every dataset.
    tested_twins : bool
        As for :func:`empirical.llm.estimate_seconds`.

    Returns
    -------
    dict
        Seconds on two idle cores (:data:`empirical.llm._steering_cost.COST_SECONDS`) per stage and ``total``.
    """

    scale = scale or FULL
    if not isinstance(tested_twins, bool):
        raise TypeError(f"tested_twins must be a bool, got {tested_twins!r}")
    unknown = sorted(set(measurable or ()) - set(PROMPT_TOKENS)) if not isinstance(measurable, str) else [measurable]
    if unknown:
        raise ValueError(f"measurable must be a sequence of known dataset names {sorted(PROMPT_TOKENS)}, "
                         f"got {unknown}")
    grid = settings(scale is QUICK)
    n_settings = sum(len([s for s in grid if s.edit_kind.steers(get_method(m))]) for m in scale["methods"])
    protocol = scale_protocol(scale)
    out = {}
    for name in scale["datasets"]:
        one = estimate_seconds(protocol, prompt_tokens=PROMPT_TOKENS[name] + STEM_TOKENS, n_settings=n_settings,
                               methods=scale["methods"], sentiment=datasets.get_dataset(name).sentiment,
                               measurable=measurable is None or name in measurable, tested_twins=tested_twins)
        for stage, seconds in one.items():
            out[stage] = out.get(stage, 0.0) + seconds
    return out


def full_run_seconds(scale=None, measurable=MEASURABLE, tested_twins=True) -> float:
    """The timing model's seconds for the whole section (``total`` of :func:`stage_seconds`, same parameters): the
    upper bound ``paper_figures.__main__.section_seconds("steering_text")`` is computed from."""
    return stage_seconds(scale, measurable, tested_twins)["total"]


#: The design before the 60-minute limit (issue 36): two candidates per method and direction, RAPTOR's best with
#: prompt and all-position twins (the timing model's comparison row in :func:`cost_block`); it had neither the
#: covariance-matched null nor the VADER control's further directions.
EARLIER = dict(FULL, n_candidates=2, stage2_positions=("prompt", "all"), twin_methods=("RAPTOR",), n_random_matched=0,
               n_text_random=1)
#: :data:`FULL` without the covariance-matched null and the VADER control's further directions (what they cost).
WITHOUT_NEW_DRAWS = dict(FULL, n_random_matched=0, n_text_random=1)
#: :data:`FULL` with 6 random directions as the control (not the test): a cheaper control for a run near the hour.
FEWER_CONTROLS = dict(FULL, n_random_selection=6)
#: :data:`FEWER_CONTROLS` with fewer covariance-matched draws (40, the least whose rank p can reach 0.025) and VADER
#: draws (4): the settings that bring a run with :data:`WITH_SARCASM` measurable back under the hour (a test).
REDUCED_DRAWS = dict(FEWER_CONTROLS, n_random_matched=40, n_text_random=4)
#: The measurable read-outs of the case that nears the hour: :data:`MEASURABLE` and Sarcasm (measured at 9a33f49).
WITH_SARCASM = (*MEASURABLE, "sarcasm")
#: The rows of :func:`cost_block`: (label, scale, measurable read-outs as for :func:`stage_seconds`, tested_twins).
COST_ROWS = (
    ("full (this design)", FULL, MEASURABLE, True),
    ("full without the matched null and the VADER draws", WITHOUT_NEW_DRAWS, MEASURABLE, True),
    ("full, `n_random_selection` = 6", FEWER_CONTROLS, MEASURABLE, True),
    ("full without the matched null and the VADER draws", WITHOUT_NEW_DRAWS, WITH_SARCASM, True),
    ("full (this design)", FULL, WITH_SARCASM, True),
    ("full, `n_random_selection` = 6", FEWER_CONTROLS, WITH_SARCASM, True),
    ("full, `n_random_selection` = 6, `n_random_matched` = 40, `n_text_random` = 4", REDUCED_DRAWS, WITH_SARCASM,
     True),
    ("earlier design (2 candidates, RAPTOR twins tested)", EARLIER, MEASURABLE, True),
    ("earlier design, tested points at the answer positions", EARLIER, MEASURABLE, False),
    ("full (this design)", FULL, None, True),
)
COST_START, COST_END = "<!-- steering-cost:start -->", "<!-- steering-cost:end -->"


def cost_block() -> str:
    """The timing model's table of docs/steering.md (between :data:`COST_START` and :data:`COST_END`; a test
    checks that the document holds this text, and the page's prose quotes no minutes of its own).

    One row per entry of :data:`COST_ROWS`: :data:`FULL`, without its new draws (:data:`WITHOUT_NEW_DRAWS`) and with
    cheaper controls (:data:`FEWER_CONTROLS`, :data:`REDUCED_DRAWS`) for :data:`MEASURABLE` and
    :data:`WITH_SARCASM` read-outs valid, :data:`EARLIER` for comparison, and :data:`FULL` with every read-out valid.

    Returns
    -------
    str
        The Markdown table, markers included: per row the minutes of each stage of :func:`stage_seconds`, summed
        over the datasets (0.0 for a stage the row does not run), and their total in bold, to 0.1 min; upper bounds
        on two idle cores (:data:`empirical.llm._steering_cost.COST_SECONDS`).
    """
    stages = ("validity", "fit", "screen", "candidate", "generate", "report", "null", "matched", "text")
    lines = [COST_START, "| run (timing model, minutes on 2 cores, upper bound) | measurable | " + " | ".join(stages)
             + " | total |", "|---" * (len(stages) + 3) + "|"]
    for label, scale, measurable, tested_twins in COST_ROWS:
        sec = stage_seconds(scale, measurable, tested_twins)
        valid = "every dataset" if measurable is None else " + ".join(measurable)
        lines.append(f"| {label} | {valid} | " + " | ".join(f"{sec.get(s, 0.0) / 60:.1f}" for s in stages)
                     + f" | **{sec['total'] / 60:.1f}** |")
    return "\n".join(lines + [COST_END])


def settings(quick: bool = False) -> list:
    """The screened settings (stage 1, answer positions; stage 2 adds the candidates' prompt and all-position
    twins): GCAV p* in {0.9, 0.99, 0.9999} on all / best / top-3 layers and additive k in a grid on best / top-3
    layers (``--quick``: three)."""

    if quick:
        return sweep_settings(k_grid=(0.2, 0.8), p_grid=(0.99,), gcav_layers=("best",), additive_layers=("best",))
    return sweep_settings()


def dataset_table(mdl, tok, ds, H, *, out=None, data_dir=None, quick=False, run=None) -> tuple:
    """Every method and setting of one dataset, measured in stages (``steer_metrics.csv``'s columns), and the
    per-draw null shifts of its rows (:data:`~empirical.llm.NULL_COLUMNS`). The concept vectors are the ones the
    empirical section saved in ``out`` for the same rows and the paper's split
    (:func:`paper_figures.output.load_saved_vectors`), else fitted here after the validity stage.

    Parameters
    ----------
    mdl, tok : transformers causal LM and its tokenizer
        The model ``H`` was extracted from.
    ds : ConceptDataset
        The dataset (a registered name: its held-out file, if the registry has one, gives the prompts).
    H : array (L+1, n, p)
        Its hidden states.
    out : str or pathlib.Path, optional
        The results folder whose saved concept vectors are used.
    data_dir : str or pathlib.Path, optional
        Where the datasets are.
    quick : bool
        :data:`QUICK` instead of :data:`FULL`.
    run : SteeringRun, optional
        Its ``progress``, ``n_jobs``, ``split_seed`` and the section's two passes (:func:`run`): ``validity_only``
        and ``auc_p_adjusted``, as for :func:`empirical.llm._steering_eval.evaluate_staged`; the rest is the
        scale's (methods, GCS probes, a staged run on the held-out file, stage timing).

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        The metric rows with ``seconds_<stage>`` and ``vectors`` ('loaded' or 'fitted'), and the null draws.
    """
    from empirical.llm import evaluate_dataset

    scale = QUICK if quick else FULL
    run = SteeringRun() if run is None else run
    # a dataset with its own held-out file steers on it (the registry's test_files: STSA)
    test = datasets.load(ds.name, data_dir, max_per_class=None, split="test") \
        if datasets.get_dataset(ds.name).test_files else None
    saved = None if out is None else load_saved_vectors(out, ds.name, scale["methods"], len(ds.labels),
                                                        run.split_seed)
    marks = [("start", time.perf_counter())]
    run = dataclasses.replace(run, eval_dataset=test, methods=scale["methods"], staged=True,
                              method_params={"GCS": {"n_probes": scale["gcs_probes"]}},
                              on_stage=lambda stage, entries, idx: marks.append((stage, time.perf_counter())))
    table, per_prompt = evaluate_dataset(mdl, tok, ds, H, settings(quick), protocol=scale_protocol(scale),
                                         vectors=saved, run=run)
    marks.append(("end", time.perf_counter()))
    seconds = {}
    for (stage, t0), (_, t1) in zip(marks[:-1], marks[1:]):
        seconds[stage] = seconds.get(stage, 0.0) + t1 - t0
    table = table.assign(**{f"seconds_{stage}": round(t, 1) for stage, t in seconds.items()},
                         vectors="loaded" if saved is not None else "fitted")
    return table, per_prompt["null"]


def holm_validity(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each dataset's read-out validity decided over every dataset it holds: the one-sided
    Mann-Whitney p of the unsteered read-out (``auc_p_value``) Holm-corrected over the datasets
    (:func:`paper_figures.verdicts.holm`, column ``auc_p_holm``), and ``measurable`` true only when the dataset's own
    test passed and its adjusted p is at most :data:`~empirical.llm.MAX_AUC_P`. Idempotent; a table
    without ``auc_p_value`` (an earlier run) keeps its per-dataset verdict. The one home of this rule (the summary,
    the default setting, the figures and the section's gate before it measures)."""
    from empirical.llm import MAX_AUC_P

    if "auc_p_value" not in table or "auc_p_holm" in table or not len(table):  # an earlier run, or decided
        return table
    raw = table.groupby("dataset", sort=False)["auc_p_value"].first()
    own = table.groupby("dataset", sort=False)["measurable"].first().astype(bool)
    adjusted = pd.Series(holm(raw.to_numpy(dtype=float)), index=raw.index)
    keep = own & (adjusted <= MAX_AUC_P)
    return table.assign(auc_p_holm=table["dataset"].map(adjusted),
                        measurable=table["dataset"].map(keep).astype(bool))


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """The selected operating points (report half) of every dataset, method, layer choice and direction, with the
    datasets' validity; the input of the steering claim (``paper_figures.claims``).

    The read-out's validity test (one-sided Mann-Whitney p of each dataset, ``auc_p_value``) is Holm-corrected over
    the datasets tested (:func:`paper_figures.verdicts.holm`, ``auc_p_holm``): a dataset stays measurable only when
    its adjusted p is at most :data:`~empirical.llm.MAX_AUC_P` as well (tables without
    ``auc_p_value`` keep their per-dataset verdict). The datasets that are not measurable get one row each
    (``setting`` = 'not measurable'); their operating points are left out."""

    table = holm_validity(table)
    chosen = select_operating_points(table)
    columns = [c for c in ("auc_unsteered", "auc_p_value", "answer_mass_unsteered", "measurable") if c in table]
    validity = table.groupby("dataset")[columns].first()
    measurable = validity.measurable.astype(bool)
    if "auc_p_holm" in table:
        validity["auc_p_holm"] = table.groupby("dataset")["auc_p_holm"].first()
        chosen = chosen.drop(columns=["auc_p_holm"], errors="ignore").merge(
            validity[["auc_p_holm"]], left_on="dataset", right_index=True, how="left")
    chosen = chosen[chosen["dataset"].isin(measurable[measurable].index)]
    missing = validity[~measurable].assign(measurable=False).reset_index()
    return pd.concat([chosen, missing.assign(method="--", setting="not measurable")], ignore_index=True)


def default_table(table: pd.DataFrame) -> pd.DataFrame:
    """The default setting chosen from the measurement (:func:`empirical.llm.default_setting`: chosen
    on the selection half, confirmed on the report half) with its report-half rows, one per measurable dataset and
    direction: the concept-specific shift with its 95 % interval, the random control and the fluency cost. One row
    naming the paper's setting and the reason when no setting beats the random control. ``raptor steer``'s
    :data:`~empirical.llm.DEFAULT_SETTING` must equal its ``setting`` (a test reads the published
    copy)."""

    table = holm_validity(table)
    choice = default_setting(table)
    head = dict(setting=choice["setting"], beats_random=choice["beats_random"], mean_shift=choice["shift"],
                reason=choice["reason"])
    rows = table[(table["method"] == "RAPTOR") & (table["setting"] == choice["setting"]) & (table["half"] == "report")
                 & table["measurable"].astype(bool)] if choice["beats_random"] else table.iloc[:0]
    if not len(rows):
        return pd.DataFrame([head])
    keep = ["dataset", "direction", "n_prompts", "concept_specific_shift", "concept_specific_low",
            "concept_specific_high", "random_control_shift", "answer_prob_shift", "moved_fraction",
            "answer_mass_steered", "answer_mass_unsteered", "perplexity_ratio", "perplexity_ratio_random", "kl_answer"]
    return rows[[c for c in keep if c in rows.columns]].assign(**head).reset_index(drop=True)


def timing(table: pd.DataFrame) -> pd.DataFrame:
    """Seconds per dataset and stage of the measurement (``start``: prompts and norms; ``validity``; ``fit``: the
    concept vectors, when not loaded from the empirical section; ``screen``; ``candidate``; ``generate``;
    ``report``; ``generate-report``), with whether the vectors were loaded or fitted, and the total."""
    columns = [c for c in table.columns if c.startswith("seconds_")]
    extra = ["vectors"] if "vectors" in table.columns else []  # tables of earlier runs have neither
    per = table.groupby("dataset", sort=False)[columns + extra].first().reset_index()
    per = per.rename(columns={c: c.removeprefix("seconds_") for c in columns})
    stages = [c.removeprefix("seconds_") for c in columns]
    per["total"] = per[stages].sum(axis=1, min_count=1)
    return per


#: Marker of each (kind, layer choice, positions) series of a method in :func:`plot` (the colour is the method's).
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*", "<", ">")
#: Colour of the covariance-matched null directions' dots in :func:`plot_null` (the isotropic ones are grey).
MATCHED_COLOR = "#c8963e"
#: Colour of the legend entry of the points that fail a gate on the report half (each such point is drawn hollow in
#: its method's colour, faded, and annotated "gated", so that the method can still be told).
GATED_COLOR = "0.55"


def plot_points(table: pd.DataFrame) -> pd.DataFrame:
    """The points of :func:`plot`: the report-half rows of the measurable datasets, one per method, setting and
    direction, with their series label (``method kind layers positions``), their marker and whether they pass every
    gate on the report half (``gated`` = True when the answer mass, the perplexity ratio or distinct-2 fails:
    :func:`empirical.llm.passes_gates`).

    Parameters
    ----------
    table : pandas.DataFrame
        Metric rows of one or more datasets (``steering_text_<dataset>.csv``).

    Returns
    -------
    pandas.DataFrame
        The report-half rows with ``series``, ``marker`` and ``gated`` added.
    """

    required = {"dataset", "method", "kind", "layer_choice", "positions", "direction", "half", "measurable",
                "concept_specific_shift", "perplexity_ratio", "answer_mass_steered", "answer_mass_unsteered"}
    missing = sorted(required - set(table.columns))
    if missing:
        raise ValueError(f"table lacks the columns {missing} of steer_metrics.csv")
    table = holm_validity(table)
    report = table[(table["half"] == "report") & table["measurable"].astype(bool)].copy()
    report["series"] = (report["method"] + " " + report["kind"] + " " + report["layer_choice"].astype(str) + " "
                        + report["positions"])
    markers = {}
    for method, series in report.groupby("method", sort=False)["series"]:
        for i, name in enumerate(dict.fromkeys(series)):
            markers[name] = MARKERS[i % len(MARKERS)]
    report["marker"] = report["series"].map(markers)
    report["gated"] = ~passes_gates(report).to_numpy(dtype=bool)
    return report


@draws_figures
def plot(table: pd.DataFrame, out):
    """Concept-specific shift against perplexity ratio on the report half: one row of panels per measurable
    dataset, one column per direction (towards, away). Each point is an operating point (a setting that passed
    the gates on the selection half), coloured by method (:func:`paper_figures.style.method_color`), its marker
    naming the kind, layer choice and positions within the method; vertical bars are the concept-specific
    shift's per-prompt 95 % interval, horizontal bars the perplexity ratio's (tables that have it). Points that
    fail a gate on the report half (answer mass, perplexity ratio > 1.5 or distinct-2) are drawn hollow and faded
    in their method's colour and annotated "gated" (:func:`plot_points`); points without a perplexity ratio (no
    continuation measured) cannot be placed and are counted in the panel instead.

    Parameters
    ----------
    table : pandas.DataFrame
        Metric rows of one or more datasets (the columns :func:`plot_points` needs).
    out : str or pathlib.Path
        Output directory (the figure goes to ``figures/steering_text.png``).

    Returns
    -------
    pathlib.Path
        The PNG written (:func:`paper_figures.output.save_figure`).
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D


    points = plot_points(table)
    names = list(dict.fromkeys(points["dataset"])) or ["none measurable"]
    directions = ("towards", "away")
    fig, axes = plt.subplots(len(names), 2, figsize=(10.4, 3.9 * len(names)), squeeze=False, sharey="row")
    order = {m: i for i, m in enumerate(METHODS)}
    points = points.sort_values("method", key=lambda m: m.map(order).fillna(len(order)), kind="stable")
    handles = {}
    rows = table[table["method"].isin(METHODS)] if "method" in table else table.iloc[:0]
    measured = {name: sorted(set(rows.loc[rows["dataset"] == name, "method"]), key=lambda m: order.get(m, len(order)))
                for name in names}
    for i, name in enumerate(names):
        for j, direction in enumerate(directions):
            ax = axes[i, j]
            d = points[(points["dataset"] == name) & (points["direction"] == direction)]
            for r in d.itertuples():
                y, x = r.concept_specific_shift, r.perplexity_ratio
                yerr = [[y - r.concept_specific_low], [r.concept_specific_high - y]] \
                    if hasattr(r, "concept_specific_low") and pd.notna(r.concept_specific_low) else None
                xerr = [[x - r.perplexity_ratio_low], [r.perplexity_ratio_high - x]] \
                    if hasattr(r, "perplexity_ratio_low") and pd.notna(r.perplexity_ratio_low) else None
                color = method_color(r.method)
                ax.errorbar(x, y, yerr=yerr, xerr=xerr, fmt=r.marker, ms=7, color=color, ecolor=color, elinewidth=1,
                            capsize=2, mfc="none" if r.gated else color, mec=color, mew=1.3,
                            alpha=0.55 if r.gated else 1.0)
                if r.gated:
                    ax.annotate("gated", (x, y), xytext=(5, -9), textcoords="offset points", fontsize=6,
                                color=GATED_COLOR)
                handles.setdefault(r.series, Line2D([], [], ls="", marker=r.marker, ms=7, color=color))
            ax.axhline(0, color="0.6", lw=0.8)
            ax.axvline(PERPLEXITY_GATE, color="0.6", lw=0.8, ls="--")
            ax.set_title(f"{name}, {direction}", fontsize=10)
            ax.set_xlabel(f"perplexity ratio, steered / unsteered (gate {PERPLEXITY_GATE:g})")
            ax.grid(alpha=0.3)
            if not len(d):
                ax.text(0.5, 0.5, "no operating point", transform=ax.transAxes, ha="center", color="0.5")
            else:  # a method measured on this dataset without a point here is named, not silently absent
                absent = [m for m in measured.get(name, []) if m not in set(d["method"])]
                if absent:
                    ax.text(0.98, 0.03, "no setting within the gates: " + ", ".join(absent), fontsize=7,
                            transform=ax.transAxes, ha="right", va="bottom", color=GATED_COLOR)
            unplaced = int(d["perplexity_ratio"].isna().sum())
            if unplaced:  # no continuation measured (no x position): said, not silently dropped
                ax.text(0.02, 0.97, f"{unplaced} point(s) without generated text not shown", fontsize=7,
                        transform=ax.transAxes, va="top", color=GATED_COLOR)
        axes[i, 0].set_ylabel("concept-specific shift of the\nanswer log-odds (95 % CI over prompts)")
    if points["gated"].any():
        handles["hollow, 'gated': fails a gate on the report half"] = Line2D(
            [], [], ls="", marker="o", ms=7, color=GATED_COLOR, mfc="none")
    # bottom up: the not-measurable note, the legend above it, then the panels (figure fractions; one text line
    # of the 7-point legend is ~0.035 of a one-row figure)
    line = 0.035 / len(names)
    note = not_measurable_note(table)
    note_height = line * (1 + len(note) // 190) if note else 0.0  # the note wraps at ~190 characters
    if note:
        fig.text(0.01, 0.005, note, fontsize=7, color="0.3", wrap=True)
    legend_rows = (len(handles) + 2) // 3
    if handles:
        fig.legend(list(handles.values()), list(handles), fontsize=7, loc="lower center",
                   bbox_to_anchor=(0.5, note_height + 0.005), ncol=min(3, len(handles)), frameon=False)
    fig.suptitle("Steering, report half: answer log-odds beyond random directions vs fluency (upper left is best)",
                 fontsize=10)
    fig.tight_layout(rect=(0, note_height + line * (1.3 * legend_rows + 0.4) + 0.01, 1, 1))
    return save_figure(fig, out, "steering_text")


def not_measurable_note(table: pd.DataFrame) -> str:
    """The figures' footnote: the datasets whose read-out is not measurable after Holm (:func:`holm_validity`), each
    with its adjusted p ('' when every dataset is measurable)."""
    table = holm_validity(table)
    if not len(table):
        return ""
    validity = table.groupby("dataset", sort=False)[[c for c in ("auc_p_holm", "measurable") if c in table]].first()
    dropped = validity[~validity["measurable"].astype(bool)]
    if not len(dropped):
        return ""
    names = [f"{n} (p_holm {r.auc_p_holm:.2g})" if "auc_p_holm" in dropped else n for n, r in dropped.iterrows()]
    return f"Not measurable (read-out validity, Holm over the {len(validity)} datasets): {', '.join(names)}"


def tested_points(table: pd.DataFrame) -> pd.DataFrame:
    """The report-half rows that carry a rank test (a finite ``null_p``: the tested point of each method and
    direction, :func:`empirical.llm._steering_null.rank_test_points`) of the datasets measurable after Holm
    (:func:`holm_validity`), with ``gated`` as in :func:`plot_points`."""

    table = holm_validity(table)
    if "null_p" not in table:
        return table.iloc[:0]
    rows = table[(table["half"] == "report") & table["measurable"].astype(bool)
                 & pd.to_numeric(table["null_p"], errors="coerce").notna()].copy()
    rows["gated"] = ~passes_gates(rows).to_numpy(dtype=bool) if len(rows) else []
    return rows


@draws_figures
def plot_null(table: pd.DataFrame, null: pd.DataFrame, out):
    """The directions-as-unit test drawn: for every tested point (:func:`tested_points`), the answer log-odds shift
    of each of its random directions (grey, one dot per draw: norm-matched, antithetic, drawn for the report half;
    the covariance-matched ones in ochre beside them where the table has them) and the concept direction's shift
    (the method's colour), with its rank among them and the rank p = (1 + #{null >= concept}) / (1 + N). One panel
    per measurable dataset and direction; the datasets whose read-out is not measurable after Holm are named under
    the figure with their adjusted p.

    Parameters
    ----------
    table : pandas.DataFrame
        Metric rows (``steering_text_<dataset>.csv``).
    null : pandas.DataFrame
        Per-draw null shifts (``steering_text_null.csv``, :data:`empirical.llm.NULL_COLUMNS`).
    out : str or pathlib.Path
        Output directory (``figures/steering_text_null.png``).

    Returns
    -------
    pathlib.Path
        The PNG written.
    """
    import matplotlib.pyplot as plt

    table = holm_validity(table)
    points = tested_points(table)
    panels = list(dict.fromkeys(zip(points["dataset"], points["direction"]))) or [("none measurable", "")]
    order = {m: i for i, m in enumerate(METHODS)}
    fig, axes = plt.subplots(len(panels), 1, figsize=(8.0, 1.2 + 0.75 * max(
        [int(((points["dataset"] == d) & (points["direction"] == r)).sum()) for d, r in panels] + [1])
        * len(panels)), squeeze=False)
    rng = np.random.default_rng(0)  # vertical jitter of the grey dots only
    # the isotropic null (grey) and, where measured, the covariance-matched one (ochre, above it); a table written
    # before the matched null has no null_kind: every draw is isotropic
    kinds = null["null_kind"].fillna("isotropic") if "null_kind" in null else pd.Series("isotropic", index=null.index)
    for ax, (name, direction) in zip(axes[:, 0], panels):
        d = points[(points["dataset"] == name) & (points["direction"] == direction)]
        d = d.sort_values("method", key=lambda m: m.map(order).fillna(len(order)), kind="stable")
        labels = []
        for y, r in enumerate(d.itertuples()):
            row = (null["dataset"] == name) & (null["method"] == r.method) & (null["setting"] == r.setting) \
                & (null["direction"] == direction) & (null["half"] == "report")
            draws = null.loc[row & (kinds == "isotropic"), "shift"].to_numpy(float)
            matched = null.loc[row & (kinds == "matched"), "shift"].to_numpy(float)
            ax.scatter(draws, y + rng.uniform(-0.18, 0.18, draws.size) - (0.12 if matched.size else 0.0), s=7,
                       color="0.6", lw=0, zorder=2)
            if matched.size:
                ax.scatter(matched, y + 0.22 + rng.uniform(-0.08, 0.08, matched.size), s=7, color=MATCHED_COLOR, lw=0,
                           zorder=2)
            color = method_color(r.method)
            ax.scatter([r.answer_logodds_shift], [y], s=70, marker="D", color="none" if r.gated else color,
                       edgecolor=color, lw=1.5, zorder=3)
            label = f"rank {int(r.null_rank)}/{len(draws) + 1}, p = {r.null_p:.3g}"
            if matched.size and pd.notna(getattr(r, "matched_null_p", np.nan)):
                label += f"; matched rank {int(r.matched_null_rank)}/{matched.size + 1}, p = {r.matched_null_p:.3g}"
            ax.annotate(label + (" (gated)" if r.gated else ""), (r.answer_logodds_shift, y), xytext=(7, 5),
                        textcoords="offset points", fontsize=7, color=color)
            labels.append(f"{r.method}\n{r.setting}")
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_ylim(-0.6, max(len(labels), 1) - 0.4)
        ax.margins(x=0.18)  # room for the rank labels right of the diamonds
        ax.axvline(0, color="0.6", lw=0.8)
        ax.set_title(f"{name}, {direction}" if direction else name, fontsize=9)
        ax.grid(alpha=0.3, axis="x")
        if not len(d):
            ax.text(0.5, 0.5, "no tested point", transform=ax.transAxes, ha="center", color="0.5")
    axes[-1, 0].set_xlabel("answer log-odds shift towards the target, mean over the report half's prompts (nats)")
    note = not_measurable_note(table)
    fig.suptitle("Steering, report half: each tested concept direction (diamond; hollow = fails a gate) among "
                 "norm-matched random directions (grey: isotropic"
                 + ("; ochre: covariance-matched" if (kinds == "matched").any() else "") + ")", fontsize=9)
    fig.text(0.01, 0.005, note, fontsize=7, color="0.3", wrap=True)
    fig.tight_layout(rect=(0, 0.04 if note else 0, 1, 1))
    return save_figure(fig, out, "steering_text_null")


def redraw(out):
    """Redraw ``figures/steering_text.png`` and ``figures/steering_text_null.png`` from the saved per-dataset tables
    (``steering_text_<dataset>.csv`` of :data:`DATASETS` and ``steering_text_null.csv``; ``python -m paper_figures
    --results-only``). Returns the main PNG's path, or None when no table exists."""
    tables = [t for t in (load_table(out, f"steering_text_{name}") for name in DATASETS) if t is not None]
    if not tables:
        return None
    table = pd.concat(tables, ignore_index=True)
    null = load_table(out, "steering_text_null")
    if null is not None:
        plot_null(table, null, out)
    return plot(table, out)


def run(out, *, model="smollm2", data_dir=None, max_per_class=500, quick=False, progress=True, n_jobs=1, names=None):
    """Every dataset's table (``names``, default the scale's datasets; resumed when its checksummed table exists),
    the summary, the timing table and the figures.

    Two passes, so that the multiplicity correction decides what is measured: first the unsteered read-out of every
    dataset (``tables/steering_text_validity_<dataset>.csv``, resumable), then Holm over their validity tests
    (:func:`holm_validity`), then the measurement of the datasets that stay measurable, gated on their adjusted p
    (``auc_p_adjusted``). A dataset that fails keeps its validity row as its table and no null draws."""
    from empirical.llm import NULL_COLUMNS, extract_dataset, load_model

    out = Path(out)
    mdl, tok = load_model(model)
    names = list(names or (QUICK if quick else FULL)["datasets"])

    def hidden(name):
        ds = datasets.load(name, data_dir, max_per_class=max_per_class)
        return ds, extract_dataset(mdl, tok, ds, layers="all", progress=progress)

    validity = {}
    for name in names:  # pass 1: the validity read-out of every dataset
        done = load_table(out, f"steering_text_{name}")
        first = done if done is not None and load_table(out, f"steering_text_null_{name}") is not None else \
            load_table(out, f"steering_text_validity_{name}")
        if first is None:
            ds, H = hidden(name)
            first, _ = dataset_table(mdl, tok, ds, H, out=out, data_dir=data_dir, quick=quick,
                                     run=SteeringRun(progress=progress, n_jobs=n_jobs, validity_only=True))
            save_table(first, out, f"steering_text_validity_{name}")
        validity[name] = first.iloc[:1]
    decided = holm_validity(pd.concat(validity.values(), ignore_index=True)).set_index("dataset")
    tables, nulls = [], []
    for name in names:  # pass 2: the measurement of the datasets measurable after Holm
        table, null = load_table(out, f"steering_text_{name}"), load_table(out, f"steering_text_null_{name}")
        if table is None or null is None:
            row = decided.loc[name]
            if bool(row["measurable"]):
                ds, H = hidden(name)
                adjusted = float(row.get("auc_p_holm", row["auc_p_value"]))
                table, null = dataset_table(mdl, tok, ds, H, out=out, data_dir=data_dir, quick=quick,
                                            run=SteeringRun(progress=progress, n_jobs=n_jobs, staged=True,
                                                            auc_p_adjusted=adjusted))
            else:
                table, null = validity[name], pd.DataFrame(columns=NULL_COLUMNS)
            save_table(null, out, f"steering_text_null_{name}")
            save_table(table, out, f"steering_text_{name}")
        tables.append(table)
        nulls.append(null)
    table = pd.concat(tables, ignore_index=True)
    save_table(pd.concat(nulls, ignore_index=True), out, "steering_text_null")
    save_table(summary(table), out, "steering_text_summary")
    save_table(timing(table), out, "steering_text_timing")
    save_table(default_table(table), out, "steering_text_default")
    plot(table, out)
    plot_null(table, pd.concat(nulls, ignore_index=True), out)
    return table
