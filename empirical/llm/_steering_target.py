"""What the steering measurement steers: :class:`SteeringTarget`, one concept's held-out prompts with their labels,
the answer words of the read-out, the prompts continued for fluency and whether the continuations are scored for
sentiment (docs/steering.md).

:meth:`SteeringTarget.from_dataset` builds it from a dataset of the registry (:mod:`empirical.llm.datasets`: its
answer words and whether it is a sentiment concept, scored with VADER on :data:`NEUTRAL_PROMPTS`); a target built by
hand names its prompts itself. The measurement is :mod:`empirical.llm._steering_eval`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from empirical.common.arrays import check_binary_labels
from empirical.common.checks import check_bool

from . import datasets
from ._answer_readout import check_answer_words
from ._extract import check_prompts
from ._prompts import select_prompts

__all__ = ["NEUTRAL_PROMPTS", "SteeringTarget"]

#: Neutral open-ended prompts without label words (sentiment steering is scored on their continuations).
NEUTRAL_PROMPTS = (
    "Write one sentence about a film you saw.",
    "Describe the last movie you watched in one sentence.",
    "Tell me about a book you read recently.",
    "Write a short review of a restaurant.",
    "Describe your weekend in one sentence.",
    "Write one sentence about the weather today.",
    "Tell me about a song you heard.",
    "Write a sentence about a city you visited.",
    "Describe a meal you cooked.",
    "Write one sentence about your neighbour's garden.",
    "Tell me about a television show.",
    "Describe a walk in the park.",
    "Write a sentence about a concert.",
    "Describe a train journey in one sentence.",
    "Tell me about a museum you went to.",
    "Write one sentence about a new phone.",
    "Write one sentence about a bus ride.",
    "Write one sentence about a bicycle.",
    "Write one sentence about a library.",
    "Write one sentence about a bakery.",
    "Write one sentence about a football match.",
    "Write one sentence about a river.",
    "Write one sentence about a mountain trail.",
    "Write one sentence about a school play.",
    "Write one sentence about a birthday party.",
    "Write one sentence about a beach.",
    "Write one sentence about a rainy afternoon.",
    "Write one sentence about a painting.",
    "Write one sentence about a video game.",
    "Write one sentence about a coffee shop.",
    "Write one sentence about a wedding.",
    "Write one sentence about a podcast.",
    "Write one sentence about a market.",
    "Write one sentence about a hotel.",
    "Write one sentence about a flight.",
    "Write one sentence about a theatre play.",
    "Write one sentence about a festival.",
    "Write one sentence about a zoo.",
    "Write one sentence about a kitchen.",
    "Write one sentence about a job interview.",
    "Write one sentence about a classroom.",
    "Write one sentence about a lake.",
    "Write one sentence about a road trip.",
    "Write one sentence about a shop.",
    "Write one sentence about a cat.",
    "Write one sentence about a dog.",
    "Write one sentence about a holiday.",
    "Write one sentence about a bridge.",
    "Write one sentence about a farm.",
    "Write one sentence about a hospital visit.",
    "Write one sentence about a hike.",
    "Write one sentence about a snowy morning.",
    "Write one sentence about a family dinner.",
    "Write one sentence about a laptop.",
    "Write one sentence about a pair of shoes.",
    "Write one sentence about a newspaper article.",
    "Write one sentence about a board game.",
    "Write one sentence about a dance class.",
    "Write one sentence about a picnic.",
    "Write one sentence about a radio programme.",
    "Write one sentence about a documentary.",
    "Write one sentence about a sports car.",
    "Write one sentence about a village.",
    "Write one sentence about an office.",
)


@dataclass(frozen=True, eq=False)
class SteeringTarget:
    """What one steering measurement steers: the held-out prompts of a concept and how its answer is read (validated
    on construction; errors name the field).

    Parameters
    ----------
    name : str
        The dataset's name (the table's ``dataset`` column).
    prompts : sequence of str
        Held-out prompts, ordered as :func:`~empirical.llm.select_prompts` gives them (classes alternating);
        :func:`~empirical.llm.split_halves` assigns the selection and report halves.
    labels : array of 0/1
        Their labels (1 = the concept), for the read-out's AUC.
    answer_words : str or pair of str
        The concept word and its opposite (:func:`~empirical.llm.check_answer_words`).
    generation_prompts : sequence of str, optional
        Prompts continued greedily (perplexity, distinct-2, VADER; each also under the first random direction);
        None: no generation. Even-indexed ones belong to the selection half, odd ones to the report half.
    sentiment : bool, default=False
        Score the continuations with VADER (answer words masked).
    state_factors : mapping of int to ndarray (p, m), optional
        The layers' state covariance factors (:func:`~empirical.llm._steering_null.state_factors`, every layer
        1..L): the measurement then also draws the covariance-matched null; None: not measured (its columns NaN).

    Examples
    --------
    >>> t = SteeringTarget("toy", ["a good film", "a bad film"], [1, 0], "good, bad")
    >>> t.answer_words, t.labels.tolist()
    (('good', 'bad'), [1, 0])
    """

    name: str
    prompts: tuple
    labels: np.ndarray
    answer_words: tuple
    generation_prompts: tuple | None = None
    sentiment: bool = False
    state_factors: dict | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty dataset name, got {self.name!r}")
        prompts = tuple(check_prompts(self.prompts))
        check_binary_labels(self.labels, len(prompts), "labels", classes=np.array([0, 1]), rows="prompts")
        labels = np.asarray(self.labels)
        generation = self.generation_prompts
        if generation is not None:
            generation = tuple(check_prompts(generation, "generation_prompts"))
        fields = dict(prompts=prompts, labels=labels, answer_words=check_answer_words(None, self.answer_words),
                      generation_prompts=generation, sentiment=check_bool(self.sentiment, "sentiment"),
                      state_factors=None if self.state_factors is None else dict(self.state_factors))
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_dataset(cls, dataset, split, protocol, *, eval_dataset=None, answer_words=None,
                     state_factors=None) -> SteeringTarget:
        """The target of a dataset of the registry: ``protocol.n_prompts`` held-out prompts (``eval_dataset``'s
        rows, e.g. ``stsa.binary.test``, else the split's test rows; classes alternating), the registry's answer
        words unless ``answer_words`` is given, and the generation prompts: the first ``protocol.n_generate`` of
        :data:`NEUTRAL_PROMPTS` for a registered sentiment concept (VADER), else the first held-out prompts (none
        when ``n_generate`` is 0).

        Parameters
        ----------
        dataset : ConceptDataset
            The dataset (``name``, ``prompts``, ``labels``); a name of the registry gives its answer words and
            sentiment (a user table is no sentiment concept).
        split : (array of int, array of int, array of int)
            Train, validation and test row indices of ``dataset`` (:func:`empirical.probes.paper_split`); the test
            rows are the held-out candidates when there is no ``eval_dataset``.
        protocol : SteeringProtocol
            Its ``n_prompts`` and ``n_generate``.
        eval_dataset : ConceptDataset, optional
            Where the held-out prompts come from (default: the test split of ``dataset``).
        answer_words : str or pair of str, optional
            As for :func:`~empirical.llm.check_answer_words` (default: the dataset's).
        state_factors : mapping of int to ndarray (p, m), optional
            As for :class:`SteeringTarget`.

        Returns
        -------
        SteeringTarget

        Raises
        ------
        ValueError
            Unknown answer words, or more generation prompts than :data:`NEUTRAL_PROMPTS` for a sentiment dataset.
        """
        words = check_answer_words(dataset.name, answer_words)
        if eval_dataset is not None:
            source, candidates = eval_dataset, np.arange(len(eval_dataset))
        else:
            source, candidates = dataset, split[2]
        chosen = select_prompts(source.labels, candidates, protocol.n_prompts)
        prompts = [source.prompts[i] for i in chosen]
        # a registered sentiment concept (the dataset registry's ``sentiment``; a user table is not one)
        sentiment = dataset.name in datasets.dataset_names() and datasets.get_dataset(dataset.name).sentiment
        n_generate = protocol.n_generate
        if sentiment and n_generate > len(NEUTRAL_PROMPTS):
            raise ValueError(f"n_generate (--generate) must be at most the {len(NEUTRAL_PROMPTS)} neutral prompts "
                             f"of a sentiment dataset, got {n_generate}")
        generation = None
        if n_generate:
            generation = list(NEUTRAL_PROMPTS[:n_generate]) if sentiment else prompts[:n_generate]
        return cls(dataset.name, prompts, np.asarray(source.labels)[chosen], words, generation_prompts=generation,
                   sentiment=bool(sentiment), state_factors=state_factors)
