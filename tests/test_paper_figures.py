"""paper_figures: output helpers, the theory section on a small grid, and the empirical tables on
synthetic hidden states (no model needed)."""
import numpy as np
import pandas as pd
import pytest

import cgmt
from paper_figures import empirical_figures, output, style, theory
from paper_figures.__main__ import build_parser, write_index


def test_tables_and_figures_are_written_atomically(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.pi]})
    path = output.save_table(df, tmp_path, "t")
    assert pd.read_csv(path).equals(df)
    md = path.with_suffix(".md").read_text().splitlines()
    assert md[0] == "| a | b |" and md[3].endswith("3.142 |")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    png = output.save_figure(fig, tmp_path, "f")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.rglob("*.tmp"))  # no temporary files left behind
    index = write_index(tmp_path).read_text()
    assert "figures/f.png" in index and "### t" in index


def test_markdown_cells_with_line_breaks_and_pipes_stay_one_row():
    md = output.to_markdown(pd.DataFrame({"prompt": ["a\nb | c"], "x": [1.0]})).splitlines()
    assert len(md) == 3 and md[2] == "| a<br>b \\| c | 1 |"


def test_cli_parser_sections():
    args = build_parser().parse_args(["--out", "x", "--only", "theory", "--quick"])
    assert args.only == ["theory"] and args.quick
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--only", "nonsense"])


def test_theory_sweep_and_plot(tmp_path):
    sweep = theory.theory_sweep(tmp_path, kappas=(2.0,), deltas=(0.5, 2.0), lams=np.logspace(-2, 1, 4),
                                progress=False)
    assert len(sweep) == 8 and sweep["success"].all()
    # accuracy never exceeds the Bayes accuracy, and more data helps at every lambda
    assert (sweep["accuracy"] < 0.7783).all()
    acc = sweep.pivot(index="lam", columns="delta", values="accuracy")
    assert (acc[2.0] > acc[0.5]).all()
    fake_sims = pd.DataFrame({"kappa": [2.0], "delta": [2.0], "lam": [0.1], "quantity": ["accuracy"],
                              "mean": [0.66], "se": [0.01]})
    png = theory.plot_quantity(tmp_path, sweep, fake_sims, "accuracy", "acc", "test accuracy", bayes=True)
    assert png.exists()
    assert png.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"  # the vector copy next to the PNG


def _is_style_color(c):
    """A palette colour, the theory colour, or a grey."""
    import matplotlib.colors as mcolors
    r, g, b = mcolors.to_rgb(c)
    return mcolors.to_hex(c) in {x.lower() for x in (*style.SERIES, style.THEORY_COLOR)} or r == g == b


def test_theory_figures_use_the_style_colours(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    figs = []
    monkeypatch.setattr(theory, "save_figure", lambda fig, out, name: figs.append(fig))
    sweep = theory.theory_sweep(tmp_path, kappas=(1.0, 2.0), deltas=(0.5, 1.0, 2.0), lams=np.logspace(-2, 1, 3),
                                progress=False)
    theory.plot_quantity(tmp_path, sweep, None, "sigma", "s", "σ")
    theory.phase_and_optimum(tmp_path, kappas=np.linspace(0, 2, 3), deltas=(0.5, 2.0), opt_kappas=(1.0, 2.0),
                             progress=False)
    for fig in figs:
        for ax in fig.axes:
            assert all(_is_style_color(line.get_color()) for line in ax.lines)
            assert ax.get_xlabel()
        assert fig.axes[0].get_ylabel()
    # one colour per delta, in the palette's order
    assert [line.get_color() for line in figs[0].axes[0].lines] == list(style.SERIES[:3])
    plt.close("all")


def _power_table(abs_error, se, ps=(50, 100, 200, 400)):
    ps = np.asarray(ps, float)
    std = 0.7 / np.sqrt(ps)
    return pd.DataFrame(dict(delta=2.0, lam=0.1, kappa=2.0, p=ps.astype(int), quantity="alpha", std=std,
                             std_se=0.05 * std, abs_error=abs_error, se=se, rmse=std, n_rep=100))


def test_finite_size_slopes_fit_std_everywhere_and_bias_only_where_resolved():
    ps = np.array([50.0, 100.0, 200.0, 400.0])
    # bias 1/p, noise of the mean 0.002: resolved (> 3 s.e.) at p = 50, 100 only
    sl = theory.finite_size_slopes(_power_table(1.0 / ps, np.full(4, 0.002))).iloc[0]
    assert sl.std_slope == pytest.approx(-0.5) and sl.rmse_slope == pytest.approx(-0.5)
    assert sl.std_slope_se == pytest.approx(0.05 / np.sqrt(np.sum((np.log(ps) - np.log(ps).mean()) ** 2)))
    assert sl.resolved_ps == 2 and sl.resolved_p_max == 100
    assert sl.abs_error_slope == pytest.approx(-1.0)
    # an unresolved smallest p: no bias slope, even though a larger p happens to exceed 3 s.e.
    sl = theory.finite_size_slopes(_power_table(np.array([0.001, 0.01, 0.008, 0.001]), np.full(4, 0.002))).iloc[0]
    assert sl.resolved_ps == 0 and np.isnan(sl.abs_error_slope)


def test_finite_size_replicates_favour_the_cheap_dimensions():
    assert theory.finite_size_replicates((50, 100, 200, 400, 800), 300) == {50: 2400, 100: 1200, 200: 600,
                                                                            400: 300, 800: 300}
    assert theory.finite_size_replicates((100,), 7) == {100: 7}


def test_finite_size_convergence_figure_and_tables(tmp_path):
    ps = (40, 80, 160, 320)
    table, slopes = theory.finite_size_convergence(tmp_path, ps=ps, replicates=40, seed=3, progress=False)
    png = tmp_path / "figures" / "finite_size_convergence.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
    saved = pd.read_csv(tmp_path / "tables" / "finite_size_convergence.csv")
    assert {"p", "quantity", "mean", "theory", "abs_error", "std", "se", "n_rep"} <= set(saved.columns)
    assert len(saved) == len(ps) * 3 and saved.success.all()
    assert dict(saved.groupby("p").n_rep.first()) == theory.finite_size_replicates(ps, 40)
    th = cgmt.solve(*theory.FINITE_SIZE_POINT)
    for q, field in (("alpha", "alpha"), ("sigma", "sigma"), ("accuracy_formula", "accuracy")):
        g = saved[saved.quantity == q]
        assert np.allclose(g.theory, th[field])
        # simulation agrees with theory within the noise of the mean (+ a small finite-size allowance)
        assert (g.abs_error <= 4 * g.se + 0.01).all(), g
        # the spread of a replicate shrinks like p^(-1/2): std * sqrt(p) stays within a factor 2 across an
        # 8-fold range of p (a constant std, or one falling like 1/p, would give sqrt(8) = 2.8; 10 seeds: <= 1.75)
        scaled = g["std"] * np.sqrt(g.p)
        assert scaled.max() / scaled.min() < 2.0
    fs = pd.read_csv(tmp_path / "tables" / "finite_size_slopes.csv").set_index("quantity")
    assert {"std_slope", "abs_error_slope", "rmse_slope"} <= set(fs.columns)
    # std across replicates ~ p^(-1/2): over 10 seeds these sizes gave slopes -0.41 to -0.62 (sd 0.05)
    assert fs.std_slope.between(-0.75, -0.25).all(), fs.std_slope


def _synthetic_layers(L=3, n=160, p=12, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    H = rng.standard_normal((L + 1, n, p))
    for layer in range(1, L + 1):  # signal grows with depth
        H[layer, :, 0] += layer * (2 * y - 1)
    return H, y


def test_layer_table_separability_and_stability_on_synthetic_states():
    from empirical import DiffMeans, RaptorProbe
    from empirical.probes._layers import paper_split

    H, y = _synthetic_layers()
    split = paper_split(y)
    methods = {"RAPTOR": RaptorProbe(Cs=np.logspace(-3, 1, 9)), "DiffMeans": DiffMeans()}
    tab = empirical_figures.layer_table("synthetic", H, y, split, methods, progress=False)
    # RAPTOR's equal-data variant (its train-only fit at C*, before the refit) comes with it at no cost
    assert set(tab["method"]) == {"RAPTOR", "RAPTOR (train only)", "DiffMeans"} and set(tab["layer"]) == {1, 2, 3}
    assert tab.loc[tab.method == "RAPTOR (train only)", "test_accuracy"].between(0, 1).all()
    r = tab[tab.method == "RAPTOR"].set_index("layer")["test_accuracy"]
    assert r.loc[3] >= 0.9 and r.loc[3] >= r.loc[1]  # the planted signal is found where it is strongest
    summary = empirical_figures.accuracy_summary(tab)
    assert list(summary.columns) == ["method", "synthetic", "Average"]
    sep = empirical_figures.separability_table("synthetic", H, y, split, progress=False)
    assert len(sep) == 3 and sep.loc[sep.layer == 3, "separable"].item()
    ctl = empirical_figures.separability_control_table("synthetic", H, y, split, [1, 3], progress=False)
    assert len(ctl) == 8 and set(zip(ctl.labels, ctl.rows)) == {(a, b) for a in ("real", "shuffled")
                                                                 for b in ("train", "all")}
    assert ctl.decided.all() and (ctl.n_over_p == ctl.n / ctl.p).all()
    real3 = ctl[(ctl.layer == 3) & (ctl.labels == "real") & (ctl.rows == "train")]
    assert real3.separable.item() == sep.loc[sep.layer == 3, "separable"].item()  # the LP agrees with the SVM ladder
    summary_ctl = empirical_figures.separability_control_summary(ctl)
    assert set(summary_ctl.columns) >= {"layers", "separable", "undecided", "n_over_p"}
    assert (summary_ctl.layers == 2).all()
    st = empirical_figures.stability_table("synthetic", H, y, split, [1, 3], methods, K=4, progress=False)
    assert list(st["method"]) == ["RAPTOR", "RAPTOR"]  # the paper's stability table has no DiffMeans row
    robust = st.set_index("layer")["robust"]
    assert ((robust > 0) & (robust <= 1)).all()
    # the table is the paper's protocol on the train+val pool: the same as calling the protocol directly
    from empirical import stability
    pool = np.sort(np.r_[split[0], split[1]])
    direct = stability(RaptorProbe(Cs=np.logspace(-3, 1, 9)), H[3][pool], y[pool], K=4, seed=0)
    assert robust.loc[3] == pytest.approx(direct.mean_abs_cos, rel=1e-12)


def test_theory_and_stability_sections_resume_only_a_matching_finished_run(tmp_path, monkeypatch):
    from paper_figures import stability as stability_section

    def finished(p_sims, reps_sims, p_stab):
        output.save_table(pd.DataFrame({"delta": [1.0]}), tmp_path, "theory_sweep")
        output.save_table(pd.DataFrame({"p": [p_sims] * 2, "replicates": [reps_sims] * 2}), tmp_path, "theory_vs_sims")
        for name in ("separability_threshold", "optimal_lambda", "finite_size_slopes", "stability_vs_lambda_theory"):
            output.save_table(pd.DataFrame({"x": [1]}), tmp_path, name)
        output.save_table(pd.DataFrame({"p": list(theory.FINITE_SIZE_REPLICATES)}), tmp_path, "finite_size_convergence")
        output.save_table(pd.DataFrame({"p": [p_stab], "replicates": [6]}), tmp_path, "stability_vs_lambda")
        (tmp_path / "figures").mkdir(exist_ok=True)
        for fig in ("theory_accuracy", "theory_alignment", "theory_sigma", "theory_phase_optimum",
                    "finite_size_convergence", "stability_vs_lambda"):
            (tmp_path / "figures" / f"{fig}.png").write_bytes(b"png")

    def recomputed(*args, **kwargs):
        raise RuntimeError("recomputed")

    monkeypatch.setattr(theory, "theory_sweep", recomputed)
    monkeypatch.setattr(stability_section, "make_stability_figures", recomputed)
    finished(400, 8, 400)
    sweep, sims_tab = theory.run(tmp_path)  # everything saved with the full run's sizes: nothing recomputed
    assert list(sims_tab.p) == [400, 400] and list(stability_section.run(tmp_path).p) == [400]
    with pytest.raises(RuntimeError, match="recomputed"):
        theory.run(tmp_path, quick=True)  # --quick simulates at p = 200: the saved p = 400 table is not reused
    with pytest.raises(RuntimeError, match="recomputed"):
        stability_section.run(tmp_path, quick=True)
    finished(400, 5, 400)
    with pytest.raises(RuntimeError, match="recomputed"):
        theory.run(tmp_path)  # other replicate count
    finished(400, 8, 400)
    (tmp_path / "figures" / "theory_sigma.png").unlink()
    with pytest.raises(RuntimeError, match="recomputed"):
        theory.run(tmp_path)  # a missing figure
    finished(400, 8, 400)
    import time
    output.force_recompute(time.time() + 1)
    try:
        with pytest.raises(RuntimeError, match="recomputed"):
            theory.run(tmp_path)  # --force
    finally:
        output.force_recompute(None)


def test_markdown_missing_values_are_empty_cells():
    md = output.to_markdown(pd.DataFrame({"a": [1.5, np.nan], "b": ["x", None]})).splitlines()
    assert md[2] == "| 1.5 | x |" and md[3] == "|  |  |"
