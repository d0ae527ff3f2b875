"""The paper's headline experiment as one command: the empirical section on a grid of models x datasets
(``python -m paper_figures --models A B ...``), and the grid's artefacts.

Each model runs the ``empirical`` section into its own folder ``OUT/models/<slug>/`` (its own tables, figures,
cache entries and resume; the model is loaded by the section and released before the next one), then the grid
step reads every model's tables and writes, in ``OUT``:

- ``tables/grid_accuracy.csv``: best-layer and mean-over-layers test accuracy per (model, dataset, method) with
  95 % intervals over split seeds (:func:`paper_figures.claims.accuracy_intervals`), and ``grid_accuracy_table``,
  the paper's Table 1 layout (a row per model and method, a column per dataset, ``best (mean)`` in %);
- ``tables/grid_accuracy_differences.csv`` and ``figures/grid_accuracy_differences.png``: RAPTOR minus each
  baseline per (model, dataset), best layer and mean over layers (2 x 2 panels: the two metrics x GCS and xRFM,
  each a models x datasets grid of cells; a star marks an interval that excludes 0);
- ``tables/grid_cost.csv`` and ``figures/grid_cost_dumbbell.png``: median seconds per layer of each method per
  (model, dataset);
- ``tables/grid_claims.csv``: the paper's accuracy claims counted over (model, dataset) settings as the paper counts
  them ("RAPTOR above GCS in k/N settings"), a setting counting only when its own interval is on the claim's side,
  with the one-sided sign test, its smallest reachable p and minimal detectable share, and the verdict rules of
  docs/results.md (:func:`paper_figures.verdicts.majority`).
"""
from __future__ import annotations

import gc
import hashlib
import re
from pathlib import Path

import numpy as np
import pandas as pd

from empirical.common.resources import check_n_jobs

from . import claims, empirical_figures, verdicts
from .empirical_plots import dumbbell
from .output import draws_figures, load_table, save_figure, save_table, to_markdown

#: the baselines of the 2 x 2 difference figure (the paper's two strongest)
GRID_BASELINES = ("GCS", "xRFM")


#: A model name kept as its own folder name: lower case, at most 60 characters, nothing a file system reads
#: differently (two such names that differ also differ on a case-insensitive file system).
_PLAIN_SLUG = re.compile(r"[a-z0-9][a-z0-9_.-]{0,59}")


def _hashed_slug(name: str, text: str) -> str:
    """``<name, sanitized, 40 characters at most>-<8 hex of the sha256 of text>``."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)[:40]}-{digest}"


def model_slug(model: str) -> str:
    """The folder name of a model in the grid: a plain registered name as it is (lower case letters, digits,
    ``_.-``, at most 60 characters), any other name by its sanitized form and a short hash of the whole name (``org/a``
    and ``org_a``, ``Org/M`` and ``org/m``, two long names with one beginning stay apart), a path by its last part
    and a short hash of the whole resolved path (two checkpoints called ``model`` stay apart).

    Parameters
    ----------
    model : str
        A model name (``smollm2``) or a local path.

    Returns
    -------
    str

    Examples
    --------
    >>> model_slug("smollm2")
    'smollm2'
    >>> model_slug("org/a") != model_slug("org_a")
    True
    """
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty name or path, got {model!r:.60}")
    path = Path(model).expanduser()
    if path.exists():
        return _hashed_slug(path.resolve().name, str(path.resolve()))
    if _PLAIN_SLUG.fullmatch(model):
        return model
    return _hashed_slug(model, model)


def check_models(models, option: str = "--models") -> list:
    """Refuse a model list that is not a grid of distinct models, before anything runs: at least two entries, no
    two of them the same model in any spelling, and no two output folders (:func:`model_slug`) that collide.

    A model is identified by what it is, not by its name: the extraction cache's identity of the folder the entry
    resolves to (:func:`empirical.llm.source_identity`), so ``smollm2`` and ``SmolLM2``, a folder and its
    copy, a symbolic link to it, ``m/`` and ``m``, a relative and an absolute path are each one model (a grid counting
    them twice would count one model's settings twice in its claims).  Two different models whose folder names
    would be one folder (also on a case-insensitive file system) are refused too, naming both.

    Parameters
    ----------
    models : sequence of str
        Model names or paths, as for :func:`run`.
    option : str, default="--models"
        The option the list came from, named in the errors.

    Returns
    -------
    list of str
        ``models`` as a list; ``ValueError`` naming ``option`` and the two entries that are one model (or share a
        folder).
    """
    if isinstance(models, (str, bytes)) or not hasattr(models, "__iter__"):
        raise ValueError(f"{option} must be a list of model names or paths, got {models!r:.60}")
    models = list(models)
    if len(models) < 2:
        raise ValueError(f"{option} must name at least two models, got {models!r:.200}")
    for model in models:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"{option} holds {model!r:.60}, not a model name or path")
    from empirical.llm import source_identity  # the LLM stack: only a grid run needs it

    seen = {}
    for model in models:
        identity = source_identity(model)
        if identity in seen:
            raise ValueError(f"{option} lists {seen[identity]!r} and {model!r}, which are the same model (identity "
                             f"{identity}); a grid counts each model's settings once: give each model once")
        seen[identity] = model
    folders = {}
    for model in models:
        slug = model_slug(model)
        if slug.casefold() in folders:
            other = folders[slug.casefold()]
            raise ValueError(f"{option} lists {other!r} and {model!r}, two different models whose output folders "
                             f"models/{model_slug(other)} and models/{slug} would be one folder; rename or move one "
                             "of them")
        folders[slug.casefold()] = model
    return models


def model_dir(out, model: str) -> Path:
    """``OUT/models/<slug>``: where a model's empirical section writes.

    Parameters
    ----------
    out : path
        The run's folder.
    model : str
        A model name or path.

    Returns
    -------
    pathlib.Path
    """
    return Path(out) / "models" / model_slug(model)


def run(out, models, *, data_dir=None, max_per_class=500, quick=False, steps=None, n_jobs=2) -> dict:
    """The empirical section on every model of ``models``, one after the other, then the grid's artefacts.

    Parameters
    ----------
    out : path
        The run's folder.
    models : sequence of str
        Model names or paths: at least two, each a different model (:func:`check_models`).
    data_dir, max_per_class, quick, steps, n_jobs
        As for :func:`paper_figures.empirical_figures.run`.

    Returns
    -------
    dict
        The grid tables (:func:`grid_tables`).
    """
    n_jobs = check_n_jobs(n_jobs)
    models = check_models(models)
    for model in models:
        empirical_figures.run(model_dir(out, model), model=model, data_dir=data_dir, max_per_class=max_per_class,
                              quick=quick, steps=steps, n_jobs=n_jobs)
        _release_device_memory()
    tables = grid_tables(out, models)
    plot_grid(out)
    return tables


def _release_device_memory() -> None:
    """Free the model just used before the next loads (its GPU memory above all)."""
    gc.collect()
    try:
        import torch  # the empirical section ran on torch: it is installed
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _per_model(out, models, name) -> pd.DataFrame:
    """Every model's table ``name``, with a ``model`` column (the model's folder name, :func:`model_slug`)."""
    frames = []
    for model in models:
        table = load_table(model_dir(out, model), name)
        if table is None:
            raise ValueError(f"model {model!r}: its table {name} is missing from {str(model_dir(out, model))!r} "
                             "(run its empirical section first)")
        frames.append(table.assign(model=model_slug(model)))
    return pd.concat(frames, ignore_index=True)


def _cell(best, mean) -> str:
    return f"{100 * best:.1f} ({100 * mean:.1f})"


def grid_tables(out, models) -> dict:
    """Read every model's tables and write the grid's (module docstring).

    Parameters
    ----------
    out : path
        The run's folder (the models' tables in ``OUT/models/<slug>/tables``).
    models : sequence of str
        The grid's models, in order.

    Returns
    -------
    dict
        ``grid_accuracy``, ``grid_accuracy_table``, ``grid_accuracy_differences``, ``grid_cost`` and ``grid_claims``
        (DataFrames, also saved to ``OUT/tables``).
    """
    by_seed = _per_model(out, models, "accuracy_by_seed")
    accuracy = pd.concat([claims.accuracy_intervals(g.drop(columns="model")).assign(model=m)
                          for m, g in by_seed.groupby("model", sort=False)], ignore_index=True)
    accuracy = accuracy[["model", *[c for c in accuracy.columns if c != "model"]]]
    table = accuracy.assign(cell=[_cell(b, m) for b, m in zip(accuracy.best, accuracy["mean"])]).pivot_table(
        index=["model", "method"], columns="dataset", values="cell", aggfunc="first", sort=False)
    diffs = pd.concat([claims.paired_differences(g.drop(columns="model")).assign(model=m)
                       for m, g in by_seed.groupby("model", sort=False)], ignore_index=True)
    diffs = diffs[["model", *[c for c in diffs.columns if c != "model"]]]
    cost = _per_model(out, models, "cost_median_fit_time_s")
    cost = cost.melt(id_vars=["model", "dataset"], var_name="method", value_name="median_fit_time_s").dropna()
    tables = {"grid_accuracy": accuracy, "grid_accuracy_table": table.reset_index(),
              "grid_accuracy_differences": diffs, "grid_cost": cost, "grid_claims": grid_claims(diffs)}
    for name, frame in tables.items():
        save_table(frame, out, name)
    return tables


def grid_claims(diffs: pd.DataFrame) -> pd.DataFrame:
    """The accuracy claims counted over (model, dataset) settings: for every baseline and metric, the settings whose
    interval of RAPTOR minus the baseline lies above 0 (``above``), below 0 (``below``), and the sign test of
    "RAPTOR above in most settings" (:func:`paper_figures.verdicts.majority`, opposite: below in most).

    Parameters
    ----------
    diffs : DataFrame
        ``grid_accuracy_differences``: model, dataset, baseline, metric, diff, ci_low, ci_high; the settings are
        the paper's datasets (:data:`paper_figures.claims.PAPER_DATASETS`) of every model, not the averages.

    Returns
    -------
    DataFrame
        One row per (baseline, metric): ``claim, settings, above, below, p, p_opposite, min_p, mde_share,
        verdict, reason``.
    """
    rows = []
    settings = diffs[diffs.dataset.isin(claims.PAPER_DATASETS)]  # datasets, not their averages or variants
    for (baseline, metric), g in settings.groupby(["baseline", "metric"], sort=False):
        g = g.dropna(subset=["ci_low", "ci_high"])
        above, below = int((g.ci_low > 0).sum()), int((g.ci_high < 0).sum())
        test = verdicts.majority(above, len(g), opposite=below)
        rows.append(dict(claim=f"RAPTOR above {baseline} ({metric} layer accuracy) in most model x dataset settings",
                         baseline=baseline, metric=metric, settings=len(g), above=above, below=below,
                         count=f"{above}/{len(g)}", p=test.p, p_opposite=test.p_opposite, min_p=test.min_p,
                         mde_share=test.mde, verdict=test.verdict, reason=test.reason))
    return pd.DataFrame(rows)


@draws_figures
def plot_grid(out) -> list:
    """``grid_accuracy_differences.png`` and ``grid_cost_dumbbell.png`` from the grid tables (module docstring).

    Parameters
    ----------
    out : path
        The run's folder.

    Returns
    -------
    list of pathlib.Path
        The figures drawn (none when the run has no grid tables).
    """
    import matplotlib.pyplot as plt

    made = []
    diffs = load_table(out, "grid_accuracy_differences")
    if diffs is not None:
        baselines = [b for b in GRID_BASELINES if b in set(diffs.baseline)] or list(dict.fromkeys(diffs.baseline))[:2]
        models, names = list(dict.fromkeys(diffs.model)), list(dict.fromkeys(diffs.dataset))
        fig, axes = plt.subplots(len(baselines), 2, figsize=(0.75 * len(names) * 2 + 3, 0.55 * len(models) *
                                                              len(baselines) + 3.2), squeeze=False,
                                 constrained_layout=True)
        span = max(float(np.nanmax(np.abs(100 * diffs["diff"]))), 1.0)
        for r, baseline in enumerate(baselines):
            for c, (metric, title) in enumerate((("best", "best layer"), ("mean", "mean over layers"))):
                ax = axes[r][c]
                d = diffs[(diffs.baseline == baseline) & (diffs.metric == metric)]
                grid = d.pivot_table(index="model", columns="dataset", values="diff", sort=False).reindex(
                    index=models, columns=names)
                image = ax.imshow(100 * grid.to_numpy(dtype=float), cmap="RdBu", vmin=-span, vmax=span,
                                  aspect="auto")
                for _, row in d.iterrows():
                    i, j = models.index(row.model), names.index(row.dataset)
                    star = "*" if row.ci_low > 0 or row.ci_high < 0 else ""
                    ax.text(j, i, f"{100 * row['diff']:+.1f}{star}", ha="center", va="center", fontsize=8)
                ax.grid(False)
                bottom = r == len(baselines) - 1
                ax.set_xticks(range(len(names)), names if bottom else [""] * len(names), rotation=35, ha="right")
                ax.set_yticks(range(len(models)), models if c == 0 else [""] * len(models))
                ax.set_title(f"RAPTOR - {baseline}, {title} (pp)", fontsize=10)
        fig.colorbar(image, ax=axes, shrink=0.8, label="difference (percentage points)")
        fig.suptitle("RAPTOR minus baseline per model and dataset: mean over split seeds (* = 95 % interval "
                     "excludes 0; blue = RAPTOR better)", fontsize=10)
        made.append(save_figure(fig, out, "grid_accuracy_differences"))
    cost = load_table(out, "grid_cost")
    if cost is not None:
        settings = list(dict.fromkeys(zip(cost.model, cost.dataset)))
        fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(settings) + 1.6))
        wide = cost.pivot_table(index=["model", "dataset"], columns="method", values="median_fit_time_s",
                                sort=False).reindex(settings)
        dumbbell(ax, wide, [f"{m} | {d}" for m, d in settings], size=24)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlabel("median seconds per layer (fit incl. tuning)")
        ax.set_title("Training cost per layer across the grid")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, frameon=False, fontsize=8)
        made.append(save_figure(fig, out, "grid_cost_dumbbell"))
    return made


def grid_markdown(out) -> list:
    """RESULTS.md's lines on the model grid, generated from its tables.

    Parameters
    ----------
    out : path
        The run's folder.

    Returns
    -------
    list of str
        Markdown lines (none when the run has no grid).
    """
    found = load_table(out, "grid_claims"), load_table(out, "grid_accuracy_table")
    if any(t is None for t in found):
        return []
    grid_claims_table, accuracy_table = found
    models = list(dict.fromkeys(accuracy_table.model))
    lines = ["## The model grid", "",
             f"The empirical section on {len(models)} models ({', '.join(f'`{m}`' for m in models)}), each in "
             "`models/<model>/` with its own tables and figures. A setting is one (model, dataset); it counts for a "
             "claim only when its own 95 % interval over split seeds lies on the claim's side of 0; the verdict is "
             "the one-sided sign test over settings (rules above), `--` where the grid is too small to reach it.", "",
             to_markdown(grid_claims_table[["claim", "count", "below", "p", "p_opposite", "min_p", "mde_share",
                                            "verdict", "reason"]], floatfmt=".3g"), "",
             "Best-layer (mean-over-layers) test accuracy, %, mean over split seeds "
             "(`tables/grid_accuracy.csv` has the intervals):", "", to_markdown(accuracy_table), ""]
    return lines
