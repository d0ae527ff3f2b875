"""The theory's domain checks (``cgmt`` and ``sims``): delta, lam, kappa, fractions, quadrature orders.

Every check returns the normalised value or raises ``ValueError`` with the message
``"<argument> must <requirement>, got <value!r>"``, naming the argument, so a bad input never turns
into a NaN or a hang inside a numerical kernel.  The generic checks (scalars, integers, choices, sequences, arrays,
generators) and the resource checks are the ground floor's (:mod:`empirical.common.checks`,
:mod:`empirical.common.resources`), used here; arrays of data and labels are checked by
:mod:`empirical.common.arrays`.
"""
from __future__ import annotations

import numpy as np

# the project-wide checks and resource helpers live on the ground floor (empirical.common); the theory's checks use
# them from there
from empirical.common import checks as _checks

__all__ = [
    "check_delta",
    "check_lam",
    "check_lams",
    "LAM_MIN",
    "LAM_MAX",
    "check_kappa",
    "KAPPA_MAX",
    "DELTA_MAX",
    "SPECTRAL_DELTA_MAX",
    "check_spectral_delta",
    "check_fraction",
    "check_quad_order",
    "MAX_QUAD_ORDER",
    "check_solver_counts",
    "check_grid_size",
    "MAX_POINTS",
    "SOLVER_ORDER_MAX",
]


#: The supported domain of the ridge strength ``lam`` (theory, sweeps, simulations): ``[LAM_MIN, LAM_MAX]``, and
#: ``lam = 0`` for the MLE where allowed.  The fixed point's scales go as ``1/lam`` (``gamma``) and as ``lam`` for
#: large ``lam``; outside this range the finite-sample fits of :mod:`sims` overflow (``lam < 1e-30``) and the solver
#: divides by numbers that underflow (``lam > 1e100``).  The practical range (the paper's) is 1e-6 .. 1e3.
#: Estimators use ``C = 1/lambda`` in their own domain (:data:`empirical.common.arrays.C_MIN`, ``C_MAX``).
LAM_MIN = 1e-30
#: see :data:`LAM_MIN`
LAM_MAX = 1e30


#: The supported domain of the sample ratio ``delta = n/p``: ``(0, DELTA_MAX]``.  Measured (cgmt.solve at kappa 2 and
#: lam in {1e-3, 0.1, 10}): the accuracy reaches the teacher's Bayes accuracy (0.777990 at kappa 2) to 1e-6 by
#: delta = 1e6 and every point converges; at 1e8 one point fails, at 1e12 none converges, and at 1e300 the solver
#: divides by zero.
DELTA_MAX = 1e6


#: The supported domain of delta for the spectral theory (:func:`cgmt.solve_spectral` and everything built on it):
#: ``(0, SPECTRAL_DELTA_MAX]``.  The spectral gamma equation's relative residual carries a rounding error that grows
#: like delta times machine epsilon (its expectation is ~1/delta, multiplied back by delta): measured over 373 random
#: spectra (power laws, spiked, with zeros, condition numbers to 1e12; benchmarks/cgmt_domain.py's draws), the
#: largest converged residual is 4e-12 at delta in [1e3, 3e3], 3.6e-11 in [3e3, 1e4] and 7.6e-11 in [1e5, 1e6], and
#: 18 of ~2,750 solves with delta in [3.8e4, 1e6] stopped at 1.2e-10 to 5.5e-10, above the default tol of 1e-10.
#: At 1e4 the floor is a third of the tolerance.
SPECTRAL_DELTA_MAX = 1e4


def check_spectral_delta(delta, name: str = "delta") -> float:
    """The sample ratio of the spectral theory: a finite real in ``(0, SPECTRAL_DELTA_MAX]``.

    Parameters
    ----------
    delta : real number
        The value to check.
    name : str, default="delta"
        The argument's name, used in the message.

    Returns
    -------
    float
        ``float(delta)``.

    Raises
    ------
    ValueError
        Not a finite real in ``(0, SPECTRAL_DELTA_MAX]``: above it the residual's rounding floor (~ delta times
        machine epsilon) approaches the solver's tolerance.

    Examples
    --------
    >>> check_spectral_delta(2.0)
    2.0
    """
    delta = check_delta(delta, name)
    if delta > SPECTRAL_DELTA_MAX:
        raise ValueError(f"{name} must lie in (0, {SPECTRAL_DELTA_MAX:g}] for the spectral theory, got {delta!r}: "
                         f"above {SPECTRAL_DELTA_MAX:g} the rounding error of its relative residuals (~ {name} x "
                         f"machine epsilon) approaches the solver's tolerance of 1e-10, and the accuracy has reached "
                         f"its {name} -> infinity limit long before")
    return delta


def check_delta(delta, name: str = "delta") -> float:
    """The sample ratio n/p: a finite real in ``(0, DELTA_MAX]``.

    Parameters
    ----------
    delta : real number
        The value to check.
    name : str, default="delta"
        The argument's name, used in the message.

    Returns
    -------
    float
        ``float(delta)``.

    Raises
    ------
    ValueError
        Not a finite real in ``(0, DELTA_MAX]`` (beyond it the fixed point is not resolved in float64; the accuracy
        has reached the Bayes accuracy to 1e-6 before).

    Examples
    --------
    >>> check_delta(0.5)
    0.5
    """
    return _checks.check_scalar(delta, name, low=0.0, low_open=True, high=DELTA_MAX)


def check_lam(lam, *, allow_zero: bool = False, name: str = "lam") -> float:
    """The ridge strength: a finite real in ``[LAM_MIN, LAM_MAX]`` (or 0 with ``allow_zero``, the MLE).

    Parameters
    ----------
    lam : real number
        The value to check (the ridge strength of the convention (1/n) sum loss + lam/(2p) ||beta||^2).
    allow_zero : bool, default=False
        Accept ``lam = 0`` (the unregularised MLE) as well.
    name : str, default="lam"
        The argument's name, used in the message.

    Returns
    -------
    float
        ``float(lam)``.

    Raises
    ------
    ValueError
        Not finite, negative, 0 without ``allow_zero``, or outside ``[LAM_MIN, LAM_MAX]``.

    Examples
    --------
    >>> check_lam(0.0, allow_zero=True)
    0.0
    >>> check_lam(0.0)
    Traceback (most recent call last):
    ...
    ValueError: lam must lie in (0.0, inf), got 0.0
    >>> check_lam(1e300)
    Traceback (most recent call last):
    ...
    ValueError: lam must lie in [1e-30, 1e+30] (the supported domain of the ridge strength: outside it the fixed point
    and the simulated fits leave float64 range), got 1e+300
    """
    lam = _checks.check_scalar(lam, name, low=0.0, low_open=not allow_zero)
    if (lam != 0.0 or not allow_zero) and not LAM_MIN <= lam <= LAM_MAX:
        raise ValueError(f"{name} must lie in [{LAM_MIN:g}, {LAM_MAX:g}] (the supported domain of the ridge strength: "
                         f"outside it the fixed point and the simulated fits leave float64 range), got {lam!r}")
    return lam


def check_lams(lams, name: str = "lams") -> np.ndarray:
    """A non-empty 1-D array of ridge strengths, each in the domain of :func:`check_lam`.

    Parameters
    ----------
    lams : float or array_like
        The values to check (a scalar becomes one entry).
    name : str, default="lams"
        The argument's name, used in the message.

    Returns
    -------
    ndarray of shape (n,)
        The values as floats.

    Raises
    ------
    ValueError
        Empty, or an entry that is not finite, <= 0 or outside ``[LAM_MIN, LAM_MAX]``.

    Examples
    --------
    >>> check_lams([1e-300, 1.0])
    Traceback (most recent call last):
    ...
    ValueError: lams must lie in [1e-30, 1e+30] (the supported domain of the ridge strength: outside it the fixed point
    and the simulated fits leave float64 range), got 1e-300
    """
    arr = _checks.check_positive_array(lams, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of ridge strengths, got shape {arr.shape}")
    for value in arr:
        check_lam(float(value), name=name)
    return arr


#: The supported domain of the signal strength ``kappa``: ``[0, KAPPA_MAX]``.  Measured with
#: ``benchmarks/cgmt_domain.py`` and random (delta, lam) over their whole domains (docs/theory.md, "Coverage"): below
#: 1e3 every point converges; between 1e3 and 1e8, 9 of 30 random mle points, 2 of 30 sweeps and 4 of 30 stability
#: points failed or ran past 15 s, because the quadrature must resolve the teacher's sigmoid at width 1/kappa.  The
#: bound costs little: at kappa = 1e3 a label is flipped with probability 1 - bayes_accuracy(1e3) = 5.5e-4, so every
#: accuracy is within 5.5e-4 of the noiseless teacher's (y = sign(x'beta*)) and within that of any larger kappa.
KAPPA_MAX = 1e3


def check_kappa(kappa, name: str = "kappa") -> float:
    """The signal strength ||beta*|| / sqrt(p): a finite real in ``[0, KAPPA_MAX]``.

    Parameters
    ----------
    kappa : real number
        The value to check.
    name : str, default="kappa"
        The argument's name, used in the message.

    Returns
    -------
    float
        ``float(kappa)``.

    Raises
    ------
    ValueError
        Not a finite real in ``[0, KAPPA_MAX]`` (beyond it the solver's quadrature of the teacher's sigmoid, of
        width 1/kappa, fails or takes seconds; at ``KAPPA_MAX`` the teacher flips a label with probability 5.5e-4,
        so every accuracy is within 5.5e-4 of the noiseless teacher's).

    Examples
    --------
    >>> check_kappa(3)
    3.0
    """
    kappa = _checks.check_scalar(kappa, name, low=0.0)
    if kappa > KAPPA_MAX:
        raise ValueError(f"{name} must lie in [0, {KAPPA_MAX:g}], got {kappa!r}: above {KAPPA_MAX:g} the teacher is "
                         f"noiseless to within a label-flip probability of 5.5e-4 (every accuracy is within 5.5e-4 of "
                         f"the answer at {name} = {KAPPA_MAX:g}), and the fixed point's quadrature of the teacher's "
                         f"sigmoid, of width 1/{name}, is not reliable there; use {name} = {KAPPA_MAX:g} for the "
                         f"noiseless limit")
    return kappa


def check_fraction(value, name: str) -> float:
    """A fraction in [0, 1) (e.g. the ablation protocol's ``drop`` and ``val_fraction``).

    Parameters
    ----------
    value : real number
        The value to check.
    name : str
        The argument's name, used in the message.

    Returns
    -------
    float
        ``float(value)``.

    Raises
    ------
    ValueError
        Not a finite real in [0, 1).

    Examples
    --------
    >>> check_fraction(0.2, "drop")
    0.2
    >>> check_fraction(1.0, "drop")
    Traceback (most recent call last):
    ...
    ValueError: drop must lie in [0.0, 1.0), got 1.0
    """
    return _checks.check_scalar(value, name, low=0.0, high=1.0, high_open=True)


#: Largest quadrature order (nodes per panel) accepted: ``quad_order`` of the solvers, ``order`` of the Gauss rules
#: (which get up to 8 * quad_order); the default is 10, and above 1000 the rules only cost time and memory.
MAX_QUAD_ORDER = 1000


def check_quad_order(value, name: str = "quad_order", *, factor: int = 1) -> int:
    """A quadrature order: an integer in ``[1, factor * MAX_QUAD_ORDER]``.

    Parameters
    ----------
    value : int or integral float
        The order.
    name : str, default="quad_order"
        The argument's name, used in the message.
    factor : int, default=1
        The cap is ``factor * MAX_QUAD_ORDER`` (the Gauss-Hermite rules use up to 8 times the order).

    Returns
    -------
    int
        ``int(value)``.

    Raises
    ------
    ValueError
        Not an integer (NaN, 2.5, a string, a complex number), below 1 or above the cap.

    Examples
    --------
    >>> check_quad_order(10)
    10
    """
    order, factor = _checks.check_int(value, name), _checks.check_int(factor, "factor")
    if order > factor * MAX_QUAD_ORDER:
        raise ValueError(f"{name} must be at most {factor * MAX_QUAD_ORDER}, got {order}")
    return order




#: Largest ``quad_order`` of the fixed-point solvers (:func:`cgmt.solve`, :func:`cgmt.mle`,
#: :func:`cgmt.solve_spectral`): their quadrature check doubles the order, and the default is 10.
SOLVER_ORDER_MAX = 200


def check_solver_counts(max_iter, quad_order) -> tuple:
    """The budget of a fixed-point solver, checked one way for every solver: ``max_iter`` a positive integer,
    ``quad_order`` an integer in ``[2, SOLVER_ORDER_MAX]``.

    Parameters
    ----------
    max_iter : int
        Newton iterations per stage.
    quad_order : int
        Gauss-Legendre points per panel.

    Returns
    -------
    (int, int)
        ``(max_iter, quad_order)``.

    Raises
    ------
    ValueError
        Naming the argument.

    Examples
    --------
    >>> check_solver_counts(100, 10)
    (100, 10)
    """
    try:
        max_iter = _checks.check_int(max_iter, "max_iter")
    except ValueError:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}") from None
    try:
        order = _checks.check_int(quad_order, "quad_order", minimum=2)
    except ValueError:
        order = None
    if order is None or order > SOLVER_ORDER_MAX:
        raise ValueError(f"quad_order must be an integer in [2, {SOLVER_ORDER_MAX}], got {quad_order!r}")
    return max_iter, order


#: most grid points :func:`sweep` solves unless told otherwise (~1 ms each: about half an hour on one core)
MAX_POINTS = 1_000_000


def check_grid_size(n_points: int, max_points: int | None = MAX_POINTS, what: str = "grid",
                    override: str = "max_points=..., --max-points") -> int:
    """Refuse a grid of more than ``max_points`` points (None: no limit) with a message giving both numbers
    and how to raise the limit (``override``).

    Parameters
    ----------
    n_points : int
        Points (or fits) the grid needs.
    max_points : int or None, default=MAX_POINTS
        The limit; None: no limit.
    what : str, default="grid"
        What the grid is, for the message.
    override : str, default="max_points=..., --max-points"
        How the caller raises the limit, for the message.

    Returns
    -------
    int
        ``n_points``.

    Raises
    ------
    ValueError
        ``n_points > max_points``.

    Examples
    --------
    >>> check_grid_size(10, 100)
    10
    >>> check_grid_size(10**9, 100, "sweep grid")
    Traceback (most recent call last):
    ...
    ValueError: sweep grid has 1000000000 points, more than the limit 100; use a coarser grid or raise the limit
    (max_points=..., --max-points)
    """
    n_points = _checks.check_int(n_points, "n_points", minimum=0, maximum=2 ** 63 - 1)
    if max_points is not None:
        max_points = _checks.check_int(max_points, "max_points", maximum=2 ** 63 - 1)
    if max_points is not None and n_points > max_points:
        raise ValueError(f"{what} has {n_points} points, more than the limit {max_points}; use a coarser grid or "
                         f"raise the limit ({override})")
    return n_points
