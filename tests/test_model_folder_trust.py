"""A model folder is one trust unit (empirical.llm._model_folder): its config is checked against the weights' headers
and bounded before anything is allocated, every file a load reads lies inside the folder and is part of the cache
identity, and each refusal is one error naming the file (and the config field).  Grouped by pattern."""
import json
import os
import pickle
import shutil
import tracemalloc

import pytest

pytest.importorskip("transformers")

from empirical import cli  # noqa: E402
from empirical.llm import _models as models  # noqa: E402


@pytest.fixture
def folder(cli_setup, tmp_path):
    """A copy of the CLI fixture's tiny saved llama (3 layers, hidden 32, 4 heads, 2 key-value heads, 100 words)."""
    root, _ = cli_setup
    dest = tmp_path / "model"
    shutil.copytree(root / "model", dest)
    return dest


def _edit_config(folder, **fields):
    cfg = json.loads((folder / "config.json").read_text())
    for key, value in fields.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.fixture
def never_built(monkeypatch):
    """Fails the test if the load reaches transformers (config parsing or model construction)."""
    import transformers

    def fail(*args, **kwargs):
        pytest.fail("the load reached transformers before the folder was refused")

    for name in ("AutoConfig", "AutoModelForCausalLM", "AutoModel"):
        monkeypatch.setattr(getattr(transformers, name), "from_pretrained", fail)


def _cli(folder, cli_setup, tmp_path, capsys):
    _, base = cli_setup
    argv = list(base)
    argv[argv.index("--model") + 1] = str(folder)
    code = cli.main(["extract", *argv, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.strip()]


# --- S07: the config is bounded and checked against the weights' headers before anything is allocated ----------------

@pytest.mark.parametrize("field, value, message", [
    ("num_hidden_layers", 1_000_000, r"num_hidden_layers = 1000000 is not an integer in \[1, 1024\]"),
    ("num_hidden_layers", 500, r"num_hidden_layers = 500 does not match the weights \(model.safetensors\), "
                               r"which hold 3 layers"),
    ("vocab_size", 5000, r"vocab_size = 5000 does not match the weights .* embed 100 tokens"),
    ("num_attention_heads", 8, r"num_attention_heads = 8 does not match the weights .* queries to 32"),
    ("num_key_value_heads", 4, r"num_key_value_heads = 4 does not match the weights .* keys to 16"),
])
def test_config_asking_for_more_than_its_weights_is_refused_before_allocation(folder, never_built, field, value,
                                                                              message):
    _edit_config(folder, **{field: value})
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=rf"model config '.*config.json': {message}"):
            models.load_model(folder, device="cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # headers only, no tensor or block built (the one JSON reader's read(cap + 1) buffer is a transient 64 MiB);
    # the load this refuses grew past 4 GB
    assert peak < 128 * 1024**2


def test_config_asking_for_more_than_pickled_weights_can_hold_is_refused(folder, never_built):
    # .bin headers cannot be read without unpickling: the config's size is bounded by the weight files' size
    import torch
    from safetensors.torch import load_file

    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    _edit_config(folder, num_hidden_layers=1000, intermediate_size=1 << 20)
    with pytest.raises(ValueError, match=r"model config '.*config.json': num_hidden_layers = 1000, hidden_size = 32, "
                                         r"intermediate_size = 1048576, .* ask for about 1.01e\+11 parameters, more "
                                         r"than its weight files \(\d+ bytes\) can hold"):
        models.load_model(folder, device="cpu")


@pytest.mark.parametrize("weights", ["safetensors", "pickled tensors"])
def test_within_bounds_config_of_its_weights_still_loads(folder, weights):
    if weights == "pickled tensors":
        import torch
        from safetensors.torch import load_file

        torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    model, _ = models.load_model(folder, device="cpu")
    assert models.num_layers(model) == 3


# --- S10, S11: a config's fields are checked in one place; one error names config.json and the field ------------------

@pytest.mark.parametrize("value", [0, -1, "3", 2.5, True, [3]])
def test_layer_count_that_is_not_a_positive_integer_names_the_field(folder, never_built, value):
    _edit_config(folder, num_hidden_layers=value)
    with pytest.raises(ValueError, match=r"model config '.*config.json': num_hidden_layers = .* is not an integer"):
        models.load_model(folder, device="cpu")


@pytest.mark.parametrize("head_dim, message", [
    (None, r"hidden_size = 30 is not a multiple of num_attention_heads = 4 \(and no head_dim is given\)"),
    (8, r"hidden_size = 30 does not match the weights .* hidden size 32"),
])
def test_hidden_size_not_a_multiple_of_the_heads_is_one_error(folder, never_built, head_dim, message):
    _edit_config(folder, hidden_size=30, head_dim=head_dim)
    with pytest.raises(ValueError, match=rf"model config '.*config.json': {message}"):
        models.load_model(folder, device="cpu")


@pytest.mark.parametrize("fields, field", [({"num_hidden_layers": 0}, "num_hidden_layers"),
                                           ({"hidden_size": 30, "head_dim": None}, "hidden_size")])
def test_cli_prints_one_line_naming_config_json_and_the_field(folder, cli_setup, tmp_path, capsys, fields, field):
    _edit_config(folder, **fields)
    code, lines = _cli(folder, cli_setup, tmp_path, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert "config.json" in lines[0] and field in lines[0] and "decoder blocks" not in lines[0]


@pytest.mark.parametrize("fields, message", [
    ({"rms_norm_eps": "x"},
     r"model config '.*config.json' is refused by transformers \(TypeError: Field 'rms_norm_eps'"),
    ({"rope_parameters": {"rope_type": "no-such-rope"}},
     r"cannot build model '.*model' from its config '.*config.json' \(KeyError: 'no-such-rope'\)"),
])
def test_config_that_transformers_refuses_is_one_error_naming_config_json(folder, fields, message):
    # fields this module does not check: transformers' config validation (a wrapped TypeError), model construction
    _edit_config(folder, **fields)
    with pytest.raises(ValueError, match=message) as info:
        models.load_model(folder, device="cpu")
    assert info.value.__cause__ is None and info.value.__suppress_context__


# --- S12: every file a load reads lies inside the folder, and is part of the cache identity ---------------------------

def _move_weights_behind_index(folder, shard_name):
    from safetensors import safe_open

    shard = folder / shard_name
    shard.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(folder / "model.safetensors", shard)
    with safe_open(str(shard), "pt") as f:
        names = list(f.keys())
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {},
                                                                     "weight_map": {n: shard_name for n in names}}))
    return shard


def test_index_naming_weights_outside_the_folder_is_refused(folder, never_built):
    _move_weights_behind_index(folder, "../outside/weights.safetensors")
    with pytest.raises(ValueError, match=r"model file '.*outside/weights.safetensors' \(named by "
                                         r"'.*model.safetensors.index.json'\) resolves outside the model folder"):
        models.load_model(folder, device="cpu")


def test_weights_linked_from_outside_the_folder_are_refused(folder, tmp_path, never_built):
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(folder / "model.safetensors", outside)
    (folder / "model.safetensors").symlink_to(outside)
    with pytest.raises(ValueError, match=r"model file '.*model/model.safetensors' resolves outside the model folder"):
        models.load_model(folder, device="cpu")


def test_every_shard_an_index_names_is_in_the_cache_identity(folder):
    shard = _move_weights_behind_index(folder, "shards/weights.safetensors")
    model, _ = models.load_model(folder, device="cpu")
    first = model.raptor_identity
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # another weight value, same size and header
    shard.write_bytes(bytes(data))
    assert models._identity_from_path(folder, None) != first


def test_hub_snapshot_links_into_its_own_repository_are_accepted(folder, tmp_path):
    from empirical.llm._model_folder import check_model_folder

    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot, blobs = repo / "snapshots" / "abc123", repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for f in folder.iterdir():
        shutil.copy(f, blobs / f.name)
        (snapshot / f.name).symlink_to(os.path.join("..", "..", "blobs", f.name))
    check_model_folder(snapshot)
    with pytest.raises(ValueError, match="resolves outside the model folder"):  # the repository is the bound
        (snapshot / "tokenizer.json").unlink()
        (snapshot / "tokenizer.json").symlink_to(folder / "tokenizer.json")
        check_model_folder(snapshot)


# --- #108: a malicious pytorch_model.bin is refused unrun, in one line naming the file --------------------------------

class _Evil:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickled_weights_are_one_line_naming_the_file(folder, cli_setup, tmp_path, capsys):
    import torch

    marker = tmp_path / "code-ran"
    (folder / "model.safetensors").unlink()
    torch.save({"model.embed_tokens.weight": _Evil(marker)}, folder / "pytorch_model.bin", pickle_protocol=2)
    code, lines = _cli(folder, cli_setup, tmp_path, capsys)
    assert not marker.exists()
    assert code == 2 and len(lines) == 1, lines
    assert "pytorch_model.bin" in lines[0] and "refused unrun" in lines[0] and "GLOBAL" in lines[0]
    assert "Traceback" not in lines[0]
    with pytest.raises(ValueError, match=r"weights file '.*pytorch_model.bin' of model .* refused unrun") as info:
        models.load_model(folder, device="cpu")
    assert not isinstance(info.value, pickle.UnpicklingError) and not marker.exists()
