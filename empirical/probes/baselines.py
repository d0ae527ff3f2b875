"""Baseline concept-vector estimators behind one interface.

Every baseline: ``fit(X, y, X_val, y_val)`` on raw embeddings returns ``self`` with

* ``concept_vector_`` : unit vector in raw embedding space, oriented so the positive class
  (``classes_[1]``) has the larger mean projection;
* ``decision_function(X)`` (positive -> ``classes_[1]``), ``predict(X)``;
* ``fit_time_`` : wall-clock seconds of ``fit``.

:class:`empirical.RaptorProbe` satisfies the same interface.
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from ..validation import check_binary_labels, check_matrix, check_min_per_class, standardize_stats
from .raptor import DEFAULT_CS

__all__ = ["DifferenceOfMeans", "LogRegCVProbe", "GCSProbe", "XRFMProbe"]


def _orient(v, X, ypm):
    v = v / np.linalg.norm(v)
    p = X @ v
    return -v if p[ypm > 0].mean() < p[ypm < 0].mean() else v


class _Base:
    def _prepare(self, X, y, X_val, y_val):
        X = check_matrix(X, "X")
        self.classes_, ypm = check_binary_labels(y, X.shape[0], "y")
        check_min_per_class(ypm, "train")
        if X_val is None:
            Xv, yvpm = X[:0], ypm[:0]
        else:
            Xv = check_matrix(X_val, "X_val")
            if Xv.shape[1] != X.shape[1]:
                raise ValueError(f"X_val has {Xv.shape[1]} features but X has {X.shape[1]}")
            _, yvpm = check_binary_labels(y_val, Xv.shape[0], "y_val", classes=self.classes_)
        self.n_features_in_ = X.shape[1]
        return X, ypm, Xv, yvpm

    def _check_X(self, X):
        if not hasattr(self, "concept_vector_"):
            raise ValueError(f"{type(self).__name__} is not fitted yet; call fit first")
        X = check_matrix(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features; expected {self.n_features_in_}")
        return X

    def predict(self, X):
        d = self.decision_function(X)
        return self.classes_[(d > 0).astype(int)]

    def score(self, X, y):
        return float(np.mean(self.predict(X) == np.asarray(y)))


class DifferenceOfMeans(_Base):
    """Mass-mean / CAA-style direction: mean(positive) - mean(negative) over train (+ validation) rows.

    The decision threshold is the midpoint of the two class-mean projections."""

    def __init__(self, use_validation=True):
        self.use_validation = use_validation

    def fit(self, X, y, X_val=None, y_val=None):
        t0 = time.perf_counter()
        X, ypm, Xv, yvpm = self._prepare(X, y, X_val, y_val)
        if self.use_validation and len(Xv):
            X, ypm = np.vstack([X, Xv]), np.concatenate([ypm, yvpm])
        mp, mn = X[ypm > 0].mean(axis=0), X[ypm < 0].mean(axis=0)
        diff = mp - mn
        if not np.any(diff):
            raise ValueError("class means are identical; difference of means is zero")
        self.coef_ = diff
        self.intercept_ = -0.5 * float(diff @ (mp + mn))
        self.concept_vector_ = diff / np.linalg.norm(diff)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def decision_function(self, X):
        return self._check_X(X) @ self.coef_ + self.intercept_


class LogRegCVProbe(_Base):
    """scikit-learn ``LogisticRegressionCV`` with a ``PredefinedSplit`` equal to the given train/val split,
    on train-standardized features (refit on train+val at the selected C), folded back exactly."""

    def __init__(self, Cs=None, tol=1e-4, max_iter=1000, solver="lbfgs"):
        self.Cs = Cs
        self.tol = tol
        self.max_iter = max_iter
        self.solver = solver

    def fit(self, X, y, X_val, y_val):
        from sklearn.linear_model import LogisticRegressionCV
        from sklearn.model_selection import PredefinedSplit

        t0 = time.perf_counter()
        X, ypm, Xv, yvpm = self._prepare(X, y, X_val, y_val)
        if len(Xv) == 0:
            raise ValueError("LogRegCVProbe needs a non-empty validation split (X_val, y_val)")
        mu, s = standardize_stats(X)
        Xa = (np.vstack([X, Xv]) - mu) / s
        ya = np.concatenate([ypm, yvpm])
        fold = np.r_[np.full(len(X), -1), np.zeros(len(Xv), dtype=int)]
        Cs = DEFAULT_CS if self.Cs is None else np.asarray(self.Cs)
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
        self.concept_vector_ = _orient(w, X, ypm)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def decision_function(self, X):
        return self._check_X(X) @ self.coef_ + self.intercept_


class GCSProbe(_Base):
    """Gaussian Concept Subspace: ``n_probes`` logistic probes (C = ``C``, scikit-learn objective solved
    exactly) on random class-balanced subsets of the train rows (``n_samples`` rows each, half per
    class, without replacement), each fitted on train-standardized features and folded back to raw
    space; a diagonal Gaussian over the folded-back weight vectors (``mean_``, ``var_``); concept
    vector = normalized mean.

    Defaults are smaller than the reference (1000 probes x 2000 samples): ``n_probes=100`` and
    ``n_samples=min(2000, 2 * floor(0.8 * smallest class count))``."""

    def __init__(self, n_probes=100, n_samples=None, C=1.0, random_state=0):
        self.n_probes = n_probes
        self.n_samples = n_samples
        self.C = C
        self.random_state = random_state

    def fit(self, X, y, X_val=None, y_val=None):
        from ..logistic.solver import fit_l2_logistic

        t0 = time.perf_counter()
        X, ypm, _, _ = self._prepare(X, y, X_val, y_val)
        if int(self.n_probes) < 1:
            raise ValueError(f"n_probes must be >= 1; got {self.n_probes!r}")
        pos, neg = np.flatnonzero(ypm > 0), np.flatnonzero(ypm < 0)
        m = min(len(pos), len(neg))
        half = (min(2000, 2 * int(0.8 * m)) if self.n_samples is None else int(self.n_samples)) // 2
        if half < 1 or half > m:
            raise ValueError(f"n_samples must be in [2, {2 * m}] (class-balanced, without replacement)")
        mu, s = standardize_stats(X)
        Xs = (X - mu) / s
        rng = np.random.default_rng(self.random_state)
        W = np.empty((int(self.n_probes), X.shape[1]))
        B = np.empty(int(self.n_probes))
        for k in range(int(self.n_probes)):
            idx = np.concatenate([rng.choice(pos, half, replace=False), rng.choice(neg, half, replace=False)])
            res = fit_l2_logistic(Xs[idx], ypm[idx], float(self.C), fit_intercept=True, tol=1e-8)
            W[k] = res.coef / s
            B[k] = res.intercept - W[k] @ mu
        self.weights_ = W
        self.mean_ = W.mean(axis=0)
        self.var_ = W.var(axis=0)
        self.coef_ = self.mean_
        self.intercept_ = float(B.mean())
        self.concept_vector_ = _orient(self.mean_, X, ypm)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def decision_function(self, X):
        return self._check_X(X) @ self.coef_ + self.intercept_


class XRFMProbe(_Base):
    """xRFM baseline via the ``xrfm`` package: an RFM with the ``l2_high_dim`` kernel, bandwidth grid
    ``bandwidths`` x ``center_grads`` in {True, False}, ridge ``reg``, selected by validation AUC.
    Inputs are standardized with train statistics.  Concept vector = top eigenvector of the best
    model's AGOP (folded back to raw space: ``v / s``), sign by correlation with the train labels.
    Predictions come from the fitted RFM (``predict_proba``)."""

    def __init__(self, bandwidths=(1.0, 10.0, 100.0), center_grads=(True, False), reg=1e-3, iters=5,
                 device="cpu"):
        self.bandwidths = bandwidths
        self.center_grads = center_grads
        self.reg = reg
        self.iters = iters
        self.device = device

    def fit(self, X, y, X_val, y_val):
        import torch
        from sklearn.metrics import roc_auc_score
        from xrfm.rfm_src import RFM
        from xrfm.rfm_src.class_conversion import ClassificationConverter

        t0 = time.perf_counter()
        X, ypm, Xv, yvpm = self._prepare(X, y, X_val, y_val)
        if len(Xv) == 0 or np.unique(yvpm).size < 2:
            raise ValueError("XRFMProbe needs a validation split containing both classes (AUC selection)")
        mu, s = standardize_stats(X)
        tX = torch.as_tensor((X - mu) / s, dtype=torch.float32)
        tXv = torch.as_tensor((Xv - mu) / s, dtype=torch.float32)
        ty = torch.as_tensor((ypm > 0).astype(np.float32)[:, None])
        tyv = torch.as_tensor((yvpm > 0).astype(np.float32)[:, None])
        best = None
        for bw in self.bandwidths:
            for cg in self.center_grads:
                model = RFM(kernel="l2_high_dim", bandwidth=float(bw), iters=int(self.iters), device=self.device,
                            verbose=False, tuning_metric="auc",
                            class_converter=ClassificationConverter(mode="zero_one", n_classes=2))
                model.fit((tX, ty), (tXv, tyv), reg=float(self.reg), center_grads=bool(cg),
                          get_agop_best_model=True)
                pv = model.predict_proba(tXv)[:, 1].detach().cpu().numpy()
                auc = roc_auc_score(yvpm > 0, pv)
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
        if np.corrcoef(proj, ypm)[0, 1] < 0:
            v = -v
        self.concept_vector_ = v / np.linalg.norm(v)
        self.model_ = model
        self.mu_, self.s_ = mu, s
        self.bandwidth_, self.center_grads_, self.val_auc_ = float(bw), bool(cg), float(auc)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def predict_proba(self, X):
        import torch

        X = self._check_X(X)
        t = torch.as_tensor((X - self.mu_) / self.s_, dtype=torch.float32)
        return self.model_.predict_proba(t).detach().cpu().double().numpy()

    def decision_function(self, X):
        p = np.clip(self.predict_proba(X)[:, 1], 1e-12, 1 - 1e-12)
        return np.log(p) - np.log1p(-p)
