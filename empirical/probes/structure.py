"""Delta-sweep structure predictor (the paper's delta-sweep experiment and its appendix on validating the
structural predictions).

For a fixed representation (p fixed), sweep delta = n/p by stratified subsampling of a training pool,
train the RAPTOR probe at an inverse ridge strength C fixed in advance (default: the C that a
validation-tuned ``RaptorProbe`` selects on the pool; never chosen on the sweep's test accuracies) and
compare its held-out accuracy ``Acc_true`` with a prediction ``Acc_pred`` built from the proportional
theory's test-score structure (the paper's accuracy proposition: the test accuracy of sign(S) as a
function of the margin m = alpha/sigma).  The prediction uses the pool's labels (they train the oracle
and the probes) and the held-out features, never the held-out labels:

1. Oracle score U.  A cross-fitted auxiliary classifier (default: ``RaptorProbe`` with its own
   validation-tuned ridge) is trained with K-fold cross-fitting on the pool: pool points get their
   out-of-fold score, held-out points the average of the K fold models' scores.  U is then Platt-
   calibrated on the pool (1-D logistic regression of y on the out-of-fold score), so that
   P(y = +1 | U) = sigmoid(U): U plays the role of the teacher score U = x'beta* of the theory.
2. Calibration of the probe.  The theory's held-out scores satisfy S = (alpha/kappa) U + sigma W with W
   independent of U.  On the subsample we regress the probe score S on U by least squares,
   S ~ a U + b, and take the residual standard deviation as sigma, floored at
   ``sigma_floor * sd(S)`` (scale-free; guards against a degenerate zero-residual fit).  The probe
   score used for this regression is chosen by ``score_source``: "crossfit" (default; K-fold
   out-of-fold scores of probes refit on the rest of the subsample at the same C, so they follow
   the held-out score distribution, as the theory's S does), "insample" (the literal reading of
   the paper: scores of the probe on its own training points, optimistic because training scores
   are prox-shifted towards the labels), or "heldout" (S and U on the held-out features; no
   held-out labels are used).
3. Closed form.  With y | U ~ sigmoid(U) and S | U ~ N(aU + b, sigma^2), the accuracy of sign(S) is
       Acc_pred = mean_j [ sigmoid(U_j) Phi((a U_j + b)/sigma) + sigmoid(-U_j) Phi(-(a U_j + b)/sigma) ]
   with the mean over the held-out points' U_j (the empirical U distribution replaces the Gaussian
   U = kappa Z).  With b = 0 and U ~ N(0, kappa^2) this is exactly the accuracy proposition with
   m = a kappa / sigma (= alpha/sigma in the corrected convention; ``cgmt.accuracy_from_margin``).

Naive baseline (``Acc_baseline``): a learning curve.  The K-fold cross-fit of step 2 also gives each
subsample's out-of-fold accuracy at training size n (K-1)/K; a power law acc(n) = a - b n^(-c)
(:func:`fit_power_law`; Cortes et al. 1994, Hestness et al. 2017, the survey of Viering & Loog 2022) is
fitted to those pool-internal accuracies of all subsamples at one C and read off at each subsample size.
It uses the same pool labels as the predictor and no theory: the predictor is worth its theory where it
beats this curve.

Pure-theory column (``theory=True``): ``Acc_theory = cgmt.solve(delta, 1/(C n), kappa_hat).accuracy``
with kappa_hat = sd(U) on the held-out set: the Gaussian-design fixed point at the sweep's delta, where
delta enters explicitly.  (A probe with scikit-learn's C on standardized features minimises
C sum loss + ||w||^2/2; with x_theory = x_std/sqrt(p) and beta = sqrt(p) w this is the theory's
objective times C n, so lambda_theory = 1/(C n).)

Where delta enters the calibrated predictor: only through the probe trained on n = delta p points; (a, b, sigma) are the
finite-sample counterparts of (alpha/kappa, 0, sigma) at that delta, which the theory says are
(asymptotically) functions of (delta, lambda, kappa) alone.  Correlations along the sweep are
computed on the seed-averaged accuracies of the fractions (6 points, as in the paper's table, whose
Spearman values are those of 6 points), and also over all (fraction, seed) points.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy.optimize import least_squares
from scipy.special import expit, ndtr
from scipy.stats import pearsonr, spearmanr
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from tqdm.auto import tqdm

import cgmt
from empirical.common.checks import MAX_SEED, as_generator, check_int, check_random_state, check_scalar, check_seed
from empirical.common.resources import check_n_jobs

from ..common.arrays import as_real_array, check_binary_labels, check_grid, check_matrix, check_vector
from ..numerics import PAPER_SPLIT_SEED, constant_to_rounding
from ._curve_families import check_curve_points
from ._raptor import RaptorProbe

__all__ = ["delta_sweep", "StructureResult", "predicted_accuracy", "calibrate_scores", "fixed_C", "fit_power_law",
           "PowerLaw", "cross_fit_oracle", "stratified_subsample", "DEFAULT_FRACTIONS", "DEFAULT_CS", "MAX_SEEDS"]

DEFAULT_FRACTIONS = (0.1, 0.2, 0.3, 0.45, 0.65, 0.9)
#: a diagnostic grid (``delta_sweep(Cs=DEFAULT_CS)``); the reported setting is the fixed C (:func:`fixed_C`)
DEFAULT_CS = tuple(np.logspace(-4, 2, 7))
#: most subsamples per fraction :func:`delta_sweep` draws (each is a full grid of fits; the correlations are stable
#: with a handful)
MAX_SEEDS = 1000


@dataclass
class StructureResult:
    """Result of :func:`delta_sweep`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (fraction, seed, C): Acc_true, Acc_pred (and Acc_theory), the calibration (a, b, sigma).
    summary : pandas.DataFrame
        One row per C: Spearman ``rho_s``, Pearson ``r`` and mean absolute error ``mae`` along the sweep (on
        the seed-averaged fractions), the same for the power-law baseline (``baseline_rho_s``,
        ``baseline_r``, ``baseline_mae``), and over all (fraction, seed) points.
    fixed : dict
        The summary row at the C fixed in advance: ``C``, ``lam`` (= 1/C, the paper's lambda convention),
        ``C_source`` (``"pool"``: selected by ``RaptorProbe`` on the pool's own validation split;
        ``"given"``), ``rho_s``, ``r``, ``mae``, ``baseline_rho_s``, ``baseline_r``, ``baseline_mae``.
        No C is ever chosen by its agreement on the sweep.
    oracle : dict
        Diagnostics of the cross-fitted oracle.
    """

    table: pd.DataFrame
    summary: pd.DataFrame
    fixed: dict
    oracle: dict = field(default_factory=dict)


@dataclass(frozen=True)
class PowerLaw:
    """A learning curve acc(n) = a - b (n / n_scale)^(-c) (returned by :func:`fit_power_law`).

    Parameters
    ----------
    a : float
        The asymptote (accuracy as n -> infinity), in [0, 1] when fitted.
    b : float
        The gap to the asymptote at n = n_scale (>= 0 when fitted).
    c : float
        The exponent (in (0, c_max] when fitted).
    n_scale : float
        The size the curve is scaled by (the largest training size of the fit).

    Examples
    --------
    >>> curve = PowerLaw(a=0.9, b=0.2, c=1.0, n_scale=100.0)
    >>> curve([100, 200]).round(3).tolist()
    [0.7, 0.8]
    """

    a: float
    b: float
    c: float
    n_scale: float

    def __call__(self, n):
        """The curve at training sizes ``n``."""
        return self.a - self.b * (np.asarray(n, dtype=float) / self.n_scale) ** (-self.c)


def fit_power_law(n, accuracy, *, c_max: float = 3.0, asymptote: float | None = None) -> PowerLaw:
    """Least-squares power-law learning curve acc(n) = a - b n^(-c), b >= 0, 0 < c <= ``c_max``.

    The classical learning-curve model (Cortes et al., NeurIPS 1994; Hestness et al., arXiv:1712.00409,
    2017; survey: Viering & Loog, IEEE TPAMI 2022): accuracy rises to an asymptote a at a power-law
    rate.  b >= 0 makes the curve non-decreasing, so a flat or noisy curve gives b ~ 0 and a constant
    prediction (its mean); a in [0, 1].  Sizes are scaled by their largest value (conditioning).
    Several starts in c; the best least-squares fit wins.

    Parameters
    ----------
    n : array of float > 0
        Training sizes (repeats allowed).
    accuracy : array of float
        Accuracy at each size.
    c_max : float, default=3.0
        Largest exponent.
    asymptote : float in [0, 1], optional
        Fix the asymptote instead of fitting it: ``a = max(asymptote, max(accuracy))`` (a ceiling from elsewhere,
        e.g. the theory's, :func:`empirical.probes.learning_curves.theory_ceiling`; never below a measured point),
        and fit b and c only.

    Returns
    -------
    PowerLaw
        The fitted curve (``n_scale`` = the largest size).

    Examples
    --------
    >>> n = np.array([50, 100, 200, 400, 800])
    >>> law = fit_power_law(n, 0.9 - 2.0 * n ** -0.5)
    >>> round(law.a, 3), round(float(law(1600)), 3)
    (0.9, 0.85)
    """
    n, acc = check_curve_points(n, accuracy, 3 if asymptote is None else 2, "a power law")
    c_max = check_scalar(c_max, "c_max", low=1e-3, low_open=True)
    scale = float(n.max())
    x = n / scale
    if asymptote is not None:
        fixed = max(check_scalar(asymptote, "asymptote", low=0.0, high=1.0), float(acc.max()))

        def resid(theta):
            b, c = theta
            return fixed - b * x ** (-c) - acc
    else:
        def resid(theta):
            a, b, c = theta
            return a - b * x ** (-c) - acc

    best = None
    lo, hi = [0.0, 0.0, 1e-3], [1.0, np.inf, float(c_max)]
    for c0 in (0.2, 0.6, 1.5):
        b0 = max(float(np.ptp(acc)), 1e-3) * (x.min() ** c0)
        start = [float(np.clip(acc.max(), 0.0, 1.0)), b0, min(c0, c_max)]
        if asymptote is not None:  # the gap to the fixed ceiling at the smallest size starts b
            start, lo_, hi_ = [max(fixed - float(acc.min()), 1e-3) * x.min() ** c0, min(c0, c_max)], lo[1:], hi[1:]
        else:
            lo_, hi_ = lo, hi
        res = least_squares(resid, start, bounds=(lo_, hi_))
        if best is None or res.cost < best.cost:
            best = res
    if asymptote is not None:
        (b, c), a = (float(v) for v in best.x), fixed
    else:
        a, b, c = (float(v) for v in best.x)
    return PowerLaw(a=a, b=b, c=c, n_scale=scale)


def fixed_C(X_pool, y_pool, *, random_state: int = PAPER_SPLIT_SEED) -> float:
    """The C the structure predictor is reported at: RAPTOR's validation-selected C on the pool.

    ``RaptorProbe(random_state=random_state)`` is fitted on the pool (its own stratified 80/20
    train/validation split of the pool, default 100-point grid); its selected ``C_`` is returned.
    Only pool rows enter, so the C is fixed before any held-out row is looked at.

    Parameters
    ----------
    X_pool, y_pool : ndarray (N, p), array (N,)
        The training pool (raw features).
    random_state : int
        Seed of RAPTOR's validation split.

    Returns
    -------
    float
    """
    X = check_matrix(X_pool, "X_pool")
    check_binary_labels(y_pool, X.shape[0], "y_pool")
    return float(RaptorProbe(random_state=random_state).fit(X, np.asarray(y_pool).ravel()).C_)


def _pm1(y, classes):
    return np.where(np.asarray(y) == classes[1], 1.0, -1.0)


def _check_inputs(X_pool, y_pool, X_test, y_test):
    X_pool = check_matrix(X_pool, "X_pool")
    X_test = check_matrix(X_test, "X_test")
    if X_pool.shape[1] != X_test.shape[1]:
        raise ValueError(f"X_test must have p = {X_pool.shape[1]} columns like X_pool, got {X_test.shape[1]}")
    classes, _ = check_binary_labels(y_pool, X_pool.shape[0], "y_pool")
    check_binary_labels(y_test, X_test.shape[0], "y_test", classes=classes)
    return X_pool, np.asarray(y_pool).ravel(), X_test, np.asarray(y_test).ravel(), classes


def stratified_subsample(y, n: int, rng) -> np.ndarray:
    """n indices drawn without replacement, class proportions preserved (largest-remainder rounding),
    at least one example of each class.

    Parameters
    ----------
    y : array (N,)
        Labels.
    n : int
        Subsample size, 2 <= n <= N.
    rng : int, SeedSequence or Generator
        Randomness (``np.random.default_rng(rng)``).

    Returns
    -------
    ndarray of int
        Sorted indices.

    Examples
    --------
    >>> stratified_subsample(np.array([0, 0, 0, 0, 1, 1, 1, 1]), 4, 0).size
    4
    """
    y = np.asarray(as_real_array(y, "y", labels=True))
    if y.ndim != 1 or y.size < 2:
        raise ValueError(f"y must be a 1-D array of at least 2 labels, got shape {y.shape}")
    gen = as_generator(rng)
    classes, counts = np.unique(y, return_counts=True)
    n = check_int(n, "n", minimum=2)
    if n > y.size:
        raise ValueError(f"n (the subsample size) must be at most the {y.size} labels of y, got {n}")
    exact = counts * n / y.size
    take = np.maximum(np.floor(exact).astype(int), 1)
    while take.sum() < n:
        take[np.argmax(exact - take)] += 1
    while take.sum() > n:
        take[np.argmax(take)] -= 1
    idx = [gen.choice(np.flatnonzero(y == c), size=k, replace=False) for c, k in zip(classes, take)]
    return np.sort(np.concatenate(idx))


def _decision(est, X):
    s = np.asarray(est.decision_function(X), dtype=float)
    return s.ravel()


def cross_fit_oracle(X_pool, y_pool, X_test, oracle, *, folds: int = 5,
                     random_state=0) -> tuple[np.ndarray, np.ndarray, dict]:
    """K-fold cross-fitted, Platt-calibrated oracle logits (U_pool out-of-fold, U_test fold-averaged).

    Parameters
    ----------
    X_pool, y_pool : ndarray (N, p), array (N,)
        The training pool.
    X_test : ndarray (m, p)
        Held-out rows.
    oracle : classifier
        Unfitted classifier with ``decision_function`` (cloned per fold).
    folds : int, default=5
        Stratified folds.
    random_state : int, default=0
        Seed of the folds.

    Returns
    -------
    (U_pool, U_test, info)
        Calibrated logits and ``info = {c, d (calibration U = c*raw + d), oof_accuracy}``.
    """
    random_state = check_random_state(random_state)
    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=random_state)
    raw_pool = np.empty(X_pool.shape[0])
    raw_test = np.zeros(X_test.shape[0])
    for tr, te in skf.split(X_pool, y_pool):
        est = clone(oracle).fit(X_pool[tr], y_pool[tr])
        raw_pool[te] = _decision(est, X_pool[te])
        raw_test += _decision(est, X_test) / folds
    classes = np.unique(y_pool)
    y_signed = _pm1(y_pool, classes)
    platt = LogisticRegression(C=1e6, max_iter=10_000).fit(raw_pool[:, None], y_signed)
    c, d = float(platt.coef_[0, 0]), float(platt.intercept_[0])
    info = dict(c=c, d=d, oof_accuracy=float(np.mean(np.where(raw_pool >= 0, 1.0, -1.0) == y_signed)))
    return c * raw_pool + d, c * raw_test + d, info


def calibrate_scores(S, U, sigma_floor: float = 1e-3) -> tuple[float, float, float]:
    """Least-squares S ~ a U + b; sigma = residual sd, floored at sigma_floor * sd(S).

    Parameters
    ----------
    S, U : arrays (n,)
        Probe scores and oracle logits.
    sigma_floor : float
        Relative floor of sigma.

    Returns
    -------
    (a, b, sigma) : (float, float, float)

    Examples
    --------
    >>> a, b, sigma = calibrate_scores([1.0, 2.0, 3.0, 4.0], [0.5, 1.0, 1.5, 2.0])
    >>> round(a, 6), round(abs(b), 6)
    (2.0, 0.0)
    """
    S = check_vector(S, "S")
    U = check_vector(U, "U", size=S.size)
    sigma_floor = check_scalar(sigma_floor, "sigma_floor", low=0.0)
    A = np.column_stack([U, np.ones_like(U)])
    (a, b), *_ = np.linalg.lstsq(A, S, rcond=None)
    resid = S - (a * U + b)
    sigma = float(np.sqrt(np.mean(resid**2)))
    floor = sigma_floor * float(np.std(S))
    return float(a), float(b), max(sigma, floor, 1e-300)


def predicted_accuracy(U, a, b, sigma) -> float:
    """mean_j [sigmoid(U_j) Phi((aU_j+b)/sigma) + sigmoid(-U_j) Phi(-(aU_j+b)/sigma)] (see module doc).

    Parameters
    ----------
    U : array
        Held-out oracle logits.
    a, b, sigma : float
        The calibration of :func:`calibrate_scores`.

    Returns
    -------
    float

    Examples
    --------
    >>> round(predicted_accuracy(np.array([-1.0, 1.0]), 1.0, 0.0, 1.0), 4)
    0.6577
    """
    U = np.asarray(U, float)
    t = (a * U + b) / sigma
    return float(np.mean(expit(U) * ndtr(t) + expit(-U) * ndtr(-t)))


def _theory_accuracy(delta, lam, kappa):
    """cgmt's limiting test accuracy at (delta, lam, kappa); NaN outside cgmt's box or if unconverged."""
    try:
        res = cgmt.solve(float(delta), float(lam), float(kappa))
    except (ValueError, RuntimeError):
        return float("nan")
    return float(res.accuracy) if res.success else float("nan")


def _default_probe(C):
    """RAPTOR at one fixed C: train-only standardization (on its internal 80% split), then the refit on
    the whole subsample at that C (a one-point grid, so the validation split selects nothing)."""
    return RaptorProbe(Cs=[C])


def _default_oracle():
    """Validation-tuned RAPTOR (its default 100-point C grid) as the auxiliary classifier."""
    return RaptorProbe()


@contextlib.contextmanager
def _too_few_rows(frac, n, per_class, rows):
    """A probe's fit on a subsample too small for it (its own stratified validation split, its minimum rows per
    class): the ``ValueError`` names ``fractions`` and the subsample, then gives the probe's rule."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"fractions: at fraction {frac} the subsample has {n} rows ({', '.join(map(str, per_class))} "
                         f"per class), and the probe fitted on {rows} refuses them: {exc}.  Use larger fractions or a "
                         "larger pool (every class of every cross-fit fold needs the probe's minimum rows)") from None


def _one_subsample(task):
    (X_pool, y_pool, X_test, y_test, U_pool, U_test, classes, frac, seed, idx, Cs, probe, score_source,
     probe_folds, sigma_floor, random_state) = task
    Xs, ys = X_pool[idx], y_pool[idx]
    ys_pm = _pm1(ys, classes)
    ytest_pm = _pm1(y_test, classes)
    k = min(probe_folds, int(np.min(np.unique(ys, return_counts=True)[1])))
    if k < 2:
        raise ValueError(f"fractions: subsample at fraction {frac} has a class with < 2 examples; "
                         "cannot cross-fit the probe scores")
    folds = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state + 7919 * seed).split(Xs, ys))
    rows = []
    per_class = np.unique(ys, return_counts=True)[1]
    for C in Cs:
        with _too_few_rows(frac, len(idx), per_class, "the subsample"):
            est = probe(C).fit(Xs, ys)
        S_test = _decision(est, X_test)
        acc_true = float(np.mean(np.where(S_test >= 0, 1.0, -1.0) == ytest_pm))
        # out-of-fold scores on the subsample: the crossfit calibration and the learning-curve baseline's point
        S_cv = np.empty(len(idx))
        for tr, te in folds:
            with _too_few_rows(frac, len(idx), per_class, f"a cross-fit fold's {len(tr)} training rows ({k} folds, "
                                                           "probe_folds)"):
                fitted = probe(C).fit(Xs[tr], ys[tr])
            S_cv[te] = _decision(fitted, Xs[te])
        if score_source == "heldout":
            S_cal, U_cal = S_test, U_test
        elif score_source == "insample":
            S_cal, U_cal = _decision(est, Xs), U_pool[idx]
        else:  # crossfit
            S_cal, U_cal = S_cv, U_pool[idx]
        a, b, sigma = calibrate_scores(S_cal, U_cal, sigma_floor)
        rows.append(dict(fraction=frac, seed=seed, C=float(C), lam=1.0 / float(C),
                         lam_theory=1.0 / (float(C) * len(idx)),
                         n=len(idx),
                         delta=len(idx) / X_pool.shape[1], Acc_true=acc_true,
                         Acc_pred=predicted_accuracy(U_test, a, b, sigma), a=a, b=b, sigma=sigma,
                         cv_accuracy=float(np.mean(np.where(S_cv >= 0, 1.0, -1.0) == ys_pm)),
                         n_cv=float(np.mean([len(tr) for tr, _ in folds]))))
    return rows


def _corr(x, y, fn):
    """``fn(x, y)``'s coefficient (Pearson or Spearman); NaN with fewer than 3 points or when either series is
    constant to rounding (:func:`empirical.numerics.constant_to_rounding`)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or constant_to_rounding(x) or constant_to_rounding(y):
        return float("nan")
    return float(fn(x, y)[0])


def _summary_row(g):
    """Agreement of the predictor and of the power-law baseline with the truth along the sweep at one C."""
    law = fit_power_law(g.n_cv, g.cv_accuracy)
    g = g.assign(Acc_baseline=law(g.n))
    m = g.groupby("fraction")[["Acc_true", "Acc_pred", "Acc_baseline", "delta"]].mean()
    row = dict(rho_s=_corr(m.Acc_pred, m.Acc_true, spearmanr), r=_corr(m.Acc_pred, m.Acc_true, pearsonr),
               mae=float(np.mean(np.abs(m.Acc_pred - m.Acc_true))),
               baseline_rho_s=_corr(m.Acc_baseline, m.Acc_true, spearmanr),
               baseline_r=_corr(m.Acc_baseline, m.Acc_true, pearsonr),
               baseline_mae=float(np.mean(np.abs(m.Acc_baseline - m.Acc_true))),
               rho_s_all=_corr(g.Acc_pred, g.Acc_true, spearmanr), r_all=_corr(g.Acc_pred, g.Acc_true, pearsonr),
               mean_abs_error=float(np.mean(np.abs(g.Acc_pred - g.Acc_true))),
               Acc_true_mean=float(g.Acc_true.mean()), Acc_pred_mean=float(g.Acc_pred.mean()),
               baseline_a=law.a, baseline_b=law.b, baseline_c=law.c)
    return row, g.Acc_baseline


def delta_sweep(X_pool, y_pool, X_test, y_test, *, fractions=DEFAULT_FRACTIONS, seeds: int = 5, C=None, Cs=None,
                oracle=None, oracle_folds: int = 5, probe=None, score_source: str = "crossfit",
                probe_folds: int = 5, sigma_floor: float = 1e-3, theory: bool = True, random_state: int = 0,
                n_jobs: int = 1, progress: bool = True) -> StructureResult:
    """Sweep delta = n/p by stratified subsampling and compare Acc_pred with Acc_true (module doc).

    Labels: any two classes (the larger is the positive class).  The held-out labels ``y_test`` are used only
    to measure ``Acc_true``, never by the prediction.

    Parameters
    ----------
    X_pool, y_pool : ndarray of shape (N, p), array of shape (N,)
        The training pool (raw features; the probe standardizes on its own training part).
    X_test, y_test : ndarray of shape (m, p), array of shape (m,)
        The held-out set.
    fractions : sequence of float in (0, 1], default=DEFAULT_FRACTIONS
        Distinct subsample fractions of the pool (at least 3; 6 in the paper).
    seeds : int, default=5
        Subsamples per fraction (1 .. ``MAX_SEEDS``).
    C : float, optional
        The inverse ridge strength the result is reported at (``fixed``), fixed before the sweep: None is
        :func:`fixed_C` (RAPTOR's validation-selected C on the pool), a float is used as given.
    Cs : sequence of float, optional
        Further C values evaluated as diagnostics (rows of ``table`` and ``summary``; lambda = 1/C as in the
        paper's table), never used to choose the reported C.
    oracle : classifier, optional
        Unfitted scikit-learn classifier with ``decision_function`` (cloned per fold; default ``RaptorProbe()``).
    oracle_folds : int, default=5
        Folds of the oracle's cross-fitting.
    probe : callable, optional
        ``probe(C)`` returns an unfitted classifier at that fixed C (default ``RaptorProbe(Cs=[C])``).
    score_source : {"crossfit", "insample", "heldout"}, default="crossfit"
        Which probe scores the calibration regresses on U (module doc).
    probe_folds : int, default=5
        Folds of the ``"crossfit"`` probe scores (and of the learning-curve baseline's accuracies).
    sigma_floor : float, default=1e-3
        Relative floor of sigma (times sd(S)), >= 0.
    theory : bool, default=True
        Also add ``Acc_theory`` = ``cgmt.solve(delta, 1/(C n), kappa_hat).accuracy``, the pure Gaussian-design
        prediction (kappa_hat = sd of the calibrated held-out U; the probe's C is taken in scikit-learn's
        convention on standardized features, whose theory ridge is lambda = 1/(C n)); NaN where cgmt fails.
    random_state : int, default=0
        Root seed of the subsamples and folds.
    n_jobs : int, default=1
        joblib workers over the (fraction, seed) subsamples.
    progress : bool, default=True
        Show a progress bar over the subsamples.

    Returns
    -------
    StructureResult
        The per-subsample table, the per-C summary, the row at the fixed C and the oracle's diagnostics.
    """
    n_jobs = check_n_jobs(n_jobs)
    X_pool, y_pool, X_test, y_test, classes = _check_inputs(X_pool, y_pool, X_test, y_test)
    random_state = check_seed(random_state, "random_state", maximum=MAX_SEED)  # the subsamples' root and the folds'
    fractions = [float(f) for f in fractions]
    if len(set(fractions)) < 3 or not all(0 < f <= 1 for f in fractions):
        raise ValueError(f"fractions must hold at least 3 distinct values in (0, 1] (correlations across fewer are "
                         f"undefined), got {fractions}")
    if len(set(fractions)) != len(fractions):
        raise ValueError(f"fractions must be distinct, got {fractions}")
    seeds = check_int(seeds, "seeds")
    if seeds > MAX_SEEDS:
        raise ValueError(f"seeds must be at most MAX_SEEDS = {MAX_SEEDS} subsamples per fraction, got {seeds}")
    if C is None:
        C, C_source = fixed_C(X_pool, y_pool), "pool"
    else:
        C, C_source = float(check_grid([C], "C")[0]), "given"
    extra = [] if Cs is None else [float(c) for c in check_grid(Cs)]
    Cs = sorted({C, *extra})
    if score_source not in ("crossfit", "insample", "heldout"):
        raise ValueError(f"score_source must be 'crossfit', 'insample' or 'heldout', got {score_source!r}")
    if not (np.isfinite(sigma_floor) and sigma_floor >= 0):
        raise ValueError(f"sigma_floor must be finite and >= 0, got {sigma_floor}")
    oracle = _default_oracle() if oracle is None else oracle
    probe = _default_probe if probe is None else probe
    U_pool, U_test, oinfo = cross_fit_oracle(X_pool, y_pool, X_test, oracle, folds=oracle_folds,
                                             random_state=random_state)
    root = np.random.SeedSequence(random_state)
    children = root.spawn(len(fractions) * int(seeds))
    tasks = []
    for i, frac in enumerate(fractions):
        n = int(round(frac * X_pool.shape[0]))
        if n < 2:
            raise ValueError(f"fractions must give subsamples of at least 2 rows, got {frac} of the "
                             f"{X_pool.shape[0]} pool rows ({n} rows)")
        for s in range(int(seeds)):
            idx = stratified_subsample(y_pool, n, children[i * int(seeds) + s])
            tasks.append((X_pool, y_pool, X_test, y_test, U_pool, U_test, classes, frac, s, idx, Cs, probe,
                          score_source, probe_folds, sigma_floor, int(random_state)))
    gen = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(_one_subsample)(t) for t in tasks)
    rows = [r for batch in tqdm(gen, total=len(tasks), disable=not progress, desc="delta sweep") for r in batch]
    table = pd.DataFrame.from_records(rows)
    srecs = []
    table["Acc_baseline"] = np.nan
    for c, g in table.groupby("C", sort=True):
        row, baseline = _summary_row(g)
        table.loc[baseline.index, "Acc_baseline"] = baseline
        srecs.append(dict(C=c, lam=1.0 / c, **row))
    summary = pd.DataFrame.from_records(srecs)
    if theory:
        kappa_hat = float(np.std(U_test))
        cache = {}
        for key in set(zip(table.delta, table.lam_theory)):
            cache[key] = _theory_accuracy(key[0], key[1], kappa_hat)
        table["Acc_theory"] = [cache[k] for k in zip(table.delta, table.lam_theory)]
        th = []
        for c, g in table.groupby("C", sort=True):
            m = g.groupby("fraction")[["Acc_true", "Acc_theory"]].mean()
            th.append(dict(rho_s_theory=_corr(m.Acc_theory, m.Acc_true, spearmanr),
                           r_theory=_corr(m.Acc_theory, m.Acc_true, pearsonr),
                           mean_abs_error_theory=float(np.mean(np.abs(g.Acc_theory - g.Acc_true)))))
        summary = pd.concat([summary, pd.DataFrame.from_records(th)], axis=1)
    at = summary[np.isclose(summary.C, C)].iloc[0]
    fixed = dict(C=C, lam=1.0 / C, C_source=C_source,
                 **{k: float(at[k]) for k in ("rho_s", "r", "mae", "baseline_rho_s", "baseline_r", "baseline_mae")})
    oinfo.update(folds=oracle_folds, U_test_sd=float(np.std(U_test)), kappa_hat=float(np.std(U_test)))
    return StructureResult(table=table, summary=summary, fixed=fixed, oracle=oinfo)
