"""Reading the data directory: where it is (:func:`resolve_data_dir`) and the one safe reader of its files (a regular
file of bounded size, UTF-8, JSON / JSON Lines / delimited tables with errors that name the file, row and field)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ...common.files import MAX_TABLE_BYTES, check_input_file, check_path, env_path, parse_json, read_input_text

_WHERE = (
    "Get the files from the Concept-Depth repository (https://github.com/Luckfort/CD, folder "
    "'dataset') and the sarcasm headlines from "
    "https://github.com/rishabhmisra/Sarcasm-Detection-using-NN (see docs/llm.md), then pass "
    "data_dir=... (--data-dir) or set RAPTOR_DATA."
)


def _repo_root() -> Path:
    """The checkout holding the packages (``<repo>/empirical/llm/datasets/_files.py`` -> ``<repo>``)."""
    return Path(__file__).resolve().parents[3]


def resolve_data_dir(data_dir=None) -> Path:
    """Resolve the data directory: argument > $RAPTOR_DATA > ``../shared/datasets`` next to the repository (the
    checkout holding the packages), then next to the working directory.

    Parameters
    ----------
    data_dir : str or path-like, optional
        An explicit directory (``~`` expanded); it must exist.

    Returns
    -------
    pathlib.Path
        An existing directory (``FileNotFoundError`` naming the source otherwise).
    """
    if data_dir is not None:
        p = check_path(data_dir, "data_dir")
        if not p.is_dir():
            raise FileNotFoundError(f"data_dir {str(p)!r} is not a directory. {_WHERE}")
        return p
    p = env_path("RAPTOR_DATA")  # blank is refused, as --data-dir ' ' is
    if p is not None:
        if not p.is_dir():
            raise FileNotFoundError(f"RAPTOR_DATA={os.environ['RAPTOR_DATA']!r} is not a directory. {_WHERE}")
        return p
    tried = []
    for base in (_repo_root(), Path.cwd()):
        p = (base / ".." / "shared" / "datasets").resolve()
        if p.is_dir():
            return p
        if p not in tried:
            tried.append(p)
    raise FileNotFoundError(f"No data directory: none given (data_dir=... / --data-dir), RAPTOR_DATA unset, and "
                            f"{' and '.join(repr(str(p)) for p in tried)} do not exist. {_WHERE}")


def _read_text(path: Path) -> str:
    """The file's text (the one reader: a regular file of at most ``MAX_TABLE_BYTES``); ValueError naming it when it
    is not UTF-8."""
    return read_input_text(path, MAX_TABLE_BYTES, "dataset file")


def _read_json(path: Path):
    """The parsed JSON document; ValueError naming the file, line and column when it is invalid."""
    return parse_json(_read_text(path), repr(str(path)))


def _read_jsonl(path: Path) -> pd.DataFrame:
    """Records of a JSON Lines file (one object per non-empty line); ValueError naming the file and line."""
    records = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        record = parse_json(line, repr(str(path)), line=number)
        if not isinstance(record, dict):
            raise ValueError(f"{str(path)!r}, line {number}: each line must be a JSON object (a record), "
                             f"got {type(record).__name__}")
        records.append(record)
    if not records:
        raise ValueError(f"{str(path)!r} holds no records (empty file)")
    return pd.DataFrame(records)


def _read_delimited(path: Path, **kwargs) -> pd.DataFrame:
    """``pandas.read_csv`` with errors that name the file (the file checked by the one reader first).  Every cell
    is read as the string the file holds (``dtype=str``, no NaN for an empty cell): a field's type is decided by
    the reader that knows the column, never converted behind the user's back."""
    check_input_file(path, MAX_TABLE_BYTES, "dataset file")
    kwargs = {"dtype": str, "keep_default_na": False, **kwargs}
    try:
        return pd.read_csv(path, encoding="utf-8", **kwargs)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{str(path)!r} is empty (no header and no rows)") from None
    except pd.errors.ParserError as exc:
        raise ValueError(f"{str(path)!r} cannot be parsed as a table: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _column(df: pd.DataFrame, column, path: Path, what: str = "column") -> pd.Series:
    if column not in df.columns:
        raise ValueError(f"{str(path)!r} has no {what} {column!r}; its columns are {list(map(str, df.columns))}")
    return df[column]


def _binary_column(df: pd.DataFrame, column, path: Path) -> list:
    """A label column of 0/1 integers; ValueError naming the file, column and offending values otherwise."""
    values = _column(df, column, path, "label column")
    numeric = pd.to_numeric(values, errors="coerce")
    bad = values[~numeric.isin([0, 1])]
    if len(bad):
        raise ValueError(f"{str(path)!r}: label column {column!r} must hold 0/1, got "
                         f"{sorted(map(str, set(bad)))[:5]} "
                         f"(first at data row {int(np.flatnonzero(~numeric.isin([0, 1]))[0])})")
    return numeric.astype(int).tolist()


def _labelled(df: pd.DataFrame, text_column, label_column, path: Path, keep=()) -> pd.DataFrame:
    """A reader's table: ``text`` and 0/1 ``label`` from the named columns of ``df`` (errors name the file), plus
    the columns ``keep`` of ``df`` under their names."""
    table = pd.DataFrame({"text": _column(df, text_column, path).tolist(),
                          "label": _binary_column(df, label_column, path)})
    for column in keep:
        table[column] = _column(df, column, path).to_numpy()
    return table


def _text_field(values, where: str, field: str) -> list:
    """The values of a text field as they are: each must be a non-blank string (an empty cell, a number or a
    missing value is refused, naming the file, the row and the field, never turned into ``'nan'`` or ``'3'``)."""
    values = list(values)
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}: row {i} field {field!r} must be non-blank text, got {value!r:.60} "
                             f"({type(value).__name__})")
    return values
