"""RAPTOR probe: train-only standardization, validation-tuned ridge-logistic regression, exact fold-back.

Conventions
-----------
* Objective per grid value (scikit-learn): ``C * sum_i log(1 + exp(-y_i (x_i'w + b))) + 0.5 ||w||^2``
  on standardized train rows, ``lambda = 1 / C``, intercept unpenalized.
* Standardization uses train-split statistics only: mean and *population* std (zero std -> 1).
* Fold-back (default, exact): ``omega = w / s``, ``b_raw = b - <omega, mu>`` so that
  ``omega @ h + b_raw`` equals the standardized logit for every raw embedding ``h``.
  ``fold_back="paper_max1"`` reproduces the paper's appendix (divide by ``max(s, 1)``), which breaks
  that identity whenever some ``s_j < 1``.
* The positive class is ``classes_[1]``; ``concept_vector_`` is ``omega / ||omega||`` oriented so the
  positive class has the larger mean projection.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.optimize import OptimizeResult
from sklearn.base import _fit_context
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..common.arrays import TOL_MAX, check_grid, check_min_per_class
from ..common.failures import STATUS_MESSAGES, ConvergenceWarning, quiet
from ..common.resources import resolve_device
from ..logistic import MAX_ITER, fit_l2_logistic, logistic_path, reduce_design, refit
from ..numerics import PAPER_SPLIT_SEED, standardize, standardize_stats, stratified_split
from ._base import LinearConceptProbe, orient_to_positive_class

__all__ = ["RaptorProbe", "DEFAULT_CS", "select_C", "fit_on_engine", "PATH_TOL", "OPTION_CONFLICTS"]

DEFAULT_CS = np.logspace(-4, 2, 100)

#: Loosest gradient-norm tolerance the exact path stops a grid point at when its validation signs are not certified
#: (a looser ``tol`` still applies to the refit).  Above it the validation accuracy of such a point is that of an
#: iterate far from the minimizer, which depends on the solver's steps: measured on eight data sets (n < p, n > p,
#: n = p, nearly separable; 100-point grid), the numpy path and the batched engine gave other accuracies at up to 15
#: grid points and other C on 3 of 8 data sets at tol = 1e-2 .. 0.1 (issue 52's E15: C 0.0132 against 0.1233), at
#: most one point at 1e-4 and 1e-3, and none at 1e-6 or tighter (docs/probe.md, the batched engine).
PATH_TOL = 1e-8

#: Option pairs of :class:`RaptorProbe` refused together (one of them would change nothing): ``(option, other,
#: reason)``; ``X_val`` stands for validation rows given to ``fit``.
OPTION_CONFLICTS = (
    ("solver", "device", "device runs the exact solver on the batched engine; solver='paper' is scikit-learn's "
                         "lbfgs loop on the CPU"),
    ("solver", "tol", "tol is the exact solver's gradient-norm tolerance; solver='paper' runs scikit-learn's lbfgs "
                      "at its own default tolerance"),
    ("val_fraction", "X_val", "val_fraction splits the fit rows only when no X_val is given"),
    ("random_state", "X_val", "random_state seeds the validation split, made only when no X_val is given"),
    ("random_state", "val_fraction", "random_state seeds the validation split; val_fraction=0 makes none"),
)


def select_C(Cs, accuracies, tie_break="most_regularized") -> int:
    """Index of the selected grid point.

    ``"most_regularized"`` (default): the smallest C (largest lambda) among the best accuracies.
    ``"first"``: the paper's loop rule - the first grid entry reaching the best accuracy, in grid order
    (identical to the default for an ascending grid such as the paper's).

    Parameters
    ----------
    Cs : array of float
        The grid of C = 1/lambda.
    accuracies : array of float
        Validation accuracy at each grid point.
    tie_break : {"most_regularized", "first"}, default="most_regularized"
        The rule above.

    Returns
    -------
    int
        Index into ``Cs``.

    Examples
    --------
    >>> select_C([10.0, 1.0, 0.1], [0.9, 0.9, 0.8]), select_C([10.0, 1.0, 0.1], [0.9, 0.9, 0.8], "first")
    (1, 0)
    """
    acc = np.asarray(accuracies)
    best = acc.max()
    ties = np.flatnonzero(acc == best)
    if tie_break == "first":
        return int(ties[0])
    if tie_break == "most_regularized":
        return int(ties[np.argmin(np.asarray(Cs)[ties])])
    raise ValueError(f"tie_break must be 'most_regularized' or 'first', got {tie_break!r}")


def _paper_path(Xs, y, Xvs, yv, Cs, max_iter=100):
    """The paper's reference loop: scikit-learn lbfgs, warm_start, default tolerance (not converged)."""
    clf = LogisticRegression(warm_start=True, max_iter=max_iter)
    acc = np.empty(len(Cs))
    nit = np.zeros(len(Cs), dtype=int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SklearnConvergenceWarning)
        for k, C in enumerate(Cs):
            clf.set_params(C=float(C))
            clf.fit(Xs, y)
            acc[k] = np.mean(clf.predict(Xvs) == yv)
            nit[k] = int(np.max(clf.n_iter_))
    return acc, nit


@dataclass(frozen=True)
class FitInputs:
    """The fit boundary of :class:`RaptorProbe`: its rows validated once (``fit``'s checks), split and standardized
    with the training rows' statistics; what both engines (the numpy path and :func:`fit_on_engine`) consume, and
    checked nowhere after.

    Attributes
    ----------
    Xtr : ndarray of shape (n, p)
        The raw training rows (finite float64).
    ytr : ndarray of shape (n,)
        Their labels in {-1, +1} (+1: ``classes_[1]``).
    Xs, Xvs : ndarray of shape (n, p), (m, p)
        The training and validation rows standardized with ``mu`` and ``s`` (m = 0: no validation split).
    yv_signed : ndarray of shape (m,)
        The validation labels in {-1, +1}.
    mu, s : ndarray of shape (p,)
        The training rows' column means and scales (:func:`empirical.numerics.standardize_stats`).
    Cs : ndarray
        The checked grid of C = 1/lambda.
    """

    Xtr: np.ndarray
    ytr: np.ndarray
    Xs: np.ndarray
    Xvs: np.ndarray
    yv_signed: np.ndarray
    mu: np.ndarray
    s: np.ndarray
    Cs: np.ndarray


def _same_option(value, default) -> bool:
    """Whether an option holds its default (a number equal to it counts; bools and arrays are compared as such)."""
    if value is default:
        return True
    if isinstance(value, (bool, np.bool_)) or isinstance(default, (bool, np.bool_)):
        return isinstance(value, (bool, np.bool_)) and isinstance(default, (bool, np.bool_)) and value == default
    if isinstance(value, (str, Real)) and isinstance(default, (str, Real)):
        return type(value) is type(default) and value == default if isinstance(value, str) else value == default
    return False


class RaptorProbe(LinearConceptProbe):
    """Ridge-adaptive logistic probe (RAPTOR) on raw hidden states.

    The paper's algorithm: standardize with train-split statistics, fit an l2-regularized logistic
    regression for every C of a grid, select the C with the best validation accuracy, refit on train +
    validation at that C, fold the weights back to raw space and normalize them into the concept vector.
    The whole grid is solved exactly and certified (:func:`empirical.logistic.logistic_path`).

    Parameters
    ----------
    Cs : array-like of distinct floats in [C_MIN, C_MAX] = [1e-8, 1e16], optional
        Grid of C = 1/lambda values (the domain: :data:`empirical.common.arrays.C_MIN`); None means
        ``DEFAULT_CS = np.logspace(-4, 2, 100)``.
    val_fraction : float in [0, 1), default 0.2
        Fraction of ``fit(X, y)`` rows held out (stratified) for validation when no ``X_val`` is given;
        0 means no validation split, which triggers the paper's fallback (C = 1 fitted on train, with a
        warning).
    random_state : int, default 42
        Seed of that stratified split (42 as the paper).
    tie_break : {"most_regularized", "first"}, default "most_regularized"
        Among grid values with the best validation accuracy, the smallest C, or the first in grid order.
    fold_back : {"exact", "paper_max1"}, default "exact"
        ``"exact"``: ``omega = w / s``; ``"paper_max1"``: the appendix's ``w / max(s, 1)`` (reproduction only).
    solver : {"exact", "paper"}, default "exact"
        ``"exact"``: the certified path solver; ``"paper"``: scikit-learn's lbfgs warm-start loop at default
        tolerance and a default-tolerance refit (reproduces the paper; not converged).
    tol : float in (0, 0.1], default 1e-10
        Relative gradient-norm tolerance of the exact solver (:data:`empirical.common.arrays.TOL_MAX`): of the refit,
        and of the path's grid points whose validation signs are not certified, there at most :data:`PATH_TOL`
        (1e-8: a looser stopping point's validation accuracy depends on the solver's steps, so the numpy path and
        the engine would select other C).  Not with ``solver="paper"`` (refused, :data:`OPTION_CONFLICTS`).
    max_iter : int in [1, 100_000], default 100
        Newton-step cap per grid point (exact solver); with ``solver="paper"``, lbfgs' iteration cap (100: the
        paper's).
    refit : bool, default True
        Refit on train + validation at the selected C (the paper's algorithm).  False keeps the fit on the
        training split alone, so the probe sees exactly the rows a baseline that uses validation only for
        selection sees (the equal-data comparisons of ``paper_figures``).
    device : {None, "auto", "cpu", "cuda", "cuda:N"}, default None
        None: the numpy path solver.  Otherwise the exact solver runs on the batched torch engine
        (:mod:`empirical.logistic.batched`) on that device (``"auto"``: CUDA when available): the same certified
        path, selection and refit, in float64 (needs torch, the ``[llm]`` extra).  :func:`empirical.probes.fit_layers`
        with ``device`` fits all layers in one batched pass.  Not with ``solver="paper"`` (refused).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Raw-space weights ``omega`` (logit = ``X @ coef_ + intercept_``).
    intercept_ : float
        Raw-space intercept ``b - <omega, mu>``.
    concept_vector_ : ndarray of shape (n_features,)
        ``coef_ / ||coef_||`` oriented so the positive class has the larger mean projection.
    coef_std_, intercept_std_ : ndarray of shape (n_features,), float
        Weights and intercept in standardized coordinates.
    scaler_mean_, scaler_scale_ : ndarray of shape (n_features,)
        Train-split mean and population standard deviation (zero replaced by 1).
    C_, lambda_ : float
        Selected C and ``1 / C``.
    Cs_ : ndarray
        The grid used.
    path_val_accuracy_ : ndarray of shape (len(Cs_),)
        Validation accuracy at every grid value (NaN in the fallback).
    path_n_iter_ : ndarray of int
        Newton steps per grid value.
    path_certified_ : ndarray of bool
        Grid values whose validation predictions are certified exact (exact solver with a validation split
        only).
    best_val_accuracy_ : float
        The best validation accuracy (NaN in the fallback).
    fallback_ : bool
        True when there was no validation split.
    refit_result_ : OptimizeResult
        The final refit on train + validation (exact solver with ``refit=True`` only).
    n_iter_ : ndarray of int
        Iterations of the final fit.
    classes_, n_features_in_ : ndarray of shape (2,), int
        As every scikit-learn classifier (the positive class is ``classes_[1]``).
    fit_time_ : float
        Wall-clock seconds of ``fit``.

    Notes
    -----
    Options that would change nothing are refused by ``fit`` with a ``ValueError`` naming both
    (:data:`OPTION_CONFLICTS`): ``device`` or a non-default ``tol`` with ``solver="paper"``; a non-default
    ``val_fraction`` or ``random_state`` with validation rows given to ``fit``; a non-default ``random_state`` with
    ``val_fraction=0``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((200, 5)), np.arange(200) % 2
    >>> X[:, 0] += 1.5 * y
    >>> probe = RaptorProbe().fit(X, y)
    >>> float(np.round(probe.concept_vector_[0], 2)), probe.score(X, y) > 0.7
    (0.98, True)
    """

    _parameter_constraints = {
        "Cs": ["array-like", None],
        "val_fraction": [Interval(Real, 0, 1, closed="left")],
        "random_state": ["random_state"],
        "tie_break": [StrOptions({"most_regularized", "first"})],
        "fold_back": [StrOptions({"exact", "paper_max1"})],
        "solver": [StrOptions({"exact", "paper"})],
        "tol": [Interval(Real, 0, TOL_MAX, closed="right")],
        "max_iter": [Interval(Integral, 1, MAX_ITER, closed="both")],
        "refit": ["boolean"],
        "device": [str, None],
    }

    def __init__(self, Cs=None, val_fraction=0.2, random_state=PAPER_SPLIT_SEED, tie_break="most_regularized",
                 fold_back="exact", solver="exact", tol=1e-10, max_iter=100, refit=True, device=None):
        self.Cs = Cs
        self.val_fraction = val_fraction
        self.random_state = random_state
        self.tie_break = tie_break
        self.fold_back = fold_back
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.refit = refit
        self.device = device

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on raw hidden states and return self.

        ``fit(X, y)`` splits off a stratified validation set itself (``val_fraction``);
        ``fit(X, y, X_val, y_val)`` uses the given split (``X, y`` is then the training split).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw hidden states (standardized inside, with the training split's statistics).
        y : array-like of shape (n_samples,)
            Two classes, any labels; the positive class is the larger, ``classes_[1]``.
        X_val : array-like of shape (n_val, n_features), optional
            Validation rows that select C (and join the refit); given together with ``y_val``.
        y_val : array-like of shape (n_val,), optional
            Their labels (only the training classes).

        Returns
        -------
        RaptorProbe
            ``self``, fitted.

        Warns
        -----
        UserWarning
            No validation split (``val_fraction=0`` and no ``X_val``): the paper's fallback, C = 1.
        empirical.common.failures.ConvergenceWarning
            A grid point neither certified nor converged, or the refit did not reach ``tol``.
        """
        t0 = time.perf_counter()
        prepared = self._prepare(X, y, X_val, y_val)
        if self.device is not None and self.solver == "exact" and not self.fallback_:
            fit_on_engine([self], [prepared], self.device)
        else:
            self._solve(prepared)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _check_options(self, given_validation: bool) -> None:
        """Refuse every pair of :data:`OPTION_CONFLICTS` set together (one of them would change nothing): a
        ``ValueError`` naming both options."""
        defaults = type(self)().get_params()
        changed = {name for name, value in self.get_params().items() if not _same_option(value, defaults[name])}
        set_to = {"solver": self.solver == "paper", "device": self.device is not None, "tol": "tol" in changed,
                  "val_fraction": "val_fraction" in changed, "random_state": "random_state" in changed,
                  "X_val": given_validation}
        if not given_validation:  # then val_fraction=0 is what conflicts with a seed of the split
            set_to["val_fraction"] = self.val_fraction == 0
        for option, other, reason in OPTION_CONFLICTS:
            if (option, other) == ("random_state", "val_fraction") and given_validation:
                continue  # reported as random_state with X_val
            if set_to[option] and set_to[other]:
                shown = {name: "given" if name == "X_val" else repr(getattr(self, name))
                         for name in (option, other)}
                raise ValueError(f"RaptorProbe: {option}={shown[option]} and {other}={shown[other]} cannot be used "
                                 f"together ({reason}); drop one of them")

    def _prepare(self, X, y, X_val, y_val) -> FitInputs:
        """Validate (once), split and standardize: the inputs of both engines (:class:`FitInputs`)."""
        self._check_options(X_val is not None)
        Cs = check_grid(DEFAULT_CS if self.Cs is None else self.Cs)
        X, y_signed, Xv, yv_signed = self._validate_fit_data(X, y, X_val, y_val)
        if X_val is not None:
            Xtr, ytr = X, y_signed
        elif self.val_fraction > 0:
            itr, iv = self._split(y_signed)
            Xtr, ytr, Xv, yv_signed = X[itr], y_signed[itr], X[iv], y_signed[iv]
        else:
            Xtr, ytr = X, y_signed
        check_min_per_class(ytr, "train")
        # a one-class (or one-row) validation split cannot select C: every C ties or the grid's end wins
        if len(yv_signed):
            check_min_per_class(yv_signed, "validation (X_val, y_val)", minimum=1)
        mu, s = standardize_stats(Xtr, check_input=False)  # rows of X, validated once above
        self.fallback_ = Xv.shape[0] == 0
        return FitInputs(Xtr=Xtr, ytr=ytr, Xs=standardize(Xtr, mu, s), Xvs=standardize(Xv, mu, s),
                         yv_signed=yv_signed, mu=mu, s=s, Cs=Cs)

    def _split(self, y_signed) -> tuple:
        """The stratified train/validation split of ``fit(X, y)``; a ``ValueError`` naming ``val_fraction`` and the
        rule when the rows are too few for it."""
        n, fraction = len(y_signed), float(self.val_fraction)
        n_val = int(np.ceil(fraction * n))
        counts = {int(c): int(k) for c, k in zip(*np.unique(y_signed, return_counts=True))}
        # scikit-learn's stratified split: both parts hold at least one row per class; then check_min_per_class:
        # the training part at least 2 per class
        if n_val < 2 or n - n_val < 4 or min(counts.values()) < 3:
            first = max(6, int(np.floor(1 / fraction)) + 1)  # ceil(fraction * m) >= 2 from here on
            need = next(m for m in range(first, first + int(10 / (1 - fraction)) + 10)
                        if m - int(np.ceil(fraction * m)) >= 4)  # non-decreasing in m, >= 4 within 10 / (1 - fraction)
            raise ValueError(
                f"val_fraction={self.val_fraction!r} of {n} rows ({counts.get(-1, 0)} and {counts.get(1, 0)} per "
                f"class) cannot make a stratified train/validation split: it needs at least 1 row of each class in "
                f"the {n_val} validation rows and 2 in the {n - n_val} training rows (at least 3 per class, "
                f"ceil(val_fraction * n) >= 2 and n - ceil(val_fraction * n) >= 4: n >= {need} here); give more "
                f"rows, a split of your own (X_val, y_val) or val_fraction=0")
        return stratified_split(y_signed, fraction, self.random_state)

    def _solve(self, prepared) -> None:
        """The numpy solvers: the paper's fallback (no validation rows), the paper's loop, or the exact path; each
        returns ``(w, b, C, acc, nits)`` in standardized coordinates and sets ``_before_refit``."""
        if self.fallback_:
            solved = self._solve_fallback(prepared)
        elif self.solver == "paper":
            solved = self._solve_paper(prepared)
        else:
            solved = self._solve_exact(prepared)
        self._finish(prepared, *solved)

    def _solve_fallback(self, prepared) -> tuple:
        """No validation split: the paper's fallback, C = 1 fitted on the training rows."""
        Cs = prepared.Cs
        warnings.warn("RaptorProbe: no validation split; following the paper's fallback (C = 1 fitted on "
                      "train only)", UserWarning, stacklevel=4)
        w, b = self._fit_single(prepared.Xs, prepared.ytr, 1.0)
        self._before_refit = (w, b)
        return w, b, 1.0, np.full(len(Cs), np.nan), np.zeros(len(Cs), dtype=int)

    def _solve_paper(self, prepared) -> tuple:
        """The paper's loop: scikit-learn's lbfgs at every C, then the refit on train + validation."""
        Xs, ytr, Xvs, yv_signed, Cs = (prepared.Xs, prepared.ytr, prepared.Xvs, prepared.yv_signed, prepared.Cs)
        acc, nits = _paper_path(Xs, ytr, Xvs, yv_signed, Cs, max_iter=self.max_iter)
        C = float(Cs[select_C(Cs, acc, self.tie_break)])
        Xfit, yfit = (np.vstack([Xs, Xvs]), np.concatenate([ytr, yv_signed])) if self.refit else (Xs, ytr)
        clf = LogisticRegression(C=C, max_iter=self.max_iter).fit(Xfit, yfit)
        w, b = clf.coef_[0].copy(), float(clf.intercept_[0])
        self.n_iter_ = clf.n_iter_
        self._before_refit = None if self.refit else (w, b)  # the paper's loop keeps no train-only fit at C*
        return w, b, C, acc, nits

    def _solve_exact(self, prepared) -> tuple:
        """The exact path over the grid (validated once, in ``fit``), the selection of C, and the refit."""
        Xs, ytr, Xvs, yv_signed, Cs = (prepared.Xs, prepared.ytr, prepared.Xvs, prepared.yv_signed, prepared.Cs)
        design = reduce_design(Xs, Xvs, check_input=False)  # validated once, in fit
        with quiet():  # warned below, in the estimator's words
            path = logistic_path(Xs, ytr, Xvs, yv_signed, Cs, design=design, tol=self._path_tol,
                                 max_iter=self.max_iter, check_input=False)
        acc, nits = path.val_accuracy, path.nit
        if not path.success:
            self._warn_path(path.certified, path.grad_norm, path.nit, stacklevel=5)
        self.path_certified_ = path.certified
        k = select_C(Cs, acc, self.tie_break)
        C = float(Cs[k])
        self._before_refit = (design.back(path.coef_reduced[k]), float(path.intercept[k]))
        if self.refit:
            at_k, prec = path.preconditioner
            with quiet():  # _record_refit warns
                res = refit(Xs, ytr, Xvs, yv_signed, C, design, path.coef_reduced[k], path.intercept[k],
                            tol=self.tol, max_iter=self.max_iter, check_input=False,
                            preconditioner=prec if at_k == k else None)
            self._record_refit(res, stacklevel=5)
            w, b = res.coef, res.intercept
        else:
            w, b = self._fit_single(Xs, ytr, C)
            self._before_refit = (w, b)
        return w, b, C, acc, nits

    @property
    def _path_tol(self) -> float:
        """The path's stopping tolerance for a grid point not certified: ``tol``, at most :data:`PATH_TOL`."""
        return min(float(self.tol), PATH_TOL)

    def _warn_path(self, certified, grad_norm, nit, stacklevel=4) -> None:
        bad = np.flatnonzero(~certified & ~(grad_norm <= self._path_tol))  # NaN norms count too
        warnings.warn(f"RaptorProbe path: {bad.size} grid point(s) neither certified nor converged "
                      f"(max relative gradient norm {grad_norm[bad].max():.2e} after "
                      f"{nit[bad].max()} Newton steps); their validation accuracy may be "
                      "inexact", ConvergenceWarning, stacklevel=stacklevel)

    def _record_refit(self, res, stacklevel=4) -> None:
        if not res.success:
            warnings.warn(f"RaptorProbe refit did not reach tol: {res.message}", ConvergenceWarning,
                          stacklevel=stacklevel)
        self.refit_result_ = res
        self.n_iter_ = np.array([res.nit])

    def _finish(self, prepared, w, b, C, acc, nits) -> None:
        """Fold the standardized fit back to raw coordinates and set the fitted attributes."""
        self._set_fold_back(w, b, prepared.mu, prepared.s, prepared.Xtr, prepared.ytr)
        self.C_ = C
        self.lambda_ = 1.0 / C
        self.Cs_ = prepared.Cs
        self.path_val_accuracy_ = acc
        self.path_n_iter_ = nits
        self.best_val_accuracy_ = float(np.nanmax(acc)) if not self.fallback_ else float("nan")
        self.coef_std_ = w
        self.intercept_std_ = b

    def score_before_refit(self, X, y) -> float:
        """Accuracy of the probe fitted on the training rows alone at the selected C, before the refit on train +
        validation: the equal-data variant of RAPTOR (every compared method then fits on the same training rows,
        the validation rows only selecting), at no extra cost (the path's solution at C*).

        Parameters
        ----------
        X : array-like of shape (n, p)
            Raw hidden states.
        y : array-like of shape (n,)
            Labels, as given to ``fit``.

        Returns
        -------
        float
            The accuracy; equal to :meth:`score` without a refit (``refit=False``, or no validation split).

        Raises
        ------
        ValueError
            With ``solver="paper"`` and ``refit=True`` (the paper's loop keeps no train-only fit at C*).
        """
        check_is_fitted(self, "coef_")
        if self._before_refit is None:
            raise ValueError("score_before_refit needs solver='exact' (or refit=False): the paper's loop keeps no "
                             "train-only fit at the selected C")
        w, b = self._before_refit
        scale = self.scaler_scale_ if self.fold_back == "exact" else np.maximum(self.scaler_scale_, 1.0)
        omega = w / scale
        scores = self._validate_X(X) @ omega + (b - omega @ self.scaler_mean_)
        predicted = self.classes_[(scores > 0).astype(int)]
        y = np.asarray(y)
        if y.shape != predicted.shape:
            raise ValueError(f"y must have one label per row of X ({predicted.shape}), got shape {y.shape}")
        return float(np.mean(predicted == y))

    def _fit_single(self, Xs, y, C):
        with quiet():  # warned below, in the estimator's words
            res = fit_l2_logistic(Xs, y, C, fit_intercept=True, tol=self.tol, max_iter=self.max_iter)
        self.n_iter_ = np.array([res.nit])
        if not res.success:
            warnings.warn(f"RaptorProbe fit did not reach tol: {res.message}", ConvergenceWarning, stacklevel=3)
        return res.coef, res.intercept

    def _set_fold_back(self, w, b, mu, s, Xtr, ytr):
        scale = s if self.fold_back == "exact" else np.maximum(s, 1.0)
        omega = w / scale
        self.coef_ = omega
        self.intercept_ = float(b - omega @ mu)
        self.scaler_mean_ = mu
        self.scaler_scale_ = s
        # ValueError if omega is 0 (constant train rows)
        self.concept_vector_ = orient_to_positive_class(omega, Xtr, ytr, check_input=False)


def fit_on_engine(probes, prepared, device) -> dict:
    """Fit exact-solver :class:`RaptorProbe` s on the batched torch engine (:mod:`empirical.logistic.batched`): one
    batched certified path over all of them, each probe's own selection, one batched refit.

    Parameters
    ----------
    probes : sequence of RaptorProbe
        Probes with the same ``tol``, ``max_iter`` and ``refit`` (e.g. one per layer of a model).
    prepared : sequence of FitInputs
        Their validated, split and standardized inputs (``RaptorProbe._prepare``): the same labels, grid and
        shapes for all.
    device : str or torch.device
        Where the engine runs (:func:`empirical.common.resources.resolve_device`).

    Returns
    -------
    dict
        Wall-clock seconds of this call by phase (the probes are fitted in place): ``"to_device"`` (the
        standardized rows copied to the device, once for the path and the refit), ``"reduction"`` and ``"path"``
        (:func:`~empirical.logistic.batched.batched_path`), ``"refit"`` (:func:`~empirical.logistic.batched.
        batched_refit`, its reduction included) and ``"finish"`` (selection, fold-back, on the host).
    """
    try:
        import torch

        from ..logistic.batched import PhaseClock, batched_path, batched_refit, stack_on_device
    except ModuleNotFoundError as exc:
        raise ValueError(f"device={device!r} needs torch ({exc.name} is not installed: pip install "
                         "'raptor-probes[llm]'), or use device=None for the numpy solver") from None
    dev = resolve_device(device)  # a ValueError naming the device before any work
    first, lead = prepared[0], probes[0]
    for i, (probe, q) in enumerate(zip(probes, prepared)):
        differs = [what for what, same in (
            ("labels", np.array_equal(q.ytr, first.ytr) and np.array_equal(q.yv_signed, first.yv_signed)),
            ("grid", np.array_equal(q.Cs, first.Cs)),
            (f"shapes ({q.Xs.shape} vs {first.Xs.shape})", q.Xs.shape == first.Xs.shape),
            ("tol, max_iter, refit", (probe.tol, probe.max_iter, probe.refit) == (lead.tol, lead.max_iter,
                                                                                 lead.refit))) if not same]
        if differs:
            raise ValueError(f"fit_on_engine: the probes must share their labels, grid, shapes, tol, max_iter and "
                             f"refit (fit_layers groups layers by width), got probe {i} differing from probe 0 in its "
                             f"{', '.join(differs)}")
    Cs = first.Cs
    clock = PhaseClock(dev)
    Xt, Xvt = (stack_on_device([getattr(q, key) for q in prepared], dev) for key in ("Xs", "Xvs"))
    clock.lap("to_device")
    with quiet():  # each probe warns below, in the estimator's words
        path = batched_path(Xt, first.ytr, Xvt, first.yv_signed, Cs, device=dev, tol=lead._path_tol,
                            max_iter=lead.max_iter, check_input=False)
    clock.lap("path")  # reported below from the path's own clock: its reduction and its grid apart
    seconds = {"to_device": clock.seconds["to_device"], "reduction": path.seconds["reduction"],
               "path": path.seconds["path"]}
    ks = []
    for i, probe in enumerate(probes):
        if not (path.certified[i] | (path.grad_norm[i] <= probe._path_tol)).all():
            probe._warn_path(path.certified[i], path.grad_norm[i], path.nit[i])
        probe.path_certified_ = path.certified[i]
        ks.append(select_C(Cs, path.val_accuracy[i], probe.tie_break))
        probe._before_refit = (path.coef[i, ks[-1]], float(path.intercept[i, ks[-1]]))
    rows = np.arange(len(probes))
    if lead.refit:
        Xf = torch.cat([Xt, Xvt], dim=1)  # train + validation rows, already on the device
        del Xt, Xvt
        with quiet():  # each probe's _record_refit warns
            res = batched_refit(Xf, np.concatenate([first.ytr, first.yv_signed]), Cs[ks],
                                path.coef[rows, ks], path.intercept[rows, ks], device=dev, tol=lead.tol,
                                max_iter=lead.max_iter, check_input=False)
        del Xf
        clock.lap("refit")
    for i, (probe, q, k) in enumerate(zip(probes, prepared, ks)):
        C = float(Cs[k])
        if lead.refit:
            status = int(res.status[i])
            one = OptimizeResult(coef=res.coef[i], intercept=float(res.intercept[i]), nit=int(res.nit[i]),
                                 grad_norm=float(res.grad_norm[i]), success=bool(res.success[i]), status=status,
                                 message=f"{STATUS_MESSAGES[status]}; grad_norm={res.grad_norm[i]:.3e}, "
                                         f"nit={int(res.nit[i])}")
            probe._record_refit(one)
            w, b = one.coef, one.intercept
        else:
            w, b = probe._fit_single(q.Xs, q.ytr, C)
            probe._before_refit = (w, b)
        probe._finish(q, w, b, C, path.val_accuracy[i], path.nit[i])
    clock.lap("finish")
    seconds.update(refit=clock.seconds.get("refit", 0.0), finish=clock.seconds["finish"])
    return seconds
