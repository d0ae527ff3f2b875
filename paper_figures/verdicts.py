"""One family of verdict rules for the claims table, fixed before any number is read.

Every tested claim is one of four kinds, each with its own null hypothesis (the claim being false) and a
one-sided p-value for it; a verdict is ``holds`` when that p-value, Holm-adjusted over all tested rows of the
table (:func:`holm`), is below :data:`ALPHA` = (1 - LEVEL) / 2 = 0.025, ``does not hold`` when the data establish
the opposite at the same level (per claim), ``inconclusive`` otherwise.  A one-sided test at 0.025 is the same as
the printed two-sided 95 % interval excluding the null, so a verdict never disagrees with its interval.
Intervals printed next to a verdict are per-claim 95 % intervals; the Holm step only decides which ``holds``
survive the number of claims tested.

- **Superiority** ("RAPTOR beats GCS"): the paired difference's interval lies above 0
  (:func:`superiority`); the opposite is established when it lies below 0.
- **Non-inferiority** ("matches or exceeds", "competitive", "beats or ties"): the lower bound lies above
  ``-margin``, the margin fixed in advance (:data:`MARGINS`: 1 accuracy point, 0.02 stability)
  (:func:`non_inferiority`); the opposite (inferiority beyond the margin) when the upper bound is below
  ``-margin``.
- **Majority** ("in 26/42 settings"): a count over datasets with a one-sided binomial (sign) test against
  one half (:func:`majority`); with six datasets only 6/6 can reach ``holds`` (p = 1/64) and 0/6 ``does not
  hold``; with five, none can (p = 1/32 > 0.025).
- **Every setting** ("in every setting"): an intersection-union test (Berger 1982): it holds when every
  setting's own test holds, so its p-value is the largest of theirs, and does not hold when any setting
  establishes the opposite (:func:`every_setting`).

Rows that cannot fail (true by construction, guaranteed by the data's size, ordinary CLT behaviour) and
descriptions get the verdict ``--`` and no p-value.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95
#: One-sided significance level of every rule: a 95 % two-sided interval lies above the null exactly when the
#: one-sided p-value is below 0.025.
ALPHA = (1.0 - LEVEL) / 2.0
#: Non-inferiority margins, fixed before the run (docs/results.md): accuracy in [0, 1] (1 point), mean |cos|,
#: and the coverage of 95 % Monte Carlo intervals by a theory (at least 0.90).
MARGINS = {"accuracy": 0.01, "stability": 0.02, "coverage": 0.05}
HOLDS, FAILS, INCONCLUSIVE, UNTESTED = "holds", "does not hold", "inconclusive", "--"

__all__ = ["seed_interval", "mean_interval", "wilson_interval", "TEST_TRAIN_RATIO", "Test", "superiority",
           "non_inferiority", "majority", "every_setting", "holm", "apply_holm",
           "t_test_from_interval", "MARGINS", "LEVEL", "ALPHA", "HOLDS", "FAILS", "INCONCLUSIVE", "UNTESTED"]


@dataclass(frozen=True)
class Test:
    """A claim's test: ``p`` the one-sided p-value of the claim's null, ``p_opposite`` that of its opposite,
    and the unadjusted ``verdict`` at :data:`LEVEL`.

    Attributes
    ----------
    rule : str
        ``superiority``, ``non-inferiority (margin m)``, ``majority`` (or ``share above s``) or
        ``every setting (...)``.
    p, p_opposite : float
        One-sided p-values (NaN when the data cannot test the claim, e.g. one split seed).
    verdict : str
        ``holds`` (p < :data:`ALPHA`) / ``does not hold`` (p_opposite < ALPHA) / ``inconclusive``, before the
        Holm step (a property).

    Examples
    --------
    >>> Test("superiority", 0.001, 0.999).verdict, Test("superiority", 0.5, 0.5).verdict
    ('holds', 'inconclusive')
    """

    rule: str
    p: float
    p_opposite: float

    @property
    def verdict(self) -> str:
        if np.isfinite(self.p) and self.p < ALPHA:
            return HOLDS
        if np.isfinite(self.p_opposite) and self.p_opposite < ALPHA:
            return FAILS
        return INCONCLUSIVE


#: Test share over training share (train + validation) of the paper's 60/20/20 split.
TEST_TRAIN_RATIO = 0.2 / 0.8


def seed_interval(values, level: float = LEVEL, test_train_ratio: float = TEST_TRAIN_RATIO) -> tuple:
    """Mean and corrected resampled t-interval (Nadeau & Bengio 2003) of per-split-seed values.

    Parameters
    ----------
    values : array-like of shape (k,)
        One value per split seed (an accuracy, or a paired difference of accuracies).
    level : float, default=LEVEL
        Confidence level.
    test_train_ratio : float, default=TEST_TRAIN_RATIO
        n_test / n_train of each split (the correction for overlapping training sets).

    Returns
    -------
    (mean, low, high) : floats
        Non-finite values are dropped first; low = high = mean when all values are equal; NaN bounds for fewer
        than 2 values (and a NaN mean for none).

    Examples
    --------
    >>> [round(x, 4) for x in seed_interval([0.80, 0.82, 0.81, 0.83, 0.79])]
    [0.81, 0.7806, 0.8394]
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return (float(v.mean()) if v.size else np.nan, np.nan, np.nan)
    mean, k = float(v.mean()), v.size
    half = stats.t.ppf(0.5 + level / 2, k - 1) * np.sqrt(v.var(ddof=1) * (1.0 / k + test_train_ratio))
    return mean, float(mean - half), float(mean + half)


def mean_interval(values, level: float = LEVEL) -> tuple:
    """Mean and plain t-interval of independent values (:func:`seed_interval` without the overlap correction):
    (mean, low, high); NaN bounds for fewer than 2 values.

    Parameters
    ----------
    values : array-like
        The values (non-finite ones dropped).
    level : float, default=LEVEL
        Confidence level.

    Returns
    -------
    (mean, low, high) : floats
        As :func:`seed_interval`.

    Examples
    --------
    >>> m, lo, hi = mean_interval([1.0, 2.0, 3.0])
    >>> m, round(lo, 3), round(hi, 3)
    (2.0, -0.484, 4.484)
    """
    return seed_interval(values, level, test_train_ratio=0.0)


def wilson_interval(successes: int, n: int, level: float = LEVEL) -> tuple:
    """Share and Wilson score interval of a proportion (``scipy.stats.binomtest``): (share, low, high).

    Parameters
    ----------
    successes : int
        Successes, 0 <= successes <= n.
    n : int
        Trials.
    level : float, default=LEVEL
        Confidence level.

    Returns
    -------
    (share, low, high) : floats
        ``successes / n`` and the interval; NaN for ``n <= 0``.

    Examples
    --------
    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.8, 0.49, 0.943]
    """
    if n <= 0:
        return np.nan, np.nan, np.nan
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return successes / n, float(ci.low), float(ci.high)


def t_test_from_interval(mean: float, low: float, high: float, df: float, level: float = LEVEL,
                         shift: float = 0.0) -> tuple:
    """One-sided p-values of ``mean > shift`` and ``mean < shift`` recovered from a symmetric t interval.

    The interval ``mean ± t_{df} se`` (e.g. :func:`seed_interval`'s corrected resampled interval) gives ``se``;
    the statistic ``(mean - shift) / se`` is then compared with the t distribution with ``df`` degrees of
    freedom.

    Parameters
    ----------
    mean, low, high : float
        The estimate and its symmetric interval.
    df : float
        Degrees of freedom of the interval's t quantile (>= 1; e.g. the number of split seeds minus 1).
    level : float, default=LEVEL
        The interval's confidence level.
    shift : float, default=0.0
        The null value.

    Returns
    -------
    (p_greater, p_less) : floats
        One-sided p-values of ``mean > shift`` and ``mean < shift``; NaN, NaN without a finite interval or
        with ``df < 1``; (0, 1) or (1, 0) by the sign alone for a zero-width interval.

    Examples
    --------
    >>> p_gt, p_lt = t_test_from_interval(1.0, 0.0, 2.0, df=1e9)  # half-width 1 = 1.96 se
    >>> round(p_gt, 3), round(p_lt, 3)
    (0.025, 0.975)
    """
    if not (np.isfinite(mean) and np.isfinite(low) and np.isfinite(high) and df >= 1):
        return float("nan"), float("nan")
    half = 0.5 * (high - low)
    q = stats.t.ppf(0.5 + level / 2, df)
    if half <= 0:  # no spread: the sign decides exactly
        return (0.0, 1.0) if mean > shift else ((1.0, 0.0) if mean < shift else (1.0, 1.0))
    t = (mean - shift) / (half / q)
    return float(stats.t.sf(t, df)), float(stats.t.cdf(t, df))


def superiority(mean, low, high, df, direction: int = 1) -> Test:
    """The claim ``direction * effect > 0`` from a t interval of the effect (see :func:`t_test_from_interval`).

    Parameters
    ----------
    mean, low, high : float
        The effect (e.g. a paired accuracy difference) and its interval.
    df : float
        Degrees of freedom of the interval.
    direction : {1, -1}, default=1
        1: the claim is effect > 0; -1: effect < 0.

    Returns
    -------
    Test
        Rule ``"superiority"``.

    Examples
    --------
    >>> superiority(0.02, 0.01, 0.03, df=4).verdict
    'holds'
    """
    p_gt, p_lt = t_test_from_interval(mean, low, high, df)
    p, p_opp = (p_gt, p_lt) if direction > 0 else (p_lt, p_gt)
    return Test("superiority", p, p_opp)


def non_inferiority(mean, low, high, df, margin: float, direction: int = 1) -> Test:
    """The claim ``direction * effect > -margin`` (e.g. RAPTOR at most ``margin`` worse); the opposite is
    ``direction * effect < -margin``.

    Parameters
    ----------
    mean, low, high : float
        The effect and its interval.
    df : float
        Degrees of freedom of the interval.
    margin : float
        The non-inferiority margin, >= 0 (:data:`MARGINS`).
    direction : {1, -1}, default=1
        -1 flips the effect (the claim is then effect < margin).

    Returns
    -------
    Test
        Rule ``"non-inferiority (margin m)"``.

    Examples
    --------
    >>> non_inferiority(-0.005, -0.008, -0.002, df=4, margin=0.01).verdict
    'holds'
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    if direction < 0:
        mean, low, high = -mean, -high, -low
    p, p_opp = t_test_from_interval(mean, low, high, df, shift=-margin)
    return Test(f"non-inferiority (margin {margin:g})", p, p_opp)


def majority(successes: int, n: int, share: float = 0.5) -> Test:
    """The claim "in more than ``share`` of the settings" (default: most): ``successes`` of ``n``, one-sided
    binomial tests against ``share`` (a coverage claim uses its floor, e.g. 0.90).

    Parameters
    ----------
    successes : int
        Settings where the claim's direction was seen.
    n : int
        Settings (NaN p-values when n < 1).
    share : float, default=0.5
        The share under the null.

    Returns
    -------
    Test
        Rule ``"majority"`` (``"share above s"`` for another share).

    Examples
    --------
    >>> majority(6, 6).p, majority(5, 5).verdict
    (0.015625, 'inconclusive')
    """
    rule = "majority" if share == 0.5 else f"share above {share:.2f}"
    if n < 1:
        return Test(rule, float("nan"), float("nan"))
    k = int(successes)
    p = float(stats.binomtest(k, n, share, alternative="greater").pvalue)
    p_opp = float(stats.binomtest(k, n, share, alternative="less").pvalue)
    return Test(rule, p, p_opp)


def every_setting(tests) -> Test:
    """Intersection-union test over settings: p = the largest setting p (NaN if any is NaN); the opposite is
    established when any setting establishes its opposite (p_opposite = the smallest).

    Parameters
    ----------
    tests : iterable of Test
        One test per setting (the rule of the first names the combined rule).

    Returns
    -------
    Test
        Rule ``"every setting (<rule>, <k> settings)"``; NaN p-values for no settings.
    """
    tests = list(tests)
    if not tests:
        return Test("every setting", float("nan"), float("nan"))
    ps = np.array([t.p for t in tests], dtype=float)
    p = float(ps.max()) if np.all(np.isfinite(ps)) else float("nan")
    opp = np.array([t.p_opposite for t in tests], dtype=float)
    p_opp = float(np.nanmin(opp)) if np.any(np.isfinite(opp)) else float("nan")
    return Test(f"every setting ({tests[0].rule}, {len(tests)} settings)", p, p_opp)


def holm(pvalues) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1); NaN entries stay NaN and do not
    count.

    Parameters
    ----------
    pvalues : array-like of float
        The raw p-values.

    Returns
    -------
    ndarray
        The adjusted p-values, in the order given.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03, float("nan")]).round(2).tolist()
    [0.03, 0.06, 0.06, nan]
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = idx.size
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def apply_holm(tests) -> tuple:
    """Holm step over a table's tests (None for an untested row): returns (adjusted p-values, verdicts).

    A claim keeps ``holds`` only if its Holm-adjusted p-value is below :data:`ALPHA`; ``does not hold`` and
    ``inconclusive`` are per claim; untested rows get ``--``.

    Parameters
    ----------
    tests : sequence of Test or None
        One per row of the table.

    Returns
    -------
    (adjusted, verdicts) : (ndarray, list of str)
        Holm-adjusted p-values (NaN for untested rows) and the final verdicts.

    Examples
    --------
    >>> adjusted, verdicts = apply_holm([superiority(0.02, 0.01, 0.03, df=4), None, majority(3, 6)])
    >>> verdicts
    ['holds', '--', 'inconclusive']
    """
    p = np.array([t.p if t is not None else np.nan for t in tests], dtype=float)
    adjusted = holm(p)
    verdicts = []
    for t, pa in zip(tests, adjusted):
        if t is None:
            verdicts.append(UNTESTED)
        elif np.isfinite(pa) and pa < ALPHA:
            verdicts.append(HOLDS)
        elif t.verdict == FAILS:
            verdicts.append(FAILS)
        else:
            verdicts.append(INCONCLUSIVE)
    return adjusted, verdicts
