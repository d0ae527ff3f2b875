"""Hidden-state extraction on tiny random models: layer convention per architecture, batched ==
unbatched, prefix sharing, the disk cache (hit, validation, resume), and argument errors."""
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import _extract as E
from empirical.llm._cache import ExtractionCache
from empirical.llm._hooks import decoder_blocks
from empirical.testing import ARCHS, tiny_model, tiny_tokenizer

pytestmark = pytest.mark.llm

PROMPTS = [
    "task detect sarcasm . the city of paris is in france .",
    "task detect sarcasm . a great movie",
    "task detect sarcasm . coin flips heads up ? yes , it does not flip",
    "task detect sarcasm . bad",
    "task detect sarcasm . i loved this film and the actor was really very funny .",
    "task detect sarcasm . what is this",
    "task detect sarcasm . the dog and the cat",
]


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _hook_reference(model, tok, prompt):
    """Block outputs captured by plain forward hooks during an ordinary full-model call."""
    blocks = decoder_blocks(model)
    caps = {}
    hs = [blocks[i].register_forward_hook(
              lambda m, a, o, i=i: caps.__setitem__(i + 1, (o[0] if isinstance(o, tuple) else o)[0, -1].clone()))
          for i in range(len(blocks))]
    try:
        with torch.inference_mode():
            out = model(**tok([prompt], return_tensors="pt"), output_hidden_states=True)
    finally:
        for h in hs:
            h.remove()
    return caps, [h[0, -1] for h in out.hidden_states]


@pytest.mark.parametrize("arch", ARCHS)
def test_layer_convention_and_batching(arch, tok):
    model = tiny_model(arch, seed=1)
    L = len(decoder_blocks(model))
    H = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=3, progress=False)
    assert H.shape == (L + 1, len(PROMPTS), 32) and H.dtype == np.float32
    default = E.hidden_states(model, tok, PROMPTS, batch_size=3, progress=False)
    np.testing.assert_array_equal(default, H[1:])  # default layers are 1..L
    no_prefix = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=3, share_prefix=False, progress=False)
    for i, prompt in enumerate(PROMPTS):
        single = E.hidden_states(model, tok, [prompt], layers="all", batch_size=1, progress=False)[:, 0]
        np.testing.assert_allclose(H[:, i], single, atol=1e-4, rtol=0)
        np.testing.assert_allclose(no_prefix[:, i], single, atol=1e-4, rtol=0)
        caps, hs = _hook_reference(model, tok, prompt)
        for layer in range(1, L + 1):  # layer l = output of decoder block l
            np.testing.assert_allclose(H[layer, i], caps[layer].numpy(), atol=1e-4, rtol=0)
        for layer in range(0, L):  # transformers' hidden_states[l] agrees below the top block ...
            np.testing.assert_allclose(H[layer, i], hs[layer].numpy(), atol=1e-4, rtol=0)
    # ... and its last entry is the final-normed state, which is not a block output
    assert np.abs(H[L, 0] - hs[L].numpy()).max() > 1e-2


def test_layer_subset_and_early_stop(tok):
    model = tiny_model("llama", seed=2, n_layers=4)
    full = E.hidden_states(model, tok, PROMPTS, layers="all", progress=False)
    sub = E.hidden_states(model, tok, PROMPTS, layers=[2, 0], progress=False)
    np.testing.assert_allclose(sub, full[[2, 0]], atol=1e-5)
    calls = []
    h = decoder_blocks(model)[3].register_forward_hook(lambda *a: calls.append(1))
    E.hidden_states(model, tok, PROMPTS, layers=[1], share_prefix=False, progress=False)
    h.remove()
    assert calls == []  # the forward stops after the last requested block


def test_batches_respect_limits():
    ids = [[1] * n for n in (9, 8, 8, 7, 3, 2, 2, 1)]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    batches = list(E.length_batches(order, ids, 3, 17, 0))
    assert sorted(i for b in batches for i in b) == list(range(8))
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or max(len(ids[i]) for i in b) * len(b) <= 17
    assert E.common_prefix_length([[5, 6, 7], [5, 6, 8, 9], [5, 6]]) == 1  # keeps >= 1 own token
    assert E.common_prefix_length([[1, 2], [3, 4]]) == 0


def test_tuple_returning_blocks(tok):
    """Blocks that return (hidden, extra) tuples (older transformers) are read and steered alike."""
    model = tiny_model("llama", seed=3)
    ref = E.hidden_states(model, tok, PROMPTS[:3], layers="all", progress=False)
    for blk in decoder_blocks(model):
        orig = blk.forward
        blk.forward = (lambda *a, _f=orig, **k: (_f(*a, **k), None))
    # the Llama loop itself needs tensors: later-registered hooks unwrap the tuples for it
    core = model.model
    orig_core = type(core).forward

    def unpack_forward(self, *a, **k):
        for blk in self.layers:
            if not hasattr(blk, "_unwrap"):
                blk._unwrap = blk.register_forward_hook(lambda m, args, out: out[0] if isinstance(out, tuple) else out)
        return orig_core(self, *a, **k)

    # tuple outputs reach our hooks first (registered later hooks unwrap them for the model loop)
    H = None
    try:
        type(core).forward = unpack_forward
        H = E.hidden_states(model, tok, PROMPTS[:3], layers="all", share_prefix=False, progress=False)
    finally:
        type(core).forward = orig_core
    np.testing.assert_allclose(H, ref, atol=1e-5)


def test_disk_cache_hit_validate_and_resume(tok, tmp_path):
    model = tiny_model("qwen2", seed=4)
    cache = ExtractionCache(tmp_path)
    ref = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, progress=False)
    A = E.hidden_states(model, tok, PROMPTS, batch_size=2, cache=cache, label="toy", progress=False)
    np.testing.assert_allclose(A, ref[1:], atol=1e-5)
    assert isinstance(A, np.memmap)
    files = sorted(p.name for p in tmp_path.iterdir())
    # the entry's .lock is removed when the extraction releases it (files.exclusive_lock)
    assert [f.rsplit(".", 1)[1] for f in files] == ["json", "npy"] and files[0].startswith("toy-")

    # a re-run does not touch the model
    def boom(*a, **k):
        raise AssertionError("model called on a cache hit")

    h = decoder_blocks(model)[0].register_forward_pre_hook(boom)
    B = E.hidden_states(model, tok, PROMPTS, layers=[0, 2], cache=cache, label="toy", progress=False)
    h.remove()
    np.testing.assert_allclose(B, ref[[0, 2]], atol=1e-5)

    # other prompts / weights -> another key
    E.hidden_states(model, tok, PROMPTS[:3], cache=cache, label="toy", progress=False)
    assert len(list(tmp_path.glob("toy-*.npy"))) == 2

    # corrupt the stored array -> checksum error
    npy = sorted(tmp_path.glob("toy-*.npy"), key=lambda p: p.stat().st_size)[-1]
    arr = np.load(npy, mmap_mode="r+")
    arr[1, 0, 0] += 1.0
    arr.flush()
    del arr
    with pytest.raises(ValueError, match="checksum"):
        E.hidden_states(model, tok, PROMPTS, cache=cache, label="toy", progress=False)


def test_resume_after_interruption(tok, tmp_path, monkeypatch):
    model = tiny_model("gpt2", seed=5)
    ref = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, progress=False)
    monkeypatch.setattr(E.time, "perf_counter", lambda c=iter(range(0, 10**6, 10)): next(c))  # checkpoint every batch
    seen = []
    blk = decoder_blocks(model)[0]

    def interrupt(m, a, kw):
        seen.append(a[0].shape[0] if a else kw["hidden_states"].shape[0])
        if len(seen) == 3:  # prefix pass, one batch of 2, then stop
            raise KeyboardInterrupt

    h = blk.register_forward_pre_hook(interrupt, with_kwargs=True)
    with pytest.raises(KeyboardInterrupt):
        E.hidden_states(model, tok, PROMPTS, batch_size=2, cache=tmp_path, label="r", progress=False)
    h.remove()
    with np.load(next(tmp_path.glob("r-*.rows.npz"))) as saved:
        done = saved["done"]
    finished = [p for p in tmp_path.glob("r-*.npy") if not p.name.endswith(".partial.npy")]
    assert done.sum() == 2 and not finished
    rows = []
    h = blk.register_forward_pre_hook(
        lambda m, a, kw: rows.append((a[0] if a else kw["hidden_states"]).shape[0]), with_kwargs=True)
    A = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, cache=tmp_path, label="r", progress=False)
    h.remove()
    assert sum(rows[1:]) == len(PROMPTS) - 2  # only the unfinished prompts were run (after the prefix pass)
    np.testing.assert_allclose(A, ref, atol=1e-5)
    assert not list(tmp_path.glob("r-*.partial.npy")) and not list(tmp_path.glob("r-*.rows.npz"))


def test_a_stop_while_publishing_an_entry_loses_no_rows(tok, tmp_path, monkeypatch):
    """An entry is published as one unit: stopped between its metadata and its array, the next run finds every
    row done in the partial file and publishes it without running the model on any prompt."""
    from empirical.llm import _cache as C

    model = tiny_model("gpt2", seed=5)
    real_os, real_write = C.os, C.atomic_write_text
    steps = []

    def step(write, *args):
        steps.append(args[0])
        if len(steps) == 2:  # kill -9 after the first of the entry's two writes, whichever it is
            raise KeyboardInterrupt
        return write(*args)

    class StopAtPublish:
        def __getattr__(self, name):
            return getattr(real_os, name)

        def replace(self, src, dst):
            return step(real_os.replace, src, dst) if str(src).endswith(".partial.npy") else real_os.replace(src, dst)

    monkeypatch.setattr(C, "os", StopAtPublish())
    monkeypatch.setattr(C, "atomic_write_text", lambda *a: step(real_write, *a))
    with pytest.raises(KeyboardInterrupt):
        E.hidden_states(model, tok, PROMPTS, batch_size=2, cache=tmp_path, label="u", progress=False)
    monkeypatch.setattr(C, "os", real_os)
    monkeypatch.setattr(C, "atomic_write_text", real_write)
    assert list(tmp_path.glob("u-*.partial.npy")) and list(tmp_path.glob("u-*.rows.npz"))
    rows = []
    h = decoder_blocks(model)[0].register_forward_pre_hook(
        lambda m, a, kw: rows.append((a[0] if a else kw["hidden_states"]).shape[0]), with_kwargs=True)
    A = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, cache=tmp_path, label="u", progress=False)
    h.remove()
    assert sum(rows[1:]) == 0  # no prompt recomputed (at most the shared-prefix pass)
    np.testing.assert_allclose(A, E.hidden_states(model, tok, PROMPTS, layers="all", progress=False), atol=1e-5)
    assert not list(tmp_path.glob("u-*.partial.npy")) and not list(tmp_path.glob("u-*.rows.npz"))


def test_threads_restored_and_errors(tok):
    model = tiny_model("gemma", seed=6)
    before = torch.get_num_threads()
    E.hidden_states(model, tok, PROMPTS[:2], num_threads=1, progress=False)
    assert torch.get_num_threads() == before
    for bad, match in ((dict(layers=[5]), "layers"), (dict(layers="some"), "layers"),
                       (dict(batch_size=0), "batch_size"), (dict(num_threads=0), "num_threads"),
                       (dict(max_length=0), "max_length")):
        with pytest.raises(ValueError, match=match):
            E.hidden_states(model, tok, PROMPTS[:2], progress=False, **bad)
    with pytest.raises(ValueError, match="empty"):
        E.hidden_states(model, tok, [], progress=False)
    with pytest.raises(ValueError, match="list of strings"):
        E.hidden_states(model, tok, "one prompt", progress=False)
    cut = E.hidden_states(model, tok, PROMPTS[:1], max_length=3, progress=False)
    same = E.hidden_states(model, tok, ["this film"], add_special_tokens=True, progress=False)
    assert cut.shape == same.shape


def test_extract_dataset_and_chat(tok, tmp_path):
    from empirical.llm.datasets import ConceptDataset

    model = tiny_model("llama", seed=7)
    ds = ConceptDataset("toy", ["a great movie", "bad film", "the city"], [1, 0, 1], "review : {text} .")
    A = E.extract_dataset(model, tok, ds, cache=tmp_path, progress=False)
    ref = E.hidden_states(model, tok, ds.prompts, progress=False)
    np.testing.assert_allclose(A, ref, atol=1e-5)
    C = E.extract_dataset(model, tok, ds, cache=tmp_path, chat=True, progress=False)
    assert np.abs(np.asarray(C) - A).max() > 1e-3  # chat wrapping changes the input
    assert len(list(tmp_path.glob("toy-*.npy"))) == 2


_PROP_MODEL = {}


@settings(max_examples=15, deadline=None)
@given(batch_size=st.integers(1, 8), max_tokens=st.integers(1, 64), seed=st.integers(0, 10**6),
       share=st.booleans())
def test_order_and_batching_invariance(batch_size, max_tokens, seed, share):
    """Any batch size / token budget / prompt order gives the same per-prompt states."""
    if not _PROP_MODEL:
        _PROP_MODEL["m"] = tiny_model("qwen2", seed=8)
        _PROP_MODEL["tok"] = tiny_tokenizer()
        _PROP_MODEL["ref"] = E.hidden_states(_PROP_MODEL["m"], _PROP_MODEL["tok"], PROMPTS, layers="all",
                                             batch_size=1, share_prefix=False, progress=False)
    perm = np.random.default_rng(seed).permutation(len(PROMPTS))
    H = E.hidden_states(_PROP_MODEL["m"], _PROP_MODEL["tok"], [PROMPTS[i] for i in perm], layers="all",
                        batch_size=batch_size, max_batch_tokens=max_tokens, share_prefix=share, progress=False)
    np.testing.assert_allclose(H, _PROP_MODEL["ref"][:, perm], atol=1e-4, rtol=0)


def test_concurrent_extractors_share_one_entry(tok, tmp_path):
    """Two processes asking for the same entry: the second waits on the lock and reuses the result."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from empirical.testing import tiny_model, tiny_tokenizer\n"
        "from empirical.llm._extract import hidden_states\n"
        f"P = {PROMPTS!r}\n"
        "H = hidden_states(tiny_model('llama', seed=9), tiny_tokenizer(), P * 6, cache=sys.argv[1], label='c',"
        " batch_size=2, progress=False)\n"
        "print(float(np.asarray(H).sum()))\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    assert outs[0][0] == outs[1][0]
    assert len(list(tmp_path.glob("c-*.npy"))) == 1 and not list(tmp_path.glob("c-*.partial.npy"))
    assert not list(tmp_path.glob("c-*.rows.npz"))
    H = E.hidden_states(tiny_model("llama", seed=9), tok, PROMPTS * 6, cache=tmp_path, label="c", progress=False)
    assert float(np.asarray(H).sum()) == float(outs[0][0])


def test_default_token_budget_follows_the_models_device(monkeypatch):
    """512 padded tokens per pass on CPU, 16384 on an accelerator (docs/gpu.md: 512 made a GPU 3.2x slower); the
    default reaches the batching, and an explicit value still wins."""
    import torch
    assert E.default_max_batch_tokens(torch.device("cpu")) == 512
    assert E.default_max_batch_tokens(torch.device("cuda", 0)) == E.default_max_batch_tokens("mps") == 16384
    seen = []
    real = E.length_batches

    def spy(order, token_ids, batch_size, max_batch_tokens, offset, pad=None):
        seen.append(max_batch_tokens)
        return real(order, token_ids, batch_size, max_batch_tokens, offset, pad)

    monkeypatch.setattr(E, "length_batches", spy)
    model, tok = tiny_model("llama", seed=0, n_layers=2), tiny_tokenizer()
    E.hidden_states(model, tok, PROMPTS[:3], progress=False)
    monkeypatch.setitem(E.MAX_BATCH_TOKENS, "cpu", 16384)  # the default is read per call from the model's device
    E.hidden_states(model, tok, PROMPTS[:3], progress=False)
    E.hidden_states(model, tok, PROMPTS[:3], progress=False, max_batch_tokens=7)
    assert seen == [512, 16384, 7]
    with pytest.raises(ValueError, match="max_batch_tokens"):
        E.hidden_states(model, tok, PROMPTS[:3], progress=False, max_batch_tokens=0)


@pytest.mark.parametrize("kind", ["llama", "gpt2", "bert"])
def test_length_buckets_give_the_same_states_with_few_shapes(tok, kind):
    """Batches padded to the bucket ladder (the accelerator default) give the exact-length states up to float
    rounding, and a dataset then meets a handful of (batch, length) shapes instead of one per batch."""
    from empirical.testing import tiny_encoder

    model = tiny_encoder(seed=8) if kind == "bert" else tiny_model(kind, seed=8)
    prompts = [" ".join(PROMPTS[k % len(PROMPTS)] for k in range(1 + i % 5)) for i in range(24)]

    def run(bucket):
        shapes = []
        h = decoder_blocks(model)[0].register_forward_pre_hook(
            lambda m, a, kw: shapes.append((a[0] if a else kw["hidden_states"]).shape[1]), with_kwargs=True)
        H = E.hidden_states(model, tok, prompts, layers="all", batch_size=4, progress=False, bucket_lengths=bucket)
        h.remove()
        return H, set(shapes[1:] if kind != "bert" else shapes)  # a decoder's first pass is the shared prefix

    (exact, exact_lengths), (bucketed, lengths) = run(False), run(True)
    np.testing.assert_allclose(bucketed, exact, atol=2e-5)
    assert all(E.bucket_length(length) == length for length in lengths)
    assert len(lengths) < len(exact_lengths)


def test_float16_cache_storage_halves_the_entry_and_keeps_the_states_to_float16_rounding(tok, tmp_path):
    model = tiny_model("llama", seed=9)
    exact = E.hidden_states(model, tok, PROMPTS, layers="all", progress=False)
    half = ExtractionCache(tmp_path, storage="float16")
    H = E.hidden_states(model, tok, PROMPTS, layers="all", cache=half, label="h", progress=False)
    assert H.dtype == np.float16
    np.testing.assert_allclose(H.astype(np.float32), exact, rtol=2 ** -10, atol=1e-6)
    full = E.hidden_states(model, tok, PROMPTS, layers="all", cache=ExtractionCache(tmp_path), label="h",
                           progress=False)
    assert full.dtype == np.float32  # another key: the two storages never share an entry
    sizes = sorted(p.stat().st_size for p in tmp_path.glob("h-*.npy"))
    assert len(sizes) == 2 and sizes[0] < 0.6 * sizes[1]
    again = E.hidden_states(model, tok, PROMPTS, layers="all", cache=half, label="h", progress=False)
    np.testing.assert_array_equal(again, H)  # reloaded, checksum verified
    with pytest.raises(ValueError, match="storage must be one of"):
        ExtractionCache(tmp_path, storage="bfloat16")


def test_float16_storage_refuses_states_beyond_its_range(tok, tmp_path):
    import torch

    model = tiny_model("llama", seed=9)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(1e9)  # embeddings (layer 0) far beyond 65504
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # one error with its reason, not a warning before it
        with pytest.raises(ValueError, match="beyond float16's range.*float32"):
            E.hidden_states(model, tok, PROMPTS, layers="all", cache=ExtractionCache(tmp_path, storage="float16"),
                            label="big", progress=False)
