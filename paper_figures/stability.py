"""Directional-stability figures: two-replica theory (``cgmt.stability``) versus Monte Carlo, and versus
measured RAPTOR ablation stability on real embeddings.

Conventions: as in ``cgmt`` (x ~ N(0, I_p/p), objective (1/n) sum loss + lam/(2p)||beta||^2).  For
real embeddings the features are standardized (unit variance per coordinate, as RAPTOR does), i.e.
h = sqrt(p) x, so RAPTOR's lambda (its objective (1/n) sum loss + lam/2 ||w||^2) *is* the theory's
lambda and scikit-learn's C is 1/(n lam).  ``delta`` is always the pool ratio N/p (train cup val).

Public functions
----------------
- :func:`stability_curves` -- theory table (three protocols + the paper's formula) along a lambda grid;
- :func:`simulate_stability` -- Monte Carlo with ``sims`` (one replicate: :func:`sims.simulate_stability_replicate`);
- :func:`plot_stability_vs_lambda` -- predicted vs simulated cosine against lambda at a few (delta, kappa);
- :func:`plot_real_embedding_stability` -- measured versus predicted stability per layer (the
  methodology, ``estimate_kappa`` and ``real_embedding_stability``, lives in
  :mod:`empirical.probes.real_embedding`);
- :func:`make_stability_figures`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

import sims
from cgmt.stability import stability
from cgmt.validation import check_delta, check_kappa, check_lams
from empirical.common.checks import as_seed_sequence, check_axes, check_seed, check_sequence
from empirical.common.resources import check_n_jobs

from .output import draws_figures, load_finished_step, save_figure, save_table
from .style import THEORY_COLOR, method_color, series_color

PROTOCOLS = ("independent", "subsample", "full_vs_subsample")
#: (delta, kappa) panels of the default figure
DEFAULT_SETTINGS = ((1.0, 2.0), (2.0, 1.0), (4.0, 2.0))
_COLORS = {"subsample": series_color(0), "full_vs_subsample": series_color(2), "independent": series_color(1)}
_LABELS = {"subsample": "two ablation runs (paper's metric)", "full_vs_subsample": "full vs ablation run",
           "independent": "independent pools"}


# ---------------------------------------------------------------------------------------------
# theory and simulation tables
# ---------------------------------------------------------------------------------------------
def stability_curves(delta, kappa, lams, *, drop=0.2, val_fraction=0.2) -> pd.DataFrame:
    """Theory along ``lams``: columns lam, cos_<protocol> for the three protocols, and
    ``paper_formula`` = alpha^2/(alpha^2+sigma^2) for the two ablation runs (the paper's
    independent-sample stability formula applied to the fits it compares).

    Parameters
    ----------
    delta : float
        Pool ratio N/p.
    kappa : float
        Signal strength.
    lams : iterable of float
        Ridge strengths (theory convention).
    drop, val_fraction : float, default=0.2
        The ablation protocol.

    Returns
    -------
    pandas.DataFrame
        One row per lam: ``delta``, ``kappa``, ``lam``, ``cos_independent``, ``cos_subsample``,
        ``paper_formula``, ``cos_full_subsample``.

    Raises
    ------
    cgmt.ConvergenceError
        A fixed point did not converge (``strict=True``).

    Examples
    --------
    >>> curves = stability_curves(2.0, 1.0, [0.1])
    >>> round(float(curves.cos_subsample[0]), 4), round(float(curves.cos_independent[0]), 4)
    (0.6556, 0.2487)
    """
    rows = []
    for lam in lams:
        rec = dict(delta=float(delta), kappa=float(kappa), lam=float(lam))
        for proto in PROTOCOLS:
            r = stability(delta, lam, kappa, proto, drop=drop, val_fraction=val_fraction, strict=True)
            rec[f"cos_{proto}"] = r.cosine
            if proto == "subsample":
                rec["paper_formula"] = r.independent_formula
        rows.append(rec)
    return pd.DataFrame(rows)


def simulate_stability(delta, kappa, lams, p, replicates, *, runs=3, seed=0, drop=0.2, val_fraction=0.2,
                       n_jobs=1, progress=True) -> pd.DataFrame:
    """Monte Carlo table: per lam, mean and standard error over ``replicates`` of the three cosines.

    Parameters
    ----------
    delta, kappa : float
        The point (theory convention).
    lams : sequence of float
        Ridge strengths.
    p : int
        Dimension.
    replicates : int
        Replicates per lam (at least 2).
    runs : int, default=3
        Ablation runs per replicate.
    seed : int or sequence of int, default=0
        Root of ``np.random.SeedSequence`` (each lam its child, each replicate a grandchild).
    drop, val_fraction : float, default=0.2
        The ablation protocol.
    n_jobs : int, default=1
        joblib workers (each single-threaded).
    progress : bool, default=True
        Show a progress bar.

    Returns
    -------
    pandas.DataFrame
        One row per lam: ``delta``, ``kappa``, ``lam``, ``p``, ``replicates`` and ``mc_<protocol>``,
        ``se_<protocol>`` for the three protocols.
    """
    n_jobs = check_n_jobs(n_jobs)
    if int(replicates) != replicates or replicates < 2:
        raise ValueError(f"replicates must be an integer >= 2 (standard errors), got {replicates}")
    root = as_seed_sequence(seed, "seed")
    tasks = [(float(lam), s) for lam, ch in zip(lams, root.spawn(len(lams))) for s in ch.spawn(int(replicates))]

    def one(lam, s):
        with threadpool_limits(1):
            return dict(lam=lam, **sims.simulate_stability_replicate(delta, lam, kappa, p, s, runs=runs, drop=drop,
                                                                val_fraction=val_fraction))

    gen = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(one)(lam, s) for lam, s in tasks)
    raw = pd.DataFrame(list(tqdm(gen, total=len(tasks), disable=not progress, desc=f"stability MC p={p}")))
    out = []
    for lam, g in raw.groupby("lam"):
        rec = dict(delta=float(delta), kappa=float(kappa), lam=lam, p=int(p), replicates=len(g))
        for proto, col in (("subsample", "cos_subsample"), ("full_vs_subsample", "cos_full_subsample"),
                           ("independent", "cos_independent")):
            rec[f"mc_{proto}"] = g[col].mean()
            rec[f"se_{proto}"] = g[col].std(ddof=1) / math.sqrt(len(g))
        out.append(rec)
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------------
# figure 1: theory vs simulation against lambda
# ---------------------------------------------------------------------------------------------
def _setting(value, name):
    """One (delta, kappa) panel of :func:`plot_stability_vs_lambda`, each in its theory domain."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a (delta, kappa) pair, got {value!r:.60}")
    return check_delta(value[0], f"{name} delta"), check_kappa(value[1], f"{name} kappa")


@draws_figures
def plot_stability_vs_lambda(settings=DEFAULT_SETTINGS, lams=None, *, sim: pd.DataFrame | None = None,
                             drop=0.2, val_fraction=0.2, axes=None, theory: pd.DataFrame | None = None):
    """One panel per (delta, kappa): theory cosine of the three protocols against lambda (lines),
    Monte Carlo means with 2-SE error bars (markers; ``sim`` as returned by :func:`simulate_stability`,
    possibly concatenated over settings), and the paper's independent-sample formula for the ablation
    pair (dashed).

    Parameters
    ----------
    settings : sequence of (delta, kappa), default=DEFAULT_SETTINGS
        One panel each.
    lams : array of float, optional
        Lambda grid of the theory lines when ``theory`` is None (default 13 points from 1e-2 to 10).
    sim : pandas.DataFrame, optional
        Monte Carlo means (:func:`simulate_stability`, possibly concatenated over settings).
    drop, val_fraction : float, default=0.2
        The ablation protocol of the theory lines computed here.
    axes : sequence of matplotlib Axes, optional
        Draw into these (one per setting) instead of a new figure.
    theory : pandas.DataFrame, optional
        The :func:`stability_curves` of every setting (concatenated; computed along ``lams`` when None).

    Returns
    -------
    matplotlib.figure.Figure
        The figure (that of ``axes`` when given).
    """
    import matplotlib

    settings = check_sequence(settings, "settings", _setting)
    if axes is not None:
        axes = check_axes(axes, "axes", len(settings))
    else:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    lams = np.logspace(-2, 1, 13) if lams is None else check_lams(lams, "lams")
    own = axes is None
    if own:
        fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.8), sharey=True, squeeze=False)
        axes = axes[0]
    else:
        fig = axes[0].figure
    for ax, (delta, kappa) in zip(axes, settings):
        if theory is None:
            th = stability_curves(delta, kappa, lams, drop=drop, val_fraction=val_fraction)
        else:
            th = theory[np.isclose(theory.delta, delta) & np.isclose(theory.kappa, kappa)].sort_values("lam")
        for proto in ("subsample", "full_vs_subsample", "independent"):
            ax.plot(th.lam, th[f"cos_{proto}"], color=_COLORS[proto], label=_LABELS[proto])
        ax.plot(th.lam, th.paper_formula, color=THEORY_COLOR, ls="--", lw=1.2,
                label=r"paper: $\alpha^2/(\alpha^2+\sigma^2)$ (ablation runs)")
        if sim is not None:
            s = sim[(np.isclose(sim.delta, delta)) & (np.isclose(sim.kappa, kappa))]
            for proto in ("subsample", "full_vs_subsample", "independent"):
                if f"mc_{proto}" in s:
                    ax.errorbar(s.lam, s[f"mc_{proto}"], yerr=2 * s[f"se_{proto}"], fmt="o", ms=4,
                                color=_COLORS[proto], capsize=2)
        ax.set_xscale("log")
        ax.set_xlabel("ridge strength λ (dimensionless)")
        ax.set_title(f"pool δ = N/p = {delta:g}, signal κ = {kappa:g}")
        ax.set_ylim(0, 1.02)
    axes[0].set_ylabel("cosine between fitted directions\n(dimensionless)")
    handles, _ = axes[0].get_legend_handles_labels()
    handles = handles[:4]
    if sim is not None and len(sim):
        cap = "Monte Carlo mean ±2 s.e."
        if {"p", "replicates"} <= set(sim.columns):
            cap += f" (p = {int(sim.p.iloc[0])}, {int(sim.replicates.iloc[0])} replicates)"
        handles.append(Line2D([], [], color="0.3", ls="none", marker="o", ms=4, label=cap))
    if own:
        fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, -0.02))
        fig.suptitle("Ablation stability: two-replica theory (lines) against simulation (markers)")
        fig.tight_layout(rect=(0, 0.12, 1, 1))
    else:
        axes[-1].legend(handles=handles, fontsize=7, loc="lower right")
        fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# real embeddings (methodology in empirical.probes.real_embedding)
# ---------------------------------------------------------------------------------------------
@draws_figures
def plot_real_embedding_stability(result, ax=None, measured_ci=None):
    """Measured versus predicted stability per layer (and the paper's formula), with the identity line.

    Parameters
    ----------
    result : empirical.probes.real_embedding.RealStabilityResult
        From :func:`empirical.probes.real_embedding.real_embedding_stability`.
    ax : matplotlib Axes, optional
        Draw into it instead of a new figure.
    measured_ci : (array, array), optional
        Low and high bounds per layer (e.g. the bootstrap interval over the K runs): error bars on the measured
        values.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.
    """
    import matplotlib

    if ax is not None:
        ax = check_axes(ax, "ax")
    else:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = (plt.subplots(figsize=(4.2, 4.0)) if ax is None else (ax.figure, ax))
    t = result.table
    c = result.correlations
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, label="measured = predicted")
    ax.scatter(t.predicted, t.measured, color=method_color("RAPTOR"),
               label=f"two-replica theory (Spearman {c['predicted_spearman']:.2f}, Pearson "
                     f"{c['predicted_pearson']:.2f})")
    if measured_ci is not None:
        low, high = (np.asarray(v, dtype=float) for v in measured_ci)
        err = [np.clip(t.measured - low, 0, None), np.clip(high - t.measured, 0, None)]
        ax.errorbar(t.predicted, t.measured, yerr=err, fmt="none", ecolor=method_color("RAPTOR"), elinewidth=0.8,
                    capsize=2)
    ax.scatter(t.paper_formula, t.measured, color=THEORY_COLOR, marker="x",
               label=f"paper formula (Spearman {c['paper_formula_spearman']:.2f}, Pearson "
                     f"{c['paper_formula_pearson']:.2f})")
    ax.set_xlabel("predicted stability |cos| (dimensionless)")
    ax.set_ylabel("measured RAPTOR stability, mean |cos|\n(dimensionless)")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def make_stability_figures(out, *, settings=DEFAULT_SETTINGS, lams=None, p=400, replicates=4, runs=3, seed=0,
                           n_jobs=1, progress=True):
    """Simulate (``p``, ``replicates``) and write ``figures/stability_vs_lambda.png|pdf``,
    ``tables/stability_vs_lambda.csv`` (simulation with the theory at the simulated lambdas) and
    ``tables/stability_vs_lambda_theory.csv`` (the theory curves of the figure) under ``out``.

    Parameters
    ----------
    out : path-like
        The run's output directory.
    settings : sequence of (delta, kappa), default=DEFAULT_SETTINGS
        The panels.
    lams : array of float, optional
        Simulated lambdas (default 7 points from 1e-2 to 10).
    p : int, default=400
        Dimension of the simulation.
    replicates : int, default=4
        Replicates per (setting, lambda).
    runs : int, default=3
        Ablation runs per replicate.
    seed : int, default=0
        Root seed (setting i uses ``[seed, i]``).
    n_jobs : int, default=1
        joblib workers.
    progress : bool, default=True
        Show progress bars.

    Returns
    -------
    pandas.DataFrame
        The simulation table (:func:`simulate_stability`, all settings).
    """
    n_jobs = check_n_jobs(n_jobs)
    seed = check_seed(seed, "seed")
    lams = np.logspace(-2, 1, 7) if lams is None else np.asarray(lams, dtype=float)
    sim = pd.concat([simulate_stability(d, k, lams, p, replicates, runs=runs, seed=[seed, i], n_jobs=n_jobs,
                                        progress=progress) for i, (d, k) in enumerate(settings)],
                    ignore_index=True)
    th = pd.concat([stability_curves(d, k, lams) for d, k in settings], ignore_index=True)
    save_table(sim.merge(th, on=["delta", "kappa", "lam"]), out, "stability_vs_lambda")
    curves = pd.concat([stability_curves(d, k, np.logspace(-2, 1, 25)) for d, k in settings], ignore_index=True)
    save_table(curves, out, "stability_vs_lambda_theory")
    save_figure(plot_stability_vs_lambda(settings, sim=sim, theory=curves), out, "stability_vs_lambda")
    return sim


def run(out, *, quick=False, progress=True, n_jobs=1):
    """Section ``stability`` of ``python -m paper_figures``: theory vs simulation for the three protocols
    (``figures/stability_vs_lambda.png``, ``tables/stability_vs_lambda.csv``); ``quick`` shrinks the simulation.
    Resumes: a finished section with the same simulation sizes in ``out`` is not recomputed.

    Parameters
    ----------
    out : path-like
        The run's output directory.
    quick : bool, default=False
        p = 200 and 3 replicates instead of p = 400 and 6.
    progress : bool, default=True
        Show progress bars.
    n_jobs : int, default=1
        joblib workers.

    Returns
    -------
    pandas.DataFrame
        The simulation table (loaded from ``out`` when the section is already finished).
    """
    n_jobs = check_n_jobs(n_jobs)
    p, replicates = (200, 3) if quick else (400, 6)
    saved = load_finished_step(out, {"stability_vs_lambda": {"p": {p}, "replicates": {replicates}},
                                     "stability_vs_lambda_theory": {}}, figures=("stability_vs_lambda",))
    if saved is not None:
        return saved["stability_vs_lambda"]
    return make_stability_figures(out, p=p, replicates=replicates, n_jobs=n_jobs, progress=progress)
