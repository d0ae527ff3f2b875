"""Bad inputs to the theory (``cgmt``) and the simulations (``sims``): every one is a ValueError naming
the argument, raised before any work; absurd grids are refused with their size and the limit."""
from __future__ import annotations

import numpy as np
import pytest

import cgmt
import sims
from cgmt._sweep import MAX_POINTS

NAN, INF = float("nan"), float("inf")
SPECTRUM = cgmt.Spectrum.power_law(50, exponent=1.0, kappa=1.0)

BAD_INPUTS = {
    "solve delta 0": (lambda: cgmt.solve(0.0, 1.0, 1.0), r"delta must lie in \(0.0, 1000000.0\]"),
    "solve delta NaN": (lambda: cgmt.solve(NAN, 1.0, 1.0), r"delta must be finite"),
    "solve lam negative": (lambda: cgmt.solve(1.0, -1.0, 1.0), r"lam must lie in"),
    "solve lam text": (lambda: cgmt.solve(1.0, "big", 1.0), r"lam must be a real number"),
    "solve kappa inf": (lambda: cgmt.solve(1.0, 1.0, INF), r"kappa must be finite"),
    "solve kappa bool": (lambda: cgmt.solve(1.0, 1.0, True), r"kappa must be a real number"),
    "solve tol 0": (lambda: cgmt.solve(1.0, 1.0, 1.0, tol=0.0), r"tol"),
    "solve max_iter 0": (lambda: cgmt.solve(1.0, 1.0, 1.0, max_iter=0), r"max_iter must be a positive integer"),
    "solve x0 shape": (lambda: cgmt.solve(1.0, 1.0, 1.0, x0=[1.0]), r"x0"),
    "mle below threshold": (lambda: cgmt.mle(0.5, 5.0, strict=True), r"delta|separab"),
    "threshold kappa negative": (lambda: cgmt.separability_threshold(-1.0), r"kappa must lie in"),
    "optimal bounds reversed": (lambda: cgmt.optimal_lambda(1.0, 1.0, bounds=(10.0, 1.0)), r"bounds"),
    "optimal n_grid": (lambda: cgmt.optimal_lambda(1.0, 1.0, n_grid=1), r"n_grid must be an integer >= 3"),
    # counts have an upper bound too (check_int's maximum): a huge one is refused, not an overflow or a hang
    "optimal n_grid huge": (lambda: cgmt.optimal_lambda(1.0, 1.0, n_grid=10**300), r"n_grid must be an integer <="),
    "solve max_iter huge": (lambda: cgmt.solve(1.0, 1.0, 1.0, max_iter=10**300), r"max_iter must be a positive"),
    "sweep n_jobs 0": (lambda: cgmt.sweep([1.0], [1.0], [1.0], n_jobs=0, progress=False), r"n_jobs must be a non-zero"),
    "sweep deltas beyond the domain": (lambda: cgmt.sweep([1.0, 1e300], [1.0], [1.0], progress=False),
                                       r"deltas\[1\] must lie in"),
    "replicate seeds text": (lambda: sims.replicate_seeds("3", 2), r"seed must be an integer"),
    "stability protocol": (lambda: cgmt.stability(1.0, 1.0, 1.0, protocol="bootstrap"), r"protocol"),
    "stability drop 1": (lambda: cgmt.stability(1.0, 1.0, 1.0, drop=1.0), r"drop must lie in"),
    "accuracy margin NaN": (lambda: cgmt.accuracy_from_margin(NAN, 1.0), r"m must not contain NaN"),
    "sweep lams empty": (lambda: cgmt.sweep([1.0], [], [1.0], progress=False), r"lams"),
    "sweep too many points": (lambda: cgmt.sweep(np.linspace(1, 2, 1001), np.linspace(1, 2, 1000), [1.0],
                                                 progress=False), rf"1001000 points, more than the limit {MAX_POINTS}"),
    "spectral eigenvalues negative": (lambda: cgmt.solve_spectral(1.0, 1.0, [1.0, -1.0], [1.0, 1.0]),
                                      r"eigenvalues"),
    "spectral teacher shape": (lambda: cgmt.solve_spectral(1.0, 1.0, [1.0, 2.0], [1.0]), r"teacher_weights"),
    "spectral eigenvalues NaN": (lambda: cgmt.solve_spectral(1.0, 1.0, [1.0, NAN], [1.0, 1.0]), r"eigenvalues"),
    "spectrum covariance not square": (lambda: cgmt.Spectrum.from_covariance(np.ones((2, 3)), [1.0, 1.0]),
                                       r"covariance"),
    "spectrum p 0": (lambda: cgmt.Spectrum.power_law(0), r"p must be an integer"),
    "spectral stability protocol": (lambda: cgmt.spectral_stability(1.0, 1.0, SPECTRUM, "jackknife"), r"protocol"),
    "sample n 0": (lambda: sims.sample(0, 10, 1.0), r"n must be an integer"),
    "sample kappa NaN": (lambda: sims.sample(10, 10, NAN), r"kappa must be finite"),
    "sample beta shape": (lambda: sims.sample(10, 10, 1.0, beta_star=np.ones(3)), r"beta_star"),
    "sample rng": (lambda: sims.sample(10, 10, 1.0, rng="seed"), r"rng"),
    "spectral sample n": (lambda: sims.sample_spectral(-1, SPECTRUM), r"n must be an integer"),
    "fit lam NaN": (lambda: sims.fit_ridge_logistic(np.ones((4, 2)), np.array([1, -1, 1, -1.0]), NAN), r"lam"),
    "fit X NaN": (lambda: sims.fit_ridge_logistic(np.full((4, 2), NAN), np.array([1, -1, 1, -1.0]), 1.0), r"X"),
    "fit y values": (lambda: sims.fit_ridge_logistic(np.eye(4, 2), np.array([0, 1, 2, 1.0]), 1.0), r"y"),
    "compare replicates 1": (lambda: sims.compare(1.0, 1.0, 1.0, 50, 1, progress=False), r"replicates"),
    "compare p 0": (lambda: sims.compare(1.0, 1.0, 1.0, 0, 4, progress=False), r"p must be an integer"),
    "sims grid too large": (lambda: sims.compare_grid(np.linspace(1, 2, 1000), np.linspace(1, 2, 1000), [1.0], 50, 2,
                                                      progress=False), r"2000000 points, more than the limit 100000"),
    "spectral compare replicates": (lambda: sims.compare_spectral(1.0, 1.0, SPECTRUM, 0, progress=False),
                                    r"replicates"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_a_clear_error(case):
    call, message = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=message):
        call()
