"""Trust boundary (docs/errors_and_guarantees.md, "Files from outside"): every file from outside is read by one
reader that refuses special files and over-size inputs; model folders are identified with a bounded hash.  Grouped by
pattern, named by subject."""
import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from empirical.common import files
from empirical.common.files import MAX_JSON_BYTES, check_input_file, read_input_bytes, read_json


def _fifo(path):
    os.mkfifo(path)
    return path


# --- one reader: special files are refused, never read (a FIFO would block, /dev/zero never ends) ------------------

@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "link to /dev/zero"])
def test_read_json_refuses_special_files(tmp_path, special):
    path = {"/dev/zero": "/dev/zero", "fifo": tmp_path / "m.json", "link to /dev/zero": tmp_path / "l.json"}[special]
    if special == "fifo":
        _fifo(path)
    elif special.startswith("link"):
        path.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=rf"refusing to read file '{path}': it is a (FIFO|character device), "
                                         "not a regular file"):
        read_json(path)


def test_sha256_file_refuses_a_device():
    with pytest.raises(ValueError, match="/dev/zero.*character device"):
        files.sha256_file("/dev/zero")


def test_reader_refuses_over_size_inputs_naming_the_cap(tmp_path):
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 100 + "0]")
    with pytest.raises(ValueError, match=r"refusing to read metadata '.*big.json': 203 bytes is more than"):
        read_input_bytes(path, 100, "metadata")
    with pytest.raises(ValueError, match="big.json"):
        read_json(path, cap=100)
    assert read_json(path) == [0] * 101 and MAX_JSON_BYTES == 64 << 20


def test_reader_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset file .*nope.csv' does not exist"):
        check_input_file(tmp_path / "nope.csv", None, "dataset file")


# --- S12: a saved concept-vector pair whose file links to /dev/zero is refused ---------------------------------------

@pytest.mark.parametrize("which", [".json", ".safetensors"])
def test_concept_vector_pair_with_a_file_linked_to_dev_zero_is_refused(tmp_path, which):
    from empirical import ConceptVectors, LinearProbe, load_concept_vectors, save_concept_vectors

    save_concept_vectors(tmp_path / "cv", ConceptVectors({1: LinearProbe(np.ones(4), 0.0)}, method="raptor"))
    target = tmp_path / f"cv{which}"
    target.unlink()
    target.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=rf"refusing to read .*cv{which}': it is a character device"):
        load_concept_vectors(tmp_path / "cv")


# --- datasets and imported vectors go through the same reader --------------------------------------------------------

@pytest.mark.parametrize("name", ["t.csv", "t.jsonl"])
def test_dataset_table_that_is_a_fifo_is_refused(tmp_path, name):
    from empirical.llm.datasets import load_table

    _fifo(tmp_path / name)
    with pytest.raises(ValueError, match=rf"refusing to read dataset file '.*{name}': it is a FIFO"):
        load_table(tmp_path / name, "text", "label")


def test_sha256sums_that_is_a_fifo_is_refused_not_skipped(tmp_path):
    from empirical.llm.datasets import _registry

    _fifo(tmp_path / "SHA256SUMS")
    with pytest.raises(ValueError, match="SHA256SUMS.*FIFO.*verify=False"):
        _registry._expected_sums(tmp_path)


def test_imported_directions_file_linked_to_dev_zero_is_refused(tmp_path):
    from empirical.probes._interop import import_directions

    (tmp_path / "d.safetensors").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="directions file .*d.safetensors.*character device"):
        import_directions(tmp_path / "d.safetensors")


# --- S15: a model folder's identity reads a bounded amount of a large file -------------------------------------------

class _CountingFile:
    """A file object that adds the bytes its ``read`` returns to ``counter``."""

    def __init__(self, f, counter):
        self._f, self._counter = f, counter

    def read(self, *args):
        data = self._f.read(*args)
        self._counter[0] += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self._f, name)


def test_large_sparse_model_file_is_fingerprinted_not_hashed_whole(tmp_path, monkeypatch):
    import contextlib

    from empirical.llm import _models as models

    weights = tmp_path / "model.safetensors"
    with open(weights, "wb") as f:
        f.truncate(10 * 1024**3)  # a 10 GB sparse file
    (tmp_path / "config.json").write_text("{}")
    read, hashed_whole = [0], []
    real_open_input, real_sha256_file = models.open_input, models.sha256_file

    @contextlib.contextmanager
    def counting_open_input(*args, **kwargs):
        with real_open_input(*args, **kwargs) as f:
            yield _CountingFile(f, read)

    monkeypatch.setattr(models, "open_input", counting_open_input)
    monkeypatch.setattr(models, "sha256_file", lambda path: hashed_whole.append(Path(path)) or real_sha256_file(path))
    assert models.file_fingerprint(weights).startswith("size=10737418240,mtime_ns=")
    # hashing it whole read 10 GB and took tens of seconds: the fingerprint reads three samples
    assert weights not in hashed_whole and read[0] == 3 * models.IDENTITY_SAMPLE_BYTES
    first = models._identity_from_path(tmp_path, None)
    assert weights not in hashed_whole
    with open(weights, "r+b") as f:  # a change in the last MiB (same size, same mtime) changes the identity
        f.seek(-10, os.SEEK_END)
        f.write(b"x")
    st = weights.stat()
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert models._identity_from_path(tmp_path, None) != first


def test_small_model_file_is_hashed_whole(tmp_path):
    from empirical.llm import _models as models

    path = tmp_path / "config.json"
    path.write_text('{"a": 1}')
    assert models.file_fingerprint(path) == files.sha256_file(path)


# --- model folders never run code ------------------------------------------------------------------------------------

def _folder_with_code(tmp_path, model_type="evil_model"):
    import json

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": model_type,
        "auto_map": {"AutoConfig": "configuration_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.EvilLM",
                     "AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}}))
    marker = tmp_path / "code-ran"
    for module in ("configuration_evil", "modeling_evil", "tokenization_evil"):
        (folder / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return folder, marker


def test_model_folder_with_auto_map_is_refused_without_running_its_code(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from empirical.llm._models import load_model

    folder, marker = _folder_with_code(tmp_path)
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("asked a y/N question"))
    with pytest.raises(ValueError, match=r"model '.*model' asks to run Python code from its folder .*"
                                         r"trust_remote_code=False"):
        load_model(folder)
    assert not marker.exists()


def test_every_from_pretrained_call_refuses_remote_code():
    """The pattern, where it lives: each module that calls ``from_pretrained`` passes ``NO_REMOTE_CODE``."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    bad = []
    for package in ("empirical", "paper_figures", "sims", "cgmt"):
        for path in (root / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and getattr(n.func, "attr", None) == "from_pretrained"]
            for call in calls:
                names = {ast.unparse(k.value) for k in call.keywords if k.arg is None}
                if not ({"NO_REMOTE_CODE", "kw"} & names or any(k.arg == "trust_remote_code" for k in call.keywords)):
                    bad.append(f"{path.relative_to(root)}:{call.lineno}")
                if "kw" in names and "NO_REMOTE_CODE" not in path.read_text():
                    bad.append(f"{path.relative_to(root)}:{call.lineno} (kw without NO_REMOTE_CODE)")
    assert bad == []


# --- chat templates are bounded: one ValueError naming the template ---------------------------------------------

def _tokenizer_with(template):
    pytest.importorskip("transformers")
    from empirical.testing import tiny_tokenizer

    tok = tiny_tokenizer()
    tok.chat_template = template
    tok.name_or_path = "tiny-model"
    return tok


def test_normal_chat_template_renders_as_transformers_does():
    from empirical.llm._models import apply_chat_template

    tok = _tokenizer_with("{{ bos_token }}{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} . {% endfor %}"
                          "{% if add_generation_prompt %}answer : {% endif %}")
    msgs = [{"role": "user", "content": "a good film"}]
    assert apply_chat_template(tok, ["a good film"]) == [
        tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)] == ["<bos>user : a good film . "
                                                                                         "answer : "]


@pytest.mark.parametrize("template, reason", [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     "more than 1000000 loop steps"),
    ("{% for a in 'x' * 100000 %}{% for b in 'x' * 100000 %}{% endfor %}{% endfor %}", "more than 1000000 loop steps"),
    ("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
     "builds a str of more than"),
    ("{{ 'x' * 10**9 }}", "builds a str of more than"),
    ("{{ 'x'|center(10**9) }}", "passes 1000000000 to a filter"),
    ("{{ ().__class__.__mro__ }}", "the sandbox blocks it"),
    ("{{ raise_exception('no system turns') }}", "TemplateError: no system turns"),
    ("{% for %}", "TemplateSyntaxError"),
])
def test_runaway_or_blocked_chat_template_is_one_value_error(template, reason):
    from empirical.llm._chat_templates import MAX_TEMPLATE_CHARS
    from empirical.llm._models import apply_chat_template

    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=rf"cannot render the chat template of 'tiny-model': .*{reason}"):
            apply_chat_template(_tokenizer_with(template), ["a good film"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * MAX_TEMPLATE_CHARS  # refused before it built anything large (the str asked for is 1 GB)


def test_chat_template_output_is_bounded():
    from empirical.llm._chat_templates import MAX_TEMPLATE_CHARS, render_chat_template

    many = "{% for i in range(2000) %}" + "x" * 1000 + "{% endfor %}"
    with pytest.raises(ValueError, match=f"renders more than {MAX_TEMPLATE_CHARS} characters"):
        render_chat_template(many, [])


# --- registries check what they are given ----------------------------------------------------------------------------

def test_register_dataset_refuses_a_sum_of_another_datasets_file():
    """K01: a sum for cities.csv from another dataset would replace the built-in reference sum."""
    from empirical.llm import datasets
    from empirical.llm.datasets import _registry

    before = _registry._known_sums()["cities.csv"]
    with pytest.raises(ValueError, match=r"sha256 of dataset 'mine' names \['cities.csv'\], which are not its files"):
        datasets.register_dataset("mine", "mine.csv", lambda paths: None, sha256={"cities.csv": "0" * 64})
    assert "mine" not in datasets.dataset_names() and _registry._known_sums()["cities.csv"] == before


def test_register_dataset_refuses_another_sum_for_a_file_already_summed():
    from empirical.llm import datasets

    with pytest.raises(ValueError, match=r"gives \['cities.csv'\] another checksum than dataset \['cities'\]"):
        datasets.register_dataset("mine", "cities.csv", lambda paths: None, sha256={"cities.csv": "0" * 64})
    assert "mine" not in datasets.dataset_names()


class _NoValidationFit:
    def fit(self, X, y):
        return self

    def get_params(self, deep=True):
        return {}


def test_register_method_refuses_a_fit_without_the_validation_split():
    """R01: every caller passes fit(X, y, X_val, y_val)."""
    from empirical.probes._registry import get_method, register_method

    with pytest.raises(ValueError, match=r"fit of method 'nofit' must accept fit\(X, y, X_val, y_val\).*"
                                         r"got fit\(self, X, y\)"):
        register_method("nofit", _NoValidationFit)
    with pytest.raises(ValueError, match=r"got fit\(X, y\)"):
        register_method("nofit", lambda: _NoValidationFit())
    with pytest.raises(ValueError, match="unknown"):
        get_method("nofit")


def test_register_method_quick_params_must_be_a_mapping_of_parameters():
    """R03: quick_params=[1, 2] is a TypeError naming the argument; an unknown parameter a ValueError."""
    from empirical.probes import RaptorProbe
    from empirical.probes._registry import register_method

    with pytest.raises(TypeError, match=r"quick_params of method 'q' must be a mapping .* got list \[1, 2\]"):
        register_method("q", RaptorProbe, quick_params=[1, 2])
    with pytest.raises(ValueError, match=r"quick_params of method 'q': \['no_such'\] are not parameters"):
        register_method("q", RaptorProbe, quick_params={"no_such": 1})


class _Degenerate:
    """A method whose fitted direction is zero or NaN."""

    def __init__(self, value=0.0):
        self.value = value

    def get_params(self, deep=True):
        return {"value": self.value}

    def set_params(self, **params):
        self.value = params.get("value", self.value)
        return self

    def fit(self, X, y, X_val=None, y_val=None):
        self.concept_vector_ = np.full(X.shape[1], self.value)
        return self

    def score(self, X, y):
        return 0.5


@pytest.mark.parametrize("value, what", [(0.0, "is zero"), (np.nan, "is not finite")])
def test_fit_layers_names_the_method_and_layer_of_a_degenerate_direction(value, what):
    """R02: checked right after fit, not later unnamed."""
    from empirical.probes._layers import fit_layers

    rng = np.random.default_rng(0)
    H, y = rng.standard_normal((3, 40, 5)), np.repeat([0, 1], 20)
    with pytest.raises(ValueError, match=rf"method _Degenerate fitted at layer 1: its concept_vector_ {what}"):
        fit_layers(H, y, layers=[1], estimator=_Degenerate(value))


# --- a blank is not a value: environment variables get the options' check ---------------------------------------------

@pytest.mark.parametrize("variable, call", [
    ("RAPTOR_CACHE", lambda: files.cache_root()),
    ("RAPTOR_DATA", lambda: __import__("empirical.llm.datasets", fromlist=["x"]).resolve_data_dir()),
    ("RAPTOR_SMOLLM2_WHEEL", lambda: __import__("empirical.llm._models", fromlist=["x"]).smollm2_wheel()),
])
def test_blank_path_variable_is_refused_naming_it(monkeypatch, variable, call):
    if variable == "RAPTOR_SMOLLM2_WHEEL":
        pytest.importorskip("torch")
    monkeypatch.setenv(variable, " ")
    with pytest.raises(ValueError, match=rf"environment variable {variable}=' ' is blank"):
        call()


def test_empty_cache_variable_means_unset(monkeypatch):
    monkeypatch.setenv("RAPTOR_CACHE", "")
    assert files.cache_root() == files.Path.home() / ".cache" / "raptor"


def test_every_environment_variable_is_read_through_one_rule():
    """The pattern where it lives: only empirical.common.files.env_path reads a path variable; the debug flags strip."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readers = []
    for package in ("empirical", "paper_figures", "sims", "cgmt"):
        for path in (root / package).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if ("os.environ.get(" in line or "os.getenv(" in line) and not line.lstrip().startswith("#"):
                    readers.append(f"{path.relative_to(root)}:{number}")
    # env_path; debug_requested (a flag: blank is off)
    allowed = {"empirical/common/files.py", "empirical/common/cli_errors.py"}
    assert {r.split(":")[0] for r in readers} <= allowed, readers


# --- provenance is compared: saved vectors name the model, hidden size and dataset they were fitted on ---------------

def _saved_vectors(p=32, model=None, dataset=None):
    from empirical import ConceptVectors, LinearProbe

    rng = np.random.default_rng(0)
    return ConceptVectors({layer: LinearProbe(rng.standard_normal(p), 0.0) for layer in (1, 2)}, method="raptor",
                          model=model, metadata={} if dataset is None else {"dataset": dataset})


def test_check_provenance_refuses_another_model_and_hidden_size_and_warns_on_another_dataset():
    cv = _saved_vectors(model="gpt2:sha256=abc", dataset="cities")
    with pytest.raises(ValueError, match=r"--probe-file 'p.json' was fitted on model 'gpt2:sha256=abc', but this run "
                                         r"uses model 'llama:sha256=def'"):
        cv.check_provenance("--probe-file 'p.json'", model="llama:sha256=def")
    with pytest.raises(ValueError, match="holds vectors of hidden size 32, but .* hidden size 2048"):
        cv.check_provenance("--probe-file 'p.json'", n_features=2048)
    with pytest.warns(UserWarning, match="fitted on dataset 'cities' and is used on dataset 'reviews'"):
        cv.check_provenance("--probe-file 'p.json'", dataset="reviews")
    cv.check_provenance("x", model="gpt2:sha256=abc", n_features=32, dataset="cities")  # all agree: silent
    _saved_vectors().check_provenance("x", model="any", dataset="any")  # nothing recorded: nothing to compare


def test_given_vectors_refuses_vectors_of_another_hidden_size():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")  # empirical.llm._steering_eval needs the [llm] extra
    from empirical.llm._steering_eval import given_vectors

    H, y = np.zeros((3, 10, 16)), np.repeat([0, 1], 5)
    with pytest.raises(ValueError, match="hidden size 32, but .* hidden size 16"):
        given_vectors(_saved_vectors(p=32), H, y, (np.arange(4), np.arange(4, 8), np.arange(8, 10)))


@pytest.mark.llm
@pytest.mark.parametrize("case, message", [
    ("another model", r"was fitted on model 'gpt2:sha256=0000', but this run uses model 'dir:sha256="),
    ("another hidden size", r"holds vectors of hidden size 16, but .* hidden size 32"),
])
def test_raptor_steer_refuses_another_models_probe_file(cli_setup, tmp_path, capsys, case, message):
    pytest.importorskip("torch")
    from empirical import cli, save_concept_vectors

    root, base = cli_setup
    cv = _saved_vectors(model="gpt2:sha256=0000") if case == "another model" else _saved_vectors(p=16)
    save_concept_vectors(tmp_path / "probes", cv)
    code = cli.main(["steer", *base, "--answer-words", "good,bad", "--probe-file", str(tmp_path / "probes.json"),
                     "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "probes.json" in err, err
    import re

    assert re.search(message, err), err


# --- fields have types: a JSON value of another type is refused, not turned into text -------------------------------

@pytest.mark.parametrize("ext, body", [
    ("jsonl", '{"text": "good film", "label": 1}\n{"text": 5, "label": 0}\n'),
    ("json", '[{"text": "good film", "label": 1}, {"text": ["a", "list"], "label": 0}]'),
])
def test_dataset_text_field_of_another_type_is_refused_naming_file_row_and_field(tmp_path, ext, body):
    from empirical.llm.datasets import load_table

    path = tmp_path / f"t.{ext}"
    path.write_text(body)
    with pytest.raises(ValueError, match=rf"t\.{ext}': column 'text' must hold text \(strings\), got .* in row 1 "):
        load_table(path, "text", "label")


def test_csv_text_that_looks_like_a_number_stays_text(tmp_path):
    from empirical.llm.datasets import load_table

    (tmp_path / "t.csv").write_text("text,label\ngood,1\n5,0\n")
    assert load_table(tmp_path / "t.csv", "text", "label").prompts == ["good", "5"]
