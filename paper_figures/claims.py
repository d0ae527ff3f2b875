"""The paper's claims, checked on our run: numbers with 95 % intervals and a verdict.

Every function reads the tables a run saved (``OUT/tables``) and returns plain DataFrames; nothing
here fits a model.  Conventions:

- **Accuracy intervals** come from the split-seed repeats (``accuracy_by_seed``): the accuracy
  protocol (fixed stratified 60/20/20 split, RAPTOR and the baselines per layer) is run on
  ``k`` split seeds.  Repeated random splits overlap, so the naive t-interval over seeds is too
  narrow; we use the corrected resampled t-interval of Nadeau & Bengio (2003): variance
  ``s^2 (1/k + n_test/n_train)`` with ``n_test/n_train = 0.2/0.8``, t quantile with ``k - 1``
  degrees of freedom.  Method comparisons are **paired**: the difference is taken per split seed.
- **Verdicts** follow one rule family, :mod:`paper_figures.verdicts` (superiority, non-inferiority with a
  margin fixed in advance, majority by a sign test, every-setting by an intersection-union test), with a
  Holm step over every tested row.  Claims that cannot fail (true by construction, guaranteed by the data's
  size, ordinary CLT behaviour) carry ``--``.
- Every accuracy claim is checked on the paper's six datasets and again without Cities and Counterfact (whose
  paired true/false statements straddle the paper's random split: :data:`PAIRED_DATASETS`); both on a grouped
  split (by city, by subject) are reported next to them (``cities_grouped``, ``counterfact_grouped``).
- "Best layer" is the layer with the highest test accuracy (the paper's definition, an oracle choice
  that favours methods with noisier per-layer accuracies).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from empirical.llm import DISTINCT2_GATE, MASS_GATE, PERPLEXITY_GATE
from empirical.llm.datasets import dataset_names, get_dataset

from . import verdicts as rules
from .output import load_json, load_table
from .predictor_claims import predictor_claims
from .steering_text import METHODS as STEERING_METHODS
from .theory import RESOLVED_SE, weighted_slope
from .verdicts import MARGINS, Test, mean_interval, seed_interval, wilson_interval

#: The paper's six-dataset grid (its averages leave Coinflip out): the registered datasets marked ``in_paper_grid``
#: (:func:`empirical.llm.datasets.register_dataset`).
PAPER_DATASETS = dataset_names(paper_grid=True)
#: The datasets of the directional-stability comparison (the paper's three).
STABILITY_DATASETS = ("stsa", "hateeval", "sarcasm")
#: The grids every accuracy claim is checked on: label -> datasets (the label of the average row is
#: ``average (<label>)``).  Counterfact's paired statements straddle the paper's random split, so no verdict
#: may rest on it alone.
#: The paper's datasets whose rows come in pairs across the classes (a city or subject stated once truly and once
#: falsely: the registry's ``group_column``): the paper's random split puts the partners on both sides.  Each is
#: also run on a grouped split (``<name>_grouped``, :data:`paper_figures.empirical_figures.GROUPED_VARIANTS`) and
#: left out of the robustness grid.
PAIRED_DATASETS = tuple(name for name in PAPER_DATASETS if get_dataset(name).group_column is not None)
GRIDS = {"6": PAPER_DATASETS,
         "4, no Cities or Counterfact": tuple(d for d in PAPER_DATASETS if d not in PAIRED_DATASETS)}
#: The grid of the paper's own claims (the first of :data:`GRIDS`).
PAPER_GRID = "6"
#: The method name of RAPTOR fitted on exactly the rows the baselines fit in the equal-data stability comparison:
#: C selected on the validation part and *not* refit on train + validation (GCS fits subsets of the training
#: part, xRFM the training part with validation for selection).
EQUAL_DATA_METHOD = "RAPTOR (train only)"
def format_estimate(mean, low, high, *, pct=False, signed=False, digits=3) -> str:
    """``mean [low, high]`` as printed in the claims table (``pct``: x100 in points; ``signed``: a leading +);
    without a finite interval (one split seed) just the mean; ``n/a`` without a finite mean."""
    if not np.isfinite(mean):
        return "n/a"
    scale, unit = (100.0, " pts") if pct else (1.0, "")
    sign = "+" if signed else ""
    d = 1 if pct else digits
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{scale * mean:{sign}.{d}f}{unit}"
    return f"{scale * mean:{sign}.{d}f}{unit} [{scale * low:{sign}.{d}f}, {scale * high:{sign}.{d}f}]"


# ---------------------------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------------------------
def average_label(grid: str = PAPER_GRID) -> str:
    """The ``dataset`` value of a grid's average row, e.g. ``average (6)``."""
    return f"average ({grid})"


def paired_differences(by_seed: pd.DataFrame, reference: str = "RAPTOR") -> pd.DataFrame:
    """RAPTOR minus each baseline, per dataset and metric (best layer, mean over layers): the mean over
    split seeds of the paired difference and its interval (:func:`seed_interval`), plus one average row per
    grid of :data:`GRIDS` (``dataset = "average (6)"``, ``"average (4, no Cities or Counterfact)"``), averaged per seed
    first."""
    rows = []
    wide = by_seed.pivot_table(index=["dataset", "seed"], columns="method", values=["best", "mean"])
    for metric in ("best", "mean"):
        w = wide[metric]
        for other in [m for m in w.columns if m != reference]:
            diff = (w[reference] - w[other]).rename("diff").reset_index()
            for name, d in diff.groupby("dataset"):
                m, lo, hi = seed_interval(d["diff"])
                rows.append(dict(dataset=name, baseline=other, metric=metric, diff=m, ci_low=lo, ci_high=hi,
                                 n_seeds=int(d["diff"].notna().sum())))
            for grid, names in GRIDS.items():
                avg = diff[diff.dataset.isin(names)].groupby("seed")["diff"].mean()
                m, lo, hi = seed_interval(avg)
                rows.append(dict(dataset=average_label(grid), baseline=other, metric=metric, diff=m, ci_low=lo,
                                 ci_high=hi, n_seeds=len(avg)))
    return pd.DataFrame(rows)


def _accuracy_interval(values, metric) -> dict:
    m, lo, hi = seed_interval(values)
    # an accuracy lies in [0, 1]: the t-interval is clipped there (xRFM's 0.998 on Coinflip reached 1.006)
    return {metric: m, f"{metric}_low": max(lo, 0.0), f"{metric}_high": min(hi, 1.0)}


def accuracy_intervals(by_seed: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and method: best-layer and mean-over-layers accuracy, mean over split seeds with
    intervals (clipped to [0, 1]), plus one average row per grid of :data:`GRIDS`."""
    rows = []
    for (name, method), d in by_seed.groupby(["dataset", "method"]):
        row = dict(dataset=name, method=method, n_seeds=len(d))
        for metric in ("best", "mean"):
            row.update(_accuracy_interval(d[metric], metric))
        rows.append(row)
    for grid, names in GRIDS.items():
        six = by_seed[by_seed.dataset.isin(names)].groupby(["method", "seed"])[["best", "mean"]].mean()
        for method, d in six.groupby(level="method"):
            row = dict(dataset=average_label(grid), method=method, n_seeds=len(d))
            for metric in ("best", "mean"):
                row.update(_accuracy_interval(d[metric], metric))
            rows.append(row)
    return pd.DataFrame(rows)


def _pts(r) -> str:
    return format_estimate(r["diff"], r["ci_low"], r["ci_high"], pct=True, signed=True)


def _t_test(r, rule: str, direction: int = 1, margin: float = 0.0) -> Test:
    """A row of a differences table (``diff, ci_low, ci_high`` and ``n_seeds`` or ``n_layers``) tested by
    ``rule`` (``superiority`` or ``non-inferiority``)."""
    df = (r["n_seeds"] if "n_seeds" in r else r["n_layers"]) - 1
    if rule == "superiority":
        return rules.superiority(r["diff"], r["ci_low"], r["ci_high"], df, direction)
    return rules.non_inferiority(r["diff"], r["ci_low"], r["ci_high"], df, margin, direction)


#: The accuracy claims: (baseline, metric, claim, paper's number, kind).  Kinds: ``every`` (superiority in
#: every dataset), ``every_ni`` (non-inferiority in every dataset: "beats or ties"), ``majority`` (RAPTOR ahead
#: in most datasets), ``majority_ni`` (RAPTOR at most the margin behind in most datasets: "matches or exceeds").
ACCURACY_CLAIMS = (
    ("GCS", "mean", "RAPTOR beats GCS on mean-over-layers accuracy in every setting", "42/42 settings", "every"),
    ("GCS", "best", "RAPTOR beats or ties GCS on best-layer accuracy", "41/42 settings (one tie)", "every_ni"),
    ("xRFM", "best", "RAPTOR matches or exceeds xRFM on best-layer accuracy", "26/42 settings", "majority_ni"),
    ("xRFM", "mean", "RAPTOR beats xRFM on mean-over-layers accuracy", "27/42 settings", "majority"),
)


def _grid_claim(diffs, baseline, metric, kind, names, grid) -> tuple:
    d = diffs[diffs.dataset.isin(names) & (diffs.baseline == baseline) & (diffs.metric == metric)]
    a = diffs[(diffs.dataset == average_label(grid)) & (diffs.baseline == baseline) & (diffs.metric == metric)]
    if not len(d):
        return None, "n/a"
    margin = MARGINS["accuracy"]
    per = [dict(r._asdict()) for r in d.itertuples()]
    avg = f"; average {_pts(a.iloc[0])}" if len(a) else ""
    if kind in ("every", "every_ni"):
        rule = "superiority" if kind == "every" else "non-inferiority"
        tests = [_t_test(r, rule, margin=margin) for r in per]
        held = sum(t.verdict == rules.HOLDS for t in tests)
        what = "above 0" if kind == "every" else f"above -{100 * margin:g} pt"
        ours = (f"interval {what} on {held}/{len(per)} datasets (" + ", ".join(f"{r['dataset']} {_pts(r)}" for r in per)
                + ")" + avg)
        return rules.every_setting(tests), ours
    # a dataset counts for the claim only when its own interval lies on the claim's side of the threshold, and
    # against it only when its interval lies on the other side: point estimates inside the noise count for neither
    rule = "superiority" if kind == "majority" else "non-inferiority"
    tests = [_t_test(r, rule, margin=margin) for r in per]
    wins = sum(t.verdict == rules.HOLDS for t in tests)
    losses = sum(t.verdict == rules.FAILS for t in tests)
    what = "ahead" if kind == "majority" else f"at most {100 * margin:g} pt behind"
    bound = "above 0" if kind == "majority" else f"above -{100 * margin:g} pt"
    ours = (f"RAPTOR {what} on {wins}/{len(per)} datasets (interval {bound}), the other way on {losses}, undecided on "
            f"{len(per) - wins - losses} (sign test; " + ", ".join(f"{r['dataset']} {_pts(r)}" for r in per) + ")"
            + avg)
    return rules.majority(wins, len(per), opposite=losses), ours


def _grid_family(grid: str) -> str:
    """The test family of an accuracy row: the paper's grid is the primary family, the others robustness."""
    return "paper" if grid == PAPER_GRID else "robustness"


#: The grid-average best-layer claim (the paper's Table 1 averages).
GRID_AVERAGE_CLAIM = "grid-average best-layer accuracy: RAPTOR above GCS and not below xRFM"


def _grid_average_claim(diffs, acc, grid, reference: str = "RAPTOR", what: str = "", family=None) -> list:
    """The grid average of best-layer accuracy: ``reference`` above GCS (superiority) and not below xRFM
    (non-inferiority, margin ``MARGINS["accuracy"]``), both parts of one every-setting test.

    Parameters
    ----------
    diffs : DataFrame
        :func:`paired_differences` with ``reference`` as the reference method.
    acc : DataFrame
        :func:`accuracy_intervals` (the levels shown).
    grid : str
        A key of :data:`GRIDS`.
    reference : str, default="RAPTOR"
        The method compared (:data:`EQUAL_DATA_METHOD` for the equal-data twin).
    what : str, optional
        Appended to the claim in parentheses (the protocol of a twin row).
    family : str, optional
        The test family; default :func:`_grid_family` of ``grid``.

    Returns
    -------
    list of dict
        One claim row, or none when the run lacks a method or the grid's average.
    """
    avg = acc[acc.dataset == average_label(grid)].set_index("method")
    g = diffs[(diffs.dataset == average_label(grid)) & (diffs.baseline == "GCS") & (diffs.metric == "best")]
    x = diffs[(diffs.dataset == average_label(grid)) & (diffs.baseline == "xRFM") & (diffs.metric == "best")]
    if not ({reference, "GCS", "xRFM"} <= set(avg.index) and len(g) and len(x)):
        return []
    g, x = dict(g.iloc[0]), dict(x.iloc[0])
    levels = ", ".join(f"{m} {format_estimate(avg.loc[m, 'best'], avg.loc[m, 'best_low'], avg.loc[m, 'best_high'])}"
                       for m in (reference, "GCS", "xRFM"))
    both = rules.every_setting([_t_test(g, "superiority"), _t_test(x, "non-inferiority", margin=MARGINS["accuracy"])])
    # the rule names both parts: superiority over GCS, non-inferiority against xRFM
    test = dataclasses.replace(both, rule=f"every setting (superiority vs GCS, non-inferiority (margin "
                                            f"{MARGINS['accuracy']:g}) vs xRFM)")
    return [dict(area="accuracy", claim=GRID_AVERAGE_CLAIM + (f" ({what})" if what else ""), datasets=grid,
                 paper="0.874 / 0.854 / 0.871 (RAPTOR / GCS / xRFM)" + (" (unequal data)" if what else ""),
                 ours=f"{levels}; {reference} - GCS {_pts(g)}, {reference} - xRFM {_pts(x)}", test=test,
                 family=family or _grid_family(grid), mde_unit="pts")]


def _accuracy_claims(diffs, acc) -> list:
    claims = []
    for baseline, metric, claim, paper, kind in ACCURACY_CLAIMS:
        for grid, names in GRIDS.items():
            test, ours = _grid_claim(diffs, baseline, metric, kind, names, grid)
            if test is None:
                continue
            claims.append(dict(area="accuracy", claim=claim, datasets=grid, paper=paper, ours=ours, test=test,
                               family=_grid_family(grid), mde_unit="pts"))
    for grid in GRIDS:
        claims += _grid_average_claim(diffs, acc, grid)
    separate = [(name, f"{name.capitalize()} (reported separately, not in the paper's averages)")
                for name in dataset_names(paper_grid=False)]
    grouped = [("cities_grouped", "Cities on a city-grouped split (ours; the paper's split puts each city's true "
                                  "and false statement on both sides)"),
               ("counterfact_grouped", "Counterfact on a subject-grouped split (ours; the paper's split puts each "
                                       "subject's true and false statement on both sides)")]
    for name, label in (*separate, *grouped):
        rows = acc[acc.dataset == name].set_index("method")
        if len(rows):
            ours = "best-layer accuracy: " + ", ".join(
                f"{m} {format_estimate(rows.loc[m, 'best'], rows.loc[m, 'best_low'], rows.loc[m, 'best_high'])}"
                for m in rows.index)
            claims.append(dict(area="accuracy", claim=label, datasets="--", paper="--", ours=ours, test=None))
    return claims


#: The fixed-C ablation of the accuracy protocol (registry name): RAPTOR's pipeline at GCS's C = 1.
FIXED_C_METHOD = "RAPTOR (C = 1)"


def _equal_data_claims(by_seed) -> list:
    """Accuracy at equal data (every method fits its direction on the same training rows; validation rows only
    select): RAPTOR's train-only solution at C* (:data:`EQUAL_DATA_METHOD`) against GCS and xRFM, on the paper's
    grid (robustness family); and the fixed-C ablation (extension): RAPTOR against its own pipeline at C = 1 on the
    same train + validation rows, which isolates ridge tuning from data size and subset averaging."""
    claims = []
    methods = set(by_seed.method)
    if {EQUAL_DATA_METHOD, "GCS"} <= methods:
        diffs = paired_differences(by_seed[by_seed.method != "RAPTOR"], reference=EQUAL_DATA_METHOD)
        what = "equal data: every method fits on the training rows, validation only selects"
        test, ours = _grid_claim(diffs, "GCS", "mean", "every", GRIDS[PAPER_GRID], PAPER_GRID)
        if test is not None:
            claims.append(dict(area="accuracy", claim=f"RAPTOR beats GCS on mean-over-layers accuracy in every setting "
                               f"({what})", datasets=PAPER_GRID, paper="42/42 settings (unequal data)", ours=ours,
                               test=test, family="robustness", mde_unit="pts"))
        if "xRFM" in methods:
            for baseline, metric, claim, paper, kind in ACCURACY_CLAIMS:
                if baseline != "xRFM":
                    continue
                test, ours = _grid_claim(diffs, baseline, metric, kind, GRIDS[PAPER_GRID], PAPER_GRID)
                claims.append(dict(area="accuracy", claim=f"{claim} ({what})", datasets=PAPER_GRID,
                                   paper=f"{paper} (unequal data)", ours=ours, test=test, family="robustness",
                                   mde_unit="pts"))
            claims += _grid_average_claim(diffs, accuracy_intervals(by_seed), PAPER_GRID, EQUAL_DATA_METHOD,
                                          what, family="robustness")
    if {FIXED_C_METHOD, "RAPTOR"} <= methods:
        diffs = paired_differences(by_seed)
        rows = diffs[(diffs.baseline == FIXED_C_METHOD) & (diffs.metric == "mean")]
        avg = rows[rows.dataset == average_label(PAPER_GRID)]
        per = rows[rows.dataset.isin(GRIDS[PAPER_GRID])]
        if len(avg):
            a = dict(avg.iloc[0])
            gcs = diffs[(diffs.baseline == "GCS") & (diffs.metric == "mean") & (diffs.dataset == average_label())]
            tail = (f"; RAPTOR - GCS {_pts(dict(gcs.iloc[0]))}, so the fixed-C pipeline's own gain over GCS "
                    "(data size and no subset averaging) is the rest" if len(gcs) else "")
            claims.append(dict(area="accuracy", claim="ridge tuning: RAPTOR beats its own pipeline at a fixed C = 1 on "
                               "the same train + validation rows (grid-average mean-over-layers accuracy)",
                               datasets=PAPER_GRID, paper="--", family="extension", mde_unit="pts",
                               ours=f"RAPTOR - fixed C = 1 {_pts(a)} (" + ", ".join(
                                   f"{r['dataset']} {_pts(dict(r))}" for _, r in per.iterrows()) + ")" + tail,
                               test=_t_test(a, "superiority")))
    return claims


# ---------------------------------------------------------------------------------------------
# stability, cost, separability, steering, theory
# ---------------------------------------------------------------------------------------------
def stability_differences(stab: pd.DataFrame, reference: str = "RAPTOR") -> pd.DataFrame:
    """Per dataset: mean robustness over the measured layers per method, and ``reference`` minus each other
    method paired by layer, with an interval that carries both sources of noise: the spread of the paired
    differences across layers (t over layers) and each layer's own estimation noise over the K ablation runs (its
    bootstrap interval, read as a normal interval: se = half-width / 1.96), combined as

        var = s_layers^2 / L + (mean over layers of se_diff)^2,   se_diff^2 = se_reference^2 + se_other^2

    The second term treats the layers' noise as fully correlated (the same ablation runs serve every layer) and the
    two methods' as independent, both conservative; t quantile with L - 1 degrees of freedom.  Columns ``diff,
    ci_low, ci_high, n_layers, raptor_mean, baseline_mean`` and ``within_se`` (the second term's square root)."""
    rows = []
    wide = stab.pivot_table(index=["dataset", "layer"], columns="method", values="robust")
    if {"ci_low", "ci_high"} <= set(stab.columns):
        half = (stab["ci_high"] - stab["ci_low"]) / 2.0 / stats.norm.ppf(0.5 + rules.LEVEL / 2)
        se = stab.assign(se=half).pivot_table(index=["dataset", "layer"], columns="method", values="se")
    else:
        se = None
    for other in [m for m in wide.columns if m != reference and not str(m).startswith("RAPTOR")]:
        diff = (wide[reference] - wide[other]).rename("diff")
        within = (np.sqrt(se[reference] ** 2 + se[other] ** 2).rename("within") if se is not None
                  else pd.Series(0.0, index=diff.index, name="within"))
        both = pd.concat([diff, within], axis=1).reset_index().dropna(subset=["diff"])
        for name, d in both.groupby("dataset"):
            mean, L = float(d["diff"].mean()), len(d)
            within_se = float(d["within"].fillna(0.0).mean())
            if L >= 2:
                total = np.sqrt(d["diff"].var(ddof=1) / L + within_se ** 2)
                half_width = stats.t.ppf(0.5 + rules.LEVEL / 2, L - 1) * total
                low, high = mean - half_width, mean + half_width
            else:
                low = high = np.nan
            rows.append(dict(dataset=name, baseline=other, diff=mean, ci_low=low, ci_high=high, n_layers=L,
                             within_se=within_se, raptor_mean=float(wide.loc[name, reference].mean()),
                             baseline_mean=float(wide.loc[name, other].mean())))
    return pd.DataFrame(rows)


#: The paper's Table (tab:robust_subset): mean over layers of |cos| per setting, (RAPTOR, xRFM, GCS).
PAPER_STABILITY_MEANS = {"STSA L3.1-8B": (0.87, 0.80, 0.97), "STSA Q2.5-7B": (0.92, 0.78, 0.93),
                         "STSA L3.1-70B": (0.88, 0.83, 0.98), "HateXplain Q2.5-7B": (0.97, 0.73, 0.98),
                         "Sarcasm L3.1-8B": (0.92, 0.82, 0.98), "Sarcasm Q2.5-7B": (0.98, 0.81, 0.99)}


def paper_stability_gap(baseline: str) -> float:
    """The paper's RAPTOR - ``baseline`` gap in mean |cos|: the median over its six settings
    (:data:`PAPER_STABILITY_MEANS`)."""
    column = {"xRFM": 1, "GCS": 2}[baseline]
    return float(np.median([v[0] - v[column] for v in PAPER_STABILITY_MEANS.values()]))


#: The stability comparisons' protocols, as the claims name them: the paper's (RAPTOR refit on train + validation)
#: and equal data (RAPTOR on the training rows, as the baselines).
STABILITY_PROTOCOLS = ("the paper's protocol", "equal data: RAPTOR without the train + validation refit")
#: The stability claims: (baseline, claim, paper's number, rule, direction).
STABILITY_CLAIMS = (
    ("xRFM", "RAPTOR's concept vectors are more stable than xRFM's under 20 % ablations",
     "mean |cos| 0.87-0.98 vs 0.73-0.83 (6 settings)", "superiority", 1),
    ("GCS", "RAPTOR's stability is competitive with GCS's", "mean |cos| 0.87-0.98 vs 0.93-0.99",
     "non-inferiority", 1),
    ("GCS", "GCS's concept vectors are slightly more stable than RAPTOR's", "0.93-0.99 vs 0.87-0.98",
     "superiority", -1),
)


def _stability_claims(sd, protocol: str, family: str = "paper") -> list:
    claims = []
    for baseline, claim, paper, rule, direction in STABILITY_CLAIMS:
        d = sd[sd.baseline == baseline]
        if not len(d):
            continue
        per = [dict(r._asdict()) for r in d.itertuples()]
        tests = [_t_test(r, rule, direction, MARGINS["stability"]) for r in per]
        # the effect the paper reports, in the claim's direction (both rules' mde is the true gap they need)
        test = dataclasses.replace(rules.every_setting(tests), paper_effect=direction * paper_stability_gap(baseline))
        ours = "; ".join(f"{r['dataset']} {r['raptor_mean']:.3f} vs {r['baseline_mean']:.3f} (RAPTOR - {baseline} "
                         f"{format_estimate(r['diff'], r['ci_low'], r['ci_high'], signed=True)})" for r in per)
        claims.append(dict(area="stability", claim=f"{claim} ({protocol})", datasets=", ".join(d.dataset),
                           paper=paper, ours=ours, test=test, family=family, mde_unit="mean |cos|"))
    return claims


def _cost_claim(layers) -> list:
    """RAPTOR faster than each baseline on every dataset: per dataset and baseline, the log time ratio paired by
    layer (superiority, t over layers), combined over datasets and baselines (intersection-union)."""
    if "RAPTOR" not in set(layers.method):
        return []
    wide = layers.pivot_table(index=["dataset", "layer"], columns="method", values="fit_time_s")
    others = [m for m in ("GCS", "xRFM") if m in wide]
    tests, med = [], layers.groupby(["dataset", "method"])["fit_time_s"].median().unstack("method")
    for name, w in wide.groupby(level="dataset"):
        for m in others:
            v = np.log(w[m] / w["RAPTOR"]).dropna()
            if len(v) < 2:
                continue
            tests.append(rules.superiority(*mean_interval(v), len(v) - 1))
    if not tests:
        return []
    ratios = {m: (med[m] / med["RAPTOR"]) for m in others}
    ours = (f"median s/layer RAPTOR {med['RAPTOR'].median():.2f}, " + ", ".join(
        f"{m} {med[m].median():.2f} ({ratios[m].min():.1f}-{ratios[m].max():.1f}x slower)" for m in others)
        + f"; faster at every layer's pairing in {sum(t.verdict == rules.HOLDS for t in tests)}/{len(tests)} "
          "(dataset, baseline) pairs (one core per fit)")
    return [dict(area="cost", claim="RAPTOR trains faster than xRFM and GCS (per-layer time)",
                 datasets=str(len(med)), paper="consistently faster across the grid", ours=ours,
                 test=rules.every_setting(tests), mde_unit="log time ratio")]


def _separability_cells(rows: pd.DataFrame) -> tuple:
    """Each dataset's separability counts, and whether they can decide the claim.

    A dataset is counted on its largest row set with ``n >= 2 (p + 1)`` (Cover's capacity of a hyperplane with a
    bias: below it random labels separate with probability above one half) where its own shuffled labels separate at
    fewer than half of the layers; elsewhere real-label separability cannot fail, so the dataset is shown, not
    counted.  Undecided LP layers count on neither side.

    Returns
    -------
    counted : list of (str, int, int)
        ``(dataset, separable layers, decided layers)`` of the counted datasets.
    counted_text, shown_text : list of str
        One entry per counted and per shown dataset.
    """
    counted, counted_text, shown_text = [], [], []
    for dataset, d in rows.groupby("dataset", sort=True):
        cells = []
        for rows_name, g in d.groupby("rows", sort=False):
            real, shuf = g[g.labels == "real"], g[g.labels == "shuffled"]
            if not (len(real) and len(shuf)):
                continue
            decided_real = real.layers - (real.undecided.fillna(0) if "undecided" in g else 0)
            decided_shuf = shuf.layers - (shuf.undecided.fillna(0) if "undecided" in g else 0)
            cells.append(dict(rows=rows_name, n=int(g.n.max()), p=int(g.p.max()), k_real=int(real.separable.sum()),
                              n_real=int(decided_real.sum()), k_shuf=int(shuf.separable.sum()),
                              n_shuf=int(decided_shuf.sum())))
        if not cells:
            continue
        eligible = [c for c in cells if c["n"] >= 2 * (c["p"] + 1) and c["k_shuf"] < 0.5 * c["n_shuf"]]
        if eligible:
            c = max(eligible, key=lambda c: c["n"])
            counted.append((dataset, c["k_real"], c["n_real"]))
            counted_text.append(f"{dataset} {c['k_real']}/{c['n_real']} (shuffled {c['k_shuf']}/{c['n_shuf']}; "
                                f"{c['rows']} rows, n = {c['n']})")
            continue
        c = max(cells, key=lambda c: c["n"])
        why = (f"n = {c['n']} < 2 (p + 1) = {2 * (c['p'] + 1)}" if c["n"] < 2 * (c["p"] + 1)
               else f"shuffled labels separate at n = {c['n']}")
        shown_text.append(f"{dataset} real {c['k_real']}/{c['n_real']}, shuffled {c['k_shuf']}/{c['n_shuf']} "
                          f"({c['rows']} rows, {why})")
    return counted, counted_text, shown_text


def _separability_claim(sep_summary, control, large=None) -> list:
    """Separability is evidence only where random labels of the same size do not separate.  The claim is decided
    per dataset (:func:`_separability_cells`): on row sets with ``n >= 2 (p + 1)`` where that dataset's shuffled
    labels fail; the counted layers are pooled into one sign test (majority of layers), and each dataset's count is
    shown.  ``large`` (the learning-curve section's ``separability_large_summary``: n = 2.5 (p + 1) non-test rows)
    is where the claim can be decided for the default model; ``control`` holds the paper's row sets (train, all)."""
    overall = None if sep_summary is None else sep_summary[sep_summary.dataset == "Overall"]
    has_large = large is not None and len(large)
    if (overall is None or not len(overall)) and not has_large:
        return []
    ours = ""
    per = sep_summary[sep_summary.dataset != "Overall"] if sep_summary is not None else None
    if overall is not None and len(overall):
        r = overall.iloc[0]
        share, lo, hi = wilson_interval(int(r.separable), int(r.layers))
        n_over_p = (f" at n/p = {per.n_over_p.min():.2f}-{per.n_over_p.max():.2f}" if "n_over_p" in per
                    and per.n_over_p.notna().any() else "")
        ours = (f"real labels (LinearSVC ladder): {int(r.separable)}/{int(r.layers)} layers = {100 * share:.1f} % "
                f"[{100 * lo:.1f}, {100 * hi:.1f}]{n_over_p}; ")
    names = set(per.dataset) if per is not None else set()
    if has_large:
        names |= set(large.dataset)
    claim = dict(area="separability", claim="hidden states are (nearly) linearly separable at most layers",
                 datasets=str(len(names)), paper="90.5 % of layers (22/28 to 28/28 per dataset)")
    tables = [t for t in (control, large) if t is not None and len(t)]
    if not tables:
        return [dict(claim, ours=ours + "no shuffled-label control in this run: not tested", test=None)]
    counted, counted_text, shown_text = _separability_cells(pd.concat(tables, ignore_index=True))
    ours += "exact LP test, per dataset: "
    if counted_text:
        k, n = sum(c[1] for c in counted), sum(c[2] for c in counted)
        ours += (f"counted (n >= 2 (p + 1), shuffled labels fail): {k}/{n} layers; " + ", ".join(counted_text))
    if shown_text:
        ours += ("; " if counted_text else "") + ("not counted (the test cannot fail there): "
                                                  + ", ".join(shown_text))
    if not counted:
        return [dict(claim, ours=ours + ". No dataset has a row set where shuffled labels fail, so the claim "
                     "cannot fail here (not tested)", test=None)]
    return [dict(claim, ours=ours, test=rules.majority(k, n))]


def _steering_claims(summary, pairs) -> list:
    if summary is None or not len(summary):
        return []
    s = summary[summary["n_pairs"].fillna(0) > 0]
    succ = []
    for r in s.itertuples():
        d = pairs[(pairs.dataset == r.dataset) & (pairs.direction == r.direction)] if pairs is not None else None
        n = len(d) if d is not None else int(r.n_pairs)
        k = int(d["success"].sum()) if d is not None else int(round(r.success_rate * n))
        succ.append((r.dataset, r.direction, k, n))
    ours = ("not tested here: alpha = (g* - g) / s is solved so that the probe reads the target at the layer it "
            "edits, so success is 1 by construction (" + "; ".join(f"{ds} {dr} {k}/{n}" for ds, dr, k, n in succ)
            + ")")
    missing = summary[summary["n_pairs"].fillna(0) == 0]
    if len(missing):
        ours += "; no layer reaches tau: " + ", ".join(f"{r.dataset} {r.direction}" for r in missing.itertuples())
    claims = [dict(area="steering", claim="adaptive GCAV steering reaches the probe target (success rate)",
                   datasets=str(summary.dataset.nunique()), paper="1.000 in all 8 settings", ours=ours, test=None)]
    rel = ""
    if "alpha_median_rel" in s and s.alpha_median_rel.notna().any():
        rel = (f" (median |alpha| / median state norm {s.alpha_median_rel.min():.2f}-{s.alpha_median_rel.max():.2f}, "
               f"p90 {s.alpha_p90_rel.min():.2f}-{s.alpha_p90_rel.max():.2f})")
    claims.append(dict(area="steering", claim="intervention rate and |alpha| (median / p90 / max)",
                       datasets=str(summary.dataset.nunique()),
                       paper="intervention 0.54-0.83; median |alpha| 3.6-12.4, p90 21-67, max up to 249",
                       ours=f"intervention {s.intervention_rate.min():.2f}-{s.intervention_rate.max():.2f}; "
                            f"median |alpha| {s.alpha_median.min():.1f}-{s.alpha_median.max():.1f}, p90 "
                            f"{s.alpha_p90.min():.0f}-{s.alpha_p90.max():.0f}, max up to {s.alpha_max.max():.0f}" + rel,
                       test=None))
    return claims


def rank_test_mde(null, shift_se: float) -> float:
    """The minimal detectable shift of the directions-as-unit test, read from the null draws themselves: the rank
    test rejects (p = (1 + #{null >= concept}) / (1 + N) < ALPHA) exactly when the concept direction's shift is above
    the (k + 1)-th largest null shift, k the most draws at or above it that still give p < ALPHA (N = 100: k = 1, the
    second largest draw, since 2/101 < 0.025 <= 3/101); the shift that clears this critical value with probability
    POWER is it plus z_POWER times the concept shift's own per-prompt standard error.

    Parameters
    ----------
    null : array-like of float, shape (N,)
        The null directions' shifts (``steering_text_null.csv``'s ``shift`` of the row), signed towards the target.
    shift_se : float
        Standard error of the concept direction's shift over prompts (``answer_logodds_shift_se``).

    Returns
    -------
    float
        The shift in nats (NaN when a draw or the standard error is missing, or when N draws cannot give
        p < ALPHA).

    Examples
    --------
    >>> round(rank_test_mde(np.arange(100.0), 0.0), 3)  # above 98, the second largest of 0..99
    98.0
    >>> bool(np.isnan(rank_test_mde(np.arange(38.0), 0.1)))  # 38 draws: p >= 1/39 > 0.025
    True
    """
    null = np.sort(np.ravel(np.asarray(null, dtype=float)))[::-1]
    if not null.size or not np.all(np.isfinite(null)) or not np.isfinite(shift_se):
        return float("nan")
    allowed = np.flatnonzero((1.0 + np.arange(null.size)) / (1.0 + null.size) < rules.ALPHA)
    if not allowed.size:
        return float("nan")
    return float(null[allowed[-1]] + stats.norm.ppf(rules.POWER) * shift_se)


def normal_rank_mde(null_mean: float, null_sd: float, shift_se: float) -> float:
    """:func:`rank_test_mde` where the per-draw null shifts are not saved: the null's one-sided ``1 - ALPHA``
    quantile by a normal approximation (mean + z_(1-ALPHA) sd) plus z_POWER times the concept shift's standard error.

    Parameters
    ----------
    null_mean, null_sd : float
        Mean and standard deviation of the random directions' shifts (the summary's ``null_mean``, ``null_sd``).
    shift_se : float
        Standard error of the concept direction's shift over prompts (``answer_logodds_shift_se``).

    Returns
    -------
    float
        The shift in nats (NaN when an input is missing).

    Examples
    --------
    >>> round(normal_rank_mde(0.0, 1.0, 0.0), 3)  # the normal 97.5 % quantile
    1.96
    """
    values = np.array([null_mean, null_sd, shift_se], dtype=float)
    if not np.all(np.isfinite(values)):
        return float("nan")
    return float(null_mean + stats.norm.ppf(1.0 - rules.ALPHA) * null_sd + stats.norm.ppf(rules.POWER) * shift_se)


#: The two nulls of the steering rank test: (``null_kind`` of the per-draw table, prefix of the summary's columns,
#: name in the claims' text).  A table written before the covariance-matched null has only the isotropic one.
STEERING_NULLS = (("isotropic", "", "isotropic"), ("matched", "matched_", "covariance-matched"))


def _null_draws(null, r, kind: str) -> np.ndarray:
    """The report-half null shifts of summary row ``r`` of one ``kind`` (empty without a per-draw table; draws of a
    table without ``null_kind`` are isotropic)."""
    if null is None or not len(null):
        return np.zeros(0)
    kinds = null["null_kind"].fillna("isotropic") if "null_kind" in null else pd.Series("isotropic", index=null.index)
    rows = ((null["dataset"] == r.dataset) & (null["method"] == r.method) & (null["setting"] == r.setting)
            & (null["direction"] == r.direction) & (null["half"] == "report") & (kinds == kind))
    return null.loc[rows, "shift"].to_numpy(dtype=float)


def _rank_tests(r, null) -> list:
    """The rank tests of one tested point (summary row ``r``): ``(name, Test, rank text, mde source)`` per null of
    :data:`STEERING_NULLS` the row carries (finite ``<prefix>null_p``); the MDE from the saved draws
    (:func:`rank_test_mde`), else from the normal approximation (:func:`normal_rank_mde`, said in the text)."""
    out = []
    for kind, prefix, name in STEERING_NULLS:
        p = getattr(r, f"{prefix}null_p", np.nan)
        if not pd.notna(p):
            continue
        n = float(getattr(r, "n_random" if not prefix else "n_random_matched"))
        draws, shift_se = _null_draws(null, r, kind), getattr(r, "answer_logodds_shift_se", np.nan)
        if draws.size:
            mde, source = rank_test_mde(draws, shift_se), ""
        else:
            mde = normal_rank_mde(getattr(r, f"{prefix}null_mean", np.nan), getattr(r, f"{prefix}null_sd", np.nan),
                                  shift_se)
            source = "normal approximation: no per-draw null table"
        test = Test("permutation rank", float(p), float(getattr(r, f"{prefix}null_p_opposite")),
                    min_p=1.0 / (1.0 + n), mde=mde)  # N draws cannot give p below 1/(N + 1)
        out.append((name, test, f"rank {int(getattr(r, f'{prefix}null_rank'))} of {int(n) + 1}, p = {float(p):.3g}",
                    source))
    return out


def _vader_text(r) -> str:
    """The text-level check of a tested point (sentiment datasets): the VADER change of its continuations (± SE
    over prompts) against the random directions' (± SE over the draws where several were continued; one draw in a
    table written before them), and which way it went (its 95 % t-interval over prompts)."""
    vader = getattr(r, "vader_shift", np.nan)
    if not pd.notna(vader):
        return ""
    text = f"; text: VADER {vader:+.2f} ± {r.vader_se:.2f} vs random {r.vader_random_shift:+.2f}"
    draws = getattr(r, "n_vader_random", np.nan)
    if pd.notna(draws) and int(draws) >= 2:
        text += f" ± {r.vader_random_se:.2f} over {int(draws)} random directions"
    else:
        text += " (one random direction: no spread)"
    n = getattr(r, "n_generated", np.nan)
    half = (stats.t.ppf(1.0 - rules.ALPHA, int(n) - 1) if pd.notna(n) and n > 1 else stats.norm.ppf(1 - rules.ALPHA)) \
        * r.vader_se
    interval = f"95 % interval [{vader - half:+.2f}, {vader + half:+.2f}]"
    if vader + half < 0:
        return text + f", the text moves against the target ({interval})"
    if vader - half > 0:
        return text + f", the text moves towards the target ({interval})"
    return text + f", the text moves {'against' if vader < 0 else 'towards'} the target in the estimate only " \
                  f"({interval} includes 0)"


def steering_text_claim(summary, null=None) -> list:
    """The steering row's verdict from the answer read-out (docs/steering.md), with random directions as the unit of
    inference: RAPTOR's selected operating point (report half) per measurable dataset and direction is ranked among
    the null directions' shifts (``null_p`` = (1 + #{random >= concept}) / (1 + N), drawn afresh for the report
    half), a ``Test("permutation rank", null_p, null_p_opposite)`` each, and, where the table has it, among the
    covariance-matched null's (``matched_null_p``: directions from the layer's own state distribution, same norm) as
    a second test; every one must hold (intersection-union, :func:`verdicts.every_setting`). The MDE is read from the
    saved null draws (``null``, :func:`rank_test_mde`), else from a normal approximation that the text names. The
    "ours" cell shows the raw shift, the ranks, the per-prompt interval of concept minus the random mean (secondary)
    and, where measured, the text-level check (VADER of open-ended continuations against the random directions,
    :func:`_vader_text`). A summary without the rank columns (a table written before the test existed) is shown
    without a verdict; datasets whose read-out does not track the concept are named, not tested. A measurable dataset
    and direction where no RAPTOR setting passes the gates is named and enters the intersection with p = 1 (the
    claim is not shown there).

    Parameters
    ----------
    summary : pandas.DataFrame or None
        ``steering_text_summary.csv``.
    null : pandas.DataFrame, optional
        ``steering_text_null.csv``: the per-draw null shifts (:data:`empirical.llm.NULL_COLUMNS`).

    Returns
    -------
    list of dict
        One claim row.
    """
    claim = dict(area="steering", claim="steering with RAPTOR's concept vectors moves the model's answer beyond "
                 "random directions of the same strength (answer log-odds, held-out half)", paper="--",
                 family="extension")
    if summary is None or not len(summary):
        return [dict(claim, datasets="--", test=None,
                     ours="not tested here: this run has no behavioural steering measurement "
                          "(`python -m paper_figures --only steering_text`, docs/steering.md)")]
    raptor = summary[(summary["method"] == "RAPTOR") & (summary["setting"] != "not measurable")]
    not_measurable = summary.loc[summary["setting"] == "not measurable", "dataset"].tolist()
    claim["datasets"] = str(raptor["dataset"].nunique())
    tail = (f"; not measurable (answer does not track the concept): {', '.join(not_measurable)}"
            if not_measurable else "")
    if not len(raptor):
        return [dict(claim, ours="no RAPTOR setting passes the answer-mass and fluency gates on a measurable dataset"
                     + tail, test=None)]
    best = raptor.loc[raptor.groupby(["dataset", "direction"])["selection_shift"].idxmax()]
    ranked = "null_p" in best.columns and bool(best["null_p"].notna().all())
    # every measurable dataset is measured in both directions: a direction where no RAPTOR setting passes the gates
    # is a setting of the claim where RAPTOR's vectors did not steer, named and counted (p = 1: no evidence for it)
    measurable = summary.loc[summary["setting"] != "not measurable"]
    directions = sorted(measurable["direction"].dropna().unique())
    have = set(zip(best["dataset"], best["direction"]))
    unsteered = [(d, r) for d in sorted(measurable["dataset"].unique()) for r in directions if (d, r) not in have]
    claim["datasets"] = str(measurable["dataset"].nunique())
    tests, parts, sources = [], [], set()
    for r in best.itertuples():
        interval = format_estimate(r.concept_specific_shift, r.concept_specific_low, r.concept_specific_high,
                                   signed=True)
        part = f"{r.dataset} {r.direction} {r.setting}: shift {r.answer_logodds_shift:+.2f}"
        if ranked:
            nulls = _rank_tests(r, null)
            tests += [test for _, test, _, _ in nulls]
            sources |= {source for _, _, _, source in nulls if source}
            part += ", " + "; ".join(f"{text}" if kind == "isotropic" else f"{kind}: {text}"
                                     for kind, _, text, _ in nulls)
            if len(nulls) < len(STEERING_NULLS):
                part += "; covariance-matched null not measured in this table"
        part += f"; per prompt vs random mean {interval} (random {r.random_control_shift:+.2f})"
        parts.append(part + _vader_text(r) + f"; perplexity x{r.perplexity_ratio:.2f}")
    for name, direction in unsteered:
        parts.append(f"{name} {direction}: no RAPTOR setting passes the gates (answer mass, fluency, repetition), "
                     "counted as not shown")
        tests.append(Test("permutation rank", 1.0, float("nan")))
    if not ranked:
        return [dict(claim, ours="; ".join(parts) + tail + "; the directions-as-unit test (rank among >= 40 random "
                     "directions drawn afresh for the report half) has not run on this table: no verdict",
                     test=None)]
    if sources:
        tail += "; mde by " + ", ".join(sorted(sources))
    return [dict(claim, ours="; ".join(parts) + tail, test=rules.every_setting(tests), mde_unit="nats")]


def _gate_failures(r) -> list:
    """The gates of :func:`empirical.llm.passes_gates` that summary row ``r`` fails on the report
    half, each with its value and bound (``perplexity x1.66 > 1.5``)."""
    failed = []
    if r.answer_mass_steered < MASS_GATE * r.answer_mass_unsteered:
        failed.append(f"answer mass {r.answer_mass_steered:.3f} < {MASS_GATE:g} x {r.answer_mass_unsteered:.3f}")
    if pd.notna(r.perplexity_ratio) and r.perplexity_ratio > PERPLEXITY_GATE:
        failed.append(f"perplexity x{r.perplexity_ratio:.2f} > {PERPLEXITY_GATE:g}")
    steered, unsteered = getattr(r, "distinct2_steered", np.nan), getattr(r, "distinct2_unsteered", np.nan)
    if pd.notna(steered) and pd.notna(unsteered) and steered < DISTINCT2_GATE * unsteered:
        failed.append(f"distinct-2 {steered:.2f} < {DISTINCT2_GATE:g} x {unsteered:.2f}")
    return failed


def steering_comparison_claim(summary, methods=None) -> list:
    """The steering methods compared on the ranks the run computed: per measurable dataset and direction, each
    method's tested point (its operating point with the largest selection-half shift, as for RAPTOR in
    :func:`steering_text_claim`) with its rank among its own null draws, the covariance-matched one where measured,
    VADER where measured, and the gates on the report half (a failed gate is named with its value); a method without
    an operating point is named (no setting passed the gates on the selection half). RAPTOR is *behind* in a setting
    when a baseline within every gate has a smaller rank p than RAPTOR has within every gate (or RAPTOR has none
    there), *ahead* in the reverse case. The row compares ranks and carries no verdict (each method is ranked among
    different draws at its own strength; no test of the difference is defined); its text says whether the comparison
    runs against the paper's thesis that stable vectors give more reliable control.

    Parameters
    ----------
    summary : pandas.DataFrame or None
        ``steering_text_summary.csv``.
    methods : sequence of str, optional
        The methods the section measured (default :data:`paper_figures.steering_text.METHODS`); others found in the
        summary are added.

    Returns
    -------
    list of dict
        One claim row, or none without a measurable dataset with rank columns.
    """
    if summary is None or "null_p" not in summary:
        return []
    rows = summary[(summary["setting"] != "not measurable") & summary["null_p"].notna()]
    if not len(rows):
        return []
    methods = list(dict.fromkeys([*(STEERING_METHODS if methods is None else methods), *rows["method"]]))
    tested = rows.loc[rows.groupby(["dataset", "method", "direction"])["selection_shift"].idxmax()]
    measured = summary[summary["setting"] != "not measurable"]
    parts, behind, ahead, settings = [], [], [], []
    for dataset in sorted(measured["dataset"].unique()):
        for direction in sorted(measured["direction"].dropna().unique()):
            here = tested[(tested["dataset"] == dataset) & (tested["direction"] == direction)]
            outcome, cells = {}, []
            for r in here.itertuples():
                p = max(float(r.null_p), float(getattr(r, "matched_null_p", np.nan))) \
                    if pd.notna(getattr(r, "matched_null_p", np.nan)) else float(r.null_p)
                failed = _gate_failures(r)
                outcome[r.method] = np.inf if failed else p
                cell = f"{r.method} rank {int(r.null_rank)}/{int(r.n_random) + 1} (p {float(r.null_p):.3g}"
                if pd.notna(getattr(r, "matched_null_p", np.nan)):
                    cell += f"; matched {int(r.matched_null_rank)}/{int(r.n_random_matched) + 1}, " \
                            f"p {float(r.matched_null_p):.3g}"
                cell += ")"
                if pd.notna(getattr(r, "vader_shift", np.nan)):
                    cell += f", VADER {r.vader_shift:+.2f}"
                cells.append((failed != [], p, cell + (", fails " + " and ".join(failed) + " on the report half"
                                                         if failed else ", within every gate")))
            cells = [c for _, _, c in sorted(cells, key=lambda c: (c[0], c[1]))]
            cells += [f"{m} no setting within the gates" for m in methods if m not in outcome]
            parts.append(f"{dataset} {direction}: " + "; ".join(cells))
            raptor = outcome.get("RAPTOR", np.inf)
            baselines = [p for m, p in outcome.items() if m != "RAPTOR"]
            best = min(baselines, default=np.inf)
            settings.append(f"{dataset} {direction}")
            if best < raptor:
                behind.append(f"{dataset} {direction} ({', '.join(m for m, p in outcome.items() if p == best)})")
            elif raptor < best:
                ahead.append(f"{dataset} {direction}")
    n = len(settings)
    verdict = (f"RAPTOR is behind a baseline within the gates in {len(behind)} of {n} settings"
               + (f" ({'; '.join(behind)})" if behind else "") + f" and ahead in {len(ahead)}"
               + (f" ({'; '.join(ahead)})" if ahead else ""))
    if behind and not ahead:
        verdict += ": the measurement runs against the paper's thesis that stable vectors give more reliable control"
    elif ahead and not behind:
        verdict += ": in line with the paper's thesis that stable vectors give more reliable control"
    else:
        verdict += ": no consistent order of the methods"
    ours = ("ranks compared, not tested (each method ranked among its own null draws); " + " | ".join(parts)
            + "; " + verdict)
    return [dict(area="steering", claim="RAPTOR's concept vectors steer at least as reliably as the baselines' "
                 "(rank among random directions within the gates, held-out half)", paper="--", family="extension",
                 datasets=str(measured["dataset"].nunique()), ours=ours, test=None)]


def _coverage(inside: int, n: int) -> Test:
    """Agreement of a theory with simulation as coverage: the share of points inside their 95 % Monte Carlo
    interval is at least ``0.95 - MARGINS["coverage"]`` (one-sided binomial tests, :func:`verdicts.majority`)."""
    return rules.majority(inside, n, share=0.95 - MARGINS["coverage"])


def _inside(mean, theory, se, replicates, level: float = 0.95) -> pd.Series:
    """Per point, whether |mean - theory| / se lies inside the ``level`` t quantile with ``replicates - 1`` degrees
    of freedom (NaN where se is 0): a share ``level`` of points when the theory is right, up to finite-size bias."""
    z = (mean - theory).abs() / se.where(se > 0)
    return (z <= stats.t.ppf(0.5 + level / 2, replicates.clip(lower=2) - 1)).where(z.notna())


#: Relative half-width of a Monte Carlo interval that resolves agreement (replicates needed for it are reported).
RESOLUTION = 0.01


def joint_coverage(long: pd.DataFrame, point_columns) -> dict:
    """Dependence-aware coverage of a theory by simulation: the quantities simulated at one grid point share their
    replicates, so they are not independent checks.  A grid point agrees when every quantity lies inside its 95 %
    Monte Carlo interval with a Bonferroni correction over the point's quantities (a joint 95 % region, so at least
    95 % of points agree when the theory is right); the test is on the number of agreeing grid points.

    Parameters
    ----------
    long : DataFrame
        One row per (grid point, quantity): the columns ``point_columns``, ``quantity``, ``mean``, ``se``, ``theory``
        and ``replicates``.
    point_columns : sequence of str
        The columns that identify a grid point.

    Returns
    -------
    dict
        ``points`` and ``agree`` (grid points), ``per_quantity`` (quantity -> (inside, n), the marginal 95 % counts),
        ``test`` (:func:`_coverage` over the points), ``replicates`` (median per point), ``relative_half_width``
        (median over points and quantities of the 95 % half-width over |theory|) and ``replicates_needed`` (for a
        relative half-width of :data:`RESOLUTION`, at the median).
    """
    d = long.dropna(subset=["mean", "se", "theory"])
    per_point = d.groupby(list(point_columns))["quantity"].transform("size").clip(lower=1)
    joint = _inside(d["mean"], d["theory"], d["se"], d["replicates"], level=1.0 - 0.05 / per_point)
    agree = joint.groupby([d[c] for c in point_columns]).agg(lambda v: bool(v.dropna().all()) if v.notna().any()
                                                             else np.nan).dropna()
    marginal = _inside(d["mean"], d["theory"], d["se"], d["replicates"])
    per_quantity = {q: (int(m.sum()), int(m.notna().sum())) for q, m in marginal.groupby(d["quantity"], sort=False)}
    reps = float(d["replicates"].median())
    half = stats.t.ppf(0.975, d["replicates"].clip(lower=2) - 1) * d["se"]
    rel = float((half / d["theory"].abs().where(d["theory"].abs() > 0)).median())
    needed = int(np.ceil(reps * (rel / RESOLUTION) ** 2)) if np.isfinite(rel) else None
    return dict(points=int(agree.size), agree=int(agree.sum()), per_quantity=per_quantity,
                test=_coverage(int(agree.sum()), int(agree.size)), replicates=reps, relative_half_width=rel,
                replicates_needed=needed)


def _coverage_text(cov: dict) -> str:
    """The ``ours`` words of a :func:`joint_coverage` result."""
    share, lo, hi = wilson_interval(cov["agree"], cov["points"])
    marginal = ", ".join(f"{q} {k}/{n}" for q, (k, n) in cov["per_quantity"].items())
    need = (f"; the median 95 % Monte Carlo half-width is {100 * cov['relative_half_width']:.1f} % of the theory's "
            f"value at {cov['replicates']:g} replicates: about {cov['replicates_needed']} replicates would resolve "
            f"agreement to {100 * RESOLUTION:g} %" if cov["replicates_needed"] is not None else "")
    return (f"{cov['agree']}/{cov['points']} grid points agree on every quantity jointly (Bonferroni over the point's "
            f"quantities; {100 * share:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]); per quantity (95 %): {marginal}"
            + need)


def _largest_p_bias(conv) -> str:
    """The bias at the largest simulated p per quantity, with its z (bias / se), and where it exceeds the bias at
    the p before it (a rise that the slope over every p averages in, named here)."""
    if conv is None or not len(conv) or not {"p", "quantity", "bias", "se"} <= set(conv.columns):
        return ""
    parts = []
    for quantity, d in conv.sort_values("p").groupby("quantity", sort=False):
        if len(d) < 2:
            continue
        last, before = d.iloc[-1], d.iloc[-2]
        z = last.bias / last.se if last.se > 0 else np.nan
        rise = (f", above the bias at p = {int(before.p)} ({before.bias:+.4f})"
                if abs(last.bias) > abs(before.bias) else "")
        parts.append(f"{quantity} {last.bias:+.4f} ({z:+.1f} SE{rise})")
    return f"; bias at the largest p = {int(conv.p.max())}: " + ", ".join(parts) if parts else ""


#: The fewest simulated p whose bias must be resolved from the Monte Carlo noise
#: (:data:`paper_figures.theory.RESOLVED_SE` standard errors) for a quantity's convergence to be tested: below it
#: there is no bias to fall.
RESOLVED_PS_TO_TEST = 3


def _bias_slope(d) -> tuple:
    """The log-log slope of |mean - theory| against p over every simulated p, and its t-interval.

    Weighted least squares of log|bias| on log p (:func:`paper_figures.theory.weighted_slope`), weights from the
    delta method (standard deviation of log|bias| = se / |bias|).  The scatter of the points beyond their Monte Carlo
    noise (chi^2 / (n - 2) above 1: a curve that is not a power law, a rise at the largest p) widens the standard
    error, and the interval takes the t quantile with n - 2 degrees of freedom.  Points whose bias is within the
    noise enter too: their |bias| is the noise's, which flattens the slope (conservative for a falling bias).

    Parameters
    ----------
    d : pandas.DataFrame
        One quantity's rows of ``finite_size_convergence``: ``p``, ``bias`` and ``se``.

    Returns
    -------
    (slope, low, high, df, widening, points) : (float, float, float, int, float, int)
        The slope, its 95 % interval, its degrees of freedom, the factor sqrt(max(1, chi^2 / df)) that widened the
        standard error and the points used; NaN and 0 with fewer than 3 usable points (|bias| > 0, se > 0).
    """
    d = d[(d["bias"].abs() > 0) & (d["se"] > 0)]
    if len(d) < 3:
        return np.nan, np.nan, np.nan, 0, np.nan, len(d)
    x, y = np.log(d["p"].to_numpy(float)), np.log(d["bias"].abs().to_numpy(float))
    sd = (d["se"] / d["bias"].abs()).to_numpy(float)
    slope, known_se = weighted_slope(x, y, sd)
    w = 1.0 / sd ** 2
    intercept = np.sum(w * (y - slope * x)) / np.sum(w)
    df = len(d) - 2
    widening = float(np.sqrt(max(1.0, np.sum(w * (y - intercept - slope * x) ** 2) / df)))
    half = stats.t.ppf(0.975, df) * known_se * widening
    return slope, slope - half, slope + half, df, widening, len(d)


def _finite_size_claim(fs, conv=None) -> list:
    """Convergence as p grows: |mean - theory| (the bias) must fall with p (log-log slope < 0, superiority, every
    tested quantity) for each quantity whose bias is resolved from the Monte Carlo noise at
    :data:`RESOLVED_PS_TO_TEST` or more dimensions; the slope is fitted over every simulated p
    (``finite_size_convergence``, :func:`_bias_slope`: t with n - 2 degrees of freedom), or, for a run without that
    table, it is ``finite_size_slopes``' slope over the resolved p with t at resolved_ps - 2 degrees of freedom.  The
    spread across replicates shrinking as p^(-1/2) is ordinary CLT behaviour and is shown, not tested."""
    r0 = fs.iloc[0]
    spread = ", ".join(f"{r.quantity} {r.std_slope:+.2f}" for r in fs.itertuples())
    every_p = conv is not None and {"p", "quantity", "bias", "se"} <= set(conv.columns)
    tests, parts, tested = [], [], []
    for r in fs.itertuples():
        n_res = int(getattr(r, "resolved_ps", 0) or 0)
        if n_res < RESOLVED_PS_TO_TEST:
            parts.append(f"{r.quantity} bias not resolved at >= {RESOLVED_PS_TO_TEST} p (|mean - theory| within "
                         f"{RESOLVED_SE:g} standard errors): not tested")
            continue
        if every_p:
            slope, low, high, df, widening, points = _bias_slope(conv[conv.quantity == r.quantity])
            d = conv[conv.quantity == r.quantity]
            over = (f"over all {points} p ({int(d.p.min())}-{int(d.p.max())}; t with {df} df, the standard error "
                    f"widened x{widening:.2f} for the scatter beyond the Monte Carlo noise); resolved at {n_res} of "
                    f"them")
        else:
            df = n_res - 2
            half = stats.t.ppf(0.975, df) * r.abs_error_slope_se if df >= 1 else np.nan
            slope, low, high = r.abs_error_slope, r.abs_error_slope - half, r.abs_error_slope + half
            over = (f"over the {n_res} resolved p up to {int(r.resolved_p_max)} (t with {df} df; this run has no "
                    f"finite_size_convergence table for a fit over every p)")
        if not np.isfinite(slope):
            parts.append(f"{r.quantity} slope not estimable (fewer than 3 usable p)")
            continue
        tests.append(rules.superiority(slope, low, high, df, direction=-1))
        tested.append(r.quantity)
        parts.append(f"{r.quantity} {format_estimate(slope, low, high, signed=True, digits=2)} {over}")
    scope = (f"tested on {len(tested)} of {len(fs)} quantities ({', '.join(tested)}: the bias resolved at >= "
             f"{RESOLVED_PS_TO_TEST} p)" if tested else "no quantity tested")
    ours = (f"log-log slope of |mean - theory| against p, {scope}: " + "; ".join(parts) + f" (delta {r0.delta:g}, "
            f"lambda {r0.lam:g}, kappa {r0.kappa:g}); spread across replicates {spread} (CLT, not a test)"
            + _largest_p_bias(conv))
    return [dict(area="theory", claim="simulation converges to the theory as p grows (bias falls with p)",
                 datasets="--", paper="fluctuations O(p^-1/2) (proportional limit)", ours=ours,
                 test=rules.every_setting(tests) if tests else Test("superiority", np.nan, np.nan),
                 mde_unit="log-log slope")]


def _two_replica_claim(svm) -> list:
    """Two-replica stability theory against simulated ablations: the protocols at one lambda share their
    simulation, so agreement is counted per lambda, jointly over the protocols (:func:`joint_coverage`)."""
    protocols = [c[len("mc_"):] for c in svm.columns if c.startswith("mc_")]
    missing = [p for p in protocols if f"se_{p}" not in svm or f"cos_{p}" not in svm]
    if not protocols or missing:
        raise ValueError(f"table stability_vs_lambda: expected columns mc_<protocol>, se_<protocol> and "
                         f"cos_<protocol>; found {list(svm.columns)}")
    point = [c for c in ("delta", "kappa", "lam") if c in svm]
    long = pd.concat([svm[point + ["replicates"]].assign(quantity=proto, mean=svm[f"mc_{proto}"],
                                                           se=svm[f"se_{proto}"], theory=svm[f"cos_{proto}"])
                      for proto in protocols], ignore_index=True)
    cov = joint_coverage(long, point)
    return [dict(area="theory", claim="the two-replica stability theory matches simulated ablations",
                 family="extension",
                 datasets="--", paper="alpha^2/(alpha^2+sigma^2) (independent data only)",
                 ours=_coverage_text(cov) + f" (p = {int(svm['p'].iloc[0])})", test=cov["test"])]


def _theory_claims(tables: Path) -> list:
    claims = []
    tvs = _read(tables, "theory_vs_sims")
    if tvs is not None and {"theory", "mean", "se", "replicates"} <= set(tvs.columns):
        # |mean - theory| / se is t-distributed with replicates - 1 degrees of freedom when the theory is right (up
        # to finite-size bias); the quantities of one grid point share their replicates: counted jointly per point
        long = tvs if "quantity" in tvs else tvs.assign(quantity="value")
        point = [c for c in ("kappa", "delta", "lam") if c in long] or ["theory"]
        cov = joint_coverage(long, point)
        claims.append(dict(area="theory", claim="the corrected fixed point matches Monte Carlo simulation",
                           datasets="--",
                           paper="(the paper's printed fixed point is off by a factor kappa, docs/theory.md)",
                           ours=_coverage_text(cov) + f" (p = {int(tvs['p'].iloc[0])})", test=cov["test"]))
    fs = _read(tables, "finite_size_slopes")
    if fs is not None and len(fs):
        claims += _finite_size_claim(fs, _read(tables, "finite_size_convergence"))
    svm = _read(tables, "stability_vs_lambda")
    if svm is not None:
        claims += _two_replica_claim(svm)
    corr = [load_json(tables.parent, f.stem) or {} for f in sorted(tables.glob("stability_theory_corr_*.json"))]
    if corr:
        claims += _layer_stability_claim(corr)
    return claims


def _layer_stability_claim(corr) -> list:
    """The isotropic two-replica theory against the measured per-layer stability (``stability_theory_corr_<dataset>``):
    per dataset the Spearman across layers (the qualitative trend the paper claims) and the mean absolute error, each
    for our theory and for the paper's formula alpha^2 / (alpha^2 + sigma^2), and which ranks the layers better; a
    description (8 layers per dataset).

    Parameters
    ----------
    corr : list of dict
        One JSON record per dataset: ``dataset``, ``predicted_spearman``, ``mean_abs_error``, and the paper
        formula's ``paper_formula_spearman`` and ``paper_formula_mean_abs_error`` when the run wrote them.

    Returns
    -------
    list of dict
        One untested claim row.
    """
    parts, paper_ranks_better = [], []
    for c in corr:
        name = c.get("dataset")
        if "predicted_spearman" not in c:
            parts.append(f"{name}: n/a")
            continue
        paper_rho, paper_mae = c.get("paper_formula_spearman"), c.get("paper_formula_mean_abs_error")
        rho = f"Spearman {c['predicted_spearman']:.2f}" + (f" (paper's formula {paper_rho:.2f})"
                                                            if paper_rho is not None else "")
        mae = f"mean abs error {c['mean_abs_error']:.3f}" + (f" (paper's formula {paper_mae:.3f})"
                                                             if paper_mae is not None else "")
        parts.append(f"{name}: {rho}, {mae}")
        if paper_rho is not None and paper_rho > c["predicted_spearman"]:
            paper_ranks_better.append(name)
    with_paper = sum("paper_formula_spearman" in c and "predicted_spearman" in c for c in corr)
    ranks = (f"; the paper's formula ranks the layers better (higher Spearman) on {len(paper_ranks_better)}/"
             f"{with_paper} datasets" + (f" ({', '.join(paper_ranks_better)})" if paper_ranks_better else "")
             if with_paper else "; the paper formula's Spearman is not in this run's tables")
    return [dict(area="theory", claim="isotropic two-replica theory predicts real per-layer stability",
                 datasets=str(len(corr)), paper="qualitative trends only",
                 ours="; ".join(parts) + ranks + " (predicted vs measured RAPTOR stability across layers)",
                 test=None)]


def _read(tables: Path, name: str):
    return load_table(tables.parent, name)


def _concat(tables: Path, names) -> pd.DataFrame | None:
    found = [t for t in (_read(tables, n) for n in names) if t is not None]
    return pd.concat(found, ignore_index=True) if found else None


#: The columns of the claims table, in order: ``p`` and ``verdict_per_claim`` are the claim's own test;
#: ``p_holm`` and ``verdict`` are after the Holm step within its ``family`` (:data:`paper_figures.verdicts.FAMILIES`);
#: ``mde`` is the minimal detectable effect at 80 % power (or why the design cannot decide).
COLUMNS = ["area", "claim", "datasets", "family", "rule", "paper", "ours", "mde", "p", "verdict_per_claim", "p_holm",
           "verdict"]

#: Areas whose rows are the project's own extensions unless a row says otherwise.
EXTENSION_AREAS = ("theory (ours)",)


def family_of(row: dict) -> str:
    """The test family of a claim row: its ``family`` when it names one, else ``extension`` for the areas of
    :data:`EXTENSION_AREAS` and for rows without a paper number, else ``paper``."""
    if row.get("family"):
        if row["family"] not in rules.FAMILIES:
            raise ValueError(f"claim {row.get('claim')!r}: family must be one of {sorted(rules.FAMILIES)}, got "
                             f"{row['family']!r}")
        return row["family"]
    if row.get("area") in EXTENSION_AREAS or row.get("paper", "--") == "--":
        return "extension"
    return "paper"


def mde_text(test, unit: str = "") -> str:
    """The ``mde`` cell of a tested row: the minimal detectable effect at :data:`paper_figures.verdicts.POWER`
    (an effect in points for ``unit="pts"``, else in the tested quantity's units; a true share of settings for a
    count), or why the design cannot decide; ``--`` for an untested row or an effect without an interval."""
    if test is None:
        return "--"
    if not test.decidable:
        return test.reason
    if not np.isfinite(test.mde):
        return "--"
    if test.mde_kind == "share":
        return f"true share {test.mde:.2f} of settings"
    if unit == "pts":
        return f"{100 * test.mde:+.1f} pts"
    return f"{test.mde:+.3g} {unit}".rstrip()


#: The paper's claims that no row of this run can test, with the paper's words and number: (area, claim, paper).
UNTESTABLE_CLAIMS = (
    ("accuracy", "gains over GCS are most pronounced on harder semantic concepts such as HateXplain and Sarcasm",
     "+3.51 pts (HateXplain) and +2.12 pts (Sarcasm) in mean best-layer accuracy over GCS"),
    ("theory", "at fixed p, as n grows, performance is largely determined by delta = n/p rather than the absolute "
               "scale of n", "-- (a finding, no number)"),
)


def _untestable_claims(tables: Path) -> list:
    """A row, without a verdict, for each claim of :data:`UNTESTABLE_CLAIMS`, saying why this run cannot test it:
    HateXplain is not among the registered datasets (``../shared/datasets``: hate speech is HateEval here) and a
    ranking of datasets by their gain carries no test; one model has one hidden size p, so along n at that p, n
    and delta = n/p are the same axis (the run's ``empirical_setup`` gives p)."""
    setup = load_json(tables.parent, "empirical_setup") or {}
    p = setup.get("hidden_size")
    have_hatexplain = "hatexplain" in dataset_names()
    ranking = ("'most pronounced' ranks the datasets by their gain, a comparison across datasets that no rule "
               "here tests; each dataset's own gain over GCS is in the accuracy rows")
    reasons = [
        ranking if have_hatexplain else
        f"HateXplain is not among our datasets ({', '.join(dataset_names())}: hate speech is HateEval here), and "
        + ranking,
        f"every layer of the one model run here has the same hidden size p{f' = {p}' if p else ''}, so along n at "
        "that p, n and delta = n/p are one axis and no measurement here can tell them apart: that needs two values "
        "of p at one delta for the same concept"]
    return [dict(area=area, claim=claim, datasets="--", family="paper", paper=paper,
                 ours=f"not testable here: {reason}", test=None)
            for (area, claim, paper), reason in zip(UNTESTABLE_CLAIMS, reasons)]


def claim_rows(out) -> list:
    """Every claim row the run's tables support, before the Holm step: dicts with ``area, claim, datasets,
    paper, ours`` and ``test`` (a :class:`paper_figures.verdicts.Test`, or None for a row without a verdict)."""
    tables = Path(out) / "tables"
    claims = []
    by_seed = _read(tables, "accuracy_by_seed")
    if by_seed is not None:
        primary = by_seed[by_seed.method != EQUAL_DATA_METHOD]  # the equal-data variant has its own rows
        claims += _accuracy_claims(paired_differences(primary), accuracy_intervals(primary))
        claims += _equal_data_claims(by_seed)
    stab = _concat(tables, [f"stability_{n}" for n in STABILITY_DATASETS])
    if stab is not None:
        claims += _stability_claims(stability_differences(stab), STABILITY_PROTOCOLS[0])
        equal = _concat(tables, [f"stability_equal_data_{n}" for n in STABILITY_DATASETS])
        if equal is not None:
            both = pd.concat([stab[stab.method != "RAPTOR"], equal], ignore_index=True)
            claims += _stability_claims(stability_differences(both, reference=EQUAL_DATA_METHOD),
                                        STABILITY_PROTOCOLS[1], family="robustness")
    layers = _concat(tables, [f"layers_{n}" for n in dataset_names()])
    if layers is not None:
        claims += _cost_claim(layers)
    sep = _read(tables, "separability_summary")
    large = _read(tables, "separability_large_summary")
    if sep is not None or large is not None:
        claims += _separability_claim(sep, _read(tables, "separability_control_summary"), large)
    claims += _steering_claims(_read(tables, "steering_summary"), _read(tables, "steering_pairs"))
    text_summary = _read(tables, "steering_text_summary")
    claims += steering_text_claim(text_summary, _read(tables, "steering_text_null"))
    claims += steering_comparison_claim(text_summary)
    claims += predictor_claims(tables)
    claims += _theory_claims(tables)
    claims += _untestable_claims(tables)
    return claims


def claims_table(out) -> pd.DataFrame:
    """The claims table of RESULTS.md from the tables under ``out/tables`` (whatever the run produced):
    columns :data:`COLUMNS`; ``p`` is the claim's own one-sided p-value and ``verdict_per_claim`` its verdict,
    ``p_holm`` the Holm-adjusted p-value within its family and ``verdict`` the family-corrected verdict
    (:func:`paper_figures.verdicts.apply_holm`)."""
    rows = claim_rows(out)
    for r in rows:  # an effect's minimal detectable size means nothing without its unit
        t = r.get("test")
        if t is not None and t.mde_kind == "effect" and np.isfinite(t.mde) and not r.get("mde_unit"):
            raise ValueError(f"claims: the row {r['claim']!r} states an effect MDE without its unit (mde_unit)")
    families = [family_of(r) for r in rows]
    tests = rules.in_families([r.get("test") for r in rows], families)  # reachability after the family's Holm step
    adjusted, verdicts = rules.apply_holm(tests, families)
    table = []
    for r, t, fam, p, v in zip(rows, tests, families, adjusted, verdicts):
        table.append(dict(area=r["area"], claim=r["claim"], datasets=r.get("datasets", "--"), family=fam,
                          rule=t.rule if t is not None else "--", paper=r["paper"], ours=r["ours"],
                          mde=mde_text(t, r.get("mde_unit", "")),
                          p=float(t.p) if t is not None else np.nan,
                          verdict_per_claim=t.verdict if t is not None else rules.UNTESTED,
                          p_holm=float(p), verdict=v))
    return pd.DataFrame(table, columns=COLUMNS)
