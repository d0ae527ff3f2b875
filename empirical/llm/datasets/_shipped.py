"""The seven benchmark datasets: the readers of their shipped files and their registry entries, in the order every
table lists them.  Templates are the Concept-Depth prompts."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ._files import _column, _labelled, _read_delimited, _read_json, _read_text
from ._registry import register_dataset


def read_stsa(path: Path) -> pd.DataFrame:
    """``stsa.binary.*``: one review a line, led by its 0/1 label and a space."""
    texts, labels = [], []
    for i, line in enumerate(_read_text(path).splitlines()):
        if not line.strip():
            continue
        lab, _, sent = line.partition(" ")
        if lab not in ("0", "1"):
            raise ValueError(f"{str(path)!r}: line {i + 1} does not start with a 0/1 label: {line[:60]!r}")
        texts.append(sent)
        labels.append(int(lab))
    return pd.DataFrame({"text": texts, "label": labels})


def read_statements(path: Path) -> pd.DataFrame:
    """A CSV of ``statement`` and 0/1 ``label`` (cities, Counterfact); the pairing keys ``city`` (cities) and
    ``subject`` (Counterfact) are kept: each city or subject is stated once truly and once falsely, so the two rows
    of a pair must fall on the same side of a split (``group_column``)."""
    df = _read_delimited(path)
    return _labelled(df, "statement", "label", path, keep=[c for c in ("subject", "city") if c in df])


def read_common(path: Path) -> pd.DataFrame:
    """``common_claim.csv``: ``examples`` and a True/False/Neither ``label`` (the 'Neither' claims are not part of
    the binary concept)."""
    df = _read_delimited(path)
    lab = _column(df, "label", path, "label column").astype(str)
    df = df[lab.isin(["True", "False"])]
    return pd.DataFrame({"text": _column(df, "examples", path).tolist(),
                         "label": (df["label"].astype(str) == "True").astype(int).tolist()})


def read_hateeval(path: Path) -> pd.DataFrame:
    """``hateeval.tsv``: ``text`` and the 0/1 hate-speech flag ``HS``."""
    return _labelled(_read_delimited(path, sep="\t", quoting=3), "text", "HS", path)


def read_sarcasm(path: Path) -> pd.DataFrame:
    """``sarcasm_headlines.tsv`` (no header: id, id, label, headline)."""
    return _labelled(_read_delimited(path, sep="\t", header=None, quoting=3), 3, 2, path)


def read_coinflip(path: Path) -> pd.DataFrame:
    """``coin_flip.json``: ``{"examples": [{"question": ..., "answer": "yes"/"no"}, ...]}``."""
    document = _read_json(path)
    ex = document.get("examples") if isinstance(document, dict) else None
    if not isinstance(ex, list) or not all(isinstance(e, dict) and {"question", "answer"} <= set(e) for e in ex):
        raise ValueError(f"{str(path)!r} must hold {{'examples': [{{'question': ..., 'answer': ...}}, ...]}}, got "
                         f"{type(document).__name__} {str(document)[:60]!r}")
    for i, e in enumerate(ex):
        for key in ("question", "answer"):
            if not isinstance(e[key], str):
                raise ValueError(f"{str(path)!r}: examples[{i}].{key} must be a string, got {e[key]!r:.60} "
                                 f"({type(e[key]).__name__})")
    answers = [e["answer"].strip().lower() for e in ex]
    bad = sorted(set(answers) - {"yes", "no"})
    if bad:
        raise ValueError(f"{str(path)!r}: answers must be yes/no, got {bad[:5]}")
    return pd.DataFrame({"text": [e["question"] for e in ex], "label": [int(a == "yes") for a in answers]})


register_dataset(
    "stsa", "stsa.binary.train", read_stsa, test_files="stsa.binary.test", answer_words=("Positive", "Negative"),
    in_paper_grid=True, sentiment=True,
    template="{text} The sentence above is a movie review and reflects the writer's overall intention for this "
             "review. According to the sentence, judge whether the emotion is Positive or Negative.",
    sha256={"stsa.binary.train": "71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338",
            "stsa.binary.test": "6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b"})
register_dataset(
    "cities", "cities.csv", read_statements, template="Judge the statement is True or False. {text}",
    answer_words=("True", "False"), in_paper_grid=True, group_column="city",
    sha256={"cities.csv": "f2560a0c1758c69935b50125111b574b71896bb75930dd87b1d8c973c1fa086e"})
register_dataset(
    "common", "common_claim.csv", read_common, template="Judge the statement is True or False. {text}",
    answer_words=("True", "False"), reference_cap=3000, in_paper_grid=True,
    sha256={"common_claim.csv": "acc78556774ed0b5c3501bb4c254adebc692bab52cb5c6f39d91aad09cdf554f"})
register_dataset(
    "counterfact", "counterfact.csv", read_statements, template="Judge the statement is true or false. {text}",
    answer_words=("True", "False"), reference_cap=2000, in_paper_grid=True, group_column="subject",
    sha256={"counterfact.csv": "5af51456d6dbd3a53d8e2ee6e4aadaca7eb02ff9136ad825866458e7283b5273"})
register_dataset(
    "hateeval", "hateeval.tsv", read_hateeval,
    template="{text} According to the comment, tell whether they present hate speech or not.",
    answer_words=("Yes", "No"), reference_cap=3000, in_paper_grid=True,
    sha256={"hateeval.tsv": "fdd34bf56f0afa744ee7484774d259d83a756033cd8049ded81bd55d2fcb1272"})
register_dataset(
    "sarcasm", "sarcasm_headlines.tsv", read_sarcasm,
    template="Task: Detect sarcasm, help me identify whether this sentence is sarcastic.\nFirst, we need to understand "
             "what sarcasm is. Sarcasm is a form of verbal irony, \nwhere the intended meaning of the words is the "
             "opposite of the literal meaning. \nIn other words, the speaker is saying one thing but meaning the "
             "opposite. {text} Think carefully according to the sentence. Is there any sarcasm in this sentence? "
             "Please answer Yes or No.",
    answer_words=("Yes", "No"), reference_cap=3000, in_paper_grid=True,
    sha256={"sarcasm_headlines.tsv": "6381d3dc803159dae72b65d8b429098e73d0acb7a83fac5d3fc7f6060b39d582"})
register_dataset(
    "coinflip", "coin_flip.json", read_coinflip,
    template="{text} According to the flipping process above, determine if a coin remains heads up after it is "
             "either flipped or left unflipped by individuals. Therefore, the answer (Yes or No) is?",
    answer_words=("Yes", "No"),
    sha256={"coin_flip.json": "68cf201737a1463ef6bed5419622805a8934d92bff6a28a9dfbf83be3135ba5a"})
