"""The ways to steer: :class:`SteeringSetting`, the named presets, the strength sweep and the layer rule.

A :class:`SteeringSetting` is one way to steer: GCAV (the paper's adaptive strength, target ``p*``) or a fixed
additive edit ``k x`` the layer's median hidden-state norm, on the layers ``all`` (every layer with a probe),
``best`` or ``top3`` (ranked by *validation* accuracy, never test data: :func:`choose_layers`), at the
``positions`` ``prompt``, ``answer`` or ``all`` (:data:`POSITIONS`). :func:`sweep_settings` builds the grid that
:mod:`empirical.llm._steering_eval` measures; :data:`PAPER_SETTING` is the paper's protocol and
:data:`DEFAULT_SETTING` the one the published measurement chose, else the paper's (docs/steering.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from empirical.common.checks import check_choice, check_int, check_sequence

from ..probes import ConceptVectors
from ._edit_kinds import EDIT_KINDS, MAX_STRENGTH
from ._gcav import P_TOWARDS

__all__ = ["POSITIONS", "LAYER_CHOICES", "MAX_STRENGTH", "SteeringSetting", "PRESETS", "PAPER_SETTING",
           "DEFAULT_SETTING", "named_setting", "sweep_settings", "choose_layers", "check_settings"]

#: Edited positions: the prompt's, the answer's (generated tokens' during generation), or all.
POSITIONS = ("prompt", "answer", "all")
#: Which layers a setting steers (ranked by validation accuracy for best/top3).
LAYER_CHOICES = ("all", "best", "top3")


@dataclass(frozen=True)
class SteeringSetting:
    """One way to steer.

    Parameters
    ----------
    kind : {"gcav", "additive"}
        A key of :data:`~empirical.llm.EDIT_KINDS`: GCAV adaptive strength (target probability
        ``strength`` towards, ``1 - strength`` away), or a fixed edit ``h += +-strength * median_norm(layer) * v``.
    layers : {"all", "best", "top3"} or tuple of int
        Every layer with a probe, the best or three best by validation accuracy, or explicit layers.
    strength : float
        GCAV: p* in (0.5, 1); additive: k in (0, MAX_STRENGTH].
    positions : {"prompt", "answer", "all"}
        Which passes are edited (:data:`POSITIONS`; module docstring, "Positions").
    name : str, optional
        Default: ``kind-layers-strength-positions``.

    Examples
    --------
    >>> SteeringSetting("additive", "best", 0.2, "answer").name
    'additive-best-k0.2-answer'
    """

    kind: str
    layers: object = "all"
    strength: float = P_TOWARDS
    positions: str = "answer"
    name: str = ""

    def __post_init__(self):
        if self.kind not in EDIT_KINDS:
            raise ValueError(f"kind must be {' or '.join(map(repr, EDIT_KINDS))}, got {self.kind!r}")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if not (self.layers in LAYER_CHOICES or (isinstance(self.layers, tuple) and self.layers)):
            raise ValueError(f"layers must be 'all', 'best', 'top3' or a tuple of layer indices, got {self.layers!r}")
        self.edit_kind.check_strength(self.strength)
        if not self.name:
            layers = self.layers if isinstance(self.layers, str) else "L" + "+".join(map(str, self.layers))
            object.__setattr__(self, "name",
                               f"{self.kind}-{layers}-{self.edit_kind.prefix}{self.strength:g}-{self.positions}")

    @property
    def edit_kind(self):
        """The kind's entry of :data:`~empirical.llm.EDIT_KINDS` (what the edit does)."""
        return EDIT_KINDS[self.kind]

    @property
    def layer_choice(self) -> str:
        return self.layers if isinstance(self.layers, str) else "explicit"


#: Named settings (``raptor steer --setting``); ``paper`` is the paper's protocol (GCAV at every layer, p* =
#: 0.9999, the last position of every pass).
PRESETS = {
    "paper": SteeringSetting("gcav", "all", P_TOWARDS, "all", name="paper"),
    "all-0.99": SteeringSetting("gcav", "all", 0.99, "all", name="all-0.99"),
    "top3-0.99": SteeringSetting("gcav", "top3", 0.99, "all", name="top3-0.99"),
    "best-0.9999": SteeringSetting("gcav", "best", P_TOWARDS, "all", name="best-0.9999"),
    "best-0.99": SteeringSetting("gcav", "best", 0.99, "all", name="best-0.99"),
    "best-0.9": SteeringSetting("gcav", "best", 0.9, "all", name="best-0.9"),
    "additive-0.1": SteeringSetting("additive", "best", 0.1, "all", name="additive-0.1"),
    "additive-0.3": SteeringSetting("additive", "best", 0.3, "all", name="additive-0.3"),
}


#: The paper's protocol: the reproduction, and the default whenever no measured setting beats the random control.
PAPER_SETTING = "paper"


#: The default of ``raptor steer``: the setting :func:`default_setting` chose from the full measurement
#: (``paper_figures --only steering_text``: ``docs/results/tables/steering_text_default.csv``; a test keeps the two
#: equal).
DEFAULT_SETTING = PAPER_SETTING


def named_setting(name: str) -> "SteeringSetting":
    """The setting called ``name``: a preset (:data:`PRESETS`) or any setting of the full sweep at any positions
    (:func:`sweep_settings`, e.g. ``'additive-best-k0.2-answer'``, the names ``steer_metrics.csv`` uses);
    ``ValueError`` listing the presets otherwise.

    Parameters
    ----------
    name : str
        A key of :data:`PRESETS` or a sweep setting's name (``kind-layers-strength-positions``).

    Returns
    -------
    SteeringSetting
        The preset, or the sweep setting of that name.

    Examples
    --------
    >>> named_setting("gcav-top3-p0.99-prompt").layers
    'top3'
    """
    if name in PRESETS:
        return PRESETS[name]
    for setting in sweep_settings(positions=POSITIONS):
        if setting.name == name:
            return setting
    sweep = sweep_settings(positions=POSITIONS)

    def values(kind, field):
        return "/".join(dict.fromkeys(f"{getattr(s, field):g}" if field == "strength" else str(getattr(s, field))
                                      for s in sweep if s.kind == kind))
    kinds = "; ".join(f"{kind}: layers {values(kind, 'layers')}, strength {values(kind, 'strength')}"
                      for kind in dict.fromkeys(s.kind for s in sweep))
    raise ValueError(f"--setting must be a preset ({', '.join(sorted(PRESETS))}) or a sweep setting "
                     f"kind-layers-strength-positions as steer_metrics.csv names them, e.g. "
                     f"'additive-best-k0.2-answer' ({kinds}; positions {'/'.join(POSITIONS)}), got {name!r}")


def sweep_settings(k_grid=(0.05, 0.1, 0.2, 0.4, 0.8), p_grid=(0.9, 0.99, P_TOWARDS),
                   gcav_layers=("all", "best", "top3"), additive_layers=("best", "top3"),
                   positions=("answer",)) -> list:
    """The strength sweep: GCAV at every ``p_grid`` target on ``gcav_layers`` and additive edits at every ``k_grid``
    multiple on ``additive_layers``, each at every ``positions``.

    Parameters
    ----------
    k_grid : sequence of float
        Additive strengths k, multiples of the layer's median hidden-state norm, in (0, MAX_STRENGTH].
    p_grid : sequence of float
        GCAV target probabilities p* in (0.5, 1) (``towards``; ``away`` targets 1 - p*).
    gcav_layers, additive_layers : sequence of {"all", "best", "top3"} or tuple of int
        Layer choices of the GCAV and additive settings (:class:`SteeringSetting`).
    positions : sequence of {"prompt", "answer", "all"}
        Edited positions; every setting is made once per entry.

    Returns
    -------
    list of SteeringSetting
        GCAV settings first (by positions, layer choice, p*), then the additive ones (by positions, layer
        choice, k).

    Examples
    --------
    >>> [s.name for s in sweep_settings(k_grid=(0.1,), p_grid=(0.99,), gcav_layers=("best",),
    ...                                 additive_layers=("best",))]
    ['gcav-best-p0.99-answer', 'additive-best-k0.1-answer']
    """
    k_grid = check_sequence(k_grid, "k_grid", EDIT_KINDS["additive"].check_strength)
    p_grid = check_sequence(p_grid, "p_grid", EDIT_KINDS["gcav"].check_strength)
    gcav_layers = check_sequence(gcav_layers, "gcav_layers", _layer_choice, allow_empty=True)
    additive_layers = check_sequence(additive_layers, "additive_layers", _layer_choice, allow_empty=True)
    positions = check_sequence(positions, "positions", lambda v, n: check_choice(v, n, POSITIONS))
    out = [SteeringSetting("gcav", layers, p, pos) for pos in positions for layers in gcav_layers for p in p_grid]
    out += [SteeringSetting("additive", layers, k, pos) for pos in positions for layers in additive_layers
            for k in k_grid]
    return out


def _layer_choice(value, name):
    """One layer choice of :func:`sweep_settings`: a name of :data:`LAYER_CHOICES` or a tuple of layer indices."""
    if isinstance(value, tuple):
        return check_sequence(value, name, lambda v, n: check_int(v, n, minimum=0))
    return check_choice(value, name, LAYER_CHOICES)


# --------------------------------------------------------------------------------------------- layers
def choose_layers(setting: SteeringSetting, probes: ConceptVectors, n_layers: int) -> list:
    """The layers ``setting`` steers: GCAV needs probes with weights and ``w.v > 0``; ``best``/``top3`` rank the
    candidates by their probes' validation accuracy (:attr:`~empirical.probes.LinearProbe.validation_accuracy`:
    accuracy on the validation split; never test data).

    Parameters
    ----------
    setting : SteeringSetting
        Its ``kind`` and ``layers`` choose.
    probes : ConceptVectors
        The method's concept vectors (layer l = output of decoder block l, 1..L); their validation accuracies are
        needed only for ``best`` and ``top3``.
    n_layers : int
        Number of decoder blocks L; layers outside 1..L are not candidates.

    Returns
    -------
    list of int
        ``all``: every candidate (ascending for GCAV, in the order of ``probes`` for additive); an explicit tuple:
        its candidate layers in its order; ``best``/``top3``: the one or three best, ascending (ties go to the
        lower layer).  ``ValueError`` when no layer qualifies.
    """
    candidates = setting.edit_kind.candidate_layers(probes, n_layers)
    if not candidates:
        raise ValueError(f"setting {setting.name!r}: no layer can be steered")
    if setting.layers == "all":
        return candidates
    if isinstance(setting.layers, tuple):
        chosen = [layer for layer in setting.layers if layer in candidates]
        if not chosen:
            raise ValueError(f"setting {setting.name!r}: none of layers {setting.layers} can be steered")
        return chosen
    missing = [layer for layer in candidates if probes[layer].validation_accuracy is None]
    if missing:
        raise ValueError(f"setting {setting.name!r} ranks layers by validation accuracy; layers {missing[:5]} "
                         "have none")
    ranked = sorted(candidates, key=lambda layer: (-probes[layer].validation_accuracy, layer))
    return sorted(ranked[: 1 if setting.layers == "best" else 3])


# --------------------------------------------------------------------------------------------- the measurement
def check_settings(settings) -> list:
    """The settings to measure, as a non-empty list of :class:`SteeringSetting`.

    Parameters
    ----------
    settings : iterable of SteeringSetting
        The settings.

    Returns
    -------
    list of SteeringSetting

    Raises
    ------
    ValueError
        Empty, or an element that is not a :class:`SteeringSetting` (named by its type).
    """
    settings = list(settings)
    if not settings:
        raise ValueError("settings is empty")
    bad = [s for s in settings if not isinstance(s, SteeringSetting)]
    if bad:
        raise ValueError(f"settings must be SteeringSetting objects, got {type(bad[0]).__name__}")
    return settings

