"""The paper_figures section ``learning_curves`` on synthetic hidden states (never on a real model here)."""
import numpy as np
import pandas as pd
import pytest

from paper_figures import learning_curves, output


@pytest.fixture(scope="module")
def hidden():
    """Two synthetic 'datasets' of 3 layers (0 = embeddings): the signal grows with depth; the second has groups
    of two rows (a subject stated truly and falsely) as Counterfact."""
    rng = np.random.default_rng(0)
    out = {}
    for name, grouped in (("plain", False), ("grouped", True)):
        n, p = 700, 12
        y = np.tile([0, 1], n // 2)
        u = rng.standard_normal(p)
        H = np.stack([rng.standard_normal((n, p)) + 0.25 * layer * np.outer(2 * y - 1, u) for layer in range(3)])
        out[name] = (H, y, np.repeat(np.arange(n // 2), 2) if grouped else None)
    return out


def test_section_writes_its_table_and_figure_and_resumes(tmp_path, hidden, monkeypatch):
    kw = dict(pools=(60,), draws=1, multiples=(2, 4), layer_step=1, n_boot=20, n_test=200, teachers=("calibrated",))
    table = learning_curves.run(tmp_path, hidden, **kw)
    assert (tmp_path / "tables" / "learning_curves.csv").is_file()
    assert (tmp_path / "figures" / "learning_curves.png").is_file()
    methods = {"spectral/calibrated", "isotropic", "no_gain", "power_law", "pow4", "mmf4", "wbl4", "capped_power_law"}
    assert set(table.method) == methods and set(table.multiple) == {2, 4}
    # 2 layers x 1 draw per (dataset, pool, multiple, method)
    assert (table.settings == 2).all() and table.coverage.between(0, 1).all() and (table.mae >= 0).all()
    assert table.best_layer_within_1pt.between(0, 1).all() and (table.best_layer_regret >= 0).all()
    raw = pd.read_csv(tmp_path / "learning_curves" / "evaluations.csv")
    assert (raw.truth > 0.5).all()
    assert (raw.truth <= raw.truth_test_best).all()
    assert (raw.low <= raw.accuracy).all()
    assert (raw.accuracy <= raw.high).all()
    # the truth at 4x extends the pool of 2x: a nested, larger training set, on the same test rows
    assert raw.groupby(["dataset", "layer", "draw", "multiple"]).truth.nunique().eq(1).all()
    # separability where it can be decided: n = 2.5 (p + 1) non-test rows, real and shuffled labels, every layer run
    sep = pd.read_csv(tmp_path / "tables" / "separability_large_summary.csv")
    assert set(sep.labels) == {"real", "shuffled"} and (sep.rows == "non-test").all() and (sep.layers == 2).all()
    assert (sep.n == int(np.ceil(2.5 * 13))).all() and (sep.n_over_p > 2).all()
    # at p = 12, Cover's probability that 33 shuffled labels are separable is P(Bin(32, 1/2) <= 12) = 0.11 per
    # layer, so the section's counts are only bounded here; the control itself is tested at p = 100 below
    assert sep.separable.between(0, sep.layers).all() and sep.undecided.between(0, sep.layers).all()
    # the forecaster's interval is calibrated on the other dataset only, and the evidence tables are written
    capped = raw[raw.method == "capped_power_law"]
    assert capped.q.notna().all() and (capped.pool_accuracy == raw[raw.method == "no_gain"].accuracy.to_numpy()).all()
    forecasters = pd.read_csv(tmp_path / "tables" / "forecasters.csv")
    assert set(forecasters.method) == methods and (forecasters.datasets == 2).all()
    calibration = pd.read_csv(tmp_path / "tables" / "forecast_calibration.csv")
    assert set(calibration.level) == {0.8, 0.9, 0.95} and set(calibration.multiple) == {2, 4}
    # resume: a second run reads every saved evaluation instead of fitting again
    monkeypatch.setattr(learning_curves, "evaluate_setting", lambda *a, **k: pytest.fail("recomputed"))
    monkeypatch.setattr(learning_curves, "separability_rows", lambda *a, **k: pytest.fail("recomputed"))
    again = learning_curves.run(tmp_path, hidden, **kw)
    pd.testing.assert_frame_equal(again, table)


def test_targets_beyond_the_data_are_skipped_and_grouped_test_rows_keep_groups(hidden):
    H, y, groups = hidden["grouped"]
    y_signed = np.where(y > 0, 1.0, -1.0)
    test = learning_curves.fixed_test_rows(y_signed, groups)
    assert not set(groups[test]) & set(np.delete(groups, test))
    rows = learning_curves.evaluate_setting(H[2], y_signed, test, 200, 0, multiples=(2, 8), teachers=("calibrated",),
                                            n_boot=10)
    assert {row["multiple"] for row in rows} == {2}  # 8 x 200 rows do not exist outside the test set
    assert learning_curves.evaluate_setting(H[2], y_signed, test, 200, 0, multiples=(8,), teachers=("calibrated",),
                                            n_boot=0) == []


def test_summary_counts_best_layer_agreement():
    raw = pd.DataFrame(dict(dataset="d", pool=100, multiple=2, method="m", draw=0, layer=[1, 2, 3],
                            truth=[0.70, 0.80, 0.795], truth_test_best=[0.72, 0.80, 0.85],
                            accuracy=[0.9, 0.7, 0.6], low=0.0, high=0.82))
    row = learning_curves.summary_table(raw).iloc[0]
    assert row.best_layer_regret == pytest.approx(0.10) and row.best_layer_within_1pt == 0.0
    assert row.coverage == 1.0 and row.mae == pytest.approx(np.mean([0.2, 0.1, 0.195]))
    # the test-best truth is the secondary column, with its own error and coverage
    assert row.mae_test_best == pytest.approx(np.mean([0.18, 0.1, 0.25]))
    assert row.coverage_test_best == pytest.approx(2 / 3)
    assert row.selection_gap == pytest.approx(np.mean([0.02, 0.0, 0.055]))


def test_truth_is_the_test_accuracy_at_the_validation_selected_C(hidden):
    """The primary truth is the refit's test accuracy at the C a validation split of the training rows selects:
    at most the test-best accuracy, equal to the test accuracy along the grid at ``C_selected``."""
    H, y, _ = hidden["plain"]
    y_signed = np.where(y > 0, 1.0, -1.0)
    train, test = np.arange(400), np.arange(400, 700)
    t = learning_curves.truth_accuracies(H[2], y_signed, train, test)
    path = learning_curves._path_accuracy(H[2], y_signed, train, test, learning_curves.PLAN_CS)
    assert t["truth"] == path[list(learning_curves.PLAN_CS).index(t["C_selected"])]
    assert t["truth_test_best"] == path.max() >= t["truth"] > 0.5
    with pytest.raises(ValueError, match="Cs"):
        learning_curves.truth_accuracies(H[2], y_signed, train, test, Cs=[-1.0])
    with pytest.raises(ValueError, match="test"):
        learning_curves.truth_accuracies(H[2], y_signed, train, np.array([700]))
    with pytest.raises(ValueError, match="H"):
        learning_curves.truth_accuracies(np.full((700, 12), np.nan), y_signed, train, test)


def test_section_is_not_a_default_section():
    from paper_figures.__main__ import DEFAULT_SECTIONS, build_parser

    assert "learning_curves" not in DEFAULT_SECTIONS
    assert build_parser().parse_args(["--only", "learning_curves", "--quick"]).only == ["learning_curves"]


def test_scales_and_dataset_choice_on_the_command_line(tmp_path, capsys):
    """``--learning-scale goal`` is the full protocol at the pool of 400 only; ``--datasets`` names the datasets of
    the section and an unknown one fails before any work, listing the known ones."""
    from paper_figures.__main__ import build_parser, main

    assert learning_curves.SCALES["goal"] == dict(pools=(learning_curves.GOAL_POOL,))
    assert learning_curves.SCALES["quick"] is learning_curves.QUICK and learning_curves.SCALES["full"] == {}
    args = build_parser().parse_args(["--only", "learning_curves", "--learning-scale", "goal", "--datasets",
                                      "common", "stsa"])
    assert args.learning_scale == "goal" and args.datasets == ["common", "stsa"]
    assert main(["--only", "learning_curves", "--datasets", "nope", "--out", str(tmp_path / "run")]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err and not (tmp_path / "run" / "tables").exists()


def test_shuffled_labels_are_not_separable_at_two_and_a_half_times_p():
    """The control of :func:`learning_curves.separability_rows`: at n = 2.5 (p + 1) rows Cover's probability that
    random labels are separable is P(Bin(n - 1, 1/2) <= p) (a permutation of balanced labels: at most that, the
    balanced dichotomies being the hardest to separate); labels from a linear rule are.  Chance failure rate
    <= 7.5e-7 per run (any seed): 3.75e-7 for each of the two shuffled controls at p = 240 (n = 603); it was
    2 x 6.3e-4 at p = 100."""
    rng = np.random.default_rng(1)
    n, p = 700, 240
    H = rng.standard_normal((2, n, p))
    y = np.where(H[1] @ rng.standard_normal(p) > 0, 1.0, -1.0)
    table = learning_curves.separability_rows("gauss", H, y, test=np.arange(40), layers=(0, 1))
    assert (table.n == 603).all() and table.decided.all()
    assert not table[table.labels == "shuffled"].separable.any()
    assert table.set_index(["layer", "labels"]).separable.loc[(1, "real")]


# ------------------------------------------------------------------------ the forecaster's held-out evidence
def _forecasts(errors: dict, multiple=2, pool=400, n_test=800) -> pd.DataFrame:
    """Rows of the forecaster with the given errors per dataset (forecast 0.8, the pool's accuracy too: the scale is
    the noise terms alone, the same for every row)."""
    rows = [dict(dataset=d, layer=i, pool=pool, draw=0, multiple=multiple, method="capped_power_law",
                 accuracy=0.8, truth=0.8 - e, low=0.0, high=1.0, n_test=n_test, pool_accuracy=0.8)
            for d, errs in errors.items() for i, e in enumerate(errs)]
    return pd.DataFrame(rows)


def test_held_out_q_comes_from_the_other_datasets_only():
    """A dataset with huge errors widens the others' intervals, never its own: its q is the quantile of the other
    datasets' scores (each dataset weighing one), so its coverage is that of a dataset the calibration never saw."""
    from paper_figures import forecast_calibration as fc

    raw = _forecasts({"a": [0.01, 0.02, 0.03, 0.04], "b": [0.01, 0.02, 0.03, 0.04], "wild": [0.3, 0.4]})
    out = fc.held_out_intervals(raw)
    scale = float(np.sqrt(0.8 * 0.2 * (1 / 400 + 1 / 800)))  # forecast_scale at a = 0.8 without a gain
    q_wild = out[out.dataset == "wild"].q.iloc[0]
    assert q_wild == pytest.approx(0.04 / scale)  # from a and b only: their 90 % score is their largest
    wild = out[out.dataset == "wild"]
    assert not ((wild.low <= wild.truth) & (wild.truth <= wild.high)).any()
    assert (out[out.dataset == "a"].q > 0.3 / scale - 1e-9).all()  # wild weighs half of a's calibration set
    table = fc.calibration_table(raw)
    row = table[(table.level == 0.9)].iloc[0]
    assert row.worst_dataset == "wild" and row.coverage_held_out_min == 0.0 and row.datasets == 3


def test_forecaster_table_pairs_datasets_and_counts_wins():
    from paper_figures import forecast_calibration as fc

    rows = []
    for method, errs in (("capped_power_law", {"a": 0.01, "b": 0.02, "c": 0.05}),
                         ("no_gain", {"a": 0.03, "b": 0.03, "c": 0.03}),
                         ("power_law", {"a": 0.05, "b": 0.05, "c": 0.06}),
                         ("pow4", {"a": 0.02, "b": 0.10, "c": 0.10}), ("mmf4", {"a": 0.10, "b": 0.01, "c": 0.10}),
                         ("wbl4", {"a": 0.10, "b": 0.10, "c": 0.10})):
        for d, e in errs.items():
            for layer, sign in ((1, 1), (2, -1)):
                rows.append(dict(dataset=d, layer=layer, pool=400, draw=0, multiple=4, method=method,
                                 accuracy=0.8 + sign * e, truth=0.8, low=0.8 - 2 * e, high=0.8 + 2 * e))
    table = fc.forecaster_table(pd.DataFrame(rows)).set_index("method")
    ours = table.loc["capped_power_law"]
    assert ours.mae == pytest.approx(np.mean([0.01, 0.02, 0.05])) and ours.bias == pytest.approx(0.0)
    assert (ours.wins_no_gain, ours.wins_power_law, ours.wins_families_best) == (2, 3, 2)
    assert ours.d_families_best == pytest.approx(np.mean([0.01 - 0.02, 0.02 - 0.01, 0.05 - 0.10]))
    assert ours.d_power_law == pytest.approx(np.mean([-0.04, -0.03, -0.01]))
    assert ours.d_power_law_low < ours.d_power_law < ours.d_power_law_high  # 3 datasets: a t-interval on 2 df
    assert ours.coverage == 1.0 and ours.datasets == 3 and ours.best_layer_within_1pt == 1.0


def _forecaster_run(tmp_path):
    """A run folder whose ``forecasters`` table comes from two forecasters on three datasets at 4x."""
    from paper_figures import forecast_calibration as fc

    rows = []
    for method, errs in (("capped_power_law", {"a": 0.01, "b": 0.02, "c": 0.05}),
                         ("no_gain", {"a": 0.03, "b": 0.03, "c": 0.03})):
        for d, e in errs.items():
            rows.append(dict(dataset=d, layer=1, pool=400, draw=0, multiple=4, method=method, accuracy=0.8 + e,
                             truth=0.8, low=0.8, high=0.9))
    table = fc.forecaster_table(pd.DataFrame(rows))
    output.save_table(table, tmp_path, "forecasters")
    return table


def test_the_docs_forecaster_table_is_generated_from_the_published_one(tmp_path):
    """Issue 54: docs/learning_curves.md's table of the forecasters is a generated block of the published
    ``forecasters`` table (every forecaster and multiple, with the paired differences and their intervals), and a
    copy without the table says so instead of showing stale numbers."""
    from paper_figures import doc_blocks

    assert "has no `forecasters` table" in doc_blocks.forecaster_block(tmp_path)
    table = _forecaster_run(tmp_path).set_index("method")
    block = doc_blocks.forecaster_block(tmp_path)
    lines = block.splitlines()
    assert lines[0] == doc_blocks.block_markers("learning-forecasters")[0] and len(lines) == 2 + 2 + 2
    ours = table.loc["capped_power_law"]
    row = next(line for line in lines if line.startswith("| capped_power_law |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["capped_power_law", "4x", "3", f"{ours.mae:.3f}", f"{ours.bias:+.3f}"]
    assert cells[5] == f"{ours.coverage:.2f}; {ours.coverage_min:.2f}" and cells[7] == "2 / -- / --"
    assert cells[8] == f"{ours.d_no_gain:+.3f} [{ours.d_no_gain_low:+.3f}, {ours.d_no_gain_high:+.3f}]"
    assert cells[9] == "--" and cells[10] == "--"  # no power law or family in this run: nothing to compare
    assert doc_blocks.BLOCKS["learning-forecasters"][0] == "docs/learning_curves.md"


def test_results_md_shows_the_forecaster_table_under_the_learning_curves(tmp_path):
    """RESULTS.md embeds the ``forecasters`` table (issue 54: the table is in RESULTS.md, generated from the run)."""
    from paper_figures import results

    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "learning_curves.png").write_bytes(b"")
    _forecaster_run(tmp_path)
    text = results.write_results(tmp_path).read_text()
    assert "`tables/forecasters.csv`:" in text and "| capped_power_law |" in text
    section = text[text.index("How many labels does a concept need?"):]
    assert section.index("`tables/forecasters.csv`:") < section.index("| capped_power_law |")
