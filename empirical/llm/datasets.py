"""Concept datasets: the registry of named datasets (the seven benchmark sets), and a generic table loader.

Every loader returns a :class:`ConceptDataset`: ``texts`` (raw examples), ``labels`` (0/1 ints,
1 = the concept is present), ``template`` (the prompt template, ``{text}`` marks where the example
goes) and ``prompts`` (the texts with the template applied; this is what the model reads, its last
token's hidden state is what gets probed).

Data directory, in order of precedence: the ``data_dir`` argument, the ``RAPTOR_DATA`` environment
variable, then ``../shared/datasets`` relative to the repository or to the working directory.
The files are published research data (see ``docs/llm.md`` for where to get them); they are
verified against ``SHA256SUMS`` in the data directory when present, otherwise against the
checksums of the reference copies recorded below.

Per-class caps: by default a loader keeps, for each class, the first examples in file order up to
the cap the Concept-Depth reference benchmark used (each dataset's ``reference_cap``; ``None`` = all rows).
``max_per_class=None`` keeps everything, an int caps both classes at that many (``--quick``).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..files import MAX_TABLE_BYTES, check_input_file, check_path, env_path, parse_json, read_input_text, sha256_file

__all__ = [
    "ConceptDataset",
    "DatasetSpec",
    "register_dataset",
    "unregister_dataset",
    "get_dataset",
    "dataset_names",
    "answer_pairs",
    "resolve_data_dir",
    "load",
    "load_table",
]

#: Placeholder that a template replaces with the example text.
PLACEHOLDER = "{text}"

_WHERE = (
    "Get the files from the Concept-Depth repository (https://github.com/Luckfort/CD, folder "
    "'dataset') and the sarcasm headlines from "
    "https://github.com/rishabhmisra/Sarcasm-Detection-using-NN (see docs/llm.md), then pass "
    "data_dir=... (--data-dir) or set RAPTOR_DATA."
)


@dataclass
class ConceptDataset:
    """A binary concept dataset. ``labels[i]`` is 1 when ``texts[i]`` shows the concept.

    Parameters
    ----------
    name : str
        The dataset's name (table names, the cache entry's label).
    texts : list of str
        The examples, without the template.
    labels : array of 0/1
        1 when the example shows the concept (the positive class of every probe).
    template : str, default="{text}"
        Prompt template containing ``{text}``.
    files : dict, optional
        Source file name -> sha256.
    max_per_class : int, optional
        The cap the dataset was loaded with.
    groups : array of shape (n,), optional
        A grouping key per example whose rows must stay on one side of a split (Counterfact: the subject,
        stated once truly and once falsely; :func:`empirical.probes.grouped_split`); None when examples are
        independent.

    Examples
    --------
    >>> ds = ConceptDataset("toy", ["yes", "no"], [1, 0], "Q: {text}")
    >>> ds.prompts, len(ds)
    (['Q: yes', 'Q: no'], 2)
    """

    name: str
    texts: list
    labels: np.ndarray
    template: str = PLACEHOLDER
    files: dict = field(default_factory=dict)  # file name -> sha256
    max_per_class: int | None = None
    groups: np.ndarray | None = None

    def __post_init__(self):
        labels = np.asarray(self.labels)
        if labels.ndim != 1 or (labels.size and not np.all(np.isin(labels, (0, 1)))):
            found = sorted({str(v) for v in np.unique(labels).tolist()} - {"0", "1", "0.0", "1.0", "True", "False"})
            raise ValueError(f"dataset {self.name!r}: labels must be 0/1 (1 = concept present), got "
                             f"{found[:10] or labels.shape}")
        self.labels = labels.astype(np.int64)
        if len(self.texts) != len(self.labels):
            raise ValueError(f"texts and labels differ in length ({len(self.texts)} vs {len(self.labels)})")
        if PLACEHOLDER not in self.template:
            raise ValueError(f"template must contain {PLACEHOLDER!r}, got {self.template!r}")
        if self.groups is not None:
            self.groups = np.asarray(self.groups)
            if self.groups.shape != self.labels.shape:
                raise ValueError(f"dataset {self.name!r}: groups must have one entry per example "
                                 f"({self.groups.shape} vs {self.labels.shape})")

    @property
    def prompts(self) -> list:
        """Texts with the template applied (what the model reads)."""
        return [apply_template(self.template, t) for t in self.texts]

    def __len__(self) -> int:
        return len(self.texts)

    def class_counts(self) -> dict:
        return {int(k): int(v) for k, v in zip(*np.unique(self.labels, return_counts=True))}

    def fingerprint(self) -> str:
        """sha256 over the name, file hashes, template and the selected rows (texts and labels)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.name, sorted(self.files.items()), self.template]).encode())
        for t, y in zip(self.texts, self.labels):
            h.update(f"{int(y)}\t{t}\n".encode())
        return h.hexdigest()


def apply_template(template: str, text: str) -> str:
    """Replace ``{text}`` in ``template`` by ``text`` (no other brace is interpreted)."""
    return template.replace(PLACEHOLDER, text)


def _repo_root() -> Path:
    """The checkout holding the packages (``<repo>/empirical/llm/datasets.py`` -> ``<repo>``)."""
    return Path(__file__).resolve().parents[2]


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


_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *]?(.+)$")


def _expected_sums(root: Path) -> dict:
    """Expected sha256 per file name: the data directory's ``SHA256SUMS`` (``sha256sum`` format) over the
    built-in reference sums.  A ``SHA256SUMS`` that is not entirely well-formed is an error, never ignored."""
    expected = _known_sums()
    sums = root / "SHA256SUMS"
    if not sums.exists():
        return expected
    try:
        text = read_input_text(sums, MAX_TABLE_BYTES, "checksum file")  # a FIFO or device is refused, not skipped
    except ValueError as exc:
        raise ValueError(f"{exc}; fix or remove it, or pass verify=False") from None
    listed = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _SUM_LINE.match(line.strip())
        if match is None:
            raise ValueError(f"checksum file {str(sums)!r}, line {number}: expected '<64 hex digits>  <file name>', "
                             f"got {line[:80]!r}; fix or remove it, or pass verify=False")
        name, digest = match.group(2).strip().removeprefix("./"), match.group(1).lower()
        if listed.get(name, digest) != digest:
            raise ValueError(f"checksum file {str(sums)!r}, line {number}: {name!r} is listed twice with different "
                             "sums; fix or remove it, or pass verify=False")
        listed[name] = digest
    if not listed:
        raise ValueError(f"checksum file {str(sums)!r} lists no file; fix or remove it, or pass verify=False")
    expected.update(listed)
    return expected


def _check_file(root: Path, fname: str, verify: bool) -> tuple:
    path = root / fname
    if not path.exists():
        raise FileNotFoundError(f"dataset file {str(path)!r} is missing. {_WHERE}")
    check_input_file(path, MAX_TABLE_BYTES, "dataset file")  # a FIFO, a device or an over-size file is refused
    digest = sha256_file(path)
    if verify:
        expected = _expected_sums(root).get(fname)
        if expected is None:
            raise ValueError(f"no checksum for {str(path)!r} in {str(root / 'SHA256SUMS')!r} or the built-in sums; "
                             "add it there, or pass verify=False to use the file unverified")
        if expected != digest:
            raise ValueError(
                f"checksum mismatch for {str(path)!r}: sha256 {digest}, expected {expected}. The file differs "
                "from the reference copy; re-download it, or pass verify=False to use it anyway."
            )
    return path, digest


def _cap_index(labels, cap) -> np.ndarray:
    """Rows kept by a per-class cap: the first ``cap`` of each class in file order (all rows for None)."""
    labels = np.asarray(labels, dtype=np.int64)
    if cap is None:
        return np.arange(len(labels))
    keep = np.zeros(len(labels), dtype=bool)
    for c in (0, 1):
        keep[np.flatnonzero(labels == c)[:cap]] = True
    return np.flatnonzero(keep)


def _cap_per_class(texts, labels, cap):
    idx = _cap_index(labels, cap)
    return [texts[i] for i in idx], np.asarray(labels, dtype=np.int64)[idx]


def _resolve_cap(name, max_per_class):
    if isinstance(max_per_class, str):
        if max_per_class != "reference" or name not in _REGISTRY:
            raise ValueError(f"max_per_class must be 'reference', None or a positive int, got {max_per_class!r}")
        return _REGISTRY[name].reference_cap
    if max_per_class is None:
        return None
    if isinstance(max_per_class, bool) or not isinstance(max_per_class, (int, np.integer)) or max_per_class < 1:
        raise ValueError(f"max_per_class must be 'reference', None or a positive int, got {max_per_class!r}")
    return int(max_per_class)


def _check_two_classes(name, labels):
    classes = np.unique(labels)
    if len(classes) < 2:
        raise ValueError(f"dataset {name!r} has a single class {classes.tolist()}; a probe needs both 0 and 1")


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
        raise ValueError(f"{str(path)!r}: label column {column!r} must hold 0/1, found "
                         f"{sorted(map(str, set(bad)))[:5]} "
                         f"(first at data row {int(np.flatnonzero(~numeric.isin([0, 1]))[0])})")
    return numeric.astype(int).tolist()


# ---------------------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class DatasetSpec:
    """One named concept dataset: everything :func:`load`, the CLI, the steering read-out and ``paper_figures``
    need.  Register one with :func:`register_dataset`.

    Parameters
    ----------
    name : str
        The name (``--dataset NAME``, ``load(NAME)``, table names); lower case.
    files : tuple of str
        File names in the data directory the reader takes, in order.
    reader : callable
        ``reader(*paths)`` -> DataFrame with a ``text`` column, a ``label`` column (0/1, 1 = concept present) and,
        with ``group_column``, that column.  Raise ``ValueError`` naming the file for a malformed one.
    template : str
        Prompt template containing ``{text}``.
    answer_words : (str, str), optional
        The concept word and its opposite that the steering read-out compares (``raptor steer``).
    reference_cap : int, optional
        Per-class cap of the Concept-Depth benchmark, which the paper's tables used: :func:`load`'s default keeps
        the first ``reference_cap`` examples of each class (None = every row).
    in_paper_grid : bool
        One of the paper's datasets, in its averages (``paper_figures``' grids); others are reported separately.
    group_column : str, optional
        Column of the reader's table whose rows a split keeps together (Counterfact: the subject).
    test_files : tuple of str
        The dataset's own held-out file(s) (``load(..., split="test")``).
    sha256 : mapping
        Reference sha256 of the files (used when the data directory has no ``SHA256SUMS``).
    sentiment : bool
        The concept is a sentiment that an offline scorer (VADER) reads in open-ended text: steering is then also
        measured on continuations of neutral prompts (``vader_shift``).
    """

    name: str
    files: tuple
    reader: object
    template: str = PLACEHOLDER
    answer_words: tuple | None = None
    reference_cap: int | None = None
    in_paper_grid: bool = False
    group_column: str | None = None
    test_files: tuple = ()
    sha256: dict = field(default_factory=dict)
    sentiment: bool = False


_REGISTRY: dict = {}
_FILE_NAME = re.compile(r"^[^/\\]+$")


def _file_names(value, what, name) -> tuple:
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(f, str) and _FILE_NAME.match(f) and f not in (".", "..") for f in names):
        raise ValueError(f"{what} of dataset {name!r} must be file names in the data directory, got {value!r}")
    return names


def register_dataset(name: str, files, reader, *, template: str = PLACEHOLDER, answer_words=None,
                     reference_cap: int | None = None, in_paper_grid: bool = False, group_column: str | None = None,
                     test_files=(), sha256=None, sentiment: bool = False, replace: bool = False) -> DatasetSpec:
    """Register a named dataset (fields: :class:`DatasetSpec`); returns its entry.

    Parameters
    ----------
    name : str
        Lower-case letters, digits, ``-`` or ``_``; not taken unless ``replace``.
    files : str or sequence of str
        File name(s) in the data directory, passed to ``reader`` in order.
    reader : callable
        ``reader(*paths)`` -> DataFrame with ``text``, ``label`` (0/1) and any ``group_column``.
    template : str, default="{text}"
        Prompt template containing ``{text}``.
    answer_words : (str, str), optional
        The concept word and its opposite (two different words), for the steering read-out.
    reference_cap : int, optional
        Per-class cap :func:`load` keeps by default (a positive int; None: every row).
    in_paper_grid : bool, default=False
        Whether the dataset is in the paper's grid (its averages).
    group_column : str, optional
        Column whose rows a split keeps together.
    test_files : str or sequence of str, default=()
        The dataset's own held-out file(s).
    sha256 : mapping, optional
        Reference sha256 (64 lower-case hex digits) per file name.
    sentiment : bool, default=False
        The concept is a sentiment VADER reads in open-ended text (steering also scores continuations).
    replace : bool, default=False
        Redefine a dataset of the same name.

    Returns
    -------
    DatasetSpec
        The entry, now in the registry (registration order is the order of :func:`dataset_names`).

    Raises
    ------
    ValueError
        Naming the argument: a name that is empty, not lower case or taken (unless ``replace``), no files, a
        reader that is not callable, a template without ``{text}``, answer words that are not two distinct
        words, a cap that is not a positive int, or a checksum that is not 64 hex digits.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "toy.csv").write_text(chr(10).join(["sentence,y", "good,1", "bad,0"]))
    >>> def read(path):
    ...     df = pd.read_csv(path)
    ...     return pd.DataFrame({"text": df.sentence, "label": df.y})
    >>> _ = register_dataset("toy", "toy.csv", read, template="Q: {text}", answer_words=("Yes", "No"))
    >>> load("toy", root, verify=False).prompts
    ['Q: good', 'Q: bad']
    >>> _ = unregister_dataset("toy")
    """
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise ValueError(f"name must be lower-case letters, digits, '-' or '_', got {name!r}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"dataset name {name!r} is taken (pass replace=True to redefine a dataset)")
    files, test_files = _file_names(files, "files", name), _file_names(test_files, "test_files", name)
    if not files:
        raise ValueError(f"files of dataset {name!r} must name at least one file")
    if not callable(reader):
        raise ValueError(f"reader of dataset {name!r} must be callable (paths -> DataFrame with 'text' and "
                         f"'label'), got {type(reader).__name__}")
    if not isinstance(template, str) or PLACEHOLDER not in template:
        raise ValueError(f"template of dataset {name!r} must contain {PLACEHOLDER!r}, got {template!r}")
    if answer_words is not None:
        answer_words = tuple(answer_words)
        if (len(answer_words) != 2 or not all(isinstance(w, str) and w.strip() for w in answer_words)
                or answer_words[0].lower() == answer_words[1].lower()):
            raise ValueError(f"answer_words of dataset {name!r} must be two different words (concept, opposite), "
                             f"got {answer_words!r}")
    if reference_cap is not None and (isinstance(reference_cap, bool) or not isinstance(reference_cap, int)
                                      or reference_cap < 1):
        raise ValueError(f"reference_cap of dataset {name!r} must be a positive int or None, got {reference_cap!r}")
    if not isinstance(sentiment, bool):
        raise ValueError(f"sentiment of dataset {name!r} must be a bool, got {sentiment!r}")
    sums = dict(sha256 or {})
    bad = {f: d for f, d in sums.items() if not (isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d))}
    if bad:
        raise ValueError(f"sha256 of dataset {name!r} must map file names to 64 lower-case hex digits, got {bad}")
    foreign = sorted(set(sums) - set(files) - set(test_files))
    if foreign:
        raise ValueError(f"sha256 of dataset {name!r} names {foreign}, which are not its files ({list(files)}"
                         f"{' + ' + str(list(test_files)) if test_files else ''}): a dataset sums its own files only")
    clash = {f: other.name for other in _REGISTRY.values() if not (replace and other.name == name)
             for f, d in other.sha256.items() if f in sums and sums[f] != d}
    if clash:
        raise ValueError(f"sha256 of dataset {name!r} gives {sorted(clash)} another checksum than dataset "
                         f"{sorted(set(clash.values()))} does (one file, one reference sum)")
    spec = DatasetSpec(name, files, reader, template, answer_words, reference_cap, bool(in_paper_grid),
                       group_column, test_files, sums, sentiment)
    _REGISTRY[name] = spec
    return spec


def unregister_dataset(name: str) -> DatasetSpec:
    """Remove a registered dataset; returns its entry.

    Parameters
    ----------
    name : str
        The dataset's name (case-insensitive).

    Returns
    -------
    DatasetSpec
        The entry removed.
    """
    return _REGISTRY.pop(get_dataset(name).name)


def get_dataset(name: str) -> DatasetSpec:
    """The entry of a registered dataset (case-insensitive); ``ValueError`` listing the known ones otherwise.

    Parameters
    ----------
    name : str
        The dataset's name.

    Returns
    -------
    DatasetSpec
        Its registry entry.

    Examples
    --------
    >>> get_dataset("STSA").test_files
    ('stsa.binary.test',)
    """
    spec = _REGISTRY.get(str(name).lower())
    if spec is None:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(_REGISTRY) or 'none'}")
    return spec


def dataset_names(*, paper_grid: bool | None = None) -> tuple:
    """Names of the registered datasets in registration order (``paper_grid``: only those in / outside the
    paper's grid).

    Parameters
    ----------
    paper_grid : bool, optional
        True: only datasets in the paper's grid; False: only those outside it; None: all.

    Returns
    -------
    tuple of str
        The names.

    Examples
    --------
    >>> dataset_names(paper_grid=False)
    ('coinflip',)
    """
    return tuple(n for n, s in _REGISTRY.items() if paper_grid is None or s.in_paper_grid == paper_grid)


def answer_pairs() -> dict:
    """Each registered dataset's answer pair (concept word, opposite word), for those that have one.

    Returns
    -------
    dict of str to (str, str)
        Dataset name -> (concept word, opposite word).
    """
    return {n: s.answer_words for n, s in _REGISTRY.items() if s.answer_words is not None}


def _known_sums() -> dict:
    """The reference checksums of every registered dataset's files."""
    return {f: d for s in _REGISTRY.values() for f, d in s.sha256.items()}


def _labelled(df: pd.DataFrame, text_column, label_column, path: Path, keep=()) -> pd.DataFrame:
    """A reader's table: ``text`` and 0/1 ``label`` from the named columns of ``df`` (errors name the file), plus
    the columns ``keep`` of ``df`` under their names."""
    table = pd.DataFrame({"text": _column(df, text_column, path).tolist(),
                          "label": _binary_column(df, label_column, path)})
    for column in keep:
        table[column] = _column(df, column, path).to_numpy()
    return table


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
    """A CSV of ``statement`` and 0/1 ``label`` (cities, Counterfact; Counterfact's ``subject`` is kept)."""
    df = _read_delimited(path)
    return _labelled(df, "statement", "label", path, keep=[c for c in ("subject",) if c in df])


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
        raise ValueError(f"{str(path)!r} must hold {{'examples': [{{'question': ..., 'answer': ...}}, ...]}}")
    for i, e in enumerate(ex):
        for key in ("question", "answer"):
            if not isinstance(e[key], str):
                raise ValueError(f"{str(path)!r}: examples[{i}].{key} must be a string, got {e[key]!r:.60} "
                                 f"({type(e[key]).__name__})")
    answers = [e["answer"].strip().lower() for e in ex]
    bad = sorted(set(answers) - {"yes", "no"})
    if bad:
        raise ValueError(f"{str(path)!r}: answers must be yes/no, found {bad[:5]}")
    return pd.DataFrame({"text": [e["question"] for e in ex], "label": [int(a == "yes") for a in answers]})


def _read_named(spec: DatasetSpec, root: Path, verify: bool, split: str = "train"):
    """(texts, labels, files, groups) of a registered dataset; groups is None unless it has a ``group_column``."""
    files, paths = {}, []
    for fname in spec.test_files if split == "test" else spec.files:
        path, digest = _check_file(root, fname, verify)
        files[fname] = digest
        paths.append(path)
    table = spec.reader(*paths)
    where = f"dataset {spec.name!r} ({', '.join(repr(str(p)) for p in paths)})"
    if not isinstance(table, pd.DataFrame) or not {"text", "label"} <= set(table.columns):
        raise ValueError(f"{where}: its reader must return a DataFrame with columns 'text' and 'label', got "
                         f"{list(table.columns) if isinstance(table, pd.DataFrame) else type(table).__name__}")
    labels = table["label"]
    bad = labels[~labels.isin([0, 1])]
    if len(bad):
        raise ValueError(f"{where}: labels must be 0/1 (1 = concept present), found {sorted(map(str, set(bad)))[:5]}")
    texts = _text_field(table["text"], where, "text")
    groups = None
    if spec.group_column is not None:
        groups = np.array(_text_field(_column(table, spec.group_column, paths[0]), where, spec.group_column))
    return texts, labels.astype(int).tolist(), files, groups


def _text_field(values, where: str, field: str) -> list:
    """The values of a text field as they are: each must be a non-blank string (an empty cell, a number or a
    missing value is refused, naming the file, the row and the field, never turned into ``'nan'`` or ``'3'``)."""
    values = list(values)
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}: row {i} field {field!r} must be non-blank text, got {value!r:.60} "
                             f"({type(value).__name__})")
    return values


# The seven benchmark datasets, in the order every table lists them.  Templates are the Concept-Depth prompts.
register_dataset(
    "stsa", "stsa.binary.train", read_stsa, test_files="stsa.binary.test", answer_words=("Positive", "Negative"),
    in_paper_grid=True, sentiment=True,
    template="{text} The sentence above is a movie review and reflects the writer's overall intention for this "
             "review. According to the sentence, judge whether the emotion is Positive or Negative.",
    sha256={"stsa.binary.train": "71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338",
            "stsa.binary.test": "6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b"})
register_dataset(
    "cities", "cities.csv", read_statements, template="Judge the statement is True or False. {text}",
    answer_words=("True", "False"), in_paper_grid=True,
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


def load(name: str, data_dir=None, *, max_per_class="reference", verify: bool = True, template=None,
         split: str = "train") -> ConceptDataset:
    """Load one of the benchmark datasets by name.

    Parameters
    ----------
    name : str
        A registered dataset (:func:`dataset_names`: ``stsa, cities, common, counterfact, hateeval, sarcasm,
        coinflip`` and any added with :func:`register_dataset`).
    data_dir : str or path-like, optional
        Directory holding the files (default: ``$RAPTOR_DATA``, then ``../shared/datasets``;
        :func:`resolve_data_dir`).
    max_per_class : "reference", None or int, default="reference"
        ``"reference"`` (the Concept-Depth caps), ``None`` (all rows) or an int (first k examples of each class
        in file order).
    verify : bool, default=True
        Check the files' sha256 against ``SHA256SUMS`` (or the built-in reference sums).
    template : str, optional
        Override the prompt template (must contain ``{text}``).
    split : {"train", "test"}, default="train"
        ``"test"``: the dataset's own held-out file, for those that ship one (a ``test_files`` entry in the
        registry: ``stsa.binary.test``).

    Returns
    -------
    ConceptDataset
        ``texts``, ``labels`` (0/1, 1 = concept present), ``prompts`` (template applied), ``template``.

    Examples
    --------
    >>> ds = load("cities", max_per_class=5)  # doctest: +SKIP
    >>> len(ds), ds.class_counts()  # doctest: +SKIP
    (10, {0: 5, 1: 5})
    """
    spec = get_dataset(name)
    key = spec.name
    if split not in ("train", "test") or (split == "test" and not spec.test_files):
        with_test = ", ".join(n for n in dataset_names() if get_dataset(n).test_files)
        raise ValueError(f"split must be 'train' or, for {with_test}, 'test'; got {split!r} for {key!r}")
    cap = _resolve_cap(key, max_per_class)
    root = resolve_data_dir(data_dir)
    texts, labels, files, groups = _read_named(spec, root, verify, split)
    keep = _cap_index(labels, cap)
    texts, labels = [texts[i] for i in keep], np.asarray(labels, dtype=np.int64)[keep]
    _check_two_classes(key, labels)
    return ConceptDataset(key, texts, labels, template or spec.template, files, cap,
                          groups=None if groups is None else groups[keep])


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
            f"{where} must hold binary labels (0/1, True/False, yes/no); row {bad[0]} ({_ROWS}) holds "
            f"{values[bad[0]]!r}, {len(bad)} row(s) in all hold {sorted({str(values[i]) for i in bad})[:10]}. Pass "
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
                raise ValueError(f"{str(p)!r}: a JSON object must hold exactly one list of records")
            obj = lists[0]
        if not isinstance(obj, list) or not obj or not all(isinstance(r, dict) for r in obj):
            raise ValueError(f"{str(p)!r} must hold a non-empty list of records (JSON objects)")
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
        raise ValueError(f"{str(p)!r}: column {text_column!r} must hold text (strings), but row {i} holds "
                         f"{t!r:.60} ({type(t).__name__})" + (f" (and {len(typed) - 1} more rows)" if len(typed) > 1
                                                             else "") + f" ({_ROWS})")
    texts = [str(t) for t in texts]
    labels = _labels_to01(df[label_column].tolist(), label_column, positive_label, p)
    cap = _resolve_cap("", max_per_class) if max_per_class is not None else None
    texts, labels = _cap_per_class(texts, labels, cap)
    _check_two_classes(name or p.stem, labels)
    return ConceptDataset(name or p.stem, texts, labels, template or PLACEHOLDER, {p.name: sha256_file(p)}, cap)
