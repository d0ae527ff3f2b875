"""``OUT/RESULTS.md``: the run read as a results section, with the paper's claims checked.

Built only from what the run saved (``OUT/tables``, ``OUT/figures``, ``OUT/tables/run_info.json``), so it
can be regenerated at any time (``python -m paper_figures --results-only``).  The statistics and
verdict rules are in :mod:`paper_figures.claims`.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from empirical.common.files import atomic_write_text, write_csv
from empirical.probes import methods

from . import claims, grid, verdicts
from .output import load_json, load_table, to_markdown
from .run_record import TIMESTAMP_FORMAT, invocation_span, invocations, overlapping_invocations

#: Figures in reading order: (file stem, heading, what it shows).
FIGURES = (
    ("accuracy_differences", "Accuracy: RAPTOR minus each baseline",
     "Paired differences in test accuracy (percentage points) per dataset, best layer (left) and mean over "
     "layers (right), averaged over the split seeds with 95 % intervals; right of zero means RAPTOR is better. "
     "This is the paper's Figure 2 on our model."),
    ("layerwise_accuracy", "Accuracy per layer",
     "Test accuracy of every method at every layer (mean over split seeds, band = min-max over seeds)."),
    ("stability_by_layer", "Directional stability per layer",
     "Mean absolute cosine between the concept vectors of K ablation runs (20 % of the pool dropped per run) "
     "with bootstrap 95 % intervals, per layer: the paper's Table 2 protocol (RAPTOR refit on train + validation) "
     "and, dashed, RAPTOR at equal data (fitted on the training rows alone, as the baselines; the table's "
     "`RAPTOR (train only)` columns)."),
    ("stability_theory_vs_measured", "Stability: two-replica theory on real embeddings",
     "Measured RAPTOR stability per layer against the isotropic two-replica CGMT prediction (kappa estimated "
     "from the layer) and the paper's formula alpha^2/(alpha^2+sigma^2)."),
    ("cost_dumbbell", "Training cost",
     "Median seconds per layer (fit including tuning, one CPU core per fit), log scale."),
    ("steering_metrics", "Steering",
     "Adaptive GCAV steering with RAPTOR concept vectors: the intervention rate per setting (the success rate is 1 by "
     "construction and not drawn), and the median |alpha| each layer needs relative to the median norm of the "
     "layer's last-token states, per dataset (the hard layers are the peaks)."),
    ("steering_text_null", "Steering: each concept direction ranked among random directions",
     "The test of the steering claim, with random directions as the unit: for each tested point (the operating point "
     "of each method and direction chosen on the selection half), the answer log-odds shift of the concept direction "
     "(diamond, hollow when it fails a gate on the report half) among those of norm-matched antithetic random "
     "directions drawn afresh for the report half (grey dots), with its rank and rank p = (1 + #{random >= "
     "concept}) / (1 + N). Only the datasets whose read-out is measurable after Holm are drawn; the others are named "
     "under the figure."),
    ("steering_text", "Steering measured by the model's answer",
     "Concept-specific shift of the answer log-odds (the steered shift minus that of random directions of the same "
     "|alpha| per layer and position) against the perplexity ratio of generated text, on the held-out report half, "
     "towards and away in separate panels: one point per operating point that passed the gates on the selection "
     "half, coloured by method, its marker naming kind, layer choice and edited positions; bars are 95 % intervals "
     "over prompts (a secondary figure: the test is the rank above); hollow points fail a gate (answer mass, "
     "perplexity ratio, distinct-2) on the report half; the datasets not measurable after Holm are named under the "
     "figure; upper left is best (docs/steering.md). The table lists each group's operating point chosen on "
     "the selection half and measured on the report half."),
    ("structure_scatter", "The delta-sweep structure predictor",
     "Predicted accuracy (from the labelled pool: its labels train the oracle) against true test accuracy "
     "along the sweep of delta = n/p, per "
     "(dataset, layer); the dashed line is equality. The paper scores the predictor by its correlation with the "
     "truth along the sweep (Spearman, Pearson), not by its level."),
    ("spectral_*", "Spectral theory against real probes",
     "Our extension: the Gaussian-covariate (spectral) theory, fed with each layer's measured covariance and class "
     "means, against measured RAPTOR probes along the ridge path and the delta-sweep at the best layer and for "
     "ablation stability across layers, with the isotropic theory for comparison (docs/spectral_theory.md)."),
    ("learning_curves", "How many labels does a concept need? Learning curves from a small pool",
     "Mean absolute error of the test accuracy predicted at 2, 4 and 8 times the labels of a pool of 400, "
     "per dataset and method: the spectral theory (calibrated and deconvolved teachers; Sigma from the pool and "
     "unlabelled rows) against a power law fitted to the pool's subsample accuracies and against 'no gain' "
     "(docs/learning_curves.md; `python -m paper_figures --only learning_curves`). The truth is the test accuracy "
     "at the C a validation split of the training rows selects (what a user gets; `mae`, `bias`, `coverage`); the "
     "test-best C's accuracy, an optimistic truth, is the secondary `*_test_best` columns, and `selection_gap` is "
     "their difference. The spectral intervals are the ones `raptor plan` prints: the bootstrap, widened to the "
     "profile bounds and by the pool's own backtest error (half the pool forecasting the pool, per doubling of the "
     "labels). The first table is the goal cell (pool 400, 8x): MAE, bias, coverage of the 90 % interval and "
     "best-layer agreement. The second, `forecasters`, judges every forecaster at 2x, 4x and 8x with the datasets "
     "as the unit (issue 54): the mean over datasets of the per-dataset MAE and bias, the 90 % interval's coverage "
     "pooled and on the worst dataset (`coverage_min`), the share of pool draws whose forecast best layer is within "
     "1 point of the true best, and against 'no gain', the power law and the best of POW4 / MMF4 / WBL4 per dataset "
     "the datasets won (`wins_*`) and the mean paired MAE difference with its 95 % t-interval over datasets "
     "(`d_*`, negative: lower MAE). `raptor plan`'s forecaster, `capped_power_law` (the power law with its "
     "asymptote at the theory's ceiling), has its interval calibrated leave-one-dataset-out: each dataset's q "
     "comes from the other datasets only. The third, `forecast_calibration`, gives q per level and multiple over "
     "every dataset beside the library's `HELD_OUT_QUANTILES` (from an exploration before this run) and the "
     "held-out coverage."),
    ("theory_accuracy", "Theory: accuracy versus lambda",
     "The corrected fixed point (lines) against Monte Carlo simulation (markers, 2 standard errors)."),
    ("finite_size_convergence", "Theory: finite-size convergence",
     "Simulation against theory as the dimension p grows (log-log), with the p^(-1/2) reference slope."),
    ("stability_vs_lambda", "Theory: stability versus lambda",
     "Two-replica stability theory for the independent, ablation-subsample and full-vs-subsample protocols "
     "against simulation."),
    ("theory_phase_optimum", "Theory: separability threshold and optimal lambda",
     "Phase diagram and the accuracy-maximising ridge strength."),
)

#: Tables shown under a figure (or under a heading of their own when the run draws no figure for them).
FIGURE_TABLES = {
    "cost_dumbbell": ("cost_median_fit_time_s",),
    "stability_by_layer": ("stability_summary",),
    "steering_metrics": ("steering_summary", "steering_hard_layers"),
    "steering_text_null": ("steering_text_null",),
    "steering_text": ("steering_text_default", "steering_text_summary", "steering_text_timing"),
    "learning_curves": ("learning_curves_goal", "forecasters", "forecast_calibration"),
    "structure_scatter": ("structure_summary",),
    "spectral_*": ("spectral_agreement",),
    "finite_size_convergence": ("finite_size_slopes",),
}
#: Tables without a figure: (table, heading, what it shows).
OTHER_TABLES = (
    ("separability_summary", "Linear separability",
     "Share of layers whose training split is linearly separable (LinearSVC reaching zero training error at some "
     "C in {1e4, 1e6, 1e8}) and share the perceptron separates within 2000 epochs, per dataset."),
    ("separability_control_summary", "Linear separability against shuffled labels",
     "The same test with the labels randomly permuted (class counts kept), on the training rows and on every row "
     "of the dataset, at the stability layers: separability says something about the concept only where shuffled "
     "labels do not separate (random labels separate n points in p dimensions while n < 2 (p + 1))."),
    ("separability_large_summary", "Linear separability where it can be decided",
     "The exact LP test with real and shuffled labels on 2.5 (p + 1) non-test rows of the learning-curve section's "
     "extractions (beyond Cover's 2 (p + 1), where random labels separate with negligible probability), at the "
     "layers that section evaluates.  The separability claim is decided per dataset, on a row set with n >= "
     "2 (p + 1) where that dataset's shuffled labels fail; a dataset without one (fewer rows) is shown, not counted."),
    ("raptor_best_layer", "RAPTOR's best layer",
     "Per dataset on the paper's split: the layer with the best test accuracy, its selected ridge and "
     "validation accuracy."),
)
#: Longest table embedded in RESULTS.md; longer ones are linked.
MAX_EMBEDDED_ROWS = 40
#: The figures' formats, as RESULTS.md states them: true of a run's folder and of a published copy, whose RESULTS.md
#: is the run's own (:mod:`paper_figures.publish` copies the PNGs only).
FIGURE_FORMATS = "PNG; a run's own folder also holds each as PDF, a published copy such as docs/results the PNG only"
#: Why a column of an embedded table can be empty in every row (column -> reason), said where it is left out.
EMPTY_COLUMN_REASONS = {claims.EQUAL_DATA_METHOD: "it costs no fit of its own, being the regularisation path's "
                                                  "train-only solution at C*, kept from RAPTOR's fit"}


def _embedded_table(out: Path, name: str) -> list:
    """The lines that show the table ``name`` in RESULTS.md: the table itself, without the columns that have no value
    in any row (named under it, with the reason :data:`EMPTY_COLUMN_REASONS` gives), or a link when it is longer
    than :data:`MAX_EMBEDDED_ROWS`."""
    df = load_table(out, name)
    if df is None:
        return []
    if len(df) > MAX_EMBEDDED_ROWS:
        return [f"Numbers: [tables/{name}.csv](tables/{name}.csv) ({len(df)} rows).", ""]
    empty = [str(column) for column in df.columns if len(df) and df[column].isna().all()]
    lines = [f"`tables/{name}.csv`:", "", to_markdown(df.drop(columns=empty), floatfmt=".3g"), ""]
    if empty:
        lines += ["Left out, no value in any row: " + "; ".join(
            column + (f": {EMPTY_COLUMN_REASONS[column]}" if column in EMPTY_COLUMN_REASONS else "")
            for column in empty) + ".", ""]
    return lines


#: Notes shown under the claims table next to a claim (by its exact text, as :mod:`paper_figures.claims` writes
#: it) that does not hold or is inconclusive.  Each is either computed from the run (``{...}`` fields filled by
#: :func:`_facts`) or labelled a hypothesis: none is a finding the run did not test.
_GCS_TIE = ("Measured: RAPTOR's mean-over-layers accuracy is above GCS's in {gcs_positive} of the (dataset, split "
            "seed) pairs of the paper's grid, and the grid average is {gcs_average}; the every-setting rule needs each "
            "dataset's own interval above 0, which over {gcs_seeds} split seeds (per-split standard deviation of the "
            "difference {gcs_split_sd} points) detects a per-dataset gain of about {gcs_mde} with 80 % power. "
            "RAPTOR's selected ridge is far stronger than GCS's fixed C = 1 (median C* = {raptor_median_C} over "
            "datasets and layers).")
_XRFM = ("Measured: xRFM's mean-over-layers accuracy exceeds RAPTOR's at {xrfm_ahead_layers} of the "
         "(dataset, layer) pairs of the paper's split; see the per-layer figure. On the paired datasets, whose "
         "random split puts each statement's partner on the other side (RAPTOR - xRFM on the paper's split, "
         "early layers against the rest): {xrfm_paired_layers}; the grouped-split rows and the robustness grid "
         "without them are free of this artefact. At equal data (RAPTOR fitted on the training rows only, as xRFM "
         "is) RAPTOR - xRFM is {xrfm_equal_best} on the grid-average best layer and {xrfm_equal_mean} on mean "
         "over layers: parity with xRFM rests on RAPTOR's refit on train + validation, 80 % of the rows against "
         "xRFM's 60 %. Hypothesis (not tested here): a kernel method reads concepts that are not yet linearly "
         "readable at a small model's early layers.")
_STABILITY = ("This design cannot decide the stability claims at the paper's effect sizes: it detects "
              "{stab_mde} mean |cos| with 80 % power, and the paper's gaps are {paper_gap_xrfm} (RAPTOR - xRFM) and "
              "{paper_gap_gcs} (GCS - RAPTOR), medians over its six settings. The point estimates run against the "
              "paper in both directions: under the paper's protocol RAPTOR - GCS is {raptor_gcs_paper}, against "
              "\"GCS remains the most stable method\"; RAPTOR - xRFM is {raptor_xrfm_paper} under the paper's protocol "
              "and {raptor_xrfm_equal} at equal data (RAPTOR without the train + validation refit){xrfm_data_size}.")
EXPLANATIONS = {
    "RAPTOR beats GCS on mean-over-layers accuracy in every setting": _GCS_TIE,
    "RAPTOR beats or ties GCS on best-layer accuracy": _GCS_TIE,
    "grid-average best-layer accuracy: RAPTOR above GCS and not below xRFM": _GCS_TIE,
    "RAPTOR matches or exceeds xRFM on best-layer accuracy": _XRFM,
    "RAPTOR beats xRFM on mean-over-layers accuracy": _XRFM,
    "the corrected fixed point matches Monte Carlo simulation":
        "Hypothesis (not tested here): at the simulation's p finite-size bias is comparable to the Monte Carlo "
        "error at the hardest grid points (small lambda near separability); the finite-size claim measures how "
        "the bias falls with p at one point.",
    "simulation converges to the theory as p grows (bias falls with p)":
        "A quantity whose bias stays within 3 standard errors of zero at every p cannot show a slope; more "
        "replicates at small p resolve it (docs/sims.md).",
    **{f"{claim} ({protocol})": _STABILITY for _, claim, *_ in claims.STABILITY_CLAIMS
       for protocol in claims.STABILITY_PROTOCOLS},
}

#: What every term in RESULTS.md means (shown once, before the claims), after the compared methods (each method's
#: ``description`` in :mod:`empirical.probes._registry`).
GLOSSARY = (
    ("GCAV", "gradient-based concept activation vector steering: add alpha times the concept vector at a layer, with "
             "alpha solved so that the probe's probability reaches the target"),
    ("tau", "the test accuracy a layer's probe needs before GCAV steers at that layer"),
    ("kappa", "signal strength of the teacher-student model (norm of the class-mean separation, whitened)"),
    ("delta", "n / p, training rows per dimension"),
    ("lambda", "ridge strength in three conventions: the probe's C = 1 / lambda_probe on the sum of the logistic "
               "loss; the theory's lambda = 1 / (C n) on the mean loss; docs/theory.md converts between them"),
    ("rho_s", "Spearman rank correlation"),
    ("mean |cos|", "directional stability: the mean absolute cosine between the concept vectors of K ablation runs"),
    ("|alpha| relative", "the steering strength divided by the median norm of the layer's last-token states"),
)

def data_per_method() -> tuple:
    """How much data each compared method trains its direction on in one accuracy split (train 60 % / validation
    20 % / test 20 %) and in one stability ablation run (train + validation part of the 80 % kept): (method,
    accuracy split, share, stability run) per method of the accuracy comparison (its ``data`` in
    :mod:`empirical.probes._registry`; ``--`` where it states none)."""
    return tuple((m.name, *(m.data or ("--", "--", "--"))) for m in methods("accuracy"))


def glossary() -> tuple:
    """(term, meaning) of RESULTS.md's glossary: the compared methods, then :data:`GLOSSARY`."""
    return tuple((m.name, m.description or "--") for m in methods("accuracy")) + GLOSSARY


def _protocol_lines(setup: dict) -> list:
    """The protocol: how much data each method sees, and where our run differs from the paper's."""
    lines = ["### Protocol", "", "How much data each method fits its direction on:", "",
             "| method | accuracy split (60/20/20) | share of the dataset | stability ablation run |",
             "| --- | --- | --- | --- |"]
    lines += [f"| {m} | {a} | {share} | {b} |" for m, a, share, b in data_per_method()]
    if not setup:
        return lines + [""]
    n = setup.get("n", {})
    # runs before the field grouped Counterfact alone
    grouped = " and ".join(name.capitalize() for name in setup.get("grouped_datasets", ["counterfact"]))
    lines += ["", "Where our run differs from the paper's:", "", "| | paper | ours | why |",
              "| --- | --- | --- | --- |",
              f"| model | 3B-70B instruction models | `{setup.get('model', 'smollm2')}` (SmolLM2-135M-Instruct, "
              f"{setup.get('layers', '?')} layers, hidden size {setup.get('hidden_size', '?')}) | runs on 2 CPU cores; "
              "the only model shipped in a package we can install |",
              f"| samples per class | Concept-Depth caps | first {setup.get('max_per_class', '?')} of each class in "
              f"file order ({', '.join(f'{k} {v}' for k, v in n.items())} rows) | run time |",
              "| hate speech | HateXplain | HateEval | the dataset we have |",
              f"| splits | one 60/20/20 split | the paper's split (seed 42) and "
              f"{max(len(setup.get('split_seeds', [])) - 1, 0)} more seeds; {grouped} also on a grouped split | "
              f"intervals; the paired statements of {grouped} |",
              f"| GCS probes | 100 | {setup.get('gcs_probes', 100)} | -- |",
              f"| stability | 6 settings | {', '.join(setup.get('stability_datasets', []))}, every "
              f"{_ordinal(setup.get('stability_layer_step'))} layer, K = {setup.get('K', '?')} | run time |",
              "| steering prompts | test prompts | 16 test prompts per setting (4 in --quick), both classes "
              "| run time |",
              f"| spectral section | -- | {', '.join(setup.get('stability_datasets', []))}, every 4th layer | ours |",
              ""]
    return lines


def _glossary_lines() -> list:
    return (["### Terms", ""] + [f"- **{term}**: {meaning}" for term, meaning in glossary()] + [""])


def _rules_lines() -> list:
    """The verdict rules and the test families, stated before the numbers (:mod:`paper_figures.verdicts`)."""
    m = verdicts.MARGINS
    return ["### How a claim is judged (fixed before the run)", "",
            "- *Superiority* (\"beats\", \"more stable\", \"faster\"): the paired 95 % interval of the difference "
            "lies above 0.",
            f"- *Non-inferiority* (\"beats or ties\", \"matches or exceeds\", \"competitive\"): the lower bound lies "
            f"above minus a margin fixed in advance: {100 * m['accuracy']:g} accuracy point, {m['stability']:g} mean "
            f"|cos|; a theory's coverage of 95 % Monte Carlo intervals at least {0.95 - m['coverage']:.2f}.",
            "- *Majority* (\"in 26/42 settings\"): a count over datasets with a one-sided sign test; a dataset counts "
            "for the claim only when its own interval lies on the claim's side, against it only when its interval "
            "lies on the other side.",
            "- *Every setting*: an intersection-union test: it holds only if every dataset's own test holds; its "
            "opposite (some dataset the other way) is Bonferroni-corrected over the datasets.",
            "- *Permutation rank* (steering): the concept direction's effect ranked among random directions, p = "
            "(1 + #{random >= concept}) / (1 + N).",
            f"- Every test is one-sided at {verdicts.ALPHA:g}, which is the printed two-sided 95 % interval "
            "excluding the null, so a per-claim verdict never disagrees with its interval.",
            "- **Test families.** The Holm step runs within each family, never across: "
            + "; ".join(f"*{name}*: {what}" for name, what in verdicts.FAMILIES.items())
            + ". `p` and `verdict_per_claim` are a claim's own test; `p_holm` and `verdict` are after the Holm step "
              "within its family.",
            "- **One rule both ways.** *holds* when the Holm-adjusted p-value of the claim is below "
            f"{verdicts.ALPHA:g}; *does not hold* when the Holm-adjusted p-value of its opposite is.",
            f"- **Power.** `mde` is the minimal detectable effect at {100 * verdicts.POWER:.0f} % power (for a count, "
            "the true share of settings needed), in the units of the tested quantity. A claim whose design cannot "
            f"reach p < {verdicts.ALPHA:g} after its family's Holm step on its own data (its smallest p times the "
            "family's size: a sign test over six datasets, 1/64, or a rank among 100 random draws, 1/101, in a family "
            "of several tests), or cannot detect the paper's own effect with "
            f"{100 * verdicts.POWER:.0f} % power, gets *--* and the reason, not *inconclusive*.",
            "- Each accuracy claim is checked on the paper's six datasets (primary) and again without Cities and "
            "Counterfact (robustness), so no verdict rests on their split artefact (each states a city or subject "
            "once truly and once falsely; the paper's random split puts the partners on both sides). Both are "
            "reported on a grouped split too.",
            "- *--*: a description, a claim that cannot fail on this run (true by construction, guaranteed by the "
            "data's size, ordinary CLT behaviour), or a design that cannot decide; it carries no verdict.", ""]


def _figure_section(out: Path) -> list:
    lines, shown = [], set()
    for pattern, heading, text in FIGURES:
        stems = sorted(p.stem for p in (out / "figures").glob(f"{pattern}.png"))
        if stems:
            lines += [f"### {heading}", "", text, ""]
            lines += [f"![{heading if len(stems) == 1 else stem}](figures/{stem}.png)\n" for stem in stems]
            for table in FIGURE_TABLES.get(pattern, ()):
                lines += _embedded_table(out, table)
            shown.update(stems)
    for table, heading, text in OTHER_TABLES:
        body = _embedded_table(out, table)
        if body:
            lines += [f"### {heading}", "", text, ""] + body
    extra = sorted({p.stem for p in (out / "figures").glob("*.png")} - shown)
    if extra:
        lines += ["### Other figures of this run", ""]
        lines += [f"- [{stem}](figures/{stem}.png) (numbers in `tables/`)" for stem in extra]
        lines.append("")
    return lines


def _accuracy_table(out: Path) -> list:
    acc = load_table(out, "accuracy_intervals")
    if acc is None:
        return []
    acc = acc[acc.method.isin([m.name for m in methods("accuracy")])]

    def cell(r, m):
        return claims.format_estimate(r[m], r[m + "_low"], r[m + "_high"])

    rows = [dict(dataset=r.dataset, method=r.method, best_layer=cell(r._asdict(), "best"),
                 mean_over_layers=cell(r._asdict(), "mean"), split_seeds=int(r.n_seeds))
            for r in acc.itertuples()]
    return ["### Accuracy per dataset (mean over split seeds, 95 % interval)", "",
            to_markdown(pd.DataFrame(rows)), ""]


def _facts(out: Path, table: pd.DataFrame | None = None) -> dict:
    """Measured numbers the explanations quote (``n/a`` when the run has not produced them); ``table`` is the
    run's claims table (:func:`paper_figures.claims.claims_table`, computed when not given)."""
    layers = [t for t in (load_table(out, f"layers_{n}") for n in claims.PAPER_DATASETS) if t is not None]
    layers = pd.concat(layers) if layers else pd.DataFrame()
    c_star = (layers.loc[layers["method"] == "RAPTOR", "C_star"].dropna() if {"method", "C_star"} <= set(layers)
              else pd.Series(dtype=float))
    facts = {"raptor_median_C": f"{c_star.median():.2g}" if len(c_star) else "n/a", "gcs_split_sd": "n/a",
             "xrfm_ahead_layers": "n/a", "gcs_positive": "n/a", "gcs_average": "n/a", "gcs_seeds": "n/a",
             "gcs_mde": "n/a", "xrfm_paired_layers": "n/a", "xrfm_equal_best": "n/a", "xrfm_equal_mean": "n/a",
             **_stability_facts(out, claims.claims_table(out) if table is None else table)}
    by_seed = load_table(out, "accuracy_by_seed")
    if by_seed is not None and {"RAPTOR", "GCS"} <= set(by_seed.method):
        w = by_seed[by_seed.dataset.isin(claims.PAPER_DATASETS)].pivot_table(index=["dataset", "seed"],
                                                                            columns="method", values="mean")
        sd = (w["RAPTOR"] - w["GCS"]).groupby(level="dataset").std(ddof=1)
        facts["gcs_split_sd"] = f"{100 * sd.min():.1f}-{100 * sd.max():.1f}"
        d = (w["RAPTOR"] - w["GCS"]).dropna()
        facts["gcs_positive"] = f"{int((d > 0).sum())}/{len(d)}"
        facts["gcs_seeds"] = str(int(d.groupby(level="seed").size().size))
        diffs = claims.paired_differences(by_seed)
        avg = diffs[(diffs.dataset == claims.average_label()) & (diffs.baseline == "GCS") & (diffs.metric == "mean")]
        if len(avg):
            a = avg.iloc[0]
            facts["gcs_average"] = claims.format_estimate(a["diff"], a["ci_low"], a["ci_high"], pct=True, signed=True)
        per = diffs[diffs.dataset.isin(claims.PAPER_DATASETS) & (diffs.baseline == "GCS") & (diffs.metric == "mean")]
        mdes = [verdicts.superiority(r["diff"], r["ci_low"], r["ci_high"], r["n_seeds"] - 1).mde
                for _, r in per.iterrows()]
        if mdes:
            facts["gcs_mde"] = f"{100 * min(mdes):.1f}-{100 * max(mdes):.1f} points"
    if by_seed is not None and {claims.EQUAL_DATA_METHOD, "xRFM"} <= set(by_seed.method):
        diffs = claims.paired_differences(by_seed[by_seed.method != "RAPTOR"], reference=claims.EQUAL_DATA_METHOD)
        for metric in ("best", "mean"):
            a = diffs[(diffs.dataset == claims.average_label()) & (diffs.baseline == "xRFM") & (diffs.metric == metric)]
            if len(a):
                a = a.iloc[0]
                facts[f"xrfm_equal_{metric}"] = claims.format_estimate(a["diff"], a["ci_low"], a["ci_high"], pct=True,
                                                                       signed=True)
    if {"method", "test_accuracy"} <= set(layers) and {"RAPTOR", "xRFM"} <= set(layers.method):
        w = layers.pivot_table(index=["dataset", "layer"], columns="method", values="test_accuracy")
        facts["xrfm_ahead_layers"] = f"{int((w['xRFM'] > w['RAPTOR']).sum())}/{len(w)}"
        facts["xrfm_paired_layers"] = "; ".join(_early_layer_gap(w, name) for name in claims.PAIRED_DATASETS
                                                if name in w.index.get_level_values("dataset")) or "n/a"
    return facts


def _stability_facts(out: Path, table: pd.DataFrame) -> dict:
    """The numbers of the stability note: the claims' MDE range (from the claims ``table``), the paper's gaps, and
    RAPTOR - GCS and RAPTOR - xRFM per dataset under the paper's protocol and at equal data."""
    facts = dict(stab_mde="n/a", raptor_gcs_paper="n/a", raptor_xrfm_paper="n/a", raptor_xrfm_equal="n/a",
                 xrfm_data_size="", paper_gap_xrfm=f"{claims.paper_stability_gap('xRFM'):.3g}",
                 paper_gap_gcs=f"{-claims.paper_stability_gap('GCS'):.3g}")
    tested = table[(table.area == "stability") & table.mde.str.contains("detects")]
    mdes = tested.mde.str.extract(r"detects ([-+0-9.e]+)")[0].astype(float)
    if len(mdes):
        facts["stab_mde"] = f"{mdes.min():.2f}-{mdes.max():.2f}"
    names = claims.STABILITY_DATASETS
    stab = claims._concat(Path(out) / "tables", [f"stability_{n}" for n in names])
    if stab is None:
        return facts
    equal = claims._concat(Path(out) / "tables", [f"stability_equal_data_{n}" for n in names])
    paper = claims.stability_differences(stab)

    def per_dataset(d, baseline):
        d = d[d.baseline == baseline]
        return (f"{', '.join(f'{r.dataset} {r.diff:+.3f}' for r in d.itertuples())} (above on "
                f"{int((d['diff'] > 0).sum())}/{len(d)})"), d.set_index("dataset")["diff"]

    facts["raptor_gcs_paper"], _ = per_dataset(paper, "GCS")
    facts["raptor_xrfm_paper"], lead = per_dataset(paper, "xRFM")
    if equal is not None:
        both = pd.concat([stab[stab.method != "RAPTOR"], equal], ignore_index=True)
        facts["raptor_xrfm_equal"], at_equal = per_dataset(
            claims.stability_differences(both, reference=claims.EQUAL_DATA_METHOD), "xRFM")
        flips = (lead > 0) & (at_equal.reindex(lead.index) < 0)
        if len(lead) and flips.all():
            facts["xrfm_data_size"] = (": RAPTOR's lead over xRFM under the paper's protocol turns into a deficit "
                                       "at equal data on every dataset, so it comes from RAPTOR's larger training "
                                       "set (train + validation), not from the estimator")
    return facts


def _early_layer_gap(by_layer: pd.DataFrame, name: str) -> str:
    """RAPTOR - xRFM (points) of one dataset at its first third of the layers and at the rest, from the
    ``(dataset, layer) x method`` table of test accuracies."""
    d = 100 * (by_layer.loc[name, "RAPTOR"] - by_layer.loc[name, "xRFM"])
    last_early = max(1, len(d) // 3)
    early, late = d[d.index <= d.index[last_early - 1]], d[d.index > d.index[last_early - 1]]
    return (f"{name} {d.mean():+.1f} pts over all layers, {early.mean():+.1f} at layers {early.index.min()}-"
            f"{early.index.max()}, {late.mean():+.1f} at layers {late.index.min()}-{late.index.max()}")


def _format_claims(table: pd.DataFrame) -> pd.DataFrame:
    shown = table.copy()
    for column in ("p", "p_holm"):
        shown[column] = [f"{p:.2g}" if pd.notna(p) else "--" for p in shown[column]]
    return shown


def _plain_words(table: pd.DataFrame, facts: dict) -> list:
    lines = []
    for family in verdicts.FAMILIES:
        rows = table[table.family == family]
        if not len(rows):
            continue
        final, own = rows.verdict.value_counts(), rows.verdict_per_claim.value_counts()
        lines.append(f"- {verdicts.FAMILIES[family][0].upper()}{verdicts.FAMILIES[family][1:]}: "
                     f"{int(final.drop('--', errors='ignore').sum())} tested; after the Holm step "
                     f"{int(final.get('holds', 0))} hold, {int(final.get('does not hold', 0))} do not hold, "
                     f"{int(final.get('inconclusive', 0))} are inconclusive (per claim: {int(own.get('holds', 0))} "
                     f"hold, {int(own.get('does not hold', 0))} do not hold); {int(final.get('--', 0))} rows carry no "
                     "verdict.")
    lines.append("")
    by_reason = {}  # one bullet per explanation, naming every claim it explains
    for r in table.itertuples():
        if r.verdict in ("does not hold", "inconclusive", "--") and r.claim in EXPLANATIONS:
            by_reason.setdefault(EXPLANATIONS[r.claim].format(**facts), []).append(
                f"**{r.claim}** ({r.datasets}: {r.verdict})")
    notes = [f"- {'; '.join(dict.fromkeys(names))}: {reason}" for reason, names in by_reason.items()]
    if notes:
        lines += (["Notes on the claims that do not hold, are inconclusive or cannot be decided here:", ""] + notes
                  + [""])
    lines += ["- Best-layer accuracy picks the layer by test accuracy (the paper's definition); it is optimistic "
              "for every method, more so for noisy ones. Mean over layers is the fairer comparison.", ""]
    return lines


def _ordinal(k) -> str:
    """'3rd', '4th', '21st' ... ('?' for a missing value)."""
    if not isinstance(k, int):
        return "?"
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


#: how a run line marks an interrupted invocation (its record stops at its last save, not at its end)
INTERRUPTED = " (interrupted: its wall time runs to its last record, not to its end)"


def _run_lines(info: dict) -> list:
    """One line per invocation that produced this run's tables (a resumed run keeps the earlier ones), with its
    start and end where the record has them, and a flag on each invocation that overlapped an earlier one
    (:func:`paper_figures.run_record.overlapping_invocations`)."""
    runs = invocations(info)
    overlaps = {later: words for _, later, words in overlapping_invocations(info)}
    lines = []
    for i, r in enumerate(runs, start=1):
        span = invocation_span(r, i)
        when = ("" if span is None else f", {span[0]:{TIMESTAMP_FORMAT}} to {span[1]:{TIMESTAMP_FORMAT}}"
                + ("" if r.get("ended_utc") else " (its last record)"))
        lines.append(f"- invocation {i}: {r.get('mode', 'full')} mode, sections {', '.join(r.get('sections', []))}, "
                     f"{r.get('minutes', float('nan')):.1f} min wall time on {r.get('cpus')} CPU core(s), "
                     f"{r.get('n_jobs')} worker(s), git commit {str(r.get('git_commit', 'unknown'))[:12]}{when}"
                     f"{' (uncommitted changes)' if r.get('git_dirty') else ''}"
                     f"{INTERRUPTED if r.get('status') == 'interrupted' else ''}"
                     + (f" (OVERLAP: {overlaps[i]})" if i in overlaps else ""))
    total = sum(float(r.get("minutes", 0) or 0) for r in runs)
    bound = "at least " if any(r.get("status") == "interrupted" for r in runs) else ""
    return ["Run:", ""] + lines + [f"- total wall time {bound}{total:.1f} min", ""]


#: The phases of the time table: (phase, pattern of the progress steps' names), first match wins.
TIME_PHASES = (
    ("theory and stability-theory sections", r"^(theory: |stability theory vs simulation)"),
    ("load model", r"^load model$"),
    ("extraction of hidden states (0 where cached)", r"^extract "),
    ("probes per layer, the paper's split (seed 42)", r"^(?!\w+_grouped:).*probes per layer, split seed 42$"),
    ("probes per layer, the other split seeds", r"^(?!\w+_grouped:).*probes per layer, split seed"),
    ("probes per layer, grouped Cities and Counterfact", r"^\w+_grouped: probes per layer"),
    ("directional stability (paper's protocol)", r": directional stability"),
    ("directional stability (equal data)", r": stability, equal data$"),
    ("separability (paper's test)", r": separability$"),
    ("separability control (shuffled labels)", r": separability control"),
    ("GCAV steering (the paper's protocol)", r"^steering$"),
    ("delta-sweep structure predictor", r"^delta-sweep"),
    ("stability theory per layer", r"^stability theory per layer$"),
    ("spectral section", r"^spectral theory"),
    ("behavioural steering (steering_text)", r"^steering: generated text$"),
    ("learning curves", r"^learning curves"),
    ("figures", r"figures"),
)


#: The section a progress step belongs to (pattern of its name, first match wins; anything else: ``empirical``).
STEP_SECTIONS = ((r"^theory: ", "theory"), (r"^stability theory vs simulation$", "stability"),
                 (r"^spectral theory", "spectral"), (r"^steering: generated text$", "steering_text"),
                 (r"^learning curves", "learning_curves"))


def step_section(name: str) -> str:
    """The ``python -m paper_figures`` section that runs the progress step ``name`` (:data:`STEP_SECTIONS`)."""
    return next((section for pattern, section in STEP_SECTIONS if re.search(pattern, name)), "empirical")


def _resumed_midway(runs: list, supplier: dict) -> set:
    """The steps an interrupted invocation was inside when it stopped and a later invocation finished.

    A record that names its step (``unfinished_step`` or ``current_step``) gives it; an older record gives every step
    of its sections that it did not record and a later invocation did (one of them was in progress).  Such a step's
    recorded time is the remainder only, and its earlier part was never recorded."""
    found = set()
    for i, run in enumerate(runs):
        if run.get("status") != "interrupted":
            continue
        named = (run.get("unfinished_step") or {}).get("name") or run.get("current_step")
        own = set(run.get("step_seconds") or {})
        sections = set(run.get("sections") or [])
        found |= {name for name, j in supplier.items() if j > i and (
            name == named if named else name not in own and step_section(name) in sections)}
    return found


#: Phases of the sections a plain ``python -m paper_figures`` leaves out (added with ``--only``).
OPTIONAL_PHASES = ("behavioural steering (steering_text)", "learning curves")

#: A step recorded below this many seconds, or below this fraction of the longest time any invocation recorded
#: for it, was resumed (its tables read back, at most the model loaded), not computed.
RESUMED_SECONDS, RESUMED_FRACTION = 1.0, 0.25


def time_table(info: dict) -> pd.DataFrame:
    """Minutes per phase of one complete run: every progress step counted once, at the time of the latest
    invocation in ``run_info.json`` that computed it (a resumed step only reads its tables back, and a section
    may load the model first: a step recorded below :data:`RESUMED_SECONDS` or below :data:`RESUMED_FRACTION` of its
    longest recorded time counts as resumed; a step redone under a cheaper protocol counts at its new time), summed
    per phase (:data:`TIME_PHASES`, anything else under ``other``), with the number of steps.

    Parameters
    ----------
    info : dict
        The run record (``tables/run_info.json``).

    Returns
    -------
    pandas.DataFrame
        Columns ``phase, steps, minutes, not_measured, resumed_midway``, in the order of :data:`TIME_PHASES`, and a
        ``total`` row.  ``not_measured`` counts the steps no recorded invocation computed (every record below
        :data:`RESUMED_SECONDS`: cached before this run, or computed by an invocation killed before it recorded
        them): their time is not in ``minutes``.  ``resumed_midway`` counts the steps an interrupted invocation was
        inside when it stopped and a later one finished (:func:`_resumed_midway`): only the later part is in
        ``minutes``.  A row with either is a lower bound.
    """
    runs = [*info.get("earlier_invocations", []), {k: v for k, v in info.items() if k != "earlier_invocations"}]
    recorded = [{name: float(sec) for name, sec in (run.get("step_seconds") or {}).items()} for run in runs]
    longest = {}
    for record in recorded:
        for name, seconds in record.items():
            longest[name] = max(longest.get(name, 0.0), seconds)
    latest, supplier = {}, {}
    for i, record in enumerate(recorded):  # oldest first: a later invocation that computed the step replaces one
        for name, seconds in record.items():
            if seconds >= max(RESUMED_SECONDS, RESUMED_FRACTION * longest[name]) or name not in latest:
                latest[name], supplier[name] = seconds, i
    midway = _resumed_midway(runs, supplier)
    minutes, steps, unmeasured, partial = {}, {}, {}, {}
    for name, seconds in latest.items():
        phase = next((label for label, pattern in TIME_PHASES if re.search(pattern, name)), "other")
        minutes[phase] = minutes.get(phase, 0.0) + seconds / 60
        steps[phase] = steps.get(phase, 0) + 1
        unmeasured[phase] = unmeasured.get(phase, 0) + int(longest[name] < RESUMED_SECONDS)
        partial[phase] = partial.get(phase, 0) + int(name in midway and longest[name] >= RESUMED_SECONDS)
    order = [label for label, _ in TIME_PHASES if label in minutes] + (["other"] if "other" in minutes else [])

    def row(phase, among):
        return dict(phase=phase, steps=sum(steps[p] for p in among), minutes=round(sum(minutes[p] for p in among), 1),
                    not_measured=sum(unmeasured[p] for p in among), resumed_midway=sum(partial[p] for p in among))
    rows = [row(p, [p]) for p in order]
    if any(p in OPTIONAL_PHASES for p in order):
        rows.append(row("total of the default sections (python -m paper_figures)",
                        [p for p in order if p not in OPTIONAL_PHASES]))
    rows.append(row("total", order))
    return pd.DataFrame(rows)


def write_results(out) -> Path:
    """Write ``out/RESULTS.md`` and ``out/claims.csv`` (the claims table it states) from the run's tables and
    figures; returns the path of RESULTS.md."""
    out = Path(out)
    info = load_json(out, "run_info") or {}
    setup = load_json(out, "empirical_setup") or {}
    table = claims.claims_table(out)
    lines = ["# RAPTOR on SmolLM2-135M-Instruct: the paper's claims, checked", "",
             "Generated by `python -m paper_figures` from the tables in `tables/` (every number here is in a CSV "
             f"there) and the figures in `figures/` ({FIGURE_FORMATS}).", ""]
    if setup:
        lines += [f"Model `{setup.get('model')}` ({setup.get('layers')} layers, hidden size "
                  f"{setup.get('hidden_size')}), "
                  f"float32 hidden states of the last prompt token, up to {setup.get('max_per_class')} examples per "
                  f"class "
                  f"({', '.join(f'{k} {v}' for k, v in setup.get('n', {}).items())}); the paper's split (60/20/20, "
                  f"seed 42) and {len(setup.get('split_seeds', [])) - 1} more split seeds "
                  f"({', '.join(map(str, setup.get('split_seeds', [])[1:]))}) for the accuracy intervals; K = "
                  f"{setup.get('K')} ablation runs for stability.", ""]
    if info:
        lines += _run_lines(info)
        if any(r.get("step_seconds") for r in [info, *info.get("earlier_invocations", [])]):
            times = time_table(info)
            lines += ["Time per phase of one complete run (each progress step once, as measured by the invocation "
                      "that computed it; docs/results.md#time says what each costs and why):", "",
                      to_markdown(times, floatfmt=".1f"), ""]
            missing, midway = int(times.not_measured.iloc[-1]), int(times.resumed_midway.iloc[-1])
            if missing:
                lines += [f"{missing} of the {int(times.steps.iloc[-1])} steps were not measured by any recorded "
                          "invocation (`not_measured`: cached before this run, or computed by an invocation killed "
                          "before it recorded them), so the minutes of their rows and of the totals are lower bounds, "
                          "not the cost of a complete run.", ""]
            if midway:
                lines += [f"{midway} step(s) were finished by an invocation that resumed the work of an interrupted "
                          "one (`resumed_midway`; where the interrupted record does not name its step, every step of "
                          "its sections that a later invocation finished counts): only the resumed part is in the "
                          "minutes, so their rows and the totals are lower bounds.", ""]
    lines += _glossary_lines() + _protocol_lines(setup) + _rules_lines()
    lines += ["## The paper's claims", "", to_markdown(_format_claims(table)) if len(table) else "(no claims: the "
              "empirical section has not run)", ""]
    if len(table):
        lines += _plain_words(table, _facts(out, table))
    lines += _accuracy_table(out)
    lines += grid.grid_markdown(out)
    lines += ["## Figures", ""] + _figure_section(out)
    write_csv(out / "claims.csv", table)  # the verdicts RESULTS.md states, one row per claim (rebuilt with it)
    path = out / "RESULTS.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
