"""Steering measured by what the model says (docs/steering.md): the answer log-odds after a fixed stem, against
random directions of the same strength, for RAPTOR, difference of means, GCS (GCAV and additive settings) and xRFM
(additive only), over a strength sweep; the operating point of each method and layer choice is selected on one half
of the held-out prompts and reported on the other (:mod:`empirical.llm.steering_eval`).

Writes ``tables/steering_text_<dataset>.csv`` (every method x setting x direction x half: ``steer_metrics.csv``'s
columns), ``tables/steering_text_summary.csv`` (the selected operating points, report half) and
``tables/steering_text_default.csv`` (the default setting chosen from the measurement, with its report-half
shifts: :func:`default_table`), ``tables/steering_text_null.csv`` (the per-draw shifts of the null directions of
every row, the directions-as-unit test: ``dataset, method, setting, direction, half, stream, draw, sign, shift``,
:data:`empirical.llm.steering_eval.NULL_COLUMNS`; per dataset ``steering_text_null_<dataset>.csv``),
``tables/steering_text_timing.csv`` and ``figures/steering_text.png`` (concept-specific shift vs perplexity ratio,
one curve per method). Resumable per dataset.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from empirical.llm import datasets

from .claims import PAPER_SPLIT_SEED
from .output import load_saved_vectors, load_table, save_figure, save_table
from .style import method_color
from .verdicts import holm

#: every dataset with an answer pair; those whose read-out is not valid are reported as not measurable
DATASETS = ("stsa", "cities", "common", "counterfact", "hateeval", "sarcasm", "coinflip")
METHODS = ("RAPTOR", "DiffMeans", "GCS", "xRFM")
#: The full run: 100 held-out prompts (50 per class; selection and report halves of 50), 64 generation prompts of
#: 32 new tokens, the two best screened settings per method and direction go to stage 2, where RAPTOR's best
#: one is also measured at prompt and at all positions (the baselines at the answer positions: docs/steering.md);
#: 100 null directions (50 antithetic pairs, the report half's stream) for the tested point of each method and
#: direction (the rank test), 10 (``N_RANDOM_SELECTION``) as the random control everywhere else.
FULL = dict(datasets=DATASETS, methods=METHODS, n_prompts=100, n_generate=64, max_new_tokens=32, gcs_probes=100,
            n_random=100, n_random_selection=10,
            n_candidates=2, stage2_positions=("prompt", "all"), twin_methods=("RAPTOR",))
#: ``--quick``: a look at the pipeline, not a measurement (one dataset, RAPTOR, 8 prompts, every stage; 40 null
#: directions for the tested points, the least whose rank p can reach 0.025; 4 as the control).
QUICK = dict(datasets=("stsa",), methods=("RAPTOR",), n_prompts=8, n_generate=2, max_new_tokens=8, gcs_probes=20,
             n_random=40, n_random_selection=4,
             n_candidates=1, stage2_positions=("all",), twin_methods=("RAPTOR",))


#: Mean prompt tokens per dataset (SmolLM2's tokenizer, first 300 prompts): the timing model's input.
PROMPT_TOKENS = dict(stsa=55.0, cities=19.5, common=22.8, counterfact=19.4, hateeval=63.1, sarcasm=108.0,
                     coinflip=89.3)


def full_run_seconds(scale=None, measurable=None, tested_twins=True) -> float:
    """The timing model's seconds for the section (:func:`empirical.llm.steering_cost.estimate_seconds`, an upper
    bound: every dataset measurable unless ``measurable`` names those that are, every candidate passing, RAPTOR's
    tested point a prompt / all-position twin unless ``tested_twins`` is False)."""
    from empirical.llm.steering_cost import estimate_seconds

    scale = scale or FULL
    grid = settings(scale is QUICK)
    n_settings = sum(len([s for s in grid if m != "xRFM" or s.kind == "additive"]) for m in scale["methods"])
    total = 0.0
    for name in scale["datasets"]:
        total += estimate_seconds(
            n_prompts=scale["n_prompts"], prompt_tokens=PROMPT_TOKENS[name], n_settings=n_settings,
            methods=scale["methods"], n_candidates=scale["n_candidates"],
            n_twin_positions=len(scale["stage2_positions"]),
            n_generate=scale["n_generate"], max_new_tokens=scale["max_new_tokens"],
            twin_methods=scale["twin_methods"], n_random=scale["n_random"],
            n_random_selection=scale["n_random_selection"], tested_twins=tested_twins,
            measurable=measurable is None or name in measurable)["total"]
    return total


def settings(quick: bool = False) -> list:
    """The screened settings (stage 1, answer positions; stage 2 adds the candidates' prompt and all-position
    twins): GCAV p* in {0.9, 0.99, 0.9999} on all / best / top-3 layers and additive k in a grid on best / top-3
    layers (``--quick``: three)."""
    from empirical.llm.steering_settings import sweep_settings

    if quick:
        return sweep_settings(k_grid=(0.2, 0.8), p_grid=(0.99,), gcav_layers=("best",), additive_layers=("best",))
    return sweep_settings()


def dataset_table(name, mdl, tok, H, ds, *, data_dir=None, quick=False, progress=False, n_jobs=1,
                  out=None) -> tuple:
    """Every method and setting of one dataset, measured in stages (``steer_metrics.csv``'s columns), and the
    per-draw null shifts of its rows (:data:`~empirical.llm.steering_eval.NULL_COLUMNS`). The concept
    vectors are the ones the empirical section saved in ``out`` for the same rows and the paper's split
    (:func:`paper_figures.output.load_saved_vectors`), else fitted here after the validity stage."""
    from empirical.llm.steering_eval import evaluate_dataset

    scale = QUICK if quick else FULL
    test = datasets.load("stsa", data_dir, max_per_class=None, split="test") if name == "stsa" else None
    saved = None if out is None else load_saved_vectors(out, name, scale["methods"], len(ds.labels), PAPER_SPLIT_SEED)
    marks = [("start", time.perf_counter())]
    table, per_prompt = evaluate_dataset(mdl, tok, ds, H, settings(quick), eval_dataset=test,
                                n_prompts=scale["n_prompts"], vectors=saved, split_seed=PAPER_SPLIT_SEED,
                                methods=scale["methods"], n_generate=scale["n_generate"],
                                max_new_tokens=scale["max_new_tokens"], gcs_probes=scale["gcs_probes"], batch_size=50,
                                n_random=scale["n_random"], n_random_selection=scale["n_random_selection"],
                                progress=progress, staged=True, n_candidates=scale["n_candidates"], n_jobs=n_jobs,
                                stage2_positions=scale["stage2_positions"], twin_methods=scale["twin_methods"],
                                on_stage=lambda stage, entries, idx: marks.append((stage, time.perf_counter())))
    marks.append(("end", time.perf_counter()))
    seconds = {}
    for (stage, t0), (_, t1) in zip(marks[:-1], marks[1:]):
        seconds[stage] = seconds.get(stage, 0.0) + t1 - t0
    table = table.assign(**{f"seconds_{stage}": round(t, 1) for stage, t in seconds.items()},
                         vectors="loaded" if saved is not None else "fitted")
    return table, per_prompt["null"]


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """The selected operating points (report half) of every dataset, method, layer choice and direction, with the
    datasets' validity; the input of the steering claim (``paper_figures.claims``).

    The read-out's validity test (one-sided Mann-Whitney p of each dataset, ``auc_p_value``) is Holm-corrected over
    the datasets tested (:func:`paper_figures.verdicts.holm`, ``auc_p_holm``): a dataset stays measurable only when
    its adjusted p is at most :data:`~empirical.llm.answer_readout.MAX_AUC_P` as well (tables without
    ``auc_p_value`` keep their per-dataset verdict). The datasets that are not measurable get one row each
    (``setting`` = 'not measurable'); their operating points are left out."""
    from empirical.llm.answer_readout import MAX_AUC_P
    from empirical.llm.steering_selection import select_operating_points

    chosen = select_operating_points(table)
    columns = [c for c in ("auc_unsteered", "auc_p_value", "answer_mass_unsteered", "measurable") if c in table]
    validity = table.groupby("dataset")[columns].first()
    measurable = validity.measurable.astype(bool)
    if "auc_p_value" in validity:
        validity["auc_p_holm"] = holm(validity["auc_p_value"].to_numpy(dtype=float))
        measurable &= validity["auc_p_holm"] <= MAX_AUC_P
        chosen = chosen.merge(validity[["auc_p_holm"]], left_on="dataset", right_index=True, how="left")
    chosen = chosen[chosen["dataset"].isin(measurable[measurable].index)]
    missing = validity[~measurable].assign(measurable=False).reset_index()
    return pd.concat([chosen, missing.assign(method="--", setting="not measurable")], ignore_index=True)


def default_table(table: pd.DataFrame) -> pd.DataFrame:
    """The default setting chosen from the measurement (:func:`empirical.llm.steering_selection.default_setting`: chosen
    on the selection half, confirmed on the report half) with its report-half rows, one per measurable dataset and
    direction: the concept-specific shift with its 95 % interval, the random control and the fluency cost. One row
    naming the paper's setting and the reason when no setting beats the random control. ``raptor steer``'s
    :data:`~empirical.llm.steering_settings.DEFAULT_SETTING` must equal its ``setting`` (a test reads the published
    copy)."""
    from empirical.llm.steering_selection import default_setting

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


def plot(table: pd.DataFrame, out):
    """Concept-specific shift vs perplexity ratio on the report half (the settings that passed both gates on the
    selection half; towards and away averaged), one curve per method, kind, layer choice and positions over the
    strengths."""
    import matplotlib.pyplot as plt

    report = table[(table.half == "report") & table.measurable.astype(bool)]
    names = list(dict.fromkeys(report.dataset)) or ["none measurable"]
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        d = report[report.dataset == name]
        mean = d.groupby(["method", "kind", "layer_choice", "positions", "strength"], as_index=False)[
            ["concept_specific_shift", "perplexity_ratio"]].mean()
        for (method, kind, layers, positions), g in mean.groupby(["method", "kind", "layer_choice", "positions"]):
            g = g.sort_values("strength")
            style = dict(color=method_color(method), marker="o" if kind == "additive" else "^",
                         ls={"answer": "-", "prompt": ":", "all": "--"}.get(positions, "-"))
            ax.plot(g.perplexity_ratio, g.concept_specific_shift, label=f"{method} {kind} {layers} {positions}", ms=4,
                    **style)
        ax.axhline(0, color="0.6", lw=0.8)
        ax.axvline(1.5, color="0.6", lw=0.8, ls="--")
        ax.set_title(name, fontsize=11)
        ax.set_xlabel("perplexity ratio, steered / unsteered (gate 1.5)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("concept-specific shift of the answer log-odds\n(concept - random direction)")
    handles = {}
    for ax in axes[0]:  # one legend for every panel: a curve may exist on one dataset only
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(list(handles.values()), list(handles), fontsize=7, loc="lower center",
                   ncol=min(4, len(handles)), frameon=False)
    fig.suptitle("Steering: answer log-odds beyond random directions vs fluency (upper left is best)", fontsize=11)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * ((len(handles) - 1) // 4), 1, 1))
    return save_figure(fig, out, "steering_text")


def run(out, *, model="smollm2", data_dir=None, max_per_class=500, quick=False, progress=True, n_jobs=1, names=None):
    """Every dataset's table (``names``, default the scale's datasets; resumed when its checksummed table exists),
    the summary, the timing table and the figure."""
    from empirical.llm.extract import extract_dataset
    from empirical.llm.models import load_model

    out = Path(out)
    mdl, tok = load_model(model)
    tables, nulls = [], []
    for name in names or (QUICK if quick else FULL)["datasets"]:
        table, null = load_table(out, f"steering_text_{name}"), load_table(out, f"steering_text_null_{name}")
        if table is None or null is None:
            ds = datasets.load(name, data_dir, max_per_class=max_per_class)
            H = extract_dataset(mdl, tok, ds, layers="all", progress=progress)
            table, null = dataset_table(name, mdl, tok, H, ds, data_dir=data_dir, quick=quick, progress=progress,
                                        n_jobs=n_jobs, out=out)
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
    return table
