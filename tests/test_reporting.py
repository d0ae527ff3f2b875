"""The figures of the ``raptor`` command (empirical.reporting): each draws a PNG from a small synthetic table."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from empirical import reporting

LAYERS = [1, 2, 3, 4]
TABLES = {
    "plot_probe_accuracy": (pd.DataFrame(dict(layer=LAYERS, test_accuracy=[0.6, 0.7, 0.8, 0.75],
                                              diffmeans_test_accuracy=[0.55, 0.65, 0.7, 0.7],
                                              gcs_test_accuracy=[0.6, 0.68, 0.76, 0.7])),
                            dict(dataset="toy", n_examples=60)),
    "plot_stability": (pd.DataFrame(dict(layer=LAYERS, mean_abs_cos=[0.7, 0.8, 0.85, 0.9],
                                         ci_low=[0.65, 0.75, 0.8, 0.88], ci_high=[0.75, 0.84, 0.9, 0.93])),
                       dict(dataset="toy")),
    "plot_delta_sweep": (pd.DataFrame(dict(fraction=np.repeat([0.25, 0.5, 1.0], 4), seed=np.tile([0, 0, 1, 1], 3),
                                           C=np.tile([1.0, 10.0], 6), Acc_true=np.linspace(0.6, 0.8, 12),
                                           Acc_pred=np.linspace(0.62, 0.79, 12))),
                         dict(C=1.0, lam=1.0, dataset="toy", layer=2)),
    "plot_plan": (pd.DataFrame(dict(layer=LAYERS, predicted_accuracy=[0.7, 0.8, 0.85, 0.8], low=[0.6, 0.75, 0.8, 0.7],
                                    high=[0.75, 0.85, 0.9, 0.85], pool_cv_accuracy=[0.68, 0.76, 0.8, 0.78])),
                  dict(dataset="toy", labels=300, target_n=3000, level=0.9, target_accuracy=0.82)),
}


def test_every_figure_is_tested():
    assert sorted(TABLES) == sorted(reporting.__all__)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_figure_written_from_a_table(name, tmp_path):
    table, labels = TABLES[name]
    target = tmp_path / f"{name}.png"
    plt.close("all")  # figures another test of this worker left open are not this function's (xdist order)
    path = getattr(reporting, name)(table, target, **labels)
    assert path == target and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(tmp_path.iterdir()) == [target]  # the atomic write left no temporary file
    assert plt.get_fignums() == []  # no pyplot figure left open (the caller's pyplot state is untouched)


def test_plan_without_target_accuracy(tmp_path):
    table, labels = TABLES["plot_plan"]
    assert reporting.plot_plan(table, tmp_path / "plan.png", **{**labels, "target_accuracy": None}).is_file()


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_table_without_its_columns_raises_and_writes_nothing(name, tmp_path):
    table, labels = TABLES[name]
    with pytest.raises((AttributeError, KeyError)):
        getattr(reporting, name)(table.drop(columns=["layer" if "layer" in table else "fraction"]),
                                 tmp_path / "f.png", **labels)
    assert list(tmp_path.iterdir()) == []
