"""Converters, sweep, optimal lambda, CLI, and solver residual properties over the supported box."""
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import cgmt
from cgmt import conventions
from cgmt.__main__ import main
from cgmt.equations import residuals

pos = st.floats(min_value=0.05, max_value=50.0)


@given(pos, pos, pos, st.floats(-5, 5), pos, pos)
def test_converters_round_trip(delta, lam, kappa, alpha, sigma, gamma):
    ours = dict(delta=delta, kappa=kappa, alpha=alpha, sigma=sigma, gamma=gamma)
    back = conventions.from_sur_candes(**conventions.to_sur_candes(**ours))
    for key in ours:
        assert back[key] == pytest.approx(ours[key], rel=1e-13, abs=1e-15)
    full = dict(ours, lam=lam)
    for to, frm in ((conventions.to_salehi, conventions.from_salehi), (conventions.to_gcm, conventions.from_gcm)):
        back = frm(**to(**full))
        for key in full:
            assert back[key] == pytest.approx(full[key], rel=1e-9, abs=1e-12)


def test_converter_values():
    s = conventions.to_salehi(2.0, 0.1, 4.0, 2.0, 1.0, 3.0)
    assert s["alpha_s"] == 0.5
    g = conventions.to_gcm(2.0, 0.1, 4.0, 2.0, 1.0, 3.0)
    assert g == dict(alpha_gcm=2.0, lam_gcm=0.2, rho=16.0, m=8.0, q=5.0, V=3.0)
    with pytest.raises(ValueError, match="kappa"):
        conventions.to_sur_candes(2.0, 0.0, 0.0, 1.0, 1.0)


@settings(max_examples=25)
@given(st.floats(math.log(0.05), math.log(100.0)), st.floats(math.log(1e-6), math.log(1e3)),
       st.floats(0.0, 20.0))
def test_solver_residual_in_box(log_delta, log_lam, kappa):
    d, lam = math.exp(log_delta), math.exp(log_lam)
    r = cgmt.solve(d, lam, kappa)
    assert r.success and r.residual <= 1e-10
    assert np.max(np.abs(residuals(r.alpha, r.sigma, r.gamma, d, lam, kappa))) <= 1e-10
    assert r.sigma > 0 and r.gamma > 0 and r.alpha >= 0
    assert 0.5 - 1e-15 <= r.accuracy <= cgmt.bayes_accuracy(kappa) + 1e-15


@pytest.mark.parametrize("delta", [0.05, 100.0])
@pytest.mark.parametrize("lam", [1e-6, 1e3])
@pytest.mark.parametrize("kappa", [0.0, 20.0])
def test_hard_corners(delta, lam, kappa):
    r = cgmt.solve(delta, lam, kappa)
    assert r.success and r.residual <= 1e-10


@pytest.mark.parametrize("kappa", [0.5, 2.0, 10.0])
def test_near_separability_threshold(kappa):
    dstar = cgmt.separability_threshold(kappa)
    for d in (0.97 * dstar, 1.03 * dstar):
        r = cgmt.solve(d, 1e-6, kappa)
        assert r.success and r.residual <= 1e-10


def test_sweep_tidy_and_warm_started():
    df = cgmt.sweep([0.5, 2.0], np.geomspace(1e-3, 10, 6), [1.0, 3.0], progress=False)
    assert isinstance(df, pd.DataFrame) and len(df) == 24
    assert list(df.columns[:3]) == ["delta", "lam", "kappa"]
    assert df["success"].all() and df["residual"].max() <= 1e-10
    one = cgmt.solve(2.0, 1e-3, 3.0)
    row = df[(df.delta == 2.0) & (df.kappa == 3.0) & np.isclose(df.lam, 1e-3)].iloc[0]
    assert row.alpha == pytest.approx(one.alpha, rel=1e-9)
    with pytest.raises(ValueError, match="lams"):
        cgmt.sweep([1.0], [0.0], [1.0], progress=False)


def test_optimal_lambda_is_a_maximum():
    res = cgmt.optimal_lambda(2.0, 2.0)
    assert res.success and not res.at_boundary
    for f in (0.8, 1.25):
        assert cgmt.solve(2.0, res.lam * f, 2.0).accuracy <= res.accuracy + 1e-12
    with pytest.raises(ValueError, match="kappa"):
        cgmt.optimal_lambda(2.0, 0.0)


def test_cli(tmp_path, capsys):
    assert main(["solve", "--delta", "2", "--lam", "0.1", "--kappa", "2"]) == 0
    out = capsys.readouterr().out
    assert "alpha" in out and "accuracy" in out
    assert main(["solve", "--delta", "1", "--mle", "--kappa", "2"]) == 2
    assert "lam > 0" in capsys.readouterr().err
    csv = tmp_path / "s.csv"
    png = tmp_path / "s.png"
    assert main(["sweep", "--deltas", "1,2", "--lams", "geom:0.01:1:3", "--kappas", "2", "--out", str(csv),
                 "--plot", str(png), "--no-progress"]) == 0
    df = pd.read_csv(csv)
    assert len(df) == 6 and df["success"].all()
    assert png.stat().st_size > 0
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "kappa^2" in capsys.readouterr().out
