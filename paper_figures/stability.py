"""Directional-stability figures: two-replica theory (``cgmt.stability``) versus Monte Carlo, and versus
measured RAPTOR ablation stability on real embeddings.

Conventions: as in ``cgmt`` (x ~ N(0, I_p/p), objective (1/n) sum loss + lam/(2p)||beta||^2).  For
real embeddings the features are standardized (unit variance per coordinate, as RAPTOR does), i.e.
h = sqrt(p) x, so RAPTOR's lambda (``eq:ridge_obj``: (1/n) sum loss + lam/2 ||w||^2) *is* the theory's
lambda and scikit-learn's C is 1/(n lam).  ``delta`` is always the pool ratio N/p (train cup val).

Public functions
----------------
- :func:`stability_curves` -- theory table (three protocols + the paper's formula) along a lambda grid;
- :func:`simulate_stability_replicate` / :func:`simulate_stability` -- Monte Carlo with ``sims``;
- :func:`plot_stability_vs_lambda` -- predicted vs simulated cosine against lambda at a few (delta, kappa);
- :func:`estimate_kappa` -- signal strength from cross-validated accuracy through the theory;
- :func:`real_embedding_stability` -- predicted vs measured stability across layers, Spearman/Pearson;
- :func:`plot_real_embedding_stability`, :func:`make_stability_figures`.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.stats import pearsonr, spearmanr
from tqdm.auto import tqdm

__all__ = ["stability_curves", "simulate_stability_replicate", "simulate_stability", "plot_stability_vs_lambda",
           "estimate_kappa", "participation_ratio", "real_embedding_stability", "RealStabilityResult",
           "plot_real_embedding_stability", "make_stability_figures", "run", "DEFAULT_SETTINGS"]

PROTOCOLS = ("independent", "subsample", "full_vs_subsample")
#: (delta, kappa) panels of the default figure
DEFAULT_SETTINGS = ((1.0, 2.0), (2.0, 1.0), (4.0, 2.0))
_COLORS = {"subsample": "C0", "full_vs_subsample": "C2", "independent": "C1"}
_LABELS = {"subsample": "two ablation runs (paper's metric)", "full_vs_subsample": "full vs ablation run",
           "independent": "independent pools"}


# ---------------------------------------------------------------------------------------------
# theory and simulation tables
# ---------------------------------------------------------------------------------------------
def stability_curves(delta, kappa, lams, *, drop=0.2, val_fraction=0.2) -> pd.DataFrame:
    """Theory along ``lams``: columns lam, cos_<protocol> for the three protocols, and
    ``paper_formula`` = alpha^2/(alpha^2+sigma^2) for the two ablation runs (the paper's
    ``eq:cosine_stability_approx`` applied to the fits it compares)."""
    from cgmt.stability import stability

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


def _cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def simulate_stability_replicate(delta, lam, kappa, p, seed, *, runs=3, drop=0.2, val_fraction=0.2) -> dict:
    """One Monte Carlo replicate with ``sims``: a pool of n = delta p points, its full fit, a fit on an
    independent pool (same teacher), and ``runs`` ablation runs (``sims.ablation_train_indices``).

    Returns cos_independent, cos_subsample (mean over the runs' pairs, i.e. ``eq:robust_cos_abs``
    without the absolute value, which is immaterial here: all cosines are > 0), cos_full_subsample
    (mean over runs) and the largest gradient norm of the fits.
    """
    import sims

    if runs < 2:
        raise ValueError(f"runs: need at least 2 ablation runs, got {runs}")
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_pool, s_ind, *s_runs = ss.spawn(2 + runs)
    n = int(round(delta * p))
    pool = sims.sample(n, p, kappa, s_pool)
    other = sims.sample(n, p, kappa, s_ind, beta_star=pool.beta_star)
    fits = [sims.fit_ridge_logistic(pool.X, pool.y, lam), sims.fit_ridge_logistic(other.X, other.y, lam)]
    zr = []
    for s in s_runs:
        idx = sims.ablation_train_indices(pool.y, s, drop=drop, val_fraction=val_fraction)
        f = sims.fit_ridge_logistic(pool.X[idx], pool.y[idx], lam)
        fits.append(f)
        zr.append(f.z)
    z0 = fits[0].z
    return dict(cos_independent=_cos(z0, fits[1].z),
                cos_subsample=float(np.mean([_cos(a, b) for a, b in itertools.combinations(zr, 2)])),
                cos_full_subsample=float(np.mean([_cos(z0, z) for z in zr])),
                max_grad_norm=float(max(f.grad_norm for f in fits)))


def simulate_stability(delta, kappa, lams, p, replicates, *, runs=3, seed=0, drop=0.2, val_fraction=0.2,
                       n_jobs=1, progress=True) -> pd.DataFrame:
    """Monte Carlo table: per lam, mean and standard error over ``replicates`` of the three cosines."""
    from joblib import Parallel, delayed
    from threadpoolctl import threadpool_limits

    if int(replicates) != replicates or replicates < 2:
        raise ValueError(f"replicates: must be an integer >= 2 (standard errors), got {replicates}")
    root = np.random.SeedSequence(seed)
    tasks = [(float(lam), s) for lam, ch in zip(lams, root.spawn(len(lams))) for s in ch.spawn(int(replicates))]

    def one(lam, s):
        with threadpool_limits(1):
            return dict(lam=lam, **simulate_stability_replicate(delta, lam, kappa, p, s, runs=runs, drop=drop,
                                                                val_fraction=val_fraction))

    gen = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(one)(l, s) for l, s in tasks)
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
def plot_stability_vs_lambda(settings=DEFAULT_SETTINGS, lams=None, *, sim: pd.DataFrame | None = None,
                             drop=0.2, val_fraction=0.2, axes=None):
    """One panel per (delta, kappa): theory cosine of the three protocols against lambda (lines),
    Monte Carlo means with 2-SE error bars (markers; ``sim`` as returned by :func:`simulate_stability`,
    possibly concatenated over settings), and the paper's independent-sample formula for the ablation
    pair (dashed).  Returns the matplotlib figure."""
    import matplotlib

    if axes is None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    lams = np.logspace(-2, 1, 13) if lams is None else np.asarray(lams, dtype=float)
    if axes is None:
        fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.6), sharey=True, squeeze=False)
        axes = axes[0]
    else:
        fig = axes[0].figure
    for ax, (delta, kappa) in zip(axes, settings):
        th = stability_curves(delta, kappa, lams, drop=drop, val_fraction=val_fraction)
        for proto in ("subsample", "full_vs_subsample", "independent"):
            ax.plot(th.lam, th[f"cos_{proto}"], color=_COLORS[proto], label=_LABELS[proto])
        ax.plot(th.lam, th.paper_formula, "k--", lw=1.2, label=r"paper: $\alpha^2/(\alpha^2+\sigma^2)$ (ablation runs)")
        if sim is not None:
            s = sim[(np.isclose(sim.delta, delta)) & (np.isclose(sim.kappa, kappa))]
            for proto in ("subsample", "full_vs_subsample", "independent"):
                if f"mc_{proto}" in s:
                    ax.errorbar(s.lam, s[f"mc_{proto}"], yerr=2 * s[f"se_{proto}"], fmt="o", ms=4,
                                color=_COLORS[proto], capsize=2)
        ax.set_xscale("log")
        ax.set_xlabel(r"$\lambda$")
        ax.set_title(rf"$\delta_{{pool}}={delta:g}$, $\kappa={kappa:g}$")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("cosine between unit directions")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# real embeddings
# ---------------------------------------------------------------------------------------------
def _pm1(y):
    y = np.asarray(y).ravel()
    classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(f"labels: need exactly two classes, got {classes.size}")
    return np.where(y == classes[1], 1.0, -1.0)


def _cv_accuracy(X, y, lam, folds, seed):
    """Held-out accuracy of the RAPTOR objective at lam (train-fold standardization, intercept)."""
    from sklearn.model_selection import StratifiedKFold

    from empirical.logistic.solver import fit_l2_logistic

    correct = 0
    n_fit = []
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y):
        mu = X[tr].mean(0)
        sd = X[tr].std(0)
        sd[sd == 0] = 1.0
        Xtr = (X[tr] - mu) / sd
        Xte = (X[te] - mu) / sd
        res = fit_l2_logistic(Xtr, y[tr], 1.0 / (len(tr) * lam), fit_intercept=True)
        pred = np.where(Xte @ res.coef + res.intercept >= 0, 1.0, -1.0)
        correct += int(np.sum(pred == y[te]))
        n_fit.append(len(tr))
    return correct / len(y), float(np.mean(n_fit))


def participation_ratio(X):
    """Effective dimension (tr S)^2 / tr(S^2) of the standardized features' sample covariance S.

    Equals p for isotropic features and counts the dominant directions of anisotropic (e.g. LLM)
    embeddings.  Computed from the n x n Gram matrix when n < p.  (Biased downward when n is not much
    larger than the effective dimension; a heuristic plug-in, see :func:`real_embedding_stability`.)
    """
    X = np.asarray(X, dtype=float)
    sd = X.std(0)
    sd[sd == 0] = 1.0
    Z = (X - X.mean(0)) / sd
    n = Z.shape[0]
    G = (Z @ Z.T) / n if n < Z.shape[1] else (Z.T @ Z) / n
    return float(np.trace(G) ** 2 / np.sum(G * G))


def estimate_kappa(X, y, lam, *, folds=5, seed=0, kappa_max=20.0, p_eff=None):
    """Signal strength kappa of a labelled embedding matrix through the theory's accuracy relation.

    Estimator: the K-fold cross-validated accuracy ``acc`` of the ridge-logistic probe at ``lam``
    (RAPTOR's objective on train-fold-standardized features, with intercept) is matched to the
    theory's asymptotic test accuracy at the same (delta_fit = n_fit/p, lam):
    kappa_hat solves cgmt.solve(delta_fit, lam, kappa).accuracy = acc (the accuracy is increasing
    in kappa).  acc <= 1/2 gives 0; acc above the theory's value at ``kappa_max`` gives ``kappa_max``.
    ``p_eff``: dimension used by the theory (default the ambient p); the theory is then evaluated at
    delta_fit = n_fit/p_eff and lambda' = lam p_eff/p (the ridge term lam/2 ||w||^2 on standardized
    features equals lam'/(2 p_eff) ||beta||^2 in the p_eff-dimensional isotropic model).
    Returns (kappa_hat, acc, delta_fit).
    """
    import cgmt

    X = np.asarray(X, dtype=float)
    y = _pm1(y)
    if X.ndim != 2 or X.shape[0] != y.size:
        raise ValueError(f"X: need shape (n, p) with n = len(y) = {y.size}, got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X: contains NaN or inf")
    acc, n_fit = _cv_accuracy(X, y, float(lam), folds, seed)
    p_th = X.shape[1] if p_eff is None else float(p_eff)
    d_fit = n_fit / p_th
    lam_th = float(lam) * p_th / X.shape[1]
    if acc <= 0.5:
        return 0.0, acc, d_fit

    def f(k):
        return float(cgmt.solve(d_fit, lam_th, k).accuracy) - acc

    if f(kappa_max) <= 0:
        return float(kappa_max), acc, d_fit
    return float(brentq(f, 0.0, kappa_max, xtol=1e-6)), acc, d_fit


@dataclass
class RealStabilityResult:
    """``table``: one row per layer (layer, n, p, delta, lam, kappa_hat, cv_accuracy, predicted,
    paper_formula, measured); ``correlations``: Spearman and Pearson (with p-values) of the prediction
    and of the paper's formula against the measurement, and the number of layers."""

    table: pd.DataFrame
    correlations: dict = field(default_factory=dict)


def _corr(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return dict(spearman=float("nan"), spearman_p=float("nan"), pearson=float("nan"), pearson_p=float("nan"))
    s = spearmanr(x[ok], y[ok])
    r = pearsonr(x[ok], y[ok])
    return dict(spearman=float(s.statistic), spearman_p=float(s.pvalue), pearson=float(r.statistic),
                pearson_p=float(r.pvalue))


def real_embedding_stability(embeddings, labels, measured, lams, *, drop=0.2, val_fraction=0.2, folds=5,
                             seed=0, layer_names=None, dimension="ambient", progress=True) -> RealStabilityResult:
    """Predicted versus measured RAPTOR ablation stability across layers.

    ``embeddings``: sequence (or (L, N, p) array) of per-layer pools (N x p, raw or standardized);
    ``labels``: (N,) binary labels shared by all layers (or a sequence of per-layer labels);
    ``measured``: per-layer measured stability (``eq:robust_cos_abs``, e.g. from the RAPTOR ablation
    runs); ``lams``: per-layer ridge strength lambda* in RAPTOR's convention (equal to the theory's
    lambda on standardized features), or a scalar.  For each layer: delta = N/p, kappa_hat from
    :func:`estimate_kappa`, prediction ``cgmt.stability.stability(delta, lam, kappa_hat, "subsample")``
    (each run trains on (1-drop)(1-val_fraction) of the pool; pass ``val_fraction=0`` if the runs'
    probes were refit on train cup val).  Correlations are reported as they come out (no selection).

    ``dimension``: "ambient" (the theory's p is the embedding width) or "participation_ratio" (p_eff of
    :func:`participation_ratio`, with delta = N/p_eff and lambda' = lam p_eff/p; a heuristic for
    anisotropic embeddings, whose accuracy the isotropic model at the ambient p cannot reach:
    there kappa_hat saturates at its cap).  On SmolLM2 embeddings the participation ratio (5-35) made the
    prediction worse than the ambient p (docs/stability_theory.md, section 5b); it is kept for reproduction.
    """
    from cgmt.stability import stability

    layers = list(embeddings)
    L = len(layers)
    measured = np.asarray(measured, dtype=float).ravel()
    if measured.size != L:
        raise ValueError(f"measured: need one value per layer ({L}), got {measured.size}")
    lams = np.broadcast_to(np.asarray(lams, dtype=float), (L,)) if np.ndim(lams) == 0 else np.asarray(lams, float)
    if lams.size != L or not np.all(np.isfinite(lams) & (lams > 0)):
        raise ValueError(f"lams: need {L} finite positive values (or one scalar), got {lams}")
    if isinstance(labels, (list, tuple)) and len(labels) == L and np.ndim(labels[0]) == 1:
        ys = list(labels)
    else:
        ys = [labels] * L
    names = list(range(L)) if layer_names is None else list(layer_names)
    rows = []
    for i in tqdm(range(L), disable=not progress, desc="layers"):
        X = np.asarray(layers[i], dtype=float)
        N, p = X.shape
        if dimension == "ambient":
            p_th = float(p)
        elif dimension == "participation_ratio":
            p_th = participation_ratio(X)
        else:
            raise ValueError(f"dimension: must be 'ambient' or 'participation_ratio', got {dimension!r}")
        lam_th = float(lams[i]) * p_th / p
        kappa, acc, d_fit = estimate_kappa(X, ys[i], lams[i], folds=folds, seed=seed, p_eff=p_th)
        r = stability(N / p_th, lam_th, kappa, "subsample", drop=drop, val_fraction=val_fraction)
        rows.append(dict(layer=names[i], n=N, p=p, p_theory=p_th, delta=N / p_th, lam=float(lams[i]),
                         lam_theory=lam_th, kappa_hat=kappa,
                         cv_accuracy=acc, predicted=r.cosine, paper_formula=r.independent_formula,
                         measured=float(measured[i]), theory_success=bool(r.success)))
    tab = pd.DataFrame(rows)
    corr = dict(n_layers=L,
                **{f"predicted_{k}": v for k, v in _corr(tab.predicted, tab.measured).items()},
                **{f"paper_formula_{k}": v for k, v in _corr(tab.paper_formula, tab.measured).items()},
                mean_abs_error=float(np.mean(np.abs(tab.predicted - tab.measured))),
                paper_formula_mean_abs_error=float(np.mean(np.abs(tab.paper_formula - tab.measured))))
    return RealStabilityResult(table=tab, correlations=corr)


def plot_real_embedding_stability(result: RealStabilityResult, ax=None):
    """Measured versus predicted stability per layer (and the paper's formula), with the identity line."""
    import matplotlib

    if ax is None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = (plt.subplots(figsize=(4.2, 4.0)) if ax is None else (ax.figure, ax))
    t = result.table
    c = result.correlations
    ax.plot([0, 1], [0, 1], color="0.6", lw=1)
    ax.scatter(t.predicted, t.measured, color="C0",
               label=f"two-replica theory (Spearman {c['predicted_spearman']:.2f}, Pearson {c['predicted_pearson']:.2f})")
    ax.scatter(t.paper_formula, t.measured, color="k", marker="x",
               label=f"paper formula (Spearman {c['paper_formula_spearman']:.2f}, Pearson {c['paper_formula_pearson']:.2f})")
    ax.set_xlabel("predicted stability")
    ax.set_ylabel("measured stability (mean |cos|)")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def make_stability_figures(out, *, settings=DEFAULT_SETTINGS, lams=None, p=400, replicates=4, runs=3, seed=0,
                           n_jobs=1, progress=True):
    """Simulate (``p``, ``replicates``) and write ``figures/stability_vs_lambda.png`` and
    ``tables/stability_vs_lambda.csv`` under ``out``.  Returns the simulation table."""
    from ._io import save_figure, save_table

    lams = np.logspace(-2, 1, 7) if lams is None else np.asarray(lams, dtype=float)
    sim = pd.concat([simulate_stability(d, k, lams, p, replicates, runs=runs, seed=[seed, i], n_jobs=n_jobs,
                                        progress=progress) for i, (d, k) in enumerate(settings)],
                    ignore_index=True)
    th = pd.concat([stability_curves(d, k, lams) for d, k in settings], ignore_index=True)
    save_table(sim.merge(th, on=["delta", "kappa", "lam"]), out, "stability_vs_lambda")
    save_figure(plot_stability_vs_lambda(settings, np.logspace(-2, 1, 25), sim=sim), out, "stability_vs_lambda")
    return sim


def run(out, *, quick=False, progress=True, n_jobs=1):
    """Section ``stability`` of ``python -m paper_figures``: theory vs simulation for the three protocols
    (``figures/stability_vs_lambda.png``, ``tables/stability_vs_lambda.csv``); ``quick`` shrinks the simulation."""
    return make_stability_figures(out, p=200 if quick else 400, replicates=3 if quick else 6, n_jobs=n_jobs,
                                  progress=progress)
