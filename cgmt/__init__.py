"""cgmt: the proportional-limit (CGMT) theory of ridge logistic regression, solved fast and exactly.

Convention (binding; see docs/theory.md): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2,
P(y=1|x) = sigmoid(x'beta*), delta = n/p, estimator argmin (1/n) sum log(1+exp(-y x'beta))
+ lam/(2p) ||beta||^2, z = beta/sqrt(p), v = beta*/||beta*||, alpha = <z_hat, v>,
sigma = ||z_hat - alpha v||, margin m = alpha/sigma, alpha_salehi = alpha/kappa.

Public API: solve, mle, max_margin (the lam -> 0 limit on separable data),
separability_threshold, optimal_lambda, sweep, accuracy_from_margin,
bayes_accuracy, CGMTResult, ConvergenceError, ConvergenceWarning, solve_spectral / solve_spectral_path / Spectrum /
spectral_stability (the same estimator on anisotropic Gaussian features x ~ N(0, Sigma/p), see
docs/spectral_theory.md), stability (two-replica ablation-stability theory,
see docs/stability_theory.md; its helpers live in the module ``cgmt.stability``, import them with
``from cgmt.stability import ...``); public modules prox (Numba logistic prox), quadrature
(rules), equations (residuals, Jacobian), conventions (converters), reference (mpmath), spectral_reference,
ablation (the ablation protocol), validation (the theory's domains), result (the result type).  Modules with a
leading underscore are the implementation (not API; their names are exported here).
"""
from empirical.common.failures import ConvergenceError, ConvergenceWarning

from . import conventions, equations, prox, quadrature
from ._accuracy import accuracy_from_margin, bayes_accuracy
from ._max_margin import max_margin
from ._optimal import optimal_lambda
from ._solver import mle, solve
from ._spectral import solve_spectral, solve_spectral_path
from ._spectral_stability import spectral_stability
from ._spectrum import Spectrum
from ._sweep import sweep
from ._threshold import separability_threshold
from .result import CGMTResult
from .stability import stability  # the function shadows the submodule attribute on purpose

__all__ = [
    "solve",
    "mle",
    "max_margin",
    "separability_threshold",
    "optimal_lambda",
    "sweep",
    "stability",
    "solve_spectral",
    "solve_spectral_path",
    "Spectrum",
    "spectral_stability",
    "CGMTResult",
    "ConvergenceError",
    "ConvergenceWarning",
    "accuracy_from_margin",
    "bayes_accuracy",
    "conventions",
    "equations",
    "prox",
    "quadrature",
]
