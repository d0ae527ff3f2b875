"""Predict real probes from a layer's training pool with the spectral theory (:func:`cgmt.solve_spectral`).

Only the pool (train + validation embeddings and labels) is used; test labels never enter.

Conventions.  RAPTOR standardizes each coordinate with training statistics and minimises
``C sum loss + ||w||^2 / 2`` on the standardized rows h.  With x = h / sqrt(p) and beta = sqrt(p) w this is
the theory's objective (1/n) sum loss + lam/(2p) ||beta||^2 times C n, so lam = 1 / (C n) (n = training
rows, :func:`empirical.probes.real_embedding.theory_lambda`) and Sigma is the covariance of the
standardized features (a correlation matrix, tr Sigma / p = 1).  The theory has no intercept; the
probes do (balanced classes: the intercept changes accuracy by < 0.01, see docs/spectral_theory.md).

The model of a pool (:func:`estimate_pool_model`):

* Sigma: the sample correlation matrix (``covariance="sample"``) or its Ledoit-Wolf shrinkage
  (``"ledoit_wolf"``, scikit-learn) of every row there is: the labelled pool and, when given, unlabelled
  hidden states (``H_unlabeled``: unlabelled text costs nothing, and Sigma needs no label).  The
  standardization statistics come from the same rows.
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
* No signal, no gain (``chance_z``): when the pool's out-of-fold accuracy at the teacher's ridge is not
  ``chance_z`` null standard errors 1/(2 sqrt N) above chance (the majority class share), kappa is shrunk by the
  factor max(e / (chance_z se), 0) (floored at 1e-3) of the excess e = accuracy - chance: a Coinflip pool then
  predicts chance at every n instead of a gain the calibration read into noise.  ``PoolModel.chance_factor``.
* Uncertainty (``n_boot``): a bootstrap over the pool.  The pool's rows (their out-of-fold correctness along
  the cross-validation path, resampled within each class) are drawn ``n_boot`` times; each replicate's
  accuracy path gives the replicate's teacher parameters (log kappa, and log c for ``"deconvolved"``) by one
  Gauss-Newton step of the calibration from the estimate (the linearized bootstrap: no replicate refits a
  probe or re-solves the calibration, so it costs nothing beyond one Jacobian of the path).  The replicates
  carry the uncertainty of the teacher's norm and shape that the pool's size leaves; not the direction's,
  which the calibration does not re-estimate (``"pool_fit"`` has no fitted parameter and no replicates).
  :func:`predict_learning_curve` propagates them into prediction intervals.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from sklearn.covariance import LedoitWolf

import cgmt
from cgmt import Spectrum, spectral_stability
from cgmt.ablation import protocol_fractions
from cgmt.validation import check_lams
from empirical.common.checks import check_choice, check_int, check_scalar, check_sequence

from ..common.arrays import check_binary_labels, check_grid, check_matrix, check_min_per_class
from ..common.checks import MAX_SEED
from ..logistic import fit_l2_logistic
from ..numerics import standardize, standardize_stats
from .real_embedding import cross_validated_path

__all__ = ["PoolModel", "estimate_pool_model", "estimate_pool_models", "predict_path", "predict_lambda_star",
           "predict_sweep",
           "predict_stability", "TEACHERS", "COVARIANCES", "CV_LAMBDAS", "KAPPA_BOUNDS"]

TEACHERS = ("deconvolved", "calibrated", "pool_fit")
COVARIANCES = ("sample", "ledoit_wolf")
#: theory-convention ridge grid of the pool's cross-validation path
CV_LAMBDAS = np.logspace(-4, 1, 11)
#: range of the calibrated kappa
KAPPA_BOUNDS = (0.05, 60.0)
#: range of the deconvolution's tilt c
_TILT_BOUNDS = (1e-6, 1e3)
#: smallest factor of the no-signal shrinkage of kappa (a zero teacher has no spectrum)
_MIN_CHANCE_FACTOR = 1e-3
#: log-parameter step of the finite-difference Jacobians
_STEP = 1e-3


@dataclass(frozen=True)
class PoolModel:
    """The spectral model of one layer's training pool (returned by :func:`estimate_pool_model`).

    Attributes
    ----------
    spectrum : cgmt.Spectrum
        Sigma of the standardized pool features and the teacher beta* (theory coordinates).
    feature_scale : ndarray (p,)
        The pool's per-feature standard deviations (raw-space concept vectors are w / s).
    n_pool : int
        Number of labelled pool rows (train + validation) the model was estimated from.
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
    n_unlabeled : int
        Unlabelled rows that entered Sigma (and the standardization) besides the pool.
    parameters : ndarray
        The fitted teacher parameters: (log kappa,) for ``"calibrated"``, (log kappa, log c) for
        ``"deconvolved"``, empty for ``"pool_fit"``; before the no-signal shrinkage.
    parameter_draws : ndarray (n_boot, len(parameters))
        Their bootstrap replicates (module docstring).
    cv_draws : ndarray (n_boot, len(cv_lambdas))
        The replicates' out-of-fold accuracy paths minus the pool's.
    cv_jacobian : ndarray (len(cv_lambdas), len(parameters))
        Derivative of the calibrated theory path with respect to ``parameters``.
    chance_factor : float
        The no-signal shrinkage factor of kappa (1: the pool is clearly above chance).
    base_spectrum : cgmt.Spectrum
        The pool fit's spectrum, from which :meth:`spectrum_at` builds the model at other parameters.
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
    n_unlabeled: int = 0
    parameters: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    parameter_draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    cv_draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    cv_jacobian: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    chance_factor: float = 1.0
    base_spectrum: Spectrum | None = field(default=None, repr=False)

    def spectrum_at(self, parameters) -> Spectrum:
        """The model's spectrum at other teacher parameters (same meaning as ``parameters``), with the
        model's no-signal shrinkage applied."""
        theta = np.asarray(parameters, dtype=float)
        if theta.shape != self.parameters.shape:
            raise ValueError(f"parameters must have {self.parameters.size} values, got shape {theta.shape}")
        if self.base_spectrum is None or theta.size == 0:
            return self.spectrum
        return _shrunk(spectrum_from(self.base_spectrum, theta), self.chance_factor)

    @property
    def p(self) -> int:
        """Dimension."""
        return self.spectrum.p

    @property
    def kappa(self) -> float:
        """Estimated signal strength."""
        return self.spectrum.kappa


def theory_path(spectrum, delta, lambdas):
    """The spectral theory's test accuracy of ``spectrum`` at sample ratio ``delta`` along ``lambdas``."""
    return np.array([r.accuracy for r in spectrum.solve_path(delta, lambdas)])


def spectrum_from(base, theta):
    """The teacher of parameters theta = (log kappa[, log c]) on the pool fit's spectrum ``base``."""
    lo, hi = math.log(KAPPA_BOUNDS[0]), math.log(KAPPA_BOUNDS[1])
    kappa = math.exp(min(max(float(theta[0]), lo), hi))
    if len(theta) == 1:
        return base.scaled(kappa)
    c = math.exp(min(max(float(theta[1]), math.log(_TILT_BOUNDS[0])), math.log(_TILT_BOUNDS[1])))
    return _tilted(base, c, kappa)


def _shrunk(spectrum, factor):
    return spectrum if factor >= 1.0 else spectrum.scaled(spectrum.kappa * factor)


def _path_jacobian(base, theta, delta, lambdas):
    """Forward-difference derivative of the theory path in the log parameters."""
    g0 = theory_path(spectrum_from(base, theta), delta, lambdas)
    jac = np.empty((lambdas.size, theta.size))
    for j in range(theta.size):
        step = np.array(theta, dtype=float)
        step[j] += _STEP
        jac[:, j] = (theory_path(spectrum_from(base, step), delta, lambdas) - g0) / _STEP
    return jac


def _bootstrap_paths(correct, y_signed, n_boot, rng):
    """Out-of-fold accuracy paths of ``n_boot`` stratified bootstrap replicates of the pool, minus the pool's."""
    if n_boot == 0:
        return np.zeros((0, correct.shape[1]))
    groups = [np.flatnonzero(y_signed == label) for label in (-1.0, 1.0)]
    draws = np.empty((n_boot, correct.shape[1]))
    for b in range(n_boot):
        rows = np.concatenate([rng.choice(g, g.size, replace=True) for g in groups])
        draws[b] = correct[rows].mean(axis=0)
    return draws - correct.mean(axis=0)


def _chance_factor(acc, y_signed, chance_z):
    """The no-signal shrinkage factor of kappa from the out-of-fold accuracy ``acc`` (module docstring)."""
    chance = max(float(np.mean(y_signed > 0)), float(np.mean(y_signed < 0)))
    se = 0.5 / math.sqrt(y_signed.size)
    if chance_z == 0:
        return 1.0
    return float(min(1.0, max((acc - chance) / (chance_z * se), _MIN_CHANCE_FACTOR)))


def _check_unlabeled(H_unlabeled, p):
    if H_unlabeled is None:
        return np.zeros((0, p))
    U = check_matrix(H_unlabeled, "H_unlabeled")
    if U.shape[1] != p:
        raise ValueError(f"H_unlabeled must have the pool's {p} features (columns), got {U.shape[1]}")
    return U


def estimate_pool_models(H_pool, y_pool, *, teachers=TEACHERS, covariance="sample", folds=5, random_state=0,
                         cv_lambdas=CV_LAMBDAS, H_unlabeled=None, n_boot=200, chance_z=2.0) -> dict:
    """:func:`estimate_pool_model` for several teacher estimators, sharing the cross-validation path and pool fit.

    Parameters
    ----------
    H_pool, y_pool, covariance, folds, random_state, cv_lambdas, H_unlabeled, n_boot, chance_z
        As for :func:`estimate_pool_model`.
    teachers : sequence of str
        Teacher estimators (:data:`TEACHERS`).

    Returns
    -------
    dict
        teacher -> PoolModel.
    """
    H = check_matrix(H_pool, "H_pool")
    _, y_signed = check_binary_labels(y_pool, H.shape[0], "y_pool", rows="H_pool")
    teachers = check_sequence(teachers, "teachers", lambda v, n: check_choice(v, n, TEACHERS))
    covariance = check_choice(covariance, "covariance", COVARIANCES)
    n_boot = check_int(n_boot, "n_boot", minimum=0)
    chance_z = check_scalar(chance_z, "chance_z", low=0.0, high=1e3)
    folds = check_int(folds, "folds", minimum=2)
    random_state = check_int(random_state, "random_state", minimum=0, maximum=MAX_SEED)
    check_min_per_class(y_signed, "y_pool (labelled pool)", minimum=folds)
    lambdas = check_lams(cv_lambdas, "cv_lambdas")
    if len(np.unique(lambdas)) != len(lambdas):
        raise ValueError(f"cv_lambdas must not repeat a value, got {lambdas.tolist()!r:.60}")
    N, p = H.shape
    U = _check_unlabeled(H_unlabeled, p)
    H_all = np.vstack([H, U]) if U.shape[0] else H
    mu, s = standardize_stats(H_all)
    Z_all = standardize(H_all, mu, s)
    Z = Z_all[:N]
    cov = (LedoitWolf(assume_centered=True).fit(Z_all).covariance_ if covariance == "ledoit_wolf"
           else Z_all.T @ Z_all / Z_all.shape[0])
    acc, loss, n_fold, correct = cross_validated_path(H, y_signed, lambdas, folds, random_state, per_row=True)
    k_teacher = int(np.argmin(loss))
    lam_teacher = float(lambdas[k_teacher])
    fit = fit_l2_logistic(Z, y_signed, 1.0 / (N * lam_teacher), fit_intercept=True)
    beta = math.sqrt(p) * fit.coef
    if not np.any(beta):
        raise ValueError("H_pool: the pool fit is zero (constant features?); no teacher direction to estimate")
    pool_fit = Spectrum.from_covariance(cov, beta)
    delta_fold = n_fold / p
    factor = _chance_factor(acc[k_teacher], y_signed, chance_z)
    cv_draws = _bootstrap_paths(correct, y_signed, n_boot, np.random.default_rng(random_state))
    models = {}
    for teacher in teachers:
        if teacher == "calibrated":

            def misfit(log_kappa):
                path = theory_path(pool_fit.scaled(math.exp(log_kappa)), delta_fold, lambdas)
                return float(np.sum((path - acc) ** 2))

            best = minimize_scalar(misfit, bounds=tuple(math.log(k) for k in KAPPA_BOUNDS), method="bounded",
                                   options={"xatol": 1e-3})
            theta = np.array([best.x])
        elif teacher == "deconvolved":
            theta = _deconvolved(pool_fit, delta_fold, lambdas, acc)
        else:
            theta = np.zeros(0)
        if theta.size:
            spectrum = _shrunk(spectrum_from(pool_fit, theta), factor)
            jac = _path_jacobian(pool_fit, theta, delta_fold, lambdas)
            # one Gauss-Newton step of the calibration per bootstrap replicate of the out-of-fold path
            gain = np.linalg.pinv(jac, rcond=1e-4)
            theta_draws = theta + cv_draws @ gain.T
        else:
            spectrum = _shrunk(pool_fit, factor)
            jac, theta_draws = np.zeros((lambdas.size, 0)), np.zeros((n_boot, 0))
        models[teacher] = PoolModel(spectrum=spectrum, feature_scale=s, n_pool=N, teacher=teacher,
                                    covariance=covariance, cv_lambdas=lambdas, cv_accuracy=acc,
                                    cv_train_size=n_fold, lam_teacher=lam_teacher, n_unlabeled=int(U.shape[0]),
                                    parameters=theta, parameter_draws=theta_draws, cv_draws=cv_draws,
                                    cv_jacobian=jac, chance_factor=factor, base_spectrum=pool_fit)
    return models


def estimate_pool_model(H_pool, y_pool, *, teacher="deconvolved", covariance="sample", folds=5, random_state=0,
                        cv_lambdas=CV_LAMBDAS, H_unlabeled=None, n_boot=200, chance_z=2.0) -> PoolModel:
    """Estimate Sigma and the teacher of a layer from its labelled training pool (and unlabelled rows).

    Parameters
    ----------
    H_pool : ndarray (N, p)
        Raw hidden states of the labelled pool (the paper's train + validation splits).
    y_pool : array (N,)
        Binary labels (at least ``folds`` of each class).
    teacher : {"deconvolved", "calibrated", "pool_fit"}
        Teacher-norm estimator (module docstring).
    covariance : {"sample", "ledoit_wolf"}
        Covariance estimator of the standardized features.
    folds : int
        Cross-validation folds of the pool path.
    random_state : int
        Fold assignment and bootstrap draws.
    cv_lambdas : array of float
        Theory-convention ridge grid of the cross-validation path.
    H_unlabeled : ndarray (M, p), optional
        Hidden states of unlabelled rows of the same layer: they enter Sigma and the standardization only.
    n_boot : int >= 0
        Bootstrap replicates of the teacher parameters (module docstring; 0: no intervals).
    chance_z : float >= 0
        Null standard errors above chance the pool's out-of-fold accuracy must be for kappa to stay unshrunk
        (0: never shrink).

    Returns
    -------
    PoolModel

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> H, y, _, _ = synthetic_hidden_states(400, 0, 30, shift=1.0, seed=0)
    >>> model = estimate_pool_model(H, y, n_boot=20)
    >>> model.p, model.kappa > 0, model.parameter_draws.shape
    (30, True, (20, 2))
    """
    teacher = check_choice(teacher, "teacher", TEACHERS)
    return estimate_pool_models(H_pool, y_pool, teachers=(teacher,), covariance=covariance, folds=folds,
                                random_state=random_state, cv_lambdas=cv_lambdas, H_unlabeled=H_unlabeled,
                                n_boot=n_boot, chance_z=chance_z)[teacher]


def _tilted(spectrum, c, kappa):
    omega = np.maximum(spectrum.eigenvalues, 1e-8 * spectrum.eigenvalues[0])
    b = spectrum.teacher_coordinates * (1.0 + c / omega)
    return Spectrum(spectrum.eigenvalues, b * b, b, spectrum.eigenvectors).scaled(kappa)


def _deconvolved(spectrum, delta_fold, lambdas, acc):
    """Fit theta = (log kappa, log c) of the tilted teacher b (1 + c/omega) to the out-of-fold accuracy path."""
    lo = np.log([KAPPA_BOUNDS[0], _TILT_BOUNDS[0]])
    hi = np.log([KAPPA_BOUNDS[1], _TILT_BOUNDS[1]])

    def misfit(theta):
        try:
            return float(np.sum((theory_path(spectrum_from(spectrum, np.clip(theta, lo, hi)), delta_fold, lambdas)
                                 - acc) ** 2))
        except (ValueError, cgmt.ConvergenceError):
            return 1e3

    best, best_val = None, np.inf
    for log_c in (math.log(1e-3), math.log(1.0)):  # a few starts: the misfit is not convex in c
        k0 = minimize_scalar(lambda lk: misfit((lk, log_c)), bounds=(lo[0], hi[0]),
                             method="bounded", options={"xatol": 1e-2}).x
        res = minimize(misfit, [k0, log_c], method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-7,
                                                                           "maxfev": 80})
        if res.fun < best_val:
            best, best_val = res.x, res.fun
    return np.clip(best, lo, hi)


def predict_path(model: PoolModel, n_train, Cs) -> np.ndarray:
    """Predicted test accuracy of the probe trained on ``n_train`` rows at every C (lam = 1/(C n_train)).

    Parameters
    ----------
    model : PoolModel
        The pool's spectral model (:func:`estimate_pool_model`).
    n_train : int
        Number of training rows of the predicted probe (delta = n_train / p).
    Cs : array of float > 0
        RAPTOR's grid (scikit-learn C on standardized features).

    Returns
    -------
    ndarray
        Predicted test accuracy (a fraction in [0, 1]) at each C, in the order of ``Cs``.
    """
    Cs = check_grid(Cs)
    return theory_path(model.spectrum, n_train / model.p, 1.0 / (Cs * n_train))


def predict_lambda_star(Cs, predicted_accuracy, tolerance=1e-3) -> float:
    """The most regularized C whose predicted accuracy is within ``tolerance`` of the best (RAPTOR's tie-break).

    Parameters
    ----------
    Cs, predicted_accuracy : array of float
        The C grid and the predicted accuracy at each C (e.g. :func:`predict_path`), of one length.
    tolerance : float
        Accuracy (a fraction, not percent) below the best that still counts as a tie.

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
        The pool's spectral model (:func:`estimate_pool_model`).
    fractions : array of float in (0, 1]
        Training-set sizes as fractions of the pool (n = fraction * ``model.n_pool``).
    C : float
        The fixed C of every probe (lam = 1/(C n) for n training rows).

    Returns
    -------
    ndarray
        Predicted test accuracy (a fraction in [0, 1]) at each fraction, in the order of ``fractions``.
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
        The pool's spectral model (:func:`estimate_pool_model`).
    C : float
        Every run's C; a run fitted on n rows has lam = 1/(C n).
    n_pool : int, optional
        Pool size (default the model's).
    protocol : str
        :func:`cgmt.ablation.protocol_fractions` protocol: ``"subsample"`` (default) fits each run on its
        train rows only, (1 - drop)(1 - val_fraction) of the pool; ``"subsample_refit"`` is what
        ``RaptorProbe`` runs do: the concept vector is refit on all kept rows (train + validation).
    drop, val_fraction : float in [0, 1)
        Share of the pool each ablation run drops, and share of the kept rows it holds out for validation
        (as in :func:`cgmt.ablation.protocol_fractions`).

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
