"""Per-replicate measurements of every quantity the theory predicts.

Conventions (as in ``cgmt``): z = beta / sqrt(p), v = beta* / ||beta*||, alpha = <z_hat, v>,
sigma = ||z_hat - alpha v||, m = alpha / sigma; the test scores are U = x' beta* = kappa Z and
S = x' beta_hat = alpha Z + sigma W with (Z, W) iid N(0, 1) *exactly* for a fixed beta_hat (x is
Gaussian), so ``accuracy_formula`` (the paper's accuracy proposition at the empirical m) is the exact conditional test
accuracy of the fitted beta_hat, of which ``accuracy`` (fresh test samples) is an unbiased estimate.
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy.linalg import cho_factor, solve_triangular
from scipy.special import expit

import cgmt
from cgmt.ablation import ablation_split
from empirical.common.checks import as_generator, as_seed_sequence
from empirical.common.failures import quiet

from ._data import sample
from ._fit import check_fit_point, fit_ridge_logistic

#: quantities measured by :func:`measure_replicate`, in table order
QUANTITIES = ("alpha", "sigma", "gamma", "margin", "alignment", "accuracy", "accuracy_formula",
              "cos_independent", "cos_subsample", "cos_full_subsample")
CORE_QUANTITIES = ("alpha", "sigma", "gamma", "margin", "alignment", "accuracy", "accuracy_formula")


def loo_gamma(X, y, beta, lam) -> float:
    """Empirical leave-one-out gamma = mean_i x_i' H_{-i}^{-1} x_i.

    H_{-i} = sum_{j != i} w_j x_j x_j' + (lam n / p) I_p with w_j = sigmoid'(x_j' beta_hat): the Hessian of
    n times the theory's objective (1/n) sum loss + lam/(2p)||beta||^2 with observation i left out, in
    beta-coordinates.  In z-coordinates (z = beta/sqrt(p), features sqrt(p) x_i) the Hessian is p times
    larger and the features sqrt(p) times larger, so the number is the same.  With this scaling it is
    the theory's gamma: the leave-one-out margin maps to the full-data margin through
    prox_{gamma rho} (x_i'beta_hat = x_i'beta_hat_{-i} + gamma_i y_i sigmoid(-y_i x_i'beta_hat)), and at
    large lam gamma -> 1/(delta lam), as in equation (3) of the theory.  Computed exactly from
    h_i = x_i' H^{-1} x_i (Cholesky of the p x p Hessian when n >= p, Woodbury in n x n otherwise) and
    Sherman-Morrison, gamma_i = h_i / (1 - w_i h_i).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The training design.
    y : ndarray of shape (n,)
        Its labels in {-1, +1} (not used: the weights w_j do not depend on the labels).
    beta : ndarray of shape (p,)
        The fitted beta_hat.
    lam : float
        The ridge strength of the fit (theory convention).

    Returns
    -------
    float
        The mean of gamma_i over the training rows.

    Examples
    --------
    >>> from sims import fit_ridge_logistic, sample
    >>> data = sample(100, 20, 1.0, 0)
    >>> fit = fit_ridge_logistic(data.X, data.y, 0.1)
    >>> round(loo_gamma(data.X, data.y, fit.coef, 0.1), 4)
    0.7448
    """
    X, y, beta, lam = check_fit_point(X, y, beta, lam)
    n, p = X.shape
    s = X @ beta
    w = expit(s) * expit(-s)
    c = lam * n / p
    if n >= p:
        H = (X.T * w) @ X
        H[np.diag_indices_from(H)] += c
        L, _ = cho_factor(H, lower=True)
        T = solve_triangular(L, X.T, lower=True)
        h = np.einsum("ij,ij->j", T, T)
    else:
        K = X @ X.T
        d = np.sqrt(w)
        B = d[:, None] * K * d[None, :]
        B[np.diag_indices_from(B)] += c
        L, _ = cho_factor(B, lower=True)
        T = solve_triangular(L, d[:, None] * K, lower=True)
        h = (np.diag(K) - np.einsum("ij,ij->j", T, T)) / c
    return float(np.mean(h / (1.0 - w * h)))


def cosine(a, b) -> float:
    """cos(a, b) (NaN if either vector is zero).

    Examples
    --------
    >>> cosine(np.array([1.0, 0.0]), np.array([1.0, 1.0])) ** 2
    0.4999999999999999
    """
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else float("nan")


def _test_accuracy(beta_star, beta_hat, n_test, gen, chunk=2048) -> float:
    p = beta_star.shape[0]
    correct = 0
    done = 0
    while done < n_test:
        m = min(chunk, n_test - done)
        Xt = gen.standard_normal((m, p)) / np.sqrt(p)
        yt = np.where(gen.random(m) < expit(Xt @ beta_star), 1.0, -1.0)
        correct += int(np.sum(np.where(Xt @ beta_hat >= 0, 1.0, -1.0) == yt))
        done += m
    return correct / n_test


@quiet()  # the replicate reports its fits' success itself (``success``, ``max_grad_norm``)
def measure_replicate(delta, lam, kappa, p, seed, *, n_test: int = 4000, stability: bool = True,
                      subsample: bool = True, gamma: bool = True, drop: float = 0.2, val_fraction: float = 0.2,
                      tol: float = 1e-10) -> dict:
    """Simulate one replicate at (delta, lam, kappa, p) and measure every quantity.

    ``seed``: int or ``SeedSequence``; five independent child streams are spawned from it (training data
    with its random teacher, fresh test data, independent training data, ablation runs 1 and 2).
    Returns a dict with keys ``QUANTITIES`` (NaN for those switched off) plus diagnostics ``n``,
    ``max_grad_norm`` and ``success`` (every fit reached ``tol``):

    - alpha, sigma, margin = alpha/sigma, alignment = alpha/sqrt(alpha^2+sigma^2), gamma (:func:`loo_gamma`);
    - accuracy: 0-1 accuracy of sign(x'beta_hat) on ``n_test`` fresh samples from the same teacher;
    - accuracy_formula: ``cgmt.accuracy_from_margin(alpha/sigma, kappa)`` at the empirical alpha, sigma;
    - cos_independent: cos(z_hat, z_hat') for a fit on an independent training set (same n, teacher);
    - cos_subsample: cos between two fits on two ablation runs of the same training set
      (:func:`cgmt.ablation.ablation_split`: drop 20%, stratified 80/20 re-split, train part = 64% of the data);
    - cos_full_subsample: cos between the full fit and the first ablation-run fit.
    All fits use the same theory lambda (the objective's lam/(2p) scaling is per-sample averaged, so
    a subsample fit is the estimator at delta' = n'/p with the same lambda).

    Parameters
    ----------
    delta, lam, kappa : float
        The point (theory convention).
    p : int
        Dimension.
    seed : int or SeedSequence
        The replicate's stream (see above).
    n_test : int, default=4000
        Fresh test samples of ``accuracy``.
    stability, subsample : bool
        Measure the independent-pool cosine / the two ablation cosines.
    gamma : bool
        Measure the leave-one-out gamma (:func:`loo_gamma`, a p x p or n x n Cholesky: the most expensive
        measurement at large p); NaN when False.
    drop, val_fraction : float, default=0.2
        The ablation protocol (:func:`cgmt.ablation.ablation_split`).
    tol : float, default=1e-10
        Gradient tolerance of every fit.

    Returns
    -------
    dict
        The quantities and diagnostics listed above.

    Examples
    --------
    >>> out = measure_replicate(2.0, 0.1, 2.0, 50, 0, n_test=500, stability=False)
    >>> round(out["alpha"], 2) > 0, out["success"]
    (True, True)
    """
    n = int(round(delta * p))
    if n < 2:
        raise ValueError(f"delta * p must be >= 2, got delta={delta}, p={p}")
    ss = as_seed_sequence(seed, "seed")
    s_train, s_test, s_indep, s_ab1, s_ab2 = ss.spawn(5)
    data = sample(n, p, kappa, s_train)
    out = dict.fromkeys(QUANTITIES, float("nan"))
    fit = fit_ridge_logistic(data.X, data.y, lam, tol=tol)
    grad_norms = [fit.grad_norm]
    z = fit.z
    alpha = float(z @ data.v)
    sigma = float(np.linalg.norm(z - alpha * data.v))
    out.update(alpha=alpha, sigma=sigma, margin=alpha / sigma, alignment=alpha / np.hypot(alpha, sigma),
               gamma=loo_gamma(data.X, data.y, fit.coef, lam) if gamma else float("nan"),
               accuracy=_test_accuracy(data.beta_star, fit.coef, n_test, as_generator(s_test)),
               accuracy_formula=float(cgmt.accuracy_from_margin(alpha / sigma, kappa)))
    if stability:
        other = sample(n, p, kappa, s_indep, beta_star=data.beta_star)
        fit2 = fit_ridge_logistic(other.X, other.y, lam, tol=tol)
        grad_norms.append(fit2.grad_norm)
        out["cos_independent"] = cosine(z, fit2.z)
    if subsample:
        runs = ablation_run_fits(data, lam, (s_ab1, s_ab2), drop=drop, val_fraction=val_fraction, tol=tol)
        grad_norms += [f.grad_norm for f in runs]
        zs = [f.z for f in runs]
        out["cos_subsample"] = cosine(zs[0], zs[1])
        out["cos_full_subsample"] = cosine(z, zs[0])
    out["n"] = n
    out["max_grad_norm"] = float(max(grad_norms))
    out["success"] = bool(max(grad_norms) <= tol)
    return out


def ablation_run_fits(data, lam, streams, *, drop: float = 0.2, val_fraction: float = 0.2, tol: float = 1e-10) -> list:
    """Fits on ablation runs of one sample: per stream, the training part of :func:`cgmt.ablation.ablation_split`
    (drop ``drop`` of the rows, stratified re-split, keep the training share) fitted at the same theory lambda.

    Parameters
    ----------
    data : Sample
        The replicate's training sample (:func:`sims.sample`).
    lam : float
        Ridge strength (theory convention).
    streams : sequence of int or SeedSequence
        One stream per run.
    drop, val_fraction : float, default=0.2
        The ablation protocol.
    tol : float, default=1e-10
        Gradient tolerance of every fit.

    Returns
    -------
    list of FitResult
        One fit per stream (:func:`sims.fit_ridge_logistic`), in order.
    """
    fits = []
    for stream in streams:
        idx, _ = ablation_split(data.y, stream, drop=drop, val_fraction=val_fraction)
        fits.append(fit_ridge_logistic(data.X[idx], data.y[idx], lam, tol=tol))
    return fits


def simulate_stability_replicate(delta, lam, kappa, p, seed, *, runs: int = 3, drop: float = 0.2,
                                 val_fraction: float = 0.2) -> dict:
    """One Monte Carlo replicate of the two-replica stability theory: a pool of n = delta p points, its full fit, a
    fit on an independent pool (same teacher), and ``runs`` ablation runs (:func:`ablation_run_fits`).

    Parameters
    ----------
    delta, lam, kappa : float
        The point (theory convention).
    p : int
        Dimension.
    seed : int or SeedSequence
        The replicate's stream (children: pool, independent pool, one per run).
    runs : int, default=3
        Ablation runs (at least 2).
    drop, val_fraction : float, default=0.2
        The ablation protocol.

    Returns
    -------
    dict
        ``cos_independent``, ``cos_subsample`` (mean over the runs' pairs, i.e. the paper's mean absolute
        pairwise cosine without the absolute value, which is immaterial here: all cosines are > 0),
        ``cos_full_subsample`` (mean over runs) and ``max_grad_norm``, the largest gradient norm of the fits.

    Examples
    --------
    >>> rep = simulate_stability_replicate(2.0, 0.1, 2.0, 40, 0, runs=2)
    >>> 0 < rep["cos_subsample"] < 1, rep["max_grad_norm"] < 1e-8
    (True, True)
    """
    if runs < 2:
        raise ValueError(f"runs must be at least 2 ablation runs, got {runs!r}")
    ss = as_seed_sequence(seed, "seed")
    s_pool, s_ind, *s_runs = ss.spawn(2 + runs)
    n = int(round(delta * p))
    pool = sample(n, p, kappa, s_pool)
    other = sample(n, p, kappa, s_ind, beta_star=pool.beta_star)
    full, independent = fit_ridge_logistic(pool.X, pool.y, lam), fit_ridge_logistic(other.X, other.y, lam)
    run_fits = ablation_run_fits(pool, lam, s_runs, drop=drop, val_fraction=val_fraction)
    zr = [f.z for f in run_fits]
    return dict(cos_independent=cosine(full.z, independent.z),
                cos_subsample=float(np.mean([cosine(a, b) for a, b in itertools.combinations(zr, 2)])),
                cos_full_subsample=float(np.mean([cosine(full.z, z) for z in zr])),
                max_grad_norm=float(max(f.grad_norm for f in (full, independent, *run_fits))))
