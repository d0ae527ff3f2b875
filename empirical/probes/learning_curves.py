"""How many labels does a concept need?  Learning curves of a probe predicted from a small labelled pool.

From a layer's labelled pool of N rows (and any unlabelled rows of the same layer) this module predicts the
test accuracy a probe will reach when it is trained on n > N labelled rows:

* :func:`predict_learning_curve`: the spectral theory (:func:`cgmt.solve_spectral`) with the pool's model
  (:func:`empirical.probes.estimate_pool_model`: Sigma from every row, teacher from the
  labelled pool), at each n the **best-C accuracy**: the largest expected test accuracy over a C grid
  (``PLAN_CS``, RAPTOR's range 1e-4 .. 1e2), and the C that reaches it.  RAPTOR selects C on a validation
  split instead; that selection's own noise (it can pick a neighbouring C) is not modelled, so the prediction
  is the accuracy of a well-chosen ridge, an upper bound on the validation-selected one that differs from it
  by the selection noise (not measured yet).  Intervals come from the bootstrap of the
  pool model (``PoolModel.cv_draws``: the pool's rows resampled, each replicate recalibrated by one
  Gauss-Newton step) propagated to each n through the derivative of the predicted accuracy in the teacher
  parameters at the best C (a delta method; the C* does not move to first order), plus, with ``n_test``, the
  binomial noise of a test set of that size, so that the interval is one for a *measured* test accuracy.
  **Weak concepts (profile bounds).**  The delta method is linear in the teacher parameters; at a pool near
  chance the accuracy is flat in kappa and the no-signal shrinkage puts kappa near 0, so the delta-method interval
  has zero width and excludes a weak real signal.  The interval is therefore widened (never narrowed) to the
  *profile bounds*: the pool's fitted out-of-fold accuracy a (the unshrunk calibrated theory's best point along the
  cross-validation path) has the ``level`` band a -/+ z sqrt(a (1 - a) / N) of an accuracy measured on N rows; the
  kappa whose theory reproduces each end of the band (a root in log kappa, the tilt kept) gives, at each n, the
  best-C accuracy that bounds the interval (about chance where the band reaches chance).  With ``n_test`` the
  test noise is added to the profile half-widths in quadrature.  On weak synthetic teachers (p = 100, pools of 300
  predicted at 1,200, 10 pools per teacher) the coverage of the 90 % interval went from 0.1 / 0.6 / 0.9 (delta
  method alone) to 0.9 / 0.9 / 0.9 at population accuracies 0.55 / 0.60 / 0.72 (docs/learning_curves.md).
  **Calibration (the pool's backtest).**  Neither the bootstrap nor the profile carries the theory's own error on
  real features (the teacher's direction, non-Gaussian features, the shrinkage's error).  :func:`backtest_error`
  measures it on the pool itself: the pool model of each half of the pool forecasts the full pool's out-of-fold
  accuracy (one doubling of the labels); the error beyond the forecast's sampling noise, carried to the full pool
  (x 1/sqrt 2), is an error per doubling, and ``model_error`` widens the interval in quadrature by z x that error
  x the doublings from the pool's fold size to n.  ``raptor plan`` and the validation section both use it.  On
  the weakest cached concept (Common, layers 1-13 of SmolLM2, pools of 300 predicted at 1,200 labels, 36 pools,
  truth at the validation-selected C) the 90 % interval's coverage went 0.69 (delta method) / 0.81 (profile) /
  0.92 (profile + backtest), mean width 0.10 / 0.12 / 0.20 (docs/learning_curves.md).
* :func:`predict_best_layer`: which layer wins at n, with every layer's predicted accuracy.
* :func:`labels_needed`: the labels a curve needs to reach a target accuracy (with the range its interval
  gives).
* :func:`isotropic_curve`: the isotropic theory beside the spectral one (kappa from the pool's cross-validated
  accuracy, :func:`empirical.probes.real_embedding.kappa_from_accuracy`; no covariance), so that a reader sees what
  the spectral model adds.
* Two baselines with the same inputs (the pool's hidden states and labels) and the same result type:
  :func:`no_gain_curve`, the pool's own cross-validated best-C accuracy at every n ("more labels change
  nothing"), and :func:`power_law_curve`, the standard practice of fitting a power-law learning curve
  acc(n) = a - b n^(-c) to accuracies measured on subsamples of the pool and extrapolating it (Cortes et al.,
  NeurIPS 1994; Figueroa et al., BMC Med. Inform. Decis. Mak. 12:8, 2012, who fit this inverse power law to a
  small labelled set to predict the sample size a classifier needs; Hestness et al., arXiv:1712.00409, 2017;
  survey: Viering & Loog, IEEE TPAMI 2022).  The subsample accuracies are the best-C accuracy of probes fitted
  on stratified subsamples of the pool and tested on the pool rows they left out; the fit is
  :func:`empirical.probes.structure.fit_power_law`; its interval is a bootstrap over the subsample repeats.
  :func:`pool_curves` fits, through the same subsample points, the power law and the four-parameter families of
  the learning-curve databases (POW4, MMF4, WBL4: :mod:`empirical.probes._curve_families`).

Every function returns a :class:`LearningCurve`; n below the pool is an error (the pool's own accuracy is
measured, not predicted), as are NaN hidden states, a pool with one class and bad options.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.stats import norm

import cgmt
from cgmt.validation import SPECTRAL_DELTA_MAX
from empirical.common.checks import as_generator, check_int, check_scalar

from ..common.arrays import check_binary_labels, check_grid, check_matrix, check_min_per_class
from ..logistic import logistic_path
from ..numerics import standardize, standardize_stats
from ._curve_families import CURVE_FAMILIES, fit_curve_family
from ._spectral_prediction import CV_LAMBDAS, KAPPA_BOUNDS, PoolModel, estimate_pool_models, spectrum_from, theory_path
from .real_embedding import cross_validated_path, kappa_from_accuracy
from .structure import fit_power_law, stratified_subsample

__all__ = ["LearningCurve", "BestLayer", "predict_learning_curve", "predict_best_layer", "labels_needed",
           "no_gain_curve", "power_law_curve", "pool_curves", "POOL_CURVE_METHODS", "CAPPED_POWER_LAW", "FAMILY_BOOT",
           "theory_ceiling", "theory_best_C", "CEILING_RATIO", "isotropic_curve",
           "backtest_error", "pool_backtest_errors",
           "check_targets", "PLAN_CS", "POWER_LAW_FRACTIONS"]

#: the C grid of the best-C accuracy: RAPTOR's range (1e-4 .. 1e2), two points per decade
PLAN_CS = np.logspace(-4, 2, 13)
#: pool fractions of the power-law baseline's subsamples
POWER_LAW_FRACTIONS = (0.25, 0.4, 0.55, 0.7, 0.85)
_STEP = 1e-3


@dataclass(frozen=True)
class LearningCurve:
    """Predicted test accuracy at several training sizes (returned by every predictor of this module).

    Attributes
    ----------
    n : ndarray of float
        Training sizes (labelled rows the probe is fitted on).
    accuracy : ndarray
        Predicted test accuracy at each n (the best-C accuracy).
    low, high : ndarray
        The ``level`` prediction interval at each n.
    C_star : ndarray
        The C (scikit-learn convention on standardized features) of the prediction at each n; NaN for the
        baselines, which do not predict one.
    level : float
        Coverage the interval aims at.
    method : str
        ``"spectral/<teacher>"``, ``"isotropic"``, ``"no_gain"`` or ``"power_law"``.
    n_pool : int
        Labelled rows the prediction used.
    draws : ndarray (n_draws, len(n))
        The bootstrap draws behind the interval (empty when the interval is analytic).
    n_test : int or None
        Test-set size whose binomial noise the interval includes.
    """

    n: np.ndarray
    accuracy: np.ndarray
    low: np.ndarray
    high: np.ndarray
    C_star: np.ndarray
    level: float
    method: str
    n_pool: int
    draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    n_test: int | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per n: ``n``, ``accuracy``, ``low``, ``high``, ``C_star``, ``method``."""
        return pd.DataFrame(dict(n=self.n, accuracy=self.accuracy, low=self.low, high=self.high, C_star=self.C_star,
                                 method=self.method))


@dataclass(frozen=True)
class BestLayer:
    """Which layer wins at n (returned by :func:`predict_best_layer`).

    Attributes
    ----------
    layer : hashable
        The layer with the highest predicted accuracy.
    accuracy, low, high, C_star : float
        Its prediction, interval and C.
    n : float
        The training size (labelled rows) the layers were compared at.
    table : pandas.DataFrame
        Every layer: ``layer``, ``accuracy``, ``low``, ``high``, ``C_star``, sorted by layer.
    """

    layer: object
    accuracy: float
    low: float
    high: float
    C_star: float
    n: float
    table: pd.DataFrame = field(repr=False)


# --------------------------------------------------------------------------- input checks
def check_targets(n_values, n_pool, name="n_values", n_max=None) -> np.ndarray:
    """Training sizes to predict at: a non-empty 1-D array of finite numbers in ``[n_pool, n_max]``.

    Parameters
    ----------
    n_values : float or array-like
        Training sizes (labelled rows).
    n_pool : int
        Labelled rows of the pool: a smaller n is measured on the pool, not predicted.
    name : str
        The argument's name, used in messages.
    n_max : float, optional
        The largest size the theory resolves (:func:`predict_learning_curve`: ``SPECTRAL_DELTA_MAX * p``, the domain
        of the spectral theory's sample ratio n/p, :data:`cgmt.validation.SPECTRAL_DELTA_MAX`); default no bound.

    Returns
    -------
    ndarray of float
        ``n_values`` as a 1-D float array (same order).

    Examples
    --------
    >>> check_targets([400, 800], 400).tolist()
    [400.0, 800.0]
    >>> check_targets([200], 400)
    Traceback (most recent call last):
    ...
    ValueError: n_values must be >= the pool's 400 labelled rows (a smaller n is measured on the pool, not predicted),
    got 200
    """
    try:
        n = np.atleast_1d(np.asarray(n_values, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {n_values!r}") from None
    if n.ndim != 1 or n.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D list of training sizes, got shape {n.shape}")
    if not np.all(np.isfinite(n)):
        raise ValueError(f"{name} must be finite, got {n.tolist()}")
    if np.any(n < n_pool):
        raise ValueError(f"{name} must be >= the pool's {n_pool} labelled rows (a smaller n is measured on the pool, "
                         f"not predicted), got {float(n.min()):g}")
    if n_max is not None and np.any(n > n_max):
        raise ValueError(f"{name} must be at most {n_max:g} (n/p beyond the theory's domain of the sample ratio), got "
                         f"{float(n.max()):g}")
    return n


def _check_level(level):
    return check_scalar(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)


def _check_n_test(n_test):
    return None if n_test is None else check_int(n_test, "n_test", minimum=1)


def _interval(accuracy, draws, level, n_test, rng):
    """Percentile interval of the draws (plus binomial test noise), or a normal one without draws."""
    accuracy = np.asarray(accuracy, dtype=float)
    if n_test is not None and draws.shape[0]:
        draws = draws + rng.standard_normal(draws.shape) * np.sqrt(np.clip(draws * (1 - draws), 0, None) / n_test)
    if draws.shape[0]:
        tail = (1.0 - level) / 2
        low, high = np.quantile(draws, [tail, 1.0 - tail], axis=0)
        return np.clip(low, 0, 1), np.clip(high, 0, 1), draws
    sd = np.sqrt(accuracy * (1 - accuracy) / n_test) if n_test is not None else np.zeros_like(accuracy)
    z = norm.ppf(0.5 + level / 2)
    return np.clip(accuracy - z * sd, 0, 1), np.clip(accuracy + z * sd, 0, 1), draws


# --------------------------------------------------------------------------- the theory
def _at_kappa(model, log_kappa):
    """The model's unshrunk spectrum with log kappa replaced (the tilt, if any, kept)."""
    theta = model.parameters.copy()
    theta[0] = log_kappa
    return spectrum_from(model.base_spectrum, theta)


def _pool_accuracy_band(model, level):
    """The pool's fitted out-of-fold accuracy a (the unshrunk calibrated theory's best point along the pool's
    cross-validation path) and the ``level`` band a -/+ z sqrt(a (1 - a) / N) of an accuracy measured on the pool's
    N out-of-fold rows."""
    delta = model.cv_train_size / model.p
    fitted = float(np.max(theory_path(_at_kappa(model, model.parameters[0]), delta, model.cv_lambdas)))
    z = norm.ppf(0.5 + level / 2)
    half = z * math.sqrt(max(fitted * (1 - fitted), 0.25 / model.n_pool) / model.n_pool)
    return fitted, fitted - half, fitted + half


def _kappa_for(model, target):
    """log kappa at which the unshrunk theory's best accuracy along the pool's path equals ``target`` (clipped to
    :data:`KAPPA_BOUNDS`: a target at or below the smallest kappa's accuracy, about chance, gives that kappa)."""
    delta = model.cv_train_size / model.p
    lo, hi = (math.log(k) for k in KAPPA_BOUNDS)

    def gap(log_kappa):
        return float(np.max(theory_path(_at_kappa(model, log_kappa), delta, model.cv_lambdas))) - target

    g_lo, g_hi = gap(lo), gap(hi)
    if g_lo >= 0:
        return lo
    if g_hi <= 0:
        return hi
    return brentq(gap, lo, hi, xtol=1e-3)


def _profile_interval(model, n, Cs, level):
    """Non-linear ``level`` bounds at each n: the best-C accuracy of the teachers whose kappa reproduces the ends of
    the pool's accuracy band (:func:`_pool_accuracy_band`); about chance where the band's lower end is at or below
    the smallest kappa's accuracy (no signal cannot be ruled out)."""
    _, a_low, a_high = _pool_accuracy_band(model, level)
    bounds = []
    for target in (a_low, a_high):
        spectrum = _at_kappa(model, _kappa_for(model, target))
        bounds.append(np.array([_best_C(spectrum, size, model.p, Cs)[0] for size in n]))
    return bounds[0], bounds[1]


def _best_C(spectrum, n, p, Cs):
    """(accuracy, C index, CGMTResult) of the best C of the theory path at n rows."""
    path = spectrum.solve_path(n / p, 1.0 / (Cs * n))
    acc = np.array([r.accuracy if r.success else -np.inf for r in path])
    if not np.any(np.isfinite(acc)):
        raise ValueError(f"the spectral fixed point did not converge at any C for n = {n:g} (kappa = "
                         f"{spectrum.kappa:.3g}); no prediction")
    best = acc.max()
    k = int(np.flatnonzero(acc == best)[np.argmin(Cs[acc == best])])  # RAPTOR's tie-break: most regularized
    return float(best), k, path[k]


def _doublings(model, n):
    """Doublings of the training size from the pool model's calibration point (its folds' training size) to n."""
    return np.log2(np.maximum(np.asarray(n, dtype=float) / model.cv_train_size, 1.0))


def backtest_error(model: PoolModel, H_pool, y_pool, *, H_unlabeled=None, folds=5, chance_z=2.0,
                   random_state=0) -> float:
    """The pool's own forecast error per doubling of the labels: the model error that ``model_error`` of
    :func:`predict_learning_curve` adds to the interval.

    The pool is split into two stratified halves A and B.  The pool model of each half (same teacher, covariance,
    folds, ridge path and no-signal rule as ``model``; the other half and ``H_unlabeled`` as unlabelled rows, no
    bootstrap) predicts the best out-of-fold accuracy along the path at the full pool's fold size, one doubling of
    its own; the full pool's measured best out-of-fold accuracy a (``model.cv_accuracy``) is the truth.  With
    e_A, e_B the two errors (measured minus predicted) and e their mean, the error per doubling is
    ``sqrt(max(e**2 - v, 0) / 2)``: ``v = 2 a (1 - a) / N`` is the sampling variance of e when the theory has no
    error (the measured accuracy's a(1 - a)/N plus the mean of two independent half-pool calibrations, a(1 - a)/(N/2)
    each), so a backtest that errs no more than its noise adds nothing; the factor 1/2 (1/sqrt(2) on the error)
    carries the half's error over to the full pool, which has twice its rows (an estimation error falls as
    N^(-1/2)).  What is left is the predictor's error on the pool's own features (the teacher's direction,
    non-Gaussian features, the no-signal shrinkage on weak concepts), carried in proportion to how far the target
    is extrapolated.  On exact teacher-student data it is 0 in most pools (20 of 30 in the measurement of
    docs/learning_curves.md).

    Parameters
    ----------
    model : PoolModel
        The pool model of ``H_pool`` (:func:`empirical.probes.estimate_pool_model`).
    H_pool : ndarray (N, p)
        The labelled pool it was estimated from (raw hidden states).
    y_pool : array (N,)
        Its binary labels; each class needs at least ``2 folds`` rows (each half is cross-validated).
    H_unlabeled : ndarray (M, p), optional
        The unlabelled rows ``model`` used.
    folds : int
        Cross-validation folds ``model`` used (>= 2).
    chance_z : float
        The no-signal rule ``model`` used (:func:`empirical.probes.estimate_pool_model`).
    random_state : int
        Seed of the halves and of their folds.

    Returns
    -------
    float
        The error per doubling (>= 0, in accuracy).

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> from empirical.probes import estimate_pool_model
    >>> H, y, _, _ = synthetic_hidden_states(300, 0, 20, shift=1.0, seed=0)
    >>> model = estimate_pool_model(H, y, teacher="calibrated", n_boot=0)
    >>> bool(0.0 <= backtest_error(model, H, y) < 0.2)
    True
    """
    if not isinstance(model, PoolModel):
        raise ValueError(f"model must be a PoolModel (estimate_pool_model), got {type(model).__name__}")
    return pool_backtest_errors({model.teacher: model}, H_pool, y_pool, H_unlabeled=H_unlabeled, folds=folds,
                                chance_z=chance_z, random_state=random_state)[model.teacher]


def pool_backtest_errors(models, H_pool, y_pool, *, H_unlabeled=None, folds=5, chance_z=2.0, random_state=0) -> dict:
    """:func:`backtest_error` of several pool models of one pool at once (each half's cross-validation path and pool
    fit shared, as :func:`empirical.probes.estimate_pool_models` shares them).

    Parameters
    ----------
    models : mapping teacher -> PoolModel
        Pool models of ``H_pool`` with one covariance and ridge path (:func:`estimate_pool_models`).
    H_pool, y_pool, H_unlabeled, folds, chance_z, random_state
        As for :func:`backtest_error`.

    Returns
    -------
    dict
        teacher -> error per doubling.

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> from empirical.probes import estimate_pool_models
    >>> H, y, _, _ = synthetic_hidden_states(300, 0, 20, shift=1.0, seed=0)
    >>> models = estimate_pool_models(H, y, teachers=("calibrated", "deconvolved"), n_boot=0)
    >>> sorted(pool_backtest_errors(models, H, y))
    ['calibrated', 'deconvolved']
    """
    if not hasattr(models, "items") or not len(models) or not all(isinstance(m, PoolModel) for m in models.values()):
        raise ValueError(f"models must be a non-empty mapping teacher -> PoolModel, got {models!r:.80}")
    folds = check_int(folds, "folds", minimum=2)
    H, y_signed = _check_pool(H_pool, y_pool, 2 * folds)
    for model in models.values():
        if (model.n_pool, model.p) != H.shape:
            raise ValueError(f"H_pool must be the models' pool, shape ({model.n_pool}, {model.p}), got {H.shape}")
        if model.teacher not in models or models[model.teacher] is not model:
            raise ValueError(f"models must map each model's teacher to it, got {list(models)!r}")
    U = np.zeros((0, H.shape[1])) if H_unlabeled is None else check_matrix(H_unlabeled, "H_unlabeled")
    if U.shape[1] != H.shape[1]:
        raise ValueError(f"H_unlabeled must have the pool's {H.shape[1]} columns, got {U.shape[1]}")
    random_state = check_int(random_state, "random_state", minimum=0)
    chance_z = check_scalar(chance_z, "chance_z", low=0.0)
    return _backtest(dict(models), H, y_signed, U, folds, chance_z, random_state)


def _backtest(models, H, y_signed, U, folds, chance_z, random_state):
    """:func:`backtest_error` of several pool models of the same pool (teacher -> model, one covariance and path),
    sharing each half's cross-validation path and pool fit (checked inputs, labels in {-1, +1})."""
    first = next(iter(models.values()))
    half = stratified_subsample(y_signed, H.shape[0] // 2, np.random.default_rng(random_state))
    other = np.setdiff1d(np.arange(H.shape[0]), half)
    delta = first.cv_train_size / first.p
    a = float(np.max(first.cv_accuracy))
    errors = {teacher: [] for teacher in models}
    for part, rest in ((half, other), (other, half)):
        subs = estimate_pool_models(H[part], y_signed[part], teachers=tuple(models), covariance=first.covariance,
                                    folds=folds, random_state=random_state, cv_lambdas=first.cv_lambdas,
                                    H_unlabeled=np.vstack([H[rest], U]), n_boot=0, chance_z=chance_z)
        for teacher, sub in subs.items():
            errors[teacher].append(a - float(np.max(theory_path(sub.spectrum, delta, first.cv_lambdas))))
    noise = 2.0 * a * (1.0 - a) / H.shape[0]
    return {teacher: math.sqrt(max(float(np.mean(e)) ** 2 - noise, 0.0) / 2.0) for teacher, e in errors.items()}



def predict_learning_curve(model: PoolModel, n_values, Cs=None, level=0.9, *, n_test=None,
                           seed=0, profile=True, model_error=0.0) -> LearningCurve:
    """Predicted best-C test accuracy of a probe trained on n labelled rows, for every n in ``n_values``.

    The accuracy at n is the maximum over ``Cs`` of the spectral theory's expected test accuracy of the
    probe fitted on n rows at lam = 1/(C n) with the pool's Sigma and teacher: the accuracy at the best ridge,
    not at RAPTOR's validation-selected one (module docstring).  The interval propagates the pool model's
    bootstrap (``model.cv_draws``) through the derivative of that accuracy in the teacher parameters.

    Parameters
    ----------
    model : PoolModel
        From :func:`empirical.probes.estimate_pool_model` (``n_boot > 0`` for intervals).
    n_values : float or array of float
        Training sizes, each >= ``model.n_pool``.
    Cs : array of float, optional
        The C grid (default :data:`PLAN_CS`).
    level : float in (0, 1)
        Interval coverage.
    n_test : int, optional
        Include the binomial noise of a test set of this size (an interval for a measured accuracy).
    seed : int
        Seed of that noise.
    profile : bool
        Widen the interval to the profile bounds (module docstring, "weak concepts"): the predictions of the
        teachers whose signal strength kappa reproduces the ends of the ``level`` band of the pool's out-of-fold
        accuracy.  ``False`` gives the delta-method interval alone (narrower; at a pool near chance it has zero
        width).
    model_error : float >= 0
        The theory's error per doubling of the labels (:func:`backtest_error`, the pool's own forecast from half
        the pool to the pool): the interval's half-widths are widened in quadrature by z x ``model_error`` x d,
        d = log2(n / the pool model's fold size), the doublings the target is extrapolated (module docstring,
        "calibration").  0 (default) adds nothing.

    Returns
    -------
    LearningCurve
        ``method`` is ``"spectral/<teacher>"``; ``draws`` are the bootstrap draws of the accuracy.

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> from empirical.probes import estimate_pool_model
    >>> H, y, _, _ = synthetic_hidden_states(300, 0, 20, shift=2.0, seed=0)
    >>> curve = predict_learning_curve(estimate_pool_model(H, y, teacher="calibrated", n_boot=50), [300, 3000])
    >>> bool(curve.accuracy[1] > curve.accuracy[0]), bool(np.all(curve.low <= curve.accuracy))
    (True, True)
    """
    if not isinstance(model, PoolModel):
        raise ValueError(f"model must be a PoolModel (estimate_pool_model), got {type(model).__name__}")
    n = check_targets(n_values, model.n_pool, n_max=SPECTRAL_DELTA_MAX * model.p)
    rng = as_generator(seed, "seed")
    Cs = np.asarray(check_grid(PLAN_CS if Cs is None else Cs), dtype=float)
    level = _check_level(level)
    n_test = _check_n_test(n_test)
    if not isinstance(profile, (bool, np.bool_)):
        raise ValueError(f"profile must be True or False, got {profile!r}")
    model_error = check_scalar(model_error, "model_error", low=0.0, high=1.0)
    theta = model.parameters
    acc = np.empty(n.size)
    C_star = np.empty(n.size)
    grad = np.zeros((n.size, theta.size))
    shifted = []
    for j in range(theta.size):
        step = theta.copy()
        step[j] += _STEP
        shifted.append(model.spectrum_at(step))
    for i, size in enumerate(n):
        acc[i], k, res = _best_C(model.spectrum, size, model.p, Cs)
        C_star[i] = Cs[k]
        lam = 1.0 / (Cs[k] * size)
        for j, spectrum in enumerate(shifted):
            other = spectrum.solve(size / model.p, lam, x0=res)
            grad[i, j] = (other.accuracy - acc[i]) / _STEP if other.success else 0.0
    if model.cv_draws.shape[0] and theta.size:
        gain = np.linalg.pinv(model.cv_jacobian, rcond=1e-4)  # OOF-path perturbation -> parameter perturbation
        draws = np.clip(acc + model.cv_draws @ (grad @ gain).T, 0.0, 1.0)
    else:
        draws = np.zeros((0, n.size))
    low, high, draws = _interval(acc, draws, level, n_test, rng)
    if profile and theta.size and model.base_spectrum is not None:
        p_low, p_high = _profile_interval(model, n, Cs, level)
        if n_test is not None:  # the test noise added to the profile's half-widths in quadrature
            z = norm.ppf(0.5 + level / 2)
            sd = np.sqrt(acc * (1 - acc) / n_test)
            p_low = acc - np.sqrt(np.clip(acc - p_low, 0, None) ** 2 + (z * sd) ** 2)
            p_high = acc + np.sqrt(np.clip(p_high - acc, 0, None) ** 2 + (z * sd) ** 2)
        low, high = np.clip(np.minimum(low, p_low), 0, 1), np.clip(np.maximum(high, p_high), 0, 1)
    if model_error > 0:
        extra = norm.ppf(0.5 + level / 2) * model_error * _doublings(model, n)
        low = np.clip(acc - np.hypot(np.clip(acc - low, 0, None), extra), 0, 1)
        high = np.clip(acc + np.hypot(np.clip(high - acc, 0, None), extra), 0, 1)
    return LearningCurve(n=n, accuracy=acc, low=np.minimum(low, acc), high=np.maximum(high, acc), C_star=C_star,
                         level=level, method=f"spectral/{model.teacher}", n_pool=model.n_pool, draws=draws,
                         n_test=n_test)


def predict_best_layer(models, n, *, Cs=None, level=0.9, n_test=None) -> BestLayer:
    """Which layer wins at n: the layer whose predicted best-C accuracy (:func:`predict_learning_curve`) is highest.

    Parameters
    ----------
    models : mapping layer -> PoolModel
        One pool model per layer (the same pool rows).
    n : float
        Training size (>= every model's pool).
    Cs, level, n_test
        As for :func:`predict_learning_curve`.

    Returns
    -------
    BestLayer

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> from empirical.probes import estimate_pool_model
    >>> H, y, _, _ = synthetic_hidden_states(300, 0, 20, shift=2.0, seed=0)
    >>> weak = H + 2 * np.random.default_rng(1).standard_normal(H.shape)
    >>> models = {1: estimate_pool_model(weak, y, teacher="calibrated", n_boot=0),
    ...           2: estimate_pool_model(H, y, teacher="calibrated", n_boot=0)}
    >>> predict_best_layer(models, 1000).layer
    2
    """
    if not hasattr(models, "items") or not len(models):
        raise ValueError(f"models must be a non-empty mapping layer -> PoolModel, got {models!r:.60}")
    rows = []
    for layer, model in models.items():
        curve = predict_learning_curve(model, [n], Cs, level, n_test=n_test)
        rows.append(dict(layer=layer, accuracy=float(curve.accuracy[0]), low=float(curve.low[0]),
                         high=float(curve.high[0]), C_star=float(curve.C_star[0])))
    best = max(rows, key=lambda row: row["accuracy"])  # the first of equal ones, in the order of ``models``
    table = pd.DataFrame(rows).sort_values("layer", kind="stable").reset_index(drop=True)
    return BestLayer(layer=best["layer"], accuracy=best["accuracy"], low=best["low"], high=best["high"],
                     C_star=best["C_star"], n=float(n), table=table)


def labels_needed(curve: LearningCurve, target_accuracy) -> dict:
    """Training size at which ``curve`` first reaches ``target_accuracy`` (linear in log n between its points).

    Parameters
    ----------
    curve : LearningCurve
        Over a grid of n wide enough to contain the answer (e.g. ``np.geomspace(N, 64 N, 25)``).
    target_accuracy : float in (0.5, 1)
        The test accuracy to reach (a fraction, not percent).

    Returns
    -------
    dict
        ``n`` (from the predicted accuracy), ``n_optimistic`` (from the interval's upper end),
        ``n_pessimistic`` (from its lower end); ``inf`` where the curve stays below the target on its grid.

    Examples
    --------
    >>> c = LearningCurve(np.array([100., 1000.]), np.array([.7, .9]), np.array([.65, .85]), np.array([.75, .95]),
    ...                   np.full(2, np.nan), 0.9, "test", 100)
    >>> {k: round(v) for k, v in labels_needed(c, 0.8).items()}
    {'n': 316, 'n_optimistic': 178, 'n_pessimistic': 562}
    """
    target = check_scalar(target_accuracy, "target_accuracy", low=0.5, high=1.0, low_open=True, high_open=True)
    log_n = np.log(curve.n)

    def first(values):
        above = np.flatnonzero(values >= target)
        if not above.size:
            return math.inf
        i = int(above[0])
        if i == 0:
            return float(curve.n[0])
        f = (target - values[i - 1]) / (values[i] - values[i - 1])
        return float(np.exp(log_n[i - 1] + f * (log_n[i] - log_n[i - 1])))

    return {"n": first(curve.accuracy), "n_optimistic": first(curve.high), "n_pessimistic": first(curve.low)}


# --------------------------------------------------------------------------- baselines
def _check_pool(H_pool, y_pool, folds):
    H = check_matrix(H_pool, "H_pool")
    _, y_signed = check_binary_labels(y_pool, H.shape[0], "y_pool")
    check_min_per_class(y_signed, "y_pool (labelled pool)", minimum=folds)
    return H, y_signed


def no_gain_curve(H_pool, y_pool, n_values, *, level=0.9, n_test=None, folds=5, cv_lambdas=CV_LAMBDAS,
                  random_state=0) -> LearningCurve:
    """Baseline "no gain from more labels": the pool's cross-validated best-C accuracy at every n.

    The accuracy is the best out-of-fold accuracy along the pool's cross-validation path
    (:func:`empirical.probes.real_embedding.cross_validated_path`, the path the pool model is calibrated on);
    the interval is the normal one of a proportion measured on the pool's N rows (plus the test noise).

    Parameters
    ----------
    H_pool : ndarray (N, p)
        Hidden states of the labelled pool (raw; each fold standardizes with its own training statistics).
    y_pool : array (N,)
        Binary labels of the pool (any two values).
    n_values : array of float >= N
        Training sizes to report the (constant) accuracy at.
    level : float in (0, 1)
        Interval coverage.
    n_test : int, optional
        As in :func:`predict_learning_curve`.
    folds : int
        Stratified cross-validation folds (>= 2; each class needs at least that many rows).
    cv_lambdas : array of float
        Ridge grid of the cross-validation path, theory convention lam = 1/(C n_fold) (default :data:`CV_LAMBDAS`
        of :mod:`empirical.probes._spectral_prediction`).
    random_state : int
        Seed of the stratified folds.

    Returns
    -------
    LearningCurve
        ``method`` ``"no_gain"``.

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> H, y, _, _ = synthetic_hidden_states(200, 0, 10, shift=1.0, seed=0)
    >>> c = no_gain_curve(H, y, [200, 800])
    >>> bool(c.accuracy[0] == c.accuracy[1]), bool(c.low[0] < c.accuracy[0])
    (True, True)
    """
    folds = check_int(folds, "folds", minimum=2)
    H, y_signed = _check_pool(H_pool, y_pool, folds)
    n = check_targets(n_values, H.shape[0])
    level = _check_level(level)
    n_test = _check_n_test(n_test)
    acc = float(np.max(cross_validated_path(H, y_signed, np.asarray(cv_lambdas, dtype=float), folds, random_state)[0]))
    var = acc * (1 - acc) * (1.0 / H.shape[0] + (1.0 / n_test if n_test else 0.0))
    z = norm.ppf(0.5 + level / 2)
    point = np.full(n.size, acc)
    return LearningCurve(n=n, accuracy=point, low=np.clip(point - z * math.sqrt(var), 0, 1),
                         high=np.clip(point + z * math.sqrt(var), 0, 1), C_star=np.full(n.size, np.nan), level=level,
                         method="no_gain", n_pool=H.shape[0], n_test=n_test)


def isotropic_curve(H_pool, y_pool, n_values, *, Cs=None, level=0.9, n_test=None, folds=5, cv_lambdas=CV_LAMBDAS,
                    random_state=0) -> LearningCurve:
    """The isotropic theory's learning curve (no covariance): shown beside the spectral one.

    kappa is the one at which the isotropic fixed point (:func:`cgmt.solve`) reproduces the pool's best
    cross-validated accuracy a (at the fold size and the cross-validation path's best ridge,
    :func:`empirical.probes.real_embedding.kappa_from_accuracy`); at each n the prediction is the best-C accuracy of
    :func:`cgmt.solve` at delta = n / p over ``Cs``.  The interval maps the band a -/+ z sqrt(a (1 - a) / N) of an
    accuracy measured on N rows through kappa (the accuracy is increasing in kappa), plus, with ``n_test``, the
    test noise in quadrature.

    Parameters
    ----------
    H_pool : ndarray (N, p)
        Hidden states of the labelled pool (raw; each fold standardizes with its own training statistics).
    y_pool : array (N,)
        Binary labels of the pool (any two values).
    n_values : array of float >= N
        Training sizes to predict at.
    Cs : array of float, optional
        The C grid of the best-C accuracy (default :data:`PLAN_CS`).
    level : float in (0, 1)
        Interval coverage.
    n_test : int, optional
        As in :func:`predict_learning_curve`.
    folds : int
        Stratified cross-validation folds (>= 2; each class needs at least that many rows).
    cv_lambdas : array of float
        Ridge grid of the cross-validation path (theory convention, as :func:`no_gain_curve`).
    random_state : int
        Seed of the stratified folds.

    Returns
    -------
    LearningCurve
        ``method`` ``"isotropic"``; ``C_star`` the theory's best C at each n.

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> H, y, _, _ = synthetic_hidden_states(200, 0, 10, shift=1.0, seed=0)
    >>> c = isotropic_curve(H, y, [200, 800])
    >>> c.method, bool(c.accuracy[1] >= c.accuracy[0]), bool(np.all(c.low <= c.accuracy))
    ('isotropic', True, True)
    """
    folds = check_int(folds, "folds", minimum=2)
    H, y_signed = _check_pool(H_pool, y_pool, folds)
    N, p = H.shape
    n = check_targets(n_values, N)
    Cs = PLAN_CS if Cs is None else check_grid(Cs)
    level = _check_level(level)
    n_test = _check_n_test(n_test)
    lambdas = np.asarray(cv_lambdas, dtype=float)
    path, _, n_fit = cross_validated_path(H, y_signed, lambdas, folds, random_state)
    best = int(np.argmax(path))
    acc, lam = float(path[best]), float(lambdas[best])
    z = norm.ppf(0.5 + level / 2)
    half = z * math.sqrt(acc * (1 - acc) / N)
    kappas = [kappa_from_accuracy(min(max(a, 0.0), 1.0), n_fit / p, lam) for a in (acc, acc - half, acc + half)]

    def best_C(kappa, size):
        accs = np.array([cgmt.solve(size / p, 1.0 / (C * size), kappa).accuracy for C in Cs])
        return float(accs.max()), float(Cs[int(np.argmax(accs))])

    point, low, high, C_star = (np.empty(n.size) for _ in range(4))
    for i, size in enumerate(n):
        (point[i], C_star[i]), (lo, _), (hi, _) = (best_C(k, size) for k in kappas)
        test_var = point[i] * (1 - point[i]) / n_test if n_test else 0.0
        low[i] = point[i] - math.sqrt((point[i] - lo) ** 2 + z * z * test_var)
        high[i] = point[i] + math.sqrt((hi - point[i]) ** 2 + z * z * test_var)
    return LearningCurve(n=n, accuracy=point, low=np.clip(low, 0, 1), high=np.clip(high, 0, 1), C_star=C_star,
                         level=level, method="isotropic", n_pool=N, n_test=n_test)


def _subsample_paths(H, y_signed, sizes, repeats, Cs, rng):
    """Test accuracy along Cs of probes on stratified subsamples, tested on the pool rows they leave out:
    ndarray (len(sizes), repeats, len(Cs))."""
    N = H.shape[0]
    out = np.empty((len(sizes), repeats, Cs.size))
    order = np.argsort(Cs)
    for i, m in enumerate(sizes):
        for r in range(repeats):
            sub = stratified_subsample(y_signed, m, rng)
            rest = np.setdiff1d(np.arange(N), sub)
            mu, s = standardize_stats(H[sub])
            path = logistic_path(standardize(H[sub], mu, s), y_signed[sub], standardize(H[rest], mu, s),
                                 y_signed[rest], Cs[order], certify=False)
            out[i, r, order] = path.val_accuracy
    return out


#: The curves :func:`pool_curves` fits to the pool's subsample accuracies: the power law and the LCDB families
#: (:data:`empirical.probes.CURVE_FAMILIES`).
POOL_CURVE_METHODS = ("power_law", *CURVE_FAMILIES)
#: The power law whose asymptote is fixed at a ceiling from elsewhere (the theory's: :func:`theory_ceiling`);
#: :func:`pool_curves` fits it when given the ``asymptote``.
CAPPED_POWER_LAW = "capped_power_law"
#: Training rows per feature at which :func:`theory_ceiling` reads the theory (n = 1000 p: the best-C accuracy
#: is within 1e-3 of its n -> infinity limit on the cached layers)
CEILING_RATIO = 1000.0

#: Most bootstrap refits of a four-parameter family per pool (the first of the power law's draws): a refit costs
#: 10-25 ms against the power law's 2 ms, and the learning-curve section fits hundreds of pools.
FAMILY_BOOT = 50


def theory_ceiling(model: PoolModel, Cs=None) -> float:
    """The pool model's accuracy as labels grow without bound: the theory's best-C accuracy at n = 1000 p.

    The ceiling that :data:`CAPPED_POWER_LAW` fixes the power law's asymptote at: the pool's own curve gives the
    growth, the theory (Sigma and the calibrated teacher, with its no-signal shrinkage) the limit.

    Parameters
    ----------
    model : PoolModel
        The pool's spectral model (:func:`empirical.probes.estimate_pool_model`).
    Cs : array of float, optional
        The C grid of the best-C accuracy (default :data:`PLAN_CS`).

    Returns
    -------
    float
        The best-C accuracy at ``CEILING_RATIO`` x p training rows, in [0.5, 1].
    """
    Cs = np.asarray(check_grid(PLAN_CS if Cs is None else Cs), dtype=float)
    return _best_C(model.spectrum, CEILING_RATIO * model.p, model.p, Cs)[0]


def theory_best_C(model: PoolModel, n, Cs=None) -> float:
    """The C at which the pool model's theory reaches its best accuracy with ``n`` training rows (the ridge to use
    there; RAPTOR's tie-break: the most regularized of equal ones).

    Parameters
    ----------
    model : PoolModel
        The pool's spectral model.
    n : float
        Training rows.
    Cs : array of float, optional
        The C grid (scikit-learn convention on standardized features; default :data:`PLAN_CS`).

    Returns
    -------
    float
        That C.
    """
    Cs = np.asarray(check_grid(PLAN_CS if Cs is None else Cs), dtype=float)
    n = check_scalar(n, "n", low=1.0)
    return float(Cs[_best_C(model.spectrum, n, model.p, Cs)[1]])


def pool_curves(H_pool, y_pool, n_values, *, methods=POOL_CURVE_METHODS, fractions=POWER_LAW_FRACTIONS, repeats=4,
                Cs=None, level=0.9, n_test=None, n_boot=200, random_state=0, asymptote=None) -> dict:
    """Baselines that extrapolate the pool's own learning curve: parametric curves fitted to its subsample
    accuracies.

    For each fraction f, ``repeats`` stratified subsamples of round(f N) pool rows are fitted along ``Cs`` and
    tested on the pool rows they leave out; the subsample size's accuracy is the best C of the mean path over
    its repeats (the best-C accuracy, as :func:`predict_learning_curve` predicts).  Every method fits a curve
    through the same points and reads it off at each n:

    * ``power_law``: acc(n) = a - b n^(-c) (:func:`empirical.probes.structure.fit_power_law`: least squares,
      b >= 0, 0 < c <= 3, a <= 1), the inverse power law of the learning-curve literature (module docstring:
      Figueroa et al. 2012, Hestness et al. 2017, Viering & Loog 2022);
    * ``pow4``, ``mmf4``, ``wbl4``: the four-parameter families of the learning-curve databases (LCDB, Mohr et
      al. 2022; LCDB 1.1, Yan, Mohr and Viering 2025), fitted non-decreasing within [0, 1]
      (:func:`empirical.probes._curve_families.fit_curve_family`);
    * ``capped_power_law`` (with ``asymptote``): the power law with its asymptote fixed at
      ``max(asymptote, the best subsample point)``, b and c fitted (the theory's ceiling, :func:`theory_ceiling`,
      with the pool's own growth).

    Interval: each fit repeated on ``n_boot`` bootstrap resamples of the repeats at every size (percentiles, plus
    the test noise; a four-parameter family on the first :data:`FAMILY_BOOT` of them, its refits being 5-10 times
    slower); the subsample probes are fitted once for every method.

    Parameters
    ----------
    H_pool : ndarray (N, p)
        Hidden states of the labelled pool (raw; each subsample standardizes with its own statistics).
    y_pool : array (N,)
        Binary labels of the pool (any two values).
    n_values : array of float >= N
        Training sizes to extrapolate the fitted curves to.
    methods : sequence of str, default=:data:`POOL_CURVE_METHODS`
        Which curves, any of :data:`POOL_CURVE_METHODS`.
    fractions : sequence of float in (0, 1)
        Distinct subsample fractions of the pool: at least 3 sizes (4 for a four-parameter family).
    repeats : int >= 1
        Subsamples per fraction.
    Cs : array of float, optional
        Default :data:`PLAN_CS`.
    level : float in (0, 1)
        Interval coverage.
    n_test : int, optional
        As in :func:`predict_learning_curve`.
    n_boot : int >= 0
        Bootstrap refits of each curve (0: no interval beyond the test noise; at most :data:`FAMILY_BOOT` for a
        four-parameter family).
    random_state : int
        Subsamples and bootstrap.
    asymptote : float in [0, 1], optional
        The ceiling of ``capped_power_law`` (required by it, read by no other method).

    Returns
    -------
    dict of str to LearningCurve
        One curve per method (its ``method`` the key).

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> H, y, _, _ = synthetic_hidden_states(200, 0, 10, shift=1.0, seed=0)
    >>> curves = pool_curves(H, y, [200, 800], repeats=2, n_boot=10)
    >>> sorted(curves), bool(curves["wbl4"].accuracy[1] >= curves["wbl4"].accuracy[0])
    (['mmf4', 'pow4', 'power_law', 'wbl4'], True)
    """
    H, y_signed = _check_pool(H_pool, y_pool, 2)
    N = H.shape[0]
    n = check_targets(n_values, N)
    rng = as_generator(random_state, "random_state")
    level = _check_level(level)
    n_test = _check_n_test(n_test)
    repeats = check_int(repeats, "repeats", minimum=1)
    n_boot = check_int(n_boot, "n_boot", minimum=0)
    methods = tuple(methods) if not isinstance(methods, str) else (methods,)
    known = (*POOL_CURVE_METHODS, CAPPED_POWER_LAW)
    unknown = [m for m in methods if m not in known]
    if unknown or not methods:
        raise ValueError(f"methods must be among {list(known)}, got {list(methods)}")
    if CAPPED_POWER_LAW in methods:
        if asymptote is None:
            raise ValueError(f"asymptote must be given for {CAPPED_POWER_LAW!r} (e.g. theory_ceiling(pool_model)), "
                             "got None")
        asymptote = check_scalar(asymptote, "asymptote", low=0.0, high=1.0)
    Cs = np.asarray(check_grid(PLAN_CS if Cs is None else Cs), dtype=float)
    fr = np.asarray(fractions, dtype=float)
    if fr.ndim != 1 or not np.all(np.isfinite(fr)) or np.any((fr <= 0) | (fr >= 1)):
        raise ValueError(f"fractions must be numbers in (0, 1) (each subsample leaves pool rows to test on), "
                         f"got {fr.tolist()}")
    sizes = np.unique(np.clip(np.round(fr * N).astype(int), 4, N - 2))
    needed = 3 if set(methods) <= {"power_law", CAPPED_POWER_LAW} else 4
    if sizes.size < needed:
        raise ValueError(f"fractions must give at least {needed} distinct subsample sizes of the {N}-row pool "
                         f"(methods {list(methods)}), got {sizes.tolist()}")
    paths = _subsample_paths(H, y_signed, sizes, repeats, Cs, rng)
    picks = [rng.integers(0, repeats, size=(sizes.size, repeats)) for _ in range(n_boot)]
    resampled = [np.take_along_axis(paths, pick[:, :, None], axis=1).mean(axis=1).max(axis=1) for pick in picks]
    points = paths.mean(axis=1).max(axis=1)
    curves = {}
    for method in methods:
        if method in ("power_law", CAPPED_POWER_LAW):
            ceiling = asymptote if method == CAPPED_POWER_LAW else None
            fit = fit_power_law(sizes, points, asymptote=ceiling)
            refit = [fit_power_law(sizes, r, asymptote=ceiling) for r in resampled]
        else:
            fit = fit_curve_family(sizes, points, method)
            refit = [fit_curve_family(sizes, r, method, start=fit) for r in resampled[:FAMILY_BOOT]]
        acc = np.clip(fit(n), 0, 1)
        draws = np.array([np.clip(f(n), 0, 1) for f in refit]).reshape(len(refit), n.size)
        low, high, draws = _interval(acc, draws, level, n_test, rng)
        curves[method] = LearningCurve(n=n, accuracy=acc, low=np.minimum(low, acc), high=np.maximum(high, acc),
                                       C_star=np.full(n.size, np.nan), level=level, method=method, n_pool=N,
                                       draws=draws, n_test=n_test)
    return curves


def power_law_curve(H_pool, y_pool, n_values, *, fractions=POWER_LAW_FRACTIONS, repeats=4, Cs=None, level=0.9,
                    n_test=None, n_boot=200, random_state=0) -> LearningCurve:
    """Baseline: a power-law learning curve acc(n) = a - b n^(-c) fitted to the pool's subsample accuracies
    (:func:`pool_curves` with ``methods=("power_law",)``).

    Parameters
    ----------
    H_pool, y_pool, n_values, fractions, repeats, Cs, level, n_test, n_boot, random_state
        As in :func:`pool_curves` (``fractions`` must give at least 3 distinct subsample sizes).

    Returns
    -------
    LearningCurve
        ``method`` ``"power_law"``.

    Examples
    --------
    >>> from empirical.testing import synthetic_hidden_states
    >>> H, y, _, _ = synthetic_hidden_states(200, 0, 10, shift=1.0, seed=0)
    >>> c = power_law_curve(H, y, [200, 800], repeats=2, n_boot=20)
    >>> c.method, bool(c.accuracy[1] >= c.accuracy[0])
    ('power_law', True)
    """
    return pool_curves(H_pool, y_pool, n_values, methods=("power_law",), fractions=fractions, repeats=repeats,
                       Cs=Cs, level=level, n_test=n_test, n_boot=n_boot, random_state=random_state)["power_law"]
