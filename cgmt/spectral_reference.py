"""A straightforward NumPy/SciPy solver of the spectral fixed point (independent reference; slow).

Written the way the GCM paper's public code (IdePHICS/GCMProject) iterates its state evolution:
a damped fixed-point iteration of the overlaps (V, m, q) and their conjugates, the spectral sums as
Python loops over the eigenvalues, and the channel integrals on a tensor Gauss-Hermite grid with a
vectorised Newton prox.  It shares no code with :mod:`cgmt._spectral` (which uses Newton's method,
vectorised spectral sums and the adaptive composite quadrature of :mod:`cgmt.equations`), so the two
agreeing is a check of both; ``benchmarks/spectral_theory.py`` times one against the other.
Accuracy: ~1e-7 relative for kappa <= 3 and V <= 3 at the default 96 x 96 nodes.  Outside, the poles of
the sigmoid (large kappa) and the branch points of the prox (large V) sit close to the real axis and
tensor Gauss-Hermite fails: at p = 40, delta = 0.25, lam = 0.125 (V = 18.7) the iteration settles on a
spurious point whose residual in the accurate quadrature is 0.8 (Monte Carlo confirms
:func:`cgmt.solve_spectral`).  This is the failure the composite rules of :mod:`cgmt.equations` avoid.
The damped iteration also slows down at small lam (> 3000 iterations at lam = 1e-3, delta = 4).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from ._accuracy import accuracy_from_margin

__all__ = ["solve_spectral_loops"]


def _prox(v, gamma):
    """h = prox of gamma log(1 + e^{-h}) at v, i.e. h = v + gamma sigmoid(-h) (vectorised Newton)."""
    h = v.copy()
    for _ in range(100):
        s = expit(-h)
        f = h - v - gamma * s
        step = f / (1.0 + gamma * s * (1.0 - s))
        h -= step
        if np.max(np.abs(step)) < 1e-14 * (1.0 + np.max(np.abs(h))):
            break
    return h


def _channel(m, q, rho, V, nodes):
    """(Vh, qh, mh) / (2 delta) from the channel (u, w) ~ N(0, [[rho, m], [m, q]]), label y = +1 branch."""
    z, w = nodes
    Z1, Z2 = np.meshgrid(z, z, indexing="ij")
    W = np.outer(w, w)
    kappa = math.sqrt(rho)
    u = kappa * Z1
    wfield = (m / kappa) * Z1 + math.sqrt(max(q - m * m / rho, 0.0)) * Z2
    h = _prox(wfield, V)
    sh = expit(-h)
    sp = sh * (1.0 - sh)
    su = expit(u)
    vh = np.sum(W * su * sp / (1.0 + V * sp))
    qh = np.sum(W * su * sh * sh)
    mh = np.sum(W * su * (1.0 - su) * sh)
    return vh, qh, mh


def solve_spectral_loops(delta, lam, eigenvalues, teacher_weights, *, nodes=96, damping=0.5, tol=1e-12,
                         max_iter=10000):
    """Solve the spectral fixed point by damped iteration; returns (m, q, V, accuracy, iterations).

    Parameters
    ----------
    delta, lam : float
        As in :func:`cgmt.solve_spectral`.
    eigenvalues, teacher_weights : sequence of float
        The spectrum, as in :func:`cgmt.solve_spectral` (not checked here).
    nodes : int, default=96
        Gauss-Hermite nodes per dimension of the channel integrals.
    damping : float, default=0.5
        New iterate = damping * map + (1 - damping) * old.
    tol : float, default=1e-12
        Stop when the largest relative change of (m, q, V) is below it.
    max_iter : int, default=10000
        Most iterations (reaching it is not reported as a failure: compare ``iterations`` with it).

    Returns
    -------
    tuple
        (m, q, V, accuracy, iterations): the GCM overlaps, the test accuracy at the margin
        (m / kappa) / sqrt(q - m^2 / rho) and the iterations made.

    Examples
    --------
    >>> import cgmt
    >>> m, q, V, acc, _ = solve_spectral_loops(2.0, 0.1, [1.0] * 20, [0.2] * 20)
    >>> abs(acc - cgmt.solve(2.0, 0.1, 2.0).accuracy) < 1e-7
    True
    """
    omega = [float(o) for o in eigenvalues]
    t = [float(x) for x in teacher_weights]
    p = len(omega)
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    gh = (z, w / math.sqrt(2.0 * math.pi))
    rho = sum(o * ti for o, ti in zip(omega, t))
    L = delta * lam
    V = sum(omega) / p / L
    m, q = 1e-3, 1e-3
    it = 0
    for it in range(1, max_iter + 1):
        vh, qh, mh = (2.0 * delta * x for x in _channel(m, q, rho, V, gh))
        V_new = m_new = q_new = 0.0
        for o, ti in zip(omega, t):  # the spectral sums, one eigenvalue at a time
            d = L + vh * o
            V_new += o / d / p
            m_new += mh * ti * o * o / d
            q_new += qh * o * o / (d * d) / p + mh * mh * ti * o ** 3 / (d * d)
        change = max(abs(V_new - V) / V_new, abs(m_new - m) / abs(m_new), abs(q_new - q) / q_new)
        V = damping * V_new + (1 - damping) * V
        m = damping * m_new + (1 - damping) * m
        q = damping * q_new + (1 - damping) * q
        if change < tol:
            break
    kappa = math.sqrt(rho)
    margin = (m / kappa) / math.sqrt(max(q - m * m / rho, 1e-300))
    return m, q, V, float(accuracy_from_margin(margin, kappa)), it
