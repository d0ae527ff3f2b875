"""Decoder-block lookup and forward hooks shared by extraction and steering.

Layer convention (the whole package uses it): layer ``l`` in ``1..L`` is the output of decoder
block ``l`` (1-based), i.e. the residual stream after that block and *before* any final norm;
layer 0 is the input of block 1 (the embeddings, scaled as the architecture does, e.g. Gemma's
sqrt(d) factor). Encoders (BERT family) follow the same rule with their encoder blocks: layer ``l``
is the output of encoder block ``l`` (after its output LayerNorm), layer 0 the embedding output. With transformers 5.x
this equals ``output_hidden_states[l]`` for ``l < L`` while
``hidden_states[L]`` is the *final-normed* state (``capture_outputs(tie_last_hidden_states=True)``),
so we read block outputs through hooks instead of ``output_hidden_states``.
"""
from __future__ import annotations

import inspect

import torch

#: The API: the layer convention and the block registry (the other functions are the package's internals: tensor
#: plumbing of the hooks, devices, position limits)
__all__ = ["LAYER_CONVENTION", "ENCODER_TYPES", "num_layers", "decoder_blocks", "register_block_path",
           "unregister_block_path", "block_paths", "register_encoder_type", "unregister_encoder_type", "config_kind",
           "HookSet"]

LAYER_CONVENTION = "block-output-v1"  # part of every cache key

_BLOCK_PATHS = (
    "model.layers",  # Llama, Qwen2, Gemma, Mistral, Phi3 (CausalLM wrapper)
    "layers",  # the same, on the base model
    "transformer.h",  # GPT-2, GPT-J, Falcon, Bloom
    "h",
    "gpt_neox.layers",
    "model.decoder.layers",  # OPT
    "decoder.layers",
    "model.language_model.layers",  # Gemma3 / multimodal wrappers
    "language_model.layers",
    "encoder.layer",  # BERT, RoBERTa, ELECTRA, DeBERTa (base encoder)
    "bert.encoder.layer",  # the same inside a task-head wrapper
    "roberta.encoder.layer",
    "transformer.layer",  # DistilBERT
)
#: paths added by :func:`register_block_path` (a family this package does not know), tried first
_REGISTERED_PATHS: list = []

#: ``config.model_type`` of the encoder-only families this package knows (bidirectional attention: no prefix
#: sharing, no steering); :func:`register_encoder_type` adds one
ENCODER_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "distilbert", "electra", "deberta", "deberta-v2",
                           "mpnet", "albert", "camembert", "modernbert", "nomic_bert"})
#: encoder families added by :func:`register_encoder_type`
_REGISTERED_ENCODERS: set = set()
_CAUSAL_ARCHITECTURES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def register_encoder_type(model_type: str) -> None:
    """Teach :func:`config_kind` that the family ``config.model_type == model_type`` is an encoder (bidirectional
    attention): extraction and probes work on it, steering and generation refuse it.

    Parameters
    ----------
    model_type : str
        The family's ``config.model_type`` (non-blank).

    Raises
    ------
    ValueError
        ``model_type`` is not a non-blank string.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> register_encoder_type("my-encoder")
    >>> config_kind(SimpleNamespace(model_type="my-encoder"))
    'encoder'
    >>> unregister_encoder_type("my-encoder")
    """
    if not isinstance(model_type, str) or not model_type.strip():
        raise ValueError(f"model_type must be a non-blank string such as 'bert', got {model_type!r}")
    _REGISTERED_ENCODERS.add(model_type)


def unregister_encoder_type(model_type: str) -> None:
    """Remove a family added by :func:`register_encoder_type` (the built-in :data:`ENCODER_TYPES` stay).

    Parameters
    ----------
    model_type : str
        A registered ``model_type``.

    Raises
    ------
    ValueError
        ``model_type`` was not registered.
    """
    if model_type not in _REGISTERED_ENCODERS:
        raise ValueError(f"model_type {model_type!r} is not registered; registered: {sorted(_REGISTERED_ENCODERS)}")
    _REGISTERED_ENCODERS.discard(model_type)


def config_kind(config) -> str:
    """``"decoder"`` or ``"encoder"`` from a model config: the one rule.

    A config that says ``is_decoder``, or names a causal-LM architecture (``...ForCausalLM``, ``...LMHeadModel``,
    ``...ForConditionalGeneration``), is a decoder; otherwise an encoder-only family (:data:`ENCODER_TYPES` and those
    added with :func:`register_encoder_type`) is an encoder, and anything else a decoder.

    Parameters
    ----------
    config : transformers config or None
        Read for ``is_decoder``, ``architectures`` and ``model_type``.

    Returns
    -------
    str
        ``"decoder"`` or ``"encoder"``.
    """
    if getattr(config, "is_decoder", False):
        return "decoder"
    architectures = getattr(config, "architectures", None) or []
    if any(str(a).endswith(_CAUSAL_ARCHITECTURES) for a in architectures):
        return "decoder"
    model_type = getattr(config, "model_type", None)
    return "encoder" if model_type in ENCODER_TYPES or model_type in _REGISTERED_ENCODERS else "decoder"


def model_kind(model) -> str:
    """``"encoder"`` (bidirectional, e.g. BERT) or ``"decoder"`` (causal LM).

    :func:`empirical.llm.load_model` records it as ``model.raptor_kind``; otherwise it is read
    from the config (:func:`config_kind`)."""
    kind = getattr(model, "raptor_kind", None)
    if kind in ("encoder", "decoder"):
        return kind
    return config_kind(getattr(model, "config", None))


def require_decoder(model, what: str) -> None:
    """``ValueError`` when ``model`` is an encoder: ``what`` (steering, generation) needs a causal LM."""
    if model_kind(model) != "decoder":
        raise ValueError(f"{what} needs a decoder (causal language model); {type(model).__name__} is an encoder "
                         "(extraction and probes work on encoders, steering and generation do not)")


def _get(obj, dotted):
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def num_layers(model) -> int:
    """Number of decoder blocks L.

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model (see :func:`decoder_blocks`).

    Returns
    -------
    int
        L: hidden-state layers are 0..L (0 the embeddings, l the output of block l).

    Examples
    --------
    >>> from empirical.testing import tiny_model
    >>> num_layers(tiny_model("llama", seed=0, n_layers=3))
    3
    """
    return len(decoder_blocks(model))


def decoder_blocks(model) -> torch.nn.ModuleList:
    """The model's ModuleList of decoder (or encoder) blocks (block ``l`` is ``decoder_blocks(model)[l - 1]``).

    The first non-empty ModuleList at one of the attribute paths of :func:`block_paths` (the registered, then the
    known ones); otherwise the one ModuleList whose length is the config's ``num_hidden_layers`` (or ``n_layer``).
    Where several lists qualify, it refuses to guess: register the family's path (:func:`register_block_path`).

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model (a causal LM or its base model, or an encoder).

    Returns
    -------
    torch.nn.ModuleList
        The blocks, in order.

    Raises
    ------
    ValueError
        No such list is found, or several lists of that length are (the message names them).

    Examples
    --------
    >>> from empirical.testing import tiny_model
    >>> model = tiny_model("llama", seed=0, n_layers=3)
    >>> decoder_blocks(model) is model.model.layers
    True
    """
    for path in (*_REGISTERED_PATHS, *_BLOCK_PATHS):
        mod = _get(model, path)
        if isinstance(mod, torch.nn.ModuleList) and len(mod) > 0:
            return mod
    cfg = getattr(model, "config", None)
    n = None
    if cfg is not None:
        n = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", None)
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) > 0]
    if n is not None:
        lists = [(name, m) for name, m in lists if len(m) == n]
    if not lists:
        raise ValueError(f"cannot find the decoder blocks of {type(model).__name__}; name their attribute path with "
                         "empirical.llm.register_block_path")
    if len(lists) > 1:  # a guess between lists of equal length could read the wrong modules without a sign
        names = ", ".join(repr(name) for name, _ in lists)
        raise ValueError(f"cannot tell which ModuleList holds the blocks of {type(model).__name__}: {names} all have "
                         f"{len(lists[0][1])} entries; name the blocks' path with "
                         "empirical.llm.register_block_path")
    return lists[0][1]


def register_block_path(path: str) -> None:
    """Teach :func:`decoder_blocks` where a new model family keeps its blocks (tried before the known paths).

    Parameters
    ----------
    path : str
        Dotted attribute path from the loaded model to its ``ModuleList`` of blocks, e.g. ``"trunk.layers"``.
        Registering a path twice keeps one entry.

    Raises
    ------
    ValueError
        ``path`` is not a dotted path of Python identifiers.

    Examples
    --------
    >>> register_block_path("backbone.blocks")
    >>> "backbone.blocks" in block_paths()
    True
    >>> unregister_block_path("backbone.blocks")
    """
    if not isinstance(path, str) or not path or not all(part.isidentifier() for part in path.split(".")):
        raise ValueError(f"path must be a dotted attribute path such as 'trunk.layers', got {path!r}")
    if path not in _REGISTERED_PATHS:
        _REGISTERED_PATHS.insert(0, path)


def unregister_block_path(path: str) -> None:
    """Remove a path added by :func:`register_block_path` (the built-in paths stay).

    Parameters
    ----------
    path : str
        A registered path.

    Raises
    ------
    ValueError
        ``path`` was not registered.
    """
    if path not in _REGISTERED_PATHS:
        raise ValueError(f"path {path!r} is not registered; registered: {list(_REGISTERED_PATHS)}")
    _REGISTERED_PATHS.remove(path)


def block_paths() -> tuple:
    """Every attribute path :func:`decoder_blocks` tries, in order: the registered ones, then the built-in ones.

    Returns
    -------
    tuple of str
    """
    return (*_REGISTERED_PATHS, *_BLOCK_PATHS)


def input_device(model) -> torch.device:
    """Where a model's inputs go: the first device of an accelerate ``hf_device_map`` (not disk/meta),
    else the device of its first parameter."""
    device_map = getattr(model, "hf_device_map", None)
    if device_map:
        for device in device_map.values():
            if device not in ("disk", "meta"):
                return torch.device(f"cuda:{device}" if isinstance(device, int) else device)
    return next(model.parameters()).device


def base_model(model):
    """The transformer without the LM head (saves the vocabulary projection during extraction)."""
    base = getattr(model, "base_model", None)
    return base if base is not None else model


def block_output_tensor(output):
    """The hidden-state tensor of a block's output (blocks return a tensor or a tuple)."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"unexpected decoder block output type {type(output).__name__}")


def replace_block_output(output, new):
    """Rebuild a block output with ``new`` as its hidden state (same container type)."""
    if isinstance(output, torch.Tensor):
        return new
    if isinstance(output, tuple):
        return (new,) + tuple(output[1:])
    if isinstance(output, list):
        return [new] + list(output[1:])
    raise TypeError(f"unexpected decoder block output type {type(output).__name__}")


def block_input_tensor(args, kwargs):
    """The hidden-state input of a block from a forward pre-hook's (args, kwargs)."""
    if args and isinstance(args[0], torch.Tensor):
        return args[0]
    hs = kwargs.get("hidden_states")
    if isinstance(hs, torch.Tensor):
        return hs
    raise TypeError("cannot find the hidden-state input of the decoder block")


class HookSet:
    """A set of torch hook handles removed together (usable as a context manager)."""

    def __init__(self):
        self.handles = []

    def add(self, handle):
        self.handles.append(handle)
        return handle

    def remove(self):
        while self.handles:
            self.handles.pop().remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


#: names of learned absolute position-embedding tables (GPT-2 ``wpe``, BERT/RoBERTa ``position_embeddings``,
#: OPT/BART ``embed_positions``): a position past their size is an IndexError deep inside the forward pass
POSITION_TABLES = ("wpe", "position_embeddings", "embed_positions")


def position_limit(model) -> int | None:
    """Most tokens one sequence may have: the size of a learned absolute position table (less RoBERTa's
    padding offset, OPT's ``offset``), or None for rotary/relative positions (no hard limit).

    Examples
    --------
    >>> from empirical.testing import tiny_model
    >>> position_limit(tiny_model("llama")) is None
    True
    """
    for name, module in base_model(model).named_modules():
        if name.rsplit(".", 1)[-1] in POSITION_TABLES and isinstance(module, torch.nn.Embedding):
            offset = getattr(module, "offset", None)
            if offset is None:
                offset = 0 if module.padding_idx is None else module.padding_idx + 1
            return int(module.num_embeddings - offset)
    return None


def cache_argument(core) -> str:
    """The keyword a model's ``forward`` takes its key/value cache by: ``cache`` (transformers >= 5.x, where
    ``past_key_values`` still works but warns ``FutureWarning`` on every call) or ``past_key_values``.

    Parameters
    ----------
    core : torch.nn.Module
        A transformers model (the base model or the causal LM).

    Returns
    -------
    str
        ``"cache"`` or ``"past_key_values"``.
    """
    parameters = inspect.signature(core.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def output_cache(output):
    """The key/value cache of a forward pass's output (``output.cache`` in transformers >= 5.x, else
    ``output.past_key_values``).

    Parameters
    ----------
    output : transformers ModelOutput
        The output of a forward pass with ``use_cache=True``.

    Returns
    -------
    Cache or tuple
        The cache, as the model returned it.
    """
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values
