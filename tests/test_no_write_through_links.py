"""A write never follows a symbolic link it did not create (issue C09).

A link planted at any name a write uses -- the extraction cache's ``<entry>.partial.npy``, its ``.lock``, the
temporary name of every atomic writer (caches, saved probes, concept vectors, tables, figures, run records, the
publication) -- leaves the link's target byte-identical: the write either succeeds without following the link or
fails with one error naming the file."""
import importlib.util
import itertools
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

VICTIM_TEXT = b"the user's own file, outside the cache\n"


def _victim(tmp_path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    victim = outside / "precious.bin"
    victim.write_bytes(VICTIM_TEXT)
    return victim


# -- the extraction cache ---------------------------------------------------------------------------------------
SHAPE = (2, 3, 4)


def _entry(root):
    from empirical.llm._cache import ExtractionCache

    return ExtractionCache(root).entry("prompts", {"model": "m", "prompts": ["a", "b", "c"]}, SHAPE)


def _extract(entry):
    """What an extraction does with an entry: lock it, open the partial file, fill and checkpoint it, publish it."""
    with entry.lock():
        mm, rows = entry.open_partial()
        rows.record(mm, np.arange(SHAPE[1]), np.full(SHAPE, 7.0))
        entry.checkpoint(mm, rows)
        entry.finish(mm, rows)
    return entry.load()


@pytest.mark.parametrize("planted", ["partial", "partial over a resumable .npy", "dangling partial"])
def test_a_link_at_the_partial_file_is_replaced_never_written_through(tmp_path, planted):
    from empirical.llm._cache import DIGEST_BYTES

    victim = _victim(tmp_path)
    entry = _entry(tmp_path / "cache")
    entry.path.parent.mkdir(parents=True)
    if planted == "partial over a resumable .npy":  # the old resume memory-mapped the link's target r+
        np.save(victim, np.zeros(SHAPE, np.float32))
        np.savez(entry.rows_path, done=np.zeros(SHAPE[1], bool), digests=np.zeros((SHAPE[1], DIGEST_BYTES), np.uint8))
    before = victim.read_bytes()
    created = tmp_path / "outside" / "created.npy"
    entry.partial_path.symlink_to(created if planted == "dangling partial" else victim)
    warned = pytest.warns(RuntimeWarning, match="damaged; starting the extraction")
    with warned if "resumable" in planted else _nothing():
        got = _extract(entry)
    assert victim.read_bytes() == before  # the link's target is untouched ...
    assert not created.exists()  # ... and nothing is created through a dangling link
    assert not entry.partial_path.exists() and not entry.path.is_symlink()
    np.testing.assert_array_equal(got, np.full(SHAPE, 7.0, np.float32))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_link_at_the_lock_is_refused_naming_it(tmp_path):
    entry = _entry(tmp_path / "cache")
    entry.path.parent.mkdir(parents=True)
    created = tmp_path / "outside" / "created.lock"
    created.parent.mkdir()
    entry.lock_path.symlink_to(created)
    with pytest.raises(OSError, match="symbolic link") as info:
        _extract(entry)
    assert str(entry.lock_path) in str(info.value)
    assert not created.exists()  # the old open(..., "a+") created the link's target


def test_hidden_states_extraction_never_writes_through_a_planted_partial_file(tmp_path):
    """The entry point of ``raptor extract``: the extraction of a tiny model into a cache whose entry has a link
    planted at its ``.partial.npy`` writes the cache, not the link's target."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from empirical.llm import _extract as E
    from empirical.testing import tiny_model, tiny_tokenizer

    model, tok = tiny_model("gpt2", seed=3), tiny_tokenizer()
    prompts = ["a great movie", "bad", "the dog and the cat"]
    reference = E.hidden_states(model, tok, prompts, layers="all", cache=tmp_path / "first", label="r",
                                progress=False)
    (name,) = [p.name for p in (tmp_path / "first").glob("r-*.npy")]
    victim = _victim(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / name.replace(".npy", ".partial.npy")).symlink_to(victim)
    got = E.hidden_states(model, tok, prompts, layers="all", cache=cache, label="r", progress=False)
    assert victim.read_bytes() == VICTIM_TEXT
    np.testing.assert_array_equal(got, reference)
    assert (cache / name).is_file() and not (cache / name).is_symlink()


# -- every atomic writer ------------------------------------------------------------------------------------------
#: Endings of every temporary name a writer asks for (grep "atomic_path(" / "atomic_file(").
SUFFIXES = (".tmp", ".npy", ".npz", ".json", ".csv", ".png", ".pdf", ".safetensors", ".gguf", ".sha256", ".md",
            ".txt")


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """Make the first temporary name every writer tries ``.<target>.PLANTED<suffix>`` and plant a link to the
    victim there for each target named by ``plant(dir, *names)``."""
    victim = _victim(tmp_path)
    real = tempfile._get_candidate_names

    def names():
        return itertools.chain(["PLANTED"], real())

    monkeypatch.setattr(tempfile, "_get_candidate_names", names)

    def plant(folder, *targets):
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for target in targets:
            for suffix in SUFFIXES:
                link = folder / f".{target}.PLANTED{suffix}"
                if not os.path.lexists(link):
                    link.symlink_to(victim)
        return folder

    yield plant
    assert victim.read_bytes() == VICTIM_TEXT


def test_the_atomic_helpers_create_their_temporaries_exclusively(tmp_path, planted):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from empirical.common.files import (
        atomic_file,
        atomic_path,
        atomic_write_bytes,
        atomic_write_text,
        save_figure,
        write_checksum,
        write_csv,
        write_json,
    )

    d = planted(tmp_path / "out", "a.bin", "b.txt", "c.json", "d.csv", "e.png", "f.npy", "g.bin", ".d.csv.sha256")
    assert atomic_write_bytes(d / "a.bin", b"1").read_bytes() == b"1"
    assert atomic_write_text(d / "b.txt", "2").read_text() == "2"
    write_json(d / "c.json", {"x": 1})
    write_csv(d / "d.csv", pd.DataFrame({"x": [1]}))
    write_checksum(d / "d.csv")
    fig = plt.figure()
    save_figure(fig, d / "e.png")
    plt.close(fig)
    with atomic_path(d / "f.npy", suffix=".npy") as tmp:
        np.save(tmp, np.ones(3))
    with atomic_file(d / "g.bin") as fh:
        fh.write(b"3")
    assert (d / "g.bin").read_bytes() == b"3" and np.load(d / "f.npy").sum() == 3
    assert not [p for p in d.iterdir() if p.is_file() and not p.is_symlink() and "PLANTED" in p.name]


def test_saved_probes_vectors_and_exports_create_their_temporaries_exclusively(tmp_path, planted):
    from empirical.probes import ConceptVectors, RaptorProbe
    from empirical.probes._interop import export_control_vector, export_directions
    from empirical.probes._persistence import save_concept_vectors, save_probe

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 5)), np.repeat([0, 1], 20)
    probe = RaptorProbe().fit(X, y)
    d = planted(tmp_path / "probes", "p.json", "p.safetensors", "v.json", "v.safetensors", "c.gguf",
                "e.safetensors")
    save_probe(d / "p", probe)
    save_probe(d / "p", probe)  # a second save keeps the previous array file beside it meanwhile
    vectors = ConceptVectors.from_directions({2: rng.normal(size=5), 3: rng.normal(size=5)}, model="tiny")
    save_concept_vectors(d / "v", vectors)
    if importlib.util.find_spec("gguf") is not None:  # the [llm] extra (the floors environment runs without it)
        export_control_vector(d / "c.gguf", vectors)
    export_directions(d / "e.safetensors", vectors)


def test_paper_figures_outputs_create_their_temporaries_exclusively(tmp_path, planted):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from paper_figures import output

    out = tmp_path / "run"
    planted(out / "tables", "t.csv", ".t.csv.sha256", "t.md", "r.json", ".r.json.sha256")
    planted(out / "figures", "f.png", "f.pdf")
    output.save_table(pd.DataFrame({"x": [1.0]}), out, "t")
    output.save_json({"a": 1}, out, "r")
    fig = plt.figure()
    output.save_figure(fig, out, "f")
    plt.close(fig)
    assert output.load_table(out, "t")["x"].tolist() == [1.0]
