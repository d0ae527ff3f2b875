"""benchmarks/probe_floor.py and probe_dual_cg.py: the floor adds up the kernels it times, and the dual-space kernels
and solver of the dual-CG experiment compute what they are named after (they stand for a solver that is not in the
library, so nothing else checks them)."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
probe_floor = pytest.importorskip("probe_floor")
probe_dual_cg = pytest.importorskip("probe_dual_cg")


def test_dual_kernels_compute_the_dual_operator_and_its_factor():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 50))
    K = X @ X.T
    s, v = rng.uniform(0.1, 1.0, 30), rng.standard_normal(30)
    K32 = np.asfortranarray(K, dtype=np.float32)
    M = np.eye(30) + s[:, None] * K * s[None, :]
    np.testing.assert_allclose(probe_floor._dual_product(K32, s, v), M @ v, rtol=1e-5)
    L, info = probe_floor._dual_factor(K32, s)
    L = np.tril(L)
    assert info == 0
    np.testing.assert_allclose(L @ L.T, M, rtol=1e-4, atol=1e-4 * np.abs(M).max())


def test_the_floor_adds_up_the_kernels():
    k = probe_floor.kernels(60, 20, 80, repeats=1, dual=True)
    assert all(seconds > 0 for seconds in k.values())
    assert {"dual: operator product (symv)", "dual: preconditioner factorization (scale + potrf)"} <= set(k)
    reduction, path, refit, total = probe_floor.floor(k)
    assert total == pytest.approx(reduction + path + refit)
    assert path >= probe_floor.GRID_POINTS * k["float32 Hessian product"] + k["preconditioner factorization"]


def test_dual_solver_solves_the_primal_newton_system():
    from empirical.logistic import reduce_design
    from empirical.logistic._pcg import PathContext

    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 60))
    X -= X.mean(axis=0)
    design = reduce_design(X)
    ctx = PathContext.from_design(design, validation=False)
    Z = design.Z
    K32 = np.asfortranarray(Z @ Z.T, dtype=np.float32)
    C, d, g = 0.5, rng.uniform(0.05, 0.25, 40), rng.standard_normal(Z.shape[1])
    H = np.eye(Z.shape[1]) + C * Z.T @ (d[:, None] * Z)
    H2 = np.eye(Z.shape[1]) + 2.6 * C * Z.T @ (d[:, None] * Z)
    for scaling in ("weights", "scalar"):
        dual = probe_dual_cg.DualSolver(ctx, K32, 1e-4, 6, scaling)
        x = dual.solve(d, C, g)  # factors at these weights
        assert np.linalg.norm(H @ x - g) <= 1.05e-4 * np.linalg.norm(g)
        x = dual.solve(1.3 * d, 2 * C, g)  # on the stale factor, scaled
        assert np.linalg.norm(H2 @ x - g) <= 1.05e-4 * np.linalg.norm(g)  # (the float32 products' rounding: 1e-6)
        assert dual.factorizations >= 1 and dual.cg >= 2


def test_dual_and_primal_take_the_same_newton_steps():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, 70))
    X -= X.mean(axis=0)
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(50) > 0, 1.0, -1.0)
    out = probe_dual_cg.compare(X, y, np.logspace(-2, 1, 8), rtol=1e-6)
    assert out["systems"] >= 8 and out["largest_step_difference"] < 1e-4
    for name in ("primal", "dual"):
        assert out[name]["factorizations"] == len(out[name]["factorized_at"]) >= 1
