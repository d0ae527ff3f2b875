"""Storage of the hidden-state cache and of the command lines' outputs (issue 52), grouped by pattern.

- C01: float16 storage refuses states it would flush to zero or to subnormal numbers (more than
  ``FLOAT16_UNDERFLOW_MAX`` of a layer's nonzero values) before storing anything, naming ``--cache-dtype``, the
  layer and the fraction (it used to store zeros and the probe blamed "constant columns").
- C02: NaN or infinite hidden states are one error naming the layer and saying NaN (or infinite), without a numpy
  warning (it used to be "All-NaN slice" and "beyond float32's range (largest |h| = nan)").
- D01: the partial file is reserved on disk before it is memory-mapped (free space checked, ``posix_fallocate``),
  so a full disk is one error naming the cache directory, the bytes needed and free, never a SIGBUS; the entry
  stays resumable and its lock is released (the ``.lock`` file removed).
- One writer per output: the command lines hold a lock on each output while they run
  (``files.output_lock``, the same lock as the cache's, ``files.exclusive_lock``); a second writer is refused.
"""
import errno
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from empirical.common import files
from empirical.common.files import LockHeldError, exclusive_lock, output_lock

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["a great movie", "bad", "the dog and the cat", "what is this", "a film", "i loved it"]


def _llm():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from empirical.llm import _extract as E
    from empirical.testing import tiny_model, tiny_tokenizer

    return torch, E, tiny_model, tiny_tokenizer


def _scaled_model(scale):
    """A tiny llama whose every layer's state is its token embedding at the scale ``scale`` (the blocks' output
    projections are zero, so each block passes its input on)."""
    torch, _, tiny_model, _ = _llm()
    model = tiny_model("llama", seed=0, n_layers=2)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb.copy_(torch.randn(emb.shape, generator=torch.Generator().manual_seed(0)) * scale)
        for block in model.model.layers:
            block.self_attn.o_proj.weight.zero_()
            block.mlp.down_proj.weight.zero_()
    return model


def _files(directory: Path) -> list:
    return sorted(p.name for p in directory.rglob("*")) if directory.exists() else []


# ----------------------------------------------------------------------------------------------- C01 float16 underflow
def test_float16_storage_refuses_states_it_would_flush_to_zero_before_caching_anything(tmp_path):
    _, E, _, tiny_tokenizer = _llm()
    from empirical.llm._cache import ExtractionCache

    model, tok = _scaled_model(1e-9), tiny_tokenizer()
    with pytest.raises(ValueError) as info:
        E.hidden_states(model, tok, PROMPTS, cache=ExtractionCache(tmp_path / "c16", storage="float16"),
                        progress=False, label="tiny")
    message = str(info.value)
    for part in ("layer 0", "--cache-dtype float16", "100.0%", "float32", "flushed to zero"):
        assert part in message, message
    assert _files(tmp_path / "c16") == []  # nothing cached: no entry, no partial file, no lock
    # float32 storage keeps them exactly (what the probe needs)
    H = E.hidden_states(model, tok, PROMPTS, cache=ExtractionCache(tmp_path / "c32"), progress=False, label="tiny")
    np.testing.assert_array_equal(H, E.hidden_states(model, tok, PROMPTS, progress=False))
    assert 1e-11 < np.abs(np.asarray(H)).max() < 1e-8


def test_float16_storage_keeps_ordinary_states():
    from empirical.llm._cache import FLOAT16_UNDERFLOW_MAX, check_storable

    rng = np.random.default_rng(0)
    states = rng.standard_normal((3, 64, 256)).astype(np.float32)  # ~5e-5 of them below float16's smallest normal
    np.testing.assert_allclose(check_storable(states, np.float16), states, rtol=1e-3, atol=1e-4)
    # the rule's boundary: a layer with more than FLOAT16_UNDERFLOW_MAX of its nonzero values that small is refused
    n = states[1].size
    for fraction, refused in ((FLOAT16_UNDERFLOW_MAX / 2, False), (FLOAT16_UNDERFLOW_MAX * 2, True)):
        tiny = states.copy()
        flat = tiny[1].reshape(-1)
        flat[: int(fraction * n)] = 1e-7
        if refused:
            with pytest.raises(ValueError, match=r"layer 1 .*--cache-dtype float16\): 2\.0% of its nonzero"):
                check_storable(tiny, np.float16)
        else:
            check_storable(tiny, np.float16)
    # a narrow layer in a one-prompt batch: one small value is 3 % of 32, not yet evidence (at least 8 are needed)
    narrow = np.ones((1, 1, 32), np.float32)
    narrow[0, 0, :7] = 1e-7
    check_storable(narrow, np.float16)
    narrow[0, 0, 7] = 1e-7
    with pytest.raises(ValueError, match=r"25\.0% of its nonzero values \(8 of 32"):
        check_storable(narrow, np.float16)
    # the layer named is the caller's
    with pytest.raises(ValueError, match="layer 7 "):
        check_storable(np.full((2, 1, 16), 1e-9, np.float32), np.float16, layers=[7, 6])
    with pytest.raises(ValueError, match="layer 3 are beyond float16's range .*--cache-dtype float16"):
        check_storable(np.full((1, 1, 4), 1e5, np.float32), np.float16, layers=[3])


# ------------------------------------------------------------------------------------------ C02 NaN / inf hidden states
@pytest.mark.parametrize("cached", ["float32 cache", "float16 cache", "no cache"])
def test_nan_hidden_states_are_one_error_naming_the_layer(tmp_path, cached):
    torch, E, tiny_model, tiny_tokenizer = _llm()
    from empirical.llm._cache import ExtractionCache

    model = tiny_model("llama", seed=0, n_layers=3)
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight.fill_(float("nan"))  # layer 2 (output of block 2) on: NaN
    cache = None if cached == "no cache" else ExtractionCache(tmp_path, storage=cached.split()[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "All-NaN slice encountered", no overflow warning
        with pytest.raises(ValueError) as info:
            E.hidden_states(model, tiny_tokenizer(), PROMPTS, layers="all", cache=cache, progress=False)
    message = str(info.value)
    assert "layer 2 " in message and "NaN" in message and "range" not in message and "nan)" not in message, message
    assert _files(tmp_path) == []


def test_infinite_hidden_states_are_named_as_such():
    from empirical.llm._cache import check_hidden_finite

    states = np.zeros((3, 2, 4), np.float32)
    states[2, 1, 0] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"layer 12 are infinite \(\+-inf\) in 1 of 8 values") as info:
            check_hidden_finite(states, layers=[10, 11, 12])
    assert "NaN" not in str(info.value)
    states[2, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"layer 12 are NaN in 1 of 8 values \(and \+-inf in 1\)"):
        check_hidden_finite(states, layers=[10, 11, 12])


# ------------------------------------------------------------------------------------------------------ D01 a full disk
Usage = namedtuple("Usage", "total used free")


def _entry(root):
    from empirical.llm._cache import ExtractionCache

    return ExtractionCache(root).entry("prompts", {"model": "m"}, (3, 40, 16))


def test_a_full_disk_is_one_error_before_the_partial_file_is_mapped(tmp_path, monkeypatch):
    """The free space is checked before the partial file is created and mapped (a write into a sparse map on a full
    disk was a SIGBUS, exit 135, leaving .partial.npy, .rows.npz and .lock)."""
    _, E, tiny_model, tiny_tokenizer = _llm()
    monkeypatch.setattr(files.shutil, "disk_usage", lambda path: Usage(10**9, 10**9 - 1000, 1000))
    cache = tmp_path / "cache"
    with pytest.raises(OSError) as info:
        E.hidden_states(tiny_model("llama", seed=0, n_layers=2), tiny_tokenizer(), PROMPTS, cache=cache,
                        progress=False)
    assert info.value.errno == errno.ENOSPC
    message = str(info.value)
    assert str(cache) in message and "bytes needed" in message and "1,000 free" in message, message
    assert len(message.splitlines()) == 1
    assert _files(cache) == []  # no partial file, no row record, no lock left behind
    monkeypatch.undo()
    E.hidden_states(tiny_model("llama", seed=0, n_layers=2), tiny_tokenizer(), PROMPTS, cache=cache, progress=False)


def test_a_failed_reservation_leaves_the_entry_resumable_and_the_lock_free(tmp_path, monkeypatch):
    entry = _entry(tmp_path)
    with entry.lock():
        mm, rows = entry.open_partial()
        rows.record(mm, np.arange(10), np.ones((3, 10, 16)))
        entry.checkpoint(mm, rows)
        del mm
    assert entry.partial_path.stat().st_blocks * 512 >= entry.partial_path.stat().st_size  # reserved, not sparse

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError, match="not enough free space in .*bytes needed") as info:
        with entry.lock():
            entry.open_partial()
    assert info.value.errno == errno.ENOSPC and str(tmp_path) in str(info.value)
    assert entry.partial_path.exists() and entry.rows_path.exists() and not entry.lock_path.exists()
    with exclusive_lock(entry.lock_path, wait=False):  # released
        pass
    monkeypatch.undo()
    with entry.lock():
        mm, rows = entry.open_partial()  # resumes: the ten rows written before are kept
        assert rows.done.sum() == 10 and np.all(np.asarray(mm[:, :10]) == 1)
        rows.record(mm, np.arange(10, 40), np.full((3, 30, 16), 2.0))
        entry.finish(mm, rows)
    assert entry.load()[:, 10:].min() == 2.0 and _files(tmp_path) == sorted([entry.path.name, entry.meta_path.name])


def test_a_file_system_without_fallocate_still_gets_a_full_partial_file(tmp_path, monkeypatch):
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    entry = _entry(tmp_path)
    with entry.lock():
        mm, rows = entry.open_partial()
        rows.record(mm, np.arange(40), np.ones((3, 40, 16)))
        entry.finish(mm, rows)
    assert entry.load().shape == (3, 40, 16)


def test_a_disk_that_fills_during_reservation_is_named_too(tmp_path, monkeypatch):
    """Space checked, then taken by someone else before the reservation: the same error."""
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    entry = _entry(tmp_path)
    with pytest.raises(OSError, match="not enough free space"):
        with entry.lock():
            entry.open_partial()
    assert _files(tmp_path) == []


# ------------------------------------------------------------------------------------------ one writer of one output
def test_two_threads_writing_one_output_do_not_both_succeed(tmp_path):
    target = tmp_path / "table.csv"
    held, release, outcome = threading.Event(), threading.Event(), {}

    def first():
        with output_lock(target, "--out"):
            files.atomic_write_text(target, "first")
            held.set()
            release.wait(10)
        outcome["first"] = "wrote"

    thread = threading.Thread(target=first)
    thread.start()
    assert held.wait(10)
    with pytest.raises(LockHeldError) as info:
        with output_lock(tmp_path / "." / "table.csv", "--out"):  # another spelling of the same output
            files.atomic_write_text(target, "second")
    release.set()
    thread.join(10)
    message = str(info.value)
    assert "--out" in message and "table.csv" in message and f"process {os.getpid()}" in message, message
    assert target.read_text() == "first" and outcome == {"first": "wrote"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]  # the lock file is gone
    with output_lock(target, "--out"):  # and free
        pass


def test_the_cache_lock_waits_and_excludes(tmp_path):
    """The waiting form (the cache's): every holder is alone, also while holders remove the lock file on release."""
    lock, state, errors = tmp_path / "entry.lock", {"n": 0, "inside": 0}, []

    def worker():
        for _ in range(30):
            with exclusive_lock(lock):
                state["inside"] += 1
                if state["inside"] != 1:
                    errors.append("two holders")
                n = state["n"]
                time.sleep(0.0005)
                state["n"] = n + 1
                state["inside"] -= 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and state["n"] == 120 and not lock.exists()


SWEEP = textwrap.dedent("""
    import os, sys, time
    import numpy as np, pandas as pd
    import cgmt.__main__ as entry

    def slow(*a, **k):  # holds its output until the test creates the file sys.argv[2] ("-": at once)
        deadline = time.time() + 120
        while sys.argv[2] != "-" and not os.path.exists(sys.argv[2]) and time.time() < deadline:
            time.sleep(0.05)
        return pd.DataFrame({"kappa": 1.0, "delta": 2.0, "lam": [0.1], "accuracy": [float(sys.argv[3])],
                             "success": True})

    entry.sweep = slow
    sys.exit(entry.main(["sweep", "--deltas", "2", "--lams", "0.1", "--kappas", "1", "--out", sys.argv[1],
                         "--no-progress"]))
""")


def test_two_processes_writing_one_output_do_not_both_succeed(tmp_path):
    """Two ``cgmt sweep --out s.csv`` at once: the second is refused naming the option, the file and the first's
    process; the first writes its table (they used to both print success, and the file held one of them)."""
    out = tmp_path / "s.csv"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    release = tmp_path.parent / f"{tmp_path.name}-release"
    first = subprocess.Popen([sys.executable, "-c", SWEEP, str(out), str(release), "0.6"], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".s.csv.lock"
    deadline = time.time() + 60
    while not lock.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert lock.exists(), first.communicate()
    try:
        second = subprocess.run([sys.executable, "-c", SWEEP, str(out), "-", "0.9"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120)
    finally:
        release.write_text("go")
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    errors = [line for line in second.stderr.splitlines() if "error:" in line]
    assert second.returncode == 2 and len(errors) == 1, second.stderr
    assert "--out" in errors[0] and str(out) in errors[0] and f"process {first.pid}" in errors[0], errors
    assert "0.6" in out.read_text() and "0.9" not in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]


def test_raptor_export_locks_the_name_it_derives_from_the_probe_file(tmp_path, capsys):
    """``raptor export`` without ``--out`` writes ``<probe file>_directions.safetensors``: an output too."""
    from empirical import cli
    from empirical.probes import ConceptVectors, LinearProbe, save_concept_vectors

    save_concept_vectors(tmp_path / "cv", ConceptVectors({2: LinearProbe(np.ones(8), 0.0)}))
    derived = tmp_path / "cv_directions.safetensors"
    argv = ["export", "--probe-file", str(tmp_path / "cv.json"), "--format", "safetensors"]
    with output_lock(derived, "--out"):
        assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "--out (derived from --probe-file)" in err and "being written by" in err and not derived.exists(), err
    assert cli.main(argv) == 0 and derived.exists() and not list(tmp_path.glob(".*.lock"))


def test_raptor_extract_with_float16_storage_of_tiny_states_is_one_line_naming_the_option(tmp_path, cli_setup,
                                                                                         capsys):
    _, _, _, tiny_tokenizer = _llm()
    from empirical import cli

    root, base = cli_setup
    model_dir = tmp_path / "tiny-states"
    _scaled_model(1e-9).save_pretrained(model_dir)
    tiny_tokenizer().save_pretrained(model_dir)
    argv = [a if a != str(root / "model") else str(model_dir) for a in base]
    argv = [a if a != str(root / "cache") else str(tmp_path / "cache") for a in argv]
    capsys.readouterr()  # saving the model prints a progress bar
    assert cli.main(["extract", *argv, "--cache-dtype", "float16", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "raptor extract: error:" in err, err
    assert "--cache-dtype float16" in err and "layer 0" in err and "%" in err and "float32" in err, err
    assert not list((tmp_path / "cache").rglob("*.npy")) and not list((tmp_path / "cache").rglob("*.lock"))
    assert cli.main(["extract", *argv, "--out", str(tmp_path / "out")]) == 0  # float32 storage holds them


def test_a_directory_output_in_new_folders_is_locked_and_leaves_no_empty_folders(tmp_path):
    """Two commands creating the same new directory output (its parent folders missing) do not both run: the lock's
    folders are created to hold it, and removed at release when the command wrote nothing into them."""
    from empirical.common.files import LockHeldError, output_lock

    out = tmp_path / "new" / "deeper" / "run"
    with output_lock(out, "--out", kind="directory") as held:
        assert held is not None and held.parent == out.parent
        with pytest.raises(LockHeldError, match="--out"):
            with output_lock(tmp_path / "new" / "." / "deeper" / "run", "--out", kind="directory"):
                pass
    assert not (tmp_path / "new").exists()
    with output_lock(out, "--out", kind="directory"):
        out.mkdir()  # the command wrote its output
    assert out.is_dir() and not list(out.parent.glob("*.lock"))
