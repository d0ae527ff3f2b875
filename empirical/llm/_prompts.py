"""Which held-out prompts steering is measured on: a balanced selection alternating the classes
(:func:`select_prompts`) and its split into a selection half and a report half (:func:`split_halves`).
"""
from __future__ import annotations

import numpy as np

from empirical.common.checks import check_int

#: Most prompts :func:`split_halves` splits (a steering evaluation reads each one through the model).
MAX_PROMPTS = 10_000_000

__all__ = ["select_prompts", "split_halves"]


def select_prompts(labels, candidates, n: int, prompt_class="both") -> np.ndarray:
    """Indices of ``n`` steering prompts among ``candidates`` (e.g. the test split).

    Parameters
    ----------
    labels : array of shape (N,)
        Binary 0/1 labels of all examples.
    candidates : array of int
        Indices to choose from, in their order.
    n : int
        How many prompts (fewer if there are fewer candidates).
    prompt_class : "both", 0 or 1
        ``"both"`` alternates the two classes, class 0 first, so any ``n`` is balanced, then continues
        with the rest of the larger class; 0 or 1 takes that class only.

    Returns
    -------
    ndarray of int
        Up to ``n`` entries of ``candidates`` (indices into ``labels``), in the order described above.

    Examples
    --------
    >>> select_prompts(np.array([0, 0, 0, 1, 1]), np.arange(5), 4)
    array([0, 3, 1, 4])
    >>> select_prompts(np.array([0, 0, 0, 1, 1]), np.arange(5), 5, prompt_class=1)
    array([3, 4])
    """
    labels = np.asarray(labels)
    candidates = np.asarray(candidates, dtype=int)
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if prompt_class == "both":
        zeros, ones = candidates[labels[candidates] == 0], candidates[labels[candidates] == 1]
        k = min(len(zeros), len(ones))
        order = np.r_[np.column_stack([zeros[:k], ones[:k]]).ravel(), zeros[k:], ones[k:]].astype(int)
    elif prompt_class in (0, 1):
        order = candidates[labels[candidates] == prompt_class]
    else:
        raise ValueError(f"prompt_class must be 'both', 0 or 1, got {prompt_class!r}")
    return order[: int(n)]


def split_halves(n: int) -> np.ndarray:
    """Half of each of ``n`` prompts ordered as :func:`~empirical.llm.select_prompts` alternates the
    classes: consecutive pairs go to 'selection' and 'report' in turn, so both halves stay balanced.

    Parameters
    ----------
    n : int
        Number of prompts.

    Returns
    -------
    ndarray of str (n,)
        ``'selection'`` or ``'report'`` per prompt.

    Examples
    --------
    >>> split_halves(6).tolist()
    ['selection', 'selection', 'report', 'report', 'selection', 'selection']
    """
    n = check_int(n, "n", minimum=0, maximum=MAX_PROMPTS)
    return np.where((np.arange(n) // 2) % 2 == 0, "selection", "report")
