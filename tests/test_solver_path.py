"""The certified path solver against tightly converged per-C references."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from scipy.special import expit

from empirical.logistic import fit_l2_logistic, logistic_path, reduce_design, refit
from empirical.logistic._design import extend_design
from empirical.testing import synthetic_hidden_states


def hidden_states(n_tr, n_val, p, shift, seed, rank=8, n_out=2):
    """Synthetic hidden states (empirical.testing), standardized with train statistics, labels +-1."""
    Htr, ytr, Hv, yv = synthetic_hidden_states(n_tr, n_val, p, shift, seed=seed, rank=rank, n_out=n_out)
    H, y = np.vstack([Htr, Hv]), np.r_[ytr, yv]
    mu, s = H[:n_tr].mean(0), H[:n_tr].std(0)
    X = (H - mu) / s
    y_signed = 2.0 * y - 1
    return X[:n_tr], y_signed[:n_tr], X[n_tr:], y_signed[n_tr:]


def tight_path(X, y, Xv, yv, Cs):
    acc, coefs, w, b = [], [], None, 0.0
    for C in Cs:
        r = fit_l2_logistic(X, y, C, fit_intercept=True, w0=w, b0=b, tol=1e-10, method="direct")
        assert r.status in (0, 2)
        w, b = r.coef, r.intercept
        acc.append(np.mean(np.where(Xv @ w + b > 0, 1.0, -1.0) == yv))
        coefs.append((w, b))
    return np.array(acc), coefs


@pytest.mark.parametrize("n_tr,n_val,p", [(80, 30, 40), (60, 30, 150)])
@pytest.mark.parametrize("shift", [1.0, 4.0])  # noisy and separable-ish
def test_path_accuracies_equal_tight_reference(n_tr, n_val, p, shift):
    X, y, Xv, yv = hidden_states(n_tr, n_val, p, shift, seed=n_tr + p)
    Cs = np.logspace(-4, 2, 40)
    res = logistic_path(X, y, Xv, yv, Cs)
    ref_acc, ref = tight_path(X, y, Xv, yv, Cs)
    np.testing.assert_array_equal(res.val_accuracy, ref_acc)
    assert res.success
    # the stored (certified) iterates are close to the exact solutions
    for k in (0, len(Cs) // 2, len(Cs) - 1):
        w = res.design.back(res.coef_reduced[k])
        assert np.linalg.norm(w - ref[k][0]) <= 1e-3 * max(1.0, np.linalg.norm(ref[k][0]))



@pytest.mark.parametrize("points", [1, 2, 5, 8])
@pytest.mark.parametrize("n_tr,n_val,p,shift", [(80, 30, 40, 4.0), (60, 30, 150, 1.0)])
def test_the_predictors_order_changes_the_work_not_the_accuracies(points, n_tr, n_val, p, shift):
    # a predictor of higher order starts closer on a smooth path but amplifies the certified (not converged)
    # iterates' errors by up to 2^points - 1: whatever it predicts, the certificate decides every sign
    X, y, Xv, yv = hidden_states(n_tr, n_val, p, shift, seed=7 + p)
    Cs = np.logspace(-4, 2, 100)
    res = logistic_path(X, y, Xv, yv, Cs, extrapolation_points=points)
    assert res.success
    np.testing.assert_array_equal(res.val_accuracy, tight_path(X, y, Xv, yv, Cs)[0])

def test_path_without_certification_converges_every_point():
    X, y, Xv, yv = hidden_states(50, 20, 30, 1.0, seed=1)
    Cs = np.logspace(-3, 1, 10)
    res = logistic_path(X, y, Xv, yv, Cs, certify=False, tol=1e-10)
    assert np.all(res.grad_norm <= 1e-10)
    for k, C in enumerate(Cs):
        r = fit_l2_logistic(X, y, C, fit_intercept=True)
        w = res.design.back(res.coef_reduced[k])
        assert np.linalg.norm(w - r.coef) <= 1e-8 * max(1, np.linalg.norm(r.coef))


def test_path_unsorted_grid_matches_sorted():
    X, y, Xv, yv = hidden_states(50, 20, 30, 1.0, seed=2)
    Cs = np.logspace(-3, 1, 12)
    perm = np.random.default_rng(0).permutation(12)
    a = logistic_path(X, y, Xv, yv, Cs).val_accuracy
    b = logistic_path(X, y, Xv, yv, Cs[perm]).val_accuracy
    np.testing.assert_array_equal(a[perm], b)


@pytest.mark.parametrize("p", [20, 70, 90])  # primal; n < p < n + m (refactor); n + m <= p (block update)
def test_refit_matches_tight_reference(p):
    X, y, Xv, yv = hidden_states(60, 25, p, 2.0, seed=p)
    d = reduce_design(X, Xv)
    path = logistic_path(X, y, Xv, yv, [0.5], design=d)
    r = refit(X, y, Xv, yv, 0.5, d, path.coef_reduced[0], path.intercept[0])
    ref = fit_l2_logistic(np.vstack([X, Xv]), np.r_[y, yv], 0.5, fit_intercept=True, method="direct")
    assert r.success
    assert np.linalg.norm(r.coef - ref.coef) <= 1e-6 * np.linalg.norm(ref.coef)
    assert abs(r.intercept - ref.intercept) <= 1e-6 * max(1, abs(ref.intercept))


@pytest.mark.parametrize("p", [70, 300])  # n < p < n + m; n + m <= p (the stacked triangular design)
@pytest.mark.parametrize("C", [1e-3, 0.5, 50.0])
def test_refit_solves_without_a_factor_where_the_ridge_term_preconditions_and_with_one_where_not(p, C):
    """The refit's Newton systems go to CG preconditioned by the ridge term alone (REFIT_MATRIX_FREE_CG iterations at
    most) before a factorization: same solution either way, and no factorization at small C."""
    X, y, Xv, yv = hidden_states(60, 25, p, 2.0, seed=p)
    d = reduce_design(X, Xv)
    path = logistic_path(X, y, Xv, yv, [C], design=d)
    r = refit(X, y, Xv, yv, C, d, path.coef_reduced[0], path.intercept[0])
    ref = fit_l2_logistic(np.vstack([X, Xv]), np.r_[y, yv], C, fit_intercept=True, method="direct")
    assert r.success and r.grad_norm <= 1e-10
    assert np.linalg.norm(r.coef - ref.coef) <= 1e-6 * np.linalg.norm(ref.coef)
    assert abs(r.intercept - ref.intercept) <= 1e-6 * max(1, abs(ref.intercept))
    if C == 1e-3:
        assert r.n_factorizations == 0 and r.n_cg > 0
    if C == 50.0:  # nearly separable at large C: the ridge term alone is no preconditioner
        assert r.n_factorizations >= 1


@pytest.mark.parametrize("p,shift,C_max", [(70, 1.0, 10.0), (70, 2.0, 1.0), (300, 0.5, 100.0)])
def test_the_refit_preconditioned_with_the_paths_preconditioner_factors_less_and_lands_on_the_same_fit(p, shift,
                                                                                                      C_max):
    """The path returns its preconditioner at its first best grid point; the refit there, preconditioned with it on
    the train coordinates (``_pcg._PaddedPrec``), needs fewer factorizations of the stacked Hessian than without it
    (a low-rank or stale train preconditioner is closer to the stacked Hessian than the ridge term) and converges to
    the same tight fit.  With the ridge term in its place (``_PaddedPrec.solve_w`` the identity) the first two
    cases factor once."""
    X, y, Xv, yv = hidden_states(60, 25, p, shift, seed=p)
    Cs = np.logspace(-3, np.log10(C_max), 30)
    d = reduce_design(X, Xv)
    path = logistic_path(X, y, Xv, yv, Cs, design=d)
    k, prec = path.preconditioner
    acc = path.val_accuracy
    assert acc[k] == acc.max() and np.all(acc[Cs < Cs[k]] < acc[k])  # the most regularized best point
    C = Cs[k]
    plain = refit(X, y, Xv, yv, C, d, path.coef_reduced[k], path.intercept[k])
    hinted = refit(X, y, Xv, yv, C, d, path.coef_reduced[k], path.intercept[k], preconditioner=prec)
    ref = fit_l2_logistic(np.vstack([X, Xv]), np.r_[y, yv], C, fit_intercept=True, method="direct", tol=1e-13)
    for res in (plain, hinted):
        assert res.success and res.grad_norm <= 1e-10
        assert np.linalg.norm(res.coef - ref.coef) <= 1e-11 * np.linalg.norm(ref.coef)
        assert abs(res.intercept - ref.intercept) <= 1e-11 * max(1.0, abs(ref.intercept))
    assert hinted.n_factorizations <= plain.n_factorizations
    assert (hinted.n_factorizations, hinted.n_cg) < (plain.n_factorizations, plain.n_cg)  # lexicographic
    if p == 70:  # here the train preconditioner (not the ridge term with the same CG budget) spares the factor
        assert hinted.n_factorizations == 0


@pytest.mark.parametrize("option,value", [("tol", float("nan")), ("tol", -1.0), ("tol", 1.0), ("max_iter", 0),
                                          ("max_iter", 2.5), ("extrapolation_points", 0),
                                          ("extrapolation_points", 2.5), ("extrapolation_points", 11),
                                          ("min_newton", -1)])
def test_both_path_solvers_and_the_refit_refuse_a_bad_solver_option_naming_it(option, value):
    # one check for every solver (_newton.check_solver, _path.check_path_options): extrapolation_points=0 used to
    # take the whole history (hist[-0:]), a NaN or negative tol and max_iter=0 used to return a path that was
    # never solved
    from empirical.logistic.batched import batched_path

    X, y, Xv, yv = hidden_states(40, 20, 30, 1.0, seed=5)
    with pytest.raises(ValueError, match=option):
        logistic_path(X, y, Xv, yv, [0.1, 1.0], **{option: value})
    with pytest.raises(ValueError, match=option):
        batched_path(X[None], y, Xv[None], yv, [0.1, 1.0], **{option: value})
    if option in ("tol", "max_iter"):
        d = reduce_design(X, Xv)
        path = logistic_path(X, y, Xv, yv, [0.1, 1.0], design=d)
        with pytest.raises(ValueError, match=option):
            refit(X, y, Xv, yv, 1.0, d, path.coef_reduced[1], path.intercept[1], **{option: value})


def test_refit_refuses_a_preconditioner_that_is_not_the_paths():
    X, y, Xv, yv = hidden_states(60, 25, 70, 1.0, seed=3)
    d = reduce_design(X, Xv)
    path = logistic_path(X, y, Xv, yv, [0.1, 1.0], design=d)
    other = logistic_path(X[:40], y[:40], Xv, yv, [0.1, 1.0]).preconditioner[1]  # another design's (rank 40)
    for bad in ("factor", np.eye(d.rank), other):
        with pytest.raises(TypeError, match="preconditioner"):
            refit(X, y, Xv, yv, 1.0, d, path.coef_reduced[1], path.intercept[1], preconditioner=bad)


@pytest.mark.parametrize("p", [300, 600])  # n < p < n + m; n + m <= p
def test_the_refit_lands_far_inside_its_tolerance_where_the_coefficients_are_small(p, monkeypatch):
    """At small C the coefficients are small (||w|| << 1), and the gradient tolerance (relative to max(1, ||w||))
    leaves them ~tol / ||w|| from the minimizer when the last inexact step only just crosses it: the refit takes one
    more step (``polish``) and is within 1e-11 (relative) of a tight direct-Newton reference; without it, not."""
    from empirical.logistic import _path

    X, y, Xv, yv = hidden_states(200, 80, p, 0.5, seed=p)
    C = 1e-4
    d = reduce_design(X, Xv)
    path = logistic_path(X, y, Xv, yv, [C], design=d)
    ref = fit_l2_logistic(np.vstack([X, Xv]), np.r_[y, yv], C, fit_intercept=True, method="direct", tol=1e-14)
    assert np.linalg.norm(ref.coef) < 0.2

    def error(res):
        return max(np.linalg.norm(res.coef - ref.coef) / np.linalg.norm(ref.coef), abs(res.intercept - ref.intercept))

    r = refit(X, y, Xv, yv, C, d, path.coef_reduced[0], path.intercept[0])
    assert r.success and r.n_factorizations == 0
    assert error(r) <= 1e-11
    original = _path.newton_pcg
    monkeypatch.setattr(_path, "newton_pcg", lambda *a, **kw: original(*a, **{**kw, "polish": 0}))
    unpolished = refit(X, y, Xv, yv, C, d, path.coef_reduced[0], path.intercept[0])
    assert unpolished.nit == r.nit - 1 and error(unpolished) > 1e-11


def test_the_path_factors_nothing_while_the_ridge_term_preconditions():
    """At small C the path's Newton systems are preconditioned by the ridge term (no factorization), and its
    accuracies are still the exact minimizers'."""
    X, y, Xv, yv = hidden_states(80, 30, 150, 1.0, seed=7)
    Cs = np.logspace(-4, -3, 8)
    res = logistic_path(X, y, Xv, yv, Cs)
    ref_acc, _ = tight_path(X, y, Xv, yv, Cs)
    np.testing.assert_array_equal(res.val_accuracy, ref_acc)
    assert res.success and res.certified.all()
    assert res.n_factorizations == 0
    wide = logistic_path(X, y, Xv, yv, np.logspace(-4, 2, 12))  # beyond: it factors when CG needs it
    assert wide.n_factorizations >= 1
    np.testing.assert_array_equal(wide.val_accuracy, tight_path(X, y, Xv, yv, np.logspace(-4, 2, 12))[0])


def _hessian(design, d, C):
    """The exact Hessian of (w, b) at weights d (float64, dense)."""
    Z = design.Z
    r = Z.shape[1]
    H = np.zeros((r + 1, r + 1))
    H[:r, :r] = np.eye(r) + C * Z.T @ (d[:, None] * Z)
    H[:r, r] = H[r, :r] = C * Z.T @ d
    H[r, r] = C * d.sum()
    return H


def _float64_rounding(n, r, k, scale):
    """Allowance for ``min eig(H - P)`` where ``P <= H`` holds in exact arithmetic on the preconditioner's computed
    float64 factors (:func:`empirical.logistic._pcg._nystrom`), for the dense ``H`` and ``P`` these tests form from a
    design ``Z`` (n, r) with a sketch of k columns.

    With u = eps / 2, gamma_m = m u / (1 - m u) (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002,
    Lemma 3.1) and ``scale = C max(d) ||Z||_F^2``, which bounds ``tr(A)`` (``A = C Z'DZ``), hence ``||A||_F``,
    ``|| |Z|' C D |Z| ||_2``, ``||M_k||_F`` and ``||G||^2``:

    - the test's ``fl(I + A)`` and ``fl(I + M_k)``: ``u (sqrt(r) + scale)`` each (entrywise ``u |.|``, in Frobenius
      norm); its products ``A = C Z'(d Z)`` and ``U diag(lam) U'``: ``(gamma_{n+2} + gamma_k) scale``; the dense ``Z``
      of a triangular design (``Q_h [0; T]`` with a reflector, ``|| |Q_h| || <= 3``): ``6 gamma_{n+2} scale``;
    - the preconditioner's ``G = B'Q + E`` (float64, after ``sqrt(C d)``; through the reflector and ``T'`` on a
      triangular design): ``||E||_F <= 4 gamma_{n+r+3} ||Z||_F max(sqrt(C d)) ||Q||_F <= 4 gamma_{n+r+3} sqrt(2k
      scale)``, and ``G G' <= (1 + t) B'QQ'B + (1 + 1/t) E E'`` with ``t = ||E|| / sqrt(scale)`` adds
      ``2 ||E|| sqrt(scale) + ||E||^2 <= 9 gamma_{n+r+3} sqrt(2k) scale``;
    - the loss of orthogonality of the Householder ``Q`` (n x k, Higham Theorem 19.4: ``||Q'Q - I|| <= 2 n k^1.5 u``,
      so ``B'QQ'B <= (1 + 2 n k^1.5 u) A``) and the SVD of ``G`` (backward stable: ``3 r k u ||G||^2``), LAPACK's
      constants taken as 1 per dimension;
    - ``eigvalsh``: ``r u ||H - P|| <= 2 r u scale``.

    Measured: ``-min eig(H - P)`` at most 0.33 of this on 6000 hypothesis draws; the stabilized (shifted) Nystrom used
    before had ``-min eig(A - M_k)`` ~``nu``, ~1e-7 of its sketch's norm (1.09e-5 on the example kept below,
    against an allowance of 7.4e-12 here).
    """
    u = np.finfo(np.float64).eps / 2

    def gamma(m):
        return m * u / (1 - m * u)

    per_scale = (2 * u + gamma(n + 2) + gamma(k) + 6 * gamma(n + 2) + 9 * gamma(n + r + 3) * np.sqrt(2 * k)
                 + 2 * n * k**1.5 * u + 3 * r * k * u + 2 * r * u)
    return 2 * u * np.sqrt(r) + per_scale * scale


@settings(max_examples=25)
@given(n=st.integers(3, 30), extra=st.integers(1, 20), seed=st.integers(0, 1000), logC=st.floats(-4, 1),
       spread=st.floats(0.0, 30.0), rank=st.integers(0, 6), spikes=st.booleans(), grow=st.floats(1.0, 10.0),
       tall=st.booleans())
# the stabilized Nystrom's shift nu, subtracted on the captured directions only: min eig(H - P) = -1.09e-5
@example(n=7, extra=1, seed=4, logC=-2.0, spread=0.0, rank=4, spikes=True, grow=2.0, tall=False)
def test_the_low_rank_preconditioner_bounds_the_hessians_inverse_from_above(n, extra, seed, logC, spread, rank,
                                                                            spikes, grow, tall):
    """P = [[I + C M_k, h], [h', C sum d]] with M_k <= Z'DZ (Nystrom, rank k; k = 0: the ridge term alone) is <= H at
    the weights it was built with, also rescaled to a larger C (``at``): the certificate's norms in P's metric bound
    those in H's (g'P^-1 g >= g'H^-1 g; _val_norm bounds ||(z_v, 1)||_{H^-1}), up to float64 rounding
    (:func:`_float64_rounding`): the float32 sketch only finds the subspace (``M_k = G G'/C``, ``G = B'Q``).  On the
    triangular design of n < p rows and on the dense one of n > p (``tall``)."""
    from empirical.logistic._pcg import PathContext, _NystromPrec, _val_norm

    rng = np.random.default_rng(seed)
    rows, width = (n + extra + 2, n) if tall else (n, n + extra)
    X = rng.standard_normal((rows, width))
    if spikes:  # a few large directions, where the low-rank part is kept
        X[:, :2] *= 30.0
    X -= X.mean(0)
    Xv = rng.standard_normal((4, width))
    design = reduce_design(X, Xv)
    ctx = PathContext.from_design(design)
    C0 = 10.0 ** logC
    d = 0.25 / (1.0 + spread * rng.uniform(0, 1, rows))  # weights of a fit: in (0, 1/4]
    prec = ctx.prec = _NystromPrec(ctx, d, C0, True, rank=rank)
    assert (ctx.tri is None) == tall
    r = design.Z.shape[1]
    for C in (C0, grow * C0):
        prec.at(C)
        if not prec.usable:
            assert not prec.s > 1e-4 * C * d.sum()
            return
        H = _hessian(design, d, C)
        P = H.copy()
        P[:r, :r] = np.eye(r) + prec.U @ np.diag(prec.lam) @ prec.U.T
        np.testing.assert_allclose(prec.lam, prec.lam0 * C / C0, rtol=1e-12)
        rounding = _float64_rounding(rows, r, prec.rank, C * d.max() * np.sum(design.Z**2))
        assert np.linalg.eigvalsh(H - P).min() >= -rounding
        for _ in range(5):
            g = rng.standard_normal(r + 1)
            pw, pb = prec.solve(g[:r], g[r])
            np.testing.assert_allclose(np.r_[pw, pb], np.linalg.solve(P, g), rtol=1e-7, atol=1e-10)
            assert g @ np.r_[pw, pb] >= g @ np.linalg.solve(H, g) * (1 - 1e-9) - rounding * (g @ g)
        zv1 = np.hstack([design.Zv, np.ones((4, 1))])
        exact = np.sqrt(np.einsum("ij,ji->i", zv1, np.linalg.solve(H, zv1.T)))
        assert np.all(_val_norm(ctx, C, True) >= exact * (1 - 1e-9) - rounding * np.linalg.norm(zv1, axis=1))


@pytest.mark.parametrize("tall", [False, True])  # the triangular design of n < p rows; the dense one of n > p
@pytest.mark.parametrize("spikes", [0, 3, 8])
def test_the_nystrom_part_is_below_the_data_term_in_exact_arithmetic_where_the_shifted_one_is_not(tall, spikes):
    """``M_k = U diag(lam) U' <= A = C Z'DZ`` to float64 rounding (:func:`_float64_rounding`) and is Nystrom's
    approximation ``A Omega (Omega' A Omega)^-1 Omega' A`` (its eigenvalues, to the float32 sketch's ~1e-5 of the
    largest, measured <= 1e-5).  The stabilized Nystrom (Tropp et al. 2017, Algorithm 3) the preconditioner used
    before, run here in float64 with its shift ``nu``, is ``<= A + nu (I - U U')`` only: ``A - M_k`` has an
    eigenvalue near ``-nu`` (measured -0.7 to -1.0 nu), so ``P <= H`` failed in exact arithmetic, not by rounding."""
    from scipy import linalg

    from empirical.logistic._pcg import PathContext, _nystrom

    rng = np.random.default_rng(1)
    n, p = (150, 60) if tall else (60, 150)
    X = rng.standard_normal((n, p))
    X[:, :spikes] *= 30.0
    X -= X.mean(0)
    design = reduce_design(X, rng.standard_normal((4, p)))
    ctx = PathContext.from_design(design)
    assert (ctx.tri is None) == tall
    d, C, k = 0.25 / (1.0 + 10.0 * rng.uniform(0, 1, n)), 0.1, 12
    Z = design.Z
    r = Z.shape[1]
    A = C * Z.T @ (d[:, None] * Z)
    U, lam = _nystrom(ctx, C * d, k, seed=0)
    assert len(lam) == k and np.all(lam > 0)
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-13)
    rounding = _float64_rounding(n, r, k, C * d.max() * np.sum(Z**2))
    assert np.linalg.eigvalsh(A - U @ np.diag(lam) @ U.T).min() >= -rounding
    omega = np.random.default_rng(0).standard_normal((r, k)) / np.sqrt(r)  # the sketch's
    Y = A @ omega
    nystrom = np.linalg.eigvalsh(Y @ np.linalg.solve(omega.T @ Y, Y.T))[::-1][:k]
    np.testing.assert_allclose(np.sort(lam)[::-1], nystrom, rtol=0, atol=1e-4 * nystrom[0])
    # the shifted construction, exact but for float64 rounding: Y + nu Omega, core, lam = sig^2 - nu
    nu = 1e-7 * np.linalg.norm(A, 2)
    Y = Y + nu * omega
    F = linalg.solve_triangular(linalg.cholesky(omega.T @ Y, lower=True), Y.T, lower=True).T
    sig2, V = np.linalg.eigh(F.T @ F)
    Us = F @ V / np.sqrt(sig2)
    assert np.linalg.eigvalsh(A - Us @ np.diag(sig2 - nu) @ Us.T).min() < -0.5 * nu


def test_the_low_rank_part_preconditions_a_factor_models_path_without_a_factorization(monkeypatch):
    """On data with a few large directions, the ridge term alone is no preconditioner even at small C (the path
    factors at once) while ridge + Nystrom needs no factorization; the accuracies are the exact minimizers' either
    way."""
    from empirical.logistic import _path

    rng = np.random.default_rng(3)
    n, m, p, q = 200, 80, 400, 16  # q factors: more large directions than CG's iterations before it factors
    loadings = 6.0 * rng.standard_normal((p, q))
    X = rng.standard_normal((n + m, q)) @ loadings.T + rng.standard_normal((n + m, p))
    y = np.where(X @ loadings[:, 0] / 100 + rng.standard_normal(n + m) > 0, 1.0, -1.0)
    X = (X - X[:n].mean(0)) / X[:n].std(0)
    Cs = np.logspace(-3, -1.5, 8)
    ref_acc, _ = tight_path(X[:n], y[:n], X[n:], y[n:], Cs)
    low_rank = logistic_path(X[:n], y[:n], X[n:], y[n:], Cs)
    monkeypatch.setattr(_path, "NYSTROM_RANK", 0)
    ridge = logistic_path(X[:n], y[:n], X[n:], y[n:], Cs)
    for res in (low_rank, ridge):
        np.testing.assert_array_equal(res.val_accuracy, ref_acc)
        assert res.success and res.certified.all()
    assert low_rank.n_factorizations == 0
    assert ridge.n_factorizations >= 1


def test_a_reduced_design_keeps_no_gram_matrix():
    """The design held for a whole fit stores no n x n Gram matrix (104 MB at n = 3600)."""
    import dataclasses

    rng = np.random.default_rng(0)
    X, Xv = rng.standard_normal((30, 50)), rng.standard_normal((8, 50))
    d = reduce_design(X, Xv)
    assert d.reduced and not reduce_design(rng.standard_normal((60, 50))).reduced
    n = X.shape[0]
    stored = [getattr(d, f.name) for f in dataclasses.fields(d)]
    assert not any(isinstance(v, np.ndarray) and v.shape == (n, n) for v in stored)
    np.testing.assert_allclose(d.Zv @ d.Z.T, Xv @ X.T, rtol=0, atol=1e-10 * np.abs(Xv @ X.T).max())


@settings(max_examples=15)
@given(n=st.integers(5, 40), p=st.integers(41, 80), seed=st.integers(0, 1000), centre=st.booleans(),
       dup=st.booleans())
def test_reduce_design_is_isometric(n, p, seed, centre, dup):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    if dup:
        X[-1] = X[0]  # rank deficiency -> pivoted Cholesky fallback
    if centre:
        X -= X.mean(0)
    Xv = rng.standard_normal((7, p))
    d = reduce_design(X, Xv)
    a = rng.standard_normal(d.rank)
    w = d.back(a)
    assert np.isclose(np.linalg.norm(w), np.linalg.norm(a), rtol=1e-8)
    np.testing.assert_allclose(X @ w, d.Z @ a, atol=1e-8 * np.linalg.norm(a) * np.abs(X).max() * np.sqrt(p))
    np.testing.assert_allclose(Xv @ w, d.Zv @ a, atol=1e-8 * np.linalg.norm(a) * np.abs(Xv).max() * np.sqrt(p))


@settings(max_examples=20)
@given(n=st.integers(5, 40), m=st.integers(1, 20), extra=st.integers(-25, 5), seed=st.integers(0, 1000),
       centre=st.booleans(), dup=st.booleans())
def test_extended_design_is_isometric(n, m, extra, seed, centre, dup):
    """The refit's block-Cholesky design of the stacked (train; validation) rows reproduces their
    logits and the norm of w, and maps the train solution (a0, 0) to the train design's w - also when the
    validation rows are dependent on the train rows (n < p < n + m, or a validation row repeating a train row)."""
    rng = np.random.default_rng(seed)
    p = max(n + 1, n + m + extra)
    X = rng.standard_normal((n, p))
    if centre:
        X -= X.mean(0)
    Xv = rng.standard_normal((m, p))
    if dup:
        Xv[0] = X[0]
    d = reduce_design(X, Xv)
    full = extend_design(d, X, Xv)
    Xf = np.vstack([X, Xv])
    assert full.rank == np.linalg.matrix_rank(Xf)
    a = rng.standard_normal(full.rank)
    w = full.back(a)
    assert np.isclose(np.linalg.norm(w), np.linalg.norm(a), rtol=1e-8)
    np.testing.assert_allclose(Xf @ w, full.Z @ a, atol=1e-8 * np.linalg.norm(a) * np.abs(Xf).max() * np.sqrt(p))
    a0 = rng.standard_normal(d.rank)
    np.testing.assert_allclose(full.back(np.r_[a0, np.zeros(full.rank - d.rank)]), d.back(a0),
                               atol=1e-10 * np.linalg.norm(a0))


def test_extended_design_of_validation_rows_inside_the_train_span_adds_no_coordinate():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 30))
    Xv = X[:3] * 2.0  # inside the train row span
    full = extend_design(reduce_design(X, Xv), X, Xv)
    assert full.rank == 10
    np.testing.assert_allclose(full.Z @ full.Z.T, np.vstack([X, Xv]) @ np.vstack([X, Xv]).T, atol=1e-9)


def test_extend_design_refuses_an_unreduced_design():
    X, Xv = np.ones((5, 3)), np.ones((2, 3))
    with pytest.raises(ValueError, match="not reduced"):
        extend_design(reduce_design(X, Xv), X, Xv)


def _lower(G):
    G = np.tril(np.asarray(G, dtype=np.float64))
    return G + np.tril(G, -1).T


@settings(max_examples=25)
@given(n=st.integers(2, 30), m=st.integers(0, 12), extra=st.integers(-15, 10), seed=st.integers(0, 1000),
       centre=st.booleans(), dtype=st.sampled_from([np.float64, np.float32]))
def test_structured_designs_equal_their_dense_matrix(n, m, extra, seed, centre, dtype):
    """The triangular (train) and stacked (train; validation) factors give the products, weighted Gram, row norms
    and dense matrix of Z itself, in float64 to rounding and in float32 to float32 rounding."""
    rng = np.random.default_rng(seed)
    p = max(n + 1, n + m + extra)
    X = rng.standard_normal((n, p)) * rng.uniform(0.1, 10.0)
    if centre:
        X -= X.mean(0)
    Xv = rng.standard_normal((m, p))
    d = reduce_design(X, Xv)
    if d.tri is None:  # rank-deficient train rows: the pivoted factor has no triangular structure
        return
    designs = [d, extend_design(d, X, Xv)]
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    for design in designs:
        Z, tri = design.Z, design.tri.astype(dtype)
        assert tri.shape == Z.shape
        a, t = rng.standard_normal(Z.shape[1]), rng.standard_normal(Z.shape[0])
        c = rng.uniform(0.0, 2.0, Z.shape[0])
        scale = np.abs(Z).max() * max(Z.shape)
        np.testing.assert_allclose(design.tri.dense(), Z, atol=1e-14 * scale)
        np.testing.assert_allclose(tri.matvec(a), Z @ a, atol=rtol * scale * np.abs(a).max())
        np.testing.assert_allclose(tri.rmatvec(t), Z.T @ t, atol=rtol * scale * np.abs(t).max())
        np.testing.assert_allclose(_lower(tri.weighted_gram(c)), Z.T @ (c[:, None] * Z), atol=rtol * scale**2 * 2)
        np.testing.assert_allclose(design.tri.row_norms(), np.linalg.norm(Z, axis=1), atol=1e-12 * scale)


# ------------------------------------------------------------------ the documented C domain is what the solver can do
@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("error::empirical.common.failures.ConvergenceWarning")
@pytest.mark.parametrize("C", [1e10, 1e12, 1e14, 1e16])
def test_raptor_probe_solves_separable_data_at_every_C_of_the_domain(C):
    """Up to ``C_MAX`` on separable data with n <= 2p (where the float32 preconditioner cannot hold the Hessian
    and Newton starts far from the optimum): no error, no warning, every row separated, and the refit's
    gradient, recomputed here from the returned (w, b), is zero to the tolerance."""
    from empirical.common.arrays import C_MAX
    from empirical.probes import RaptorProbe

    assert C <= C_MAX
    for n, p in [(20, 20), (30, 60), (40, 30), (50, 25), (60, 100), (200, 120)]:
        for seed in range(2):
            rng = np.random.default_rng(seed)
            X = rng.standard_normal((n, p)) * rng.uniform(0.1, 10, p) + rng.standard_normal(p)
            y = (X @ rng.standard_normal(p) > 0).astype(int)
            probe = RaptorProbe(Cs=[C]).fit(X, y)
            assert probe.score(X, y) == 1.0, (n, p, seed)
            Xs = (X - probe.scaler_mean_) / probe.scaler_scale_
            w, b, y_signed = probe.coef_std_, probe.intercept_std_, 2.0 * y - 1
            r = -y_signed * expit(-y_signed * (Xs @ w + b))
            grad = np.append(w + C * Xs.T @ r, C * r.sum())
            assert np.linalg.norm(grad) / max(1.0, np.linalg.norm(w)) <= 1e-8, (n, p, seed)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(5, 3), (0, 3), (4, 0)])
def test_one_library_gemv_equals_numpy(dtype, order, shape):
    """The loop's products go through SciPy's BLAS without copying the matrix; they equal numpy's."""
    from empirical.logistic._factors import gemv

    rng = np.random.default_rng(0)
    A = np.asarray(rng.standard_normal(shape), dtype=dtype, order=order)
    x, t = rng.standard_normal(shape[1]), rng.standard_normal(shape[0])
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(gemv(A, x), A @ x.astype(dtype), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(gemv(A, t, trans=True), A.T @ t.astype(dtype), rtol=rtol, atol=rtol)
    assert gemv(A, x).dtype == dtype
