"""The figures of the ``raptor`` command line: one function per figure, drawn from the table the command writes.

Each function takes the command's table (a DataFrame with the columns of its CSV file) and a few labels, draws
the figure on a matplotlib :class:`~matplotlib.figure.Figure` of its own (no pyplot state, so the caller's
backend is left alone), saves it as PNG atomically (:func:`empirical.common.files.save_figure`) and returns the path.
A drawing or saving error is raised; ``raptor`` turns it into a warning, so a failed plot never loses the
tables written before it.  Layer l is the output of decoder block l (layer 0: the embeddings).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from .common.files import save_figure

__all__ = ["plot_probe_accuracy", "plot_stability", "plot_delta_sweep", "plot_plan"]


def _axes(figsize):
    """A new figure of ``figsize`` inches with one axes: ``(fig, ax)``."""
    from matplotlib.figure import Figure  # plotting is optional for the library

    fig = Figure(figsize=figsize)
    return fig, fig.subplots()


def plot_probe_accuracy(table: pd.DataFrame, path, *, dataset: str, n_examples: int, labels=None) -> Path:
    """Test accuracy per layer of RAPTOR and of every baseline in the table (``raptor probe``).

    Parameters
    ----------
    table : DataFrame
        One row per layer: ``layer``, ``test_accuracy`` (RAPTOR), optionally ``n_test`` (test rows: a 95 % Wilson
        band is drawn around RAPTOR) and, per baseline, ``<name>_test_accuracy`` with its command-line name (the
        table of ``probe_<dataset>.csv``).
    path : str or path-like
        The PNG file to write.
    dataset : str
        Dataset name, for the title.
    n_examples : int
        Examples in the dataset, for the title.
    labels : mapping of str to str, optional
        Legend label of each baseline by its command-line name (``{"diffmeans": "DiffMeans"}``: the registry's names);
        default the command-line name.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> table = pd.DataFrame(dict(layer=[1, 2, 3], test_accuracy=[0.7, 0.8, 0.75],
    ...                           diffmeans_test_accuracy=[0.65, 0.7, 0.7]))
    >>> plot_probe_accuracy(table, "probe_toy.png", dataset="toy", n_examples=60).is_file()
    True
    """
    fig, ax = _axes((6, 3.5))
    ax.plot(table.layer, table.test_accuracy, "o-", label="RAPTOR")
    if "n_test" in table and table["n_test"].notna().all() and (table["n_test"] > 0).all():
        # the test split's own sampling noise: a 95 % Wilson interval per layer (80 test rows give about +-0.1)
        bounds = [stats.binomtest(int(round(a * n)), int(n)).proportion_ci(method="wilson")
                  for a, n in zip(table.test_accuracy, table.n_test)]
        ax.fill_between(table.layer, [b.low for b in bounds], [b.high for b in bounds], alpha=0.2,
                        label=f"RAPTOR 95 % interval ({int(table.n_test.iloc[0])} test rows)")
    for c in table.columns:
        if c.endswith("_test_accuracy") and c != "test_accuracy":
            short = c.removesuffix("_test_accuracy")
            ax.plot(table.layer, table[c], ".--", label=(labels or {}).get(short, short))
    ax.set(xlabel="layer (output of decoder block l)", ylabel="test accuracy",
           title=f"{dataset} ({n_examples} examples)")
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_stability(table: pd.DataFrame, path, *, dataset: str) -> Path:
    """Directional stability per layer with its interval (``raptor stability``).

    Parameters
    ----------
    table : DataFrame
        One row per layer: ``layer``, ``mean_abs_cos`` (mean |cos| between the K refits' concept vectors) and
        its interval ``ci_low``, ``ci_high`` (the table of ``stability_<dataset>.csv``).
    path : str or path-like
        The PNG file to write.
    dataset : str
        Dataset name, for the title.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> table = pd.DataFrame(dict(layer=[2, 4], mean_abs_cos=[0.8, 0.9], ci_low=[0.75, 0.85], ci_high=[0.85, 0.93]))
    >>> plot_stability(table, "stability_toy.png", dataset="toy").is_file()
    True
    """
    fig, ax = _axes((6, 3.5))
    ax.errorbar(table.layer, table.mean_abs_cos, yerr=[table.mean_abs_cos - table.ci_low,
                                                       table.ci_high - table.mean_abs_cos], fmt="o-", capsize=3)
    ax.set(xlabel="layer", ylabel="mean |cos| (K runs)", title=f"{dataset}: directional stability")
    return save_figure(fig, path)


def plot_delta_sweep(table: pd.DataFrame, path, *, C: float, lam: float, dataset: str, layer: int) -> Path:
    """True and predicted accuracy along the fraction of the pool, at the C fixed in advance (``raptor sweep``).

    Parameters
    ----------
    table : DataFrame
        One row per (fraction, seed, C): ``fraction``, ``C``, ``Acc_true``, ``Acc_pred`` (the table of
        ``sweep_<dataset>_L<layer>_table.csv``, :attr:`StructureResult.table
        <empirical.probes.structure.StructureResult>`).
    path : str or path-like
        The PNG file to write.
    C : float
        The C fixed in advance; the rows at this C (up to rounding), averaged over seeds, are drawn.
    lam : float
        Its ridge strength, for the title.
    dataset : str
        Dataset name, for the title.
    layer : int
        The layer swept, for the title.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> table = pd.DataFrame(dict(fraction=[0.5, 0.5, 1.0, 1.0], C=[1.0, 10.0, 1.0, 10.0],
    ...                           Acc_true=[0.7, 0.6, 0.8, 0.7], Acc_pred=[0.72, 0.6, 0.79, 0.7]))
    >>> plot_delta_sweep(table, "sweep_toy_L2.png", C=1.0, lam=1.0, dataset="toy", layer=2).is_file()
    True
    """
    at_C = table[np.isclose(table["C"], C)].groupby("fraction")[["Acc_true", "Acc_pred"]].mean()
    fig, ax = _axes((5, 3.5))
    ax.plot(at_C.index, at_C.Acc_true, "o-", label="Acc_true")
    ax.plot(at_C.index, at_C.Acc_pred, "s--", label="Acc_pred")
    ax.set(xlabel="fraction of the pool (delta = n/p)", ylabel="accuracy",
           title=f"{dataset} layer {layer}, lambda={lam:.3g}")
    ax.legend()
    return save_figure(fig, path)


def plot_plan(table: pd.DataFrame, path, *, dataset: str, labels: int, target_n: int, level: float,
              target_accuracy: float | None = None) -> Path:
    """Accuracy predicted per layer at ``target_n`` labels, with the pool's own CV accuracy (``raptor plan``).

    Parameters
    ----------
    table : DataFrame
        One row per layer: ``layer``, ``predicted_accuracy`` and its interval ``low``, ``high``, and
        ``pool_cv_accuracy`` (the table of ``plan_<dataset>.csv``).
    path : str or path-like
        The PNG file to write.
    dataset : str
        Dataset name, for the title.
    labels : int
        Labelled rows of the pool, for the title and legend.
    target_n : int
        Labelled rows the accuracy is predicted at, for the title and legend.
    level : float
        Coverage of the intervals, in (0, 1), for the legend.
    target_accuracy : float, optional
        Drawn as a dotted horizontal line.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> table = pd.DataFrame(dict(layer=[1, 2], predicted_accuracy=[0.8, 0.85], low=[0.75, 0.8], high=[0.85, 0.9],
    ...                           pool_cv_accuracy=[0.76, 0.8]))
    >>> plot_plan(table, "plan_toy.png", dataset="toy", labels=300, target_n=3000, level=0.9,
    ...           target_accuracy=0.82).is_file()
    True
    """
    fig, ax = _axes((6, 3.5))
    ax.errorbar(table.layer, table.predicted_accuracy, yerr=[table.predicted_accuracy - table.low,
                                                             table.high - table.predicted_accuracy],
                fmt="o-", capsize=3, label=f"predicted at n = {target_n} ({level:.0%} interval)")
    ax.plot(table.layer, table.pool_cv_accuracy, "x--", label=f"pool's CV accuracy (n = {labels})")
    if target_accuracy is not None:
        ax.axhline(target_accuracy, color="0.5", lw=0.8, ls=":", label="target accuracy")
    ax.set(xlabel="layer", ylabel="test accuracy", title=f"{dataset}: {labels} labels -> {target_n}")
    ax.legend(fontsize=7)
    return save_figure(fig, path)
