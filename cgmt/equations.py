"""The CGMT fixed-point system of ridge logistic regression, its residuals and analytic Jacobian.

Convention (see docs/theory.md): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, delta = n/p, objective
(1/n) sum log(1 + exp(-y x'beta)) + lam/(2p) ||beta||^2, z = beta/sqrt(p),
alpha = <z_hat, v>, sigma = ||z_hat - alpha v||.  With Z1, Z2 iid N(0, 1), V = alpha Z1 + sigma Z2,
eta = prox_{gamma rho}(V), s = sigmoid:

    (1) sigma^2 = 2 delta E[s(-kappa Z1) (V - eta)^2]
    (2) alpha   = -2 kappa delta E[s'(kappa Z1) eta]
    (3) 1/delta = gamma lam + 2 E[s(-kappa Z1) (1 - 1/(1 + gamma s'(eta)))]

((3) is the paper's third equation rewritten with E[2 s(-kappa Z1)] = 1, which avoids the
cancellation in 1 - 1/delta at large delta.)  Relative residuals:

    r1 = 2 delta E1 / sigma^2 - 1,   r2 = (-2 kappa delta E2 - alpha) / sqrt(alpha^2 + sigma^2),
    r3 = delta (gamma lam + 2 E3c) - 1.

Quadrature: condition on V.  With tau^2 = alpha^2 + sigma^2, V = tau U and
Z1 = a U + b W (a = alpha/tau, b = sigma/tau, U, W iid N(0, 1)), so
E[h(Z1) k(V)] = E_U[k(tau U) K_h(U)] with K_h(U) = E_W[h(a U + b W)].  The prox is evaluated on a
1-D grid in U only; the kernels K_h are 1-D integrals in W.  Both use the composite rules of
:mod:`cgmt.quadrature`, refined at the prox branch points (V ~ c-, c+, Im V = +-pi), at
kappa Z1 = 0 (poles +-i pi / kappa) and where the kernels vary.

Jacobian: derivatives in alpha and sigma follow from Stein's lemma,
d/dalpha E[h(Z1) k(V)] = E[h' k'] + alpha E[h k''], d/dsigma E[h k(V)] = sigma E[h k''].
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit

from empirical.common.checks import check_scalar

from .prox import prox_near
from .quadrature import DEFAULT_ORDER, MAX_PANEL, TRUNCATION, build_edges, fill_rule, gauss_hermite, gauss_legendre
from .validation import check_delta, check_kappa, check_lam, check_quad_order

#: The API: Python-level evaluations that check their arguments.  The Numba kernels (``prox_branch_points``,
#: ``expectation_terms``, ``stein_gradients``, ``spectral_sums_into``, ``spectral_res_jac_y``, ``problem_res_jac_y``,
#: ``res_jac_y``) are compiled for the solvers' inner loops, take already checked floats and are not API.
__all__ = ["residuals", "residual_and_jacobian", "expectations", "conditional_kernels", "SPECTRAL_SUMS",
           "quadrature_rule", "N_TERMS", "ORDER_MAX"]

N_TERMS = 12
# Gauss-Hermite tiers: 2 x order nodes where the integrand is analytic in |Im| < pi / 0.5,
# GH2_FACTOR x order nodes where it is analytic in |Im| < pi / GH2_STRIP (error <= 1e-14 relative).
GH2_FACTOR = 8
GH2_STRIP = 1.5
_MIN_SCALE = 1e-10
_W_DROP = 1e-20  # inner (W) quadrature weights below this are skipped (see expectation_terms)


@njit(cache=True)
def prox_branch_points(gamma):
    """Real parts (c-, c+) of the branch points of V -> prox_{gamma rho}(V) (Im V = +-pi).

    Parameters
    ----------
    gamma : float
        The prox scale (gamma <= 0: no branch points, (0, 0) is returned).

    Returns
    -------
    c_minus, c_plus : float
        Real parts of the branch points, c- <= c+.
    """
    if gamma <= 0.0:
        return 0.0, 0.0
    x = 2.0 * math.asinh(0.5 * math.sqrt(gamma))
    cp = x - gamma / math.expm1(-x)
    cm = -x - gamma / math.expm1(x)
    return cm, cp


@njit(cache=True)
def _kernel_sums(u, a, b, kappa, wn, ww, nn):
    """Sums of weights times (s(-kappa Z1), s'(kappa Z1), s''(kappa Z1)) over the W-rule."""
    ka = 0.0
    kbv = 0.0
    kc = 0.0
    au = a * u
    for i in range(nn):
        z = kappa * (au + b * wn[i])
        e = math.exp(-abs(z))
        inv = 1.0 / (1.0 + e)
        ei = e * inv
        s1 = ei * inv
        th = (1.0 - e) * inv  # tanh(|z|/2)
        if z >= 0.0:
            sneg = ei
            s2 = -s1 * th
        else:
            sneg = inv
            s2 = s1 * th
        w = ww[i]
        ka += w * sneg
        kbv += w * s1
        kc += w * s2
    return ka, kbv, kc


@njit(cache=True)
def _kernel_sums_factored(u, a, kappa, ep, em, ww, nn):
    """As :func:`_kernel_sums` for a u-independent rule, with e^{-|z|} = e^{-+kappa a u} ep/em[i].

    ``ep[i] = exp(-kappa b w_i)`` and ``em[i] = 1 / ep[i]`` are precomputed once per rule, so the
    inner loop needs no exponential (caller guarantees kappa (|a u| + |b w_i|) <= 600: no overflow).
    """
    ka = 0.0
    kbv = 0.0
    kc = 0.0
    cp = math.exp(-kappa * a * u)
    cm = 1.0 / cp
    for i in range(nn):
        # z >= 0 <=> cp ep[i] <= 1
        ez = cp * ep[i]
        if ez <= 1.0:
            e = ez
        else:
            e = cm * em[i]
        inv = 1.0 / (1.0 + e)
        ei = e * inv
        s1 = ei * inv
        th = (1.0 - e) * inv
        w = ww[i]
        if ez <= 1.0:
            ka += w * ei
            kc -= w * s1 * th
        else:
            ka += w * inv
            kc += w * s1 * th
        kbv += w * s1
    return ka, kbv, kc


@njit(cache=True)
def _kernels(u, a, b, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww, fixed_n):
    """K_A = E_W[s(-kappa Z1)], K_B = E_W[s'(kappa Z1)], K_C = E_W[s''(kappa Z1)], Z1 = a u + b W.

    If ``fixed_n`` > 0 the first ``fixed_n`` entries of (wn, ww) hold a u-independent rule.
    """
    if kappa == 0.0:
        return 0.5, 0.25, 0.0
    if fixed_n > 0:
        return _kernel_sums(u, a, b, kappa, wn, ww, fixed_n)
    cen[0] = -a * u / b
    scl[0] = max(math.pi / (kappa * b), _MIN_SCALE)
    ne = build_edges(-L, L, H, cen, scl, ebuf)
    nn = fill_rule(ebuf, ne, xg, wg, True, wn, ww)
    return _kernel_sums(u, a, b, kappa, wn, ww, nn)


@njit(cache=True)
def _inner_fixed_rule(kappa, b, xg, wg, gz1, gw1, gz2, gw2, L, H, ebuf, wn, ww):
    """Write a u-independent W-rule into (wn, ww) and return its size, or 0 if none is accurate.

    The kernel integrands are analytic in |Im W| < pi / (kappa b): Gauss-Hermite (2 or GH2_FACTOR x order
    nodes) for kappa b <= 0.5 or GH2_STRIP; uniform Gauss-Legendre panels of width
    h = min(H, pi / (1.5 kappa b)) (Bernstein parameter >= 6.2) while h >= H/2; else 0
    (the caller then refines per node around the pole line).
    """
    kb = kappa * b
    if kb <= 0.5:
        n = gz1.size
        wn[:n] = gz1
        ww[:n] = gw1
        return n
    if kb <= GH2_STRIP:
        n = gz2.size
        wn[:n] = gz2
        ww[:n] = gw2
        return n
    h = min(H, math.pi / (1.5 * kb))
    if h < 0.5 * H:
        return 0
    none = np.empty(0)
    ne = build_edges(-L, L, h, none, none, ebuf)
    return fill_rule(ebuf, ne, xg, wg, True, wn, ww)


@njit(cache=True)
def expectation_terms(alpha, sigma, gamma, kappa, xg, wg, gz1, gw1, gz2, gw2, L, H, out):
    """Fill ``out[:12]`` with the expectations defining the residuals and the Jacobian.

    With A = s(-kappa Z1), B = s'(kappa Z1), C = s''(kappa Z1), g1 = (V - eta)^2, g2 = eta,
    q = 1 - D, D = 1/(1 + gamma s'(eta)), primes = d/dV and subscript gamma = d/dgamma:
    out = [E A g1, E B g2, E A q, E B g1', E A g1'', E A g1_g, E C g2', E B g2'', E B g2_g,
           E B q', E A q'', E A q_g].

    (xg, wg): Gauss-Legendre panel rule; (gz1, gw1), (gz2, gw2): Gauss-Hermite rules with 2 and 8
    times the panel order, used instead of the composite rule when the integrand is analytic in a
    strip of half-width >= 2 pi (resp. pi / 1.5) -- there they are accurate to ~1e-14 (tested).

    Parameters
    ----------
    alpha, sigma, gamma : float
        The order parameters (sigma > 0, gamma > 0); V = alpha Z1 + sigma Z2.
    kappa : float
        Signal strength, >= 0.
    xg, wg, gz1, gw1, gz2, gw2 : ndarray
        The rules above, as returned by :func:`quadrature_rule`.
    L : float
        Truncation of the Gaussian line to [-L, L] (:data:`cgmt.quadrature.TRUNCATION`).
    H : float
        Widest composite panel (:data:`cgmt.quadrature.MAX_PANEL`).
    out : ndarray of shape (N_TERMS,)
        Overwritten with the twelve expectations.

    Returns
    -------
    int
        The number of outer (U) quadrature nodes used.
    """
    for j in range(N_TERMS):
        out[j] = 0.0
    tau = math.sqrt(alpha * alpha + sigma * sigma)
    a = alpha / tau
    b = sigma / tau
    cm, cp = prox_branch_points(gamma)
    cen = np.empty(3)
    scl = np.empty(3)
    cen[0] = 0.0
    scl[0] = math.pi / (kappa * abs(a)) if kappa * abs(a) > 0.0 else H
    cen[1] = cm / tau
    cen[2] = cp / tau
    scl[1] = math.pi / tau
    scl[2] = math.pi / tau
    for j in range(3):
        if scl[j] < _MIN_SCALE:
            scl[j] = _MIN_SCALE
    cap = int(math.ceil(2.0 * L / H)) + 4 + 3 * (2 * (int(math.log2(H / _MIN_SCALE)) + 3) + 1)
    nq = xg.size
    s_out = max(tau, kappa * abs(a))  # singularities at Im u = +-pi / s_out
    if s_out <= 0.5:
        un, uw, nu = gz1, gw1, gz1.size
    elif s_out <= GH2_STRIP:
        un, uw, nu = gz2, gw2, gz2.size
    else:
        ebuf = np.empty(cap)
        ne = build_edges(-L, L, H, cen, scl, ebuf)
        un = np.empty((ne - 1) * nq)
        uw = np.empty((ne - 1) * nq)
        nu = fill_rule(ebuf, ne, xg, wg, True, un, uw)
    # inner buffers
    cen1 = np.empty(1)
    scl1 = np.empty(1)
    cap1 = int(math.ceil(2.0 * L / H)) + 4 + (2 * (int(math.log2(H / _MIN_SCALE)) + 3) + 1)
    ebuf1 = np.empty(cap1)
    nw = max(cap1 * nq, gz2.size)
    wn = np.empty(nw)
    ww = np.empty(nw)
    fixed_n = _inner_fixed_rule(kappa, b, xg, wg, gz1, gw1, gz2, gw2, L, H, ebuf1, wn, ww)
    factored = False
    if fixed_n > 0 and kappa > 0.0:
        umax = 0.0
        for i in range(nu):
            umax = max(umax, abs(un[i]))
        wmax = 0.0
        for i in range(fixed_n):
            wmax = max(wmax, abs(wn[i]))
        factored = kappa * (abs(a) * umax + b * wmax) <= 600.0
    if factored:
        # nodes with weight < _W_DROP are dropped: the kernel integrands lie in [-1, 1] and the
        # weights sum to 1, so this changes K_A, K_B, K_C by < fixed_n * _W_DROP absolutely
        ep = np.empty(fixed_n)
        em = np.empty(fixed_n)
        wk = np.empty(fixed_n)
        nk = 0
        for i in range(fixed_n):
            if ww[i] >= _W_DROP:
                ep[nk] = math.exp(-kappa * b * wn[i])
                em[nk] = 1.0 / ep[nk]
                wk[nk] = ww[i]
                nk += 1
    else:
        ep = wn
        em = wn
        wk = ww
        nk = 0
    v_prev = 0.0
    eta_prev = np.nan  # first node: the prox's own start
    d_prev = 0.0
    for i in range(nu):
        u = un[i]
        wu = uw[i]
        v = tau * u
        # Newton start extrapolated from the previous node with d eta / d v = D
        eta = prox_near(v, gamma, eta_prev + d_prev * (v - v_prev))
        # sigmoid and its first three derivatives at eta from one exponential
        ee = math.exp(-abs(eta))
        einv = 1.0 / (1.0 + ee)
        s1 = ee * einv * einv
        th = (1.0 - ee) * einv  # tanh(|eta| / 2)
        if eta >= 0.0:
            s0 = einv
            s2 = -s1 * th
        else:
            s0 = ee * einv
            s2 = s1 * th
        s3 = s1 * (th * th - 2.0 * s1)
        d = 1.0 / (1.0 + gamma * s1)
        v_prev = v
        eta_prev = eta
        d_prev = d
        dv = -gamma * s2 * d * d * d
        dvv = -gamma * s3 * d ** 4 + 3.0 * gamma * gamma * s2 * s2 * d ** 5
        r = gamma * s0  # V - eta, without cancellation
        q = gamma * s1 * d  # 1 - D
        g1 = r * r
        g1p = 2.0 * r * q
        g1pp = 2.0 * q * q - 2.0 * r * dv
        g1g = 2.0 * r * s0 * d
        g2g = -s0 * d
        qg = d * d * (s1 - gamma * s2 * s0 * d)
        if factored:
            ka, kb, kc = _kernel_sums_factored(u, a, kappa, ep, em, wk, nk)
        else:
            ka, kb, kc = _kernels(u, a, b, kappa, xg, wg, L, H, ebuf1, cen1, scl1, wn, ww, fixed_n)
        wa = wu * ka
        wb = wu * kb
        out[0] += wa * g1
        out[1] += wb * eta
        out[2] += wa * q
        out[3] += wb * g1p
        out[4] += wa * g1pp
        out[5] += wa * g1g
        out[6] += wu * kc * d
        out[7] += wb * dv
        out[8] += wb * g2g
        out[9] += wb * (-dv)
        out[10] += wa * (-dvv)
        out[11] += wa * qg
    return nu


@njit(cache=True)
def stein_gradients(t, alpha, sigma, kappa, grad):
    """Fill ``grad[i, :]`` = d(E1, E2, E3c)_i / d(alpha, sigma, gamma) from the terms ``t`` of
    :func:`expectation_terms`.

    Stein's lemma: d/dalpha E[h(Z1) k(V)] = E[h' k'] + alpha E[h k''], d/dsigma E[h k(V)] = sigma E[h k''].

    Parameters
    ----------
    t : ndarray of shape (N_TERMS,)
        The expectations filled by :func:`expectation_terms`.
    alpha, sigma : float
        The order parameters at which ``t`` was computed.
    kappa : float
        Signal strength.
    grad : ndarray of shape (3, 3)
        Overwritten: row i holds the gradient of (E1, E2, E3c)_i in (alpha, sigma, gamma).
    """
    grad[0, 0] = -kappa * t[3] + alpha * t[4]
    grad[0, 1] = sigma * t[4]
    grad[0, 2] = t[5]
    grad[1, 0] = kappa * t[6] + alpha * t[7]
    grad[1, 1] = sigma * t[7]
    grad[1, 2] = t[8]
    grad[2, 0] = -kappa * t[9] + alpha * t[10]
    grad[2, 1] = sigma * t[10]
    grad[2, 2] = t[11]


@njit(cache=True)
def _res_jac(alpha, sigma, gamma, delta, lam, kappa, rule, L, H, r, jac):
    """Residuals r (3,) and Jacobian jac (3, 3) w.r.t. (alpha, sigma, gamma); returns E2 (for alpha_S)."""
    t = np.empty(N_TERMS)
    xg, wg, gz1, gw1, gz2, gw2 = rule
    expectation_terms(alpha, sigma, gamma, kappa, xg, wg, gz1, gw1, gz2, gw2, L, H, t)
    tau = math.sqrt(alpha * alpha + sigma * sigma)
    e1, e2, e3 = t[0], t[1], t[2]
    g = np.empty((3, 3))
    stein_gradients(t, alpha, sigma, kappa, g)
    e1a, e1s, e1g = g[0, 0], g[0, 1], g[0, 2]
    e2a, e2s, e2g = g[1, 0], g[1, 1], g[1, 2]
    e3a, e3s, e3g = g[2, 0], g[2, 1], g[2, 2]
    s2 = sigma * sigma
    r[0] = 2.0 * delta * e1 / s2 - 1.0
    num = -2.0 * kappa * delta * e2 - alpha
    r[1] = num / tau
    r[2] = delta * (gamma * lam + 2.0 * e3) - 1.0
    jac[0, 0] = 2.0 * delta * e1a / s2
    jac[0, 1] = 2.0 * delta * e1s / s2 - 4.0 * delta * e1 / (s2 * sigma)
    jac[0, 2] = 2.0 * delta * e1g / s2
    t3 = tau * tau * tau
    jac[1, 0] = (-2.0 * kappa * delta * e2a - 1.0) / tau - num * alpha / t3
    jac[1, 1] = (-2.0 * kappa * delta * e2s) / tau - num * sigma / t3
    jac[1, 2] = -2.0 * kappa * delta * e2g / tau
    jac[2, 0] = 2.0 * delta * e3a
    jac[2, 1] = 2.0 * delta * e3s
    jac[2, 2] = delta * lam + 2.0 * delta * e3g
    return e2


@njit(cache=True)
def res_jac_y(y, delta, lam, kappa, xg, wg, gz1, gw1, gz2, gw2, L, H, r, jy):
    """Residuals and Jacobian in y = (m, log sigma, log gamma), alpha = m sigma; returns E2.

    Fills r (3,) and jy (3, 3).  (The solver's variables; see :mod:`cgmt._solver`.)
    """
    sigma = math.exp(y[1])
    alpha = y[0] * sigma
    gamma = math.exp(y[2])
    jac = np.empty((3, 3))
    e2 = _res_jac(alpha, sigma, gamma, delta, lam, kappa, (xg, wg, gz1, gw1, gz2, gw2), L, H, r, jac)
    for i in range(3):
        jy[i, 0] = jac[i, 0] * sigma
        jy[i, 1] = jac[i, 0] * alpha + jac[i, 1] * sigma
        jy[i, 2] = jac[i, 2] * gamma
    return e2


#: layout of the array filled by :func:`spectral_sums_into`
SPECTRAL_SUMS = ("V", "dV", "A1", "dA1", "B2", "dB2", "C", "dC", "rho")


@njit(cache=True)
def spectral_sums_into(L, v_hat, omega, t, out):
    """The spectral side of the anisotropic fixed point at (L = delta lam, Vh), into ``out`` (:data:`SPECTRAL_SUMS`).

    With a_i = omega_i / (L + Vh omega_i), tw_i = t_i omega_i: V = mean(a), A1 = sum tw a, B2 = mean(a^2),
    C = sum tw (a - A1/rho)^2 (no cancellation), rho = sum tw, and the derivatives dX/dVh
    (see :func:`cgmt._spectral.spectral_sums`).

    Parameters
    ----------
    L : float
        delta * lam.
    v_hat : float
        The conjugate Vh.
    omega : ndarray of shape (p,)
        Eigenvalues of the feature covariance (:class:`cgmt.Spectrum`), > 0.
    t : ndarray of shape (p,)
        Teacher weights on the eigenvectors (the spectrum's ``teacher_weights``).
    out : ndarray of shape (9,)
        Overwritten with the sums in the order of :data:`SPECTRAL_SUMS`.
    """
    p = omega.size
    rho = 0.0
    a1 = 0.0
    da1 = 0.0
    v = 0.0
    b2 = 0.0
    b3 = 0.0
    for i in range(p):
        a = omega[i] / (L + v_hat * omega[i])
        tw = t[i] * omega[i]
        rho += tw
        a1 += tw * a
        da1 += tw * a * a
        v += a
        b2 += a * a
        b3 += a * a * a
    abar = a1 / rho
    c = 0.0
    dc = 0.0
    for i in range(p):
        a = omega[i] / (L + v_hat * omega[i])
        tw = t[i] * omega[i]
        dev = a - abar
        c += tw * dev * dev
        dc += tw * dev * a * a
    out[0] = v / p
    out[1] = -b2 / p
    out[2] = a1
    out[3] = -da1
    out[4] = b2 / p
    out[5] = -2.0 * b3 / p
    out[6] = c
    out[7] = -2.0 * dc
    out[8] = rho


@njit(cache=True)
def spectral_res_jac_y(y, delta, lam, kappa, omega, t, xg, wg, gz1, gw1, gz2, gw2, L, H, r, jy, hats):
    """Residuals and Jacobian of the anisotropic fixed point (:mod:`cgmt._spectral`) in y = (m, log sigma, log gamma).

    r1 = sigma'^2/sigma^2 - 1, r2 = (alpha' - alpha)/tau, r3 = gamma/V' - 1, where (alpha', sigma', V') are the
    spectral maps of the conjugates computed from the channel at (alpha, sigma, gamma).  Fills r (3,), jy (3, 3)
    and hats = (q_hat, m_hat, V_hat).

    Parameters
    ----------
    y : ndarray of shape (3,)
        The solver variables (alpha / sigma, log sigma, log gamma).
    delta, lam, kappa : float
        n / p, ridge strength, and kappa = sqrt(sum_i omega_i t_i) of the spectrum (> 0: alpha' divides by it).
    omega, t : ndarray of shape (p,)
        Eigenvalues and teacher weights of the spectrum (see :func:`spectral_sums_into`).
    xg, wg, gz1, gw1, gz2, gw2 : ndarray
        The quadrature rule of :func:`quadrature_rule`.
    L, H : float
        Truncation and widest panel of the composite rule (see :func:`expectation_terms`).
    r : ndarray of shape (3,)
        Overwritten with the residuals.
    jy : ndarray of shape (3, 3)
        Overwritten with d r / d y.
    hats : ndarray of shape (3,)
        Overwritten with (q_hat, m_hat, V_hat).
    """
    sigma = math.exp(y[1])
    alpha = y[0] * sigma
    gamma = math.exp(y[2])
    terms = np.empty(N_TERMS)
    expectation_terms(alpha, sigma, gamma, kappa, xg, wg, gz1, gw1, gz2, gw2, L, H, terms)
    grad = np.empty((3, 3))
    stein_gradients(terms, alpha, sigma, kappa, grad)
    g2 = gamma * gamma
    qh = 2.0 * delta * terms[0] / g2
    mh = -2.0 * delta * terms[1] / gamma
    vh = 2.0 * delta * terms[2] / gamma
    dqh = np.empty(3)
    dmh = np.empty(3)
    dvh = np.empty(3)
    for j in range(3):
        dqh[j] = 2.0 * delta * grad[0, j] / g2
        dmh[j] = -2.0 * delta * grad[1, j] / gamma
        dvh[j] = 2.0 * delta * grad[2, j] / gamma
    dqh[2] -= 2.0 * qh / gamma
    dmh[2] -= mh / gamma
    dvh[2] -= vh / gamma
    s = np.empty(9)
    spectral_sums_into(delta * lam, vh, omega, t, s)
    v, dv, a1, da1, b2, db2, c, dc = s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
    sig2p = qh * b2 + mh * mh * c
    alpha_p = mh * a1 / kappa
    tau = math.sqrt(alpha * alpha + sigma * sigma)
    s2 = sigma * sigma
    r[0] = sig2p / s2 - 1.0
    r[1] = (alpha_p - alpha) / tau
    r[2] = gamma / v - 1.0
    jac = np.empty((3, 3))
    xvec = (alpha, sigma, 0.0)
    for j in range(3):
        dsig2p = b2 * dqh[j] + 2.0 * mh * c * dmh[j] + (qh * db2 + mh * mh * dc) * dvh[j]
        dalpha_p = (a1 * dmh[j] + mh * da1 * dvh[j]) / kappa
        jac[0, j] = dsig2p / s2
        jac[1, j] = dalpha_p / tau - (alpha_p - alpha) / (tau * tau * tau) * xvec[j]
        jac[2, j] = -gamma / (v * v) * dv * dvh[j]
    jac[0, 1] -= 2.0 * sig2p / (s2 * sigma)
    jac[1, 0] -= 1.0 / tau
    jac[2, 2] += 1.0 / v
    for i in range(3):
        jy[i, 0] = jac[i, 0] * sigma
        jy[i, 1] = jac[i, 0] * alpha + jac[i, 1] * sigma
        jy[i, 2] = jac[i, 2] * gamma
    hats[0] = qh
    hats[1] = mh
    hats[2] = vh


#: the kinds of fixed point (the first entry of :func:`problem_res_jac_y`'s ``args``)
ISOTROPIC, SPECTRAL = 0, 1


@njit(cache=True)
def problem_res_jac_y(y, args, r, jy, extra):
    """The residuals of one cgmt problem, ``fn(y, args)`` in optimistix's form: isotropic (extra[0] = E2) or spectral
    (extra = hats).

    The single entry point of the Newton driver (:mod:`cgmt._newton`), so one compiled loop serves both.

    Parameters
    ----------
    y : ndarray of shape (3,)
        The solver variables (alpha / sigma, log sigma, log gamma).
    args : tuple
        ``(kind, lam, delta, kappa, omega, t, xg, wg, gz1, gw1, gz2, gw2)`` (:meth:`cgmt._newton.Problem.args`):
        the kind (:data:`ISOTROPIC` or :data:`SPECTRAL`); ridge strength, n / p, signal strength (floats); the
        eigenvalues and teacher weights of the spectrum (float arrays of shape (p,), empty for the isotropic
        problem); the quadrature rule of :func:`quadrature_rule`.
    r : ndarray of shape (3,)
        Overwritten with the relative residuals.
    jy : ndarray of shape (3, 3)
        Overwritten with d r / d y.
    extra : ndarray of shape (1,) or (3,)
        Overwritten with E2 (isotropic) or (q_hat, m_hat, V_hat) (spectral).
    """
    kind, lam, delta, kappa, omega, t, xg, wg, gz1, gw1, gz2, gw2 = args
    if kind == ISOTROPIC:
        extra[0] = res_jac_y(y, delta, lam, kappa, xg, wg, gz1, gw1, gz2, gw2, TRUNCATION, MAX_PANEL, r, jy)
    else:
        spectral_res_jac_y(y, delta, lam, kappa, omega, t, xg, wg, gz1, gw1, gz2, gw2, TRUNCATION, MAX_PANEL,
                           r, jy, extra)


def quadrature_rule(quad_order=DEFAULT_ORDER):
    """The quadrature rule of the fixed-point expectations, cached per order.

    Parameters
    ----------
    quad_order : int, default=DEFAULT_ORDER
        Gauss-Legendre nodes per panel.

    Returns
    -------
    tuple of 6 ndarray
        (GL nodes, GL weights, GH z, GH w with ``2 * quad_order`` nodes, GH z, GH w with
        ``GH2_FACTOR * quad_order`` nodes), contiguous float arrays.
    """
    return _quadrature_rule(check_quad_order(quad_order))


@lru_cache(maxsize=16)
def _quadrature_rule(quad_order):
    xg, wg = gauss_legendre(quad_order)
    z1, w1 = gauss_hermite(2 * quad_order)
    z2, w2 = gauss_hermite(GH2_FACTOR * quad_order)
    return tuple(np.ascontiguousarray(t, dtype=float) for t in (xg, wg, z1, w1, z2, w2))





#: Largest magnitude of an order parameter (alpha, sigma, gamma) the Python-level evaluations accept: the fixed
#: point's parameters are O(1) to O(1/lam) in the supported domain, and products of larger values overflow.
ORDER_MAX = 1e100


def _check_order_parameters(alpha, sigma, gamma=None):
    """``(alpha, sigma[, gamma])`` as floats: alpha real, sigma and gamma positive, all at most ORDER_MAX in size."""
    out = [check_scalar(alpha, "alpha", low=-ORDER_MAX, high=ORDER_MAX),
           check_scalar(sigma, "sigma", low=0.0, high=ORDER_MAX, low_open=True)]
    if gamma is not None:
        out.append(check_scalar(gamma, "gamma", low=0.0, high=ORDER_MAX, low_open=True))
    return out


def residual_and_jacobian(alpha, sigma, gamma, delta, lam, kappa, quad_order=DEFAULT_ORDER):
    """Relative residuals r (3,) and their Jacobian d r / d(alpha, sigma, gamma) (3, 3).

    Parameters
    ----------
    alpha, sigma, gamma : float
        The order parameters (sigma > 0, gamma > 0).
    delta, lam, kappa : float
        n / p, ridge strength (convention of the module docstring) and signal strength.
    quad_order : int, default=DEFAULT_ORDER
        Gauss-Legendre nodes per quadrature panel.

    Returns
    -------
    r : ndarray of shape (3,)
        (r1, r2, r3) of the module docstring; all zero at the fixed point.
    jac : ndarray of shape (3, 3)
        d r / d (alpha, sigma, gamma).
    """
    alpha, sigma, gamma = _check_order_parameters(alpha, sigma, gamma)
    delta, lam, kappa = check_delta(delta), check_lam(lam), check_kappa(kappa)
    rule = quadrature_rule(quad_order)
    r = np.empty(3)
    jac = np.empty((3, 3))
    _res_jac(alpha, sigma, gamma, delta, lam, kappa, rule, TRUNCATION, MAX_PANEL, r, jac)
    return r, jac


def residuals(alpha, sigma, gamma, delta, lam, kappa, quad_order=DEFAULT_ORDER):
    """Relative residuals (r1, r2, r3) of the fixed-point system (see module docstring).

    Parameters
    ----------
    alpha, sigma, gamma : float
        The order parameters (sigma > 0, gamma > 0).
    delta, lam, kappa : float
        n / p, ridge strength and signal strength.
    quad_order : int, default=DEFAULT_ORDER
        Gauss-Legendre nodes per quadrature panel.

    Returns
    -------
    ndarray of shape (3,)
        The relative residuals; max |r_i| <= tol is the solvers' convergence test.

    Examples
    --------
    >>> from cgmt import solve
    >>> s = solve(2.0, 0.1, 2.0)
    >>> bool(abs(residuals(s.alpha, s.sigma, s.gamma, 2.0, 0.1, 2.0)).max() <= 1e-10)
    True
    """
    return residual_and_jacobian(alpha, sigma, gamma, delta, lam, kappa, quad_order)[0]


def expectations(alpha, sigma, gamma, kappa, quad_order=DEFAULT_ORDER):
    """(E1, E2, E3c) = (E[s(-kZ1)(V-eta)^2], E[s'(kZ1) eta], E[s(-kZ1)(1 - D)]) by the fast rule.

    Parameters
    ----------
    alpha, sigma, gamma : float
        The order parameters; V = alpha Z1 + sigma Z2, eta = prox_{gamma rho}(V).
    kappa : float
        Signal strength.
    quad_order : int, default=DEFAULT_ORDER
        Gauss-Legendre nodes per quadrature panel.

    Returns
    -------
    E1, E2, E3c : float
        The three expectations of the fixed-point equations (module docstring).
    """
    alpha, sigma, gamma = _check_order_parameters(alpha, sigma, gamma)
    kappa = check_kappa(kappa)
    t = np.empty(N_TERMS)
    expectation_terms(alpha, sigma, gamma, kappa, *quadrature_rule(quad_order),
                      TRUNCATION, MAX_PANEL, t)
    return float(t[0]), float(t[1]), float(t[2])


def conditional_kernels(u, alpha, sigma, kappa, quad_order=DEFAULT_ORDER):
    """(K_A, K_B, K_C) = E[(s(-kappa Z1), s'(kappa Z1), s''(kappa Z1)) | V = tau u] by the fast rule.

    Parameters
    ----------
    u : float
        The standardised value of V = alpha Z1 + sigma Z2 (``V = tau u``, ``tau = hypot(alpha, sigma)``).
    alpha, sigma : float
        The order parameters (sigma > 0).
    kappa : float
        Signal strength.
    quad_order : int, default=DEFAULT_ORDER
        Gauss-Legendre nodes per quadrature panel.

    Returns
    -------
    K_A, K_B, K_C : float
        The three conditional expectations.
    """
    alpha, sigma = _check_order_parameters(alpha, sigma)
    kappa = check_kappa(kappa)
    u = check_scalar(u, "u")
    xg, wg, gz1, gw1, gz2, gw2 = quadrature_rule(quad_order)
    tau = math.hypot(alpha, sigma)
    a, b = alpha / tau, sigma / tau
    cap1 = int(math.ceil(2.0 * TRUNCATION / MAX_PANEL)) + 4 + (2 * (int(math.log2(MAX_PANEL / _MIN_SCALE)) + 3) + 1)
    nw = max(cap1 * xg.size, gz2.size)
    wn, ww = np.empty(nw), np.empty(nw)
    ebuf = np.empty(cap1)
    fixed_n = _inner_fixed_rule(float(kappa), b, xg, wg, gz1, gw1, gz2, gw2, TRUNCATION, MAX_PANEL, ebuf, wn, ww)
    return _kernels(float(u), a, b, float(kappa), xg, wg, TRUNCATION, MAX_PANEL, ebuf,
                    np.empty(1), np.empty(1), wn, ww, fixed_n)
