"""Concept vectors: one linear probe per layer, as one object (the unit a user saves, loads and steers with).

A :class:`LinearProbe` is a binary linear probe in *raw* hidden-state space at one layer: logit
``coef @ h + intercept`` (positive class = the probe's ``classes_[1]``) and the unit concept vector
``direction`` (by default ``coef / ||coef||``).  A :class:`ConceptVectors` maps layer indices to
probes, like repeng's ``ControlVector`` maps layers to directions, and carries what steering and
reports need: the probes' test and validation accuracies, the layers' median hidden-state norms
(the unit of an additive steering strength), the ridge strength ``C`` chosen per layer, the
standardization statistics, the model and the layer convention.  It is saved and loaded as a
safetensors + JSON pair by :func:`empirical.probes.save_concept_vectors` and
:func:`~empirical.probes.load_concept_vectors`.
:meth:`ConceptVectors.select` keeps the layers a run may steer;
:meth:`ConceptVectors.with_statistics` records each layer's validation accuracy and hidden-state norm on its probe.

Layer index: whatever the producer says in ``layer_convention``; for hidden states extracted by
:mod:`empirical.llm._extract` layer ``l`` is the output of decoder block ``l`` (``l = 0`` the token
embeddings), which is also the layer steering edits.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from empirical.common.checks import check_scalar

from ..common.arrays import as_real_array, check_magnitude, check_matrix
from ..numerics import safe_norm

__all__ = ["LinearProbe", "ConceptVectors", "DEFAULT_LAYER_CONVENTION"]

#: the convention of hidden states extracted by :mod:`empirical.llm._extract`
DEFAULT_LAYER_CONVENTION = "output of decoder block l (0 = token embeddings)"


def _finite_vector(value, name: str, size: int | None = None) -> np.ndarray:
    try:
        vector = np.asarray(as_real_array(value, name), dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        if name in str(exc):
            raise
        raise ValueError(f"{name} must be a vector of real numbers, got {type(value).__name__} ({exc})") from None
    if size is not None and vector.shape != (size,):
        raise ValueError(f"{name} must be a vector of length {size}, got shape {np.shape(value)}")
    if vector.size == 0 or not np.all(np.isfinite(vector)):
        problem = "non-finite values" if vector.size else "no entries"
        raise ValueError(f"{name} must be a non-empty finite vector, got {problem}")
    return vector


def _optional_float(value, name: str, low: float = -math.inf, high: float = math.inf) -> float | None:
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.size == 1:  # a fitted estimator's intercept_ of shape (1,)
        value = value.reshape(())
    return check_scalar(value, name, low=None if math.isinf(low) else low, high=None if math.isinf(high) else high)


@dataclass(frozen=True)
class LinearProbe:
    """A binary linear probe at one layer, in raw hidden-state coordinates.

    Parameters
    ----------
    coef : array of shape (p,) or None
        Raw-space weights ``w``: the probe's logit is ``w @ h + intercept`` for a raw hidden state ``h``.
        None for a bare direction (e.g. loaded from an old concept-vector file), which cannot steer.
    intercept : float or None
        Raw-space intercept ``b`` (None exactly when ``coef`` is None).
    direction : array of shape (p,), optional
        Unit concept vector; default ``coef / ||coef||``.  Normalized on construction.
    test_accuracy : float, optional
        Held-out accuracy of the probe in [0, 1] (steering's reliability threshold reads it).
    C : float, optional
        Inverse ridge strength selected for this layer (``lambda = 1 / C``), if the probe is ridge-logistic.
    scaler_mean, scaler_scale : arrays of shape (p,), optional
        The train-split standardization the probe was fitted on (already folded into ``coef``/``intercept``).
    validation_accuracy : float, optional
        Accuracy in [0, 1] on the validation rows of the split it was fitted on (steering ranks layers by it and
        ``raptor steer --tau`` keeps the layers that reach it; never test data).
    state_norm : float, optional
        Median Euclidean norm (>= 0) of the layer's hidden states over the rows it was fitted on: the unit of an
        additive steering strength (``k x`` this norm).

    Examples
    --------
    >>> probe = LinearProbe([3.0, 4.0], -1.0, test_accuracy=0.9)
    >>> probe.direction
    array([0.6, 0.8])
    >>> probe.slope, float(probe.logit([[1.0, 1.0]])[0])
    (5.0, 6.0)
    """

    coef: np.ndarray | None
    intercept: float | None
    direction: np.ndarray | None = None
    test_accuracy: float | None = None
    C: float | None = None
    scaler_mean: np.ndarray | None = None
    scaler_scale: np.ndarray | None = None
    validation_accuracy: float | None = None
    state_norm: float | None = None

    def __post_init__(self):
        if (self.coef is None) != (self.intercept is None):
            raise ValueError("coef and intercept must be given together (both None for a bare direction), got "
                             f"{'coef' if self.intercept is None else 'intercept'} alone")
        coef = None if self.coef is None else check_magnitude(_finite_vector(self.coef, "coef"), "coef")
        intercept = _optional_float(self.intercept, "intercept")
        if self.direction is None:
            if coef is None:
                raise ValueError("a LinearProbe needs coef or direction")
            norm = safe_norm(coef)
            if norm == 0:
                raise ValueError("coef is all zeros; there is no concept direction")
            direction = coef / norm
        else:
            direction = _finite_vector(self.direction, "direction", None if coef is None else coef.size)
            norm = safe_norm(direction)
            if norm == 0:
                raise ValueError("direction is all zeros")
            direction = direction / norm
        p = direction.size
        scaler_mean = None if self.scaler_mean is None else _finite_vector(self.scaler_mean, "scaler_mean", p)
        scaler_scale = None if self.scaler_scale is None else _finite_vector(self.scaler_scale, "scaler_scale", p)
        if scaler_scale is not None and np.any(scaler_scale <= 0):
            raise ValueError(f"scaler_scale must be positive, got {float(scaler_scale.min())!r} at index "
                             f"{int(np.argmin(scaler_scale))}")
        test_accuracy = _optional_float(self.test_accuracy, "test_accuracy", 0.0, 1.0)
        C = _optional_float(self.C, "C", 0.0, math.inf)
        if C is not None and C == 0:
            raise ValueError("C must be > 0, got 0.0")
        validation_accuracy = _optional_float(self.validation_accuracy, "validation_accuracy", 0.0, 1.0)
        state_norm = _optional_float(self.state_norm, "state_norm", 0.0, math.inf)
        for name, value in dict(coef=coef, intercept=intercept, direction=direction, test_accuracy=test_accuracy,
                                C=C, scaler_mean=scaler_mean, scaler_scale=scaler_scale,
                                validation_accuracy=validation_accuracy, state_norm=state_norm).items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_estimator(cls, estimator, test_accuracy: float | None = None) -> LinearProbe:
        """From a fitted linear estimator: ``coef_`` (raw space), ``intercept_`` and, if present,
        ``concept_vector_``, ``C_``, ``scaler_mean_``, ``scaler_scale_`` (as :class:`RaptorProbe` sets them)."""
        return cls(np.asarray(estimator.coef_, dtype=np.float64).ravel(), float(np.ravel(estimator.intercept_)[0]),
                   getattr(estimator, "concept_vector_", None), test_accuracy, getattr(estimator, "C_", None),
                   getattr(estimator, "scaler_mean_", None), getattr(estimator, "scaler_scale_", None))

    @property
    def n_features(self) -> int:
        """Hidden-state dimension p."""
        return int(self.direction.size)

    @property
    def slope(self) -> float:
        """``coef @ direction``: change of the logit per unit step along the direction."""
        self._require_coef("slope")
        return float(self.coef @ self.direction)

    def logit(self, H) -> np.ndarray:
        """Probe logits ``H @ coef + intercept`` for raw hidden states ``H`` (n, p), or the logit of one state (p,)."""
        self._require_coef("logit")
        one = np.ndim(H) == 1
        H = check_matrix(np.atleast_2d(np.asarray(H, dtype=np.float64)) if one else H, "H")
        if H.shape[1] != self.n_features:
            raise ValueError(f"H must have {self.n_features} columns (the probe's hidden size), got {H.shape[1]}")
        logits = H @ self.coef + self.intercept
        return logits[0] if one else logits

    def _require_coef(self, what: str):
        if self.coef is None:
            raise ValueError(f"{what} needs the probe's coef and intercept; this probe holds only a direction")


@dataclass(frozen=True)
class ConceptVectors(Mapping):
    """Concept vectors of one concept across layers: ``{layer: LinearProbe}`` plus provenance.

    Behaves as a read-only mapping from layer index to :class:`LinearProbe` (``cv[12]``, ``list(cv)``,
    ``cv.items()``), so anything that takes a dict of probes (steering) takes it.

    Parameters
    ----------
    probes : mapping of int to LinearProbe
        The probe of each layer; all of the same dimension.
    method : str
        Which method produced them (``"raptor"``, ``"gcs"``, ...).
    model : str, optional
        Model identity (name or path) the hidden states came from.
    layer_convention : str
        What layer ``l`` means (default: output of decoder block ``l``, 0 = token embeddings).
    metadata : dict
        Free-form JSON-serializable provenance (dataset, split seed, ...).

    Examples
    --------
    >>> cv = ConceptVectors({3: LinearProbe([1.0, 0.0], 0.5, test_accuracy=0.8)}, model="tiny")
    >>> cv.layers, cv.directions[3], cv[3].test_accuracy
    ([3], array([1., 0.]), 0.8)
    """

    probes: Mapping[int, LinearProbe]
    method: str = "raptor"
    model: str | None = None
    layer_convention: str = DEFAULT_LAYER_CONVENTION
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.probes, Mapping) or not self.probes:
            raise ValueError(f"probes must be a non-empty mapping {{layer: LinearProbe}}, got {self.probes!r:.60}")
        probes = {}
        for layer, probe in self.probes.items():
            if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
                raise ValueError(f"layer indices must be integers, got {layer!r}")
            if not isinstance(probe, LinearProbe):
                raise ValueError(f"probes[{layer}] must be a LinearProbe, got {type(probe).__name__}")
            probes[int(layer)] = probe
        sizes = {probe.n_features for probe in probes.values()}
        if len(sizes) != 1:
            raise ValueError(f"all probes must have the same dimension, got {sorted(sizes)}")
        object.__setattr__(self, "probes", dict(sorted(probes.items())))
        object.__setattr__(self, "metadata", dict(self.metadata))

    @classmethod
    def from_estimators(cls, estimators: Mapping, test_accuracies: Mapping | None = None, **kwargs) -> ConceptVectors:
        """From fitted linear estimators ``{layer: estimator}`` (see :meth:`LinearProbe.from_estimator`)."""
        test_accuracies = test_accuracies or {}
        return cls({layer: LinearProbe.from_estimator(est, test_accuracies.get(layer))
                    for layer, est in estimators.items()}, **kwargs)

    @classmethod
    def from_directions(cls, directions: Mapping, **kwargs) -> ConceptVectors:
        """Bare directions ``{layer: vector}`` (no coefficients: enough to compare or export, not to steer)."""
        return cls({layer: LinearProbe(None, None, vector) for layer, vector in directions.items()}, **kwargs)

    def __getitem__(self, layer: int) -> LinearProbe:
        return self.probes[layer]

    def __iter__(self) -> Iterator[int]:
        return iter(self.probes)

    def __len__(self) -> int:
        return len(self.probes)

    def check_provenance(self, source: str, *, model: str | None = None, n_features: int | None = None,
                         dataset: str | None = None) -> None:
        """Compare where these vectors come from with where they are used: the one check of every reader of saved
        vectors (``raptor steer --probe-file``, :func:`empirical.llm.given_vectors`).

        Parameters
        ----------
        source : str
            What the vectors are, for messages (e.g. ``"--probe-file 'probes.json'"``).
        model : str, optional
            The identity of the model they are used with (:func:`empirical.llm.model_identity`); compared
            with :attr:`model` when both are known.
        n_features : int, optional
            The hidden size of the states they are used on.
        dataset : str, optional
            The dataset they are used on; compared with ``metadata["dataset"]`` when both are known.

        Raises
        ------
        ValueError
            Naming ``source`` and both values: another model, or another hidden size.

        Warns
        -----
        UserWarning
            Naming ``source`` and both datasets: fitted on another dataset (steering one concept with another's
            vectors may be meant, e.g. transfer).
        """
        if n_features is not None and self.n_features != int(n_features):
            raise ValueError(f"{source} holds vectors of hidden size {self.n_features}, but the hidden states they "
                             f"are used on have hidden size {int(n_features)} (another model)")
        if model is not None and self.model is not None and str(self.model) != str(model):
            raise ValueError(f"{source} was fitted on model {self.model!r}, but this run uses model {model!r}")
        recorded = self.metadata.get("dataset") if isinstance(self.metadata, Mapping) else None
        if dataset is not None and recorded is not None and str(recorded) != str(dataset):
            warnings.warn(f"{source} was fitted on dataset {recorded!r} and is used on dataset {dataset!r}",
                          UserWarning, stacklevel=2)

    def select(self, layers) -> ConceptVectors:
        """The probes of ``layers``, with this object's provenance (the layers a steering run may steer:
        ``raptor steer --layers``, and the layers that pass ``--tau``, decided by
        :func:`empirical.llm.reliable_layers`, the one home of the reliability rule).

        Parameters
        ----------
        layers : iterable of int
            The layers to keep; a layer these vectors do not hold is ignored.

        Returns
        -------
        ConceptVectors
            The kept probes, unchanged, and the same method, model, layer convention and metadata.

        Raises
        ------
        ValueError
            When no layer is left (naming the layers held and the layers asked for).

        Examples
        --------
        >>> cv = ConceptVectors({1: LinearProbe([1.0, 0.0], 0.0), 2: LinearProbe([0.0, 1.0], 0.0)})
        >>> cv.select([1, 5]).layers
        [1]
        """
        wanted = {int(layer) for layer in layers}
        kept = {layer: probe for layer, probe in self.probes.items() if layer in wanted}
        if not kept:
            raise ValueError(f"layers must name a layer of these concept vectors (layers {self.layers}), "
                             f"got {sorted(wanted)}")
        return dataclasses.replace(self, probes=kept)

    def with_statistics(self, *, validation_accuracy=None, state_norms=None) -> ConceptVectors:
        """These vectors with each layer's validation accuracy and hidden-state norm recorded on its probe (the
        probes are otherwise unchanged, bit for bit).

        Parameters
        ----------
        validation_accuracy : mapping of int to float, optional
            Accuracy on the validation rows per layer (:attr:`LinearProbe.validation_accuracy`); a layer it does not
            name keeps its value.
        state_norms : mapping of int to float, optional
            Median hidden-state norm per layer (:attr:`LinearProbe.state_norm`); a layer it does not name keeps its
            value.

        Returns
        -------
        ConceptVectors

        Examples
        --------
        >>> cv = ConceptVectors({3: LinearProbe([1.0, 0.0], 0.5)}).with_statistics(state_norms={3: 12.5})
        >>> cv[3].state_norm, cv[3].validation_accuracy
        (12.5, None)
        """
        values = dict(validation_accuracy=(validation_accuracy, 1.0), state_norm=(state_norms, math.inf))
        probes = {}
        for layer, probe in self.probes.items():
            probe = copy.copy(probe)  # no second normalization of the direction: the same bits
            for name, (per_layer, high) in values.items():
                if per_layer is not None and layer in per_layer:
                    object.__setattr__(probe, name, _optional_float(per_layer[layer], f"{name}[{layer}]", 0.0, high))
            probes[layer] = probe
        return dataclasses.replace(self, probes=probes)

    @property
    def layers(self) -> list[int]:
        """Layer indices, ascending."""
        return list(self.probes)

    @property
    def n_features(self) -> int:
        """Hidden-state dimension p."""
        return next(iter(self.probes.values())).n_features

    @property
    def directions(self) -> dict[int, np.ndarray]:
        """``{layer: unit concept vector}``."""
        return {layer: probe.direction for layer, probe in self.probes.items()}
