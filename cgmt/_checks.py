"""Input validation: every error names the parameter and its valid range."""
from __future__ import annotations

import math
import numbers

import numpy as np

# supported box of the solver (tested); values outside are accepted but flagged in the message
DELTA_RANGE = (0.05, 100.0)
LAM_RANGE = (1e-6, 1e3)
KAPPA_RANGE = (0.0, 20.0)


def check_scalar(value, name, *, low=None, high=None, low_open=False, high_open=False):
    """Return ``float(value)``; ValueError unless it is a finite real in the given range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        try:
            arr = np.asarray(value)
        except Exception:  # pragma: no cover - defensive
            arr = None
        if arr is None or arr.ndim != 0 or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
            raise ValueError(f"{name} must be a real number, got {value!r}")
        value = arr.item()
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}")
    lo_txt = "(" if low_open else "["
    hi_txt = ")" if high_open else "]"
    rng = f"{lo_txt}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}{hi_txt}"
    if low is not None and (x < low or (low_open and x == low)):
        raise ValueError(f"{name} must lie in {rng}, got {x!r}")
    if high is not None and (x > high or (high_open and x == high)):
        raise ValueError(f"{name} must lie in {rng}, got {x!r}")
    return x


def check_delta(delta):
    return check_scalar(delta, "delta", low=0.0, low_open=True)


def check_lam(lam, *, allow_zero=False):
    if allow_zero:
        return check_scalar(lam, "lam", low=0.0)
    return check_scalar(lam, "lam", low=0.0, low_open=True)


def check_kappa(kappa):
    return check_scalar(kappa, "kappa", low=0.0)


def _as_float_array(value, name):
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or array of reals, got {value!r}") from None
    return arr


def check_array_finite_or_inf(value, name):
    arr = _as_float_array(value, name)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not contain NaN")
    return arr


def check_nonneg_array(value, name):
    arr = _as_float_array(value, name)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (in [0, inf)), got non-finite values")
    if np.any(arr < 0):
        raise ValueError(f"{name} must lie in [0, inf), got a negative value")
    return arr


def check_positive_array(value, name, *, allow_zero=False):
    arr = _as_float_array(value, name)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got non-finite values")
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        rng = "[0, inf)" if allow_zero else "(0, inf)"
        raise ValueError(f"{name} must lie in {rng}, got {arr[bad][0]!r}")
    return arr
