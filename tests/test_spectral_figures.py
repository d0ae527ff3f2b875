"""The paper_figures spectral section end to end on small synthetic hidden states (no model needed)."""
import json

import numpy as np
import pandas as pd

from cgmt.spectral import Spectrum
from paper_figures import spectral_figures
from sims.spectral import sample_spectral


def _hidden(n=300, p=12, layers=3):
    """Layers share the labels of a Gaussian-covariate draw; deeper layers add independent noise features."""
    X, ypm = sample_spectral(n, Spectrum.power_law(p, 1.0, 3.0, teacher_exponent=0.5), 0)
    noise = np.random.default_rng(1).standard_normal((layers, n, p))
    H = [X * np.sqrt(p) * np.linspace(1, 3, p) + 0.5 * layer * noise[layer] for layer in range(layers)]
    return {"toy": (np.array(H), (ypm > 0).astype(int))}


def test_section_runs_resumes_and_detects_damaged_files(tmp_path):
    hidden = _hidden()
    table = spectral_figures.run(tmp_path, hidden, layers=[1, 2], extra_seeds=1, progress=False, monte_carlo=False)
    assert set(table["predictor"]) == set(spectral_figures.PREDICTORS)
    assert np.all(table["mae_lambda"] >= 0) and np.all(table["mae_lambda"] < 0.5)
    assert (tmp_path / "figures" / "spectral_toy.png").exists()
    assert (tmp_path / "figures" / "spectral_toy.pdf").read_bytes()[:5] == b"%PDF-"
    # the numbers behind the figure: its three panels, measured values and every predictor
    curves = pd.read_csv(tmp_path / "tables" / "spectral_toy.csv")
    assert set(curves.panel) == {"lambda", "delta", "layer"}
    assert set(spectral_figures.PREDICTORS) <= set(curves.columns)
    assert list(curves[curves.panel == "layer"].layer) == [1, 2]
    assert curves[curves.panel != "layer"].measured.between(0, 1).all()
    assert (tmp_path / "tables" / "spectral_semi_synthetic.csv").exists()
    assert (tmp_path / "tables" / "spectral_vs_paper_predictor.csv").exists()
    raw = sorted((tmp_path / "spectral" / "raw").glob("*.json"))
    assert len(raw) == 3  # two layers + one extra seed at the best layer
    json.loads(raw[0].read_text())
    raw[0].write_text("{broken")  # a damaged result is recomputed, not trusted
    again = spectral_figures.run(tmp_path, hidden, layers=[1, 2], extra_seeds=1, progress=False, monte_carlo=False,
                                 n_jobs=2)
    json.loads(raw[0].read_text())
    assert np.allclose(again["mae_lambda"], table["mae_lambda"])
