"""Scale-out on existing engines: the sweeps run on a Dask cluster through joblib's dask backend with
no code change (same results as locally), and extraction / steering follow accelerate's dispatch of a
model's blocks across devices (here: CPU and disk offload)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import cgmt
from empirical.probes import RaptorProbe, fit_layers, stability

RNG = np.random.default_rng(0)
Y = np.arange(200) % 2
H = np.stack([RNG.standard_normal((200, 48)) + s * Y[:, None] * (np.arange(48) < 4) for s in (0.5, 1.0, 1.5)])
CS = np.logspace(-2, 1, 8)


def test_sweeps_on_a_dask_cluster_equal_the_local_run():
    joblib = pytest.importorskip("joblib")
    distributed = pytest.importorskip("dask.distributed")
    local_fit = fit_layers(H, Y, Cs=CS, progress=False)
    local_sweep = cgmt.sweep([0.5, 2.0], [0.01, 0.1, 1.0], [1.0, 2.0], progress=False)
    local_stability = stability(RaptorProbe(Cs=CS), H[1], Y, K=4)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                                  processes=True) as cluster, distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        with joblib.parallel_config(backend="dask"):
            fit = fit_layers(H, Y, Cs=CS, n_jobs=-1, progress=False)
            sweep = cgmt.sweep([0.5, 2.0], [0.01, 0.1, 1.0], [1.0, 2.0], n_jobs=-1, progress=False)
            stab = stability(RaptorProbe(Cs=CS), H[1], Y, K=4, n_jobs=-1)
    np.testing.assert_array_equal(fit.summary.test_accuracy, local_fit.summary.test_accuracy)
    np.testing.assert_array_equal(fit.summary.C, local_fit.summary.C)
    assert sweep.equals(local_sweep)
    np.testing.assert_allclose(stab.vectors, local_stability.vectors, atol=1e-12)  # BLAS threads: last bits


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPTS = ["task detect sarcasm . a good film", "task detect sarcasm . the plot was very boring",
           "task detect sarcasm . yes", "task detect sarcasm . i loved this film ."]  # shared prefix: KV-cache path


@pytest.mark.llm
def test_extraction_and_steering_follow_an_accelerate_dispatch(tmp_path):
    accelerate = pytest.importorskip("accelerate")
    from empirical.llm import _extract as E, _generation as G, _steering as S
    from empirical.probes import ConceptVectors, LinearProbe
    from empirical.testing import tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    plain = tiny_model("llama", seed=5, n_layers=4)
    device_map = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
                  "model.layers.2": "cpu", "model.layers.3": "disk", "model.norm": "cpu", "model.rotary_emb": "cpu",
                  "lm_head": "cpu"}
    dispatched = accelerate.dispatch_model(tiny_model("llama", seed=5, n_layers=4), device_map=device_map,
                                           offload_dir=str(tmp_path))
    assert any(p.device.type == "meta" for p in dispatched.parameters())  # blocks 2 and 4 live on disk
    np.testing.assert_array_equal(E.hidden_states(dispatched, tok, PROMPTS, layers="all", batch_size=2, progress=False),
                                  E.hidden_states(plain, tok, PROMPTS, layers="all", batch_size=2, progress=False))
    probes = ConceptVectors({2: LinearProbe(np.ones(32), 0.0), 4: LinearProbe(-np.ones(32), 0.2)})
    a = S.steer_prompts(plain, tok, PROMPTS, probes, progress=False)
    b = S.steer_prompts(dispatched, tok, PROMPTS, probes, progress=False)
    np.testing.assert_array_equal(a.logit_after.to_numpy(), b.logit_after.to_numpy())
    assert G.generate(dispatched, tok, PROMPTS[0], 4) == G.generate(plain, tok, PROMPTS[0], 4)


@pytest.mark.llm
def test_load_model_with_a_device_map(tmp_path):
    pytest.importorskip("accelerate")
    from empirical.llm import _extract as E
    from empirical.llm._models import load_model
    from empirical.testing import tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    tiny_model("qwen2", seed=6).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    plain, _ = load_model(str(tmp_path), device="cpu")
    device_map = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
                  "model.layers.2": "cpu", "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
    mapped, _ = load_model(str(tmp_path), device_map=device_map, offload_folder=tmp_path / "offload")
    assert mapped.hf_device_map["model.layers.1"] == "disk"
    np.testing.assert_array_equal(E.hidden_states(plain, tok, PROMPTS, progress=False),
                                  E.hidden_states(mapped, tok, PROMPTS, progress=False))
    half, _ = load_model(str(tmp_path), device_map="auto", dtype="bfloat16")
    assert next(half.parameters()).dtype == torch.bfloat16
    A, B = E.hidden_states(plain, tok, PROMPTS, progress=False), E.hidden_states(half, tok, PROMPTS, progress=False)
    assert B.dtype == np.float32 and np.abs(A - B).max() < 0.05 * np.abs(A).max()  # bf16 rounding only
