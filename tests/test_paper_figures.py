"""paper_figures: output helpers, the theory section on a small grid, and the empirical tables on
synthetic hidden states (no model needed)."""
import numpy as np
import pandas as pd
import pytest

from paper_figures import empirical_figures, output, theory
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


def _synthetic_layers(L=3, n=160, p=12, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    H = rng.standard_normal((L + 1, n, p))
    for layer in range(1, L + 1):  # signal grows with depth
        H[layer, :, 0] += layer * (2 * y - 1)
    return H, y


def test_layer_table_separability_and_stability_on_synthetic_states():
    from empirical import DifferenceOfMeans, RaptorProbe
    from empirical.probes.layers import paper_split

    H, y = _synthetic_layers()
    split = paper_split(y)
    methods = {"RAPTOR": RaptorProbe(Cs=np.logspace(-3, 1, 9)), "DiffMeans": DifferenceOfMeans()}
    tab = empirical_figures.layer_table("synthetic", H, y, split, methods, progress=False)
    assert set(tab["method"]) == {"RAPTOR", "DiffMeans"} and set(tab["layer"]) == {1, 2, 3}
    r = tab[tab.method == "RAPTOR"].set_index("layer")["test_accuracy"]
    assert r.loc[3] >= 0.9 and r.loc[3] >= r.loc[1]  # the planted signal is found where it is strongest
    summary = empirical_figures.accuracy_summary(tab)
    assert list(summary.columns) == ["method", "synthetic", "Average"]
    sep = empirical_figures.separability_table("synthetic", H, y, split, progress=False)
    assert len(sep) == 3 and sep.loc[sep.layer == 3, "separable"].item()
    st = empirical_figures.stability_table("synthetic", H, y, split, [1, 3], methods, K=4, progress=False)
    assert list(st["method"]) == ["RAPTOR", "RAPTOR"]  # the paper's stability table has no DiffMeans row
    robust = st.set_index("layer")["robust"]
    assert ((robust > 0) & (robust <= 1)).all()
    # the table is the paper's protocol on the train+val pool: the same as calling the protocol directly
    from empirical import stability
    pool = np.sort(np.r_[split[0], split[1]])
    direct = stability(RaptorProbe(Cs=np.logspace(-3, 1, 9)), H[3][pool], y[pool], K=4, seed=0)
    assert robust.loc[3] == pytest.approx(direct.robust, rel=1e-12)
