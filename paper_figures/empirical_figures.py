"""Empirical figures and tables on the default model (SmolLM2-135M-Instruct) and the shared datasets.

For every dataset: last-token hidden states of every layer (layer l = output of decoder block l,
1..L; cached by ``empirical.llm._extract``), the paper's fixed stratified split (train 60 %, val 20 %,
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

from empirical.common.checks import error_context
from empirical.llm import datasets
from empirical.probes import (
    PAPER_SPLIT_SEED,
    RaptorProbe,
    fit_layers,
    get_method,
    grouped_split,
    load_concept_vectors,
    method_names,
    paper_split,
    save_concept_vectors,
    stability,
)
from empirical.probes.real_embedding import real_embedding_stability, theory_lambda
from empirical.probes.structure import delta_sweep

from . import empirical_plots
from .claims import EQUAL_DATA_METHOD, PAIRED_DATASETS, STABILITY_DATASETS
from .output import draws_figures, load_table, save_figure, save_json, save_table, table_or_compute, vectors_path
from .progress import RunProgress
from .separability_tables import separability_control_summary, separability_control_table, separability_table
from .stability import plot_real_embedding_stability

STEER_SETTINGS = (("counterfact", "away", 0.7), ("counterfact", "towards", 0.7), ("hateeval", "towards", None),
                  ("hateeval", "away", None), ("sarcasm", "towards", None), ("sarcasm", "away", None),
                  ("stsa", "away", None), ("stsa", "towards", 0.8))
STRUCTURE_DATASETS = ("stsa", "common", "hateeval")
#: Accuracy-protocol variants on a grouped split (:func:`empirical.probes.grouped_split`, by the dataset's
#: ``group_column``): table name -> dataset.  Cities states every city, Counterfact every subject, once truly and
#: once falsely, and the paper's random split puts the partners on both sides; the grouped variant keeps each
#: key on one side.
GROUPED_VARIANTS = {f"{name}_grouped": name for name in PAIRED_DATASETS}


def _methods(quick: bool) -> dict:
    """The compared estimators (unfitted; cloned per layer and run), by the names the tables use: every method of
    the registry's accuracy comparison (:mod:`empirical.probes._registry`; ``quick``: with its quick parameters)."""
    return {name: get_method(name).estimator(quick) for name in method_names("accuracy")}


def layer_table(name, H, y, split, methods, progress=True, vectors_out=None, n_jobs=1,
                split_seed=PAPER_SPLIT_SEED) -> pd.DataFrame:
    """Test accuracy and fit time of every method at every layer 1..L (rows: layer x method).

    ``n_jobs`` joblib workers fit the layers in parallel (each worker on one core, so ``fit_time_s``
    is a single-core time whatever ``n_jobs`` is).

    With ``vectors_out`` (a directory, the run's ``tables``), the concept vectors of every method of the steering
    comparison are saved there (:func:`paper_figures.output.vectors_path`; safetensors + JSON, with the per-layer
    validation accuracies, the row count and ``split_seed``) for the steering steps, which then need not fit them
    again."""
    layers = list(range(1, len(H)))
    frames = []
    for method, estimator in methods.items():
        fit = fit_layers(H, y, layers=layers, estimator=estimator, split=split, n_jobs=n_jobs,
                         progress=progress and method == "RAPTOR")
        table = fit.summary.drop(columns=["best"]).assign(dataset=name, method=method)
        if vectors_out is not None and method in method_names("steering"):
            validation = dict(zip(fit.summary["layer"].astype(int).astype(str),
                                  fit.summary["val_accuracy"].astype(float)))
            save_concept_vectors(vectors_path(Path(vectors_out).parent, name, method),
                                 fit.concept_vectors(method=method.lower(), metadata=dict(
                                     dataset=name, n_rows=int(len(y)), split_seed=split_seed,
                                     validation_accuracy=validation)))
        if method == "RAPTOR":
            table = table.rename(columns={"lambda_": "lambda_star", "C": "C_star"})
            # the equal-data variant at no cost: the path's train-only solution at C*, before the refit, so that
            # every method's accuracy can be compared on the same training rows (claims: equal data)
            train_only = table[["dataset", "layer", "lambda_star", "C_star", "val_accuracy"]].assign(
                method=EQUAL_DATA_METHOD, fit_time_s=np.nan,
                test_accuracy=[fit.probes[layer].score_before_refit(H[layer][split[2]], y[split[2]])
                               for layer in table["layer"]])
            table = pd.concat([table, train_only], ignore_index=True)
        else:
            table = table.drop(columns=["C", "lambda_", "val_accuracy"])
        frames.append(table)
    columns = ["dataset", "layer", "method", "test_accuracy", "fit_time_s", "lambda_star", "C_star", "val_accuracy"]
    table = pd.concat(frames, ignore_index=True)
    return table[[c for c in columns if c in table]].sort_values(["layer", "method"], kind="stable",
                                                                  ignore_index=True)


def stability_summary(stab: pd.DataFrame) -> pd.DataFrame:
    """Mean and best stability over the measured layers per dataset and method, both protocols side by side
    (``RAPTOR (train only)`` is RAPTOR at equal data: without the train + validation refit)."""
    g = stab.groupby(["dataset", "method"])["robust"]
    summ = pd.DataFrame({"mean": g.mean(), "best": g.max()}).unstack("method").round(3)
    summ.columns = [f"{method} {stat}" for stat, method in summ.columns]
    return summ.reset_index()


def accuracy_summary(layers: pd.DataFrame) -> pd.DataFrame:
    """The paper's accuracy-summary table: best-layer (mean over layers) test accuracy, % per dataset and method."""
    g = layers.groupby(["dataset", "method"])["test_accuracy"]
    best, mean = g.max(), g.mean()
    cell = (100 * best).round(1).astype(str) + " (" + (100 * mean).round(1).astype(str) + ")"
    tab = cell.unstack("dataset")
    tab["Average"] = ((100 * best).groupby("method").mean().round(1).astype(str) + " ("
                      + (100 * mean).groupby("method").mean().round(1).astype(str) + ")")
    return tab.reset_index()


def accuracy_by_seed(layers: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, method, split seed): best-layer and mean-over-layers test accuracy, and the best layer.

    ``layers`` has the columns of :func:`layer_table` plus ``seed``.  The best layer is chosen by test
    accuracy, as in the paper's table (an optimistic, oracle choice)."""
    g = layers.groupby(["dataset", "method", "seed"])
    best_idx = layers.loc[g["test_accuracy"].idxmax()].set_index(["dataset", "method", "seed"])
    return pd.DataFrame({"best": g["test_accuracy"].max(), "mean": g["test_accuracy"].mean(),
                         "best_layer": best_idx["layer"]}).reset_index()


def stability_table(name, H, y, split, layers, methods, K, progress=True, n_jobs=1) -> pd.DataFrame:
    """Mean |pairwise cosine| over K ablation runs of the train+val pool (the paper's protocol:
    :func:`empirical.stability`, runs fitted by ``n_jobs`` workers); no row for a registered method outside the
    registry's stability comparison (the difference of means, as in the paper's table)."""
    pool = np.sort(np.r_[split[0], split[1]])
    rows = []
    for layer in tqdm(layers, desc=f"{name}: stability", disable=not progress, leave=False):
        X = np.asarray(H[layer], dtype=np.float64)[pool]
        for method, estimator in methods.items():
            if method in method_names() and method not in method_names("stability"):
                continue
            r = stability(estimator, X, y[pool], K=K, seed=0, n_jobs=n_jobs)
            rows.append(dict(dataset=name, layer=layer, method=method, robust=float(r.mean_abs_cos),
                             ci_low=float(r.ci[0]), ci_high=float(r.ci[1]), K=K,
                             median_fit_time_s=float(np.median(r.fit_times))))
    return pd.DataFrame(rows)


#: Split seeds of the accuracy protocol: 42 is the paper's split (used by every other step), the others
#: repeat the protocol so that accuracies and method differences get intervals.
SPLIT_SEEDS = (PAPER_SPLIT_SEED, 0, 1, 2, 3)
#: ``--quick`` repeats on one more seed (two: the smallest sample with an interval), and runs the grouped
#: variants (:data:`GROUPED_VARIANTS`) on the paper's seed only.
QUICK_SPLIT_SEEDS = (PAPER_SPLIT_SEED, 0)
#: ``--quick``'s examples per class (a look at every step in <= 6 minutes cold, not a measurement: docs/results.md#time)
QUICK_MAX_PER_CLASS = 50
#: Directional stability (and the separability control) at every 4th layer (1, 5, ..., 29: the spectral section's
#: layers too); every 3rd took the full run 1.9 min past its 100-minute budget (docs/results.md#time).
STABILITY_LAYER_STEP, QUICK_STABILITY_LAYER_STEP = 4, 6
#: The grouped variants run on the first three split seeds (an interval with two degrees of freedom; five would
#: take the full run past its 100-minute budget: docs/results.md#time).
GROUPED_SPLIT_SEEDS = SPLIT_SEEDS[:3]

#: Expected seconds of each step on two CPU cores with the default 500 per class (measured in the full run
#: of docs/results.md; the ETA of the run's progress display is built from these).
EXTRACT_SECONDS = {"stsa": 200, "cities": 32, "common": 53, "counterfact": 41, "hateeval": 240, "sarcasm": 139,
                   "coinflip": 155}


def extract_seconds(name: str) -> float:
    """Expected extraction seconds of dataset ``name`` (:data:`EXTRACT_SECONDS`; a dataset not measured there,
    e.g. one registered later, counts as the slowest measured one)."""
    return EXTRACT_SECONDS.get(name, max(EXTRACT_SECONDS.values()))


STEP_SECONDS = {"load_model": 10, "layers": 60, "separability": 75, "separability_control": 40, "stability": 350,
                "stability_equal_data": 30, "stability_theory": 15, "steering": 90, "structure": 20, "figures": 6}


def plan(quick: bool, max_per_class: int = 500) -> float:
    """Total expected seconds of :func:`run` (the weights its steps announce)."""
    scale = 0.15 if quick else max_per_class / 500
    ex = sum(extract_seconds(name) for name in datasets.dataset_names()) * max_per_class / 500
    seeds = QUICK_SPLIT_SEEDS if quick else SPLIT_SEEDS
    per_dataset = (len(datasets.dataset_names()) * (len(seeds) * STEP_SECONDS["layers"] + STEP_SECONDS["separability"]
                                    + STEP_SECONDS["separability_control"])
                   + len(GROUPED_VARIANTS) * (1 if quick else len(GROUPED_SPLIT_SEEDS)) * STEP_SECONDS["layers"])
    rest = (len(STABILITY_DATASETS) * (STEP_SECONDS["stability"] + STEP_SECONDS["stability_equal_data"])
            + STEP_SECONDS["stability_theory"]
            + STEP_SECONDS["steering"] + STEP_SECONDS["structure"] + (1 if quick else 3) * STEP_SECONDS["figures"])
    return STEP_SECONDS["load_model"] + ex + scale * (per_dataset + rest)


def run(out, *, model="smollm2", data_dir=None, max_per_class=500, quick=False, steps=None, n_jobs=2):
    """All empirical figures and tables (see module doc).

    ``steps`` is the run's :class:`paper_figures.progress.RunProgress` (None: no display); ``n_jobs``
    joblib workers fit layers, separability diagnostics and stability runs in parallel (the results do
    not depend on it; fit times are then per worker, each on one core)."""
    from empirical.llm import (
        extract_dataset,  # torch side, imported when the section runs
        load_model,
    )

    steps = steps if steps is not None else RunProgress(0, enabled=False)
    scale = 0.15 if quick else max_per_class / 500
    out = Path(out)
    data_dir = datasets.resolve_data_dir(data_dir)  # a missing data directory fails before the model loads
    with steps.step("load model", STEP_SECONDS["load_model"]):
        mdl, tok = load_model(model)
    methods = _methods(quick)
    K = 5 if quick else 20
    data = {}
    for name in datasets.dataset_names():  # every registered dataset (empirical.llm.datasets)
        with steps.step(f"extract {name}", extract_seconds(name) * max_per_class / 500):
            ds = datasets.load(name, data_dir, max_per_class=max_per_class)
            H = extract_dataset(mdl, tok, ds, layers="all", progress=False)
        y = np.asarray(ds.labels)
        data[name] = (ds, H, y, paper_split(y, random_state=SPLIT_SEEDS[0]))
    L = next(iter(data.values()))[1].shape[0] - 1
    split_seeds = QUICK_SPLIT_SEEDS if quick else SPLIT_SEEDS
    save_json({"model": model, "layers": L, "max_per_class": max_per_class, "split_seeds": list(split_seeds),
               "n": {k: int(len(v[2])) for k, v in data.items()}, "K": K, "n_jobs": n_jobs,
               "hidden_size": int(next(iter(data.values()))[1].shape[2]), "gcs_probes": methods["GCS"].n_probes,
               "stability_datasets": list(STABILITY_DATASETS),
               "grouped_datasets": [name for name in GROUPED_VARIANTS.values() if name in data],
               "stability_layer_step": QUICK_STABILITY_LAYER_STEP if quick else STABILITY_LAYER_STEP},
              out, "empirical_setup")

    # Steps run cheapest-per-claim first, so that an interrupted run (every step is saved and resumed) already
    # has the most of RESULTS.md: 1. accuracy on the paper's split (and RAPTOR's concept vectors), 2. steering
    # and the structure predictor, 3. the split-seed repeats (accuracy intervals; accuracy_by_seed is saved
    # after every seed), 4. directional stability, 5. separability (LinearSVC at C = 1e8 is the slowest step).
    # The figures are redrawn after each phase.
    frames = [_layers_for_seed(out, steps, name, H, y, split, SPLIT_SEEDS[0], methods, scale, n_jobs)
              for name, (ds, H, y, split) in data.items()]
    layers = pd.concat(frames, ignore_index=True).drop(columns="seed")
    variants = {variant: data[name] for variant, name in GROUPED_VARIANTS.items() if name in data}
    for variant, (ds, H, y, _) in variants.items():
        frames.append(_layers_for_seed(out, steps, variant, H, y, None, SPLIT_SEEDS[0], methods, scale, n_jobs,
                                       groups=ds.groups))
    save_table(accuracy_summary(layers), out, "accuracy_summary")
    save_table(accuracy_by_seed(pd.concat(frames, ignore_index=True)), out, "accuracy_by_seed")
    best = layers[layers.method == "RAPTOR"].sort_values("test_accuracy", ascending=False).groupby("dataset").head(1)
    save_table(best[["dataset", "layer", "test_accuracy", "lambda_star", "val_accuracy"]], out, "raptor_best_layer")

    with steps.step("steering", scale * STEP_SECONDS["steering"]):
        _steering(out, mdl, tok, data, layers, quick, False)
    with steps.step("delta-sweep structure predictor", scale * STEP_SECONDS["structure"]):
        _structure(out, data, L, quick, False, n_jobs)
    if not quick:  # a long run shows its figures after each phase; --quick draws them once, at the end
        with steps.step("empirical figures", scale * STEP_SECONDS["figures"]):
            empirical_plots.plot_all(out)

    for seed in split_seeds[1:]:
        for name, (ds, H, y, split) in data.items():
            frames.append(_layers_for_seed(out, steps, name, H, y, split, seed, methods, scale, n_jobs))
        for variant, (ds, H, y, _) in ({} if quick or seed not in GROUPED_SPLIT_SEEDS else variants).items():
            frames.append(_layers_for_seed(out, steps, variant, H, y, None, seed, methods, scale, n_jobs,
                                           groups=ds.groups))
        save_table(accuracy_by_seed(pd.concat(frames, ignore_index=True)), out, "accuracy_by_seed")
    if not quick:
        with steps.step("empirical figures (all split seeds)", scale * STEP_SECONDS["figures"]):
            empirical_plots.plot_all(out)

    stab_layers = list(range(1, L + 1, QUICK_STABILITY_LAYER_STEP if quick else STABILITY_LAYER_STEP))
    stabs = []
    for name in STABILITY_DATASETS:
        ds, H, y, split = data[name]
        with steps.step(f"{name}: directional stability (K={K})", scale * STEP_SECONDS["stability"]):
            tab = table_or_compute(out, f"stability_{name}", lambda: stability_table(
                name, H, y, split, stab_layers, methods, K, False, n_jobs=n_jobs))
        with steps.step(f"{name}: stability, equal data", scale * STEP_SECONDS["stability_equal_data"]):
            table_or_compute(out, f"stability_equal_data_{name}", lambda: stability_table(
                name, H, y, split, stab_layers, {EQUAL_DATA_METHOD: RaptorProbe(refit=False)}, K, False,
                n_jobs=n_jobs))
        stabs.append(tab)
    stab = pd.concat(stabs, ignore_index=True)
    equal = [t for t in (load_table(out, f"stability_equal_data_{n}") for n in STABILITY_DATASETS) if t is not None]
    save_table(stability_summary(pd.concat([stab, *equal], ignore_index=True)), out, "stability_summary")
    with steps.step("stability theory per layer", scale * STEP_SECONDS["stability_theory"]):
        _stability_theory(out, data, stab, layers, False)

    seps = []
    for name, (ds, H, y, split) in data.items():
        with steps.step(f"{name}: separability", scale * STEP_SECONDS["separability"]):
            sep = table_or_compute(out, f"separability_{name}",
                                   lambda: separability_table(name, H, y, split, False, n_jobs=n_jobs))
        seps.append(sep)
    sep = pd.concat(seps, ignore_index=True)
    st = sep.groupby("dataset").agg(layers=("layer", "size"), separable=("separable", "sum"),
                                    perc_zero=("perc_zero", "sum"),
                                    convergence_warnings=("convergence_warnings", "sum")).reset_index()
    st.loc[len(st)] = ["Overall", st.layers.sum(), st.separable.sum(), st.perc_zero.sum(),
                       st.convergence_warnings.sum()]
    hidden = next(iter(data.values()))[1].shape[2]
    st["n_train"] = [len(data[d][3][0]) if d in data else np.nan for d in st.dataset]
    st["n_over_p"] = st["n_train"] / hidden
    save_table(st, out, "separability_summary")
    controls = []
    for name, (ds, H, y, split) in data.items():
        with steps.step(f"{name}: separability control (shuffled labels)",
                        scale * STEP_SECONDS["separability_control"]):
            ctl = table_or_compute(out, f"separability_control_{name}", lambda: separability_control_table(
                name, H, y, split, stab_layers, progress=False, n_jobs=n_jobs))
        controls.append(ctl)
    save_table(separability_control_summary(pd.concat(controls, ignore_index=True)), out,
               "separability_control_summary")
    with steps.step("empirical figures (final)", scale * STEP_SECONDS["figures"]):
        empirical_plots.plot_all(out)


def _layers_for_seed(out, steps, name, H, y, split, seed, methods, scale, n_jobs, groups=None) -> pd.DataFrame:
    """The per-layer table of one dataset on one split seed (resumed if saved), with a ``seed`` column.
    Seed :data:`PAPER_SPLIT_SEED` is the paper's split (``split``) and also saves the steering methods' concept
    vectors (:func:`layer_table`);
    with ``groups`` every seed uses the subject-grouped split (:func:`empirical.probes.grouped_split`) instead
    and nothing else is saved."""
    paper = seed == PAPER_SPLIT_SEED
    table_name = f"layers_{name}" if paper else f"layers_{name}_seed{seed}"
    with steps.step(f"{name}: probes per layer, split seed {seed}", scale * STEP_SECONDS["layers"]):
        def compute():
            if groups is not None:
                seed_split = grouped_split(y, groups, random_state=seed)
            else:
                seed_split = split if paper else paper_split(y, random_state=seed)
            with error_context(dataset=name, split_seed=seed):  # errors from the fits name where they happened
                return layer_table(name, H, y, seed_split, methods, False, n_jobs=n_jobs,
                                   vectors_out=Path(out) / "tables" if paper and groups is None else None)

        tab = table_or_compute(out, table_name, compute)
    return tab.assign(seed=seed)


@draws_figures
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
        res = real_embedding_stability([np.asarray(H[layer], dtype=np.float64)[pool] for layer in m.layer], y[pool],
                                       m.robust.to_numpy(), lam, val_fraction=0.0, layer_names=list(m.layer),
                                       progress=progress)
        t = res.table.copy()
        t.insert(0, "dataset", name)
        rows.append(t)
        save_json(dict(dataset=name, **{k: (float(v) if isinstance(v, (int, float, np.floating)) else v)
                                         for k, v in res.correlations.items()}), out, f"stability_theory_corr_{name}")
        plot_real_embedding_stability(res, ax=ax, measured_ci=(m.ci_low.to_numpy(), m.ci_high.to_numpy()))
        ax.set_title(name)
    save_table(pd.concat(rows, ignore_index=True), out, "stability_theory_vs_measured")
    fig.suptitle("Isotropic theory against measured RAPTOR stability (the paper's protocol; one point per layer, bars: "
                 f"bootstrap 95 % intervals over K = {int(stab.K.iloc[0])} ablation runs)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out, "stability_theory_vs_measured")


def _raptor_vectors(out, name, H, y, split, progress):
    """RAPTOR's concept vectors of layers 1..L, as saved by the accuracy step (fitted again if a resumed
    run's accuracy table predates that file)."""
    path = vectors_path(out, name, "RAPTOR")
    if not Path(f"{path}.json").exists():
        with error_context(dataset=name, split_seed=PAPER_SPLIT_SEED):
            fit = fit_layers(H, y, layers=range(1, len(H)), split=split, progress=progress)
        save_concept_vectors(path, fit.concept_vectors(metadata=dict(dataset=name)))
    return load_concept_vectors(path)


def _steering(out, mdl, tok, data, layers, quick, progress):
    from empirical.llm import (
        GcavRule,
        NoLayerSteeredWarning,
        compare_generations,
        hard_layers,
        select_prompts,
        steer_prompts,
        steering_metrics,
    )

    if load_table(out, "steering_summary") is not None:
        return
    n_prompts = 2 if quick else 16  # --quick: one prompt per class
    metrics, hard, examples, pairs = [], [], [], []
    median_norms = {}
    for name, direction, tau in tqdm(STEER_SETTINGS, desc="steering", disable=not progress):
        ds, H, y, split = data[name]
        probes = _raptor_vectors(out, name, H, y, split, progress)
        prompts = [ds.prompts[i] for i in select_prompts(y, split[2], n_prompts)]  # both classes, alternating
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoLayerSteeredWarning)  # reported in the table's note column
            df = steer_prompts(mdl, tok, prompts, probes, GcavRule(direction, tau=tau), progress=progress)
        m = steering_metrics(df)
        # |alpha| against the size of the states it edits: the median norm of the layer's last-token state (once per
        # dataset: two settings share each one)
        if name not in median_norms:
            median_norms[name] = np.median(np.linalg.norm(np.asarray(H, dtype=np.float32), axis=2), axis=1)
        norms = median_norms[name]
        if len(df):
            df = df.assign(abs_alpha_rel=df["abs_alpha"].to_numpy() / norms[df["layer"].to_numpy()])
            pairs.append(df[["layer", "abs_alpha", "abs_alpha_rel", "intervened", "success"]]
                         .assign(dataset=name, direction=direction))
        # over the pairs with an edit, as alpha_median and alpha_p90 (the non-intervened zeros would drag the relative
        # median to 0 next to an absolute median over edits only)
        edited = df[df["intervened"].astype(bool)] if len(df) else df
        m.update(alpha_median_rel=float(edited["abs_alpha_rel"].median()) if len(edited) else np.nan,
                 alpha_p90_rel=float(edited["abs_alpha_rel"].quantile(0.9)) if len(edited) else np.nan)
        m.update(dataset=name, direction=direction, tau=tau if tau is not None else "--",
                 note="" if len(df) else f"no layer's probe reaches test accuracy tau={tau}")
        metrics.append(m)
        hl = hard_layers(df)
        hard.append(dict(dataset=name, direction=direction,
                         by_median=", ".join(f"{layer}({v:.2f})" for layer, v in hl["by_median"]),
                         by_max=", ".join(f"{layer}({v:.1f})" for layer, v in hl["by_max"])))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoLayerSteeredWarning)
            generations = compare_generations(mdl, tok, prompts[:1], probes, GcavRule(direction, tau=tau),
                                              max_new_tokens=16 if quick else 24, progress=False)
        examples += [dict(dataset=name, **g) for g in generations]
    cols = ["dataset", "direction", "layers", "n_pairs", "success_rate", "intervention_rate", "alpha_median",
            "alpha_p90", "alpha_max", "alpha_median_rel", "alpha_p90_rel", "tau", "note"]
    save_table(pd.concat(pairs, ignore_index=True) if pairs else pd.DataFrame(
        columns=["layer", "abs_alpha", "abs_alpha_rel", "intervened", "success", "dataset", "direction"]), out,
        "steering_pairs")
    save_table(pd.DataFrame(hard), out, "steering_hard_layers")
    save_table(pd.DataFrame(examples), out, "steering_examples")
    save_table(pd.DataFrame(metrics)[cols], out, "steering_summary")


#: Columns of ``structure_summary``: per (dataset, layer) the predictor at its C fixed in advance (RAPTOR's
#: validation-selected C on the pool, ``C_source``) and the power-law learning-curve baseline, each scored by
#: Spearman, Pearson and mean absolute error against the true accuracies along the sweep.
STRUCTURE_COLUMNS = ("dataset", "layer", "C", "C_source", "rho_s", "r", "mae", "baseline_rho_s", "baseline_r",
                     "baseline_mae")


def _structure(out, data, L, quick, progress, n_jobs):
    """The delta-sweep predictor and its learning-curve baseline at two layers of each structure dataset."""
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
            rows.append({"dataset": name, "layer": layer, **{k: res.fixed[k] for k in STRUCTURE_COLUMNS[2:]}})
    save_table(pd.DataFrame(rows, columns=list(STRUCTURE_COLUMNS)), out, "structure_summary")
