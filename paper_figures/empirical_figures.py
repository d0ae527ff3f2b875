"""Empirical figures and tables on the default model (SmolLM2-135M-Instruct) and the shared datasets.

For every dataset: last-token hidden states of every layer (layer l = output of decoder block l,
1..L; cached by ``empirical.llm.extract``), the paper's fixed stratified split (train 60 %, val 20 %,
test 20 %, seed 42), and per layer RAPTOR plus the baselines (GCS, xRFM, difference of means) on the
same split.  From those: the accuracy summary (the paper's accuracy table: best layer and mean over
layers), layerwise accuracy curves, training cost (the paper's cost figure), separability (its
separability table), directional stability under 20 % ablations (its robustness table) with the
two-replica theory's prediction per layer, GCAV steering (its steering-control and hard-layer tables,
examples), and the delta-sweep structure predictor (its structure-validation table).  The library does
the work (:mod:`empirical.probes`, :mod:`empirical.llm`); this module calls it and plots.

Every step writes its table as soon as it is done and is skipped on a re-run if its table exists
(delete ``OUT/tables/<name>.csv`` to redo it), so an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from empirical.llm import datasets
from empirical.probes import (DifferenceOfMeans, GCSProbe, RaptorProbe, XRFMProbe, fit_layers, load_concept_vectors,
                              paper_split, save_concept_vectors, separability, stability)
from empirical.probes.real_embedding import real_embedding_stability, theory_lambda
from empirical.probes.structure import delta_sweep

from .output import load_table, save_figure, save_json, save_table
from .stability import plot_real_embedding_stability

DATASETS = ("stsa", "cities", "common", "counterfact", "hateeval", "sarcasm", "coinflip")
STABILITY_DATASETS = ("stsa", "hateeval", "sarcasm")
STEER_SETTINGS = (("counterfact", "away", 0.7), ("counterfact", "towards", 0.7), ("hateeval", "towards", None),
                  ("hateeval", "away", None), ("sarcasm", "towards", None), ("sarcasm", "away", None),
                  ("stsa", "away", None), ("stsa", "towards", 0.8))
STRUCTURE_DATASETS = ("stsa", "common", "hateeval")


def _methods(quick: bool) -> dict:
    """The compared estimators (unfitted; cloned per layer and run), by the names the tables use."""
    return {
        "RAPTOR": RaptorProbe(),
        "GCS": GCSProbe(n_probes=20 if quick else 100),
        "xRFM": XRFMProbe(),
        "DiffMeans": DifferenceOfMeans(),
    }


def layer_table(name, H, y, split, methods, progress=True, vectors_out=None) -> pd.DataFrame:
    """Test accuracy and fit time of every method at every layer 1..L (rows: layer x method).

    With ``vectors_out`` (a directory), RAPTOR's concept vectors are saved there as
    ``concept_vectors_<name>`` (safetensors + JSON) for the steering step."""
    layers = list(range(1, len(H)))
    frames = []
    for method, estimator in methods.items():
        fit = fit_layers(H, y, layers=layers, estimator=estimator, split=split,
                         progress=progress and method == "RAPTOR")
        table = fit.summary.drop(columns=["best"]).assign(dataset=name, method=method)
        if method == "RAPTOR":
            table = table.rename(columns={"lambda_": "lambda_star", "C": "C_star"})
            if vectors_out is not None:
                save_concept_vectors(Path(vectors_out) / f"concept_vectors_{name}",
                                     fit.concept_vectors(metadata=dict(dataset=name)))
        else:
            table = table.drop(columns=["C", "lambda_", "val_accuracy"])
        frames.append(table)
    columns = ["dataset", "layer", "method", "test_accuracy", "fit_time_s", "lambda_star", "C_star", "val_accuracy"]
    table = pd.concat(frames, ignore_index=True)
    return table[[c for c in columns if c in table]].sort_values(["layer", "method"], kind="stable",
                                                                  ignore_index=True)


def accuracy_summary(layers: pd.DataFrame) -> pd.DataFrame:
    """The paper's accuracy-summary table: best-layer (mean over layers) test accuracy, % per dataset and method."""
    g = layers.groupby(["dataset", "method"])["test_accuracy"]
    best, mean = g.max(), g.mean()
    cell = (100 * best).round(1).astype(str) + " (" + (100 * mean).round(1).astype(str) + ")"
    tab = cell.unstack("dataset")
    tab["Average"] = ((100 * best).groupby("method").mean().round(1).astype(str) + " ("
                      + (100 * mean).groupby("method").mean().round(1).astype(str) + ")")
    return tab.reset_index()


def plot_layerwise(layers: pd.DataFrame, out):
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(layers["dataset"]))
    cols = 4
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.0 * rows), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        d = layers[layers["dataset"] == name]
        for method, g in d.groupby("method"):
            ax.plot(g["layer"], g["test_accuracy"], marker="o" if method == "RAPTOR" else ".", ms=3,
                    lw=2 if method == "RAPTOR" else 1, label=method)
        ax.set_title(name)
        ax.set_xlabel("layer (output of decoder block l)")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    axes[0, 0].set_ylabel("test accuracy")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Layerwise probing accuracy, SmolLM2-135M-Instruct (test split)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out, "layerwise_accuracy")


def plot_cost(layers: pd.DataFrame, out):
    """The paper's cost figure (dumbbell): median per-layer training time, log scale."""
    import matplotlib.pyplot as plt

    med = layers.groupby(["dataset", "method"])["fit_time_s"].median().unstack("method")
    save_table(med.reset_index(), out, "cost_median_fit_time_s")
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(med) + 1.5))
    yy = np.arange(len(med))
    for other in [m for m in med.columns if m != "RAPTOR"]:
        for i, ds in enumerate(med.index):
            ax.plot([med.loc[ds, "RAPTOR"], med.loc[ds, other]], [i, i], color="0.8", lw=1, zorder=0)
    for m in med.columns:
        ax.scatter(med[m], yy, label=m, s=25, zorder=2)
    ax.set_yticks(yy, med.index)
    ax.set_xscale("log")
    ax.set_xlabel("median seconds per layer (fit incl. tuning)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    return save_figure(fig, out, "cost_dumbbell")


def separability_table(name, H, y, split, progress=True) -> pd.DataFrame:
    """Per layer: LinearSVC zero training error at some C in {1e4, 1e6, 1e8}; perceptron within 2000 epochs."""
    tr = split[0]
    rows = []
    for layer in tqdm(range(1, H.shape[0]), desc=f"{name}: separability", disable=not progress, leave=False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # counted in the result and reported in the table
            r = separability(np.asarray(H[layer][tr], dtype=np.float64), y[tr])
        rows.append(dict(dataset=name, layer=layer, separable=bool(r.separable), perc_zero=bool(r.perc_zero),
                         convergence_warnings=int(r.n_convergence_warnings)))
    return pd.DataFrame(rows)


def stability_table(name, H, y, split, layers, methods, K, progress=True) -> pd.DataFrame:
    """Mean |pairwise cosine| over K ablation runs of the train+val pool (the paper's protocol:
    :func:`empirical.stability`); no row for the difference of means, as in the paper's table."""
    pool = np.sort(np.r_[split[0], split[1]])
    rows = []
    for layer in tqdm(layers, desc=f"{name}: stability", disable=not progress, leave=False):
        X = np.asarray(H[layer], dtype=np.float64)[pool]
        for method, estimator in methods.items():
            if method == "DiffMeans":
                continue
            r = stability(estimator, X, y[pool], K=K, seed=0)
            rows.append(dict(dataset=name, layer=layer, method=method, robust=float(r.robust),
                             ci_low=float(r.ci[0]), ci_high=float(r.ci[1]), K=K,
                             median_fit_time_s=float(np.median(r.fit_times))))
    return pd.DataFrame(rows)


def run(out, *, model="smollm2", data_dir=None, max_per_class=500, quick=False, progress=True, n_jobs=1):
    """All empirical figures and tables (see module doc)."""
    from empirical.llm.extract import extract_dataset  # torch side, imported when the section runs
    from empirical.llm.models import load_model

    out = Path(out)
    mdl, tok = load_model(model)
    methods = _methods(quick)
    K = 5 if quick else 20
    data = {}
    for name in tqdm(DATASETS, desc="datasets (extract)", disable=not progress):
        ds = datasets.load(name, data_dir, max_per_class=max_per_class)
        H = extract_dataset(mdl, tok, ds, layers="all", progress=progress)
        y = np.asarray(ds.labels)
        data[name] = (ds, H, y, paper_split(y, random_state=42))
    L = next(iter(data.values()))[1].shape[0] - 1
    save_json({"model": model, "layers": L, "max_per_class": max_per_class,
               "n": {k: int(len(v[2])) for k, v in data.items()},
               "hidden_size": int(next(iter(data.values()))[1].shape[2])}, out, "empirical_setup")

    # 1. accuracy, cost, separability
    frames, seps = [], []
    for name, (ds, H, y, split) in data.items():
        tab = load_table(out, f"layers_{name}")
        if tab is None:
            tab = layer_table(name, H, y, split, methods, progress, vectors_out=Path(out) / "tables")
            save_table(tab, out, f"layers_{name}")
        frames.append(tab)
        sep = load_table(out, f"separability_{name}")
        if sep is None:
            sep = separability_table(name, H, y, split, progress)
            save_table(sep, out, f"separability_{name}")
        seps.append(sep)
    layers = pd.concat(frames, ignore_index=True)
    save_table(accuracy_summary(layers), out, "accuracy_summary")
    best = layers[layers.method == "RAPTOR"].sort_values("test_accuracy", ascending=False).groupby("dataset").head(1)
    save_table(best[["dataset", "layer", "test_accuracy", "lambda_star", "val_accuracy"]], out, "raptor_best_layer")
    plot_layerwise(layers, out)
    plot_cost(layers, out)
    sep = pd.concat(seps, ignore_index=True)
    st = sep.groupby("dataset").agg(layers=("layer", "size"), separable=("separable", "sum"),
                                    perc_zero=("perc_zero", "sum"),
                                    convergence_warnings=("convergence_warnings", "sum")).reset_index()
    st.loc[len(st)] = ["Overall", st.layers.sum(), st.separable.sum(), st.perc_zero.sum(), st.convergence_warnings.sum()]
    save_table(st, out, "separability_summary")

    # 2. directional stability + theory per layer
    stab_layers = list(range(1, L + 1, 6 if quick else 3))
    stabs = []
    for name in STABILITY_DATASETS:
        ds, H, y, split = data[name]
        tab = load_table(out, f"stability_{name}")
        if tab is None:
            tab = stability_table(name, H, y, split, stab_layers, methods, K, progress)
            save_table(tab, out, f"stability_{name}")
        stabs.append(tab)
    stab = pd.concat(stabs, ignore_index=True)
    g = stab.groupby(["dataset", "method"])["robust"]
    summ = pd.DataFrame({"mean": g.mean(), "best": g.max()}).unstack("method").round(3)
    summ.columns = [f"{method} {stat}" for stat, method in summ.columns]
    save_table(summ.reset_index(), out, "stability_summary")
    _stability_theory(out, data, stab, layers, progress)

    # 3. steering
    _steering(out, mdl, tok, data, layers, quick, progress)

    # 4. structure predictor
    _structure(out, data, L, quick, progress, n_jobs)


def _stability_theory(out, data, stab, layers, progress):
    """Predicted (two-replica CGMT) vs measured RAPTOR stability across layers."""
    import matplotlib.pyplot as plt

    rows = []
    fig, axes = plt.subplots(1, len(STABILITY_DATASETS), figsize=(4.5 * len(STABILITY_DATASETS), 3.6), squeeze=False)
    for ax, name in zip(axes[0], STABILITY_DATASETS):
        ds, H, y, split = data[name]
        m = stab[(stab.dataset == name) & (stab.method == "RAPTOR")].sort_values("layer")
        C = layers[(layers.dataset == name) & (layers.method == "RAPTOR")].set_index("layer").loc[m.layer, "C_star"]
        pool = np.sort(np.r_[split[0], split[1]])
        # Each ablation run refits RAPTOR on its train+val part = 80 % of the pool, so the theory's
        # lambda is that of C* on n_run = 0.8 N rows, and val_fraction = 0.
        lam = theory_lambda(C.to_numpy(), 0.8 * len(pool))
        res = real_embedding_stability([np.asarray(H[l], dtype=np.float64)[pool] for l in m.layer], y[pool],
                                       m.robust.to_numpy(), lam, val_fraction=0.0, layer_names=list(m.layer),
                                       progress=progress)
        t = res.table.copy()
        t.insert(0, "dataset", name)
        rows.append(t)
        save_json(dict(dataset=name, **{k: (float(v) if isinstance(v, (int, float, np.floating)) else v)
                                         for k, v in res.correlations.items()}), out, f"stability_theory_corr_{name}")
        plot_real_embedding_stability(res, ax=ax)
        ax.set_title(name)
    save_table(pd.concat(rows, ignore_index=True), out, "stability_theory_vs_measured")
    save_figure(fig, out, "stability_theory_vs_measured")


def _raptor_vectors(out, name, H, y, split, progress):
    """RAPTOR's concept vectors of layers 1..L, as saved by the accuracy step (fitted again if a resumed
    run's accuracy table predates that file)."""
    path = Path(out) / "tables" / f"concept_vectors_{name}"
    if not Path(f"{path}.json").exists():
        fit = fit_layers(H, y, layers=range(1, len(H)), split=split, progress=progress)
        save_concept_vectors(path, fit.concept_vectors(metadata=dict(dataset=name)))
    return load_concept_vectors(path)


def _steering(out, mdl, tok, data, layers, quick, progress):
    from empirical.llm.steering import compare_generations, hard_layers, select_prompts, steer_prompts, steering_metrics

    if load_table(out, "steering_summary") is not None:
        return
    n_prompts = 4 if quick else 16
    metrics, hard, examples = [], [], []
    for name, direction, tau in tqdm(STEER_SETTINGS, desc="steering", disable=not progress):
        ds, H, y, split = data[name]
        probes = _raptor_vectors(out, name, H, y, split, progress)
        prompts = [ds.prompts[i] for i in select_prompts(y, split[2], n_prompts)]  # both classes, alternating
        df = steer_prompts(mdl, tok, prompts, probes, direction, tau=tau, progress=progress)
        m = steering_metrics(df)
        m.update(dataset=name, direction=direction, tau=tau if tau is not None else "--",
                 note="" if len(df) else f"no layer's probe reaches test accuracy tau={tau}")
        metrics.append(m)
        hl = hard_layers(df)
        hard.append(dict(dataset=name, direction=direction,
                         by_median=", ".join(f"{l}({v:.2f})" for l, v in hl["by_median"]),
                         by_max=", ".join(f"{l}({v:.1f})" for l, v in hl["by_max"])))
        for g in compare_generations(mdl, tok, prompts[:1], probes, direction, tau=tau,
                                     max_new_tokens=16 if quick else 24, progress=False):
            examples.append(dict(dataset=name, **g))
    cols = ["dataset", "direction", "layers", "n_pairs", "success_rate", "intervention_rate", "alpha_median",
            "alpha_p90", "alpha_max", "tau", "note"]
    save_table(pd.DataFrame(hard), out, "steering_hard_layers")
    save_table(pd.DataFrame(examples), out, "steering_examples")
    save_table(pd.DataFrame(metrics)[cols], out, "steering_summary")


def _structure(out, data, L, quick, progress, n_jobs):
    if load_table(out, "structure_summary") is not None:
        return
    rows = []
    for name in STRUCTURE_DATASETS:
        ds, H, y, split = data[name]
        pool = np.sort(np.r_[split[0], split[1]])
        te = split[2]
        for layer in (max(1, L // 3), max(1, 2 * L // 3)):
            X = np.asarray(H[layer], dtype=np.float64)
            res = delta_sweep(X[pool], y[pool], X[te], y[te], seeds=2 if quick else 5, n_jobs=n_jobs,
                              progress=progress)
            t = res.table.copy()
            t.insert(0, "layer", layer)
            t.insert(0, "dataset", name)
            save_table(t, out, f"structure_{name}_layer{layer}")
            rows.append(dict(dataset=name, layer=layer, lambda_star=res.best["lam"], rho_s=res.best["rho_s"],
                             r=res.best["r"]))
    tab = pd.DataFrame(rows)
    save_table(tab, out, "structure_summary")
