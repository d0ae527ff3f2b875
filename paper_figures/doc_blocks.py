"""The documentation quotes no hand-typed result: a result in README.md or docs/*.md is a generated block.

A generated block is the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` (markers included) that
:data:`BLOCKS` ``[NAME]`` writes from the published copy of a run (``docs/results``): the README's claims table
(:func:`paper_figures.publish.readme_claims_block`), docs/steering.md's timing-model table
(:func:`paper_figures.steering_text.cost_block`), docs/results.md's Coinflip numbers (:func:`coinflip_block`),
docs/spectral_theory.md's agreement table (:func:`spectral_block`) and docs/learning_curves.md's table of the
forecasters (:func:`forecaster_block`).
``python -m paper_figures --publish docs/results --sync-readme`` rewrites them (:func:`sync_blocks`), and
``tests/test_results_small_things.py`` checks that every block of README.md and docs/*.md is registered here and
holds its generator's text, as ``tests/test_results.py`` checks the README's claims table.

Outside the blocks a document types no result of a run: :func:`hand_typed_results` finds the forms in which a run's
results get typed by hand (:data:`HAND_TYPED`: a 95 % interval, a run's wall time in decimal minutes or in
thousands of seconds) outside blocks, code spans and code blocks, and the test checks that README.md and docs/*.md
have none.  It is a net for the usual forms, not a proof: a page that quotes a result in other words is caught by
review, and its number is then generated here or cut.
"""
from __future__ import annotations

import re
from pathlib import Path

from empirical.common.files import atomic_write_text

from .output import load_table
from .publish import readme_claims_block
from .steering_text import cost_block

#: Markers of a generated block: ``<!-- NAME:start -->`` ... ``<!-- NAME:end -->``.
_BLOCK = re.compile(r"<!-- ([a-z0-9-]+):start -->.*?<!-- \1:end -->", re.S)
#: The forms of a hand-typed run result (name -> pattern): a bracketed interval of decimals ("[-0.10, 0.48]"), a
#: wall time in decimal minutes ("43.1 min") and one in thousands of seconds ("4,658 s", "1 248 s").
HAND_TYPED = {
    "interval": re.compile(r"\[\s*[+\-−]?\d*\.\d+\s*,\s*[+\-−]?\d*\.\d+\s*\]"),
    "decimal minutes": re.compile(r"(?<![\w.])\d+\.\d+\s?min\b"),
    "thousands of seconds": re.compile(r"(?<![\w.,])\d{1,3}[, \u00a0\u202f]\d{3} ?s\b"),
}
#: Coinflip's layers that docs/results.md quotes (the early layers where xRFM reads the parity shortcut).
COINFLIP_LAYERS = (1, 2, 3, 4)
#: The linear probes that docs/results.md sets against xRFM on Coinflip.
LINEAR_PROBES = ("RAPTOR", "RAPTOR (C = 1)", "GCS", "DiffMeans")


def block_markers(name: str) -> tuple:
    """The start and end markers of the generated block ``name``.

    Parameters
    ----------
    name : str
        The block's name, a key of :data:`BLOCKS` (lower-case letters, digits and hyphens: ``"steering-cost"``).

    Returns
    -------
    tuple of (str, str)
        ``("<!-- NAME:start -->", "<!-- NAME:end -->")``, the HTML comments that open and close the block.
    """
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def generated_blocks(text: str) -> dict:
    """The generated blocks of a document: name -> the block's text, markers included.

    A block runs from its start marker to the first end marker of the same name (:func:`block_markers`); a start
    marker without its end marker opens no block.

    Parameters
    ----------
    text : str
        The document's Markdown.

    Returns
    -------
    dict of str to str
        Block name -> the block's exact text, markers included, in document order; a name that occurs twice keeps
        its last block.
    """
    return {m.group(1): m.group(0) for m in _BLOCK.finditer(text)}


def coinflip_block(published) -> str:
    """docs/results.md's Coinflip numbers, from the published ``layerwise_accuracy`` table: at each of
    :data:`COINFLIP_LAYERS`, xRFM's mean test accuracy over the split seeds with their range, and the range of the
    linear probes' means (:data:`LINEAR_PROBES`); a copy without the table says so.

    Parameters
    ----------
    published : path
        The published copy (``docs/results``) or a run's folder.

    Returns
    -------
    str
        The block, markers included.
    """
    start, end = block_markers("coinflip-shortcut")
    table = load_table(Path(published), "layerwise_accuracy")
    rows = None if table is None else table[(table.dataset == "coinflip") & table.layer.isin(COINFLIP_LAYERS)]
    if rows is None or not len(rows) or "xRFM" not in set(rows.method):
        return "\n".join([start, "(the published run has no Coinflip rows in `tables/layerwise_accuracy.csv`)", end])
    lines = [start, "| layer | xRFM: mean over the split seeds (min-max) | the linear probes' means "
                    f"({', '.join(LINEAR_PROBES)}) |", "| --- | --- | --- |"]
    for layer, at in rows.groupby("layer"):
        x = at[at.method == "xRFM"].iloc[0]
        linear = at[at.method.isin(LINEAR_PROBES)]["mean"]
        lines.append(f"| {layer} | {x['mean']:.3f} ({x['min']:.2f}-{x['max']:.2f}, {int(x['n_seeds'])} seeds) | "
                     f"{linear.min():.3f}-{linear.max():.3f} |")
    return "\n".join([*lines, end])


#: The predictors docs/spectral_theory.md's agreement table shows (``spectral_agreement``'s ``predictor``).
SPECTRAL_PREDICTORS = ("spectral/deconvolved/sample", "spectral/calibrated/sample", "isotropic", "pool_cv")
#: Its columns: (``spectral_agreement`` column, heading); the paired differences (``mae_gain_*``) with their
#: ``_low`` / ``_high`` interval, the errors as the mean over the seeds.
SPECTRAL_COLUMNS = (("mae_lambda", "MAE along lambda"), ("mae_gain_vs_pool_cv_lambda", "pool_cv - it along lambda"),
                    ("mae_delta", "MAE along delta"), ("mae_gain_vs_pool_cv_delta", "pool_cv - it along delta"),
                    ("stability_fixed_C_abs_error_best_layer", "stability error, runs at the fixed C*"),
                    ("stability_abs_error_best_layer", "stability error, runs re-selecting C (RESULTS.md's)"))


def _estimate(row, column) -> str:
    value = row[column]
    if value != value:  # NaN: the predictor has no such number (pool_cv's stability)
        return "--"
    if not column.startswith("mae_gain"):
        return f"{value:.3f}"
    if row["predictor"] == "pool_cv":
        return "0 (itself)"
    low, high = row.get(f"{column}_low"), row.get(f"{column}_high")
    return f"{value:+.3f}" + (f" [{low:+.3f}, {high:+.3f}]" if low == low and high == high and low is not None else "")


def spectral_block(published) -> str:
    """docs/spectral_theory.md's agreement table, from the published ``spectral_agreement`` table: per dataset (at
    its best layer, the mean over the split seeds; a paired difference with its 95 % interval, the corrected
    resampled t) and predictor of :data:`SPECTRAL_PREDICTORS`, the columns of :data:`SPECTRAL_COLUMNS`; a copy
    without the table says so.

    Parameters
    ----------
    published : path
        The published copy (``docs/results``) or a run's folder.

    Returns
    -------
    str
        The block, markers included.
    """
    start, end = block_markers("spectral-agreement")
    table = load_table(Path(published), "spectral_agreement")
    if table is None or not {"dataset", "predictor", "best_layer", "seeds"} <= set(table.columns):
        return "\n".join([start, "(the published run has no `tables/spectral_agreement.csv`)", end])
    columns = [(column, heading) for column, heading in SPECTRAL_COLUMNS if column in table]
    lines = [start, "| dataset (best layer, seeds) | predictor | " + " | ".join(h for _, h in columns) + " |",
             "| --- " * (len(columns) + 2) + "|"]
    for row in table[table.predictor.isin(SPECTRAL_PREDICTORS)].to_dict("records"):
        lines.append(f"| {row['dataset']} ({row['best_layer']}, {row['seeds']}) | {row['predictor']} | "
                     + " | ".join(_estimate(row, column) for column, _ in columns) + " |")
    return "\n".join([*lines, end])


#: The baselines docs/learning_curves.md's forecaster table compares every forecaster with (``forecasters``'
#: ``wins_<B>`` and ``d_<B>`` columns): name -> heading.
FORECAST_BASELINES = (("no_gain", "no gain"), ("power_law", "power law"), ("families_best", "best family"))


def _fraction(value) -> str:
    return "--" if value != value else f"{value:.2f}"


def _count(value) -> str:
    return "--" if value is None or value != value else str(int(value))


def _difference(row, baseline) -> str:
    value, low, high = (row.get(f"d_{baseline}{suffix}", float("nan")) for suffix in ("", "_low", "_high"))
    if value != value:
        return "--"
    return f"{value:+.3f}" + (f" [{low:+.3f}, {high:+.3f}]" if low == low and high == high else "")


def forecaster_block(published) -> str:
    """docs/learning_curves.md's table of the forecasters, from the published ``forecasters`` table
    (:func:`paper_figures.forecast_calibration.forecaster_table`): every forecaster at every multiple of the pool,
    with the datasets as the unit: the mean over datasets of the per-dataset MAE and bias, the 90 % interval's
    coverage pooled and on the worst dataset, the share of pool draws whose forecast best layer is within 1 point
    of the true best, and against each of :data:`FORECAST_BASELINES` the datasets won and the mean paired MAE
    difference with its 95 % t-interval over datasets (negative: the forecaster is better); a copy without the
    table says so.

    Parameters
    ----------
    published : path
        The published copy (``docs/results``) or a run's folder.

    Returns
    -------
    str
        The block, markers included.
    """
    start, end = block_markers("learning-forecasters")
    table = load_table(Path(published), "forecasters")
    needed = {"method", "multiple", "datasets", "mae", "bias", "coverage", "coverage_min", "best_layer_within_1pt"}
    if table is None or not needed <= set(table.columns):
        return "\n".join([start, "(the published run has no `forecasters` table: the learning-curve section "
                                  "(`--only learning_curves --learning-scale goal`) writes it)", end])
    headings = ["forecaster", "target / pool", "datasets", "MAE", "bias", "coverage (pooled; worst dataset)",
                "best layer within 1 pt", "datasets won against " + " / ".join(h for _, h in FORECAST_BASELINES),
                *(f"MAE - {heading} [95 %]" for _, heading in FORECAST_BASELINES)]
    lines = [start, "| " + " | ".join(headings) + " |", "| --- " * len(headings) + "|"]
    for row in table.to_dict("records"):
        wins = " / ".join(_count(row.get(f"wins_{baseline}")) if row.get(f"d_{baseline}") == row.get(f"d_{baseline}")
                          else "--" for baseline, _ in FORECAST_BASELINES)  # no dataset in common: nothing won
        lines.append(f"| {row['method']} | {int(row['multiple'])}x | {int(row['datasets'])} | {row['mae']:.3f} | "
                     f"{row['bias']:+.3f} | {_fraction(row['coverage'])}; {_fraction(row['coverage_min'])} | "
                     f"{_fraction(row['best_layer_within_1pt'])} | {wins} | "
                     + " | ".join(_difference(row, b) for b, _ in FORECAST_BASELINES) + " |")
    return "\n".join([*lines, end])


def _claims_block(published) -> str:
    return readme_claims_block(Path(published) / "claims.csv")


def _steering_cost_block(published) -> str:  # the timing model's table: code, not the run
    return cost_block()


#: Every generated block: name -> (document, relative to the repository root; generator of the published copy).
BLOCKS = {
    "claims-table": ("README.md", _claims_block),
    "steering-cost": ("docs/steering.md", _steering_cost_block),
    "coinflip-shortcut": ("docs/results.md", coinflip_block),
    "spectral-agreement": ("docs/spectral_theory.md", spectral_block),
    "learning-forecasters": ("docs/learning_curves.md", forecaster_block),
}


def _blank(match) -> str:
    """A match's text as spaces, its line breaks kept (so that line numbers stay)."""
    return re.sub(r"[^\n]", " ", match.group(0))


def hand_typed_results(text: str) -> list:
    """The hand-typed run results of a Markdown document (:data:`HAND_TYPED`), outside its generated blocks, fenced
    code blocks and code spans.

    Those regions are blanked to spaces before the search, line breaks kept, so the line numbers are the document's.

    Parameters
    ----------
    text : str
        The document's Markdown.

    Returns
    -------
    list of (int, str, str)
        ``(line, form, text)`` per finding: the 1-based line number, the :data:`HAND_TYPED` form's name and the
        matched text; sorted by line, then form, then text.  Empty when the document types no result by hand.
    """
    text = _BLOCK.sub(_blank, text)
    text = re.sub(r"^```.*?^```", _blank, text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", _blank, text)
    found = [(text.count("\n", 0, m.start()) + 1, form, m.group(0))
             for form, pattern in HAND_TYPED.items() for m in pattern.finditer(text)]
    return sorted(found)


def sync_blocks(root, published, names=None) -> list:
    """Rewrite the generated blocks ``names`` (default: all of :data:`BLOCKS`) of the documents under ``root`` from
    the published copy ``published``; a document that is not there, or holds no such block, is left alone.

    Each block's text is replaced by its generator's output (:data:`BLOCKS`), markers included; the rest of the
    document is kept byte for byte, and a document is written (atomically) only when its text changes.

    Parameters
    ----------
    root : path
        The repository root; the documents are the paths of :data:`BLOCKS` relative to it.
    published : path
        The published copy (``docs/results``) or a run's folder, handed to each block's generator.
    names : iterable of str, optional
        The blocks to rewrite, keys of :data:`BLOCKS` (an unknown name raises ``KeyError``); None (default): all.

    Returns
    -------
    list of pathlib.Path
        The documents rewritten (those whose text changed).
    """
    written = []
    for name in BLOCKS if names is None else names:
        document, generate = BLOCKS[name]
        path = Path(root) / document
        if not path.is_file():
            continue
        text = path.read_text()
        old = generated_blocks(text).get(name)
        if old is None:
            continue
        new = text.replace(old, generate(published))
        if new != text:
            written.append(atomic_write_text(path, new))
    return written
