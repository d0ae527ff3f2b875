"""Deprecation helpers of the whole project: one warning text, one removal version.

A name that moved keeps working from its old home until :data:`REMOVAL_VERSION`, with a ``DeprecationWarning`` that
names its new home (:func:`warn_deprecated`, :func:`moved_names` for a module's ``__getattr__``, PEP 562).
"""
from __future__ import annotations

import importlib
import warnings

__all__ = ["REMOVAL_VERSION", "warn_deprecated", "moved_names"]

#: the release that removes the deprecated names (``CGMTResult.converged``/``.iterations``, sims' ``converged``)
REMOVAL_VERSION = "0.3"


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn ``DeprecationWarning``: ``old`` is deprecated, use ``new``; removed in :data:`REMOVAL_VERSION`.

    Parameters
    ----------
    old, new : str
        The deprecated name and its replacement.
    stacklevel : int, default=3
        As for :func:`warnings.warn` (the default points at the caller of the function that warns).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_deprecated("old_name", "new_name")
    >>> print(caught[0].category.__name__, caught[0].message)
    DeprecationWarning old_name is deprecated and will be removed in 0.3; use new_name
    """
    warnings.warn(f"{old} is deprecated and will be removed in {REMOVAL_VERSION}; use {new}", DeprecationWarning,
                  stacklevel=stacklevel)


def moved_names(module: str, moved: dict):
    """A module ``__getattr__`` (PEP 562) that keeps moved names importable from ``module``, with a warning.

    Parameters
    ----------
    module : str
        The module whose names moved (for the messages).
    moved : dict of str to str
        Name -> the module it lives in now.

    Returns
    -------
    callable
        ``__getattr__(name)``: the name from its new module after :func:`warn_deprecated` (``module.name`` ->
        ``new_module.name``); ``AttributeError`` for any other name.  Its attribute ``moved`` is a copy of
        ``moved``.

    Examples
    --------
    >>> import warnings
    >>> getattr_ = moved_names("old_module", {"sqrt": "math"})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     getattr_("sqrt")(4.0)
    2.0
    >>> print(caught[0].message)
    old_module.sqrt is deprecated and will be removed in 0.3; use math.sqrt
    """
    def __getattr__(name: str):
        new_module = moved.get(name)
        if new_module is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_deprecated(f"{module}.{name}", f"{new_module}.{name}")
        return getattr(importlib.import_module(new_module), name)
    __getattr__.moved = dict(moved)  # what moved where (read by the tests of every old home)
    return __getattr__
