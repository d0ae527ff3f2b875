"""One look for every figure of ``paper_figures``: colour-blind-safe colours, readable fonts.

The colours are the Okabe-Ito palette (distinguishable under the common colour-vision deficiencies).
Each method keeps the same colour in every figure (its ``color`` in :mod:`empirical.probes._registry`); series
that are not methods (theory curves, values of delta, datasets) take the remaining palette colours in order
from :data:`SERIES`.
"""
from __future__ import annotations

from empirical.probes import DEFAULT_COLOR, get_method, methods

#: Okabe-Ito palette (Okabe & Ito 2008), without black, in the order series use it.
SERIES = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")


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


def method_colors() -> dict:
    """One colour per registered method (:mod:`empirical.probes._registry`), the same in every figure."""
    return {m.name: m.color for m in methods()}


def method_color(method: str) -> str:
    """The colour of ``method`` from the method registry (grey for a name that is not a registered method, e.g.
    ``"RAPTOR (train only)"``)."""
    try:
        return get_method(method).color
    except ValueError:
        return DEFAULT_COLOR


def series_color(index: int) -> str:
    """The ``index``-th colour of the palette (cycles)."""
    return SERIES[int(index) % len(SERIES)]


def apply() -> None:
    """Set :data:`RC` (with the Okabe-Ito colour cycle) as matplotlib's defaults."""
    import matplotlib as mpl
    from matplotlib import cycler

    mpl.rcParams.update({**{k: v for k, v in RC.items() if v is not None}, "axes.prop_cycle": cycler(color=SERIES)})
