"""Encoder models (BERT family) and token pooling: loading as the base encoder, the layer convention
(layer l = output of encoder block l, 0 = embeddings), last / mean / first pooling against the
model's own hidden states, pooling in the cache key, and steering refusing encoders."""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import _extract as E, _generation as G, _steering as S
from empirical.llm._hooks import model_kind
from empirical.llm._models import load_model
from empirical.probes import ConceptVectors, LinearProbe
from empirical.testing import tiny_encoder, tiny_model, tiny_tokenizer

pytestmark = pytest.mark.llm

PROMPTS = ["a good film", "the plot was very boring and the actor was bad", "yes", "i loved this film ."]


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory, tok):
    d = tmp_path_factory.mktemp("bert")
    tiny_encoder(seed=1).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _reference(model, tok, pooling):
    """Pooled hidden states from the model's own output_hidden_states, one prompt at a time."""
    rows = []
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt")
        with torch.inference_mode():
            hs = model(**ids, output_hidden_states=True).hidden_states
        pick = {"last": lambda h: h[0, -1], "first": lambda h: h[0, 0], "mean": lambda h: h[0].mean(0)}[pooling]
        rows.append([pick(h).numpy() for h in hs])
    return np.transpose(np.array(rows), (1, 0, 2))  # (L+1, n, p)


def test_an_encoder_folder_loads_as_the_base_encoder(encoder_dir):
    model, _ = load_model(str(encoder_dir), device="cpu")
    saved = tiny_encoder(seed=1)
    assert type(model).__name__ == "BertModel" and model.raptor_kind == "encoder" and model_kind(model) == "encoder"
    for name, tensor in saved.state_dict().items():  # every weight is the saved one: nothing newly initialized
        assert torch.equal(model.state_dict()[name], tensor), name


def test_a_decoder_folder_loads_as_a_causal_lm(tmp_path, tok):
    tiny_model("llama", seed=2).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, _ = load_model(str(tmp_path), device="cpu")
    assert type(model).__name__ == "LlamaForCausalLM" and model.raptor_kind == "decoder"


@pytest.mark.parametrize("pooling", ["mean", "first", "last"])
def test_encoder_pooling_matches_the_models_hidden_states(encoder_dir, tok, pooling):
    model, _ = load_model(str(encoder_dir), device="cpu")
    H = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, pooling=pooling, progress=False)
    np.testing.assert_allclose(H, _reference(model, tok, pooling), atol=1e-5)


def test_encoder_default_pooling_is_mean(encoder_dir, tok):
    model, _ = load_model(str(encoder_dir), device="cpu")
    np.testing.assert_array_equal(E.hidden_states(model, tok, PROMPTS, batch_size=2, progress=False),
                                  E.hidden_states(model, tok, PROMPTS, batch_size=2, pooling="mean", progress=False))


@pytest.mark.parametrize("pooling", ["mean", "first"])
def test_decoder_pooling_matches_the_models_hidden_states(tok, pooling):
    """Below the last layer (transformers returns the final-normed state as the last hidden state)."""
    model = tiny_model("qwen2", seed=3, n_layers=3)
    H = E.hidden_states(model, tok, PROMPTS, layers=[0, 1, 2], batch_size=3, pooling=pooling, progress=False)
    np.testing.assert_allclose(H, _reference(model, tok, pooling)[:3], atol=1e-5)


def test_pooling_is_part_of_the_cache_key(encoder_dir, tok, tmp_path):
    model, _ = load_model(str(encoder_dir), device="cpu")
    a = E.hidden_states(model, tok, PROMPTS, cache=tmp_path, label="enc", pooling="mean", progress=False)
    b = E.hidden_states(model, tok, PROMPTS, cache=tmp_path, label="enc", pooling="first", progress=False)
    assert len(list(tmp_path.glob("enc-*.npy"))) == 2 and not np.allclose(a, b)
    np.testing.assert_array_equal(
        E.hidden_states(model, tok, PROMPTS, cache=tmp_path, label="enc", pooling="mean", progress=False), a)


def test_bad_pooling(tok):
    with pytest.raises(ValueError, match="pooling must be one of"):
        E.hidden_states(tiny_model("llama"), tok, PROMPTS, pooling="max", progress=False)


def test_steering_says_clearly_that_it_needs_a_decoder(encoder_dir, tok):
    model, _ = load_model(str(encoder_dir), device="cpu")
    probes = ConceptVectors({1: LinearProbe(np.ones(32), 0.0)})
    with pytest.raises(ValueError, match="steering needs a decoder .*BertModel is an encoder"):
        S.steer_prompts(model, tok, PROMPTS, probes, progress=False)
    with pytest.raises(ValueError, match="generation needs a decoder"):
        G.generate(model, tok, "a good film")
