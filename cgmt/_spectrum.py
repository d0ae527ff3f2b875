"""The input of the spectral theory: :class:`Spectrum`, Sigma's eigen-decomposition and the teacher in it.

Conventions of :mod:`cgmt._spectral` (docs/spectral_theory.md): rows x ~ N(0, Sigma/p), Sigma = U diag(omega) U',
teacher weights t_i = (u_i'beta*)^2 / p, kappa^2 = sum omega_i t_i.  Solve with :meth:`Spectrum.solve`
(:func:`cgmt.solve_spectral`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from empirical.common.checks import check_int, check_scalar

from ._spectral import check_spectrum, solve_spectral, solve_spectral_path

__all__ = ["Spectrum", "EIGEN_ROUNDING"]

#: relative size of negative eigenvalues treated as rounding (clipped to 0) by Spectrum.from_covariance
EIGEN_ROUNDING = 1e-10


@dataclass(frozen=True)
class Spectrum:
    """Eigen-decomposition of Sigma and the teacher's coordinates in it: the input of the spectral theory.

    Build it with :meth:`from_covariance`, :meth:`from_eigenpairs`, :meth:`power_law`, :meth:`spiked`
    or :meth:`isotropic`; solve with :meth:`solve` (which calls :func:`solve_spectral`).

    Attributes
    ----------
    eigenvalues : ndarray, shape (p,)
        omega_i >= 0, in decreasing order when built by the constructors below (the class itself does not
        sort).  Read-only.
    teacher_weights : ndarray, shape (p,)
        t_i = (u_i'beta*)^2 / p.
    teacher_coordinates : ndarray, shape (p,)
        Signed b_i = u_i'beta*/sqrt(p) (t = b^2); needed only for overlaps in a non-spectral metric.
    eigenvectors : ndarray, shape (p, p) or None
        Columns u_i (None: the standard basis, as for the named families).

    Examples
    --------
    >>> s = Spectrum.power_law(200, exponent=1.0, kappa=2.0)
    >>> s.p, round(s.kappa, 12), round(float(s.eigenvalues.mean()), 12)
    (200, 2.0, 1.0)
    """

    eigenvalues: np.ndarray
    teacher_weights: np.ndarray
    teacher_coordinates: np.ndarray
    eigenvectors: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        omega, t = check_spectrum(self.eigenvalues, self.teacher_weights)
        b = np.array(self.teacher_coordinates, dtype=float)
        if b.shape != t.shape or not np.allclose(b * b, t, rtol=1e-8, atol=1e-300):
            raise ValueError("teacher_coordinates must have the shape of teacher_weights with "
                             f"teacher_coordinates**2 == teacher_weights, got {b!r:.60}")
        if self.eigenvectors is not None:
            u = np.array(self.eigenvectors, dtype=float)
            if u.shape != (omega.size, omega.size):
                raise ValueError(f"eigenvectors must be ({omega.size}, {omega.size}), got {u.shape}")
            object.__setattr__(self, "eigenvectors", u)
        for name, arr in (("eigenvalues", omega), ("teacher_weights", t), ("teacher_coordinates", b)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    # ---- constructors
    @classmethod
    def from_eigenpairs(cls, eigenvalues, eigenvectors, teacher) -> "Spectrum":
        """From eigenvalues, eigenvectors (columns) and the teacher beta* (in the coordinates of x).

        Parameters
        ----------
        eigenvalues : array_like, shape (p,)
        eigenvectors : array_like, shape (p, p)
            Orthonormal columns u_i.
        teacher : array_like, shape (p,)
            beta*, scaled so that P(y = +1 | x) = sigmoid(x'beta*) with x ~ N(0, Sigma/p).

        Returns
        -------
        Spectrum
        """
        omega = np.asarray(eigenvalues, dtype=float)
        u = np.asarray(eigenvectors, dtype=float)
        beta = np.asarray(teacher, dtype=float)
        if u.ndim != 2 or u.shape[0] != u.shape[1] or u.shape[0] != omega.size:
            raise ValueError(f"eigenvectors must be a ({omega.size}, {omega.size}) matrix, got {u.shape}")
        if beta.shape != omega.shape:
            raise ValueError(f"teacher must have shape {omega.shape}, got {beta.shape}")
        if not np.all(np.isfinite(beta)):
            raise ValueError(f"teacher must be finite, got {np.count_nonzero(~np.isfinite(beta))} non-finite entries")
        order = np.argsort(-omega, kind="stable")
        omega, u = omega[order], u[:, order]
        b = u.T @ beta / math.sqrt(omega.size)
        return cls(omega, b * b, b, u)

    @classmethod
    def from_covariance(cls, covariance, teacher) -> "Spectrum":
        """From Sigma (p x p, symmetric PSD; eigenvalues above -1e-10 max|omega| are rounding and clipped to 0).

        Parameters
        ----------
        covariance : array_like, shape (p, p)
        teacher : array_like, shape (p,)
            beta* (see :meth:`from_eigenpairs`).

        Returns
        -------
        Spectrum

        Examples
        --------
        >>> Spectrum.from_covariance(np.eye(3), [2.0, 0.0, 0.0]).teacher_weights.round(12).tolist()
        [1.333333333333, 0.0, 0.0]
        """
        cov = np.asarray(covariance, dtype=float)
        if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
            raise ValueError(f"covariance must be a square matrix, got shape {cov.shape}")
        if not np.all(np.isfinite(cov)):
            raise ValueError(f"covariance must be finite (no NaN or inf), got {np.count_nonzero(~np.isfinite(cov))} "
                             "non-finite entries")
        scale = max(float(np.abs(cov).max()), 1e-300)
        if not np.allclose(cov, cov.T, rtol=0, atol=1e-10 * scale):
            raise ValueError(f"covariance must be symmetric, got max |cov - cov.T| = {np.abs(cov - cov.T).max():.3g}")
        omega, u = np.linalg.eigh((cov + cov.T) / 2)
        if omega.min() < -EIGEN_ROUNDING * max(abs(omega).max(), 1e-300):
            raise ValueError(f"covariance must be positive semi-definite, got smallest eigenvalue {omega.min():.3g}")
        return cls.from_eigenpairs(np.clip(omega, 0.0, None), u, teacher)

    @classmethod
    def _family(cls, omega, profile, kappa):
        kappa = check_scalar(kappa, "kappa", low=0.0, low_open=True)
        omega = omega / omega.mean()
        t = profile / float(np.dot(omega, profile)) * kappa ** 2
        return cls(omega, t, np.sqrt(t))

    @classmethod
    def isotropic(cls, p, kappa) -> "Spectrum":
        """Sigma = I_p with a teacher of norm^2 = p kappa^2 spread evenly (the model of :func:`cgmt.solve`)."""
        p = check_int(p, "p")
        return cls._family(np.ones(p), np.ones(p), kappa)

    @classmethod
    def power_law(cls, p, exponent=1.0, kappa=1.0, teacher_exponent=0.0) -> "Spectrum":
        """omega_i proportional to i^-exponent (mean 1), t_i proportional to i^-teacher_exponent, kappa^2 = sum omega t.

        Parameters
        ----------
        p : int
        exponent : float in [0, 700 / ln p]
            The eigenvalues' decay (the profile spans p ** exponent, which must stay inside float64's range).
        kappa : float > 0
        teacher_exponent : float in [-700 / ln p, 700 / ln p]
            0 spreads the teacher evenly over the eigen-directions; > 0 puts it on the top ones.

        Returns
        -------
        Spectrum
        """
        p = check_int(p, "p")
        # i ** -e spans p ** |e|: past float64's range (about 1e308 = e ** 709) the profile overflows or vanishes
        span = 700.0 / max(np.log(p), 1e-300)
        exponent = check_scalar(exponent, "exponent", low=0.0, high=span)
        teacher_exponent = check_scalar(teacher_exponent, "teacher_exponent", low=-span, high=span)
        i = np.arange(1, p + 1, dtype=float)
        return cls._family(i ** -exponent, i ** -teacher_exponent, kappa)

    @classmethod
    def spiked(cls, p, spikes=(25.0,) * 5, kappa=1.0, teacher="spikes") -> "Spectrum":
        """A bulk of equal eigenvalues plus spikes (scaled to mean 1); the teacher on the spikes, the bulk or both.

        Parameters
        ----------
        p : int
            Dimension (> number of spikes).
        spikes : sequence of float
            Spike eigenvalues relative to a bulk eigenvalue of 1 (before scaling to mean 1).
        kappa : float > 0
        teacher : {"spikes", "bulk", "flat"}
            Where the teacher's weight lies (evenly within it).

        Returns
        -------
        Spectrum
        """
        p = check_int(p, "p")
        spikes = np.asarray(spikes, dtype=float)
        if spikes.ndim != 1 or spikes.size >= p or np.any(~np.isfinite(spikes)) or np.any(spikes <= 0):
            raise ValueError(f"spikes must be fewer than p = {p} positive finite numbers, got {spikes!r}")
        omega = np.concatenate([np.sort(spikes)[::-1], np.ones(p - spikes.size)])
        k = spikes.size
        profiles = {"spikes": np.r_[np.ones(k), np.zeros(p - k)], "bulk": np.r_[np.zeros(k), np.ones(p - k)],
                    "flat": np.ones(p)}
        if teacher not in profiles:
            raise ValueError(f"teacher must be 'spikes', 'bulk' or 'flat', got {teacher!r}")
        return cls._family(omega, profiles[teacher], kappa)

    # ---- derived quantities
    @property
    def p(self) -> int:
        """Dimension."""
        return int(self.eigenvalues.size)

    @property
    def kappa(self) -> float:
        """Signal strength sqrt(beta*'Sigma beta*/p)."""
        return math.sqrt(float(np.dot(self.eigenvalues, self.teacher_weights)))

    @property
    def participation_ratio(self) -> float:
        """(sum omega)^2 / sum omega^2: the effective number of dimensions (p for Sigma = I)."""
        return float(self.eigenvalues.sum() ** 2 / np.dot(self.eigenvalues, self.eigenvalues))

    def teacher_basis(self):
        """(eigenvectors, signed coordinates); the identity basis if no eigenvectors are stored."""
        u = self.eigenvectors if self.eigenvectors is not None else np.eye(self.p)
        return u, self.teacher_coordinates

    def teacher(self) -> np.ndarray:
        """beta* in the coordinates of x (sqrt(p) U b)."""
        u, b = self.teacher_basis()
        return math.sqrt(self.p) * (u @ b)

    def covariance(self) -> np.ndarray:
        """Sigma = U diag(omega) U'."""
        u, _ = self.teacher_basis()
        return (u * self.eigenvalues) @ u.T

    def scaled(self, kappa) -> "Spectrum":
        """The same spectrum and teacher direction with signal strength ``kappa``."""
        kappa = check_scalar(kappa, "kappa", low=0.0, low_open=True)
        c = kappa / self.kappa
        return Spectrum(self.eigenvalues, self.teacher_weights * c * c, self.teacher_coordinates * c,
                        self.eigenvectors)

    def solve(self, delta, lam, **options):
        """:func:`cgmt.solve_spectral` on this spectrum (returns a :class:`cgmt.CGMTResult`)."""
        return solve_spectral(delta, lam, self.eigenvalues, self.teacher_weights, **options)

    def solve_path(self, delta, lams, **options) -> list:
        """:func:`cgmt.solve_spectral_path` on this spectrum."""
        return solve_spectral_path(delta, lams, self.eigenvalues, self.teacher_weights, **options)
