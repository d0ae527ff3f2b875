"""The probe methods, each defined once: the one table the CLI, the steering read-out and ``paper_figures`` read.

A method is one :class:`ProbeMethod`: the name its tables use (``"RAPTOR"``, ``"GCS"``, ...), a factory of the
unfitted estimator (with the parameters ``--quick`` runs change), its short command-line name, its colour and
glossary text in the paper's figures and RESULTS.md, how much data it fits on (the protocol table), and the
comparisons it joins (:data:`COMPARISONS`).  Adding a method is one :func:`register_method` call, here for the
methods the project ships or in the user's own code; every list of methods elsewhere is read from this table
(:func:`method_names`), so a method cannot be silently left out of one of them.

Examples
--------
>>> from empirical.probes import DiffMeans
>>> spec = register_method("MyMeans", DiffMeans, cli_name="mymeans", comparisons=("accuracy",))
>>> "MyMeans" in method_names("accuracy") and get_method("mymeans") is spec
True
>>> get_method("MyMeans").estimator()
DiffMeans()
>>> _ = unregister_method("MyMeans")
>>> get_method("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown probe method 'nope'; known methods: RAPTOR (raptor), GCS (gcs), ...
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ._base import LinearConceptProbe
from ._baselines import DiffMeans, GCSProbe, LogRegCVProbe, XRFMProbe
from ._raptor import RaptorProbe

__all__ = ["COMPARISONS", "DEFAULT_COLOR", "ProbeMethod", "register_method", "unregister_method", "get_method",
           "method_names", "methods", "check_fit_contract"]

#: The comparisons a method may join: name -> what reads it.
COMPARISONS = {
    "accuracy": "the accuracy protocol of paper_figures (per-layer tables, accuracy table, figures, RESULTS.md)",
    "stability": "the directional-stability comparison of paper_figures (ablation runs per layer)",
    "steering": "the steering read-out: `raptor steer --methods` and empirical.llm.method_vectors",
}
#: Colour of a method registered without one (figures).
DEFAULT_COLOR = "#666666"
_HEX_COLOR = re.compile(r"^#[0-9A-Fa-f]{6}$")


@dataclass(frozen=True)
class ProbeMethod:
    """One probe method: everything the tools need to fit it, name it and draw it.

    Parameters
    ----------
    name : str
        The name in every table and figure (``"RAPTOR"``, ``"GCS"``, ...).
    factory : callable
        ``factory()`` returns the unfitted estimator (a :class:`~empirical.probes.ConceptProbe`).
    cli_name : str
        Short lower-case name on the command line (``raptor probe --baselines``) and in column prefixes.
    quick_params : mapping
        Parameters ``--quick`` runs set on the estimator (GCS: ``{"n_probes": 20}``).
    comparisons : frozenset of str
        The comparisons of :data:`COMPARISONS` the method joins.
    color : str
        ``#RRGGBB`` colour of the method in every figure.
    description : str
        What the method is, one line (RESULTS.md's glossary).
    data : tuple of 3 str, optional
        The data it fits its direction on: (accuracy split, share of the dataset, one stability run)
        (RESULTS.md's protocol table).
    """

    name: str
    factory: Callable
    cli_name: str
    quick_params: Mapping = field(default_factory=dict)
    comparisons: frozenset = frozenset()
    color: str = DEFAULT_COLOR
    description: str = ""
    data: tuple | None = None

    @property
    def gcav(self) -> bool:
        """Whether GCAV can steer with its concept vectors: its estimator is a
        :class:`~empirical.probes.LinearConceptProbe` (a logistic probe with ``coef_`` and ``intercept_``);
        a direction-only method (xRFM) is steered with additive settings alone."""
        return isinstance(self.estimator(), LinearConceptProbe)

    def estimator(self, quick: bool = False, **params):
        """A new unfitted estimator: ``factory()`` with :attr:`quick_params` (when ``quick``) and ``params`` set."""
        estimator = self.factory()
        params = {**(self.quick_params if quick else {}), **params}
        return estimator.set_params(**params) if params else estimator


_REGISTRY: dict = {}


def _known() -> str:
    return ", ".join(f"{m.name} ({m.cli_name})" for m in _REGISTRY.values()) or "none"


def register_method(name: str, factory: Callable, *, cli_name: str | None = None, quick_params=None,
                    comparisons=(), color: str = DEFAULT_COLOR, description: str = "", data=None,
                    replace: bool = False) -> ProbeMethod:
    """Register a probe method (see :class:`ProbeMethod` for the fields); returns its entry.

    Parameters
    ----------
    name : str
        The name in every table and figure (non-empty; unique, case-insensitively, among names and cli names).
    factory : callable
        ``factory()`` returns the unfitted estimator (an estimator class works).
    cli_name : str, optional
        Short command-line name: lower-case letters, digits, ``-`` or ``_``; default ``name.lower()``.
    quick_params : mapping, optional
        Parameters ``--quick`` runs set on the estimator.
    comparisons : str or iterable of str, default=()
        Keys of :data:`COMPARISONS` the method joins.
    color : str, default=DEFAULT_COLOR
        ``#RRGGBB`` colour in every figure.
    description : str, default=""
        One line for RESULTS.md's glossary.
    data : sequence of 3 str, optional
        (accuracy split, share of the dataset, one stability run), RESULTS.md's protocol table.
    replace : bool, default=False
        Redefine a method of the same ``name`` instead of refusing it.

    Returns
    -------
    ProbeMethod
        The entry, now in the registry (methods are listed in registration order).

    Raises
    ------
    ValueError
        Naming the argument: an empty or taken name (unless ``replace``), a bad ``cli_name``, a factory that
        is not callable or fails, an estimator whose ``fit`` does not accept ``fit(X, y, X_val, y_val)``,
        ``quick_params`` naming no parameter of the estimator, an unknown comparison, a colour that is not
        ``#RRGGBB`` or ``data`` not three strings.
    TypeError
        ``quick_params`` is not a mapping with string keys.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    cli_name = name.lower() if cli_name is None else cli_name
    if not isinstance(cli_name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", cli_name):
        raise ValueError(f"cli_name must be lower-case letters, digits, '-' or '_', got {cli_name!r}")
    if not callable(factory):
        raise ValueError(f"factory of method {name!r} must be callable (it returns the unfitted estimator), "
                         f"got {type(factory).__name__}")
    _check_contract(name, factory, quick_params)
    comparisons = frozenset([comparisons] if isinstance(comparisons, str) else comparisons)
    unknown = sorted(comparisons - set(COMPARISONS))
    if unknown:
        raise ValueError(f"comparisons of method {name!r}: unknown {unknown}; known: {', '.join(COMPARISONS)}")
    if not isinstance(color, str) or not _HEX_COLOR.match(color):
        raise ValueError(f"color of method {name!r} must be '#RRGGBB', got {color!r}")
    if data is not None and (len(data) != 3 or not all(isinstance(d, str) for d in data)):
        raise ValueError(f"data of method {name!r} must be three strings (accuracy split, share, stability run), "
                         f"got {data!r}")
    others = [m for key, m in _REGISTRY.items() if not (replace and key == name)]
    taken = [m.name for m in others if {m.name.lower(), m.cli_name} & {name.lower(), cli_name}]
    if taken:
        raise ValueError(f"method name {name!r} / cli_name {cli_name!r} is taken by {taken[0]!r} (pass "
                         "replace=True to redefine a method)")
    spec = ProbeMethod(name, factory, cli_name, dict(quick_params or {}), comparisons, color, description,
                       None if data is None else tuple(data))
    _REGISTRY[name] = spec
    return spec


def check_fit_contract(estimator, what: str = "estimator") -> None:
    """The one check of the probe contract ``fit(X, y, X_val, y_val)``: every caller passes the validation split
    (:func:`register_method`, :func:`empirical.probes.fit_layers`, :func:`empirical.probes.stability`).

    Parameters
    ----------
    estimator : estimator or estimator class
        An instance (its bound ``fit`` is inspected) or a class (its ``fit(self, ...)``).
    what : str, default="estimator"
        How the messages name it (``"method 'GCS'"``, ``"estimator GCSProbe"``).

    Raises
    ------
    ValueError
        No callable ``fit``, or a ``fit`` that does not accept four positional arguments ``X, y, X_val, y_val``
        (a ``fit`` without an inspectable signature, a builtin, is accepted).

    Examples
    --------
    >>> from empirical.probes import RaptorProbe
    >>> check_fit_contract(RaptorProbe()), check_fit_contract(RaptorProbe)
    (None, None)
    """
    is_class = isinstance(estimator, type)
    fit = getattr(estimator, "fit", None)
    params = ("self", "X", "y", "X_val", "y_val") if is_class else ("X", "y", "X_val", "y_val")
    if not callable(fit):
        raise ValueError(f"{what}: no fit method (needed: fit(X, y, X_val, y_val))")
    try:
        signature = inspect.signature(fit)
    except (TypeError, ValueError):  # no signature (a builtin): nothing to check
        return
    try:
        signature.bind(*params)
    except TypeError:
        raise ValueError(f"fit of {what} must accept fit(X, y, X_val, y_val) (the validation split is always "
                         f"passed), got fit{signature}") from None


def _check_contract(name: str, factory, quick_params) -> None:
    """The estimator ``factory`` makes must have ``fit(X, y, X_val, y_val)`` (every caller passes the validation
    split), and ``quick_params`` must be a mapping of its parameter names.  A class is inspected; another factory is
    called once (it returns an unfitted estimator, cheap by the scikit-learn convention)."""
    if quick_params is not None and not isinstance(quick_params, Mapping):
        raise TypeError(f"quick_params of method {name!r} must be a mapping of parameter names to values, got "
                        f"{type(quick_params).__name__} {quick_params!r}")
    if quick_params is not None and not all(isinstance(key, str) for key in quick_params):
        raise TypeError(f"quick_params of method {name!r} must have parameter names (str) as keys, got "
                        f"{list(quick_params)!r}")
    if isinstance(factory, type):
        estimator = None
        check_fit_contract(factory, f"method {name!r}")
    else:
        try:
            estimator = factory()
        except Exception as exc:  # noqa: BLE001 -- any failure of the user's factory, named
            raise ValueError(f"factory of method {name!r} failed when called ({type(exc).__name__}: {exc})") from None
        check_fit_contract(estimator, f"method {name!r}")
    if quick_params:
        try:
            known = set((estimator if estimator is not None else factory()).get_params())
        except Exception:  # noqa: BLE001 -- the parameters cannot be listed: the first --quick run will say
            known = None
        unknown = sorted(set(quick_params) - known) if known is not None else []
        if unknown:
            raise ValueError(f"quick_params of method {name!r}: {unknown} are not parameters of its estimator "
                             f"(it has {sorted(known)})")


def unregister_method(name: str) -> ProbeMethod:
    """Remove a registered method (by any name :func:`get_method` takes); returns its entry.

    Parameters
    ----------
    name : str
        The method's name or cli name (case-insensitive).

    Returns
    -------
    ProbeMethod
        The entry removed.

    Raises
    ------
    ValueError
        No such method.
    """
    return _REGISTRY.pop(get_method(name).name)


def get_method(name: str) -> ProbeMethod:
    """The entry of a method by its name (``"GCS"``) or its ``cli_name`` (``"gcs"``), case-insensitive;
    ``ValueError`` listing the known methods otherwise.

    Parameters
    ----------
    name : str
        The method's name or cli name.

    Returns
    -------
    ProbeMethod
        Its registry entry.

    Examples
    --------
    >>> get_method("gcs").name, get_method("RAPTOR").cli_name
    ('GCS', 'raptor')
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    key = str(name).lower()
    for spec in _REGISTRY.values():
        if key in (spec.name.lower(), spec.cli_name):
            return spec
    raise ValueError(f"unknown probe method {name!r}; known methods: {_known()}")


def methods(comparison: str | None = None) -> tuple:
    """The registered methods in registration order, those joining ``comparison`` when given.

    Parameters
    ----------
    comparison : str, optional
        A key of :data:`COMPARISONS` (None: every method).

    Returns
    -------
    tuple of ProbeMethod
        The entries.

    Raises
    ------
    ValueError
        An unknown comparison.
    """
    if comparison is not None and (not isinstance(comparison, str) or comparison not in COMPARISONS):
        raise ValueError(f"comparison must be one of {', '.join(COMPARISONS)}, got {comparison!r:.60}")
    return tuple(m for m in _REGISTRY.values() if comparison is None or comparison in m.comparisons)


def method_names(comparison: str | None = None) -> tuple:
    """Names of :func:`methods` (``comparison``: only those that join it).

    Parameters
    ----------
    comparison : str, optional
        A key of :data:`COMPARISONS` (None: every method).

    Returns
    -------
    tuple of str
        The methods' names, in registration order.

    Examples
    --------
    >>> method_names("stability")
    ('RAPTOR', 'GCS', 'xRFM')
    """
    return tuple(m.name for m in methods(comparison))


# The methods the project ships, in the order the paper's figures and tables list them.
register_method(
    "RAPTOR", RaptorProbe, comparisons=("accuracy", "stability", "steering"), color="#0072B2",
    description="ridge-adaptive logistic probe: ridge strength chosen per layer on a validation split, refit on "
                "train + validation, weights folded back to raw space (docs/probe.md)",
    data=("fits every C on train, selects C on validation, refits on train + validation", "80 %",
          "the run's train + validation rows (equal-data variant: train only, validation for selection)"))
register_method(
    "GCS", GCSProbe, quick_params={"n_probes": 20}, comparisons=("accuracy", "stability", "steering"),
    color="#E69F00",
    description="the paper's Gaussian concept subspace baseline: 100 (quick: 20) logistic probes at C = 1 on "
                "class-balanced 80 % subsets of the training split, averaged",
    data=("100 class-balanced subsets of 80 % of the smaller class count of train, validation unused", "~48 %",
          "subsets of the run's train rows"))
register_method(
    "xRFM", XRFMProbe, quick_params={"bandwidths": (10.0,), "iters": 2},
    comparisons=("accuracy", "stability", "steering"), color="#CC79A7",
    description="recursive feature machine (kernel) baseline; its concept vector is the top eigenvector of the AGOP "
                "(quick: bandwidth 10 only, 2 iterations)",
    data=("train, validation for selecting the bandwidth", "60 %", "the run's train rows, validation for selection"))
register_method(
    "DiffMeans", DiffMeans, cli_name="diffmeans", comparisons=("accuracy", "steering"), color="#009E73",
    description="difference of the class means (no fitting), on train + validation",
    data=("train + validation", "80 %", "not in the stability comparison (as in the paper)"))
register_method(
    "RAPTOR (C = 1)", lambda: RaptorProbe(Cs=[1.0]), cli_name="fixedc", comparisons=("accuracy",), color="#56B4E9",
    description="ablation: RAPTOR's pipeline (train-only standardisation, exact solver, refit on train + validation, "
                "fold-back) at the fixed C = 1 of GCS's probes, so RAPTOR - this isolates ridge tuning and this - GCS "
                "the data size and subset averaging",
    data=("train + validation at C = 1 (no selection)", "80 %", "not in the stability comparison"))
register_method(
    "LogRegCV", LogRegCVProbe, cli_name="lrcv",
    description="scikit-learn's LogisticRegressionCV on train + validation (command line only)")
