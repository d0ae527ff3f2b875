"""Monte Carlo checks of the spectral (Gaussian covariate) theory: x ~ N(0, Sigma/p), logistic teacher.

Conventions as in :mod:`cgmt._spectral`: rows x = U diag(sqrt(omega)) g / sqrt(p), g ~ N(0, I_p);
P(y = +1 | x) = sigmoid(x'beta*); the estimator of :func:`sims.fit_ridge_logistic` (exact, no
intercept).  Measured per replicate, for a fixed beta_hat and Gaussian x the test scores are exactly
jointly Gaussian, so with m = beta_hat'Sigma beta*/p and q = beta_hat'Sigma beta_hat/p:

- ``alpha`` = m/kappa, ``sigma`` = sqrt(q - m^2/kappa^2), ``margin`` = alpha/sigma;
- ``accuracy`` = the exact population test accuracy of sign(x'beta_hat) (the accuracy formula at the
  measured margin; no test-sample noise), ``alignment`` = m/(kappa sqrt(q)),
  ``euclidean_alignment`` = cos(beta_hat, beta*);
- ``cos_subsample`` (Euclidean) and ``cos_subsample_raw`` (between beta/s for given per-feature scales s)
  of two runs of the paper's ablation protocol (:func:`cgmt.ablation.ablation_split`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy.special import expit
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

import cgmt
from cgmt import Spectrum, spectral_stability
from cgmt.ablation import ablation_split
from empirical.common.checks import as_generator, as_seed_sequence, check_int
from empirical.common.failures import quiet
from empirical.common.resources import check_n_jobs

from ._fit import fit_ridge_logistic
from ._measure import cosine

__all__ = ["SPECTRAL_QUANTITIES", "sample_spectral", "measure_spectral_replicate", "spectral_theory_values",
           "compare_spectral"]

#: quantities measured by :func:`measure_spectral_replicate`, in table order
SPECTRAL_QUANTITIES = ("alpha", "sigma", "margin", "accuracy", "alignment", "euclidean_alignment",
                       "cos_subsample", "cos_subsample_raw")


def sample_spectral(n, spectrum: Spectrum, rng=None, *, teacher=None):
    """Draw (X, y): n rows x ~ N(0, Sigma/p), labels in {-1, +1} with P(y = +1 | x) = sigmoid(x'beta*).

    Parameters
    ----------
    n : int
        Number of rows, >= 1.
    spectrum : cgmt.Spectrum
        Sigma and the teacher.
    rng : int, SeedSequence or Generator, optional
        Randomness (None: fresh entropy).
    teacher : ndarray (p,), optional
        beta* (default ``spectrum.teacher()``; pass it to avoid recomputing).

    Returns
    -------
    (X, y) : (ndarray (n, p), ndarray (n,))

    Examples
    --------
    >>> X, y = sample_spectral(5000, Spectrum.spiked(50, spikes=[9.0], kappa=1.0), 0)
    >>> X.shape, round(float(np.trace(np.cov(X.T)) * 50 / 50), 1)
    ((5000, 50), 1.0)
    """
    n = check_int(n, "n")
    gen = as_generator(rng)
    beta = spectrum.teacher() if teacher is None else teacher
    g = gen.standard_normal((n, spectrum.p)) * np.sqrt(spectrum.eigenvalues)  # coordinates in the eigenbasis
    if spectrum.eigenvectors is not None:
        g = g @ spectrum.eigenvectors.T
    X = g / math.sqrt(spectrum.p)
    y = np.where(gen.random(n) < expit(X @ beta), 1.0, -1.0)
    return X, y


@quiet()  # the replicate reports its fits' success itself (``success``)
def measure_spectral_replicate(delta, lam, spectrum: Spectrum, seed, *, subsample=True, feature_scale=None,
                               drop=0.2, val_fraction=0.2, tol=1e-9) -> dict:
    """One replicate: fit on n = round(delta p) samples and measure :data:`SPECTRAL_QUANTITIES`.

    Parameters
    ----------
    delta, lam : float
        Sample ratio and ridge strength (convention of :func:`cgmt.solve`).
    spectrum : Spectrum
        The feature covariance and the teacher.
    seed : int or SeedSequence
        The replicate's stream (three children: training data, ablation runs 1 and 2).
    subsample : bool, default=True
        Also fit two ablation runs and measure their cosines.
    feature_scale : ndarray (p,), optional
        Scales s for ``cos_subsample_raw`` (cosine of beta/s); NaN without.
    drop, val_fraction : float, default=0.2
        The ablation protocol.
    tol : float, default=1e-9
        Gradient tolerance of every fit.

    Returns
    -------
    dict
        The quantities, plus ``success`` (every fit reached ``tol``).

    Examples
    --------
    >>> out = measure_spectral_replicate(2.0, 0.1, Spectrum.power_law(60, kappa=2.0), 0, subsample=False)
    >>> 0.5 < out["accuracy"] < 1, out["success"]
    (True, True)
    """
    p = spectrum.p
    n = int(round(delta * p))
    if n < 4:
        raise ValueError(f"delta: delta * p must be >= 4, got delta={delta}, p={p}")
    ss = as_seed_sequence(seed, "seed")
    s_train, s_ab1, s_ab2 = ss.spawn(3)
    beta = spectrum.teacher()
    X, y = sample_spectral(n, spectrum, s_train, teacher=beta)
    fit = fit_ridge_logistic(X, y, lam, tol=tol)
    w = fit.coef
    kappa = spectrum.kappa
    # overlaps in the eigenbasis: m = w'Sigma beta*/p, q = w'Sigma w/p
    w_eig = w if spectrum.eigenvectors is None else spectrum.eigenvectors.T @ w
    omega_w = spectrum.eigenvalues * w_eig
    m = float(omega_w @ spectrum.teacher_coordinates) / math.sqrt(p)
    q = float(omega_w @ w_eig) / p
    sigma = math.sqrt(max(q - m * m / kappa ** 2, 0.0))
    out = dict.fromkeys(SPECTRAL_QUANTITIES, float("nan"))
    out.update(alpha=m / kappa, sigma=sigma, margin=m / kappa / sigma,
               accuracy=float(cgmt.accuracy_from_margin(m / kappa / sigma, kappa)),
               alignment=m / (kappa * math.sqrt(q)),
               euclidean_alignment=float(w @ beta / (np.linalg.norm(w) * np.linalg.norm(beta))))
    ok = fit.success
    if subsample:
        ws = []
        for s_ab in (s_ab1, s_ab2):
            idx, _ = ablation_split(y, s_ab, drop=drop, val_fraction=val_fraction)
            f = fit_ridge_logistic(X[idx], y[idx], lam, tol=tol)
            ok = ok and f.success
            ws.append(f.coef)
        out["cos_subsample"] = cosine(ws[0], ws[1])
        if feature_scale is not None:
            out["cos_subsample_raw"] = cosine(ws[0] / feature_scale, ws[1] / feature_scale)
    out["success"] = bool(ok)
    return out


def spectral_theory_values(delta, lam, spectrum: Spectrum, *, feature_scale=None, drop=0.2, val_fraction=0.2) -> dict:
    """The spectral theory's prediction of every quantity of :data:`SPECTRAL_QUANTITIES`.

    Parameters
    ----------
    delta, lam : float
        Sample ratio and ridge strength (convention of :func:`cgmt.solve`).
    spectrum : Spectrum
        The feature covariance and the teacher.
    feature_scale : ndarray (p,), optional
        Scales s of ``cos_subsample_raw`` (:func:`cgmt.spectral_stability`); NaN without.
    drop, val_fraction : float, default=0.2
        The ablation protocol.

    Returns
    -------
    dict
        quantity -> prediction; the cosines are NaN where the stability fixed point did not converge.

    Raises
    ------
    cgmt.ConvergenceError
        The fixed point itself did not converge (``strict=True``).
    """
    r = spectrum.solve(delta, lam, strict=True)
    st = spectral_stability(delta, lam, spectrum, "subsample", drop=drop, val_fraction=val_fraction,
                            feature_scale=feature_scale)
    return {"alpha": r.alpha, "sigma": r.sigma, "margin": r.margin, "accuracy": r.accuracy,
            "alignment": r.alignment, "euclidean_alignment": r.euclidean_alignment,
            "cos_subsample": st.cosine if st.success else float("nan"),
            "cos_subsample_raw": (st.cosine_raw if st.success and feature_scale is not None else float("nan"))}


def compare_spectral(delta, lam, spectrum: Spectrum, replicates, seed=0, *, feature_scale=None, n_jobs=1,
                     progress=True, name="", **measure_kwargs) -> pd.DataFrame:
    """Monte Carlo versus spectral theory at one (delta, lam, spectrum): mean, standard error, theory, z.

    Parameters
    ----------
    delta, lam : float
        Sample ratio and ridge strength (convention of :func:`cgmt.solve`).
    spectrum : Spectrum
        The feature covariance and the teacher.
    replicates : int >= 2
        Independent replicates (standard errors need two).
    seed : int or SeedSequence, default=0
        Root seed; every replicate gets its own child stream.
    feature_scale : ndarray (p,), optional
        Scales s of ``cos_subsample_raw`` (see :func:`measure_spectral_replicate`).
    n_jobs : int, default=1
        joblib workers (each single-threaded).
    progress : bool, default=True
        Show a progress bar.
    name : str, default=""
        Label of the spectrum (a column of the table).
    **measure_kwargs
        Passed to :func:`measure_spectral_replicate`.

    Returns
    -------
    pandas.DataFrame
        One row per quantity measured (not NaN in every replicate): ``spectrum, delta, lam, p, quantity, mean,
        se, theory, z, replicates``.

    Raises
    ------
    RuntimeError
        A Monte Carlo fit did not reach its gradient tolerance.

    Examples
    --------
    >>> t = compare_spectral(2.0, 0.1, Spectrum.power_law(40, kappa=2.0), 2, progress=False, subsample=False)
    >>> list(t.columns[:5])
    ['spectrum', 'delta', 'lam', 'p', 'quantity']
    """
    n_jobs = check_n_jobs(n_jobs)
    replicates = check_int(replicates, "replicates", minimum=2)
    seeds = as_seed_sequence(seed, "seed").spawn(replicates)

    def one(s):
        with threadpool_limits(1):
            return measure_spectral_replicate(delta, lam, spectrum, s, feature_scale=feature_scale, **measure_kwargs)

    it = tqdm(seeds, desc=f"MC {name or 'spectrum'} delta={delta:g} lam={lam:g}", disable=not progress, leave=False)
    rows = Parallel(n_jobs=n_jobs)(delayed(one)(s) for s in it) if n_jobs != 1 else [one(s) for s in it]
    if not all(r["success"] for r in rows):
        raise RuntimeError("a Monte Carlo fit did not reach its gradient tolerance")
    theory = spectral_theory_values(delta, lam, spectrum, feature_scale=feature_scale,
                                    drop=measure_kwargs.get("drop", 0.2),
                                    val_fraction=measure_kwargs.get("val_fraction", 0.2))
    table = []
    for q in SPECTRAL_QUANTITIES:
        vals = np.array([r[q] for r in rows], dtype=float)
        if np.all(np.isnan(vals)):
            continue
        mean, se = float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(vals.size))
        th = float(theory[q])
        table.append({"spectrum": name, "delta": delta, "lam": lam, "p": spectrum.p, "quantity": q, "mean": mean,
                      "se": se, "theory": th, "z": (mean - th) / se if se > 0 else float("nan"),
                      "replicates": replicates})
    return pd.DataFrame(table)
