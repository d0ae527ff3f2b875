"""One family of verdict rules for the claims table, fixed before any number is read.

Every tested claim is one of five kinds, each with its own null hypothesis (the claim being false) and a
one-sided p-value for it, and one for the opposite.  The verdict rules:

- **Families.** Each row belongs to one test family (:data:`FAMILIES`): the paper's claims (primary), the same
  claims on another grid or protocol (robustness duplicates), and the project's own extensions.  The Holm step
  (:func:`holm`) runs within a family, never across families.
- **One rule both ways.** A claim ``holds`` when its Holm-adjusted p-value is below :data:`ALPHA` =
  (1 - LEVEL) / 2 = 0.025, and ``does not hold`` when the Holm-adjusted p-value of its opposite is below the same
  level (:func:`apply_holm`); ``inconclusive`` otherwise.  The per-claim verdict (:attr:`Test.verdict`) applies
  the same rule to the raw p-values.  A one-sided test at 0.025 is the same as the printed two-sided 95 % interval
  excluding the null, so a per-claim verdict never disagrees with its interval.
- **Decidable designs only.** A claim whose design cannot give a p-value below :data:`ALPHA` (a sign test over
  five datasets: its smallest p is 1/32) gets ``--`` and the reason, never ``inconclusive``
  (:attr:`Test.decidable`).  Reachability is judged after the family correction (:func:`in_families`): a design
  whose smallest p times its family's size is at or above :data:`ALPHA` (six datasets: 1/64; 100 permutation
  draws: 1/101, in families of several tests) passes the Holm step only when other claims of its family hold
  first, and gets ``--`` too.  So does a design that cannot detect the paper's own effect at :data:`POWER`
  (``Test.paper_effect``).  Every tested row states its minimal detectable effect at :data:`POWER` (``mde``),
  in the units of its tested quantity, so that a reader can tell "no effect" from "too small a study".

The kinds:

- **Superiority** ("RAPTOR beats GCS"): the paired difference's interval lies above 0
  (:func:`superiority`); the opposite is established when it lies below 0.
- **Non-inferiority** ("matches or exceeds", "competitive", "beats or ties"): the lower bound lies above
  ``-margin``, the margin fixed in advance (:data:`MARGINS`: 1 accuracy point, 0.02 stability)
  (:func:`non_inferiority`); the opposite (inferiority beyond the margin) when the upper bound is below
  ``-margin``.
- **Majority** ("in 26/42 settings"): a count over datasets with a one-sided binomial (sign) test against
  one half (:func:`majority`).  A dataset counts for the claim only when its own interval lies on the claim's side
  of the threshold, and against it only when its interval lies on the other side (undecided datasets count for
  neither); with six datasets only 6/6 reaches p < 0.025 (p = 1/64), and not after the Holm step of a family
  of two or more tests (``--``); with five, none can (``--``).
- **Every setting** ("in every setting"): an intersection-union test (Berger 1982): it holds when every
  setting's own test holds, so its p-value is the largest of theirs; the opposite ("some setting is the other
  way") is a union, so its p-value is the smallest of theirs times the number of settings (Bonferroni)
  (:func:`every_setting`).
- **Permutation rank** (steering): the claim's statistic ranked among ``N`` draws of the null, p = (1 + #{null >=
  statistic}) / (1 + N) (computed by :func:`empirical.llm._steering_null.rank_p_value`; its Test carries
  ``min_p = 1 / (1 + N)``).

Rows that cannot fail (true by construction, guaranteed by the data's size, ordinary CLT behaviour) and
descriptions get the verdict ``--`` and no p-value.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy import stats

from empirical.common.checks import check_int, check_scalar

LEVEL = 0.95
#: One-sided significance level of every rule: a 95 % two-sided interval lies above the null exactly when the
#: one-sided p-value is below 0.025.
ALPHA = (1.0 - LEVEL) / 2.0
#: Non-inferiority margins, fixed before the run (docs/results.md): accuracy in [0, 1] (1 point), mean |cos|,
#: and the coverage of 95 % Monte Carlo intervals by a theory (at least 0.90).
MARGINS = {"accuracy": 0.01, "stability": 0.02, "coverage": 0.05}
HOLDS, FAILS, INCONCLUSIVE, UNTESTED = "holds", "does not hold", "inconclusive", "--"
#: Power at which a tested row states its minimal detectable effect.
POWER = 0.80
#: Most settings a count (sign test) may have (its binomial tables stay small).
MAX_SETTINGS = 10 ** 6
#: The test families of the claims table, in the order RESULTS.md lists them: family -> what it holds.  The Holm
#: step runs within each family.
FAMILIES = {"paper": "the paper's claims on the paper's grid and protocol (primary family)",
            "robustness": "the same claims on another grid or protocol: without Cities and Counterfact, equal data "
                          "(robustness)",
            "extension": "the project's own claims: the spectral theory, learning curves, behavioural steering, "
                         "the two-replica theory (extensions)"}


@dataclass(frozen=True)
class Test:
    """A claim's test: ``p`` the one-sided p-value of the claim's null, ``p_opposite`` that of its opposite,
    what the design can detect, and the unadjusted ``verdict`` at :data:`LEVEL`.

    Attributes
    ----------
    rule : str
        ``superiority``, ``non-inferiority (margin m)``, ``majority`` (or ``share above s``),
        ``every setting (...)`` or ``permutation rank``.
    p, p_opposite : float
        One-sided p-values (NaN when the data cannot test the claim, e.g. one split seed).
    min_p : float, default=0.0
        The smallest p-value the design can give (a sign test over n settings: 0.5 ** n; a permutation test with N
        draws: 1 / (N + 1); 0 for a t test).  At or above :data:`ALPHA` the claim is not decidable.
    mde : float, default=NaN
        The minimal detectable effect at :data:`POWER` and one-sided level :data:`ALPHA`, in the claim's direction:
        an effect (the units of the tested difference) when ``mde_kind`` is ``"effect"``, the true share of
        settings when it is ``"share"``.
    mde_kind : {"effect", "share"}, default="effect"
        What ``mde`` measures.
    paper_effect : float, default=NaN
        The effect the paper reports for the claim, in ``mde``'s units and the claim's direction.  When both are
        finite and ``mde`` exceeds it, the design cannot decide the claim at the paper's effect size (power below
        :data:`POWER`) and the claim is not decidable.
    family_tests : int, default=1
        The number of tests in the claim's Holm family that can reach :data:`ALPHA` on their own (set by
        :func:`in_families`); it decides :attr:`reachable`.

    Examples
    --------
    >>> Test("superiority", 0.001, 0.999).verdict, Test("superiority", 0.5, 0.5).verdict
    ('holds', 'inconclusive')
    >>> Test("majority", 1 / 32, 1.0, min_p=1 / 32).verdict  # five datasets: a sign test cannot reach 0.025
    '--'
    """

    rule: str
    p: float
    p_opposite: float
    min_p: float = 0.0
    mde: float = float("nan")
    mde_kind: str = "effect"
    paper_effect: float = float("nan")
    family_tests: int = 1

    @property
    def reachable(self) -> bool:
        """Whether the design's smallest p passes its family's Holm step whatever the family's other claims do:
        ``family_tests * min_p < ALPHA`` (:func:`in_families`; the first Holm rank multiplies by the family's size).
        A design above it could hold only if other claims of its family held first."""
        return not (np.isfinite(self.min_p) and self.family_tests * self.min_p >= ALPHA)

    @property
    def powered(self) -> bool:
        """False when the design detects less than the paper's effect at :data:`POWER` (``mde > paper_effect``)."""
        return not (np.isfinite(self.paper_effect) and np.isfinite(self.mde) and self.mde > self.paper_effect)

    @property
    def decidable(self) -> bool:
        """Whether the design can decide the claim: :attr:`reachable` and :attr:`powered`."""
        return self.reachable and self.powered

    @property
    def verdict(self) -> str:
        """The per-claim verdict: ``--`` for a design that cannot decide, else ``holds`` (p < :data:`ALPHA`),
        ``does not hold`` (p_opposite < ALPHA) or ``inconclusive``."""
        if not self.decidable:
            return UNTESTED
        if np.isfinite(self.p) and self.p < ALPHA:
            return HOLDS
        if np.isfinite(self.p_opposite) and self.p_opposite < ALPHA:
            return FAILS
        return INCONCLUSIVE

    @property
    def reason(self) -> str:
        """Why the row has no verdict when :attr:`decidable` is False (empty otherwise)."""
        if not self.reachable and self.min_p < ALPHA:
            return (f"this design passes the Holm step of its family ({self.family_tests} tests) only if other "
                    f"claims of the family hold first (its smallest p {self.min_p:.3g} x {self.family_tests} = "
                    f"{self.family_tests * self.min_p:.3g})")
        if not self.reachable:
            return f"this design cannot reach p < {ALPHA:g} (its smallest p is {self.min_p:.3g})"
        if not self.powered:
            return (f"this design cannot decide at the paper's effect ({self.paper_effect:+.3g}): it detects "
                    f"{self.mde:+.3g} with {100 * POWER:.0f} % power")
        return ""


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


def clip_interval(low: float, high: float, bounds=(None, None)) -> tuple:
    """An interval's bounds clipped to the range its quantity can take: (low, high).

    A t-interval of a bounded quantity (a correlation in [-1, 1], an error or a share >= 0) can reach past the
    range with few cells; the part outside is impossible, so it is cut off (the coverage of the interval is
    unchanged).

    Parameters
    ----------
    low, high : float
        The interval, ``low <= high`` (NaN stays NaN).
    bounds : (float or None, float or None), default=(None, None)
        The quantity's range; None for no bound on that side.

    Returns
    -------
    (low, high) : floats

    Examples
    --------
    >>> clip_interval(-0.89, 1.75, (-1.0, 1.0))
    (-0.89, 1.0)
    """
    low, high = check_scalar(low, "low", allow_nan=True), check_scalar(high, "high", allow_nan=True)
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise ValueError(f"bounds must be a pair (lower or None, upper or None), got {bounds!r}")
    lo_bound, hi_bound = (None if b is None else check_scalar(b, f"bounds[{i}]") for i, b in enumerate(bounds))
    if low > high:
        raise ValueError(f"low must be at most high, got low={low} > high={high}")
    low = low if lo_bound is None or not np.isfinite(low) else max(low, lo_bound)
    high = high if hi_bound is None or not np.isfinite(high) else min(high, hi_bound)
    return float(low), float(high)


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
    n = check_int(n, "n", minimum=0)
    successes = check_int(successes, "successes", minimum=0)
    level = check_scalar(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    if successes > n:
        raise ValueError(f"successes must be at most n = {n}, got {successes}")
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
    mean, low, high = (check_scalar(v, name, allow_nan=True) for v, name in ((mean, "mean"), (low, "low"),
                                                                             (high, "high")))
    df = check_scalar(df, "df", allow_nan=True)
    level = check_scalar(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    shift = check_scalar(shift, "shift")
    if not (np.isfinite(mean) and np.isfinite(low) and np.isfinite(high) and df >= 1):
        return float("nan"), float("nan")
    half = 0.5 * (high - low)
    q = stats.t.ppf(0.5 + level / 2, df)
    if half <= 0:  # no spread: the sign decides exactly
        return (0.0, 1.0) if mean > shift else ((1.0, 0.0) if mean < shift else (1.0, 1.0))
    t = (mean - shift) / (half / q)
    return float(stats.t.sf(t, df)), float(stats.t.cdf(t, df))


def _direction(direction) -> int:
    """A claim's direction, 1 or -1; ValueError naming ``direction`` otherwise."""
    if isinstance(direction, (bool, np.bool_)) or direction not in (1, -1):
        raise ValueError(f"direction must be 1 or -1, got {direction!r}")
    return int(direction)


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
    direction = _direction(direction)
    p_gt, p_lt = t_test_from_interval(mean, low, high, df)
    p, p_opp = (p_gt, p_lt) if direction > 0 else (p_lt, p_gt)
    return Test("superiority", p, p_opp, mde=_t_mde(low, high, df))


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
    margin = check_scalar(margin, "margin", low=0.0)
    mean, low, high = (check_scalar(v, name, allow_nan=True) for v, name in ((mean, "mean"), (low, "low"),
                                                                             (high, "high")))
    direction = _direction(direction)
    if direction < 0:
        mean, low, high = -mean, -high, -low
    p, p_opp = t_test_from_interval(mean, low, high, df, shift=-margin)
    return Test(f"non-inferiority (margin {margin:g})", p, p_opp, mde=_t_mde(low, high, df) - margin)


def _t_mde(low, high, df, level: float = LEVEL) -> float:
    """The smallest true effect a one-sided t test at :data:`ALPHA` detects with probability :data:`POWER`, from
    a symmetric t interval of the estimate: (t_{1-ALPHA} + t_{POWER}) * se, se = half-width / t_{(1+level)/2}
    (NaN without a finite interval)."""
    if not (np.isfinite(low) and np.isfinite(high) and df >= 1):
        return float("nan")
    se = 0.5 * (high - low) / stats.t.ppf(0.5 + level / 2, df)
    return float((stats.t.ppf(1 - ALPHA, df) + stats.t.ppf(POWER, df)) * se)


def sign_test_mde(n: int, share: float = 0.5) -> float:
    """The smallest true share of settings at which the one-sided binomial test of :func:`majority` (``n``
    settings, null share ``share``) rejects at :data:`ALPHA` with probability :data:`POWER`; NaN when no count
    can reject.

    Parameters
    ----------
    n : int
        Settings.
    share : float, default=0.5
        The null share.

    Returns
    -------
    float
        The share, in (share, 1].

    Examples
    --------
    >>> round(sign_test_mde(6), 3)  # only 6/6 rejects: q ** 6 >= 0.8
    0.963
    >>> sign_test_mde(5)  # 5/5 gives p = 1/32: nothing rejects
    nan
    """
    n = check_int(n, "n", minimum=0)
    if n > MAX_SETTINGS:
        raise ValueError(f"n must be at most {MAX_SETTINGS} settings, got {n}")
    share = check_scalar(share, "share", low=0.0, high=1.0, low_open=True, high_open=True)
    if n < 1:
        return float("nan")
    k = np.arange(n + 1)
    rejecting = k[stats.binom.sf(k - 1, n, share) < ALPHA]  # P(X >= k) under the null
    if not rejecting.size:
        return float("nan")
    k_min = int(rejecting.min())
    lo, hi = share, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if stats.binom.sf(k_min - 1, n, mid) >= POWER else (mid, hi)
    return float(hi)


def majority(successes: int, n: int, share: float = 0.5, opposite: int | None = None) -> Test:
    """The claim "in more than ``share`` of the settings" (default: most): ``successes`` of ``n``, one-sided
    binomial tests against ``share`` (a coverage claim uses its floor, e.g. 0.90).

    Parameters
    ----------
    successes : int
        Settings that establish the claim's direction (for a comparison: whose own interval lies on the claim's
        side of the threshold, not just the point estimate).
    n : int
        Settings (NaN p-values when n < 1).
    share : float, default=0.5
        The share under the null.
    opposite : int, optional
        Settings that establish the other direction; the opposite ("at most ``share``") is tested on it.
        Default ``n - successes`` (every setting is decided, as for a coverage count).

    Returns
    -------
    Test
        Rule ``"majority"`` (``"share above s"`` for another share), with ``min_p = share ** n`` and the minimal
        detectable share (:func:`sign_test_mde`).

    Examples
    --------
    >>> majority(6, 6).p, majority(5, 5).verdict
    (0.015625, '--')
    """
    share = check_scalar(share, "share", low=0.0, high=1.0, low_open=True, high_open=True)
    n = check_int(n, "n", minimum=0)
    successes = check_int(successes, "successes", minimum=0)
    if opposite is not None:
        opposite = check_int(opposite, "opposite", minimum=0)
    if n > MAX_SETTINGS:
        raise ValueError(f"n must be at most {MAX_SETTINGS} settings, got {n}")
    rule = "majority" if share == 0.5 else f"share above {share:.2f}"
    if n < 1:
        return Test(rule, float("nan"), float("nan"))
    k = int(successes)
    against = n - k if opposite is None else int(opposite)
    if not (0 <= k <= n and 0 <= against <= n - k):
        raise ValueError(f"majority: successes and opposite must be counts of the {n} settings, got {k} and {against}")
    p = float(stats.binomtest(k, n, share, alternative="greater").pvalue)
    # the opposite: the share of settings going the other way is above 1 - share
    p_opp = float(stats.binomtest(against, n, 1.0 - share, alternative="greater").pvalue) if against else 1.0
    return Test(rule, p, p_opp, min_p=float(share ** n), mde=sign_test_mde(n, share), mde_kind="share")


def every_setting(tests) -> Test:
    """Intersection-union test over settings: p = the largest setting p (NaN if any is NaN); the opposite ("some
    setting goes the other way") is a union of the settings' opposites, so its p-value is the smallest of theirs
    times the number of settings (Bonferroni, capped at 1).

    Parameters
    ----------
    tests : iterable of Test
        One test per setting (the rule of the first names the combined rule).

    Returns
    -------
    Test
        Rule ``"every setting (<rule>, <k> settings)"``; NaN p-values for no settings.  Its ``min_p`` is the
        largest of the settings' (every one must be reachable) and its ``mde`` the largest of theirs (the effect
        each setting needs on its own; the power of the intersection is lower).

    Examples
    --------
    >>> every_setting([Test("s", 0.001, 0.999), Test("s", 0.01, 0.99)]).p
    0.01
    >>> every_setting([Test("s", 0.001, 0.02), Test("s", 0.3, 0.3)]).p_opposite  # 2 x 0.02
    0.04
    """
    tests = list(tests)
    if not tests:
        return Test("every setting", float("nan"), float("nan"))
    ps = np.array([t.p for t in tests], dtype=float)
    p = float(ps.max()) if np.all(np.isfinite(ps)) else float("nan")
    opp = np.array([t.p_opposite for t in tests], dtype=float)
    p_opp = float(min(1.0, len(tests) * np.nanmin(opp))) if np.any(np.isfinite(opp)) else float("nan")
    kinds = {t.mde_kind for t in tests}
    mdes = np.array([t.mde for t in tests], dtype=float)
    mde = float(np.nanmax(mdes)) if len(kinds) == 1 and np.any(np.isfinite(mdes)) else float("nan")
    return Test(f"every setting ({tests[0].rule}, {len(tests)} settings)", p, p_opp,
                min_p=float(max(t.min_p for t in tests)), mde=mde, mde_kind=tests[0].mde_kind)


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


def in_families(tests, families=None) -> list:
    """The tests with :attr:`Test.family_tests` set: the number of tests of each one's Holm family whose design
    can reach :data:`ALPHA` on its own (``min_p < ALPHA``).  Reachability is judged after the family correction: a
    test whose smallest p times the family's size is at or above ``ALPHA`` passes the Holm step only when other
    claims of its family hold first (six datasets' sign test, 1/64, in a family of two; 100 permutation draws,
    1/101, in a family of three), so its own data cannot decide it.

    Parameters
    ----------
    tests : sequence of Test or None
        One per row of the table.
    families : sequence of str, optional
        The family of each row; default one family for all.

    Returns
    -------
    list of Test or None
        The same tests (None stays None), each with ``family_tests`` set.

    Examples
    --------
    >>> t = in_families([superiority(0.02, 0.01, 0.03, df=4), majority(6, 6)])
    >>> [x.family_tests for x in t], t[1].decidable  # six datasets: smallest p 1/64, above 0.025 / 2
    ([2, 2], False)
    """
    tests = list(tests)
    families = ["all"] * len(tests) if families is None else list(families)
    if len(families) != len(tests):
        raise ValueError(f"in_families: {len(families)} families for {len(tests)} tests")
    alone = [t is not None and t.powered and not (np.isfinite(t.min_p) and t.min_p >= ALPHA) for t in tests]
    size = {family: sum(a for a, f in zip(alone, families) if f == family) for family in families}
    return [None if t is None else dataclasses.replace(t, family_tests=max(1, size[f]))
            for t, f in zip(tests, families)]


def apply_holm(tests, families=None) -> tuple:
    """The Holm step over a table's tests, within each family and both ways: returns (adjusted p-values,
    verdicts).

    A claim ``holds`` when its Holm-adjusted p-value is below :data:`ALPHA`, and ``does not hold`` when the
    Holm-adjusted p-value of its opposite is (the same rule, run over the family's opposite p-values); rows whose
    design cannot decide (:attr:`Test.decidable`) get ``--`` and do not count in the family; untested rows get
    ``--``.

    Parameters
    ----------
    tests : sequence of Test or None
        One per row of the table.
    families : sequence of str, optional
        The family of each row (:data:`FAMILIES`); default one family for all.

    Returns
    -------
    (adjusted, verdicts) : (ndarray, list of str)
        Holm-adjusted p-values of the claims (NaN for untested or undecidable rows) and the final verdicts.

    Examples
    --------
    >>> adjusted, verdicts = apply_holm([superiority(0.02, 0.01, 0.03, df=4), None, majority(3, 8)])
    >>> verdicts
    ['holds', '--', 'inconclusive']
    """
    tests = list(tests)
    families = ["all"] * len(tests) if families is None else list(families)
    if len(families) != len(tests):
        raise ValueError(f"apply_holm: {len(families)} families for {len(tests)} tests")
    tests = in_families(tests, families)
    counted = [t is not None and t.decidable for t in tests]
    p = np.array([t.p if c else np.nan for t, c in zip(tests, counted)], dtype=float)
    p_opp = np.array([t.p_opposite if c else np.nan for t, c in zip(tests, counted)], dtype=float)
    adjusted, adjusted_opp = np.full(p.shape, np.nan), np.full(p.shape, np.nan)
    for family in dict.fromkeys(families):
        rows = np.array([f == family for f in families])
        adjusted[rows], adjusted_opp[rows] = holm(p[rows]), holm(p_opp[rows])
    verdicts = []
    for c, pa, po in zip(counted, adjusted, adjusted_opp):
        if not c:
            verdicts.append(UNTESTED)
        elif np.isfinite(pa) and pa < ALPHA:
            verdicts.append(HOLDS)
        elif np.isfinite(po) and po < ALPHA:
            verdicts.append(FAILS)
        else:
            verdicts.append(INCONCLUSIVE)
    return adjusted, verdicts
