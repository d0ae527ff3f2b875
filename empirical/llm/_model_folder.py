"""A local model folder is one trust unit: checked before transformers allocates or reads anything.

:func:`check_model_folder` (called by :func:`empirical.llm.load_model` for a local directory):

- every file a load may read (the folder's entries, followed through symbolic links, and every shard a
  ``*.index.json`` names) resolves inside the folder -- for a hub snapshot folder
  (``models--org--name/snapshots/<rev>``), inside its ``models--org--name`` repository, where the snapshot's links
  point -- or it is refused naming the file;
- the config's size fields (layers, hidden size, heads, vocabulary, ...) are integers within :data:`CONFIG_BOUNDS`,
  and the hidden size is a multiple of the heads when the config gives no ``head_dim``;
- the parameters the config asks for fit its weight files' size (:data:`PARAMS_PER_WEIGHT_BYTE`);
- the config agrees with the safetensors headers of the weights the load reads (layer count, hidden size,
  vocabulary, attention heads, positions), read without loading a tensor: a 4 KB edit of ``config.json`` can no
  longer make the load build a million random blocks next to weights for three.

Every refusal is one ``ValueError`` naming the file (and the config field).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..common.files import MAX_JSON_BYTES, MAX_MODEL_FILE_BYTES, check_input_file, open_input, read_json

__all__ = ["CONFIG_BOUNDS", "check_model_folder", "load_files", "safetensors_header"]

#: The largest value each size field of a model config may ask for (well above any published model; a config
#: beyond is refused before anything is allocated).  Each entry: field names (the aliases of model families), bound.
CONFIG_BOUNDS = {
    "layers": (("num_hidden_layers", "n_layer", "num_layers"), 1024),
    "hidden": (("hidden_size", "n_embd", "d_model"), 131072),
    "heads": (("num_attention_heads", "n_head"), 4096),
    "kv_heads": (("num_key_value_heads",), 4096),
    "head_dim": (("head_dim",), 16384),
    "vocab": (("vocab_size",), 1 << 22),
    "intermediate": (("intermediate_size", "n_inner", "ffn_dim"), 1 << 20),
    "positions": (("max_position_embeddings", "n_positions"), 1 << 24),
}

#: Weight files transformers reads, in its order of preference, and the index files that name shards.
_SAFETENSORS, _SAFETENSORS_INDEX = "model.safetensors", "model.safetensors.index.json"
_BIN, _BIN_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
_LAYER = re.compile(r"^(.*?)\.(?:layers|h|layer|blocks|block)\.(\d+)\.")
_EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")
_POSITIONS = ("wpe.weight", "position_embeddings.weight")


def _trust_root(folder: Path) -> Path:
    """The folder itself, or for a hub snapshot the repository folder its links point into."""
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent
    return folder


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def _refuse_outside(path: Path, root: Path, named_by: str | None = None) -> None:
    if not _inside(path, root):
        by = f" (named by {named_by})" if named_by else ""
        raise ValueError(f"model file {str(path)!r}{by} resolves outside the model folder {str(root)!r} (to "
                         f"{str(path.resolve())!r}); every file a model load reads must lie inside its folder")


def _index_shards(folder: Path, root: Path, index_name: str) -> list:
    """The shard paths ``folder/index_name`` names, each checked to lie inside ``root``; [] when there is no index."""
    index = folder / index_name
    if not index.exists():
        return []
    doc = read_json(index, "weights index")
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(v, str) and v for v in wmap.values()):
        raise ValueError(f"weights index {str(index)!r} is damaged: its 'weight_map' is not a mapping of tensor "
                         "names to shard file names")
    shards = []
    for name in sorted(set(wmap.values())):
        shard = folder / name
        if Path(name).is_absolute():
            raise ValueError(f"weights index {str(index)!r} names the shard {name!r}, an absolute path; shards "
                             "must lie inside the model folder")
        _refuse_outside(shard, root, named_by=repr(str(index)))
        shards.append(shard)
    return shards


def load_files(folder) -> list:
    """Every shard the folder's ``*.index.json`` files name (checked to lie inside the folder), as paths relative to
    the folder; with the folder's own files, what a load reads (used by the cache identity).

    Parameters
    ----------
    folder : str or path-like
        A model directory.

    Returns
    -------
    list of str
        The shards' paths relative to ``folder``, sorted; ``ValueError`` naming the index for one outside it.
    """
    folder = Path(folder)
    root = _trust_root(folder.resolve())
    rel = set()
    for index in sorted(folder.glob("*.index.json")):
        for shard in _index_shards(folder, root, index.name):
            rel.add(os.path.relpath(shard, folder))
    return sorted(rel)


def safetensors_header(path) -> dict:
    """The JSON header of a safetensors file (its 8-byte length, then the header; no tensor is read), checked
    complete: ``ValueError`` naming ``path`` when the header cannot be read or the tensors it lists end past the end
    of the file.

    Parameters
    ----------
    path : str or path-like
        A safetensors file.

    Returns
    -------
    dict
        The header: tensor name -> ``{"dtype", "shape", "data_offsets"}`` (and ``"__metadata__"``).
    """
    path = Path(path)
    size = check_input_file(path, MAX_MODEL_FILE_BYTES, "weights file").stat().st_size
    try:
        with open_input(path, MAX_MODEL_FILE_BYTES, "weights file") as f:
            n = int.from_bytes(f.read(8), "little") if size >= 8 else -1
            if not 2 <= n <= min(size - 8, MAX_JSON_BYTES):
                raise ValueError("the header length is outside the file (or over the JSON cap)")
            header = json.loads(f.read(n))
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
        raise ValueError(f"weights file {str(path)!r} is damaged: "
                         f"its safetensors header cannot be read ({exc})") from None
    if 8 + n + end != size:
        raise ValueError(f"weights file {str(path)!r} is truncated or damaged: its header lists {8 + n + end} bytes, "
                         f"the file has {size}")
    return header


def _field(config: dict, key: str):
    """``(name, value)``: the first alias of size field ``key`` that the config sets (not null), or ``(None, None)``.
    """
    for name in CONFIG_BOUNDS[key][0]:
        if config.get(name) is not None:
            return name, config[name]
    return None, None


def _check_fields(config: dict, cfg_path: Path, where: str = "") -> dict:
    """The config's size fields, checked integers within :data:`CONFIG_BOUNDS`: ``{key: (name, value)}``."""
    found = {}
    for key, (_names, bound) in CONFIG_BOUNDS.items():
        name, value = _field(config, key)
        if name is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= bound:
            raise ValueError(f"model config {str(cfg_path)!r}: {where}{name} = {value!r} is not an integer in "
                             f"[1, {bound}]")
        found[key] = (name, value)
    if "hidden" in found and "heads" in found and "head_dim" not in found and found["hidden"][1] % found["heads"][1]:
        raise ValueError(f"model config {str(cfg_path)!r}: {where}{found['hidden'][0]} = {found['hidden'][1]} is not "
                         f"a multiple of {found['heads'][0]} = {found['heads'][1]} (and no head_dim is given)")
    if "heads" in found and "kv_heads" in found and found["heads"][1] % found["kv_heads"][1]:
        raise ValueError(f"model config {str(cfg_path)!r}: {where}{found['heads'][0]} = {found['heads'][1]} is not a "
                         f"multiple of num_key_value_heads = {found['kv_heads'][1]}")
    return found


def _weights_read(folder: Path, root: Path) -> list:
    """The safetensors files the load reads (transformers' preference: the single file, then the index's shards)."""
    if (folder / _SAFETENSORS).exists():
        return [folder / _SAFETENSORS]
    return [s for s in _index_shards(folder, root, _SAFETENSORS_INDEX) if s.suffix == ".safetensors"]


def _check_against_weights(found: dict, config: dict, cfg_path: Path, weights: list) -> None:
    """Refuse a config whose size fields disagree with the tensors the weights' headers list."""
    shapes, dtypes = {}, {}
    for w in weights:
        for name, t in safetensors_header(w).items():
            if name != "__metadata__" and isinstance(t, dict):
                shapes[name], dtypes[name] = t.get("shape"), t.get("dtype")
    if not shapes:
        return
    names = ", ".join(w.name for w in weights[:3]) + (", ..." if len(weights) > 3 else "")

    def refuse(field, value, what):
        raise ValueError(f"model config {str(cfg_path)!r}: {field} = {value} does not match the weights ({names}), "
                         f"which {what}")

    groups = {}
    for name in shapes:
        m = _LAYER.match(name)
        if m:
            groups.setdefault(m.group(1), set()).add(int(m.group(2)))
    if "layers" in found and groups:
        field, value = found["layers"]
        extra = sum(v for k in ("num_nextn_predict_layers", "mtp_num_hidden_layers")
                    if isinstance(v := config.get(k), int) and not isinstance(v, bool) and v > 0)
        counts = sorted({len(ix) for ix in groups.values()})
        if not any(value <= c <= value + extra for c in counts):
            refuse(field, value, f"hold {' or '.join(map(str, counts))} layers")
    if config.get("quantization_config") is not None:
        return  # packed shapes: only the layer count is comparable

    def shape_of(suffixes, layer0=False):
        hits = [n for n in shapes if n.endswith(suffixes) and dtypes[n] in _FLOAT_DTYPES
                and isinstance(shapes[n], list) and len(shapes[n]) == 2 and (not layer0 or ".0." in n)]
        return (hits[0], shapes[hits[0]]) if len(hits) == 1 else (None, None)

    emb, eshape = shape_of(_EMBEDDINGS)
    if emb is not None:
        if "vocab" in found and found["vocab"][1] != eshape[0]:
            refuse(*found["vocab"], f"embed {eshape[0]} tokens ({emb} has shape {eshape})")
        if "hidden" in found and found["hidden"][1] != eshape[1]:
            refuse(*found["hidden"], f"have hidden size {eshape[1]} ({emb} has shape {eshape})")
    pos, pshape = shape_of(_POSITIONS)
    if pos is not None and "positions" in found and found["positions"][1] != pshape[0]:
        refuse(*found["positions"], f"embed {pshape[0]} positions ({pos} has shape {pshape})")
    if "heads" in found and "hidden" in found and len(groups) == 1:
        head_dim = found["head_dim"][1] if "head_dim" in found else found["hidden"][1] // found["heads"][1]
        q, qshape = shape_of("self_attn.q_proj.weight", layer0=True)
        if q is not None and qshape[0] != found["heads"][1] * head_dim:
            refuse(*found["heads"], f"project queries to {qshape[0]} = heads x head_dim, not "
                                    f"{found['heads'][1]} x {head_dim} ({q} has shape {qshape})")
        k, kshape = shape_of("self_attn.k_proj.weight", layer0=True)
        if k is not None and "kv_heads" in found and kshape[0] != found["kv_heads"][1] * head_dim:
            refuse(*found["kv_heads"], f"project keys to {kshape[0]}, not {found['kv_heads'][1]} x {head_dim} "
                                       f"({k} has shape {kshape})")


#: A config may ask for at most this many parameters per byte of its weight files (plus
#: :data:`PARAMS_SLACK`): 4-bit weights hold 2 parameters a byte; the estimate of :func:`_param_estimate` is rough.
PARAMS_PER_WEIGHT_BYTE = 16
PARAMS_SLACK = 10**6


def _param_estimate(found: dict) -> int:
    """About how many parameters the config asks for: blocks (attention 4 H^2, MLP 3 H I) and embeddings (2 V H)."""
    hidden = found.get("hidden", (None, 0))[1]
    inter = found.get("intermediate", (None, 4 * hidden))[1]
    layers = found.get("layers", (None, 1))[1]
    vocab = found.get("vocab", (None, 0))[1]
    positions = found.get("positions", (None, 0))[1]
    return layers * (4 * hidden * hidden + 3 * hidden * inter) + 2 * vocab * hidden + positions * hidden


def _check_size(found: dict, cfg_path: Path, folder: Path, root: Path) -> None:
    """Refuse a config that asks for far more parameters than its weight files can hold (also for ``.bin`` weights,
    whose headers cannot be read without unpickling)."""
    files = {f for f in folder.iterdir() if f.suffix in (".safetensors", ".bin") and f.is_file()}
    for index in (_SAFETENSORS_INDEX, _BIN_INDEX):
        files.update(s for s in _index_shards(folder, root, index) if s.is_file())
    size = sum(f.stat().st_size for f in files)
    if not size:
        return  # no weights: transformers refuses the folder before building anything
    estimate = _param_estimate(found)
    if estimate > PARAMS_PER_WEIGHT_BYTE * size + PARAMS_SLACK:
        fields = ", ".join(f"{name} = {value}" for key in ("layers", "hidden", "intermediate", "vocab", "positions")
                           if key in found for name, value in [found[key]])
        raise ValueError(f"model config {str(cfg_path)!r}: {fields} ask for about {estimate:.3g} parameters, more than "
                         f"its weight files ({size} bytes) can hold")


def check_model_folder(folder) -> None:
    """Check a local model folder before any load (see the module doc); ``ValueError`` naming the file and field.

    Parameters
    ----------
    folder : str or path-like
        A directory holding ``config.json``.
    """
    folder = Path(folder)
    root = _trust_root(folder.resolve())
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + dirnames:
            _refuse_outside(Path(dirpath) / name, root)
    for index in sorted(folder.glob("*.index.json")):
        _index_shards(folder, root, index.name)
    cfg_path = folder / "config.json"
    config = read_json(cfg_path, "model config")
    if not isinstance(config, dict):
        raise ValueError(f"model config {str(cfg_path)!r} is not a JSON object")
    found = _check_fields(config, cfg_path)
    for sub in ("text_config", "vision_config", "audio_config", "encoder", "decoder"):
        if isinstance(config.get(sub), dict):
            _check_fields(config[sub], cfg_path, f"{sub}.")
    for weights in sorted(folder.glob("*.safetensors")):
        safetensors_header(weights)
    _check_against_weights(found, config, cfg_path, _weights_read(folder, root))
    _check_size(found, cfg_path, folder, root)
