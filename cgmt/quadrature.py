"""Quadrature rules for Gaussian expectations of functions with nearby complex singularities.

Plain (tensor) Gauss-Hermite converges slowly when the integrand has poles close to the real axis
(sigmoid(kappa z) has poles at z = +-i pi / kappa; the logistic prox has branch points at
Im V = +-pi).  We therefore use *composite Gauss-Legendre* on the truncated line [-L, L]
(L = 9: the N(0, 1) mass outside is 2e-19) with panels of width <= H, refined geometrically
(ratio 2) towards every "feature" ``(center c, scale w)``: ``w`` is the distance of the
singularity from the real axis, and panel edges are added at c, c +- w 2^k (k >= -1).  A panel of width h at
distance >= h from c then sees the singularity outside a Bernstein ellipse of parameter >= 5.8,
so an ``order``-point rule is accurate to ~5.8^(-2 order) relative (5e-16 at order 10).

Public pieces (used by the two-replica stability theory as well):

* :func:`gauss_legendre` -- nodes/weights on [-1, 1];
* :func:`gauss_hermite` -- probabilists' Gauss-Hermite nodes/weights for E f(Z), Z ~ N(0, 1);
* :func:`gaussian_rule` -- composite rule (nodes, weights) for E f(Z), Z ~ N(0, 1), refined
  around given features; weights include the N(0, 1) density.
* :func:`build_edges` / :func:`fill_rule` -- the Numba kernels behind it.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit

from empirical.common.checks import check_real_array, check_scalar

from .validation import check_quad_order

__all__ = [
    "TRUNCATION",
    "MAX_PANEL",
    "DEFAULT_ORDER",
    "gauss_legendre",
    "gauss_hermite",
    "gaussian_rule",
    "build_edges",
    "fill_rule",
]

TRUNCATION = 9.0
MAX_PANEL = 1.5
#: Largest truncation :func:`gaussian_rule` accepts (the N(0, 1) density at 40 is 1e-348: zero in float64).
MAX_TRUNCATION = 40.0
DEFAULT_ORDER = 10
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@lru_cache(maxsize=32)
def _gl(order):
    x, w = np.polynomial.legendre.leggauss(order)
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


def gauss_legendre(order):
    """Gauss-Legendre nodes and weights on [-1, 1] (read-only arrays, cached).

    Parameters
    ----------
    order : int
        Number of nodes, >= 1.

    Returns
    -------
    nodes, weights : ndarray of shape (order,)
        Read-only; ``sum(weights * f(nodes))`` integrates f over [-1, 1] (exact for degree < 2 order).

    Examples
    --------
    >>> x, w = gauss_legendre(3)
    >>> round(float(w.sum()), 12), round(float(w @ x ** 2), 12)
    (2.0, 0.666666666667)
    """
    return _gl(check_quad_order(order, "order", factor=16))


@lru_cache(maxsize=32)
def _gh(order):
    z, w = np.polynomial.hermite_e.hermegauss(order)
    w = w / math.sqrt(2.0 * math.pi)
    z.setflags(write=False)
    w.setflags(write=False)
    return z, w


def gauss_hermite(order):
    """Nodes z and weights w with sum(w f(z)) ~ E f(Z), Z ~ N(0, 1) (exact for degree < 2 order).

    Parameters
    ----------
    order : int
        Number of nodes, >= 1.

    Returns
    -------
    z, w : ndarray of shape (order,)
        Probabilists' Gauss-Hermite nodes and weights (the weights include the N(0, 1) density and sum to 1);
        read-only cached arrays.

    Examples
    --------
    >>> z, w = gauss_hermite(4)
    >>> round(float(w.sum()), 12), round(float(w @ z ** 2), 12)
    (1.0, 1.0)
    """
    return _gh(check_quad_order(order, "order", factor=16))


@njit(cache=True)
def build_edges(lo, hi, hmax, centers, scales, out):
    """Write sorted panel edges of [lo, hi] into ``out``; return their count.

    Base grid of width <= hmax, plus for each (c, w) with w < 2 hmax the edges c and c +- w 2^k
    (k >= -1, while w 2^k < hmax), so every panel is at most as wide as its distance from c.
    ``out`` must hold ceil((hi-lo)/hmax) + 1 + len(centers) * (2 log2(hmax / w) + 3) entries
    (see :func:`edge_capacity`).

    Parameters
    ----------
    lo, hi : float
        The interval.
    hmax : float
        Widest panel.
    centers, scales : ndarray of shape (n_features,)
        The features (c, w): where the integrand changes fast and the distance of its nearest complex
        singularity from the real axis.  A feature with w <= 0, w >= 2 hmax or a non-finite c adds no edges.
    out : ndarray
        Buffer the edges are written into (its first ``count`` entries on return); edges beyond its size are
        dropped.

    Returns
    -------
    int
        The number of edges written (panels + 1); the last one is ``hi``.
    """
    nb = int(math.ceil((hi - lo) / hmax))
    if nb < 1:
        nb = 1
    h = (hi - lo) / nb
    n = 0
    for i in range(nb + 1):
        out[n] = lo + i * h
        n += 1
    cap = out.size
    span = hi - lo
    for j in range(centers.size):
        c = centers[j]
        w = scales[j]
        if not (w > 0.0) or w >= 2.0 * hmax or not math.isfinite(c):
            continue
        if c > lo and c < hi and n < cap:
            out[n] = c
            n += 1
        d = 0.5 * w
        while d < hmax:
            for sgn in (-1.0, 1.0):
                e = c + sgn * d
                if e > lo and e < hi and n < cap:
                    out[n] = e
                    n += 1
            d *= 2.0
    edges = np.sort(out[:n])
    # drop (near-)duplicates
    m = 1
    tol = 1e-13 * span
    for i in range(1, n):
        if edges[i] - edges[m - 1] > tol:
            edges[m] = edges[i]
            m += 1
    edges[m - 1] = hi
    out[:m] = edges[:m]
    return m


@njit(cache=True)
def fill_rule(edges, nedges, xg, wg, gaussian, nodes, weights):
    """Composite rule on the panels ``edges[:nedges]``; returns the node count.

    With ``gaussian`` the weights include the N(0, 1) density.

    Parameters
    ----------
    edges : ndarray
        Sorted panel edges (from :func:`build_edges`).
    nedges : int
        How many entries of ``edges`` are used.
    xg, wg : ndarray of shape (order,)
        Gauss-Legendre nodes and weights on [-1, 1] (:func:`gauss_legendre`), mapped onto every panel.
    gaussian : bool
        Multiply the weights by the N(0, 1) density (the rule then computes E f(Z)).
    nodes, weights : ndarray
        Buffers of at least ``(nedges - 1) * order`` entries, filled with the rule.

    Returns
    -------
    int
        The number of nodes written, ``(nedges - 1) * order``.
    """
    k = 0
    for i in range(nedges - 1):
        a = edges[i]
        b = edges[i + 1]
        half = 0.5 * (b - a)
        mid = 0.5 * (a + b)
        for j in range(xg.size):
            z = mid + half * xg[j]
            nodes[k] = z
            if gaussian:
                weights[k] = half * wg[j] * _INV_SQRT_2PI * math.exp(-0.5 * z * z)
            else:
                weights[k] = half * wg[j]
            k += 1
    return k


def edge_capacity(ncenters, span=2 * TRUNCATION, min_scale=1e-12, hmax=MAX_PANEL):
    """Size of an ``out`` buffer that is always large enough for :func:`build_edges`."""
    per = 2 * (int(math.log2(hmax / min_scale)) + 3) + 1
    return int(math.ceil(span / hmax)) + 4 + ncenters * per


def gaussian_rule(features=(), order=DEFAULT_ORDER, L=TRUNCATION, hmax=MAX_PANEL):
    """Composite rule (nodes, weights) with sum(w f(z)) ~ E f(Z), Z ~ N(0, 1).

    Parameters
    ----------
    features : iterable of (float, float), default=()
        (center, scale) pairs where f changes fast (scale = distance of the nearest complex singularity from
        the real axis; floored at 1e-12; inf: no refinement); the panels are refined geometrically towards each
        center.
    order : int, default=DEFAULT_ORDER
        Gauss-Legendre nodes per panel.
    L : float, default=TRUNCATION
        The line is truncated to [-L, L].
    hmax : float, default=MAX_PANEL
        Widest panel.

    Returns
    -------
    nodes, weights : ndarray of shape (n_nodes,)
        The composite rule; the weights include the N(0, 1) density.

    Examples
    --------
    >>> z, w = gaussian_rule([(0.0, 0.1)])
    >>> round(float(w.sum()), 12), round(float(w @ z ** 2), 12)
    (1.0, 1.0)
    """
    try:
        feats = check_real_array(list(features), "features", allow_inf=True)  # scale inf: a smooth feature
    except TypeError:
        raise ValueError(f"features must be an iterable of (center, scale) pairs, got {features!r}"[:200]) from None
    if feats.size and (feats.ndim != 2 or feats.shape[1] != 2):
        raise ValueError(f"features must be (center, scale) pairs, got an array of shape {feats.shape}")
    feats = feats.reshape(-1, 2)
    if not np.all(np.isfinite(feats[:, 0])) or np.any(feats[:, 1] < 0):
        raise ValueError("features must have finite centers and scales >= 0 (inf: no refinement), got "
                         f"{feats.tolist()!r}"[:200])
    L = check_scalar(L, "L", low=0.0, high=MAX_TRUNCATION, low_open=True)
    hmax = check_scalar(hmax, "hmax", low=0.0, high=2 * MAX_TRUNCATION, low_open=True)
    order = check_quad_order(order, "order")
    c = feats[:, 0].copy()
    w = np.maximum(feats[:, 1], 1e-12)
    buf = np.empty(edge_capacity(len(feats), 2 * L))
    ne = build_edges(-L, L, hmax, c, w, buf)
    xg, wg = gauss_legendre(order)
    nodes = np.empty((ne - 1) * len(xg))
    weights = np.empty_like(nodes)
    k = fill_rule(buf, ne, np.asarray(xg), np.asarray(wg), True, nodes, weights)
    return nodes[:k], weights[:k]
