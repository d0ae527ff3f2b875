"""The batched exact path engine: the certified ridge-logistic path, selection inputs and refit of many layers at
once, on torch (CUDA when asked for, else the CPU).

Problem per layer and grid value C, as in :mod:`empirical.logistic._path` (scikit-learn convention, intercept
unpenalized, y in {-1, +1})::

    min_{w, b}  C * sum_i log(1 + exp(-y_i (x_i' w + b))) + 0.5 ||w||^2

The layers of one dataset share their rows (n training, m validation) and their width p, so their designs stack
into ``(B, n, p)`` tensors and every step below is one batched tensor operation over the B layers:

1. **Reduction.**  When n < p the minimizer lies in the row span: the QR factorization ``X' = Q R`` gives the
   isometric design ``Z = R'`` (n x n) with ``w = Q a`` and ``||w|| = ||a||``; validation rows map to ``Xv Q``.
2. **Predictor.**  Each C starts from the Lagrange extrapolation in ``log C`` of the previous solutions (as the
   numpy path).
3. **Corrector.**  Newton steps: the Hessian ``diag(1, .., 1, 0) + C Z1' D Z1`` of ``(a, b)`` (``Z1`` the design
   with a column of ones) is formed and factored by Cholesky (batched over the layers; for large matrices on CUDA
   one layer at a time, :data:`LAYERWISE_FROM`); a step is a full step inside the self-concordance region
   (``R nu <= 0.1``, ``R`` the largest row norm of ``Z1``) and an exact line minimization along the direction
   outside it, under an Armijo guard.  A step need not form its Hessian: up to :data:`QUASI_STEPS` steps per grid
   point (and per refit) solve the Newton system by conjugate gradients preconditioned with the factor in hand,
   an earlier iterate's or the previous grid point's (:func:`_pcg`); a step whose CG does not converge in
   :data:`PCG_ITERATIONS` iterations, or finds no decrease, makes the next one form and factor its own Hessian.
4. **Certification.**  With the Newton decrement ``nu`` a grid point is finished as soon as every validation
   logit's sign is certified: ``|z_v| > safety * 1.3 * nu * ||(z_v, 1)||_{H^-1}`` (the rule of
   :mod:`empirical.logistic._path`, with the ``H^-1`` norms computed from a factor); otherwise Newton runs on to
   ``tol``.  After a step, ``nu`` and the norms are bounded with the factor in hand, that of an earlier Hessian
   (a rigorous bound, :func:`_newton`: curvatures move by at most ``exp(|dz|)`` and ``C`` only grows): where the
   bound certifies, the exact test would too, and no Hessian is formed.  The validation rows' norms depend on the
   factor only, so each factor's are computed once (one triangular solve with m right-hand sides).

Everything runs in float64: the certificate compares logits with bounds of order ``nu`` (float32's 6e-8 relative
precision is not enough near tol), and the Hessian's condition number reaches ``C`` times the largest eigenvalue
of ``Z'Z`` (1e6-1e8 at the grid's top), beyond float32.  Memory: the designs take ``8 B (n + m) min(n, p)`` bytes
and the Hessians and factors ``8 B 4 (r + 1)^2`` (a Hessian, its factor, the factor in use, each layer's last);
callers bound B (:func:`layer_batches`).

The numpy path (:func:`empirical.logistic.logistic_path`, :func:`empirical.logistic.refit`) stays the reference
and the default; tests compare the two on every shape (n < p, n > p, separable, a tiny class).
"""
from __future__ import annotations

import time

import numpy as np
import torch
from scipy.optimize import OptimizeResult

from empirical.common.checks import check_bool, check_int, check_scalar
from empirical.common.failures import CONVERGED, ITERATION_LIMIT, NO_PROGRESS, SIGNS_CERTIFIED, STATUS_MESSAGES, report
from empirical.common.resources import resolve_device

from ..common.arrays import C_MAX, C_MIN, check_grid, check_matrix, check_signed_labels, check_vector
from ._newton import ARMIJO, HALVINGS, check_solver
from ._path import EXTRAPOLATION_POINTS, check_path_options, lagrange_weights
from ._pcg import DISTANCE, RADIUS, SAFETY

__all__ = ["batched_path", "batched_refit", "layer_batches"]  # PhaseClock, stack_on_device: for
# fit_on_engine, not API

#: dtype of every tensor of the engine (module docstring)
DTYPE = torch.float64


def layer_batches(n_layers: int, rows: int, width: int, budget_bytes: float = 2e9) -> list:
    """Consecutive batches of layer positions whose designs and Hessians fit in ``budget_bytes``.

    Parameters
    ----------
    n_layers : int
        Layers to fit.
    rows : int
        Training plus validation rows (n + m).
    width : int
        Hidden size p.
    budget_bytes : float, default=2e9
        Device memory the engine may hold at once (the raw layers, their reduced designs, four (r + 1)-square
        matrices per layer: a Hessian, its factor, the factor in use and the layer's last, r = min(rows, width)).

    Returns
    -------
    list of range
        Batches covering ``range(n_layers)``.

    Examples
    --------
    >>> layer_batches(5, 100, 10, budget_bytes=6e4)
    [range(0, 2), range(2, 4), range(4, 5)]
    """
    n_layers, rows, width = (check_int(v, k) for k, v in dict(n_layers=n_layers, rows=rows, width=width).items())
    budget_bytes = check_scalar(budget_bytes, "budget_bytes", low=0.0, high=1e18, low_open=True)
    r = min(rows, width) + 1
    per_layer = 8.0 * (2 * rows * width + rows * r + 4 * r * r)
    size = max(1, int(budget_bytes // per_layer))
    return [range(i, min(i + size, n_layers)) for i in range(0, n_layers, size)]


class PhaseClock:
    """Wall-clock seconds of an engine run by phase (``seconds``, a dict in the order the phases first ended).

    On CUDA each :meth:`lap` first waits for the device, so a phase's kernels count in that phase and not in a
    later one that happens to synchronize (a transfer to the host).  That wait costs nothing in the engine, whose
    every grid point ends with such a transfer.

    Parameters
    ----------
    device : torch.device
        Where the timed work runs.

    Examples
    --------
    >>> clock = PhaseClock(torch.device("cpu"))
    >>> clock.lap("setup"); sorted(clock.seconds)
    ['setup']
    """

    def __init__(self, device):
        self.device = torch.device(device)
        self.seconds = {}
        self._last = time.perf_counter()

    def lap(self, phase) -> None:
        """Add the seconds since the last lap (or since the clock was made) to ``phase``."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
        self._last = now


def stack_on_device(arrays, device) -> torch.Tensor:
    """The (B, n, p) float64 tensor on ``device`` of B (n, p) arrays, copied there one by one (no stacked copy on
    the host; on the CPU, one copy as :func:`numpy.stack` makes).

    Parameters
    ----------
    arrays : sequence of array of shape (n, p)
        The layers (one shape; validated by the caller).
    device : torch.device
        Where the tensor lives.

    Returns
    -------
    torch.Tensor of shape (B, n, p), float64

    Examples
    --------
    >>> stack_on_device([np.zeros((2, 3)), np.ones((2, 3))], torch.device("cpu")).shape
    torch.Size([2, 2, 3])
    """
    out = torch.empty((len(arrays), *np.shape(arrays[0])), dtype=DTYPE, device=device)
    for i, a in enumerate(arrays):
        out[i].copy_(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)))
    return out


class _Designs:
    """Reduced designs of B layers with a column of ones: ``Z1`` (B, n, r + 1), ``Zv1`` (B, m, r + 1), the basis
    ``Q`` (B, p, r) when reduced (else None), row bounds ``R`` (B,)."""

    def __init__(self, X, Xv):
        B, n, p = X.shape
        if n < p:
            Q, Rt = torch.linalg.qr(X.transpose(1, 2))  # X' = Q R: X = R' Q', so X Q a = R' a
            Z, Zv = Rt.transpose(1, 2), Xv @ Q
        else:
            Q, Z, Zv = None, X, Xv
        self.Q = Q
        self.Z1 = torch.cat([Z, torch.ones(B, n, 1, dtype=DTYPE, device=X.device)], dim=2)
        self.Zv1 = torch.cat([Zv, torch.ones(B, Xv.shape[1], 1, dtype=DTYPE, device=X.device)], dim=2)
        self.R = torch.sqrt((Z * Z).sum(dim=2).amax(dim=1) + 1.0) if n else torch.ones(B, dtype=DTYPE)

    def rows(self, t, layers):
        """``t[layers]`` of a per-layer tensor ``t`` (``layers`` ascending), without a copy when it is every layer."""
        return t if len(layers) == t.shape[0] else t[layers]

    def back(self, theta):
        """Weights (B, p) of coordinates ``theta`` (B, r + 1) (the intercept, last, is dropped)."""
        a = theta[:, :-1]
        return a if self.Q is None else (self.Q @ a.unsqueeze(2)).squeeze(2)


#: matrices of at least this order are factored and solved one layer at a time on CUDA: for a batch of more than one,
#: torch calls cuSOLVER's ``potrfBatched`` and cuBLAS's batched triangular solves, which are built for small matrices
#: (docs/gpu.md: measured on an H100)
LAYERWISE_FROM = 128


def _layerwise(fn, *args):
    """``fn(*args)`` on (B, k, .) tensors, as B calls on one layer each where that is faster (:data:`LAYERWISE_FROM`);
    a tuple of results is concatenated part by part."""
    if not _one_layer_at_a_time(args[0]):
        return fn(*args)
    outs = [fn(*(a[i:i + 1] for a in args)) for i in range(args[0].shape[0])]
    if isinstance(outs[0], tuple):
        return tuple(torch.cat(parts) for parts in zip(*outs))
    return torch.cat(outs)


def _one_layer_at_a_time(t) -> bool:
    """Whether the system of ``t`` (a (B, k, k) matrix or a (B, k, r) right-hand side: its order k is
    ``shape[-2]``) is solved one layer at a time."""
    return t.device.type == "cuda" and t.shape[0] > 1 and t.shape[-2] >= LAYERWISE_FROM


def _solve_lower(L, B):
    return torch.linalg.solve_triangular(L, B, upper=False)


def _cholesky_solve(b, L):
    """``H^-1 b`` for ``H = L L'`` (``b`` (B, k, c), ``L`` (B, k, k) lower): two triangular solves.  The same
    numbers as ``torch.cholesky_solve(b, L)``, which on the CPU copies the factor first: at k = 3601, one column,
    1 thread, 85 ms against 5.8 ms for the two solves (1201: 1.12 against 0.37 ms)."""
    return torch.linalg.solve_triangular(L.mT, torch.linalg.solve_triangular(L, b, upper=False), upper=True)


def _terms(z, y):
    """Per-row loss, residual (dl/dz) and curvature of logits ``z`` (B, n) for labels ``y`` (n,)."""
    m = y * z
    s = torch.sigmoid(-m)
    return torch.nn.functional.softplus(-m), -y * s, s * (1.0 - s)


def _objective(z, theta, y, C):
    loss = _terms(z, y)[0].sum(dim=1)
    a = theta[:, :-1]
    return C * loss + 0.5 * (a * a).sum(dim=1)


def _line_min(z, dz, theta, dtheta, y, C, iters=30):
    """argmin_t of the objective along ``theta - t dtheta`` for each layer (convex in t): safeguarded 1-D Newton."""
    ydz = y * dz
    a, da = theta[:, :-1], dtheta[:, :-1]
    adw, dw2 = (a * da).sum(dim=1), (da * da).sum(dim=1)
    lo = torch.zeros_like(C)
    hi = torch.full_like(C, float("inf"))
    t = torch.ones_like(C)
    for _ in range(iters):
        s = torch.sigmoid(-(y * z - t[:, None] * ydz))
        g1 = C * (s * ydz).sum(dim=1) - adw + t * dw2
        g2 = C * (s * (1.0 - s) * ydz * ydz).sum(dim=1) + dw2
        hi = torch.where(g1 > 0, t, hi)
        lo = torch.where(g1 > 0, lo, t)
        t_new = torch.where(g2 > 0, t - g1 / g2, torch.full_like(t, float("inf")))
        inside = (t_new > lo) & (t_new < hi)
        t_new = torch.where(inside, t_new, torch.where(torch.isfinite(hi), 0.5 * (lo + hi), 2.0 * torch.clamp(t, 1.0)))
        if bool(((t_new - t).abs() <= 1e-9 * torch.clamp(t, min=1.0)).all()):
            return t_new
        t = t_new
    return t


#: Newton steps a grid point (or a refit) takes on a factor made at an earlier iterate (:func:`_newton`, solved by
#: :func:`_pcg`) before it forms and factors its own Hessian.  Measured on the CPU with PCG steps (1 thread, one
#: synthetic layer at (1200, 400, 1536), 100-point grid): 2 and 3 gave the same counts (6 factorizations, 120 Newton
#: steps, 455 CG iterations), 3.8 against 4.0 s.  (Before the steps were solved by CG, each was one solve with the
#: old factor: then 0 / 1 / 2 / 3 steps took 46.6 / 35.2 / 25.1 / 23.8 s on two such layers, with 203 / 111 / 71 /
#: 57 factorizations.)
QUASI_STEPS = 2


#: conjugate-gradient iterations of a step on an earlier factor (:func:`_pcg`), and their relative residual: a step
#: that needs more makes the point form its own Hessian.  Forming and factoring a Hessian costs about 9 iterations
#: (one-column solve, two products) on an H100 at order 3601 (docs/gpu.md, kernels measured one by one) and about
#: 200 on this CPU.  Measured on this CPU at (3600, 1200, 4096), one layer: 5 iterations gave 8 factorizations, 138
#: Newton steps and 537 iterations (74 s); 10 gave 5, 173 and 1091 (74 s): the same time here, so the count that
#: costs less where a factorization is cheap.  The relative residual is the numpy path's (``pcg_rtol``).
PCG_ITERATIONS, PCG_RTOL = 5, 1e-3


def _hessian_times(Z1, curv, C, pen, v):
    """``H v`` for each layer, ``H = diag(pen) + C Z1' diag(curv) Z1`` never formed (two matrix-vector products)."""
    t = curv * (Z1 @ v.unsqueeze(2)).squeeze(2)
    return pen * v + C[:, None] * (Z1.transpose(1, 2) @ t.unsqueeze(2)).squeeze(2)


def _pcg(Z1, curv, C, pen, g, L, first):
    """The Newton step ``H^-1 g`` of each layer by conjugate gradients preconditioned with ``L L'``, the factor of an
    earlier Hessian (``first = (L L')^-1 g``, which the caller has), from zero, to a relative residual of
    :data:`PCG_RTOL` in at most :data:`PCG_ITERATIONS` iterations.  Every iterate is a descent direction (``g' x >
    0``).  Returns ``(x, converged, iterations)``."""
    x, r, zr = torch.zeros_like(g), g.clone(), first
    p, rz = zr.clone(), (g * first).sum(dim=1)
    target = PCG_RTOL * g.norm(dim=1)
    done = torch.zeros(g.shape[0], dtype=torch.bool, device=g.device)
    for it in range(1, PCG_ITERATIONS + 1):
        Hp = _hessian_times(Z1, curv, C, pen, p)
        pHp = (p * Hp).sum(dim=1)
        go = ~done & (pHp > 0)  # (pHp <= 0: the curvature underflowed along p; stop there)
        alpha = torch.where(go, rz / torch.where(go, pHp, 1.0), 0.0)
        x += alpha[:, None] * p
        r -= alpha[:, None] * Hp
        done |= ~(pHp > 0) | (r.norm(dim=1) <= target)
        if bool(done.all()):
            break
        zr = _layerwise(_cholesky_solve, r.unsqueeze(2), L).squeeze(2)
        rz_new = (r * zr).sum(dim=1)
        beta = torch.where(done, 0.0, rz_new / torch.where(done, 1.0, rz))
        rz = rz_new
        p = zr + beta[:, None] * p
    return x, r.norm(dim=1) <= target, it


class _Factors:
    """Cholesky factors of the Hessians of some layers, with what a later certificate reads from them: ``z`` the
    training logits at each factor's iterate, ``usable`` (False where a factor was regularized, or not made yet)
    and ``vnorm``, the validation rows' ``H^-1`` norms ``||L^-1 (z_v, 1)||`` (m per layer), which depend on the
    factor only: computed once, on first use (``known``), however many iterates and grid points the factor bounds."""

    def __init__(self, L, z, usable, vnorm=None, known=None):
        self.L, self.z, self.usable = L, z, usable
        self.vnorm, self.known = vnorm, known if known is not None else torch.zeros_like(usable)

    @classmethod
    def empty(cls, count, k, n, m, device):
        """A store of ``count`` layers' factors, none usable yet."""
        return cls(torch.empty(count, k, k, dtype=DTYPE, device=device), torch.zeros(count, n, dtype=DTYPE,
                   device=device), torch.zeros(count, dtype=torch.bool, device=device),
                   torch.zeros(count, m, dtype=DTYPE, device=device), None)

    def take(self, mask):
        """The layers of ``mask`` (no copy when it is every layer)."""
        if bool(mask.all()):
            return self
        return _Factors(self.L[mask], self.z[mask], self.usable[mask],
                        None if self.vnorm is None else self.vnorm[mask], self.known[mask])

    def put(self, rows, other) -> None:
        """Store ``other`` (the layers ``rows`` of this store, in that order)."""
        if other is self:  # every layer, in place already
            return
        self.L[rows], self.z[rows], self.usable[rows], self.known[rows] = other.L, other.z, other.usable, other.known
        if other.vnorm is not None:
            self.vnorm[rows] = other.vnorm

    def norms(self, d, layers):
        """``vnorm`` of every layer, the missing ones computed now (one triangular solve with m right-hand sides)."""
        if self.vnorm is None or not bool(self.known.all()):
            Zv1 = d.rows(d.Zv1, layers)
            if self.vnorm is None or not bool(self.known.any()):
                self.vnorm = _layerwise(_solve_lower, self.L, Zv1.transpose(1, 2)).norm(dim=1)
            else:
                missing = ~self.known
                self.vnorm = self.vnorm.clone()
                self.vnorm[missing] = _layerwise(_solve_lower, self.L[missing],
                                                 Zv1[missing].transpose(1, 2)).norm(dim=1)
            self.known = torch.ones_like(self.known)
        return self.vnorm


def _certified(d, layers, th, nu, factors, grow, nits, min_newton, w_norm):
    """The validation-sign certificate of layers ``layers`` at ``th``: inside the self-concordance region
    (``R nu <= RADIUS``, after ``min_newton`` steps) every validation logit exceeds ``SAFETY * DISTANCE * nu`` times
    its ``H^-1`` norm, read from ``factors`` (:class:`_Factors`) and multiplied by ``grow`` (1 for the factor of
    this very Hessian; a bound when it factors an earlier one, :func:`_newton`)."""
    region = (d.R[layers] * nu <= RADIUS) & ((nits >= min_newton) | (nu <= 1e-7 * torch.clamp(w_norm, min=1.0)))
    if not bool(region.any()):  # the H^-1 norms of the m validation rows only where a certificate can hold
        return region
    zv = (d.rows(d.Zv1, layers) @ th.unsqueeze(2)).squeeze(2)
    vnorm = grow[:, None] * factors.norms(d, layers)  # (., m)
    return region & (zv.abs() > SAFETY * DISTANCE * nu[:, None] * vnorm).all(dim=1)


def _newton(d: _Designs, y, C, theta, *, tol, max_iter, yv=None, min_newton=1, counts=None, prior=None,
            polish=0):
    """Newton on every layer of ``d`` at per-layer ``C`` from ``theta``.

    After a step, the certificate is first tried with the factor of an earlier Hessian ``H0`` (at ``C0 <= C``): a
    logit that moves by ``dz`` changes its curvature ``s (1 - s)`` by at most a factor ``exp(|dz|)``, and ``C``
    only grows, so ``H >= exp(-delta) H0`` with ``delta`` the largest change of a training logit since ``H0``'s
    iterate, and the decrement and the ``H^-1`` norms are at most ``exp(delta / 2)`` times those computed with
    ``H0``.  Where that bound certifies, the exact ones would too (same iterate, same verdict), and the Hessian is
    neither formed nor factored again; elsewhere it is.  ``H0`` is the previous iterate's, or, given ``prior``
    (a :class:`_Factors` store of each layer's last factor at an earlier grid point, :func:`batched_path`), that
    one.  Up to :data:`QUASI_STEPS` steps (per call) solve the Newton system by CG preconditioned with ``H0``'s
    factor (:func:`_pcg`: descent directions, under the same Armijo guard; a step whose CG does not converge, or
    that finds no decrease, makes the next step form its own Hessian), and a point that they bring to a certificate
    needs no factorization at all.  Without ``yv`` (the refit) the same steps run on the last factor, with no
    certificate.

    Returns (theta, nit, grad_norm, certified, status, last) with the statuses of
    :data:`empirical.common.failures.STATUS_MESSAGES`: 0 converged, 6 certified, 1 iteration limit, 2 the
    backtracking found no decrease in ``HALVINGS`` halvings (that layer stops at its last iterate); ``last``
    (with ``yv``) the store ``prior`` (or a new one) updated with each layer's last factor.  ``counts`` (a dict),
    when given, accumulates ``"factorizations"`` (Hessians formed and factored, per layer) and ``"reused"``
    (points certified on an earlier grid point's factor, with no factorization).  ``polish``: Newton steps each layer
    takes after its gradient first meets ``tol`` (the refit: as ``_pcg.newton_pcg``'s, a step that
    only just crosses ``tol`` leaves small coefficients ~``tol / ||w||`` from the minimizer)."""
    dev = theta.device
    k = d.Z1.shape[2]
    pen = torch.ones(k, dtype=DTYPE, device=dev)
    pen[-1] = 0.0
    theta = theta.clone()
    count = theta.shape[0]
    nit = torch.zeros(count, dtype=torch.long, device=dev)
    gnorm = torch.full((count,), float("nan"), dtype=DTYPE, device=dev)
    certified = torch.zeros(count, dtype=torch.bool, device=dev)
    status = torch.ones(count, dtype=torch.long, device=dev)
    active = torch.arange(count, device=dev)
    factored = torch.zeros(count, dtype=torch.bool, device=dev)  # a factor of this point's own
    refused = torch.zeros(count, dtype=torch.bool, device=dev)  # the factor in hand failed a step: factor anew
    steps_on_old = torch.zeros(count, dtype=torch.long, device=dev)  # CG steps on a factor made at an earlier iterate
    last = None if yv is None else prior if prior is not None else _Factors.empty(count, k, y.shape[0], yv.shape[0],
                                                                                   dev)
    stale = last if last is not None and bool(last.usable.any()) else None  # an earlier factor of the active layers
    polish_left = torch.full((count,), int(polish), dtype=torch.long, device=dev)
    while active.numel():
        Z1, th, Ca = d.rows(d.Z1, active), theta[active], C[active]  # active: ascending positions in d
        z = (Z1 @ th.unsqueeze(2)).squeeze(2)
        loss, res, curv = _terms(z, y)
        g = pen * th + Ca[:, None] * (Z1.transpose(1, 2) @ res.unsqueeze(2)).squeeze(2)
        w_norm = th[:, :-1].norm(dim=1)
        gn = g.norm(dim=1) / torch.clamp(w_norm, min=1.0)
        converged = gn <= tol
        extra = converged & (polish_left[active] > 0) & (nit[active] < max_iter)  # one more step past tol
        polish_left[active] -= extra.long()
        converged &= ~extra
        cert = torch.zeros_like(converged)
        step0 = None
        if stale is not None and yv is not None:  # the certificate on the earlier factor
            step0 = _layerwise(_cholesky_solve, g.unsqueeze(2), stale.L).squeeze(2)
            grow = torch.exp(0.5 * torch.where(stale.usable, (z - stale.z).abs().amax(dim=1), float("inf")))
            nu0 = torch.sqrt(torch.clamp((g * step0).sum(dim=1), min=0.0))
            cert = _certified(d, active, th, grow * nu0, stale, grow, nit[active], min_newton, w_norm) & ~converged
        gnorm[active] = gn
        certified[active] = cert
        status[active] = torch.where(converged, CONVERGED, torch.where(cert, SIGNS_CERTIFIED, ITERATION_LIMIT))
        if bool((converged | cert).any()):  # finished without a new factorization
            keep = ~(converged | cert)
            if last is not None and stale is not None:
                last.put(active[~keep], stale.take(~keep))
            if not bool(keep.any()):
                break
            active, Z1, th, Ca, z, curv, g, w_norm = (v[keep] for v in (active, Z1, th, Ca, z, curv, g, w_norm))
            if stale is not None:
                stale, step0 = stale.take(keep), None if step0 is None else step0[keep]
        reused = (stale is not None and bool((steps_on_old[active] < QUASI_STEPS).all()) and bool(stale.usable.all())
                  and not bool(refused[active].any()))
        if reused and step0 is None:  # (the refit: no certificate computed it)
            step0 = _layerwise(_cholesky_solve, g.unsqueeze(2), stale.L).squeeze(2)
        if reused:  # a Newton step solved by CG preconditioned with the factor of an earlier iterate's Hessian
            factors = stale
            step, solved, its = _pcg(Z1, curv, Ca, pen, g, stale.L, step0)
            if counts is not None:
                counts["cg"] = counts.get("cg", 0) + its * len(active)
            nu = torch.sqrt(torch.clamp((g * step).sum(dim=1), min=0.0))
            cert = torch.zeros(len(active), dtype=torch.bool, device=dev)
        else:
            # diag(pen) + C Z1' D Z1, in place: no second (B, k, k) tensor
            H = (Z1.transpose(1, 2) @ (Z1 * curv.unsqueeze(2))).mul_(Ca[:, None, None])
            H.diagonal(dim1=1, dim2=2).add_(pen)
            L, info = _layerwise(torch.linalg.cholesky_ex, H)
            regularized = info != 0
            if bool(regularized.any()):  # an intercept block with every curvature underflowed: regularize it
                H.diagonal(dim1=1, dim2=2).add_(1e-12 * torch.clamp(Ca, min=1.0)[:, None])
                L, _ = _layerwise(torch.linalg.cholesky_ex, H)
            del H
            if counts is not None:
                counts["factorizations"] = counts.get("factorizations", 0) + len(active)
            factored[active] = True
            refused[active] = False
            factors = _Factors(L, z, ~regularized)
            step = _layerwise(_cholesky_solve, g.unsqueeze(2), L).squeeze(2)
            nu = torch.sqrt(torch.clamp((g * step).sum(dim=1), min=0.0))
            cert = torch.zeros_like(regularized)
            if yv is not None:
                cert = _certified(d, active, th, nu, factors, torch.ones_like(nu), nit[active], min_newton, w_norm)
        limit = nit[active] >= max_iter
        finished = cert | limit
        certified[active] = cert
        status[active] = torch.where(cert, SIGNS_CERTIFIED, ITERATION_LIMIT)
        go = ~finished
        if last is not None and bool(finished.any()):
            last.put(active[finished], factors.take(finished))
        if not bool(go.any()):
            break
        # one step for the layers that go on
        Z1, th, Ca, z, step, nu = Z1[go], th[go], Ca[go], z[go], step[go], nu[go]
        dz = (Z1 @ step.unsqueeze(2)).squeeze(2)
        damped = d.R[active[go]] * nu > RADIUS
        t = torch.ones_like(Ca)
        if bool(damped.any()):
            t = torch.where(damped, _line_min(z, dz, th, step, y, Ca), t)
        f0 = _objective(z, th, y, Ca)
        for _ in range(HALVINGS):
            new = th - t[:, None] * step
            f1 = _objective(z - t[:, None] * dz, new, y, Ca)
            ok = (f1 <= f0 - ARMIJO * t * nu * nu) | (f1 - f0 <= 1e-14 * torch.clamp(f0.abs(), min=1.0))
            if bool(ok.all()):
                break
            t = torch.where(ok, t, 0.5 * t)
        moving = active[go]
        theta[moving[ok]] = th[ok] - t[ok, None] * step[ok]
        if reused:  # no decrease along an old factor's direction, or CG did not converge on it: this point forms
            # its own Hessian next
            refused[moving[~(ok & solved[go])]] = True
            nit[moving[ok]] += 1
            steps_on_old[moving] += 1
            active, stale = moving, factors.take(go)
            continue
        nit[moving] += 1
        # no decrease on a fresh factor: stop there (as the numpy solvers do), never loop on
        status[moving[~ok]] = NO_PROGRESS
        active = moving[ok]
        factors = factors.take(go)  # the factor just used: the next steps' preconditioner, the next certificate's bound
        if last is not None and not bool(ok.all()):
            last.put(moving[~ok], factors.take(~ok))
        stale = factors.take(ok)
    if counts is not None:
        counts["reused"] = counts.get("reused", 0) + int((certified & ~factored).sum())
    return theta, nit, gnorm, certified, status, last


def _as_tensor(a, device):
    if isinstance(a, torch.Tensor):  # an unchecked caller's rows already on the device (:func:`stack_on_device`)
        return a.to(device=device, dtype=DTYPE)
    return torch.as_tensor(np.ascontiguousarray(a), dtype=DTYPE, device=device)


def _check_layers(X, name, width=None) -> np.ndarray:
    """A finite (B, n, p) float64 stack, each layer checked by :func:`empirical.common.arrays.check_matrix`."""
    if np.ndim(X) != 3 or 0 in np.shape(X):
        raise ValueError(f"{name} must be a non-empty (layers, rows, features) array, got shape {np.shape(X)}")
    for i, layer in enumerate(X):
        check_matrix(layer, f"{name}[{i}]")
    stack = np.ascontiguousarray(X, dtype=np.float64)
    if width is not None and stack.shape[2] != width:
        raise ValueError(f"{name} must have the {width} features of X, got {stack.shape[2]}")
    return stack


def batched_path(X, y, Xv, yv, Cs, *, device="cpu", tol=1e-10, max_iter=100,
                 extrapolation_points=EXTRAPOLATION_POINTS, min_newton=1, check_input=True,
                 reuse_factors=True, strict=False) -> OptimizeResult:
    """Validation accuracy of the exact ridge-logistic minimizer at every C of ``Cs``, for B layers at once.

    Parameters
    ----------
    X : array of shape (B, n, p)
        Training rows of each layer (standardized by the caller).
    y : array of shape (n,)
        Training labels in {-1, +1} (shared by the layers).
    Xv : array of shape (B, m, p)
        Validation rows of each layer (m >= 1).
    yv : array of shape (m,)
        Validation labels in {-1, +1}.
    Cs : array of float
        The grid of C = 1/lambda (distinct, in ``[C_MIN, C_MAX]``); solved in ascending order, reported in the
        order given.
    device : str or torch.device, default="cpu"
        Where to run (:func:`empirical.common.resources.resolve_device`).
    tol : float, default=1e-10
        Relative gradient norm ``||grad|| / max(1, ||w||)`` of a converged point (one not certified first).
    max_iter : int, default=100
        Newton steps per grid point.
    extrapolation_points : int, default=EXTRAPOLATION_POINTS (5)
        Points of the log C extrapolation (as :func:`empirical.logistic.logistic_path`).
    min_newton : int, default=1
        Newton steps per grid point before certification is tried.
    check_input : bool, default=True
        Validate the arrays, the grid and the solver settings.  A caller that has validated them already
        (:func:`empirical.probes._raptor.fit_on_engine`: each probe's ``fit`` checked its data at the boundary) passes
        False, as for :func:`empirical.logistic.logistic_path`; the stacks must then be float64 with labels in
        {-1, +1} and ``Cs`` a valid grid, and ``X`` and ``Xv`` may be float64 tensors already on the device
        (:func:`stack_on_device`), used in place.
    reuse_factors : bool, default=True
        Start each grid point on the previous point's last factor: up to :data:`QUASI_STEPS` Newton steps solved by
        CG preconditioned with it, each followed by the certificate's rigorous bound (:func:`_newton`), before a
        Hessian of its own is formed and factored.  The verdicts and accuracies are those of the exact test; the
        iterates differ within the certificate.  False: at least one factorization per grid point.
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` when a (layer, grid point) pair is neither
        certified nor converged; otherwise that warns :class:`~empirical.common.failures.ConvergenceWarning` and
        the result has ``success=False`` (the one failure convention, :func:`empirical.common.failures.report`).

    Returns
    -------
    OptimizeResult
        ``val_accuracy``, ``certified``, ``grad_norm``, ``nit`` (each (B, K) numpy arrays, K = len(Cs), in the
        order of ``Cs``), ``coef`` (B, K, p) standardized weights and ``intercept`` (B, K) of the iterates,
        ``success`` (every point certified or converged), ``status`` (0 every point certified or converged, 2
        some point's line search found no decrease, 1 some point reached ``max_iter``; the codes of
        :data:`empirical.common.failures.STATUS_MESSAGES`), ``message``, ``n_factorizations`` (Hessians formed and
        factored, summed over the layers), ``n_reused`` ((layer, grid point) pairs certified on an earlier point's
        factor, with none of their own), ``n_cg`` (conjugate-gradient iterations of the steps on earlier factors,
        times the layers of their batch), ``seconds`` (wall-clock seconds by phase, :class:`PhaseClock`:
        ``"transfer"`` of the rows to the device, ``"reduction"`` (the QR), ``"path"`` (the grid)).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2, 80, 5))
    >>> y = np.where(X[0, :, 0] + rng.standard_normal(80) > 0, 1.0, -1.0)
    >>> path = batched_path(X[:, :60], y[:60], X[:, 60:], y[60:], [0.01, 0.1, 1.0])
    >>> path.success, path.val_accuracy.shape
    (True, (2, 3))
    """
    dev = resolve_device(device)
    reuse_factors = check_bool(reuse_factors, "reuse_factors")
    if check_input:
        Cs = check_grid(Cs)
        tol, max_iter = check_solver(tol, max_iter)
        extrapolation_points, min_newton = check_path_options(extrapolation_points, min_newton)
        X = _check_layers(X, "X")
        y = check_signed_labels(y, X.shape[1], "y")
        Xv = _check_layers(Xv, "Xv", width=X.shape[2])
        if Xv.shape[0] != X.shape[0]:
            raise ValueError(f"Xv must have the {X.shape[0]} layers of X, got {Xv.shape[0]}")
        yv = check_signed_labels(yv, Xv.shape[1], "yv")
    else:
        Cs = np.asarray(Cs, dtype=np.float64)
    clock = PhaseClock(dev)
    Xt, Xvt = _as_tensor(X, dev), _as_tensor(Xv, dev)
    yt, yvt = _as_tensor(y, dev), _as_tensor(yv, dev)
    B = Xt.shape[0]
    clock.lap("transfer")
    d = _Designs(Xt, Xvt)
    clock.lap("reduction")
    k = d.Z1.shape[2]
    order_idx = np.argsort(Cs)
    logC = np.log(Cs[order_idx])
    K = len(Cs)
    acc, cert, gnorm = np.empty((B, K)), np.zeros((B, K), dtype=bool), np.empty((B, K))
    nits = np.zeros((B, K), dtype=int)
    line_failed = np.zeros((B, K), dtype=bool)
    coef, intercept = np.empty((B, K, Xt.shape[2])), np.empty((B, K))
    hist_t, hist = [], []
    counts = {"factorizations": 0, "reused": 0, "cg": 0}
    theta = torch.zeros(B, k, dtype=DTYPE, device=dev)
    last = None  # each layer's last factor, the next grid point's first (:func:`_newton`)
    for j, idx in enumerate(order_idx):
        t = logC[j]
        if hist_t:  # Lagrange extrapolation in log C of the last `extrapolation_points` solutions
            m = min(len(hist_t), extrapolation_points)
            wts = lagrange_weights(hist_t[-m:], t)
            theta = sum(float(w) * h for w, h in zip(wts, hist[-m:]))
        C = torch.full((B,), float(Cs[idx]), dtype=DTYPE, device=dev)
        theta, nit, gn, ce, st, last = _newton(d, yt, C, theta, tol=tol, max_iter=max_iter, yv=yvt,
                                               min_newton=min_newton, counts=counts, prior=last)
        if not reuse_factors:
            last.usable[:] = False
        line_failed[:, idx] = (st == NO_PROGRESS).cpu().numpy()
        hist_t.append(t)
        hist.append(theta)
        hist_t, hist = hist_t[-extrapolation_points:], hist[-extrapolation_points:]
        zv = (d.Zv1 @ theta.unsqueeze(2)).squeeze(2)
        # counts, divided on the host as numpy's mean divides (a CUDA mean multiplies by 1/m: 1 ulp off, and ties in
        # the selection of C would then break another way than the numpy path's)
        acc[:, idx] = (torch.where(zv > 0, 1.0, -1.0) == yvt).sum(dim=1).cpu().numpy() / yvt.shape[0]
        cert[:, idx], gnorm[:, idx], nits[:, idx] = ce.cpu().numpy(), gn.cpu().numpy(), nit.cpu().numpy()
        coef[:, idx] = d.back(theta).cpu().numpy()
        intercept[:, idx] = theta[:, -1].cpu().numpy()
    clock.lap("path")
    done = cert | (gnorm <= tol)
    status = CONVERGED if done.all() else NO_PROGRESS if line_failed[~done].any() else ITERATION_LIMIT
    message = ("every grid point certified or converged" if done.all() else
               f"{int((~done).sum())} (layer, grid point) pair(s) neither certified nor converged"
               + (f", {int(line_failed[~done].sum())} of them because the line search found no decrease"
                  if status == NO_PROGRESS else ""))
    result = OptimizeResult(val_accuracy=acc, certified=cert, grad_norm=gnorm, nit=nits, coef=coef,
                            intercept=intercept, success=bool(done.all()), status=status, message=message,
                            n_factorizations=counts["factorizations"], n_reused=counts["reused"],
                            n_cg=counts["cg"], seconds=clock.seconds)
    return report(result, strict, "empirical.logistic.batched_path", layers=B, n_grid=len(Cs))


def batched_refit(X, y, C, coef0, intercept0, *, device="cpu", tol=1e-10, max_iter=100,
                  check_input=True, strict=False) -> OptimizeResult:
    """Tightly converged fits of B layers, each at its own C, warm-started (the refit on train + validation).

    Parameters
    ----------
    X : array of shape (B, n, p)
        Rows of each layer (standardized by the caller).
    y : array of shape (n,)
        Labels in {-1, +1}.
    C : array of shape (B,)
        Each layer's C.
    coef0 : array of shape (B, p)
        Warm starts of the weights (standardized coordinates).
    intercept0 : array of shape (B,)
        Warm starts of the intercepts.
    device : str or torch.device, default="cpu"
        Where to run (:func:`empirical.common.resources.resolve_device`).
    tol, max_iter
        As for :func:`empirical.logistic.fit_l2_logistic`.
    check_input : bool, default=True
        As for :func:`batched_path` (False: the arrays are float64, ``C`` in the estimators' domain, and ``X`` may
        be a float64 tensor already on the device, used in place).
    strict : bool, default=False
        Raise :class:`~empirical.common.failures.ConvergenceError` when a layer's solve fails; otherwise that warns
        :class:`~empirical.common.failures.ConvergenceWarning` and the result says which (the one failure
        convention, :func:`empirical.common.failures.report`).

    Returns
    -------
    OptimizeResult
        ``coef`` (B, p), ``intercept`` (B,), ``grad_norm``, ``nit``, ``success`` (B,) numpy arrays, ``message``
        (which layers failed, if any), and
        ``status`` (B,): 0 converged, 1 iteration limit, 2 no decrease found by the line search
        (:data:`empirical.common.failures.STATUS_MESSAGES`); ``seconds`` by phase (``"transfer"``, ``"reduction"``,
        ``"newton"``; :class:`PhaseClock`).
    """
    dev = resolve_device(device)
    if check_input:
        tol, max_iter = check_solver(tol, max_iter)
        X = _check_layers(X, "X")
    B, n, p = X.shape
    if check_input:
        y = check_signed_labels(y, n, "y")
        C = np.array([check_scalar(c, f"C[{i}]", low=C_MIN, high=C_MAX)
                      for i, c in enumerate(check_vector(C, "C", B))])
        coef0 = check_matrix(coef0, "coef0", n_rows=B)
        if coef0.shape[1] != p:
            raise ValueError(f"coef0 must have the {p} features of X, got {coef0.shape[1]}")
        intercept0 = check_vector(intercept0, "intercept0", B)
    else:
        C = np.asarray(C, dtype=np.float64)
    clock = PhaseClock(dev)
    Xt, yt = _as_tensor(X, dev), _as_tensor(y, dev)
    clock.lap("transfer")
    d = _Designs(Xt, Xt[:, :0])
    clock.lap("reduction")
    w0 = _as_tensor(coef0, dev)
    a0 = w0 if d.Q is None else (d.Q.transpose(1, 2) @ w0.unsqueeze(2)).squeeze(2)  # w0 in the row span
    theta = torch.cat([a0, _as_tensor(intercept0, dev)[:, None]], dim=1)
    Ct = _as_tensor(C, dev)
    z0 = (d.Z1 @ theta.unsqueeze(2)).squeeze(2)
    worse = _objective(z0, theta, yt, Ct) > Ct * n * np.log(2.0)  # zero is the better start (as refit)
    theta[worse] = 0.0
    theta, nit, gn, _, status, _ = _newton(d, yt, Ct, theta, tol=tol, max_iter=max_iter, polish=1)
    st = status.cpu().numpy()
    coef = d.back(theta).cpu().numpy()
    clock.lap("newton")
    failed = np.flatnonzero(st != CONVERGED)
    message = ("every layer converged" if not failed.size else
               f"layer(s) {failed.tolist()} of {B}: "
               + "; ".join(STATUS_MESSAGES[int(s)] for s in np.unique(st[failed])))
    result = OptimizeResult(coef=coef, intercept=theta[:, -1].cpu().numpy(), grad_norm=gn.cpu().numpy(),
                            nit=nit.cpu().numpy(), success=st == CONVERGED, status=st, message=message,
                            seconds=clock.seconds)
    return report(result, strict, "empirical.logistic.batched_refit", layers=B)
