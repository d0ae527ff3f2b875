"""Two-replica ablation stability for anisotropic Gaussian features (derivation: ``docs/spectral_theory.md``).

Two ridge-logistic fits (same lam) on training sets of sizes delta_k p that share delta_12 p samples of
one pool drawn from the model of :mod:`cgmt._spectral`.  Each fit is the effective ridge estimator
beta_k = R_k (mh_k Sigma beta* + Sigma^{1/2} zeta_k), R_k = (delta_k lam + Vh_k Sigma)^{-1}, with
Cov(zeta_1, zeta_2) = qh_12 I.  Only samples in both sets correlate the two noises:

    qh_12 = delta_12 E[2 s(-kappa U) h_1(V_1) h_2(V_2)] / (gamma_1 gamma_2),

the expectation of :func:`cgmt.stability.cross_expectation` at the channel noise covariance
s_12 = q_12 - m_1 m_2 / rho, and q_12 = beta_1'Sigma beta_2/p is itself a spectral sum of qh_12:

    s_12 = mh_1 mh_2 rho Cov_pi(omega/D_1, omega/D_2) + qh_12 (1/p) sum omega_i^2 / (D_1i D_2i).

This scalar fixed point is solved by Brent's method.  At Sigma = I it is the equation of
:func:`cgmt.stability.pair_stability`.  Any quadratic overlap beta_1'A beta_2/p then follows; the
cosine is reported in three metrics: ``cosine`` (Euclidean in the coordinates of x, e.g. the
standardized features RAPTOR fits on), ``cosine_sigma`` (the Sigma metric: correlation of the two
probes' scores) and, given per-feature scales s, ``cosine_raw`` between the folded-back raw-space
vectors beta/s (the paper's concept vectors).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import OptimizeResult

from empirical.common.checks import check_scalar
from empirical.common.failures import CONVERGED, CROSS_FAILED, STATUS_MESSAGES, ConvergenceError, quiet, report

from ._newton import bracketed_root
from ._spectral import solve_spectral
from ._spectrum import Spectrum
from .ablation import protocol_fractions
from .quadrature import DEFAULT_ORDER
from .stability import RESIDUAL_TOL, cross_expectation
from .validation import check_lam, check_quad_order, check_spectral_delta

__all__ = ["spectral_pair_stability", "spectral_stability"]


def _single(spectrum, delta, lam, options):
    with quiet():  # a failure raises below
        res = solve_spectral(delta, lam, spectrum.eigenvalues, spectrum.teacher_weights, **options)
    if not res.success:
        raise ConvergenceError(f"cgmt.solve_spectral did not converge at delta={delta}, lam={lam}: {res.message}", res)
    return res


def _metric(spectrum, feature_scale):
    """(bilinear form x, y -> x'A~y, diagonal of A~) in the eigenbasis for A = diag(1/s^2); None for A = I."""
    if feature_scale is None:
        return None
    s = np.asarray(feature_scale, dtype=float)
    if s.shape != (spectrum.p,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"feature_scale must be {spectrum.p} finite positive per-feature scales, got shape {s.shape}")
    u, _ = spectrum.teacher_basis()
    inv2 = 1.0 / (s * s)
    diag = (u * u).T @ inv2

    def form(x, y):
        return float(np.dot((u @ x) * inv2, u @ y))

    return form, diag


def spectral_pair_stability(delta1, delta2, delta12, lam, spectrum, *, feature_scale=None,
                            quad_order=DEFAULT_ORDER, strict=False, **solve_options) -> OptimizeResult:
    """Limiting cosine of two ridge-logistic fits on overlapping sets of Gaussian-covariate data.

    Parameters
    ----------
    delta1, delta2 : float
        Training-set sizes over the dimension.
    delta12 : float
        Their overlap over the dimension, in [0, min(delta1, delta2)].
    lam : float
        Common ridge strength (> 0), convention of :func:`cgmt.solve`.
    spectrum : Spectrum
        Sigma and the teacher (:class:`cgmt.Spectrum`).
    feature_scale : array_like, shape (p,), optional
        Per-feature scales s: also report ``cosine_raw`` between beta_1/s and beta_2/s (needs the
        spectrum's eigenvectors, or the standard basis).
    quad_order : int, default=DEFAULT_ORDER (10)
        Gauss-Legendre points per panel of every quadrature rule: the cross expectation's and the two spectral
        solves' (:func:`cgmt.solve_spectral`'s ``quad_order``).
    strict : bool, default=False
        Raise :class:`cgmt.ConvergenceError` if the cross fixed point is not solved; otherwise that failure warns
        :class:`cgmt.ConvergenceWarning` (:func:`empirical.common.failures.report`) and ``success`` is False.  (A
        replica whose :func:`cgmt.solve_spectral` fails raises ``ConvergenceError`` whatever ``strict`` is.)
    **solve_options
        Passed to :func:`cgmt.solve_spectral`.

    Returns
    -------
    OptimizeResult
        ``cosine`` (Euclidean, coordinates of x), ``cosine_sigma``, ``cosine_raw`` (or None), and
        ``independent_cosine``, ``independent_cosine_sigma``, ``independent_cosine_raw`` (the same cosines
        with qh_12 = 0, i.e. independent training sets), ``q_hat12``, ``s12``, the two replica solutions
        ``fit1``, ``fit2``, the inputs ``delta1``, ``delta2``, ``delta12``, ``lam``, ``kappa`` (the replicas in
        canonical order: ``fit1`` / ``delta1`` is the larger training set), and ``success``, ``status`` (0 ok,
        4 cross fixed point not converged; :data:`empirical.common.failures.STATUS_MESSAGES`), ``message``,
        ``residual``, ``nfev``.

    Examples
    --------
    >>> import cgmt
    >>> s = Spectrum.isotropic(200, 1.0)
    >>> r = spectral_pair_stability(1.28, 1.28, 0.8192, 0.1, s)
    >>> iso = cgmt.stability(2.0, 0.1, 1.0, "subsample")
    >>> r.success, abs(r.cosine - iso.cosine) < 1e-8
    (True, True)
    """
    if not isinstance(spectrum, Spectrum):
        raise ValueError(f"spectrum must be a cgmt.Spectrum, got {type(spectrum).__name__}")
    delta1 = check_spectral_delta(delta1, "delta1")
    delta2 = check_spectral_delta(delta2, "delta2")
    delta12 = check_scalar(delta12, "delta12", low=0.0)
    lam = check_lam(lam)
    quad_order = check_quad_order(quad_order)
    solve_options = {**solve_options, "quad_order": quad_order}
    if delta12 > min(delta1, delta2) * (1 + 1e-12):
        raise ValueError(f"delta12 must be <= min(delta1, delta2) = {min(delta1, delta2)}, got {delta12!r}")
    delta12 = min(delta12, delta1, delta2)
    metric = _metric(spectrum, feature_scale)
    f1 = _single(spectrum, delta1, lam, solve_options)
    f2 = f1 if delta2 == delta1 else _single(spectrum, delta2, lam, solve_options)
    if delta1 < delta2:  # canonical order: the quadrature is built around the first replica
        f1, f2 = f2, f1
        delta1, delta2 = delta2, delta1
    omega, t, rho = spectrum.eigenvalues, spectrum.teacher_weights, f1.rho
    a1 = omega / (delta1 * lam + f1.V_hat * omega)
    a2 = omega / (delta2 * lam + f2.V_hat * omega)
    pi = t * omega / rho
    cov_pi = float(np.dot(pi, (a1 - np.dot(pi, a1)) * (a2 - np.dot(pi, a2))))
    signal = f1.m_hat * f2.m_hat * rho * cov_pi
    s2 = float(np.mean(omega * omega / ((delta1 * lam + f1.V_hat * omega) * (delta2 * lam + f2.V_hat * omega))))
    x1, x2 = (f1.alpha, f1.sigma, f1.gamma), (f2.alpha, f2.sigma, f2.gamma)
    kappa = f1.kappa
    nfev = 0

    def q_hat12(s12):
        nonlocal nfev
        nfev += 1
        return delta12 * cross_expectation(x1, x2, s12, kappa, quad_order=quad_order) / (f1.gamma * f2.gamma)

    def gap(s12):
        return signal + s2 * q_hat12(s12) - s12

    hi = f1.sigma * f2.sigma
    if delta12 == 0.0:
        s12, qh12, ok = signal, 0.0, True
    else:
        g_hi = gap(hi)
        if g_hi >= -RESIDUAL_TOL * hi:  # identical training sets: the top of the bracket is the root
            s12 = hi
            ok = True
        else:
            lo = -hi
            g_lo = gap(lo)
            ok = g_lo > 0
            if ok:
                s12, _, ok = bracketed_root(gap, lo, hi, xtol=1e-13 * hi, rtol=1e-15)
            else:
                s12 = float("nan")
        qh12 = q_hat12(s12) if ok else float("nan")
    residual = abs(signal + s2 * qh12 - s12) / hi if ok and delta12 > 0 else 0.0
    ok = ok and residual <= 10 * RESIDUAL_TOL
    b = spectrum.teacher_coordinates

    def overlaps(qh_cross):
        out = {}
        for name, form_diag in (("euclid", None), ("raw", metric)):
            if name == "raw" and metric is None:
                continue
            form, diag = form_diag if form_diag is not None else (lambda x, y: float(np.dot(x, y)), np.ones_like(omega))
            d1 = delta1 * lam + f1.V_hat * omega
            d2 = delta2 * lam + f2.V_hat * omega
            g1 = f1.m_hat * omega / d1 * b
            g2 = f2.m_hat * omega / d2 * b
            o12 = form(g1, g2) + qh_cross * float(np.mean(omega * diag / (d1 * d2)))
            o11 = form(g1, g1) + f1.q_hat * float(np.mean(omega * diag / (d1 * d1)))
            o22 = form(g2, g2) + f2.q_hat * float(np.mean(omega * diag / (d2 * d2)))
            out[name] = o12 / math.sqrt(o11 * o22)
        q12 = f1.m * f2.m / rho + signal + s2 * qh_cross
        out["sigma"] = q12 / math.sqrt(f1.q * f2.q)
        return out

    dep = overlaps(qh12) if ok else {"euclid": float("nan"), "sigma": float("nan"), "raw": float("nan")}
    ind = overlaps(0.0)
    status = CONVERGED if ok else CROSS_FAILED
    message = STATUS_MESSAGES[status] + f" (residual {residual:.2e}, {nfev} evaluations)"
    res = OptimizeResult(
        cosine=dep["euclid"], cosine_sigma=dep["sigma"], cosine_raw=dep.get("raw"),
        independent_cosine=ind["euclid"], independent_cosine_sigma=ind["sigma"],
        independent_cosine_raw=ind.get("raw"),
        q_hat12=qh12, s12=s12, fit1=f1, fit2=f2, delta1=delta1, delta2=delta2, delta12=delta12, lam=lam,
        kappa=kappa, success=ok, status=status, message=message, residual=residual, nfev=nfev)
    return report(res, strict, "cgmt.spectral_pair_stability", delta1=delta1, delta2=delta2, delta12=delta12,
                  lam=lam)


def spectral_stability(delta, lam, spectrum, protocol="subsample", *, drop=0.2, val_fraction=0.2,
                       feature_scale=None, strict=False, **options) -> OptimizeResult:
    """Predicted cosine between two probes under a resampling protocol, for Gaussian-covariate data.

    The protocols are those of :func:`cgmt.stability` (:func:`cgmt.ablation.protocol_fractions`);
    ``"subsample"`` is the paper's ablation protocol (each run drops ``drop`` of the training set).

    Parameters
    ----------
    delta : float
        Pool size N over p.
    lam : float
        Ridge strength (> 0).
    spectrum : Spectrum
        The feature covariance and teacher (:class:`cgmt.Spectrum`).
    protocol : {"independent", "subsample", "full_vs_subsample", "subsample_refit"}, default="subsample"
        Which two fits are compared (:func:`cgmt.ablation.protocol_fractions`).
    drop, val_fraction : float in [0, 1), default=0.2
        The ablation protocol's parameters (the paper: 0.2 and 0.2).
    feature_scale : array_like, optional
        Per-feature scales for ``cosine_raw`` (see :func:`spectral_pair_stability`).
    strict : bool, default=False
        As in :func:`spectral_pair_stability`.
    **options
        Passed to :func:`spectral_pair_stability` (``quad_order``) and :func:`cgmt.solve_spectral`.

    Returns
    -------
    OptimizeResult
        As :func:`spectral_pair_stability`, plus ``protocol`` and ``fractions``.

    Examples
    --------
    >>> r = spectral_stability(2.0, 0.1, Spectrum.spiked(300, kappa=2.0))
    >>> r.success, 0 < r.independent_cosine < r.cosine < 1
    (True, True)
    """
    f1, f2, f12 = protocol_fractions(protocol, drop=drop, val_fraction=val_fraction)
    delta = check_spectral_delta(delta)
    res = spectral_pair_stability(f1 * delta, f2 * delta, f12 * delta, lam, spectrum,
                                  feature_scale=feature_scale, strict=strict, **options)
    res["protocol"] = protocol
    res["fractions"] = (f1, f2, f12)
    return res
