"""The parametric learning-curve families of the learning-curve databases, fitted to a pool's subsample accuracies.

LCDB (Mohr, Viering, Loog et al., "LCDB 1.0: An extensive learning curves database for classification tasks",
ECML-PKDD 2022) and LCDB 1.1 (Yan, Mohr and Viering, NeurIPS 2025) fit sixteen parametric families to sample-wise
learning curves; their best four-parameter families are baselines for any learning-curve forecast:

* ``pow4``: f(x) = a - b (x + d)^(-c)
* ``mmf4`` (Morgan-Mercer-Flodin): f(x) = (a b + c x^d) / (b + x^d)
* ``wbl4`` (Weibull): f(x) = c - b exp(-a x^d)

The databases fit error rates; here the curve is an **accuracy** that rises with the training size, so each
family is fitted under bounds that make it non-decreasing in x and keep its values in [0, 1] (the power law of
:func:`empirical.probes.structure.fit_power_law` does the same with b >= 0):

* ``pow4``: a in [0, 1], b >= 0, c in (0, 3], d in [0, 10];
* ``mmf4``: a (the value at x = 0) in [0, 1], c = a + s (1 - a) with s in [0, 1] (the asymptote, not below a),
  b in (0, 1e3], d in (0, 5];
* ``wbl4``: c (the asymptote) in [0, 1], b in [0, c], a in (0, 1e3], d in (0, 5].

x is the training size divided by the largest size of the fit (conditioning), so the bounds are scale-free.  The
fit is least squares (:func:`scipy.optimize.least_squares`, trust-region reflective within the bounds) from
several starts; the best one wins.  Four parameters from a handful of subsample sizes are barely identified:
the databases report these families as strong extrapolators, which is what the learning-curve validation tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

__all__ = ["CURVE_FAMILIES", "FittedCurve", "fit_curve_family", "check_curve_points"]


def _pow4(x, theta):
    a, b, c, d = theta
    return a - b * (x + d) ** (-c)


def _mmf4(x, theta):
    a, b, s, d = theta
    c = a + s * (1.0 - a)
    xd = x ** d
    return (a * b + c * xd) / (b + xd)


def _wbl4(x, theta):
    a, b, c, d = theta
    return c - b * np.exp(-a * x ** d)


#: Each family: (curve of the scaled size x and the parameters, lower bounds, upper bounds, starts).  ``mmf4``'s
#: third parameter is the share s of the way from a to 1 its asymptote lies (c = a + s (1 - a)); ``wbl4``'s b is
#: bounded by c in the fit (a residual penalty keeps c - b >= 0).
_FAMILIES = {
    "pow4": (_pow4, (0.0, 0.0, 1e-3, 0.0), (1.0, np.inf, 3.0, 10.0),
             [(None, None, c, d) for c in (0.3, 1.0, 2.0) for d in (0.0, 0.5)]),
    "mmf4": (_mmf4, (0.0, 1e-6, 0.0, 1e-3), (1.0, 1e3, 1.0, 5.0),
             [(None, b, 0.5, d) for b in (0.1, 1.0, 10.0) for d in (0.5, 2.0)]),
    "wbl4": (_wbl4, (1e-6, 0.0, 0.0, 1e-3), (1e3, 1.0, 1.0, 5.0),
             [(a, None, None, d) for a in (0.5, 2.0, 10.0) for d in (0.5, 1.5)]),
}
#: Relative tolerances of the least-squares fit (cost, parameters, gradient): accuracies are known to about 1e-2 (a
#: test set's binomial noise), so the fit stops well inside that.
FIT_TOL = 1e-6
#: The families :func:`fit_curve_family` fits (LCDB's names).
CURVE_FAMILIES = tuple(_FAMILIES)


def check_curve_points(n, accuracy, min_sizes: int, curve: str) -> tuple:
    """The points a learning curve is fitted to, checked: 1-D float arrays of training sizes and accuracies.

    Parameters
    ----------
    n : array-like of float
        Training sizes, finite and > 0 (repeats allowed).
    accuracy : array-like of float
        Accuracy at each size, finite.
    min_sizes : int
        Distinct sizes the curve needs (its number of parameters).
    curve : str
        The curve, as the error names it (``"a power law"``).

    Returns
    -------
    (n, accuracy) : (ndarray, ndarray)
        Both as 1-D float arrays.

    Raises
    ------
    ValueError
        Naming ``n`` or ``accuracy``: a length mismatch, sizes not finite and > 0, non-finite accuracies, or fewer
        than ``min_sizes`` distinct sizes.
    """
    n = np.asarray(n, dtype=float).ravel()
    acc = np.asarray(accuracy, dtype=float).ravel()
    if n.size != acc.size:
        raise ValueError(f"accuracy must have one value per size ({n.size}), got {acc.size}")
    if not (np.all(np.isfinite(n)) and np.all(n > 0)):
        raise ValueError(f"n (the training sizes) must be finite and > 0, got {n!r:.60}")
    if not np.all(np.isfinite(acc)):
        raise ValueError(f"accuracy must be finite, got {acc!r:.60}")
    if np.unique(n).size < min_sizes:
        raise ValueError(f"n must hold at least {min_sizes} distinct training sizes for {curve}, got "
                         f"{np.unique(n).size}")
    return n, acc


@dataclass(frozen=True)
class FittedCurve:
    """A fitted learning curve: accuracy at training size n.

    Attributes
    ----------
    family : str
        One of :data:`CURVE_FAMILIES`.
    params : tuple of float
        The fitted parameters in the order of the family's formula (module docstring), in the scaled size
        x = n / ``n_scale``; for ``mmf4`` the third is c itself (the asymptote), not the share s of the fit.
    n_scale : float
        The size the curve is scaled by (the largest training size of the fit).

    Examples
    --------
    >>> curve = FittedCurve("wbl4", (1.0, 0.3, 0.9, 1.0), n_scale=100.0)
    >>> curve([100, 1e6]).round(3).tolist()
    [0.79, 0.9]
    """

    family: str
    params: tuple
    n_scale: float

    def __call__(self, n):
        """The curve at training sizes ``n`` (array-like of float > 0), clipped to [0, 1]."""
        x = np.asarray(n, dtype=float) / self.n_scale
        theta = np.array(self.params, dtype=float)
        if self.family == "mmf4":  # stored as c; the formula's parametrization takes the share s
            a, c = theta[0], theta[2]
            theta[2] = 0.0 if a >= 1.0 else (c - a) / (1.0 - a)
        return np.clip(_FAMILIES[self.family][0](x, theta), 0.0, 1.0)


def fit_curve_family(n, accuracy, family: str, *, start: FittedCurve | None = None) -> FittedCurve:
    """Least-squares fit of one LCDB family to accuracies measured at training sizes ``n``.

    Parameters
    ----------
    n : array of float > 0
        Training sizes (repeats allowed); at least 4 distinct ones (four parameters).
    accuracy : array of float
        Accuracy at each size, finite.
    family : {"pow4", "mmf4", "wbl4"}
        The family (module docstring for its formula and bounds).
    start : FittedCurve, optional
        A fit of the same family to start from, alone (a bootstrap refit near the point fit: one start instead of
        the family's six).

    Returns
    -------
    FittedCurve
        The best fit over the family's starts (``n_scale`` = the largest size).

    Raises
    ------
    ValueError
        For an unknown ``family``, sizes that are not finite and > 0, non-finite accuracies, a length mismatch or
        fewer than 4 distinct sizes, naming the argument.

    Examples
    --------
    >>> n = np.array([50, 100, 200, 400, 800])
    >>> curve = fit_curve_family(n, 0.9 - 0.3 * np.exp(-3.0 * (n / 800) ** 0.8), "wbl4")
    >>> round(float(curve(800)), 3), bool(curve(3200) <= 0.9 + 1e-6)
    (0.885, True)
    """
    if family not in _FAMILIES:
        raise ValueError(f"family must be one of {list(CURVE_FAMILIES)}, got {family!r}")
    n, acc = check_curve_points(n, accuracy, 4, "a four-parameter curve")
    scale = float(n.max())
    x = n / scale
    curve, lower, upper, starts = _FAMILIES[family]
    top = float(np.clip(acc.max(), 0.0, 1.0))
    gap = max(float(np.ptp(acc)), 1e-3)

    def residuals(theta):
        r = curve(x, theta) - acc
        if family == "wbl4":  # b <= c: the curve stays >= 0 at x = 0
            r = np.append(r, 10.0 * max(theta[1] - theta[2], 0.0))
        return r

    if start is not None:
        if start.family != family:
            raise ValueError(f"start must be a {family} fit to start a {family} fit, got a {start.family} fit")
        theta = list(start.params)
        if family == "mmf4":  # the fit's parametrization takes the share s of the way from a to 1
            theta[2] = 0.0 if theta[0] >= 1.0 else (theta[2] - theta[0]) / (1.0 - theta[0])
        guesses = [tuple(theta)]
    else:
        guesses = [{"pow4": (top, gap, c, d), "mmf4": (float(np.clip(acc.min(), 0, 1)), b, 0.5, d),
                    "wbl4": (a, min(gap, top), top, d)}[family] for a, b, c, d in starts]
    best = None
    for guess in guesses:
        theta0 = np.clip(np.array(guess, dtype=float), np.array(lower) + 1e-9,
                         np.minimum(np.array(upper), 1e6) - 1e-9)
        res = least_squares(residuals, theta0, bounds=(lower, upper), ftol=FIT_TOL, xtol=FIT_TOL, gtol=FIT_TOL)
        if best is None or res.cost < best.cost:
            best = res
    theta = [float(v) for v in best.x]
    if family == "mmf4":
        theta[2] = theta[0] + theta[2] * (1.0 - theta[0])
    return FittedCurve(family, tuple(theta), scale)
