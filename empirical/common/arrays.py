"""Checks of data arrays and labels: matrices, vectors, label vectors, C grids; one message style with
:mod:`empirical.common.checks` (``"<argument> must <requirement>, got <what was given>"``).

Every estimator, diagnostic and pipeline step validates what it is given here, at its boundary, so a bad input
never turns into a NaN, a hang or a raw traceback further down.  Scalars, choices, sequences and random states are
checked by :mod:`empirical.common.checks`; the theory's parameters by :mod:`cgmt.validation`; estimator
parameters by scikit-learn's declarative ``_parameter_constraints``.
"""
from __future__ import annotations

import datetime
import numbers

import numpy as np

__all__ = ["as_real_array", "check_vector", "check_matrix", "check_magnitude", "check_varying", "check_binary_labels",
           "check_signed_labels", "check_grid", "check_min_per_class", "MAX_MAGNITUDE", "MIN_MAGNITUDE", "C_MIN",
           "C_MAX", "TOL_MAX"]

#: Largest entry magnitude accepted for data matrices: products of two such numbers (Gram matrices,
#: logits) stay finite in float64 (max ~1.8e308).
MAX_MAGNITUDE = 1e100

#: Smallest largest-entry magnitude accepted: products of two such numbers stay normal floats.
MIN_MAGNITUDE = 1e-100

#: The supported domain of an estimator's inverse ridge strength C = 1/lambda (RaptorProbe ``Cs``, GCSProbe ``C``,
#: LogRegCVProbe ``Cs``, separability, delta_sweep) on standardized features: below ``C_MIN`` the fitted weights
#: (of order C) vanish in float64 and there is no direction; above ``C_MAX`` the penalty ``||w||^2 / (2C)`` is below
#: float64 resolution of the loss (the unpenalized fit, which need not exist).  The theory's ``lam`` has its own
#: domain (:data:`cgmt.validation.LAM_MIN`).
C_MIN = 1e-8

#: see :data:`C_MIN`
C_MAX = 1e16
#: Most points of a C grid (the default has 100): each is a fit along the warm-started path, so a grid of 1e7 points
#: was accepted and ran for hours
MAX_GRID_POINTS = 10_000

#: Largest solver tolerance accepted (RaptorProbe, LogRegCVProbe ``tol``: a relative gradient norm); a larger one
#: stops before the first step and returns a zero direction.
TOL_MAX = 0.1

def as_real_array(X, name: str = "X", *, labels: bool = False):
    """``X`` itself, unless converting it to a float array would silently change its values.

    The one decision on containers and dtypes, used by every array check here (and by the estimators'
    ``fit``/``predict`` before scikit-learn's own checks): a **complex** array is refused (``np.asarray``
    would drop the imaginary part), so are **dates, durations and text** (numpy turns them into day counts and
    parsed numbers: ``'U'``/``'S'`` arrays, and ``str``/``bytes`` entries of an object array or of a pandas data
    frame's columns), and a **masked array** is refused when any entry is masked (its placeholders would be used
    as data); a masked array without masked entries is accepted as its data.  A **torch tensor** (torch is
    imported only when ``X`` is one) is converted to numpy, detached and on the CPU: every real floating dtype
    (float16, bfloat16, float32, float64, float8) to float64, exactly; integer and bool tensors to their numpy
    dtype; a complex tensor is refused like a complex array, a tensor on the ``meta`` device (a shape without
    values) and one numpy cannot hold (quantized, nested) are refused.  A numeric pandas data frame or series is
    returned as it is (the caller's ``np.asarray`` converts it; scikit-learn reads its column names).  Values
    are not checked: NaN and infinite entries pass through to the caller's own check (:func:`check_matrix`).

    Parameters
    ----------
    X : array-like
        The input to check: a sequence, a numpy array, a pandas data frame or series, a torch tensor.
    name : str, default="X"
        The argument's name, used in messages.
    labels : bool, default=False
        ``X`` holds class labels: any values are categories, so text and dates are accepted (complex and masked
        entries are still refused), but they must be of one type: all numbers, all text or all booleans (a mix
        such as ``[0, 'a']``, or a missing label ``None``, is refused: numpy would turn the numbers into text, or
        scikit-learn refuse an "unknown label type").

    Returns
    -------
    array-like
        ``X``; the plain data of a masked array without masked entries; a numpy array for a torch tensor; for
        labels given as a sequence or an object array, the labels as a numpy array of their one type.

    Raises
    ------
    ValueError
        Complex values, masked entries, dates, text (unless ``labels``), labels of mixed types, a ``meta`` tensor.
    TypeError
        A torch tensor whose dtype numpy cannot hold.

    Examples
    --------
    >>> as_real_array(np.ma.array([1.0, 2.0], mask=[False, True]), "X_val")
    Traceback (most recent call last):
    ...
    ValueError: X_val must not have masked entries (a masked array's placeholders are not data), got 1 masked entry;
    fill or drop them first (X.filled(value) or X.compressed())
    >>> as_real_array(np.array([["1.5", "2"]], dtype=object), "H")
    Traceback (most recent call last):
    ...
    ValueError: H must hold numbers, got text (str entries, e.g. '1.5') (numpy would convert them to numbers silently)
    """
    if X is None:  # the caller's own message (scikit-learn: "requires y to be passed")
        return X
    if type(X).__module__.partition(".")[0] == "torch":
        X = _tensor_to_numpy(X, name)
    if isinstance(X, np.ma.MaskedArray):
        masked = int(np.ma.count_masked(X))
        if masked:
            raise ValueError(f"{name} must not have masked entries (a masked array's placeholders are not data), got "
                             f"{masked} masked entr{'y' if masked == 1 else 'ies'}; fill or drop them first "
                             "(X.filled(value) or X.compressed())")
        X = np.ma.getdata(X)
    dtype = getattr(X, "dtype", None)
    values = None  # X as a numpy array, where its entries' Python types must be looked at
    if isinstance(dtype, np.dtype) and dtype.kind != "O":
        kind = dtype.kind
    else:  # lists, object arrays, data frames, pandas extension dtypes (text, categories)
        try:
            values = np.asarray(X)
            kind = values.dtype.kind
        except (TypeError, ValueError):  # ragged or not numeric: the caller's conversion names the problem
            kind = ""
    if kind == "c":
        raise ValueError(f"{name} must be real, got complex data: Complex data not supported (converting it would "
                         "drop the imaginary part; pass its .real or .imag explicitly)")
    if labels:
        if values is not None and (kind == "O" or not isinstance(X, np.ndarray)):
            return _labels_of_one_type(X, name)
        return X
    if kind in _NOT_NUMBERS:
        raise ValueError(f"{name} must hold numbers, got {_NOT_NUMBERS[kind]} (numpy would convert them to numbers "
                         "silently)")
    if kind == "O":
        text = next((v for v in values.flat if isinstance(v, (str, bytes))), None)
        if text is not None:
            raise ValueError(f"{name} must hold numbers, got text ({type(text).__name__} entries, e.g. {text!r:.40}) "
                             "(numpy would convert them to numbers silently)")
    return X

#: array kinds that numpy converts to floats without being numbers (dates to day counts, text to its value)
_NOT_NUMBERS = {"M": "dates (datetime64)", "m": "durations (timedelta64)", "U": "text (strings)",
                "S": "bytes (strings)"}


def _tensor_to_numpy(X, name: str):
    """A torch tensor as a numpy array (see :func:`as_real_array`); anything else of torch's unchanged."""
    import torch

    if not isinstance(X, torch.Tensor):
        return X
    if X.device.type == "meta":
        raise ValueError(f"{name} must hold values, got a torch tensor on the 'meta' device (a shape without data); "
                         "materialize it first (e.g. with to_empty() and an initialization)")
    if X.is_complex():
        raise ValueError(f"{name} must be real, got complex data: Complex data not supported (converting it would "
                         "drop the imaginary part; pass its .real or .imag explicitly)")
    t = X.detach()
    try:
        if t.layout != torch.strided:
            t = t.to_dense()
        t = t.to(device="cpu", dtype=torch.float64) if t.is_floating_point() else t.cpu()
        return t.resolve_neg().resolve_conj().numpy()
    except (TypeError, RuntimeError) as exc:
        raise TypeError(f"{name} must be an array of real numbers, got a torch tensor of dtype {X.dtype} that numpy "
                        f"cannot hold ({exc})") from None


def _label_type(value) -> str:
    """The type of one label: ``"text"``, ``"boolean"``, ``"number"``, ``"date"``, ``"missing"`` (None), or its
    type's name."""
    if isinstance(value, (str, bytes)):
        return "text"
    if isinstance(value, (bool, np.bool_)):
        return "boolean"
    if isinstance(value, numbers.Real):
        return "number"
    if isinstance(value, (datetime.date, datetime.timedelta, np.datetime64, np.timedelta64)):
        return "date"
    return "missing" if value is None else type(value).__name__


def _labels_of_one_type(y, name: str) -> np.ndarray:
    """Labels given as a sequence or an object array, as a numpy array of their one type (see :func:`as_real_array`)."""
    try:
        entries = np.asarray(y, dtype=object)
    except (TypeError, ValueError):  # ragged: the caller's shape check names the problem
        return y
    first = {}  # one example of each type, in order of appearance
    for value in entries.flat:
        first.setdefault(_label_type(value), value)
    if "missing" in first:
        raise ValueError(f"{name} must not have missing labels, got None; drop those rows or give them a class")
    if len(first) > 1:
        mix = ", ".join(f"{v!r:.30} ({t})" for t, v in first.items())
        raise ValueError(f"{name} must hold labels of one type (all numbers, all text or all booleans), got a mix: "
                         f"{mix}; convert them to one type first")
    kind = next(iter(first), "number")
    if kind not in ("text", "boolean", "number", "date"):
        raise ValueError(f"{name} must hold labels that are numbers, text, booleans or dates, got {kind} entries "
                         f"(e.g. {first[kind]!r:.40})")
    return np.asarray(entries.tolist()) if entries.size else np.asarray(y)

def check_vector(v, name: str, size: int | None = None) -> np.ndarray:
    """A finite, non-empty, 1-D float64 array from ``v`` (a column ``(n, 1)`` is flattened); ``ValueError``
    naming ``name`` otherwise.

    Parameters
    ----------
    v : array-like of shape (n,)
        The values to check.
    name : str
        The argument's name, used in messages.
    size : int, optional
        Required length.

    Returns
    -------
    ndarray (n,), float64
        The values.

    Examples
    --------
    >>> check_vector([1, 2], "mass").tolist()
    [1.0, 2.0]
    >>> check_vector(["a"], "mass")
    Traceback (most recent call last):
    ...
    ValueError: mass must hold numbers, got text (strings) (numpy would convert them to numbers silently)
    """
    v = as_real_array(v, name)
    try:
        values = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a vector of real numbers, got {type(v).__name__}") from None
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D vector, got shape {values.shape}")
    if size is not None and values.size != size:
        raise ValueError(f"{name} must have {size} entries, got {values.size} (mismatched lengths)")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite, got NaN or infinite values")
    return values

def check_matrix(X, name: str = "X", n_rows: int | None = None) -> np.ndarray:
    """A float64, 2-D, non-empty, finite copy-or-view of ``X``; ``ValueError`` naming ``name`` otherwise.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The matrix to check (entries' largest magnitude within ``[MIN_MAGNITUDE, MAX_MAGNITUDE]`` unless all zero,
        :func:`check_magnitude`).
    name : str, default="X"
        The argument's name, used in messages.
    n_rows : int, optional
        Required number of rows.

    Returns
    -------
    ndarray (n_samples, n_features), float64
        ``X`` as float64 (a view when it already is).

    Examples
    --------
    >>> check_matrix([[1, 2], [3, 4]]).dtype
    dtype('float64')
    >>> check_matrix([1.0, 2.0], "H")
    Traceback (most recent call last):
    ...
    ValueError: H must be a 2-D array (n_samples, n_features), got a 1-D array of shape (2,)
    """
    X = as_real_array(X, name)
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric 2-D array, got {type(X).__name__} ({exc})") from None
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features), got a {A.ndim}-D array of shape "
                         f"{A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{name} must have at least one sample and one feature, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must be finite, got NaN or infinite values")
    if n_rows is not None and A.shape[0] != n_rows:
        raise ValueError(f"{name} must have {n_rows} rows (one per label), got {A.shape[0]} (mismatched lengths)")
    return check_magnitude(A, name)

def check_magnitude(A: np.ndarray, name: str = "X") -> np.ndarray:
    """Require the largest |entry| of a finite, non-zero array to lie in ``[MIN_MAGNITUDE, MAX_MAGNITUDE]``.

    Outside that range float64 products of two entries (Gram matrices, logits, squared norms) overflow
    or underflow, and a fit would return zero or NaN directions without an error.  An all-zero array
    passes (it is caught as constant by :func:`check_varying` where that matters).

    Parameters
    ----------
    A : ndarray
        A finite float array.
    name : str, default="X"
        The argument's name, used in messages.

    Returns
    -------
    ndarray
        ``A`` itself.

    Examples
    --------
    >>> check_magnitude(np.array([[1e200]]), "H")
    Traceback (most recent call last):
    ...
    ValueError: H must have entries of magnitude at most 1e+100 (float64 products of two entries must stay finite), got
    max |entry| = 1e+200; rescale it (e.g. divide by its standard deviation)
    """
    largest = max(float(np.max(A)), -float(np.min(A))) if A.size else 0.0  # two reductions, no |A| copy
    if largest > MAX_MAGNITUDE:
        raise ValueError(f"{name} must have entries of magnitude at most {MAX_MAGNITUDE:g} (float64 products of two "
                         f"entries must stay finite), got max |entry| = {largest:.3g}; rescale it (e.g. divide by "
                         "its standard deviation)")
    if 0.0 < largest < MIN_MAGNITUDE:
        raise ValueError(f"{name} must have a largest entry of magnitude at least {MIN_MAGNITUDE:g} (float64 products "
                         f"of two entries must not underflow), got max |entry| = {largest:.3g}; rescale it (e.g. "
                         "divide by its standard deviation)")
    return A

def _rows_of(name: str) -> str:
    """The matrix whose rows a label argument annotates: ``y`` -> ``X``, ``y_val`` -> ``X_val``, ``y_pool`` ->
    ``X_pool`` (so a length mismatch names both arguments)."""
    return "X" + name[1:] if name.startswith("y") and name[1:2] in ("", "_") else "X"

def check_varying(X: np.ndarray, name: str = "X", *, check_input: bool = True) -> np.ndarray:
    """Require at least one column of ``X`` to take two different values (else no direction separates anything).

    Parameters
    ----------
    X : ndarray (n, p)
        The matrix (checked by :func:`check_matrix` here: finite, 2-D, non-empty; a view when it is float64).
    name : str, default="X"
        The argument's name, used in messages.
    check_input : bool, default=True
        Check ``X`` with :func:`check_matrix` first (False: the caller has; ``X`` is a finite float64 matrix).

    Returns
    -------
    ndarray
        ``X`` as float64.

    Examples
    --------
    >>> check_varying(np.ones((3, 2)), "X_train")
    Traceback (most recent call last):
    ...
    ValueError: X_train must have at least one non-constant feature, got 2 constant columns (every row is the same
    point); there is no concept direction to fit
    """
    if check_input:
        X = check_matrix(X, name)
    if not np.any(X != X[:1]):
        raise ValueError(f"{name} must have at least one non-constant feature, got {X.shape[1]} constant columns "
                         "(every row is the same point); there is no concept direction to fit")
    return X

def check_binary_labels(y, n: int, name: str = "y", classes=None, *, rows: str | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Validate binary labels; returns ``(classes, y_signed)`` with ``y_signed`` in {-1, +1} (``classes[1]`` -> +1).

    Parameters
    ----------
    y : array-like of shape (n,)
        Any two label values.
    n : int
        Required length (rows of the matching X).
    name : str, default="y"
        The argument's name, used in messages.
    classes : array of two labels, optional
        The training classes (for validation or test labels): other values are an error.
    rows : str, optional
        The name of the matrix whose rows the labels annotate, for the length message (default: ``X`` with
        ``name``'s suffix, ``y_val`` -> ``X_val``).

    Returns
    -------
    (classes, y_signed) : (ndarray of the two labels, ndarray of float in {-1, +1})
        The sorted classes (or ``classes`` as given) and the labels coded -1 / +1, ``classes[1]`` as +1 (the
        positive class every concept vector points to).

    Examples
    --------
    >>> classes, y_signed = check_binary_labels(["no", "yes", "yes"], 3)
    >>> classes.tolist(), y_signed.tolist()
    (['no', 'yes'], [-1.0, 1.0, 1.0])
    """
    y = np.asarray(as_real_array(y, name, labels=True))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"{name} must have {n} entries (one per row of {rows or _rows_of(name)}), got {y.shape[0]} "
                         "(mismatched lengths)")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError(f"{name} must be finite, got NaN or infinite values")
    if classes is None:
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"{name} must contain two classes (a binary probe), got only one class "
                             f"({classes.tolist()})")
        if classes.size > 2:
            raise ValueError(f"{name} must contain exactly two classes (RAPTOR probes are binary), "
                             f"got {classes.size} classes")
    else:
        extra = np.setdiff1d(np.unique(y), classes)
        if extra.size:
            raise ValueError(f"{name} must only contain the training classes {classes.tolist()}, "
                             f"got labels {extra.tolist()} not among them")
    y_signed = np.where(y == classes[1], 1.0, -1.0)
    return classes, y_signed

def check_signed_labels(y, n: int, name: str = "y") -> np.ndarray:
    """Labels already coded in {-1, +1} (the solvers' convention), as float64; ``ValueError`` naming ``name``.

    Parameters
    ----------
    y : array-like of shape (n,)
        The labels, each -1 or +1.
    n : int
        Required length (rows of the matching X).
    name : str, default="y"
        The argument's name, used in messages.

    Returns
    -------
    ndarray (n,), float64
        The labels as floats.

    Examples
    --------
    >>> check_signed_labels([0, 1], 2)
    Traceback (most recent call last):
    ...
    ValueError: y must contain only -1 and +1 (code the classes as -1/+1), got values [0.0]
    """
    y = as_real_array(y, name)
    try:
        values = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric labels in {{-1, +1}}, got {type(y).__name__}") from None
    if values.ndim != 1 or values.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with {n} entries (one per row of {_rows_of(name)}), got shape "
                         f"{values.shape}")
    bad = values[(values != 1.0) & (values != -1.0)]
    if bad.size:
        raise ValueError(f"{name} must contain only -1 and +1 (code the classes as -1/+1), got values "
                         f"{np.unique(bad)[:5].tolist()}")
    return values

def check_grid(Cs, name: str = "Cs") -> np.ndarray:
    """A non-empty 1-D grid of at most ``MAX_GRID_POINTS`` distinct values in ``[C_MIN, C_MAX]`` (inverse ridge
    strengths C = 1/lambda).

    The order is kept (it breaks ties of ``tie_break="first"``); a repeated value is an error (the warm-started
    path extrapolates in log C between distinct grid points).

    Parameters
    ----------
    Cs : float or array-like
        The grid (a scalar is a grid of one).
    name : str, default="Cs"
        The argument's name, used in messages.

    Returns
    -------
    ndarray (n_grid,), float64
        The grid, in the order given.

    Examples
    --------
    >>> check_grid([0.1, 1])
    array([0.1, 1. ])
    """
    Cs = as_real_array(Cs, name)
    try:
        grid = np.atleast_1d(np.asarray(Cs, dtype=np.float64))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a non-empty 1-D grid of positive values, got {Cs!r}") from None
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D grid of positive values, got shape {grid.shape}")
    if grid.size > MAX_GRID_POINTS:
        raise ValueError(f"{name} has {grid.size} points, more than the limit {MAX_GRID_POINTS} (each point is a fit "
                         "along the warm-started path); use a coarser grid")
    if not np.all(np.isfinite(grid)) or np.any(grid <= 0):
        raise ValueError(f"{name} must contain only finite positive values (C = 1/lambda > 0), got min {grid.min()!r}")
    outside = grid[(grid < C_MIN) | (grid > C_MAX)]
    if outside.size:
        raise ValueError(f"{name} must lie in [{C_MIN:g}, {C_MAX:g}] (below, the weights vanish in float64; above, the "
                         f"ridge penalty is below float64 resolution), got {float(outside[0]):g}")
    values, counts = np.unique(grid, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"{name} must not repeat a value, got {values[counts > 1].tolist()} more than once")
    return grid

def check_min_per_class(y_signed, where: str, minimum: int = 2) -> None:
    """Require ``minimum`` examples of each class in {-1, +1} labels of the ``where`` split.

    Parameters
    ----------
    y_signed : ndarray of float in {-1, +1}
        The split's labels.
    where : str
        The split's name, used in messages.
    minimum : int, default=2
        Fewest examples of each class accepted.

    Raises
    ------
    ValueError
        A class has fewer than ``minimum`` examples.

    Examples
    --------
    >>> check_min_per_class(np.array([1.0, 1.0, -1.0]), "train")
    Traceback (most recent call last):
    ...
    ValueError: the train split must have at least 2 examples of each class, got 1 example(s) of a class
    """
    for label in (-1.0, 1.0):
        count = int(np.sum(y_signed == label))
        if count < minimum:
            raise ValueError(f"the {where} split must have at least {minimum} examples of each class, "
                             f"got {count} example(s) of a class")
