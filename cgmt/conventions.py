"""Converters between our convention and those of Sur & Candes, Salehi et al., and the GCM.

Ours: x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, delta = n/p, loss (1/n) sum rho(-y x'beta) +
lam/(2p)||beta||^2, alpha = <z_hat, v>, sigma = ||z_hat - alpha v|| (z = beta/sqrt p), prox
parameter gamma.  Every converter takes the parameters of one convention as arguments and returns a dict of
the other's; round trips are exact.

* Sur & Candes (2019): x ~ N(0, I_p/n), kappa_SC = p/n, gamma_SC^2 = Var(x'beta*), MLE (lam = 0)
  with beta_hat ~ alpha_SC beta* + noise, Var(noise_j) ~ sigma_SC^2 / ... such that
  ||beta_hat_perp||^2 = p sigma_SC^2 -- derivation (docs/theory.md): x_SC'beta_SC = x'beta gives
  beta_SC = sqrt(n/p) beta, so alpha_SC = alpha/kappa, gamma_SC = kappa, kappa_SC = 1/delta,
  sigma = sqrt(kappa_SC) sigma_SC, and their prox parameter lambda_SC = gamma.
* Salehi, Abbasi & Hassibi (2019): same data scaling and objective as ours; alpha_S multiplies
  beta*: beta_hat ~ alpha_S beta* + ..., so alpha_S = alpha/kappa, sigma, gamma, lam, delta, kappa equal.
* GCM (Loureiro et al. 2021), isotropic case Omega = Psi = Phi = I, d = p, preactivations
  x_GCM'w/sqrt(p) with x_GCM ~ N(0, I_p), loss sum_i l + (lam_GCM/2)||w||^2: w = beta,
  theta0 = beta*; sample ratio alpha_GCM = delta, lam_GCM = delta lam, rho = kappa^2,
  m = kappa alpha, q = alpha^2 + sigma^2, V = gamma.
"""
from __future__ import annotations

import math

from empirical.common.checks import check_scalar

#: Largest magnitude of a parameter the converters accept (its square, in the overlaps, stays finite).
PARAMETER_MAX = 1e100

__all__ = [
    "to_sur_candes", "from_sur_candes", "to_salehi", "from_salehi", "to_gcm", "from_gcm",
]


def _reals(**params) -> list:
    """The parameters (a converter's ``locals()`` at entry: its arguments in order) as finite floats of magnitude
    at most :data:`PARAMETER_MAX`, in order (ValueError naming one)."""
    return [check_scalar(v, k, low=-PARAMETER_MAX, high=PARAMETER_MAX) for k, v in params.items()]


def to_sur_candes(delta, kappa, alpha, sigma, gamma) -> dict:
    """Ours -> Sur-Candes (kappa_sc = p/n, gamma_sc, alpha_sc, sigma_sc, lambda_sc); needs kappa > 0.

    Parameters
    ----------
    delta, kappa, alpha, sigma, gamma : float
        Our convention (docs/theory.md): delta = n/p, ||beta*||^2 = p kappa^2, alpha = <z_hat, v>,
        sigma = ||z_hat - alpha v||, gamma the prox parameter.

    Returns
    -------
    dict
        ``kappa_sc``, ``gamma_sc``, ``alpha_sc``, ``sigma_sc``, ``lambda_sc``.

    Examples
    --------
    >>> import cgmt
    >>> r = cgmt.mle(5.0, 5 ** 0.5)
    >>> {k: round(v, 4) for k, v in to_sur_candes(5.0, 5 ** 0.5, r.alpha, r.sigma, r.gamma).items()}
    {'kappa_sc': 0.2, 'gamma_sc': 2.2361, 'alpha_sc': 1.4994, 'sigma_sc': 4.7436, 'lambda_sc': 3.0269}
    """
    delta, kappa, alpha, sigma, gamma = _reals(**locals())  # the arguments, checked, in order
    if kappa <= 0 or delta <= 0:
        raise ValueError(f"to_sur_candes: kappa and delta must lie in (0, inf), got kappa={kappa!r}, delta={delta!r}")
    k_sc = 1.0 / delta
    return dict(kappa_sc=k_sc, gamma_sc=kappa, alpha_sc=alpha / kappa, sigma_sc=sigma / math.sqrt(k_sc),
                lambda_sc=gamma)


def from_sur_candes(kappa_sc, gamma_sc, alpha_sc, sigma_sc, lambda_sc) -> dict:
    """Sur-Candes -> ours (delta, kappa, alpha, sigma, gamma); lam = 0 (their estimator is the MLE).

    Parameters
    ----------
    kappa_sc, gamma_sc, alpha_sc, sigma_sc, lambda_sc : float
        Sur and Candes' parameters (kappa_sc = p/n, gamma_sc the signal strength).

    Returns
    -------
    dict
        ``delta``, ``kappa``, ``alpha``, ``sigma``, ``gamma`` in our convention.

    Examples
    --------
    >>> out = from_sur_candes(0.2, 5 ** 0.5, 1.49935, 4.74355, 3.0269)
    >>> round(out["delta"], 4), round(out["alpha"], 4)
    (5.0, 3.3526)
    """
    kappa_sc, gamma_sc, alpha_sc, sigma_sc, lambda_sc = _reals(**locals())  # the arguments, checked, in order
    if kappa_sc <= 0:
        raise ValueError(f"from_sur_candes: kappa_sc must lie in (0, inf), got {kappa_sc!r}")
    return dict(delta=1.0 / kappa_sc, kappa=gamma_sc, alpha=alpha_sc * gamma_sc,
                sigma=sigma_sc * math.sqrt(kappa_sc), gamma=lambda_sc)


def to_salehi(delta, lam, kappa, alpha, sigma, gamma) -> dict:
    """Ours -> Salehi et al. (alpha_s multiplies beta*); needs kappa > 0.

    Parameters
    ----------
    delta, lam, kappa, alpha, sigma, gamma : float
        Our convention (as for :func:`to_sur_candes`); lam the ridge strength.

    Returns
    -------
    dict
        ``delta``, ``lam``, ``kappa``, ``alpha_s`` (= alpha / kappa), ``sigma``, ``gamma``.

    Examples
    --------
    >>> round(to_salehi(2.0, 0.1, 2.0, 0.927, 0.9863, 1.0)["alpha_s"], 4)
    0.4635
    """
    delta, lam, kappa, alpha, sigma, gamma = _reals(**locals())  # the arguments, checked, in order
    if kappa <= 0:
        raise ValueError(f"to_salehi: kappa must lie in (0, inf) (alpha_s = alpha/kappa), got {kappa!r}")
    return dict(delta=delta, lam=lam, kappa=kappa, alpha_s=alpha / kappa, sigma=sigma, gamma=gamma)


def from_salehi(delta, lam, kappa, alpha_s, sigma, gamma) -> dict:
    """Salehi et al. -> ours (alpha = kappa alpha_s).

    Parameters
    ----------
    delta, lam, kappa, alpha_s, sigma, gamma : float
        Salehi et al.'s parameters: the same data scaling and objective as ours, with alpha_s the coefficient on
        beta* (beta_hat ~ alpha_s beta* + noise).

    Returns
    -------
    dict
        ``delta``, ``lam``, ``kappa``, ``alpha``, ``sigma``, ``gamma``.

    Examples
    --------
    >>> from_salehi(2.0, 0.1, 2.0, 0.4635, 0.9863, 1.0)["alpha"]
    0.927
    """
    delta, lam, kappa, alpha_s, sigma, gamma = _reals(**locals())  # the arguments, checked, in order
    return dict(delta=delta, lam=lam, kappa=kappa, alpha=alpha_s * kappa, sigma=sigma, gamma=gamma)


def to_gcm(delta, lam, kappa, alpha, sigma, gamma) -> dict:
    """Ours -> GCM overlaps (sample ratio alpha_gcm, lam_gcm, rho, m, q, V).

    Parameters
    ----------
    delta, lam, kappa, alpha, sigma, gamma : float
        Our convention (as for :func:`to_sur_candes`); lam the ridge strength.

    Returns
    -------
    dict
        ``alpha_gcm``, ``lam_gcm``, ``rho``, ``m``, ``q``, ``V``.

    Examples
    --------
    >>> {k: round(v, 4) for k, v in to_gcm(2.0, 0.1, 2.0, 0.927, 0.9863, 1.0).items()}
    {'alpha_gcm': 2.0, 'lam_gcm': 0.2, 'rho': 4.0, 'm': 1.854, 'q': 1.8321, 'V': 1.0}
    """
    delta, lam, kappa, alpha, sigma, gamma = _reals(**locals())  # the arguments, checked, in order
    return dict(alpha_gcm=delta, lam_gcm=delta * lam, rho=kappa ** 2, m=kappa * alpha,
                q=alpha ** 2 + sigma ** 2, V=gamma)


def from_gcm(alpha_gcm, lam_gcm, rho, m, q, V) -> dict:
    """GCM overlaps -> ours; needs rho > 0 (alpha = m / sqrt(rho)) and q >= alpha^2.

    Parameters
    ----------
    alpha_gcm, lam_gcm, rho, m, q, V : float
        The GCM's sample ratio, ridge and overlaps.

    Returns
    -------
    dict
        ``delta``, ``lam``, ``kappa``, ``alpha``, ``sigma``, ``gamma``.

    Examples
    --------
    >>> out = from_gcm(2.0, 0.2, 4.0, 1.854, 1.8321, 1.0)
    >>> round(out["alpha"], 4), round(out["lam"], 4)
    (0.927, 0.1)
    """
    alpha_gcm, lam_gcm, rho, m, q, V = _reals(**locals())  # the arguments, checked, in order
    if alpha_gcm <= 0 or rho <= 0:
        raise ValueError(f"from_gcm: alpha_gcm and rho must lie in (0, inf), got alpha_gcm={alpha_gcm!r}, rho={rho!r}")
    kappa = math.sqrt(rho)
    alpha = m / kappa
    s2 = q - alpha ** 2
    if s2 < -1e-12 * max(q, 1.0):
        raise ValueError(f"from_gcm: q must be >= (m/sqrt(rho))^2 = {alpha ** 2}, got {q}")
    return dict(delta=alpha_gcm, lam=lam_gcm / alpha_gcm, kappa=kappa, alpha=alpha,
                sigma=math.sqrt(max(s2, 0.0)), gamma=V)
