"""The edit kinds of steering: one class per way to edit the residual stream, and their registry :data:`EDIT_KINDS`.

A steering setting's ``kind`` (:class:`~empirical.llm.SteeringSetting`) is a key of
:data:`EDIT_KINDS`; its entry decides everything that differs between kinds, so no other module tests a kind by
name: the strength's domain and the letter of the setting's name (:meth:`EditKind.check_strength`,
:attr:`EditKind.prefix`), the layers it may steer (:meth:`EditKind.candidate_layers`), what a method's probes need
(:attr:`EditKind.needs_weights`, :attr:`EditKind.needs_norms`), the |alpha| the table reports
(:meth:`EditKind.fixed_strengths`), which methods the timing model counts (:meth:`EditKind.steers`), and the
contexts of its cached passes: the concept edit and its random controls at the concept run's |alpha|
(:meth:`EditKind.concept`, :meth:`EditKind.random`, :meth:`EditKind.random_stacked`). The hooks themselves are
:mod:`empirical.llm._edits` (torch, imported when a pass is built: this module loads no torch).

Two kinds: :class:`GcavEdit` (GCAV's adaptive strength, target p*) and :class:`AdditiveEdit` (a fixed
``k x`` the layer's median hidden-state norm). A new kind is one class here and one entry of :data:`EDIT_KINDS`.
"""
from __future__ import annotations

import numpy as np

from empirical.common.checks import check_scalar

from ._gcav import GcavRule, steerable_layers

__all__ = ["MAX_STRENGTH", "EditKind", "GcavEdit", "AdditiveEdit", "EDIT_KINDS"]

#: The largest additive multiple k of the median hidden-state norm (beyond it the state is the edit).
MAX_STRENGTH = 10.0


class EditKind:
    """One way to edit the residual stream: what a steering setting of this kind means and how its passes run.

    Attributes
    ----------
    name : str
        The kind's key in :data:`EDIT_KINDS` (a setting's ``kind``).
    prefix : str
        The letter before the strength in a setting's default name (``kind-layers-<prefix><strength>-positions``).
    strength_label : str
        What the strength is, in the message of a strength out of its domain.
    strength_bounds : dict
        The strength's domain, as keywords of :func:`~empirical.common.checks.check_scalar`.
    positions : {"last", "all"}
        The positions its random controls edit (the hooks' ``positions``).
    needs_weights : bool
        Only probes with weights (``coef``) can be steered; a method without them is left out of the plan.
    needs_norms : bool
        The steered layers' probes need their median hidden-state norm
        (:attr:`~empirical.probes.LinearProbe.state_norm`: its strength is in their units).
    """

    name = ""
    prefix = ""
    strength_label = ""
    strength_bounds: dict = {}
    positions = "last"
    needs_weights = False
    needs_norms = False

    def check_strength(self, strength, name=None):
        """``strength`` if it lies in the kind's domain; ``ValueError`` naming ``name`` otherwise.

        Parameters
        ----------
        strength : float
            The strength to check.
        name : str, optional
            The name in the error message; default ``strength (<strength_label>)``.

        Returns
        -------
        float
            The checked strength.
        """
        return check_scalar(strength, name or f"strength ({self.strength_label})", **self.strength_bounds)

    def candidate_layers(self, probes, n_layers) -> list:
        """The layers a setting of this kind may steer (before the setting's ``layers`` choose among them).

        Parameters
        ----------
        probes : ConceptVectors
            The method's concept vectors (layer l = output of decoder block l, 1..L).
        n_layers : int
            Number of decoder blocks L; layers outside 1..L are not candidates.

        Returns
        -------
        list of int
            The candidate layers.
        """
        return [int(layer) for layer in probes if 1 <= int(layer) <= n_layers]

    def steers(self, spec) -> bool:
        """Whether the timing model counts a setting of this kind for a probe method.

        Parameters
        ----------
        spec : MethodSpec
            The method's registry entry (:func:`empirical.probes.get_method`).

        Returns
        -------
        bool
        """
        return True

    def fixed_strengths(self, setting, probes, layers):
        """|alpha| per layer when the strength is fixed by the setting, None when the edit records it per row.

        Parameters
        ----------
        setting : SteeringSetting
            A setting of this kind.
        probes : ConceptVectors
            The method's probes (their ``state_norm``: median hidden-state norm, hidden-state units).
        layers : iterable of int
            The steered layers.

        Returns
        -------
        dict of int to float or None
            The edit's |alpha| per layer (hidden-state units), or None.
        """
        return None

    def concept(self, edit):
        """The concept edit of one pass: a factory of its context manager.

        Parameters
        ----------
        edit : SettingEdit
            The setting, direction, probes and layers (:class:`empirical.llm._cached_passes.SettingEdit`).

        Returns
        -------
        callable
        """
        raise NotImplementedError

    def random(self, edit, units, alphas=None):
        """The random control of one pass: ``units`` (layer -> unit vector) at the concept run's |alpha|.

        Parameters
        ----------
        edit : SettingEdit
            As for :meth:`concept`.
        units : dict of int to ndarray
            The random direction per layer.
        alphas : dict of int to ndarray or None
            The |alpha| the concept run recorded for this pass, per layer and row.

        Returns
        -------
        callable or None
            A factory of the control's context manager; None when it cannot run (no recorded |alpha|).
        """
        raise NotImplementedError

    def random_stacked(self, edit, draws, alphas, rows):
        """All random controls of the answer-position edit in one pass (draws stacked over repeated rows).

        Parameters
        ----------
        edit : SettingEdit
            As for :meth:`concept`.
        draws : list of dict of int to ndarray
            One layer -> unit vector dict per draw.
        alphas : dict of int to ndarray or None
            The |alpha| of the concept run's answer pass, per layer and row.
        rows : int
            The rows of the batch (repeated ``len(draws)`` times).

        Returns
        -------
        callable or None
            A factory of the stacked pass's context manager; None when it cannot run.
        """
        raise NotImplementedError

    def _stacked(self, edit, draws, layers, strengths, rows):
        """The stacked additive pass of ``draws`` on ``layers`` at ``strengths`` (this kind's positions)."""
        from ._edits import additive_steering

        vectors = {layer: np.repeat(np.stack([units[layer] for units in draws]), rows, axis=0) for layer in layers}
        return lambda: additive_steering(edit.model, vectors, strengths, self.positions)


class GcavEdit(EditKind):
    """GCAV: the per-row strength that moves the probe's probability to p* (towards) or 1 - p* (away), at the last
    position of every pass, on the layers with ``w.v > 0``; its random controls replay the recorded |alpha|."""

    name = "gcav"
    prefix = "p"
    strength_label = "GCAV target probability p*"
    strength_bounds = dict(low=0.5, high=1.0, low_open=True, high_open=True)
    positions = "last"
    needs_weights = True

    def candidate_layers(self, probes, n_layers) -> list:
        candidates, _ = steerable_layers(probes, None, n_layers)
        return candidates

    def steers(self, spec) -> bool:
        return spec.gcav

    def concept(self, edit):
        from ._edits import gcav_steering

        p = edit.setting.strength if edit.direction == "towards" else 1.0 - edit.setting.strength
        return lambda: gcav_steering(edit.model, {layer: edit.probes[layer] for layer in edit.layers},
                                     GcavRule(edit.direction, p, positions="last"))

    def random(self, edit, units, alphas=None):
        from ._edits import additive_steering

        if alphas is None:
            return None
        return lambda: additive_steering(edit.model, {layer: units[layer] for layer in alphas},
                                         {layer: np.abs(a) * edit.sign for layer, a in alphas.items()}, "last")

    def random_stacked(self, edit, draws, alphas, rows):
        if alphas is None:
            return None
        strengths = {layer: np.tile(np.abs(a) * edit.sign, len(draws)) for layer, a in alphas.items()}
        return self._stacked(edit, draws, list(alphas), strengths, rows)


class AdditiveEdit(EditKind):
    """A fixed edit ``h += +-k * median_norm(layer) * v`` at every position of the edited passes, on every layer
    with a probe; its random controls use the same strengths."""

    name = "additive"
    prefix = "k"
    strength_label = "multiple k of the median hidden-state norm"
    strength_bounds = dict(low=0.0, high=MAX_STRENGTH, low_open=True)
    positions = "all"
    needs_norms = True

    def fixed_strengths(self, setting, probes, layers):
        return {layer: setting.strength * probes[layer].state_norm for layer in layers}

    def signed_strengths(self, edit):
        """The edit's signed strength per steered layer: +-k x the layer's median norm (+ towards, - away).

        Parameters
        ----------
        edit : SettingEdit
            As for :meth:`EditKind.concept`.

        Returns
        -------
        dict of int to float
        """
        return {layer: edit.sign * edit.setting.strength * edit.probes[layer].state_norm for layer in edit.layers}

    def concept(self, edit):
        from ._edits import additive_steering

        return lambda: additive_steering(edit.model, {layer: edit.probes[layer].direction for layer in edit.layers},
                                         self.signed_strengths(edit), "all")

    def random(self, edit, units, alphas=None):
        from ._edits import additive_steering

        return lambda: additive_steering(edit.model, {layer: units[layer] for layer in edit.layers},
                                         self.signed_strengths(edit), "all")

    def random_stacked(self, edit, draws, alphas, rows):
        return self._stacked(edit, draws, edit.layers, self.signed_strengths(edit), rows)


#: The edit kinds by name (a setting's ``kind``): one entry per kind, in the order the sweep lists them.
EDIT_KINDS = {kind.name: kind for kind in (GcavEdit(), AdditiveEdit())}
