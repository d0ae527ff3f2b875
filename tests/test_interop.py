"""Concept vectors in other tools' formats: llama.cpp control vectors (GGUF) and plain safetensors
directions (repeng, steering-vectors); the layer mapping RAPTOR layer l <-> block index l - 1."""
from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from safetensors.numpy import load_file

from empirical import cli
from empirical.probes import ConceptVectors, LinearProbe, save_concept_vectors
from empirical.probes._interop import export_control_vector, export_directions, import_control_vector, import_directions

RNG = np.random.default_rng(0)
VECTORS = ConceptVectors({layer: LinearProbe(RNG.standard_normal(16), 0.1 * layer, test_accuracy=0.8)
                          for layer in (2, 5, 9)}, model="tiny-llama", method="raptor")


def _field(reader, name):
    field = reader.get_field(name)
    value = field.parts[field.data[0]]
    return bytes(value).decode() if value.dtype == np.uint8 else int(value[0])


def test_gguf_has_the_llama_cpp_layout(tmp_path):
    path = export_control_vector(tmp_path / "cv.gguf", VECTORS, scale=3.0)
    reader = gguf.GGUFReader(str(path))
    assert _field(reader, "general.architecture") == "controlvector"
    assert _field(reader, "controlvector.model_hint") == "tiny-llama"
    assert _field(reader, "controlvector.layer_count") == 3
    tensors = {t.name: t for t in reader.tensors}
    assert sorted(tensors) == ["direction.1", "direction.4", "direction.8"]  # RAPTOR layer l -> direction.(l-1)
    for layer in VECTORS.layers:
        t = tensors[f"direction.{layer - 1}"]
        assert t.tensor_type == gguf.GGMLQuantizationType.F32 and np.asarray(t.data).ndim == 1
        np.testing.assert_allclose(t.data, 3.0 * VECTORS[layer].direction, rtol=1e-6)


def test_gguf_round_trip(tmp_path):
    path = export_control_vector(tmp_path / "cv.gguf", VECTORS, scale={2: 1.0, 5: 2.0, 9: -4.0})
    back = import_control_vector(path)
    assert back.layers == VECTORS.layers and back.model == "tiny-llama" and back.method == "raptor"
    assert back.metadata["scale"] == {"2": pytest.approx(1.0), "5": pytest.approx(2.0), "9": pytest.approx(4.0)}
    for layer, sign in ((2, 1), (5, 1), (9, -1)):
        np.testing.assert_allclose(back[layer].direction, sign * VECTORS[layer].direction, atol=1e-6)


def test_a_repeng_style_file_imports_with_the_same_mapping(tmp_path):
    """repeng's exporter: arch 'controlvector', model_hint, layer_count, tensors direction.{block index}."""
    writer = gguf.GGUFWriter(str(tmp_path / "repeng.gguf"), "controlvector")
    writer.add_string("controlvector.model_hint", "llama")
    writer.add_uint32("controlvector.layer_count", 2)
    for block in (3, 7):
        writer.add_tensor(f"direction.{block}", np.full(8, float(block), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    back = import_control_vector(tmp_path / "repeng.gguf")
    assert back.layers == [4, 8] and back.model == "llama"
    np.testing.assert_allclose(back[4].direction, np.full(8, 8 ** -0.5))


@pytest.mark.parametrize("kwargs, message", [
    (dict(layers=[1, 2]), r"layers \[1\] cannot be exported to llama.cpp"),
    (dict(layers=[3]), r"layers \[3\] are not in the concept vectors"),
    (dict(scale=0.0), r"scale must be finite and non-zero"),
    (dict(scale=float("nan")), r"scale must be finite and non-zero"),
    (dict(scale={2: 1.0}), r"scale has no factor for layers \[5, 9\]"),
    (dict(scale=1e300), r"must have entries of magnitude at most"),
])
def test_bad_exports(tmp_path, kwargs, message):
    vectors = ConceptVectors({**VECTORS.probes, 1: VECTORS[2]}) if kwargs.get("layers") == [1, 2] else VECTORS
    with pytest.raises(ValueError, match=message):
        export_control_vector(tmp_path / "x.gguf", vectors, **kwargs)
    assert not (tmp_path / "x.gguf").exists()


@pytest.mark.parametrize("content", [b"", b"GGUF\x03\x00\x00\x00garbage", b"not a gguf file at all"])
def test_damaged_or_foreign_gguf_names_the_file(tmp_path, content):
    (tmp_path / "bad.gguf").write_bytes(content)
    with pytest.raises(ValueError, match="bad.gguf"):
        import_control_vector(tmp_path / "bad.gguf")


def test_a_model_gguf_is_not_a_control_vector(tmp_path):
    writer = gguf.GGUFWriter(str(tmp_path / "model.gguf"), "llama")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="is not a control vector .*'llama'"):
        import_control_vector(tmp_path / "model.gguf")


def test_safetensors_directions_round_trip_and_one_line_conversion(tmp_path):
    path = export_directions(tmp_path / "dirs.safetensors", VECTORS, scale=2.0)
    directions = {int(k): v for k, v in load_file(path).items()}  # the documented one-liner
    assert sorted(directions) == [1, 4, 8]
    np.testing.assert_allclose(directions[4], 2.0 * VECTORS[5].direction, rtol=1e-6)
    back = import_directions(path)
    assert back.layers == VECTORS.layers
    np.testing.assert_allclose(back[9].direction, VECTORS[9].direction, atol=1e-6)
    (tmp_path / "bad.safetensors").write_bytes(b"\x00" * 12)
    with pytest.raises(ValueError, match="bad.safetensors"):
        import_directions(tmp_path / "bad.safetensors")


def test_repeng_and_steering_vectors_objects_from_our_file(tmp_path):
    """Only where the libraries install (both pin numpy<2 or transformers<5 today, so usually skipped)."""
    repeng = pytest.importorskip("repeng")
    path = export_directions(tmp_path / "dirs.safetensors", VECTORS)
    directions = {int(k): v for k, v in load_file(path).items()}
    assert sorted(repeng.ControlVector(model_type="llama", directions=directions).directions) == [1, 4, 8]


def test_cli_export(tmp_path, capsys):
    save_concept_vectors(tmp_path / "probes_toy", ConceptVectors({**VECTORS.probes, 1: VECTORS[2]}, model="tiny"))
    assert cli.main(["export", "--probe-file", str(tmp_path / "probes_toy.json"), "--scale", "2"]) == 0
    captured = capsys.readouterr()
    assert "layer(s) [1] skipped" in captured.err and "block indices 1..8" in captured.out
    back = import_control_vector(tmp_path / "probes_toy_control.gguf")
    assert back.layers == [2, 5, 9]
    out = tmp_path / "d.safetensors"
    assert cli.main(["export", "--probe-file", str(tmp_path / "probes_toy.json"), "--format", "safetensors",
                     "--out", str(out)]) == 0
    assert sorted(load_file(out)) == ["0", "1", "4", "8"]
    assert cli.main(["export", "--probe-file", str(tmp_path / "missing.json")]) == 2
    assert "missing" in capsys.readouterr().err
