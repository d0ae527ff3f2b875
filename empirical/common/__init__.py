"""The ground floor: plumbing every package of the project may import, and which imports none of them.

Why here: the top level is fixed (``cgmt``, ``sims``, ``empirical``, ``paper_figures``); the floor cannot live in
the theory package (``cgmt`` holds theory only), and ``empirical``'s package init is lazy (PEP 562), so
``import empirical.common.failures`` from ``cgmt`` loads nothing but this subpackage (docs/architecture.md,
"The ground floor").  A test keeps it a floor: no module here imports ``cgmt``, ``sims``, ``paper_figures`` or another
part of ``empirical``.

- :mod:`empirical.common.failures`: the one status table of every solver, the failure convention (warn or raise,
  :func:`~empirical.common.failures.report`), :class:`~empirical.common.failures.ConvergenceError`;
- :mod:`empirical.common.checks`: the argument checks in one message style; :mod:`empirical.common.resources`: cores,
  threads and joblib workers;
- :mod:`empirical.common.cli_args` and :mod:`empirical.common.cli_errors`: the command lines' argument types, option
  tables and error convention.
"""
