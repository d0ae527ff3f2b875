"""empirical.probes: probes on hidden-state matrices (numpy, scipy, scikit-learn).

Importing it does not import torch; only the optional xRFM baseline does, inside ``XRFMProbe.fit`` and
``predict_proba`` (the ``xrfm`` package runs on torch).

:class:`RaptorProbe` and the baselines, per-layer fitting, the ablation-stability protocol, the
separability diagnostic, persistence, the delta-sweep structure predictor and the spectral-theory
predictor of real probes (:mod:`empirical.probes.spectral_prediction`).
"""
from .baselines import DiffMeans, GCSProbe, LogRegCVProbe, XRFMProbe
from .concept_vectors import ConceptVectors, LinearProbe
from .layers import PAPER_SPLIT_SEED, PerLayerFit, fit_layers, grouped_split, paper_split
from .persistence import load_concept_vectors, load_probe, save_concept_vectors, save_probe
from .raptor import DEFAULT_CS, RaptorProbe, select_C
from .registry import ProbeMethod, get_method, method_names, register_method, unregister_method
from .separability import perceptron, separability, separability_lp, shuffled_label_control
from .spectral_prediction import (
    PoolModel,
    estimate_pool_model,
    predict_lambda_star,
    predict_path,
    predict_stability,
    predict_sweep,
)
from .stability import mean_abs_pairwise_cosine, stability

__all__ = [
    "RaptorProbe", "DEFAULT_CS", "select_C", "fit_layers", "paper_split", "grouped_split", "PerLayerFit",
    "PAPER_SPLIT_SEED", "stability",
    "mean_abs_pairwise_cosine", "DiffMeans", "LogRegCVProbe", "GCSProbe", "XRFMProbe", "separability",
    "separability_lp", "shuffled_label_control",
    "perceptron", "ConceptVectors", "LinearProbe", "save_probe", "load_probe", "save_concept_vectors",
    "load_concept_vectors",
    "ProbeMethod", "register_method", "unregister_method", "get_method", "method_names",
    "PoolModel", "estimate_pool_model", "predict_path", "predict_lambda_star", "predict_sweep", "predict_stability",
]
