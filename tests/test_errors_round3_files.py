"""Reliability round 3, files (issue 24, part A): hostile inputs around files, grouped by pattern.

A1 an output that is (or aliases) an input is refused by every writer that reads files;
A2 names that collide after normalisation never share a file (and a valid file is never called damaged);
A3 the hidden-state cache identifies a model directory by the content of its files;
A4 the table reader refuses ambiguity, naming file, column, row and value;
A5 every file error names the file (and field); a failed write names the file being written;
A6 model loading and the default data directory fail with one clear error.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical import cli
from empirical.common import files
from empirical.probes._concept_vectors import ConceptVectors, LinearProbe
from empirical.probes._persistence import load_concept_vectors, save_concept_vectors

ROOT = Path(__file__).resolve().parents[1]


def _run(argv, capsys):
    code = cli.main(argv)
    return code, capsys.readouterr().err


def _vectors():
    rng = np.random.default_rng(0)
    return ConceptVectors({layer: LinearProbe(rng.standard_normal(32), 0.1, test_accuracy=0.8) for layer in (1, 2, 3)},
                          model="tiny")


def _fingerprint(paths):
    return {str(p): Path(p).read_bytes() for p in paths}


# ----------------------------------------------------------------------------- A1 outputs aliasing inputs
def _alias(kind, target: Path, scratch: Path) -> str:
    """A spelling of ``target``: the path itself, a relative path through '..', a symlink or a hard link."""
    if kind == "same":
        return str(target)
    if kind == "dotdot":
        return str(scratch / ".." / target.parent.name / target.name)
    link = scratch / f"link_{kind}_{target.name}"
    (os.symlink if kind == "symlink" else os.link)(target, link)
    return str(link)


ALIASES = ["same", "dotdot", "symlink", "hardlink"]


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
@pytest.mark.parametrize("which", [".safetensors", ".json"])
@pytest.mark.parametrize("kind", ALIASES)
def test_export_refuses_to_overwrite_its_own_probe_file(tmp_path, capsys, kind, which, fmt):
    if fmt == "gguf":
        pytest.importorskip("gguf")
    saved = tmp_path / "pair"
    saved.mkdir()
    files = save_concept_vectors(saved / "probes_reviews", _vectors())
    before = _fingerprint(files)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = _alias(kind, Path(files[0] if which == ".safetensors" else files[1]), scratch)
    code, err = _run(["export", "--probe-file", files[1], "--format", fmt, "--out", out], capsys)
    assert code == 2 and "refusing to write --out" in err and "--probe-file" in err
    assert _fingerprint(files) == before
    assert load_concept_vectors(files[0]).layers == [1, 2, 3]


def test_export_default_name_keeps_every_dot_of_the_probe_file(tmp_path, capsys):
    """Two tables reviews.v1 / reviews.v2 give probes_reviews.v1 / .v2; their exports must not share a name."""
    for version in ("v1", "v2"):
        save_concept_vectors(tmp_path / f"probes_reviews.{version}", _vectors())
        assert _run(["export", "--probe-file", str(tmp_path / f"probes_reviews.{version}"),
                     "--format", "safetensors"], capsys)[0] == 0
    assert sorted(p.name for p in tmp_path.glob("*_directions.safetensors")) == [
        "probes_reviews.v1_directions.safetensors", "probes_reviews.v2_directions.safetensors"]


def _table_copy(cli_setup, directory: Path, name: str) -> Path:
    root, _ = cli_setup
    directory.mkdir(parents=True, exist_ok=True)
    table = directory / name
    text = (root / "reviews.tsv").read_text()
    if name.endswith(".json"):
        rows = [line.split("\t") for line in text.splitlines()[1:]]
        text = json.dumps([{"text": t, "label": int(y)} for t, y in rows])
    elif name.endswith(".csv"):
        text = text.replace("\t", ",")
    table.write_text(text)
    return table


def _base_with_table(base, table):
    args = list(base)
    args[args.index("--table") + 1] = str(table)
    return args


# command, the output name (in --out) that collides with the table, the table's own name
COMMAND_COLLISIONS = {
    "probe writes probe_summary.csv": ("probe", "probe_summary.csv", "probe_summary.csv"),
    "steer writes steer_metrics.csv": ("steer", "steer_metrics.csv", "steer_metrics.csv"),
    "extract writes extract_summary.json": ("extract", "extract_summary.json", "extract_summary.json"),
    "stability output hard-linked to the table": ("stability", "stability_reviews.csv", "reviews.tsv"),
    "sweep output a symlink to the table": ("sweep", "sweep_reviews_L2_table.csv", "reviews.tsv"),
    "steer selected output a symlink to the table": ("steer", "steer_selected.csv", "reviews.tsv"),
}


@pytest.mark.parametrize("case", sorted(COMMAND_COLLISIONS))
def test_commands_refuse_an_output_that_is_their_table_before_any_work(cli_setup, capsys, monkeypatch, tmp_path, case):
    command, output, table_name = COMMAND_COLLISIONS[case]
    out = tmp_path / "out"
    if output == table_name:
        table = _table_copy(cli_setup, out, table_name)
    else:
        table = _table_copy(cli_setup, tmp_path / "data", table_name)
        out.mkdir()
        (os.link if "hard" in case else os.symlink)(table, out / output)
    before = table.read_bytes()
    monkeypatch.setattr(cli, "_load_model", lambda *a, **k: pytest.fail("the work started"))
    argv = [command, *_base_with_table(cli_setup[1], table), "--out", str(out)]
    if command == "sweep":
        argv += ["--layer", "2"]
    if command == "steer":  # a user's table has no answer pair of its own
        argv += ["--answer-words", "Yes,No"]
    code, err = _run(argv, capsys)
    assert code == 2 and "refusing to write --out" in err and "--table" in err, err
    assert table.read_bytes() == before


def test_refuse_overwriting_inputs_directory_and_missing_paths(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with pytest.raises(ValueError, match="the same directory"):
        files.refuse_overwriting_inputs([("--out", tmp_path / "." / "data")], [("--data-dir", data)])
    files.refuse_overwriting_inputs([("--out", tmp_path / "new")],
                                    [("--data-dir", data), ("--table", tmp_path / "gone")])


def _paper_figures(argv):
    return subprocess.run([sys.executable, "-m", "paper_figures", *argv], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)


def _fake_run(out: Path):
    (out / "figures").mkdir(parents=True)
    (out / "tables").mkdir()
    (out / "RESULTS.md").write_text("# results\n![fig](figures/accuracy_differences.png)\n")
    (out / "figures" / "accuracy_differences.png").write_bytes(b"full resolution figure")
    return _fingerprint([out / "RESULTS.md", out / "figures" / "accuracy_differences.png"])


@pytest.mark.parametrize("where", ["out itself", "out/figures", "symlink to out"])
def test_publish_refuses_to_overwrite_the_run(tmp_path, where):
    from paper_figures.publish import publish

    out = tmp_path / "run"
    before = _fake_run(out)
    target = {"out itself": out, "out/figures": out / "figures", "symlink to out": tmp_path / "link"}[where]
    if where == "symlink to out":
        os.symlink(out, target)
    with pytest.raises(ValueError, match="refusing to write --publish"):
        publish(out, target)
    assert _fingerprint(before) == before


@pytest.mark.parametrize("case", ["--out is the data dir", "--publish is the data dir", "--publish is --out"])
def test_paper_figures_refuses_output_folders_that_are_inputs(tmp_path, case):
    data = tmp_path / "data"
    data.mkdir()
    (data / "cities.csv").write_text("statement,label\n")
    out = tmp_path / "run"
    argv = {"--out is the data dir": ["--out", str(data)],
            "--publish is the data dir": ["--out", str(out), "--publish", str(data)],
            "--publish is --out": ["--out", str(out), "--publish", str(tmp_path / "." / "run")]}[case]
    proc = _paper_figures([*argv, "--data-dir", str(data), "--results-only", "--no-progress"])
    assert proc.returncode == 2 and "refusing to write" in proc.stderr, proc.stderr
    assert sorted(p.name for p in data.iterdir()) == ["cities.csv"]


# ----------------------------------------------------------------------------- A2 names colliding after normalisation
@pytest.fixture(scope="module")
def tiny():
    from empirical.testing import tiny_model, tiny_tokenizer

    return tiny_model("llama", seed=0, n_layers=2), tiny_model("llama", seed=1, n_layers=2), tiny_tokenizer()


@pytest.mark.parametrize("labels", [("reviews.v2", "reviews.v3"), ("reviews.v2.tsv", "reviews.v2.csv"),
                                    ("a.b", "a.c.d")])
def test_cache_labels_with_dots_never_share_files(tmp_path, tiny, labels):
    from empirical.llm._extract import hidden_states

    model_a, model_b, tok = tiny
    first = np.array(hidden_states(model_a, tok, ["a good film", "a bad film"], cache=tmp_path, label=labels[0],
                                   progress=False))
    second = np.array(hidden_states(model_b, tok, ["a good film", "a bad film"], cache=tmp_path, label=labels[1],
                                    progress=False))
    again = np.array(hidden_states(model_a, tok, ["a good film", "a bad film"], cache=tmp_path, label=labels[0],
                                   progress=False))
    assert not np.allclose(first, second) and np.array_equal(first, again)
    assert len(list(tmp_path.glob("*.npy"))) == 2 and all(label in " ".join(p.name for p in tmp_path.glob("*.npy"))
                                                          for label in labels)


def test_cache_short_name_held_by_another_key_is_not_called_damaged(tmp_path, tiny):
    """A finished entry of another key under this entry's short name (a 20-hex-digit prefix collision, forged
    here) is left alone: the new entry takes its full-key name."""
    from empirical.llm._cache import ExtractionCache
    from empirical.llm._extract import hidden_states

    model, _, tok = tiny
    hidden_states(model, tok, ["a good film"], cache=tmp_path, label="x", progress=False)
    (npy,) = tmp_path.glob("x-*.npy")
    meta_file = npy.with_name(npy.name.removesuffix(".npy") + ".json")
    info = json.loads(meta_file.read_text())
    other = dict(info, key="f" * 64)
    meta_file.write_text(json.dumps(other))  # now it is 'another key's entry' at our short name
    before = _fingerprint([npy, meta_file])
    H = hidden_states(model, tok, ["a good film"], cache=ExtractionCache(tmp_path), label="x", progress=False)
    assert H.shape[1] == 1 and _fingerprint([npy, meta_file]) == before
    assert len(list(tmp_path.glob("x-*.npy"))) == 2


@pytest.mark.parametrize("keys", [("1", "01"), ("1", "\u0661"), ("0", "00")])
def test_import_directions_refuses_block_indices_that_normalise_to_one(tmp_path, keys):
    from safetensors.numpy import save_file

    from empirical.probes._interop import import_directions

    save_file({k: np.ones(4, dtype=np.float32) * (i + 1) for i, k in enumerate(keys)}, tmp_path / "d.safetensors")
    with pytest.raises(ValueError, match=r"d\.safetensors.*not a 0-based block index"):
        import_directions(tmp_path / "d.safetensors")


def test_sha256sums_listing_a_file_twice_or_with_dot_slash(tmp_path):
    from empirical.common.files import sha256_file
    from empirical.llm.datasets import _registry

    (tmp_path / "cities.csv").write_text("statement,label\na,1\nb,0\n")
    digest = sha256_file(tmp_path / "cities.csv")
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  ./cities.csv\n")
    assert _registry._check_file(tmp_path, "cities.csv", verify=True)[1] == digest
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  cities.csv\n{'0' * 64}  cities.csv\n")
    with pytest.raises(ValueError, match="listed twice with different sums"):
        _registry._check_file(tmp_path, "cities.csv", verify=True)


# ----------------------------------------------------------------------------- A5 every file error names the file
DATA = Path(__file__).resolve().parent / "data"


def _saved_pair(tmp_path):
    st, js = save_concept_vectors(tmp_path / "cv", _vectors())
    return Path(st), Path(js)


DAMAGED_JSON = {  # name -> (transform of the metadata text, words the message must hold besides the file)
    "NaN value": (lambda t: t.replace('"n_features": 32', '"n_features": NaN'), ["n_features", "NaN"]),
    "Infinity value": (lambda t: t.replace('"n_features": 32', '"n_features": -Infinity'), ["n_features"]),
    "overflowing float": (lambda t: t.replace('"n_features": 32', '"n_features": 1e999'), ["n_features", "overflows"]),
    "5000-digit integer": (lambda t: t.replace('"n_features": 32', '"n_features": ' + "9" * 5000), ["digits"]),
    "deep nesting": (lambda t: t.replace('"n_features": 32', '"n_features": ' + "[" * 100000 + "]" * 100000),
                     ["nested too deeply"]),
    "duplicate key": (lambda t: t.replace('"n_features": 32', '"n_features": 32, "n_features": 33'),
                      ["n_features", "twice"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGED_JSON))
def test_saved_metadata_json_errors_name_the_file(tmp_path, case):
    transform, words = DAMAGED_JSON[case]
    st, js = _saved_pair(tmp_path)
    js.write_text(transform(js.read_text()))
    with pytest.raises(ValueError) as info:
        load_concept_vectors(js)
    assert str(js) in str(info.value) and all(w in str(info.value) for w in words), str(info.value)


@pytest.mark.parametrize("case", sorted(DAMAGED_JSON))
def test_table_json_errors_name_the_file(tmp_path, case):
    from empirical.llm.datasets import load_table

    transform, words = DAMAGED_JSON[case]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(transform(json.dumps({"text": t, "label": y, "n_features": 32}))
                              for t, y in (("good", 1), ("bad", 0))))
    with pytest.raises(ValueError) as info:
        load_table(path, "text", "label")
    assert str(path) in str(info.value) and "line 1" in str(info.value), str(info.value)


def test_cache_metadata_nested_too_deeply_is_a_damaged_entry(tmp_path, tiny):
    from empirical.llm._cache import CacheCorruptionError
    from empirical.llm._extract import hidden_states

    model, _, tok = tiny
    hidden_states(model, tok, ["a good film"], cache=tmp_path, label="x", progress=False)
    (meta,) = tmp_path.glob("x-*.json")
    meta.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(CacheCorruptionError, match=meta.name):
        hidden_states(model, tok, ["a good film"], cache=tmp_path, label="x", progress=False)


def _format1_copy(tmp_path, edit):
    for suffix in (".safetensors", ".json"):
        (tmp_path / f"v1{suffix}").write_bytes((DATA / f"v1_concept_vectors{suffix}").read_bytes())
    meta = json.loads((tmp_path / "v1.json").read_text())
    edit(meta)
    (tmp_path / "v1.json").write_text(json.dumps(meta))
    return tmp_path / "v1.json"


FORMAT1_DAMAGE = {
    "layers missing": (lambda m: m.pop("layers"), "'layers' is missing"),
    "layers not ints": (lambda m: m.update(layers=["a", "b", "c"]), "'layers' must be"),
    "layers too few": (lambda m: m.update(layers=[1]), "'layers' has 1 entries for 3 vectors"),
    "extra a list": (lambda m: m.update(extra=[1, 2]), "'extra' must be an object"),
    "layer_convention a number": (lambda m: m.update(layer_convention=3), "'layer_convention' must be a string"),
}


@pytest.mark.parametrize("case", sorted(FORMAT1_DAMAGE))
def test_format1_metadata_errors_name_the_file_and_field(tmp_path, case):
    edit, message = FORMAT1_DAMAGE[case]
    js = _format1_copy(tmp_path, edit)
    with pytest.warns(UserWarning, match="format version 1"), pytest.raises(ValueError, match=message) as info:
        load_concept_vectors(js)
    assert "v1.json" in str(info.value)


def test_numpy_scalars_in_metadata_are_stored_as_numbers(tmp_path):
    from empirical.probes._persistence import load_probe, save_probe
    from empirical.probes._raptor import RaptorProbe

    cv = ConceptVectors({1: LinearProbe(np.ones(3), 0.0)}, metadata={"n": np.int64(3), "acc": np.float32(0.5),
                                                                      "flags": (np.bool_(True),)})
    save_concept_vectors(tmp_path / "cv", cv)
    assert load_concept_vectors(tmp_path / "cv").metadata == {"n": 3, "acc": 0.5, "flags": [True]}
    rng = np.random.default_rng(0)
    probe = RaptorProbe(Cs=[0.1, 1.0]).fit(rng.standard_normal((40, 3)), np.arange(40) % 2)
    save_probe(tmp_path / "p", probe, layer=np.int64(2), extra={"seed": np.int32(7)})
    assert load_probe(tmp_path / "p").metadata_["extra"] == {"seed": 7}


@pytest.mark.parametrize("metadata, field", [({"x": float("nan")}, "metadata.metadata.x"),
                                             ({"x": np.zeros(2)}, "metadata.metadata.x"),
                                             ({1: "a"}, "keys must be strings"),
                                             ({"p": Path("/tmp")}, "metadata.metadata.p")])
def test_metadata_json_cannot_hold_is_refused_naming_the_field(tmp_path, metadata, field):
    cv = ConceptVectors({1: LinearProbe(np.ones(3), 0.0)}, metadata=metadata)
    with pytest.raises(ValueError, match="cv.json") as info:
        save_concept_vectors(tmp_path / "cv", cv)
    assert field in str(info.value)
    assert list(tmp_path.iterdir()) == []


FSIZE_SCRIPT = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the limit then fails the write with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    {body}
""")


def _limited(body, tmp_path, *args):
    return subprocess.run([sys.executable, "-c", FSIZE_SCRIPT.format(body=body), *args], cwd=tmp_path,
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)


@pytest.mark.parametrize("writer", ["atomic_write_bytes", "write_csv", "save_concept_vectors"])
def test_a_failed_write_names_the_file_being_written(tmp_path, writer):
    body = {
        "atomic_write_bytes": "from empirical.common.files import atomic_write_bytes as w; "
                              "w(sys.argv[1], b'x' * 100000)",
        "write_csv": "import pandas as pd; from empirical.common.files import write_csv as w; "
                     "w(sys.argv[1], pd.DataFrame({'a': range(100000)}))",
        "save_concept_vectors": "import numpy as np; from empirical.probes._persistence import save_concept_vectors as "
                                "w; "
                                "w(sys.argv[1], np.ones((4, 10000)))",
    }[writer]
    target = tmp_path / "big.out"
    proc = _limited(body, tmp_path, str(target))
    assert proc.returncode != 0 and "File too large" in proc.stderr
    assert f"while writing '{target}" in proc.stderr, proc.stderr[-500:]
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failed_cache_write_names_the_partial_file(tmp_path):
    """The hidden-state cache fills a memory-mapped partial file (not an atomic write): a full disk there names
    the file too."""
    body = ("from pathlib import Path; from empirical.llm._cache import ExtractionCache; "
            "e = ExtractionCache(Path(sys.argv[1])).entry('reviews.v2', {'model': 'm'}, (3, 1000, 64)); "
            "e.open_partial()")
    proc = _limited(body, tmp_path, str(tmp_path / "cache"))
    assert proc.returncode != 0 and "File too large" in proc.stderr
    assert "while writing" in proc.stderr and "reviews.v2" in proc.stderr, proc.stderr[-500:]


def test_a_failed_cli_write_is_one_line_naming_the_file(tmp_path):
    wide = ConceptVectors({layer: LinearProbe(np.ones(4000), 0.0) for layer in (1, 2)})  # 32 KB > the 4 KB limit
    _, js = save_concept_vectors(tmp_path / "wide", wide)
    target = tmp_path / "dirs.safetensors"
    proc = _limited("from empirical.cli import main; sys.exit(main(sys.argv[1:]))", tmp_path, "export",
                    "--probe-file", str(js), "--format", "safetensors", "--out", str(target))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "File too large" in proc.stderr and str(target) in proc.stderr, proc.stderr


# ----------------------------------------------------------------------------- A4 the table reader refuses ambiguity
GOOD_ROWS = "great film\t1\nawful plot\t0\nloved it\t1\nboring\t0\n"
AMBIGUOUS_TABLES = {  # name -> (file name, content, words the error must hold besides the file name)
    "duplicated header (tsv)": ("t.tsv", "text\tlabel\tlabel\n" + GOOD_ROWS.replace("\n", "\t0\n"),
                                ["'label'", "more than once"]),
    "duplicated header (csv)": ("t.csv", "label,text,label\n0,great film,1\n1,awful plot,0\n",
                                ["'label'", "more than once"]),
    "duplicated key (jsonl)": ("t.jsonl", '{"text": "a", "label": 1, "label": 0}\n{"text": "b", "label": 0}\n',
                               ["line 1", "'label'", "twice"]),
    "label yes.0": ("t.tsv", "text\tlabel\n" + GOOD_ROWS.replace("\t1\n", "\tyes.0\n", 1),
                    ["'label'", "row 0", "'yes.0'"]),
    "label 1.5": ("t.csv", "text,label\na,1\nb,1.5\nc,0\n", ["'label'", "row 1", "'1.5'"]),
    "label 2 in json": ("t.json", json.dumps([{"text": "a", "label": 1}, {"text": "b", "label": 2}]),
                        ["'label'", "row 1", "2"]),
    "empty label": ("t.csv", "text,label\na,1\nb,\nc,0\n", ["'label'", "empty in rows [1]"]),
    "NaN label (json)": ("t.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n{"text": "c", "label": 0}\n',
                         ["'label'", "empty in rows [1]"]),
    "null label (json)": ("t.json", '[{"text": "a", "label": 1}, {"text": "b", "label": null}]',
                          ["'label'", "empty in rows [1]"]),
    "empty label with positive_label": ("t.csv", "text,label\na,pos\nb,\nc,neg\n", ["'label'", "empty in rows [1]"]),
    "quoted newline in a tsv field": ("t.tsv", 'text\tlabel\n"great\nfilm"\t1\nawful plot\t0\n',
                                      ["line 2", "1 field(s), the header has 2", "line break"]),
    "separator inside a tsv field": ("t.tsv", "text\tlabel\ngreat\tfilm\t1\nawful plot\t0\n",
                                     ["line 2", "3 field(s)"]),
    "text column is the label column": ("t.csv", "text,label\na,1\nb,0\n", ["same column"]),
}


@pytest.mark.parametrize("case", sorted(AMBIGUOUS_TABLES))
def test_table_reader_refuses_ambiguity_naming_file_column_row_value(tmp_path, case):
    from empirical.llm.datasets import load_table

    name, content, words = AMBIGUOUS_TABLES[case]
    path = tmp_path / name
    path.write_text(content)
    kwargs = {"positive_label": "pos"} if "positive_label" in case else {}
    text_column = "label" if "same column" in words else "text"
    with pytest.raises(ValueError) as info:
        load_table(path, text_column, "label", **kwargs)
    message = str(info.value)
    assert str(path) in message and all(w in message for w in words), message


@pytest.mark.parametrize("labels, expected", [(["1.0", "0.0", "TRUE", "no"], [1, 0, 1, 0]),
                                              ([1.0, 0, True, False], [1, 0, 1, 0])])
def test_table_reader_still_accepts_every_documented_spelling(tmp_path, labels, expected):
    from empirical.llm.datasets import load_table

    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"text": f"t{i}", "label": y} for i, y in enumerate(labels)]))
    assert load_table(path, "text", "label").labels.tolist() == expected


# ----------------------------------------------------------------------------- A3 model identity by content
def _save_model(model, tok, directory: Path, mtime: float):
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    for f in directory.iterdir():
        os.utime(f, (mtime, mtime))


def test_same_size_same_second_checkpoint_is_not_served_stale_states(tmp_path, tiny):
    from empirical.llm._extract import hidden_states
    from empirical.llm._models import load_model

    model_a, model_b, tok = tiny
    directory = tmp_path / "ckpt"
    prompts = ["a good film", "a bad film"]
    _save_model(model_a, tok, directory, 1_700_000_000.0)
    loaded_a, tok_a = load_model(str(directory), device="cpu")
    H_a = np.array(hidden_states(loaded_a, tok_a, prompts, cache=tmp_path / "cache", progress=False))
    _save_model(model_b, tok, directory, 1_700_000_000.0)  # another checkpoint: same size, same mtime
    loaded_b, tok_b = load_model(str(directory), device="cpu")
    H_b = np.array(hidden_states(loaded_b, tok_b, prompts, cache=tmp_path / "cache", progress=False))
    fresh = np.array(hidden_states(loaded_b, tok_b, prompts, progress=False))
    assert loaded_a.raptor_identity != loaded_b.raptor_identity
    np.testing.assert_allclose(H_b, fresh, atol=1e-5)
    assert not np.allclose(H_a, H_b)


def test_identity_does_not_depend_on_where_the_model_lies(tmp_path, tiny):
    from empirical.llm._models import load_model

    model, _, tok = tiny
    _save_model(model, tok, tmp_path / "one", 1.0)
    _save_model(model, tok, tmp_path / "two", 2.0)
    assert load_model(str(tmp_path / "one"), device="cpu")[0].raptor_identity == \
        load_model(str(tmp_path / "two"), device="cpu")[0].raptor_identity


# ----------------------------------------------------------------------------- A6 model loading, data directory
def _model_dir(tmp_path, tiny, damage):
    model, _, tok = tiny
    directory = tmp_path / "m"
    model.save_pretrained(directory)
    if damage != "no tokenizer":
        tok.save_pretrained(directory)
    weights = directory / "model.safetensors"
    if damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:-1000])
    elif damage == "garbage weights":
        weights.write_bytes(b"\xff" * 64)
    elif damage == "no config":
        (directory / "config.json").unlink()
    return directory


MODEL_DAMAGE = {
    "truncated weights": ("model.safetensors", "truncated"),
    "garbage weights": ("model.safetensors", "damaged"),
    "no tokenizer": ("tokenizer", "cannot load the tokenizer"),
    "no config": ("config.json", "has no config.json"),
}


@pytest.mark.parametrize("damage", sorted(MODEL_DAMAGE))
def test_damaged_model_directory_is_one_clear_error(tmp_path, tiny, damage):
    from empirical.llm._models import load_model

    directory = _model_dir(tmp_path, tiny, damage)
    name, words = MODEL_DAMAGE[damage]
    with pytest.raises((ValueError, FileNotFoundError)) as info:
        load_model(str(directory), device="cpu")
    assert str(directory) in str(info.value) and name in str(info.value) and words in str(info.value), str(info.value)


@pytest.mark.parametrize("name", ["/nonexistent", "./no/such/model", "~/no-such-model-dir", "no such model"])
def test_model_that_does_not_exist_says_so(name):
    from empirical.llm._models import load_model

    with pytest.raises(FileNotFoundError, match="does not exist|not a local model directory") as info:
        load_model(name, device="cpu")
    assert "alphanumeric" not in str(info.value)


def test_cli_model_that_does_not_exist(cli_setup, capsys, tmp_path):
    root, base = cli_setup
    argv = [a if a != str(root / "model") else "/nonexistent" for a in base]
    code, err = _run(["extract", *argv, "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "'/nonexistent' does not exist" in err and "Traceback" not in err


def _gpt2():
    from empirical.testing import tiny_model, tiny_tokenizer

    return tiny_model("gpt2", seed=0, n_layers=2), tiny_tokenizer()


def test_prompt_longer_than_learned_positions_is_refused_before_running(monkeypatch):
    from empirical.llm import _extract as extract

    model, tok = _gpt2()
    prompts = ["a good film", " ".join(["good"] * 300), "a bad film"]
    monkeypatch.setattr(extract, "_run", lambda *a, **k: pytest.fail("the model ran"))
    with pytest.raises(ValueError, match=r"prompt 1 has \d+ tokens, more than the 256 positions"):
        extract.hidden_states(model, tok, prompts, progress=False)


def test_prompt_longer_than_learned_positions_in_steering_and_generation():
    from empirical.llm._generation import generate
    from empirical.llm._steering import steer_prompts

    model, tok = _gpt2()
    long = " ".join(["good"] * 300)
    with pytest.raises(ValueError, match=r"prompt 0 has \d+ tokens, more than the 256 positions"):
        steer_prompts(model, tok, [long], ConceptVectors({1: LinearProbe(np.ones(32), 0.0)}), "towards",
                      progress=False)
    with pytest.raises(ValueError, match=r"max_new_tokens must be at most the model.s 256 positions .* got 200"):
        generate(model, tok, " ".join(["good"] * 100), max_new_tokens=200)


def test_max_length_keeps_a_long_prompt_within_the_positions():
    from empirical.llm._extract import hidden_states

    model, tok = _gpt2()
    H = hidden_states(model, tok, [" ".join(["good"] * 300)], max_length=256, progress=False)
    assert H.shape[1] == 1 and np.all(np.isfinite(H))


def test_default_data_directory_is_found_from_any_working_directory(tmp_path):
    from empirical.llm.datasets import _files

    expected = (ROOT / ".." / "shared" / "datasets").resolve()
    if not expected.is_dir():
        pytest.skip("no ../shared/datasets next to this checkout")
    code = "from empirical.llm.datasets import resolve_data_dir; print(resolve_data_dir())"
    env = {k: v for k, v in os.environ.items() if k != "RAPTOR_DATA"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(env, PYTHONPATH=str(ROOT)), timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == str(expected), proc.stderr
    assert _files._repo_root() == ROOT


def test_missing_default_data_directory_names_the_paths_tried(tmp_path, monkeypatch):
    from empirical.llm import datasets
    from empirical.llm.datasets import _files

    monkeypatch.delenv("RAPTOR_DATA", raising=False)
    monkeypatch.setattr(_files, "_repo_root", lambda: tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        datasets.resolve_data_dir()
    message = str(info.value)
    assert str(tmp_path / "shared" / "datasets") in message and "RAPTOR_DATA" in message and "--data-dir" in message
