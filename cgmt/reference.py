"""High-precision mpmath references for the prox and the fixed-point expectations (tests only; slow).

Conventions as in :mod:`cgmt.equations`: Z1, Z2 iid N(0, 1), V = alpha Z1 + sigma Z2,
eta = prox_{gamma rho}(V), and

* ``E1 = E[sigmoid(-kappa Z1) (V - eta)^2]``
* ``E2 = E[sigmoid'(kappa Z1) eta]``
* ``E3c = E[sigmoid(-kappa Z1) (1 - 1/(1 + gamma sigmoid'(eta)))]``

The 2-D integrals are computed by conditioning on V (V = tau U, Z1 = (alpha U + sigma W)/tau,
tau^2 = alpha^2 + sigma^2) with nested tanh-sinh quadrature, splitting at the points where the
integrands change fast.
"""
from __future__ import annotations

import mpmath as mp
import numpy as np

from empirical.common.checks import check_int, check_scalar

from .equations import ORDER_MAX
from .validation import KAPPA_MAX

#: the domain of the order parameters and of kappa in :func:`expectations` and :func:`kernels`: that of
#: :mod:`cgmt.equations`, whose functions they check (no fixed point comes near its bounds; beyond them a call
#: computed for 13 s at alpha = 1e300, past the contract test's 10 s per call)
_ORDER = dict(low=-ORDER_MAX, high=ORDER_MAX)
_KAPPA = dict(low=0.0, high=KAPPA_MAX)

#: Most working digits the reference accepts (mpmath's cost grows as dps^1.6; 10,000 digits take minutes).
MAX_DPS = 10_000

__all__ = ["prox", "expectations", "kernels", "accuracy", "gauss_expect"]


def _real(value, name, low=None, high=None, low_open=False, high_open=False):
    """A finite real (float or mpf) within the bounds (:func:`cgmt.validation.check_scalar`'s), kept as an mpf.  An
    mpf is compared as an mpf: the integrands evaluate points beyond float range (a huge ``alpha`` times a
    quadrature node), which are valid here."""
    bounds = dict(low=low, high=high, low_open=low_open, high_open=high_open)
    if not isinstance(value, mp.mpf):
        return mp.mpf(check_scalar(value, name, **bounds))
    if not mp.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        left, right = ("(" if low_open or low is None else "["), (")" if high_open or high is None else "]")
        raise ValueError(f"{name} must lie in {left}{'-inf' if low is None else low}, "
                         f"{'inf' if high is None else high}{right}, got {mp.nstr(value, 8)}")
    return value


def _digits(dps):
    return check_int(dps, "dps", minimum=5, maximum=MAX_DPS)


def _sig(x):
    return 1 / (1 + mp.exp(-x))


def prox(v, gamma, dps=40):
    """prox_{gamma rho}(v) at ``dps`` digits (safeguarded Newton in the bracket of :mod:`cgmt.prox`).

    The bracket is [v - gamma sigmoid(v), v - gamma sigmoid(v - gamma)]; a Newton step that leaves it is
    replaced by bisection.

    Parameters
    ----------
    v : float or mpf
        The point.
    gamma : float or mpf
        The prox scale, >= 0 (0 returns ``v``).
    dps : int, default=40
        Decimal digits of the result (the work uses ``dps + 10``).

    Returns
    -------
    mpf
        eta with ``eta + gamma * sigmoid(eta) = v``.

    Examples
    --------
    >>> from cgmt.prox import prox_logistic
    >>> abs(float(prox(3.0, 2.0)) - prox_logistic(3.0, 2.0)) < 1e-14
    True
    """
    v, gamma, dps = _real(v, "v"), _real(gamma, "gamma", low=0.0), _digits(dps)
    with mp.workdps(dps + 10):
        v = mp.mpf(v)
        g = mp.mpf(gamma)
        if g == 0:
            return v
        lo, hi = v - g * _sig(v), v - g * _sig(v - g)
        x = (lo + hi) / 2
        tol = mp.mpf(10) ** (-(dps + 5)) * max(1, abs(v))
        for _ in range(2000):
            f = x + g * _sig(x) - v
            if f > 0:
                hi = x
            else:
                lo = x
            s = _sig(x)
            xn = x - f / (1 + g * s * (1 - s))
            if not (lo < xn < hi):
                xn = (lo + hi) / 2
            if abs(xn - x) < tol or hi - lo < tol:
                x = xn
                break
            x = xn
        return +x


def gauss_expect(f, dps=30, points=(-8, 0, 8)):
    """E f(Z), Z ~ N(0, 1), by tanh-sinh quadrature split at ``points``.

    Parameters
    ----------
    f : callable
        ``f(z)`` of an mpf, returning an mpf.
    dps : int, default=30
        Working decimal digits.
    points : sequence of float, default=(-8, 0, 8)
        Where the integral over the line is split (sorted; points where f changes fast).

    Returns
    -------
    mpf
        E f(Z).

    Examples
    --------
    >>> float(gauss_expect(lambda z: z ** 2))
    1.0
    """
    with mp.workdps(dps):
        pts = [-mp.inf] + [mp.mpf(p) for p in points] + [mp.inf]
        return mp.quad(lambda z: f(z) * mp.npdf(z), pts)


def expectations(alpha, sigma, gamma, kappa, dps=20):
    """Return (E1, E2, E3c) as mpf (see the module docstring), at ``dps`` digits.

    Parameters
    ----------
    alpha, sigma, gamma : float
        The order parameters (sigma > 0, gamma >= 0).
    kappa : float
        Signal strength, >= 0.
    dps : int, default=20
        Working decimal digits.

    Returns
    -------
    E1, E2, E3c : mpf
        The expectations of the module docstring (what :func:`cgmt.equations.expectations` computes fast).
    """
    alpha, sigma = _real(alpha, "alpha", **_ORDER), _real(sigma, "sigma", low=0.0, high=ORDER_MAX, low_open=True)
    gamma, kappa, dps = _real(gamma, "gamma", low=0.0, high=ORDER_MAX), _real(kappa, "kappa", **_KAPPA), _digits(dps)
    with mp.workdps(dps):
        al, sg, g, k = (mp.mpf(t) for t in (alpha, sigma, gamma, kappa))
        tau = mp.sqrt(al * al + sg * sg)
        a, b = al / tau, sg / tau

        def kernels(u):
            # E_W[sigmoid(-k Z1)], E_W[sigmoid'(k Z1)] with Z1 = a u + b W
            if k == 0:
                return mp.mpf(1) / 2, mp.mpf(1) / 4
            w0 = -a * u / b
            pts = [-mp.inf, w0 - 1, w0, w0 + 1, mp.inf]
            ka = mp.quad(lambda w: _sig(-k * (a * u + b * w)) * mp.npdf(w), pts)
            kb = mp.quad(lambda w: _sig(k * (a * u + b * w)) * _sig(-k * (a * u + b * w)) * mp.npdf(w), pts)
            return ka, kb

        cache = {}

        def integrand(u, which):
            key = mp.nstr(u, dps + 5)
            if key not in cache:
                cache[key] = (prox(tau * u, g, dps=dps + 5), kernels(u))
            eta, (ka, kb) = cache[key]
            v = tau * u
            s = _sig(eta)
            if which == 0:
                return ka * (v - eta) ** 2 * mp.npdf(u)
            if which == 1:
                return kb * eta * mp.npdf(u)
            d = 1 / (1 + g * s * (1 - s))
            return ka * (1 - d) * mp.npdf(u)

        pts = sorted({mp.mpf(0), mp.mpf(-1) / tau, (g + 1) / tau})
        pts = [-mp.inf] + [p for p in pts if abs(p) < 12] + [mp.inf]
        return tuple(mp.quad(lambda u, j=j: integrand(u, j), pts) for j in range(3))


def kernels(u, alpha, sigma, kappa, dps=30):
    """(E[s(-kappa Z1) | U=u], E[s'(kappa Z1) | U=u], E[s''(kappa Z1) | U=u]), Z1 = (alpha u + sigma W)/tau.

    Parameters
    ----------
    u : float
        The conditioning value of U = V / tau.
    alpha, sigma : float
        The order parameters (sigma > 0), tau = sqrt(alpha^2 + sigma^2).
    kappa : float
        Signal strength.
    dps : int, default=30
        Working decimal digits.

    Returns
    -------
    K_A, K_B, K_C : mpf
        The three conditional expectations (the kernels of :mod:`cgmt.equations`), W ~ N(0, 1).
    """
    u, alpha = _real(u, "u"), _real(alpha, "alpha", **_ORDER)
    sigma = _real(sigma, "sigma", low=0.0, high=ORDER_MAX, low_open=True)
    kappa, dps = _real(kappa, "kappa", **_KAPPA), _digits(dps)
    with mp.workdps(dps):
        u, al, sg, k = (mp.mpf(t) for t in (u, alpha, sigma, kappa))
        tau = mp.sqrt(al * al + sg * sg)
        a, b = al / tau, sg / tau
        w0 = -a * u / b
        pts = [-mp.inf, w0 - 1, w0 - mp.mpf(1) / (1 + k), w0, w0 + mp.mpf(1) / (1 + k), w0 + 1, mp.inf]

        def s1(x):
            return _sig(x) * _sig(-x)

        def s2(x):
            return s1(x) * (1 - 2 * _sig(x))

        out = []
        for f in (lambda x: _sig(-x), s1, s2):
            out.append(mp.quad(lambda w: f(k * (a * u + b * w)) * mp.npdf(w), pts))
        return tuple(out)


def accuracy(m, kappa, dps=30):
    """The accuracy proposition's 2 E[sigmoid(kappa Z) Phi(m Z)] at high precision.

    Parameters
    ----------
    m : float
        Effective margin alpha / sigma.
    kappa : float
        Signal strength.
    dps : int, default=30
        Working decimal digits.

    Returns
    -------
    mpf
        The asymptotic test accuracy (:func:`cgmt.accuracy_from_margin` computes it fast).

    Examples
    --------
    >>> float(accuracy(0.0, 2.0))
    0.5
    """
    m, kappa, dps = _real(m, "m", low=-1e100, high=1e100), _real(kappa, "kappa", low=0.0), _digits(dps)
    with mp.workdps(dps):
        m, k = mp.mpf(m), mp.mpf(kappa)
        return 2 * gauss_expect(lambda z: _sig(k * z) * mp.ncdf(m * z), dps=dps, points=(-8, -1, 0, 1, 8))


def _gl_nodes(n):
    x, w = np.polynomial.legendre.leggauss(n)
    return [mp.mpf(float(t)) for t in x], [mp.mpf(float(t)) for t in w]


def _panels(lo, hi, breaks, width):
    pts = sorted({mp.mpf(lo), mp.mpf(hi), *[mp.mpf(b) for b in breaks if lo < b < hi]})
    out = []
    for a, b in zip(pts[:-1], pts[1:]):
        k = max(1, int(mp.ceil((b - a) / width)))
        for i in range(k):
            out.append((a + (b - a) * i / k, a + (b - a) * (i + 1) / k))
    return out


def expectations_gl(alpha, sigma, gamma, kappa, dps=20, n=40, L=10, width=0.5):
    """(E1, E2, E3c) in mpmath arithmetic with a fixed high-order composite Gauss-Legendre rule.

    Same conditioning on V as :func:`expectations` but ``n``-point panels of width <= ``width``
    on [-L, L], split at the sharp points (much finer than the fast rule; ~10 s at the defaults).
    """
    with mp.workdps(dps):
        al, sg, g, k = (mp.mpf(t) for t in (alpha, sigma, gamma, kappa))
        tau = mp.sqrt(al * al + sg * sg)
        a, b = al / tau, sg / tau
        xs, ws = _gl_nodes(n)
        c = 1 / mp.sqrt(2 * mp.pi)
        inner_w = width if k * b <= 1 else min(width, mp.mpf(1) / (k * b))
        e = [mp.mpf(0)] * 3
        for lo, hi in _panels(-L, L, [0, -1 / tau, (g + 1) / tau], width / max(1, tau / 4)):
            h, m = (hi - lo) / 2, (hi + lo) / 2
            for xi, wi in zip(xs, ws):
                u = m + h * xi
                wu = h * wi * c * mp.exp(-u * u / 2)
                v = tau * u
                eta = prox(v, g, dps=dps + 5)
                ka = kb = mp.mpf(0)
                if k == 0:
                    ka, kb = mp.mpf(1) / 2, mp.mpf(1) / 4
                else:
                    w0 = -a * u / b
                    for lo2, hi2 in _panels(-L, L, [w0], inner_w):
                        h2, m2 = (hi2 - lo2) / 2, (hi2 + lo2) / 2
                        for xj, wj in zip(xs, ws):
                            w = m2 + h2 * xj
                            ww = h2 * wj * c * mp.exp(-w * w / 2)
                            sz = _sig(k * (a * u + b * w))
                            ka += ww * (1 - sz)
                            kb += ww * sz * (1 - sz)
                s = _sig(eta)
                d = 1 / (1 + g * s * (1 - s))
                e[0] += wu * ka * (g * s) ** 2
                e[1] += wu * kb * eta
                e[2] += wu * ka * (1 - d)
        return tuple(e)
