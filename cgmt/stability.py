"""Two-replica theory of directional stability: the cosine between two ridge-logistic probes fitted
on overlapping subsets of one labelled pool (derivation: ``docs/stability_theory.md``).

Convention (identical to :func:`cgmt.solve`): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2, labels from
P(y = +1 | x) = sigmoid(x'beta*); estimator k minimises (1/n_k) sum_{i in S_k} log(1 + e^{-y_i x_i'beta})
+ lam/(2p) ||beta||^2 on its own training set S_k (same lam, per-sample-averaged loss, so the
scikit-learn C of run k is 1/(delta_k lam)); z_k = beta_k/sqrt(p) = alpha_k v + z_k_perp.
delta_k = |S_k|/p, delta_12 = |S_1 cap S_2|/p.

Each replica has its own single-estimator solution (alpha_k, sigma_k, gamma_k) at delta_k.  The
noise cross-covariance sigma_12 = lim <z_1_perp, z_2_perp> solves the scalar fixed point

    sigma_12 = delta_12 E[ 2 sigmoid(-kappa U) h_1(V_1) h_2(V_2) ],  h_k(V) = V - prox_{gamma_k rho}(V),
    V_k = alpha_k U + xi_k,  (xi_1, xi_2) ~ N(0, [[sigma_1^2, sigma_12], [sigma_12, sigma_2^2]]),

(U ~ N(0, 1) independent of xi), and the limiting cosine between the two unit directions is

    cos = (alpha_1 alpha_2 + sigma_12) / sqrt((alpha_1^2 + sigma_1^2)(alpha_2^2 + sigma_2^2)).

With delta_12 = 0 this is the paper's independent-sample formula alpha^2/(alpha^2 + sigma^2)
(``eq:cosine_stability_approx``); for the paper's ablation pairs (delta_12 = 0.64 delta_k) it is
much larger.

Public API: :func:`stability` (protocols), :func:`pair_stability` (arbitrary subset sizes and
overlap), :func:`cross_noise_covariance`, :func:`protocol_fractions`, :func:`expected_ablation_overlap`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy.optimize import OptimizeResult, brentq

from .equations import prox_branch_points
from .prox import prox_scalar, sigmoid, sigmoid_d1
from .quadrature import MAX_PANEL, TRUNCATION, build_edges, edge_capacity, fill_rule, gauss_legendre

__all__ = [
    "PROTOCOLS",
    "stability",
    "pair_stability",
    "cross_noise_covariance",
    "cross_expectation",
    "protocol_fractions",
    "expected_ablation_overlap",
]

PROTOCOLS = ("independent", "subsample", "full_vs_subsample")
#: Gauss-Legendre points per panel of the composite rules (the answer changes by < 1e-9 when doubled;
#: see tests/test_stability_theory.py::test_quadrature_converged)
DEFAULT_ORDER = 10
_MIN_SCALE = 1e-10


# --------------------------------------------------------------------------------------------
# quadrature kernels
# --------------------------------------------------------------------------------------------
@njit(cache=True)
def _g_kernel(mu, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww):
    """(G, G') at mu: G(mu) = E_N[2 sigmoid(-kappa (mu + su N))], N ~ N(0, 1); G' = dG/dmu."""
    if su * kappa < 1e-12:
        return 2.0 * sigmoid(-kappa * mu), -2.0 * kappa * sigmoid_d1(kappa * mu)
    cen[0] = -mu / su
    scl[0] = max(math.pi / (kappa * su), _MIN_SCALE)
    ne = build_edges(-L, L, H, cen, scl, ebuf)
    nn = fill_rule(ebuf, ne, xg, wg, True, wn, ww)
    g = 0.0
    gp = 0.0
    for i in range(nn):
        t = kappa * (mu + su * wn[i])
        g += ww[i] * sigmoid(-t)
        gp += ww[i] * sigmoid_d1(t)
    return 2.0 * g, -2.0 * kappa * gp


@njit(cache=True)
def _g_table(mmax, npts, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww, gv, gd):
    h = 2.0 * mmax / (npts - 1)
    for j in range(npts):
        gv[j], gd[j] = _g_kernel(-mmax + j * h, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww)
    return h


@njit(cache=True)
def _g_interp(mu, mmax, h, gv, gd):
    """Cubic Hermite interpolation of the tabulated G (constant extension outside the table)."""
    if mu <= -mmax:
        return gv[0]
    x = (mu + mmax) / h
    j = int(x)
    if j >= gv.size - 1:
        return gv[gv.size - 1]
    t = x - j
    t2 = t * t
    t3 = t2 * t
    return ((2 * t3 - 3 * t2 + 1) * gv[j] + (t3 - 2 * t2 + t) * h * gd[j]
            + (-2 * t3 + 3 * t2) * gv[j + 1] + (t3 - t2) * h * gd[j + 1])


@njit(cache=True)
def _cross_kernel(a1, s1, g1, a2, s2, g2, s12, kappa, xg, wg, L, H, ntab, bufs):
    """E[2 sigmoid(-kappa U) h1(V1) h2(V2)] for the joint Gaussian law in the module docstring.

    Change of variables: V1 = tau1 A, V2 = tau2 (r A + s B) with A, B iid N(0, 1),
    tau_k^2 = alpha_k^2 + sigma_k^2, r = corr(V1, V2); U | (A, B) ~ N(cA A + cB B, su^2), so the
    sigmoid is integrated analytically into G (tabulated).  Outer rule in A refined at the branch
    points of h1 (Im V = +-pi) and at the centre of G; inner rule in B refined at those of h2 and G.
    """
    ebuf, cen, scl, wn, ww, an, aw, bn, bw, gv, gd = bufs
    tau1 = math.sqrt(a1 * a1 + s1 * s1)
    tau2 = math.sqrt(a2 * a2 + s2 * s2)
    r = (a1 * a2 + s12) / (tau1 * tau2)
    if r > 1.0:
        r = 1.0
    if r < -1.0:
        r = -1.0
    s = math.sqrt(max(0.0, 1.0 - r * r))
    cA = a1 / tau1
    degenerate = s < 1e-9
    cB = 0.0 if degenerate else (a2 / tau2 - r * a1 / tau1) / s
    su = math.sqrt(max(0.0, 1.0 - cA * cA - cB * cB))
    # G table on |mu| <= mmax (covers every node: |A|, |B| <= L)
    mmax = L * (abs(cA) + abs(cB)) + 1e-9
    gh = _g_table(mmax, ntab, su, kappa, xg, wg, L, H, ebuf, cen, scl, wn, ww, gv, gd)
    gscale = math.hypot(su, math.pi / kappa) if kappa > 0.0 else H
    c1m, c1p = prox_branch_points(g1)
    c2m, c2p = prox_branch_points(g2)
    # outer rule in A
    cen[0] = c1m / tau1
    scl[0] = math.pi / tau1
    cen[1] = c1p / tau1
    scl[1] = math.pi / tau1
    cen[2] = 0.0
    scl[2] = max(gscale / max(abs(cA) + abs(cB), 1e-300), _MIN_SCALE)
    ne = build_edges(-L, L, H, cen[:3], scl[:3], ebuf)
    na = fill_rule(ebuf, ne, xg, wg, True, an, aw)
    total = 0.0
    for i in range(na):
        A = an[i]
        v1 = tau1 * A
        h1 = v1 - prox_scalar(v1, g1)
        if h1 == 0.0:
            continue
        if degenerate:
            v2 = tau2 * A
            total += aw[i] * _g_interp(cA * A, mmax, gh, gv, gd) * h1 * (v2 - prox_scalar(v2, g2))
            continue
        cen[0] = (c2m / tau2 - r * A) / s
        scl[0] = math.pi / (tau2 * s)
        cen[1] = (c2p / tau2 - r * A) / s
        scl[1] = math.pi / (tau2 * s)
        nf = 2
        if abs(cB) > 1e-12:
            cen[2] = -cA * A / cB
            scl[2] = max(gscale / abs(cB), _MIN_SCALE)
            nf = 3
        ne = build_edges(-L, L, H, cen[:nf], scl[:nf], ebuf)
        nb = fill_rule(ebuf, ne, xg, wg, True, bn, bw)
        inner = 0.0
        for j in range(nb):
            v2 = tau2 * (r * A + s * bn[j])
            inner += bw[j] * _g_interp(cA * A + cB * bn[j], mmax, gh, gv, gd) * (v2 - prox_scalar(v2, g2))
        total += aw[i] * h1 * inner
    return total


def _buffers(order, ntab):
    xg, wg = gauss_legendre(order)
    cap = edge_capacity(3, 2 * TRUNCATION)
    nmax = (cap - 1) * order
    bufs = (np.empty(cap), np.empty(3), np.empty(3), np.empty(nmax), np.empty(nmax), np.empty(nmax),
            np.empty(nmax), np.empty(nmax), np.empty(nmax), np.empty(ntab), np.empty(ntab))
    return np.asarray(xg), np.asarray(wg), bufs


def _table_size(su_kappa_scale):
    # G varies on the scale hypot(su, pi/kappa) >= ...; 16 points per scale unit over |mu| <= 2L
    return int(min(20001, max(401, math.ceil(2 * 2 * TRUNCATION * 16 / su_kappa_scale) + 1)))


def cross_expectation(sol1, sol2, sigma12, kappa, *, order=DEFAULT_ORDER):
    """E[2 sigmoid(-kappa U) h_1(V_1) h_2(V_2)] (see module docstring) at a given sigma_12.

    ``sol1``, ``sol2``: (alpha, sigma, gamma) of each replica.  At sigma_12 = sigma^2 for two
    identical replicas this equals sigma^2 / delta (the single-estimator equation (1)).
    """
    a1, s1, g1 = (float(x) for x in sol1)
    a2, s2, g2 = (float(x) for x in sol2)
    ntab = _table_size(math.pi / kappa if kappa > 0 else 1.0) if kappa > 0 else 401
    xg, wg, bufs = _buffers(int(order), ntab)
    return float(_cross_kernel(a1, s1, g1, a2, s2, g2, float(sigma12), float(kappa), xg, wg,
                               TRUNCATION, MAX_PANEL, ntab, bufs))


# --------------------------------------------------------------------------------------------
# the cross fixed point
# --------------------------------------------------------------------------------------------
def cross_noise_covariance(sol1, sol2, delta12, kappa, *, order=DEFAULT_ORDER, xtol=1e-13):
    """Solve sigma_12 = delta_12 E[2 sigmoid(-kappa U) h_1(V_1) h_2(V_2)] on [0, sigma_1 sigma_2].

    The right-hand side F is increasing in sigma_12 (Price's theorem: F' = delta_12 E[2 s(-kU) h1' h2'] > 0,
    h_k' in (0, 1)), F(0) >= 0 and F(sigma_1 sigma_2) <= sigma_1 sigma_2 delta_12 / sqrt(delta_1 delta_2)
    (Cauchy-Schwarz with equation (1)), so the root is bracketed.  Returns (sigma_12, info dict).
    """
    a1, s1, g1 = (float(x) for x in sol1)
    a2, s2, g2 = (float(x) for x in sol2)
    hi = s1 * s2
    if delta12 == 0.0 or hi == 0.0:
        return 0.0, dict(nit=0, residual=0.0, converged=True, rhs_at_zero=0.0)
    ntab = _table_size(math.pi / kappa) if kappa > 0 else 401
    xg, wg, bufs = _buffers(int(order), ntab)
    nfev = [0]

    def F(s12):
        nfev[0] += 1
        return delta12 * _cross_kernel(a1, s1, g1, a2, s2, g2, s12, float(kappa), xg, wg,
                                       TRUNCATION, MAX_PANEL, ntab, bufs)

    f0 = F(0.0)
    fhi = F(hi) - hi
    # Identical training sets: F(hi) = hi is the single-estimator equation (1), which the solve satisfies
    # only to its residual tolerance (1e-10 relative), so the top of the bracket is the root whenever
    # F(hi) - hi is within that accuracy (a real overlap deficit 1 - delta12/delta shows up at O(1)).
    if fhi >= -1e-9 * hi:
        return hi, dict(nit=nfev[0], residual=abs(fhi) / hi, converged=True, rhs_at_zero=f0)
    root, info = brentq(lambda s: F(s) - s, 0.0, hi, xtol=xtol * max(hi, 1e-300), rtol=1e-15,
                        full_output=True, disp=False) if f0 > 0 else (0.0, None)
    res = abs(F(root) - root) / hi
    ok = bool(res <= 1e-9 and (info is None or info.converged))
    return float(root), dict(nit=nfev[0], residual=float(res), converged=ok, rhs_at_zero=f0)


def _check_finite_positive(name, x, allow_zero=False):
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a real number, got {x!r}") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        rng = "[0, inf)" if allow_zero else "(0, inf)"
        raise ValueError(f"{name}: must be finite and in {rng}, got {x}")
    return x


def _single(delta, lam, kappa, solve_options):
    import cgmt

    sol = cgmt.solve(delta, lam, kappa, **solve_options)
    if not bool(getattr(sol, "converged", getattr(sol, "success", True))):
        raise RuntimeError(f"cgmt.solve did not converge at delta={delta}, lam={lam}, kappa={kappa}: "
                           f"{getattr(sol, 'message', '')}")
    return float(sol.alpha), float(sol.sigma), float(sol.gamma)


def pair_stability(delta1, delta2, delta12, lam, kappa, *, order=DEFAULT_ORDER, strict=False, **solve_options):
    """Limiting cosine of two ridge-logistic fits (same lam) on sets of sizes delta_k p sharing delta_12 p samples.

    Returns a SciPy ``OptimizeResult`` with ``cosine``; per-replica ``alpha1, sigma1, gamma1,
    alpha2, sigma2, gamma2``; ``sigma12`` (noise cross-covariance), ``noise_correlation``
    (sigma12/(sigma1 sigma2)); ``independent_formula`` = alpha1 alpha2/(tau1 tau2) (the paper's
    ``eq:cosine_stability_approx``, i.e. sigma12 = 0); ``delta1, delta2, delta12``; and
    ``success``, ``status``, ``message``, ``nit``, ``residual`` of the cross fixed point.
    ``strict=True`` raises RuntimeError instead of returning success=False.
    """
    delta1 = _check_finite_positive("delta1", delta1)
    delta2 = _check_finite_positive("delta2", delta2)
    delta12 = _check_finite_positive("delta12", delta12, allow_zero=True)
    lam = _check_finite_positive("lam", lam)
    kappa = _check_finite_positive("kappa", kappa, allow_zero=True)
    if delta12 > min(delta1, delta2) * (1 + 1e-12):
        raise ValueError(f"delta12: the overlap cannot exceed the smaller set, need delta12 <= "
                         f"min(delta1, delta2) = {min(delta1, delta2)}, got {delta12}")
    delta12 = min(delta12, delta1, delta2)
    x1 = _single(delta1, lam, kappa, solve_options)
    x2 = x1 if delta2 == delta1 else _single(delta2, lam, kappa, solve_options)
    # sigma_12 is symmetric in the two fits, but the quadrature of the cross expectation is built around
    # the first one (accurate to ~1e-9 relative); a canonical order (larger set first) makes the
    # answer exactly symmetric in the arguments.
    first, second = (x1, x2) if delta1 >= delta2 else (x2, x1)
    s12, info = cross_noise_covariance(first, second, delta12, kappa, order=order)
    a1, s1, g1 = x1
    a2, s2, g2 = x2
    t1, t2 = math.hypot(a1, s1), math.hypot(a2, s2)
    cos = (a1 * a2 + s12) / (t1 * t2)
    ok = info["converged"]
    msg = ("converged" if ok else "cross fixed point not converged") + \
          f": |F(sigma12) - sigma12| / (sigma1 sigma2) = {info['residual']:.2e} after {info['nit']} evaluations"
    if strict and not ok:
        raise RuntimeError(msg)
    return OptimizeResult(cosine=float(min(1.0, cos)), sigma12=s12,
                          noise_correlation=s12 / (s1 * s2) if s1 * s2 > 0 else 0.0,
                          independent_formula=a1 * a2 / (t1 * t2),
                          alpha1=a1, sigma1=s1, gamma1=g1, alpha2=a2, sigma2=s2, gamma2=g2,
                          delta1=delta1, delta2=delta2, delta12=delta12, lam=lam, kappa=kappa,
                          success=ok, status=0 if ok else 1, message=msg, nit=info["nit"],
                          residual=info["residual"])


# --------------------------------------------------------------------------------------------
# the paper's protocol
# --------------------------------------------------------------------------------------------
def protocol_fractions(protocol="subsample", *, drop=0.2, val_fraction=0.2):
    """(f1, f2, f12): training-set sizes and expected overlap as fractions of the pool, N -> infinity.

    Paper protocol (``sec:exp_robust``): each run drops ``drop`` of the pool uniformly at random,
    re-splits the rest into train/validation (validation fraction ``val_fraction``, stratified) and
    trains on the train part, so every run trains on f = (1 - drop)(1 - val_fraction) of the pool
    (0.64) and, the runs being independent and every sample equally likely to be in a run's
    training set (probability f), two runs share E|T1 cap T2| = sum_i P(i in T1) P(i in T2) = f^2 N
    (0.4096 N, i.e. 64% of each training set).
    - "independent": two fits on independent pools of the full size: (1, 1, 0).
    - "subsample": two ablation runs: (f, f, f^2).
    - "full_vs_subsample": the fit on the whole pool against one ablation run: (1, f, f).
    """
    drop = _check_fraction("drop", drop)
    val_fraction = _check_fraction("val_fraction", val_fraction)
    f = (1.0 - drop) * (1.0 - val_fraction)
    if protocol == "independent":
        return 1.0, 1.0, 0.0
    if protocol == "subsample":
        return f, f, f * f
    if protocol == "full_vs_subsample":
        return 1.0, f, f
    raise ValueError(f"protocol: must be one of {PROTOCOLS}, got {protocol!r}")


def _check_fraction(name, x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a real number in [0, 1), got {x!r}") from None
    if not (0.0 <= x < 1.0):
        raise ValueError(f"{name}: must be in [0, 1), got {x}")
    return x


def _train_counts_expectation(k_pos, k_neg, n_train):
    """Expected per-class train counts of scikit-learn's stratified split (``_approximate_mode``)."""
    counts = np.array([k_pos, k_neg], dtype=float)
    continuous = counts / counts.sum() * n_train
    floored = np.floor(continuous)
    need = int(n_train - floored.sum())
    out = floored.copy()
    if need > 0:  # two classes: the remainders sum to need = 1
        rem = continuous - floored
        if rem[0] == rem[1]:
            out += 0.5  # sklearn breaks the tie at random
        else:
            out[int(np.argmax(rem))] += 1.0
    return out


def expected_ablation_overlap(n_pos, n_neg, *, drop=0.2, val_fraction=0.2):
    """Exact E|T1 cap T2| and the train size for two independent runs of the paper's protocol on a pool.

    Implementation assumed (that of ``sims.measure.ablation_train_indices``): keep
    N - round(drop N) samples uniformly at random; split them with scikit-learn's stratified
    ``train_test_split(test_size=val_fraction)`` (validation size ceil(val_fraction n_keep),
    per-class train counts by ``_approximate_mode``, ties broken at random).  Each sample of class c
    is in a run's training set with probability pi_c = E[n_train_c] / N_c (exchangeability), the
    runs are independent, so E|T1 cap T2| = sum_c N_c pi_c^2 >= n_train^2 / N (equality when
    pi_+ = pi_-).  Returns (n_train, expected_overlap).
    """
    from scipy.stats import hypergeom

    n_pos, n_neg = int(n_pos), int(n_neg)
    if n_pos < 1 or n_neg < 1:
        raise ValueError(f"n_pos, n_neg: need at least one sample per class, got {n_pos}, {n_neg}")
    drop = _check_fraction("drop", drop)
    val_fraction = _check_fraction("val_fraction", val_fraction)
    N = n_pos + n_neg
    n_keep = N - int(round(drop * N))
    n_val = math.ceil(val_fraction * n_keep) if val_fraction > 0 else 0
    n_train = n_keep - n_val
    ks = np.arange(max(0, n_keep - n_neg), min(n_pos, n_keep) + 1)
    pk = hypergeom(N, n_pos, n_keep).pmf(ks)
    e_pos = 0.0
    e_neg = 0.0
    for k, w in zip(ks, pk):
        tc = _train_counts_expectation(k, n_keep - k, n_train) if val_fraction > 0 else (k, n_keep - k)
        e_pos += w * tc[0]
        e_neg += w * tc[1]
    pi_pos, pi_neg = e_pos / n_pos, e_neg / n_neg
    return n_train, float(n_pos * pi_pos ** 2 + n_neg * pi_neg ** 2)


def stability(delta, lam, kappa, protocol="subsample", *, drop=0.2, val_fraction=0.2, order=DEFAULT_ORDER,
              strict=False, **solve_options):
    """Predicted (limiting) cosine between two probes' unit directions under a resampling protocol.

    ``delta`` = N/p is the size of the labelled POOL (train cup val of the paper) over the dimension;
    ``lam`` the common ridge strength (theory convention, per-sample-averaged loss); ``kappa`` the
    signal strength.  Protocols (fractions of the pool from :func:`protocol_fractions`):

    - "independent": two fits on independent pools of size N (paper's formula, alpha^2/(alpha^2+sigma^2)
      at delta);
    - "subsample": the paper's ablation pair (each run trains on f = (1-drop)(1-val_fraction) of the
      pool, two runs share f^2 of it); this is what ``eq:robust_cos_abs`` averages;
    - "full_vs_subsample": fit on the whole pool versus one ablation run (nested sets).

    Returns the :func:`pair_stability` result plus ``protocol``, ``fractions``.  Its
    ``independent_formula`` is the paper's formula evaluated for the two fits actually compared.
    """
    f1, f2, f12 = protocol_fractions(protocol, drop=drop, val_fraction=val_fraction)
    delta = _check_finite_positive("delta", delta)
    res = pair_stability(f1 * delta, f2 * delta, f12 * delta, lam, kappa, order=order, strict=strict,
                         **solve_options)
    res["protocol"] = protocol
    res["fractions"] = (f1, f2, f12)
    return res
