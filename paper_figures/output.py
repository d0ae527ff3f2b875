"""Output helpers for ``paper_figures``: tables as CSV + Markdown, figures as PNG, atomic writes.

Every artefact is written to ``<out>/tables/NAME.csv`` (+ ``.md``) or ``<out>/figures/NAME.png`` (+ ``.pdf``) via a
temporary file and ``os.replace``, so an interrupted run never leaves a half-written file behind.
"""
from __future__ import annotations

import functools
import json
import warnings
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from empirical.common import files
from empirical.probes import get_method, load_concept_vectors

#: The open read recorders of :func:`recording_reads` (file names under ``OUT/tables``).
_RECORDERS: list = []

#: ``read_csv``'s options that read a saved table back to the very floats it was written from: round-trip parsing
#: before pandas 3.1, whose default parser may be off by an ulp (which flips a rounding tie in RESULTS.md); from 3.1
#: on every mode parses exactly and choosing one is deprecated (removed in pandas 4).
_EXACT_FLOATS = ({} if tuple(int(part) for part in pd.__version__.split(".")[:2]) >= (3, 1)
                 else {"float_precision": "round_trip"})


@contextmanager
def recording_reads():
    """Record the name of every file under ``OUT/tables`` that :func:`load_table` and :func:`load_json` read while
    the block runs: ``with recording_reads() as cited: write_results(out)`` gives the tables RESULTS.md rests on,
    which ``--publish`` commits (so that the published copy rebuilds itself).

    Yields
    ------
    set of str
        File names (``accuracy_by_seed.csv``, ``run_info.json``), filled as the block reads them.
    """
    names = set()
    _RECORDERS.append(names)
    try:
        yield names
    finally:
        _RECORDERS.remove(names)


def _record_read(path: Path) -> None:
    for names in _RECORDERS:
        names.add(path.name)


class PublishedTableChange(ValueError):
    """A rebuild (:func:`rebuilding`) was about to change a table that carries a checksum: a rebuild redraws and
    rewrites only what the published tables determine, and never changes one of them."""


_REBUILD = {"on": False}


@contextmanager
def rebuilding():
    """``--results-only``: inside the block :func:`save_table` never changes a checksummed table.

    A table whose new content equals the checksummed one is left as it is; one that would differ raises
    :class:`PublishedTableChange` (the figure that derives it cannot be redrawn from the tables at hand: on a
    published copy, ``layerwise_accuracy`` from the seed-42 tables alone would have replaced the five-seed table,
    n_seeds 5 -> 1, with a fresh checksum that hid the change).

    Yields
    ------
    None
    """
    before = _REBUILD["on"]
    _REBUILD["on"] = True
    try:
        yield
    finally:
        _REBUILD["on"] = before


def _check_unchanged(path: Path, df: pd.DataFrame) -> bool:
    """In a rebuild: True when ``path`` is checksummed and already holds ``df``; raise when it would change."""
    if not (_REBUILD["on"] and path.exists() and files.checksum_path(path).exists()):
        return False
    try:
        files.verify_checksum(path)
    except files.ChecksumError as exc:
        raise PublishedTableChange(f"{exc}: a rebuild does not replace a damaged checksummed table") from None
    if path.read_text() == df.to_csv(index=False):
        return True
    old, new = pd.read_csv(path, **_EXACT_FLOATS), df.reset_index(drop=True)
    raise PublishedTableChange(
        f"the rebuild would change the checksummed table {str(path)!r} ({len(old)} rows -> {len(new)} rows"
        f"{'' if list(old.columns) == list(new.columns) else ', other columns'}): either the data it derives from "
        "are not all in this folder or the code that derives it has changed since the run; what was published is "
        "kept (a new run republishes it)")


def save_table(df: pd.DataFrame, out: Path, name: str, *, floatfmt: str = ".4g") -> Path:
    """Write ``df`` to ``out/tables/name.csv`` and a Markdown rendering to ``name.md``; returns the CSV path.

    Inside :func:`rebuilding` a checksummed table is never changed (:class:`PublishedTableChange`)."""
    path = Path(out) / "tables" / f"{name}.csv"
    if _check_unchanged(path, df):
        return path
    path = files.write_checksum(files.write_csv(path, df))
    files.atomic_write_text(path.with_suffix(".md"), to_markdown(df, floatfmt=floatfmt) + "\n")
    return path


_FORCE = {"since": None}


def force_recompute(since: float | None) -> None:
    """``--force``: from now on :func:`load_table` ignores tables written before the time ``since``
    (``time.time()`` seconds), so every step is redone, while the tables this run writes are read
    back normally (by the figures and RESULTS.md).  ``None`` turns it off."""
    _FORCE["since"] = None if since is None else float(since)


def load_table(out: Path, name: str) -> pd.DataFrame | None:
    """The table a previous run saved with :func:`save_table` (to resume), or None when there is none.

    A table that fails its checksum (damaged, edited, or written before checksums) is not trusted:
    it is reported with a warning and None is returned, so the caller recomputes it."""
    path = Path(out) / "tables" / f"{name}.csv"
    if _FORCE["since"] is not None and path.exists() and path.stat().st_mtime < _FORCE["since"]:
        return None
    if path.exists():
        _record_read(path)
    try:
        return pd.read_csv(path, **_EXACT_FLOATS) if files.verify_checksum(path) else None
    except files.ChecksumError as exc:
        warnings.warn(f"{exc}; recomputing it", RuntimeWarning, stacklevel=2)
        return None


def table_or_compute(out: Path, name: str, compute, *, valid=None) -> pd.DataFrame:
    """The resumable step of a run: the table ``name`` an earlier run saved (:func:`load_table`, so checksums and
    ``--force`` apply), else ``compute()``, saved under that name (:func:`save_table`).

    Parameters
    ----------
    out : path
        The run's output directory.
    name : str
        The table's name (``tables/NAME.csv``).
    compute : callable
        ``compute()`` -> DataFrame; called only when no usable saved table exists.
    valid : callable, optional
        ``valid(table)`` -> bool: whether a saved table was made with this step's settings (say, the same layers);
        one it rejects is recomputed.

    Returns
    -------
    pandas.DataFrame
        The saved or the freshly computed table.
    """
    table = load_table(out, name)
    if table is not None and (valid is None or valid(table)):
        return table
    table = compute()
    save_table(table, out, name)
    return table


def load_finished_step(out: Path, tables: dict, figures=()) -> dict | None:
    """The tables of a step an earlier run finished, to resume it without recomputing.

    Parameters
    ----------
    out : path
        The run's output directory.
    tables : dict
        ``{name: {column: values}}``: every table to load (:func:`load_table`, so checksums and ``--force``
        apply) and, per table, the set of values each listed column must hold, so that a table made with other
        settings (say ``--quick``'s smaller simulation) is not reused.
    figures : sequence of str
        Figure names (``figures/NAME.png``) the step draws; all must exist.

    Returns
    -------
    dict or None
        ``{name: DataFrame}`` when everything is there and matches, else None (recompute the step).
    """
    out = Path(out)
    if not all((out / "figures" / f"{name}.png").exists() for name in figures):
        return None
    loaded = {}
    for name, required in tables.items():
        df = load_table(out, name)
        if df is None or any(col not in df or set(df[col].unique()) != set(values)
                             for col, values in required.items()):
            return None
        loaded[name] = df
    return loaded


def to_markdown(df: pd.DataFrame, *, floatfmt: str = ".4g") -> str:
    """Plain Markdown table (no optional ``tabulate`` dependency).  Cell text is escaped so that every
    row stays one table row: ``|`` -> ``\\|``, line breaks -> ``<br>``; a missing value is an empty cell."""
    def fmt(v):
        if v is None or (isinstance(v, float) and v != v):
            return ""
        if isinstance(v, float):
            return format(v, floatfmt)
        return str(v).replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(["---"] * len(cols)) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)


def draws_figures(func):
    """Decorator of every function that opens pyplot figures: when it raises, the figures it opened are closed
    (pyplot keeps open figures in a process-wide registry, so a failed drawing would leave its figure to the
    next caller: memory, and a wrong ``plt.gcf()``); on success :func:`save_figure` closes them.
    ``tests/test_architecture.py`` checks that every function of ``paper_figures`` calling ``plt.subplots`` or
    ``plt.figure`` carries it.

    Parameters
    ----------
    func : callable
        The drawing function.

    Returns
    -------
    callable
        The same function, closing its own figures when it raises.
    """
    @functools.wraps(func)
    def drawing(*args, **kwargs):
        import matplotlib.pyplot as plt

        before = set(plt.get_fignums())
        try:
            return func(*args, **kwargs)
        except BaseException:
            for number in set(plt.get_fignums()) - before:
                plt.close(number)
            raise

    drawing.draws_figures = True
    return drawing


def save_figure(fig, out: Path, name: str, *, dpi: int = 130) -> Path:
    """Save a matplotlib figure to ``out/figures/name.png`` and ``name.pdf`` (vector) atomically and close
    it; returns the PNG path.  The numbers behind each figure are saved with :func:`save_table`."""
    target = Path(out) / "figures" / f"{name}.png"
    with files.atomic_path(target.with_suffix(".pdf"), suffix=".pdf") as tmp:
        fig.savefig(tmp, bbox_inches="tight", format="pdf")
    return files.save_figure(fig, target, dpi=dpi)


def save_json(obj, out: Path, name: str) -> Path:
    """Write ``obj`` as JSON to ``out/tables/name.json`` atomically, with its checksum (:func:`load_json`)."""
    return files.write_checksum(files.atomic_write_text(Path(out) / "tables" / f"{name}.json",
                                                        json.dumps(obj, indent=2, default=float)))


def load_json(out: Path, name: str) -> dict | None:
    """The JSON record ``out/tables/name.json`` that :func:`save_json` wrote, or None when there is none.

    A record whose checksum does not match is not trusted (a warning names it, and None is returned); one written
    before checksums (no sidecar) is read as it is.  The read is recorded (:func:`recording_reads`).

    Parameters
    ----------
    out : path
        The run's output directory.
    name : str
        The record's name, without ``.json``.

    Returns
    -------
    dict or None
    """
    path = Path(out) / "tables" / f"{name}.json"
    if not path.exists():
        return None
    _record_read(path)
    if files.checksum_path(path).exists():
        try:
            files.verify_checksum(path)
        except files.ChecksumError as exc:
            warnings.warn(f"{exc}; not used", RuntimeWarning, stacklevel=2)
            return None
    record = files.read_json(path, "run record")
    if not isinstance(record, dict):
        raise ValueError(f"{str(path)!r} is not a JSON object")
    return record


def vectors_path(out: Path, dataset: str, method: str) -> Path:
    """Where the accuracy step saves ``method``'s concept vectors of ``dataset`` at the paper's split (safetensors +
    JSON, without suffix): ``tables/concept_vectors_<dataset>`` for RAPTOR, ``..._<cli name>`` for the others."""
    spec = get_method(method)
    suffix = "" if spec.name == "RAPTOR" else f"_{spec.cli_name}"
    return Path(out) / "tables" / f"concept_vectors_{dataset}{suffix}"


def load_saved_vectors(out: Path, dataset: str, methods, n_rows: int, split_seed: int):
    """The concept vectors of ``methods`` that the accuracy step saved for ``dataset`` (:func:`vectors_path`), each
    probe with the validation accuracy recorded in their metadata, or None when one is missing, damaged (a warning
    names it) or was fitted on other data (another row count or split seed), so that the caller fits them itself.

    Returns
    -------
    dict of str to ConceptVectors or None
        Per method its vectors, each probe with its :attr:`~empirical.probes.LinearProbe.validation_accuracy`.
    """
    vectors = {}
    for method in methods:
        path = vectors_path(out, dataset, method)
        if not Path(f"{path}.json").exists():
            return None
        if _FORCE["since"] is not None and Path(f"{path}.json").stat().st_mtime < _FORCE["since"]:
            return None
        try:
            cv = load_concept_vectors(path)
        except (ValueError, OSError) as exc:
            warnings.warn(f"{exc}; fitting the concept vectors again", RuntimeWarning, stacklevel=2)
            return None
        meta = cv.metadata
        if (meta.get("n_rows") != n_rows or meta.get("split_seed") != split_seed
                or not isinstance(meta.get("validation_accuracy"), dict)):
            return None
        accuracy = {int(layer): float(acc) for layer, acc in meta["validation_accuracy"].items()}
        vectors[method] = cv.with_statistics(validation_accuracy=accuracy)
    return vectors

