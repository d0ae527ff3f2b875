"""Steering measured on the generated text (docs/steering.md): concept shift vs fluency per setting and method.

On STSA, Sarcasm and HateEval with the default model: held-out test prompts of both classes (alternating),
greedy continuations without and with steering towards and away from the concept, for every preset of
:mod:`empirical.llm.steering_eval` with RAPTOR's probes, and for the other methods' concept vectors (GCS and
difference of means under the GCAV settings that need a probe, xRFM under the additive ones). The scorer
is RAPTOR's probe of the best layer by validation accuracy, which no setting steers.

Writes ``tables/steering_text_<dataset>.csv`` (one row per method x setting x direction),
``tables/steering_text_examples.csv`` (side-by-side continuations of the default and the paper's setting)
and ``figures/steering_text.png`` (concept shift vs perplexity ratio). Resumable per dataset.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score
from tqdm.auto import tqdm

from empirical.llm import datasets
from empirical.probes import (ConceptVectors, DifferenceOfMeans, GCSProbe, LinearProbe, XRFMProbe, fit_layers,
                              paper_split)

from .output import load_table, save_figure, save_table
from .style import METHOD_COLORS, method_color

DATASETS = ("stsa", "sarcasm", "hateeval")


def _method_vectors(H, y, split, quick, progress) -> dict:
    """ConceptVectors per method on layers 1..L (xRFM: directions with their test accuracy, no probe weights)."""
    layers = range(1, H.shape[0])
    out = {}
    for method, estimator in (("RAPTOR", None), ("GCS", GCSProbe(n_probes=20 if quick else 50)),
                              ("DiffMeans", DifferenceOfMeans())):
        fit = fit_layers(H, y, layers=layers, split=split, progress=progress and method == "RAPTOR",
                         **({} if estimator is None else {"estimator": estimator}))
        out[method] = (fit.concept_vectors(method=method.lower()), fit)
    fit = fit_layers(H, y, layers=layers, split=split, estimator=XRFMProbe(), progress=False)
    accuracy = fit.summary.set_index("layer")["test_accuracy"]
    out["xRFM"] = (ConceptVectors({layer: LinearProbe(None, None, est.concept_vector_,
                                                      test_accuracy=float(accuracy[layer]))
                                   for layer, est in fit.probes.items()}, method="xrfm"), fit)
    return out


def dataset_table(name, mdl, tok, H, ds, *, quick=False, progress=True):
    """Summary rows (method x setting x direction), example rows, and the scorer's check on held-out examples
    of known class (mean P(concept) per class, AUC) for one dataset."""
    from empirical.llm.steering import select_prompts
    from empirical.llm.steering_eval import DEFAULT_SETTING, PRESETS, ContinuationScorer, compare_settings

    y = np.asarray(ds.labels)
    split = paper_split(y, random_state=42)
    methods = _method_vectors(H, y, split, quick, progress)
    raptor, raptor_fit = methods["RAPTOR"]
    scorer_layer = int(raptor_fit.best_layer)
    scorer = ContinuationScorer(mdl, tok, ds.template, raptor[scorer_layer], scorer_layer)
    pool = np.sort(np.r_[split[0], split[1]])
    norms = {layer: float(np.median(np.linalg.norm(np.asarray(H[layer][pool], dtype=np.float64), axis=1)))
             for layer in range(1, H.shape[0])}
    prompts = [ds.prompts[i] for i in select_prompts(y, split[2], 6 if quick else 10)]
    # the scorer on texts whose answer is known: held-out examples of each class, scored as continuations
    known = select_prompts(y, split[2], 20 if quick else 60)
    p_known = scorer([ds.texts[i] for i in known])
    check = dict(dataset=name, scorer_layer=scorer_layer, n=len(known), p_positive=float(p_known[y[known] == 1].mean()),
                 p_negative=float(p_known[y[known] == 0].mean()), auc=float(roc_auc_score(y[known], p_known)))
    rows, examples = [], []
    for direction in ("towards", "away"):
        for method, (vectors, _) in tqdm(methods.items(), desc=f"{name} {direction}", disable=not progress,
                                         leave=False):
            names = list(PRESETS) if method == "RAPTOR" else ["paper", DEFAULT_SETTING, "additive-0.1", "additive-0.3"]
            table, per_prompt = compare_settings(mdl, tok, prompts, {method: vectors}, direction, scorer,
                                                 settings=[PRESETS[n] for n in names], norms=norms,
                                                 max_new_tokens=16 if quick else 24, progress=False)
            rows.append(table.assign(dataset=name))
            if method == "RAPTOR":
                for setting in ("paper", DEFAULT_SETTING):
                    t = per_prompt[(method, setting)].head(2)
                    examples += [dict(dataset=name, direction=direction, setting=setting, prompt=r.prompt[-120:],
                                      unsteered=r.unsteered, steered=r.steered, p_unsteered=r.p_unsteered,
                                      p_steered=r.p_steered) for r in t.itertuples()]
    return pd.concat(rows, ignore_index=True), pd.DataFrame(examples), check


def plot(table: pd.DataFrame, out):
    """Concept shift (towards the target, mean over prompts) vs perplexity ratio (steered / unsteered)."""
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(table.dataset))
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False)
    markers = {"towards": "o", "away": "s"}
    for ax, name in zip(axes[0], names):
        d = table[table.dataset == name]
        for row in d.itertuples():
            ax.scatter(row.perplexity_ratio, row.shift_mean, color=method_color(row.method),
                       marker=markers[row.direction], s=36, alpha=0.85, edgecolor="k", linewidth=0.3)
            if row.method == "RAPTOR":
                ax.annotate(row.setting, (row.perplexity_ratio, row.shift_mean), fontsize=6, alpha=0.8,
                            xytext=(3, 2), textcoords="offset points")
        ax.axhline(0, color="0.6", lw=0.8)
        ax.axvline(1, color="0.6", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(f"{name}", fontsize=11)
        ax.set_xlabel("perplexity of steered / unsteered continuation (log)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("concept shift of the continuation\n(mean change of P(concept), towards the target)")
    handles = [plt.Line2D([], [], color=c, marker="o", ls="", label=m) for m, c in METHOD_COLORS.items()]
    handles += [plt.Line2D([], [], color="0.3", marker=mk, ls="", label=f"steer {d}") for d, mk in markers.items()]
    axes[0, -1].legend(handles=handles, fontsize=8, loc="best")
    fig.suptitle("Steering SmolLM2-135M-Instruct: what it does to the generated text (upper left is best)", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, out, "steering_text")


def run(out, *, model="smollm2", data_dir=None, max_per_class=500, quick=False, progress=True):
    """Every dataset's table (resumed when its checksummed table exists), the examples and the figure."""
    from empirical.llm.extract import extract_dataset
    from empirical.llm.models import load_model

    out = Path(out)
    mdl, tok = load_model(model)
    tables, examples, checks = [], [], []
    for name in DATASETS:
        table = load_table(out, f"steering_text_{name}")
        if table is None:
            ds = datasets.load(name, data_dir, max_per_class=max_per_class)
            H = extract_dataset(mdl, tok, ds, layers="all", progress=progress)
            table, ex, check = dataset_table(name, mdl, tok, H, ds, quick=quick, progress=progress)
            save_table(ex, out, f"steering_text_examples_{name}")
            save_table(pd.DataFrame([check]), out, f"steering_text_scorer_{name}")
            save_table(table, out, f"steering_text_{name}")  # last: its presence marks the dataset done
        tables.append(table)
        for part, store in (("examples", examples), ("scorer", checks)):
            t = load_table(out, f"steering_text_{part}_{name}")
            if t is not None:
                store.append(t)
    table = pd.concat(tables, ignore_index=True)
    if examples:
        save_table(pd.concat(examples, ignore_index=True), out, "steering_text_examples")
    if checks:
        save_table(pd.concat(checks, ignore_index=True), out, "steering_text_scorer")
    plot(table, out)
    return table
