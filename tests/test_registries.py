"""The method and dataset registries: a probe method and a dataset are each defined once, and every tool reads them.

A toy method and a toy dataset are registered through the registries alone (no other module edited) and must
show up in the ``raptor`` CLI, in ``paper_figures``' method and dataset lists, in the steering read-out's answer
words and in RESULTS.md's accuracy table, glossary and protocol; unknown names are errors that list the known ones.
"""
import numpy as np
import pandas as pd
import pytest

from empirical.common.files import sha256_file
from empirical.llm import datasets
from empirical.probes import DiffMeans, _registry as methods_registry

TOY_METHOD = "ToyMeans"
TOY_DATASET = "toyreviews"
TOY_COLOR = "#123456"


def _read_toy(path):
    df = pd.read_csv(path, sep="\t")
    return pd.DataFrame({"text": df["sentence"], "label": df["positive"]})


@pytest.fixture
def toy(tmp_path):
    """A toy method and a toy dataset (a small review file), registered for one test and removed after it."""
    from conftest import NEG, POS

    rows = [(f"{t} {'.' * (k % 3)}".strip(), 1) for k in range(6) for t in POS] + \
           [(f"{t} {'!' * (k % 3)}".strip(), 0) for k in range(6) for t in NEG]
    data = tmp_path / "data"
    data.mkdir()
    (data / "toy.tsv").write_text("sentence\tpositive\n" + "\n".join(f"{t}\t{y}" for t, y in rows))
    methods_registry.register_method(
        TOY_METHOD, DiffMeans, cli_name="toy", comparisons=("accuracy", "steering"), color=TOY_COLOR,
        description="a toy copy of the difference of means", data=("train + validation", "80 %", "--"))
    datasets.register_dataset(TOY_DATASET, "toy.tsv", _read_toy, template="review : {text} .",
                              answer_words=("good", "bad"), sha256={"toy.tsv": sha256_file(data / "toy.tsv")})
    try:
        yield data
    finally:
        methods_registry.unregister_method(TOY_METHOD)
        datasets.unregister_dataset(TOY_DATASET)
    assert TOY_METHOD not in methods_registry.method_names() and TOY_DATASET not in datasets.dataset_names()


# ------------------------------------------------------------------------------------------------ unknown names
def test_unknown_method_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown probe method 'SVM'; known methods: RAPTOR \(raptor\), GCS \(gcs\), "
                                         r"xRFM \(xrfm\), DiffMeans \(diffmeans\), RAPTOR \(C = 1\) \(fixedc\), "
                                         r"LogRegCV \(lrcv\)"):
        methods_registry.get_method("SVM")
    assert methods_registry.get_method("diffmeans").name == "DiffMeans" == methods_registry.get_method("DiffMeans").name
    with pytest.raises(ValueError, match="comparison must be one of accuracy, stability, steering, got 'speed'"):
        methods_registry.method_names("speed")


def test_unknown_dataset_lists_the_known_ones():
    known = "stsa, cities, common, counterfact, hateeval, sarcasm, coinflip"
    with pytest.raises(ValueError, match=f"unknown dataset 'imdb'; known datasets: {known}"):
        datasets.get_dataset("imdb")
    with pytest.raises(ValueError, match=f"unknown dataset 'imdb'; known datasets: {known}"):
        datasets.load("imdb")


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="RAPTOR", factory=DiffMeans), "'RAPTOR' / cli_name 'raptor' is taken by 'RAPTOR'"),
    (dict(name="New", factory=DiffMeans, cli_name="gcs"), "is taken by 'GCS'"),
    (dict(name="New", factory=DiffMeans()), "factory of method 'New' must be callable"),
    (dict(name="New", factory=DiffMeans, comparisons=("speed",)), r"unknown \['speed'\]"),
    (dict(name="New", factory=DiffMeans, color="blue"), "color of method 'New' must be '#RRGGBB'"),
    (dict(name="", factory=DiffMeans), "name must be a non-empty string"),
])
def test_register_method_refuses_bad_entries(kwargs, message):
    with pytest.raises(ValueError, match=message):
        methods_registry.register_method(**kwargs)
    assert "New" not in methods_registry.method_names()


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="stsa"), "dataset name 'stsa' is taken"),
    (dict(name="New"), "name must be lower-case"),
    (dict(name="new", files=()), "files of dataset 'new' must name at least one file"),
    (dict(name="new", files="../x.csv"), "files of dataset 'new' must be file names"),
    (dict(name="new", reader="read"), "reader of dataset 'new' must be callable"),
    (dict(name="new", template="no placeholder"), "template of dataset 'new' must contain"),
    (dict(name="new", answer_words=("Yes", "yes")), "answer_words of dataset 'new' must be two different words"),
    (dict(name="new", reference_cap=0), "reference_cap of dataset 'new' must be a positive int"),
    (dict(name="new", sha256={"x.csv": "abc"}), "sha256 of dataset 'new' must map file names to 64"),
    (dict(name="new", sentiment="yes"), "sentiment of dataset 'new' must be a bool"),
])
def test_register_dataset_refuses_bad_entries(kwargs, message):
    args = dict(files="x.csv", reader=_read_toy) | kwargs
    with pytest.raises(ValueError, match=message):
        datasets.register_dataset(args.pop("name"), args.pop("files"), args.pop("reader"), **args)
    assert "new" not in datasets.dataset_names()


def test_a_reader_that_returns_no_labels_is_named(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    datasets.register_dataset("badreader", "x.csv", lambda path: pd.read_csv(path))
    try:
        with pytest.raises(ValueError, match=r"dataset 'badreader' \(.*x.csv'\): its reader must return a DataFrame "
                                             r"with columns 'text' and 'label', got \['a', 'b'\]"):
            datasets.load("badreader", tmp_path, verify=False)
    finally:
        datasets.unregister_dataset("badreader")


# ------------------------------------------------------------------------------------- the seven, as before
def test_the_shipped_entries():
    assert methods_registry.method_names() == ("RAPTOR", "GCS", "xRFM", "DiffMeans", "RAPTOR (C = 1)", "LogRegCV")
    assert methods_registry.method_names("accuracy") == ("RAPTOR", "GCS", "xRFM", "DiffMeans", "RAPTOR (C = 1)")
    fixed = methods_registry.get_method("fixedc").estimator()  # the fixed-C ablation: RAPTOR's pipeline at C = 1
    assert list(fixed.Cs) == [1.0] and fixed.refit
    assert methods_registry.method_names("stability") == ("RAPTOR", "GCS", "xRFM")
    gcs = methods_registry.get_method("GCS")
    assert gcs.estimator().n_probes == 100 and gcs.estimator(quick=True).n_probes == 20
    assert gcs.estimator(n_probes=7).n_probes == 7
    # GCAV steers with a logistic probe: every method but the direction-only xRFM (read from the estimator's class)
    assert [m for m in methods_registry.method_names() if not methods_registry.get_method(m).gcav] == ["xRFM"]
    assert datasets.dataset_names() == ("stsa", "cities", "common", "counterfact", "hateeval", "sarcasm", "coinflip")
    assert datasets.dataset_names(paper_grid=False) == ("coinflip",)
    assert datasets.get_dataset("counterfact").group_column == "subject"
    assert [n for n in datasets.dataset_names() if datasets.get_dataset(n).sentiment] == ["stsa"]  # VADER reads it
    assert datasets.answer_pairs()["stsa"] == ("Positive", "Negative")


# ------------------------------------------------------------------------------- a toy method and dataset
def test_toy_entries_reach_paper_figures_and_the_steering_read_out(toy):
    from paper_figures import claims, empirical_figures
    from paper_figures.style import method_color

    assert method_color(TOY_METHOD) == TOY_COLOR and method_color("RAPTOR (train only)") == "#666666"
    assert TOY_METHOD in empirical_figures._methods(quick=True)
    assert TOY_DATASET in datasets.dataset_names() and TOY_DATASET not in claims.PAPER_DATASETS
    ds = datasets.load(TOY_DATASET, toy)
    assert len(ds) == 60 and ds.prompts[0].startswith("review : ") and ds.max_per_class is None
    pytest.importorskip("torch")
    pytest.importorskip("transformers")  # the floors environment has torch without the [llm] extra
    from empirical.llm._answer_readout import check_answer_words

    assert check_answer_words(TOY_DATASET) == ("good", "bad")


def test_toy_method_and_dataset_in_the_results_accuracy_table(toy, tmp_path):
    from paper_figures.claims import accuracy_intervals
    from paper_figures.empirical_figures import accuracy_by_seed
    from paper_figures.output import save_table
    from paper_figures.results import write_results

    rng = np.random.default_rng(0)
    layers = pd.DataFrame([dict(dataset=name, method=method, seed=seed, layer=layer,
                                test_accuracy=0.7 + 0.2 * rng.random())
                           for name in ("stsa", TOY_DATASET) for method in ("RAPTOR", TOY_METHOD, "LogRegCV")
                           for seed in (42, 0) for layer in (1, 2, 3)])
    out = tmp_path / "run"
    save_table(accuracy_intervals(accuracy_by_seed(layers)), out, "accuracy_intervals")
    text = write_results(out).read_text()
    table = text[text.index("### Accuracy per dataset"):]
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert any(f"| {TOY_DATASET} " in r and f"| {TOY_METHOD} " in r for r in rows)  # the new dataset and method
    assert any("| stsa " in r and f"| {TOY_METHOD} " in r for r in rows)
    assert not any("LogRegCV" in r for r in rows)  # registered, but not in the accuracy comparison
    assert f"- **{TOY_METHOD}**: a toy copy of the difference of means" in text  # glossary
    assert f"| {TOY_METHOD} | train + validation | 80 % | -- |" in text  # protocol table


def test_toy_method_and_dataset_in_the_cli_help(toy, capsys):
    from empirical import cli

    for sub, words in (("probe", ("toy (ToyMeans)", TOY_DATASET)), ("steer", (TOY_METHOD, TOY_DATASET))):
        with pytest.raises(SystemExit):
            cli.main([sub, "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        assert all(w in help_text for w in words), (sub, words)


@pytest.mark.llm
def test_toy_method_on_the_toy_dataset_through_the_cli(toy, cli_setup, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from empirical import cli

    root, _ = cli_setup
    out = root / "toy_out"
    args = ["probe", "--dataset", TOY_DATASET, "--data-dir", str(toy), "--baselines", "toy", "diffmeans", "--model",
            str(root / "model"), "--no-cache", "--device", "cpu", "--no-progress", "--threads", "1", "--layers", "2,3",
            "--out", str(out)]
    assert cli.main(args) == 0
    table = pd.read_csv(out / f"probe_{TOY_DATASET}.csv")
    assert {"toy_test_accuracy", "diffmeans_test_accuracy"} <= set(table.columns) and list(table.layer) == [2, 3]
    # the toy method is a difference of means under another name: the same accuracies on the same split
    assert np.allclose(table.toy_test_accuracy, table.diffmeans_test_accuracy)
    assert cli.main([*args[:6], "svm", *args[6:]]) == 2
    assert ("unknown baseline 'svm' for --baselines; choose from gcs, xrfm, diffmeans, fixedc, lrcv, toy"
            in capsys.readouterr().err)


# ------------------------------------------------------------------------------------------------ a model family
@pytest.mark.filterwarnings("ignore::FutureWarning")  # the toy wrapper passes the cache under its older keyword
def test_a_model_family_added_through_the_hooks_module_alone():
    """A family whose blocks sit at a path the package does not know, next to another list of the same length: the
    package refuses to guess, and one ``register_block_path`` (empirical/llm/_hooks.py) makes extraction read layer l
    as the output of block l and lets steering edit it."""
    pytest.importorskip("transformers")
    import torch

    from empirical.llm import _hooks as hooks
    from empirical.llm._edits import additive_steering
    from empirical.llm._extract import hidden_states
    from empirical.testing import tiny_model, tiny_tokenizer

    class ToyFamily(torch.nn.Module):
        def __init__(self, trunk):
            super().__init__()
            self.trunk, self.config = trunk, trunk.config
            self.adapters = torch.nn.ModuleList(torch.nn.Identity() for _ in trunk.layers)  # same length, shallower

        def forward(self, *args, **kwargs):
            return self.trunk(*args, **kwargs)

    model = ToyFamily(tiny_model("llama", seed=0, n_layers=3).model).eval()
    tok = tiny_tokenizer()
    prompts = ["a good film", "a bad film", "the plot was fine"]
    with pytest.raises(ValueError, match=r"'trunk.layers', 'adapters' all have 3 entries.*register_block_path"):
        hooks.decoder_blocks(model)
    hooks.register_block_path("trunk.layers")
    try:
        assert hooks.decoder_blocks(model) is model.trunk.layers
        H = hidden_states(model, tok, prompts, layers="all", progress=False)
        assert H.shape == (4, 3, 32)
        with torch.inference_mode():  # layers 0..L-1 equal transformers' hidden states (L is the pre-norm output)
            ids = [torch.tensor([tok(p)["input_ids"]]) for p in prompts]
            reference = [model.trunk(input_ids=i, output_hidden_states=True).hidden_states for i in ids]
        for layer in range(3):
            np.testing.assert_allclose(H[layer], np.stack([r[layer][0, -1].numpy() for r in reference]), atol=1e-5)
        with additive_steering(model, {2: np.ones(32)}, alpha=3.0, positions="all"):
            steered = hidden_states(model, tok, prompts, layers="all", progress=False)
        np.testing.assert_allclose(steered[:2], H[:2], atol=1e-5)
        np.testing.assert_allclose(steered[2] - H[2], 3.0, atol=1e-4)  # h + alpha v at every position of block 2
    finally:
        hooks.unregister_block_path("trunk.layers")
    assert "trunk.layers" not in hooks.block_paths()


def test_an_encoder_family_added_through_the_hooks_module_alone():
    """An encoder family the package does not know is one ``register_encoder_type`` call: the one rule
    (``hooks.config_kind``) then calls it an encoder for ``load_model(kind="auto")`` and for steering, which refuses
    it; a causal-LM architecture of the same family stays a decoder."""
    pytest.importorskip("torch")
    from types import SimpleNamespace

    from empirical.llm import _hooks as hooks
    from empirical.llm._models import _kind_from_config

    config = SimpleNamespace(model_type="toy-encoder", architectures=["ToyEncoderModel"])
    model = SimpleNamespace(config=config)
    assert hooks.config_kind(config) == _kind_from_config(config, "auto") == hooks.model_kind(model) == "decoder"
    hooks.register_encoder_type("toy-encoder")
    try:
        assert hooks.config_kind(config) == _kind_from_config(config, "auto") == hooks.model_kind(model) == "encoder"
        with pytest.raises(ValueError, match="steering needs a decoder"):
            hooks.require_decoder(model, "steering")
        causal = SimpleNamespace(model_type="toy-encoder", architectures=["ToyEncoderForCausalLM"])
        assert hooks.config_kind(causal) == "decoder"
    finally:
        hooks.unregister_encoder_type("toy-encoder")
    assert hooks.config_kind(config) == "decoder"
    with pytest.raises(ValueError, match="model_type must be a non-blank string"):
        hooks.register_encoder_type("  ")


@pytest.mark.parametrize("path", ["", "trunk..layers", "trunk.0layers", 3])
def test_register_block_path_refuses_a_bad_path(path):
    pytest.importorskip("torch")
    from empirical.llm import _hooks as hooks

    with pytest.raises(ValueError, match="path must be a dotted attribute path"):
        hooks.register_block_path(path)
