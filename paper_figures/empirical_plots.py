"""Figures of the empirical section, drawn from the tables it saved (``OUT/tables``).

Each function reads tables, saves the numbers it plots as a CSV (``save_table``) and the figure as
PNG + PDF (``save_figure``); a figure whose tables are missing (a partial run) is skipped.  Colours:
one per method (its ``color`` in :mod:`empirical.probes._registry`).  Layer l is the output of decoder block l.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from empirical.llm.datasets import dataset_names
from empirical.numerics import PAPER_SPLIT_SEED
from empirical.probes import method_names

from . import claims
from .output import PublishedTableChange, draws_figures, load_json, load_table, save_figure, save_table
from .steering_text import redraw as plot_steering_text
from .style import method_color, series_color

MODEL_LABEL = "SmolLM2-135M-Instruct"


def model_label(out) -> str:
    """The model a run's empirical figures are about: :data:`MODEL_LABEL` for the default model, else the name or
    the folder name of the path its ``empirical_setup.json`` records (the model grid runs other models)."""
    model = (load_json(out, "empirical_setup") or {}).get("model", "smollm2")
    return MODEL_LABEL if model == "smollm2" else Path(str(model)).name or str(model)


def _layers_all_seeds(out) -> pd.DataFrame | None:
    by_seed = load_table(out, "accuracy_by_seed")
    if by_seed is None:
        return None
    frames = []
    for name in by_seed.dataset.unique():
        for seed in sorted(by_seed.seed.unique()):
            t = load_table(out, f"layers_{name}" if seed == PAPER_SPLIT_SEED else f"layers_{name}_seed{seed}")
            if t is not None:
                frames.append(t.assign(seed=seed))
    return pd.concat(frames, ignore_index=True) if frames else None


@draws_figures
def plot_layerwise(out):
    """Test accuracy per layer and method: mean over split seeds, band = min..max over seeds."""
    import matplotlib.pyplot as plt

    layers = _layers_all_seeds(out)
    if layers is None:
        return None
    g = layers.groupby(["dataset", "method", "layer"])["test_accuracy"]
    tab = pd.DataFrame({"mean": g.mean(), "min": g.min(), "max": g.max(), "n_seeds": g.size()}).reset_index()
    save_table(tab, out, "layerwise_accuracy")
    names = list(dict.fromkeys(tab["dataset"]))
    cols = 4
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        d = tab[tab.dataset == name]
        for method in method_names():
            m = d[d.method == method]
            if not len(m):
                continue
            c = method_color(method)
            ax.plot(m.layer, m["mean"], color=c, lw=2 if method == "RAPTOR" else 1.2, label=method)
            ax.fill_between(m.layer, m["min"], m["max"], color=c, alpha=0.15, lw=0)
        ax.axhline(0.5, color="0.5", lw=0.8, ls=":")
        ax.set_title(name)
        ax.set_xlabel("layer")
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy")
    axes[0, 0].legend(loc="lower right")
    n_seeds = int(tab.n_seeds.max())
    seeds = (f"mean over {n_seeds} split seeds, band = min-max" if n_seeds > 1
             else "the paper's split (seed 42)")
    fig.suptitle(f"Probe accuracy per layer, {model_label(out)}: {seeds}; dotted = chance", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out, "layerwise_accuracy")


@draws_figures
def plot_accuracy_differences(out):
    """The paper's Figure 2 analogue: RAPTOR minus each baseline, best layer and mean over layers, per
    dataset, with 95 % intervals over split seeds (paired, corrected resampled t)."""
    import matplotlib.pyplot as plt

    by_seed = load_table(out, "accuracy_by_seed")
    if by_seed is None:
        return None
    diffs = claims.paired_differences(by_seed)
    save_table(diffs, out, "accuracy_differences")
    save_table(claims.accuracy_intervals(by_seed), out, "accuracy_intervals")
    present = list(dict.fromkeys(by_seed.dataset))
    paper = [n for n in present if n in claims.PAPER_DATASETS]
    averages = [claims.average_label(g) for g in claims.GRIDS]
    extra = [n for n in present if n not in claims.PAPER_DATASETS]  # Coinflip, grouped Counterfact: own axes
    baselines = [b for b in method_names("accuracy") if b != "RAPTOR" and b in set(diffs.baseline)]
    groups = [paper + averages] + ([extra] if extra else [])
    fig, axes = plt.subplots(len(groups), 2, figsize=(11, 0.42 * sum(map(len, groups)) + 2.2), squeeze=False,
                             gridspec_kw={"height_ratios": [len(g) + 0.5 for g in groups]})
    for row, names in enumerate(groups):
        y = np.arange(len(names))[::-1]
        for ax, metric, title in zip(axes[row], ("best", "mean"), ("best layer", "mean over layers")):
            for k, b in enumerate(baselines):
                d = diffs[(diffs.baseline == b) & (diffs.metric == metric)].set_index("dataset").reindex(names)
                off = (k - (len(baselines) - 1) / 2) * 0.22
                ax.errorbar(100 * d["diff"], y + off, xerr=[100 * (d["diff"] - d.ci_low).fillna(0),
                                                            100 * (d.ci_high - d["diff"]).fillna(0)],
                            fmt="o", ms=6, capsize=2, color=method_color(b), label=f"RAPTOR - {b}")
            ax.axvline(0, color="0.3", lw=1)
            ax.set_xlabel("difference (percentage points)")
            if row == 0:
                ax.set_title(f"{title} accuracy")
                for avg in y[len(paper):]:
                    ax.axhspan(avg - 0.5, avg + 0.5, color="0.92", zorder=0)
            ax.set_yticks(y, names if row == 0 else [f"{n}\n(not in the averages)" for n in names])
            if ax is not axes[row][0]:
                ax.tick_params(labelleft=False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False)
    fig.suptitle(f"RAPTOR minus baseline, {model_label(out)}: mean over split seeds with 95 % intervals "
                 "(right of 0 = RAPTOR better; the datasets outside the averages on their own axes)", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save_figure(fig, out, "accuracy_differences")


@draws_figures
def plot_cost(out):
    """The paper's cost figure (dumbbell): median per-layer training time, log scale."""
    import matplotlib.pyplot as plt

    frames = [t for t in (load_table(out, f"layers_{n}") for n in dataset_names())
              if t is not None]
    if not frames:
        return None
    layers = pd.concat(frames, ignore_index=True)
    med = layers.groupby(["dataset", "method"])["fit_time_s"].median().unstack("method")
    save_table(med.reset_index(), out, "cost_median_fit_time_s")
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(med) + 1.4))
    dumbbell(ax, med, list(med.index))
    ax.set_xlabel("median seconds per layer (fit incl. tuning, one CPU core)")
    ax.set_title(f"Training cost per layer, {model_label(out)}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, frameon=False)  # off the points
    return save_figure(fig, out, "cost_dumbbell")


def dumbbell(ax, wide: pd.DataFrame, labels, size: float = 30) -> None:
    """The cost dumbbell on ``ax``: a row per setting of ``wide`` (columns: methods' median seconds), a point per
    method in its colour, a grey line from RAPTOR to each other method, log x (:func:`plot_cost`, the model grid's
    :func:`paper_figures.grid.plot_grid`)."""
    yy = np.arange(len(wide))
    for other in [m for m in wide.columns if m != "RAPTOR"]:
        for y, (_, values) in zip(yy, wide.iterrows()):
            ax.plot([values.get("RAPTOR"), values[other]], [y, y], color="0.8", lw=1, zorder=0)
    for m in [m for m in method_names() if m in wide.columns]:
        ax.scatter(wide[m], yy, label=m, s=size, zorder=2, color=method_color(m))
    ax.set_yticks(yy, labels)
    ax.set_xscale("log")


@draws_figures
def plot_stability(out):
    """Directional stability (mean |pairwise cosine| over K ablation runs) per layer and method, with the
    bootstrap 95 % interval of each layer."""
    import matplotlib.pyplot as plt

    frames = [t for t in (load_table(out, f"stability_{n}") for n in claims.STABILITY_DATASETS) if t is not None]
    if not frames:
        return None
    stab = pd.concat(frames, ignore_index=True)
    save_table(claims.stability_differences(stab), out, "stability_differences")
    equal = [t for t in (load_table(out, f"stability_equal_data_{n}") for n in claims.STABILITY_DATASETS)
             if t is not None]
    if equal:  # RAPTOR at equal data (without the refit) beside the paper's protocol
        stab = pd.concat([stab, *equal], ignore_index=True)
    names = list(dict.fromkeys(stab.dataset))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False, sharey=True)
    for ax, name in zip(axes[0], names):
        d = stab[stab.dataset == name]
        for method in (*method_names(), claims.EQUAL_DATA_METHOD):
            m = d[d.method == method].sort_values("layer")
            if not len(m):
                continue
            equal_data = method == claims.EQUAL_DATA_METHOD
            c = method_color("RAPTOR" if equal_data else method)
            err = [(m.robust - m.ci_low).clip(lower=0), (m.ci_high - m.robust).clip(lower=0)]
            ax.errorbar(m.layer + (0.3 if equal_data else 0.0), m.robust, yerr=err, color=c,
                        marker="s" if equal_data else "o", ms=3, capsize=2, lw=1.2 if equal_data else 1.5,
                        ls="--" if equal_data else "-", mfc="white" if equal_data else c,
                        label="RAPTOR, equal data (no refit)" if equal_data else method)
        ax.set_title(name)
        ax.set_xlabel("layer")
    axes[0, 0].set_ylabel("stability: mean |cos| between runs")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False)  # off the points
    K = int(stab.K.iloc[0])
    fig.suptitle(f"Concept-vector stability under 20 % training ablations (K = {K} runs; bars: bootstrap 95 % "
                 f"intervals), {model_label(out)}; RAPTOR under the paper's protocol (refit on train + validation) and "
                 "at equal data (dashed)", fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(fig, out, "stability_by_layer")


@draws_figures
def plot_steering(out):
    """Steering: the intervention rate per setting (left; the success rate is 1 by construction and not drawn) and
    the |alpha| each layer needs, as the median over prompts where steering was applied relative to the median norm of
    the layer's last-token states, one panel per dataset (both directions), linear scale."""
    import matplotlib.pyplot as plt

    summary, pairs = load_table(out, "steering_summary"), load_table(out, "steering_pairs")
    if summary is None or pairs is None or not len(pairs):
        return None
    applied = pairs[pairs.intervened.astype(bool)]
    value = "abs_alpha_rel" if "abs_alpha_rel" in applied else "abs_alpha"
    per_layer = applied.groupby(["dataset", "direction", "layer"])[value].agg(["median", "max", "size"])
    save_table(per_layer.reset_index(), out, "steering_alpha_by_layer")
    s = summary[summary.n_pairs.fillna(0) > 0].reset_index(drop=True)
    names = list(dict.fromkeys(per_layer.index.get_level_values("dataset")))
    fig, axes = plt.subplots(1, 1 + len(names), figsize=(3.6 * (1 + len(names)), 3.6), squeeze=False)
    a1 = axes[0, 0]
    x = np.arange(len(s))
    a1.bar(x, s.intervention_rate, 0.6, color=series_color(1))
    a1.set_xticks(x, [f"{r.dataset} {r.direction}" for r in s.itertuples()], rotation=45, ha="right")
    a1.set_ylim(0, 1)
    a1.set_ylabel("share of (layer, prompt) pairs edited")
    a1.set_title("intervention rate\n(success is 1 by construction)", fontsize=9)
    ylabel = "median |alpha| / median state norm" if value == "abs_alpha_rel" else "median |alpha|"
    for ax, name in zip(axes[0, 1:], names):
        d = per_layer.loc[name].reset_index()
        for k, (direction, g) in enumerate(d.groupby("direction", sort=False)):
            ax.plot(g.layer, g["median"], marker="o", ms=3, color=series_color(k), label=direction)
        ax.set_ylim(bottom=0)
        ax.set_title(name)
        ax.set_xlabel("steered layer")
        ax.legend(fontsize=7)
    axes[0, 1].set_ylabel(ylabel)
    fig.suptitle(f"Adaptive GCAV steering with RAPTOR concept vectors, {model_label(out)}", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out, "steering_metrics")


#: The spread columns of ``structure_scatter``: the standard deviation over the subsample seeds of each point's
#: true and predicted accuracy, and the number of seeds (the figure's error bars; tables written before them lack
#: them, and the figure then has none).
STRUCTURE_SPREAD = ("Acc_true_sd", "Acc_pred_sd", "n_seeds")


def structure_scatter_table(out) -> pd.DataFrame | None:
    """The delta-sweep predictor's points, from the per-setting tables ``structure_<dataset>_layer<layer>`` at each
    setting's C fixed in advance: per (dataset, layer, fraction) the mean over the subsample seeds of ``delta``,
    ``Acc_true`` and ``Acc_pred``, their spread (:data:`STRUCTURE_SPREAD`) and the setting's ``rho_s`` and ``r``;
    None when the run has none of those tables (a published copy holds only the result, ``structure_scatter``)."""
    summary = load_table(out, "structure_summary")
    if summary is None:
        return None
    rows = []
    for r in summary.itertuples():
        t = load_table(out, f"structure_{r.dataset}_layer{r.layer}")
        if t is None:
            continue
        t = t[np.isclose(t.C, r.C if "C" in summary else 1.0 / r.lambda_star)]
        by_fraction = t.groupby("fraction")
        m = by_fraction[["delta", "Acc_true", "Acc_pred"]].mean()
        m = m.join(by_fraction[["Acc_true", "Acc_pred"]].std(ddof=1).add_suffix("_sd"))
        m = m.assign(n_seeds=by_fraction.size()).reset_index()
        rows.append(m.assign(dataset=r.dataset, layer=r.layer, rho_s=r.rho_s, r=r.r))
    return pd.concat(rows, ignore_index=True) if rows else None


@draws_figures
def plot_structure(out):
    """The delta-sweep predictor: predicted versus true test accuracy along the sweep (mean over seeds,
    at each setting's C fixed in advance), one colour per (dataset, layer), with bars of +-1 standard deviation
    over the subsample seeds where the table has them (:data:`STRUCTURE_SPREAD`).  Drawn from
    :func:`structure_scatter_table` (saved as ``structure_scatter``), or from the saved ``structure_scatter`` where
    the run's per-setting tables are not there (a published copy)."""
    import matplotlib.pyplot as plt

    tab = structure_scatter_table(out)
    if tab is not None:
        save_table(tab, out, "structure_scatter")
    else:
        tab = load_table(out, "structure_scatter")
    if tab is None or not len(tab):
        return None
    spread = set(STRUCTURE_SPREAD) <= set(tab.columns)
    fig, ax = plt.subplots(figsize=(5.4, 4.6))
    for k, ((name, layer), d) in enumerate(tab.groupby(["dataset", "layer"], sort=False)):
        ax.errorbar(d.Acc_true, d.Acc_pred, xerr=d.Acc_true_sd if spread else None,
                    yerr=d.Acc_pred_sd if spread else None, marker="o", ms=4, lw=0.8, elinewidth=0.6, capsize=1.5,
                    color=series_color(k), label=f"{name} L{layer} (rho_s {d.rho_s.iloc[0]:.2f})")
    reach = {column: tab[f"{column}_sd"].fillna(0) if spread else 0 for column in ("Acc_true", "Acc_pred")}
    lo = min((tab[column] - reach[column]).min() for column in reach) - 0.02
    hi = max((tab[column] + reach[column]).max() for column in reach) + 0.02
    ax.plot([lo, hi], [lo, hi], color="0.5", lw=1, ls="--")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("true test accuracy")
    ax.set_ylabel("predicted accuracy (pool labels, test features)")
    seeds = sorted({int(n) for n in tab.n_seeds}) if spread else []
    bars = (f"bars: +-1 SD over {'-'.join(map(str, seeds[::max(len(seeds) - 1, 1)]))} subsample seeds" if spread
            else "no bars: this run's table has no spread over the subsample seeds")
    ax.set_title(f"delta-sweep predictor along delta = n/p, {model_label(out)}\n({bars})", fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, out, "structure_scatter")


def plot_all(out) -> list:
    """Every empirical figure whose tables exist (with ``steering_text.png``:
    :func:`paper_figures.steering_text.redraw`); returns the written PNG paths.  In a rebuild
    (:func:`paper_figures.output.rebuilding`) a figure whose table would change is not redrawn, with a warning."""

    out = Path(out)
    made = []
    for draw in (plot_layerwise, plot_accuracy_differences, plot_cost, plot_stability, plot_steering, plot_structure,
                 plot_steering_text):
        try:
            made.append(draw(out))
        except PublishedTableChange as exc:  # a rebuild (--results-only) keeps the published figure and table
            warnings.warn(f"{draw.__name__} not redrawn: {exc}", UserWarning, stacklevel=2)
    return [p for p in made if p is not None]
