"""Predict real probes from a layer's training pool with the spectral theory (:func:`cgmt.solve_spectral`).

Only the pool (train + validation embeddings and labels) is used; test labels never enter.

Conventions.  RAPTOR standardizes each coordinate with training statistics and minimises
``C sum loss + ||w||^2 / 2`` on the standardized rows h.  With x = h / sqrt(p) and beta = sqrt(p) w this is
the theory's objective (1/n) sum loss + lam/(2p) ||beta||^2 times C n, so lam = 1 / (C n) (n = training
rows, :func:`empirical.probes.real_embedding.theory_lambda`) and Sigma is the covariance of the
standardized features (a correlation matrix, tr Sigma / p = 1).  The theory has no intercept; the
probes do (balanced classes: the intercept changes accuracy by < 0.01, see docs/spectral_theory.md).

The model of a pool (:func:`estimate_pool_model`):

* Sigma: the pool's sample correlation matrix (``covariance="sample"``) or its Ledoit-Wolf shrinkage
  (``"ledoit_wolf"``, scikit-learn).
* Teacher direction: a ridge-logistic fit on the whole standardized pool, its ridge chosen by K-fold
  cross-validated log-loss.
* Teacher norm (``teacher=``):
  ``"pool_fit"`` uses that fit as is (its norm is shrunk by the ridge and its direction is noisy, so the
  theory is pessimistic); ``"calibrated"`` rescales it so that the theory reproduces the pool's own K-fold
  out-of-fold accuracy along the cross-validation ridge path (least squares over the path, in log kappa):
  a method-of-moments estimate of the signal that sits in the estimated direction;
  ``"deconvolved"`` also undoes the ridge's spectral shrinkage of the pool fit.  In the theory the fit is
  (L + Vh Sigma)^{-1}(mh Sigma beta* + noise), i.e. the teacher's eigen-coordinates b_i are multiplied by
  mh omega_i / (L + Vh omega_i), which damps the small-eigenvalue directions.  The estimator therefore
  uses b_i (1 + c / omega_i) with the two numbers (kappa, c) fitted jointly to the pool's out-of-fold
  accuracy path (c = 0 is ``"calibrated"``): the path's shape at strong ridge is what fixes c, because a
  strongly regularized probe points along Sigma beta* and its accuracy measures how much of the teacher
  lies outside the top eigen-directions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from sklearn.covariance import LedoitWolf

import cgmt
from cgmt.ablation import protocol_fractions
from cgmt.spectral import Spectrum
from cgmt.spectral_stability import spectral_stability

from ..logistic import fit_l2_logistic
from ..validation import check_binary_labels, check_grid, check_matrix, standardize_stats
from .real_embedding import cross_validated_path

__all__ = ["PoolModel", "estimate_pool_model", "estimate_pool_models", "predict_path", "predict_lambda_star", "predict_sweep",
           "predict_stability", "TEACHERS", "COVARIANCES", "CV_LAMBDAS"]

TEACHERS = ("deconvolved", "calibrated", "pool_fit")
COVARIANCES = ("sample", "ledoit_wolf")
#: theory-convention ridge grid of the pool's cross-validation path
CV_LAMBDAS = np.logspace(-4, 1, 11)


@dataclass(frozen=True)
class PoolModel:
    """The spectral model of one layer's training pool (returned by :func:`estimate_pool_model`).

    Attributes
    ----------
    spectrum : cgmt.spectral.Spectrum
        Sigma of the standardized pool features and the teacher beta* (theory coordinates).
    feature_scale : ndarray (p,)
        The pool's per-feature standard deviations (raw-space concept vectors are w / s).
    n_pool : int
    teacher : str
        Teacher estimator.
    covariance : str
        Covariance estimator.
    cv_lambdas, cv_accuracy : ndarray
        The pool's cross-validation path (theory lam, out-of-fold accuracy) used by the calibration.
    cv_train_size : float
        Mean fold training size.
    lam_teacher : float
        Ridge (theory lam) of the pool fit that gives the teacher direction (best CV log-loss).
    """

    spectrum: Spectrum
    feature_scale: np.ndarray = field(repr=False)
    n_pool: int
    teacher: str
    covariance: str
    cv_lambdas: np.ndarray = field(repr=False)
    cv_accuracy: np.ndarray = field(repr=False)
    cv_train_size: float
    lam_teacher: float

    @property
    def p(self) -> int:
        """Dimension."""
        return self.spectrum.p

    @property
    def kappa(self) -> float:
        """Estimated signal strength."""
        return self.spectrum.kappa


def _theory_path(spectrum, delta, lambdas):
    return np.array([r.accuracy for r in spectrum.solve_path(delta, lambdas)])


def estimate_pool_models(H_pool, y_pool, *, teachers=TEACHERS, covariance="sample", folds=5, random_state=0,
                         cv_lambdas=CV_LAMBDAS) -> dict:
    """:func:`estimate_pool_model` for several teacher estimators, sharing the cross-validation path and pool fit.

    Parameters
    ----------
    H_pool, y_pool, covariance, folds, random_state, cv_lambdas
        As for :func:`estimate_pool_model`.
    teachers : sequence of str
        Teacher estimators (:data:`TEACHERS`).

    Returns
    -------
    dict
        teacher -> PoolModel.
    """
    H = check_matrix(H_pool, "H_pool")
    _, ypm = check_binary_labels(y_pool, H.shape[0], "y_pool")
    bad = [t for t in teachers if t not in TEACHERS]
    if bad or not len(teachers):
        raise ValueError(f"teacher must be one of {TEACHERS}, got {list(teachers)!r}")
    if covariance not in COVARIANCES:
        raise ValueError(f"covariance must be one of {COVARIANCES}, got {covariance!r}")
    lambdas = np.asarray(cv_lambdas, dtype=float)
    N, p = H.shape
    mu, s = standardize_stats(H)
    Z = (H - mu) / s
    cov = (LedoitWolf(assume_centered=True).fit(Z).covariance_ if covariance == "ledoit_wolf"
           else Z.T @ Z / N)
    acc, loss, n_fold = cross_validated_path(H, ypm, lambdas, folds, random_state)
    lam_teacher = float(lambdas[int(np.argmin(loss))])
    fit = fit_l2_logistic(Z, ypm, 1.0 / (N * lam_teacher), fit_intercept=True)
    beta = math.sqrt(p) * fit.coef
    if not np.any(beta):
        raise ValueError("H_pool: the pool fit is zero (constant features?); no teacher direction to estimate")
    pool_fit = Spectrum.from_covariance(cov, beta)
    delta_fold = n_fold / p
    models = {}
    for teacher in teachers:
        if teacher == "calibrated":

            def misfit(log_kappa):
                path = _theory_path(pool_fit.scaled(math.exp(log_kappa)), delta_fold, lambdas)
                return float(np.sum((path - acc) ** 2))

            best = minimize_scalar(misfit, bounds=(math.log(0.05), math.log(60.0)), method="bounded",
                                   options={"xatol": 1e-3})
            spectrum = pool_fit.scaled(math.exp(best.x))
        elif teacher == "deconvolved":
            spectrum = _deconvolved(pool_fit, delta_fold, lambdas, acc)
        else:
            spectrum = pool_fit
        models[teacher] = PoolModel(spectrum=spectrum, feature_scale=s, n_pool=N, teacher=teacher,
                                    covariance=covariance, cv_lambdas=lambdas, cv_accuracy=acc,
                                    cv_train_size=n_fold, lam_teacher=lam_teacher)
    return models


def estimate_pool_model(H_pool, y_pool, *, teacher="deconvolved", covariance="sample", folds=5, random_state=0,
                        cv_lambdas=CV_LAMBDAS) -> PoolModel:
    """Estimate Sigma and the teacher of a layer from its labelled training pool.

    Parameters
    ----------
    H_pool : ndarray (N, p)
        Raw hidden states of the pool (the paper's train + validation splits).
    y_pool : array (N,)
        Binary labels.
    teacher : {"deconvolved", "calibrated", "pool_fit"}
        Teacher-norm estimator (module docstring).
    covariance : {"sample", "ledoit_wolf"}
        Covariance estimator of the standardized features.
    folds : int
        Cross-validation folds of the pool path.
    random_state : int
        Fold assignment.
    cv_lambdas : array of float
        Theory-convention ridge grid of the cross-validation path.

    Returns
    -------
    PoolModel

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> H, y, _, _ = synthetic_hidden_states(400, 0, 30, shift=1.0, seed=0)
    >>> model = estimate_pool_model(H, y)
    >>> model.p, model.kappa > 0
    (30, True)
    """
    if teacher not in TEACHERS:
        raise ValueError(f"teacher must be one of {TEACHERS}, got {teacher!r}")
    return estimate_pool_models(H_pool, y_pool, teachers=(teacher,), covariance=covariance, folds=folds,
                                random_state=random_state, cv_lambdas=cv_lambdas)[teacher]


def _tilted(spectrum, c, kappa):
    omega = np.maximum(spectrum.eigenvalues, 1e-8 * spectrum.eigenvalues[0])
    b = spectrum.teacher_coordinates * (1.0 + c / omega)
    return Spectrum(spectrum.eigenvalues, b * b, b, spectrum.eigenvectors).scaled(kappa)


def _deconvolved(spectrum, delta_fold, lambdas, acc):
    """Fit (log kappa, log c) of the tilted teacher b (1 + c/omega) to the out-of-fold accuracy path."""
    def misfit(theta):
        log_kappa, log_c = np.clip(theta, [math.log(0.05), math.log(1e-6)], [math.log(60.0), math.log(1e3)])
        try:
            model = _tilted(spectrum, math.exp(log_c), math.exp(log_kappa))
            return float(np.sum((_theory_path(model, delta_fold, lambdas) - acc) ** 2))
        except (ValueError, cgmt.ConvergenceError):
            return 1e3

    best, best_val = None, np.inf
    for log_c in (math.log(1e-3), math.log(1.0)):  # a few starts: the misfit is not convex in c
        k0 = minimize_scalar(lambda lk: misfit((lk, log_c)), bounds=(math.log(0.05), math.log(60.0)),
                             method="bounded", options={"xatol": 1e-2}).x
        res = minimize(misfit, [k0, log_c], method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-7,
                                                                           "maxfev": 80})
        if res.fun < best_val:
            best, best_val = res.x, res.fun
    log_kappa, log_c = np.clip(best, [math.log(0.05), math.log(1e-6)], [math.log(60.0), math.log(1e3)])
    return _tilted(spectrum, math.exp(log_c), math.exp(log_kappa))


def predict_path(model: PoolModel, n_train, Cs) -> np.ndarray:
    """Predicted test accuracy of the probe trained on ``n_train`` rows at every C (lam = 1/(C n_train)).

    Parameters
    ----------
    model : PoolModel
    n_train : int
    Cs : array of float > 0
        RAPTOR's grid (scikit-learn C on standardized features).

    Returns
    -------
    ndarray
    """
    Cs = check_grid(Cs)
    return _theory_path(model.spectrum, n_train / model.p, 1.0 / (Cs * n_train))


def predict_lambda_star(Cs, predicted_accuracy, tolerance=1e-3) -> float:
    """The most regularized C whose predicted accuracy is within ``tolerance`` of the best (RAPTOR's tie-break).

    Parameters
    ----------
    Cs, predicted_accuracy : arrays
    tolerance : float

    Returns
    -------
    float
        The predicted C*.

    Examples
    --------
    >>> predict_lambda_star([0.1, 1.0, 10.0], [0.8, 0.8005, 0.79])
    0.1
    """
    Cs = check_grid(Cs)
    acc = np.asarray(predicted_accuracy, dtype=float)
    ok = acc >= np.nanmax(acc) - tolerance
    return float(Cs[ok].min())


def predict_sweep(model: PoolModel, fractions, C) -> np.ndarray:
    """Predicted test accuracy of probes on ``fraction * N`` pool rows at a fixed C (the delta-sweep).

    Parameters
    ----------
    model : PoolModel
    fractions : array of float in (0, 1]
    C : float

    Returns
    -------
    ndarray
    """
    C = float(check_grid(C, "C")[0])
    out = []
    for f in np.asarray(fractions, dtype=float):
        n = f * model.n_pool
        out.append(model.spectrum.solve(n / model.p, 1.0 / (C * n)).accuracy)
    return np.array(out)


def predict_stability(model: PoolModel, C, n_pool=None, *, protocol="subsample", drop=0.2, val_fraction=0.2):
    """Predicted ablation stability (the paper's protocol) of probes at a fixed C on the pool.

    Parameters
    ----------
    model : PoolModel
    C : float
        Every run's C; a run fitted on n rows has lam = 1/(C n).
    n_pool : int, optional
        Pool size (default the model's).
    protocol : str
        :func:`cgmt.ablation.protocol_fractions` protocol: ``"subsample"`` (default) fits each run on its
        train rows only, (1 - drop)(1 - val_fraction) of the pool; ``"subsample_refit"`` is what
        ``RaptorProbe`` runs do: the concept vector is refit on all kept rows (train + validation).
    drop, val_fraction : float

    Returns
    -------
    OptimizeResult
        :func:`cgmt.spectral_stability` result; ``cosine_raw`` is the cosine of the folded-back raw-space
        concept vectors w / s (the paper's metric), ``cosine`` the one in standardized coordinates.
    """
    n_pool = model.n_pool if n_pool is None else int(n_pool)
    f_run = protocol_fractions(protocol, drop=drop, val_fraction=val_fraction)[0]
    return spectral_stability(n_pool / model.p, 1.0 / (C * f_run * n_pool), model.spectrum, protocol, drop=drop,
                              val_fraction=val_fraction, feature_scale=model.feature_scale)
