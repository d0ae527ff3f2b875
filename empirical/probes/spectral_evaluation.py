"""Measure real probes and the theories' predictions of them on one split of one layer (issue: spectral theory).

One call of :func:`evaluate_split` does, on the paper's split (train/val/test 0.6/0.2/0.2, seed = ``seed``):

* truth: RAPTOR's held-out test accuracy at every C of its grid (train-split standardization, intercept,
  exact path solver), its validation-selected C*, the delta-sweep (probes at C* on stratified fractions of
  the pool, tested on the test split) and the ablation stability (K runs of the paper's protocol at the fixed
  C*, mean absolute pairwise cosine of the raw-space concept vectors; ``stability_protocol`` chooses whether
  each run is fitted on its train rows only or, as ``RaptorProbe`` does, refit on its train + validation
  rows);
* predictions from the pool only (train + val; no test label): the spectral theory for every teacher x
  covariance estimator of :mod:`empirical.probes.spectral_prediction`, and the isotropic theory with
  kappa-hat (:func:`empirical.probes.real_embedding.estimate_kappa`, the kappa-hat route).

All fits at a fixed C use lam_theory = 1/(C n) (see :mod:`empirical.probes.spectral_prediction`).
"""
from __future__ import annotations

import numpy as np

import cgmt
from cgmt.ablation import ablation_split, protocol_fractions
from cgmt.spectral import Spectrum

from ..logistic import fit_l2_logistic, logistic_path
from ..validation import check_binary_labels, check_grid, check_matrix, standardize_stats
from .layers import paper_split
from .raptor import DEFAULT_CS, RaptorProbe, select_C
from .real_embedding import estimate_kappa
from .spectral_prediction import (COVARIANCES, TEACHERS, estimate_pool_models, predict_lambda_star, predict_path,
                                  predict_stability, predict_sweep)
from .stability import mean_abs_pairwise_cosine
from .stability import stability as ablation_stability
from .structure import DEFAULT_FRACTIONS, stratified_subsample

__all__ = ["evaluate_split", "semi_synthetic_path", "PATH_CS"]

#: the C grid of the comparison: every 5th point of RAPTOR's default grid (20 values, 1e-4 .. 1e2)
PATH_CS = DEFAULT_CS[::5]


def _std(Htr, *others):
    mu, s = standardize_stats(Htr)
    return ((Htr - mu) / s, *[(H - mu) / s for H in others], s)


def _fit_accuracy(Htr, ytr, Hte, yte, C):
    Xtr, Xte, _ = _std(Htr, Hte)
    res = fit_l2_logistic(Xtr, ytr, C, fit_intercept=True)
    return float(np.mean(yte * (Xte @ res.coef + res.intercept) > 0))


def _train_only_stability(H, y, C, K, rng, drop, val_fraction):
    """The "subsample" protocol: K ablation runs, each fitted at C on its train rows only (no refit on its
    validation rows, unlike ``RaptorProbe``); mean absolute pairwise cosine of the raw-space vectors w / s."""
    vectors = []
    for _ in range(K):
        tr, _ = ablation_split(y, rng, drop=drop, val_fraction=val_fraction)
        mu, s = standardize_stats(H[tr])
        vectors.append(fit_l2_logistic((H[tr] - mu) / s, y[tr], C, fit_intercept=True).coef / s)
    return mean_abs_pairwise_cosine(np.array(vectors))


def _predictions(model, n_train, Cs, fractions, C_star, stability, drop, val_fraction, protocol):
    path = predict_path(model, n_train, Cs)
    pred = {"path": path, "C_star": predict_lambda_star(Cs, path), "kappa": model.kappa,
            "sweep": predict_sweep(model, fractions, C_star)}
    if stability:
        st = predict_stability(model, C_star, protocol=protocol, drop=drop, val_fraction=val_fraction)
        pred["stability"] = st.cosine_raw if st.success else float("nan")
        pred["stability_standardized"] = st.cosine if st.success else float("nan")
    return pred


def evaluate_split(H, y, seed=0, *, Cs=PATH_CS, fractions=DEFAULT_FRACTIONS, sweep_repeats=3, K=20, drop=0.2,
                   val_fraction=0.2, stability=True, stability_protocol="subsample", teachers=TEACHERS,
                   covariances=COVARIANCES) -> dict:
    """Truth and predictions for one layer on one split.

    Parameters
    ----------
    H : ndarray (n, p)
        Raw hidden states of one layer (all prompts of a dataset).
    y : array (n,)
        Binary labels.
    seed : int
        Split seed (``paper_split(random_state=seed)``) and seed of the sweep and ablation draws.
    Cs : array of float
        C grid of the path comparison.
    fractions : array of float
        Pool fractions of the delta-sweep.
    sweep_repeats : int
        Stratified subsamples per fraction.
    K : int
        Ablation runs.
    drop, val_fraction : float
        The ablation protocol.
    stability : bool
        Measure and predict the stability.
    stability_protocol : {"subsample", "subsample_refit"}
        ``"subsample"``: every run is fitted at C* on its train rows only; ``"subsample_refit"``: the runs are
        ``RaptorProbe(Cs=[C*])`` fits, refit on each run's train + validation rows (what RAPTOR does), measured
        with :func:`empirical.probes.stability.stability`.  The prediction uses the same protocol
        (:func:`cgmt.ablation.protocol_fractions`).
    teachers, covariances : sequences of str
        The spectral-predictor variants to evaluate.

    Returns
    -------
    dict
        ``Cs``, ``fractions``, ``n_train``, ``n_pool``, ``p``; truth ``path`` (test accuracy per C),
        ``C_star`` (validation-selected), ``sweep``, ``stability``; predictions ``pred[name]`` with
        ``path``, ``C_star``, ``sweep``, ``stability`` (raw-space cosine), ``kappa`` for every
        ``"spectral/<teacher>/<covariance>"`` and ``"isotropic"``.
    """
    H = check_matrix(H, "H")
    _, ypm = check_binary_labels(y, H.shape[0], "y")
    Cs = check_grid(Cs)
    tr, va, te = paper_split(ypm, random_state=seed)
    pool = np.concatenate([tr, va])
    p = H.shape[1]
    rng = np.random.default_rng(seed)
    # ---- truth
    Xtr, Xva, Xte, _ = _std(H[tr], H[va], H[te])
    test_path = logistic_path(Xtr, ypm[tr], Xte, ypm[te], Cs, certify=False).val_accuracy
    val_path = logistic_path(Xtr, ypm[tr], Xva, ypm[va], Cs).val_accuracy
    C_star = float(Cs[select_C(Cs, val_path)])
    sweep = []
    for f in fractions:
        accs = []
        for _ in range(sweep_repeats):
            sub = pool[stratified_subsample(ypm[pool], int(round(f * pool.size)), rng)]
            accs.append(_fit_accuracy(H[sub], ypm[sub], H[te], ypm[te], C_star))
        sweep.append(np.mean(accs))
    out = {"Cs": Cs, "fractions": np.asarray(fractions, dtype=float), "n_train": tr.size, "n_pool": pool.size,
           "p": p, "path": np.asarray(test_path), "val_path": np.asarray(val_path), "C_star": C_star,
           "sweep": np.array(sweep), "pred": {}}
    if stability_protocol not in ("subsample", "subsample_refit"):
        raise ValueError(f"stability_protocol must be 'subsample' or 'subsample_refit', got {stability_protocol!r}")
    if stability and stability_protocol == "subsample":
        out["stability"] = _train_only_stability(H[pool], ypm[pool], C_star, K, rng, drop, val_fraction)
    elif stability:
        out["stability"] = ablation_stability(RaptorProbe(Cs=[C_star]), H[pool], ypm[pool], K=K, drop=drop,
                                              val_fraction=val_fraction, seed=seed, n_boot=1).robust
    # ---- predictions from the pool only
    for covariance in covariances:
        models = estimate_pool_models(H[pool], ypm[pool], teachers=teachers, covariance=covariance, random_state=seed)
        for teacher, model in models.items():
            out["pred"][f"spectral/{teacher}/{covariance}"] = _predictions(model, tr.size, Cs, fractions, C_star,
                                                                           stability, drop, val_fraction,
                                                                           stability_protocol)
    # isotropic theory, kappa-hat route (kappa from the pool's CV accuracy at the validation-selected ridge)
    lam_star = 1.0 / (C_star * tr.size)
    kappa_hat = estimate_kappa(H[pool], ypm[pool], lam_star, seed=seed)[0]
    iso_path = np.array([cgmt.solve(tr.size / p, 1.0 / (C * tr.size), kappa_hat).accuracy for C in Cs])
    iso = {"path": iso_path, "C_star": predict_lambda_star(Cs, iso_path), "kappa": kappa_hat,
           "sweep": np.array([cgmt.solve(f * pool.size / p, 1.0 / (C_star * f * pool.size), kappa_hat).accuracy
                              for f in fractions])}
    if stability:
        n_run = protocol_fractions(stability_protocol, drop=drop, val_fraction=val_fraction)[0] * pool.size
        st = cgmt.stability(pool.size / p, 1.0 / (C_star * n_run), kappa_hat, stability_protocol, drop=drop,
                            val_fraction=val_fraction)
        iso["stability"] = st.cosine if st.success else float("nan")
    out["pred"]["isotropic"] = iso
    return out


def semi_synthetic_path(H, model, n_train, Cs, *, repeats=10, seed=0) -> dict:
    """Real features, labels from a known logistic teacher: does the theory hold on the features alone?

    The rows of ``H`` (standardized with their own statistics) are the population; labels are drawn from
    P(y = +1 | h) = sigmoid(h'w*) with w* = beta*/sqrt(p) from ``model`` (a :class:`PoolModel`, e.g. the
    layer's estimated teacher).  Probes (train-split standardization, intercept) are fitted on ``n_train``
    random rows at every C; their accuracy is the exact expected accuracy against the teacher's label
    distribution on the remaining rows (no label noise in the measurement).  The prediction is the spectral
    theory with Sigma = the rows' correlation matrix and the same teacher, i.e. exact inputs: a gap here is
    in the features (non-Gaussianity, finite size), not in a teacher estimate or in the real labels.

    Parameters
    ----------
    H : ndarray (n, p)
        Raw hidden states of one layer (all rows).
    model : PoolModel
        Supplies the teacher direction and norm (its ``spectrum.teacher()``, standardized coordinates of its pool).
    n_train : int
    Cs : array of float
    repeats : int
    seed : int

    Returns
    -------
    dict
        ``Cs``, ``measured`` (repeats, len(Cs)), ``predicted`` (len(Cs)), ``kappa``.
    """
    H = check_matrix(H, "H")
    n, p = H.shape
    Z, _ = _std(H)
    w_star = model.spectrum.teacher() / np.sqrt(p)
    logit = Z @ w_star
    prob = 1.0 / (1.0 + np.exp(-logit))
    spectrum = Spectrum.from_covariance(Z.T @ Z / n, model.spectrum.teacher())
    rng = np.random.default_rng(seed)
    Cs = check_grid(Cs)
    measured = np.empty((repeats, Cs.size))
    for r in range(repeats):
        y = np.where(rng.random(n) < prob, 1.0, -1.0)
        perm = rng.permutation(n)
        tr, te = perm[:n_train], perm[n_train:]
        Xtr, Xte, _ = _std(H[tr], H[te])
        w, b = None, 0.0
        for k in np.argsort(Cs):
            res = fit_l2_logistic(Xtr, y[tr], Cs[k], fit_intercept=True, w0=w, b0=b)
            w, b = res.coef, res.intercept
            pos = Xte @ w + b > 0
            measured[r, k] = float(np.mean(np.where(pos, prob[te], 1.0 - prob[te])))
    predicted = np.array([res.accuracy for res in spectrum.solve_path(n_train / p, 1.0 / (Cs * n_train))])
    return {"Cs": Cs, "measured": measured, "predicted": predicted, "kappa": spectrum.kappa}
