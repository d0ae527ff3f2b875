"""Every public entry point that takes a seed (``seed``, ``rng``, ``random_state``, ``split_seed``) refuses one that
is not a seed with a ``ValueError`` / ``TypeError`` naming that argument: the project's seed checks
(:func:`empirical.common.checks.check_seed`, :func:`~empirical.common.checks.as_seed_sequence`,
:func:`~empirical.common.checks.as_generator`, :func:`~empirical.common.checks.check_random_state`, one rule), not
numpy's ``SeedSequence expects int or sequence of ints for entropy not abc`` (``sims.compare(seed='abc')``) or a
seed silently read as another (``True`` as 1, ``2.5`` as 2).

The entry points are enumerated from the public API (``_public_api.public_objects``): a function added later with a
seed parameter fails :func:`test_every_seed_parameter_is_driven_here` until its call is added to ``CALLS``.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import math
import re

import numpy as np
import pytest
from _public_api import public_objects

#: the parameters that take a seed, a SeedSequence or a Generator
SEED_NAMES = ("seed", "rng", "random_state", "split_seed")
#: values that are not seeds (each entry point is called with every one)
NOT_SEEDS = {"text": "abc", "digits": "3", "negative": -1, "float": 2.5, "bool": True, "nan": math.nan,
             "complex": 1 + 2j, "object": object()}
#: seed parameters that take no seed: ``{key: reason}``
NOT_A_SEED = {"empirical.probes._stability:StabilityResult.__init__":
              "a result record: it stores the seed the protocol ran with"}


@functools.cache
def _data():
    """A pool of 300 rows in 20 dimensions (0/1 labels), its signed labels, a small (60, 4) set."""
    from empirical.testing import synthetic_hidden_states

    H, y, _, _ = synthetic_hidden_states(300, 0, 20, shift=1.0, seed=0)
    X = np.random.default_rng(1).standard_normal((60, 4)) + np.tile([[-1.0], [1.0]], (30, 4))
    return H, y.astype(int), np.where(y > 0, 1.0, -1.0), X, np.tile([0, 1], 30)


@functools.cache
def _pool_model():
    from empirical.probes._spectral_prediction import estimate_pool_model

    H, y, *_ = _data()
    return estimate_pool_model(H, y, n_boot=0)


def _spectrum():
    import cgmt

    return cgmt.Spectrum.power_law(20, exponent=1.0, kappa=1.0)


def _call(module, qualname, *args, **kwargs):
    """``module.qualname(*args, **kwargs)``; ``Class.__init__``: construct with ``kwargs``, fit on ``args`` if any."""
    import importlib

    obj = importlib.import_module(module)
    if qualname.endswith(".__init__"):
        cls = getattr(obj, qualname.rsplit(".", 1)[0])
        instance = cls(**kwargs)
        return instance.fit(*args) if args else instance
    return getattr(obj, qualname)(*args, **kwargs)


def _calls(tmp_path):
    """``{"module:qualname": call(value)}``: a valid call of each entry point with its seed replaced by ``value``."""
    H, y, ys, X, y2 = _data()
    H2 = np.stack([H, H])
    L = lambda m, q, *a, **k: (lambda v, name: _call(m, q, *a, **{**k, name: v}))  # noqa: E731
    pool = np.arange(0, 300, 3)
    test = np.arange(1, 300, 3)
    return {
        "cgmt.ablation:ablation_split": L("cgmt.ablation", "ablation_split", y),
        "empirical.common.checks:as_generator": L("empirical.common.checks", "as_generator"),
        "empirical.common.checks:as_seed_sequence": L("empirical.common.checks", "as_seed_sequence"),
        "empirical.common.checks:check_seed": L("empirical.common.checks", "check_seed"),
        "empirical.common.checks:check_random_state": L("empirical.common.checks", "check_random_state"),
        # the seed is checked before the model, tokenizer or dataset is touched (no model is loaded here)
        "empirical.llm._steering_null:null_units": L("empirical.llm._steering_null", "null_units", [1, 2], 4,
                                                    n_random=4, half="selection"),
        "empirical.llm._steering_null:matched_units": L("empirical.llm._steering_null", "matched_units",
                                                       {1: np.eye(4)}, n_random=4, half="selection"),
        "empirical.llm._steering_null:random_units": L("empirical.llm._steering_null", "random_units", [1, 2], 4,
                                                      n_random=3),
        "empirical.llm._steering_protocol:SteeringProtocol.__init__":
            L("empirical.llm._steering_protocol", "SteeringProtocol.__init__"),
        # the seed of the split is checked when the run is built, before any model or dataset is touched
        "empirical.llm._steering_protocol:SteeringRun.__init__":
            L("empirical.llm._steering_protocol", "SteeringRun.__init__"),
        "empirical.numerics:stratified_split": L("empirical.numerics", "stratified_split", y, 0.2),
        "empirical.probes._baselines:GCSProbe.__init__": L("empirical.probes._baselines", "GCSProbe.__init__", X, y2),
        "empirical.probes._baselines:LogRegCVProbe.__init__": L("empirical.probes._baselines",
                                                               "LogRegCVProbe.__init__", X, y2),
        "empirical.probes._raptor:RaptorProbe.__init__": L("empirical.probes._raptor", "RaptorProbe.__init__", X, y2),
        "empirical.probes._layers:fit_layers": L("empirical.probes._layers", "fit_layers", H2, y, progress=False),
        "empirical.probes._layers:grouped_split": L("empirical.probes._layers", "grouped_split", y,
                                                   np.arange(300) // 2),
        "empirical.probes._layers:paper_split": L("empirical.probes._layers", "paper_split", y),
        "empirical.probes.learning_curves:backtest_error": lambda v, name: _call(
            "empirical.probes.learning_curves", "backtest_error", _pool_model(), H, y, **{name: v}),
        "empirical.probes.learning_curves:pool_backtest_errors": lambda v, name: _call(
            "empirical.probes.learning_curves", "pool_backtest_errors", {_pool_model().teacher: _pool_model()}, H,
            y, **{name: v}),
        "empirical.probes.learning_curves:isotropic_curve": L("empirical.probes.learning_curves", "isotropic_curve",
                                                              H, y, [600.0]),
        "empirical.probes.learning_curves:no_gain_curve": L("empirical.probes.learning_curves", "no_gain_curve", H,
                                                            y, [600.0]),
        "empirical.probes.learning_curves:pool_curves": L("empirical.probes.learning_curves", "pool_curves", H, y,
                                                          [600.0]),
        "empirical.probes.learning_curves:power_law_curve": L("empirical.probes.learning_curves", "power_law_curve",
                                                              H, y, [600.0]),
        "empirical.probes.learning_curves:predict_learning_curve": lambda v, name: _call(
            "empirical.probes.learning_curves", "predict_learning_curve", _pool_model(), [600.0], **{name: v}),
        "empirical.probes._label_forecast:forecast_curve": lambda v, name: _call(
            "empirical.probes.planning", "forecast_curve", H, y, [600.0], _pool_model(), repeats=1, **{name: v}),
        "empirical.probes.planning:label_pool": L("empirical.probes.planning", "label_pool", y, 100),
        "empirical.probes.planning:plan_labels": L("empirical.probes.planning", "plan_labels", H2, y, pool, 600),
        "empirical.probes.real_embedding:cross_validated_path": L("empirical.probes.real_embedding",
                                                                  "cross_validated_path", H, ys, [1.0]),
        "empirical.probes.real_embedding:estimate_kappa": L("empirical.probes.real_embedding", "estimate_kappa", H,
                                                            ys, 1.0),
        "empirical.probes.real_embedding:real_embedding_stability": L(
            "empirical.probes.real_embedding", "real_embedding_stability", [H], y, [0.5], 1.0, progress=False),
        "empirical.probes._separability:perceptron": L("empirical.probes._separability", "perceptron", X,
                                                      np.where(y2 > 0, 1.0, -1.0)),
        "empirical.probes._separability:separability": L("empirical.probes._separability", "separability", X, y2),
        "empirical.probes._separability:shuffled_label_control": L("empirical.probes._separability",
                                                                  "shuffled_label_control", X, y2),
        "empirical.probes.spectral_evaluation:evaluate_split": L("empirical.probes.spectral_evaluation",
                                                                 "evaluate_split", H, y),
        "empirical.probes.spectral_evaluation:pool_cv_prediction": L(
            "empirical.probes.spectral_evaluation", "pool_cv_prediction", H, ys, 200, [1.0], [0.5], 1.0),
        "empirical.probes.spectral_evaluation:semi_synthetic_path": lambda v, name: _call(
            "empirical.probes.spectral_evaluation", "semi_synthetic_path", H, _pool_model(), 200, [1.0],
            **{name: v}),
        "empirical.probes._spectral_prediction:estimate_pool_model": L("empirical.probes._spectral_prediction",
                                                                      "estimate_pool_model", H, y, n_boot=0),
        "empirical.probes._spectral_prediction:estimate_pool_models": L("empirical.probes._spectral_prediction",
                                                                       "estimate_pool_models", H, y, n_boot=0),
        "empirical.probes._stability:stability": lambda v, name: _call(
            "empirical.probes._stability", "stability", _call("empirical.probes._raptor", "RaptorProbe.__init__"),
            X, y2, K=2, progress=False, **{name: v}),
        "empirical.probes.structure:cross_fit_oracle": lambda v, name: _call(
            "empirical.probes.structure", "cross_fit_oracle", X, y2, X, _logistic(), **{name: v}),
        "empirical.probes.structure:delta_sweep": L("empirical.probes.structure", "delta_sweep", H[:200], y[:200],
                                                    H[200:], y[200:], progress=False),
        "empirical.probes.structure:fixed_C": L("empirical.probes.structure", "fixed_C", X, y2),
        "empirical.probes.structure:stratified_subsample": L("empirical.probes.structure", "stratified_subsample",
                                                             y, 10),
        "paper_figures.learning_curves:fixed_test_rows": L("paper_figures.learning_curves", "fixed_test_rows", y,
                                                           n_test=100),
        "paper_figures.learning_curves:separability_rows": L("paper_figures.learning_curves", "separability_rows",
                                                             "toy", H2, y, test, [1]),
        "paper_figures.learning_curves:truth_accuracies": L("paper_figures.learning_curves", "truth_accuracies",
                                                            H, y, pool, test),
        "paper_figures.predictor_claims:bootstrap_median": L("paper_figures.predictor_claims", "bootstrap_median",
                                                             [1.0, 2.0, 3.0]),
        "paper_figures.separability_tables:control_row": L("paper_figures.separability_tables", "control_row",
                                                           "toy", 1, X, y2, "shuffled", "all"),
        "paper_figures.separability_tables:separability_control_table": L(
            "paper_figures.separability_tables", "separability_control_table", "toy", H2, y,
            (pool, np.arange(2, 300, 3), test), [1], progress=False),
        "paper_figures.stability:make_stability_figures": L("paper_figures.stability", "make_stability_figures",
                                                            tmp_path, settings=[(2.0, 1.0)], lams=[0.1], p=40,
                                                            replicates=2, runs=2, progress=False),
        "paper_figures.stability:simulate_stability": L("paper_figures.stability", "simulate_stability", 2.0, 1.0,
                                                        [0.1], 40, 2, progress=False),
        "sims:finite_size_study": L("sims", "finite_size_study", [(2.0, 0.1, 1.0)], [40, 80], 2, progress=False),
        "sims._compare:compare": L("sims._compare", "compare", 2.0, 0.1, 1.0, 40, 2, progress=False),
        "sims._compare:compare_grid": L("sims._compare", "compare_grid", [2.0], [0.1], [1.0], 40, 2,
                                        progress=False),
        "sims._data:replicate_seeds": lambda v, name: _call("sims._data", "replicate_seeds", v, 2),
        "sims._data:sample": L("sims._data", "sample", 20, 10, 1.0),
        "sims._finite_size:simulate_raw": L("sims._finite_size", "simulate_raw", [(2.0, 0.1, 1.0)], [40], 2,
                                            progress=False),
        "sims._max_margin:measure_max_margin": lambda v, name: _call("sims._max_margin", "measure_max_margin", 0.5,
                                                                     1.0, 40, v),
        "sims._measure:measure_replicate": lambda v, name: _call("sims._measure", "measure_replicate", 2.0, 0.1,
                                                                 1.0, 40, v),
        "sims._measure:simulate_stability_replicate": lambda v, name: _call(
            "sims._measure", "simulate_stability_replicate", 2.0, 0.1, 1.0, 40, v),
        "sims._spectral:compare_spectral": lambda v, name: _call("sims._spectral", "compare_spectral", 2.0, 0.1,
                                                                 _spectrum(), 2, v, progress=False),
        "sims._spectral:measure_spectral_replicate": lambda v, name: _call(
            "sims._spectral", "measure_spectral_replicate", 2.0, 0.1, _spectrum(), v),
        "sims._spectral:sample_spectral": lambda v, name: _call("sims._spectral", "sample_spectral", 20,
                                                                _spectrum(), v),
    }


def _logistic():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression()


def _seed_entry_points():
    """``{"module:qualname": seed parameter}`` of every public function or method that takes a seed."""
    found = {}
    for (module, qualname), obj in public_objects().items():
        members = [(qualname, obj)] if not inspect.isclass(obj) else \
            [(f"{qualname}.{m}", f) for m, f in vars(obj).items()
             if inspect.isfunction(f) and (m == "__init__" or not m.startswith("_"))]
        for name, member in members:
            try:
                parameters = inspect.signature(member).parameters
            except (TypeError, ValueError):
                continue
            for parameter in SEED_NAMES:
                if parameter in parameters:
                    found[f"{module}:{name}"] = parameter
    return found


def _names(name, message):
    """Whether ``message`` says what is wrong with argument ``name`` (``seed must ...``, ``seed[1] must ...``, ``seed
    (--seed) must ...``, scikit-learn's ``The 'random_state' parameter of ... must ...``), not just the word: "an
    integer seed" in the message of a check that names another argument is not naming ``seed``."""
    return bool(re.search(rf"(?<![\w'-]){re.escape(name)}(\[\d+\])?( \(--[\w-]+\))? must\b", message)) \
        or f"The '{name}' parameter of" in message


ENTRY_POINTS = _seed_entry_points()
DRIVEN = sorted(set(ENTRY_POINTS) - set(NOT_A_SEED))


def _importable(key):
    """Whether the module of ``key`` ("module:qualname") imports here (the floors environment runs without the
    [llm] extra, and the public-surface walk skips the modules that need it)."""
    try:
        importlib.import_module(key.split(":")[0])
    except ModuleNotFoundError:
        return False
    return True


def test_every_seed_parameter_is_driven_here(tmp_path):
    listed = {key for key in set(_calls(tmp_path)) | set(NOT_A_SEED) if _importable(key)}
    assert sorted(listed) == sorted(ENTRY_POINTS), \
        "add the new entry point's call to _calls (or its reason to NOT_A_SEED)"


@pytest.mark.parametrize("key", DRIVEN)
def test_a_value_that_is_not_a_seed_is_refused_naming_the_argument(key, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call, name = _calls(tmp_path)[key], ENTRY_POINTS[key]
    failures = []
    for label, value in NOT_SEEDS.items():
        try:
            call(value, name)
        except (ValueError, TypeError) as exc:
            if not _names(name, str(exc)):
                failures.append(f"{name}={label}: {type(exc).__name__} not naming it: {exc}"[:300])
            continue
        except Exception as exc:  # noqa: BLE001 - any other type is the finding
            failures.append(f"{name}={label}: {type(exc).__name__}: {exc}"[:300])
            continue
        failures.append(f"{name}={label}: accepted")
    assert not failures, "\n".join(failures)


def test_the_seed_checks():
    from empirical.common.checks import as_generator, as_seed_sequence, check_seed

    assert check_seed(np.uint32(5)) == 5 and check_seed(2 ** 40) == 2 ** 40
    assert as_seed_sequence(7).entropy == 7 and as_seed_sequence([7, 1]).entropy == [7, 1]
    root = np.random.SeedSequence(3)
    assert as_seed_sequence(root) is root
    assert as_generator(7).integers(1000) == np.random.default_rng(7).integers(1000)
    for value, message in [("abc", "seed must be an integer seed >= 0, a list of them or a numpy SeedSequence, got "
                                   "'abc' (str)"),
                           (True, "seed must be an integer seed >= 0, a list of them or a numpy SeedSequence, got "
                                  "True (bool)"),
                           (-1, "seed must be a non-negative integer seed, got -1"),
                           ([1, "a"], r"seed\[1\] must be an integer seed >= 0, got 'a' \(str\)")]:
        with pytest.raises(ValueError, match=f"^{message}$" if "[" in message else None) as err:
            as_seed_sequence(value)
        assert "[" in message or str(err.value) == message
    with pytest.raises(ValueError, match=r"^seed must be an integer seed in \[0, 10\], got 11$"):
        check_seed(11, maximum=10)
