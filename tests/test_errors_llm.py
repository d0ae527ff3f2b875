"""Bad inputs and damaged files for ``empirical.llm``: datasets and checksums, the hidden-state cache
(partial and finished entries), model loading and steering. Each gives a clear error naming the
argument or file, or a correct result; damaged bytes are never trusted."""
from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from empirical.llm import datasets as D

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import _edits as ED, _extract as E, _generation as G, _steering as S
from empirical.llm._cache import CacheCorruptionError
from empirical.llm._gcav import GcavRule
from empirical.llm._models import load_model
from empirical.probes import ConceptVectors, LinearProbe
from empirical.testing import tiny_model, tiny_tokenizer

pytestmark = pytest.mark.llm

PROMPTS = ["a great movie", "bad film", "i loved this film and the actor", "awful", "the plot was fine",
           "what a boring story"]


# ------------------------------------------------------------------------------------------ tables
TABLES = {
    # name: (file name, bytes, expected message)
    "empty csv": ("t.csv", b"", r"t\.csv' is empty"),
    "header only": ("t.csv", b"text,label\n", r"t\.csv' has a header but no rows"),
    "not utf-8": ("t.csv", b"text,label\n\xff\xfe bad,1\nok,0\n", r"t\.csv' is not UTF-8 text"),
    "truncated json": ("t.json", b'[{"text": "a", "label": 1}, {"text": ', r"t\.json' is not valid JSON: .* line 1"),
    "json scalar": ("t.json", b"42", r"t\.json' must hold a non-empty list of records"),
    "broken jsonl line": ("t.jsonl", b'{"text": "a", "label": 1}\n{"text": "b", "lab\n',
                          r"t\.jsonl', line 2: not valid JSON"),
    "jsonl non-object": ("t.jsonl", b'{"text": "a", "label": 1}\n[1, 2]\n', r"t\.jsonl', line 2: each line must be"),
    "empty jsonl": ("t.jsonl", b"\n\n", r"t\.jsonl' holds no records"),
    "missing label column": ("t.csv", b"text,stars\na,1\nb,0\n", r"label_column 'label' is not a column of .*t\.csv"),
    "three labels": ("t.csv", b"text,label\na,0\nb,1\nc,2\n", r"column 'label' must hold binary labels"),
    "empty text": ("t.csv", b"text,label\na,0\n ,1\n", r"column 'text' is empty in rows \[1\]"),
    "one class": ("t.csv", b"text,label\na,1\nb,1\n", r"single class"),
}


@pytest.mark.parametrize("case", sorted(TABLES))
def test_bad_table_names_the_file(tmp_path, case):
    name, content, message = TABLES[case]
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=message):
        D.load_table(tmp_path / name, "text", "label")


def test_missing_table_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        D.load_table(tmp_path / "nope.csv", "text", "label")


def test_concept_dataset_rejects_non_binary_labels():
    with pytest.raises(ValueError, match=r"dataset 'toy': labels must be 0/1 .*got 2$"):
        D.ConceptDataset("toy", ["a", "b", "c"], [0, 1, 2])


# ------------------------------------------------------------------------------ named datasets, sums
@pytest.fixture
def cities_dir(tmp_path, shared_data_dir):
    shutil.copy(shared_data_dir / "cities.csv", tmp_path / "cities.csv")
    return tmp_path


def test_three_label_named_dataset_is_rejected_at_load(cities_dir):
    text = (cities_dir / "cities.csv").read_text().splitlines()
    header, first = text[0], text[1]
    cols = header.split(",")
    values = first.split(",")
    values[cols.index("label")] = "2"
    (cities_dir / "cities.csv").write_text("\n".join([header, ",".join(values), *text[2:]]))
    with pytest.raises(ValueError, match=r"cities\.csv'.*label column 'label' must hold 0/1, got \['2'\]"):
        D.load("cities", cities_dir, verify=False)


def test_named_dataset_without_its_column(cities_dir):
    (cities_dir / "cities.csv").write_text("sentence,label\na,1\nb,0\n")
    with pytest.raises(ValueError, match=r"cities\.csv' has no column 'statement'"):
        D.load("cities", cities_dir, verify=False)


@pytest.mark.parametrize("sums, message", [
    (b"garbage\n", r"SHA256SUMS', line 1: expected"),
    (b"", r"SHA256SUMS' lists no file"),
    (b"\xff\xfe", r"SHA256SUMS' is not UTF-8"),
    (b"0" * 64 + b"  cities.csv\n", r"checksum mismatch for .*cities\.csv"),
])
def test_a_bad_checksum_file_never_turns_verification_off(cities_dir, sums, message):
    (cities_dir / "SHA256SUMS").write_bytes(sums)
    with pytest.raises(ValueError, match=message):
        D.load("cities", cities_dir)
    assert len(D.load("cities", cities_dir, verify=False)) == 1496  # verify=False is the one way around it


def test_an_incomplete_checksum_file_falls_back_to_the_builtin_sums(cities_dir):
    (cities_dir / "SHA256SUMS").write_text("0" * 64 + "  other.csv\n")
    assert len(D.load("cities", cities_dir)) == 1496  # verified against the built-in sum
    with open(cities_dir / "cities.csv", "a") as f:
        f.write("Extra row,1\n")
    with pytest.raises(ValueError, match="checksum mismatch"):
        D.load("cities", cities_dir)


# ------------------------------------------------------------------------------------- the cache
@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", seed=11, n_layers=2)


@pytest.fixture(scope="module")
def reference(model, tok):
    return E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, progress=False)


def _interrupted_partial(model, tok, cache_dir, monkeypatch, after_batches=2):
    """Run an extraction that stops after ``after_batches`` batches (checkpointing every batch)."""
    ticks = iter(range(0, 10**6, 10))
    monkeypatch.setattr(E.time, "perf_counter", lambda: next(ticks))
    seen = []
    block = E.decoder_blocks(model)[0]

    def interrupt(m, a, kw):
        seen.append(1)
        if len(seen) == after_batches + 1:  # the shared-prefix pass, then the batches
            raise KeyboardInterrupt

    handle = block.register_forward_pre_hook(interrupt, with_kwargs=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            E.hidden_states(model, tok, PROMPTS, batch_size=2, cache=cache_dir, label="p", progress=False)
    finally:
        handle.remove()
        monkeypatch.undo()
    partial = next(cache_dir.glob("p-*.partial.npy"))
    with np.load(next(cache_dir.glob("p-*.rows.npz"))) as saved:
        done = saved["done"].copy()
    return partial, done


def test_damaged_partial_rows_are_recomputed_not_published(model, tok, reference, tmp_path, monkeypatch):
    partial, done = _interrupted_partial(model, tok, tmp_path, monkeypatch)
    assert 0 < done.sum() < len(PROMPTS)
    row = int(np.flatnonzero(done)[0])
    mm = np.load(partial, mmap_mode="r+")
    mm[1, row, :] = 123.0  # damage a finished row
    mm.flush()
    del mm
    with pytest.warns(RuntimeWarning, match="1 row\\(s\\) of the partial cache file .* fail their checksum"):
        H = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, cache=tmp_path, label="p",
                            progress=False)
    np.testing.assert_allclose(H, reference, atol=1e-5)
    assert not list(tmp_path.glob("p-*.partial.npy"))


def test_damaged_progress_file_restarts_the_entry(model, tok, reference, tmp_path, monkeypatch):
    _interrupted_partial(model, tok, tmp_path, monkeypatch)
    next(tmp_path.glob("p-*.rows.npz")).write_bytes(b"not a zip file")
    with pytest.warns(RuntimeWarning, match="damaged; starting the extraction of this entry over"):
        H = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, cache=tmp_path, label="p",
                            progress=False)
    np.testing.assert_allclose(H, reference, atol=1e-5)


def test_null_byte_in_the_partial_header_restarts_the_entry(model, tok, reference, tmp_path, monkeypatch):
    partial, _ = _interrupted_partial(model, tok, tmp_path, monkeypatch)
    data = bytearray(partial.read_bytes())
    data[12] = 0  # inside the header's dict: Python >= 3.12's tokenizer refuses it with tokenize.TokenError
    partial.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="damaged; starting the extraction of this entry over"):
        H = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, cache=tmp_path, label="p",
                            progress=False)
    np.testing.assert_allclose(H, reference, atol=1e-5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.floats(0, 1, exclude_max=True), byte=st.integers(0, 255))
def test_random_damage_to_a_partial_entry_never_reaches_the_result(model, tok, reference, tmp_path_factory,
                                                                  monkeypatch, position, byte):
    cache_dir = tmp_path_factory.mktemp("partial")
    partial, _ = _interrupted_partial(model, tok, cache_dir, monkeypatch)
    data = bytearray(partial.read_bytes())
    data[int(position * len(data))] = byte
    partial.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # whether a warning is due depends on where the damage fell
        H = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, cache=cache_dir, label="p",
                            progress=False)
    np.testing.assert_allclose(H, reference, atol=1e-5)


def _finished_entry(model, tok, cache_dir):
    E.hidden_states(model, tok, PROMPTS, batch_size=2, cache=cache_dir, label="f", progress=False)
    npy = next(p for p in cache_dir.glob("f-*.npy"))
    return npy, npy.with_suffix(".json")


@pytest.mark.parametrize("damage, message", [
    ("truncate array", "the array file cannot be read"),
    ("flip array byte", "fails its sha256 checksum"),
    ("truncate metadata", "metadata .* is not valid JSON"),
    ("metadata edited", "does not match its key"),  # (a valid other key there is another entry's: left alone)
    ("null byte in array header", "the array file cannot be read"),  # tokenize.TokenError on Python >= 3.12
])
def test_damaged_finished_entry_is_detected_and_named(model, tok, tmp_path, damage, message):
    npy, meta = _finished_entry(model, tok, tmp_path)
    if damage == "truncate array":
        npy.write_bytes(npy.read_bytes()[:-100])
    elif damage == "flip array byte":
        data = bytearray(npy.read_bytes())
        data[-7] ^= 0x40
        npy.write_bytes(bytes(data))
    elif damage == "null byte in array header":
        data = bytearray(npy.read_bytes())
        data[12] = 0  # inside the header's dict, which numpy tokenizes
        npy.write_bytes(bytes(data))
    elif damage == "truncate metadata":
        meta.write_text(meta.read_text()[:30])
    else:
        info = json.loads(meta.read_text())
        info["meta"]["n_prompts"] += 1
        meta.write_text(json.dumps(info))
    with pytest.raises(CacheCorruptionError, match=message) as info:
        E.hidden_states(model, tok, PROMPTS, batch_size=2, cache=tmp_path, label="f", progress=False)
    assert npy.name in str(info.value) and "Delete" in str(info.value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["npy", "json"]), position=st.floats(0, 1, exclude_max=True), byte=st.integers(0, 255))
def test_random_damage_to_a_finished_entry_is_always_detected(model, tok, reference, tmp_path_factory, which,
                                                             position, byte):
    cache_dir = tmp_path_factory.mktemp("finished")
    npy, meta = _finished_entry(model, tok, cache_dir)
    path = npy if which == "npy" else meta
    data = bytearray(path.read_bytes())
    i = int(position * len(data))
    if data[i] == byte:
        return
    data[i] = byte
    path.write_bytes(bytes(data))
    try:
        H = E.hidden_states(model, tok, PROMPTS, layers="all", batch_size=2, cache=cache_dir, label="f",
                            progress=False)
    except CacheCorruptionError:
        return
    assert which == "json"  # only a JSON whitespace change can pass, and then the data are the same
    np.testing.assert_allclose(H, reference, atol=1e-5)


# ----------------------------------------------------------------------------------------- models
@pytest.mark.parametrize("device, message", [("bogus", "device must be a torch device"),
                                             ("cuda:7", "not available|does not exist")])
def test_bad_device(device, message):
    with pytest.raises(ValueError, match=message):
        load_model("smollm2", device=device)


# --------------------------------------------------------------------------------------- steering
PROBES = ConceptVectors({1: LinearProbe(np.ones(32), 0.0, test_accuracy=0.7),
                         2: LinearProbe(-np.ones(32), 0.5, test_accuracy=0.8)})


@pytest.mark.parametrize("call, message", [
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], PROBES, GcavRule(tau=1.5), progress=False),
     r"tau must lie in \[0.0, 1.0\]"),
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], PROBES, GcavRule(tau=float("nan")), progress=False),
     r"tau must be finite"),
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], PROBES, GcavRule(p_target=1.0), progress=False),
     r"p_target must lie"),
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], PROBES, GcavRule(positions="first"), progress=False),
     r"positions must be 'last' or 'all', got 'first'"),
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], PROBES, "up", progress=False), r"direction must be"),
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], PROBES, 0.9, progress=False),
     r"rule must be a GcavRule or 'towards' / 'away', got float"),
    (lambda m, t: ED.gcav_steering(m, PROBES, {"direction": "away"}).__enter__(), r"rule must be a GcavRule"),
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], {}, progress=False), r"probes must be a non-empty"),
    (lambda m, t: S.steer_prompts(m, t, PROMPTS[:2], {9: PROBES[1]}, progress=False), r"probe layer must be in 1..2"),
    (lambda m, t: ED.additive_steering(m, {1: np.ones(32)}, alpha=float("nan")).__enter__(),
     r"alpha \(layer 1\) must be"),
    (lambda m, t: ED.additive_steering(m, {1: np.full(32, np.inf)}).__enter__(), r"steering vector of layer 1 must be"),
])
def test_bad_steering_arguments(model, tok, call, message):
    with pytest.raises(ValueError, match=message):
        call(model, tok)


def test_no_qualifying_layer_warns_and_is_never_silent(model, tok):
    with pytest.warns(ED.NoLayerSteeredWarning, match=r"tau=0.9 excludes 2 layer\(s\) .*0.800, at layer 2"):
        pairs = S.steer_prompts(model, tok, PROMPTS[:2], PROBES, GcavRule(tau=0.9), progress=False)
    assert len(pairs) == 0 and pairs.attrs["active_layers"] == []
    with pytest.warns(ED.NoLayerSteeredWarning):
        G.compare_generations(model, tok, PROMPTS[:1], PROBES, GcavRule(tau=0.9), max_new_tokens=2, progress=False)


def test_a_large_but_valid_probe_weight_is_steered_not_skipped(model, tok):
    """Weights of 1e60 used to overflow the norm and skip the layer silently; now the layer is steered exactly."""
    big = ConceptVectors({1: LinearProbe(np.full(32, 1e60), 0.0), 2: LinearProbe(np.ones(32), 0.0)})
    pairs = S.steer_prompts(model, tok, PROMPTS[:2], big, progress=False)
    assert pairs.attrs["active_layers"] == [1, 2] and bool(pairs["success"].all())
    with pytest.raises(ValueError, match="coef must have entries of magnitude at most"):
        LinearProbe(np.full(32, 1e200), 0.0)
