"""The ``raptor`` CLI on a tiny local model and a user table: help, extract, steer, probe, sweep."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical import cli, load_concept_vectors, paper_split

pytestmark = pytest.mark.llm

@pytest.fixture(scope="module")
def setup(cli_setup):
    return cli_setup


@pytest.mark.parametrize("sub", ["extract", "probe", "stability", "steer", "sweep"])
def test_help(sub, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([sub, "--help"])
    assert exc.value.code == 0
    assert "--out" in capsys.readouterr().out


def test_extract_writes_summary_and_cache(setup, capsys):
    root, base = setup
    out = root / "o1"
    assert cli.main(["extract", *base, "--out", str(out)]) == 0
    rec = json.loads((out / "extract_summary.json").read_text())[0]
    assert rec["n"] == 60 and rec["shape"] == [4, 60, 32]
    assert rec["cache_file"].startswith(str(root / "cache" / "hidden"))
    assert "60 prompts" in capsys.readouterr().out
    # --quick caps per class
    assert cli.main(["extract", *base, "--quick", "5", "--out", str(out)]) == 0
    assert json.loads((out / "extract_summary.json").read_text())[0]["class_counts"] == {"0": 5, "1": 5}


STEER = ["--answer-words", "good,bad", "--stem", " answer is", "--max-new-tokens", "3", "--generate", "2"]


def test_steer_with_probe_file(setup, capsys):
    from sklearn.linear_model import LogisticRegression

    from empirical import ConceptVectors, save_concept_vectors
    from empirical.llm._extract import hidden_states
    from empirical.llm._models import load_model
    from empirical.llm.datasets import load_table

    root, base = setup
    model, tok = load_model(str(root / "model"), device="cpu")
    ds = load_table(root / "reviews.tsv", "text", "label", "review : {text} .")
    H = hidden_states(model, tok, ds.prompts, progress=False)
    probes = ConceptVectors.from_estimators(
        {layer: LogisticRegression(max_iter=1000).fit(H[layer - 1], ds.labels) for layer in (1, 2, 3)},
        {1: 0.6, 2: 0.9, 3: 0.95}, method="logistic-regression")
    save_concept_vectors(root / "probes", probes)
    out = root / "o2"
    code = cli.main(["steer", *base, *STEER, "--probe-file", str(root / "probes.json"), "--tau", "0.6",
                     "--n-prompts", "8", "--setting", "paper", "--out", str(out)])
    assert code == 0
    import pandas as pd

    m = pd.read_csv(out / "steer_metrics.csv")
    assert m.direction.tolist() == ["towards", "towards", "away", "away"] and (m.setting == "paper").all()
    assert (m.layers == "1,2,3").all() and (m.positions == "all").all() and (m.n_prompts == 4).all()
    assert {"answer_logodds_shift", "random_control_shift", "concept_specific_shift", "perplexity_ratio",
            "auc_unsteered"} <= set(m.columns)
    assert (out / "steer_selected.csv").is_file()
    assert "concept_specific_shift" in capsys.readouterr().out


def test_steer_sweep_compares_strengths_and_methods(setup):
    import pandas as pd

    root, base = setup
    out = root / "sweep_out"
    assert cli.main(["steer", *base, *STEER, "--direction", "towards", "--n-prompts", "4", "--sweep",
                     "--strengths", "0.1,0.5", "--methods", "RAPTOR", "DiffMeans", "--out", str(out)]) == 0
    m = pd.read_csv(out / "steer_metrics.csv")
    assert set(m.method) == {"RAPTOR", "DiffMeans"} and set(m.kind) == {"gcav", "additive"}
    assert set(m.loc[m.kind == "additive", "strength"]) == {0.1, 0.5} and (m.positions == "answer").all()
    assert set(m.layer_choice) == {"all", "best", "top3"}


def test_bad_arguments(setup, capsys):
    root, base = setup
    assert cli.main(["extract", "--table", str(root / "reviews.tsv"), "--out", str(root / "o3")]) == 2
    assert "--table needs --text-column and --label-column" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["probe", "--layers", "x-y"])
    code = cli.main(["extract", "--table", str(root / "reviews.tsv"), "--text-column", "text", "--label-column",
                     "stars", "--out", str(root / "o3")])
    assert code == 2 and "label_column 'stars'" in capsys.readouterr().err


def test_probe_and_steer_fit(setup):
    import pandas as pd

    root, base = setup
    out = root / "o4"
    assert cli.main(["probe", *base, "--baselines", "diffmeans", "--out", str(out)]) == 0
    table = pd.read_csv(out / "probe_reviews.csv")
    assert list(table.layer) == [1, 2, 3] and table.test_accuracy.between(0, 1).all()
    assert table.diffmeans_test_accuracy.between(0, 1).all() and (table.n_test == 12).all()
    rec = json.loads((out / "probe_reviews.json").read_text())
    assert rec["best_test_accuracy"] == table.test_accuracy.max() and rec["lambda_star"] > 0
    assert rec["val_selected_layer"] in (1, 2, 3)
    # the table's accuracies are those of an independent RaptorProbe fit on the same split
    from empirical import RaptorProbe
    from empirical.llm._extract import hidden_states
    from empirical.llm._models import load_model
    from empirical.llm.datasets import load_table

    model, tok = load_model(str(root / "model"), device="cpu")
    ds = load_table(root / "reviews.tsv", "text", "label", "review : {text} .")
    H = hidden_states(model, tok, ds.prompts, progress=False)
    tr, va, te = paper_split(ds.labels)
    est = RaptorProbe().fit(H[1][tr], ds.labels[tr], X_val=H[1][va], y_val=ds.labels[va])
    assert est.score(H[1][te], ds.labels[te]) == pytest.approx(table.test_accuracy[1])
    assert est.lambda_ == pytest.approx(table.lambda_star[1])
    assert (out / "probe_reviews.png").is_file()
    vectors = load_concept_vectors(out / "probes_reviews")
    assert vectors.layers == [1, 2, 3] and vectors[1].test_accuracy == pytest.approx(table.test_accuracy[0])
    # H[1] = layer 2 (row 1); the CLI read float32 states from its cache, batched differently from this
    # re-extraction (~1e-7 relative), hence rtol 1e-5
    np.testing.assert_allclose(vectors[2].coef, est.coef_, rtol=1e-5, atol=1e-8)


def test_split_is_stratified_and_fixed():
    y = np.r_[np.zeros(50, int), np.ones(30, int)]
    tr, va, te = paper_split(y, random_state=cli.PAPER_SPLIT_SEED)
    assert len(tr) == 48 and len(va) == 16 and len(te) == 16
    assert len(np.intersect1d(tr, te)) == 0 and len(np.union1d(np.union1d(tr, va), te)) == 80
    assert y[te].sum() == 6 and y[va].sum() == 6
    np.testing.assert_array_equal(te, paper_split(y, random_state=cli.PAPER_SPLIT_SEED)[2])


def test_sweep_wiring(setup, monkeypatch):
    calls = {}

    class R:
        import pandas as pd
        table = pd.DataFrame(dict(C=[1.0, 1.0], fraction=[0.5, 1.0], Acc_true=[0.6, 0.7], Acc_pred=[0.61, 0.69]))
        summary = pd.DataFrame(dict(C=[1.0], rho_s=[1.0]))
        fixed = dict(C=1.0, lam=1.0, C_source="pool", rho_s=1.0, r=0.99, mae=0.01, baseline_rho_s=1.0, baseline_r=0.98,
                     baseline_mae=0.02)

    def fake(Xp, yp, Xt, yt, **kw):
        calls.update(shapes=(Xp.shape, Xt.shape), kw=kw)
        return R()

    monkeypatch.setattr(cli, "delta_sweep", fake)
    root, base = setup
    out = root / "o5"
    assert cli.main(["sweep", *base, "--layer", "2", "--seeds", "2", "--fractions", "1,0.5,0.75", "--out",
                     str(out)]) == 0
    assert calls["shapes"] == ((48, 32), (12, 32)) and calls["kw"]["fractions"] == [0.5, 0.75, 1.0]
    assert json.loads((out / "sweep_reviews_L2_fixed.json").read_text())["lam"] == 1.0


def test_steer_fits_raptor_probes(setup):
    import pandas as pd

    root, base = setup
    out = root / "o6"
    assert cli.main(["steer", *base, *STEER, "--direction", "away", "--n-prompts", "6", "--layers", "2-3",
                     "--setting", "best-0.99", "--positions", "answer", "--out", str(out)]) == 0
    m = pd.read_csv(out / "steer_metrics.csv")
    assert m.direction.tolist() == ["away", "away"] and m.setting.tolist() == ["best-0.99-answer"] * 2
    assert m.layers.astype(str).isin(["2", "3"]).all() and (m.n_random == 100).all()


def test_stability_command(setup):
    import pandas as pd

    root, base = setup
    out = root / "o7"
    assert cli.main(["stability", *base, "--layers", "2,3", "--K", "3", "--out", str(out)]) == 0
    t = pd.read_csv(out / "stability_reviews.csv")
    assert list(t.layer) == [2, 3] and t.mean_abs_cos.between(0, 1).all() and (t.ci_low <= t.ci_high).all()
    assert (out / "stability_reviews.png").is_file()


def test_single_dataset_commands_take_a_dataset_name(setup, shared_data_dir):
    """`raptor stability --dataset NAME` used to iterate the name's letters (load('c') ...)."""
    root, base = setup
    model_args = base[base.index("--model"):]
    out = root / "stab_named"
    assert cli.main(["stability", "--dataset", "cities", "--quick", "10", "--layers", "2", "--K", "2",
                     *model_args, "--out", str(out)]) == 0
    assert (out / "stability_cities.csv").is_file()


def test_sweep_with_undefined_correlations_keeps_the_tables_and_exits_2(setup, monkeypatch, capsys):
    """An all-equal accuracy column makes the correlations undefined: the files are written (nothing lost) and
    the NaN is an error naming the file, not a silent exit 0."""
    import pandas as pd

    class R:
        table = pd.DataFrame(dict(C=[1.0] * 3, fraction=[0.5, 0.75, 1.0], Acc_true=[0.7] * 3,
                                  Acc_pred=[0.6, 0.65, 0.7]))
        summary = pd.DataFrame(dict(C=[1.0], fraction=[0.5], rho_s=[float("nan")]))
        fixed = dict(C=1.0, lam=1.0, C_source="pool", rho_s=float("nan"), r=float("nan"), mae=0.05,
                     baseline_rho_s=float("nan"), baseline_r=float("nan"), baseline_mae=0.02)

    monkeypatch.setattr(cli, "delta_sweep", lambda *a, **k: R())
    root, base = setup
    out = root / "o5nan"
    assert cli.main(["sweep", *base, "--layer", "2", "--seeds", "2", "--fractions", "0.5,0.75,1", "--out",
                     str(out)]) == 2
    err = capsys.readouterr().err
    assert "rho_s" in err and "undefined" in err and "sweep_reviews_L2_fixed.json" in err
    assert (out / "sweep_reviews_L2_table.csv").exists()


def _written(out) -> dict:
    """What a command wrote into ``out``: file name -> its CSV columns (None for a file that is not a CSV)."""
    import pandas as pd

    return {p.name: list(pd.read_csv(p).columns) if p.suffix == ".csv" else None for p in sorted(out.iterdir())}


PROBE_COLUMNS = ["layer", "val_accuracy", "test_accuracy", "C_star", "lambda_star", "fit_time_s", "n_train", "n_val",
                 "n_test", "diffmeans_fit_time_s", "diffmeans_test_accuracy"]
WRITTEN = {
    "probe": {"probe_reviews.csv": PROBE_COLUMNS, "probe_reviews.json": None, "probe_reviews.png": None,
              "probe_summary.csv": ["dataset", "n", "class_counts", "best_layer", "best_test_accuracy", "lambda_star",
                                    "mean_test_accuracy", "val_selected_layer", "val_selected_test_accuracy",
                                    "median_fit_time_s"],
              "probes_reviews.json": None, "probes_reviews.safetensors": None},
    "stability": {"stability_reviews.csv": ["layer", "mean_abs_cos", "ci_low", "ci_high", "median_fit_time_s", "K",
                                            "drop"],
                  "stability_reviews.png": None},
    "sweep": {"sweep_reviews_L2.png": None, "sweep_reviews_L2_fixed.json": None,
              "sweep_reviews_L2_summary.csv": ["C", "lam", "rho_s", "r", "mae", "baseline_rho_s", "baseline_r",
                                               "baseline_mae", "rho_s_all", "r_all", "mean_abs_error", "Acc_true_mean",
                                               "Acc_pred_mean", "baseline_a", "baseline_b", "baseline_c",
                                               "rho_s_theory", "r_theory", "mean_abs_error_theory"],
              "sweep_reviews_L2_table.csv": ["fraction", "seed", "C", "lam", "lam_theory", "n", "delta", "Acc_true",
                                             "Acc_pred", "a", "b", "sigma", "cv_accuracy", "n_cv", "Acc_baseline",
                                             "Acc_theory"]},
    "plan": {"plan_reviews.csv": ["layer", "labels", "unlabeled", "pool_cv_accuracy", "target_n", "predicted_accuracy",
                                  "low", "high", "C_star", "kappa", "chance_factor", "model_error", "forecaster",
                                  "held_out_error", "teacher", "level",
                                  "target_accuracy", "labels_needed", "labels_needed_optimistic",
                                  "labels_needed_pessimistic"],
             "plan_reviews.json": None, "plan_reviews.png": None},
}


@pytest.mark.parametrize("command, options", [
    ("probe", ["--baselines", "diffmeans"]),
    ("stability", ["--layers", "2,3", "--K", "2"]),
    ("sweep", ["--layer", "2", "--seeds", "3", "--fractions", "0.2,0.4,1"]),
    ("plan", ["--layers", "2,3", "--labels", "30", "--target-n", "120", "--target-accuracy", "0.9", "--n-boot", "5"]),
])
def test_commands_write_their_tables_and_figures(setup, command, options):
    """Each command writes the same files with the same columns, its figure included (docs/llm.md's outputs)."""
    root, base = setup
    out = root / f"written_{command}"
    assert cli.main([command, *base, *options, "--out", str(out)]) == 0
    assert _written(out) == WRITTEN[command]


def test_no_progress_silences_the_weights_loading_bar(setup, capsys):
    from transformers.utils import logging as hf_logging
    root, base = setup
    hf_logging.enable_progress_bar()  # as in a fresh process
    assert cli.main(["extract", *base, "--out", str(root / "quiet")]) == 0
    assert "Loading weights" not in capsys.readouterr().err
