"""What every ``cgmt`` solver returns: :class:`CGMTResult`, the one status table, the failure conventions.

Every fixed-point solver of the package (:func:`cgmt.solve`, :func:`cgmt.mle`, :func:`cgmt.solve_spectral`,
the cross fixed points of :mod:`cgmt.stability` and :mod:`cgmt.spectral_stability`) reports a SciPy
``OptimizeResult`` with ``success``, ``status`` (a key of :data:`STATUS_MESSAGES`), ``message`` and ``nit``.
On failure it either raises :class:`ConvergenceError` (``strict=True``) or returns ``success=False`` after
warning :class:`sklearn.exceptions.ConvergenceWarning` (:func:`report`).  Names kept for old code warn
``DeprecationWarning`` naming :data:`REMOVAL_VERSION` (:func:`warn_deprecated`).
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
from scipy.optimize import OptimizeResult
from sklearn.exceptions import ConvergenceWarning

__all__ = ["CGMTResult", "ConvergenceError", "ConvergenceWarning", "STATUS_MESSAGES", "REMOVAL_VERSION",
           "outcome", "report", "quiet", "warn_deprecated"]

#: the one status table of ``cgmt`` (code -> meaning); ``status`` of every cgmt result is a key.
#: (``empirical.logistic`` has its own table, :data:`empirical.logistic.newton.STATUS_MESSAGES`: the two packages
#: do not share codes.)
STATUS_MESSAGES = {
    0: "converged",
    1: "iteration limit reached",
    2: "no further progress (line search failed)",
    3: "continuation in lambda failed",
    4: "cross fixed point not converged",
}

#: the release that removes the deprecated names (``CGMTResult.converged``/``.iterations``, sims' ``converged``)
REMOVAL_VERSION = "0.3"


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn ``DeprecationWarning``: ``old`` is deprecated, use ``new``; removed in :data:`REMOVAL_VERSION`.

    Parameters
    ----------
    old, new : str
        The deprecated name and its replacement.
    stacklevel : int
        As for :func:`warnings.warn` (the default points at the caller of the function that warns).
    """
    warnings.warn(f"{old} is deprecated and will be removed in {REMOVAL_VERSION}; use {new}", DeprecationWarning,
                  stacklevel=stacklevel)


class ConvergenceError(RuntimeError):
    """Raised by the ``strict=True`` mode of a cgmt solver when the fixed point is not found to tolerance.

    Parameters
    ----------
    message : str
    result : OptimizeResult, optional
        The unconverged result (``.result``).
    """

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class CGMTResult(OptimizeResult):
    """Fixed point of the ridge-logistic CGMT system (SciPy ``OptimizeResult``).

    Fields: ``alpha`` (= <z_hat, v>), ``sigma`` (= ||z_hat - alpha v||), ``gamma`` (prox parameter),
    ``margin`` m = alpha/sigma, ``accuracy`` (the accuracy proposition at m), ``alignment`` alpha/sqrt(alpha^2+sigma^2),
    ``stability`` alpha^2/(alpha^2+sigma^2) (independent samples), ``alpha_salehi`` (= alpha/kappa,
    coefficient on beta*), ``delta``, ``lam``, ``kappa``, ``x`` = [alpha, sigma, gamma], ``fun``
    (relative residuals), ``residual`` (max |fun|), ``success``, ``status`` (a key of :data:`STATUS_MESSAGES`),
    ``message``, ``nit`` (Newton iterations), ``nfev``, ``quad_order``.

    ``converged`` and ``iterations`` are deprecated read-only aliases of ``success`` and ``nit`` (they warn
    ``DeprecationWarning`` and are removed in :data:`REMOVAL_VERSION`; they are not stored fields).

    Examples
    --------
    >>> import cgmt
    >>> r = cgmt.solve(2.0, 0.1, 2.0)
    >>> bool(r.success), r.status, STATUS_MESSAGES[r.status], "converged" in r
    (True, 0, 'converged', False)
    """

    @property
    def converged(self) -> bool:
        """Deprecated alias of ``success`` (removed in :data:`REMOVAL_VERSION`)."""
        warn_deprecated("CGMTResult.converged", "CGMTResult.success")
        return bool(self["success"])

    @property
    def iterations(self) -> int:
        """Deprecated alias of ``nit`` (removed in :data:`REMOVAL_VERSION`)."""
        warn_deprecated("CGMTResult.iterations", "CGMTResult.nit")
        return int(self["nit"])

    def __repr__(self):
        keys = ("alpha", "sigma", "gamma", "margin", "accuracy", "alignment", "stability", "alpha_salehi",
                "delta", "lam", "kappa", "success", "residual", "nit", "message")
        w = max(len(k) for k in keys)
        return "\n".join(f"{k.rjust(w)}: {self.get(k)!r}" for k in keys if k in self)

    __str__ = __repr__


def outcome(r, status: int, nit: int, tol: float) -> tuple[float, bool, int, str]:
    """The verdict of a Newton-type solve: (residual, success, status, message).

    Success is decided here and only here: max |r| <= tol.  A solver status 0 whose residual is above ``tol``
    becomes 1 (iteration limit); a converged residual overrides any failure status.

    Parameters
    ----------
    r : array_like
        Final relative residuals.
    status : int
        The solver's status (a key of :data:`STATUS_MESSAGES`).
    nit : int
        Newton iterations, for the message.
    tol : float

    Returns
    -------
    (float, bool, int, str)
    """
    res = float(np.max(np.abs(r)))
    success = bool(np.isfinite(res) and res <= tol)
    status = 0 if success else (1 if status == 0 else int(status))
    message = STATUS_MESSAGES[status] + f" (max relative residual {res:.3e}, tol {tol:.1e}, {nit} Newton iterations)"
    return res, success, status, message


def report(result, strict: bool, call: str, **arguments):
    """Apply the failure convention to a finished ``result``: raise (strict) or warn, then return it.

    Parameters
    ----------
    result : OptimizeResult
        With ``success`` and ``message``.
    strict : bool
        Raise :class:`ConvergenceError` instead of warning.
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
    """
    if not result.success:
        what = f"{call}({', '.join(f'{k}={v}' for k, v in arguments.items())})"
        text = f"{what} did not converge: {result.message}"
        if strict:
            raise ConvergenceError(text, result)
        warnings.warn(text + " (the result has success=False)", ConvergenceWarning, stacklevel=3)
    return result


@contextmanager
def quiet():
    """Silence :class:`ConvergenceWarning` inside: for callers that read ``success`` themselves (a retry, a sweep)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield
