"""Fast exact regularization path for ridge-logistic regression with validation-sign certification.

Problem at each grid value C (scikit-learn convention, intercept unpenalized, y in {-1, +1})::

    min_{w, b}  C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 ||w||^2

Method (see docs/probe.md for the full description):

1. **Reduction** (:mod:`empirical.logistic._design`).  The minimizer lies in the span of the training
   rows, so the problem is solved in ``r = rank(X) <= min(n, p)`` coordinates.
2. **Predictor.**  Each C starts from a polynomial extrapolation in ``log C`` of the previous solutions
   (:data:`EXTRAPOLATION_POINTS` of them).
3. **Corrector** (:func:`empirical.logistic._pcg.newton_pcg`).  Newton steps whose linear systems are solved by
   conjugate gradients preconditioned with a *stale* Cholesky factor of an earlier Hessian (refactored only when CG
   needs too many iterations), a float32 Cholesky factor applied by two triangular solves.  The path starts with no
   factor: the ridge term plus a rank-64 Nystrom approximation of the data term, until CG needs too many iterations.
4. **Certification.**  A grid point is finished as soon as every validation logit's sign is certified:
   with Newton decrement ``nu`` the distance to the exact minimizer is at most ``~nu`` in the Hessian
   norm (generalized self-concordance of the logistic loss with the ridge term making the Hessian
   ``>= I``), which bounds each validation logit's error by ``safety * nu * ||(z_v, 1)||_{H^-1}``.
   Points whose margin is within the bound are refined by further Newton steps, up to ``tol``.
   The validation accuracies along the path are thus those of the exact minimizers; the benchmark
   ``benchmarks/probe_path.py`` and the tests compare them against tightly converged references.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import OptimizeResult

from ..common.arrays import check_grid, check_matrix, check_signed_labels
from ..common.checks import check_int
from ..common.failures import CONVERGED, ITERATION_LIMIT, is_success, report
from ._design import extend_design, reduce_design
from ._factors import gemv
from ._newton import check_solver, loss_terms
from ._pcg import NYSTROM_RANK, PathContext, _NystromPrec, _PaddedPrec, _Precond, newton_pcg

__all__ = ["logistic_path", "refit"]

#: CG iterations the refit's Newton steps take without a factorization (preconditioned by the ridge term alone)
#: before they factor a preconditioner.  At small C the Hessian I + C Z'DZ is well conditioned and a handful of
#: products does what a factorization of the (n + m) x r stacked design would (~0.7 s at (4800, 4096)); where it is
#: not, the first step gives up after this many.  Measured at (3600 + 1200, 4096), 2 threads: refit 0.67 -> 0.13 s
#: (two Gaussian classes, 22 iterations), 0.66 -> 0.21 s (factor model, 37), 0.67 -> 0.79 s (spiked model: gives up
#: after 20 and factors; 0.98 s with 60).
REFIT_MATRIX_FREE_CG = 20

#: CG iterations per Newton system of the refit preconditioned with the path's preconditioner at the selected C
#: (train coordinates; the identity on those the validation rows add) before it factors the stacked Hessian.
REFIT_PRECONDITIONED_CG = 30

#: Points of the predictor's polynomial extrapolation in log C (both path solvers' default
#: ``extrapolation_points``).  Every
#: grid point takes a Newton step from the predicted point, and CG solves that step to an absolute accuracy set by
#: the smallest validation margins, so a closer prediction saves CG iterations.  On the paper's grid (100 points
#: over six decades), 3 -> 5 points cut the CG iterations per path by 11-35% on ten (data model, shape) pairs from
#: (600, 200, 576) to (3600, 1200, 4096), and the batched engine's factorizations by 20-31%, with the same
#: accuracy at every grid point (docs/probe.md); 4 and 6 points do about as well, 8 worse (the extrapolation
#: amplifies the certified iterates' errors by up to 2^extrapolation_points - 1).
EXTRAPOLATION_POINTS = 5


def check_path_options(extrapolation_points, min_newton) -> tuple:
    """The checked predictor options of both path solvers (:func:`logistic_path`,
    :func:`empirical.logistic.batched_path`): ``extrapolation_points`` in ``1 .. 10``, ``min_newton`` in
    ``0 .. 10_000``.

    Parameters
    ----------
    extrapolation_points : int
        Points of the log C extrapolation.
    min_newton : int
        Newton steps per grid point before certification is tried.

    Returns
    -------
    (extrapolation_points, min_newton)
        Python ints.

    Examples
    --------
    >>> check_path_options(EXTRAPOLATION_POINTS, 1)
    (5, 1)
    """
    return (check_int(extrapolation_points, "extrapolation_points", maximum=10),
            check_int(min_newton, "min_newton", minimum=0, maximum=10_000))


def lagrange_weights(ts, t) -> np.ndarray:
    """Weights ``w`` with ``sum_i w_i f(ts_i)`` the value at ``t`` of the polynomial through the points ``ts``
    (the path's predictor: solutions extrapolated in log C; also :mod:`empirical.logistic.batched`'s).

    Examples
    --------
    >>> lagrange_weights(np.array([0.0, 1.0]), 2.0).tolist()
    [-1.0, 2.0]
    """
    ts = np.asarray(ts, dtype=float)
    wts = np.ones(ts.size)
    for i in range(ts.size):
        for j in range(ts.size):
            if i != j:
                wts[i] *= (t - ts[j]) / (ts[i] - ts[j])
    return wts


def logistic_path(X, y, Xv, yv, Cs, *, fit_intercept=True, tol=1e-10, max_iter=100, design=None,
                  certify=True, extrapolation_points=EXTRAPOLATION_POINTS, min_newton=1,
                  check_input=True, strict=False) -> OptimizeResult:
    """Validation accuracy of the exact ridge-logistic minimizer at every C in ``Cs``.

    The grid is solved in ascending C (each point warm-started from the previous ones); the results are in
    the order of ``Cs``.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        Training rows (standardized by the caller).
    y : ndarray of shape (n,)
        Training labels in {-1, +1}.
    Xv : ndarray of shape (m, p)
        Validation rows (m may be 0).
    yv : ndarray of shape (m,)
        Validation labels in {-1, +1}.
    Cs : array of float > 0
        The grid of C = 1/lambda (distinct values in ``[C_MIN, C_MAX]``, :func:`empirical.common.arrays.check_grid`).
    fit_intercept : bool, default=True
        As for :func:`fit_l2_logistic` (note the different default).
    tol, max_iter
        As for :func:`fit_l2_logistic` (``max_iter`` per grid point).
    design : ReducedDesign, optional
        ``reduce_design(X, Xv)`` when already computed.
    certify : bool, default=True
        Stop each grid point as soon as its validation signs are certified.
    extrapolation_points : int, default=EXTRAPOLATION_POINTS (5)
        Points of the log C extrapolation (polynomial of degree ``extrapolation_points - 1`` through the last
        solutions).
    min_newton : int, default=1
        Newton steps per grid point before certification is tried.
    check_input : bool, default=True
        Validate the arrays and the grid.  A caller that has validated them already (an estimator's ``fit``: the
        data are checked once, at the boundary) passes False, as scikit-learn's ``check_input``; the arrays must
        then be float64 with labels in {-1, +1} and ``Cs`` a valid grid.
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` when a grid point is neither certified nor
        converged; otherwise that warns :class:`~empirical.common.failures.ConvergenceWarning` and the result has
        ``success=False`` (the one failure convention, :func:`empirical.common.failures.report`).

    Returns
    -------
    OptimizeResult
        With ``val_accuracy`` (len(Cs),), ``nit`` (Newton steps per C), ``certified`` (validation signs
        certified before reaching ``tol``), ``grad_norm``, ``coef_reduced`` (len(Cs), r) and ``intercept``
        (len(Cs),) of the (certified, not necessarily tightly converged) iterates in the reduced coordinates of
        ``design`` (map with ``design.back``), ``n_factorizations``, ``n_cg``, ``design``, ``preconditioner``
        (``(index, preconditioner)``: the first grid point, in ascending C, of the best validation accuracy and the
        solver's preconditioner there, for :func:`refit`'s ``preconditioner``, ``(-1, None)`` without validation
        rows; internal, not API), and ``success``
        / ``status`` (0: every grid point certified or converged, 1: not) / ``message``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((80, 5))
    >>> y = np.where(X[:, 0] + rng.standard_normal(80) > 0, 1.0, -1.0)
    >>> path = logistic_path(X[:60], y[:60], X[60:], y[60:], [0.01, 0.1, 1.0])
    >>> path.success, path.val_accuracy.shape, path.nit.shape
    (True, (3,), (3,))
    """
    if check_input:
        Cs = check_grid(Cs)
        tol, max_iter = check_solver(tol, max_iter)
        extrapolation_points, min_newton = check_path_options(extrapolation_points, min_newton)
        X, Xv = check_matrix(X, "X"), check_matrix(Xv, "Xv") if len(Xv) else np.asarray(Xv, dtype=np.float64)
        y, yv = check_signed_labels(y, X.shape[0], "y"), check_signed_labels(yv, len(Xv), "yv")
    else:
        Cs, Xv = np.asarray(Cs, dtype=np.float64), np.asarray(Xv, dtype=np.float64)
    if design is None:
        design = reduce_design(X, Xv, check_input=False)  # validated above, or by the caller
    ctx = PathContext.from_design(design)
    n, r = ctx.shape
    # the first grid point starts at zero, where every weight d is 1/4: precondition with the ridge term and a
    # low-rank approximation of the data term (no factorization) until CG needs too many iterations (newton_pcg
    # sketches again once, then factors)
    first = _NystromPrec(ctx, np.full(n, 0.25), float(np.min(Cs)), fit_intercept, rank=min(NYSTROM_RANK, r // 4))
    ctx.prec = first if first.usable else None
    order_idx = np.argsort(Cs)
    logC = np.log(Cs[order_idx])
    hist_t, hist_a, hist_b, hist_z = [], [], [], []
    a = np.zeros(r)
    b = 0.0
    acc = np.empty(len(Cs))
    coefs = np.empty((len(Cs), r))
    intercepts = np.empty(len(Cs))
    nits = np.zeros(len(Cs), dtype=int)
    certified = np.zeros(len(Cs), dtype=bool)
    grad_norms = np.empty(len(Cs))
    n_fact = n_cg = 0
    # the preconditioner in force at the first (smallest C) best grid point; (-1, None) without validation rows
    best_acc, best_prec = -1.0, (-1, None)
    for k, idx in enumerate(order_idx):
        C = Cs[idx]
        t = logC[k]
        if hist_t:
            m = min(len(hist_t), extrapolation_points)
            ts = np.array(hist_t[-m:])
            A = np.array(hist_a[-m:])
            B = np.array(hist_b[-m:])
            wts = lagrange_weights(ts, t)  # extrapolation in log C
            a = gemv(A, wts, trans=True)  # the loop's products go through one BLAS library (_factors.gemv)
            b = float(wts @ B)
            # the train logits are linear in (a, b): extrapolate them too (saves one pass over Z)
            z0 = gemv(np.array(hist_z[-m:]), wts, trans=True)
        else:
            z0 = None
        res = newton_pcg(ctx, y, C, a, b, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter,
                         yv=yv if certify else None, z0=z0, min_newton=min_newton)
        n_fact += res.n_factorizations
        n_cg += res.n_cg
        a, b = res.coef, res.intercept
        hist_t.append(t)
        hist_a.append(a)
        hist_b.append(b)
        hist_z.append(res.logits)
        if len(hist_t) > extrapolation_points:
            hist_t.pop(0), hist_a.pop(0), hist_b.pop(0), hist_z.pop(0)
        coefs[idx] = a
        intercepts[idx] = b
        vl = res.val_logits if res.val_logits is not None else gemv(ctx.Zv, a) + b
        acc[idx] = np.mean(np.where(vl > 0, 1.0, -1.0) == yv)
        if acc[idx] > best_acc:
            best_acc, best_prec = acc[idx], (int(idx), ctx.prec)
        nits[idx] = res.nit
        certified[idx] = res.certified
        grad_norms[idx] = res.grad_norm
    done = certified | (grad_norms <= tol)
    message = ("every grid point certified or converged" if done.all() else
               f"{int((~done).sum())} grid point(s) neither certified nor converged")
    result = OptimizeResult(val_accuracy=acc, nit=nits, coef_reduced=coefs, intercept=intercepts,
                            certified=certified, grad_norm=grad_norms, n_factorizations=n_fact, n_cg=n_cg,
                            design=design, preconditioner=best_prec, success=bool(done.all()),
                            status=CONVERGED if done.all() else ITERATION_LIMIT, message=message)
    return report(result, strict, "empirical.logistic_path", n_grid=len(Cs))



def refit(X, y, Xv, yv, C, design, a0, b0, *, fit_intercept=True, tol=1e-10, max_iter=100,
          check_input=True, preconditioner=None, strict=False) -> OptimizeResult:
    """Tightly converged fit on train+validation rows at one C, warm-started from a train-only
    solution ``(a0, b0)`` in the reduced coordinates of ``design`` (the train design).

    Reuses the train Gram blocks, so only the validation-validation block is new.

    Parameters
    ----------
    X, y, Xv, yv : ndarray
        The train and validation rows, as given to :func:`logistic_path`, and their labels in {-1, +1}.
    C : float
        The inverse ridge strength (> 0) of the refit.
    design : ReducedDesign
        The train design of the path.
    a0, b0 : ndarray (r,), float
        Warm start in the coordinates of ``design``.
    fit_intercept : bool, default=True
        As for :func:`fit_l2_logistic` (note the different default).
    tol, max_iter
        As for :func:`fit_l2_logistic`.
    check_input : bool, default=True
        Validate the rows, the labels and ``C`` (False: the caller has, as for :func:`logistic_path`).
    preconditioner : optional
        The path's preconditioner at the grid point of ``(a0, b0)`` (the second item of
        :func:`logistic_path`'s ``preconditioner``; internal, not API).  On a reduced design its Newton systems
        are then solved by CG preconditioned with it on the train coordinates (:class:`~empirical.logistic._pcg.
        _PaddedPrec`), up to :data:`REFIT_PRECONDITIONED_CG` iterations per system, before a factorization.
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` when the solve fails; otherwise that failure warns
        :class:`~empirical.common.failures.ConvergenceWarning` and the result has ``success=False`` (the one failure
        convention, :func:`empirical.common.failures.report`).

    Returns
    -------
    OptimizeResult
        With ``coef`` (p,) in the original coordinates, ``intercept``, ``nit``, ``grad_norm``, ``n_factorizations``
        and ``n_cg`` (preconditioner factorizations and CG iterations: at small C the Newton systems are solved by
        CG preconditioned with the ridge term alone, :data:`REFIT_MATRIX_FREE_CG`), ``success``, ``status``
        (:data:`empirical.common.failures.STATUS_MESSAGES`) and ``message``.
    """
    if check_input:
        X, Xv = check_matrix(X, "X"), check_matrix(Xv, "Xv") if len(Xv) else np.asarray(Xv, dtype=np.float64)
        y, yv = check_signed_labels(y, len(X), "y"), check_signed_labels(yv, len(Xv), "yv")
        C = float(check_grid(C, "C")[0])
        tol, max_iter = check_solver(tol, max_iter)
    if preconditioner is not None and not (isinstance(preconditioner, _Precond)
                                           and preconditioner.U.shape[0] == np.shape(a0)[0]):
        raise TypeError(f"preconditioner must be None or logistic_path's preconditioner for a design of rank "
                        f"{np.shape(a0)[0]}, got {type(preconditioner).__name__}")
    yf = np.concatenate([y, yv])
    n = len(yf)
    if not design.reduced:  # the train rows were not reduced (n >= p): neither are the stacked ones
        full = reduce_design(np.vstack([X, Xv]), check_input=False)
        a_start = design.back(a0)
    else:
        full = extend_design(design, X, Xv)
        a_start = np.concatenate([a0, np.zeros(full.rank - len(a0))])
    ctx = PathContext.from_design(full, validation=False)
    ctx.matrix_free_max_cg = REFIT_MATRIX_FREE_CG
    z0 = ctx.mul(a_start) + b0
    if C * np.logaddexp(0.0, -yf * z0).sum() + 0.5 * a_start @ a_start > C * n * np.log(2.0):
        # the train-only solution misclassifies validation rows by so much (large C) that zero is the better
        # start: Newton's quadratic model is poor where the loss is linear
        a_start, b0, z0 = np.zeros_like(a_start), 0.0, np.zeros(n)
    max_pcg = None
    if preconditioner is not None and design.reduced:  # the stacked design extends the train coordinates
        ctx.prec = _PaddedPrec(preconditioner, ctx, loss_terms(z0, yf)[2], C, fit_intercept)
        max_pcg = REFIT_PRECONDITIONED_CG
    res = newton_pcg(ctx, yf, C, a_start, b0, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter, z0=z0,
                     # without a preconditioner of the path, CG on the ridge term alone (a dense design's
                     # Jacobi would need a squared copy of it)
                     matrix_free=ctx.prec is None and ctx.tri is not None, max_pcg=max_pcg,
                     polish=1)  # the coefficients are the product: one step past tol lands far inside it
    result = OptimizeResult(coef=full.back(res.coef), intercept=res.intercept, nit=res.nit, grad_norm=res.grad_norm,
                            n_factorizations=res.n_factorizations, n_cg=res.n_cg, success=is_success(res.status),
                            status=res.status, message=res.message)
    return report(result, strict, "empirical.logistic.refit", C=C)

