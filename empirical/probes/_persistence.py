"""Save and load fitted probes and concept vectors: a safetensors file (arrays) plus a JSON file (metadata).

``save_probe(path, probe)`` and ``save_concept_vectors(path, vectors)`` write ``<path>.safetensors`` and
``<path>.json`` as one unit (both complete before either replaces its target, the metadata last; a save interrupted
between the two renames leaves the previous pair loadable).  The JSON holds the format,
its version, what was saved and the SHA-256 of the array file and, from format version 2 on, of the
metadata itself (``metadata_sha256``: the canonical JSON of every other field), so that an edited or
damaged file of either kind is detected on load and raises ``ValueError`` naming the file.  Nothing is
unpickled.  Files of format version 1 (written before concept vectors became one object) still load.

Layer index: stored as given; ``layer_convention`` says what it means (see
:mod:`empirical.probes._concept_vectors`).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import safetensors
import scipy
import sklearn
from safetensors.numpy import load as load_safetensors, save as save_safetensors

from ..common.files import (
    MAX_ARRAY_BYTES,
    MAX_JSON_BYTES,
    atomic_path,
    check_input_file,
    json_ready,
    naming_write_errors,
    read_input_bytes,
    read_json,
)
from ..numerics import safe_norm, unit_vector
from ._concept_vectors import DEFAULT_LAYER_CONVENTION, ConceptVectors, LinearProbe
from ._raptor import RaptorProbe

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
    """The two files of a save at ``path``: its arrays and its metadata.

    Parameters
    ----------
    path : str or path-like
        The save's path, with either extension or none (``probe``, ``probe.json`` and ``probe.safetensors`` name the
        same save).

    Returns
    -------
    tuple of str
        The ``.safetensors`` path and the ``.json`` path.

    Examples
    --------
    >>> file_pair("out/probe.json")
    ('out/probe.safetensors', 'out/probe.json')
    """
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
    try:  # numpy scalars become numbers; NaN, arrays, non-string keys are refused naming the field
        meta = json_ready(meta, "metadata")
    except ValueError as exc:
        raise ValueError(f"cannot save {js_path!r}: {exc}") from None
    meta["metadata_sha256"] = _metadata_digest(meta)
    text = json.dumps(meta, indent=2, sort_keys=True).encode()
    # One unit: both files are complete on disk before either replaces its target; the metadata (which names the
    # array file's sha256) is the commit point, replaced last.  The array file it replaces is kept as a hard link
    # (``previous_array_file``) until the metadata is in place, so a save that stops between the two renames
    # leaves the old pair loadable (:func:`_read_pair` falls back to it).
    previous = previous_array_file(st_path)
    with atomic_path(js_path, suffix=".json") as js_tmp:
        js_tmp.write_bytes(text)
        with atomic_path(st_path, suffix=".safetensors") as st_tmp:
            st_tmp.write_bytes(blob)
            _keep_previous(st_path, previous)
    previous.unlink(missing_ok=True)
    return st_path, js_path


def previous_array_file(st_path) -> Path:
    """The hidden file beside ``st_path`` that holds the array file being replaced while a pair is saved
    (``.<name>.previous``); it exists only while a save is under way, or after one that was interrupted."""
    st_path = Path(st_path)
    return st_path.parent / f".{st_path.name}.previous"


def _keep_previous(st_path: str, previous: Path) -> None:
    previous.unlink(missing_ok=True)
    if not os.path.isfile(st_path):
        return
    with naming_write_errors(previous):
        try:
            os.link(st_path, previous)
        except OSError:  # a file system without hard links: a copy, created exclusively (never through a link)
            with open(st_path, "rb") as src, open(previous, "xb") as dst:
                shutil.copyfileobj(src, dst)


def _read_pair(path, kind: str) -> tuple[dict, dict]:
    st_path, js_path = file_pair(path)
    for f in (st_path, js_path):
        if not os.path.exists(f):
            raise FileNotFoundError(f"missing file {f!r} (a saved {kind} is a .safetensors + .json pair)")
    check_input_file(js_path, MAX_JSON_BYTES, "metadata file")  # a device or an over-size file: the reader's error
    try:
        meta = read_json(js_path)
    except ValueError as exc:
        raise ValueError(f"corrupt metadata file: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("kind") != kind:
        raise ValueError(f"{js_path!r} is not RAPTOR {kind} metadata (format/kind mismatch)")
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"{js_path!r}: unsupported format_version {meta.get('format_version')!r} "
                         f"(this version reads {list(READABLE_VERSIONS)})")
    if meta["format_version"] >= 2 and meta.get("metadata_sha256") != _metadata_digest(meta):
        raise ValueError(f"{js_path!r} was altered after it was written (metadata checksum mismatch)")
    if meta["format_version"] == 1:
        warnings.warn(f"{js_path!r} is format version 1, whose metadata has no checksum (fields are validated, "
                      "but an edit that keeps them valid is not detected); load and save it again to upgrade",
                      UserWarning, stacklevel=3)
    blob = read_input_bytes(st_path, MAX_ARRAY_BYTES, "array file")
    if hashlib.sha256(blob).hexdigest() != meta.get("sha256"):
        blob = _interrupted_save(st_path, meta, blob)
    if hashlib.sha256(blob).hexdigest() != meta.get("sha256"):
        raise ValueError(f"{st_path!r} does not match its metadata (checksum mismatch: corrupt or from another save)")
    try:
        arrays = load_safetensors(blob)
    except Exception as exc:  # safetensors raises its own error types for damaged headers
        raise ValueError(f"corrupt array file {st_path!r}: {exc}") from None
    return arrays, meta


def _interrupted_save(st_path: str, meta: dict, blob: bytes) -> bytes:
    """The array file of the previous save when a save stopped between its two renames (the metadata still
    names the previous array file), with a warning; otherwise ``blob`` unchanged."""
    previous = previous_array_file(st_path)
    if not previous.is_file():
        return blob
    kept = read_input_bytes(previous, MAX_ARRAY_BYTES, "array file")
    if hashlib.sha256(kept).hexdigest() != meta.get("sha256"):
        return blob
    warnings.warn(f"the last save of {st_path!r} was interrupted before its metadata was written; loaded the "
                  f"previous complete pair (its array file is kept as {str(previous)!r})", UserWarning, stacklevel=4)
    return kept


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
    """Save a fitted :class:`~empirical.probes.RaptorProbe`.

    Other linear probes (the baselines) are saved as concept vectors:
    ``save_concept_vectors(path, ConceptVectors({layer: LinearProbe.from_estimator(probe)}, method=...))``.

    Parameters
    ----------
    path : str or path-like
        Base path; ``<path>.safetensors`` and ``<path>.json`` are written (atomically).
    probe : RaptorProbe
        A fitted probe.
    layer : int, optional
        Layer the probe was fitted on, stored with ``layer_convention``.
    layer_convention : str, default="position in the hidden-state stack (0-based)"
        What ``layer`` counts, stored as text (for stacks from :mod:`empirical.llm._extract`, pass
        :data:`~empirical.probes._concept_vectors.DEFAULT_LAYER_CONVENTION`: layer l = output of decoder block l).
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
    if not isinstance(probe, RaptorProbe):
        raise ValueError(f"save_probe saves a fitted RaptorProbe, got {type(probe).__name__}; save other linear "
                         "probes as concept vectors: save_concept_vectors(path, ConceptVectors({layer: "
                         "LinearProbe.from_estimator(probe)}, method=...))")
    if not hasattr(probe, "coef_"):
        raise ValueError("probe is not fitted (call fit before save_probe)")
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, (int, np.integer))):
        raise ValueError(f"layer must be an integer or None, got {layer!r}")
    if extra is not None and not isinstance(extra, dict):
        raise ValueError(f"extra must be a dict, got {type(extra).__name__}")
    arrays = {k: np.asarray(getattr(probe, k), dtype=np.float64) for k in PROBE_ARRAYS if hasattr(probe, k)}
    arrays["intercept_std_"] = np.array([probe.intercept_std_], dtype=np.float64)
    best = float(probe.best_val_accuracy_)
    meta = dict(kind="probe", estimator=type(probe).__name__,
                params={k: (v if not isinstance(v, np.ndarray) else v.tolist()) for k, v in probe.get_params().items()},
                C=float(probe.C_), **{"lambda": float(probe.lambda_)}, intercept=float(probe.intercept_),
                classes=_jsonable_classes(probe.classes_), n_features=int(probe.n_features_in_),
                best_val_accuracy=best if np.isfinite(best) else None, fallback=bool(probe.fallback_),
                fit_time_s=float(probe.fit_time_), layer=None if layer is None else int(layer),
                layer_convention=layer_convention, seed=probe.random_state, fold_back=probe.fold_back,
                arrays=sorted(arrays), extra=extra or {})
    return _write_pair(path, arrays, meta)


def _field(meta: dict, key: str, where: str, check, requirement: str):
    """``meta[key]`` if present and ``check(value)``; ValueError naming the file, the field and the problem."""
    if key not in meta:
        raise ValueError(f"{where}: metadata field {key!r} is missing")
    value = meta[key]
    try:
        ok = bool(check(value))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{where}: metadata field {key!r} must be {requirement}, got {value!r}")
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_probe_fields(meta: dict, arrays: dict, js_path: str, st_path: str) -> None:
    """Validate every metadata field of a saved probe and its consistency with the arrays."""
    p = _field(meta, "n_features", js_path, lambda v: _is_int(v) and v >= 1, "a positive integer")
    C = _field(meta, "C", js_path, lambda v: _is_number(v) and v > 0, "a finite positive number")
    _field(meta, "lambda", js_path, lambda v: _is_number(v) and abs(v * C - 1) < 1e-9, f"1 / C = {1 / C!r}")
    _field(meta, "intercept", js_path, _is_number, "a finite number")
    _field(meta, "classes", js_path,
           lambda v: isinstance(v, list) and len(v) == 2 and len({json.dumps(c) for c in v}) == 2
           and all(isinstance(c, (str, int, float, bool)) for c in v) and np.unique(v).tolist() == v,
           "two distinct labels in sorted order (a binary probe; classes[1] is the positive class)")
    fallback = _field(meta, "fallback", js_path, lambda v: isinstance(v, bool), "true or false")
    _field(meta, "best_val_accuracy", js_path,
           lambda v: (v is None and fallback) or (_is_number(v) and 0 <= v <= 1),
           "a number in [0, 1] (null only for a fallback probe)")
    _field(meta, "fit_time_s", js_path, lambda v: _is_number(v) and v >= 0, "a non-negative number of seconds")
    _field(meta, "layer", js_path, lambda v: v is None or _is_int(v), "an integer or null")
    _field(meta, "layer_convention", js_path, lambda v: isinstance(v, str), "a string")
    _field(meta, "params", js_path, lambda v: isinstance(v, dict), "an object of RaptorProbe parameters")
    _field(meta, "extra", js_path, lambda v: isinstance(v, dict), "an object")
    _field(meta, "arrays", js_path, lambda v: isinstance(v, list) and sorted(v) == sorted(arrays),
           f"the list of arrays in {st_path!r} ({sorted(arrays)})")
    required = {"coef_", "concept_vector_", "scaler_mean_", "scaler_scale_"}
    if not required <= set(arrays):
        raise ValueError(f"{st_path!r} lacks required arrays {sorted(required - set(arrays))}")
    for k in ("coef_", "concept_vector_", "scaler_mean_", "scaler_scale_", "coef_std_"):
        if k in arrays and arrays[k].shape != (p,):
            raise ValueError(f"{st_path!r}: array {k} has shape {arrays[k].shape}, metadata says n_features={p}")
    for k, array in arrays.items():
        finite = np.isfinite(array) | (np.isnan(array) if k == "path_val_accuracy_" and fallback else False)
        if not np.all(finite):
            raise ValueError(f"{st_path!r}: array {k} has non-finite entries")
    if np.any(arrays["scaler_scale_"] <= 0):
        raise ValueError(f"{st_path!r}: array scaler_scale_ must be positive, got minimum "
                         f"{float(np.min(arrays['scaler_scale_']))!r}")
    v = arrays["concept_vector_"]
    if abs(safe_norm(v) - 1.0) > 1e-9 or abs(abs(float(unit_vector(arrays["coef_"], "coef_") @ v)) - 1.0) > 1e-9:
        cosine = abs(float(unit_vector(arrays["coef_"], "coef_") @ v))
        raise ValueError(f"{st_path!r}: concept_vector_ must be the unit vector of coef_ (up to sign), got norm "
                         f"{safe_norm(v):.12g} and |cosine| {cosine:.12g}")
    if "intercept_std_" in arrays:
        b_std = float(arrays["intercept_std_"][0])
        implied = b_std - float(arrays["coef_"] @ arrays["scaler_mean_"])
        if abs(implied - meta["intercept"]) > 1e-9 * (1.0 + abs(b_std) + abs(implied)):
            raise ValueError(f"{js_path!r}: intercept {meta['intercept']!r} does not match the saved weights "
                             f"(the fold-back gives {implied!r})")


def load_probe(path) -> RaptorProbe:
    """Load and verify a probe saved by :func:`save_probe`.

    Every metadata field is validated (types, ranges, consistency with the arrays) on top of the
    checksums, so an edited, damaged or foreign file raises ``ValueError`` naming it, never loads.

    Parameters
    ----------
    path : str or path-like
        Base path (or either file of the pair).

    Returns
    -------
    RaptorProbe
        Fitted, with ``layer_`` and the saved ``metadata_``.

    Raises
    ------
    ValueError
        Naming the file when either file is missing, damaged, altered or from another save.
    """
    arrays, meta = _read_pair(path, "probe")
    st_path, js_path = file_pair(path)
    _check_probe_fields(meta, arrays, js_path, st_path)
    try:
        probe = RaptorProbe(**dict(meta["params"]))
        probe._validate_params()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{js_path!r}: metadata field 'params' holds invalid RaptorProbe parameters: {exc}") from None
    for k, v in arrays.items():
        setattr(probe, k, v)
    if "path_n_iter_" in arrays:
        probe.path_n_iter_ = arrays["path_n_iter_"].astype(int)
    if "intercept_std_" in arrays:
        probe.intercept_std_ = float(arrays["intercept_std_"][0])
    probe.C_ = float(meta["C"])
    probe.lambda_ = float(meta["lambda"])
    probe.intercept_ = float(meta["intercept"])
    probe.classes_ = np.asarray(meta["classes"])
    probe.n_features_in_ = int(meta["n_features"])
    best = meta["best_val_accuracy"]
    probe.best_val_accuracy_ = float("nan") if best is None else float(best)
    probe.fallback_ = bool(meta["fallback"])
    probe.fit_time_ = float(meta["fit_time_s"])
    probe.layer_ = meta["layer"]
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
            raise ValueError(f"layers must have one index per vector ({directions.shape[0]}), got {len(layers)} layer "
                             "indices")
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
    js_path = file_pair(path)[1]
    layers = _field(meta, "layers", js_path, lambda v: isinstance(v, list) and v and all(map(_is_int, v))
                    and len(set(v)) == len(v) and min(v) >= 0,
                    "a non-empty list of distinct non-negative integer layer indices")
    if meta["format_version"] == 1:
        directions = arrays.get("vectors")
        if directions is None or list(directions.shape) != meta.get("shape"):
            raise ValueError(f"{st_path!r}: concept-vector array missing or its shape does not match the metadata")
        if len(layers) != directions.shape[0]:
            raise ValueError(f"{js_path!r}: metadata field 'layers' has {len(layers)} entries for "
                             f"{directions.shape[0]} vectors")
        convention = meta.get("layer_convention", DEFAULT_LAYER_CONVENTION)
        if not isinstance(convention, str):
            raise ValueError(f"{js_path!r}: metadata field 'layer_convention' must be a string, got {convention!r}")
        extra = meta.get("extra") or {}
        if not isinstance(extra, dict):
            raise ValueError(f"{js_path!r}: metadata field 'extra' must be an object, got {extra!r}")
        try:
            return ConceptVectors.from_directions(dict(zip(layers, directions)), layer_convention=convention,
                                                  metadata=extra)
        except ValueError as exc:
            raise ValueError(f"{st_path!r}: invalid concept vectors: {exc}") from None
    p = _field(meta, "n_features", js_path, lambda v: _is_int(v) and v >= 1, "a positive integer")
    _field(meta, "method", js_path, lambda v: isinstance(v, str) and v, "a method name")
    _field(meta, "model", js_path, lambda v: v is None or isinstance(v, str), "a model name or null")
    _field(meta, "layer_convention", js_path, lambda v: isinstance(v, str), "a string")
    _field(meta, "metadata", js_path, lambda v: isinstance(v, dict), "an object")
    expected = {name: (len(layers), p) for name in ("directions", *CONCEPT_VECTORS)}
    expected.update({name: (len(layers),) for name in CONCEPT_SCALARS})
    if "directions" not in arrays or sorted(arrays) != meta.get("arrays"):
        raise ValueError(f"{st_path!r}: arrays {sorted(arrays)} do not match the metadata's {meta.get('arrays')}")
    for name, array in arrays.items():
        if name not in expected or array.shape != expected[name]:
            raise ValueError(f"{st_path!r}: array {name!r} has shape {array.shape}, expected {expected.get(name)}")
        if name == "directions" and not np.all(np.isfinite(array)):
            raise ValueError(f"{st_path!r}: array 'directions' has non-finite entries")
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
