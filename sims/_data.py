"""The Gaussian logistic teacher-student data model of the theory (``cgmt``), reproducibly seeded.

Convention (identical to ``cgmt``): x_i ~ N(0, I_p / p), ||beta*||^2 = p kappa^2,
P(y = +1 | x) = sigmoid(x' beta*), labels y in {-1, +1}, delta = n / p.
The teacher direction v = beta* / ||beta*|| is uniform on the sphere and is returned.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cgmt.validation import check_kappa
from empirical.common.arrays import as_real_array
from empirical.common.checks import as_generator, as_seed_sequence, check_int


@dataclass(frozen=True)
class Sample:
    """One draw of the teacher-student model (returned by :func:`sample`).

    Attributes
    ----------
    X : ndarray of shape (n, p)
        The design, rows ~ N(0, I_p/p).
    y : ndarray of shape (n,)
        Labels in {-1.0, +1.0}, P(y = +1 | x) = sigmoid(x'beta_star).
    beta_star : ndarray of shape (p,)
        The teacher, ||beta_star||^2 = p kappa^2.
    v : ndarray of shape (p,)
        beta_star / ||beta_star|| (unit; at kappa = 0, where beta_star = 0, the first standard basis vector).
    kappa : float
        Signal strength.
    n, p : int
        Sample size and dimension (properties, from ``X``).
    delta : float
        n / p (property).
    """

    X: np.ndarray
    y: np.ndarray
    beta_star: np.ndarray
    v: np.ndarray
    kappa: float

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def p(self) -> int:
        return self.X.shape[1]

    @property
    def delta(self) -> float:
        return self.n / self.p


#: largest design (n x p entries) :func:`sample` draws: 2**31 float64 entries = 16 GiB
MAX_ENTRIES = 2**31

#: Most Monte Carlo replicates :func:`replicate_seeds` spawns (each is a full simulated fit).
MAX_REPLICATES = 1_000_000

def replicate_seeds(seed, replicates: int) -> list[np.random.SeedSequence]:
    """Independent child ``SeedSequence`` streams, one per replicate (``SeedSequence(seed).spawn``).

    Parameters
    ----------
    seed : int or SeedSequence
        The root seed (a SeedSequence is spawned from directly).
    replicates : int >= 1
        How many streams.

    Returns
    -------
    list of SeedSequence
        ``replicates`` independent children of the root.

    Examples
    --------
    >>> len(replicate_seeds(0, 3))
    3
    """
    replicates = check_int(replicates, "replicates", maximum=MAX_REPLICATES)
    return as_seed_sequence(seed, "seed").spawn(replicates)


def random_teacher(p: int, kappa: float, rng) -> np.ndarray:
    """beta* = kappa sqrt(p) v with v uniform on the unit sphere of R^p (exactly ||beta*||^2 = p kappa^2)."""
    p = check_int(p, "p")
    kappa = check_kappa(kappa)
    g = as_generator(rng).standard_normal(p)
    v = g / np.linalg.norm(g)
    return kappa * np.sqrt(p) * v


def sample(n: int, p: int, kappa: float, rng=None, *, beta_star: np.ndarray | None = None) -> Sample:
    """Draw n points of the teacher-student model in dimension p.

    If ``beta_star`` is None a random teacher direction is drawn first (from the same stream), so
    ``sample(n, p, kappa, seed)`` is reproducible; pass ``beta_star`` to draw fresh data (e.g. a
    test set, or an independent training set) from the same teacher.

    Parameters
    ----------
    n, p : int
        Sample size and dimension.
    kappa : float >= 0
        Signal strength, ``||beta*||^2 = p kappa^2``.
    rng : int, SeedSequence or Generator, optional
        Randomness.
    beta_star : ndarray (p,), optional
        A given teacher (its norm must be kappa sqrt(p)).

    Returns
    -------
    Sample
        ``X`` (n, p) with rows ~ N(0, I_p/p), labels ``y`` in {-1, +1} with P(y = 1 | x) = sigmoid(x'beta*),
        ``beta_star`` and its unit direction ``v``.

    Examples
    --------
    >>> data = sample(200, 50, 2.0, 0)
    >>> data.X.shape, round(float(np.linalg.norm(data.beta_star) / np.sqrt(50)), 6)
    ((200, 50), 2.0)
    """
    n = check_int(n, "n")
    p = check_int(p, "p")
    if n * p > MAX_ENTRIES:
        raise ValueError(f"a sample of n x p = {n} x {p} would hold {n * p:.3g} float64 entries "
                         f"({8 * n * p / 2**30:.3g} "
                         f"GiB), more than the limit {MAX_ENTRIES:.3g}; use a smaller p or n")
    kappa = check_kappa(kappa)
    gen = as_generator(rng)
    if beta_star is None:
        beta_star = random_teacher(p, kappa, gen)
    else:
        try:
            beta_star = np.asarray(as_real_array(beta_star, "beta_star"), dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"beta_star must be a finite real vector of shape ({p},), got "
                             f"{type(beta_star).__name__} ({exc})") from None
        if beta_star.shape != (p,) or not np.all(np.isfinite(beta_star)):
            raise ValueError(f"beta_star must be a finite vector of shape ({p},), got shape {beta_star.shape}")
        norm = np.linalg.norm(beta_star)
        if not np.isclose(norm, kappa * np.sqrt(p), rtol=1e-8, atol=1e-12):
            raise ValueError(f"||beta_star|| must equal kappa sqrt(p) = {kappa*np.sqrt(p):.6g}, got "
                             f"{norm:.6g}")
    norm = np.linalg.norm(beta_star)
    v = beta_star / norm if norm > 0 else np.eye(p)[0]
    X = gen.standard_normal((n, p)) / np.sqrt(p)
    prob = 1.0 / (1.0 + np.exp(-(X @ beta_star)))
    y = np.where(gen.random(n) < prob, 1.0, -1.0)
    return Sample(X=X, y=y, beta_star=beta_star, v=v, kappa=kappa)
