"""Shared pytest configuration.

Hypothesis profiles (``HYPOTHESIS_PROFILE``):

- ``ci`` (the default, on every machine): derandomized, 50 examples per test, no deadline.  The README's test command
  therefore draws the same examples on every run and every machine, and a newcomer's first run never meets a chance
  failure.  Monte Carlo inside tests is seeded (``np.random.default_rng(<constant>)``) for the same reason.
- ``explore``: fresh random examples (``EXPLORE_EXAMPLES``, default 500 per test; a test that sets its own
  ``max_examples`` runs ``EXPLORE_SCALE`` times its own number, default 5).  The run prints its seed in the
  header (``hypothesis seed: N``); ``--hypothesis-seed=N`` (or ``HYPOTHESIS_SEED=N``) replays it.  Every failure is
  printed as Hypothesis's "Falsifying example" with its ``@reproduce_failure`` blob and saved in the local example
  database (``.hypothesis/``), which replays it first on the next run; the developer who fixes it keeps it in the test
  as an explicit ``@example(...)``.  How to run it: docs/testing.md.
- ``dev``: Hypothesis's own random draws with 100 examples (what ``dev`` meant before ``explore`` existed).
"""
import os
import random

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
settings.register_profile(
    "explore",
    derandomize=False,
    max_examples=int(os.environ.get("EXPLORE_EXAMPLES", "500")),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile("dev", max_examples=100, deadline=None)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


def _explore_seed(config):
    """The seed of an ``explore`` run: ``--hypothesis-seed``, else ``HYPOTHESIS_SEED``, else a fresh one, chosen once
    by the controlling process and handed to xdist's workers through the environment."""
    seed = config.getoption("hypothesis_seed", default=None) or os.environ.get("HYPOTHESIS_SEED")
    if seed is None:
        seed = str(random.SystemRandom().randrange(2 ** 32))
    os.environ["HYPOTHESIS_SEED"] = str(seed)
    return int(seed)


def pytest_configure(config):
    if PROFILE == "explore":
        from hypothesis import core  # the seed hook the Hypothesis pytest plugin itself sets for --hypothesis-seed

        core.global_force_seed = _explore_seed(config)


def _scale_own_examples(items, scale):
    """In an ``explore`` run, give a test that sets its own ``max_examples`` (an expensive test, which Hypothesis lets
    override the profile) ``scale`` times its own number, so that exploration reaches it too."""
    from hypothesis import is_hypothesis_test

    default = settings.default.max_examples
    seen = set()
    for item in items:
        test = getattr(item, "obj", None)
        if test is None or id(test) in seen or not is_hypothesis_test(test):
            continue
        seen.add(id(test))
        own = test._hypothesis_internal_use_settings
        if own.max_examples != default:
            test._hypothesis_internal_use_settings = settings(own, max_examples=own.max_examples * scale)


def pytest_collection_modifyitems(config, items):
    if PROFILE == "explore":
        _scale_own_examples(items, int(os.environ.get("EXPLORE_SCALE", "5")))


def pytest_report_header(config):
    if PROFILE == "explore":
        return f"hypothesis profile: explore, hypothesis seed: {os.environ['HYPOTHESIS_SEED']} " \
               f"(replay: HYPOTHESIS_PROFILE=explore HYPOTHESIS_SEED={os.environ['HYPOTHESIS_SEED']})"
    return f"hypothesis profile: {PROFILE}"


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
