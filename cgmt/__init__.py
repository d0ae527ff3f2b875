"""cgmt: the proportional-limit (CGMT) theory of ridge logistic regression, solved fast and exactly.

Convention (binding; see docs/theory.md): x ~ N(0, I_p/p), ||beta*||^2 = p kappa^2,
P(y=1|x) = sigmoid(x'beta*), delta = n/p, estimator argmin (1/n) sum log(1+exp(-y x'beta))
+ lam/(2p) ||beta||^2, z = beta/sqrt(p), v = beta*/||beta*||, alpha = <z_hat, v>,
sigma = ||z_hat - alpha v||, margin m = alpha/sigma, alpha_salehi = alpha/kappa.
"""
from .accuracy import accuracy_from_margin, bayes_accuracy
from .solver import CGMTResult, ConvergenceError, solve

__all__ = [
    "solve",
    "CGMTResult",
    "ConvergenceError",
    "accuracy_from_margin",
    "bayes_accuracy",
]
