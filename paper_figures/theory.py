"""Theory figures: the corrected CGMT fixed point against Monte Carlo simulation.

Convention (see docs/theory.md): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, delta = n/p, objective
(1/n) sum log-loss + lam/(2p) ||beta||^2; alpha = <z_hat, v>, sigma = ||z_hat - alpha v||, z = beta/sqrt(p).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

import cgmt
import sims
from tqdm.auto import tqdm

from .output import save_figure, save_table
from .style import THEORY_COLOR, series_color

KAPPAS = (1.0, 2.0, 4.0)
DELTAS = (0.5, 1.0, 2.0, 4.0)
LAMS = np.logspace(-4, 2, 49)


def theory_sweep(out, *, kappas=KAPPAS, deltas=DELTAS, lams=LAMS, progress=True) -> pd.DataFrame:
    """Tidy table of the fixed point over (kappa, delta, lam); written to tables/theory_sweep.csv."""
    df = cgmt.sweep(deltas, lams, kappas, progress=progress)
    save_table(df, out, "theory_sweep")
    return df


def simulation_points(out, *, kappas=(1.0, 4.0), deltas=(0.5, 2.0), lams=(1e-3, 1e-2, 1e-1, 1.0, 10.0),
                      p=400, replicates=6, seed=2024, n_jobs=1, progress=True) -> pd.DataFrame:
    """Monte Carlo at a subset of the sweep (``sims.compare_grid``); tables/theory_vs_sims.csv."""
    tab = sims.compare_grid(deltas, lams, kappas, p, replicates, seed, n_jobs=n_jobs, progress=progress)
    save_table(tab, out, "theory_vs_sims")
    return tab


def _panel_grid(kappas):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(kappas), figsize=(4.2 * len(kappas), 3.6), sharey=False, squeeze=False)
    return fig, axes[0]


def plot_quantity(out, sweep: pd.DataFrame, sims_tab: pd.DataFrame | None, quantity: str, name: str,
                  ylabel: str, *, bayes: bool = False):
    """One panel per kappa: theory curves over lam for each delta, simulation means +- 2 se on top."""
    kappas = sorted(sweep["kappa"].unique())
    fig, axes = _panel_grid(kappas)
    colors = dict(zip(sorted(sweep["delta"].unique()), ["C0", "C1", "C2", "C3", "C4", "C5"]))
    for ax, k in zip(axes, kappas):
        for d, col in colors.items():
            cur = sweep[(sweep["kappa"] == k) & (sweep["delta"] == d)].sort_values("lam")
            ax.plot(cur["lam"], cur[quantity], color=col, label=f"δ={d:g}")
            if sims_tab is not None:
                s = sims_tab[(sims_tab["kappa"] == k) & (sims_tab["delta"] == d) & (sims_tab["quantity"] == quantity)]
                if len(s):
                    ax.errorbar(s["lam"], s["mean"], yerr=2 * s["se"], fmt="o", ms=4, color=col, capsize=2)
        if bayes:
            ax.axhline(float(cgmt.bayes_accuracy(k)), color="k", ls=":", lw=1, label="Bayes")
        ax.set_xscale("log")
        ax.set_xlabel("ridge strength λ")
        ax.set_title(f"κ = {k:g}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[-1].legend(fontsize=8)
    fig.suptitle(f"{ylabel}: theory (lines) vs simulation (points, ±2 s.e.)", fontsize=10)
    return save_figure(fig, out, name)


def phase_and_optimum(out, *, kappas=np.linspace(0.0, 8.0, 33), deltas=np.logspace(-1, 2, 25),
                      opt_kappas=KAPPAS, progress=True):
    """Separability threshold delta*(kappa) and the accuracy-optimal lambda(delta); figure + tables."""
    import matplotlib.pyplot as plt
    thr = pd.DataFrame({"kappa": kappas, "delta_star": [cgmt.separability_threshold(k) for k in kappas]})
    save_table(thr, out, "separability_threshold")
    rows = []
    for k in tqdm(opt_kappas, desc="optimal λ", disable=not progress):
        for d in deltas:
            r = cgmt.optimal_lambda(d, k)
            rows.append(dict(kappa=k, delta=d, lam_opt=float(r.lam), accuracy_opt=float(r.accuracy),
                             bayes=float(cgmt.bayes_accuracy(k))))
    opt = pd.DataFrame(rows)
    save_table(opt, out, "optimal_lambda")
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    ax[0].plot(thr["kappa"], thr["delta_star"])
    ax[0].set_xlabel("signal κ")
    ax[0].set_ylabel("δ*(κ): separable below")
    ax[0].set_title("separability threshold")
    for k in opt_kappas:
        c = opt[opt["kappa"] == k]
        ax[1].plot(c["delta"], c["lam_opt"], label=f"κ={k:g}")
        ax[2].plot(c["delta"], c["accuracy_opt"], label=f"κ={k:g}")
        ax[2].axhline(c["bayes"].iloc[0], ls=":", lw=1, color="k")
    for a in ax[1:]:
        a.set_xscale("log")
        a.set_xlabel("δ = n/p")
        a.legend(fontsize=8)
    ax[1].set_yscale("log")
    ax[1].set_ylabel("accuracy-optimal λ")
    ax[2].set_ylabel("accuracy at optimal λ")
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out, "theory_phase_optimum")


#: the (delta, lam, kappa) point of the finite-size figure (a moderate point, away from separability)
FINITE_SIZE_POINT = (4.0, 0.1, 1.0)
FINITE_SIZE_QUANTITIES = {"alpha": "α", "sigma": "σ", "accuracy_formula": "accuracy"}


def finite_size_convergence(out, *, ps=(100, 200, 400, 800), replicates=16, seed=7, n_jobs=1, progress=True):
    """Simulation against theory as p grows at :data:`FINITE_SIZE_POINT` (``sims.finite_size_study``): the
    root-mean-square error over replicates and |bias of the mean| per quantity, log-log, with the
    p^(-1/2) reference; tables ``finite_size_convergence`` (per p and quantity) and ``finite_size_slopes``."""
    import matplotlib.pyplot as plt

    _, table, slopes = sims.finite_size_study(points=(FINITE_SIZE_POINT,), ps=ps, replicates=replicates, seed=seed,
                                              n_jobs=n_jobs, progress=progress, n_test=2000)
    table = table[table.quantity.isin(list(FINITE_SIZE_QUANTITIES))]
    slopes = slopes[slopes.quantity.isin(list(FINITE_SIZE_QUANTITIES))]
    save_table(table, out, "finite_size_convergence")
    save_table(slopes, out, "finite_size_slopes")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for k, (q, label) in enumerate(FINITE_SIZE_QUANTITIES.items()):
        g = table[table.quantity == q].sort_values("p")
        sl = slopes[slopes.quantity == q].iloc[0]
        axes[0].plot(g.p, g.rmse, marker="o", color=series_color(k), label=f"{label} (slope {sl.rmse_slope:.2f})")
        axes[1].errorbar(g.p, g.bias.abs(), yerr=g.se, marker="o", color=series_color(k), capsize=2,
                         label=f"{label} (slope {sl.abs_bias_slope:.2f})")
    p0 = np.array([min(ps), max(ps)], dtype=float)
    ref = table[table.quantity == "alpha"].sort_values("p").rmse.iloc[0]
    for ax in axes:
        ax.plot(p0, ref * (p0 / p0[0]) ** -0.5, color=THEORY_COLOR, ls="--", lw=1, label="slope -1/2")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("dimension p (n = δp)")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("|simulation - theory|")
    axes[0].set_title("root-mean-square error over replicates")
    axes[1].set_title("|bias of the mean| (± standard error)")
    d, lam, kappa = FINITE_SIZE_POINT
    fig.suptitle(f"Finite-size convergence of simulation to the corrected fixed point (δ = {d:g}, λ = {lam:g}, "
                 f"κ = {kappa:g}; {replicates} replicates per p)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out, "finite_size_convergence")


def run(out, *, quick=False, progress=True, n_jobs=1):
    """All theory figures and tables; ``quick`` shrinks the simulation."""
    sweep = theory_sweep(out, progress=progress)
    sims_tab = simulation_points(out, p=200 if quick else 400, replicates=4 if quick else 8,
                                 progress=progress, n_jobs=n_jobs)
    plot_quantity(out, sweep, sims_tab, "accuracy", "theory_accuracy", "test accuracy", bayes=True)
    plot_quantity(out, sweep, sims_tab, "alignment", "theory_alignment", "alignment ⟨v̂, v⟩")
    plot_quantity(out, sweep, sims_tab, "sigma", "theory_sigma", "orthogonal energy σ")
    phase_and_optimum(out, progress=progress)
    finite_size_convergence(out, ps=(100, 200, 400) if quick else (100, 200, 400, 800),
                            replicates=6 if quick else 16, n_jobs=n_jobs, progress=progress)
    return sweep, sims_tab
