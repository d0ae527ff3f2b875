"""empirical package: RAPTOR probes on embedding matrices (numpy only; no torch imports here).

Public API of the probe toolkit: :class:`RaptorProbe`, :func:`fit_l2_logistic`, :func:`fit_layers`,
:func:`stability`, baselines, :func:`separability`, and save/load helpers.
"""
from .baselines import DifferenceOfMeans, GCSProbe, LogRegCVProbe, XRFMProbe
from .layers import LayerProbes, fit_layers, paper_split
from .path import logistic_path
from .persistence import load_concept_vectors, load_probe, save_concept_vectors, save_probe
from .probe import DEFAULT_CS, RaptorProbe, select_C
from .separability import perceptron, separability
from .solver import fit_l2_logistic
from .stability import mean_abs_pairwise_cosine, stability

__all__ = [
    "RaptorProbe", "DEFAULT_CS", "select_C", "fit_l2_logistic", "logistic_path", "fit_layers", "paper_split",
    "LayerProbes", "stability", "mean_abs_pairwise_cosine", "DifferenceOfMeans", "LogRegCVProbe", "GCSProbe",
    "XRFMProbe", "separability", "perceptron", "save_probe", "load_probe", "save_concept_vectors",
    "load_concept_vectors",
]
