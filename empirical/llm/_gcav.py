"""GCAV's rules without torch: the target probabilities, the per-sample strength and the layers it may edit.

The paper's steer-towards algorithm in probe coordinates (raw-space probe ``g(h) = w.h + b``, concept vector ``v``,
``s = w.v``): the target logit ``g* = logit(p*)`` (:func:`target_logit`; towards ``p* = P_TOWARDS``, away
``P_AWAY``), the strength ``alpha = (g* - g(h)) / s`` outside the target region, else 0 (:func:`gcav_alpha`), and
the layers it edits: probe test accuracy at least ``tau`` and ``s > 0`` (:func:`steerable_layers`,
:func:`describe_skipped`).  The reliability threshold itself is one rule, :func:`reliable_layers`, which every
caller applies to the accuracy it documents (GCAV's hooks: the probes' test accuracy, as in the paper; ``raptor
steer --tau``: the validation accuracy, because its steering prompts come from the test split).  The hooks that
apply it are :mod:`empirical.llm._edits` (torch); the settings and the selection of a measurement read these rules
without importing torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from empirical.common.checks import check_scalar

from ..common.arrays import as_real_array
from ..probes import LinearProbe

__all__ = ["P_TOWARDS", "P_AWAY", "target_logit", "check_direction", "gcav_alpha", "reliable_layers",
           "steerable_layers", "describe_skipped", "GcavRule"]

P_TOWARDS = 0.9999


P_AWAY = 0.0001


def target_logit(p: float) -> float:
    """The GCAV target logit g* = log(p / (1 - p)), accurate near 0 and 1.

    Parameters
    ----------
    p : float in (0, 1)
        The target probability p*.

    Returns
    -------
    float
        g* in nats.

    Examples
    --------
    >>> round(target_logit(0.9999), 4)
    9.2102
    """
    p = check_scalar(p, "p", low=0.0, high=1.0)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    return math.log(p) - math.log1p(-p)


def check_direction(direction, p_target) -> float:
    """The target probability of a steering direction, checked.

    Parameters
    ----------
    direction : {"towards", "away"}
        Push the probe probability above or below the target.
    p_target : float in (0, 1) or None
        The target; None takes :data:`P_TOWARDS` (towards) or :data:`P_AWAY` (away).

    Returns
    -------
    float
        The target probability.

    Raises
    ------
    ValueError
        An unknown direction or a target outside (0, 1), naming the argument.
    """
    if not isinstance(direction, str) or direction not in ("towards", "away"):
        raise ValueError(f"direction must be 'towards' or 'away', got {direction!r}")
    if p_target is None:
        p_target = P_TOWARDS if direction == "towards" else P_AWAY
    p_target = check_scalar(p_target, "p_target", low=0.0, high=1.0)
    if not 0.0 < p_target < 1.0:
        raise ValueError(f"p_target must lie in (0, 1), got {p_target}")
    return p_target


def gcav_alpha(g, slope, direction="towards", p_target=None) -> np.ndarray:
    """Minimal strength moving logit ``g`` to ``logit(p_target)`` along a direction of slope ``s = w.v``.

    Returns 0 where the state already is in the target region (towards: ``g >= g*``; away:
    ``g <= g*``) and where ``slope <= 0`` (the layer is skipped).

    Parameters
    ----------
    g : float or ndarray
        Probe logits ``w.h + b`` before the edit.
    slope : float
        ``s = w.v``, the change of the logit per unit of alpha.
    direction : {"towards", "away"}
        Push the probe probability up to ``p_target`` (towards) or down to it (away).
    p_target : float in (0, 1), optional
        Target probability (default 0.9999 towards, 0.0001 away).

    Returns
    -------
    ndarray
        alpha per logit, so that ``g + alpha s = logit(p_target)`` where an edit is needed.

    Examples
    --------
    >>> gcav_alpha(np.array([0.0, 20.0]), 2.0).round(4)  # logit(0.9999) = 9.2102
    array([4.6051, 0.    ])
    """
    p_target = check_direction(direction, p_target)
    g = np.asarray(as_real_array(g, "probe logits"), dtype=np.float64)
    g_star = target_logit(p_target)
    if not np.all(np.isfinite(g)):
        raise ValueError(f"probe logits must be finite, got {np.count_nonzero(~np.isfinite(g))} non-finite values")
    slope = check_scalar(slope, "slope")
    if slope <= 0:
        return np.zeros_like(g)
    need = g < g_star if direction == "towards" else g > g_star
    return np.where(need, (g_star - g) / slope, 0.0)


def reliable_layers(accuracy, tau, *, what: str = "probe test accuracy") -> tuple[list, list]:
    """The paper's reliability threshold: the layers whose probe accuracy reaches ``tau``, and those below it.

    Parameters
    ----------
    accuracy : mapping of int to float
        Each layer's probe accuracy in [0, 1] (which accuracy is the caller's documented choice, ``what``).
    tau : float in [0, 1] or None
        The threshold; None keeps every layer.
    what : str, default="probe test accuracy"
        The accuracy's name, for the messages.

    Returns
    -------
    (list of int, list of int)
        The layers kept (accuracy >= ``tau``) and those below ``tau``, each ascending.

    Raises
    ------
    ValueError
        For a ``tau`` outside [0, 1], or a layer without an accuracy when ``tau`` is given.

    Examples
    --------
    >>> reliable_layers({1: 0.6, 2: 0.9, 3: 0.8}, 0.8)
    ([2, 3], [1])
    """
    accuracy = _layer_accuracies(accuracy)
    if tau is None:
        return sorted(accuracy), []
    tau = check_scalar(tau, "tau", low=0.0, high=1.0)
    missing = [layer for layer in sorted(accuracy) if accuracy[layer] is None]
    if missing:
        raise ValueError(f"tau={tau} needs {what} for every probe; layer {missing[0]} has none")
    kept = [layer for layer in sorted(accuracy) if accuracy[layer] >= tau]
    return kept, [layer for layer in sorted(accuracy) if accuracy[layer] < tau]


def _layer_accuracies(accuracy) -> dict:
    """``{int layer: float accuracy in [0, 1] or None}``; ValueError naming ``accuracy`` for anything else."""
    if not hasattr(accuracy, "items"):
        raise ValueError(f"accuracy must be a mapping of layer to accuracy in [0, 1], got {accuracy!r:.80}")
    out = {}
    for layer, value in accuracy.items():
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise ValueError(f"accuracy must be keyed by integer layers, got {layer!r:.40}")
        out[int(layer)] = None if value is None else check_scalar(value, f"accuracy[{layer}]", low=0.0, high=1.0)
    return out


def below_tau(accuracy, tau, below, *, what: str = "probe test accuracy") -> str:
    """One phrase on the layers :func:`reliable_layers` put below ``tau`` (with the best of them), for messages.

    Parameters
    ----------
    accuracy : mapping of int to float
        The accuracies the threshold read.
    tau : float
        The threshold.
    below : sequence of int
        The layers below it (non-empty).
    what : str, default="probe test accuracy"
        The accuracy's name.

    Returns
    -------
    str
        ``"tau=T excludes N layer(s) (the best WHAT is A, at layer L)"``.
    """
    accuracy, tau = _layer_accuracies(accuracy), check_scalar(tau, "tau", low=0.0, high=1.0)
    layers = list(below) if hasattr(below, "__iter__") and not isinstance(below, str) else []
    if not layers or any(accuracy.get(layer) is None for layer in layers):
        raise ValueError(f"below must name layers of accuracy, got {below!r:.80}")
    below = layers
    best = max(below, key=lambda layer: accuracy[layer])
    return (f"tau={tau:g} excludes {len(below)} layer(s) (the best {what} is {accuracy[best]:.3f}, at layer "
            f"{best})")


def steerable_layers(probes, tau, L: int) -> tuple[list, dict]:
    """The layers GCAV steering edits, and why the others are skipped.

    Parameters
    ----------
    probes : ConceptVectors or mapping of int to LinearProbe
        Probes with ``coef`` and ``intercept`` (layer l = output of decoder block l, 1..L).
    tau : float in [0, 1] or None
        Reliability threshold on the probes' ``test_accuracy``.
    L : int
        Number of decoder blocks of the model.

    Returns
    -------
    (list of int, dict of int to str)
        Active layers (ascending) and ``{skipped layer: reason}``.

    Examples
    --------
    >>> from empirical.probes import LinearProbe
    >>> steerable_layers({1: LinearProbe([1.0], 0.0, test_accuracy=0.6),
    ...                   2: LinearProbe([1.0], 0.0, test_accuracy=0.9)}, tau=0.8, L=4)
    ([2], {1: 'test accuracy below tau'})
    """
    if tau is not None:
        tau = check_scalar(tau, "tau", low=0.0, high=1.0)
    if not hasattr(probes, "items") or not len(probes):
        raise ValueError(f"probes must be a non-empty ConceptVectors or mapping {{layer: LinearProbe}}, got {probes!r}")
    for layer in sorted(probes):
        pr = probes[layer]
        if not isinstance(pr, LinearProbe):
            raise ValueError(f"probes[{layer}] must be a LinearProbe (see ConceptVectors), got {type(pr).__name__}")
        if pr.coef is None:
            raise ValueError(f"probes[{layer}] holds only a direction; GCAV steering needs the probe's coef and "
                             "intercept (fit them, e.g. fit_layers(...).concept_vectors())")
        if not 1 <= int(layer) <= L:
            raise ValueError(f"probe layer must be in 1..{L}, got {layer}")
    reliable, below = reliable_layers({layer: probes[layer].test_accuracy for layer in probes}, tau,
                                      what="test_accuracy")
    skipped = dict.fromkeys(below, "test accuracy below tau")
    for layer in reliable:
        if probes[layer].slope <= 0:
            skipped[layer] = "w.v <= 0"
    active = [layer for layer in reliable if layer not in skipped]
    return active, dict(sorted(skipped.items()))


def describe_skipped(probes, tau, skipped: dict) -> str:
    """One phrase on why layers were skipped (``skipped`` from :func:`steerable_layers`), for warnings and the CLI.

    Parameters
    ----------
    probes : ConceptVectors or mapping of int to LinearProbe
        The probes the layers were chosen from (their ``test_accuracy`` is quoted).
    tau : float or None
        The reliability threshold that was applied.
    skipped : dict of int to str
        ``{skipped layer: reason}`` as returned by :func:`steerable_layers`.

    Returns
    -------
    str
        The reasons joined by "; " (layers below ``tau``, with the best skipped probe's accuracy; layers with
        ``w.v <= 0``), or ``"no probe given"`` when ``skipped`` has neither.

    Examples
    --------
    >>> from empirical.probes import LinearProbe
    >>> probes = {1: LinearProbe([1.0], 0.0, test_accuracy=0.6)}
    >>> describe_skipped(probes, 0.8, steerable_layers(probes, 0.8, L=2)[1])
    'tau=0.8 excludes 1 layer(s) (the best probe test accuracy is 0.600, at layer 1)'
    """
    below = [layer for layer, why in skipped.items() if why == "test accuracy below tau"]
    parts = []
    if below:
        parts.append(below_tau({layer: probes[layer].test_accuracy for layer in below}, tau, below))
    flat = [layer for layer, why in skipped.items() if why == "w.v <= 0"]
    if flat:
        parts.append(f"{len(flat)} layer(s) have w.v <= 0")
    return "; ".join(parts) or "no probe given"


@dataclass(frozen=True)
class GcavRule:
    """GCAV's steering rule in one object: which way, to which probability, on which layers and positions.

    :func:`~empirical.llm.steer_prompts`, :func:`~empirical.llm.compare_generations` and
    :func:`~empirical.llm.gcav_steering` take it as ``rule``, or the shorthand ``"towards"`` / ``"away"`` for
    ``GcavRule(direction)``.  Validated on construction; errors name the field.

    Parameters
    ----------
    direction : {"towards", "away"}, default="towards"
        Push the probe probability up to the target (towards) or down to it (away).
    p_target : float in (0, 1), optional
        The target probability p*; default :data:`P_TOWARDS` (0.9999) towards, :data:`P_AWAY` (0.0001) away
        (kept as given: :attr:`target` resolves it, so ``dataclasses.replace(rule, direction="away")`` moves the
        default target with the direction).
    tau : float in [0, 1], optional
        Reliability threshold: layers whose probe ``test_accuracy`` is below ``tau`` are skipped (None keeps every
        layer; the rule is :func:`reliable_layers`).
    positions : {"last", "all"}, default="last"
        Edit the last position of every forward call, or every position.

    Examples
    --------
    >>> GcavRule("away").target
    0.0001
    >>> GcavRule(tau=0.8).layers({1: LinearProbe([1.0], 0.0, test_accuracy=0.6),
    ...                           2: LinearProbe([1.0], 0.0, test_accuracy=0.9)}, 4)
    ([2], {1: 'test accuracy below tau'})
    """

    direction: str = "towards"
    p_target: float | None = None
    tau: float | None = None
    positions: str = "last"

    def __post_init__(self):
        p_target = check_direction(self.direction, self.p_target)
        if self.p_target is not None:
            object.__setattr__(self, "p_target", p_target)
        if self.tau is not None:
            object.__setattr__(self, "tau", check_scalar(self.tau, "tau", low=0.0, high=1.0))
        if not isinstance(self.positions, str) or self.positions not in ("last", "all"):
            raise ValueError(f"positions must be 'last' or 'all', got {self.positions!r}")

    @classmethod
    def of(cls, rule) -> GcavRule:
        """``rule`` itself, or ``GcavRule(rule)`` for the shorthand ``"towards"`` / ``"away"``.

        Parameters
        ----------
        rule : GcavRule or {"towards", "away"}
            A rule, or a direction with the default target, every layer and the last position.

        Returns
        -------
        GcavRule

        Raises
        ------
        ValueError
            Anything else, naming ``rule``.
        """
        if isinstance(rule, cls):
            return rule
        if isinstance(rule, str):
            return cls(rule)
        raise ValueError(f"rule must be a GcavRule or 'towards' / 'away', got {type(rule).__name__}")

    @property
    def target(self) -> float:
        """The target probability p* (the direction's default when ``p_target`` is None)."""
        return check_direction(self.direction, self.p_target)

    def layers(self, probes, n_layers: int) -> tuple[list, dict]:
        """The layers this rule edits among ``probes``, and why the others are skipped (:func:`steerable_layers`).

        Parameters
        ----------
        probes : ConceptVectors or mapping of int to LinearProbe
            The probes (layer l = output of decoder block l, 1..n_layers).
        n_layers : int
            Number of decoder blocks of the model.

        Returns
        -------
        (list of int, dict of int to str)
            Active layers (ascending) and ``{skipped layer: reason}``.
        """
        return steerable_layers(probes, self.tau, n_layers)
