"""The API takes every input it documents, and refuses the rest by name (issue 52, section 3).

Users pass torch tensors, pandas data frames, object arrays and text besides numpy arrays.  The decision lives in
:func:`empirical.common.arrays.as_real_array` (and the label rule in :func:`check_binary_labels`, the dataset rule in
:class:`ConceptDataset`, the scale floor in :func:`empirical.numerics.standardize_stats`); these are the reported
cases (E18, E19, E25, E38, #18, #67, #68) and one test per tensor dtype.  ``tests/test_contract.py`` generates the
same kinds of values for every public callable.
"""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from empirical.common.arrays import as_real_array, check_binary_labels, check_matrix, check_signed_labels
from empirical.common.checks import check_positive_array, check_real_array
from empirical.numerics import standardize_stats
from empirical.probes import RaptorProbe, separability

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 4))
Y = (X[:, 0] + 0.5 * RNG.standard_normal(60) > 0).astype(int)



def _torch():
    return pytest.importorskip("torch")


def _fit(X_, y_=Y):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow inside the fit is a finding too
        return RaptorProbe(Cs=[1.0]).fit(X_, y_)


REFERENCE = RaptorProbe(Cs=[1.0]).fit(X, Y)


# ------------------------------------------------------------------------------------------------ tensors (E19)
def test_e19_bfloat16_tensor_is_converted_exactly():
    torch = _torch()
    Xb = torch.tensor(X, dtype=torch.bfloat16)
    probe = _fit(Xb)
    expected = _fit(Xb.to(torch.float64).numpy())
    np.testing.assert_array_equal(probe.concept_vector_, expected.concept_vector_)
    assert probe.predict(Xb).shape == (60,)


REAL_DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8"]


@pytest.mark.parametrize("dtype", REAL_DTYPES)
def test_every_real_tensor_dtype_becomes_float64_numpy(dtype):
    torch = _torch()
    t = torch.tensor(np.arange(12).reshape(6, 2)).to(getattr(torch, dtype))
    A = check_matrix(t, "H")
    assert isinstance(A, np.ndarray) and A.dtype == np.float64
    np.testing.assert_array_equal(A, np.arange(12).reshape(6, 2))
    np.testing.assert_array_equal(check_real_array(t, "m"), A)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_a_tensor_with_gradient_fits_like_its_values(dtype):
    torch = _torch()
    t = torch.tensor(X).to(getattr(torch, dtype)).requires_grad_(True)
    probe = _fit(t, torch.tensor(Y))
    expected = _fit(t.detach().to(torch.float64).numpy())
    np.testing.assert_array_equal(probe.concept_vector_, expected.concept_vector_)
    np.testing.assert_array_equal(probe.classes_, [0, 1])


def test_bool_tensor_is_what_a_bool_array_is():
    torch = _torch()
    B = RNG.random((60, 4)) > 0.5
    np.testing.assert_array_equal(check_matrix(torch.tensor(B)), check_matrix(B))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_tensor_is_refused_like_a_complex_array(dtype):
    torch = _torch()
    with pytest.raises(ValueError, match="X must be real, got complex data"):
        _fit(torch.tensor(X).to(getattr(torch, dtype)))
    with pytest.raises(ValueError, match="lams must be real, got complex data"):
        check_positive_array(torch.ones(2, dtype=getattr(torch, dtype)), "lams")


def test_meta_tensor_is_refused_naming_the_argument():
    torch = _torch()
    with pytest.raises(ValueError, match="X_val must hold values, got a torch tensor on the 'meta' device"):
        check_matrix(torch.ones(6, 2, device="meta"), "X_val")
    with pytest.raises(ValueError, match="X must hold values"):
        _fit(torch.tensor(X).to("meta"))


def test_validators_do_not_import_torch():
    code = ("import sys, cgmt, empirical.common.arrays, empirical.common.checks, empirical.numerics\n"
            "from empirical.common.arrays import check_matrix\n"
            "check_matrix([[1.0, 2.0]])\n"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------------ text (E18)
def test_e18_object_array_of_numeric_strings_is_refused():
    H = np.array([["1.5", "2"], ["3", "4"]], dtype=object)
    with pytest.raises(ValueError, match=r"H must hold numbers, got text \(str entries, e.g. '1.5'\)"):
        check_matrix(H, "H")
    with pytest.raises(ValueError, match="X must hold numbers, got text"):
        _fit(X.astype(str).astype(object))


def test_e18_data_frame_of_string_columns_is_refused():
    frame = pd.DataFrame(X.round(3).astype(str), columns=list("abcd"))
    with pytest.raises(ValueError, match="X must hold numbers, got text"):
        _fit(frame)
    with pytest.raises(ValueError, match="X must hold numbers, got text"):
        separability(frame, Y)
    with pytest.raises(ValueError, match="X must hold numbers, got text"):
        _fit(frame.astype("string"))


@pytest.mark.parametrize("text", [np.full((6, 2), "1.5"), np.full((6, 2), b"1.5"), [["1.5", "2"]] * 6,
                                  np.array([[1.0, "2"]] * 6, dtype=object), np.array([[1.0, b"2"]] * 6, dtype=object)],
                         ids=["str", "bytes", "list", "object mix", "object bytes"])
def test_text_in_any_container_is_refused(text):
    with pytest.raises(ValueError, match="H must hold numbers"):
        check_matrix(text, "H")
    with pytest.raises(ValueError, match="kappa must hold numbers, got "):
        check_real_array(text, "kappa")


def test_numeric_data_frame_and_series_are_accepted():
    frame = pd.DataFrame(X, columns=list("abcd"))
    probe = _fit(frame)
    np.testing.assert_array_equal(probe.concept_vector_, REFERENCE.concept_vector_)
    assert list(probe.feature_names_in_) == list("abcd")  # scikit-learn still sees the column names
    np.testing.assert_array_equal(probe.predict(frame), REFERENCE.predict(X))
    _fit(frame, pd.Series(Y))
    assert as_real_array(frame, "X") is frame


def test_object_array_of_numbers_is_accepted():
    np.testing.assert_array_equal(check_matrix(X.astype(object)), X)


# ------------------------------------------------------------------------------------------------ labels (#18)
@pytest.mark.parametrize("labels", [np.where(Y == 1, "yes", "no"), np.where(Y == 1, "yes", "no").astype(object),
                                    Y.astype(bool), Y * 2.5 + 0.5, Y.astype(float), Y - 7, list(Y),
                                    pd.Series(np.where(Y == 1, "yes", "no")), pd.Series(Y.astype(bool))],
                         ids=["str", "object str", "bool", "float", "float 0/1", "negative int", "list", "series str",
                              "series bool"])
def test_two_classes_any_labels(labels):
    probe = _fit(X, labels)
    classes = np.unique(np.asarray(labels))
    np.testing.assert_array_equal(probe.classes_, classes)
    np.testing.assert_array_equal(probe.predict(X) == classes[1], REFERENCE.predict(X) == 1)
    np.testing.assert_array_equal(probe.concept_vector_, REFERENCE.concept_vector_)


@pytest.mark.parametrize("labels", [np.array([0, "a"] * 30, dtype=object), [0, "a"] * 30, [1, "1"] * 30,
                                    pd.Series([0, "a"] * 30), [True, 0] * 30],
                         ids=["object", "list", "1 and '1'", "series", "bool and int"])
def test_18_labels_of_two_types_are_refused_naming_y(labels):
    with pytest.raises(ValueError, match="y must hold labels of one type"):
        _fit(X, labels)
    with pytest.raises(ValueError, match="y_val must hold labels of one type"):
        check_binary_labels(labels, 60, "y_val")


def test_missing_labels_are_refused_naming_y():
    with pytest.raises(ValueError, match="y must not have missing labels"):
        check_binary_labels(np.array([0, None] * 30, dtype=object), 60)


def test_tensor_labels():
    torch = _torch()
    classes, signed = check_binary_labels(torch.tensor(Y), 60)
    np.testing.assert_array_equal(classes, [0, 1])
    np.testing.assert_array_equal(check_signed_labels(torch.tensor(2.0 * Y - 1), 60), 2.0 * Y - 1)


# ------------------------------------------------------------------------------------------------ ConceptDataset
def test_67_concept_dataset_shows_the_offending_label_values():
    from empirical.llm.datasets import ConceptDataset

    with pytest.raises(ValueError, match=r"dataset 'toy': labels must be 0/1 .*got '0', '1'"):
        ConceptDataset("toy", ["a", "b"], ["0", "1"])  # text: the old message said "got (2,)"
    with pytest.raises(ValueError, match=r"labels must be 0/1 .*got 2.0, 0\.5$"):
        ConceptDataset("toy", ["a", "b", "c", "d"], [0, 2, 0.5, 2])
    with pytest.raises(ValueError, match=r"labels must be a 1-D sequence of 0/1.*shape \(1, 2\)"):
        ConceptDataset("toy", ["a", "b"], [[0, 1]])
    assert ConceptDataset("toy", ["a", "b"], [True, False]).labels.tolist() == [1, 0]


def test_68_concept_dataset_refuses_texts_that_are_not_text():
    from empirical.llm.datasets import ConceptDataset

    with pytest.raises(ValueError, match=r"dataset 'toy': texts must be str .*got 3 \(int\) at index 1"):
        ConceptDataset("toy", ["a", 3], [0, 1])
    with pytest.raises(ValueError, match="texts must be a list of str"):
        ConceptDataset("toy", "ab", [0, 1])  # a string is not a list of its characters
    assert ConceptDataset("toy", np.array(["a", "b"]), [0, 1]).prompts == ["a", "b"]


# ------------------------------------------------------------------------------------------------ scales (E25, E38)
@pytest.mark.parametrize("tiny", [1e-310, 1e-200, 1e-101], ids=["subnormal", "1e-200", "1e-101"])
def test_e25_e38_columns_below_every_accepted_spread_are_constant(tiny):
    extra = tiny * RNG.standard_normal((60, 2))
    probe = _fit(np.column_stack([X, extra]))
    vector = probe.concept_vector_
    assert np.all(np.isfinite(vector)) and abs(np.linalg.norm(vector) - 1.0) < 1e-12
    assert np.all(np.abs(vector[4:]) < 1e-80)  # the sub-floor columns carry no weight
    np.testing.assert_allclose(vector[:4], REFERENCE.concept_vector_, rtol=1e-12, atol=1e-15)
    mean, scale = standardize_stats(np.column_stack([X, extra]))
    assert np.all(scale[4:] == 1.0) and np.all(np.isfinite(scale))


def test_e25_informative_subnormal_column_does_not_overflow():
    Xs = np.column_stack([X[:, 1:], 1e-310 * X[:, 0]])
    vector = _fit(Xs).concept_vector_
    assert np.all(np.isfinite(vector)) and abs(np.linalg.norm(vector) - 1.0) < 1e-12


def test_spreads_at_the_floor_are_still_standardized():
    """X * 1e-90 keeps its direction: the floor is the smallest accepted magnitude, not a relative rule."""
    a = _fit(X * 1e-90).concept_vector_
    np.testing.assert_allclose(a, REFERENCE.concept_vector_, rtol=1e-12)
    _, scale = standardize_stats(np.column_stack([X, 1e-99 * X[:, :1]]))
    assert scale[-1] != 1.0
