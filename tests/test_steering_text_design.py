"""The steering_text section's design (issue 36, §1 and Time) and its figure (§6): the full scale keeps the
issue's minimums inside the 60-minute timing bound, the cost table of docs/steering.md is the timing model's, and
``steering_text.png`` separates towards from away, marks gated points and is redrawn from the saved tables."""
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("transformers")  # the steering evaluation needs the [llm] extra

from empirical.llm import _steering_null as SN  # noqa: E402
from empirical.llm._steering_protocol import MIN_CONTROL, NULL_STREAMS  # noqa: E402
from paper_figures import steering_text as ST  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_full_scale_keeps_the_minimums_of_the_rank_test_and_the_gates():
    full = ST.FULL
    assert full["n_random"] >= 100 and full["n_random"] % 2 == 0  # antithetic report-half draws of the rank test
    assert full["n_random_selection"] >= MIN_CONTROL and full["n_random_selection"] % 2 == 0
    # greedy continuations per half (the gates read the selection half's, the report rows the report half's)
    assert full["n_generate"] // 2 >= 32
    assert NULL_STREAMS["selection"] != NULL_STREAMS["report"]  # drawn afresh for the report half
    assert set(ST.DATASETS) == set(ST.PROMPT_TOKENS)  # the Holm family of the validity test is every dataset


def test_full_section_fits_an_hour_by_the_timing_model_and_main_uses_it():
    from paper_figures.__main__ import section_seconds

    seconds = ST.full_run_seconds()
    assert seconds <= 3600
    assert section_seconds("steering_text") == round(seconds)
    stages = ST.stage_seconds()
    assert stages["total"] == pytest.approx(sum(v for k, v in stages.items() if k != "total"))
    # the design it replaced was over the limit (the model is not trivially small): with the two datasets that were
    # measurable when it was replaced, and with the committed run's one
    assert ST.full_run_seconds(ST.EARLIER, measurable=("stsa", "sarcasm")) > 3 * 3600 / 2
    assert ST.full_run_seconds(ST.EARLIER) > 3600
    # every dataset through every stage costs more than the measurable two
    assert ST.full_run_seconds(measurable=None) > seconds
    with pytest.raises(ValueError, match="measurable"):
        ST.full_run_seconds(measurable=("nope",))
    with pytest.raises(ValueError, match="measurable"):
        ST.full_run_seconds(measurable="stsa")


def test_measurable_datasets_are_the_committed_runs():
    """The timing model's measured datasets are those the committed run measured past the validity stage (its
    per-dataset timing table); the claims' measurability is stricter (Holm over the 7 read-out tests)."""
    timing = pd.read_csv(ROOT / "docs" / "results" / "tables" / "steering_text_timing.csv")
    assert set(timing[timing.screen.notna()].dataset) == set(ST.MEASURABLE)
    summary = pd.read_csv(ROOT / "docs" / "results" / "tables" / "steering_text_summary.csv")
    valid = summary.groupby("dataset")["measurable"].agg(lambda m: m.astype(str).eq("True").any())
    assert set(valid[valid].index) <= set(ST.MEASURABLE)


def test_docs_cost_table_is_the_timing_models():
    text = (ROOT / "docs" / "steering.md").read_text()
    assert ST.cost_block() in text
    assert f"{ST.full_run_seconds() / 60:.1f}" in ST.cost_block()
    # the prose quotes no minutes of its own (tests/test_results_small_things.py); what it says of the rows holds:
    # the matched null and the VADER draws are what the full design adds, n_random_selection = 6 lowers the bound,
    # with Sarcasm measurable the full design is over the hour at 10 or 6 control draws, its reduced draws and the
    # design without the new draws under it
    block = ST.cost_block()
    for _, scale, measurable, twins in ST.COST_ROWS:
        assert f"**{ST.full_run_seconds(scale, measurable, twins) / 60:.1f}**" in block
    full, without = ST.stage_seconds(), ST.stage_seconds(ST.WITHOUT_NEW_DRAWS)
    assert without["matched"] == without["text"] == 0
    assert full["total"] == pytest.approx(without["total"] + full["matched"] + full["text"])
    for measurable in (ST.MEASURABLE, ST.WITH_SARCASM):
        assert ST.full_run_seconds(ST.FEWER_CONTROLS, measurable) < ST.full_run_seconds(ST.FULL, measurable)
    assert ST.full_run_seconds(ST.FULL, ST.WITH_SARCASM) > 3600
    assert ST.full_run_seconds(ST.FEWER_CONTROLS, ST.WITH_SARCASM) > 3600
    assert ST.full_run_seconds(ST.REDUCED_DRAWS, ST.WITH_SARCASM) <= 3600
    assert ST.full_run_seconds(ST.WITHOUT_NEW_DRAWS, ST.WITH_SARCASM) <= 3600
    assert ST.REDUCED_DRAWS["n_random_matched"] >= 40  # the least whose rank p can reach 0.025


def _row(direction, method, setting, positions, shift, ratio, half="report", distinct=0.9, **kw):
    return dict(dataset="stsa", method=method, setting=setting, kind="additive", layer_choice="best", strength=0.4,
                positions=positions, direction=direction, half=half, n_prompts=50, concept_specific_shift=shift,
                concept_specific_low=shift - 0.1, concept_specific_high=shift + 0.1, perplexity_ratio=ratio,
                perplexity_ratio_low=ratio - 0.05, perplexity_ratio_high=ratio + 0.05, answer_mass_unsteered=0.2,
                answer_mass_steered=0.2, distinct2_unsteered=0.9, distinct2_steered=distinct, measurable=True, **kw)


def test_figure_points_separate_directions_mark_gated_and_tell_series_apart(tmp_path):
    rows = [_row("towards", "RAPTOR", "a", "answer", 1.0, 1.1), _row("away", "RAPTOR", "a", "answer", 0.5, 1.2),
            _row("towards", "RAPTOR", "b", "all", 2.0, 1.1), _row("towards", "DiffMeans", "a", "answer", 0.3, 1.9),
            _row("away", "DiffMeans", "a", "answer", 0.3, 1.1, distinct=0.3),  # repetitive: fails distinct-2
            _row("towards", "RAPTOR", "a", "answer", 9.0, 1.0, half="selection")]
    table = pd.DataFrame(rows + [dict(rows[0], dataset="coinflip", measurable=False)])
    points = ST.plot_points(table)
    assert set(points["half"]) == {"report"} and set(points["dataset"]) == {"stsa"}
    assert sorted(points["direction"]) == ["away", "away", "towards", "towards", "towards"]
    gated = points.set_index(["method", "direction", "positions"])["gated"]
    assert gated[("DiffMeans", "towards", "answer")] and gated[("DiffMeans", "away", "answer")]
    assert not gated[("RAPTOR", "towards", "answer")] and not gated[("RAPTOR", "away", "answer")]
    raptor = points[points["method"] == "RAPTOR"].drop_duplicates("series")
    assert raptor["marker"].nunique() == len(raptor) == 2  # answer vs all positions: different markers
    with pytest.raises(ValueError, match="perplexity_ratio"):
        ST.plot_points(table.drop(columns=["perplexity_ratio"]))

    import matplotlib
    matplotlib.use("Agg")
    path = ST.plot(table, tmp_path)
    assert path.is_file() and path.stat().st_size > 10_000


def test_results_only_redraw_covers_the_steering_text_figure(tmp_path):
    from paper_figures import empirical_plots
    from paper_figures.output import save_table

    assert ST.redraw(tmp_path) is None  # no table, no figure
    save_table(pd.DataFrame([_row("towards", "RAPTOR", "a", "answer", 1.0, 1.1)]), tmp_path, "steering_text_stsa")
    made = empirical_plots.plot_all(tmp_path)
    assert tmp_path / "figures" / "steering_text.png" in [Path(p) for p in made]


#: the committed run's validity p-values (steering_text_summary.csv, auc_p_value): Sarcasm passes its own test
#: (0.011 <= 0.025) and not Holm's over the 7 (0.064)
RAW_P = dict(stsa=0.00037, cities=0.452, common=0.615, counterfact=0.1787, hateeval=0.830, sarcasm=0.01075,
             coinflip=0.6375)


def test_the_section_measures_only_the_datasets_measurable_after_holm(tmp_path, monkeypatch):
    """Two passes: the validity read-out of all 7 datasets first, then Holm, then the measurement of those that
    stay measurable, gated on their adjusted p. Sarcasm (measurable alone, not after Holm) is never measured; a
    rerun resumes from the saved tables and measures nothing."""
    import types

    import empirical.llm as llm
    from paper_figures.output import load_table

    calls = []

    def fake_table(mdl, tok, ds, H, *, run, **kw):
        name, validity_only, auc_p_adjusted = ds.name, run.validity_only, run.auc_p_adjusted
        calls.append((name, validity_only, auc_p_adjusted))
        p = RAW_P[name]
        head = dict(dataset=name, auc_unsteered=0.7, auc_p_value=p, measurable=p <= 0.025)
        if validity_only:
            return pd.DataFrame([dict(head, method="--", setting="unsteered", half="all", stage="validity")]), None
        rows = [dict(_row("towards", "RAPTOR", "additive-best-k0.4-answer", "answer", 1.0, 1.1, half=half), **head,
                     answer_logodds_shift=1.2, null_rank=1 if half == "report" else None,
                     null_p=0.0099 if half == "report" else None) for half in ("selection", "report")]
        null = pd.DataFrame([dict(dataset=name, method="RAPTOR", setting="additive-best-k0.4-answer",
                                  direction="towards", half="report", stream=1, draw=d, sign=1 - 2 * (d % 2),
                                  shift=0.01 * d) for d in range(100)], columns=SN.NULL_COLUMNS)
        return pd.DataFrame(rows), null

    monkeypatch.setattr(ST, "dataset_table", fake_table)
    # the front door's names (ST.run imports them from it; patching the implementation modules instead would leave
    # the fakes in the front door, which keeps a name it has loaded, for every later test)
    monkeypatch.setattr(llm, "load_model", lambda model: (None, None))
    monkeypatch.setattr(llm, "extract_dataset", lambda *a, **k: None)
    monkeypatch.setattr(ST.datasets, "load", lambda name, data_dir, max_per_class: types.SimpleNamespace(name=name))
    import matplotlib
    matplotlib.use("Agg")
    ST.run(tmp_path, progress=False)
    first = [c for c in calls if c[1]]
    assert [c[0] for c in first] == list(ST.DATASETS) and calls[:len(first)] == first  # every validity first
    measured = [c for c in calls if not c[1]]
    assert [c[0] for c in measured] == ["stsa"] and measured[0][2] == pytest.approx(7 * RAW_P["stsa"])
    sarcasm = load_table(tmp_path, "steering_text_sarcasm")
    assert len(sarcasm) == 1 and sarcasm.stage[0] == "validity"
    assert len(load_table(tmp_path, "steering_text_null_sarcasm")) == 0
    summary = load_table(tmp_path, "steering_text_summary").set_index("dataset")
    assert summary.loc["sarcasm", "setting"] == "not measurable" and summary.loc["sarcasm", "auc_p_holm"] > 0.025
    assert (tmp_path / "figures" / "steering_text_null.png").is_file()
    calls.clear()
    ST.run(tmp_path, progress=False)  # resumed: nothing is read or measured again
    assert calls == []


def test_the_null_figure_draws_the_tested_points_and_names_the_datasets_that_are_not_measurable(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    rows = [dict(_row("towards", "RAPTOR", "a", "answer", 1.0, 1.1), answer_logodds_shift=1.0, null_rank=3,
                 null_p=0.0297, auc_p_value=0.001),
            dict(_row("towards", "RAPTOR", "b", "answer", 1.0, 1.1), answer_logodds_shift=0.5, auc_p_value=0.001),
            dict(_row("towards", "RAPTOR", "a", "answer", 1.0, 1.1), dataset="sarcasm", answer_logodds_shift=2.0,
                 null_rank=1, null_p=0.0099, auc_p_value=0.015),
            dict(_row("towards", "RAPTOR", "a", "answer", 1.0, 1.1), dataset="common", auc_p_value=0.5,
                 measurable=False)]
    table = pd.DataFrame(rows)
    tested = ST.tested_points(table)
    # one tested point: sarcasm passes its own test (0.015) and not Holm's over 3 (2 x 0.015 = 0.03)
    assert list(tested.setting) == ["a"] and list(tested.dataset) == ["stsa"]
    assert ST.not_measurable_note(table) == "Not measurable (read-out validity, Holm over the 3 datasets): " \
                                            "sarcasm (p_holm 0.03), common (p_holm 0.5)"
    null = pd.DataFrame([dict(dataset="stsa", method="RAPTOR", setting="a", direction="towards", half="report",
                              stream=1, draw=d, sign=1, shift=0.1 * d) for d in range(100)])
    path = ST.plot_null(table, null, tmp_path)
    assert path.is_file() and path.stat().st_size > 10_000
