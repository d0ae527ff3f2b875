"""Linear-separability diagnostic (the paper's separability table and the text around it) and an exact test.

:func:`separability` is the paper's diagnostic.  On train-standardized features: LinearSVC at C in
{1e4, 1e6, 1e8} (a layer is *separable* if some C reaches zero training error) and a perceptron for up to
2000 epochs (*perc_zero* if it reaches zero training error).  Solver convergence warnings are counted and
reported, not hidden: as the paper notes, the SVM test is a diagnostic signal, not a certificate.

:func:`separability_lp` decides the same question exactly, as a linear programme (HiGHS through
:func:`scipy.optimize.linprog`): the smallest total slack of ``y_i (<w, x_i> + b) >= 1 - s_i``, ``s >= 0`` is
zero if and only if the rows are strictly linearly separable.  It returns the separating hyperplane as a
certificate (checked on the rows) and is 20-30x faster than the LinearSVC ladder on barely separable layers
(measured on SmolLM2 Cities, 1,000 rows x 576: 2-4 s against 60-75 s), which is what a shuffled-label control
on many layers needs (:func:`shuffled_label_control`).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numba
import numpy as np
from scipy import sparse
from scipy.optimize import OptimizeResult, linprog
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning  # LinearSVC's own
from sklearn.svm import LinearSVC

from empirical.common.checks import as_generator, check_int, check_scalar
from empirical.common.failures import CONVERGED, ITERATION_LIMIT, NO_PROGRESS, STATUS_MESSAGES, quiet, report

from ..common.arrays import as_real_array, check_binary_labels, check_grid, check_matrix, check_signed_labels
from ..common.checks import check_random_state
from ..numerics import standardize, standardize_stats

__all__ = ["separability", "separability_lp", "shuffled_label_control", "perceptron", "SeparabilityResult"]


@dataclass(frozen=True)
class SeparabilityResult:
    """Result of :func:`separability` (a diagnostic, not an optimisation).

    Attributes
    ----------
    svm : list of dict
        One dict per SVM C: ``C``, ``train_errors``, ``success`` (LinearSVC converged without a warning),
        ``warnings`` (messages).
    separable : bool
        Some C reached zero training error.
    perceptron : OptimizeResult
        The perceptron run (:func:`perceptron`).
    perc_zero : bool
        The perceptron reached zero training error.
    n_convergence_warnings : int
        LinearSVC convergence warnings over all C.
    """

    svm: list
    separable: bool
    perceptron: OptimizeResult
    perc_zero: bool
    n_convergence_warnings: int




@numba.njit(cache=True)
def _perceptron_kernel(X, y, order, max_epochs):
    """Classic perceptron (with bias) over rows in ``order``; returns (w, b, epochs_run, last_errors)."""
    n, p = X.shape
    w = np.zeros(p)
    b = 0.0
    errors = n
    for epoch in range(max_epochs):
        errors = 0
        for k in range(n):
            i = order[k]
            s = b
            for j in range(p):
                s += w[j] * X[i, j]
            if y[i] * s <= 0.0:
                for j in range(p):
                    w[j] += y[i] * X[i, j]
                b += y[i]
                errors += 1
        if errors == 0:
            return w, b, epoch + 1, 0
    return w, b, max_epochs, errors


def perceptron(X, y_signed, max_epochs: int = 2000, random_state=0, *, strict: bool = False) -> OptimizeResult:
    """Run the classic perceptron (with bias) on (X, y in {-1, +1}); rows visited in one fixed random order.

    Parameters
    ----------
    X : array of shape (n, p)
        Rows (standardize them first for a scale-free run).
    y_signed : array of shape (n,)
        Labels in {-1, +1}.
    max_epochs : int
        Passes over the data at most.
    random_state : int
        Seed of the visiting order.
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` when the epochs run out before the training error
        is zero (the perceptron converges if and only if the rows are separable); otherwise that warns
        :class:`~empirical.common.failures.ConvergenceWarning` and the result has ``success=False``.

    Returns
    -------
    OptimizeResult
        ``x`` (the weights), ``intercept``, ``nit`` (epochs run), ``success`` (zero training error),
        ``status`` (0 separated, 1 epoch limit: the project's :data:`~empirical.common.failures.STATUS_MESSAGES`),
        ``message``, ``train_errors`` (mistakes of the final
        weights).

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, -1.0], [0.0, -3.0]])
    >>> r = perceptron(X, np.array([1.0, 1.0, -1.0, -1.0]))
    >>> r.success, r.train_errors
    (True, 0)
    """
    X = check_matrix(X, "X")
    y_signed = check_signed_labels(y_signed, X.shape[0], "y_signed")
    max_epochs = check_int(max_epochs, "max_epochs", minimum=1)
    rng = as_generator(random_state, "random_state")
    order = rng.permutation(X.shape[0]).astype(np.int64)
    w, b, epochs, errs = _perceptron_kernel(np.ascontiguousarray(X, dtype=np.float64),
                                             np.ascontiguousarray(y_signed, dtype=np.float64), order, int(max_epochs))
    final_err = int(np.sum(y_signed * (X @ w + b) <= 0))
    separated = final_err == 0
    result = OptimizeResult(x=w, intercept=float(b), nit=int(epochs), train_errors=final_err, success=separated,
                            status=CONVERGED if separated else ITERATION_LIMIT,
                            message=f"{STATUS_MESSAGES[0]}: zero training error" if separated else
                            f"{STATUS_MESSAGES[1]}: not separated after {epochs} epochs ({final_err} training errors)")
    return report(result, strict, "empirical.probes.perceptron", max_epochs=max_epochs)


def separability(X, y, Cs=(1e4, 1e6, 1e8), perceptron_epochs: int = 2000, svm_max_iter: int = 10000,
                 random_state=0, stop_when_separated: bool = False) -> SeparabilityResult:
    """Separability diagnostic on training rows ``X`` (raw; standardized here with their own statistics).

    Parameters
    ----------
    X : array of shape (n, p)
        Training rows.
    y : array of shape (n,)
        Binary labels.
    Cs : sequence of positive floats
        LinearSVC strengths (the paper's 1e4, 1e6, 1e8).
    perceptron_epochs : int
        Perceptron epoch limit.
    svm_max_iter : int
        LinearSVC iteration limit (convergence warnings are counted, and warned about once).
    random_state : int
        Seed of both solvers.
    stop_when_separated : bool
        Skip the remaining C once one reaches zero training error. ``separable`` is the same either way
        (it asks whether *some* C separates); ``svm`` then lists only the C that were run and
        ``n_convergence_warnings`` counts only their warnings. On barely separable layers each C costs
        seconds to tens of seconds, so this saves up to two thirds of the SVM time (the main job uses it).

    Returns
    -------
    SeparabilityResult

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [1.0, 2.0], [0.0, -1.0], [1.0, -3.0]])
    >>> r = separability(X, [1, 1, 0, 0])
    >>> r.separable, r.perc_zero
    (True, True)
    """
    X = check_matrix(X, "X")
    _, y_signed = check_binary_labels(y, X.shape[0], "y")
    Cs = check_grid(Cs)
    perceptron_epochs = check_int(perceptron_epochs, "perceptron_epochs")
    svm_max_iter = check_int(svm_max_iter, "svm_max_iter")
    random_state = check_random_state(random_state)
    mu, s = standardize_stats(X)
    Xs = standardize(X, mu, s)
    svm_rows = []
    for C in Cs:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SklearnConvergenceWarning)
            clf = LinearSVC(C=float(C), max_iter=int(svm_max_iter), random_state=random_state).fit(Xs, y_signed)
        msgs = [str(w.message) for w in caught if issubclass(w.category, SklearnConvergenceWarning)]
        errs = int(np.sum(clf.predict(Xs) != y_signed))
        svm_rows.append(dict(C=float(C), train_errors=errs, success=not msgs, warnings=msgs))
        if stop_when_separated and errs == 0:
            break
    with quiet():  # not separating within the epochs is this diagnostic's answer (perc_zero), not a failure
        perc = perceptron(Xs, y_signed, perceptron_epochs, random_state)
    n_warn = sum(len(r["warnings"]) for r in svm_rows)
    if n_warn:
        warnings.warn(f"separability: LinearSVC raised {n_warn} convergence warning(s); the SVM test is a "
                      "diagnostic signal, not a certificate", UserWarning, stacklevel=2)
    return SeparabilityResult(svm=svm_rows, separable=any(r["train_errors"] == 0 for r in svm_rows), perceptron=perc,
                              perc_zero=bool(perc.success), n_convergence_warnings=n_warn)


#: the decided answer of :func:`separability_lp` (``separable`` -> message)
LP_ANSWERS = {True: "strictly separable (the returned hyperplane has zero training errors)",
              False: "not linearly separable (the smallest total slack is positive)"}


def separability_lp(X, y, tol: float = 1e-7, *, strict: bool = False) -> OptimizeResult:
    """Exact linear-separability test of (X, y) as a linear programme (HiGHS).

    Solves ``min sum(s)`` over ``w, b, s`` subject to ``y_i (<w, x_i> + b) >= 1 - s_i`` and ``s >= 0`` on the
    rows standardized with their own statistics (the test is invariant to that affine map).  The rows are
    strictly separable (with a bias) if and only if the optimum is 0; the solver's hyperplane is then checked to
    classify every row correctly, so a "separable" verdict carries its certificate.

    Parameters
    ----------
    X : array of shape (n, p)
        Rows (raw).
    y : array of shape (n,)
        Binary labels.
    tol : float
        Largest optimal total slack read as zero (relative to n; the LP's optimality tolerance is ~1e-7).
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` when the LP does not finish (the answer is
        undecided); otherwise that warns :class:`~empirical.common.failures.ConvergenceWarning` and the result has
        ``success=False``.

    Returns
    -------
    OptimizeResult
        ``separable`` (bool; False when undecided), ``success`` (the LP finished: the answer is decided),
        ``status`` (0 finished, 1 iteration limit, 2 no usable optimum; the project's
        :data:`~empirical.common.failures.STATUS_MESSAGES`), ``message`` (the answer,
        :data:`LP_ANSWERS`, or why it is undecided), ``fun`` (the smallest total slack; 0 when separable),
        ``x`` (the weights on standardized rows), ``intercept``, ``train_errors`` (of that hyperplane), ``nit``.

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [1.0, 2.0], [0.0, -1.0], [1.0, -3.0]])
    >>> separability_lp(X, [1, 1, 0, 0]).separable
    True
    >>> separability_lp([[0.0], [1.0], [2.0], [3.0]], [0, 1, 0, 1]).separable   # XOR-like on a line
    False
    """
    X = check_matrix(X, "X")
    _, y_signed = check_binary_labels(y, X.shape[0], "y")
    tol = check_scalar(tol, "tol")
    if not 0.0 < tol <= 1e-2:
        raise ValueError(f"tol must be in (0, 0.01], got {tol!r}")
    mu, sd = standardize_stats(X)
    Xs = standardize(X, mu, sd)
    n, p = Xs.shape
    margins = y_signed[:, None] * np.c_[Xs, np.ones(n)]
    A = sparse.hstack([sparse.csr_matrix(-margins), -sparse.eye(n, format="csr")], format="csr")
    cost = np.r_[np.zeros(p + 1), np.ones(n)]
    res = linprog(cost, A_ub=A, b_ub=-np.ones(n), bounds=[(None, None)] * (p + 1) + [(0.0, None)] * n,
                  method="highs")
    if res.status != 0 or res.x is None:  # HiGHS's own codes: 0 optimal, 1 iteration limit
        status = ITERATION_LIMIT if res.status == 1 else NO_PROGRESS  # otherwise no usable optimum
        undecided = OptimizeResult(separable=False, success=False, status=status, fun=np.nan, x=None,
                                   intercept=np.nan, train_errors=-1, nit=int(getattr(res, "nit", 0)),
                                   message=f"undecided: {STATUS_MESSAGES[status]} ({res.message})")
        return report(undecided, strict, "empirical.probes.separability_lp", n=n, p=p)
    w, b = res.x[:p], float(res.x[p])
    errors = int(np.sum(y_signed * (Xs @ w + b) <= 0.0))
    separable = bool(res.fun <= tol * n and errors == 0)
    return OptimizeResult(separable=separable, success=True, status=CONVERGED, fun=float(res.fun), x=w, intercept=b,
                          train_errors=errors, nit=int(res.nit),
                          message=f"{STATUS_MESSAGES[0]}: {LP_ANSWERS[separable]}")


def shuffled_label_control(X, y, random_state=0, test=None, **kwargs):
    """A separability test of the same rows with the labels randomly permuted (the class counts kept).

    Separability is only evidence of concept structure where random labels of the same size do *not*
    separate: by Cover's function-counting theorem n points in general position in p dimensions (plus a
    bias) are separable for almost every labelling while n < 2 (p + 1), so at n ~ p every labelling
    separates.  Run this control on the same rows, dimensions and test as the real labels.

    Parameters
    ----------
    X : array of shape (n, p)
        Training rows.
    y : array of shape (n,)
        Binary labels (permuted here).
    random_state : int
        Seed of the permutation (and of the solvers of :func:`separability`).
    test : callable, optional
        The test, called as ``test(X, permuted_y, **kwargs)``: :func:`separability` (the default; it also
        receives ``random_state``) or :func:`separability_lp`.
    **kwargs
        Passed to the test (for :func:`separability`: ``Cs``, ``perceptron_epochs``, ``svm_max_iter``,
        ``stop_when_separated``).

    Returns
    -------
    SeparabilityResult or OptimizeResult
        What ``test`` returns; both have ``separable``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((40, 30))          # n = 40 < 2 (p + 1) = 62: random labels separate
    >>> y = np.arange(40) % 2
    >>> shuffled_label_control(X, y, stop_when_separated=True).separable
    True
    >>> X = rng.standard_normal((400, 3))          # n >> 2 (p + 1): they do not
    >>> shuffled_label_control(X, np.arange(400) % 2, stop_when_separated=True, perceptron_epochs=50).separable
    False
    >>> shuffled_label_control(X, np.arange(400) % 2, test=separability_lp).separable
    False
    """
    X = check_matrix(X, "X")
    y = np.asarray(as_real_array(y, "y", labels=True))
    check_binary_labels(y, X.shape[0], "y")
    random_state = check_random_state(random_state)
    permuted = np.random.default_rng(random_state).permutation(y)
    if test is None or test is separability:
        return separability(X, permuted, random_state=random_state, **kwargs)
    if not callable(test):
        raise TypeError(f"test must be a separability test such as separability_lp, got {test!r}")
    return test(X, permuted, **kwargs)
