"""Reading what the model says: the answer log-odds read-out, its validity, and text metrics of generations.

* **Answer log-odds.** Each held-out prompt gets a fixed answer stem
  (:data:`empirical.llm._steering_protocol.ANSWER_STEM`, e.g. ``"\\n\\nThe answer is:"``); the next-token
  distribution after it gives
  ``LD = logsumexp log P(concept words) - logsumexp log P(opposite words)`` (:func:`answer_logodds`), the words
  being the dataset's answer pair (its ``answer_words`` in :mod:`empirical.llm.datasets`,
  :func:`check_answer_words`) in every single-token case and leading-space variant (:func:`answer_token_ids`).
  The answer mass is P(concept words) + P(opposite words).
* **Validity** per dataset (:func:`read_out_validity`): AUC of the unsteered LD against the labels and the unsteered
  answer mass; a read-out is measurable when the AUC is at least :data:`MIN_AUC`, above chance by a one-sided
  Mann-Whitney test at :data:`MAX_AUC_P`, and the mass at least :data:`MIN_MASS`.
* **Text**: :func:`distinct_ngram_ratio` (repetition) and :func:`vader_scores` (open-ended sentiment, answer
  words masked).

The steering measurement that uses them is :mod:`empirical.llm._steering_eval`.
"""
from __future__ import annotations

import math
import re

import numpy as np
import torch
from scipy import stats
from sklearn.metrics import roc_auc_score

from empirical.common.checks import check_scalar

from ..common.arrays import check_vector
from .datasets import answer_pairs

__all__ = ["MIN_AUC", "MIN_MASS", "MAX_AUC_P", "MIN_MASS_STEM", "check_answer_words",
           "validity_decision",
           "answer_word_variants", "answer_token_ids", "answer_logodds", "distinct_ngram_ratio", "vader_scores",
           "check_answer_mass", "read_out_validity"]


#: A dataset's read-out is measurable when the AUC of the unsteered LD is at least this and the mass at least MIN_MASS.
MIN_AUC = 0.55


MIN_MASS = 0.01


#: ... and the AUC must be above chance by a one-sided Mann-Whitney test at this level (the verdicts' level): with
#: 100 prompts the AUC's standard error is ~0.058, so a point threshold alone would let a read-out at chance in.
MAX_AUC_P = 0.025


#: Below this mean answer mass the stem is refused outright (the model does not answer with the words).
MIN_MASS_STEM = 1e-6


# --------------------------------------------------------------------------------------------- answer words
def check_answer_words(dataset: str | None, answer_words=None) -> tuple:
    """The (concept, opposite) answer words: ``answer_words`` if given, else the dataset's ``answer_words`` in the
    dataset registry (:func:`empirical.llm.datasets.answer_pairs`); ``ValueError`` naming ``answer_words`` for an
    unknown dataset or a bad pair.

    Parameters
    ----------
    dataset : str or None
        Name of a registered dataset (used only when ``answer_words`` is None).
    answer_words : str or pair of str, optional
        ``"concept,opposite"`` or a pair; two non-empty words that differ (ignoring case).

    Returns
    -------
    (str, str)
        The concept word and its opposite, stripped of surrounding spaces.
    """
    if answer_words is None:
        pairs = answer_pairs()
        if dataset not in pairs:
            raise ValueError(f"answer_words (--answer-words) are needed: dataset {dataset!r} has no answer pair "
                             f"(known: {', '.join(pairs)}); give the concept word and its opposite, e.g. "
                             "'Yes,No'")
        return pairs[dataset]
    words = tuple(answer_words.split(",")) if isinstance(answer_words, str) else tuple(answer_words)
    if len(words) != 2 or not all(isinstance(w, str) and w.strip() for w in words):
        raise ValueError(f"answer_words (--answer-words) must be two non-empty words (concept, opposite), got "
                         f"{answer_words!r}")
    words = tuple(w.strip() for w in words)
    if words[0].lower() == words[1].lower():
        raise ValueError(f"answer_words (--answer-words) must differ, got {words}")
    return words


def answer_word_variants(word: str) -> list:
    """The spellings of an answer word the read-out counts: every case and a leading-space variant of each.

    Parameters
    ----------
    word : str
        The answer word as the dataset gives it.

    Returns
    -------
    list of str
        As given, lower case, capitalised and upper case (duplicates dropped), each bare and after one space.

    Examples
    --------
    >>> answer_word_variants("yes")
    ['yes', ' yes', 'Yes', ' Yes', 'YES', ' YES']
    """
    cases = dict.fromkeys([word, word.lower(), word.capitalize(), word.upper()])
    return [prefix + w for w in cases for prefix in ("", " ")]


def answer_token_ids(tokenizer, answer_words) -> tuple:
    """Token ids of the concept and opposite answer words: every case (as given, lower, capitalised, upper) and
    leading-space variant that is one token of the vocabulary (not the unknown token).

    Parameters
    ----------
    tokenizer : transformers tokenizer
        Encodes each variant without special tokens.
    answer_words : (str, str)
        The concept word and its opposite (:func:`check_answer_words`).

    Returns
    -------
    (list of int, list of int)
        The concept's token ids and the opposite's, disjoint; ``ValueError`` when a word has no one-token
        variant, is a special token (``<pad>``, ``<eos>``, any of ``tokenizer.all_special_tokens``) or the two
        share a token.

    Examples
    --------
    >>> from empirical.testing import tiny_tokenizer
    >>> tok = tiny_tokenizer()
    >>> [tok.convert_ids_to_tokens(ids) for ids in answer_token_ids(tok, ("Yes", "No"))]
    [['yes'], ['no']]
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    special_tokens = set(getattr(tokenizer, "all_special_tokens", None) or ())
    special_ids = set(getattr(tokenizer, "all_special_ids", None) or ()) - {unk}  # unknown: no variant, below
    out = []
    for word in answer_words:
        if word.strip() in special_tokens or any(
                set(tokenizer(v, add_special_tokens=False)["input_ids"]) & special_ids
                and len(tokenizer(v, add_special_tokens=False)["input_ids"]) == 1 for v in answer_word_variants(word)):
            raise ValueError(f"answer word {word!r} (--answer-words) is a special token of this tokenizer "
                             f"({sorted(special_tokens)}); the read-out compares words the model says, not padding "
                             "or end-of-sequence")
        ids = []
        for variant in answer_word_variants(word):
            enc = tokenizer(variant, add_special_tokens=False)["input_ids"]
            if len(enc) == 1 and enc[0] != unk and enc[0] not in ids:
                ids.append(int(enc[0]))
        if not ids:
            raise ValueError(f"answer word {word!r} (--answer-words) is not one token of this tokenizer in any case or "
                             f"leading-space variant ({answer_word_variants(word)}); choose answer words the model can "
                             "say in one token")
        out.append(ids)
    shared = set(out[0]) & set(out[1])
    if shared:
        raise ValueError(f"answer words {tuple(answer_words)} (--answer-words) share tokens {sorted(shared)}")
    return out[0], out[1]


def answer_logodds(logprobs: torch.Tensor, concept_ids, opposite_ids) -> tuple:
    """LD = logsumexp over concept tokens - logsumexp over opposite tokens, and the answer mass, per row of a
    (B, V) log-probability matrix (float64 numpy arrays).

    Parameters
    ----------
    logprobs : torch.Tensor (B, V)
        Natural-log next-token probabilities (e.g. a log-softmax), one row per prompt.
    concept_ids, opposite_ids : sequence of int
        Token ids of the concept and opposite answer words (:func:`answer_token_ids`).

    Returns
    -------
    (ndarray (B,), ndarray (B,))
        LD in nats (positive: the concept words are more likely), and the answer mass
        P(concept words) + P(opposite words).
    """
    lp = logprobs.double()
    a = torch.logsumexp(lp[:, list(concept_ids)], dim=1)
    b = torch.logsumexp(lp[:, list(opposite_ids)], dim=1)
    return (a - b).cpu().numpy(), (a.exp() + b.exp()).cpu().numpy()


def distinct_ngram_ratio(ids, n: int = 2) -> float:
    """Unique n-grams / n-grams of a token sequence (1.0 when it has fewer than ``n`` tokens).

    Parameters
    ----------
    ids : iterable of hashable
        The token sequence (token ids).
    n : int
        N-gram length.

    Returns
    -------
    float
        In (0, 1]; 1.0 when every n-gram is distinct.

    Examples
    --------
    >>> distinct_ngram_ratio([1, 2, 1, 2, 1, 2]), distinct_ngram_ratio([1, 2, 3, 4]), distinct_ngram_ratio([7])
    (0.4, 1.0, 1.0)
    """
    ids = list(ids)
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def vader_scores(texts, mask_words=()) -> np.ndarray:
    """VADER compound scores of ``texts`` after removing ``mask_words`` (case-insensitive, whole words): a
    lexicon scorer reads the label words themselves ("Positive" +0.56).

    Parameters
    ----------
    texts : iterable of str
        The texts to score.
    mask_words : sequence of str
        Words replaced by a space before scoring (none by default).

    Returns
    -------
    ndarray of float
        VADER's compound score per text, in [-1, 1] (positive: positive sentiment).
    """
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError as exc:
        raise ImportError("scoring open-ended sentiment needs vaderSentiment (pip install 'raptor-probes[steer]')") \
            from exc
    analyzer = SentimentIntensityAnalyzer()
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in mask_words) + r")\b", re.I) if mask_words else None
    return np.array([analyzer.polarity_scores(pattern.sub(" ", t) if pattern else t)["compound"] for t in texts])


def check_answer_mass(mass, stem, answer_words) -> None:
    """Refuse a stem after which the answer words get (almost) no probability.

    Parameters
    ----------
    mass : array_like
        Unsteered answer mass of the first prompts (P(concept words) + P(opposite words)).
    stem : str
        The answer stem, for the message.
    answer_words : (str, str)
        The answer pair, for the message.

    Raises
    ------
    ValueError
        When a mass is not finite or the mean mass is below :data:`MIN_MASS_STEM`, naming ``--stem``.
    """
    if not np.all(np.isfinite(mass)) or float(np.mean(mass)) < MIN_MASS_STEM:
        raise ValueError(f"the stem (--stem) {stem!r} gives the answer words {tuple(answer_words)} no probability mass "
                         f"(mean {float(np.mean(mass)):.2e} on the first prompts); choose a stem after which the model "
                         "answers with them")


def read_out_validity(logodds, labels, mass) -> tuple:
    """Whether the unsteered answer read-out tracks the concept.

    Parameters
    ----------
    logodds : array of shape (n,)
        Unsteered answer log-odds LD of each prompt (concept words minus opposite words, nats).
    labels : array of shape (n,)
        The prompts' labels (1: the concept, 0: its opposite).
    mass : array of shape (n,)
        Unsteered answer mass P(concept words) + P(opposite words) of each prompt.

    Returns
    -------
    (auc, p_value, mean_mass, measurable)
        The AUC of LD against the labels, the one-sided Mann-Whitney p-value of "LD is larger on concept
        prompts" (:func:`scipy.stats.mannwhitneyu`; NaN with one class), the mean mass, and ``measurable``: AUC at
        least :data:`MIN_AUC`, p at most :data:`MAX_AUC_P` and mean mass at least :data:`MIN_MASS`.

    Examples
    --------
    >>> auc, p, mass, ok = read_out_validity([0.1, 0.9, 0.2, 0.8] * 10, [0, 1, 0, 1] * 10, [0.3] * 40)
    >>> auc, ok
    (1.0, True)
    >>> read_out_validity([0.5, 0.6, 0.4, 0.5] * 10, [0, 1, 1, 0] * 10, [0.3] * 40)[3]
    False
    """
    logodds = check_vector(logodds, "logodds")
    labels = check_vector(labels, "labels", size=logodds.size)
    mass = check_vector(mass, "mass", size=logodds.size)
    mean_mass = float(mass.mean()) if mass.size else math.nan
    if len(np.unique(labels)) != 2:
        return math.nan, math.nan, mean_mass, False
    test = stats.mannwhitneyu(logodds[labels == 1], logodds[labels == 0], alternative="greater")
    auc = float(roc_auc_score(labels, logodds))
    p_value = float(test.pvalue)
    return auc, p_value, mean_mass, validity_decision(auc, p_value, mean_mass)


def validity_decision(auc: float, p_value: float, mean_mass: float) -> bool:
    """The read-out validity rule: AUC at least :data:`MIN_AUC`, p at most :data:`MAX_AUC_P` and mean mass at least
    :data:`MIN_MASS` (NaN fails). ``p_value`` is the test's own p or, over several datasets, its multiplicity-adjusted
    p (``paper_figures.steering_text.holm_validity``).

    Parameters
    ----------
    auc : float in [0, 1] or NaN
        AUC of the unsteered answer log-odds against the labels.
    p_value : float in [0, 1] or NaN
        The one-sided Mann-Whitney p of the read-out (own or adjusted).
    mean_mass : float >= 0 or NaN
        Mean unsteered answer mass.

    Returns
    -------
    bool
        Whether the read-out is valid (the dataset is measurable).

    Examples
    --------
    >>> validity_decision(0.8, 0.001, 0.2), validity_decision(0.8, 0.03, 0.2)
    (True, False)
    """
    auc = check_scalar(auc, "auc", low=0.0, high=1.0, allow_nan=True)
    p_value = check_scalar(p_value, "p_value", low=0.0, high=1.0, allow_nan=True)
    mean_mass = check_scalar(mean_mass, "mean_mass", low=0.0, allow_nan=True)
    return bool(auc >= MIN_AUC and p_value <= MAX_AUC_P and mean_mass >= MIN_MASS)
