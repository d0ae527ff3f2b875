"""empirical: RAPTOR probes on hidden-state matrices, and the pipeline that extracts those matrices from LLMs.

Subpackages (dependencies point downwards only; see ``docs/architecture.md``):

- :mod:`empirical.logistic`: the exact ridge-logistic solver kernel, path and refit (numpy/scipy only);
- :mod:`empirical.probes`: :class:`RaptorProbe`, baselines, per-layer fitting, stability protocol,
  separability, persistence, the delta-sweep structure predictor (numpy/scipy/scikit-learn; torch only inside
  the optional xRFM baseline, :class:`~empirical.probes.XRFMProbe`);
- :mod:`empirical.llm`: models, hooks, cached extraction, datasets, steering (torch, transformers);
- :mod:`empirical.reporting`: the figures of the ``raptor`` command (:mod:`empirical.cli`), one function each;
- :mod:`empirical.common`: the ground floor every package imports (the status table and failure convention,
  argument and array checks, atomic writes and checked reads, command-line plumbing);
- :mod:`empirical.numerics` (the paper's split seed, stratified splits, overflow-safe norms and standardization),
  :mod:`empirical.testing` (fixtures).

The names below are loaded on first use (PEP 562), so ``import empirical.logistic`` does not import
the probe toolkit, and importing :mod:`empirical.probes` does not import torch (only ``XRFMProbe.fit`` and
``predict_proba`` do, when the optional xRFM baseline is used).
"""
from __future__ import annotations

import importlib

#: public name -> module that defines it
_EXPORTS = {
    "RaptorProbe": "empirical.probes.raptor",
    "DEFAULT_CS": "empirical.probes.raptor",
    "select_C": "empirical.probes.raptor",
    "fit_l2_logistic": "empirical.logistic",
    "logistic_path": "empirical.logistic",
    "fit_layers": "empirical.probes.layers",
    "paper_split": "empirical.probes.layers",
    "PerLayerFit": "empirical.probes.layers",
    "stability": "empirical.probes.stability",
    "mean_abs_pairwise_cosine": "empirical.probes.stability",
    "DiffMeans": "empirical.probes.baselines",
    "LogRegCVProbe": "empirical.probes.baselines",
    "GCSProbe": "empirical.probes.baselines",
    "XRFMProbe": "empirical.probes.baselines",
    "separability": "empirical.probes.separability",
    "perceptron": "empirical.probes.separability",
    "ConceptVectors": "empirical.probes.concept_vectors",
    "LinearProbe": "empirical.probes.concept_vectors",
    "save_probe": "empirical.probes.persistence",
    "load_probe": "empirical.probes.persistence",
    "save_concept_vectors": "empirical.probes.persistence",
    "load_concept_vectors": "empirical.probes.persistence",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'empirical' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
