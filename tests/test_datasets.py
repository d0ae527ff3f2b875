"""Dataset loaders: counts and caps of the seven datasets, templates, checksums, generic tables, errors."""
import json
import shutil

import numpy as np
import pytest

from empirical.llm import datasets as D

# (name, rows with the reference caps, {label: count})
REFERENCE = [
    ("stsa", 6920, {0: 3310, 1: 3610}),
    ("cities", 1496, {0: 748, 1: 748}),
    ("common", 6000, {0: 3000, 1: 3000}),
    ("counterfact", 4000, {0: 2000, 1: 2000}),
    ("hateeval", 6000, {0: 3000, 1: 3000}),
    ("sarcasm", 6000, {0: 3000, 1: 3000}),
    ("coinflip", 500, {0: 247, 1: 253}),
]


@pytest.mark.parametrize("name,rows,counts", REFERENCE)
def test_named_datasets_reference_caps(name, rows, counts, shared_data_dir):
    ds = D.load(name)
    assert len(ds) == rows and ds.class_counts() == counts
    assert ds.labels.dtype == np.int64 and set(np.unique(ds.labels)) == {0, 1}
    assert all(isinstance(t, str) and t for t in ds.texts)
    # the template wraps the raw text exactly once
    assert ds.prompts[0] == ds.template.replace("{text}", ds.texts[0])
    assert ds.prompts[0].count(ds.texts[0]) >= 1


def test_uncapped_and_quick_caps_keep_file_order(shared_data_dir):
    full = D.load("common", max_per_class=None)
    assert full.class_counts() == {0: 4321, 1: 12063}  # 'Neither' rows dropped
    quick = D.load("common", max_per_class=5)
    assert quick.class_counts() == {0: 5, 1: 5}
    for c in (0, 1):
        first = [t for t, y in zip(full.texts, full.labels) if y == c][:5]
        assert [t for t, y in zip(quick.texts, quick.labels) if y == c] == first
    hate = D.load("hateeval", max_per_class=None)
    assert hate.class_counts() == {0: 5790, 1: 4210}


def test_templates_match_reference_prompts(shared_data_dir):
    cities = D.load("cities", max_per_class=1)
    assert cities.prompts[0] == "Judge the statement is True or False. " + cities.texts[0]
    cf = D.load("counterfact", max_per_class=1)
    assert cf.prompts[0].startswith("Judge the statement is true or false. The ")
    sarc = D.load("sarcasm", max_per_class=1)
    assert "irony, \nwhere" in sarc.prompts[0] and sarc.prompts[0].endswith("Please answer Yes or No.")
    coin = D.load("coinflip", max_per_class=1)
    assert coin.prompts[0].endswith("Therefore, the answer (Yes or No) is?")


def test_data_dir_precedence(tmp_path, monkeypatch, shared_data_dir):
    shared = shared_data_dir
    own = tmp_path / "own"
    own.mkdir()
    shutil.copy(shared / "cities.csv", own / "cities.csv")
    monkeypatch.setenv("RAPTOR_DATA", str(own))
    assert D.resolve_data_dir() == own
    assert D.resolve_data_dir(shared) == shared  # the argument wins over the environment
    assert len(D.load("cities")) == 1496  # no SHA256SUMS there: checked against the built-in sums
    with pytest.raises(FileNotFoundError, match="Concept-Depth"):
        D.load("stsa")  # missing file names where to get it
    monkeypatch.setenv("RAPTOR_DATA", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="RAPTOR_DATA"):
        D.resolve_data_dir()


def test_checksum_mismatch(tmp_path, shared_data_dir):
    shared = shared_data_dir
    text = (shared / "cities.csv").read_text()
    (tmp_path / "cities.csv").write_text(text.replace("Krasnodar", "Krasnodor", 1))
    shutil.copy(shared / "SHA256SUMS", tmp_path / "SHA256SUMS")
    with pytest.raises(ValueError, match="checksum mismatch"):
        D.load("cities", tmp_path)
    ds = D.load("cities", tmp_path, verify=False)
    assert ds.texts[0] == "The city of Krasnodor is in Russia."


def test_bad_arguments(shared_data_dir):
    with pytest.raises(ValueError, match="unknown dataset"):
        D.load("imdb")
    for bad in (0, -3, "all", 2.5, True):
        with pytest.raises(ValueError, match="max_per_class"):
            D.load("cities", max_per_class=bad)
    with pytest.raises(ValueError, match="template"):
        D.load("cities", template="no placeholder")


def test_load_table_formats(tmp_path):
    rows = [("good film", "yes"), ("bad film", "no"), ("great plot", "YES"), ("awful", "No")]
    (tmp_path / "t.csv").write_text("txt,lab\n" + "\n".join(f'"{t}",{label}' for t, label in rows))
    (tmp_path / "t.tsv").write_text("txt\tlab\n" + "\n".join(f"{t}\t{label}" for t, label in rows))
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps({"txt": t, "lab": label}) for t, label in rows))
    (tmp_path / "t.json").write_text(json.dumps({"examples": [{"txt": t, "lab": label} for t, label in rows]}))
    for ext in ("csv", "tsv", "jsonl", "json"):
        ds = D.load_table(tmp_path / f"t.{ext}", "txt", "lab", template="Review: {text} Sentiment?")
        assert ds.texts == [t for t, _ in rows]
        assert ds.labels.tolist() == [1, 0, 1, 0]
        assert ds.prompts[1] == "Review: bad film Sentiment?"
    ds = D.load_table(tmp_path / "t.csv", "txt", "lab", max_per_class=1)
    assert ds.texts == ["good film", "bad film"]


def test_load_table_labels_and_errors(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("text,label\na,pos\nb,neg\nc,neutral\n")
    with pytest.raises(ValueError, match="positive_label"):
        D.load_table(p, "text", "label")
    ds = D.load_table(p, "text", "label", positive_label="pos")
    assert ds.labels.tolist() == [1, 0, 0]
    with pytest.raises(ValueError, match="label_column 'y' is not a column"):
        D.load_table(p, "text", "y")
    with pytest.raises(ValueError, match="text_column 'sentence' is not a column"):
        D.load_table(p, "sentence", "label")
    one = tmp_path / "one.csv"
    one.write_text("text,label\na,1\nb,1\n")
    with pytest.raises(ValueError, match="single class"):
        D.load_table(one, "text", "label")
    empty = tmp_path / "empty.csv"
    empty.write_text("text,label\na,1\n,0\n")
    with pytest.raises(ValueError, match="empty in rows"):
        D.load_table(empty, "text", "label")
    with pytest.raises(FileNotFoundError):
        D.load_table(tmp_path / "missing.csv", "text", "label")
    num = tmp_path / "num.csv"
    num.write_text("text,label\na,1.0\nb,0.0\nc,True\n")
    assert D.load_table(num, "text", "label").labels.tolist() == [1, 0, 1]


def test_fingerprint_tracks_content():
    a = D.ConceptDataset("x", ["a", "b"], [0, 1], "Q: {text}")
    b = D.ConceptDataset("x", ["a", "b"], [0, 1], "Q: {text} A:")
    c = D.ConceptDataset("x", ["a", "b"], [1, 0], "Q: {text}")
    assert len({a.fingerprint(), b.fingerprint(), c.fingerprint()}) == 3
    assert a.fingerprint() == D.ConceptDataset("x", ["a", "b"], [0, 1], "Q: {text}").fingerprint()


# a built-in dataset file whose field has the wrong type: refused naming the file, the row and the field
FIELD_CASES = {
    "empty statement": ("cities", "cities.csv", "statement,label\nParis is in France.,1\n,0\nRome is in Peru.,0\n",
                        r"row 1 field 'text' must be non-blank text, got ''"),
    "missing subject": ("counterfact", "counterfact.csv",
                        "statement,label,subject\nA is B.,1,A\nC is D.,0,\nE is F.,1,E\n",
                        r"row 1 field 'subject' must be non-blank text"),
    "number question": ("coinflip", "coin_flip.json",
                        json.dumps({"examples": [{"question": "Heads?", "answer": "yes"},
                                                 {"question": 3, "answer": "no"}]}),
                        r"examples\[1\]\.question must be a string, got 3 \(int\)"),
    "boolean answer": ("coinflip", "coin_flip.json",
                       json.dumps({"examples": [{"question": "Heads?", "answer": True}]}),
                       r"examples\[0\]\.answer must be a string, got True \(bool\)"),
    "empty review": ("stsa", "stsa.binary.train", "1 a fine film\n0 \n1 good\n",
                     r"row 1 field 'text' must be non-blank text"),
    "blank hate text": ("hateeval", "hateeval.tsv", "id\ttext\tHS\n1\thello\t0\n2\t  \t1\n",
                        r"row 1 field 'text' must be non-blank text"),
}


@pytest.mark.parametrize("case", sorted(FIELD_CASES))
def test_builtin_readers_refuse_a_field_of_the_wrong_type(case, tmp_path):
    name, fname, content, message = FIELD_CASES[case]
    (tmp_path / fname).write_text(content)
    with pytest.raises(ValueError, match=message) as exc:
        D.load(name, tmp_path, verify=False, max_per_class=None)
    assert fname in str(exc.value)


def test_a_dataset_whose_rows_pair_across_classes_splits_by_its_pairing_key(shared_data_dir):
    """Counterfact and cities state each subject (city) once truly and once falsely: a random split puts the two
    partners on both sides, and a probe then scores below chance (cities' layers 1-3 in the published run).  Every
    column of every shipped table that pairs rows across the classes (most of its keys: exactly two rows, one per
    class) must be the dataset's ``group_column``, and the paper's split must keep each key on one side."""
    import pandas as pd

    from empirical.probes import grouped_split

    checked = 0
    for name in D.dataset_names():
        spec = D.get_dataset(name)
        path = shared_data_dir / spec.files[0]
        if path.suffix != ".csv":
            continue
        raw = pd.read_csv(path)
        label = "label" if "label" in raw else None
        if label is None or not set(raw[label].astype(str)) <= {"0", "1"}:
            continue
        for column in raw.columns:
            if column == label or pd.api.types.is_numeric_dtype(raw[column]):
                continue
            groups = raw.groupby(column)[label].agg(["size", "nunique"])
            pairs = float(((groups["size"] == 2) & (groups["nunique"] == 2)).mean())
            if pairs >= 0.5:
                checked += 1
                assert spec.group_column == column, (name, column, pairs)
        if spec.group_column is not None:
            data = D.load(name, shared_data_dir, max_per_class=None)
            train, val, test = grouped_split(data.labels, data.groups)
            sides = [set(data.groups[idx]) for idx in (train, val, test)]
            assert not (sides[0] & sides[1] or sides[0] & sides[2] or sides[1] & sides[2]), name
    assert checked >= 2  # cities' city and Counterfact's subject
