"""Shared pytest configuration.

Hypothesis profiles: ``ci`` (derandomized, bounded examples, no deadline) is loaded when the
environment variable ``CI`` is set or ``HYPOTHESIS_PROFILE=ci``; ``dev`` otherwise.
"""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=50,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser):
    parser.addoption("--engine-device", default="cpu",
                     help="torch device of the batched engine's tests (tests/test_batched_engine.py): cpu, or cuda on "
                          "a GPU machine (benchmarks/gpu_check.py, docs/gpu.md)")


@pytest.fixture
def engine_device(request):
    """The device the batched engine's tests run it on (``--engine-device``, default ``cpu``)."""
    return request.config.getoption("--engine-device")


@pytest.fixture
def shared_data_dir():
    """The benchmark datasets directory (``../shared/datasets`` or ``$RAPTOR_DATA``); skips when absent."""
    from empirical.llm import datasets

    try:
        d = datasets.resolve_data_dir()
    except FileNotFoundError:
        pytest.skip("shared datasets not available")
    if not (d / "SHA256SUMS").is_file():
        pytest.skip("shared datasets not available")
    return d


POS = ["a great movie", "i loved this film", "great plot and a funny actor", "really very good film", "loved it"]
NEG = ["bad film", "awful boring movie", "i hated this plot", "the actor was bad", "boring and awful"]


@pytest.fixture(scope="module")
def cli_setup(tmp_path_factory):
    """A tiny saved model, a user table (reviews.tsv) and the CLI arguments that use them: (root, base args)."""
    pytest.importorskip("transformers")
    from empirical.testing import tiny_model, tiny_tokenizer

    root = tmp_path_factory.mktemp("cli")
    model, tok = tiny_model("llama", seed=3, n_layers=3), tiny_tokenizer()
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    rows = [(f"{t} {'.' * (k % 3)}".strip(), 1) for k in range(6) for t in POS] + \
           [(f"{t} {'!' * (k % 3)}".strip(), 0) for k in range(6) for t in NEG]
    (root / "reviews.tsv").write_text("text\tlabel\n" + "\n".join(f"{t}\t{y}" for t, y in rows))
    base = ["--table", str(root / "reviews.tsv"), "--text-column", "text", "--label-column", "label",
            "--template", "review : {text} .", "--model", str(root / "model"), "--cache-dir", str(root / "cache"),
            "--device", "cpu", "--no-progress", "--threads", "1"]
    return root, base
