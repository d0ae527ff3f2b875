"""Save/load of probes and concept vectors (safetensors + JSON), old files, damaged and altered files."""
import json
from pathlib import Path

import numpy as np
import pytest

from empirical import (
    ConceptVectors,
    LinearProbe,
    RaptorProbe,
    load_concept_vectors,
    load_probe,
    save_concept_vectors,
    save_probe,
)

DATA = Path(__file__).parent / "data"


@pytest.fixture
def probe():
    rng = np.random.default_rng(0)
    y = np.array(["a", "b"])[rng.integers(0, 2, 80)]
    X = rng.standard_normal((80, 6)) * 3 + 1
    X[:, 0] += (y == "b") * 2.0
    return RaptorProbe(Cs=np.logspace(-2, 1, 7)).fit(X, y), X


def test_round_trip(tmp_path, probe):
    p, X = probe
    st, js = save_probe(tmp_path / "probe", p, layer=5)
    q = load_probe(tmp_path / "probe")
    np.testing.assert_array_equal(q.coef_, p.coef_)
    np.testing.assert_array_equal(q.concept_vector_, p.concept_vector_)
    np.testing.assert_array_equal(q.path_val_accuracy_, p.path_val_accuracy_)
    np.testing.assert_array_equal(q.predict(X), p.predict(X))
    np.testing.assert_array_equal(q.decision_function(X), p.decision_function(X))
    assert q.C_ == p.C_ and q.intercept_ == p.intercept_ and q.layer_ == 5
    meta = json.loads(open(js).read())
    assert meta["seed"] == 42 and meta["layer"] == 5 and "numpy" in meta["versions"] and meta["classes"] == ["a", "b"]
    assert meta["format_version"] == 2


def test_corrupt_and_mismatched_files(tmp_path, probe):
    p, _ = probe
    st, js = save_probe(tmp_path / "p1", p)
    save_probe(tmp_path / "p2", RaptorProbe(Cs=[0.1, 1.0]).fit(np.random.default_rng(1).standard_normal((30, 6)),
                                                                np.arange(30) % 2))
    # swap array files between two saves -> checksum mismatch
    (tmp_path / "p1.safetensors").write_bytes((tmp_path / "p2.safetensors").read_bytes())
    with pytest.raises(ValueError, match="checksum"):
        load_probe(tmp_path / "p1")
    (tmp_path / "p2.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupt metadata"):
        load_probe(tmp_path / "p2")
    with pytest.raises(FileNotFoundError, match="missing file"):
        load_probe(tmp_path / "nothing")


@pytest.mark.parametrize("field, value", [("classes", ["b", "a"]), ("intercept", 3.0), ("C", -1.0)])
def test_edited_metadata_is_detected(tmp_path, probe, field, value):
    p, _ = probe
    _, js = save_probe(tmp_path / "p", p)
    meta = json.loads(Path(js).read_text())
    meta[field] = value
    Path(js).write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="altered"):
        load_probe(tmp_path / "p")


def test_version1_files_still_load():
    """Files written by the format-1 persistence (before concept vectors became one object)."""
    table = np.loadtxt(DATA / "v1_probe_decision.txt")
    X, expected = table[:, :-1], table[:, -1]
    q = load_probe(DATA / "v1_probe")
    assert q.layer_ == 5 and list(q.classes_) == ["a", "b"]
    np.testing.assert_allclose(q.decision_function(X), expected, rtol=1e-13, atol=1e-13)
    cv = load_concept_vectors(DATA / "v1_concept_vectors")
    V = np.loadtxt(DATA / "v1_concept_vectors.txt")
    assert cv.layers == [2, 4, 6] and cv[2].coef is None
    for k, layer in enumerate(cv.layers):
        np.testing.assert_allclose(cv.directions[layer], V[k] / np.linalg.norm(V[k]), rtol=1e-14)


def test_concept_vectors_round_trip(tmp_path, probe):
    p, X = probe
    rng = np.random.default_rng(3)
    cv = ConceptVectors({4: LinearProbe.from_estimator(p, test_accuracy=0.8),
                         9: LinearProbe(rng.standard_normal(6), 0.25, C=2.0)},
                        method="raptor", model="tiny-llama", metadata={"dataset": "reviews"})
    save_concept_vectors(tmp_path / "cv", cv)
    back = load_concept_vectors(tmp_path / "cv.json")
    assert back.layers == [4, 9] and back.model == "tiny-llama" and back.metadata == {"dataset": "reviews"}
    for layer in cv:
        for name in ("coef", "direction", "scaler_mean", "scaler_scale"):
            a, b = getattr(cv[layer], name), getattr(back[layer], name)
            assert (a is None and b is None) or np.array_equal(a, b)
        assert (back[layer].intercept, back[layer].test_accuracy, back[layer].C) == \
               (cv[layer].intercept, cv[layer].test_accuracy, cv[layer].C)
    # the saved probe reproduces the estimator's logits in raw space
    np.testing.assert_allclose(back[4].logit(X), p.decision_function(X), rtol=1e-12, atol=1e-12)
    assert back[9].scaler_mean is None and back[9].test_accuracy is None


def test_concept_vectors_kind_and_argument_checks(tmp_path):
    V = np.random.default_rng(0).standard_normal((3, 4))
    save_concept_vectors(tmp_path / "cv", V, layers=[2, 4, 6])
    cv = load_concept_vectors(tmp_path / "cv")
    assert cv.layers == [2, 4, 6] and cv[2].coef is None
    with pytest.raises(ValueError, match="format/kind"):
        load_probe(tmp_path / "cv")
    with pytest.raises(ValueError, match="one index per vector"):
        save_concept_vectors(tmp_path / "x", V, layers=[1])
    with pytest.raises(ValueError, match="only for a bare array"):
        save_concept_vectors(tmp_path / "x", cv, layers=[1, 2, 3])
    with pytest.raises(ValueError, match="slope needs the probe's coef"):
        cv[2].slope


def test_linear_probe_and_concept_vectors_validate():
    with pytest.raises(ValueError, match="coef is all zeros"):
        LinearProbe(np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="intercept must be finite"):
        LinearProbe(np.ones(3), np.nan)
    with pytest.raises(ValueError, match="test_accuracy must lie"):
        LinearProbe(np.ones(3), 0.0, test_accuracy=1.5)
    with pytest.raises(ValueError, match="same dimension"):
        ConceptVectors({1: LinearProbe(np.ones(3), 0.0), 2: LinearProbe(np.ones(4), 0.0)})
    with pytest.raises(ValueError, match="non-empty mapping"):
        ConceptVectors({})
