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

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ..validation import (check_binary_labels, check_grid, check_matrix, check_min_per_class, standardize_stats,
                          stratified_split)

__all__ = ["RaptorProbe", "DEFAULT_CS", "select_C"]

DEFAULT_CS = np.logspace(-4, 2, 100)


def select_C(Cs, accuracies, tie_break="most_regularized"):
    """Index of the selected grid point.

    ``"most_regularized"`` (default): the smallest C (largest lambda) among the best accuracies.
    ``"first"``: the paper's loop rule - the first grid entry reaching the best accuracy, in grid order
    (identical to the default for an ascending grid such as the paper's)."""
    acc = np.asarray(accuracies)
    best = acc.max()
    ties = np.flatnonzero(acc == best)
    if tie_break == "first":
        return int(ties[0])
    if tie_break == "most_regularized":
        return int(ties[np.argmin(np.asarray(Cs)[ties])])
    raise ValueError(f"tie_break must be 'most_regularized' or 'first'; got {tie_break!r}")


def _paper_path(Xs, y, Xvs, yv, Cs, max_iter=100):
    """The paper's reference loop: scikit-learn lbfgs, warm_start, default tolerance (not converged)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(warm_start=True, max_iter=max_iter)
    acc = np.empty(len(Cs))
    nit = np.zeros(len(Cs), dtype=int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k, C in enumerate(Cs):
            clf.set_params(C=float(C))
            clf.fit(Xs, y)
            acc[k] = np.mean(clf.predict(Xvs) == yv)
            nit[k] = int(np.max(clf.n_iter_))
    return acc, nit


class RaptorProbe(ClassifierMixin, BaseEstimator):
    """Ridge-adaptive logistic probe (RAPTOR, Algorithm ``alg:RAPTOR_impl``) on raw embeddings.

    Parameters
    ----------
    Cs : 1-D array of C = 1/lambda values, default ``np.logspace(-4, 2, 100)`` (None means that grid).
    val_fraction : fraction of ``fit(X, y)`` rows held out (stratified) for validation; 0 means no
        validation split, which triggers the paper's fallback (C = 1 fitted on train, with a warning).
    random_state : seed of the stratified split (default 42, as the paper).
    tie_break : "most_regularized" (default; smallest C among best validation accuracies) or "first".
    fold_back : "exact" (default) or "paper_max1" (the appendix's ``max(s, 1)``; reproduction only).
    solver : "exact" (certified fast path, default) or "paper" (scikit-learn lbfgs warm-start loop at
        default tolerance and a default-tolerance refit; reproduces the paper, not converged).
    tol : relative gradient-norm tolerance of the exact solver (see ``empirical.solver``).
    """

    def __init__(self, Cs=None, val_fraction=0.2, random_state=42, tie_break="most_regularized",
                 fold_back="exact", solver="exact", tol=1e-10, max_iter=100):
        self.Cs = Cs
        self.val_fraction = val_fraction
        self.random_state = random_state
        self.tie_break = tie_break
        self.fold_back = fold_back
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    # ------------------------------------------------------------------ fit
    def _check_params(self):
        if self.tie_break not in ("most_regularized", "first"):
            raise ValueError(f"tie_break must be 'most_regularized' or 'first'; got {self.tie_break!r}")
        if self.fold_back not in ("exact", "paper_max1"):
            raise ValueError(f"fold_back must be 'exact' or 'paper_max1'; got {self.fold_back!r}")
        if self.solver not in ("exact", "paper"):
            raise ValueError(f"solver must be 'exact' or 'paper'; got {self.solver!r}")
        if not (0.0 <= float(self.val_fraction) < 1.0):
            raise ValueError(f"val_fraction must be in [0, 1); got {self.val_fraction!r}")
        if not (float(self.tol) > 0):
            raise ValueError(f"tol must be positive; got {self.tol!r}")
        return check_grid(DEFAULT_CS if self.Cs is None else self.Cs)

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on raw embeddings. ``fit(X, y)`` splits off a stratified validation set itself;
        ``fit(X, y, X_val=..., y_val=...)`` uses the given split (X, y is then the train split)."""
        t0 = time.perf_counter()
        Cs = self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=True)
        check_classification_targets(y)
        if type_of_target(y) == "multiclass":
            raise ValueError(f"Only binary classification is supported; y has {np.unique(y).size} classes")
        classes, ypm = check_binary_labels(y, X.shape[0], "y")
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together")
        self.classes_ = classes
        if X_val is not None:
            Xv = check_matrix(X_val, "X_val")
            if Xv.shape[1] != X.shape[1]:
                raise ValueError(f"X_val has {Xv.shape[1]} features but X has {X.shape[1]}")
            _, yvpm = check_binary_labels(y_val, Xv.shape[0], "y_val", classes=classes)
            Xtr, ytr = X, ypm
        elif self.val_fraction > 0:
            itr, iv = stratified_split(ypm, float(self.val_fraction), self.random_state)
            Xtr, ytr, Xv, yvpm = X[itr], ypm[itr], X[iv], ypm[iv]
        else:
            Xtr, ytr, Xv, yvpm = X, ypm, X[:0], ypm[:0]
        check_min_per_class(ytr, "train")
        mu, s = standardize_stats(Xtr)
        Xs = (Xtr - mu) / s
        Xvs = (Xv - mu) / s
        self.fallback_ = Xvs.shape[0] == 0
        if self.fallback_:
            warnings.warn("RaptorProbe: no validation split; following the paper's fallback (C = 1 fitted on "
                          "train only)", UserWarning, stacklevel=2)
            C, acc, nits = 1.0, np.full(len(Cs), np.nan), np.zeros(len(Cs), dtype=int)
            w, b = self._fit_single(Xs, ytr, C)
        elif self.solver == "paper":
            acc, nits = _paper_path(Xs, ytr, Xvs, yvpm, Cs)
            C = float(Cs[select_C(Cs, acc, self.tie_break)])
            from sklearn.linear_model import LogisticRegression

            clf = LogisticRegression(C=C).fit(np.vstack([Xs, Xvs]), np.concatenate([ytr, yvpm]))
            w, b = clf.coef_[0].copy(), float(clf.intercept_[0])
            self.n_iter_ = clf.n_iter_
        else:
            from ..logistic.path import logistic_path, reduce_design, refit

            design = reduce_design(Xs, Xvs)
            path = logistic_path(Xs, ytr, Xvs, yvpm, Cs, design=design, tol=self.tol, max_iter=self.max_iter)
            acc, nits = path.val_accuracy, path.n_iter
            if not path.success:
                bad = np.flatnonzero(~path.certified & (path.grad_norm > self.tol))
                warnings.warn(f"RaptorProbe path: {bad.size} grid point(s) neither certified nor converged "
                              f"(max relative gradient norm {path.grad_norm[bad].max():.2e} after "
                              f"{path.n_iter[bad].max()} Newton steps); their validation accuracy may be "
                              "inexact", RuntimeWarning, stacklevel=2)
            self.path_certified_ = path.certified
            k = select_C(Cs, acc, self.tie_break)
            C = float(Cs[k])
            res = refit(Xs, ytr, Xvs, yvpm, C, design, path.coef_reduced[k], path.intercept[k], tol=self.tol,
                        max_iter=self.max_iter)
            if not res.success:
                warnings.warn(f"RaptorProbe refit did not reach tol: {res.message}", RuntimeWarning, stacklevel=2)
            w, b = res.coef, res.intercept
            self.refit_result_ = res
            self.n_iter_ = np.array([res.nit])
        self._set_fold_back(w, b, mu, s, Xtr, ytr)
        self.C_ = C
        self.lambda_ = 1.0 / C
        self.Cs_ = Cs
        self.path_val_accuracy_ = acc
        self.path_n_iter_ = nits
        self.best_val_accuracy_ = float(np.nanmax(acc)) if not self.fallback_ else float("nan")
        self.coef_std_ = w
        self.intercept_std_ = b
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _fit_single(self, Xs, y, C):
        from ..logistic.solver import fit_l2_logistic

        res = fit_l2_logistic(Xs, y, C, fit_intercept=True, tol=self.tol, max_iter=self.max_iter)
        self.n_iter_ = np.array([res.nit])
        if not res.success:
            warnings.warn(f"RaptorProbe fit did not reach tol: {res.message}", RuntimeWarning, stacklevel=3)
        return res.coef, res.intercept

    def _set_fold_back(self, w, b, mu, s, Xtr, ytr):
        scale = s if self.fold_back == "exact" else np.maximum(s, 1.0)
        omega = w / scale
        self.coef_ = omega
        self.intercept_ = float(b - omega @ mu)
        self.scaler_mean_ = mu
        self.scaler_scale_ = s
        nrm = np.linalg.norm(omega)
        v = omega / nrm if nrm > 0 else omega.copy()
        proj = Xtr @ v
        if nrm > 0 and proj[ytr > 0].mean() < proj[ytr < 0].mean():
            v = -v
        self.concept_vector_ = v

    # ------------------------------------------------------------- predict
    def _raw(self, X):
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, ensure_all_finite=True, reset=False)

    def decision_function(self, X):
        """Logit ``omega @ h + b_raw`` on raw embeddings (positive -> ``classes_[1]``)."""
        return self._raw(X) @ self.coef_ + self.intercept_

    def predict(self, X):
        d = self.decision_function(X)
        return self.classes_[(d > 0).astype(int)]

    def predict_proba(self, X):
        p1 = expit(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))
