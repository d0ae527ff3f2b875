"""Every public function that draws into a caller's matplotlib ``ax`` / ``axes`` checks it with the one check,
:func:`empirical.common.checks.check_axes`: a value that is not an Axes (a blank string, a complex number, a
datetime64, a figure, a list of the wrong length) is a ``TypeError`` / ``ValueError`` naming the argument, before
anything is computed or drawn, never a raw ``AttributeError``, ``TypeError`` or ``IndexError`` from inside the
drawing (found by the contract test in ``plot_stability_vs_lambda``).

The entry points are enumerated from the public API (``_public_api.public_objects``), so a plotting function
added later fails :func:`test_every_public_ax_argument_has_a_base_call_here` until it is driven here too.
"""
from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
from _public_api import public_objects
from matplotlib.figure import Figure

from empirical.common.checks import check_axes

AX_NAMES = ("ax", "axes")


def _real_result():
    from empirical.probes.real_embedding import RealStabilityResult

    table = pd.DataFrame({"layer": [1, 2, 3], "predicted": [0.3, 0.5, 0.7], "measured": [0.35, 0.45, 0.8],
                          "paper_formula": [0.2, 0.4, 0.9]})
    return RealStabilityResult(table, {"predicted_spearman": 1.0, "predicted_pearson": 0.98,
                                       "paper_formula_spearman": 1.0, "paper_formula_pearson": 0.97})


#: per entry point: (the other arguments of a valid call, how many Axes it draws into: None for one ``ax``)
BASE = {
    "paper_figures.stability:plot_stability_vs_lambda":
        (lambda: dict(settings=[(2.0, 1.0), (4.0, 1.0)], lams=[0.1, 1.0]), 2),
    "paper_figures.stability:plot_real_embedding_stability": (lambda: dict(result=_real_result()), None),
}


def _ax_entry_points():
    """``{"module:qualname": (callable, parameter)}`` of every public function or method with an ax / axes."""
    found = {}
    for (module, qualname), obj in public_objects().items():
        members = [(qualname, obj)] if not inspect.isclass(obj) else \
            [(f"{qualname}.{m}", f) for m, f in vars(obj).items() if inspect.isfunction(f)]
        for name, member in members:
            try:
                parameters = inspect.signature(member).parameters
            except (TypeError, ValueError):
                continue
            for parameter in AX_NAMES:
                if parameter in parameters:
                    found[f"{module}:{name}"] = (member, parameter)
    return found


ENTRY_POINTS = _ax_entry_points()


def _hostile(count):
    """Values that are not what ``count`` Axes (None: one Axes) are: the contract's draws and the near misses."""
    figure = Figure()
    ax = figure.add_subplot()
    values = {"blank": "  ", "complex": 1 + 2j, "datetime64": np.datetime64("2020-01-01"), "object": object(),
              "string": "ax", "float": 1.5, "figure": figure, "none list": [None], "empty": [],
              "mapping": {"a": 1}, "array": np.ones(3)}
    if count is not None:
        values.update({"too few": [figure.add_subplot(2, 2, k + 1) for k in range(count - 1)],
                       "too many": [figure.add_subplot(3, 3, k + 1) for k in range(count + 1)],
                       "repeated": [ax] * count, "a single Axes": ax})
    else:
        values["a list of one Axes"] = [ax]
    return values


def test_every_public_ax_argument_has_a_base_call_here():
    assert sorted(ENTRY_POINTS) == sorted(BASE), "add the new plotting function's valid call to BASE"


@pytest.mark.parametrize("key", sorted(BASE))
def test_an_ax_that_is_not_an_axes_is_refused_naming_it(key):
    function, parameter = ENTRY_POINTS[key]
    base, count = BASE[key]
    failures = []
    for label, value in _hostile(count).items():
        try:
            function(**base(), **{parameter: value})
        except (TypeError, ValueError) as exc:
            if parameter not in str(exc):
                failures.append(f"{label}: {type(exc).__name__} not naming {parameter}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - any other type is the finding
            failures.append(f"{label}: {type(exc).__name__}: {exc}")
            continue
        failures.append(f"{label}: accepted")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("key", sorted(BASE))
def test_the_given_axes_are_drawn_into(key):
    function, parameter = ENTRY_POINTS[key]
    base, count = BASE[key]
    figure = Figure()
    axes = figure.add_subplot() if count is None else figure.subplots(1, count)  # an array, as plt.subplots gives
    assert function(**base(), **{parameter: axes}) is figure
    assert all(ax.has_data() for ax in np.ravel(axes))


def test_check_axes():
    figure = Figure()
    one, two = figure.subplots(1, 2)
    assert check_axes(one, "ax") is one
    assert check_axes([one, two], "axes", 2) == (one, two)
    assert check_axes(np.array([[one, two]], dtype=object), "axes", 2) == (one, two)
    assert check_axes(one, "axes", 1) == (one,)
    with pytest.raises(TypeError, match=r"axes\[1\] must be a matplotlib Axes, got 'x'"):
        check_axes([one, "x"], "axes", 2)
    with pytest.raises(ValueError, match="axes must hold 3 matplotlib Axes"):
        check_axes([one, two], "axes", 3)
    with pytest.raises(ValueError, match=r"axes\[1\] is an Axes given earlier"):
        check_axes([one, one], "axes", 2)
    with pytest.raises(TypeError, match=r"ax must be a matplotlib Axes, got <Figure .*> \(Figure\)"):
        check_axes(figure, "ax")
