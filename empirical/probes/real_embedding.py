"""Theory meets real embeddings: signal strength and predicted ablation stability of real hidden states.

Conventions: the theory's (``cgmt``: x ~ N(0, I_p/p), objective (1/n) sum loss + lam/(2p)||beta||^2).
Real hidden states are standardized per coordinate with train statistics, as RAPTOR does, i.e.
h = sqrt(p) x, so the per-sample-averaged ridge objective (1/n) sum loss + lam/2 ||w||^2 on
standardized features has the theory's lambda, and scikit-learn's C (``C sum loss + ||w||^2 / 2``)
corresponds to lambda = 1 / (C n) (:func:`theory_lambda`).  ``delta`` is the pool ratio N/p
(train and validation together).

- :func:`estimate_kappa`: signal strength from cross-validated accuracy through the theory;
- :func:`participation_ratio`: effective dimension of standardized features;
- :func:`real_embedding_stability`: predicted versus measured RAPTOR ablation stability across layers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import log_expit
from scipy.stats import pearsonr, spearmanr
from sklearn.model_selection import StratifiedKFold
from tqdm.auto import tqdm

import cgmt
from cgmt.stability import stability as predicted_stability
from cgmt.validation import check_delta, check_kappa, check_lam
from empirical.common.checks import check_int, check_positive_array, check_scalar

from ..common.arrays import as_real_array, check_binary_labels, check_matrix
from ..common.checks import check_random_state
from ..logistic import fit_l2_logistic
from ..numerics import constant_to_rounding, standardize, standardize_stats

__all__ = ["theory_lambda", "cross_validated_path", "estimate_kappa", "kappa_from_accuracy", "participation_ratio",
           "real_embedding_stability", "RealStabilityResult"]


def theory_lambda(C, n_train) -> float | np.ndarray:
    """The theory's lambda of a probe fitted with scikit-learn's ``C`` on ``n_train`` standardized rows.

    ``C sum_i loss_i + ||w||^2 / 2`` is ``C n`` times ``(1/n) sum_i loss_i + lambda/2 ||w||^2`` with
    ``lambda = 1 / (C n)``.

    Parameters
    ----------
    C : float or array of float
        scikit-learn's inverse ridge strength (> 0), as RaptorProbe's ``C_``.
    n_train : int
        Rows the probe was fitted on.

    Returns
    -------
    float or ndarray
        ``1 / (C n_train)``, an array for array ``C``.

    Examples
    --------
    >>> theory_lambda(0.01, 400)
    0.25
    """
    n_train = check_int(n_train, "n_train")
    if np.ndim(C):
        return 1.0 / (check_positive_array(C, "C") * n_train)
    return 1.0 / (check_scalar(C, "C", low=0.0, low_open=True) * n_train)


def cross_validated_path(X, y, lambdas, folds=5, random_state=0, *, per_row=False) -> tuple:
    """Out-of-fold accuracy and log-loss of the RAPTOR objective along ``lambdas`` (theory convention).

    Each fold standardizes with its own training statistics and fits with an intercept at
    C = 1/(n_fold lam), warm-started from strong to weak ridge.  A score >= 0 predicts +1 (as ``predict``).

    Parameters
    ----------
    X : ndarray (n, p)
        Raw features.
    y : ndarray (n,)
        Labels in {-1, +1}.
    lambdas : array of float > 0
        Ridge strengths in the theory's convention (any order; fitted from the largest down).
    folds : int, default=5
        Stratified folds.
    random_state : int, default=0
        Seed of the stratified folds.
    per_row : bool, default=False
        Also return the out-of-fold correctness of every row (the bootstrap of
        :func:`empirical.probes.estimate_pool_model` resamples it).

    Returns
    -------
    (accuracy, log_loss, n_fit) : (ndarray, ndarray, float)
        Per lambda, the out-of-fold accuracy and mean log-loss; the mean fold training size.  With
        ``per_row=True`` a fourth item: ndarray (n, len(lambdas)) of 0/1, row i correct at lambda k.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.where(np.arange(100) % 2, 1.0, -1.0)
    >>> X = rng.standard_normal((100, 4)) + y[:, None]
    >>> acc, loss, n_fit = cross_validated_path(X, y, [10.0, 0.01])
    >>> bool(acc.min() > 0.8), n_fit
    (True, 80.0)
    """
    random_state = check_random_state(random_state)
    lambdas = np.asarray(lambdas, dtype=float)
    correct = np.zeros((len(y), lambdas.size))
    loss = np.zeros(lambdas.size)
    sizes = []
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=random_state).split(X, y):
        mu, sd = standardize_stats(X[tr])
        Xtr, Xte = standardize(X[tr], mu, sd), standardize(X[te], mu, sd)
        sizes.append(len(tr))
        w, b = None, 0.0
        for k in np.argsort(-lambdas):  # strong to weak ridge, warm-started
            res = fit_l2_logistic(Xtr, y[tr], 1.0 / (len(tr) * lambdas[k]), fit_intercept=True, w0=w, b0=b)
            w, b = res.coef, res.intercept
            score = Xte @ w + b
            correct[te, k] = np.where(score >= 0, 1.0, -1.0) == y[te]
            loss[k] -= np.sum(log_expit(y[te] * score))
    out = (correct.mean(axis=0), loss / len(y), float(np.mean(sizes)))
    return (*out, correct) if per_row else out


def participation_ratio(X) -> float:
    """Effective dimension (tr S)^2 / tr(S^2) of the standardized features' sample covariance S.

    Equals p for isotropic features and counts the dominant directions of anisotropic (e.g. LLM)
    embeddings.  Computed from the n x n Gram matrix when n < p.  (Biased downward when n is not much
    larger than the effective dimension; a heuristic plug-in, see :func:`real_embedding_stability`.)

    Parameters
    ----------
    X : ndarray (n, p)
        Raw or standardized features.

    Returns
    -------
    float
        The participation ratio, in [1, min(n, p)].

    Examples
    --------
    >>> X = np.random.default_rng(0).standard_normal((400, 20))
    >>> round(participation_ratio(X), 1)  # ~ p / (1 + p/n) for isotropic features
    19.1
    """
    X = check_matrix(X, "X")
    mu, sd = standardize_stats(X)
    Z = standardize(X, mu, sd)
    n = Z.shape[0]
    G = (Z @ Z.T) / n if n < Z.shape[1] else (Z.T @ Z) / n
    return float(np.trace(G) ** 2 / np.sum(G * G))


def estimate_kappa(X, y, lam, *, folds=5, seed=0, kappa_max=20.0, p_eff=None) -> tuple[float, float, float]:
    """Signal strength kappa of a labelled embedding matrix through the theory's accuracy relation.

    Estimator: the K-fold cross-validated accuracy ``acc`` of the ridge-logistic probe at ``lam``
    (RAPTOR's objective on train-fold-standardized features, with intercept) is matched to the
    theory's asymptotic test accuracy at the same (delta_fit = n_fit/p, lam):
    kappa_hat solves cgmt.solve(delta_fit, lam, kappa).accuracy = acc (the accuracy is increasing
    in kappa).  acc <= 1/2 gives 0; acc above the theory's value at ``kappa_max`` gives ``kappa_max``.
    ``p_eff``: dimension used by the theory (default the ambient p); the theory is then evaluated at
    delta_fit = n_fit/p_eff and lambda' = lam p_eff/p (the ridge term lam/2 ||w||^2 on standardized
    features equals lam'/(2 p_eff) ||beta||^2 in the p_eff-dimensional isotropic model).

    Parameters
    ----------
    X : ndarray (n, p)
        Raw hidden states of one layer.
    y : array (n,)
        Binary labels.
    lam : float > 0
        Ridge strength in the theory's (= RAPTOR's per-sample) convention.
    folds : int, default=5
        Cross-validation folds.
    seed : int, default=0
        Seed of the folds.
    kappa_max : float, default=20.0
        Cap of the estimate.
    p_eff : float, optional
        Dimension used by the theory (default p).

    Returns
    -------
    (kappa_hat, acc, delta_fit) : (float, float, float)
        The estimate, the cross-validated accuracy it matches and delta_fit = n_fit / p_eff.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.arange(200) % 2
    >>> X = rng.standard_normal((200, 10))
    >>> X[:, 0] += 0.5 * (2 * y - 1)
    >>> kappa_hat, acc, delta_fit = estimate_kappa(X, y, 0.1)
    >>> round(kappa_hat, 2), round(acc, 3), delta_fit
    (1.34, 0.695, 16.0)
    """
    X = check_matrix(X, "X")
    _, y = check_binary_labels(np.asarray(as_real_array(y, "y", labels=True)).ravel(), X.shape[0], "y")
    lam = check_lam(lam)
    folds = check_int(folds, "folds", minimum=2, maximum=X.shape[0])
    seed = check_random_state(seed, "seed")
    kappa_max = check_kappa(kappa_max, "kappa_max")
    if kappa_max == 0.0:
        raise ValueError("kappa_max must be positive (the upper end of the kappa search), got 0.0")
    p_th = X.shape[1] if p_eff is None else check_scalar(p_eff, "p_eff", low=1.0)
    accs, _, n_fit = cross_validated_path(X, y, [lam], folds, seed)
    acc = float(accs[0])
    d_fit = n_fit / p_th
    lam_th = lam * p_th / X.shape[1]
    check_delta(d_fit, "delta_fit = n_fit / p_eff (p_eff too small)")
    check_lam(lam_th, name="lam p_eff / p (the theory's lambda)")
    return kappa_from_accuracy(acc, d_fit, lam_th, kappa_max=kappa_max), acc, d_fit


def kappa_from_accuracy(accuracy, delta, lam, *, kappa_max=20.0) -> float:
    """The kappa at which the isotropic theory's test accuracy at (``delta``, ``lam``) equals ``accuracy``.

    The accuracy of :func:`cgmt.solve` is increasing in kappa, so the root is unique: ``accuracy <= 1/2`` gives 0,
    an accuracy above the theory's at ``kappa_max`` gives ``kappa_max``.

    Parameters
    ----------
    accuracy : float in [0, 1]
        The accuracy to match (e.g. a cross-validated one).
    delta, lam : float
        The theory's n/p and ridge strength (RAPTOR's per-sample convention).
    kappa_max : float, default=20.0
        Cap of the answer.

    Returns
    -------
    float

    Examples
    --------
    >>> k = kappa_from_accuracy(0.8, 2.0, 0.1)
    >>> round(float(cgmt.solve(2.0, 0.1, k).accuracy), 6)
    0.8
    """
    accuracy = check_scalar(accuracy, "accuracy", low=0.0, high=1.0)
    delta, lam = check_delta(delta), check_lam(lam)
    kappa_max = check_kappa(kappa_max, "kappa_max")
    if accuracy <= 0.5 or kappa_max == 0.0:
        return 0.0

    def f(k):
        return float(cgmt.solve(delta, lam, k).accuracy) - accuracy

    if f(kappa_max) <= 0:
        return float(kappa_max)
    return float(brentq(f, 0.0, kappa_max, xtol=1e-6))


@dataclass
class RealStabilityResult:
    """Result of :func:`real_embedding_stability`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per layer: ``layer``, ``n``, ``p``, ``p_theory`` (the p of the theory, see ``dimension``),
        ``delta`` (= n / p_theory), ``lam``, ``lam_theory``, ``kappa_hat``, ``cv_accuracy``, ``predicted``,
        ``paper_formula``, ``measured`` and ``theory_success``.
    correlations : dict
        Spearman and Pearson (with p-values) of the prediction and of the paper's formula against the
        measurement, mean absolute errors, and the number of layers.
    """

    table: pd.DataFrame
    correlations: dict = field(default_factory=dict)


def _corr(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or constant_to_rounding(x[ok]) or constant_to_rounding(y[ok]):
        return dict(spearman=float("nan"), spearman_p=float("nan"), pearson=float("nan"), pearson_p=float("nan"))
    s = spearmanr(x[ok], y[ok])
    r = pearsonr(x[ok], y[ok])
    return dict(spearman=float(s.statistic), spearman_p=float(s.pvalue), pearson=float(r.statistic),
                pearson_p=float(r.pvalue))


def real_embedding_stability(embeddings, labels, measured, lams, *, drop=0.2, val_fraction=0.2, folds=5,
                             seed=0, layer_names=None, dimension="ambient", progress=True) -> RealStabilityResult:
    """Predicted versus measured RAPTOR ablation stability across layers.

    For each layer: delta = N/p, kappa_hat from :func:`estimate_kappa`, prediction
    ``cgmt.stability(delta, lam, kappa_hat, "subsample")`` (each run trains on (1-drop)(1-val_fraction) of the
    pool; pass ``val_fraction=0`` if the runs' probes were refit on train cup val).  Correlations are reported as
    they come out (no selection).

    Parameters
    ----------
    embeddings : sequence of ndarray of shape (N, p), or ndarray of shape (L, N, p)
        Per-layer pools (raw or standardized).
    labels : array of shape (N,), or a sequence of L such arrays
        Binary labels shared by all layers, or per-layer labels.
    measured : array of shape (L,)
        Per-layer measured stability (the mean absolute pairwise cosine of the RAPTOR ablation runs).
    lams : float or array of shape (L,)
        Per-layer ridge strength lambda* in RAPTOR's convention (equal to the theory's lambda on standardized
        features, :func:`theory_lambda`), or one value for every layer; finite and > 0.
    drop, val_fraction : float, default=0.2
        The ablation protocol of the runs (:func:`cgmt.ablation.ablation_split`).
    folds : int, default=5
        Cross-validation folds of :func:`estimate_kappa`.
    seed : int, default=0
        Seed of those folds.
    layer_names : sequence, optional
        The ``layer`` column (default 0 .. L-1).
    dimension : {"ambient", "participation_ratio"}, default="ambient"
        "ambient": the theory's p is the embedding width; "participation_ratio": p_eff of
        :func:`participation_ratio`, with delta = N/p_eff and lambda' = lam p_eff/p (a heuristic for
        anisotropic embeddings, whose accuracy the isotropic model at the ambient p cannot reach: there
        kappa_hat saturates at its cap).  On SmolLM2 embeddings the participation ratio (5-35) made the
        prediction worse than the ambient p (docs/stability_theory.md, section 5b); it is kept for
        reproduction.
    progress : bool, default=True
        Show a progress bar over layers.

    Returns
    -------
    RealStabilityResult
        The per-layer table and the correlations of prediction and paper formula with the measurement.
    """
    seed = check_random_state(seed, "seed")
    layers = list(embeddings)
    L = len(layers)
    measured = np.asarray(measured, dtype=float).ravel()
    if measured.size != L:
        raise ValueError(f"measured must have one value per layer ({L}), got {measured.size}")
    lams = np.broadcast_to(np.asarray(lams, dtype=float), (L,)) if np.ndim(lams) == 0 else np.asarray(lams, float)
    if lams.size != L or not np.all(np.isfinite(lams) & (lams > 0)):
        raise ValueError(f"lams must be {L} finite positive values (or one scalar), got {lams}")
    if isinstance(labels, (list, tuple)) and len(labels) == L and np.ndim(labels[0]) == 1:
        ys = list(labels)
    else:
        ys = [labels] * L
    names = list(range(L)) if layer_names is None else list(layer_names)
    rows = []
    for i in tqdm(range(L), disable=not progress, desc="layers"):
        X = check_matrix(layers[i], f"embeddings[{i}]")
        N, p = X.shape
        check_binary_labels(np.asarray(ys[i]).ravel(), N, "labels")
        if dimension == "ambient":
            p_th = float(p)
        elif dimension == "participation_ratio":
            p_th = participation_ratio(X)
        else:
            raise ValueError(f"dimension must be 'ambient' or 'participation_ratio', got {dimension!r}")
        lam_th = float(lams[i]) * p_th / p
        kappa, acc, d_fit = estimate_kappa(X, ys[i], lams[i], folds=folds, seed=seed, p_eff=p_th)
        r = predicted_stability(N / p_th, lam_th, kappa, "subsample", drop=drop, val_fraction=val_fraction)
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
