"""The fit boundary checks its inputs as a whole (issue 52, section 3).

* E33: ``fit_layers`` checks every layer against ``y`` and the layers against each other, and both engines (the
  numpy path and the batched torch engine on the CPU) fit layers of different widths alike.
* R01: ``register_method``, ``fit_layers`` and ``stability`` use the one check of ``fit(X, y, X_val, y_val)``.
* E06: every pair of RaptorProbe options is tried; exactly the pairs of ``OPTION_CONFLICTS`` are refused, naming
  both options.
* E15: at a loose ``tol`` (inside the documented range) the engine and the numpy path select the same C.
* #134: ``delta_sweep`` (``raptor sweep``) on 60 rows names its argument and the probe's rule of rows per class.
* Count parameters have a declared bound, checked on every solver.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from empirical.common.checks import MAX_COUNT
from empirical.common.failures import ConvergenceWarning
from empirical.logistic import MAX_ITER
from empirical.probes import RaptorProbe, fit_layers, stability
from empirical.probes._raptor import OPTION_CONFLICTS, PATH_TOL


def _data(n=100, p=6, seed=0, shift=1.0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = rng.standard_normal((n, p))
    X[:, 0] += shift * y
    return X, y


def _engines():
    """The numpy path, and the batched engine on the CPU where torch is installed."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        return [None]
    return [None, "cpu"]


# ------------------------------------------------------------------------------------------------ E33: lists of layers
def test_mixed_widths_fit_alike_on_both_engines():
    """E33: layers of widths 16, 8 and 16 fit on the numpy path and on the engine (each width in its own passes),
    with the same C, accuracies and coefficients, in the order of ``layers``."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    y = np.arange(100) % 2
    H = [rng.standard_normal((100, w)) + y[:, None] for w in (16, 8, 16)]
    numpy_fit = fit_layers(H, y, Cs=[0.01, 0.1, 1.0], progress=False)
    engine_fit = fit_layers(H, y, Cs=[0.01, 0.1, 1.0], progress=False, device="cpu")
    assert list(engine_fit.summary["layer"]) == [0, 1, 2] == list(engine_fit.probes)
    for column in ("C", "val_accuracy", "test_accuracy"):
        np.testing.assert_array_equal(engine_fit.summary[column], numpy_fit.summary[column])
    for layer in (0, 1, 2):
        a, b = numpy_fit.probes[layer], engine_fit.probes[layer]
        assert a.coef_.shape == b.coef_.shape == (H[layer].shape[1],)
        np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-8, atol=1e-10 * np.abs(a.coef_).max())
    # a chosen order of layers keeps its order across the width groups
    chosen = fit_layers(H, y, layers=[2, 1, 0], Cs=[0.1, 1.0], progress=False, device="cpu")
    assert list(chosen.summary["layer"]) == [2, 1, 0] == list(chosen.probes)


@pytest.mark.parametrize("device", _engines())
def test_every_layer_is_checked_against_y_before_any_fit(device):
    """A layer with other rows than ``y`` (and than the other layers) is named with both shapes, on both engines,
    whichever its position (today only the first layer was checked: an IndexError or a fit on the wrong rows)."""
    rng = np.random.default_rng(1)
    y = np.arange(100) % 2
    H = [rng.standard_normal((100, 4)), rng.standard_normal((100, 4)), rng.standard_normal((90, 4))]
    with pytest.raises(ValueError, match=r"got layer 2 of shape \(90, 4\) and layer 0 of \(100, 4\)"):
        fit_layers(H, y, Cs=[1.0], progress=False, device=device)
    H[2] = rng.standard_normal((100, 4, 1))
    with pytest.raises(ValueError, match=r"got layer 2 of shape \(100, 4, 1\)"):
        fit_layers(H, y, Cs=[1.0], progress=False, device=device)


def test_engine_checks_the_probe_parameters_once():
    """The engine's batches call no ``fit``: ``fit_layers(device=...)`` validates the probe's parameters itself."""
    pytest.importorskip("torch")
    X, y = _data()
    with pytest.raises(ValueError, match="tol"):
        fit_layers(np.stack([X]), y, Cs=[1.0], tol=5.0, progress=False, device="cpu")


# ---------------------------------------------------------------------------------------- R01: the estimator contract
class _NoValidationFit:
    def fit(self, X, y):
        self.concept_vector_ = np.ones(X.shape[1]) / np.sqrt(X.shape[1])
        return self

    def get_params(self, deep=True):
        return {}

    def set_params(self, **params):
        return self


@pytest.mark.parametrize("call", ["register_method", "fit_layers", "stability"])
def test_one_contract_check_everywhere(call):
    """R01: an estimator whose fit takes no validation split is refused by all three callers, with one message."""
    from empirical.probes._registry import register_method

    X, y = _data()
    pattern = r"must accept fit\(X, y, X_val, y_val\).*got fit\(X, y\)"
    with pytest.raises(ValueError, match=pattern):
        if call == "register_method":
            register_method("nofit", lambda: _NoValidationFit())
        elif call == "fit_layers":
            fit_layers(np.stack([X]), y, estimator=_NoValidationFit(), progress=False)
        else:
            stability(_NoValidationFit(), X, y, K=2, n_boot=10)
    if call == "stability":  # a class and a factory too
        with pytest.raises(ValueError, match=r"must accept fit\(X, y, X_val, y_val\)"):
            stability(_NoValidationFit, X, y, K=2, n_boot=10)
        with pytest.raises(ValueError, match=r"must accept fit\(X, y, X_val, y_val\)"):
            stability(lambda: _NoValidationFit(), X, y, K=2, n_boot=10)


# ---------------------------------------------------------------------------------- E06: options that change nothing
#: A value other than the default for every RaptorProbe option ("cpu": the engine, where torch is installed).
_ALTERNATIVES = dict(Cs=[0.1, 1.0], val_fraction=0.3, random_state=7, tie_break="first", fold_back="paper_max1",
                     solver="paper", tol=1e-8, max_iter=50, refit=False, device="cpu")


def test_alternatives_cover_every_option():
    assert set(_ALTERNATIVES) == set(RaptorProbe().get_params())


def _conflicting(a, b):
    """Whether the alternatives of ``a`` and ``b`` conflict: random_state conflicts with val_fraction=0 only (its
    alternative here, 0.3, makes a split; val_fraction=0 is tested below)."""
    pairs = {frozenset((x, y)) for x, y, _ in OPTION_CONFLICTS} - {frozenset(("random_state", "val_fraction"))}
    return frozenset((a, b)) in pairs


_PAIRS = list(itertools.combinations(sorted(_ALTERNATIVES), 2))


@pytest.mark.parametrize("pair, given_validation", [(pair, False) for pair in _PAIRS] +
                         [(pair, True) for pair in _PAIRS + [(name, "X_val") for name in sorted(_ALTERNATIVES)]])
def test_every_option_pair(pair, given_validation):
    """E06: every pair of options set together, with and without validation rows given to fit (and every option
    with them): the pairs of OPTION_CONFLICTS are refused with a ValueError naming both, every other pair fits."""
    if "device" in pair:
        pytest.importorskip("torch")
    params = {name: _ALTERNATIVES[name] for name in pair if name != "X_val"}
    X, y = _data(n=60, p=4)
    Xv, yv = _data(n=20, p=4, seed=1)
    fit_args = (X, y, Xv, yv) if given_validation else (X, y)
    probe = RaptorProbe(**params)
    names = [name for name in pair if name in params] + (["X_val"] if given_validation else [])
    conflicts = [c for c in itertools.combinations(names, 2) if _conflicting(*c)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if not conflicts:
            probe.fit(*fit_args)
            assert np.isfinite(probe.coef_).all()
        else:
            with pytest.raises(ValueError, match="cannot be used together") as caught:
                probe.fit(*fit_args)
            message = str(caught.value)
            assert any(f"{a}=" in message and f"{b}=" in message for a, b in conflicts), (conflicts, message)


def test_device_with_the_paper_solver_is_refused_before_any_device_work():
    """E06 itself: a device that does not exist is not silently ignored by solver='paper'."""
    X, y = _data()
    with pytest.raises(ValueError, match=r"solver='paper' and device='cuda:7' cannot be used together"):
        RaptorProbe(device="cuda:7", solver="paper").fit(X, y)


def test_val_fraction_zero_with_a_seed_is_refused():
    X, y = _data()
    with pytest.raises(ValueError, match=r"random_state=3 and val_fraction=0 cannot be used together"):
        RaptorProbe(val_fraction=0, random_state=3).fit(X, y)


def test_fit_layers_names_a_probe_option_it_would_ignore():
    """fit_layers always passes the validation rows: a val_fraction given to it would change nothing."""
    X, y = _data()
    with pytest.raises(ValueError, match=r"val_fraction=0.3 and X_val=given cannot be used together"):
        fit_layers(np.stack([X]), y, val_fraction=0.3, progress=False)


def test_the_paper_solver_honours_max_iter():
    """max_iter was ignored by solver='paper' (lbfgs ran its own 100): it is lbfgs' cap now."""
    X, y = _data(n=200, p=30, shift=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        probe = RaptorProbe(solver="paper", max_iter=2, Cs=[10.0, 100.0]).fit(X, y)
    assert probe.path_n_iter_.max() <= 2 and int(np.max(probe.n_iter_)) <= 2


# --------------------------------------------------------------------------- E15: the engine keeps the numpy path's C
def _e15_data():
    """n < p, 120 rows, 200 features of mixed scales: at tol = 0.1 the numpy path selected C = 65.8 and the engine
    0.0266 (the tight-tol C is 1e-4) before the path's tolerance was capped at PATH_TOL."""
    rng = np.random.default_rng(1)
    y = np.arange(120) % 2
    X = rng.standard_normal((120, 200)) * rng.uniform(0.2, 5, 200)
    X[:, :3] += 1.2 * y[:, None]
    return X, y


@pytest.mark.parametrize("tol", [1e-3, 1e-2, 0.1])
def test_loose_tol_selects_the_same_C_on_both_engines(tol):
    """E15: over the documented tol range the two solvers select the same C, with the same validation accuracy at
    every grid point, and the C of a tight tol (the path stops an uncertified point at min(tol, PATH_TOL))."""
    pytest.importorskip("torch")
    X, y = _e15_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tight = RaptorProbe().fit(X, y)
        a = RaptorProbe(tol=tol).fit(X, y)
        b = RaptorProbe(tol=tol, device="cpu").fit(X, y)
    assert a.C_ == b.C_ == tight.C_
    np.testing.assert_array_equal(a.path_val_accuracy_, b.path_val_accuracy_)
    np.testing.assert_array_equal(a.path_val_accuracy_, tight.path_val_accuracy_)
    assert tol > PATH_TOL


# --------------------------------------------------------------------------------------------- #134: sweep on 60 rows
def test_sweep_on_60_rows_names_the_argument_and_the_rule():
    """#134: the 0.1 fraction of a 60-row pool is 6 rows, 4 per cross-fit fold: the probe's own validation split
    cannot hold both classes.  The error names ``fractions``, ``probe_folds`` and the rows per class needed."""
    from empirical.probes.structure import delta_sweep

    X, y = _data(n=60, p=10)
    Xt, yt = _data(n=40, p=10, seed=2)
    with pytest.raises(ValueError, match=r"^fractions: at fraction 0.1 the subsample has 6 rows \(3, 3 per class\).*"
                                         r"cross-fit fold's 4 training rows \(3 folds, probe_folds\).*"
                                         r"val_fraction=0.2 of 4 rows .*at least 3 per class"):
        delta_sweep(X, y, Xt, yt, seeds=1, progress=False)


def test_raptor_names_val_fraction_on_too_few_rows():
    X, y = _data(n=5, p=3)
    with pytest.raises(ValueError, match=r"^val_fraction=0.2 of 5 rows \(3 and 2 per class\) cannot make a stratified "
                                         r"train/validation split.*n >= 6 here"):
        RaptorProbe(Cs=[1.0]).fit(X, y)
    RaptorProbe(Cs=[1.0]).fit(*_data(n=6, p=3))  # the smallest size the rule names fits


# ------------------------------------------------------------------------------------------- count parameters' bounds
@pytest.mark.parametrize("solver", ["exact", "paper"])
def test_max_iter_has_its_declared_bound_on_every_solver(solver):
    X, y = _data()
    with pytest.raises(ValueError, match="max_iter"):
        RaptorProbe(solver=solver, max_iter=MAX_ITER + 1).fit(X, y)


@pytest.mark.parametrize("name, call", [
    ("K", lambda X, y: stability(RaptorProbe(), X, y, K=MAX_COUNT + 1)),
    ("n_boot", lambda X, y: stability(RaptorProbe(), X, y, K=2, n_boot=MAX_COUNT + 1)),
    ("n_jobs", lambda X, y: fit_layers(np.stack([X]), y, n_jobs=MAX_COUNT + 1, progress=False)),
    ("n_jobs", lambda X, y: stability(RaptorProbe(), X, y, K=2, n_jobs=MAX_COUNT + 1)),
])
def test_count_parameters_are_bounded(name, call):
    X, y = _data()
    with pytest.raises(ValueError, match=name):
        call(X, y)


def test_fit_layers_refuses_what_is_not_a_stack_of_layers_naming_h():
    """Found by the contract's generated lists of layers (tests/test_contract.py, kind "layers"): a mapping, a
    number or a date as H ended in KeyError or "has no len()" instead of an error naming H."""
    from empirical import fit_layers

    y = np.tile([0, 1], 20)
    for H in ({"a": np.ones((40, 3))}, 1 + 2j, np.datetime64("2020-01-01"), object()):
        with pytest.raises(TypeError, match="^H must be an array of shape"):
            fit_layers(H, y, progress=False)


def test_fit_layers_refuses_labels_of_two_types_naming_y():
    from empirical import fit_layers

    H = [np.random.default_rng(0).standard_normal((40, 3)) for _ in range(2)]
    with pytest.raises(ValueError, match="y"):
        fit_layers(H, [0, "a"] * 20, progress=False)


def test_a_c_grid_has_a_declared_bound():
    """Every count or size has a declared bound: a grid of C values is at most MAX_GRID_POINTS fits."""
    from empirical import RaptorProbe
    from empirical.common.arrays import MAX_GRID_POINTS, check_grid

    assert check_grid(np.logspace(-4, 4, MAX_GRID_POINTS)).size == MAX_GRID_POINTS
    X = np.random.default_rng(0).standard_normal((40, 3))
    with pytest.raises(ValueError, match=f"^Cs has {MAX_GRID_POINTS + 1} points, more than the limit"):
        RaptorProbe(Cs=np.logspace(-4, 4, MAX_GRID_POINTS + 1)).fit(X, np.tile([0, 1], 20))


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("given_validation", [False, True])
def test_raptor_fit_validates_its_rows_once(device, given_validation, monkeypatch):
    """Issue 55 §2: ``RaptorProbe.fit`` validates its rows once, at its boundary (``_validate_fit_data``), and
    passes them on as :class:`~empirical.probes._raptor.FitInputs`; no array check runs on a matrix of the data
    after it (the standardization, the orientation and both engines take the checked rows; 4 passes over X
    before).  Counted by wrapping every array check of the floor wherever a project module imported it."""
    import inspect
    import sys

    import empirical.common.arrays as arrays
    from empirical.probes._base import ConceptProbe

    if device is not None:
        pytest.importorskip("torch")
    X, y = _data(n=120, p=7, seed=3)
    p = X.shape[1]
    outside, boundary_calls = [], []
    originals = {name: getattr(arrays, name) for name in ("as_real_array", "check_matrix", "check_magnitude",
                                                          "check_varying")}

    def counted(name, check):
        def wrapper(value, *args, **kwargs):
            if np.ndim(value) == 2 and np.shape(value)[1] == p:
                callers = [frame.function for frame in inspect.stack()[1:]]
                if "_validate_fit_data" not in callers:
                    outside.append(f"{name} from {callers[0]}")
            return check(value, *args, **kwargs)
        return wrapper

    for module in [m for m in list(sys.modules.values()) if (getattr(m, "__name__", "") or "").startswith("empirical")]:
        for name, check in originals.items():
            if getattr(module, name, None) is check:
                monkeypatch.setattr(module, name, counted(name, check))
    boundary = ConceptProbe._validate_fit_data

    def once(self, *args, **kwargs):
        boundary_calls.append(type(self).__name__)
        return boundary(self, *args, **kwargs)

    monkeypatch.setattr(ConceptProbe, "_validate_fit_data", once)
    probe = RaptorProbe(device=device, Cs=np.logspace(-2, 2, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if given_validation:
            probe.fit(X[:90], y[:90], X[90:], y[90:])
        else:
            probe.fit(X, y)
    assert boundary_calls == ["RaptorProbe"] and outside == [], (boundary_calls, outside)
    assert np.isfinite(probe.concept_vector_).all()
