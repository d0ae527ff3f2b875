"""benchmarks/probe_floor.py: its floor adds up the kernels it times, and its dual-space kernels compute what they
are named after (they stand for a solver that does not exist, so nothing else checks them)."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
probe_floor = pytest.importorskip("probe_floor")


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
