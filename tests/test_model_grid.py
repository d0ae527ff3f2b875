"""The paper's grid as one command: ``python -m paper_figures --models A B`` runs the empirical section per model
and writes the grid's tables, figures and claims (on two tiny random models; issue "Probes at our users' scale")."""

import numpy as np
import pandas as pd
import pytest

from paper_figures import claims, grid
from paper_figures.__main__ import main


def test_claims_count_settings_by_their_intervals_and_test_them():
    """Settings are (model, dataset) pairs of the paper's datasets; one counts only when its interval is on the
    claim's side; the averages are not settings."""
    names = list(claims.PAPER_DATASETS)
    rows = [dict(model=m, dataset=d, baseline="GCS", metric="best", diff=0.02, ci_low=0.01, ci_high=0.03)
            for m in ("a", "b") for d in names]
    rows[0].update(ci_low=-0.01)  # a point estimate above 0 whose interval is not: not counted
    rows.append(dict(model="a", dataset="average (6)", baseline="GCS", metric="best", diff=0.02, ci_low=0.01,
                     ci_high=0.03))
    row = grid.grid_claims(pd.DataFrame(rows)).iloc[0]
    n = 2 * len(names)
    assert row.settings == n and row.above == n - 1 and row.below == 0 and row["count"] == f"{n - 1}/{n}"
    assert row.verdict == "holds" and row.p < 0.025 and row.min_p == pytest.approx(0.5 ** n)


def test_a_grid_too_small_for_the_sign_test_gets_no_verdict():
    rows = [dict(model="a", dataset=d, baseline="GCS", metric="best", diff=0.02, ci_low=0.01, ci_high=0.03)
            for d in list(claims.PAPER_DATASETS)[:5]]
    row = grid.grid_claims(pd.DataFrame(rows)).iloc[0]
    assert row.verdict == "--" and "cannot reach" in row.reason


def test_model_slugs_keep_paths_apart():
    assert grid.model_slug("smollm2") == "smollm2"
    with pytest.raises(ValueError, match="model must be a non-empty"):
        grid.model_slug("  ")


@pytest.mark.parametrize("argv, message", [(["--models", "smollm2"], "at least two"),
                                           (["--models", "a", "b", "--only", "theory"], "keep 'empirical'"),
                                           (["--models", "a", "a"], "--models lists a more than once"),
                                           (["--model", "a", "--models", "b", "c"], "exclude each other")])
def test_bad_grid_options_are_one_line(tmp_path, capsys, argv, message):
    try:
        code = main(["--out", str(tmp_path), "--no-progress", *argv])
    except SystemExit as exc:  # argparse's own errors (the option table)
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err


def test_the_grid_on_two_tiny_random_models(tmp_path, monkeypatch, shared_data_dir):
    pytest.importorskip("transformers")
    from empirical.testing import tiny_model, tiny_tokenizer

    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "cache"))
    models = []
    for name, kind, seed in (("llama", "llama", 1), ("gpt2", "gpt2", 2)):
        tiny_model(kind, seed=seed, n_layers=3).save_pretrained(tmp_path / name)
        tiny_tokenizer().save_pretrained(tmp_path / name)
        models.append(str(tmp_path / name))
    argv = ["--out", str(tmp_path / "out"), "--only", "empirical", "--quick", "--models", *models, "--n-jobs", "1",
            "--no-progress"]
    assert main(argv) == 0
    out = tmp_path / "out"
    for model in models:  # each model's own section, tables and figures
        assert (grid.model_dir(out, model) / "tables" / "accuracy_by_seed.csv").is_file()
        assert (grid.model_dir(out, model) / "figures" / "accuracy_differences.png").is_file()
    accuracy = pd.read_csv(out / "tables" / "grid_accuracy.csv")
    assert set(accuracy.model) == {grid.model_slug(m) for m in models}
    assert {"RAPTOR", "GCS"} <= set(accuracy.method) and accuracy.best.between(0, 1).all()
    table = pd.read_csv(out / "tables" / "grid_accuracy_table.csv")
    assert len(table) == len(set(zip(table.model, table.method))) and set(claims.PAPER_DATASETS) <= set(table.columns)
    grid_claims = pd.read_csv(out / "tables" / "grid_claims.csv")
    assert (grid_claims.settings == 2 * len(claims.PAPER_DATASETS)).all()
    assert set(grid_claims.verdict) <= {"holds", "does not hold", "inconclusive", "--"}
    assert np.all(grid_claims.above + grid_claims.below <= grid_claims.settings)
    cost = pd.read_csv(out / "tables" / "grid_cost.csv")
    assert (cost.median_fit_time_s > 0).all() and set(cost.model) == set(accuracy.model)
    for figure in ("grid_accuracy_differences", "grid_cost_dumbbell"):
        assert (out / "figures" / f"{figure}.png").is_file()
    assert "## The model grid" in (out / "RESULTS.md").read_text()
    # a second invocation resumes every model: no probe is fitted again, and the grid's tables come out the same
    from empirical.probes import RaptorProbe
    from paper_figures import empirical_figures

    def recomputed(*args, **kwargs):
        raise AssertionError("recomputed on resume")

    monkeypatch.setattr(RaptorProbe, "fit", recomputed)
    monkeypatch.setattr(empirical_figures, "layer_table", recomputed)
    assert main(argv) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "tables" / "grid_accuracy.csv"), accuracy)
