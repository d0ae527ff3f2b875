"""The steering measurement's protocol, without torch (docs/steering.md): one object, :class:`SteeringProtocol`, and
the constants and gates it rests on.

:class:`SteeringProtocol` groups, validated once, every choice of a measurement that is not the model, the data or
the concept vectors: the read-out (the answer stem), the directions, the random controls and the rank test, the
generation, the held-out prompts and the staged sweep; the measurement (:func:`empirical.llm.evaluate_dataset`,
``evaluate_steering``, ``evaluate_staged``), its timing model and ``raptor steer`` take it (a new steering option is
one field here). :class:`SteeringRun` groups how one run goes: where the held-out prompts and the answer words come
from, how the concept vectors are fitted and how it executes (staged, progress, the stage hook, the validity gate).
What a measurement counts as a test and as an acceptable operating point: the number of null (random) directions
of the directions-as-unit rank test and of the control (:data:`N_RANDOM`, :data:`MIN_RANDOM`,
:data:`N_RANDOM_SELECTION`, :data:`MIN_CONTROL`), its level (:data:`NULL_ALPHA`) and seed streams
(:data:`NULL_STREAMS`), the generation budget (:data:`N_GENERATE`) and the gates of an operating point
(:func:`passes_gates`).  The measurement itself (:mod:`empirical.llm._steering_eval`, torch) and the pure-pandas
selection and timing modules (:mod:`empirical.llm._steering_selection`, :mod:`empirical.llm._steering_cost`) read them
from here, so that choosing an operating point from a saved table never imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from empirical.common.checks import check_bool, check_int, check_random_state, check_scalar, check_sequence
from empirical.common.resources import check_n_jobs

from ..probes import PAPER_SPLIT_SEED

__all__ = ["SteeringProtocol", "ANSWER_STEM", "MIN_RANDOM", "N_RANDOM", "N_RANDOM_SELECTION", "MIN_CONTROL",
           "NULL_ALPHA", "NULL_STREAMS", "MATCHED_STREAMS", "N_TEXT_RANDOM", "MASS_GATE", "PERPLEXITY_GATE",
           "DISTINCT2_GATE", "N_GENERATE", "N_PROMPTS", "passes_gates", "STEERING_METHODS", "SteeringRun"]

#: Null (random) directions per (setting, direction, half), at least: the rank p-value 1 / (N + 1) can reach
#: 0.025 only with N >= 39, and the directions come in antithetic pairs (+r, -r), so N >= 40 and even.
MIN_RANDOM = 40
#: Null directions of the rank test by default (50 antithetic pairs; smallest p = 1/101): in a staged run only the
#: tested points (:func:`rank_test_points`) get them, on the report half; :func:`evaluate_steering` reads them for
#: every setting and both halves.
N_RANDOM = 100
#: Random directions of the control elsewhere in a staged run (the selection half's screen and candidates, the
#: report half's rows that are not tested: the first ones of the report stream): the random mean that the
#: concept-specific shift subtracts and the gates read, not a test (no rank p); antithetic, even, at least
#: :data:`MIN_CONTROL`.
N_RANDOM_SELECTION = 10
#: The least number of control directions (one antithetic pair).
MIN_CONTROL = 2
#: One-sided level of the rank test (a concept direction beats the null when its rank p is below it).
NULL_ALPHA = 0.025
#: Seed streams of the null directions: the selection half and the report half draw different directions.
NULL_STREAMS = {"selection": 0, "report": 1}
#: Seed streams of the covariance-matched null directions (drawn from the layer's own state distribution,
#: :func:`empirical.llm._steering_null.matched_units`), apart from the isotropic ones of :data:`NULL_STREAMS`.
MATCHED_STREAMS = {"selection": 2, "report": 3}
#: Random directions of the text-level control (VADER of continuations, sentiment datasets): the first draws of the
#: half's null stream (five antithetic pairs), each continued and scored like the concept edit, on the report half of
#: a staged sweep and on both halves otherwise; the first one also gives the perplexity and distinct-2 controls.
N_TEXT_RANDOM = 10
#: Gates of the operating point: steered mass >= MASS_GATE x unsteered mass, perplexity ratio <= PERPLEXITY_GATE
#: and (repetition) steered distinct-2 >= DISTINCT2_GATE x unsteered distinct-2, the last two where generated.
MASS_GATE = 0.5
#: see :data:`MASS_GATE`
PERPLEXITY_GATE = 1.5
#: see :data:`MASS_GATE` (a continuation repeating its bigrams, "good good good ...", has distinct-2 near 0)
DISTINCT2_GATE = 0.8
#: Generation prompts of a measurement by default (the fluency gates read the selection half's 32 continuations).
N_GENERATE = 64
#: Held-out prompts of a measurement by default (two halves of 50, classes alternating).
N_PROMPTS = 100
#: The answer stem appended to every held-out prompt; the answer is read at its last token
#: (:mod:`empirical.llm._answer_readout`).
ANSWER_STEM = "\n\nThe answer is:"
#: Where the stage-2 twins of a staged sweep edit (the candidates themselves edit the answer positions).
TWIN_POSITIONS = ("prompt", "all")


def _as_tuple(value, name: str) -> tuple:
    """One name or a sequence of names as a tuple (the project's :func:`~empirical.common.checks.check_sequence`)."""
    if isinstance(value, str):
        return (value,)
    return check_sequence(value, name, item=_name, allow_empty=True)


def _name(value, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a name (a string), got {value!r}")
    return value


@dataclass(frozen=True)
class SteeringProtocol:
    """How a steering measurement is made, apart from the model, the data and the concept vectors (validated on
    construction; errors name the field and its ``raptor steer`` option).

    The gates of an operating point are constants of the protocol (:data:`MASS_GATE`, :data:`PERPLEXITY_GATE`,
    :data:`DISTINCT2_GATE`, :func:`passes_gates`), as are the level of the rank test (:data:`NULL_ALPHA`) and its seed
    streams (:data:`NULL_STREAMS`).

    Parameters
    ----------
    stem : str, default="\\n\\nThe answer is:"
        The read-out: the answer stem appended to every held-out prompt (``--stem``); the answer log-odds are read
        at its last token.
    directions : tuple of {"towards", "away"}, default=("towards", "away")
        The directions measured (``--direction``).
    n_random : int, default=N_RANDOM
        Null (random) directions of the rank test per (setting, direction, half), even (antithetic pairs +r, -r),
        at least :data:`MIN_RANDOM` (``--n-random``).
    n_random_selection : int, default=N_RANDOM_SELECTION
        Control directions of a staged sweep's selection half and of its report rows that are not tested (a control,
        not a test); even, at least :data:`MIN_CONTROL`, at most ``n_random``.  A measurement that is not staged
        reads ``n_random`` everywhere.
    seed : int, default=0
        Seed of the random directions (``--seed``).
    n_generate : int, default=N_GENERATE
        Prompts continued per setting for the fluency and repetition gates and VADER (``--generate``; 0: none).
    max_new_tokens : int, default=32
        Tokens generated per continuation (``--max-new-tokens``).
    batch_size : int, default=16
        Prompts per forward pass.
    n_candidates : int, default=2
        A staged sweep's candidates per method and direction after the screen.
    n_twins : int, default=1
        How many of the best candidates also run at ``stage2_positions`` (at most ``n_candidates`` are used).
    stage2_positions : tuple of {"prompt", "all"}, default=("prompt", "all")
        Positions of the stage-2 twins.
    twin_methods : tuple of str, optional
        Methods whose candidates get twins (default: every method; ``()``: none).
    n_random_matched : int, optional
        Covariance-matched null directions of the rank test (drawn from the layer's own state distribution at the
        same norm, beside the isotropic ones; read where the isotropic test is and where the measurement is given the
        layers' states): even and at least :data:`MIN_RANDOM`, or 0 (none); default ``n_random``.
    n_text_random : int, default=N_TEXT_RANDOM
        Random directions of the text-level (VADER) control of a sentiment dataset: the first draws of the half's
        null stream, at least 1 and at most ``n_random`` (a staged sweep reads them on the report half, whose stream
        has ``n_random`` draws, and one on the selection half).
    n_prompts : int, default=N_PROMPTS
        Held-out prompts a target built from a dataset gets (``--n-prompts``; at least 2, both classes alternating:
        :meth:`~empirical.llm.SteeringTarget.from_dataset`); a target built by hand has its own.

    Examples
    --------
    >>> SteeringProtocol(n_random=40, directions=("towards",)).n_control(staged=False)
    40
    >>> SteeringProtocol(n_random=41)
    Traceback (most recent call last):
    ...
    ValueError: n_random (--n-random) must be even (antithetic pairs +r, -r), got 41
    """

    stem: str = ANSWER_STEM
    directions: tuple = ("towards", "away")
    n_random: int = N_RANDOM
    n_random_selection: int = N_RANDOM_SELECTION
    seed: int = 0
    n_generate: int = N_GENERATE
    max_new_tokens: int = 32
    batch_size: int = 16
    n_candidates: int = 2
    n_twins: int = 1
    stage2_positions: tuple = TWIN_POSITIONS
    twin_methods: tuple | None = None
    n_random_matched: int | None = None
    n_text_random: int = N_TEXT_RANDOM
    n_prompts: int = N_PROMPTS

    def __post_init__(self):
        if not isinstance(self.stem, str) or not self.stem.strip():
            raise ValueError("stem (--stem) must be a non-empty answer stem such as '\\n\\nThe answer is:', "
                             f"got {self.stem!r:.60}")
        directions = _as_tuple(self.directions, "directions (--direction)")
        if not directions or any(d not in ("towards", "away") for d in directions):
            raise ValueError(f"directions (--direction) must be 'towards' and/or 'away', got {self.directions!r}")
        n_random = check_int(self.n_random, "n_random (--n-random)", minimum=MIN_RANDOM)
        if n_random % 2:
            raise ValueError(f"n_random (--n-random) must be even (antithetic pairs +r, -r), got {n_random}")
        n_control = check_int(self.n_random_selection, "n_random_selection (the selection half's control, not a test)",
                              minimum=MIN_CONTROL)
        if n_control % 2 or n_control > n_random:
            raise ValueError("n_random_selection (the selection half's control, not a test) must be even (antithetic "
                             f"pairs) and at most n_random (--n-random) = {n_random}, got {n_control}")
        stage2 = _as_tuple(self.stage2_positions, "stage2_positions")
        for position in stage2:
            if position not in TWIN_POSITIONS:
                raise ValueError(f"stage2_positions must be among 'prompt', 'all', got {position!r}")
        twin_methods = self.twin_methods
        if twin_methods is not None:
            twin_methods = _as_tuple(twin_methods, "twin_methods")
            if not all(isinstance(m, str) and m for m in twin_methods):  # () : no method gets twins
                raise ValueError(f"twin_methods must be method names (or None: every method), got "
                                 f"{self.twin_methods!r}")
        n_matched = n_random if self.n_random_matched is None else check_int(
            self.n_random_matched, "n_random_matched (covariance-matched null directions)", minimum=0)
        if n_matched and (n_matched < MIN_RANDOM or n_matched % 2):
            raise ValueError(f"n_random_matched (covariance-matched null directions) must be 0 or even and at least "
                             f"{MIN_RANDOM} (antithetic pairs, a rank p that can reach 0.025), got {n_matched}")
        n_text = check_int(self.n_text_random, "n_text_random (random directions of the VADER control)", minimum=1)
        if n_text > n_random:
            raise ValueError("n_text_random (random directions of the VADER control) must be at most "
                             f"n_random (--n-random) = {n_random} (the draws of the half's stream), got {n_text}")
        fields = dict(directions=directions, n_random=n_random, n_random_selection=n_control,
                      n_random_matched=n_matched, n_text_random=n_text,
                      seed=check_int(self.seed, "seed (--seed)", minimum=0),
                      n_generate=check_int(self.n_generate, "n_generate (--generate)", minimum=0),
                      max_new_tokens=check_int(self.max_new_tokens, "max_new_tokens (--max-new-tokens)"),
                      batch_size=check_int(self.batch_size, "batch_size"),
                      n_candidates=check_int(self.n_candidates, "n_candidates", minimum=1),
                      n_twins=check_int(self.n_twins, "n_twins", minimum=0), stage2_positions=stage2,
                      twin_methods=twin_methods,
                      n_prompts=check_int(self.n_prompts, "n_prompts (--n-prompts)", minimum=2))
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def n_control(self, *, staged: bool) -> int:
        """Control directions outside the rank test: ``n_random_selection`` in a staged sweep, else ``n_random``.

        Parameters
        ----------
        staged : bool
            Whether the measurement is a staged sweep.

        Returns
        -------
        int
        """
        return self.n_random_selection if staged else self.n_random


#: The methods whose concept vectors a measurement fits by default (the registry's steering comparison).
STEERING_METHODS = ("RAPTOR", "DiffMeans", "GCS", "xRFM")


@dataclass(frozen=True)
class SteeringRun:
    """How one measurement runs, beside its :class:`SteeringProtocol`: where the held-out prompts and the answer
    words come from, how the concept vectors are fitted when none are given, and how it executes (validated on
    construction; errors name the field).

    :func:`~empirical.llm.evaluate_dataset` reads every field; :func:`~empirical.llm._steering_eval.evaluate_staged`
    and ``evaluate_steering`` read ``progress`` and the staged fields (``on_stage``, ``validity_only``,
    ``auc_p_adjusted``).

    Parameters
    ----------
    split_seed : int, default=PAPER_SPLIT_SEED
        Seed of :func:`empirical.probes.paper_split` (train / validation rows fit the vectors; the test rows give
        the held-out prompts).
    eval_dataset : ConceptDataset, optional
        Where the held-out prompts come from (e.g. ``stsa.binary.test``; default: the dataset's test split).
    answer_words : str or pair of str, optional
        The concept word and its opposite, as for :func:`~empirical.llm.check_answer_words` (default: the
        dataset's, from the registry).
    methods : sequence of str, default=("RAPTOR", "DiffMeans", "GCS", "xRFM")
        Methods whose concept vectors are fitted (:func:`~empirical.llm.method_vectors`) when none are given.
    method_params : mapping of str to dict, optional
        Estimator parameters per method, as for :func:`~empirical.llm.method_vectors`.
    staged : bool, default=False
        Measure in stages (``evaluate_staged``: a sweep) rather than every setting on every prompt.
    progress : bool, default=False
        Show progress bars (RAPTOR's fit and the measurement's).
    n_jobs : int, default=1
        Layers fitted in parallel.
    on_stage : callable, optional
        ``on_stage(stage, entries, prompt_indices)``, called before each stage of a staged run (progress, timing,
        tests).
    validity_only : bool, default=False
        Stop a staged run after the validity stage (its one row).
    auc_p_adjusted : float in [0, 1], optional
        A staged run's validity p after the caller's multiplicity correction (the gate compares it, not the
        dataset's own p, with :data:`~empirical.llm.MAX_AUC_P`).

    Examples
    --------
    >>> SteeringRun(staged=True, methods=["RAPTOR"]).methods
    ('RAPTOR',)
    """

    split_seed: int = PAPER_SPLIT_SEED
    eval_dataset: object = None
    answer_words: object = None
    methods: tuple = STEERING_METHODS
    method_params: dict | None = None
    staged: bool = False
    progress: bool = False
    n_jobs: int = 1
    on_stage: object = None
    validity_only: bool = False
    auc_p_adjusted: float | None = None

    def __post_init__(self):
        if self.on_stage is not None and not callable(self.on_stage):
            raise ValueError(f"on_stage must be a function (stage, entries, prompt_indices), got "
                             f"{type(self.on_stage).__name__}")
        auc_p = self.auc_p_adjusted
        fields = dict(split_seed=check_random_state(self.split_seed, "split_seed"),
                      methods=_as_tuple(self.methods, "methods"), staged=check_bool(self.staged, "staged"),
                      progress=check_bool(self.progress, "progress"), n_jobs=check_n_jobs(self.n_jobs),
                      validity_only=check_bool(self.validity_only, "validity_only"),
                      auc_p_adjusted=None if auc_p is None else check_scalar(auc_p, "auc_p_adjusted", low=0.0,
                                                                             high=1.0))
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def stage(self, stage: str, entries, prompt_indices) -> None:
        """Tell ``on_stage`` (if any) that ``stage`` starts on ``entries`` and ``prompt_indices``.

        Parameters
        ----------
        stage : str
            The stage's name (``validity``, ``fit``, ``screen``, ...).
        entries : list
            The (method, setting, layers, direction) entries it measures.
        prompt_indices : array of int
            The prompts it reads.
        """
        if self.on_stage is not None:
            self.on_stage(stage, entries, prompt_indices)


def passes_gates(rows: pd.DataFrame) -> pd.Series:
    """The gates of an operating point on table rows: answer mass and, where generated, fluency (perplexity ratio)
    and repetition (distinct-2); a row passes only when every gate passes.

    Parameters
    ----------
    rows : pandas.DataFrame
        Metric rows (:data:`METRIC_COLUMNS`).

    Returns
    -------
    pandas.Series of bool
        Steered answer mass >= :data:`MASS_GATE` x the unsteered one, perplexity ratio <=
        :data:`PERPLEXITY_GATE` and steered distinct-2 >= :data:`DISTINCT2_GATE` x the unsteered one where they
        were measured (NaN passes; tables without the distinct-2 columns pass that gate).
    """
    ratio = rows["perplexity_ratio"]
    passed = (rows["answer_mass_steered"] >= MASS_GATE * rows["answer_mass_unsteered"]) & \
        (ratio.isna() | (ratio <= PERPLEXITY_GATE))
    if {"distinct2_steered", "distinct2_unsteered"} <= set(rows.columns):
        steered, unsteered = rows["distinct2_steered"], rows["distinct2_unsteered"]
        passed &= steered.isna() | unsteered.isna() | (steered >= DISTINCT2_GATE * unsteered)
    return passed
