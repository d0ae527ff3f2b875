"""Issue 53 section 8, the small things the reviewer listed: the docs type no run result by hand (generated blocks,
checked like the README's claims table), cite only published tables, RESULTS.md says what a published copy holds and
shows no empty column, the learning-curve goal counts the datasets it evaluates, the run record stamps every
invocation (a publication refuses overlapping ones; a rebuild keeps the record byte for byte), the structure
scatter has error bars, and the paper's claims no row can test get a row that says why."""
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paper_figures.__main__ as main_module
from paper_figures import claims, doc_blocks, empirical_plots, output, predictor_claims, results
from paper_figures.publish import publish
from paper_figures.run_record import invocation_span, overlapping_invocations

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "docs" / "results"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# --------------------------------------------------------------------------- no hand-typed result in the docs

@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_the_docs_type_no_run_result_outside_generated_blocks(document):
    """Before: docs/steering.md's 43.1 min and STSA 1 248 s, docs/results.md's 77.5 min and 4,658 s (the record says
    4,651 s), docs/spectral_theory.md's typed agreement intervals."""
    assert doc_blocks.hand_typed_results(document.read_text()) == []


def test_the_hand_typed_forms_are_found_and_generated_text_is_not():
    text = "\n".join(["the section took 43.1 min (STSA 1 248 s); the run 4,658 s", "MAE 0.19 [-0.10, 0.48]",
                      "a limit of 100 min, alpha 0.025, probabilities in [0, 1]", "`[0.5, 1.0]` in code",
                      "```", "accuracy_from_margin([0.5, 1.0])", "```",
                      *doc_blocks.block_markers("coinflip-shortcut")[:1], "| 3 | 0.894 [0.49, 1.00] | 12.5 min |",
                      doc_blocks.block_markers("coinflip-shortcut")[1]])
    found = doc_blocks.hand_typed_results(text)
    assert [(line, form) for line, form, _ in found] == [
        (1, "decimal minutes"), (1, "thousands of seconds"), (1, "thousands of seconds"), (2, "interval")]
    assert [typed for _, _, typed in found] == ["43.1 min", "1 248 s", "4,658 s", "[-0.10, 0.48]"]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_generated_block_is_registered_and_holds_its_generators_text(document):
    """The README's claims table and the docs' result numbers are generated from docs/results (as
    tests/test_results.py checks the README's): a block nobody generates, or one that drifted, fails."""
    relative = document.relative_to(ROOT).as_posix()
    for name, block in doc_blocks.generated_blocks(document.read_text()).items():
        assert name in doc_blocks.BLOCKS, f"{relative}: block {name!r} has no generator in doc_blocks.BLOCKS"
        where, generate = doc_blocks.BLOCKS[name]
        assert where == relative
        assert block == generate(PUBLISHED), f"{relative}: block {name!r} differs from its generator's text"


def test_every_registered_block_is_in_its_document():
    for name, (document, _) in doc_blocks.BLOCKS.items():
        assert name in doc_blocks.generated_blocks((ROOT / document).read_text()), (document, name)


def test_the_coinflip_numbers_are_the_published_ones():
    """docs/results.md said xRFM reaches 0.95-1.0 at layers 1-4 on Coinflip; layer 3's mean over the seeds is 0.894
    (one split seed at 0.49)."""
    text = (ROOT / "docs" / "results.md").read_text()
    assert "0.95-1.0" not in text
    block = doc_blocks.generated_blocks(text)["coinflip-shortcut"]
    table = pd.read_csv(PUBLISHED / "tables" / "layerwise_accuracy.csv")
    layer3 = table[(table.dataset == "coinflip") & (table.method == "xRFM") & (table.layer == 3)].iloc[0]
    assert f"| 3 | {layer3['mean']:.3f} ({layer3['min']:.2f}-" in block


def test_sync_blocks_rewrites_only_the_blocks_and_leaves_other_documents(tmp_path):
    start, end = doc_blocks.block_markers("coinflip-shortcut")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "results.md"
    page.write_text(f"before\n{start}\nstale\n{end}\nafter\n")
    assert doc_blocks.sync_blocks(tmp_path, PUBLISHED, names=["coinflip-shortcut", "steering-cost"]) == [page]
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "stale" not in text
    assert doc_blocks.generated_blocks(text)["coinflip-shortcut"] == doc_blocks.coinflip_block(PUBLISHED)
    assert not (tmp_path / "docs" / "steering.md").exists()  # a document that is not there is left alone
    assert doc_blocks.sync_blocks(tmp_path, PUBLISHED, names=["coinflip-shortcut"]) == []  # nothing changed


# --------------------------------------------------------------------------- the docs cite published tables

#: Files the docs name by a ``<dataset>`` pattern that are a command's output, not a run's table.
COMMAND_OUTPUTS = {"plan_<dataset>.csv": "raptor plan", "plan_<dataset>.json": "raptor plan",
                   "plan_<dataset>.png": "raptor plan"}


def _published(name: str) -> bool:
    pattern = re.escape(name).replace(re.escape("<dataset>"), "[a-z_]+").replace(re.escape("<name>"), ".+")
    return any(re.fullmatch(pattern, p.relative_to(PUBLISHED).as_posix()) for p in PUBLISHED.rglob("*"))


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_the_docs_cite_only_published_tables(document):
    """A table or figure a page names as ``tables/...``, ``results/tables/...`` or ``results/figures/...`` is in
    docs/results; a per-dataset table that only a run's own folder holds is named ``OUT/tables/...``.  Before:
    docs/spectral_theory.md named ``tables/spectral_agreement_by_seed.md`` and ``tables/spectral_semi_synthetic.md``,
    docs/steering.md ``steering_text_null_<dataset>.csv`` and ``steering_text_validity_<dataset>.csv``."""
    missing = []
    for cited in re.findall(r"`([^`\s]+)`", document.read_text()):
        if cited.startswith("OUT/") or cited in COMMAND_OUTPUTS:
            continue
        path = re.sub(r"^(results/|docs/results/)", "", cited).split("|")[0]  # tables/x.csv|md: the CSV
        if re.fullmatch(r"tables/.+\.(csv|md|json)|figures/.+\.(png|pdf)", path):
            if not _published(path):
                missing.append(cited)
        elif "/" not in cited and "<dataset>" in cited and re.search(r"\.(csv|json|md)$", cited):
            if not _published(f"tables/{cited}"):
                missing.append(cited)
    assert missing == []


# --------------------------------------------------------------------------- RESULTS.md

def test_results_md_says_a_published_copy_holds_pngs_only(tmp_path):
    """Before: "the figures in `figures/` (PNG and PDF)", in the published copy too, which has only the PNGs."""
    (tmp_path / "tables").mkdir()
    text = results.write_results(tmp_path).read_text()
    assert "(PNG and PDF)" not in text and "a published copy such as docs/results the PNG only" in text
    assert {p.suffix for p in (PUBLISHED / "figures").iterdir()} == {".png"}


def test_an_embedded_table_leaves_out_a_column_with_no_value_and_says_why(tmp_path):
    """Before: the cost table showed an empty RAPTOR (train only) column (it costs no fit)."""
    cost = pd.DataFrame({"dataset": ["cities", "stsa"], "GCS": [1.3, 1.4], "RAPTOR": [0.18, 0.2],
                         claims.EQUAL_DATA_METHOD: [np.nan, np.nan], "xRFM": [2.1, 2.0]})
    output.save_table(cost, tmp_path, "cost_median_fit_time_s")
    lines = "\n".join(results._embedded_table(tmp_path, "cost_median_fit_time_s")).splitlines()
    header = next(line for line in lines if line.startswith("| dataset"))
    assert header == "| dataset | GCS | RAPTOR | xRFM |"
    assert any(line.startswith(f"Left out, no value in any row: {claims.EQUAL_DATA_METHOD}: it costs no fit")
               for line in lines)
    cost[claims.EQUAL_DATA_METHOD] = [0.01, np.nan]  # a column with a value keeps its place
    output.save_table(cost, tmp_path, "cost_median_fit_time_s")
    assert f"| {claims.EQUAL_DATA_METHOD} |" in results._embedded_table(tmp_path, "cost_median_fit_time_s")[2]


def test_the_learning_curve_goal_counts_the_datasets_it_evaluates():
    """Before: "(goal: 4/6)" on a cell of 5 datasets (Cities has no setting at 8 x 400)."""
    names = ["common", "hateeval", "sarcasm", "counterfact", "stsa"]
    rows = []
    for dataset in names:
        for draw in range(3):
            for method, mae in (("spectral/calibrated", 0.015), ("power_law", 0.03), ("no_gain", 0.04)):
                rows.append(dict(dataset=dataset, pool=400, multiple=8, draw=draw, method=method,
                                 mae=mae + 0.001 * draw, coverage=0.9))
    goal = next(r for r in predictor_claims._learning_curve_rows(pd.DataFrame(rows)) if "goal" in r["claim"])
    assert "4/6" not in goal["ours"]
    assert goal["ours"].startswith("MAE <= 0.02 on 5/5 datasets (goal: 4/5; 4 of 6 as set before the run, over the 5 "
                                   "datasets with a setting at this cell, none for cities)")
    assert "below the power law on 5/5 (goal: 4/5)" in goal["ours"]
    assert predictor_claims._dataset_goal(["a", "b", "c"])[0] == "goal: 2/3"  # two thirds, rounded up
    assert predictor_claims._dataset_goal(predictor_claims.LEARNING_DATASETS)[0] == "goal: 4/6"


# --------------------------------------------------------------------------- the run record's timestamps

def _stamped(start, end=None, recorded=None, **more):
    return dict(mode="full", sections=["theory"], status="complete" if end else "interrupted", started_utc=start,
                ended_utc=end, recorded_utc=recorded or end or start, git_commit="a" * 40, git_dirty=False,
                minutes=1.0, **more)


def _record(*runs):
    *earlier, last = runs
    return {**last, "earlier_invocations": list(earlier)}


def test_overlapping_invocations_are_found_from_the_stamps():
    t = "2026-11-29T10:{:02d}:00Z".format
    one_after_another = _record(_stamped(t(0), t(10)), _stamped(t(10), t(20)), _stamped(t(25), None, t(30)))
    assert overlapping_invocations(one_after_another) == []
    overlap = _record(_stamped(t(0), t(10)), _stamped(t(5), t(20)))
    ((earlier, later, words),) = overlapping_invocations(overlap)
    assert (earlier, later) == (1, 2) and "2026-11-29T10:05:00Z" in words and "10:10:00Z" in words
    # an interrupted invocation's last save is a lower bound of its end; one nested in a long one is found, and so
    # is the one after it that still overlaps the long one
    assert [pair[:2] for pair in overlapping_invocations(_record(_stamped(t(0), None, t(12)), _stamped(t(11), t(13))))
            ] == [(1, 2)]
    nested = _record(_stamped(t(0), t(50)), _stamped(t(10), t(20)), _stamped(t(30), t(40)))
    assert [pair[:2] for pair in overlapping_invocations(nested)] == [(1, 2), (1, 3)]
    # entries recorded before the stamps are not checked
    assert overlapping_invocations(_record({"mode": "full"}, _stamped(t(0), t(1)))) == []
    with pytest.raises(ValueError, match="invocation 1 ends .* before it starts"):
        invocation_span(_stamped(t(10), t(5)))
    with pytest.raises(ValueError, match="started_utc is 'yesterday'"):
        invocation_span(_stamped("yesterday", t(5)))


def test_publish_refuses_overlapping_invocations(tmp_path):
    """Before: a run of two invocations that ran at once (one read tables the other was writing) was published."""
    run = tmp_path / "run"
    output.save_json(_record(_stamped("2026-11-29T10:00:00Z", "2026-11-29T11:00:00Z"),
                             _stamped("2026-11-29T10:30:00Z", "2026-11-29T11:30:00Z")), run, "run_info")
    with pytest.raises(ValueError, match="invocations that ran at the same time .*invocation 2 started at "
                                         "2026-11-29T10:30:00Z, before invocation 1"):
        publish(run, tmp_path / "published")
    assert not (tmp_path / "published").exists()  # refused before anything is written


def test_run_lines_show_each_invocations_times_and_flag_an_overlap():
    lines = results._run_lines(_record({"mode": "full", "minutes": 2.0},
                                       _stamped("2026-11-29T10:00:00Z", "2026-11-29T11:00:00Z"),
                                       _stamped("2026-11-29T10:30:00Z", None, "2026-11-29T10:40:00Z")))
    first, second, third = (line for line in lines if line.startswith("- invocation"))
    assert "UTC" not in first and "Z" not in first.split("git commit")[-1]  # recorded before the stamps
    assert "2026-11-29T10:00:00Z to 2026-11-29T11:00:00Z" in second and "OVERLAP" not in second
    assert "2026-11-29T10:30:00Z to 2026-11-29T10:40:00Z (its last record)" in third
    assert "(OVERLAP: invocation 3 started at 2026-11-29T10:30:00Z, before invocation 2" in third


def _no_op_section(out, **_):
    pass


def test_every_invocation_records_its_start_and_end_in_order(tmp_path, monkeypatch):
    """The branch wip-53-run-record's idea, on main: started_utc, ended_utc and recorded_utc per invocation."""
    monkeypatch.setattr(main_module.theory, "run", _no_op_section)
    argv = ["--out", str(tmp_path), "--only", "theory", "--quick", "--no-progress", "--n-jobs", "1"]
    assert main_module.main(argv) == 0
    first = json.loads((tmp_path / "tables" / "run_info.json").read_text())
    assert main_module.main(argv) == 0
    second = json.loads((tmp_path / "tables" / "run_info.json").read_text())
    assert second["earlier_invocations"] == [{k: v for k, v in first.items() if k != "earlier_invocations"}]
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    for one in (first, second):
        assert one["status"] == "complete"
        assert all(stamp.fullmatch(one[key]) for key in ("started_utc", "ended_utc", "recorded_utc"))
        assert one["started_utc"] <= one["ended_utc"] == one["recorded_utc"]
    assert first["ended_utc"] <= second["started_utc"]
    assert overlapping_invocations(second) == []


def test_a_rebuild_keeps_the_stamped_record_byte_for_byte(tmp_path):
    output.save_json(_record(_stamped("2026-11-29T10:00:00Z", "2026-11-29T11:00:00Z"),
                             _stamped("2026-11-29T11:00:05Z", "2026-11-29T11:30:00Z")), tmp_path, "run_info")
    output.save_table(pd.DataFrame(dict(dataset=["stsa"], value=[1.0])), tmp_path, "some_table")
    record = tmp_path / "tables" / "run_info.json"
    before = record.read_bytes(), output.files.checksum_path(record).read_bytes()
    assert main_module.main(["--out", str(tmp_path), "--results-only", "--no-progress"]) == 0
    assert (record.read_bytes(), output.files.checksum_path(record).read_bytes()) == before
    assert "2026-11-29T11:00:05Z to 2026-11-29T11:30:00Z" in (tmp_path / "RESULTS.md").read_text()


# --------------------------------------------------------------------------- the structure scatter's error bars

def _structure_run(out):
    summary = pd.DataFrame(dict(dataset=["stsa"], layer=[10], C=[0.5], C_source=["pool"], rho_s=[1.0], r=[0.97],
                                mae=[0.06], baseline_rho_s=[1.0], baseline_r=[0.96], baseline_mae=[0.02]))
    output.save_table(summary, out, "structure_summary")
    rows = [dict(dataset="stsa", layer=10, fraction=f, seed=s, delta=f * 1.4, C=c,
                 Acc_true=0.6 + f / 4 + 0.01 * s * c / 0.5, Acc_pred=0.55 + f / 4 + 0.02 * s * c / 0.5)
            for f in (0.1, 0.5, 1.0) for s in range(5) for c in (0.5, 2.0)]  # C = 2 (a diagnostic): 4x the spread
    output.save_table(pd.DataFrame(rows), out, "structure_stsa_layer10")


def test_the_structure_scatter_writes_the_spread_and_draws_it(tmp_path, monkeypatch):
    """Before: structure_scatter held the means only and the figure had no error bars."""
    _structure_run(tmp_path)
    import matplotlib.axes

    drawn, original = [], matplotlib.axes.Axes.errorbar

    def spy(self, x, y, *args, **kwargs):
        drawn.append((kwargs.get("xerr"), kwargs.get("yerr")))
        return original(self, x, y, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    assert empirical_plots.plot_structure(tmp_path) is not None
    table = pd.read_csv(tmp_path / "tables" / "structure_scatter.csv")
    assert set(empirical_plots.STRUCTURE_SPREAD) <= set(table.columns) and (table.n_seeds == 5).all()
    # the seeds add 0.01 s (true) and 0.02 s (predicted): SD of 0, 1, ..., 4 times that, at the fixed C only
    assert np.allclose(table.Acc_true_sd, 0.01 * np.std(range(5), ddof=1))
    assert np.allclose(table.Acc_pred_sd, 0.02 * np.std(range(5), ddof=1))
    assert np.allclose(table.Acc_true, 0.6 + table.fraction / 4 + 0.02)
    ((xerr, yerr),) = drawn
    assert np.allclose(xerr, table.Acc_true_sd) and np.allclose(yerr, table.Acc_pred_sd)


def test_a_published_copy_redraws_the_structure_scatter_from_its_table(tmp_path, monkeypatch):
    """A published copy has structure_scatter but not the per-setting tables: the figure is drawn from the saved
    table, with bars when it has the spread and without (said in the title) when it was written before it."""
    _structure_run(tmp_path)
    empirical_plots.plot_structure(tmp_path)
    (tmp_path / "tables" / "structure_stsa_layer10.csv").unlink()
    figure = tmp_path / "figures" / "structure_scatter.png"
    figure.unlink()
    assert empirical_plots.plot_structure(tmp_path) == figure and figure.exists()
    published = pd.read_csv(PUBLISHED / "tables" / "structure_scatter.csv")
    assert set(empirical_plots.STRUCTURE_SPREAD) <= set(published.columns)  # the published run writes the spread
    output.save_table(published, tmp_path, "structure_scatter")
    assert empirical_plots.plot_structure(tmp_path) == figure
    old = published.drop(columns=list(empirical_plots.STRUCTURE_SPREAD))  # a table written before the spread
    output.save_table(old, tmp_path, "structure_scatter")
    assert empirical_plots.plot_structure(tmp_path) == figure


# --------------------------------------------------------------------------- claims no row can test

def test_the_paper_claims_without_a_row_get_one_that_says_why(tmp_path):
    """Before: "gains most pronounced on HateXplain/Sarcasm" and "performance determined by delta, not n" had no
    row in the claims table."""
    output.save_json({"hidden_size": 576, "model": "smollm2"}, tmp_path, "empirical_setup")
    table = claims.claims_table(tmp_path)
    pronounced = table[table.claim.str.contains("most pronounced on harder semantic concepts such as HateXplain")]
    ratio = table[table.claim.str.contains("determined by delta = n/p rather than the absolute scale of n")]
    assert len(pronounced) == len(ratio) == 1
    for row in (pronounced.iloc[0], ratio.iloc[0]):
        assert row.ours.startswith("not testable here: ") and row.verdict == "--" and row.family == "paper"
    assert "HateXplain is not among our datasets" in pronounced.iloc[0].ours
    assert "hateeval" in pronounced.iloc[0].ours and "+3.51 pts (HateXplain)" in pronounced.iloc[0].paper
    assert "p = 576" in ratio.iloc[0].ours
