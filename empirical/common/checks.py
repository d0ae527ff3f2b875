"""Argument checks of the whole project, in one message style (the ground floor).

Every check returns the normalised value or raises ``ValueError`` with the message
``"<argument> must <requirement>, got <value!r>"``, naming the argument, so a bad input never turns into a NaN or a
hang inside a numerical kernel: scalars (:func:`check_scalar`, :func:`check_int`, :func:`check_bool`), choices and
sequences (:func:`check_choice`, :func:`check_sequence`), the matplotlib axes a figure is drawn into
(:func:`check_axes`), real arrays (:func:`check_real_array`, :func:`check_positive_array`) and seeds and random
generators (:func:`check_seed`, :func:`as_seed_sequence`, :func:`as_generator`, :func:`check_random_state`: one seed
rule, every message naming the argument);
:func:`error_context` prefixes a message with where it arose.  The theory's own domains (delta, lam, kappa, ...) are
:mod:`cgmt.validation`; data matrices, labels and C grids :mod:`empirical.common.arrays`.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import sys
from collections.abc import Mapping

import numpy as np

from .arrays import as_real_array

__all__ = ["check_scalar", "check_int", "MAX_COUNT", "check_real_array", "check_positive_array", "check_bool",
           "check_choice", "check_sequence", "check_axes", "check_seed", "as_seed_sequence", "as_generator",
           "check_random_state", "MAX_SEED", "error_context"]


def _interval(low, high, low_open, high_open) -> str:
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    return f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"


def check_scalar(value, name: str, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, allow_nan: bool = False) -> float:
    """``float(value)`` if it is a finite real number in the interval; ``ValueError`` naming ``name`` otherwise.

    Parameters
    ----------
    value : real number or 0-d array
        The argument to check (bools and complex numbers are rejected).
    name : str
        The argument's name, used in the message.
    low, high : float, optional
        Bounds of the interval (None: unbounded on that side).
    low_open, high_open : bool, default=False
        Whether the bound itself is excluded.
    allow_nan : bool, default=False
        Accept NaN as "not available" (returned as is; statistics that propagate a missing value).

    Returns
    -------
    float
        ``float(value)``.

    Raises
    ------
    ValueError
        ``value`` is not a real number, not finite (NaN allowed with ``allow_nan``), or outside the interval.

    Examples
    --------
    >>> check_scalar(2, "delta", low=0.0, low_open=True)
    2.0
    >>> check_scalar(-1.0, "delta", low=0.0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: delta must lie in (0.0, inf), got -1.0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        arr = np.asarray(value) if isinstance(value, np.ndarray) else None
        if arr is None or arr.ndim != 0 or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
            raise ValueError(f"{name} must be a real number, got {value!r}")
        value = arr.item()
    x = float(value)
    if allow_nan and math.isnan(x):
        return x
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}")
    if (low is not None and (x < low or (low_open and x == low))) or \
            (high is not None and (x > high or (high_open and x == high))):
        raise ValueError(f"{name} must lie in {_interval(low, high, low_open, high_open)}, got {x!r}")
    return x


#: The largest count :func:`check_int` accepts by default (a C ``int``): iteration counts, grid sizes, replicates and
#: sample sizes beyond it overflow the compiled kernels (numba, LAPACK) or ask for more memory than any machine has.
MAX_COUNT = 2 ** 31 - 1


def check_int(value, name: str, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """An integer in ``[minimum, maximum]`` (an integral float such as 3.0 is accepted; bools are not).

    Parameters
    ----------
    value : int or integral float
        The value to check.
    name : str
        The argument's name, used in the message.
    minimum : int, default=1
        Smallest value accepted.
    maximum : int, default=MAX_COUNT
        Largest value accepted (:data:`MAX_COUNT`, 2**31 - 1).

    Returns
    -------
    int
        ``int(value)``.

    Raises
    ------
    ValueError
        A bool, a non-integral or non-finite number, or an integer outside ``[minimum, maximum]``.

    Examples
    --------
    >>> check_int(8.0, "replicates", minimum=2)
    8
    >>> check_int(1, "replicates", minimum=2)
    Traceback (most recent call last):
    ...
    ValueError: replicates must be an integer >= 2, got 1
    """
    integral = isinstance(value, (numbers.Integral, np.integer)) or \
        (isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer())
    if isinstance(value, (bool, np.bool_)) or not integral or int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if int(value) > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {value!r}")
    return int(value)


def _float_array(value, name):
    if isinstance(value, np.ma.MaskedArray):  # np.asarray drops the mask
        raise ValueError(f"{name} must be a real number or an array of reals (not complex, not masked), got {value!r}")
    try:  # the one container and dtype decision: complex, dates, durations, text refused; tensors converted
        value = as_real_array(value, name)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None  # as_real_array's message names the argument and the value
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or an array of reals, got {value!r:.60}") from None


def check_real_array(value, name: str, *, low: float | None = None, allow_inf: bool = False) -> np.ndarray:
    """A float array without NaN (and without +-inf unless ``allow_inf``), all entries >= ``low``.

    Parameters
    ----------
    value : float or array_like
        The values to check (any shape; a torch tensor is converted; complex, masked, date and text arrays are
        rejected, as by :func:`empirical.common.arrays.as_real_array`).
    name : str
        The argument's name, used in the message.
    low : float, optional
        Smallest value accepted (None: no bound).
    allow_inf : bool, default=False
        Accept +-inf entries.

    Returns
    -------
    ndarray
        ``np.asarray(value, dtype=float)`` (same shape).

    Raises
    ------
    ValueError
        Not convertible to a real array, or an entry that is NaN, infinite (without ``allow_inf``) or below
        ``low``.

    Examples
    --------
    >>> check_real_array([0.5, np.inf], "m", allow_inf=True)
    array([0.5, inf])
    >>> check_real_array([1.0, -1.0], "kappa", low=0.0)
    Traceback (most recent call last):
    ...
    ValueError: kappa must lie in [0.0, inf), got -1.0
    """
    arr = _float_array(value, name)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not contain NaN, got {value!r}")
    if not allow_inf and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and np.any(arr < low):
        raise ValueError(f"{name} must lie in [{low}, inf), got {float(arr[arr < low].flat[0])!r}")
    return arr


def check_positive_array(value, name: str, *, allow_zero: bool = False) -> np.ndarray:
    """A non-empty float array (a scalar becomes one entry) of finite reals > 0 (>= 0 with ``allow_zero``).

    Parameters
    ----------
    value : float or array_like
        The values to check.
    name : str
        The argument's name, used in the message.
    allow_zero : bool, default=False
        Accept entries equal to 0.

    Returns
    -------
    ndarray
        The values as floats (a scalar as shape (1,); an array keeps its shape).

    Raises
    ------
    ValueError
        Empty, or an entry that is not finite or not > 0 (>= 0 with ``allow_zero``).

    Examples
    --------
    >>> check_positive_array(2, "deltas")
    array([2.])
    >>> check_positive_array([1.0, 0.0], "lams")
    Traceback (most recent call last):
    ...
    ValueError: lams must lie in (0, inf), got 0.0
    """
    arr = _float_array(value, name)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty, got {value!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        interval = "[0, inf)" if allow_zero else "(0, inf)"
        raise ValueError(f"{name} must lie in {interval}, got {float(arr[bad].flat[0])!r}")
    return arr


def _seed_int(value, name: str, accepted: str, maximum: int | None = None) -> int:
    """``value`` as an int seed in ``[0, maximum]`` (numpy integers too, never a bool); ``ValueError`` naming ``name``
    and what it accepts otherwise (the one seed rule of :func:`check_seed`, :func:`as_seed_sequence` and
    :func:`as_generator`)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        if int(value) < 0:
            raise ValueError(f"{name} must be a non-negative integer seed, got {value!r}")
        if maximum is not None and int(value) > maximum:
            raise ValueError(f"{name} must be an integer seed in [0, {maximum}], got {value!r}")
        return int(value)
    raise ValueError(f"{name} must be {accepted}, got {value!r:.60} ({type(value).__name__})")


def check_seed(seed, name: str = "seed", *, maximum: int | None = None) -> int:
    """An integer seed >= 0, for a seed the callee computes with (``seed + layer``, ``[seed, i]``) or hands to an
    integer-only API (``maximum=MAX_SEED`` for scikit-learn's ``random_state``); a string, float, bool or negative
    number is a ``ValueError`` naming ``name`` (numpy's own errors name no argument).

    Parameters
    ----------
    seed : int
        The seed (a numpy integer too).
    name : str, default="seed"
        The argument's name, used in the message.
    maximum : int, optional
        The largest seed accepted (None: no bound).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Not an integer in ``[0, maximum]``.

    Examples
    --------
    >>> check_seed(np.int64(7))
    7
    >>> check_seed("abc")
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer seed >= 0, got 'abc' (str)
    """
    if maximum is not None:
        maximum = check_int(maximum, "maximum", minimum=0, maximum=2 ** 128)
    return _seed_int(seed, name, "an integer seed >= 0", maximum)


def as_seed_sequence(seed, name: str = "seed") -> np.random.SeedSequence:
    """The root ``SeedSequence`` of a seeded computation: a ``SeedSequence`` (returned as is), an int seed >= 0 or a
    non-empty list or tuple of them (numpy's entropy, e.g. ``[seed, i]``); anything else is a ``ValueError`` naming
    ``name``, not numpy's ``SeedSequence expects int or sequence of ints``.

    Parameters
    ----------
    seed : numpy.random.SeedSequence, int or sequence of int
        The root seed.
    name : str, default="seed"
        The argument's name, used in the message.

    Returns
    -------
    numpy.random.SeedSequence
        ``seed`` itself if it is one, else ``np.random.SeedSequence(seed)``.

    Raises
    ------
    ValueError
        Not a SeedSequence, an integer >= 0 or a non-empty list or tuple of them.

    Examples
    --------
    >>> as_seed_sequence(3).entropy
    3
    >>> as_seed_sequence([3, 1]).entropy
    [3, 1]
    >>> as_seed_sequence("abc")
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer seed >= 0, a list of them or a numpy SeedSequence, got 'abc' (str)
    """
    accepted = "an integer seed >= 0, a list of them or a numpy SeedSequence"
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (list, tuple)) and seed:
        return np.random.SeedSequence([_seed_int(v, f"{name}[{i}]", "an integer seed >= 0")
                                       for i, v in enumerate(seed)])
    return np.random.SeedSequence(_seed_int(seed, name, accepted))


def as_generator(rng, name: str = "rng") -> np.random.Generator:
    """A numpy ``Generator`` from a ``Generator`` (returned as is), a ``SeedSequence``, an int seed >= 0 or None.

    Parameters
    ----------
    rng : numpy.random.Generator, numpy.random.SeedSequence, int or None
        The source of randomness (None: fresh entropy from the operating system).
    name : str, default="rng"
        The argument's name, used in the message.

    Returns
    -------
    numpy.random.Generator
        ``rng`` itself if it is a Generator, else ``np.random.default_rng(rng)``.

    Raises
    ------
    ValueError
        A negative seed, a bool or any other type.

    Examples
    --------
    >>> gen = as_generator(np.random.SeedSequence(0))
    >>> int(gen.integers(100)) == int(as_generator(0).integers(100))
    True
    >>> as_generator("seed")
    Traceback (most recent call last):
    ...
    ValueError: rng must be an int seed, a numpy SeedSequence or Generator, got 'seed' (str)
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.SeedSequence) or rng is None:
        return np.random.default_rng(rng)
    return np.random.default_rng(_seed_int(rng, name, "an int seed, a numpy SeedSequence or Generator"))


def check_bool(value, name: str) -> bool:
    """A flag: ``True`` or ``False`` (numpy's bool too), never a number, string or None read as one.

    Parameters
    ----------
    value : bool
        The value to check.
    name : str
        The argument's name, used in the message.

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        Not a bool.

    Examples
    --------
    >>> check_bool(np.True_, "measurable")
    True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r:.60} ({type(value).__name__})")
    return bool(value)


def check_choice(value, name: str, choices) -> str:
    """One of the strings ``choices``.

    Parameters
    ----------
    value : str
        The value to check.
    name : str
        The argument's name, used in the message.
    choices : iterable of str
        The accepted values.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        Not a string.
    ValueError
        Not one of ``choices``.

    Examples
    --------
    >>> check_choice("answer", "positions", ("prompt", "answer", "all"))
    'answer'
    """
    choices = tuple(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {choices}, got {value!r:.60} ({type(value).__name__})")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r:.60}")
    return value


def check_sequence(values, name: str, item=None, *, distinct: bool = True, allow_empty: bool = False) -> tuple:
    """A sequence argument (list, tuple or 1-D array; not a string, a mapping, a set or a scalar), its items
    checked one by one and, by default, non-empty and without repeats.

    Parameters
    ----------
    values : sequence
        The value to check.
    name : str
        The argument's name, used in the messages (an item is ``name[i]``).
    item : callable, optional
        ``item(value, "name[i]")`` checks one item and returns it normalised (e.g. :func:`check_choice`).
    distinct : bool, default=True
        Refuse an item given twice (a repeated grid value or method is not a second one).
    allow_empty : bool, default=False
        Accept an empty sequence.

    Returns
    -------
    tuple
        The checked items.

    Raises
    ------
    TypeError
        Not a sequence.
    ValueError
        Empty, an item repeated, or an item refused by ``item``.

    Examples
    --------
    >>> check_sequence(["a", "b"], "methods", lambda v, n: check_choice(v, n, "abc"))
    ('a', 'b')
    """
    if isinstance(values, (str, bytes, Mapping, set, frozenset)) or not (
            isinstance(values, (list, tuple)) or (isinstance(values, np.ndarray) and values.ndim == 1)):
        raise TypeError(f"{name} must be a sequence (a list or tuple), got {values!r:.60} ({type(values).__name__})")
    items = list(values)
    if not items and not allow_empty:
        raise ValueError(f"{name} must not be empty, got {values!r:.60}")
    if item is not None:
        items = [item(v, f"{name}[{i}]") for i, v in enumerate(items)]
    if distinct:
        seen = []
        for v in items:
            if v in seen:
                raise ValueError(f"{name} lists {v!r:.60} more than once")
            seen.append(v)
    return tuple(items)


def _is_axes(value) -> bool:
    """Whether ``value`` is a matplotlib ``Axes``, importing nothing: without matplotlib imported there is none (the
    ground floor draws nothing, tests/test_architecture.py)."""
    module = sys.modules.get("matplotlib.axes")
    return module is not None and isinstance(value, module.Axes)


def check_axes(value, name: str, count: int | None = None):
    """The matplotlib ``Axes`` a plotting function draws into (``count=None``), or ``count`` distinct ones (a list,
    tuple or numpy array of Axes, e.g. from ``plt.subplots``; one Axes when ``count`` is 1): the one check of every
    public ``ax`` / ``axes`` argument, so a string, a number or a figure is refused naming the argument before
    anything is drawn, not a raw ``AttributeError`` or ``IndexError`` from inside the drawing.

    Parameters
    ----------
    value : matplotlib.axes.Axes or sequence of them
        The value to check.
    name : str
        The argument's name, used in the messages (an item is ``name[i]``).
    count : int, optional
        How many Axes a sequence must hold (one per panel); None: a single Axes.

    Returns
    -------
    matplotlib.axes.Axes or tuple of them
        ``value`` (``count=None``), else the Axes as a tuple of ``count``.

    Raises
    ------
    TypeError
        Not an Axes, not a sequence of them, or an item that is not one.
    ValueError
        A sequence of another length than ``count``, or one Axes given twice.

    Examples
    --------
    >>> check_axes("  ", "ax")
    Traceback (most recent call last):
    ...
    TypeError: ax must be a matplotlib Axes, got '  ' (str)
    """
    if count is None:
        if not _is_axes(value):
            raise TypeError(f"{name} must be a matplotlib Axes, got {value!r:.60} ({type(value).__name__})")
        return value
    if count == 1 and _is_axes(value):
        return (value,)
    if isinstance(value, np.ndarray) and value.dtype == object:
        items = list(value.ravel())  # plt.subplots' array of Axes, of any shape
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise TypeError(f"{name} must be a sequence of {count} matplotlib Axes (a list, tuple or array of them), got "
                        f"{value!r:.60} ({type(value).__name__})")
    for i, item in enumerate(items):
        if not _is_axes(item):
            raise TypeError(f"{name}[{i}] must be a matplotlib Axes, got {item!r:.60} ({type(item).__name__})")
    if len(items) != count:
        raise ValueError(f"{name} must hold {count} matplotlib Axes (one per panel), got {len(items)}")
    for i, item in enumerate(items):
        if any(item is other for other in items[:i]):
            raise ValueError(f"{name}[{i}] is an Axes given earlier in {name}: each panel needs its own")
    return tuple(items)


#: The largest seed scikit-learn's ``random_state`` accepts (numpy's legacy ``RandomState``).
MAX_SEED = 2 ** 32 - 1

def check_random_state(random_state, name: str = "random_state"):
    """A scikit-learn ``random_state``: None, an int seed in ``[0, MAX_SEED]`` or a ``numpy.random.RandomState``,
    returned as given (the callee seeds with it); ``ValueError`` naming ``name`` otherwise.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        The seed.
    name : str, default="random_state"
        The argument's name, used in the message.

    Returns
    -------
    None, int or numpy.random.RandomState
        ``random_state`` (an integral numpy integer as ``int``).

    Examples
    --------
    >>> check_random_state(42)
    42
    >>> check_random_state(2.5, "seed")
    Traceback (most recent call last):
    ...
    ValueError: seed must be None, an integer seed in [0, 4294967295] or a numpy RandomState, got 2.5
    """
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return random_state
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, (bool, np.bool_)) \
            and 0 <= int(random_state) <= MAX_SEED:
        return int(random_state)
    raise ValueError(f"{name} must be None, an integer seed in [0, {MAX_SEED}] or a numpy RandomState, got "
                     f"{random_state!r}"[:300])

@contextlib.contextmanager
def error_context(**where):
    """Prefix a ``ValueError`` raised inside with where it happened (``dataset sst2, layer 3, split seed 42: ...``).

    Parameters
    ----------
    **where
        Names and values to name (``None`` values are left out); underscores become spaces.

    Yields
    ------
    None

    Examples
    --------
    >>> try:
    ...     with error_context(dataset="toy", layer=3, split_seed=42):
    ...         raise ValueError("the fitted direction is zero")
    ... except ValueError as exc:
    ...     print(exc)
    dataset toy, layer 3, split seed 42: the fitted direction is zero
    """
    prefix = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in where.items() if value is not None)
    try:
        yield
    except ValueError as exc:
        if not prefix or str(exc).startswith(prefix):
            raise
        raise ValueError(f"{prefix}: {exc}") from exc
