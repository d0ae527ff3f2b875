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
import lazy_loader

#: subpackage -> the public names it defines (each subpackage's front door)
_EXPORTS = {
    "probes": ["RaptorProbe", "DEFAULT_CS", "select_C", "fit_layers", "paper_split", "PerLayerFit", "stability",
             "mean_abs_pairwise_cosine", "DiffMeans", "LogRegCVProbe", "GCSProbe", "XRFMProbe", "separability",
             "perceptron", "ConceptVectors", "LinearProbe", "save_probe", "load_probe", "save_concept_vectors",
             "load_concept_vectors"],
    "logistic": ["fit_l2_logistic", "logistic_path"],
}

__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
