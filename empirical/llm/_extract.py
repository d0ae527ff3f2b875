"""Batched pooled (by default last-token) hidden-state extraction with a resumable disk cache.

``hidden_states(model, tokenizer, prompts)`` returns a float32 array of shape
``(n_layers, n_prompts, hidden_size)``: for each prompt the hidden state of its *last token*
(decoders; ``pooling="mean"`` or ``"first"`` otherwise, the mean being an encoder's default)
at each requested layer. Layers follow the package convention (:mod:`empirical.llm._hooks`):
layer l in 1..L is the output of decoder block l (before any final norm); layer 0 is the
embedding input of block 1; the default is layers 1..L.

How: prompts are tokenized once (the tokenizer's own special tokens, no truncation unless
``max_length``), sorted by length (longest first) and run in batches under
``torch.inference_mode`` through the base transformer (no LM head) with *right* padding and an
attention mask; the causal mask keeps every real token blind to the pads, and forward hooks on
the decoder blocks copy the row of each prompt's last real token (or pool its real tokens). Results
equal one-at-a-time extraction to float rounding (tested to 1e-4).

Cache (``cache=True``, a directory, or an :class:`~empirical.llm.ExtractionCache`): keyed by
the model identity (GGUF/weights hash or hub revision), the sha256 of the exact prompt list
(which covers dataset file hash, template, caps and chat wrapping), the layer convention, the
model dtype, ``max_length`` and special-token handling. All layers 0..L are stored, so any layer
selection is served from one file. An interrupted run resumes where it stopped; a finished run
returns the memory-mapped file without touching the model.
"""
from __future__ import annotations

import contextlib
import hashlib
import time

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import DynamicCache

from empirical.common.checks import check_bool, check_int
from empirical.common.resources import check_threads

from ._cache import ExtractionCache, check_hidden_finite
from ._hooks import (
    LAYER_CONVENTION,
    base_model,
    block_input_tensor,
    block_output_tensor,
    cache_argument,
    decoder_blocks,
    input_device,
    model_kind,
    output_cache,
    position_limit,
)
from ._models import apply_chat_template, model_identity

__all__ = ["hidden_states", "extract_dataset", "resolve_layers", "tokenize_prompts", "ExtractionCache",
           "default_max_batch_tokens"]


class _StopForward(Exception):
    pass


def resolve_layers(layers, n_layers: int) -> list:
    """Validate a layer selection (ints in 0..L, ``"all"`` = 0..L, None = 1..L).

    Layer l is the output of decoder block l; layer 0 the token embeddings.

    Parameters
    ----------
    layers : None, "all", int or iterable of int
        The selection: None means 1..L, ``"all"`` 0..L.
    n_layers : int
        L, the number of decoder blocks.

    Returns
    -------
    list of int
        The layer indices, in the order given.

    Examples
    --------
    >>> resolve_layers(None, 3), resolve_layers("all", 3), resolve_layers([2], 3)
    ([1, 2, 3], [0, 1, 2, 3], [2])
    """
    if layers is None:
        return list(range(1, n_layers + 1))
    if isinstance(layers, str):
        if layers == "all":
            return list(range(0, n_layers + 1))
        raise ValueError(f"layers must be None, 'all' or ints in 0..{n_layers}, got {layers!r}")
    if isinstance(layers, (int, np.integer)):
        layers = [layers]
    out = [int(layer) for layer in layers]
    bad = [layer for layer in out if not 0 <= layer <= n_layers]
    if bad or not out:
        raise ValueError(f"layers must be ints in 0..{n_layers} (0 = embeddings, l = output of block l), got "
                         f"{bad or out}")
    return out


def check_prompts(prompts, name: str = "prompts") -> list:
    """A non-empty list of non-empty strings; ``ValueError`` naming ``name`` otherwise (a single string
    is refused: iterating it would run one prompt per character).

    Examples
    --------
    >>> check_prompts("a good film")
    Traceback (most recent call last):
    ...
    ValueError: prompts must be a list of strings, not a single string, got 'a good film'
    """
    if isinstance(prompts, str):
        raise ValueError(f"{name} must be a list of strings, not a single string, got {prompts!r:.60}")
    prompts = list(prompts)
    if not prompts:
        raise ValueError(f"{name} is empty")
    bad = [i for i, p in enumerate(prompts) if not isinstance(p, str) or not p]
    if bad:
        raise ValueError(f"{name} must be non-empty strings, got {prompts[bad[0]]!r:.60} at index {bad[0]} "
                         f"(bad entries at {bad[:10]})")
    return prompts


def tokenize_prompts(tokenizer, prompts, max_length=None, add_special_tokens=True) -> list:
    """Token id lists, one per prompt; ``max_length`` keeps the *last* tokens (the read-out end).

    Parameters
    ----------
    tokenizer : transformers tokenizer
        Called on the whole list without padding or truncation.
    prompts : list of str
        A non-empty list of non-empty strings.
    max_length : int, optional
        Keep at most the last ``max_length`` tokens of each prompt.
    add_special_tokens : bool, default=True
        Passed to the tokenizer.

    Returns
    -------
    list of list of int
        Token ids per prompt (``ValueError`` when a prompt tokenizes to nothing).

    Examples
    --------
    >>> from empirical.testing import tiny_tokenizer
    >>> tokenize_prompts(tiny_tokenizer(), ["a good film"], max_length=2)
    [[36, 30]]
    """
    prompts = check_prompts(prompts)
    enc = tokenizer(prompts, add_special_tokens=add_special_tokens, padding=False, truncation=False)["input_ids"]
    if max_length is not None:
        max_length = check_int(max_length, "max_length")
        enc = [ids[-max_length:] for ids in enc]
    empty = [i for i, ids in enumerate(enc) if len(ids) == 0]
    if empty:
        raise ValueError(f"prompts {empty[:10]} tokenize to no tokens")
    return enc


def check_positions(model, token_ids, what: str = "prompt") -> None:
    """``ValueError`` before any forward pass when a tokenized prompt is longer than the model's learned
    position table (GPT-2's 1024, BERT's 512): naming the prompt's index, its length and the limit.

    Parameters
    ----------
    model : torch.nn.Module
    token_ids : list of list of int
    what : str
        What the sequences are, for the message.
    """
    limit = position_limit(model)
    if limit is None:
        return
    long = [i for i, ids in enumerate(token_ids) if len(ids) > limit]
    if long:
        raise ValueError(f"{what} {long[0]} has {len(token_ids[long[0]])} tokens, more than the {limit} positions this "
                         f"model has ({len(long)} {what}(s) in all, indices {long[:10]}); shorten them or pass "
                         f"max_length={limit} (keeps each prompt's last tokens)")


def bucket_length(T: int) -> int:
    """The padded length of a batch whose longest prompt has ``T`` tokens, on a ladder of few values: multiples of
    8 up to 32, then 48, 64, 96, 128, 192, 256, ... (ratio at most 1.5).  An accelerator pays a one-off kernel
    build for every new (batch, length) shape (cuDNN attention on an H100: a first pass 20x slower than a warm one
    over exact lengths, docs/gpu.md); padded to the ladder, a dataset meets a handful of shapes.

    Examples
    --------
    >>> [bucket_length(t) for t in (1, 9, 33, 49, 65, 200)]
    [8, 16, 48, 64, 96, 256]
    """
    T = check_int(T, "T")
    if T <= 32:
        return -(-T // 8) * 8
    v = 32
    while v < T:
        v = v * 3 // 2 if v & (v - 1) == 0 else v * 4 // 3
    return v


def pad_right(batch_ids, pad_id, device, length=None):
    """Right-pad token id lists into ``(ids, attention_mask, last_index)`` tensors on ``device``.

    ``last_index[i]`` is the position of row i's last real token; ``length`` pads every row to that many tokens
    (at least the longest row's; default: the longest row's).

    Examples
    --------
    >>> ids, mask, last = pad_right([[5, 6, 7], [8]], 0, "cpu")
    >>> ids.tolist(), mask.tolist(), last.tolist()
    ([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]], [2, 0])
    """
    lengths = torch.tensor([len(x) for x in batch_ids])
    T = max(int(lengths.max()), length or 0)
    ids = torch.full((len(batch_ids), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch_ids), T), dtype=torch.long)
    for i, x in enumerate(batch_ids):
        ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = 1
    return ids.to(device), mask.to(device), (lengths - 1).to(device)


@contextlib.contextmanager
def _threads(num_threads):
    if num_threads is None:
        yield
        return
    num_threads = check_threads(num_threads)
    old = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def common_prefix_length(token_ids) -> int:
    """Length of the longest token prefix shared by all prompts, leaving each at least one token."""
    first = token_ids[0]
    P = min(len(x) for x in token_ids) - 1
    for x in token_ids[1:]:
        k = 0
        while k < P and x[k] == first[k]:
            k += 1
        P = k
        if P == 0:
            break
    return max(P, 0)


def length_batches(order, token_ids, batch_size, max_batch_tokens, offset, pad=None):
    """Consecutive groups of the length-sorted ``order``: at most ``batch_size`` prompts and
    ``max_batch_tokens`` padded tokens (a single longer prompt still forms its own batch); lengths are
    counted from token ``offset`` on (after a shared prefix) and padded by ``pad`` (e.g. :func:`bucket_length`).

    Examples
    --------
    >>> ids = [[1] * 5, [1] * 4, [1] * 2]
    >>> list(length_batches([0, 1, 2], ids, batch_size=2, max_batch_tokens=100, offset=0))
    [[0, 1], [2]]
    """
    pad = pad or (lambda t: t)
    batch, width = [], 0
    for i in order:
        width = max(width if batch else 0, pad(len(token_ids[i]) - offset))
        if batch and (len(batch) >= batch_size or width * (len(batch) + 1) > max_batch_tokens):
            yield batch
            batch, width = [], pad(len(token_ids[i]) - offset)
        batch.append(i)
    if batch:
        yield batch


def _prefix_kv(core, model, prefix, device):
    """Key/value states of the shared prefix (batch 1), or None if the model does not take a cache."""
    ids = torch.tensor([prefix], dtype=torch.long, device=device)
    try:
        out = core(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True,
                   **{cache_argument(core): DynamicCache(config=model.config)})
        kv = [(k, v) for k, v, *_ in output_cache(out)]
    except Exception:  # pragma: no cover - architectures without a standard cache
        return None
    if not kv or any(k is None or k.shape[0] != 1 for k, v in kv):
        return None
    return kv


POOLINGS = ("last", "mean", "first")


def _pool(h, pooling, last, mask):
    """(B, p) summary of block states ``h`` (B, T, p): the last real token, the mean over real tokens, or
    the first token (``mask`` (B, T) marks real tokens of right-padded rows)."""
    if pooling == "last":
        return h[torch.arange(h.shape[0], device=h.device), last.to(h.device)]
    if pooling == "first":
        return h[:, 0]
    m = mask.to(h.device, h.dtype).unsqueeze(-1)
    return (h * m).sum(dim=1) / m.sum(dim=1)


def _run(model, token_ids, layers, batch_size, sink, todo, progress, desc, share_prefix=True, max_batch_tokens=512,
         pooling="last", bucket=False):
    """Run the length-sorted batches over indices ``todo``; ``sink(indices, buf)`` gets (n_layers, B, p).

    With ``share_prefix`` the token prefix common to all prompts is run once and its key/value
    cache reused by every batch (positions continue after the prefix), so only suffixes are computed
    (decoders with last-token pooling only: an encoder's prefix states depend on the suffix).
    """
    blocks = decoder_blocks(model)
    core = base_model(model)
    device = input_device(model)
    encoder = model_kind(model) == "encoder"
    share_prefix = share_prefix and pooling == "last" and not encoder
    p = _hidden_size(model, blocks)
    order = sorted(todo, key=lambda i: -len(token_ids[i]))
    slot = {layer: k for k, layer in enumerate(layers)}
    state = {"on": False}
    stop_at = max(layers)
    L = len(blocks)

    def grab(layer, h):
        if state["on"]:
            buf = state["buf"]
            buf[slot[layer]] = _pool(h, pooling, state["last"], state["mask"]).float().to(buf.device)

    handles = []
    try:
        if 0 in slot:
            handles.append(blocks[0].register_forward_pre_hook(
                lambda m, a, kw: grab(0, block_input_tensor(a, kw)), with_kwargs=True))
        for layer in layers:
            if layer == 0:
                continue

            def hook(m, a, out, layer=layer):
                grab(layer, block_output_tensor(out))
                if state["on"] and layer == stop_at and stop_at < L:
                    raise _StopForward

            handles.append(blocks[layer - 1].register_forward_hook(hook))
        ntok = 0
        t0 = time.perf_counter()
        bar = tqdm(total=len(order), desc=desc, unit="prompt", disable=not progress, leave=False)
        with torch.inference_mode():
            P, kv = 0, None
            if share_prefix and len(token_ids) > 1:
                P = common_prefix_length(token_ids)
                if P >= 2:
                    kv = _prefix_kv(core, model, token_ids[0][:P], device)
                if kv is None:
                    P = 0
            pad = bucket_length if bucket else None
            for idx in length_batches(order, token_ids, batch_size, max_batch_tokens, P, pad):
                rows = [token_ids[i][P:] for i in idx]
                ids, mask, last = pad_right(rows, 0, device, pad(max(map(len, rows))) if pad else None)
                B, T = ids.shape
                kw = {}
                if kv is not None:
                    kw[cache_argument(core)] = DynamicCache(
                        [(k.expand(B, *k.shape[1:]).contiguous(), v.expand(B, *v.shape[1:]).contiguous())
                         for k, v in kv], config=model.config)
                    kw["position_ids"] = torch.arange(P, P + T, device=device).unsqueeze(0).expand(B, T)
                    mask = torch.cat([torch.ones((B, P), dtype=mask.dtype, device=device), mask], dim=1)
                    kw["use_cache"] = True
                elif not encoder:
                    kw["use_cache"] = False
                state.update(on=True, last=last, mask=mask[:, -T:], buf=torch.empty((len(layers), B, p),
                                                                                  dtype=torch.float32, device=device))
                try:
                    core(input_ids=ids, attention_mask=mask, **kw)
                except _StopForward:
                    pass
                finally:
                    state["on"] = False
                sink(np.asarray(idx), state["buf"].cpu().numpy())
                ntok += sum(len(token_ids[i]) for i in idx)
                bar.update(len(idx))
                bar.set_postfix(tok_s=f"{ntok / max(time.perf_counter() - t0, 1e-9):.0f}")
        bar.close()
    finally:
        for h in handles:
            h.remove()


#: Default ``max_batch_tokens`` of :func:`hidden_states` per device type (measured: docs/llm.md for the CPU,
#: docs/gpu.md for an H100); a device type not listed gets the accelerator value.
MAX_BATCH_TOKENS = {"cpu": 512, "accelerator": 16384}


def default_max_batch_tokens(device) -> int:
    """The default cap on prompts x padded length per forward pass for a model on ``device``.

    Parameters
    ----------
    device : str or torch.device
        The model's (first parameter's) device.

    Returns
    -------
    int
        :data:`MAX_BATCH_TOKENS`: 512 on ``cpu``, 16384 on any accelerator (``cuda``, ``mps``, ...).

    Examples
    --------
    >>> default_max_batch_tokens("cpu"), default_max_batch_tokens("cuda:0")
    (512, 16384)
    """
    kind = str(device).split(":")[0]
    return MAX_BATCH_TOKENS["cpu" if kind == "cpu" else "accelerator"]


def _hidden_size(model, blocks):
    cfg = getattr(model, "config", None)
    for attr in ("hidden_size", "n_embd", "d_model"):
        v = getattr(cfg, attr, None)
        if isinstance(v, int):
            return v
    raise ValueError("cannot determine the model's hidden size from its config")


def _cache_meta(model, token_ids, extra):
    h = hashlib.sha256()
    for ids in token_ids:
        h.update(np.asarray(ids, dtype=np.int64).tobytes())
        h.update(b"|")
    dtype = str(next(model.parameters()).dtype)
    return {
        "model": model_identity(model),
        "tokens_sha256": h.hexdigest(),
        "n_prompts": len(token_ids),
        "layer_convention": LAYER_CONVENTION,
        "dtype": dtype,
        **extra,
    }


def hidden_states(
    model,
    tokenizer,
    prompts,
    layers=None,
    batch_size: int = 32,
    cache=None,
    *,
    num_threads=None,
    share_prefix: bool = True,
    pooling: str | None = None,
    max_batch_tokens: int | None = None,
    max_length=None,
    add_special_tokens: bool = True,
    progress: bool = True,
    label: str | None = None,
    meta: dict | None = None,
    bucket_lengths: bool | None = None,
) -> np.ndarray:
    """Pooled (default: last-token) hidden states, float32 array ``(len(layers), len(prompts), hidden_size)``.

    The model runs on its own device and dtype (choose them in :func:`empirical.llm.load_model`); the
    dtype is part of the cache key.

    Parameters
    ----------
    model : transformers model
        A decoder (causal LM) or encoder whose blocks :func:`empirical.llm.decoder_blocks` finds; put in
        eval mode for the run and restored after.
    tokenizer : transformers tokenizer
        Its tokenizer.
    prompts : list of str
        The prompts (a non-empty list of non-empty strings; a single string is refused).
    layers : None, "all", int or iterable of int, optional
        None: 1..L (default); ``"all"``: 0..L; else the given layers.  Layer l is the output of decoder
        block l, layer 0 the token embeddings (:func:`resolve_layers`).
    batch_size : int, default=32
        At most this many prompts per forward pass (after sorting by token length).
    cache : None, bool, str, path-like or ExtractionCache, optional
        None/False: no cache; True: ``$RAPTOR_CACHE/hidden`` (:class:`ExtractionCache`); a directory; or an
        ExtractionCache.  A cached entry holds every layer 0..L, so any later layer selection reads it.
    num_threads : int, optional
        ``torch.set_num_threads`` during the run (restored after).
    share_prefix : bool, default=True
        Run the token prefix shared by all prompts (e.g. a template's instruction) once and reuse its
        key/value cache (same numbers up to float rounding, much less compute; decoders with last-token
        pooling only).
    pooling : {"last", "mean", "first"}, optional
        ``"last"`` (last real token; default for decoders), ``"mean"`` (mean over real tokens; default for
        encoders) or ``"first"`` (first token, e.g. BERT's [CLS]).  Part of the cache key.
    max_batch_tokens : int, optional
        Also caps prompts x padded length per batch (default: by the model's device,
        :func:`default_max_batch_tokens`: 512 on CPU, where larger batches fall out of cache (SmolLM2, 1 thread:
        347 tok/s at 512 vs 237 at 4096 on STSA prompts), 16384 on a GPU, where 512 caps batches at 4-8 prompts
        and is 3.2x slower (docs/gpu.md)).
    max_length : int, optional
        Keep at most the last ``max_length`` tokens of each prompt.
    add_special_tokens : bool, default=True
        Passed to the tokenizer (e.g. a BOS token).  Part of the cache key.
    progress : bool, default=True
        Show a progress bar.
    label : str, optional
        File-name label of the cache entry (e.g. the dataset name).
    meta : dict, optional
        Extra key material of the cache entry (JSON data).
    bucket_lengths : bool, optional
        Pad each batch to a length of the ladder of :func:`bucket_length` (few distinct shapes: no first-pass
        penalty on an accelerator; the same states up to float rounding, since padding is masked and after the
        pooled token).  Default: on an accelerator, not on the CPU (where padding only costs).

    Returns
    -------
    ndarray (len(layers), len(prompts), hidden_size), float32
        ``H[k, i]`` is prompt i's pooled state at the k-th requested layer (a read-only memory map when it
        comes from the cache and the layers are contiguous; float16 from a cache that stores float16).

    Examples
    --------
    >>> from empirical.testing import tiny_model, tiny_tokenizer
    >>> model, tokenizer = tiny_model("llama", seed=0, n_layers=3), tiny_tokenizer()
    >>> H = hidden_states(model, tokenizer, ["a good film", "a bad film"], progress=False)
    >>> H.shape, H.dtype  # layers 1..3, two prompts, hidden size 32
    ((3, 2, 32), dtype('float32'))
    """
    batch_size = check_int(batch_size, "batch_size")
    if max_batch_tokens is None:
        max_batch_tokens = default_max_batch_tokens(input_device(model))
    max_batch_tokens = check_int(max_batch_tokens, "max_batch_tokens")
    max_length = None if max_length is None else check_int(max_length, "max_length")
    if bucket_lengths is None:
        bucket_lengths = input_device(model).type != "cpu"
    bucket_lengths = check_bool(bucket_lengths, "bucket_lengths")
    if pooling is None:
        pooling = "mean" if model_kind(model) == "encoder" else "last"
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    L = len(decoder_blocks(model))
    sel = resolve_layers(layers, L)
    token_ids = tokenize_prompts(tokenizer, prompts, max_length, add_special_tokens)
    check_positions(model, token_ids)
    n = len(token_ids)
    p = _hidden_size(model, decoder_blocks(model))
    was_training = model.training
    model.eval()
    try:
        with _threads(num_threads):
            if cache is None or cache is False:
                out = np.empty((len(sel), n, p), dtype=np.float32)

                def sink(idx, buf):
                    check_hidden_finite(buf, sel)  # a NaN / inf state is an error naming its layer, as with a cache
                    out[:, idx, :] = buf

                _run(model, token_ids, sel, batch_size, sink, range(n), progress, label or "extract",
                     share_prefix, max_batch_tokens, pooling, bucket_lengths)
                return out
            store = cache if isinstance(cache, ExtractionCache) else ExtractionCache(None if cache is True else cache)
            extra = {"max_length": max_length, "add_special_tokens": bool(add_special_tokens), **(meta or {})}
            if pooling != "last":  # absent = last token, so caches written before pooling existed stay valid
                extra["pooling"] = pooling
            entry = store.entry(label or "prompts", _cache_meta(model, token_ids, extra), (L + 1, n, p))
            arr = entry.load(verify=store.verify)
            if arr is None:
                with entry.lock():
                    arr = entry.load(verify=store.verify)  # another process may have finished it meanwhile
                    if arr is None:
                        arr = _fill_entry(entry, model, token_ids, L, batch_size, progress, label, share_prefix,
                                          max_batch_tokens, n, pooling, bucket_lengths)
            if sel == list(range(sel[0], sel[-1] + 1)):
                return arr[sel[0]: sel[-1] + 1]
            return np.ascontiguousarray(arr[sel])
    finally:
        model.train(was_training)


def _fill_entry(entry, model, token_ids, L, batch_size, progress, label, share_prefix, max_batch_tokens, n, pooling,
                bucket_lengths=False):
    """Compute the missing rows of a cache entry (resuming a partial one) and publish it."""
    mm, rows = entry.open_partial()
    last_ckpt = [time.perf_counter()]

    def sink(idx, buf):
        rows.record(mm, idx, buf)
        if time.perf_counter() - last_ckpt[0] > 5.0:
            entry.checkpoint(mm, rows)
            last_ckpt[0] = time.perf_counter()

    todo = np.flatnonzero(~rows.done).tolist()
    if todo:
        desc = f"{label or 'extract'} ({n - len(todo)}/{n} cached)" if len(todo) < n else label or "extract"
        try:
            _run(model, token_ids, list(range(L + 1)), batch_size, sink, todo, progress, desc, share_prefix,
                 max_batch_tokens, pooling, bucket_lengths)
        except ValueError:
            if not rows.done.any():  # refused before any row was stored (e.g. states float16 cannot hold)
                del mm
                entry.discard_partial()  # nothing to resume: no file of it stays (a reserved partial may be GBs)
                raise
            entry.checkpoint(mm, rows)
            raise
        except BaseException:
            entry.checkpoint(mm, rows)
            raise
        entry.checkpoint(mm, rows)
    entry.finish(mm, rows)
    return entry.load(verify=False)


def extract_dataset(model, tokenizer, dataset, layers=None, batch_size: int = 32, cache=True, *, chat=False,
                    **kw) -> np.ndarray:
    """:func:`hidden_states` for a :class:`~empirical.llm.datasets.ConceptDataset` (cached by default).

    ``chat=True`` wraps each prompt in the tokenizer's chat template (off by default, as the paper).

    Parameters
    ----------
    model, tokenizer : transformers model and tokenizer
        As for :func:`hidden_states`.
    dataset : ConceptDataset
        Its ``prompts`` (the template applied) are extracted; its name labels the cache entry and its
        fingerprint, template and ``chat`` are part of the key.
    layers, batch_size, cache, **kw
        As for :func:`hidden_states` (``cache=True``: ``$RAPTOR_CACHE/hidden``).
    chat : bool, default=False
        Wrap each prompt in the tokenizer's chat template (:func:`empirical.llm._models.apply_chat_template`).

    Returns
    -------
    ndarray (len(layers), len(dataset), hidden_size), float32
        As :func:`hidden_states`.
    """
    prompts = dataset.prompts
    if chat:
        prompts = apply_chat_template(tokenizer, prompts)
    meta = {"dataset": dataset.name, "dataset_fingerprint": dataset.fingerprint(), "template": dataset.template,
            "chat": bool(chat)}
    return hidden_states(model, tokenizer, prompts, layers, batch_size, cache, label=dataset.name, meta=meta, **kw)
