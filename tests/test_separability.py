"""Separability diagnostic: LinearSVC at large C and a perceptron."""
import warnings

import numpy as np
import pytest

from empirical import perceptron, separability


def test_separable_high_dimensional_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 100))  # p > n: separable for any labels
    y = rng.integers(0, 2, 40)
    res = separability(X, y, perceptron_epochs=2000)
    assert res.separable and res.perc_zero
    assert res.perceptron.train_errors == 0 and res.perceptron.nit <= 2000
    assert [r["C"] for r in res.svm] == [1e4, 1e6, 1e8]


def test_non_separable_data_reported():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 2))
    y = rng.integers(0, 2, 200)  # labels independent of X in 2-D: not separable
    with pytest.warns(UserWarning, match="convergence"):
        res = separability(X, y, perceptron_epochs=50, svm_max_iter=3)
    assert not res.separable and not res.perc_zero
    assert res.perceptron.nit == 50 and res.perceptron.train_errors > 0
    assert res.n_convergence_warnings >= 1  # warnings counted, not hidden


def test_perceptron_separates_with_margin():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((100, 5))
    w = rng.standard_normal(5)
    keep = np.abs(X @ w) > 0.5
    X = X[keep]
    y = np.sign(X @ w)
    r = perceptron(X, y, 2000)
    assert r.success and r.status == 0 and np.all(y * (X @ r.x + r.intercept) > 0)


def test_bad_input():
    X = np.ones((10, 2))
    with pytest.raises(ValueError, match="Cs"):
        separability(X, np.arange(10) % 2, Cs=[])
    with pytest.raises(ValueError, match="one class"):
        separability(X, np.zeros(10))



@pytest.mark.parametrize("n, p", [(40, 100), (60, 28), (80, 10), (200, 2)])
def test_stop_when_separated_keeps_the_verdict(n, p):
    rng = np.random.default_rng(n + p)
    X = rng.standard_normal((n, p))
    y = rng.integers(0, 2, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings are expected near the threshold
        full = separability(X, y, perceptron_epochs=200, svm_max_iter=2000)
        short = separability(X, y, perceptron_epochs=200, svm_max_iter=2000, stop_when_separated=True)
    assert short.separable == full.separable and short.perc_zero == full.perc_zero
    assert [r["C"] for r in short.svm] == [r["C"] for r in full.svm][:len(short.svm)]
    first = next((i for i, r in enumerate(full.svm) if r["train_errors"] == 0), len(full.svm) - 1)
    assert len(short.svm) == first + 1  # stops at the first separating C; runs all when none separates


def test_shuffled_label_control_separates_below_covers_threshold_and_not_far_above():
    """Cover: random labels of n points in general position in p dimensions (plus a bias) separate for almost
    every labelling while n < 2 (p + 1); far above that they do not, while a real concept still separates."""
    import warnings

    from empirical.probes import shuffled_label_control
    rng = np.random.default_rng(3)
    y = np.arange(60) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert shuffled_label_control(rng.standard_normal((60, 50)), y, stop_when_separated=True).separable
        X = rng.standard_normal((300, 4))
        y = np.arange(300) % 2
        X[:, 0] += 8.0 * (2 * y - 1)  # a separable concept
        assert separability(X, y, stop_when_separated=True).separable
        assert not shuffled_label_control(X, y, stop_when_separated=True, perceptron_epochs=50).separable


def test_shuffled_label_control_keeps_the_class_counts_and_is_reproducible():
    from empirical.probes import shuffled_label_control
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 3)), np.r_[np.ones(10, int), np.zeros(30, int)]
    a = shuffled_label_control(X, y, random_state=5, perceptron_epochs=20)
    b = shuffled_label_control(X, y, random_state=5, perceptron_epochs=20)
    assert a.svm == b.svm
    with pytest.raises(ValueError, match="y"):
        shuffled_label_control(X, y[:-1])


def test_separability_lp_agrees_with_covers_threshold_and_with_scipy_feasibility():
    """The LP decides separability exactly: random labels of n Gaussian points in p dims (plus a bias) separate
    below n = 2 (p + 1) and not well above it; a separable verdict's hyperplane classifies every row."""
    from empirical.probes import separability_lp
    rng = np.random.default_rng(4)
    p = 20
    below = separability_lp(rng.standard_normal((30, p)), np.arange(30) % 2)
    assert below.separable and below.status == 0 and below.fun <= 1e-9 and below.train_errors == 0
    above = separability_lp(rng.standard_normal((120, p)), np.arange(120) % 2)
    assert not above.separable and above.status == 0 and above.success and above.fun > 1.0 and above.train_errors > 0
    assert "not linearly separable" in above.message  # a decided answer is a finished solve: status 0
    # the certificate: the returned hyperplane (on standardized rows) separates the rows
    X = rng.standard_normal((30, p))
    y = rng.integers(0, 2, 30)
    r = separability_lp(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    assert np.all((2 * y - 1) * (Xs @ r.x + r.intercept) > 0)


@pytest.mark.parametrize("seed", range(6))
def test_separability_lp_agrees_with_the_svm_ladder_where_that_converges(seed):
    """Clearly separable and clearly non-separable data: both tests give the same verdict."""
    from empirical.probes import separability_lp
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((150, 5))
    y = np.arange(150) % 2
    X[:, 0] += (6.0 if seed % 2 else 0.3) * (2 * y - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svm = separability(X, y, stop_when_separated=True).separable
    assert separability_lp(X, y).separable == svm == bool(seed % 2)


def test_separability_lp_is_invariant_to_an_affine_map_of_the_features():
    from empirical.probes import separability_lp
    rng = np.random.default_rng(7)
    X, y = rng.standard_normal((50, 30)), np.arange(50) % 2
    a = separability_lp(X, y)
    b = separability_lp(1e6 * X + 3e3, y)
    assert a.separable == b.separable


def test_separability_lp_rejects_bad_input():
    from empirical.probes import separability_lp
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="y"):
        separability_lp(X, [0, 1, 0])
    with pytest.raises(ValueError, match="tol"):
        separability_lp(X + np.eye(4, 2), [0, 1, 0, 1], tol=0.5)
    with pytest.raises(ValueError, match="X"):
        separability_lp(np.full((4, 2), np.nan), [0, 1, 0, 1])


def test_shuffled_label_control_with_the_lp_test_permutes_the_labels_reproducibly():
    from empirical.probes import separability_lp, shuffled_label_control
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = np.arange(300) % 2
    X[:, 0] += 8.0 * (2 * y - 1)
    assert separability_lp(X, y).separable
    a = shuffled_label_control(X, y, random_state=2, test=separability_lp)
    b = shuffled_label_control(X, y, random_state=2, test=separability_lp)
    assert not a.separable and a.fun == b.fun
    with pytest.raises(TypeError, match="test"):
        shuffled_label_control(X, y, test="lp")


@pytest.mark.parametrize("highs_status, status", [(1, 1), (4, 2)])
def test_an_lp_that_does_not_finish_is_undecided_with_the_solvers_status(monkeypatch, highs_status, status):
    """The status is the solve's (0 finished, 1 iteration limit, 2 no usable optimum), never the answer: an
    unfinished LP is success=False and separable=False, with a message that says it is undecided."""
    import importlib

    from scipy.optimize import OptimizeResult

    sep = importlib.import_module("empirical.probes._separability")

    monkeypatch.setattr(sep, "linprog", lambda *a, **k: OptimizeResult(status=highs_status, x=None, nit=3,
                                                                       message="stopped"))
    r = sep.separability_lp([[0.0, 1.0], [1.0, 2.0], [0.0, -1.0], [1.0, -3.0]], [1, 1, 0, 0])
    assert (r.success, r.status, r.separable) == (False, status, False) and r.message.startswith("undecided")
