"""The registry of named concept datasets (:func:`register_dataset`, :func:`get_dataset`, :func:`dataset_names`), the
reference checksums of their files, and :func:`load` of a registered dataset."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...common.files import MAX_TABLE_BYTES, check_input_file, read_input_text, sha256_file
from ._concept import PLACEHOLDER, ConceptDataset, _cap_index, _check_two_classes, _resolve_cap
from ._files import _WHERE, _column, _text_field, resolve_data_dir


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
        raise ValueError(f"files of dataset {name!r} must name at least one file, got {files!r}")
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
        raise ValueError(f"{where}: labels must be 0/1 (1 = concept present), got {sorted(map(str, set(bad)))[:5]}")
    texts = _text_field(table["text"], where, "text")
    groups = None
    if spec.group_column is not None:
        groups = np.array(_text_field(_column(table, spec.group_column, paths[0]), where, spec.group_column))
    return texts, labels.astype(int).tolist(), files, groups


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
        raise ValueError(f"split must be 'train' or, for {with_test}, 'test', got {split!r} for {key!r}")
    cap = _resolve_cap(max_per_class, spec.reference_cap, registered=True)
    root = resolve_data_dir(data_dir)
    texts, labels, files, groups = _read_named(spec, root, verify, split)
    keep = _cap_index(labels, cap)
    texts, labels = [texts[i] for i in keep], np.asarray(labels, dtype=np.int64)[keep]
    _check_two_classes(key, labels)
    return ConceptDataset(key, texts, labels, template or spec.template, files, cap,
                          groups=None if groups is None else groups[keep])
