"""The one ablation protocol (cgmt.ablation): sizes, stratification, draw order, errors, and the
theory's finite-N overlap against the protocol's actual expected overlap (Monte Carlo)."""
import math

import numpy as np
import pytest
from _chance import rule_fails
from sklearn.model_selection import train_test_split

from cgmt.ablation import ablation_sizes, ablation_split, expected_ablation_overlap, protocol_fractions


def _pool(n_pos, n_neg, seed=0):
    y = np.r_[np.ones(n_pos), -np.ones(n_neg)]
    np.random.default_rng(seed).shuffle(y)
    return y


def test_sizes_disjointness_and_stratification():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(1000) < 0.3, 1.0, -1.0)
    train, val = ablation_split(y, np.random.SeedSequence(5))
    assert (len(train), len(val)) == (640, 160) == ablation_sizes(1000)[1:]
    assert np.intersect1d(train, val).size == 0 and len(np.unique(train)) == len(train)
    assert np.all(np.diff(train) > 0) and np.all(np.diff(val) > 0) and max(train.max(), val.max()) < 1000
    # the 80/20 re-split is stratified: the train part's class balance is the kept pool's up to rounding
    kept, empty = ablation_split(y, np.random.SeedSequence(5), val_fraction=0.0)
    assert len(kept) == 800 and empty.size == 0
    assert np.array_equal(np.union1d(train, val), kept)  # same permutation, then the re-split
    assert abs(np.mean(y[train] == 1) - np.mean(y[kept] == 1)) <= 1.5 / len(train)
    assert not np.array_equal(train, ablation_split(y, np.random.SeedSequence(6))[0])


def test_draw_order_is_permutation_then_integer_seed():
    """The draw order that fixes the runs for a given seed (the one sims used before the move)."""
    y = _pool(47, 56)
    for seed in range(5):
        gen = np.random.default_rng(seed)
        keep = np.sort(gen.permutation(y.size)[: y.size - round(0.2 * y.size)])
        ref_train, ref_val = train_test_split(keep, test_size=0.2, stratify=y[keep],
                                              random_state=int(gen.integers(2**31 - 1)))
        train, val = ablation_split(y, seed)
        assert np.array_equal(train, np.sort(ref_train)) and np.array_equal(val, np.sort(ref_val))
    # a Generator is advanced: consecutive calls are independent runs, reproducible from the seed
    gen_a, gen_b = np.random.default_rng(3), np.random.default_rng(3)
    runs_a = [ablation_split(y, gen_a)[0] for _ in range(3)]
    runs_b = [ablation_split(y, gen_b)[0] for _ in range(3)]
    assert all(np.array_equal(a, b) for a, b in zip(runs_a, runs_b))
    assert not np.array_equal(runs_a[0], runs_a[1])


@pytest.mark.parametrize("kwargs, match", [
    (dict(drop=1.0), "drop"), (dict(drop=-0.1), "drop"), (dict(drop="a"), "drop"),
    (dict(val_fraction=1.0), "val_fraction"), (dict(val_fraction=float("nan")), "val_fraction"),
    (dict(rng="seed"), "rng"), (dict(rng=-1), "rng"),
    (dict(y=np.ones((4, 2))), "y"), (dict(y=np.array([])), "y"), (dict(y=np.array([0.0, np.nan, 1.0])), "y"),
])
def test_bad_arguments_are_named(kwargs, match):
    args = dict(y=_pool(37, 23), rng=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ablation_split(**args)


def test_impossible_stratification_is_a_clear_error():
    # one example of class 1: it cannot be in both parts of a stratified re-split
    with pytest.raises(ValueError, match=r"y must have at least 2 kept samples of each class"):
        ablation_split(np.r_[np.zeros(20), 1.0], 0)
    # 5 kept samples, 20%: one validation sample for two classes
    with pytest.raises(ValueError, match="val_fraction must leave at least one validation"):
        ablation_split(np.r_[np.zeros(3), np.ones(3)], 0, drop=0.0, val_fraction=0.1)
    # without the re-split any labels go
    assert ablation_split(np.r_[np.zeros(20), 1.0], 0, val_fraction=0.0)[0].size == 17
    with pytest.raises(ValueError, match="n_pos and n_neg"):
        expected_ablation_overlap(30, 3)  # round(0.2 * 33) = 7 dropped: class 2 may vanish


def _mean_pairwise_overlap(y, rng, draws, **protocol):
    """Mean |T_a cap T_b| over all ordered pairs a != b of ``draws`` independent runs.

    With c_i the number of runs whose training set holds sample i, sum_i c_i (c_i - 1) counts every
    shared sample of every ordered pair once; the pairs' overlaps are each unbiased for E|T1 cap T2|,
    so the mean is too (a U-statistic, far less noisy than independent pairs).
    """
    counts = np.zeros(y.size)
    for _ in range(draws):
        train, _ = ablation_split(y, rng, **protocol)
        counts[train] += 1
    return float(np.sum(counts * (counts - 1)) / (draws * (draws - 1)))


def _monte_carlo_overlap(n_pos, n_neg, seed, *, batches=10, draws=200, **protocol):
    """(mean, standard error) of the protocol's overlap over independent batches; checks every run's sizes."""
    y = _pool(n_pos, n_neg, seed)
    rng = np.random.default_rng(seed)
    _, n_train, n_val = ablation_sizes(y.size, **protocol)
    train, val = ablation_split(y, rng, **protocol)
    assert (train.size, val.size) == (n_train, n_val)
    stats = np.array([_mean_pairwise_overlap(y, rng, draws, **protocol) for _ in range(batches)])
    return stats.mean(), stats.std(ddof=1) / math.sqrt(batches)


def _agrees(mean, se, batches, value, rate=1e-6):
    """The suite's Monte Carlo rule (tests/_chance.py): |mean - value| <= c se, c the two-sided Student-t quantile
    with batches - 1 df at ``rate`` (one comparison)."""
    return not rule_fails(mean - value, se, batches, 1, rate)


@pytest.mark.parametrize("drop, val_fraction", [(0.2, 0.2), (0.3, 0.0)])
def test_theory_overlap_is_the_protocols_expected_overlap(drop, val_fraction):
    """expected_ablation_overlap (the theory's finite-N overlap) against Monte Carlo of ablation_split
    on an unbalanced pool; the train size is the one the theory assumes.  Chance failure rate <= 1e-6 per case
    (any seed): 20 batches, Student t with 19 df at 1e-6 (c = 7.1); it was P(|t_9| > 4) = 3.1e-3 per case.  The
    sharpness check se < 0.02 fails only if the batches' sd comes out > 3.6x its value (se 0.0055; P < 1e-20)."""
    n_train, exact = expected_ablation_overlap(37, 23, drop=drop, val_fraction=val_fraction)
    assert n_train == ablation_sizes(60, drop=drop, val_fraction=val_fraction)[1]
    mean, se = _monte_carlo_overlap(37, 23, 1, batches=20, draws=100, drop=drop, val_fraction=val_fraction)
    assert se < 0.02  # the check is sharp: one part in a thousand of the overlap
    assert _agrees(mean, se, 20, exact), (mean, se, exact)
    # the large-N value f^2 N of protocol_fractions is exact up to O(1) samples
    f12 = protocol_fractions("subsample", drop=drop, val_fraction=val_fraction)[2]
    assert exact == pytest.approx(f12 * 60, abs=1.5)


def test_overlap_check_rejects_the_balanced_formula():
    """On a small unbalanced pool the stratified re-split's rounding favours one class, so the overlap
    exceeds n_train^2 / N (the value when every sample is equally likely to be kept for training); the
    same Monte Carlo check accepts the exact formula and rejects that one.  Chance failure rate <= 1.1e-6 per run
    (any seed): accepting the exact value at 1e-6 (40 batches of 150 draws, t with 39 df, c = 5.8); the naive value
    is 0.022 = 2.2 batch sd (0.010) away, 13.7 se, and the check misses it with probability 3e-11
    (_chance.rejection_probability).  It was 10 batches of 200 draws and 4 se: P(|t_9| > 4) = 3.1e-3 for the first
    part, the second missed with probability ~1e-2."""
    n_train, exact = expected_ablation_overlap(8, 4)
    naive = n_train ** 2 / 12
    assert exact - naive > 0.02
    mean, se = _monte_carlo_overlap(8, 4, 2, batches=40, draws=150)
    assert _agrees(mean, se, 40, exact), (mean, se, exact)
    assert not _agrees(mean, se, 40, naive), (mean, se, naive)
