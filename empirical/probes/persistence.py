"""Save / load fitted RAPTOR probes and concept vectors: safetensors (arrays) + JSON (metadata).

``save_probe(path, probe)`` writes ``<path>.safetensors`` and ``<path>.json`` atomically (temporary
file + ``os.replace``).  The JSON holds the format version, grid, C*, lambda*, intercept, classes,
layer index and its convention, split/seed, fold-back rule, library versions and the SHA-256 of the
array file; loading checks all of them and raises ``ValueError`` on a corrupt or mismatched pair.
"""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from ..files import atomic_write_bytes

__all__ = ["save_probe", "load_probe", "save_concept_vectors", "load_concept_vectors"]

FORMAT = "raptor-probe"
FORMAT_VERSION = 1
_PROBE_ARRAYS = ("coef_", "concept_vector_", "scaler_mean_", "scaler_scale_", "Cs_", "path_val_accuracy_",
                 "path_n_iter_", "coef_std_")


def _paths(path):
    base = os.fspath(path)
    for ext in (".safetensors", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base + ".safetensors", base + ".json"


def _versions():
    import safetensors
    import scipy
    import sklearn

    try:
        from importlib.metadata import version

        raptor = version("raptor-probes")
    except Exception:  # pragma: no cover - not installed
        raptor = "unknown"
    return {"raptor-probes": raptor, "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__, "safetensors": safetensors.__version__}


def _write_pair(path, arrays, meta):
    from safetensors.numpy import save

    st_path, js_path = _paths(path)
    blob = save({k: np.ascontiguousarray(v) for k, v in arrays.items()})
    meta = dict(meta, sha256=hashlib.sha256(blob).hexdigest(), versions=_versions())
    atomic_write_bytes(st_path, blob)
    atomic_write_bytes(js_path, json.dumps(meta, indent=2, sort_keys=True).encode())
    return st_path, js_path


def _read_pair(path, kind):
    from safetensors.numpy import load

    st_path, js_path = _paths(path)
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
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"unsupported format_version {meta.get('format_version')!r} (expected {FORMAT_VERSION})")
    with open(st_path, "rb") as f:
        blob = f.read()
    if hashlib.sha256(blob).hexdigest() != meta.get("sha256"):
        raise ValueError(f"{st_path!r} does not match its metadata (checksum mismatch: corrupt or from another save)")
    try:
        arrays = load(blob)
    except Exception as exc:
        raise ValueError(f"corrupt array file {st_path!r}: {exc}") from None
    return arrays, meta


def _jsonable_classes(classes):
    out = []
    for c in np.asarray(classes).tolist():
        if not isinstance(c, (str, int, float, bool)):
            raise ValueError(f"class label {c!r} cannot be stored in JSON")
        out.append(c)
    return out


def save_probe(path, probe, *, layer=None, layer_convention="position in the hidden-state stack (0-based)",
               extra=None):
    """Save a fitted :class:`empirical.RaptorProbe`. Returns the (safetensors, json) paths."""
    if not hasattr(probe, "coef_"):
        raise ValueError("probe is not fitted")
    arrays = {k: np.asarray(getattr(probe, k), dtype=np.float64) for k in _PROBE_ARRAYS if hasattr(probe, k)}
    meta = dict(format=FORMAT, format_version=FORMAT_VERSION, kind="probe", estimator=type(probe).__name__,
                params={k: (v if not isinstance(v, np.ndarray) else v.tolist()) for k, v in probe.get_params().items()},
                C=float(probe.C_), **{"lambda": float(probe.lambda_)}, intercept=float(probe.intercept_),
                classes=_jsonable_classes(probe.classes_), n_features=int(probe.n_features_in_),
                best_val_accuracy=float(probe.best_val_accuracy_), fallback=bool(probe.fallback_),
                fit_time_s=float(probe.fit_time_), layer=layer, layer_convention=layer_convention,
                seed=probe.random_state, fold_back=probe.fold_back, arrays=sorted(arrays),
                extra=extra or {})
    return _write_pair(path, arrays, meta)


def load_probe(path):
    """Load a probe saved by :func:`save_probe` (validated) as a fitted :class:`empirical.RaptorProbe`."""
    from .raptor import RaptorProbe

    arrays, meta = _read_pair(path, "probe")
    missing = [k for k in meta.get("arrays", []) if k not in arrays]
    if missing or not {"coef_", "scaler_mean_", "scaler_scale_"} <= set(arrays):
        raise ValueError(f"array file lacks required arrays {missing or ['coef_', 'scaler_mean_', 'scaler_scale_']}")
    p = int(meta["n_features"])
    for k in ("coef_", "concept_vector_", "scaler_mean_", "scaler_scale_", "coef_std_"):
        if k in arrays and arrays[k].shape != (p,):
            raise ValueError(f"array {k} has shape {arrays[k].shape}, metadata says n_features={p}")
    params = dict(meta["params"])
    probe = RaptorProbe(**params)
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


def save_concept_vectors(path, vectors, *, layers=None, layer_convention="position in the hidden-state stack "
                         "(0-based)", extra=None):
    """Save concept vectors (L, p) (unit rows recommended) with their layer indices."""
    V = np.asarray(vectors, dtype=np.float64)
    if V.ndim == 1:
        V = V[None]
    if V.ndim != 2 or not np.all(np.isfinite(V)):
        raise ValueError(f"vectors must be a finite (L, p) array; got shape {V.shape}")
    layers = list(range(V.shape[0])) if layers is None else [int(x) for x in layers]
    if len(layers) != V.shape[0]:
        raise ValueError(f"{len(layers)} layer indices for {V.shape[0]} vectors")
    meta = dict(format=FORMAT, format_version=FORMAT_VERSION, kind="concept_vectors", shape=list(V.shape),
                layers=layers, layer_convention=layer_convention, extra=extra or {})
    return _write_pair(path, {"vectors": V}, meta)


def load_concept_vectors(path):
    """Return (vectors (L, p), metadata dict)."""
    arrays, meta = _read_pair(path, "concept_vectors")
    V = arrays.get("vectors")
    if V is None or list(V.shape) != meta.get("shape"):
        raise ValueError("concept-vector array missing or its shape does not match the metadata")
    return V, meta
