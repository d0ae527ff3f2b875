"""paper_figures' results layer: interval statistics against independent references, the claims
table and its verdicts, RESULTS.md, the empirical figures, --force and the one progress display."""
import json
import os
import re
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from empirical.common import files
from paper_figures import claims, empirical_plots, output, verdicts
from paper_figures.__main__ import main
from paper_figures.progress import RunProgress, silence_libraries
from paper_figures.results import write_results

DATASETS = ("stsa", "cities", "common", "counterfact", "hateeval", "sarcasm", "coinflip")
SEEDS = (42, 0, 1, 2, 3)


# --------------------------------------------------------------------------------------------- statistics
@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.3, 1.0), min_size=2, max_size=12))
def test_seed_interval_without_correction_is_the_t_interval(values):
    mean, lo, hi = claims.seed_interval(values, test_train_ratio=0.0)
    v = np.asarray(values)
    assert mean == pytest.approx(v.mean())
    if v.std() > 1e-12:
        ref = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
        assert (lo, hi) == pytest.approx(ref, rel=1e-9, abs=1e-12)
        # the Nadeau-Bengio correction widens it by sqrt(1 + k * n_test / n_train)
        _, clo, chi = claims.seed_interval(values)
        assert (chi - clo) / (hi - lo) == pytest.approx(np.sqrt(1 + len(v) * verdicts.TEST_TRAIN_RATIO))


def test_wilson_interval_matches_published_values():
    # Wilson 95 % interval for 9/10 (Newcombe 1998, Table I): 0.5958 to 0.9821
    share, lo, hi = claims.wilson_interval(9, 10)
    assert share == 0.9 and lo == pytest.approx(0.5958, abs=1e-4) and hi == pytest.approx(0.9821, abs=1e-4)
    assert np.isnan(claims.wilson_interval(0, 0)[0])


def _fake_run(out, *, raptor_gain=0.05, seed=0):
    """Tables shaped like a real run's, with RAPTOR better than GCS by ``raptor_gain`` on every split."""
    rng = np.random.default_rng(seed)
    by_seed, frames = [], []
    for name in DATASETS:
        for s in SEEDS:
            base = 0.7 + 0.02 * rng.standard_normal()
            acc = {"RAPTOR": base + raptor_gain, "GCS": base, "xRFM": base - 0.01 + 0.03 * rng.standard_normal(),
                   "DiffMeans": base - 0.1}
            for m, a in acc.items():
                by_seed.append(dict(dataset=name, method=m, seed=s, best=a, mean=a - 0.1, best_layer=5))
                layers = pd.DataFrame(dict(dataset=name, layer=np.arange(1, 6), method=m,
                                           test_accuracy=a - 0.1 + 0.02 * np.arange(5) / 4,
                                           fit_time_s={"RAPTOR": 0.3, "GCS": 3.0, "xRFM": 2.0, "DiffMeans": 0.01}[m]))
                frames.append(layers.assign(seed=s))
    grouped = [dict(r, dataset="counterfact_grouped") for r in by_seed if r["dataset"] == "counterfact"]
    output.save_table(pd.DataFrame(by_seed + grouped), out, "accuracy_by_seed")
    layers = pd.concat(frames, ignore_index=True)
    for (name, s), d in layers.groupby(["dataset", "seed"]):
        output.save_table(d.drop(columns="seed"), out, f"layers_{name}" if s == 42 else f"layers_{name}_seed{s}")
    for name in ("stsa", "hateeval", "sarcasm"):
        rows = [dict(dataset=name, layer=layer, method=m, robust=r + 0.01 * layer, ci_low=r, ci_high=r + 0.02,
                     K=20, median_fit_time_s=0.1)
                for layer in (1, 4, 7, 10) for m, r in (("RAPTOR", 0.9), ("GCS", 0.88), ("xRFM", 0.6))]
        output.save_table(pd.DataFrame(rows), out, f"stability_{name}")
        equal = [dict(r, method="RAPTOR (train only)", robust=r["robust"] - 0.01)
                 for r in rows if r["method"] == "RAPTOR"]
        output.save_table(pd.DataFrame(equal), out, f"stability_equal_data_{name}")
    output.save_table(pd.DataFrame(dict(dataset=["stsa", "Overall"], layers=[30, 30], separable=[27, 27],
                                        perc_zero=[25, 25], convergence_warnings=[0, 0])), out, "separability_summary")
    output.save_table(pd.DataFrame(dict(dataset="stsa", rows=["train", "train", "all", "all"],
                                        labels=["real", "shuffled"] * 2, layers=20, separable=[20, 20, 20, 0],
                                        n=[600, 600, 1200, 1200], p=576)).assign(n_over_p=lambda d: d.n / d.p),
                      out, "separability_control_summary")
    output.save_table(pd.DataFrame(dict(dataset=["sarcasm", "counterfact"], direction=["towards", "away"],
                                        layers=["1-30", ""], n_pairs=[480, 0], success_rate=[1.0, np.nan],
                                        intervention_rate=[0.6, np.nan], alpha_median=[2.0, np.nan],
                                        alpha_p90=[20.0, np.nan], alpha_max=[50.0, np.nan], tau=["--", 0.7],
                                        note=["", "no layer"])), out, "steering_summary")
    pairs = pd.DataFrame(dict(layer=np.repeat(np.arange(1, 31), 16), abs_alpha=rng.lognormal(size=480),
                              intervened=rng.random(480) < 0.6, success=True, dataset="sarcasm", direction="towards"))
    output.save_table(pairs, out, "steering_pairs")
    output.save_table(pd.DataFrame(dict(dataset=["stsa", "stsa", "common", "common", "hateeval", "hateeval"],
                                        layer=[10, 20] * 3, C=1.0, C_source="pool",
                                        rho_s=[0.9, 0.95, 0.85, 0.99, 0.9, 0.8], r=[0.9, 0.92, 0.8, 0.97, 0.95, 0.85],
                                        mae=[0.05, 0.06, 0.04, 0.05, 0.06, 0.05], baseline_rho_s=0.9, baseline_r=0.9,
                                        baseline_mae=[0.02, 0.03, 0.02, 0.02, 0.03, 0.02])), out, "structure_summary")
    for name, layer in (("stsa", 10), ("stsa", 20)):
        t = pd.DataFrame(dict(fraction=np.repeat([0.25, 0.5, 1.0], 2), seed=[0, 1] * 3, C=1.0,
                              delta=np.repeat([0.25, 0.5, 1.0], 2), Acc_true=[0.6, 0.62, 0.7, 0.71, 0.8, 0.79],
                              Acc_pred=[0.55, 0.56, 0.6, 0.61, 0.66, 0.65]))
        output.save_table(t, out, f"structure_{name}_layer{layer}")
    lams = [0.01, 0.1, 1.0]
    output.save_table(pd.DataFrame(dict(delta=1.0, kappa=2.0, lam=lams, p=400, replicates=4,
                                        mc_subsample=[0.60, 0.65, 0.70], se_subsample=0.01,
                                        cos_subsample=[0.601, 0.652, 0.69],
                                        mc_independent=[0.20, 0.30, 0.40], se_independent=0.02,
                                        cos_independent=[0.21, 0.29, 0.41])), out, "stability_vs_lambda")
    output.save_table(pd.DataFrame(dict(delta=2.0, lam=0.1, kappa=2.0, quantity=["alpha", "sigma"], std_slope=-0.5,
                                        std_slope_se=0.01, abs_error_slope=[np.nan, -1.07],
                                        abs_error_slope_se=[np.nan, 0.08],
                                        resolved_ps=[0, 4], resolved_p_max=[0, 200])), out, "finite_size_slopes")
    output.save_table(pd.DataFrame(dict(theory=np.linspace(0.6, 0.9, 50), mean=np.linspace(0.6, 0.9, 50) + 0.001,
                                        se=0.01, replicates=8, p=400)), out, "theory_vs_sims")
    return out


def test_claims_table_reads_a_run_and_gives_the_planted_verdicts(tmp_path):
    _fake_run(tmp_path, raptor_gain=0.05)
    table = claims.claims_table(tmp_path)
    by = table.set_index("claim")
    beats = table[table.claim == "RAPTOR beats GCS on mean-over-layers accuracy in every setting"]
    assert list(beats.datasets) == ["6", "4, no Cities or Counterfact"] and set(beats.verdict) == {"holds"}
    assert "+5.0 pts" in beats.ours.iloc[0] and "counterfact" not in beats.ours.iloc[1]
    assert "cities" not in beats.ours.iloc[1]
    assert by.loc["RAPTOR trains faster than xRFM and GCS (per-layer time)", "verdict"] == "holds"
    assert by.loc["RAPTOR's concept vectors are more stable than xRFM's under 20 % ablations (the paper's protocol)",
                  "verdict"] == "holds"
    sep = by.loc["hidden states are (nearly) linearly separable at most layers"]
    assert "27/30" in sep.ours and "shuffled 0/20" in sep.ours and sep.verdict == "holds"  # all rows: control fails
    steer = by.loc["adaptive GCAV steering reaches the probe target (success rate)"]
    assert "no layer reaches tau: counterfact away" in steer.ours and steer.verdict == "--"
    assert "by construction" in steer.ours
    assert set(table.verdict) <= {"holds", "does not hold", "inconclusive", "--"}


def test_no_difference_is_inconclusive_and_a_loss_does_not_hold(tmp_path):
    _fake_run(tmp_path / "tie", raptor_gain=0.0)
    tie = claims.claims_table(tmp_path / "tie").set_index("claim")
    assert set(tie.loc["RAPTOR beats GCS on mean-over-layers accuracy in every setting", "verdict"]) == {"inconclusive"}
    _fake_run(tmp_path / "loss", raptor_gain=-0.05)
    loss = claims.claims_table(tmp_path / "loss").set_index("claim")
    assert set(loss.loc["RAPTOR beats GCS on mean-over-layers accuracy in every setting",
                        "verdict"]) == {"does not hold"}
    # "competitive" is non-inferiority within the 1-point margin: a 5-point loss fails it too
    assert set(loss.loc["RAPTOR beats or ties GCS on best-layer accuracy", "verdict"]) == {"does not hold"}


def test_paired_differences_average_over_the_six_paper_datasets(tmp_path):
    by_seed = output.load_table(_fake_run(tmp_path, raptor_gain=0.03), "accuracy_by_seed")
    d = claims.paired_differences(by_seed)
    avg = d[(d.dataset == "average (6)") & (d.baseline == "GCS") & (d.metric == "best")].iloc[0]
    assert avg["diff"] == pytest.approx(0.03) and avg.n_seeds == len(SEEDS)
    assert "coinflip" in set(d.dataset)  # reported, but not in the average


def test_figures_results_and_index_from_a_run(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    _fake_run(tmp_path)
    made = empirical_plots.plot_all(tmp_path)
    stems = {p.stem for p in made}
    assert stems == {"layerwise_accuracy", "accuracy_differences", "cost_dumbbell", "stability_by_layer",
                     "steering_metrics", "structure_scatter"}
    for stem in stems:  # PNG and PDF, with the numbers behind it as CSV
        assert (tmp_path / "figures" / f"{stem}.pdf").read_bytes()[:4] == b"%PDF"
    for table in ("accuracy_differences", "layerwise_accuracy", "stability_differences", "steering_alpha_by_layer",
                  "structure_scatter", "cost_median_fit_time_s"):
        assert (tmp_path / "tables" / f"{table}.csv").exists()
    text = write_results(tmp_path).read_text()
    assert "## The paper's claims" in text
    header = ("| area | claim | datasets | family | rule | paper | ours | mde | p | verdict_per_claim | p_holm "
              "| verdict |")
    assert header in text
    assert text.index("Test families") < text.index("## The paper's claims")  # the families come before the numbers
    # the verdict rules come before the numbers
    assert text.index("### How a claim is judged (fixed before the run)") < text.index("## The paper's claims")
    assert "![Accuracy: RAPTOR minus each baseline](figures/accuracy_differences.png)" in text
    # the numbers behind a figure are embedded under it; a table without a figure gets its own heading
    structure = text.index("![The delta-sweep structure predictor](figures/structure_scatter.png)")
    assert structure < text.index("`tables/structure_summary.csv`:") < structure + 2000
    assert "### Linear separability" in text and "| stsa | 30 | 27 | 25 | 0 |" in text
    assert "### Linear separability against shuffled labels" in text
    assert "| counterfact | away |  |" in text  # a missing value is an empty cell, not "nan"
    assert main(["--out", str(tmp_path), "--results-only"]) == 0
    assert "RESULTS.md" in (tmp_path / "README.md").read_text()


# --------------------------------------------------------------------------------------------- the run itself
def test_force_ignores_tables_written_before_the_run(tmp_path):
    output.save_table(pd.DataFrame({"a": [1]}), tmp_path, "old")
    old = tmp_path / "tables" / "old.csv"
    past = time.time() - 100
    os.utime(old, (past, past))
    try:
        output.force_recompute(time.time() - 1)
        assert output.load_table(tmp_path, "old") is None  # a step with this table is redone
        output.save_table(pd.DataFrame({"a": [2]}), tmp_path, "new")
        assert output.load_table(tmp_path, "new")["a"].item() == 2  # what this run wrote is read back
    finally:
        output.force_recompute(None)
    assert output.load_table(tmp_path, "old")["a"].item() == 1


def test_progress_display_is_one_bar_and_silent_when_off(capsys):
    off = RunProgress(10, enabled=False)
    with off.step("x", 5):
        pass
    off.close()
    quiet = capsys.readouterr()
    assert quiet.out == "" and quiet.err == ""
    steps = RunProgress(10, enabled=True)
    steps.instant_seconds = 0.0  # these instant steps count as work
    with steps.step("extract stsa", 4):
        pass
    with steps.step("fit", 6):
        pass
    steps.close()
    err = capsys.readouterr().err
    assert "now: extract stsa" in err and "ETA" in err and "100%" in err
    assert set(steps.timings) == {"extract stsa", "fit"}


def test_libraries_progress_bars_are_silenced():
    hf_logging = pytest.importorskip("transformers.utils.logging")

    try:
        silence_libraries()
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.enable_progress_bar()


def _clean_run_record(run, commit="a" * 40, **changes):
    """A run record of one complete invocation at ``commit`` on a clean tree (plus ``changes``)."""
    output.save_json(dict(dict(mode="full", sections=["theory"], n_jobs=2, status="complete", git_commit=commit,
                               git_dirty=False, cpus=2, minutes=1.0, earlier_invocations=[]), **changes),
                     run, "run_info")


def _published_run(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    run = _fake_run(tmp_path / "run")
    empirical_plots.plot_all(run)
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(15, 4.4))  # as wide as the spectral section's figures
    ax.plot([0, 1], [0, 1])
    output.save_figure(fig, run, "spectral_stsa")
    fig, ax = plt.subplots()  # the behavioural steering figure (its own section draws it)
    ax.plot([0, 1], [1, 0])
    output.save_figure(fig, run, "steering_text")
    fig, ax = plt.subplots()  # its test: the concept directions among random ones
    ax.plot([0, 1], [0.5, 0.5])
    output.save_figure(fig, run, "steering_text_null")
    fig, ax = plt.subplots()  # and the learning-curve figure (its own section draws it)
    ax.plot([2, 4, 8], [0.01, 0.02, 0.03])
    output.save_figure(fig, run, "learning_curves")
    output.save_table(pd.DataFrame(dict(a=range(50))), run, "long_unread")  # a table nothing cites
    _clean_run_record(run)
    return run


def test_publish_writes_a_small_committable_copy(tmp_path):
    from paper_figures.publish import KEY_FIGURES, publish

    run = _published_run(tmp_path)
    written = publish(run, tmp_path / "docs")
    names = {p.name for p in written}
    assert {f"{stem}.png" for stem in KEY_FIGURES} <= names and {"RESULTS.md", "claims.csv"} <= names
    assert sum(p.stat().st_size for p in written) < 1_000_000
    text = (tmp_path / "docs" / "RESULTS.md").read_text()
    assert text == (run / "RESULTS.md").read_text()  # verbatim: the copy has the run's layout
    for stem in re.findall(r"\(figures/([^)]+)\.png\)", text):  # every cited figure is committed
        assert (tmp_path / "docs" / "figures" / f"{stem}.png").is_file(), stem
    for name in re.findall(r"\(tables/([^)]+)\)", text):  # every cited table too, with its checksum
        assert files.verify_checksum(tmp_path / "docs" / "tables" / name), name
    tables = {p.name for p in (tmp_path / "docs" / "tables").glob("*") if not p.name.startswith(".")}
    assert {"accuracy_by_seed.csv", "layers_stsa.csv", "run_info.json"} <= tables  # what the claims read
    assert "long_unread.csv" not in tables  # nothing that is not read
    for stem in re.findall(r"\(figures/([^)]+)\.png\)", text):  # a figure comes with the table of its numbers
        assert f"{stem}.csv" in tables or not (run / "tables" / f"{stem}.csv").is_file(), stem
    for table in tables:
        assert files.checksum_path(tmp_path / "docs" / "tables" / table).exists(), table
    from PIL import Image

    from paper_figures.style import method_color
    with Image.open(tmp_path / "docs" / "figures" / "accuracy_differences.png") as im:
        assert im.width <= 900
        colours = {rgb for _, rgb in im.convert("RGB").getcolors(maxcolors=1 << 20)}
    for method in ("GCS", "xRFM", "DiffMeans"):  # every series keeps its exact colour (no palette merging)
        hex_colour = method_color(method).lstrip("#")
        assert tuple(int(hex_colour[i:i + 2], 16) for i in (0, 2, 4)) in colours, method


def test_accuracy_by_seed_takes_best_and_mean_per_split_seed():
    from paper_figures.empirical_figures import accuracy_by_seed

    layers = pd.DataFrame(dict(dataset="d", method="RAPTOR", seed=np.repeat([42, 0], 3), layer=[1, 2, 3] * 2,
                               test_accuracy=[0.6, 0.8, 0.7, 0.5, 0.55, 0.9]))
    t = accuracy_by_seed(layers).set_index("seed")
    assert t.loc[42, "best"] == 0.8 and t.loc[42, "best_layer"] == 2 and t.loc[42, "mean"] == pytest.approx(0.7)
    assert t.loc[0, "best"] == 0.9 and t.loc[0, "best_layer"] == 3


def test_theory_sections_run_end_to_end_without_progress_output(tmp_path, capfd):
    assert main(["--out", str(tmp_path), "--only", "theory", "stability", "--quick", "--no-progress",
                 "--n-jobs", "1"]) == 0
    captured = capfd.readouterr()
    assert captured.err == ""  # --no-progress: no bar, no library output
    assert captured.out.count("\n") == 1 and "RESULTS.md" in captured.out
    text = (tmp_path / "RESULTS.md").read_text()
    assert "the corrected fixed point matches Monte Carlo simulation" in text
    assert (tmp_path / "figures" / "theory_accuracy.pdf").exists()
    info = (tmp_path / "tables" / "run_info.json").read_text()
    assert '"mode": "quick"' in info and "theory: fixed point vs simulation" in info
    first = json.loads(info)
    # a second invocation resumes both sections (nothing recomputed) and keeps the first one's timings
    assert main(["--out", str(tmp_path), "--only", "theory", "stability", "--quick", "--no-progress",
                 "--n-jobs", "1"]) == 0
    second = json.loads((tmp_path / "tables" / "run_info.json").read_text())
    assert first["earlier_invocations"] == []
    assert second["earlier_invocations"] == [{k: v for k, v in first.items() if k != "earlier_invocations"}]
    assert second["section_seconds"]["theory"] < 2.0 < first["section_seconds"]["theory"]


def test_resumed_steps_leave_the_total_so_the_eta_counts_remaining_work():
    steps = RunProgress(100, enabled=False)
    with steps.step("cached extraction", 60):  # instant: resumed
        pass
    assert steps.total == pytest.approx(40) and steps.done == 0
    steps.instant_seconds = 0.0  # make the next step count as work
    with steps.step("fit", 40):
        pass
    assert steps.done == pytest.approx(40)
    steps.close()


def test_every_explanation_belongs_to_a_claim_the_table_can_produce(tmp_path):
    from paper_figures.results import EXPLANATIONS
    _fake_run(tmp_path)
    produced = set(claims.claims_table(tmp_path).claim)
    assert [k for k in EXPLANATIONS if k not in produced] == []


def test_a_missing_data_directory_is_one_line_and_exit_code_2(tmp_path, capsys):
    pytest.importorskip("transformers")  # the empirical section loads the model side first
    code = main(["--out", str(tmp_path), "--only", "empirical", "--quick", "--no-progress",
                 "--data-dir", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("python -m paper_figures: error:") and "nowhere" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("slope,resolved,verdict", [(-1.07, 4, "holds"), (0.6, 4, "does not hold"),
                                                    (-1.07, 2, "inconclusive")])
def test_finite_size_claim_tests_the_bias_slope_where_it_is_resolved(tmp_path, slope, resolved, verdict):
    output.save_table(pd.DataFrame(dict(delta=2.0, lam=0.1, kappa=2.0, quantity=["alpha", "sigma"], std_slope=-0.5,
                                        std_slope_se=0.01, abs_error_slope=[np.nan, slope],
                                        abs_error_slope_se=[np.nan, 0.08], resolved_ps=[0, resolved],
                                        resolved_p_max=[0, 200])), tmp_path, "finite_size_slopes")
    row = claims.claims_table(tmp_path).set_index("claim").loc[
        "simulation converges to the theory as p grows (bias falls with p)"]
    assert row.verdict == verdict and "alpha bias not resolved" in row.ours and "(CLT, not a test)" in row.ours


def test_two_replica_claim_fails_loudly_on_a_table_without_its_columns(tmp_path):
    output.save_table(pd.DataFrame(dict(lam=[0.1], mean=[0.5], se=[0.01])), tmp_path, "stability_vs_lambda")
    with pytest.raises(ValueError, match="stability_vs_lambda"):
        claims.claims_table(tmp_path)


def test_separability_without_a_failing_control_carries_no_verdict(tmp_path):
    _fake_run(tmp_path)
    control = output.load_table(tmp_path, "separability_control_summary").assign(separable=20)
    output.save_table(control, tmp_path, "separability_control_summary")
    table = claims.claims_table(tmp_path).set_index("claim")
    row = table.loc["hidden states are (nearly) linearly separable at most layers"]
    assert row.verdict == "--" and "cannot fail" in row.ours


def test_separability_is_decided_on_the_learning_curve_rows_when_present(tmp_path):
    """With the learning-curve section's table (n = 2.5 (p + 1), where shuffled labels fail) the claim is tested
    there; the paper's row sets (n < 2 (p + 1)) are shown as what cannot fail."""
    _fake_run(tmp_path)
    control = output.load_table(tmp_path, "separability_control_summary").assign(separable=[20, 20, 17, 20])
    output.save_table(control, tmp_path, "separability_control_summary")
    large = pd.DataFrame(dict(dataset="stsa", rows="non-test", labels=["real", "shuffled"], layers=10,
                              separable=[3, 0], undecided=0, n=1443, p=576)).assign(n_over_p=lambda d: d.n / d.p)
    row = claims.claims_table(tmp_path).set_index("claim").loc[
        "hidden states are (nearly) linearly separable at most layers"]
    assert "stsa real 17/20, shuffled 20/20 (all rows, shuffled labels separate at n = 1200)" in row.ours
    assert row.verdict == "--" and "cannot fail" in row.ours  # no informative row set without the large table
    output.save_table(large, tmp_path, "separability_large_summary")
    row = claims.claims_table(tmp_path).set_index("claim").loc[
        "hidden states are (nearly) linearly separable at most layers"]
    assert "stsa 3/10 (shuffled 0/10; non-test rows, n = 1443)" in row.ours
    assert row.verdict not in ("--", "holds")  # 3 of 10 layers: not a majority


def test_separability_is_decided_per_dataset_where_random_labels_fail(tmp_path):
    """Issue 53 section 1: a dataset whose rows are below 2 (p + 1) (Cities, n = 748 = 1.30 p, shuffled labels
    separate 10/10) cannot fail, so it is not counted, even when the other datasets' shuffled labels fail at the
    same row set (the old rule pooled the row set across datasets and counted 40/60, p 0.0067).  The count is
    30/50 (p 0.10) and every dataset's count is in the cell."""
    _fake_run(tmp_path)
    counts = dict(cities=(10, 10, 748), common=(0, 0, 1443), counterfact=(0, 0, 1443), hateeval=(10, 0, 1443),
                  sarcasm=(10, 0, 1443), stsa=(10, 0, 1443))
    large = pd.DataFrame([dict(dataset=name, rows="non-test", labels=labels, layers=10, separable=k, undecided=0,
                               n=n, p=576, n_over_p=n / 576)
                          for name, (k_real, k_shuf, n) in counts.items()
                          for labels, k in (("real", k_real), ("shuffled", k_shuf))])
    output.save_table(large, tmp_path, "separability_large_summary")
    row = claims.claims_table(tmp_path).set_index("claim").loc[
        "hidden states are (nearly) linearly separable at most layers"]
    assert "30/50 layers" in row.ours and "40/60" not in row.ours
    assert "cities real 10/10, shuffled 10/10 (non-test rows, n = 748 < 2 (p + 1) = 1154)" in row.ours
    for name in ("common", "counterfact"):
        assert f"{name} 0/10 (shuffled 0/10" in row.ours
    assert row.p == pytest.approx(stats.binomtest(30, 50, 0.5, alternative="greater").pvalue)
    assert row.verdict_per_claim == "inconclusive"


#: Every claim a complete run must produce (a claim missing from a run is a bug, not a silent drop).
EVERY_CLAIM = (
    "RAPTOR beats GCS on mean-over-layers accuracy in every setting", "RAPTOR beats or ties GCS on best-layer accuracy",
    "RAPTOR matches or exceeds xRFM on best-layer accuracy", "RAPTOR beats xRFM on mean-over-layers accuracy",
    "grid-average best-layer accuracy: RAPTOR above GCS and not below xRFM",
    "Coinflip (reported separately, not in the paper's averages)",
    "RAPTOR's concept vectors are more stable than xRFM's under 20 % ablations (the paper's protocol)",
    "RAPTOR's stability is competitive with GCS's (the paper's protocol)",
    "GCS's concept vectors are slightly more stable than RAPTOR's (the paper's protocol)",
    "RAPTOR's concept vectors are more stable than xRFM's under 20 % ablations (equal data: RAPTOR without the "
    "train + validation refit)",
    "RAPTOR trains faster than xRFM and GCS (per-layer time)",
    "hidden states are (nearly) linearly separable at most layers",
    "adaptive GCAV steering reaches the probe target (success rate)",
    "steering with RAPTOR's concept vectors moves the model's answer beyond random directions of the same strength "
    "(answer log-odds, held-out half)",
    "the corrected fixed point matches Monte Carlo simulation",
    "simulation converges to the theory as p grows (bias falls with p)",
    "the two-replica stability theory matches simulated ablations",
)


def _rebuild(published, tmp_path):
    """Copy a published folder and rebuild it with ``--results-only`` (as a reader would): claims.csv and RESULTS.md
    are regenerated (the copy's are deleted first), and no table (every figure's numbers included) changes."""
    copy = tmp_path / "rebuilt"
    shutil.copytree(published, copy)
    tables = {path.name: path.read_bytes() for path in (copy / "tables").iterdir()}
    for name in ("claims.csv", "RESULTS.md"):
        (copy / name).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no table may be distrusted ("recomputing it")
        assert main(["--results-only", "--out", str(copy), "--no-progress"]) == 0
    assert {name: (copy / "tables" / name).read_bytes() for name in tables} == tables
    return copy


def _same_claims(rebuilt, published):
    """claims.csv rebuilt equals the published one: text columns exactly, numbers to 1e-12 relative.  Its floats are
    written at full precision, and the oldest supported numpy/pandas (.ci/constraints-floors.txt) sum in another order,
    so a value may differ in its last bit (index 498 of docs/results/claims.csv on 2026-11-29); RESULTS.md, which
    states them rounded, is compared byte for byte."""
    a = pd.read_csv(rebuilt, dtype=str, keep_default_na=False)
    b = pd.read_csv(published, dtype=str, keep_default_na=False)
    assert list(a.columns) == list(b.columns) and a.shape == b.shape
    for column in a.columns:
        for i, (x, y) in enumerate(zip(a[column], b[column])):
            try:
                same = x == y or np.isclose(float(x), float(y), rtol=1e-12, atol=0)
            except ValueError:  # text
                same = False
            assert same, (column, i, x, y)


def test_a_rebuild_never_changes_a_checksummed_table(tmp_path):
    """On a published copy the per-seed layer tables are absent: redrawing ``layerwise_accuracy`` from the seed-42
    tables alone replaced the five-seed table (n_seeds 5 -> 1) and wrote it a new checksum.  The rebuild now keeps the
    published table and figure, and says so; outside a rebuild the table is rewritten as before."""
    run = _fake_run(tmp_path / "run")
    empirical_plots.plot_layerwise(run)
    published = (run / "tables" / "layerwise_accuracy.csv").read_bytes()
    for path in (run / "tables").glob("layers_*_seed*.csv"):
        path.unlink()
    with output.rebuilding(), pytest.warns(UserWarning, match="plot_layerwise not redrawn: the rebuild would change "
                                                             "the checksummed table"):
        empirical_plots.plot_all(run)
    assert (run / "tables" / "layerwise_accuracy.csv").read_bytes() == published
    empirical_plots.plot_layerwise(run)  # a run (not a rebuild) writes what its tables give
    assert (run / "tables" / "layerwise_accuracy.csv").read_bytes() != published
    with output.rebuilding():  # the same content again: nothing to refuse
        empirical_plots.plot_layerwise(run)


def test_a_published_run_rebuilds_itself_byte_for_byte(tmp_path):
    from paper_figures.publish import publish

    run = _published_run(tmp_path)
    publish(run, tmp_path / "docs")
    copy = _rebuild(tmp_path / "docs", tmp_path)
    _same_claims(copy / "claims.csv", tmp_path / "docs" / "claims.csv")
    assert (copy / "RESULTS.md").read_bytes() == (tmp_path / "docs" / "RESULTS.md").read_bytes()


def test_the_committed_results_rebuild_themselves():
    """docs/results rebuilds byte for byte from its own tables (a publication from one clean commit)."""
    from paper_figures.publish import check_one_clean_commit
    root = Path(__file__).resolve().parent.parent / "docs" / "results"
    if not (root / "tables" / "run_info.json").exists():
        pytest.skip("docs/results predates self-rebuilding publications (run record at the top level): the next full "
                    "run republishes it")
    check_one_clean_commit(output.load_json(root, "run_info"), root)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        copy = _rebuild(root, Path(tmp))
        _same_claims(copy / "claims.csv", root / "claims.csv")
        assert (copy / "RESULTS.md").read_bytes() == (root / "RESULTS.md").read_bytes()


@pytest.mark.parametrize("record", [dict(git_dirty=True), dict(earlier_invocations=[dict(git_commit="b" * 40,
                                                                                              git_dirty=False)]),
                                    None])
def test_publish_refuses_a_run_from_mixed_commits_or_a_dirty_tree(tmp_path, record):
    from paper_figures.publish import publish

    run = _fake_run(tmp_path / "run")
    if record is not None:
        _clean_run_record(run, **record)
    with pytest.raises(ValueError, match="one commit on a clean tree|no run record"):
        publish(run, tmp_path / "docs")
    assert not (tmp_path / "docs").exists()
    if record is not None:
        assert publish(run, tmp_path / "docs", allow_mixed_commits=True)


def test_an_interrupted_invocation_is_recorded(tmp_path, monkeypatch):
    from paper_figures import theory

    def killed(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(theory, "run", killed)
    try:
        code = main(["--only", "theory", "--out", str(tmp_path), "--no-progress"])
    except KeyboardInterrupt:
        code = 130
    assert code != 0
    info = output.load_json(tmp_path, "run_info")
    assert info["status"] == "interrupted" and info["sections"] == ["theory"] and "git_commit" in info
    monkeypatch.undo()


def test_a_complete_run_produces_every_claim_row(tmp_path):
    table = claims.claims_table(_fake_run(tmp_path))
    assert [c for c in EVERY_CLAIM if c not in set(table.claim)] == []
    assert any(c.startswith("Counterfact on a subject-grouped split") for c in table.claim)
    tested = table[table.verdict != "--"]
    assert tested.p_holm.notna().all()
    # a row without a verdict is untested (no rule) or has a design that cannot decide (and says so)
    no_verdict = table[table.verdict == "--"]
    assert ((no_verdict.rule == "--") | no_verdict.mde.str.startswith("this design ")).all()


def test_readme_claims_table_is_generated_from_the_committed_claims_csv():
    from pathlib import Path

    from paper_figures.publish import README_END, README_START, readme_claims_block
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    block = readme[readme.index(README_START):readme.index(README_END) + len(README_END)]
    assert block == readme_claims_block(root / "docs" / "results" / "claims.csv")
    committed = pd.read_csv(root / "docs" / "results" / "claims.csv", keep_default_na=False)
    results = (root / "docs" / "results" / "RESULTS.md").read_text()
    # every row the README quotes is a row of the committed RESULTS.md (same claim, same verdict)
    for r in committed.itertuples():
        assert any(r.claim.replace("|", "\\|") in line and f"| {r.verdict} |" in line for line in results.splitlines())


def test_sync_readme_rewrites_only_the_marked_block(tmp_path):
    from paper_figures.publish import README_END, README_START, sync_readme
    csv = tmp_path / "claims.csv"
    pd.DataFrame(dict(area=["x"], claim=["a | b"], ours=["1"], verdict=["holds"])).to_csv(csv, index=False)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nold\n{README_END}\noutro\n")
    text = sync_readme(readme, csv).read_text()
    assert text.startswith("intro\n") and text.endswith("\noutro\n") and "OLD-ROW" not in text and "a \\| b" in text
    (tmp_path / "plain.md").write_text("no markers")
    with pytest.raises(ValueError, match="plain.md"):
        sync_readme(tmp_path / "plain.md", csv)


def test_accuracy_intervals_stay_inside_zero_one():
    by_seed = pd.DataFrame(dict(dataset="coinflip", method="xRFM", seed=[42, 0, 1, 2, 3],
                                best=[1.0, 1.0, 0.99, 1.0, 1.0], mean=[0.01, 0.0, 0.02, 0.0, 0.0]))
    row = claims.accuracy_intervals(by_seed).iloc[0]
    best_ci, mean_ci = claims.seed_interval(by_seed.best)[1:], claims.seed_interval(by_seed["mean"])[1:]
    assert best_ci[1] > 1.0 and mean_ci[0] < 0.0  # the unclipped t-intervals leave [0, 1]
    assert row.best_high == 1.0 and row.mean_low == 0.0 and 0.0 < row.best_low < 1.0


def test_finite_size_bias_slope_over_the_resolved_p_alone_takes_t_with_n_minus_2_df(tmp_path):
    """A run without finite_size_convergence tests the slope over its 3 resolved p with a t quantile at 1 degree
    of freedom (issue 53 section 4: the normal interval +-1.96 se read p = 1.7e-20 where t gives 0.034)."""
    output.save_table(pd.DataFrame(dict(delta=2.0, lam=0.1, kappa=2.0, quantity=["sigma"], std_slope=-0.5,
                                        std_slope_se=0.01, abs_error_slope=[-0.97], abs_error_slope_se=[0.105],
                                        resolved_ps=[3], resolved_p_max=[100])), tmp_path, "finite_size_slopes")
    row = claims.claims_table(tmp_path).set_index("claim").loc[
        "simulation converges to the theory as p grows (bias falls with p)"]
    assert "-0.97 [-2.30, +0.36]" in row.ours and "t with 1 df" in row.ours
    assert row.p == pytest.approx(0.0346, abs=5e-4) and row.verdict_per_claim == "inconclusive"


def test_time_table_sums_every_invocation_by_phase():
    from paper_figures.results import time_table

    earlier = dict(step_seconds={"extract stsa": 120.0, "stsa: probes per layer, split seed 42": 60.0,
                                 "stsa: separability": 18.0})  # computed here, only read back below
    info = dict(step_seconds={"stsa: probes per layer, split seed 0": 30.0, "counterfact_grouped: probes per layer, "
                              "split seed 0": 6.0, "stsa: separability control (shuffled labels)": 12.0,
                              "stsa: separability": 0.1, "something new": 6.0},
                earlier_invocations=[earlier])
    t = time_table(info).set_index("phase")
    assert t.loc["extraction of hidden states (0 where cached)", "minutes"] == 2.0
    assert t.loc["probes per layer, the paper's split (seed 42)", "minutes"] == 1.0
    assert t.loc["probes per layer, the other split seeds", "minutes"] == 0.5
    assert t.loc["probes per layer, grouped Cities and Counterfact", "minutes"] == 0.1
    assert t.loc["separability (paper's test)", "minutes"] == 0.3
    assert t.loc["separability control (shuffled labels)", "minutes"] == 0.2
    assert t.loc["other", "steps"] == 1 and t.loc["total", "minutes"] == 4.2 and t.loc["total", "steps"] == 7


def test_time_table_takes_the_latest_invocation_that_computed_a_step():
    from paper_figures.results import time_table

    # redone under a cheaper protocol (faster, not a resume): the new time counts, not the larger old one
    first = dict(step_seconds={"stsa: directional stability (K=20)": 600.0, "stsa: separability": 18.0})
    second = dict(step_seconds={"stsa: directional stability (K=20)": 300.0, "stsa: separability": 0.0})
    # a resumed section that loads the model first takes seconds, a small fraction of its computing time
    first["step_seconds"]["steering: generated text"] = 2586.0
    info = dict(step_seconds={"stsa: directional stability (K=20)": 0.0, "stsa: separability": 0.2,
                              "steering: generated text": 12.0},
                earlier_invocations=[first, second])
    t = time_table(info).set_index("phase")
    assert t.loc["directional stability (paper's protocol)", "minutes"] == 5.0
    assert t.loc["separability (paper's test)", "minutes"] == 0.3
    assert t.loc["behavioural steering (steering_text)", "minutes"] == 43.1
    assert t.loc["total", "minutes"] - t.loc["total of the default sections (python -m paper_figures)",
                                              "minutes"] == pytest.approx(43.1)
    only_resumed = time_table(dict(step_seconds={"stsa: separability": 0.2})).set_index("phase")
    assert only_resumed.loc["total", "minutes"] == 0.0 and only_resumed.loc["total", "steps"] == 1
    # no recorded invocation computed it: its time is missing, and the table says so
    assert only_resumed.loc["total", "not_measured"] == 1 and t.loc["total", "not_measured"] == 0


@pytest.mark.parametrize("equal_gain,tuning_gain,expected", [(0.03, 0.02, ("holds", "holds")),
                                                             (0.0, 0.0, ("inconclusive", "inconclusive"))])
def test_equal_data_accuracy_and_the_fixed_C_ablation_rows(tmp_path, equal_gain, tuning_gain, expected):
    """The equal-data row compares RAPTOR's train-only fit with GCS on the same rows; the ablation compares RAPTOR
    with its own pipeline at C = 1; both verdicts follow the planted paired gains."""
    rng = np.random.default_rng(7)
    rows = []
    for name in DATASETS:
        for s in SEEDS:
            base = 0.7 + 0.02 * rng.standard_normal()
            noise = 0.004 * rng.standard_normal(4) if equal_gain == 0.0 else np.zeros(4)
            acc = {"RAPTOR": base + tuning_gain + 0.01, "RAPTOR (train only)": base + equal_gain + noise[0],
                   "GCS": base + noise[1], "xRFM": base - 0.05, "RAPTOR (C = 1)": base + 0.01 + noise[2]}
            if tuning_gain == 0.0:
                acc["RAPTOR (C = 1)"] = acc["RAPTOR"] + noise[3]
            rows += [dict(dataset=name, method=m, seed=s, best=a, mean=a - 0.1, best_layer=5) for m, a in acc.items()]
    output.save_table(pd.DataFrame(rows), tmp_path, "accuracy_by_seed")
    table = claims.claims_table(tmp_path).set_index("claim")
    equal = table.loc["RAPTOR beats GCS on mean-over-layers accuracy in every setting (equal data: every method fits "
                      "on the training rows, validation only selects)"]
    tuning = table.loc["ridge tuning: RAPTOR beats its own pipeline at a fixed C = 1 on the same train + validation "
                       "rows (grid-average mean-over-layers accuracy)"]
    assert equal.family == "robustness" and tuning.family == "extension"
    assert (equal.verdict_per_claim, tuning.verdict_per_claim) == expected
    # the unequal-data claims never read the train-only rows
    coinflip = table.loc["Coinflip (reported separately, not in the paper's averages)", "ours"]
    assert "RAPTOR (train only)" not in coinflip and "RAPTOR (C = 1)" in coinflip


def _simulated(points, quantities, replicates, bias=0.0, seed=0):
    """Monte Carlo means of ``quantities`` at ``points`` grid points whose replicates share one draw per point
    (correlated quantities), with the theory right (bias 0) or off by ``bias`` standard errors in the first."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(points):
        common = rng.standard_normal()
        for j, q in enumerate(quantities):
            z = (0.9 * common + np.sqrt(1 - 0.81) * rng.standard_normal()) * np.sqrt(replicates / (replicates - 2))
            se = 0.01
            rows.append(dict(kappa=1.0, delta=0.5 + k, lam=0.1, quantity=q, theory=1.0,
                             mean=1.0 + se * (z + (bias if j == 0 else 0.0)), se=se, replicates=replicates))
    return pd.DataFrame(rows)


def test_joint_coverage_counts_grid_points_not_correlated_quantities():
    quantities = [f"q{j}" for j in range(10)]
    right = claims.joint_coverage(_simulated(60, quantities, 8), ["kappa", "delta", "lam"])
    assert right["points"] == 60 and right["agree"] >= 54  # a joint 95 % region per point
    assert right["test"].decidable and right["test"].verdict != "does not hold"
    wrong = claims.joint_coverage(_simulated(60, quantities, 8, bias=6.0), ["kappa", "delta", "lam"])
    assert wrong["test"].verdict == "does not hold"
    small = claims.joint_coverage(_simulated(20, quantities, 8), ["kappa", "delta", "lam"])
    assert not small["test"].decidable  # 20 points: 0.9 ** 20 = 0.12, coverage >= 0.90 cannot be established
    # the replicates needed for a 1 % half-width: 8 x (half-width / 1 %)^2
    half = stats.t.ppf(0.975, 7) * 0.01
    assert small["replicates_needed"] == int(np.ceil(8 * (half / claims.RESOLUTION) ** 2))
    assert set(small["per_quantity"]) == set(quantities)


def test_sync_readme_moves_figure_links_to_the_published_figures_folder(tmp_path):
    from paper_figures.publish import README_END, README_START, sync_readme
    published = tmp_path / "docs" / "results"
    (published / "figures").mkdir(parents=True)
    (published / "figures" / "stability_by_layer.png").write_bytes(b"png")
    pd.DataFrame(dict(area=["a"], claim=["c"], datasets=["6"], ours=["x"], verdict=["holds"])).to_csv(
        published / "claims.csv", index=False)
    readme = tmp_path / "README.md"
    readme.write_text(f"![s](docs/results/stability_by_layer.png) ![a](docs/results/accuracy_differences.png)\n"
                      f"{README_START}\n{README_END}\n")
    text = sync_readme(readme, published / "claims.csv").read_text()
    assert "](docs/results/figures/stability_by_layer.png)" in text
    assert "](docs/results/accuracy_differences.png)" in text  # not published in the new layout: left alone


def test_claims_table_families_power_and_undecidable_designs_on_a_planted_run(tmp_path):
    """A planted run whose per-seed RAPTOR - GCS differences have a known spread: the every-setting row states the
    minimal detectable effect the corrected resampled interval implies, the rows sit in their families, and the
    sign test over four datasets (no Cities or Counterfact) has no verdict."""
    rng = np.random.default_rng(11)
    rows, sd = [], 0.01
    for name in DATASETS:
        diffs = 0.02 + sd * rng.standard_normal(len(SEEDS))
        diffs = 0.02 + sd * (diffs - diffs.mean()) / diffs.std(ddof=1)  # exactly mean 0.02, sd 0.01
        for s, d in zip(SEEDS, diffs):
            base = 0.7 + 0.02 * rng.standard_normal()
            for m, a in (("RAPTOR", base + d), ("GCS", base), ("xRFM", base + 0.1), ("DiffMeans", base - 0.1)):
                rows.append(dict(dataset=name, method=m, seed=s, best=a, mean=a - 0.1, best_layer=5))
    output.save_table(pd.DataFrame(rows), tmp_path, "accuracy_by_seed")
    table = claims.claims_table(tmp_path).set_index(["claim", "datasets"])
    every = table.loc[("RAPTOR beats GCS on mean-over-layers accuracy in every setting", "6")]
    k = len(SEEDS)
    se = sd * np.sqrt(1 / k + verdicts.TEST_TRAIN_RATIO)
    mde = (stats.t.ppf(0.975, k - 1) + stats.t.ppf(verdicts.POWER, k - 1)) * se
    assert every.mde == f"{100 * mde:+.1f} pts" and every.family == "paper"
    assert every.verdict_per_claim == "holds" and every.p == pytest.approx(
        max(stats.t.sf(0.02 / se, k - 1), 0), rel=1e-6)
    robust = table.loc[("RAPTOR beats GCS on mean-over-layers accuracy in every setting",
                        "4, no Cities or Counterfact")]
    assert robust.family == "robustness"
    behind = table.loc[("RAPTOR beats xRFM on mean-over-layers accuracy", "4, no Cities or Counterfact")]
    assert behind.verdict == "--" and behind.mde.startswith("this design cannot reach p < 0.025")
    # RAPTOR is 10 points behind xRFM on every dataset: 6/6 against has p = 1/64, which the Holm step of the
    # paper's family passes only if its other claims hold first, so the design cannot decide it on its own data
    six = table.loc[("RAPTOR beats xRFM on mean-over-layers accuracy", "6")]
    assert six.verdict_per_claim == "--" and six.verdict == "--"
    assert "only if other claims of the family hold first" in six.mde
    assert "RAPTOR ahead on 0/6 datasets (interval above 0), the other way on 6" in six.ours


def test_a_run_killed_midway_keeps_the_steps_it_finished_in_its_record(tmp_path, monkeypatch):
    """The record is saved after every step, not only after every section: a kill inside a long section leaves the
    timings of the steps it finished (the empirical section's extraction and fits used to vanish)."""
    from paper_figures import empirical_figures

    def one_step_then_killed(out, *, steps, **kwargs):
        with steps.step("stsa: extraction", 1.0):
            pass
        raise KeyboardInterrupt  # stands in for the kill: nothing after this point runs

    monkeypatch.setattr(empirical_figures, "run", one_step_then_killed)
    assert main(["--out", str(tmp_path), "--only", "empirical", "--quick", "--no-progress", "--n-jobs", "1"]) == 130
    info = json.loads((tmp_path / "tables" / "run_info.json").read_text())
    assert info["status"] == "interrupted" and "stsa: extraction" in info["step_seconds"]


def test_a_run_stopped_by_sigterm_records_its_steps_and_its_stop(tmp_path, monkeypatch):
    """A scheduler's stop (SIGTERM) is recorded as Ctrl-C is: the invocation is "interrupted", with the steps it
    finished, and the record is written at the stop, not only at the last finished step."""
    import os
    import signal
    import time

    from paper_figures import empirical_figures

    def one_step_then_terminated(out, *, steps, **kwargs):
        with steps.step("stsa: extraction", 1.0):
            pass
        with steps.step("stsa: fits", 1.0):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)

    monkeypatch.setattr(empirical_figures, "run", one_step_then_terminated)
    assert main(["--out", str(tmp_path), "--only", "empirical", "--quick", "--no-progress", "--n-jobs", "1"]) == 143
    info = json.loads((tmp_path / "tables" / "run_info.json").read_text())
    assert info["status"] == "interrupted" and "stsa: extraction" in info["step_seconds"]
    assert "stsa: fits" not in info["step_seconds"]  # a step cut short is not a timing


def test_every_step_calls_back_when_it_starts_and_ends_and_an_interrupted_one_is_not_a_timing():
    calls = []
    steps = RunProgress(10, enabled=False,
                        on_step=lambda: calls.append((sorted(steps.timings), steps.current, steps.unfinished)))
    with steps.step("a", 5):
        pass
    with pytest.raises(KeyboardInterrupt), steps.step("b", 5):
        raise KeyboardInterrupt
    steps.close()
    assert [c[:2] for c in calls] == [([], "a"), (["a"], None), (["a"], "b"), (["a"], None)]
    assert calls[-1][2]["name"] == "b" and "b" not in steps.timings  # its time covers part of its work


def test_the_record_names_the_step_a_killed_invocation_was_in(tmp_path, monkeypatch):
    from paper_figures import empirical_figures
    from paper_figures.__main__ import main

    def killed_inside_a_step(out, *, steps, **_):
        with steps.step("stsa: extraction"):
            pass
        with steps.step("stsa: probes per layer, split seed 42"):
            raise KeyboardInterrupt

    monkeypatch.setattr(empirical_figures, "run", killed_inside_a_step)
    assert main(["--out", str(tmp_path), "--only", "empirical", "--quick", "--no-progress", "--n-jobs", "1"]) == 130
    info = json.loads((tmp_path / "tables" / "run_info.json").read_text())
    assert info["unfinished_step"]["name"] == "stsa: probes per layer, split seed 42"
    assert "stsa: probes per layer, split seed 42" not in info["step_seconds"]


def test_time_table_marks_the_steps_an_interrupted_invocation_left_midway():
    from paper_figures.results import time_table

    # a killed invocation that names its step: only that step, finished later, is a lower bound
    named = dict(status="interrupted", sections=["empirical", "learning_curves"],
                 step_seconds={"stsa: separability": 18.0}, unfinished_step={"name": "learning curves from small "
                                                                             "pools", "seconds": 900.0})
    later = dict(status="complete", sections=["empirical", "learning_curves"],
                 step_seconds={"learning curves from small pools": 600.0, "stsa: directional stability": 60.0,
                               "stsa: separability": 0.1})
    t = time_table(dict(later, earlier_invocations=[named])).set_index("phase")
    assert t.loc["learning curves", "resumed_midway"] == 1 and t.loc["learning curves", "minutes"] == 10.0
    assert t.loc["directional stability (paper's protocol)", "resumed_midway"] == 0
    assert t.loc["total", "resumed_midway"] == 1
    # an older record names no step: every step of its sections that it did not record and a later one did
    old = dict(named, unfinished_step=None)
    t = time_table(dict(later, earlier_invocations=[old])).set_index("phase")
    assert t.loc["learning curves", "resumed_midway"] == 1
    assert t.loc["directional stability (paper's protocol)", "resumed_midway"] == 1
    assert t.loc["separability (paper's test)", "resumed_midway"] == 0  # the killed one recorded it
    # a section the killed invocation did not run, and a complete earlier invocation, mark nothing
    t = time_table(dict(later, earlier_invocations=[dict(old, sections=["theory"]),
                                                    dict(later, status="complete")])).set_index("phase")
    assert t.loc["total", "resumed_midway"] == 0


def test_no_robustness_grid_holds_a_dataset_whose_pairs_straddle_a_random_split():
    """Issue 53 section 2: every paper dataset with a ``group_column`` (its rows pair across the classes: Cities by
    city, Counterfact by subject) is outside the robustness grid and is also run on a grouped split; the old grid
    "5, no Counterfact" kept Cities."""
    from empirical.llm.datasets import get_dataset
    from paper_figures.empirical_figures import GROUPED_VARIANTS
    paired = {name for name in claims.PAPER_DATASETS if get_dataset(name).group_column is not None}
    assert {"cities", "counterfact"} <= paired
    robustness = [names for grid, names in claims.GRIDS.items() if grid != claims.PAPER_GRID]
    assert robustness and all(not paired & set(names) for names in robustness)
    assert {f"{name}_grouped": name for name in paired}.items() <= GROUPED_VARIANTS.items()


def test_every_accuracy_row_that_can_hold_has_an_equal_data_twin(tmp_path):
    """Issue 53 section 3: the grid-average best-layer row and both xRFM rows are also tested at equal data
    (RAPTOR fitted on the training rows only), and the xRFM note says what parity rests on."""
    _fake_run(tmp_path)
    by_seed = output.load_table(tmp_path, "accuracy_by_seed")
    twin = by_seed[by_seed.method == "RAPTOR"].assign(method=claims.EQUAL_DATA_METHOD,
                                                       best=lambda d: d.best - 0.02, mean=lambda d: d["mean"] - 0.02)
    output.save_table(pd.concat([by_seed, twin], ignore_index=True), tmp_path, "accuracy_by_seed")
    table = claims.claims_table(tmp_path)
    equal = table[table.claim.str.contains("equal data: every method fits on the training rows")]
    for claim in (claims.GRID_AVERAGE_CLAIM, "RAPTOR matches or exceeds xRFM on best-layer accuracy",
                  "RAPTOR beats xRFM on mean-over-layers accuracy", "RAPTOR beats GCS on mean-over-layers accuracy"):
        rows = equal[equal.claim.str.startswith(claim)]
        assert len(rows) == 1 and set(rows.family) == {"robustness"}, claim
    average = equal[equal.claim.str.startswith(claims.GRID_AVERAGE_CLAIM)].iloc[0]
    assert f"{claims.EQUAL_DATA_METHOD} - xRFM" in average.ours and "(unequal data)" in average.paper
    from paper_figures.results import _facts
    facts = _facts(tmp_path)
    assert facts["xrfm_equal_best"] != "n/a" and facts["xrfm_equal_mean"] != "n/a"


def test_every_minimal_detectable_effect_has_its_unit(tmp_path, monkeypatch):
    """Issue 53 section 4: an MDE is stated in the units of its tested quantity (points, mean |cos|, MAE, log time
    ratio, slope, nats); a row that would print a bare number is refused, and every tested row of the committed
    publication's tables, rebuilt by this code, has its unit."""
    root = Path(__file__).resolve().parent.parent / "docs" / "results"
    table = claims.claims_table(root)
    numbers = table.mde[table.mde.str.match(r"^[-+]?[0-9.]+(e[-+]?\d+)?$")]
    assert numbers.empty, list(numbers)
    row = dict(area="x", claim="a bare effect", datasets="--", paper="--", ours="--",
               test=verdicts.superiority(0.02, 0.01, 0.03, df=4))
    monkeypatch.setattr(claims, "claim_rows", lambda out: [row])
    with pytest.raises(ValueError, match="'a bare effect' states an effect MDE without its unit"):
        claims.claims_table(tmp_path)
