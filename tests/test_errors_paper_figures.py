"""``paper_figures`` resumes from the tables and raw results of a previous run: a resumed file that is
damaged, edited or lacks its checksum is reported and recomputed, never trusted."""
from __future__ import annotations

import pandas as pd
import pytest

from empirical import files
from paper_figures.output import load_table, save_table


def test_a_saved_table_is_resumed_when_intact(tmp_path):
    table = pd.DataFrame({"layer": [1, 2], "test_accuracy": [0.75, 0.8]})
    save_table(table, tmp_path, "layers_toy")
    pd.testing.assert_frame_equal(load_table(tmp_path, "layers_toy"), table)
    assert load_table(tmp_path, "absent") is None


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
