"""Save and load fitted probes and concept vectors: a safetensors file (arrays) plus a JSON file (metadata).

``save_probe(path, probe)`` and ``save_concept_vectors(path, vectors)`` write ``<path>.safetensors`` and
``<path>.json``, each atomically (:func:`empirical.files.atomic_write_bytes`).  The JSON holds the format,
its version, what was saved and the SHA-256 of the array file and, from format version 2 on, of the
metadata itself (``metadata_sha256``: the canonical JSON of every other field), so that an edited or
damaged file of either kind is detected on load and raises ``ValueError`` naming the file.  Nothing is
unpickled.  Files of format version 1 (written before concept vectors became one object) still load.

Layer index: stored as given; ``layer_convention`` says what it means (see
:mod:`empirical.probes.concept_vectors`).
"""
from __future__ import annotations

import hashlib
import json
import os
from importlib.metadata import PackageNotFoundError, version

import numpy as np
import safetensors
import scipy
import sklearn
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from ..files import atomic_write_bytes
from .concept_vectors import DEFAULT_LAYER_CONVENTION, ConceptVectors, LinearProbe
from .raptor import RaptorProbe

__all__ = ["save_probe", "load_probe", "save_concept_vectors", "load_concept_vectors", "FORMAT", "FORMAT_VERSION"]

FORMAT = "raptor-probe"
#: version written by this module; version 1 files are read too
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
PROBE_ARRAYS = ("coef_", "concept_vector_", "scaler_mean_", "scaler_scale_", "Cs_", "path_val_accuracy_",
                "path_n_iter_", "coef_std_")
#: optional per-layer arrays of a concept-vector file, (L,) or (L, p); NaN rows mark a layer without the value
CONCEPT_SCALARS = ("intercept", "test_accuracy", "C")
CONCEPT_VECTORS = ("coef", "scaler_mean", "scaler_scale")


def file_pair(path) -> tuple[str, str]:
    """The (``.safetensors``, ``.json``) paths of a save at ``path`` (either extension or none may be given)."""
    base = os.fspath(path)
    for ext in (".safetensors", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base + ".safetensors", base + ".json"


def library_versions() -> dict:
    """Versions of the libraries that wrote a file (stored in its metadata)."""
    try:
        raptor = version("raptor-probes")
    except PackageNotFoundError:  # running from a source tree that is not installed
        raptor = "unknown"
    return {"raptor-probes": raptor, "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__, "safetensors": safetensors.__version__}


def _metadata_digest(meta: dict) -> str:
    body = {k: v for k, v in meta.items() if k != "metadata_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=False).encode()).hexdigest()


def _write_pair(path, arrays: dict, meta: dict) -> tuple[str, str]:
    st_path, js_path = file_pair(path)
    blob = save_safetensors({k: np.ascontiguousarray(v) for k, v in arrays.items()})
    meta = dict(meta, format=FORMAT, format_version=FORMAT_VERSION, sha256=hashlib.sha256(blob).hexdigest(),
                versions=library_versions())
    try:
        meta["metadata_sha256"] = _metadata_digest(meta)
    except ValueError as exc:
        raise ValueError(f"metadata cannot be stored as JSON (non-finite number?): {exc}") from None
    atomic_write_bytes(st_path, blob)
    atomic_write_bytes(js_path, json.dumps(meta, indent=2, sort_keys=True).encode())
    return st_path, js_path


def _read_pair(path, kind: str) -> tuple[dict, dict]:
    st_path, js_path = file_pair(path)
    for f in (st_path, js_path):
        if not os.path.exists(f):
            raise ValueError(f"missing file {f!r} (a saved {kind} is a .safetensors + .json pair)")
    try:
        with open(js_path, "rb") as f:
            meta = json.loads(f.read().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt metadata file {js_path!r}: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("kind") != kind:
        raise ValueError(f"{js_path!r} is not RAPTOR {kind} metadata (format/kind mismatch)")
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"{js_path!r}: unsupported format_version {meta.get('format_version')!r} "
                         f"(this version reads {list(READABLE_VERSIONS)})")
    if meta["format_version"] >= 2 and meta.get("metadata_sha256") != _metadata_digest(meta):
        raise ValueError(f"{js_path!r} was altered after it was written (metadata checksum mismatch)")
    with open(st_path, "rb") as f:
        blob = f.read()
    if hashlib.sha256(blob).hexdigest() != meta.get("sha256"):
        raise ValueError(f"{st_path!r} does not match its metadata (checksum mismatch: corrupt or from another save)")
    try:
        arrays = load_safetensors(blob)
    except Exception as exc:  # safetensors raises its own error types for damaged headers
        raise ValueError(f"corrupt array file {st_path!r}: {exc}") from None
    return arrays, meta


def _jsonable_classes(classes) -> list:
    out = []
    for c in np.asarray(classes).tolist():
        if not isinstance(c, (str, int, float, bool)):
            raise ValueError(f"class label {c!r} cannot be stored in JSON")
        out.append(c)
    return out


def save_probe(path, probe: RaptorProbe, *, layer: int | None = None,
               layer_convention: str = "position in the hidden-state stack (0-based)",
               extra: dict | None = None) -> tuple[str, str]:
    """Save a fitted :class:`~empirical.probes.raptor.RaptorProbe`.

    Parameters
    ----------
    path : str or path-like
        Base path; ``<path>.safetensors`` and ``<path>.json`` are written (atomically).
    probe : RaptorProbe
        A fitted probe.
    layer : int, optional
        Layer the probe was fitted on, stored with ``layer_convention``.
    extra : dict, optional
        JSON-serializable provenance stored under ``extra``.

    Returns
    -------
    (str, str)
        The paths written.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((60, 4)), np.arange(60) % 2
    >>> probe = RaptorProbe(Cs=[0.1, 1.0]).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_probe(f"{d}/probe", probe, layer=3)
    ...     bool(np.all(load_probe(f"{d}/probe").predict(X) == probe.predict(X)))
    True
    """
    if not hasattr(probe, "coef_"):
        raise ValueError("probe is not fitted")
    arrays = {k: np.asarray(getattr(probe, k), dtype=np.float64) for k in PROBE_ARRAYS if hasattr(probe, k)}
    meta = dict(kind="probe", estimator=type(probe).__name__,
                params={k: (v if not isinstance(v, np.ndarray) else v.tolist()) for k, v in probe.get_params().items()},
                C=float(probe.C_), **{"lambda": float(probe.lambda_)}, intercept=float(probe.intercept_),
                classes=_jsonable_classes(probe.classes_), n_features=int(probe.n_features_in_),
                best_val_accuracy=float(probe.best_val_accuracy_), fallback=bool(probe.fallback_),
                fit_time_s=float(probe.fit_time_), layer=layer, layer_convention=layer_convention,
                seed=probe.random_state, fold_back=probe.fold_back, arrays=sorted(arrays),
                extra=extra or {})
    return _write_pair(path, arrays, meta)


def load_probe(path) -> RaptorProbe:
    """Load and verify a probe saved by :func:`save_probe`.

    Parameters
    ----------
    path : str or path-like
        Base path (or either file of the pair).

    Returns
    -------
    RaptorProbe
        Fitted, with ``layer_`` and the saved ``metadata_``.

    Raises ``ValueError`` naming the file when either file is missing, damaged, altered or from
    another save.
    """
    arrays, meta = _read_pair(path, "probe")
    missing = [k for k in meta.get("arrays", []) if k not in arrays]
    if missing or not {"coef_", "scaler_mean_", "scaler_scale_"} <= set(arrays):
        raise ValueError(f"array file lacks required arrays {missing or ['coef_', 'scaler_mean_', 'scaler_scale_']}")
    p = int(meta["n_features"])
    for k in ("coef_", "concept_vector_", "scaler_mean_", "scaler_scale_", "coef_std_"):
        if k in arrays and arrays[k].shape != (p,):
            raise ValueError(f"array {k} has shape {arrays[k].shape}, metadata says n_features={p}")
    probe = RaptorProbe(**dict(meta["params"]))
    for k, v in arrays.items():
        setattr(probe, k, v)
    if "path_n_iter_" in arrays:
        probe.path_n_iter_ = arrays["path_n_iter_"].astype(int)
    probe.C_ = float(meta["C"])
    probe.lambda_ = float(meta["lambda"])
    probe.intercept_ = float(meta["intercept"])
    probe.classes_ = np.asarray(meta["classes"])
    probe.n_features_in_ = p
    probe.best_val_accuracy_ = float(meta["best_val_accuracy"])
    probe.fallback_ = bool(meta["fallback"])
    probe.fit_time_ = float(meta["fit_time_s"])
    probe.layer_ = meta.get("layer")
    probe.metadata_ = meta
    return probe


def save_concept_vectors(path, vectors: ConceptVectors, *, layers=None, layer_convention: str | None = None,
                         extra: dict | None = None) -> tuple[str, str]:
    """Save concept vectors (one probe per layer) as ``<path>.safetensors`` + ``<path>.json``.

    Parameters
    ----------
    path : str or path-like
        Base path of the pair.
    vectors : ConceptVectors or array of shape (L, p)
        The object to save.  A bare (L, p) array of directions is wrapped with
        :meth:`ConceptVectors.from_directions` (``layers`` default ``0..L-1``; rows are normalized).
    layers, layer_convention, extra
        Only for a bare array: its layer indices, their meaning and free-form provenance.

    Returns
    -------
    (str, str)
        The paths written.

    Examples
    --------
    >>> import tempfile
    >>> cv = ConceptVectors({2: LinearProbe([1.0, 1.0], 0.0, test_accuracy=0.75)}, model="tiny")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_concept_vectors(f"{d}/cv", cv)
    ...     back = load_concept_vectors(f"{d}/cv")
    >>> back.layers, back[2].test_accuracy, back.model
    ([2], 0.75, 'tiny')
    """
    if not isinstance(vectors, ConceptVectors):
        directions = np.asarray(vectors, dtype=np.float64)
        if directions.ndim == 1:
            directions = directions[None]
        if directions.ndim != 2:
            raise ValueError(f"vectors must be ConceptVectors or an (L, p) array, got shape {directions.shape}")
        layers = list(range(directions.shape[0])) if layers is None else [int(x) for x in layers]
        if len(layers) != directions.shape[0]:
            raise ValueError(f"layers must have one index per vector: {len(layers)} layer indices for "
                             f"{directions.shape[0]} vectors")
        vectors = ConceptVectors.from_directions(dict(zip(layers, directions)),
                                                 layer_convention=layer_convention or DEFAULT_LAYER_CONVENTION,
                                                 metadata=extra or {})
    elif layers is not None or layer_convention is not None or extra is not None:
        raise ValueError("layers, layer_convention and extra are only for a bare array; ConceptVectors carry their own")
    probes = [vectors[layer] for layer in vectors.layers]
    arrays = {"directions": np.stack([probe.direction for probe in probes])}
    p = vectors.n_features
    for name in CONCEPT_VECTORS:
        if any(getattr(probe, name) is not None for probe in probes):
            arrays[name] = np.stack([np.full(p, np.nan) if getattr(probe, name) is None else getattr(probe, name)
                                     for probe in probes])
    for name in CONCEPT_SCALARS:
        if any(getattr(probe, name) is not None for probe in probes):
            arrays[name] = np.array([np.nan if getattr(probe, name) is None else getattr(probe, name)
                                     for probe in probes])
    meta = dict(kind="concept_vectors", layers=vectors.layers, n_features=p, method=vectors.method,
                model=vectors.model, layer_convention=vectors.layer_convention, metadata=vectors.metadata,
                arrays=sorted(arrays))
    return _write_pair(path, arrays, meta)


def _row(arrays: dict, name: str, index: int):
    if name not in arrays:
        return None
    value = arrays[name][index]
    return None if np.all(np.isnan(value)) else value


def load_concept_vectors(path) -> ConceptVectors:
    """Load and verify concept vectors saved by :func:`save_concept_vectors` (format version 1 or 2).

    Parameters
    ----------
    path : str or path-like
        Base path (or either file of the pair).

    Returns
    -------
    ConceptVectors
        Version 1 files (directions only) load as bare directions.

    Raises ``ValueError`` naming the file when either file is missing, damaged, altered or from another save.
    """
    arrays, meta = _read_pair(path, "concept_vectors")
    st_path = file_pair(path)[0]
    if meta["format_version"] == 1:
        directions = arrays.get("vectors")
        if directions is None or list(directions.shape) != meta.get("shape"):
            raise ValueError(f"{st_path!r}: concept-vector array missing or its shape does not match the metadata")
        return ConceptVectors.from_directions(dict(zip(meta["layers"], directions)),
                                              layer_convention=meta.get("layer_convention", DEFAULT_LAYER_CONVENTION),
                                              metadata=meta.get("extra") or {})
    layers, p = meta.get("layers"), meta.get("n_features")
    if not isinstance(layers, list) or not isinstance(p, int):
        raise ValueError(f"{st_path!r}: metadata lacks the layer list or n_features")
    expected = {name: (len(layers), p) for name in ("directions", *CONCEPT_VECTORS)}
    expected.update({name: (len(layers),) for name in CONCEPT_SCALARS})
    if "directions" not in arrays or sorted(arrays) != meta.get("arrays"):
        raise ValueError(f"{st_path!r}: arrays {sorted(arrays)} do not match the metadata's {meta.get('arrays')}")
    for name, array in arrays.items():
        if name not in expected or array.shape != expected[name]:
            raise ValueError(f"{st_path!r}: array {name!r} has shape {array.shape}, expected {expected.get(name)}")
    try:
        probes = {}
        for index, layer in enumerate(layers):
            coef, intercept = _row(arrays, "coef", index), _row(arrays, "intercept", index)
            probes[layer] = LinearProbe(coef, None if coef is None else intercept, arrays["directions"][index],
                                        _row(arrays, "test_accuracy", index), _row(arrays, "C", index),
                                        _row(arrays, "scaler_mean", index), _row(arrays, "scaler_scale", index))
        return ConceptVectors(probes, method=meta.get("method", "raptor"), model=meta.get("model"),
                              layer_convention=meta.get("layer_convention", DEFAULT_LAYER_CONVENTION),
                              metadata=meta.get("metadata") or {})
    except ValueError as exc:
        raise ValueError(f"{st_path!r}: invalid concept vectors: {exc}") from None
