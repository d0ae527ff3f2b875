"""Linear-separability diagnostic (paper ``tab:svm_separability_nowarn`` and the text around it).

On train-standardized features: LinearSVC at C in {1e4, 1e6, 1e8} (a layer is *separable* if some C
reaches zero training error) and a perceptron for up to 2000 epochs (*perc_zero* if it reaches zero
training error).  Solver convergence warnings are counted and reported, not hidden: as the paper
notes, the SVM test is a diagnostic signal, not a certificate.
"""
from __future__ import annotations

import warnings

import numba
import numpy as np
from scipy.optimize import OptimizeResult

from ..validation import check_binary_labels, check_matrix, standardize_stats

__all__ = ["separability", "perceptron"]


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


def perceptron(X, y_pm, max_epochs=2000, random_state=0):
    """Run the perceptron on (X, y in {-1, +1}); rows visited in one fixed random order.

    Returns an OptimizeResult with ``coef``, ``intercept``, ``nit`` (epochs), ``zero_error`` and
    ``train_errors`` (training mistakes in the last epoch)."""
    rng = np.random.default_rng(random_state)
    order = rng.permutation(X.shape[0]).astype(np.int64)
    w, b, epochs, errs = _perceptron_kernel(np.ascontiguousarray(X, dtype=np.float64),
                                             np.ascontiguousarray(y_pm, dtype=np.float64), order, int(max_epochs))
    final_err = int(np.sum(y_pm * (X @ w + b) <= 0))
    return OptimizeResult(coef=w, intercept=float(b), nit=int(epochs), zero_error=final_err == 0,
                          train_errors=final_err, success=final_err == 0,
                          message="zero training error" if final_err == 0 else
                          f"not separated after {epochs} epochs ({final_err} training errors)")


def separability(X, y, Cs=(1e4, 1e6, 1e8), perceptron_epochs=2000, svm_max_iter=10000, random_state=0):
    """Separability diagnostic on training rows ``X`` (raw; standardized here with their own statistics).

    Returns an OptimizeResult with ``svm`` (list of dicts: C, train_errors, converged, warnings),
    ``separable`` (some C reached zero training error), ``perceptron`` (see :func:`perceptron`),
    ``perc_zero`` and ``n_convergence_warnings``."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    X = check_matrix(X, "X")
    _, ypm = check_binary_labels(y, X.shape[0], "y")
    Cs = np.atleast_1d(np.asarray(Cs, dtype=float))
    if Cs.size == 0 or np.any(~np.isfinite(Cs)) or np.any(Cs <= 0):
        raise ValueError("Cs must be a non-empty list of finite positive values")
    if int(perceptron_epochs) < 1:
        raise ValueError(f"perceptron_epochs must be >= 1; got {perceptron_epochs!r}")
    mu, s = standardize_stats(X)
    Xs = (X - mu) / s
    svm_rows = []
    for C in Cs:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            clf = LinearSVC(C=float(C), max_iter=int(svm_max_iter), random_state=random_state).fit(Xs, ypm)
        msgs = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        errs = int(np.sum(clf.predict(Xs) != ypm))
        svm_rows.append(dict(C=float(C), train_errors=errs, converged=not msgs, warnings=msgs))
    perc = perceptron(Xs, ypm, perceptron_epochs, random_state)
    n_warn = sum(len(r["warnings"]) for r in svm_rows)
    if n_warn:
        warnings.warn(f"separability: LinearSVC raised {n_warn} convergence warning(s); the SVM test is a "
                      "diagnostic signal, not a certificate", UserWarning, stacklevel=2)
    return OptimizeResult(svm=svm_rows, separable=any(r["train_errors"] == 0 for r in svm_rows), perceptron=perc,
                          perc_zero=bool(perc.zero_error), n_convergence_warnings=n_warn, success=True)
