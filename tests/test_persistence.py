"""Save/load of probes and concept vectors (safetensors + JSON)."""
import json

import numpy as np
import pytest

from empirical import RaptorProbe, load_concept_vectors, load_probe, save_concept_vectors, save_probe


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
    with pytest.raises(ValueError, match="missing file"):
        load_probe(tmp_path / "nothing")


def test_concept_vectors_round_trip_and_kind_check(tmp_path, probe):
    V = np.random.default_rng(0).standard_normal((3, 4))
    save_concept_vectors(tmp_path / "cv", V, layers=[2, 4, 6])
    W, meta = load_concept_vectors(tmp_path / "cv")
    np.testing.assert_array_equal(W, V)
    assert meta["layers"] == [2, 4, 6]
    with pytest.raises(ValueError, match="format/kind"):
        load_probe(tmp_path / "cv")
    with pytest.raises(ValueError, match="layer indices"):
        save_concept_vectors(tmp_path / "x", V, layers=[1])
