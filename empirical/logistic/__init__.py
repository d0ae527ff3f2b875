"""empirical.logistic: the exact ridge-logistic solver shared by probes, baselines, the structure predictor and sims.

numpy/scipy only.  Objective (scikit-learn's convention): ``C * sum_i log(1 + exp(-y_i (x_i'w + b)))
+ ||w||^2 / 2`` with an unpenalized intercept ``b``.

- :func:`fit_l2_logistic`: one fit, exact to a relative gradient tolerance;
- :func:`fit_l2_logistic_rows`: the same fit on many row subsets of one design (GCS probes), sharing its
  Gram matrix;
- :func:`logistic_path`: the whole C grid with validation accuracies, certified exact;
- :func:`reduce_design`, :func:`refit`: the reduced basis used at n < p, and the refit on train + validation.

The names above are the API.  Implementation modules (a leading underscore, not API):
:mod:`~empirical.logistic._design` (reduction), :mod:`~empirical.logistic._newton` (the direct primal and
dual Newton oracle, and the family's status table, loss terms and Armijo rule), :mod:`~empirical.logistic._pcg` (the
Newton-PCG kernel of the fast path: preconditioners, preconditioned CG, certification),
:mod:`~empirical.logistic._path` (path and refit driver), :mod:`~empirical.logistic._solver` (one fit, and fits on
row subsets); its kernels (``_pcg.newton_pcg``, ``_newton.direct_newton``) are reached through
:func:`fit_l2_logistic`'s ``method``.  :mod:`empirical.logistic.batched` (torch, imported on demand) is the
batched engine of ``RaptorProbe(device=...)``.
"""
from ._design import ReducedDesign, reduce_design
from ._newton import MAX_ITER
from ._path import logistic_path, refit
from ._solver import fit_l2_logistic, fit_l2_logistic_rows, logistic_objective

__all__ = ["fit_l2_logistic", "fit_l2_logistic_rows", "logistic_objective", "logistic_path", "reduce_design", "refit",
           "ReducedDesign", "MAX_ITER"]
