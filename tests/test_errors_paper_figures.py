"""``paper_figures`` resumes from the tables and raw results of a previous run: a resumed file that is
damaged, edited or lacks its checksum is reported and recomputed, never trusted."""
from __future__ import annotations

import pandas as pd
import pytest

from empirical.common import files
from paper_figures.output import load_table, save_table, table_or_compute


def test_a_saved_table_is_resumed_when_intact(tmp_path):
    table = pd.DataFrame({"layer": [1, 2], "test_accuracy": [0.75, 0.8]})
    save_table(table, tmp_path, "layers_toy")
    pd.testing.assert_frame_equal(load_table(tmp_path, "layers_toy"), table)
    assert load_table(tmp_path, "absent") is None



def test_a_resumable_step_computes_once_and_redoes_a_damaged_or_mismatched_table(tmp_path):
    """``table_or_compute``, the one resumable step of a run: computed and saved the first time, read back after,
    recomputed when the saved table fails its checksum or was made with other settings (``valid``)."""
    calls = []

    def compute(layers=(1, 2)):
        calls.append(layers)
        return pd.DataFrame({"layer": list(layers), "test_accuracy": [0.75] * len(layers)})

    first = table_or_compute(tmp_path, "layers_toy", compute)
    again = table_or_compute(tmp_path, "layers_toy", compute)
    pd.testing.assert_frame_equal(first, again)
    assert calls == [(1, 2)] and load_table(tmp_path, "layers_toy") is not None
    other = table_or_compute(tmp_path, "layers_toy", lambda: compute((1, 2, 3)),
                             valid=lambda t: sorted(t.layer) == [1, 2, 3])
    assert calls == [(1, 2), (1, 2, 3)] and sorted(other.layer) == [1, 2, 3]
    path = tmp_path / "tables" / "layers_toy.csv"
    path.write_text(path.read_text().replace("0.75", "0.95"))
    with pytest.warns(RuntimeWarning, match="recomputing it"):
        redone = table_or_compute(tmp_path, "layers_toy", compute)
    assert calls[-1] == (1, 2) and redone.test_accuracy.tolist() == [0.75, 0.75]


@pytest.mark.parametrize("damage", ["edit a number", "truncate", "remove the checksum"])
def test_a_damaged_table_is_recomputed_not_trusted(tmp_path, damage):
    path = save_table(pd.DataFrame({"layer": [1, 2], "test_accuracy": [0.75, 0.8]}), tmp_path, "layers_toy")
    if damage == "edit a number":
        path.write_text(path.read_text().replace("0.8", "0.9"))
    elif damage == "truncate":
        path.write_text(path.read_text()[:-4])
    else:
        (path.parent / f".{path.name}.sha256").unlink()
    with pytest.warns(RuntimeWarning, match="layers_toy.csv.*recomputing it"):
        assert load_table(tmp_path, "layers_toy") is None


def test_verify_checksum_names_the_file(tmp_path):
    path = files.write_checksum(files.atomic_write_text(tmp_path / "raw.json", "{}"))
    path.write_text("{ }")
    with pytest.raises(files.ChecksumError, match="raw.json"):
        files.verify_checksum(path)


def test_a_saved_table_reads_back_to_the_same_floats_without_a_deprecation(tmp_path):
    import warnings

    import numpy as np

    values = np.random.default_rng(0).standard_normal(2000) * 10.0 ** np.arange(-8, 12, 0.01)
    table = pd.DataFrame({"x": values, "tie": 0.1 + 0.2})  # 17 significant digits, and a rounding tie's neighbour
    save_table(table, tmp_path, "floats")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' deprecation of float_precision (removed in pandas 4) included
        back = load_table(tmp_path, "floats")
    assert np.array_equal(back.x.to_numpy(), values) and (back.tie == 0.1 + 0.2).all()
