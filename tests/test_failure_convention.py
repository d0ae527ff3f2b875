"""Every public solver fails the one way (issue 55): given a budget it cannot meet, it warns the project's
``ConvergenceWarning`` and returns ``success=False``; with ``strict=True`` it raises ``ConvergenceError`` instead
(:func:`empirical.common.failures.report`).  The signature side (every public function returning SciPy's result
object has ``strict``) is ``tests/test_architecture.py::test_every_public_solver_has_the_one_failure_convention``."""
import importlib
import warnings

import numpy as np
import pytest
from scipy.optimize import OptimizeResult

import cgmt
import cgmt._optimal
from empirical.common.failures import ConvergenceError, ConvergenceWarning
from empirical.logistic import fit_l2_logistic, fit_l2_logistic_rows, logistic_path, reduce_design, refit
from empirical.probes._separability import perceptron, separability_lp

RNG = np.random.default_rng(0)
X = RNG.standard_normal((40, 60))
Y = np.where(X[:, 0] + 0.3 * RNG.standard_normal(40) > 0, 1.0, -1.0)
XV, YV = X[:10] + 0.1, Y[:10]
# the modules (the packages' attributes of these names are functions)
STABILITY = importlib.import_module("cgmt.stability")
SEPARABILITY = importlib.import_module("empirical.probes._separability")
XOR_X, XOR_Y = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]), np.array([1.0, 1.0, -1.0, -1.0])


def _failed_cgmt_solve(*args, **kwargs):
    return cgmt.CGMTResult(success=False, margin=np.nan, message="forced failure")


def _undecided_lp(*args, **kwargs):
    return OptimizeResult(status=1, x=None, message="iteration limit (forced)", nit=0)


def _refit_call(**kw):
    design = reduce_design(X[10:], XV)
    return refit(X[10:], Y[10:], XV, YV, 1.0, design, np.zeros(design.rank), 0.0, max_iter=1, tol=1e-14, **kw)


#: name -> (call(**kw), monkeypatches); each call cannot meet its budget
CASES = {
    "cgmt.optimal_lambda": (lambda **kw: cgmt.optimal_lambda(2.0, 2.0, **kw),
                            [(cgmt._optimal, "solve", _failed_cgmt_solve)]),
    "cgmt.stability.cross_noise_covariance": (
        lambda **kw: STABILITY.cross_noise_covariance(cgmt.solve(2.0, 0.1, 1.0).x, cgmt.solve(1.28, 0.1, 1.0).x,
                                                      0.8192, 1.0, **kw),
        [(STABILITY, "RESIDUAL_TOL", -1.0)]),  # no residual is ever small enough
    "cgmt.solve_spectral_path": (
        lambda **kw: cgmt.solve_spectral_path(2.0, [1.0, 0.1], np.ones(20), np.full(20, 0.2), max_iter=1,
                                              tol=1e-300, **kw), []),
    "empirical.fit_l2_logistic": (lambda **kw: fit_l2_logistic(X, Y, 10.0, max_iter=1, tol=1e-14, **kw), []),
    "empirical.logistic.fit_l2_logistic_rows": (
        lambda **kw: fit_l2_logistic_rows(X, Y, 10.0, [np.arange(30), np.arange(5, 40)], max_iter=1, tol=1e-14,
                                          **kw), []),
    "empirical.logistic_path": (lambda **kw: logistic_path(X[10:], Y[10:], XV, YV, [1.0, 10.0], certify=False,
                                                           max_iter=1, tol=1e-14, **kw), []),
    "empirical.logistic.refit": (_refit_call, []),
    "empirical.probes.perceptron": (lambda **kw: perceptron(XOR_X, XOR_Y, max_epochs=1, **kw), []),
    "empirical.probes.separability_lp": (lambda **kw: separability_lp(X, Y > 0, **kw),
                                                      [(SEPARABILITY, "linprog", _undecided_lp)]),
}


def _all_failed(result):
    results = result if isinstance(result, list) else [result]
    return all(not np.all(r.success) for r in results)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_failed_solve_warns_and_a_strict_one_raises(name, monkeypatch):
    call, patches = CASES[name]
    for target, attribute, value in patches:
        monkeypatch.setattr(target, attribute, value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    assert _all_failed(result), name
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert messages and all("did not converge" in m and "success=False" in m for m in messages), (name, messages)
    with pytest.raises(ConvergenceError, match="did not converge"):
        call(strict=True)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("value", ["yes", 1, None, float("nan")])
def test_strict_is_a_flag_named_when_it_is_not(name, value, monkeypatch):
    """``report`` checks ``strict`` for every solver: a string, a number or None read as a flag would turn a
    failure into an exception (or not) by accident (the contract's full sweep found it: 'string' raised
    ConvergenceError from ``perceptron``)."""
    call, patches = CASES[name]
    for target, attribute, value_ in patches:
        monkeypatch.setattr(target, attribute, value_)
    with pytest.raises(TypeError, match="strict must be True or False"):
        call(strict=value)


@pytest.mark.parametrize("engine", ["batched_path", "batched_refit"])
def test_the_batched_engine_fails_the_same_way(engine):
    pytest.importorskip("torch")
    from empirical.logistic import batched

    Xb, Xvb = np.stack([X[10:], X[10:] * 2.0]), np.stack([XV, XV * 2.0])
    if engine == "batched_path":
        def call(**kw):
            return batched.batched_path(Xb, Y[10:], Xvb, YV, [1.0, 10.0], max_iter=1, tol=1e-14, **kw)
    else:
        def call(**kw):
            return batched.batched_refit(Xb, Y[10:], [10.0, 10.0], np.zeros((2, 60)), [0.0, 0.0], max_iter=1,
                                         tol=1e-14, **kw)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        result = call()
    assert not np.all(result.success)
    with pytest.raises(ConvergenceError, match="did not converge"):
        call(strict=True)


def test_a_caller_that_reads_success_itself_is_quiet():
    """The estimators warn in their own words (RaptorProbe's path and refit messages): the solvers they call do not
    warn a second time."""
    from empirical import RaptorProbe

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RaptorProbe(Cs=[1.0, 10.0], max_iter=1, tol=1e-14).fit(X, Y > 0)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert messages and all(m.startswith("RaptorProbe") for m in messages), messages
