"""``--publish DIR``: a small, committable copy of a run that rebuilds itself.

The copy has the run's own layout: ``RESULTS.md`` (verbatim), ``claims.csv``, ``tables/`` with every table and
record RESULTS.md and the claims table read (each with its checksum sidecar, so that a rebuild trusts them), and
``figures/`` with every figure RESULTS.md cites, downscaled, each with the table of its numbers
(``tables/<figure>.csv``) where the run wrote one.  So ``python -m paper_figures --results-only --out COPY`` on a
copy gives back the same ``claims.csv`` and ``RESULTS.md``, byte for byte (a test checks it).

A run is published only when it comes from one commit on a clean tree: every invocation recorded in
``tables/run_info.json`` ran at the same git commit without uncommitted changes (resumed and interrupted invocations
at that commit are fine, and each is recorded); ``allow_mixed_commits`` overrides this, and RESULTS.md's run lines
then show the commits.  Nor is a run whose invocations overlap in time (:func:`check_invocation_times`, from the
record's start and end stamps: :mod:`paper_figures.run_record`).

A publication deletes or replaces only what a publication wrote: it keeps a manifest of the files it wrote
(``DIR/.publication.json``), removes only files an earlier manifest lists that this one does not write, and refuses
a non-empty folder that has no manifest, or a file in the way that no manifest lists (the user's own files).

The figures are downscaled with Pillow (matplotlib's own image dependency); the full-resolution PNG and PDF stay
in the run's folder.  They are not colour-quantised: a 64-colour palette merged the colours of different series (a
reader could no longer tell sarcasm from hateeval in the steering figure), and the colour of each method is the
figures' legend.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path, PurePosixPath

import pandas as pd
from PIL import Image

from empirical.common.files import (
    atomic_path,
    atomic_write_text,
    checksum_path,
    read_json,
    refuse_overwriting_inputs,
    write_json,
)

from . import output
from .results import write_results
from .run_record import invocations, overlapping_invocations

#: Figures the README shows (file stems in ``OUT/figures``).
KEY_FIGURES = ("accuracy_differences", "stability_by_layer", "spectral_stsa", "steering_metrics", "steering_text",
               "steering_text_null", "learning_curves")
#: Width of a published figure in pixels.
WIDTH = 900
#: Markers around the claims table that :func:`sync_readme` writes into the README.
README_START, README_END = "<!-- claims-table:start -->", "<!-- claims-table:end -->"
#: The list of the files a publication wrote, in the published folder (paths relative to it).
MANIFEST = ".publication.json"
#: Its format tag.
MANIFEST_FORMAT = "raptor-publication/1"
#: A figure RESULTS.md cites: ``figures/<stem>.png``.
_CITED_FIGURE = re.compile(r"\(figures/([A-Za-z0-9_.\-]+)\.png\)")


def shrink_png(source: Path, target: Path, width: int = WIDTH) -> Path:
    """Write ``source`` downscaled to ``width`` pixels (aspect kept; full colour, optimised PNG)."""
    with Image.open(source) as im:
        im = im.convert("RGB")
        if im.width > width:
            im = im.resize((width, round(im.height * width / im.width)), Image.LANCZOS)
        with atomic_path(target, suffix=".png") as tmp:
            im.save(tmp, format="PNG", optimize=True)
    return target


#: The verdict of a claim the run did not test (no rule applied).
UNTESTED = "--"


def tested_claims(table: pd.DataFrame) -> list:
    """The claims of a claims table that were tested (a verdict other than :data:`UNTESTED`), in order."""
    return [c for c, v in zip(table["claim"], table["verdict"]) if str(v) != UNTESTED]


def check_not_partial(new: pd.DataFrame, target, allow_partial: bool = False) -> None:
    """Refuse to publish ``new`` over the ``claims.csv`` in ``target`` when a claim tested there is not tested in
    ``new`` (an empty, partial or other run would replace complete results); ``allow_partial`` lets it through.

    Raises
    ------
    ValueError
        Naming the published file, how many of its tested claims the run leaves untested and the first of them.
    """
    published = Path(target) / "claims.csv"
    if allow_partial or not published.is_file():
        return
    old = pd.read_csv(published, keep_default_na=False)
    if not {"claim", "verdict"} <= set(old.columns):
        return
    lost = [c for c in tested_claims(old) if c not in set(tested_claims(new))]
    if lost:
        raise ValueError(f"refusing to publish over {str(published)!r}: it tests {len(tested_claims(old))} claims "
                         f"and this run leaves {len(lost)} of them untested (first: {lost[0][:80]!r}); finish the run "
                         "or pass --allow-partial to replace the published results anyway")


def read_manifest(target) -> set | None:
    """The files (relative POSIX paths) the manifest of ``target`` lists, or None when it has none; a damaged
    manifest, or one naming a path outside ``target``, is a ValueError naming it."""
    path = Path(target) / MANIFEST
    if not os.path.lexists(path):
        return None
    try:
        info = read_json(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"the publication manifest {str(path)!r} cannot be read ({exc}); a publication replaces "
                         "only what its manifest lists") from None
    names = info.get("files") if isinstance(info, dict) and info.get("format") == MANIFEST_FORMAT else None
    if not isinstance(names, list) or not all(isinstance(n, str) and _relative(n) for n in names):
        raise ValueError(f"{str(path)!r} is not a publication manifest ({MANIFEST_FORMAT}: a list of relative paths)")
    return set(names)


def _relative(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and not PurePosixPath(name).is_absolute() and ".." not in parts and MANIFEST not in parts


def write_manifest(target, names) -> Path:
    """Record ``names`` (paths relative to ``target``) as the files a publication wrote there."""
    return write_json(Path(target) / MANIFEST, {"format": MANIFEST_FORMAT, "files": sorted(set(names))})


def check_owned(target, names) -> set:
    """The files an earlier publication wrote in ``target`` (its manifest; empty for a new or empty folder), after
    checking that publishing ``names`` there replaces none of the user's files.

    Raises
    ------
    ValueError
        ``target`` is not empty and has no manifest (its files may be the user's), or a file of ``names`` is
        already there without being listed in the manifest; the message names the folder (and the file).
    """
    target = Path(target)
    if not target.is_dir():
        return set()
    old = read_manifest(target)
    if old is None:
        if any(target.iterdir()):
            raise ValueError(f"refusing to publish into {str(target)!r}: the folder is not empty and holds no "
                             f"publication manifest ({MANIFEST}), so its files may be yours and a publication "
                             "would replace or delete them; publish into a new or empty folder")
        return set()
    foreign = sorted(n for n in set(names) - old if os.path.lexists(target / n))
    if foreign:
        raise ValueError(f"refusing to publish into {str(target)!r}: {foreign[0]!r}"
                         f"{f' (and {len(foreign) - 1} more)' if len(foreign) > 1 else ''} is there but no earlier "
                         f"publication wrote it ({MANIFEST} does not list it); move it away first")
    return old


def check_complete(info: dict, sections, where) -> None:
    """Refuse (ValueError naming ``where``) a run that is not complete: some invocation ran ``--quick``, or the
    sections ``sections`` did not all finish in full-mode invocations.  The README's claims table is regenerated
    only from a complete run."""
    runs = invocations(info) if info else []
    quick = [i for i, r in enumerate(runs, start=1) if r.get("mode") != "full"]
    done = {s for r in runs if r.get("mode") == "full" and r.get("status") == "complete" for s in r.get("sections", ())}
    missing = [s for s in sections if s not in done]
    if not runs or quick or missing:
        raise ValueError(f"the run in {str(where)!r} is not complete (sections not finished in full mode: "
                         f"{', '.join(missing) or 'none'}; quick or unknown-mode invocations: {quick or 'none'}): "
                         "the README's claims table is regenerated only from a complete run")


def check_one_clean_commit(info: dict, where) -> str:
    """The one git commit every invocation of a run ran at, or a ValueError naming ``where`` and what differs
    (several commits, uncommitted changes, an unknown commit, or no run record at all).

    Parameters
    ----------
    info : dict
        The run record (:func:`paper_figures.output.load_json` of ``run_info``); empty for a run without one.
    where : path
        The run's folder, for the message.

    Returns
    -------
    str
        The commit.
    """
    if not info:
        raise ValueError(f"{str(where)!r} has no run record (tables/run_info.json): a run is published only with it")
    runs = invocations(info)
    commits = sorted({str(r.get("git_commit", "unknown")) for r in runs})
    dirty = [i for i, r in enumerate(runs, start=1) if r.get("git_dirty") is not False]
    if len(commits) != 1 or "unknown" in commits or dirty:
        raise ValueError(f"the run in {str(where)!r} does not come from one commit on a clean tree (commits "
                         f"{', '.join(c[:12] for c in commits)}; invocations with uncommitted changes or an unknown "
                         f"state: {dirty or 'none'}); rerun it at one commit, or pass --allow-mixed-commits")
    return commits[0]


def check_invocation_times(info: dict, where) -> None:
    """Refuse a run whose invocations overlap in time (two processes on one folder: one read what the other was
    writing, and their timings shared the cores), from the run record's stamps
    (:func:`paper_figures.run_record.overlapping_invocations`; entries without stamps are not checked).

    Raises
    ------
    ValueError
        Naming ``where`` and every overlap, with the invocations' times; or a damaged stamp.
    """
    overlaps = overlapping_invocations(info or {})
    if overlaps:
        raise ValueError(f"the run in {str(where)!r} has invocations that ran at the same time ("
                         + "; ".join(words for _, _, words in overlaps) + "): their tables and timings may mix; "
                         "rerun the sections one after the other")


def publish(out, target, *, allow_mixed_commits: bool = False, allow_partial: bool = False) -> list:
    """Copy the run in ``out`` to ``target`` so that it rebuilds itself: RESULTS.md and claims.csv regenerated from
    the run's tables, every table and record they read (with its checksum), and every figure RESULTS.md cites
    (downscaled); returns the written paths.

    Parameters
    ----------
    out : path
        The run's folder (``--out``).
    target : path
        The published copy (``--publish``), e.g. ``docs/results``: a new or empty folder, or one an earlier
        publication wrote (its manifest, :data:`MANIFEST`, lists what it wrote); the files that manifest lists and
        this publication does not write are removed, no other file is replaced or removed (:func:`check_owned`).
    allow_mixed_commits : bool, default=False
        Publish a run whose invocations ran at several commits or on a dirty tree (:func:`check_one_clean_commit`).
    allow_partial : bool, default=False
        Publish a run that leaves untested a claim that the published ``claims.csv`` tests
        (:func:`check_not_partial`; refused before anything is written otherwise).

    Returns
    -------
    list of pathlib.Path
    """
    out, target = Path(out), Path(target)
    if out.is_dir():  # a target that is (or links to) the run's folder or one of its subfolders would overwrite it
        sources = [path for path in out.rglob("*") if path.is_file()]
        refuse_overwriting_inputs(
            [("--publish", target / name) for name in ("RESULTS.md", "claims.csv")]
            + [("--publish", target / path.parent.name / path.name) for path in sources
               if path.parent.name in ("tables", "figures")],
            [("of the run in --out", path) for path in sources])
        refuse_overwriting_inputs([("--publish", target)],  # nor the run's folder or one of its folders itself
                                  [("of the run in --out", path) for path in (out, out / "tables", out / "figures")])
    info = output.load_json(out, "run_info") or {}
    if not allow_mixed_commits:
        check_one_clean_commit(info, out)
    check_invocation_times(info, out)
    with output.recording_reads() as cited:
        write_results(out)  # RESULTS.md and claims.csv, from the tables recorded as read
    check_not_partial(pd.read_csv(out / "claims.csv", keep_default_na=False), target, allow_partial)
    text = (out / "RESULTS.md").read_text()
    figures = sorted(set(_CITED_FIGURE.findall(text)))
    missing = [stem for stem in figures if not (out / "figures" / f"{stem}.png").is_file()]
    if missing:
        raise ValueError(f"RESULTS.md of {str(out)!r} cites figures the run does not have: {', '.join(missing)}")
    # a published figure comes with the numbers behind it (its table of the same name, where the run wrote one),
    # so that a text citing a figure's table cites a committed file
    tables = set(cited) | {f"{stem}.csv" for stem in figures if (out / "tables" / f"{stem}.csv").is_file()}
    names = {"RESULTS.md", "claims.csv", *(f"tables/{name}" for name in tables),
             *(f"figures/{stem}.png" for stem in figures),
             *(f"tables/{checksum_path(name).name}" for name in tables
               if checksum_path(out / "tables" / name).exists())}
    old = check_owned(target, names)  # nothing is written or deleted before this
    write_manifest(target, old | names)  # a publication stopped midway still owns what it wrote
    written = []
    for name in sorted(old - names):  # an earlier publication's files that this one does not write go
        (target / name).unlink(missing_ok=True)
    (target / "tables").mkdir(parents=True, exist_ok=True)
    (target / "figures").mkdir(parents=True, exist_ok=True)
    for name in sorted(tables):
        source = out / "tables" / name
        with atomic_path(target / "tables" / name, suffix=source.suffix) as tmp:
            shutil.copyfile(source, tmp)
        written.append(target / "tables" / name)
        if checksum_path(source).exists():
            with atomic_path(checksum_path(target / "tables" / name), suffix=".sha256") as tmp:
                shutil.copyfile(checksum_path(source), tmp)
            written.append(checksum_path(target / "tables" / name))
    for stem in figures:
        written.append(shrink_png(out / "figures" / f"{stem}.png", target / "figures" / f"{stem}.png"))
    with atomic_path(target / "claims.csv", suffix=".csv") as tmp:
        shutil.copyfile(out / "claims.csv", tmp)
    written.append(target / "claims.csv")
    written.append(atomic_write_text(target / "RESULTS.md", text))
    write_manifest(target, names)
    return written


def readme_claims_block(claims_csv) -> str:
    """The README's claims table, generated from a published ``claims.csv`` (never typed by hand): one row per
    claim with its datasets, our numbers and the verdict, between :data:`README_START` and :data:`README_END`."""
    table = pd.read_csv(claims_csv, keep_default_na=False)
    columns = [c for c in ("area", "claim", "datasets", "family", "ours", "mde", "p", "verdict_per_claim", "p_holm",
                           "verdict") if c in table]
    for column in ("p", "p_holm"):
        if column in table:
            table[column] = [f"{float(v):.2g}" if v not in ("", None) else "--" for v in table[column]]
    rows = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    for r in table[columns].itertuples(index=False):
        rows.append("| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in r) + " |")
    return "\n".join([README_START, *rows, README_END])


def sync_readme(readme, claims_csv) -> Path:
    """Replace the claims table between the markers of ``readme`` by :func:`readme_claims_block` of
    ``claims_csv``; a README without the markers is an error naming the file."""
    readme = Path(readme)
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise ValueError(f"{str(readme)!r} has no claims-table markers ({README_START} ... {README_END})")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    text = head + readme_claims_block(claims_csv) + tail
    # figure links of the earlier, flat layout (DIR/<stem>.png) follow the figures to DIR/figures/<stem>.png
    published = Path(claims_csv).parent
    for stem in KEY_FIGURES:
        if (published / "figures" / f"{stem}.png").is_file():
            text = re.sub(rf"\]\(([^)\s]*/)?{re.escape(published.name)}/{stem}\.png\)",
                          lambda m, stem=stem: f"]({m.group(1) or ''}{published.name}/figures/{stem}.png)", text)
    return atomic_write_text(readme, text)
