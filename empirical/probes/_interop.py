"""Concept vectors in the formats other steering tools read: llama.cpp control vectors (GGUF) and plain
safetensors ``{block index: direction}`` files (repeng, steering-vectors).

Layer numbering
---------------
RAPTOR's layer ``l`` is the output of decoder block ``l`` (1-based; 0 = token embeddings).  The other
tools number the *block whose output is edited*, 0-based:

* llama.cpp (``--control-vector``): tensor ``direction.N`` (F32, 1-D, ``N >= 1``) is added to the
  output of its block ``N`` (0-based): its loader stores ``direction.N`` at row ``N - 1`` of a buffer
  whose row ``il - 1`` its applier adds after block ``il`` (``common_control_vector_load_one`` in
  ``common/common.cpp``, ``llama_adapter_cvec::apply`` in ``src/llama-adapter.cpp``). Block 0 cannot be
  addressed.  So **RAPTOR layer l  <->  direction.(l - 1)**, and layer 1 cannot be exported.
* repeng (``ControlVector.directions``) and steering-vectors (``SteeringVector.layer_activations`` with
  ``layer_type="decoder_block"``) use the same 0-based block index: **RAPTOR layer l <-> key l - 1**.
  repeng's own GGUF export writes ``direction.{key}``, which is why the two agree.

Scale
-----
A RAPTOR concept vector is a unit vector in raw hidden-state units.  ``scale`` multiplies it on export:
llama.cpp adds ``strength * direction.N`` (``--control-vector-scaled FILE STRENGTH``) to the residual
stream, so ``scale * strength`` is the steering strength ``alpha`` of
:func:`empirical.llm.additive_steering` (hidden-state units along the unit vector).  Its sign
is the concept's: a positive strength moves towards the positive class.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_safetensors, save as save_safetensors

from ..common.arrays import check_magnitude
from ..common.files import MAX_ARRAY_BYTES, atomic_path, atomic_write_bytes, check_input_file, read_input_bytes
from ..numerics import safe_norm
from ._concept_vectors import DEFAULT_LAYER_CONVENTION, ConceptVectors

__all__ = ["export_control_vector", "import_control_vector", "export_directions", "import_directions",
           "BLOCK_INDEX_CONVENTION"]

#: what the 0-based block index of llama.cpp, repeng and steering-vectors means in RAPTOR's terms
BLOCK_INDEX_CONVENTION = "0-based index of the decoder block whose output is edited (= RAPTOR layer - 1)"
ARCH = "controlvector"


def _scaled_directions(vectors: ConceptVectors, scale, layers) -> dict:
    """``{RAPTOR layer: scale * unit direction}`` (float32) for the exported layers."""
    if not isinstance(vectors, ConceptVectors):
        raise ValueError(f"vectors must be ConceptVectors, got {type(vectors).__name__}")
    chosen = vectors.layers if layers is None else [int(layer) for layer in layers]
    if not chosen:
        raise ValueError("nothing to export: no layer selected (an artefact with no direction is refused)")
    missing = sorted(set(chosen) - set(vectors.layers))
    if missing:
        raise ValueError(f"layers {missing} are not in the concept vectors (layers {vectors.layers})")
    if isinstance(scale, Mapping):
        factors = {layer: float(scale[layer]) if layer in scale else None for layer in chosen}
        absent = [layer for layer, factor in factors.items() if factor is None]
        if absent:
            raise ValueError(f"scale has no factor for layers {absent}")
    else:
        factors = {layer: float(scale) for layer in chosen}
    bad = {layer: factor for layer, factor in factors.items() if not np.isfinite(factor) or factor == 0}
    if bad:
        raise ValueError(f"scale must be finite and non-zero, got {bad}")
    out = {}
    for layer in chosen:
        vector = factors[layer] * vectors[layer].direction
        check_magnitude(vector, f"scale * direction of layer {layer}")
        out[layer] = vector.astype(np.float32)
    return out


def export_control_vector(path, vectors: ConceptVectors, *, scale=1.0, layers=None, model_hint: str | None = None):
    """Write concept vectors as a llama.cpp control vector (GGUF, the format repeng writes).

    Parameters
    ----------
    path : str or path-like
        The ``.gguf`` file to write (atomically).
    vectors : ConceptVectors
        One concept vector per RAPTOR layer (layer l = output of decoder block l).
    scale : float or mapping of int to float, default 1.0
        Factor per exported direction (see the module docstring): ``direction.(l-1) = scale * unit vector``.
    layers : iterable of int, optional
        RAPTOR layers to export (default all). Layer 1 and below cannot be expressed (llama.cpp has no
        ``direction.0``) and are an error.
    model_hint : str, optional
        ``controlvector.model_hint`` (repeng stores the model type there; llama.cpp ignores it). Default:
        ``vectors.model`` or ``"unknown"``.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from empirical.probes import ConceptVectors, LinearProbe
    >>> cv = ConceptVectors.from_directions({3: [1.0, 0.0], 4: [0.0, 2.0]}, model="tiny")
    >>> path = export_control_vector(Path(tempfile.mkdtemp()) / "concept.gguf", cv, scale=4.0)
    >>> back = import_control_vector(path)
    >>> back.layers, back.metadata["scale"]
    ([3, 4], {'3': 4.0, '4': 4.0})
    """
    import gguf  # the [llm] extra

    directions = _scaled_directions(vectors, scale, layers)
    unaddressable = [layer for layer in directions if layer < 2]
    if unaddressable:
        raise ValueError(f"RAPTOR layers {unaddressable} cannot be exported to llama.cpp: layer l maps to "
                         "direction.(l-1) and llama.cpp has no direction.0 (pass layers=... without them)")
    with atomic_path(path, suffix=".gguf") as tmp:
        writer = gguf.GGUFWriter(str(tmp), ARCH)
        writer.add_string(f"{ARCH}.model_hint", model_hint or vectors.model or "unknown")
        writer.add_uint32(f"{ARCH}.layer_count", len(directions))
        writer.add_string("raptor.method", vectors.method)
        writer.add_string("raptor.layer_convention", "direction.N edits the output of 0-based block N "
                          "= RAPTOR layer N + 1 (" + vectors.layer_convention + ")")
        for layer, vector in directions.items():
            writer.add_tensor(f"direction.{layer - 1}", vector)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return Path(path)


def _field_text(reader, name: str) -> str | None:
    field = reader.get_field(name)
    if field is None or not len(field.parts):
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")


def _block_index(text: str) -> int | None:
    """``int(text)`` for a canonical block index (ASCII digits, no leading zero), else None: ``"01"`` or a
    non-ASCII digit such as ``"١"`` would name the same block as ``"1"`` and one tensor would silently replace
    the other."""
    return int(text) if re.fullmatch(r"0|[1-9][0-9]*", text, flags=re.ASCII) else None


def _float_vector(path, name: str, data: np.ndarray, stored: str | None = None) -> np.ndarray:
    """The one dtype rule of both importers: a 1-D tensor of a floating dtype, as float64; otherwise a
    ``ValueError`` naming the file, the tensor and its dtype (bool, integer or quantized data is not a
    direction)."""
    if not np.issubdtype(data.dtype, np.floating) or (stored is not None and stored not in ("F32", "F16", "F64")):
        raise ValueError(f"{str(path)!r}: tensor {name!r} must be a 1-D floating-point vector, got dtype "
                         f"{stored or data.dtype}")
    if data.ndim != 1:
        raise ValueError(f"{str(path)!r}: tensor {name!r} must be a 1-D floating-point vector, got shape {data.shape}")
    return data.astype(np.float64)


def import_control_vector(path) -> ConceptVectors:
    """Read a llama.cpp / repeng control vector (GGUF) as bare concept directions.

    ``direction.N`` becomes RAPTOR layer ``N + 1``; each is normalized to a unit vector, its norm kept
    in ``metadata["scale"]`` (keyed by layer, as text) so :func:`export_control_vector` can write it back.

    Parameters
    ----------
    path : str or path-like
        The ``.gguf`` file.

    Returns
    -------
    ConceptVectors
        Directions only (``coef`` None): enough to compare with RAPTOR's vectors, export or steer
        additively, not for GCAV (which needs a probe's logit).

    Raises
    ------
    ValueError
        Naming the file when it is not a readable GGUF control vector (no ``direction.N`` tensors, a
        non-floating or non-1-D tensor, ``N < 1``, mixed sizes).
    """
    import gguf  # the [llm] extra

    check_input_file(path, MAX_ARRAY_BYTES, "control-vector file")  # the one reader's check (gguf maps the file)
    try:
        reader = gguf.GGUFReader(str(path))
    except FileNotFoundError:
        raise
    except Exception as exc:  # gguf raises ValueError, struct.error, IndexError ... on damaged files
        raise ValueError(f"{str(path)!r} is not a readable GGUF file ({type(exc).__name__}: {exc})") from None
    arch = _field_text(reader, "general.architecture")
    if arch != ARCH:
        raise ValueError(f"{str(path)!r} is not a control vector (general.architecture is {arch!r}, "
                         f"expected {ARCH!r})")
    directions, scales = {}, {}
    for tensor in reader.tensors:
        prefix, _, index = tensor.name.partition(".")
        if prefix != "direction":
            continue
        if _block_index(index) is None or int(index) < 1:
            raise ValueError(f"{str(path)!r}: tensor {tensor.name!r} is not direction.N with N >= 1 (ASCII digits, "
                             "no leading zero)")
        if int(index) + 1 in directions:
            raise ValueError(f"{str(path)!r}: tensor {tensor.name!r} appears twice")
        vector = _float_vector(path, tensor.name, np.asarray(tensor.data), tensor.tensor_type.name)
        layer = int(index) + 1
        norm = safe_norm(vector)
        if not np.all(np.isfinite(vector)) or norm == 0:
            raise ValueError(f"{str(path)!r}: tensor {tensor.name!r} is zero or not finite")
        directions[layer] = vector
        scales[str(layer)] = norm
    if not directions:
        raise ValueError(f"{str(path)!r} holds no direction.N tensor")
    sizes = {v.size for v in directions.values()}
    if len(sizes) != 1:
        raise ValueError(f"{str(path)!r}: direction tensors differ in size {sorted(sizes)}")
    return ConceptVectors.from_directions(
        directions, method=_field_text(reader, "raptor.method") or "control-vector",
        model=_field_text(reader, f"{ARCH}.model_hint"), layer_convention=DEFAULT_LAYER_CONVENTION,
        metadata={"source": "llama.cpp control vector", "scale": scales})


def export_directions(path, vectors: ConceptVectors, *, scale=1.0, layers=None):
    """Write ``{block index: scale * direction}`` as a plain safetensors file (float32), keys ``"l-1"`` as text.

    One line turns it into the other libraries' objects (layer keys are 0-based block indices, which is
    what both use)::

        from safetensors.numpy import load_file
        directions = {int(k): v for k, v in load_file(path).items()}
        repeng.ControlVector(model_type="llama", directions=directions)
        steering_vectors.SteeringVector({k: torch.tensor(v) for k, v in directions.items()}, "decoder_block")

    The header's ``__metadata__`` records the convention, method and model.

    Parameters
    ----------
    path : str or path-like
        The ``.safetensors`` file to write (atomically).
    vectors : ConceptVectors
        One concept vector per RAPTOR layer (layer l = output of decoder block l, written under key
        ``"l-1"``).
    scale, layers
        As for :func:`export_control_vector` (layer 1 is fine here: block index 0; layer 0 is an error).

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from empirical.probes import ConceptVectors
    >>> cv = ConceptVectors.from_directions({1: [1.0, 0.0], 2: [0.0, 2.0]})
    >>> back = import_directions(export_directions(Path(tempfile.mkdtemp()) / "d.safetensors", cv))
    >>> back.layers, back.directions[2].tolist()
    ([1, 2], [0.0, 1.0])
    """
    directions = _scaled_directions(vectors, scale, layers)
    unaddressable = [layer for layer in directions if layer < 1]
    if unaddressable:
        raise ValueError("RAPTOR layer 0 (the embeddings) is not the output of a block and cannot be exported")
    metadata = {"format": "raptor-directions", "layer_convention": BLOCK_INDEX_CONVENTION,
                "method": vectors.method, "model": vectors.model or "", "scale": json.dumps(
                    scale if not isinstance(scale, Mapping) else {str(k): float(v) for k, v in scale.items()})}
    blob = save_safetensors({str(layer - 1): vector for layer, vector in directions.items()}, metadata=metadata)
    return atomic_write_bytes(path, blob)


def import_directions(path) -> ConceptVectors:
    """Read a ``{block index: direction}`` safetensors file (ours, or one made from a repeng /
    steering-vectors object) as bare concept directions: key ``k`` becomes RAPTOR layer ``k + 1``.

    Parameters
    ----------
    path : str or path-like
        The ``.safetensors`` file.

    Returns
    -------
    ConceptVectors
        Directions only (``coef`` None), each normalised to a unit vector (the norms are not kept), method
        ``"imported"``, ``metadata["source"]`` the path.

    Raises
    ------
    ValueError
        Naming the file when it is not safetensors, a key is not a block index, or a tensor is not a
        finite non-zero vector of the common size.
    """
    blob = read_input_bytes(path, MAX_ARRAY_BYTES, "directions file")  # the one reader (regular file, capped)
    try:
        arrays = load_safetensors(blob)
    except (SafetensorError, ValueError) as exc:
        raise ValueError(f"{str(path)!r} is not a readable safetensors file ({exc})") from None
    directions = {}
    for key, array in arrays.items():
        if _block_index(key) is None:
            raise ValueError(f"{str(path)!r}: key {key!r} is not a 0-based block index (ASCII digits, no leading zero: "
                             "'01' and '1' would be the same block)")
        vector = _float_vector(path, key, np.asarray(array))
        if vector.ndim != 1 or not np.all(np.isfinite(vector)) or not np.any(vector):
            raise ValueError(f"{str(path)!r}: tensor {key!r} must be a finite non-zero 1-D vector, got shape "
                             f"{vector.shape}")
        directions[int(key) + 1] = vector
    if not directions:
        raise ValueError(f"{str(path)!r} holds no direction")
    try:
        return ConceptVectors.from_directions(directions, method="imported", layer_convention=DEFAULT_LAYER_CONVENTION,
                                              metadata={"source": str(path)})
    except ValueError as exc:
        raise ValueError(f"{str(path)!r}: {exc}") from None
