"""sims: a Monte Carlo teacher-student harness that checks the ``cgmt`` predictions with error bars.

Convention (as in ``cgmt``): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, P(y=+1|x) = sigmoid(x'beta*),
delta = n/p, beta_hat = argmin (1/n) sum log(1+exp(-y x'beta)) + lam/(2p)||beta||^2 (no intercept),
z = beta/sqrt(p), v = beta*/||beta*||, alpha = <z_hat, v>, sigma = ||z_hat - alpha v||, m = alpha/sigma.

Main entry points: :func:`sample`, :func:`fit_ridge_logistic`, :func:`measure_replicate`,
:func:`compare`, :func:`compare_grid`, :func:`agreement`, :func:`finite_size_study`, and the hard-margin
(max-margin) fit :func:`fit_max_margin` with its replicate :func:`measure_max_margin` (the check of
:func:`cgmt.max_margin`).  The API is this package's
``__all__``; its modules have a leading underscore (implementation, not API).
"""
from empirical.common.resources import check_n_jobs

from ._compare import THEORY_FIELD, agreement, compare, compare_grid, summarize, theory_values
from ._data import Sample, replicate_seeds, sample
from ._finite_size import HARD_POINTS, analyze as analyze_finite_size, loglog_slope, simulate_raw
from ._fit import fit_ridge_logistic, objective_gradient
from ._max_margin import fit_max_margin, measure_max_margin
from ._measure import QUANTITIES, ablation_run_fits, loo_gamma, measure_replicate, simulate_stability_replicate
from ._spectral import SPECTRAL_QUANTITIES, compare_spectral, measure_spectral_replicate, sample_spectral

measure = measure_replicate


def finite_size_study(points=HARD_POINTS, ps=(250, 500, 1000, 2000, 4000), replicates=8, seed=0, *,
                      n_jobs=1, progress=True, **measure_kwargs) -> tuple:
    """Simulate (:func:`simulate_raw`) and analyse (:func:`analyze_finite_size`).

    Parameters
    ----------
    points, ps, replicates, seed, n_jobs, progress, **measure_kwargs
        As for :func:`simulate_raw`.

    Returns
    -------
    (raw, table, slopes) : (DataFrame, DataFrame, DataFrame)
        The replicate rows of :func:`simulate_raw` and the two tables of :func:`analyze_finite_size`.
    """
    n_jobs = check_n_jobs(n_jobs)
    raw = simulate_raw(points, ps, replicates, seed, n_jobs=n_jobs, progress=progress, **measure_kwargs)
    table, slopes = analyze_finite_size(raw)
    return raw, table, slopes


__all__ = ["SPECTRAL_QUANTITIES", "compare_spectral", "measure_spectral_replicate", "sample_spectral", "Sample",
           "sample", "replicate_seeds", "fit_ridge_logistic", "objective_gradient", "fit_max_margin",
           "measure_max_margin", "loo_gamma",
           "measure_replicate", "measure", "simulate_stability_replicate", "ablation_run_fits", "QUANTITIES",
           "THEORY_FIELD",
           "theory_values", "summarize", "compare", "compare_grid", "agreement", "simulate_raw",
           "analyze_finite_size", "loglog_slope", "finite_size_study", "HARD_POINTS"]
