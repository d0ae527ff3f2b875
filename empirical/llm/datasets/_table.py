"""The generic table loader: :func:`load_table` reads a user's CSV / TSV / JSONL / JSON with named text and label
columns into a :class:`ConceptDataset`."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...common.files import MAX_TABLE_BYTES, check_input_file, sha256_file
from ._concept import PLACEHOLDER, ConceptDataset, _cap_per_class, _check_two_classes, _resolve_cap
from ._files import _read_delimited, _read_json, _read_jsonl, _read_text

_TRUE = {"1", "true", "yes", "y", "t", "pos", "positive"}

_FALSE = {"0", "false", "no", "n", "f", "neg", "negative"}

_ROWS = "data rows counted from 0 after the header"


def _missing(value) -> bool:
    """True for an absent cell: None, NaN (a JSON record without the field) or blank text."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return not np.isfinite(value)
    return not str(value).strip()


def _label_of(value):
    """1, 0 or None (a spelling that is not a binary label). Numbers must be exactly 0 or 1 (``1.0`` from a
    JSON file is fine); text is one of the known spellings, case-insensitive, or ``"0.0"``/``"1.0"``:
    ``"yes.0"`` or ``"1.5"`` are refused, not read as yes/1."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return int(value) if value in (0, 1) else None
    text = str(value).strip().lower()
    if text in _TRUE:
        return 1
    if text in _FALSE:
        return 0
    return int(text[0]) if re.fullmatch(r"[01]\.0+", text) else None


def _labels_to01(values, label_column, positive_label, path="table"):
    """0/1 labels of a table's label column; ValueError naming the file, column, row and value of an empty
    cell or of a spelling that is not a binary label."""
    where = f"{str(path)!r}: column {label_column!r}"
    empty = [i for i, v in enumerate(values) if _missing(v)]
    if empty:
        raise ValueError(f"{where} is empty in rows {empty[:10]} ({_ROWS}); every example needs a label")
    if positive_label is not None:
        pos = str(positive_label).strip()
        vals = [str(v).strip() for v in values]
        if pos not in set(vals):
            raise ValueError(f"positive_label {positive_label!r} does not occur in column {label_column!r} of "
                             f"{str(path)!r}; its values are {sorted(set(vals))[:10]}")
        return np.array([int(v == pos) for v in vals], dtype=np.int64)
    labels = [_label_of(v) for v in values]
    bad = [i for i, y in enumerate(labels) if y is None]
    if bad:
        raise ValueError(
            f"{where} must hold binary labels (0/1, True/False, yes/no), got {values[bad[0]]!r} in row {bad[0]} "
            f"({_ROWS}); {len(bad)} row(s) in all hold {sorted({str(values[i]) for i in bad})[:10]}. Pass "
            "positive_label=... to name the class that shows the concept."
        )
    return np.array(labels, dtype=np.int64)


def _check_header(path: Path, sep: str, quoting: int) -> None:
    """Refuse a delimited table whose header names a column twice (pandas would rename the second
    'label.1' and the first would be used silently) and, for unquoted (tab-separated) files, a line whose
    number of fields differs from the header's (a line break inside a field splits one row into two)."""
    header = _read_delimited(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False,
                             quoting=quoting).iloc[0].tolist()
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise ValueError(f"{str(path)!r}: the header names column(s) {twice} more than once (ambiguous); "
                         "rename them")
    if quoting != 3:
        return
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if number > 1 and line and line.count(sep) + 1 != len(header):
            raise ValueError(f"{str(path)!r}, line {number}: {line.count(sep) + 1} field(s), the header has "
                             f"{len(header)} ({line[:60]!r}); a line break or separator inside a field? "
                             "Tab-separated files are read without quoting: each line is one row")


def load_table(
    path,
    text_column,
    label_column,
    template=None,
    *,
    positive_label=None,
    max_per_class=None,
    name=None,
    sep=None,
) -> ConceptDataset:
    """Load a user's CSV / TSV / JSONL (or JSON list) with named text and label columns.

    The format follows the extension (``.csv``; ``.tsv``/``.tab``/``.txt`` tab-separated unless
    ``sep`` is given; ``.jsonl``; ``.json`` = a list of records or ``{"examples": [...]}``).
    Labels may be 0/1, True/False or yes/no (case-insensitive); anything else needs
    ``positive_label`` (rows equal to it get 1, all others 0). Rows with an empty text are an error.

    Parameters
    ----------
    path : str or path-like
        The table.
    text_column, label_column : str
        Column names.
    template : str, optional
        Prompt template containing ``{text}`` (default: the text itself).
    positive_label : optional
        The label value meaning "concept present".
    max_per_class : int, optional
        Keep the first k examples of each class.
    name : str, optional
        Dataset name (default: the file's stem).
    sep : str, optional
        Column separator for delimited text files.

    Returns
    -------
    ConceptDataset
        The rows with 0/1 labels (1 = concept present) and the template.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> table = Path(tempfile.mkdtemp()) / "reviews.csv"
    >>> _ = table.write_text(chr(10).join(["text,label", "great film,1", "awful plot,0"]))
    >>> ds = load_table(table, "text", "label", "Review: {text}")
    >>> ds.prompts, ds.labels.tolist()
    (['Review: great film', 'Review: awful plot'], [1, 0])
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"table {str(p)!r} does not exist")
    check_input_file(p, MAX_TABLE_BYTES, "dataset file")  # a FIFO, a device or an over-size file is refused
    ext = p.suffix.lower()
    if ext == ".jsonl":
        df = _read_jsonl(p)
    elif ext == ".json":
        obj = _read_json(p)
        if isinstance(obj, dict):
            lists = [v for v in obj.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise ValueError(f"{str(p)!r}: a JSON object must hold exactly one list of records, got {len(lists)}")
            obj = lists[0]
        if not isinstance(obj, list) or not obj or not all(isinstance(r, dict) for r in obj):
            raise ValueError(f"{str(p)!r} must hold a non-empty list of records (JSON objects), got "
                             f"{type(obj).__name__} {str(obj)[:60]!r}")
        df = pd.DataFrame(obj)
    else:
        if sep is None:
            sep = "," if ext == ".csv" else "\t"
        quoting = 3 if sep == "\t" else 0
        _check_header(p, sep, quoting)
        df = _read_delimited(p, sep=sep, dtype=str, keep_default_na=False, quoting=quoting)
    for col, what in ((text_column, "text_column"), (label_column, "label_column")):
        if col not in df.columns:
            raise ValueError(f"{what} {col!r} is not a column of {str(p)!r}; columns: {list(map(str, df.columns))}")
    if text_column == label_column:
        raise ValueError(f"text_column and label_column are the same column {text_column!r} of {str(p)!r}")
    if df.empty:
        raise ValueError(f"{str(p)!r} has a header but no rows")
    texts = df[text_column].tolist()
    empty = [i for i, t in enumerate(texts) if _missing(t)]
    if empty:
        raise ValueError(f"{str(p)!r}: column {text_column!r} is empty in rows {empty[:10]} ({_ROWS})")
    typed = [(i, t) for i, t in enumerate(texts) if not isinstance(t, str)]  # JSON values keep their type
    if typed:
        i, t = typed[0]
        raise ValueError(f"{str(p)!r}: column {text_column!r} must hold text (strings), got "
                         f"{t!r:.60} ({type(t).__name__}) in row {i}"
                         + (f" (and {len(typed) - 1} more rows)" if len(typed) > 1 else "") + f" ({_ROWS})")
    texts = [str(t) for t in texts]
    labels = _labels_to01(df[label_column].tolist(), label_column, positive_label, p)
    cap = _resolve_cap(max_per_class)
    texts, labels = _cap_per_class(texts, labels, cap)
    _check_two_classes(name or p.stem, labels)
    return ConceptDataset(name or p.stem, texts, labels, template or PLACEHOLDER, {p.name: sha256_file(p)}, cap)
