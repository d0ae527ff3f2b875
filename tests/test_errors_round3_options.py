"""Round 3 of the hostile-input review (issue 24, part B): options, dtypes and domains.

Grouped by pattern; every case names the argument it blames, and failed on the code before the fix:

* B1 one validator decides every accepted dtype and container (complex refused, masked entries refused);
* B2 ``fit`` forgets every attribute of an earlier fit;
* B3 every option has a range and a meaning checked at parse time; contradictions are errors; no NaN output;
* B4 integers are integers and paths are non-empty;
* B5 every count has a bound (cores, positions, a documented maximum);
* B6 the documented domain of lam / C / tol is checked where the parameter enters;
* B7 validate before working; tables before plots; a failed plot never loses a table.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone

from empirical.common.arrays import check_binary_labels, check_grid, check_matrix
from empirical.probes._baselines import DiffMeans, GCSProbe, LogRegCVProbe, XRFMProbe
from empirical.probes._concept_vectors import LinearProbe
from empirical.probes._layers import fit_layers
from empirical.probes._raptor import RaptorProbe
from empirical.probes._separability import separability
from empirical.probes._stability import mean_abs_pairwise_cosine, stability
from empirical.probes.structure import delta_sweep

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 5))
Y = np.arange(60) % 2
X[:, 0] += 1.5 * Y


def _masked(A):
    """``A`` as a masked array with entry [0, 0] masked and a placeholder far from the data under it."""
    M = np.ma.array(np.array(A, dtype=float), mask=np.zeros(np.shape(A), bool))
    M.data[0, 0], M.mask[0, 0] = 1e6, True
    return M


# ------------------------------------------------------------------------------------------------ B1
FITTED = RaptorProbe(Cs=[1.0]).fit(X, Y)

B1_CASES = {
    "raptor complex X_val": (lambda: RaptorProbe(Cs=[1.0]).fit(X[:40], Y[:40], X[40:] + 1j, Y[40:]),
                             "X_val must be real"),
    "raptor complex X": (lambda: RaptorProbe(Cs=[1.0]).fit(X + 0j, Y), "X must be real"),
    "raptor masked X": (lambda: RaptorProbe(Cs=[1.0]).fit(_masked(X), Y), "X must not have masked entries"),
    "raptor masked X_val": (lambda: RaptorProbe(Cs=[1.0]).fit(X[:40], Y[:40], _masked(X[40:]), Y[40:]),
                            "X_val must not have masked entries"),
    "raptor masked y": (lambda: RaptorProbe(Cs=[1.0]).fit(X, np.ma.array(Y, mask=np.arange(60) == 0)),
                        "y must not have masked entries"),
    "predict masked": (lambda: FITTED.predict(_masked(X)), "X must not have masked entries"),
    "decision_function complex": (lambda: FITTED.decision_function(X + 1j), "X must be real"),
    "diffmeans masked X_val": (lambda: DiffMeans().fit(X[:40], Y[:40], _masked(X[40:]), Y[40:]),
                         "X_val must not have masked entries"),
    "fit_layers masked stack": (lambda: fit_layers(np.ma.stack([_masked(X), _masked(X)]), Y, Cs=[1.0], progress=False),
                                "must not have masked entries"),
    "fit_layers complex stack": (lambda: fit_layers(np.stack([X, X]) + 1j, Y, Cs=[1.0], progress=False),
                                 "must be real"),
    "stability complex": (lambda: stability(RaptorProbe(Cs=[1.0]), X + 1j, Y, K=2), "X_pool must be real"),
    "separability masked": (lambda: separability(_masked(X), Y), "X must not have masked entries"),
    "delta_sweep complex test": (lambda: delta_sweep(X[:40], Y[:40], X[40:] + 1j, Y[40:], seeds=1, progress=False),
                                 "X_test must be real"),
    "pairwise cosine complex": (lambda: mean_abs_pairwise_cosine(X[:3] + 1j), "V must be real"),
    "concept vector complex": (lambda: LinearProbe(np.ones(5) + 1j, 0.0), "must be real"),
    "grid complex": (lambda: check_grid(np.array([1.0 + 1j])), "Cs must be real"),
    "labels complex": (lambda: check_binary_labels(np.array([1j, 0j]), 2), "y must be real"),
}


@pytest.mark.parametrize("case", sorted(B1_CASES))
def test_b1_one_validator_refuses_complex_and_masked(case):
    call, message = B1_CASES[case]
    with pytest.raises(ValueError, match=message):
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            call()


def test_b1_spectral_estimator_refuses_masked_pool():
    from empirical.probes._spectral_prediction import estimate_pool_model

    with pytest.raises(ValueError, match="H_pool must not have masked entries"):
        estimate_pool_model(_masked(X), Y)


def test_b1_masked_array_without_masked_entries_is_its_data():
    plain = np.ma.array(X, mask=np.zeros(X.shape, bool))
    assert np.array_equal(check_matrix(plain), X)
    a, b = RaptorProbe(Cs=[1.0]).fit(plain, Y), RaptorProbe(Cs=[1.0]).fit(X, Y)
    assert np.array_equal(a.coef_, b.coef_)


def test_b1_theory_arrays_refuse_complex():
    import cgmt

    with pytest.raises(ValueError, match="lams must be real, got complex data"):
        cgmt.sweep([2.0], np.array([0.1 + 1j]), [1.0], progress=False)


# ------------------------------------------------------------------------------------------------ B2
def _fit_split(estimator):
    return estimator.fit(X, Y) if isinstance(estimator, RaptorProbe) else estimator.fit(X[:40], Y[:40], X[40:], Y[40:])


B2_CASES = {
    "raptor exact -> paper": (RaptorProbe(Cs=[0.1, 1.0]), dict(solver="paper")),
    "raptor exact -> no validation": (RaptorProbe(Cs=[0.1, 1.0]), dict(val_fraction=0.0)),
    "raptor paper -> exact": (RaptorProbe(Cs=[0.1, 1.0], solver="paper"), dict(solver="exact")),
    "diffmeans": (DiffMeans(), dict(use_validation=False)),
    "lrcv": (LogRegCVProbe(Cs=[0.1, 1.0]), dict(Cs=[1.0])),
    "gcs": (GCSProbe(n_probes=3), dict(n_probes=2)),
}


@pytest.mark.parametrize("case", sorted(B2_CASES))
def test_b2_refit_keeps_no_attribute_of_the_earlier_fit(case):
    estimator, options = B2_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refitted = _fit_split(clone(estimator)).set_params(**options)
        _fit_split(refitted)
        fresh = _fit_split(clone(refitted))
    assert set(vars(refitted)) == set(vars(fresh))


def test_b2_xrfm_refit_keeps_no_attribute_of_the_earlier_fit():
    pytest.importorskip("xrfm")
    estimator = XRFMProbe(bandwidths=(10.0,), center_grads=(True,), iters=1)
    _fit_split(estimator).set_params(iters=2)
    _fit_split(estimator)
    assert set(vars(estimator)) == set(vars(_fit_split(clone(estimator))))


# ------------------------------------------------------------------------------------------------ B6
def _theory(name):
    import cgmt
    import sims

    return {"cgmt": cgmt, "sims": sims}[name]


B6_CASES = {
    "solve lam=1e300": (lambda: _theory("cgmt").solve(2.0, 1e300, 1.0), r"lam must lie in \[1e-30, 1e\+30\]"),
    "solve lam=1e-300": (lambda: _theory("cgmt").solve(2.0, 1e-300, 1.0), r"lam must lie in \[1e-30, 1e\+30\]"),
    "optimal_lambda bounds to 1e300": (lambda: _theory("cgmt").optimal_lambda(2.0, 1.0, bounds=(1e-3, 1e300)),
                                       r"bounds\[1\] must lie in \[1e-30"),
    "sweep lams 1e-300,1e300": (lambda: _theory("cgmt").sweep([2.0], [1e-300, 1e300], [1.0], progress=False),
                                r"lams must lie in \[1e-30"),
    "sims.compare lam=1e300": (lambda: _theory("sims").compare(2.0, 1e300, 1.0, p=20, replicates=2, progress=False),
                               r"lam must lie in \[1e-30"),
    "sims.compare lam=1e-300": (lambda: _theory("sims").compare(2.0, 1e-300, 1.0, p=20, replicates=2, progress=False),
                                r"lam must lie in \[1e-30"),
    "stability theory lam=1e-300": (lambda: _theory("cgmt").stability(2.0, 1e-300, 1.0), r"lam must lie in \[1e-30"),
    "raptor repeated Cs": (lambda: RaptorProbe(Cs=[0.1, 0.1, 1]).fit(X, Y), r"Cs must not repeat a value, got \[0.1\]"),
    "raptor Cs 1e50": (lambda: RaptorProbe(Cs=[1e50]).fit(X, Y), r"Cs must lie in \[1e-08, 1e\+16\]"),
    "raptor Cs 1e-12": (lambda: RaptorProbe(Cs=[1e-12, 1.0]).fit(X, Y), r"Cs must lie in \[1e-08, 1e\+16\]"),
    "gcs C=1e300": (lambda: GCSProbe(C=1e300, n_probes=2).fit(X, Y),
                    r"'C' parameter of GCSProbe must be .* \[1e-08, 1e\+16\]"),
    "gcs C=1e-10": (lambda: GCSProbe(C=1e-10, n_probes=2).fit(X, Y), r"'C' parameter of GCSProbe"),
    "raptor tol=1e300": (lambda: RaptorProbe(tol=1e300).fit(X, Y),
                         r"'tol' parameter of RaptorProbe must be .*\(0.0, 0.1\]"),
    "lrcv tol=1": (lambda: LogRegCVProbe(tol=1.0).fit(X, Y), r"'tol' parameter of LogRegCVProbe"),
    "lrcv Cs 1e300": (lambda: LogRegCVProbe(Cs=[1e300]).fit(X, Y), r"Cs must lie in \[1e-08"),
    "separability Cs 1e40": (lambda: separability(X, Y, Cs=(1e40,)), r"Cs must lie in \[1e-08"),
    "delta_sweep repeated Cs": (lambda: delta_sweep(X[:40], Y[:40], X[40:], Y[40:], Cs=[1.0, 1.0], seeds=1,
                                                    progress=False), r"Cs must not repeat a value"),
}


@pytest.mark.parametrize("case", sorted(B6_CASES))
def test_b6_documented_domain_checked_up_front(case):
    call, message = B6_CASES[case]
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("lam", [1e-30, 1e30])
def test_b6_lam_domain_boundary_is_solved(lam):
    import cgmt

    assert cgmt.solve(2.0, lam, 1.0).success


@pytest.mark.filterwarnings("ignore:RaptorProbe refit did not reach tol")  # near-separable data at C_MAX: warned
@pytest.mark.parametrize("C", [1e-8, 1e16])
def test_b6_C_domain_boundary_is_fitted(C):
    probe = RaptorProbe(Cs=[C]).fit(X, Y)
    assert np.all(np.isfinite(probe.concept_vector_)) and probe.C_ == C


# ------------------------------------------------------------------------------------------- B3 / B5 / B7 CLIs
def _run_cli(module, argv, capsys):
    """(exit code, stderr) of a command line given ``argv``; argparse errors exit 2 through SystemExit."""
    import importlib

    main = importlib.import_module(module).main
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


THEORY_SWEEP = ["sweep", "--deltas", "2", "--lams", "1", "--kappas", "1"]
CLI_CASES = {
    "cgmt solve --mle --lam": ("cgmt.__main__", ["solve", "--mle", "--lam", "0.1", "--delta", "3", "--kappa", "1"],
                               "--mle and --lam exclude each other"),
    "cgmt solve --lam 1e300": ("cgmt.__main__", ["solve", "--lam", "1e300", "--delta", "2", "--kappa", "1"],
                               r"argument --lam: expected a number in \[1e-30, 1e\+30\]"),
    "cgmt solve --delta nan": ("cgmt.__main__", ["solve", "--lam", "1", "--delta", "nan", "--kappa", "1"],
                               "argument --delta: expected a finite number"),
    "cgmt solve --tol 1e300": ("cgmt.__main__", ["solve", "--lam", "1", "--delta", "2", "--kappa", "1", "--tol",
                                                 "1e300"],
                               "argument --tol"),
    "cgmt sweep --lams 1e-300,1e300": ("cgmt.__main__", ["sweep", "--deltas", "2", "--lams", "1e-300,1e300", "--kappas",
                                                         "1", "--out", "x.csv"], r"lams must lie in \[1e-30"),
    "cgmt sweep --out ''": ("cgmt.__main__", [*THEORY_SWEEP, "--out", ""], "argument --out: expected a non-empty path"),
    "cgmt sweep --n-jobs 10000": ("cgmt.__main__", [*THEORY_SWEEP, "--out", "x.csv", "--n-jobs", "10000"],
                                  "argument --n-jobs: expected an integer in .*CPU cores"),
    "cgmt sweep --max-points 0": ("cgmt.__main__", [*THEORY_SWEEP, "--out", "x.csv", "--max-points", "0"],
                                  "argument --max-points"),
    "paper_figures --max-per-class 0": ("paper_figures.__main__", ["--max-per-class", "0"], "argument --max-per-class"),
    "paper_figures --n-jobs 10000": ("paper_figures.__main__", ["--n-jobs", "10000"], "argument --n-jobs.*CPU cores"),
    "paper_figures --out ''": ("paper_figures.__main__", ["--out", ""], "argument --out: expected a non-empty path"),
    "raptor sweep --fractions 0.5,0.5,0.5": ("empirical.cli", ["sweep", "--fractions", "0.5,0.5,0.5"],
                                             "argument --fractions: expected distinct values"),
    "raptor sweep --fractions 0,0.5,1": ("empirical.cli", ["sweep", "--fractions", "0,0.5,1"], "argument --fractions"),
    "raptor sweep --Cs 1e300": ("empirical.cli", ["sweep", "--Cs", "1,1e300"], "argument --Cs"),
    "raptor sweep --seeds 1000000": ("empirical.cli", ["sweep", "--seeds", "1000000"], "argument --seeds"),
    "raptor sweep --jobs 10000": ("empirical.cli", ["sweep", "--jobs", "10000"], "argument --jobs.*CPU cores"),
    "raptor probe --jobs 10000": ("empirical.cli", ["probe", "--jobs", "10000"], "argument --jobs.*CPU cores"),
    "raptor probe --threads 100000": ("empirical.cli", ["probe", "--threads", "100000"],
                                      "argument --threads.*CPU cores"),
    "raptor probe --layers 1,1,1": ("empirical.cli", ["probe", "--layers", "1,1,1"],
                                    "argument --layers: layers must be distinct"),
    "raptor probe --out ''": ("empirical.cli", ["probe", "--out", ""], "argument --out: expected a non-empty path"),
    "raptor probe --cache-dir ''": ("empirical.cli", ["probe", "--cache-dir", ""], "argument --cache-dir"),
    "raptor stability --seed -1": ("empirical.cli", ["stability", "--seed", "-1"], "argument --seed"),
    "raptor stability --K 10**9": ("empirical.cli", ["stability", "--K", "1000000000"], "argument --K"),
    "raptor export --scale inf": ("empirical.cli", ["export", "--probe-file", "p.json", "--scale", "inf"],
                                  "argument --scale: expected a finite number"),
    "raptor export --out ''": ("empirical.cli", ["export", "--probe-file", "p.json", "--out", ""], "argument --out"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_b3_b5_options_checked_at_parse_time(case, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module, argv, message = CLI_CASES[case]
    code, err = _run_cli(module, argv, capsys)
    assert code == 2
    assert __import__("re").search(message, err), err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_b7_failed_plot_keeps_the_table_and_warns(cli_setup, capsys, monkeypatch):
    from empirical import cli

    root, base = cli_setup

    def broken(*args, **kwargs):
        raise ValueError("'yerr' must not contain negative values")

    import matplotlib.axes

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", broken)
    out = root / "b7"
    assert cli.main(["stability", *base, "--layers", "2", "--K", "2", "--seed", "5", "--out", str(out)]) == 0
    assert (out / "stability_reviews.csv").is_file() and not (out / "stability_reviews.png").exists()
    assert "could not draw" in capsys.readouterr().err


@pytest.mark.parametrize("estimator, seed", [(RaptorProbe(Cs=[1.0]), 26), (RaptorProbe(Cs=[1.0]), 41),
                                             (DiffMeans(), 57)])  # rounding put robust outside before
def test_b7_stability_interval_contains_the_estimate(estimator, seed):
    res = stability(estimator, X, Y, K=2, seed=seed)
    assert res.ci[0] <= res.mean_abs_cos <= res.ci[1]


def test_b7_fit_layers_refuses_repeated_layers_before_fitting():
    with pytest.raises(ValueError, match=r"layers must be distinct \(one probe per layer\), got \[1\]"):
        fit_layers(np.stack([X, X]), Y, layers=[1, 1, 1], progress=False)


def test_b3_delta_sweep_refuses_repeated_fractions_and_too_many_seeds():
    with pytest.raises(ValueError, match="at least 3 distinct values"):
        delta_sweep(X[:40], Y[:40], X[40:], Y[40:], fractions=[0.5, 0.5, 0.5], progress=False)
    with pytest.raises(ValueError, match="seeds must be at most MAX_SEEDS"):
        delta_sweep(X[:40], Y[:40], X[40:], Y[40:], seeds=10**6, progress=False)


# ------------------------------------------------------------------------------------------- B3 / B4 / B5 LLM
@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("transformers")
    from empirical.testing import tiny_model, tiny_tokenizer

    return tiny_model("llama", seed=0, n_layers=2), tiny_tokenizer()


def test_b3_additive_steering_refuses_a_non_finite_edit(tiny):
    from empirical.llm._edits import additive_steering
    from empirical.llm._generation import generate

    model, tok = tiny
    with pytest.raises(ValueError, match="made the hidden state non-finite"):
        with additive_steering(model, {1: np.ones(32)}, alpha=1e300):
            generate(model, tok, "a good film", max_new_tokens=2)


def _hidden(**kwargs):
    def call(model, tok):  # imports transformers when run, not when the module is collected
        from empirical.llm._extract import hidden_states

        return hidden_states(model, tok, ["a good film"], progress=False, **kwargs)

    return call


def _generate(max_new_tokens):
    def call(model, tok):
        from empirical.llm._generation import generate

        return generate(model, tok, "a good film", max_new_tokens=max_new_tokens)

    return call


LLM_CASES = {
    "hidden_states max_length=2.5": (_hidden(max_length=2.5), "max_length must be an integer >= 1, got 2.5"),
    "hidden_states batch_size=2.5": (_hidden(batch_size=2.5), "batch_size must be an integer"),
    "hidden_states cache=''": (_hidden(cache=""), r"the cache directory\) must be a non-empty path"),
    "hidden_states num_threads=100000": (_hidden(num_threads=100000), "num_threads must be at most the"),
    "generate max_new_tokens=100000": (_generate(100000), r"max_new_tokens must be at most the model's 256 positions"),
    "generate max_new_tokens=2.5": (_generate(2.5), "max_new_tokens must be an integer"),
}


@pytest.mark.parametrize("case", sorted(LLM_CASES))
def test_b4_b5_llm_integers_paths_and_counts(case, tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call, message = LLM_CASES[case]
    with pytest.raises(ValueError, match=message):
        call(*tiny)
    assert list(tmp_path.iterdir()) == []


def test_b4_cache_root_refuses_an_empty_path():
    from empirical.common.files import cache_root

    with pytest.raises(ValueError, match="cache_dir must be a non-empty path"):
        cache_root("")
