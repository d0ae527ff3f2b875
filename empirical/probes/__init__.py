"""empirical.probes: probes on hidden-state matrices (numpy, scipy, scikit-learn).

Importing it does not import torch; only the optional xRFM baseline does, inside ``XRFMProbe.fit`` and
``predict_proba`` (the ``xrfm`` package runs on torch).

:class:`RaptorProbe` and the baselines, per-layer fitting, the ablation-stability protocol, the
separability diagnostic, persistence and the spectral-theory predictor of real probes, all defined in underscored
implementation modules (one job each; their names reach users here).  Four analyses of the paper are public
submodules with their own API: :mod:`~empirical.probes.learning_curves` and :mod:`~empirical.probes.planning` (how
many labels: the forecasts behind ``raptor plan``), :mod:`~empirical.probes.structure` (the delta-sweep structure
predictor), :mod:`~empirical.probes.spectral_evaluation` and :mod:`~empirical.probes.real_embedding` (the spectral
theory on real features).
"""
from ._base import ConceptProbe, LinearConceptProbe
from ._baselines import DiffMeans, GCSProbe, LogRegCVProbe, XRFMProbe
from ._concept_vectors import ConceptVectors, LinearProbe
from ._curve_families import CURVE_FAMILIES
from ._interop import export_control_vector, export_directions
from ._layers import PAPER_SPLIT_SEED, PerLayerFit, fit_layers, grouped_split, paper_split
from ._persistence import file_pair, load_concept_vectors, load_probe, save_concept_vectors, save_probe
from ._raptor import DEFAULT_CS, RaptorProbe, select_C
from ._registry import DEFAULT_COLOR, ProbeMethod, get_method, method_names, methods, register_method, unregister_method
from ._separability import perceptron, separability, separability_lp, shuffled_label_control
from ._spectral_prediction import (
    PoolModel,
    estimate_pool_model,
    estimate_pool_models,
    predict_lambda_star,
    predict_path,
    predict_stability,
    predict_sweep,
)
from ._stability import mean_abs_pairwise_cosine, stability

__all__ = [
    "ConceptProbe", "LinearConceptProbe", "RaptorProbe", "DEFAULT_CS", "select_C", "fit_layers", "paper_split",
    "grouped_split", "PerLayerFit",
    "PAPER_SPLIT_SEED", "stability",
    "mean_abs_pairwise_cosine", "DiffMeans", "LogRegCVProbe", "GCSProbe", "XRFMProbe", "separability",
    "separability_lp", "shuffled_label_control",
    "perceptron", "ConceptVectors", "LinearProbe", "export_control_vector", "export_directions", "CURVE_FAMILIES",
    "file_pair", "save_probe", "load_probe", "save_concept_vectors",
    "load_concept_vectors",
    "ProbeMethod", "DEFAULT_COLOR", "methods", "register_method", "unregister_method", "get_method", "method_names",
    "PoolModel", "estimate_pool_model", "estimate_pool_models", "predict_path", "predict_lambda_star", "predict_sweep",
    "predict_stability",
]
