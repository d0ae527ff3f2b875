"""Bad inputs and damaged files for ``empirical.probes`` (and the logistic kernel): each gives a clear
error naming the argument or file, or a correct result; a damaged saved probe is never loaded."""
from __future__ import annotations

import hashlib
import json
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from empirical.logistic import fit_l2_logistic
from empirical.probes._baselines import DiffMeans, GCSProbe, LogRegCVProbe
from empirical.probes._concept_vectors import ConceptVectors, LinearProbe
from empirical.probes._layers import fit_layers
from empirical.probes._persistence import load_concept_vectors, load_probe, save_concept_vectors, save_probe
from empirical.probes._raptor import RaptorProbe
from empirical.probes._separability import separability
from empirical.probes._stability import mean_abs_pairwise_cosine, stability

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 5))
Y = np.arange(60) % 2
X[:, 0] += 1.5 * Y
CONSTANT = np.ones((60, 5))


def _fit(estimator, X_=X, y_=Y):
    return lambda: estimator.fit(X_, y_)


BAD_INPUTS = {
    # degenerate data: no direction exists (was a zero "unit" vector or NaN vectors)
    "raptor constant X": (_fit(RaptorProbe(Cs=[1.0]), CONSTANT), r"X must have at least one non-constant feature"),
    "diffmeans constant X": (_fit(DiffMeans(), CONSTANT), r"X must have at least one non-constant feature"),
    "lrcv constant X": (_fit(LogRegCVProbe(Cs=[1.0]), CONSTANT), r"X must have at least one non-constant"),
    "gcs constant X": (_fit(GCSProbe(n_probes=3), CONSTANT), r"X must have at least one non-constant"),
    # magnitudes where float64 products overflow / underflow (were zero or NaN vectors)
    "raptor X*1e200": (_fit(RaptorProbe(Cs=[1.0]), X * 1e200), r"X must have entries of magnitude at most"),
    "diffmeans X*1e-200": (_fit(DiffMeans(), X * 1e-200), r"X must have a largest entry of magnitude"),
    "separability X*1e200": (lambda: separability(X * 1e200, Y), r"X must have entries of magnitude"),
    "stability X*1e200": (lambda: stability(DiffMeans(), X * 1e200, Y, K=2), r"X_pool must have entries"),
    "raptor X_val*1e200": (lambda: RaptorProbe(Cs=[1.0]).fit(X[:40], Y[:40], X[40:] * 1e200, Y[40:]),
                           r"X_val must have entries"),
    # estimator parameters
    "lrcv C negative": (_fit(LogRegCVProbe(Cs=[-1.0])), r"Cs must contain only finite positive"),
    "lrcv C zero": (_fit(LogRegCVProbe(Cs=[0.0])), r"Cs must contain only finite positive"),
    "lrcv C nan": (_fit(LogRegCVProbe(Cs=[np.nan])), r"Cs must contain only finite positive"),
    "lrcv Cs empty": (_fit(LogRegCVProbe(Cs=[])), r"Cs must be a non-empty"),
    "lrcv Cs text": (_fit(LogRegCVProbe(Cs="many")), r"Cs must be a non-empty|'Cs' parameter"),
    "raptor Cs 2-D": (_fit(RaptorProbe(Cs=[[1.0, 2.0]])), r"Cs must be a non-empty 1-D grid"),
    "gcs C nan": (_fit(GCSProbe(C=np.nan)), r"'C' parameter"),
    "gcs C negative": (_fit(GCSProbe(C=-1.0)), r"'C' parameter"),
    "gcs n_samples too large": (_fit(GCSProbe(n_samples=10_000)), r"n_samples must be in"),
    "raptor val_fraction 1": (_fit(RaptorProbe(val_fraction=1.0)), r"'val_fraction' parameter"),
    "raptor tol nan": (_fit(RaptorProbe(tol=np.nan)), r"'tol' parameter"),
    # data
    "raptor X NaN": (_fit(RaptorProbe(), np.where(X > 2, np.nan, X)), r"NaN"),
    "raptor 3 classes": (_fit(RaptorProbe(), X, np.arange(60) % 3), r"binary|two classes"),
    "raptor y length": (_fit(RaptorProbe(), X, Y[:-1]), r"inconsistent|mismatch"),
    "raptor X_val features": (lambda: RaptorProbe().fit(X[:40], Y[:40], X[40:, :3], Y[40:]),
                              r"X_val must have the 5 features"),
    "raptor y_val unseen class": (lambda: RaptorProbe().fit(X[:40], Y[:40], X[40:], Y[40:] + 5),
                                  r"y_val must only contain the training classes"),
    "raptor X_val alone": (lambda: RaptorProbe().fit(X[:40], Y[:40], X[40:]),
                           r"X_val and y_val must be given together"),
    "fit_l2_logistic C": (lambda: fit_l2_logistic(X, np.where(Y > 0, 1.0, -1.0), -2.0), r"C"),
    # stability protocol: validated before any fit
    "stability n_boot 0": (lambda: stability(DiffMeans(), X, Y, K=2, n_boot=0),
                           r"n_boot must be an integer >= 1"),
    "stability n_boot 1e12": (lambda: stability(DiffMeans(), X, Y, K=2, n_boot=10**12),
                              r"n_boot must be an integer <= 1000000"),
    "stability level 1.5": (lambda: stability(DiffMeans(), X, Y, K=2, level=1.5), r"level must lie in"),
    "stability K 1": (lambda: stability(DiffMeans(), X, Y, K=1), r"K must be an integer >= 2"),
    "stability K text": (lambda: stability(DiffMeans(), X, Y, K="many"), r"K must be an integer >= 2"),
    "stability drop 1.5": (lambda: stability(DiffMeans(), X, Y, K=2, drop=1.5), r"drop must lie in"),
    "stability estimator": (lambda: stability(42, X, Y, K=2), r"estimator must be an estimator"),
    "cosines NaN": (lambda: mean_abs_pairwise_cosine([[1.0, np.nan], [0.0, 1.0]]), r"V must be finite"),
    "cosines zero row": (lambda: mean_abs_pairwise_cosine([[1.0, 0.0], [0.0, 0.0]]), r"zero vector"),
    # per-layer fitting
    "fit_layers 2-D H": (lambda: fit_layers(X, Y), r"H must have shape \(L, n, p\)"),
    "fit_layers layer out of range": (lambda: fit_layers(np.stack([X, X]), Y, layers=[5]), r"layer"),
    # persistence of other estimators
    "save_probe DoM": (lambda: save_probe("/tmp/never", DiffMeans().fit(X, Y)),
                       r"save_probe saves a fitted RaptorProbe, got DiffMeans"),
    "save_probe unfitted": (lambda: save_probe("/tmp/never", RaptorProbe()), r"not fitted"),
    "LinearProbe NaN coef": (lambda: LinearProbe([np.nan, 1.0], 0.0), r"coef must be a non-empty finite"),
    "LinearProbe accuracy 2": (lambda: LinearProbe([1.0, 1.0], 0.0, test_accuracy=2.0), r"test_accuracy must lie"),
    "LinearProbe huge coef": (lambda: LinearProbe([1e300, 1e300], 0.0), r"coef must have entries of magnitude at most"),
    "ConceptVectors layer text": (lambda: ConceptVectors({"abc": LinearProbe([1.0], 0.0)}), r"layer indices must be"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_a_clear_error(case):
    call, message = BAD_INPUTS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=message):
            call()


def test_stability_validates_before_fitting():
    fits = []

    def factory():
        fits.append(1)
        return DiffMeans()

    for bad in (dict(level=1.5), dict(n_boot=0), dict(drop=-0.1), dict(val_fraction=1.0)):
        with pytest.raises(ValueError):
            stability(factory, X, Y, K=3, **bad)
    assert fits == []


def test_a_concept_vector_is_always_finite_and_unit():
    """Where a fit returns, its concept vector is a finite unit vector (also at extreme but valid scales)."""
    for scale in (1e-90, 1.0, 1e90):
        for estimator in (RaptorProbe(Cs=[0.1, 1.0]), DiffMeans(), LogRegCVProbe(Cs=[0.1, 1.0]),
                          GCSProbe(n_probes=3)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                v = estimator.fit(X * scale, Y).concept_vector_
            assert np.all(np.isfinite(v)) and abs(np.linalg.norm(v) - 1.0) < 1e-12, (type(estimator).__name__, scale)


def test_raptor_is_scale_equivariant_at_extreme_valid_scales():
    """Standardization makes RAPTOR scale-free: the same predictions and direction at 1e-90 and 1e90."""
    base = RaptorProbe(Cs=[0.1, 1.0]).fit(X, Y)
    for scale in (1e-90, 1e90):
        scaled = RaptorProbe(Cs=[0.1, 1.0]).fit(X * scale, Y)
        assert np.array_equal(scaled.predict(X * scale), base.predict(X))
        np.testing.assert_allclose(scaled.concept_vector_, base.concept_vector_, atol=1e-9)


def test_separability_answer_does_not_depend_on_scale():
    base = separability(X, Y)
    for scale in (1e-90, 1e90):
        assert separability(X * scale, Y).separable == base.separable


# ---------------------------------------------------------------------------------------- saved probes
def _saved(tmp_path):
    probe = RaptorProbe(Cs=[0.1, 1.0]).fit(X, Y)
    st_path, js_path = save_probe(tmp_path / "probe", probe, layer=3)
    return probe, st_path, js_path


def _rewrite(js_path, edit):
    """Edit the metadata and recompute its checksum, as a careless tool would: field validation must still catch it."""
    meta = json.loads(open(js_path).read())
    edit(meta)
    body = {k: v for k, v in meta.items() if k != "metadata_sha256"}
    meta["metadata_sha256"] = hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=False).encode()).hexdigest()
    open(js_path, "w").write(json.dumps(meta))


FIELD_EDITS = {
    "classes swapped": (lambda m: m.update(classes=m["classes"][::-1]), "classes"),
    "three classes": (lambda m: m.update(classes=[0, 1, 2]), "classes"),
    "intercept +3": (lambda m: m.update(intercept=m["intercept"] + 3.0), "intercept"),
    "intercept text": (lambda m: m.update(intercept="NaN"), "intercept"),
    "intercept missing": (lambda m: m.pop("intercept"), "'intercept' is missing"),
    "C negative": (lambda m: m.update(C=-1.0), "'C'"),
    "lambda inconsistent": (lambda m: m.update({"lambda": 5.0}), "'lambda'"),
    "layer text": (lambda m: m.update(layer="abc"), "'layer'"),
    "layer bool": (lambda m: m.update(layer=True), "'layer'"),
    "n_features wrong": (lambda m: m.update(n_features=7), "n_features"),
    "best_val_accuracy 2": (lambda m: m.update(best_val_accuracy=2.0), "best_val_accuracy"),
    "params unknown": (lambda m: m["params"].update(colour="red"), "params"),
    "params invalid": (lambda m: m["params"].update(tol=-1.0), "params"),
    "fallback text": (lambda m: m.update(fallback="no"), "fallback"),
    "arrays list": (lambda m: m.update(arrays=["coef_"]), "arrays"),
}


@pytest.mark.parametrize("case", sorted(FIELD_EDITS))
def test_edited_probe_metadata_is_rejected_even_with_a_fresh_checksum(tmp_path, case):
    _, _, js_path = _saved(tmp_path)
    edit, field = FIELD_EDITS[case]
    _rewrite(js_path, edit)
    with pytest.raises(ValueError, match=field) as info:
        load_probe(tmp_path / "probe")
    assert "probe" in str(info.value)  # names the file


def test_edited_probe_metadata_is_rejected_by_the_checksum(tmp_path):
    _, _, js_path = _saved(tmp_path)
    meta = json.loads(open(js_path).read())
    meta["classes"] = meta["classes"][::-1]
    open(js_path, "w").write(json.dumps(meta))
    with pytest.raises(ValueError, match="altered after it was written"):
        load_probe(tmp_path / "probe")


def test_fallback_probe_round_trips(tmp_path):
    with pytest.warns(UserWarning, match="fallback"):
        probe = RaptorProbe(val_fraction=0).fit(X, Y)
    save_probe(tmp_path / "fallback", probe)
    back = load_probe(tmp_path / "fallback")
    assert back.fallback_ and np.isnan(back.best_val_accuracy_)
    assert np.array_equal(back.predict(X), probe.predict(X))


@pytest.mark.parametrize("name", ["not json", "a list", "another format"])
def test_foreign_files_are_not_loaded(tmp_path, name):
    _, st_path, js_path = _saved(tmp_path)
    content = {"not json": b"\x00\x01garbage", "a list": b"[1, 2]",
               "another format": json.dumps({"format": "other"}).encode()}[name]
    open(js_path, "wb").write(content)
    with pytest.raises(ValueError, match="probe.json"):
        load_probe(tmp_path / "probe")
    with pytest.raises(ValueError, match="probe.json"):
        load_concept_vectors(tmp_path / "probe")


def test_missing_half_of_the_pair_names_the_file(tmp_path):
    _, st_path, _ = _saved(tmp_path)
    import os

    os.remove(st_path)
    with pytest.raises(FileNotFoundError, match="probe.safetensors"):
        load_probe(tmp_path / "probe")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["safetensors", "json"]), position=st.floats(0, 1, exclude_max=True),
       byte=st.integers(0, 255), truncate=st.booleans())
def test_random_damage_to_a_saved_probe_is_always_detected(tmp_path, which, position, byte, truncate):
    """Any change to the bytes of either file raises ValueError, or (JSON whitespace) loads the identical probe."""
    probe = RaptorProbe(Cs=[0.1, 1.0]).fit(X, Y)
    paths = dict(zip(("safetensors", "json"), save_probe(tmp_path / "fuzz", probe, layer=1)))
    path = paths[which]
    original_meta = json.loads(open(paths["json"]).read())
    data = bytearray(open(path, "rb").read())
    i = int(position * len(data))
    if truncate:
        data = data[:i]
    elif data[i] == byte:
        return
    else:
        data[i] = byte
    open(path, "wb").write(bytes(data))
    try:
        back = load_probe(tmp_path / "fuzz")
    except ValueError:
        return
    assert which == "json"
    assert back.metadata_ == original_meta
    assert np.array_equal(back.coef_, probe.coef_) and back.intercept_ == probe.intercept_
    assert back.classes_.tolist() == probe.classes_.tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["safetensors", "json"]), position=st.floats(0, 1, exclude_max=True),
       byte=st.integers(0, 255))
def test_random_damage_to_saved_concept_vectors_is_always_detected(tmp_path, which, position, byte):
    cv = ConceptVectors({2: LinearProbe([1.0, 2.0, 3.0], 0.5, test_accuracy=0.8, C=1.0),
                         5: LinearProbe([0.0, 1.0, -1.0], -0.1, test_accuracy=0.7, C=0.1)}, model="tiny")
    paths = dict(zip(("safetensors", "json"), save_concept_vectors(tmp_path / "cv", cv)))
    data = bytearray(open(paths[which], "rb").read())
    i = int(position * len(data))
    if data[i] == byte:
        return
    data[i] = byte
    open(paths[which], "wb").write(bytes(data))
    try:
        back = load_concept_vectors(tmp_path / "cv")
    except ValueError:
        return
    assert which == "json"  # only a whitespace change survives, and it changes nothing
    assert back.layers == cv.layers and back.model == cv.model
    for layer in cv.layers:
        assert np.array_equal(back[layer].coef, cv[layer].coef) and back[layer].intercept == cv[layer].intercept
        assert back[layer].test_accuracy == cv[layer].test_accuracy
