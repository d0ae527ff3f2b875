"""The failure vocabulary of every solver of the project: one status table, one switch, one reporting function.

Every iterative solver (the ``cgmt`` fixed points, the ``empirical.logistic`` Newton solvers and the batched engine,
the separability tests) returns a SciPy ``OptimizeResult`` whose ``status`` is a key of :data:`STATUS_MESSAGES` and
whose ``success`` is ``status in SUCCESS``.  A public solver that can fail takes ``strict`` (bool): on failure it
either raises :class:`ConvergenceError` (``strict=True``) or warns :class:`ConvergenceWarning` and returns the result
with ``success=False`` (:func:`report`, modelled on scikit-learn's ``_check_optimize_result``); a caller that reads
``success`` itself silences the warnings with :func:`quiet`.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager

from .checks import check_bool, check_int

__all__ = ["STATUS_MESSAGES", "SUCCESS", "is_success", "CONVERGED", "ITERATION_LIMIT", "NO_PROGRESS",
           "CONTINUATION_FAILED", "CROSS_FAILED", "OUT_OF_LIMITS", "SIGNS_CERTIFIED", "CG_EXHAUSTED",
           "ConvergenceError", "ConvergenceWarning", "report", "quiet"]

#: the status codes of every solver of the project, by name (plain ints: the Numba kernels return them too)
CONVERGED = 0
ITERATION_LIMIT = 1
NO_PROGRESS = 2
CONTINUATION_FAILED = 3
CROSS_FAILED = 4
OUT_OF_LIMITS = 5
SIGNS_CERTIFIED = 6
CG_EXHAUSTED = 7
#: the one status table (code -> meaning)
STATUS_MESSAGES = {
    CONVERGED: "converged",
    ITERATION_LIMIT: "iteration limit reached",
    NO_PROGRESS: "no further progress (line search failed: the round-off floor)",
    CONTINUATION_FAILED: "continuation in lambda failed",
    CROSS_FAILED: "cross fixed point not converged",
    OUT_OF_LIMITS: "the answer breaks its limits (accuracy outside [1/2, Bayes accuracy], or a scale not positive)",
    SIGNS_CERTIFIED: "validation signs certified before reaching tol",
    CG_EXHAUSTED: "matrix-free CG needed too many iterations (continue with a factorized preconditioner)",
}
#: the statuses that are a success: converged, or (the exact path) every validation sign certified
SUCCESS = frozenset({CONVERGED, SIGNS_CERTIFIED})


def is_success(status) -> bool:
    """The one success rule: ``status`` (a code of :data:`STATUS_MESSAGES`) is in :data:`SUCCESS`.

    Parameters
    ----------
    status : int
        A status code.

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        ``status`` is not an integer code of :data:`STATUS_MESSAGES`.

    Examples
    --------
    >>> is_success(CONVERGED), is_success(SIGNS_CERTIFIED), is_success(ITERATION_LIMIT)
    (True, True, False)
    """
    return check_int(status, "status", minimum=min(STATUS_MESSAGES), maximum=max(STATUS_MESSAGES)) in SUCCESS


class ConvergenceWarning(UserWarning):
    """Warned by a solver of the project (``strict=False``) whose result has ``success=False``.

    The project's own class, not scikit-learn's ``sklearn.exceptions.ConvergenceWarning`` (which it mirrors, and
    which scikit-learn's own estimators still warn inside the probes): the floor imports nothing above NumPy, so
    that ``import cgmt`` does not load scikit-learn (0.78 s of a 0.99 s import on 2026-11-29).  Filter it as
    ``warnings.simplefilter("ignore", cgmt.ConvergenceWarning)``, or read ``success`` inside :func:`quiet`.
    """


class ConvergenceError(RuntimeError):
    """Raised by the ``strict=True`` mode of a solver when the fixed point is not found to tolerance.

    Parameters
    ----------
    message : str
        What did not converge, and why (the result's message).
    result : OptimizeResult, optional
        The unconverged result (``.result``).

    Attributes
    ----------
    result : OptimizeResult or None
        The unconverged result, for a caller that wants to inspect it.
    """

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


def report(result, strict: bool, call: str, **arguments):
    """Apply the failure convention to a finished ``result``: raise (strict) or warn, then return it.

    Parameters
    ----------
    result : OptimizeResult
        With ``success`` (a bool, or an array of them for a batch: the batch succeeds when every entry does) and
        ``message``.
    strict : bool
        Raise :class:`ConvergenceError` instead of warning (checked here for every solver: a string, a number or
        None is a ``TypeError`` naming ``strict``, whether or not the solve failed).
    call : str
        The solver's name, for the message (e.g. ``"cgmt.solve"``).
    **arguments
        The arguments that identify the point, for the message (formatted only on failure).

    Returns
    -------
    OptimizeResult
        ``result`` unchanged.

    Raises
    ------
    ConvergenceError
        ``strict`` and not ``result.success``.
    TypeError
        ``strict`` is not a bool (:func:`empirical.common.checks.check_bool`).
    """
    strict = check_bool(strict, "strict")
    success = result.success
    if not (all(bool(s) for s in success.ravel()) if hasattr(success, "ravel") else bool(success)):
        what = f"{call}({', '.join(f'{k}={v}' for k, v in arguments.items())})"
        text = f"{what} did not converge: {result.message}"
        if strict:
            raise ConvergenceError(text, result)
        warnings.warn(text + " (the result has success=False)", ConvergenceWarning, stacklevel=3)
    return result


@contextmanager
def quiet():
    """Silence :class:`ConvergenceWarning` inside: for callers that read ``success`` themselves (a retry, a sweep).

    Yields
    ------
    None
        Inside the ``with`` block, ConvergenceWarning is ignored; the warning filters are restored after it.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")
    ...     with quiet():
    ...         warnings.warn("not converged", ConvergenceWarning)
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield
