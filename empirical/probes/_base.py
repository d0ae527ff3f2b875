"""The estimator interface every concept-vector method shares (RAPTOR and the baselines).

A concept probe is a scikit-learn binary classifier on raw hidden states with one extra output, the
unit concept vector:

* ``fit(X, y, X_val=None, y_val=None)``: ``X, y`` the training split; ``X_val, y_val`` an optional
  validation split the method may use (to tune, to select or to add data, as each method says);
* fitted ``classes_`` (two labels; the positive class is ``classes_[1]``), ``n_features_in_``,
  ``concept_vector_`` (unit norm, oriented so that the positive class has the larger mean
  projection), ``fit_time_`` (wall-clock seconds of ``fit``);
* ``decision_function(X)`` (> 0 means ``classes_[1]``), ``predict(X)``, ``score(X, y)``.

Parameters are declared in ``_parameter_constraints`` (scikit-learn's declarative validation, run by
``fit`` through ``sklearn.base._fit_context``), so a bad parameter raises
``sklearn.utils._param_validation.InvalidParameterError`` (a ``ValueError``) naming it.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ..common.arrays import (
    as_real_array,
    check_binary_labels,
    check_magnitude,
    check_matrix,
    check_min_per_class,
    check_signed_labels,
    check_varying,
)
from ..numerics import unit_vector

__all__ = ["ConceptProbe", "LinearConceptProbe", "orient_to_positive_class"]


def orient_to_positive_class(vector: np.ndarray, X: np.ndarray, y_signed: np.ndarray, *,
                             check_input: bool = True) -> np.ndarray:
    """Unit ``vector`` with the sign that gives the positive rows (``y_signed > 0``) the larger mean projection.

    Parameters
    ----------
    vector : ndarray of shape (p,)
        A fitted direction (any non-zero scale, either sign).
    X : ndarray of shape (n, p)
        Rows in the space of ``vector`` (the training rows).
    y_signed : ndarray of shape (n,)
        Their labels in {-1, +1} (+1: the positive class, ``classes_[1]``).
    check_input : bool, default=True
        Check ``X`` and ``y_signed`` (False: an estimator's ``fit`` validated them at its boundary).

    Returns
    -------
    ndarray of shape (p,)
        ``vector / ||vector||`` or its negative; on a tie of the two class means the sign is kept.

    Raises
    ------
    ValueError
        ``vector`` is zero or not finite.

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [0.0, -1.0]])
    >>> orient_to_positive_class(np.array([0.0, -2.0]), X, np.array([1.0, -1.0])) + 0.0  # + 0.0: no -0.
    array([0., 1.])
    """
    unit = unit_vector(vector, "vector (the fitted direction)")
    if check_input:
        X = check_matrix(X, "X")
        y_signed = check_signed_labels(y_signed, X.shape[0], "y_signed")
    if unit.shape != (X.shape[1],):
        raise ValueError(f"vector must have one entry per column of X ({X.shape[1]}), got shape {unit.shape}")
    if not (np.any(y_signed > 0) and np.any(y_signed < 0)):
        raise ValueError(f"y_signed must contain both classes (-1 and +1) to orient the direction, got only "
                         f"{np.unique(y_signed)!r:.60}")
    projection = X @ unit
    return -unit if projection[y_signed > 0].mean() < projection[y_signed < 0].mean() else unit


class ConceptProbe(ClassifierMixin, BaseEstimator):
    """Base class of the concept-vector estimators (see the module docstring for the interface).

    A subclass sets the attributes below in ``fit`` and writes ``decision_function``.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two training labels, sorted; ``classes_[1]`` is the positive class.
    n_features_in_ : int
        Features seen in ``fit``.
    concept_vector_ : ndarray of shape (n_features_in_,)
        The unit concept vector in raw hidden-state space, oriented towards the positive class
        (:func:`orient_to_positive_class`).
    fit_time_ : float
        Wall-clock seconds of ``fit``.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _validate_fit_data(self, X, y, X_val=None, y_val=None):
        """Validate a fit's inputs; forgets every attribute of an earlier fit, then sets ``classes_``,
        ``n_features_in_``.

        Returns ``(X, y_signed, X_val, y_val_pm)`` as float64 arrays with labels in {-1, +1}
        (``classes_[1]`` -> +1); an absent validation split is returned empty."""
        self._reset_fitted()
        X, y = validate_data(self, as_real_array(X, "X"), as_real_array(y, "y", labels=True), dtype=np.float64,
                             ensure_all_finite=True)
        check_magnitude(X, "X")
        if np.unique(y).size != 2:  # two distinct values are two classes whatever their type (0.5 and 2.5 too)
            try:  # scikit-learn's words for a regression target (its estimator checks look for them)
                check_classification_targets(y)
            except ValueError as exc:
                raise ValueError(f"y must hold class labels, got {y!r:.60} ({exc})") from None
        if type_of_target(y) == "multiclass":
            raise ValueError(f"Only binary classification is supported: y must have exactly two classes, "
                             f"got {np.unique(y).size}")
        self.classes_, y_signed = check_binary_labels(y, X.shape[0], "y")
        check_min_per_class(y_signed, "train")
        check_varying(X, "X", check_input=False)  # validate_data and check_magnitude have checked X
        if (X_val is None) != (y_val is None):
            given = "y_val" if X_val is None else "X_val"
            raise ValueError(f"X_val and y_val must be given together, got only {given}")
        if X_val is None:
            return X, y_signed, X[:0], y_signed[:0]
        X_val = check_matrix(X_val, "X_val")
        if X_val.shape[1] != X.shape[1]:
            raise ValueError(f"X_val must have the {X.shape[1]} features of X, got {X_val.shape[1]}")
        _, y_val_pm = check_binary_labels(y_val, X_val.shape[0], "y_val", classes=self.classes_)
        return X, y_signed, X_val, y_val_pm

    def _reset_fitted(self) -> None:
        """Delete the fitted attributes (public names ending in ``_``) of an earlier fit, so a refit with
        other options keeps none of them (e.g. ``path_certified_`` of an exact fit after a ``solver="paper"``
        refit)."""
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("_")]:
            delattr(self, name)

    def _validate_X(self, X) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, as_real_array(X, "X"), dtype=np.float64, ensure_all_finite=True, reset=False)

    def predict(self, X) -> np.ndarray:
        """Predicted labels: ``classes_[1]`` where ``decision_function(X) > 0``."""
        scores = self.decision_function(X)  # checks that the probe is fitted
        return self.classes_[(scores > 0).astype(int)]


class LinearConceptProbe(ConceptProbe):
    """A concept probe whose decision function is linear in raw space: ``X @ coef_ + intercept_``.

    A subclass sets ``coef_`` and ``intercept_`` in ``fit`` (besides the attributes of :class:`ConceptProbe`).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        Weights on raw hidden states (not standardised); the logit is ``X @ coef_ + intercept_``.
    intercept_ : float
        The logit's offset; a positive logit predicts ``classes_[1]``.
    """

    def decision_function(self, X) -> np.ndarray:
        """Logit ``X @ coef_ + intercept_`` on raw hidden states (positive -> ``classes_[1]``)."""
        return self._validate_X(X) @ self.coef_ + self.intercept_

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities ``[1 - sigmoid(d), sigmoid(d)]`` with ``d = decision_function(X)``."""
        p1 = expit(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))
