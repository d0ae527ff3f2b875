"""Theory figures: the corrected CGMT fixed point against Monte Carlo simulation.

Convention (see docs/theory.md): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, delta = n/p, objective
(1/n) sum log-loss + lam/(2p) ||beta||^2; alpha = <z_hat, v>, sigma = ||z_hat - alpha v||, z = beta/sqrt(p).

Figures (each with its numbers in ``tables/``): ``theory_accuracy``, ``theory_alignment``, ``theory_sigma``
(fixed point over lambda against simulation; tables ``theory_sweep``, ``theory_vs_sims``), ``theory_phase_optimum``
(``separability_threshold``, ``optimal_lambda``) and ``finite_size_convergence`` (tables
``finite_size_convergence``, ``finite_size_slopes``): at one point, the spread of a replicate around the
theory shrinks like p^(-1/2) (the fluctuation of alpha, sigma and the accuracy), while the bias of the mean
is much smaller and, beyond the smallest p, below the noise of the mean (its slope is fitted only where
it is resolved).
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

import cgmt
import sims
from empirical.common.checks import as_seed_sequence
from empirical.common.failures import ConvergenceWarning

from .output import draws_figures, load_finished_step, save_figure, save_table
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


LAMBDA_LABEL = "ridge strength λ (dimensionless)"
DELTA_LABEL = "δ = n/p (dimensionless)"


@draws_figures
def _panel_grid(kappas):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(kappas), figsize=(4.2 * len(kappas), 3.6), sharey=False, squeeze=False)
    return fig, axes[0]


def _sim_caption(sims_tab) -> str:
    if sims_tab is None or not len(sims_tab) or not {"p", "replicates"} <= set(sims_tab.columns):
        return "simulation"
    return f"simulation, p = {int(sims_tab['p'].iloc[0])}, {int(sims_tab['replicates'].iloc[0])} replicates"


@draws_figures
def plot_quantity(out, sweep: pd.DataFrame, sims_tab: pd.DataFrame | None, quantity: str, name: str,
                  ylabel: str, *, bayes: bool = False, title: str | None = None):
    """One panel per kappa: theory curves over lam for each delta (lines), simulation means +- 2 se (markers,
    same colour as their delta).  The numbers are in tables ``theory_sweep`` and ``theory_vs_sims``.
    ``title``: what the figure shows (default ``ylabel``)."""
    from matplotlib.lines import Line2D

    kappas = sorted(sweep["kappa"].unique())
    fig, axes = _panel_grid(kappas)
    colors = {d: series_color(i) for i, d in enumerate(sorted(sweep["delta"].unique()))}
    for ax, k in zip(axes, kappas):
        for d, col in colors.items():
            cur = sweep[(sweep["kappa"] == k) & (sweep["delta"] == d)].sort_values("lam")
            ax.plot(cur["lam"], cur[quantity], color=col, lw=1.5)
            if sims_tab is not None:
                s = sims_tab[(sims_tab["kappa"] == k) & (sims_tab["delta"] == d) & (sims_tab["quantity"] == quantity)]
                if len(s):
                    ax.errorbar(s["lam"], s["mean"], yerr=2 * s["se"], fmt="o", ms=4, color=col, capsize=2, lw=1)
        if bayes:
            ax.axhline(float(cgmt.bayes_accuracy(k)), color=THEORY_COLOR, ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel(LAMBDA_LABEL)
        ax.set_title(f"signal κ = {k:g}")
    axes[0].set_ylabel(ylabel)
    handles = [Line2D([], [], color=c, lw=1.5, label=f"δ = {d:g}") for d, c in colors.items()]
    handles += [Line2D([], [], color="0.3", lw=1.5, label="theory (fixed point)"),
                Line2D([], [], color="0.3", ls="none", marker="o", ms=4, label=f"{_sim_caption(sims_tab)}, ±2 s.e.")]
    if bayes:
        handles.append(Line2D([], [], color=THEORY_COLOR, ls=":", lw=1, label="Bayes-optimal accuracy"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(f"{title or ylabel}: theory (lines) against Monte Carlo simulation (markers)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(fig, out, name)


@draws_figures
def phase_and_optimum(out, *, kappas=np.linspace(0.0, 8.0, 33), deltas=np.logspace(-1, 2, 25),
                      opt_kappas=KAPPAS, progress=True):
    """Separability threshold delta*(kappa) and the accuracy-optimal lambda(delta); figure + tables
    ``separability_threshold`` and ``optimal_lambda``."""
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
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].plot(thr["kappa"], thr["delta_star"], color=THEORY_COLOR)
    ax[0].fill_between(thr["kappa"], 0, thr["delta_star"], color="0.85", lw=0)
    ax[0].text(0.3, 0.35 * float(thr["delta_star"].max()), "separable\n(unregularised MLE diverges)", fontsize=8)
    ax[0].set_ylim(0, None)
    ax[0].set_xlabel("signal κ (dimensionless)")
    ax[0].set_ylabel("threshold δ*(κ) (dimensionless)")
    ax[0].set_title("separability threshold: separable for δ < δ*")
    for i, k in enumerate(opt_kappas):
        c = opt[opt["kappa"] == k]
        ax[1].plot(c["delta"], c["lam_opt"], color=series_color(i), label=f"κ = {k:g}")
        ax[2].plot(c["delta"], c["accuracy_opt"], color=series_color(i), label=f"κ = {k:g}")
        ax[2].axhline(c["bayes"].iloc[0], ls=":", lw=1, color=series_color(i))
    ax[2].plot([], [], ls=":", lw=1, color="0.3", label="Bayes-optimal (same colour)")
    for a in ax[1:]:
        a.set_xscale("log")
        a.set_xlabel(DELTA_LABEL)
        a.legend()
    ax[1].set_yscale("log")
    ax[1].set_ylabel("accuracy-optimal λ (dimensionless)")
    ax[1].set_title("optimal ridge strength")
    ax[2].set_ylabel("test accuracy at the optimal λ")
    ax[2].set_title("best achievable accuracy")
    fig.tight_layout()
    return save_figure(fig, out, "theory_phase_optimum")


#: the (delta, lam, kappa) point of the finite-size figure: away from separability (delta* = 2.9 at kappa = 2)
#: and well regularised, so every fit converges in a few Newton steps at every p
FINITE_SIZE_POINT = (2.0, 0.1, 2.0)
#: measured quantity -> (panel title, the ``cgmt.solve`` field that predicts it).  ``accuracy_formula`` is the
#: exact test accuracy of each fit (its expectation over fresh test data, from its alpha and sigma); the
#: accuracy on a finite test sample would add binomial noise that does not shrink with p.
FINITE_SIZE_QUANTITIES = {"alpha": ("overlap α = ⟨ẑ, v⟩", "alpha"),
                          "sigma": ("orthogonal part σ = ‖ẑ − αv‖", "sigma"),
                          "accuracy_formula": ("test accuracy of each fit", "accuracy")}


#: |mean - theory| counts as a resolved bias above this many standard errors of the mean (3: about one false
#: positive in 370 dimensions when there is no bias)
RESOLVED_SE = 3.0


#: the smallest p whose replicates are spread over worker processes (a fit at p = 800 takes ~50 ms, at
#: p = 400 ~15 ms: about joblib's dispatch cost per task)
PARALLEL_MIN_P = 200


def finite_size_replicates(ps, replicates, p_ref=None) -> dict:
    """Replicates per p: ``replicates`` at p >= ``p_ref`` (default: the second largest p) and
    ``replicates * round(p_ref / p)`` below, so the small, cheap dimensions get more replicates (a sharper
    estimate of the bias, which is largest there) for about the same time per p."""
    ps = sorted(int(p) for p in ps)
    p_ref = ps[-2] if p_ref is None and len(ps) > 1 else (p_ref or ps[-1])
    return {p: int(replicates * max(1, round(p_ref / p))) for p in ps}


def finite_size_table(raw: pd.DataFrame, point=FINITE_SIZE_POINT) -> pd.DataFrame:
    """Per p and quantity: mean over replicates, theory, abs_error = |mean - theory| (the bias of the mean
    plus its noise), std across replicates (the per-replicate fluctuation) and its standard error std_se
    (delta method with the sample fourth moment, so heavy tails widen it), se = std/sqrt(n_rep), rmse, and
    ``success`` (every fit converged)."""
    th = cgmt.solve(*point)
    if not th.success:
        raise RuntimeError(f"cgmt.solve did not converge at {point}: {th.message}")
    d, lam, kappa = point
    recs = []
    for p, g in raw.groupby("p"):
        for q, (_, field) in FINITE_SIZE_QUANTITIES.items():
            x = g[q].to_numpy(float)
            t = float(th[field])
            std = float(x.std(ddof=1))
            m4 = float(np.mean((x - x.mean()) ** 4))
            std_se = float(np.sqrt(max(m4 - std ** 4, 0.0) / len(x)) / (2 * std))
            recs.append(dict(delta=d, lam=lam, kappa=kappa, p=int(p), quantity=q, mean=float(x.mean()), theory=t,
                             bias=float(x.mean() - t), abs_error=float(abs(x.mean() - t)), std=std, std_se=std_se,
                             se=std / np.sqrt(len(x)), rmse=float(np.sqrt(np.mean((x - t) ** 2))), n_rep=len(x),
                             success=bool(g["success"].all())))
    return pd.DataFrame(recs)


def weighted_slope(x, y, sd):
    """Weighted least-squares slope of y on x (weights 1/sd^2) and its standard error."""
    w = 1.0 / np.asarray(sd, float) ** 2
    xm = np.sum(w * x) / np.sum(w)
    sxx = np.sum(w * (x - xm) ** 2)
    return float(np.sum(w * (x - xm) * y) / sxx), float(1.0 / np.sqrt(sxx))


def finite_size_slopes(table: pd.DataFrame) -> pd.DataFrame:
    """Per quantity, log-log slopes against p.

    - ``std_slope``: weighted least squares of log(std across replicates), weights from ``std_se``;
      ``std_slope_se`` its standard error (sampling noise only: curvature of a non-power law is not in it);
    - ``abs_error_slope`` (+ ``_se``): of |mean - theory| over the *leading* run of dimensions where it
      exceeds :data:`RESOLVED_SE` standard errors of the mean (from the smallest p up to ``resolved_p_max``;
      ``resolved_ps`` of them): beyond them |mean - theory| is the noise of the mean, not the bias, and a
      fit through noise would report the noise's own p^(-1/2).  NaN when fewer than 2 p are resolved;
    - ``rmse_slope``: least squares of the root-mean-square error over replicates, every p.
    """
    recs = []
    for q, g in table.groupby("quantity", sort=False):
        g = g.sort_values("p")
        x = np.log(g.p.to_numpy(float))
        std_slope, std_se = weighted_slope(x, np.log(g["std"].to_numpy(float)), (g.std_se / g["std"]).to_numpy())
        ok = (g.abs_error > RESOLVED_SE * g.se).to_numpy()
        lead = int(np.argmin(ok)) if not ok.all() else len(ok)  # leading run of resolved points
        r = g.iloc[:lead]
        if lead >= 2:
            b_slope, b_se = weighted_slope(x[:lead], np.log(r.abs_error.to_numpy(float)),
                                            (r.se / r.abs_error).to_numpy())
        else:
            b_slope = b_se = float("nan")
        recs.append(dict(delta=g.delta.iloc[0], lam=g.lam.iloc[0], kappa=g.kappa.iloc[0], quantity=q,
                         std_slope=std_slope, std_slope_se=std_se, abs_error_slope=b_slope, abs_error_slope_se=b_se,
                         resolved_ps=lead, resolved_p_max=int(r.p.max()) if lead else 0,
                         rmse_slope=sims.loglog_slope(g.p, g.rmse), std_sqrt_p=float(np.mean(g["std"] * np.sqrt(g.p)))))
    return pd.DataFrame(recs)


def _num(v: float) -> str:
    return f"{v:.2f}".replace("-", "−")


def _reference(ax, ps, anchor_p, anchor_y, slope, **kw):
    ps = np.array([min(ps), max(ps)], dtype=float)
    ax.plot(ps, anchor_y * (ps / anchor_p) ** slope, color=THEORY_COLOR, lw=1, **kw)


@draws_figures
def plot_finite_size(table: pd.DataFrame, slopes: pd.DataFrame):
    """Three log-log panels (alpha, sigma, accuracy): the std across replicates and |mean - theory| against p,
    with the p^(-1/2) and p^(-1) reference slopes and :data:`RESOLVED_SE` standard errors of the mean (the noise
    level below which |mean - theory| says nothing about the bias).  Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    qs = [q for q in FINITE_SIZE_QUANTITIES if q in set(table.quantity)]
    fig, axes = plt.subplots(1, len(qs), figsize=(4.3 * len(qs), 3.9), squeeze=False)
    any_resolved = False
    for ax, q in zip(axes[0], qs):
        g = table[table.quantity == q].sort_values("p")
        sl = slopes[slopes.quantity == q].iloc[0]
        p = g.p.to_numpy(float)
        se_txt = f" ± {sl.std_slope_se:.2f}" if np.isfinite(sl.std_slope_se) else ""
        lo_std = g["std"] - 2 * g.std_se
        ax.errorbar(p, g["std"], yerr=2 * g.std_se, fmt="o", ms=5, capsize=2, color=series_color(0),
                    label=f"std across replicates: slope {_num(sl.std_slope)}{se_txt}")
        lower = np.minimum(2 * g.se, 0.9 * g.abs_error)  # log axis: the lower bar stops one decade below
        bias_txt = (f"slope {_num(sl.abs_error_slope)} ± {sl.abs_error_slope_se:.2f} (p ≤ {sl.resolved_p_max})"
                    if np.isfinite(sl.abs_error_slope) else "not resolved from noise")
        ax.errorbar(p, g.abs_error, yerr=[lower, 2 * g.se], fmt="s", ms=5, capsize=2, color=series_color(1),
                    label=f"|mean − theory|: {bias_txt}")
        ax.plot(p, RESOLVED_SE * g.se, color="0.5", ls=":", lw=1.2)
        gm = float(np.exp(np.mean(np.log(g["std"]))))
        _reference(ax, p, float(np.exp(np.mean(np.log(p)))), gm, -0.5, ls="--")
        if sl.resolved_ps >= 1:
            any_resolved = True
            _reference(ax, p, p[0], float(g.abs_error.iloc[0]), -1.0, ls="-.")
        ax.set_xscale("log")
        ax.set_yscale("log")
        # room below the data for the legend (about a quarter of the height)
        y_lo = float(min((g.abs_error - lower).min(), lo_std.min()))
        y_hi = float(max((g.abs_error + 2 * g.se).max(), (g["std"] + 2 * g.std_se).max()))
        y_lo = max(y_lo, y_hi * 1e-8)
        ax.set_ylim(y_lo / (y_hi / y_lo) ** 0.4, y_hi * 1.5)
        ax.set_xticks(p, [f"{int(v)}" for v in p])
        ax.minorticks_off()
        ax.set_xlabel("dimension p (n = δp)")
        ax.set_title(FINITE_SIZE_QUANTITIES[q][0])
        ax.legend(loc="lower left", fontsize=7)
    axes[0][0].set_ylabel("std or |mean − theory| (units of the quantity)")
    handles = [Line2D([], [], color=THEORY_COLOR, ls="--", lw=1, label="reference slope −1/2")]
    if any_resolved:
        handles.append(Line2D([], [], color=THEORY_COLOR, ls="-.", lw=1, label="reference slope −1 (bias)"))
    handles += [Line2D([], [], color="0.5", ls=":", lw=1.2,
                       label=f"{RESOLVED_SE:g} s.e. of the mean: |mean − theory| below it is noise"),
                Line2D([], [], color="0.3", ls="none", marker="o", label="error bars: ±2 s.e.")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, bbox_to_anchor=(0.5, -0.02))
    d, lam, kappa = table[["delta", "lam", "kappa"]].iloc[0]
    reps = table.groupby("p").n_rep.first()
    fig.suptitle(f"Finite-size convergence of simulation to theory at δ = {d:g}, λ = {lam:g}, κ = {kappa:g}\n"
                 f"(replicates per p: {', '.join(f'{r}' for r in reps)}; fits on n = δp samples in dimension p)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


#: Replicates per dimension of the finite-size study.  The claim tested is that the bias |mean - theory| falls
#: with p, which needs the bias resolved from the Monte Carlo noise at >= 3 dimensions: the bias of sigma is
#: about 0.8 / p at the default point (0.031 at p = 25, 0.0036 at p = 200), so the small p get thousands of
#: replicates (cheap: a fit at p = 25 takes ~1 ms) and p = 200 enough for se ~ 0.0009 (measured: sigma's bias
#: resolved at p = 25-200, slope -1.07 +- 0.08; 118 s on 2 busy cores).
FINITE_SIZE_REPLICATES = {25: 8000, 50: 4000, 100: 2400, 200: 2400, 400: 300}
#: ``--quick``: the same dimensions but p = 400, an eighth of the replicates (a look: sigma's bias is resolved at
#: p = 25-100 only).
QUICK_FINITE_SIZE_REPLICATES = {25: 1000, 50: 500, 100: 300, 200: 300}


def finite_size_convergence(out, *, ps=(50, 100, 200, 400, 800), replicates=300, point=FINITE_SIZE_POINT, seed=7,
                            n_jobs=1, progress=True):
    """Simulation against theory as p grows at ``point`` (``sims.simulate_raw`` replicates, ``cgmt.solve``
    theory): tables ``finite_size_convergence`` (per p and quantity: mean, theory, abs_error, std, se, n_rep,
    ...) and ``finite_size_slopes`` (:func:`finite_size_slopes`), and the figure (:func:`plot_finite_size`).
    ``replicates`` is a dict ``{p: replicates}`` (then ``ps`` is ignored) or an int spread over ``ps`` by
    :func:`finite_size_replicates`.  Returns (table, slopes)."""
    reps = ({int(p): int(r) for p, r in replicates.items()} if isinstance(replicates, dict)
            else finite_size_replicates(ps, replicates))
    roots = as_seed_sequence(seed, "seed").spawn(len(reps))
    # one thread per fit; worker processes only where a fit outweighs joblib's dispatch (a few ms per task:
    # with 2 workers the 2400 fits at p = 50 took 28 s instead of 6 s in one process)
    with threadpool_limits(1):
        raw = pd.concat([sims.simulate_raw([point], [p], r, s, n_jobs=n_jobs if p >= PARALLEL_MIN_P else 1,
                                           progress=progress, n_test=100, gamma=False)
                         for (p, r), s in zip(sorted(reps.items(), reverse=True), roots)], ignore_index=True)
    table = finite_size_table(raw, point)
    if not table.success.all():
        warnings.warn(f"finite-size study: some fits did not converge at p = "
                      f"{sorted(set(table.p[~table.success]))}", ConvergenceWarning, stacklevel=2)
    slopes = finite_size_slopes(table)
    save_table(table, out, "finite_size_convergence")
    save_table(slopes, out, "finite_size_slopes")
    save_figure(plot_finite_size(table, slopes), out, "finite_size_convergence")
    return table, slopes


def run(out, *, quick=False, progress=True, n_jobs=1):
    """All theory figures and tables; ``quick`` shrinks the simulation.  Resumes: when an earlier run in ``out``
    saved every table and figure of this section with the same simulation sizes, nothing is recomputed."""
    p, replicates = (200, 4) if quick else (400, 8)
    fs_reps = QUICK_FINITE_SIZE_REPLICATES if quick else FINITE_SIZE_REPLICATES
    ps = tuple(fs_reps)
    saved = load_finished_step(out, {"theory_sweep": {}, "theory_vs_sims": {"p": {p}, "replicates": {replicates}},
                                     "separability_threshold": {}, "optimal_lambda": {},
                                     "finite_size_convergence": {"p": set(ps)}, "finite_size_slopes": {}},
                               figures=("theory_accuracy", "theory_alignment", "theory_sigma", "theory_phase_optimum",
                                        "finite_size_convergence"))
    if saved is not None:
        return saved["theory_sweep"], saved["theory_vs_sims"]
    sweep = theory_sweep(out, progress=progress)
    sims_tab = simulation_points(out, p=p, replicates=replicates, progress=progress, n_jobs=n_jobs)
    plot_quantity(out, sweep, sims_tab, "accuracy", "theory_accuracy", "test accuracy", bayes=True,
                  title="Test accuracy")
    plot_quantity(out, sweep, sims_tab, "alignment", "theory_alignment", "alignment cos(ẑ, v) (dimensionless)",
                  title="Alignment of the fitted direction with the teacher")
    plot_quantity(out, sweep, sims_tab, "sigma", "theory_sigma", "orthogonal part σ = ‖ẑ − αv‖",
                  title="Orthogonal (noise) part of the fit")
    phase_and_optimum(out, progress=progress)
    finite_size_convergence(out, replicates=fs_reps, n_jobs=n_jobs, progress=progress)
    return sweep, sims_tab
