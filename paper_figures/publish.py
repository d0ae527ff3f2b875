"""``--publish DIR``: a small, committable copy of a run's results (RESULTS.md, the claims table as CSV and
the key figures as small PNGs), e.g. ``docs/results`` for the README.

The key figures are downscaled with Pillow (matplotlib's own image dependency), so the published folder
stays well under 1 MB (about 0.4 MB); the full-resolution PNG and PDF stay in the run's folder. They are
not colour-quantised: a 64-colour palette merged the colours of different series (a reader could no longer
tell sarcasm from hateeval in the steering figure), and the colour of each method is the figures' legend.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from PIL import Image

from empirical.files import atomic_path, atomic_write_text, refuse_overwriting_inputs

from . import claims

#: Figures the README shows (file stems in ``OUT/figures``).
KEY_FIGURES = ("accuracy_differences", "stability_by_layer", "spectral_stsa", "steering_metrics", "steering_text",
               "learning_curves")
#: Width of a published figure in pixels.
WIDTH = 900
#: The small tables behind every claim (``OUT/tables/<name>.csv``, glob patterns), published in ``DIR/tables`` so
#: that anyone can recompute an interval or a verdict (a few hundred kB in all).
PUBLISHED_TABLES = ("accuracy_by_seed", "accuracy_intervals", "accuracy_differences", "stability_summary",
                    "stability_differences", "stability_hateeval", "stability_sarcasm", "stability_stsa",
                    "stability_equal_data_*", "separability_summary", "separability_control_summary",
                    "separability_control_*", "cost_median_fit_time_s", "steering_summary", "steering_text_*",
                    "learning_curves", "learning_curves_goal", "learning_curves_by_draw",
                    "structure_summary", "spectral_agreement*", "theory_vs_sims", "finite_size_convergence",
                    "finite_size_slopes",
                    "stability_vs_lambda", "stability_theory_vs_measured")
#: Markers around the claims table that :func:`sync_readme` writes into the README.
README_START, README_END = "<!-- claims-table:start -->", "<!-- claims-table:end -->"


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


def publish(out, target, *, allow_partial: bool = False) -> list:
    """Copy RESULTS.md (figure links rewritten), ``claims.csv`` and the small key figures of the run in
    ``out`` to ``target``; returns the written paths.  A run that leaves untested a claim that the published
    ``claims.csv`` tests is refused before anything is written (:func:`check_not_partial`) unless
    ``allow_partial``."""
    out, target = Path(out), Path(target)
    table = claims.claims_table(out)
    check_not_partial(table, target, allow_partial)
    if out.is_dir():  # a target that is (or links to) the run's folder or one of its subfolders would overwrite it
        refuse_overwriting_inputs(
            [("--publish", target / name) for name in (*(f"{stem}.png" for stem in KEY_FIGURES), "RESULTS.md",
                                                        "claims.csv", "run_info.json")],
            [("of the run in --out", path) for path in out.rglob("*") if path.is_file()])
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for stem in KEY_FIGURES:
        png = out / "figures" / f"{stem}.png"
        if png.exists():
            written.append(shrink_png(png, target / f"{stem}.png"))
    text = (out / "RESULTS.md").read_text()

    def relink(match):
        alt, stem = match.group(1), match.group(2)
        if stem in KEY_FIGURES and (target / f"{stem}.png").exists():
            return f"![{alt}]({stem}.png)"
        return f"*({alt}: `figures/{stem}.png` of a run; not committed)*"

    text = re.sub(r"!\[([^\]]*)\]\(figures/([^)]+)\.png\)", relink, text)
    text = re.sub(r"\[([^\]]+)\]\(figures/([^)]+)\.png\)", lambda m: f"`{m.group(2)}`", text)
    text = re.sub(r"\[([^\]]+)\]\(tables/([^)]+)\)", lambda m: f"`tables/{m.group(2)}` of a run", text)  # not committed
    written.append(atomic_write_text(target / "RESULTS.md", text))
    with atomic_path(target / "claims.csv", suffix=".csv") as tmp:
        table.to_csv(tmp, index=False)
    written.append(target / "claims.csv")
    info = out / "tables" / "run_info.json"
    if info.exists():
        written.append(atomic_write_text(target / "run_info.json", info.read_text()))
    (target / "tables").mkdir(exist_ok=True)
    for pattern in PUBLISHED_TABLES:
        for csv in sorted((out / "tables").glob(f"{pattern}.csv")):
            written.append(atomic_write_text(target / "tables" / csv.name, csv.read_text()))
    return written


def readme_claims_block(claims_csv) -> str:
    """The README's claims table, generated from a published ``claims.csv`` (never typed by hand): one row per
    claim with its datasets, our numbers and the verdict, between :data:`README_START` and :data:`README_END`."""
    table = pd.read_csv(claims_csv, keep_default_na=False)
    columns = [c for c in ("area", "claim", "datasets", "ours", "verdict") if c in table]
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
    return atomic_write_text(readme, head + readme_claims_block(claims_csv) + tail)
