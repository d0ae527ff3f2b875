"""The batched exact path engine (empirical.logistic.batched, issue "Probes at our users' scale"): the same
certified path, selection and refit as the numpy solver, on every shape, for one layer or many."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from empirical.common.resources import resolve_device  # noqa: E402
from empirical.logistic import fit_l2_logistic, logistic_path  # noqa: E402
from empirical.logistic.batched import batched_path, batched_refit, layer_batches  # noqa: E402
from empirical.probes import RaptorProbe, fit_layers  # noqa: E402

CS = np.logspace(-4, 2, 25)


def _layers(shape, seed, B=3, separable=False, tiny_class=False):
    """B standardized layers (train n, validation m, width p) sharing their labels."""
    n, m, p = shape
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((B, n + m, p)) * rng.uniform(0.3, 3.0, p)
    w = rng.standard_normal(p) * 3 / np.sqrt(p)
    noise = 0.0 if separable else rng.logistic(size=n + m)
    y = np.where(X[0] @ w + noise > 0, 1.0, -1.0)
    if tiny_class:  # two positives in train, one in validation
        y[:] = -1.0
        y[[0, 1, n]] = 1.0
    mu, s = X[:, :n].mean(axis=1, keepdims=True), X[:, :n].std(axis=1, keepdims=True)
    Xs = (X - mu) / s
    return Xs[:, :n], y[:n], Xs[:, n:], y[n:]


SHAPES = {"n < p": ((60, 20, 150), {}), "n > p": ((300, 100, 30), {}), "n = p": ((80, 30, 80), {}),
          "separable": ((40, 20, 60), dict(separable=True)), "tiny class": ((80, 30, 40), dict(tiny_class=True))}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_path_matches_the_numpy_path(case, engine_device):
    shape, kw = SHAPES[case]
    X, y, Xv, yv = _layers(shape, seed=len(case), **kw)
    path = batched_path(X, y, Xv, yv, CS, device=engine_device)
    assert path.success
    for b in range(X.shape[0]):
        ref = logistic_path(X[b], y, Xv[b], yv, CS)
        np.testing.assert_array_equal(path.val_accuracy[b], ref.val_accuracy)
        # every point is certified or converged, and its validation signs are those of a tight reference
        for k in (0, len(CS) // 2, len(CS) - 1):
            tight = fit_l2_logistic(X[b], y, CS[k], fit_intercept=True, tol=1e-12, method="direct")
            signs = np.sign(Xv[b] @ path.coef[b, k] + path.intercept[b, k])
            np.testing.assert_array_equal(signs, np.sign(Xv[b] @ tight.coef + tight.intercept))


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_refit_is_tightly_converged(case, engine_device):
    shape, kw = SHAPES[case]
    X, y, Xv, yv = _layers(shape, seed=7, **kw)
    Xf, yf = np.concatenate([X, Xv], axis=1), np.concatenate([y, yv])
    C = np.array([0.01, 1.0, 30.0])
    res = batched_refit(Xf, yf, C, np.zeros((3, X.shape[2])), np.zeros(3), device=engine_device)
    assert res.success.all()
    for b in range(3):
        ref = fit_l2_logistic(Xf[b], yf, C[b], fit_intercept=True, tol=1e-12, method="direct")
        scale = max(1.0, np.linalg.norm(ref.coef))
        assert np.linalg.norm(res.coef[b] - ref.coef) / scale < 1e-8 and abs(res.intercept[b] - ref.intercept) < 1e-8


def test_refit_lands_far_inside_its_tolerance_where_the_coefficients_are_small(engine_device, monkeypatch):
    """At small C (||w|| << 1), warm-started from the path: one step past tol (``polish``, as the numpy refit's) puts
    the engine's refit within 1e-12 (relative) of a tight direct-Newton reference; without it, not."""
    from empirical.logistic import batched

    X, y, Xv, yv = _layers((200, 80, 300), seed=5)
    Xf, yf = np.concatenate([X, Xv], axis=1), np.concatenate([y, yv])
    C = np.full(3, 1e-4)
    path = batched_path(X, y, Xv, yv, [1e-4], device=engine_device)
    refs = [fit_l2_logistic(Xf[b], yf, C[b], fit_intercept=True, tol=1e-14, method="direct") for b in range(3)]

    def error(res):
        return max(max(np.linalg.norm(res.coef[b] - ref.coef) / np.linalg.norm(ref.coef),
                       abs(res.intercept[b] - ref.intercept)) for b, ref in enumerate(refs))

    res = batched_refit(Xf, yf, C, path.coef[:, 0], path.intercept[:, 0], device=engine_device)
    assert res.success.all() and max(np.linalg.norm(ref.coef) for ref in refs) < 0.1
    assert error(res) <= 1e-12
    original = batched._newton
    monkeypatch.setattr(batched, "_newton", lambda *a, **kw: original(*a, **{**kw, "polish": 0}))
    unpolished = batched_refit(Xf, yf, C, path.coef[:, 0], path.intercept[:, 0], device=engine_device)
    assert (unpolished.nit == res.nit - 1).all() and error(unpolished) > 1e-12


@pytest.mark.parametrize("shape", [(100, 200), (400, 40), (150, 150)])
def test_raptor_probe_on_the_engine_is_the_numpy_probe(shape, engine_device):
    n, p = shape
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 3, p) + rng.standard_normal(p)
    y = (X @ rng.standard_normal(p) * 3 / np.sqrt(p) + rng.logistic(size=n) > 0).astype(int)
    numpy_probe, engine_probe = RaptorProbe().fit(X, y), RaptorProbe(device=engine_device).fit(X, y)
    assert engine_probe.C_ == numpy_probe.C_
    np.testing.assert_array_equal(engine_probe.path_val_accuracy_, numpy_probe.path_val_accuracy_)
    scale = np.abs(numpy_probe.coef_).max()
    np.testing.assert_allclose(engine_probe.coef_, numpy_probe.coef_, rtol=0, atol=1e-8 * scale)
    assert engine_probe.refit_result_.success and engine_probe.refit_result_.grad_norm <= 1e-10
    assert engine_probe.score(X, y) == numpy_probe.score(X, y)


def test_fit_layers_on_the_engine_fits_every_layer_in_batches_with_the_numpy_results(monkeypatch, engine_device):
    from empirical.logistic import batched

    rng = np.random.default_rng(2)
    L, n, p = 5, 200, 60
    y = np.arange(n) % 2
    H = np.stack([rng.standard_normal((n, p)) + 0.15 * layer * np.outer(2 * y - 1, rng.standard_normal(p))
                  for layer in range(L)])
    calls = []
    monkeypatch.setattr(batched, "layer_batches",
                        lambda *a, **k: calls.append(a) or [range(0, 2), range(2, 4), range(4, 5)])
    reference, engine = fit_layers(H, y, progress=False), fit_layers(H, y, progress=False, device=engine_device)
    assert len(calls) == 1  # three batched passes
    columns = ["layer", "val_accuracy", "test_accuracy", "C", "best"]
    assert reference.summary[columns].equals(engine.summary[columns])
    for layer in range(L):
        a, b = reference.probes[layer].coef_, engine.probes[layer].coef_
        assert np.abs(a - b).max() <= 1e-8 * np.abs(a).max()


def test_factoring_one_layer_at_a_time_gives_the_batched_results(monkeypatch, engine_device):
    """The large factorizations and triangular solves run one layer at a time on CUDA (batched cuSOLVER kernels are
    built for small matrices): forced on any device, the path and the refit are those of the batched calls."""
    import empirical.logistic.batched as batched

    X, y, Xv, yv = _layers((60, 20, 150), seed=5)
    Xf, yf = np.concatenate([X, Xv], axis=1), np.concatenate([y, yv])
    runs = []
    for forced in (False, True):
        if forced:
            monkeypatch.setattr(batched, "_one_layer_at_a_time", lambda t: t.shape[0] > 1)
        runs.append((batched_path(X, y, Xv, yv, CS, device=engine_device),
                     batched_refit(Xf, yf, np.array([0.01, 1.0, 30.0]), np.zeros((3, 150)), np.zeros(3),
                                   device=engine_device)))
    (path, refit), (path1, refit1) = runs
    np.testing.assert_array_equal(path1.val_accuracy, path.val_accuracy)
    np.testing.assert_array_equal(path1.certified, path.certified)
    np.testing.assert_allclose(path1.coef, path.coef, rtol=0, atol=1e-9 * np.abs(path.coef).max())
    np.testing.assert_allclose(refit1.coef, refit.coef, rtol=0, atol=1e-9 * np.abs(refit.coef).max())


def test_large_systems_are_solved_one_layer_at_a_time_on_cuda_whatever_their_right_hand_side():
    """The rule reads the system's order k from ``shape[-2]`` of the matrix or of the right-hand side: on the H100 a
    (B, k, 1) right-hand side judged by its last dimension kept the 1-column Cholesky solve batched, 12x slower
    than one call per layer (docs/gpu.md)."""
    from types import SimpleNamespace

    from empirical.logistic.batched import LAYERWISE_FROM, _one_layer_at_a_time

    def tensor(kind, *shape):
        return SimpleNamespace(device=SimpleNamespace(type=kind), shape=shape)

    k = 3601
    for shape in [(2, k, k), (2, k, 1), (2, k, 1200)]:
        assert _one_layer_at_a_time(tensor("cuda", *shape))
        assert not _one_layer_at_a_time(tensor("cpu", *shape))  # LAPACK on the CPU loops over the batch anyway
        assert not _one_layer_at_a_time(tensor("cuda", 1, *shape[1:]))
    small = LAYERWISE_FROM - 1
    assert not _one_layer_at_a_time(tensor("cuda", 2, small, 1)) and not _one_layer_at_a_time(tensor("cuda", 2, small,
                                                                                                       small))


def test_certifying_with_an_earlier_factor_changes_no_verdict_and_saves_factorizations(monkeypatch, engine_device):
    """The certificate is first tried with the factor in hand, an earlier iterate's (a rigorous bound: curvatures move
    by at most exp(|dz|), C only grows), so (1) wherever that bound certifies an iterate, the exact certificate (the
    Hessian of that very iterate, formed and factored) certifies it too, and (2) starting each point on the previous
    point's factor (reuse_factors) changes the iterates within the certificate but no validation accuracy, with
    fewer factorizations, and (3) refusing the bound (only a fresh factor certifies; points otherwise converge to
    tol) gives the same accuracies with more Newton steps."""
    import empirical.logistic.batched as batched

    X, y, Xv, yv = _layers((80, 30, 120), seed=8, B=2)
    yt = torch.as_tensor(y, dtype=torch.float64, device=engine_device)
    real_certified, real_newton = batched._certified, batched._newton
    current, checked = {}, []

    def newton(d, y, C, theta, **kwargs):
        current["C"] = C
        return real_newton(d, y, C, theta, **kwargs)

    def certified_and_checked(d, layers, th, nu, factors, grow, *args):
        out = real_certified(d, layers, th, nu, factors, grow, *args)
        bound = out & (grow != 1)
        if bool(bound.any()):  # the exact test at the same iterates: a fresh Hessian, its factor and decrement
            Z1, C = d.rows(d.Z1, layers), current["C"][layers]
            z = (Z1 @ th.unsqueeze(2)).squeeze(2)
            _, res, curv = batched._terms(z, yt)
            pen = torch.ones(Z1.shape[2], dtype=torch.float64, device=th.device)
            pen[-1] = 0.0
            g = pen * th + C[:, None] * (Z1.transpose(1, 2) @ res.unsqueeze(2)).squeeze(2)
            H = torch.diag_embed(pen.expand(len(layers), -1)) + C[:, None, None] * (
                Z1.transpose(1, 2) @ (Z1 * curv[..., None]))
            L = torch.linalg.cholesky(H)
            nu_exact = torch.sqrt((g * batched._cholesky_solve(g.unsqueeze(2), L).squeeze(2)).sum(dim=1))
            exact = real_certified(d, layers, th, nu_exact, batched._Factors(L, z, torch.ones_like(out)),
                                   torch.ones_like(nu), *args)
            assert bool(exact[bound].all())
            assert bool((nu_exact[bound] <= nu[bound] * (1 + 1e-9)).all())  # the bound's decrement bounds the exact one
            checked.append(int(bound.sum()))
        return out

    monkeypatch.setattr(batched, "_newton", newton)
    monkeypatch.setattr(batched, "_certified", certified_and_checked)
    fast = batched_path(X, y, Xv, yv, CS, device=engine_device)
    within = batched_path(X, y, Xv, yv, CS, device=engine_device, reuse_factors=False)
    assert sum(checked) > len(CS)  # many verdicts came from the bound, each confirmed by the exact test
    assert fast.success and within.success and within.n_reused == 0 < fast.n_reused
    np.testing.assert_array_equal(fast.val_accuracy, within.val_accuracy)
    assert fast.n_factorizations < within.n_factorizations

    def never_with_an_old_factor(d, layers, th, nu, factors, grow, *args):
        if not bool((grow == 1).all()):  # the bound from an earlier factor refused: only fresh factors certify
            return torch.zeros(len(layers), dtype=torch.bool, device=th.device)
        return real_certified(d, layers, th, nu, factors, grow, *args)

    monkeypatch.setattr(batched, "_certified", never_with_an_old_factor)
    fresh = batched_path(X, y, Xv, yv, CS, device=engine_device, reuse_factors=False)
    # (its points stop only where a fresh factor certifies them, or converged to tol): the same accuracies
    assert fresh.success
    np.testing.assert_array_equal(within.val_accuracy, fresh.val_accuracy)
    # the bound stops points sooner: fewer Newton steps (with CG steps on a point's own factor after its first
    # step, a point factors once either way here)
    assert within.certified.sum() > len(CS) and within.nit.sum() < fresh.nit.sum()
    assert within.n_factorizations <= fresh.n_factorizations
    for b in range(2):  # the reused points' signs are the exact minimizer's
        np.testing.assert_array_equal(fast.val_accuracy[b], logistic_path(X[b], y, Xv[b], yv, CS).val_accuracy)


def test_each_factor_solves_for_the_validation_norms_once(monkeypatch, engine_device):
    """The validation rows' H^-1 norms depend on the factor only: one m-column triangular solve per factor, however
    many iterates and grid points it bounds (before, the same solve ran again at every certificate)."""
    import empirical.logistic.batched as batched

    solves = []
    real = batched._solve_lower
    monkeypatch.setattr(batched, "_solve_lower", lambda L, B: solves.append(B.shape[-1]) or real(L, B))
    X, y, Xv, yv = _layers((80, 30, 120), seed=9, B=1)
    path = batched_path(X, y, Xv, yv, CS, device=engine_device)
    assert path.success and 0 < len(solves) <= path.n_factorizations
    assert set(solves) == {Xv.shape[1]}


def test_the_engines_cholesky_solve_is_torchs(engine_device):
    """The engine solves with its factors by two triangular solves (torch.cholesky_solve copies the factor first: 14x
    slower at order 3601 on the CPU); the same solution, for one and several right-hand sides and batches."""
    import torch

    import empirical.logistic.batched as batched

    gen = torch.Generator().manual_seed(0)
    for B, k, c in ((1, 7, 1), (3, 40, 1), (2, 25, 4)):
        A = torch.randn(B, k, k, dtype=torch.float64, generator=gen)
        L = torch.linalg.cholesky(A @ A.mT + k * torch.eye(k, dtype=torch.float64)).to(engine_device)
        b = torch.randn(B, k, c, dtype=torch.float64, generator=gen).to(engine_device)
        x = batched._cholesky_solve(b, L)
        torch.testing.assert_close(x, torch.cholesky_solve(b, L), rtol=1e-13, atol=0.0)
        torch.testing.assert_close(L @ (L.mT @ x), b, rtol=1e-12, atol=1e-12)


def test_reuse_factors_is_checked(engine_device):
    X, y, Xv, yv = _layers((30, 10, 20), seed=1, B=1)
    with pytest.raises((TypeError, ValueError), match="reuse_factors"):
        batched_path(X, y, Xv, yv, CS[:3], device=engine_device, reuse_factors="yes")


def test_validation_accuracy_is_the_count_over_m_as_numpy_divides_it(engine_device):
    """The accuracies are counts divided on the host: a device mean that multiplies by 1/m is 1 ulp off for some
    counts, and the selection of C compares accuracies exactly (measured on CUDA: 0.7000000000000001 against 0.7)."""
    X, y, Xv, yv = _layers((60, 30, 150), seed=6, B=2)
    path = batched_path(X, y, Xv, yv, CS, device=engine_device)
    counts = np.rint(path.val_accuracy * 30).astype(int)
    np.testing.assert_array_equal(path.val_accuracy, counts / 30)


def test_fit_layers_prepares_the_next_batch_while_the_engine_fits_this_one(monkeypatch, engine_device):
    """The host's reading, validation and standardization of batch j + 1 overlaps the engine's pass on batch j (off
    the main thread: preparing batch 1 waits until batch 0 is on the engine, which sequential code never reaches),
    with the numpy fits' results."""
    import threading

    from empirical.logistic import batched
    from empirical.probes import _layers as layers_module

    rng = np.random.default_rng(3)
    L, n, p = 4, 160, 30
    y = np.arange(n) % 2
    H = np.stack([rng.standard_normal((n, p)) + 0.2 * layer * np.outer(2 * y - 1, rng.standard_normal(p))
                  for layer in range(L)])
    monkeypatch.setattr(batched, "layer_batches", lambda *a, **k: [range(0, 1), range(1, 2), range(2, 3), range(3, 4)])
    events, lock, fitting = [], threading.Lock(), threading.Event()
    real_prepare, real_fit = layers_module._prepare_batch, layers_module.fit_on_engine

    def prepare(estimator, H_, y_, split, layers, seed):
        if layers[0] == 1:  # batch 1 is prepared while batch 0 is on the engine
            assert fitting.wait(10)
        with lock:
            events.append(("prepare", layers[0], threading.current_thread() is threading.main_thread()))
        return real_prepare(estimator, H_, y_, split, layers, seed)

    def fit(probes, prepared, device):
        fitting.set()
        with lock:
            events.append(("fit", len(events)))
        out = real_fit(probes, prepared, device)
        fitting.clear()
        return out

    monkeypatch.setattr(layers_module, "_prepare_batch", prepare)
    monkeypatch.setattr(layers_module, "fit_on_engine", fit)
    engine = fit_layers(H, y, progress=False, device=engine_device)
    reference = fit_layers(H, y, progress=False)
    columns = ["layer", "val_accuracy", "test_accuracy", "C", "best"]
    assert reference.summary[columns].equals(engine.summary[columns])
    prepared = [e for e in events if e[0] == "prepare"]
    assert [e[1] for e in prepared] == [0, 1, 2, 3] and not any(e[2] for e in prepared)  # off the main thread


def test_an_error_in_a_later_batch_names_its_layer_on_the_engine(monkeypatch, engine_device):
    from empirical.logistic import batched

    rng = np.random.default_rng(4)
    H = rng.standard_normal((3, 120, 20))
    H[2, 5, 3] = np.nan
    monkeypatch.setattr(batched, "layer_batches", lambda *a, **k: [range(0, 1), range(1, 2), range(2, 3)])
    with pytest.raises(ValueError, match=r"layer 2.*finite"):
        fit_layers(H, np.arange(120) % 2, progress=False, device=engine_device)


@pytest.mark.parametrize("device, message", [("bogus", "device must be a torch device"),
                                             ("mps", "device must be one of the kinds"),
                                             ("cuda:7", "not available|does not exist")])
def test_a_bad_device_is_refused_naming_it(device, message):
    with pytest.raises(ValueError, match=message):
        resolve_device(device)
    with pytest.raises(ValueError, match=message):
        RaptorProbe(device=device).fit(np.random.default_rng(0).standard_normal((40, 3)), np.arange(40) % 2)


def test_layer_batches_bound_the_memory():
    batches = layer_batches(80, 4800, 8192, budget_bytes=2e9)
    assert [i for batch in batches for i in batch] == list(range(80))
    per_layer = 8.0 * (2 * 4800 * 8192 + 4800 * 4801 + 4 * 4801 ** 2)
    assert all(len(batch) * per_layer <= 2e9 for batch in batches) or all(len(batch) == 1 for batch in batches)


def test_probe_device_rule_of_the_command_line():
    """``raptor probe --device``: the engine on CUDA, the numpy solver on the CPU (faster there, docs/probe.md)."""
    from empirical.cli import probe_device

    assert probe_device(None) is None and probe_device("cpu") is None
    if not torch.cuda.is_available():
        assert probe_device("auto") is None
        with pytest.raises(ValueError, match="not available"):
            probe_device("cuda")


def test_a_line_search_that_finds_no_decrease_stops_with_status_2(monkeypatch, engine_device):
    """The backtracking's failure exit: a layer whose trial points never decrease the objective stops at its last
    iterate with status 2 (STATUS_MESSAGES), reported by the path, the refit and the probe, instead of looping."""
    import empirical.logistic.batched as engine
    from empirical.common.failures import STATUS_MESSAGES

    true_objective, calls = engine._objective, [0]

    def rising(z, theta, y, C):  # every later evaluation is larger: no trial point ever passes the Armijo test
        calls[0] += 1
        return true_objective(z, theta, y, C) + 1e6 * calls[0]

    monkeypatch.setattr(engine, "_objective", rising)
    X, y, Xv, yv = _layers((60, 20, 30), seed=3, B=2)
    Xf, yf = np.concatenate([X, Xv], axis=1), np.concatenate([y, yv])
    res = batched_refit(Xf, yf, np.array([1.0, 1.0]), np.zeros((2, 30)), np.zeros(2), device=engine_device)
    assert list(res.status) == [2, 2] and not res.success.any()
    assert list(res.nit) == [1, 1]  # one failed step each, then stopped
    path = batched_path(X, y, Xv, yv, CS[:5], device=engine_device)
    assert path.status == 2 and not path.success and "line search" in path.message
    assert 2 in STATUS_MESSAGES
    # a step along an earlier point's factor that finds no decrease does not stop the point: it forms its own
    # Hessian (one factorization per layer and point here), and only that step's failure stops it
    assert path.n_factorizations == 2 * 5 and path.n_reused == 0


def test_few_newton_steps_end_every_grid_point(engine_device):
    """max_iter bounds the steps of a point, those on an earlier point's factor included: the path ends, reporting
    the points that reached the limit (status 1)."""
    X, y, Xv, yv = _layers((60, 20, 150), seed=2, B=2)
    for max_iter in (1, 2, 3):
        path = batched_path(X, y, Xv, yv, CS, device=engine_device, max_iter=max_iter)
        assert path.nit.max() <= max_iter
        assert path.success or (path.status == 1 and "neither certified nor converged" in path.message)


def test_a_probe_on_the_engine_validates_its_data_once(monkeypatch, engine_device):
    """scikit-learn's check_input: RaptorProbe(device=...) checks the data and the grid at its boundary, and the engine
    it calls checks nothing again (check_input=False), with the same results as a checked call."""
    import empirical.logistic.batched as batched

    calls = []
    for name in ("check_grid", "check_signed_labels", "check_matrix", "_check_layers", "batched_path", "batched_refit"):
        real = getattr(batched, name)
        monkeypatch.setattr(batched, name,
                            lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    X, y, Xv, yv = _layers((60, 20, 40), seed=3, B=1)
    H, labels = np.concatenate([X[0], Xv[0]]), np.concatenate([y, yv])
    probe = RaptorProbe(Cs=CS, device=engine_device).fit(H, labels)
    assert calls == ["batched_path", "batched_refit"]  # the engine ran, and checked nothing again
    calls.clear()
    checked = batched_path(X, y, Xv, yv, CS, device=engine_device)
    unchecked = batched_path(X, y, Xv, yv, CS, check_input=False, device=engine_device)
    assert calls and np.array_equal(checked.val_accuracy, unchecked.val_accuracy)
    np.testing.assert_array_equal(checked.coef, unchecked.coef)
    assert probe.C_ in CS


def test_rows_on_the_device_give_the_same_path_and_refit(engine_device):
    """An unchecked caller may hand the engine its rows already on the device (stack_on_device): the same results as
    from numpy arrays, and every result says where its seconds went."""
    from empirical.logistic.batched import stack_on_device

    dev = resolve_device(engine_device)
    X, y, Xv, yv = _layers((60, 20, 150), seed=11)
    Xt, Xvt = stack_on_device(list(X), dev), stack_on_device(list(Xv), dev)
    assert Xt.device.type == dev.type and Xt.dtype == torch.float64 and torch.equal(Xt.cpu(), torch.from_numpy(X))
    from_arrays = batched_path(X, y, Xv, yv, CS, device=engine_device)
    from_tensors = batched_path(Xt, y, Xvt, yv, CS, device=engine_device, check_input=False)
    np.testing.assert_array_equal(from_arrays.val_accuracy, from_tensors.val_accuracy)
    np.testing.assert_array_equal(from_arrays.coef, from_tensors.coef)
    assert list(from_tensors.seconds) == ["transfer", "reduction", "path"]
    assert all(s >= 0 for s in from_tensors.seconds.values())
    Xf, yf, C = np.concatenate([X, Xv], axis=1), np.concatenate([y, yv]), np.array([0.01, 1.0, 30.0])
    a = batched_refit(Xf, yf, C, np.zeros((3, 150)), np.zeros(3), device=engine_device)
    b = batched_refit(torch.cat([Xt, Xvt], dim=1), yf, C, np.zeros((3, 150)), np.zeros(3), device=engine_device,
                      check_input=False)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert list(b.seconds) == ["transfer", "reduction", "newton"]


def test_the_refit_reuses_the_rows_on_the_device(monkeypatch, engine_device):
    """fit_layers(device=...) copies each batch's standardized rows to the device once: the path and the refit both
    read them there (no second host stack and transfer), and the fit reports its seconds by phase."""
    import time

    from empirical.logistic import batched

    seen = []
    real_path, real_refit = batched.batched_path, batched.batched_refit
    monkeypatch.setattr(batched, "batched_path", lambda X, *a, **k: seen.append(("path", X)) or real_path(X, *a, **k))
    monkeypatch.setattr(batched, "batched_refit",
                        lambda X, *a, **k: seen.append(("refit", X)) or real_refit(X, *a, **k))
    rng = np.random.default_rng(5)
    y = np.arange(150) % 2
    H = np.stack([rng.standard_normal((150, 40)) + 0.3 * np.outer(2 * y - 1, rng.standard_normal(40))
                  for _ in range(3)])
    started = time.perf_counter()
    engine = fit_layers(H, y, Cs=CS, progress=False, device=engine_device)
    wall = time.perf_counter() - started
    assert [kind for kind, _ in seen] == ["path", "refit"]
    dev = resolve_device(engine_device)
    for kind, X in seen:
        assert isinstance(X, torch.Tensor) and X.device.type == dev.type, kind
    assert seen[1][1].shape == (3, len(engine.split[0]) + len(engine.split[1]), 40)
    phases = engine.engine_seconds
    assert list(phases) == ["prepare_wait", "to_device", "reduction", "path", "refit", "finish", "rows"]
    assert all(s >= 0 for s in phases.values()) and sum(phases.values()) <= wall
    reference = fit_layers(H, y, Cs=CS, progress=False)
    assert reference.engine_seconds is None
    for layer in range(3):
        np.testing.assert_allclose(engine.probes[layer].coef_, reference.probes[layer].coef_, rtol=1e-8,
                                   atol=1e-10 * np.abs(reference.probes[layer].coef_).max())


@settings(max_examples=12, deadline=None)
@given(n=st.integers(12, 70), m=st.integers(3, 25), p=st.integers(2, 110), seed=st.integers(0, 2**16),
       signal=st.sampled_from([0.0, 1.0, 4.0, 30.0]), duplicated=st.booleans())
def test_the_path_on_reused_factors_matches_the_numpy_path_on_any_shape(n, m, p, seed, signal, duplicated):
    """A property over shapes and signal (from pure noise to separable), with duplicated rows (a rank-deficient
    design) or not: every grid point's validation accuracy on the engine, whose points start on the previous
    point's factor, equals the numpy path's, and the engine's factorizations never exceed one per point and
    layer."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((2, n + m, p))
    if duplicated:
        X[:, 1:n:2] = X[:, 0:n - 1:2]
    y = np.where(signal * X[0, :, 0] + rng.logistic(size=n + m) > 0, 1.0, -1.0)
    y[:2], y[n] = [1.0, -1.0], 1.0  # both classes in training, a validation label
    mu, s = X[:, :n].mean(axis=1, keepdims=True), X[:, :n].std(axis=1, keepdims=True)
    Xs = (X - mu) / np.where(s > 0, s, 1.0)
    path = batched_path(Xs[:, :n], y[:n], Xs[:, n:], y[n:], CS)
    assert path.success and path.n_factorizations <= 2 * len(CS)
    for b in range(2):
        ref = logistic_path(Xs[b, :n], y[:n], Xs[b, n:], y[n:], CS)
        np.testing.assert_array_equal(path.val_accuracy[b], ref.val_accuracy)
