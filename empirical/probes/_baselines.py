"""Baseline concept-vector estimators, all behind the :class:`~empirical.probes.ConceptProbe` interface.

Every baseline is a scikit-learn estimator (``clone``, ``get_params``, ``set_params`` work):
``fit(X, y, X_val=None, y_val=None)`` on raw hidden states sets

* ``concept_vector_`` : unit vector in raw hidden-state space, oriented so the positive class
  (``classes_[1]``) has the larger mean projection;
* ``decision_function(X)`` (positive -> ``classes_[1]``), ``predict(X)``, ``score(X, y)``;
* ``fit_time_`` : wall-clock seconds of ``fit``.

:class:`~empirical.probes.RaptorProbe` has the same interface.
"""
from __future__ import annotations

import time
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.linear_model import LogisticRegressionCV
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import PredefinedSplit
from sklearn.utils._param_validation import Interval

from empirical.common.checks import as_generator, check_positive_array, check_random_state

from ..common.arrays import C_MAX, C_MIN, TOL_MAX, check_grid
from ..logistic import fit_l2_logistic_rows
from ..numerics import PAPER_SPLIT_SEED, standardize, standardize_stats, stratified_split, unit_vector
from ._base import ConceptProbe, LinearConceptProbe, orient_to_positive_class
from ._raptor import DEFAULT_CS

#: Most probes :class:`GCSProbe` fits (the reference uses 1,000; its weights are ``n_probes x p`` floats).
MAX_PROBES = 100_000
#: Most RFM iterations :class:`XRFMProbe` runs (the reference uses 5).
MAX_RFM_ITERS = 1_000

__all__ = ["DiffMeans", "LogRegCVProbe", "GCSProbe", "XRFMProbe"]


class DiffMeans(LinearConceptProbe):
    """Mass-mean / CAA-style direction: mean(positive) - mean(negative) over train (+ validation) rows.

    The decision threshold is the midpoint of the two class-mean projections.

    Parameters
    ----------
    use_validation : bool, default True
        Add the validation rows to the class means.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The difference of class means (raw units).
    intercept_ : float
        Minus the projection of the midpoint of the class means.
    concept_vector_ : ndarray of shape (n_features,)
        ``coef_ / ||coef_||``.
    classes_, n_features_in_, fit_time_
        As every concept probe (seconds for ``fit_time_``).

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [1.0, 2.0]])
    >>> dom = DiffMeans().fit(X, [0, 0, 1, 1])
    >>> dom.concept_vector_, dom.predict([[0.5, 1.5]])
    (array([0., 1.]), array([1]))
    """

    _parameter_constraints = {"use_validation": ["boolean"]}

    def __init__(self, use_validation=True):
        self.use_validation = use_validation

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on the training split (and, with ``use_validation``, the validation split); returns self."""
        t0 = time.perf_counter()
        X, y_signed, Xv, yv_signed = self._validate_fit_data(X, y, X_val, y_val)
        if self.use_validation and len(Xv):
            X, y_signed = np.vstack([X, Xv]), np.concatenate([y_signed, yv_signed])
        mp, mn = X[y_signed > 0].mean(axis=0), X[y_signed < 0].mean(axis=0)
        diff = mp - mn
        if not np.any(diff):
            raise ValueError("class means are identical; difference of means is zero")
        self.coef_ = diff
        self.intercept_ = -0.5 * float(diff @ (mp + mn))
        self.concept_vector_ = orient_to_positive_class(diff, X, y_signed, check_input=False)
        self.fit_time_ = time.perf_counter() - t0
        return self


#: predicted floating-point operations above which :class:`LogRegCVProbe` warns before fitting: its worst case is
#: ``len(Cs) * max_iter * n_features * (n_rows + 20)`` (L-BFGS: one gradient over the rows plus its 10-pair history
#: per iteration, every C); 1e12 is minutes on one core (a 1000 x 2048 layer with the 100 default Cs: 2e11)
LOGREGCV_WORK_BUDGET = 1e12


class LogRegCVProbe(LinearConceptProbe):
    """scikit-learn ``LogisticRegressionCV`` with a ``PredefinedSplit`` equal to the given train/val split,
    on train-standardized features (refit on train+val at the selected C), folded back exactly.

    Parameters
    ----------
    Cs : array-like of distinct floats in [C_MIN, C_MAX] = [1e-8, 1e16], optional
        Grid of inverse ridge strengths C = 1/lambda (default: RAPTOR's ``DEFAULT_CS``).
    tol : float in (0, 0.1], default 1e-4
        ``LogisticRegressionCV`` tolerance (:data:`empirical.common.arrays.TOL_MAX`).
    max_iter : int, default 1000
        ``LogisticRegressionCV`` iteration cap.
    solver : str, default "lbfgs"
        ``LogisticRegressionCV`` solver.
    val_fraction : float in (0, 1), default 0.2
        Without ``X_val``, the stratified share of ``X`` held out as the validation split (as RAPTOR does).
    random_state : int, default 42
        Seed of that split.

    Attributes
    ----------
    coef_, intercept_ : ndarray of shape (n_features,), float
        Raw-space weights and intercept (folded back from standardized space).
    C_ : float
        The selected C.
    n_iter_ : ndarray of int
        ``LogisticRegressionCV``'s iteration counts.
    convergence_warnings_ : int
        Convergence warnings scikit-learn raised during the fit.
    concept_vector_, classes_, n_features_in_, fit_time_
        As every concept probe.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((80, 3)), np.arange(80) % 2
    >>> X[:, 0] += 4 * y
    >>> probe = LogRegCVProbe(Cs=[0.1, 1.0]).fit(X[:60], y[:60], X[60:], y[60:])
    >>> probe.C_, probe.score(X[60:], y[60:])
    (0.1, 1.0)
    """

    _parameter_constraints = {
        "Cs": ["array-like", None],
        "tol": [Interval(Real, 0, TOL_MAX, closed="right")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "solver": [str],
        "val_fraction": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(self, Cs=None, tol=1e-4, max_iter=1000, solver="lbfgs", val_fraction=0.2,
                 random_state=PAPER_SPLIT_SEED):
        self.Cs = Cs
        self.tol = tol
        self.max_iter = max_iter
        self.solver = solver
        self.val_fraction = val_fraction
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, X_val=None, y_val=None):
        """Select C on the validation split, refit on train + validation; returns self."""
        t0 = time.perf_counter()
        Cs = check_grid(DEFAULT_CS if self.Cs is None else self.Cs)
        X, y_signed, Xv, yv_signed = self._validate_fit_data(X, y, X_val, y_val)
        if X_val is None:
            train, val = stratified_split(y_signed, float(self.val_fraction), self.random_state)
            X, y_signed, Xv, yv_signed = X[train], y_signed[train], X[val], y_signed[val]
        predicted = len(Cs) * int(self.max_iter) * X.shape[1] * (len(X) + len(Xv) + 20)
        if predicted > LOGREGCV_WORK_BUDGET:
            warnings.warn(f"LogRegCVProbe: predicted worst-case cost {predicted:.1e} floating-point operations "
                          f"({len(Cs)} Cs x max_iter {self.max_iter} x {X.shape[1]} features x "
                          f"{len(X) + len(Xv)} rows) exceeds LOGREGCV_WORK_BUDGET = {LOGREGCV_WORK_BUDGET:.0e}; "
                          "pass fewer Cs, a smaller max_iter or fewer features", UserWarning, stacklevel=2)
        mu, s = standardize_stats(X, check_input=False)  # validated once, by _validate_fit_data
        Xa = standardize(np.vstack([X, Xv]), mu, s)
        ya = np.concatenate([y_signed, yv_signed])
        fold = np.r_[np.full(len(X), -1), np.zeros(len(Xv), dtype=int)]
        clf = LogisticRegressionCV(Cs=list(Cs), cv=PredefinedSplit(fold), scoring="accuracy", refit=True,
                                   tol=self.tol, max_iter=self.max_iter, solver=self.solver)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.fit(Xa, ya)
        self.convergence_warnings_ = sum("converge" in str(w.message).lower() for w in caught)
        w = clf.coef_[0] / s
        self.coef_ = w
        self.intercept_ = float(clf.intercept_[0] - w @ mu)
        self.C_ = float(np.atleast_1d(clf.C_)[0])
        self.n_iter_ = np.asarray(clf.n_iter_)
        self.concept_vector_ = orient_to_positive_class(w, X, y_signed, check_input=False)
        self.fit_time_ = time.perf_counter() - t0
        return self


class GCSProbe(LinearConceptProbe):
    """Gaussian Concept Subspace: ``n_probes`` logistic probes (C = ``C``, scikit-learn objective solved
    exactly) on random class-balanced subsets of the train rows (``n_samples`` rows each, half per
    class, without replacement), each fitted on train-standardized features and folded back to raw
    space; a diagonal Gaussian over the folded-back weight vectors (``mean_``, ``var_``); concept
    vector = normalized mean.

    Defaults are smaller than the reference (1000 probes x 2000 samples): ``n_probes=100`` and
    ``n_samples=min(2000, 2 * floor(0.8 * smallest class count))``.

    Parameters
    ----------
    n_probes : int, default 100
        Number of probes.
    n_samples : int, optional
        Rows per probe (even; half per class).
    C : float in [C_MIN, C_MAX] = [1e-8, 1e16], default 1.0
        Inverse ridge strength of every probe (the domain: :data:`empirical.common.arrays.C_MIN`).
    random_state : int, default 0
        Seed of the subsets.

    Attributes
    ----------
    weights_ : ndarray of shape (n_probes, n_features)
        The folded-back weight vectors.
    mean_, var_ : ndarray of shape (n_features,)
        Their diagonal Gaussian.
    coef_, intercept_ : ndarray of shape (n_features,), float
        The mean weight vector and mean intercept (the decision function).
    concept_vector_, classes_, n_features_in_, fit_time_
        As every concept probe.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((80, 3)), np.arange(80) % 2
    >>> X[:, 0] += 4 * y
    >>> gcs = GCSProbe(n_probes=5).fit(X, y)
    >>> gcs.weights_.shape, bool(abs(gcs.concept_vector_[0]) > 0.9)
    ((5, 3), True)
    """

    _parameter_constraints = {
        "n_probes": [Interval(Integral, 1, MAX_PROBES, closed="both")],
        "n_samples": [Interval(Integral, 2, None, closed="left"), None],
        "C": [Interval(Real, C_MIN, C_MAX, closed="both")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_probes=100, n_samples=None, C=1.0, random_state=0):
        self.n_probes = n_probes
        self.n_samples = n_samples
        self.C = C
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, X_val=None, y_val=None):
        """Fit ``n_probes`` probes on class-balanced subsets of the training split (validation unused); returns self."""
        t0 = time.perf_counter()
        X, y_signed, _, _ = self._validate_fit_data(X, y, X_val, y_val)
        rng = as_generator(check_random_state(self.random_state), "random_state")  # a bool is no seed
        pos, neg = np.flatnonzero(y_signed > 0), np.flatnonzero(y_signed < 0)
        m = min(len(pos), len(neg))
        half = (min(2000, 2 * int(0.8 * m)) if self.n_samples is None else int(self.n_samples)) // 2
        if half < 1 or half > m:
            raise ValueError(f"n_samples must be in [2, {2 * m}] (class-balanced, without replacement), "
                             f"got {self.n_samples!r}")
        mu, s = standardize_stats(X, check_input=False)  # validated once, by _validate_fit_data
        Xs = standardize(X, mu, s)
        W = np.empty((int(self.n_probes), X.shape[1]))
        B = np.empty(int(self.n_probes))
        subsets = [np.concatenate([rng.choice(pos, half, replace=False), rng.choice(neg, half, replace=False)])
                   for _ in range(int(self.n_probes))]
        # one Gram matrix of the standardized train rows serves every probe (fit_l2_logistic_rows)
        fits = fit_l2_logistic_rows(Xs, y_signed, float(self.C), subsets, fit_intercept=True, tol=1e-8)
        for k, res in enumerate(fits):
            W[k] = res.coef / s
            B[k] = res.intercept - W[k] @ mu
        self.weights_ = W
        self.mean_ = W.mean(axis=0)
        self.var_ = W.var(axis=0)
        self.coef_ = self.mean_
        self.intercept_ = float(B.mean())
        self.concept_vector_ = orient_to_positive_class(self.mean_, X, y_signed, check_input=False)
        self.fit_time_ = time.perf_counter() - t0
        return self


class XRFMProbe(ConceptProbe):
    """xRFM baseline via the ``xrfm`` package: an RFM with the ``l2_high_dim`` kernel, bandwidth grid
    ``bandwidths`` x ``center_grads`` in {True, False}, ridge ``reg``, selected by validation AUC.
    Inputs are standardized with train statistics.  Concept vector = top eigenvector of the best
    model's AGOP (folded back to raw space: ``v / s``), sign by correlation with the train labels.
    Predictions come from the fitted RFM (``predict_proba``).  Needs the optional ``xrfm`` package
    (``pip install raptor-probes[baselines]``) and torch.

    ``fit`` needs a validation split with both classes (``X_val``, ``y_val``); it selects on it and does not
    train on it.

    Parameters
    ----------
    bandwidths : sequence of float, default=(1.0, 10.0, 100.0)
        Kernel bandwidths tried.
    center_grads : sequence of bool, default=(True, False)
        AGOP gradient centring options tried.
    reg : float, default=1e-3
        Ridge of the kernel regression.
    iters : int, default=5
        RFM iterations.
    device : str, default="cpu"
        torch device.

    Attributes
    ----------
    model_ : xrfm.RFM
        The selected RFM.
    bandwidth_, center_grads_, val_auc_ : float, bool, float
        The selected setting and its validation AUC.
    scaler_mean_, scaler_scale_ : ndarray of shape (n_features,)
        Train standardization (mean and population standard deviation, zeros replaced by 1).
    concept_vector_, classes_, n_features_in_, fit_time_
        As every concept probe.
    """

    _parameter_constraints = {
        "bandwidths": ["array-like"],
        "center_grads": ["array-like"],
        "reg": [Interval(Real, 0, None, closed="left")],
        "iters": [Interval(Integral, 1, MAX_RFM_ITERS, closed="both")],
        "device": [str],
    }

    def __init__(self, bandwidths=(1.0, 10.0, 100.0), center_grads=(True, False), reg=1e-3, iters=5,
                 device="cpu"):
        self.bandwidths = bandwidths
        self.center_grads = center_grads
        self.reg = reg
        self.iters = iters
        self.device = device

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, X_val=None, y_val=None):
        """Select the RFM by validation AUC and take its AGOP's top eigenvector; returns self."""
        import torch  # optional heavy dependencies, imported when the baseline is used
        from xrfm.rfm_src import RFM
        from xrfm.rfm_src.class_conversion import ClassificationConverter

        t0 = time.perf_counter()
        bandwidths = check_positive_array(self.bandwidths, "bandwidths").ravel()  # finite, positive
        if bandwidths.size == 0:
            raise ValueError("bandwidths must name at least one kernel bandwidth, got none")
        center_grads = list(self.center_grads)
        if not center_grads or any(not isinstance(c, (bool, np.bool_)) for c in center_grads):
            raise ValueError(f"center_grads must be a non-empty sequence of bools, got {self.center_grads!r}")
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got {self.device!r} ({exc})") \
                from None
        X, y_signed, Xv, yv_signed = self._validate_fit_data(X, y, X_val, y_val)
        if len(Xv) == 0 or np.unique(yv_signed).size < 2:
            raise ValueError("XRFMProbe needs a validation split containing both classes (AUC selection)")
        mu, s = standardize_stats(X, check_input=False)  # validated once, by _validate_fit_data
        tX = torch.as_tensor(standardize(X, mu, s), dtype=torch.float32)
        tXv = torch.as_tensor(standardize(Xv, mu, s), dtype=torch.float32)
        ty = torch.as_tensor((y_signed > 0).astype(np.float32)[:, None])
        tyv = torch.as_tensor((yv_signed > 0).astype(np.float32)[:, None])
        best = None
        for bw in bandwidths:
            for cg in center_grads:
                model = RFM(kernel="l2_high_dim", bandwidth=float(bw), iters=int(self.iters), device=device,
                            verbose=False, tuning_metric="auc",
                            class_converter=ClassificationConverter(mode="zero_one", n_classes=2))
                model.fit((tX, ty), (tXv, tyv), reg=float(self.reg), center_grads=bool(cg),
                          get_agop_best_model=True)
                pv = model.predict_proba(tXv)[:, 1].detach().cpu().numpy()
                auc = roc_auc_score(yv_signed > 0, pv)
                if best is None or auc > best[0]:
                    best = (auc, bw, cg, model)
        auc, bw, cg, model = best
        agop = getattr(model, "agop_best_model", None)
        if agop is None:
            agop = model.M
        A = agop.detach().cpu().double().numpy()
        if A.ndim == 1:  # diagonal AGOP
            v_std = np.zeros(A.size)
            v_std[np.argmax(A)] = 1.0
        else:
            evals, evecs = np.linalg.eigh(0.5 * (A + A.T))
            v_std = evecs[:, -1]
        v = v_std / s
        proj = X @ v
        if np.corrcoef(proj, y_signed)[0, 1] < 0:
            v = -v
        self.concept_vector_ = unit_vector(v, "the xRFM direction")
        self.model_ = model
        self.scaler_mean_, self.scaler_scale_ = mu, s
        self.bandwidth_, self.center_grads_, self.val_auc_ = float(bw), bool(cg), float(auc)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of the fitted RFM."""
        import torch  # optional heavy dependency

        X = self._validate_X(X)
        t = torch.as_tensor(standardize(X, self.scaler_mean_, self.scaler_scale_), dtype=torch.float32)
        return self.model_.predict_proba(t).detach().cpu().double().numpy()

    def decision_function(self, X) -> np.ndarray:
        """Log-odds of :meth:`predict_proba` (clipped to [1e-12, 1 - 1e-12])."""
        p = np.clip(self.predict_proba(X)[:, 1], 1e-12, 1 - 1e-12)
        return np.log(p) - np.log1p(-p)
