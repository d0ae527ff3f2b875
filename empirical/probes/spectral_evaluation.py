"""Measure real probes and the theories' predictions of them on one split of one layer (issue: spectral theory).

One call of :func:`evaluate_split` does, on the paper's split (train/val/test 0.6/0.2/0.2, seed = ``seed``):

* truth: RAPTOR's held-out test accuracy at every C of its grid (train-split standardization, intercept,
  exact path solver), its validation-selected C*, the delta-sweep (probes at C* on stratified fractions of
  the pool, tested on the test split) and the ablation stability (K runs of the paper's protocol, mean
  absolute pairwise cosine of the raw-space concept vectors; ``stability_protocol`` chooses the protocol:
  ``"raptor"`` is the one RESULTS.md reports, ``RaptorProbe()`` runs that re-select C on their own validation
  rows and refit on train + validation; ``"subsample_refit"`` the same runs at the fixed C*;
  ``"subsample"`` runs at C* fitted on their train rows only);
* predictions from the pool only (train + val; no test label): the spectral theory for every teacher x
  covariance estimator of :mod:`empirical.probes._spectral_prediction`, the isotropic theory with
  kappa-hat (:func:`empirical.probes.real_embedding.estimate_kappa`, the kappa-hat route), and the trivial
  predictor ``"pool_cv"`` (:func:`pool_cv_prediction`): the pool's own cross-validated accuracy at the
  same training size and C, the baseline a theory fitted to that accuracy has to beat.

All fits at a fixed C use lam_theory = 1/(C n) (see :mod:`empirical.probes._spectral_prediction`).
"""
from __future__ import annotations

import numpy as np

import cgmt
from cgmt import Spectrum
from cgmt.ablation import ablation_split, protocol_fractions
from cgmt.validation import check_fraction
from empirical.common.checks import as_generator, check_int, check_real_array, check_seed

from ..common.arrays import check_binary_labels, check_grid, check_matrix
from ..common.checks import MAX_SEED
from ..logistic import fit_l2_logistic, logistic_path
from ..numerics import standardize, standardize_stats
from ._layers import paper_split
from ._raptor import DEFAULT_CS, RaptorProbe, select_C
from ._spectral_prediction import (
    COVARIANCES,
    TEACHERS,
    estimate_pool_models,
    predict_lambda_star,
    predict_path,
    predict_stability,
    predict_sweep,
)
from ._stability import mean_abs_pairwise_cosine, stability as ablation_stability
from .real_embedding import cross_validated_path, estimate_kappa
from .structure import DEFAULT_FRACTIONS, stratified_subsample

__all__ = ["evaluate_split", "pool_cv_prediction", "semi_synthetic_path", "PATH_CS", "STABILITY_PROTOCOLS"]

#: the C grid of the comparison: every 5th point of RAPTOR's default grid (20 values, 1e-4 .. 1e2)
PATH_CS = DEFAULT_CS[::5]
#: measured protocol -> the :func:`cgmt.ablation.protocol_fractions` protocol the theories predict it with
#: (``"raptor"`` re-selects C in every run, which no fixed-point theory models: it is predicted at the split's C*)
STABILITY_PROTOCOLS = {"subsample": "subsample", "subsample_refit": "subsample_refit", "raptor": "subsample_refit"}


def _std(Htr, *others):
    mu, s = standardize_stats(Htr)
    return (standardize(Htr, mu, s), *[standardize(H, mu, s) for H in others], s)


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
        vectors.append(fit_l2_logistic(standardize(H[tr], mu, s), y[tr], C, fit_intercept=True).coef / s)
    return mean_abs_pairwise_cosine(np.array(vectors))


def pool_cv_prediction(H_pool, y_pool, n_train, Cs, fractions, C, *, repeats=3, seed=0) -> dict:
    """The trivial predictor ``"pool_cv"``: the pool's own cross-validated accuracy at the target sizes.

    Along C: the out-of-fold accuracy of RAPTOR's objective at every C on folds of the pool whose training
    part has (about) ``n_train`` rows: ``round(N / (N - n_train))`` stratified folds (4 for the paper's split,
    whose pool is 4/3 of its train split, so every fold trains on exactly ``n_train`` rows), at the same
    theory ridge lam = 1/(C n_train) (:func:`empirical.probes.real_embedding.cross_validated_path`).  Along the
    delta-sweep: for each fraction f, ``repeats`` stratified subsamples of round(f N) pool rows, each fitted at
    ``C`` and tested on the pool rows it left out.  The predictions are measured at the same training sizes
    as the truth, so nothing needs interpolating; only the evaluation rows differ (the rest of the pool
    instead of the test split).

    Parameters
    ----------
    H_pool : ndarray (N, p)
        Raw hidden states of the pool (train + validation).
    y_pool : array (N,)
        Binary labels.
    n_train : int
        Training size of the probe whose path is predicted (``0 < n_train < N``).
    Cs : array of float
        C grid of the path.
    fractions : array of float in (0, 1)
        Pool fractions of the delta-sweep (each must leave pool rows out to test on).
    C : float
        C of the delta-sweep.
    repeats : int
        Subsamples per fraction.
    seed : int
        Seed of the folds and subsamples.

    Returns
    -------
    dict
        ``path`` (per C), ``C_star`` (RAPTOR's tie-break on the path), ``sweep`` (per fraction), ``folds``.

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> H, y, _, _ = synthetic_hidden_states(400, 0, 10, shift=1.0, seed=0)
    >>> r = pool_cv_prediction(H, y, 300, [0.01, 1.0], [0.3, 0.6], 1.0)
    >>> r["folds"], r["path"].shape, r["sweep"].shape
    (4, (2,), (2,))
    """
    H = check_matrix(H_pool, "H_pool")
    _, y_signed = check_binary_labels(y_pool, H.shape[0], "y_pool")
    seed = check_seed(seed, "seed", maximum=MAX_SEED)  # the folds' scikit-learn random_state and the subsamples'
    N = H.shape[0]
    n_train = check_int(n_train, "n_train", minimum=1)
    if n_train >= N:
        raise ValueError(f"n_train must be smaller than the pool ({N} rows), got {n_train}")
    Cs = np.asarray(check_grid(Cs, "Cs"), dtype=float)
    fractions = np.asarray(fractions, dtype=float)
    if not np.all((fractions > 0) & (fractions * N <= N - 1)):
        raise ValueError(f"fractions must lie in (0, {1 - 1 / N:.4g}] (the pool_cv predictor tests on the pool rows a "
                         f"subsample leaves out), got {fractions.tolist()}")
    folds = max(2, int(round(N / (N - n_train))))
    path = cross_validated_path(H, y_signed, 1.0 / (Cs * n_train), folds, seed)[0]
    rng = np.random.default_rng(seed)
    sweep = []
    for f in fractions:
        accs = []
        for _ in range(repeats):
            sub = stratified_subsample(y_signed, int(round(f * N)), rng)
            rest = np.setdiff1d(np.arange(N), sub)
            accs.append(_fit_accuracy(H[sub], y_signed[sub], H[rest], y_signed[rest], C))
        sweep.append(np.mean(accs))
    return {"path": np.asarray(path), "C_star": predict_lambda_star(Cs, path), "kappa": float("nan"),
            "sweep": np.array(sweep), "folds": folds}


def _predictions(model, n_train, Cs, fractions, C_star, stability, drop, val_fraction, protocol):
    path = predict_path(model, n_train, Cs)
    pred = {"path": path, "C_star": predict_lambda_star(Cs, path), "kappa": model.kappa,
            "sweep": predict_sweep(model, fractions, C_star)}
    if stability:
        st = predict_stability(model, C_star, protocol=protocol, drop=drop, val_fraction=val_fraction)
        pred["stability"] = st.cosine_raw if st.success else float("nan")
        pred["stability_standardized"] = st.cosine if st.success else float("nan")
    return pred


#: Most repeats (``sweep_repeats``) and ablation runs (``K``) of one :func:`evaluate_split` (each is a fit).
MAX_REPEATS = 10_000


def _names_in(values, name, known) -> tuple:
    """``values`` (a name or a sequence of names) as a non-empty tuple of names from ``known``."""
    values = (values,) if isinstance(values, str) else values
    try:
        values = tuple(values)
    except TypeError:
        values = (values,)
    if not values or any(not isinstance(v, str) or v not in known for v in values):
        raise ValueError(f"{name} must be a non-empty sequence of {known}, got {values!r}"[:300])
    return values

def evaluate_split(H, y, seed=0, *, Cs=PATH_CS, fractions=DEFAULT_FRACTIONS, sweep_repeats=3, K=20, drop=0.2,
                   val_fraction=0.2, stability=True, stability_protocol="subsample", teachers=TEACHERS,
                   covariances=COVARIANCES, pool_cv=True) -> dict:
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
    stability_protocol : {"subsample", "subsample_refit", "raptor"}
        ``"subsample"``: every run is fitted at C* on its train rows only; ``"subsample_refit"``: the runs are
        ``RaptorProbe(Cs=[C*])`` fits, refit on each run's train + validation rows, measured with
        :func:`empirical.probes.stability`; ``"raptor"``: the runs are ``RaptorProbe()`` fits that
        re-select C on their own validation rows (the stability RESULTS.md reports:
        ``stability(RaptorProbe(), pool, K=K, seed=0)``).  The theories predict ``"raptor"`` with the
        ``"subsample_refit"`` fractions at the split's C* (:data:`STABILITY_PROTOCOLS`): the per-run
        re-selection of C is not modelled.
    teachers, covariances : sequences of str
        The spectral-predictor variants to evaluate.
    pool_cv : bool
        Add the trivial predictor ``pred["pool_cv"]`` (:func:`pool_cv_prediction`; no stability).

    Returns
    -------
    dict
        ``Cs``, ``fractions``, ``n_train``, ``n_pool``, ``p``; truth ``path`` (test accuracy per C),
        ``C_star`` (validation-selected), ``sweep``, ``stability``; predictions ``pred[name]`` with
        ``path``, ``C_star``, ``sweep``, ``stability`` (raw-space cosine), ``kappa`` for every
        ``"spectral/<teacher>/<covariance>"`` and ``"isotropic"``, and ``path``, ``C_star``, ``sweep`` for
        ``"pool_cv"``; ``stability_protocol``; with ``"raptor"`` also ``stability_fixed_C``, the same runs
        (same rows) at the fixed C* (``RaptorProbe(Cs=[C*])``), the protocol the theories model.
    """
    H = check_matrix(H, "H")
    _, y_signed = check_binary_labels(y, H.shape[0], "y", rows="H")
    Cs = check_grid(Cs)
    seed = check_int(seed, "seed", minimum=0, maximum=MAX_SEED)
    fractions = check_real_array(fractions, "fractions").ravel()
    if fractions.size == 0 or np.any(fractions <= 0) or np.any(fractions > 1):
        raise ValueError(f"fractions must be a non-empty list of shares of the pool in (0, 1], got {fractions!r}")
    sweep_repeats = check_int(sweep_repeats, "sweep_repeats", maximum=MAX_REPEATS)
    K = check_int(K, "K", minimum=2, maximum=MAX_REPEATS)
    drop, val_fraction = check_fraction(drop, "drop"), check_fraction(val_fraction, "val_fraction")
    teachers, covariances = (_names_in(v, name, known) for v, name, known in
                             ((teachers, "teachers", TEACHERS), (covariances, "covariances", COVARIANCES)))
    if not isinstance(stability_protocol, str) or stability_protocol not in STABILITY_PROTOCOLS:
        raise ValueError(f"stability_protocol must be one of {sorted(STABILITY_PROTOCOLS)}, got {stability_protocol!r}")
    tr, va, te = paper_split(y_signed, random_state=seed)
    pool = np.concatenate([tr, va])
    p = H.shape[1]
    rng = np.random.default_rng(seed)
    # ---- truth
    Xtr, Xva, Xte, _ = _std(H[tr], H[va], H[te])
    test_path = logistic_path(Xtr, y_signed[tr], Xte, y_signed[te], Cs, certify=False).val_accuracy
    val_path = logistic_path(Xtr, y_signed[tr], Xva, y_signed[va], Cs).val_accuracy
    C_star = float(Cs[select_C(Cs, val_path)])
    sweep = []
    for f in fractions:
        accs = []
        for _ in range(sweep_repeats):
            sub = pool[stratified_subsample(y_signed[pool], int(round(f * pool.size)), rng)]
            accs.append(_fit_accuracy(H[sub], y_signed[sub], H[te], y_signed[te], C_star))
        sweep.append(np.mean(accs))
    out = {"Cs": Cs, "fractions": np.asarray(fractions, dtype=float), "n_train": tr.size, "n_pool": pool.size,
           "p": p, "path": np.asarray(test_path), "val_path": np.asarray(val_path), "C_star": C_star,
           "sweep": np.array(sweep), "stability_protocol": stability_protocol, "pred": {}}
    if stability and stability_protocol == "subsample":
        out["stability"] = _train_only_stability(H[pool], y_signed[pool], C_star, K, rng, drop, val_fraction)
    elif stability and stability_protocol == "subsample_refit":
        out["stability"] = ablation_stability(RaptorProbe(Cs=[C_star]), H[pool], y_signed[pool], K=K, drop=drop,
                                              val_fraction=val_fraction, seed=seed, n_boot=1).mean_abs_cos
    elif stability:  # "raptor": exactly the runs of RESULTS.md's stability tables (seed 0 of the protocol)
        out["stability"] = ablation_stability(RaptorProbe(), H[pool], y_signed[pool], K=K, drop=drop,
                                              val_fraction=val_fraction, seed=0, n_boot=1).mean_abs_cos
        # the same runs at the fixed C*: what the theory models; the difference is the cost of re-selecting C
        out["stability_fixed_C"] = ablation_stability(RaptorProbe(Cs=[C_star]), H[pool], y_signed[pool], K=K, drop=drop,
                                                      val_fraction=val_fraction, seed=0, n_boot=1).mean_abs_cos
    theory_protocol = STABILITY_PROTOCOLS[stability_protocol]
    if pool_cv:
        out["pred"]["pool_cv"] = pool_cv_prediction(H[pool], y_signed[pool], tr.size, Cs, fractions, C_star,
                                                    repeats=sweep_repeats, seed=seed)
    # ---- predictions from the pool only
    for covariance in covariances:
        models = estimate_pool_models(H[pool], y_signed[pool], teachers=teachers, covariance=covariance,
                                      random_state=seed)
        for teacher, model in models.items():
            out["pred"][f"spectral/{teacher}/{covariance}"] = _predictions(model, tr.size, Cs, fractions, C_star,
                                                                           stability, drop, val_fraction,
                                                                           theory_protocol)
    # isotropic theory, kappa-hat route (kappa from the pool's CV accuracy at the validation-selected ridge)
    lam_star = 1.0 / (C_star * tr.size)
    kappa_hat = estimate_kappa(H[pool], y_signed[pool], lam_star, seed=seed)[0]
    iso_path = np.array([cgmt.solve(tr.size / p, 1.0 / (C * tr.size), kappa_hat).accuracy for C in Cs])
    iso = {"path": iso_path, "C_star": predict_lambda_star(Cs, iso_path), "kappa": kappa_hat,
           "sweep": np.array([cgmt.solve(f * pool.size / p, 1.0 / (C_star * f * pool.size), kappa_hat).accuracy
                              for f in fractions])}
    if stability:
        n_run = protocol_fractions(theory_protocol, drop=drop, val_fraction=val_fraction)[0] * pool.size
        st = cgmt.stability(pool.size / p, 1.0 / (C_star * n_run), kappa_hat, theory_protocol, drop=drop,
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
        Rows each probe is fitted on (the rest are its test rows); also the n of the prediction
        (delta = n_train / p, lambda = 1 / (C n_train)).
    Cs : array of float
        The grid of C (scikit-learn's convention on standardized features).
    repeats : int, default=10
        Label draws and random training sets.
    seed : int, default=0
        Seed of the labels and the training sets.

    Returns
    -------
    dict
        ``Cs``, ``measured`` (repeats, len(Cs)), ``predicted`` (len(Cs)), ``kappa``.
    """
    H = check_matrix(H, "H")
    rng = as_generator(seed, "seed")
    n, p = H.shape
    Z, _ = _std(H)
    w_star = model.spectrum.teacher() / np.sqrt(p)
    logit = Z @ w_star
    prob = 1.0 / (1.0 + np.exp(-logit))
    spectrum = Spectrum.from_covariance(Z.T @ Z / n, model.spectrum.teacher())
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
