"""One look for every figure of ``paper_figures``: colour-blind-safe colours, readable fonts.

The colours are the Okabe-Ito palette (distinguishable under the common colour-vision deficiencies).
Each method keeps the same colour in every figure; series that are not methods (theory curves, values
of delta, datasets) take the remaining palette colours in order from :data:`SERIES`.
"""
from __future__ import annotations

#: Okabe-Ito palette (Okabe & Ito 2008), without black, in the order series use it.
SERIES = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")

#: One colour per compared method, the same in every figure.
METHOD_COLORS = {"RAPTOR": "#0072B2", "GCS": "#E69F00", "xRFM": "#CC79A7", "DiffMeans": "#009E73"}

#: Theory curves are black lines; simulations and measurements use the series colours with markers.
THEORY_COLOR = "#000000"

#: Matplotlib settings applied to every figure (fonts readable at the saved size).
RC = {
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": None,  # set in apply() (needs matplotlib's cycler)
    "savefig.bbox": "tight",
}


def method_color(method: str) -> str:
    """The colour of ``method`` (grey for a method without an assigned colour)."""
    return METHOD_COLORS.get(method, "#666666")


def series_color(index: int) -> str:
    """The ``index``-th colour of the palette (cycles)."""
    return SERIES[int(index) % len(SERIES)]


def apply() -> None:
    """Set :data:`RC` (with the Okabe-Ito colour cycle) as matplotlib's defaults."""
    import matplotlib as mpl
    from matplotlib import cycler

    mpl.rcParams.update({**{k: v for k, v in RC.items() if v is not None}, "axes.prop_cycle": cycler(color=SERIES)})
