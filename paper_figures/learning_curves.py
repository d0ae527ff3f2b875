"""Section ``learning_curves``: how many labels does a concept need?  (issue 25, docs/learning_curves.md)

From a labelled pool of 200, 400 or 800 rows (``POOLS``, each drawn ``DRAWS`` times) of a layer, predict the best-C
test accuracy of a probe trained on 2, 4 and 8 times as many labelled rows (``MULTIPLES``) and compare it with the
measured one, for the spectral theory (:func:`empirical.probes.learning_curves.predict_learning_curve`, teachers
``calibrated`` and ``deconvolved``, Sigma from the pool and the other non-test rows as unlabelled rows), the isotropic
theory beside it (``isotropic``: :func:`empirical.probes.learning_curves.isotropic_curve`), and the two
baselines with the same inputs (``no_gain``: the pool's cross-validated accuracy; ``power_law``: a power law fitted to
the pool's subsample accuracies), and beside the power law the learning-curve databases' four-parameter families
fitted to the same subsample accuracies (``pow4``, ``mmf4``, ``wbl4``:
:func:`empirical.probes.learning_curves.pool_curves`).

Data: the datasets at the Concept-Depth benchmark's sizes (``max_per_class="reference"``: Common, HateEval, Sarcasm
3,000 per class, Counterfact 2,000 per class, STSA's 6,920 rows, Cities all), every ``LAYER_STEP``-th layer.  The test
set is fixed per dataset: ``TEST_ROWS`` stratified rows (Counterfact: the test part of
:func:`empirical.probes.grouped_split` by subject, 20 %, so no subject is on both sides), at least 800 rows, so the
truth's standard error is <= 0.017.  A pool is drawn stratified from the other rows; the training set at n = k x pool
is the pool plus n - pool further rows of a random order of the other rows (nested), so the truth at every target
extends the same pool.  The truth (primary) is what a user gets: the test accuracy of the probe refitted on the n
training rows at the C that a stratified validation split of them (``VAL_FRACTION``, RAPTOR's) selects on the grid
``PLAN_CS`` (:func:`truth_accuracies`); the best test accuracy over the grid (the test-best C, optimistic) is kept as
the secondary truth ``truth_test_best``.  The predictors predict the best-C accuracy (the theory's maximum over the
grid); they are scored against both truths, the primary one first.  The spectral predictions' intervals are
the ones ``raptor plan`` prints: the profile bounds widened by the pool's own backtest error
(:func:`empirical.probes.learning_curves.pool_backtest_errors`, ``model_error``).  Targets that need more rows than the
dataset has outside its test
set are skipped (STSA and Counterfact at 8 x 800; Cities at most pools and multiples), and the table says how many
settings each cell has.  The intervals include the binomial noise of the test set (``n_test``), so their coverage of
the measured accuracy is what a 90 % interval promises.

Outputs: ``tables/learning_curves.csv|md`` (per dataset, pool size, multiple and method: ``mae``, ``bias``,
``coverage`` of the 90 % interval against the primary truth, the same against the test-best one (``*_test_best``),
``selection_gap``, ``settings``, and the best-layer agreement: ``best_layer_within_1pt``, the share
of pool draws whose predicted best layer is within 0.01 of the true best layer's accuracy, and ``best_layer_regret``,
its mean accuracy shortfall) and ``figures/learning_curves.png|pdf`` (MAE against the multiple, one panel per
dataset, pool of 400 or the middle pool size run; below, the mean truths and predictions with their intervals); and
separability where it can be decided
(:func:`separability_rows`: real and shuffled labels on 2.5 (p + 1) non-test rows at the layers evaluated,
``tables/separability_large_<dataset>`` and ``tables/separability_large_summary``, which the separability claim
uses when present).  Every evaluation of a (dataset, layer, pool, draw) is saved as it
finishes (``OUT/learning_curves/raw/*.json``, checksummed), so an interrupted run resumes.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from joblib import Parallel, delayed  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from empirical.common import files  # noqa: E402
from empirical.common.arrays import as_real_array, check_binary_labels, check_grid, check_matrix
from empirical.common.checks import MAX_SEED, check_int, check_seed
from empirical.common.resources import check_n_jobs
from empirical.llm import datasets  # noqa: E402
from empirical.logistic import logistic_path  # noqa: E402
from empirical.numerics import standardize, standardize_stats, stratified_split
from empirical.probes import (
    estimate_pool_models,  # noqa: E402
    grouped_split,  # noqa: E402
    select_C,  # noqa: E402
)
from empirical.probes.learning_curves import (  # noqa: E402
    CAPPED_POWER_LAW,
    PLAN_CS,
    POOL_CURVE_METHODS,
    isotropic_curve,
    no_gain_curve,
    pool_backtest_errors,
    pool_curves,
    predict_learning_curve,
    theory_ceiling,
)
from empirical.probes.structure import stratified_subsample  # noqa: E402

from .forecast_calibration import calibration_table, forecaster_table, held_out_intervals  # noqa: E402
from .output import draws_figures, save_figure, save_table, table_or_compute  # noqa: E402
from .separability_tables import control_row, separability_control_summary  # noqa: E402
from .style import series_color  # noqa: E402
from .verdicts import mean_interval  # noqa: E402

DATASETS = ("common", "hateeval", "sarcasm", "counterfact", "stsa", "cities", "coinflip")
POOLS = (200, 400, 800)
#: datasets too small for the protocol's pools and test set: their own (Coinflip's 500 rows: a test set of 100 and
#: pools of 50 and 100, so that 8x the labels fit outside the test set), at every scale
SMALL_DATASETS = {"coinflip": dict(pools=(50, 100), n_test=100)}
DRAWS = 5
MULTIPLES = (2, 4, 8)
LAYER_STEP = 3
TEST_ROWS = 800
TEACHERS = ("calibrated", "deconvolved")
LEVEL = 0.9
#: ``--quick``: one pool size, two draws, two multiples, every 10th layer
QUICK = dict(pools=(200,), draws=2, multiples=(2, 4), layer_step=10)
#: the goal cell set before the run: 8x the labels of a pool of 400 (``tables/learning_curves_goal``, the claims)
GOAL_POOL, GOAL_MULTIPLE = 400, 8
#: ``python -m paper_figures --only learning_curves --learning-scale NAME``: the protocol's parameters of :func:`run`
#: (``full``: the module's defaults; ``goal``: the pool of 400 only, every draw, multiple and layer of the full
#: protocol, a third of its evaluations; ``quick``: :data:`QUICK`)
SCALES = {"full": {}, "goal": dict(pools=(GOAL_POOL,)), "quick": QUICK}
#: separability is tested on n = SEPARABILITY_RATIO (p + 1) non-test rows (all of them if fewer): beyond Cover's
#: 2 (p + 1), where random labels separate with probability P(Bin(n - 1, 1/2) <= p), about 1e-11 at p = 576, so the
#: test can fail.  The exact LP (:func:`empirical.probes.separability_lp`) takes ~11 s per layer there at p = 576 for
#: random labels on one core and ~240 s on every one of 5,200 non-test rows (measured), hence not all rows.
SEPARABILITY_RATIO = 2.5
#: best-layer agreement: the predicted best layer's true accuracy within this of the true best
BEST_LAYER_TOLERANCE = 0.01


def load_hidden(model="smollm2", data_dir=None, names=DATASETS, progress=True, max_per_class="reference") -> dict:
    """name -> (hidden states of every layer, labels, groups or None), at the Concept-Depth sizes by default
    (``max_per_class``: as :func:`empirical.llm.datasets.load`; cached).

    Parameters
    ----------
    model : str
        Model name or path for :func:`empirical.llm.load_model` (default: SmolLM2).
    data_dir : path, optional
        Dataset directory (:func:`empirical.llm.datasets.resolve_data_dir`).
    names : sequence of str
        Datasets to load.
    progress : bool
        Show the extraction's progress bars.
    max_per_class : "reference", None or int
        As for :func:`empirical.llm.datasets.load`.

    Returns
    -------
    dict of str to (ndarray (L+1, n, p), ndarray (n,), ndarray (n,) or None)
        Per dataset: float32 hidden states of layers 0..L (layer 0 = the token embeddings, layer l = the output of
        decoder block l; :func:`empirical.llm.extract_dataset` with ``layers="all"``), the labels and the
        dataset's groups.
    """
    from empirical.llm import (
        extract_dataset,  # torch side, imported when the section runs
        load_model,
    )

    mdl, tok = load_model(model)
    hidden = {}
    for name in names:
        ds = datasets.load(name, data_dir, max_per_class=max_per_class)
        hidden[name] = (extract_dataset(mdl, tok, ds, layers="all", progress=progress), np.asarray(ds.labels),
                        ds.groups)
    return hidden


def fixed_test_rows(y, groups=None, n_test=TEST_ROWS, seed=0) -> np.ndarray:
    """The fixed test rows of a dataset: ``n_test`` stratified rows (at most half the rows), or with ``groups`` the
    test part of :func:`empirical.probes.grouped_split` (20 %, no group on both sides).

    Parameters
    ----------
    y : array (n,)
        Labels.
    groups : array (n,), optional
        Group of each row (e.g. Counterfact's subjects); given, ``n_test`` is ignored.
    n_test : int
        Test rows wanted (capped at half the rows).
    seed : int
        Seed of the split.

    Returns
    -------
    ndarray of int
        Indices of the test rows.
    """
    y = np.asarray(as_real_array(y, "y", labels=True))
    y = check_binary_labels(y, y.shape[0] if y.ndim else 1, "y")[1]
    seed = check_int(seed, "seed", minimum=0, maximum=MAX_SEED)
    if groups is not None:
        return grouped_split(y, groups, random_state=seed)[2]
    n_test = check_int(n_test, "n_test", minimum=2)
    fraction = min(n_test, y.size // 2) / y.size
    return stratified_split(y, fraction, seed, where=("pool", "test"))[1]


#: share of a training set held out to select C for the truth (RAPTOR's default ``val_fraction``)
VAL_FRACTION = 0.2


def _path_accuracy(H, y, train, test, Cs):
    """Test accuracy along ``Cs`` (in the order given) of probes fitted on the train-standardized ``train`` rows."""
    mu, s = standardize_stats(H[train])
    order = np.argsort(Cs)
    acc = np.empty(len(Cs))
    acc[order] = logistic_path(standardize(H[train], mu, s), y[train], standardize(H[test], mu, s), y[test],
                               Cs[order], certify=False).val_accuracy
    return acc


def _check_rows(rows, name, n):
    idx = np.asarray(rows)
    if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"{name} must be a non-empty 1-D array of row indices in [0, {n}), got {rows!r:.80}")
    return idx


def truth_accuracies(H, y, train, test, Cs=PLAN_CS, seed=0) -> dict:
    """The measured test accuracy of a probe trained on ``train``: at the validation-selected C (what a user of
    RAPTOR gets, the primary truth) and at the test-best C (optimistic, secondary).

    The selection is RAPTOR's: a stratified ``VAL_FRACTION`` of the training rows is held out, the probe is fitted
    on the rest along ``Cs`` (train-standardized), the C with the best validation accuracy is chosen (ties: the
    most regularized, :func:`empirical.probes.select_C`), and the probe refitted on every training row at
    that C is tested on ``test``.

    Parameters
    ----------
    H : ndarray (n, p)
        One layer's hidden states (all rows).
    y : array (n,)
        Labels in {-1, +1}.
    train, test : array of int
        Training rows (at least 2 per class in the validation part) and test rows.
    Cs : array of float
        The C grid (scikit-learn convention on standardized features).
    seed : int
        Seed of the validation split.

    Returns
    -------
    dict
        ``truth`` (test accuracy at the validation-selected C), ``truth_test_best`` (best test accuracy over
        ``Cs``) and ``C_selected``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.tile([-1.0, 1.0], 200)
    >>> H = rng.standard_normal((400, 5)) + np.outer(y, [1, 0, 0, 0, 0])
    >>> t = truth_accuracies(H, y, np.arange(300), np.arange(300, 400))
    >>> bool(0.5 < t["truth"] <= t["truth_test_best"])
    True
    """

    H = check_matrix(H, "H")
    _, y = check_binary_labels(y, H.shape[0], "y")
    train, test = (_check_rows(rows, name, H.shape[0]) for rows, name in ((train, "train"), (test, "test")))
    Cs = np.asarray(check_grid(Cs), dtype=float)
    seed = check_seed(seed, "seed", maximum=MAX_SEED)
    fit, val = stratified_split(y[train], VAL_FRACTION, seed, where=("training part", "validation part"))
    k = select_C(Cs, _path_accuracy(H, y, train[fit], train[val], Cs))
    on_test = _path_accuracy(H, y, train, test, Cs)
    return dict(truth=float(on_test[k]), truth_test_best=float(on_test.max()), C_selected=float(Cs[k]))


def evaluate_setting(H, y, test, pool_size, draw, *, multiples=MULTIPLES, teachers=TEACHERS, n_boot=200,
                     Cs=PLAN_CS) -> list:
    """Truth and predictions of every method for one layer, pool size and draw.

    Parameters
    ----------
    H : ndarray (n, p)
        One layer's hidden states (all rows).
    y : array (n,)
        Labels in {-1, +1}.
    test : array of int
        The fixed test rows.
    pool_size, draw : int
        Labelled pool size and the draw's seed.
    multiples : sequence of int
        Targets n = multiple x pool_size (skipped when the rows outside the test set do not suffice).
    teachers : sequence of str
        Teacher estimators of the spectral prediction
        (:data:`empirical.probes._spectral_prediction.TEACHERS`); each interval carries its pool's backtest error
        (:func:`empirical.probes.learning_curves.pool_backtest_errors`), as ``raptor plan``'s does.
    n_boot : int
        Bootstrap replicates of the pool model and of the power-law baseline (their intervals).
    Cs : array of float
        The C grid (scikit-learn convention on standardized features) of the truth's best-C accuracy and of the
        power-law baseline.

    Returns
    -------
    list of dict
        One row per (target, method): ``multiple``, ``n``, ``truth``, ``truth_test_best``, ``C_selected``
        (:func:`truth_accuracies`), ``method``, ``accuracy``, ``low``, ``high``.
    """
    rest = np.setdiff1d(np.arange(y.size), test)
    rng = np.random.default_rng(draw)
    pool = rest[stratified_subsample(y[rest], pool_size, rng)]
    others = rng.permutation(np.setdiff1d(rest, pool))
    order = np.concatenate([pool, others])
    kept = [m for m in multiples if m * pool_size <= order.size]
    if not kept:
        return []
    targets = [m * pool_size for m in kept]
    n_test = int(test.size)
    models = estimate_pool_models(H[pool], y[pool], teachers=teachers, H_unlabeled=H[others], random_state=draw,
                                  n_boot=n_boot)
    errors = pool_backtest_errors(models, H[pool], y[pool], H_unlabeled=H[others], random_state=draw)
    curves = [predict_learning_curve(model, targets, n_test=n_test, seed=draw, model_error=errors[teacher])
              for teacher, model in models.items()]
    curves.append(isotropic_curve(H[pool], y[pool], targets, Cs=Cs, n_test=n_test, random_state=draw))
    curves.append(no_gain_curve(H[pool], y[pool], targets, n_test=n_test, random_state=draw))
    ceiling = theory_ceiling(models["calibrated"] if "calibrated" in models else next(iter(models.values())), Cs)
    curves += pool_curves(H[pool], y[pool], targets, methods=(*POOL_CURVE_METHODS, CAPPED_POWER_LAW), Cs=Cs,
                          n_test=n_test, n_boot=n_boot, random_state=draw, asymptote=ceiling).values()
    pool_accuracy = next(float(c.accuracy[0]) for c in curves if c.method == "no_gain")
    rows = []
    for i, (m, n) in enumerate(zip(kept, targets)):
        truth = truth_accuracies(H, y, order[:n], test, Cs, seed=draw)
        for curve in curves:
            rows.append(dict(multiple=m, n=n, **truth, method=curve.method, accuracy=float(curve.accuracy[i]),
                             low=float(curve.low[i]), high=float(curve.high[i]), n_test=n_test,
                             pool_accuracy=pool_accuracy))
    return rows


def separability_rows(name, H, y, test, layers, seed=0, n_jobs=1) -> pd.DataFrame:
    """Separability where it can be decided: the exact LP test with real and shuffled labels (the shuffled-label
    control of :func:`paper_figures.empirical_figures.separability_control_table`) on
    ``SEPARABILITY_RATIO`` (p + 1) stratified non-test rows (all of them if fewer), at ``layers``.

    Parameters
    ----------
    name : str
        Dataset name (a column of the table).
    H : ndarray (L + 1, n, p)
        Hidden states of every layer.
    y : array (n,)
        Labels in {-1, +1}.
    test : array of int
        The fixed test rows (left out).
    layers : sequence of int
        Layers to test.
    seed : int
        Seed of the row subsample and (plus the layer) of the label permutation.
    n_jobs : int
        Parallel LP tests.

    Returns
    -------
    DataFrame
        One row per (layer, labels): ``dataset, layer, labels, rows ("non-test"), n, p, n_over_p, separable,
        decided, min_total_slack``.
    """
    n_jobs = check_n_jobs(n_jobs)
    seed = check_seed(seed, "seed", maximum=MAX_SEED)  # the rows' draw; layer l's shuffled control uses seed + l
    rest = np.setdiff1d(np.arange(y.size), test)
    size = min(rest.size, int(np.ceil(SEPARABILITY_RATIO * (H.shape[2] + 1))))
    rows = rest if size == rest.size else rest[stratified_subsample(y[rest], size, np.random.default_rng(seed))]
    jobs = (delayed(control_row)(name, layer, np.asarray(H[layer][rows], dtype=np.float64), y[rows], labels,
                                  "non-test", seed + layer)
            for layer in layers for labels in ("real", "shuffled"))
    with threadpool_limits(1):
        return pd.DataFrame(Parallel(n_jobs=n_jobs)(jobs))


def _separability_cached(out, name, H, y, test, layers, n_jobs):
    return table_or_compute(out, f"separability_large_{name}",
                            lambda: separability_rows(name, H, y, test, layers, n_jobs=n_jobs),
                            valid=lambda table: sorted(set(table.layer)) == sorted(layers))


def _evaluate_cached(raw_dir, name, layer, pool_size, draw, H, y, test, kw):
    path = raw_dir / f"{name}_L{layer:02d}_P{pool_size}_d{draw}.json"
    try:
        if files.verify_checksum(path):
            rec = json.loads(files.read_input_text(path, files.MAX_JSON_BYTES))
            if rec.get("settings") == json.loads(json.dumps(kw["signature"])):
                return rec["rows"]
    except files.ChecksumError as exc:  # a damaged file is recomputed, never trusted
        warnings.warn(f"{exc}; recomputing it", RuntimeWarning, stacklevel=2)
    with threadpool_limits(1):
        rows = evaluate_setting(np.asarray(H, dtype=np.float64), y, test, pool_size, draw, multiples=kw["multiples"],
                                teachers=kw["teachers"], n_boot=kw["n_boot"])
    rows = [dict(row, dataset=name, layer=layer, pool=pool_size, draw=draw) for row in rows]
    files.write_checksum(files.atomic_write_text(path, json.dumps(dict(settings=kw["signature"], rows=rows))))
    return rows


def _errors(raw: pd.DataFrame) -> pd.DataFrame:
    """``raw`` with the error and coverage against the primary truth (validation-selected C) and the secondary one
    (test-best C)."""
    return raw.assign(error=raw.accuracy - raw.truth, covered=((raw.low <= raw.truth) & (raw.truth <= raw.high)),
                      error_test_best=raw.accuracy - raw.truth_test_best,
                      covered_test_best=((raw.low <= raw.truth_test_best) & (raw.truth_test_best <= raw.high)),
                      selection_gap=raw.truth_test_best - raw.truth)


def summary_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, pool, multiple, method): MAE, bias and interval coverage against the truth at the
    validation-selected C (primary), the same against the test-best C (``*_test_best``, secondary), the mean
    selection gap (test-best minus validation-selected truth), settings, best-layer agreement.

    Parameters
    ----------
    raw : DataFrame
        Rows of :func:`evaluate_setting` with ``dataset``, ``layer``, ``pool``, ``draw``.

    Returns
    -------
    DataFrame
    """
    raw = _errors(raw)
    keys = ["dataset", "pool", "multiple", "method"]
    table = raw.groupby(keys).agg(mae=("error", lambda e: float(np.mean(np.abs(e)))), bias=("error", "mean"),
                                  coverage=("covered", "mean"),
                                  mae_test_best=("error_test_best", lambda e: float(np.mean(np.abs(e)))),
                                  bias_test_best=("error_test_best", "mean"),
                                  coverage_test_best=("covered_test_best", "mean"),
                                  selection_gap=("selection_gap", "mean"), settings=("error", "size")).reset_index()
    best = []
    for key, g in raw.groupby([*keys, "draw"]):
        if g.layer.nunique() < 2:
            continue
        picked = g.loc[g.accuracy.idxmax()]
        regret = float(g.truth.max() - picked.truth)
        best.append(dict(zip([*keys, "draw"], key), regret=regret, agree=regret <= BEST_LAYER_TOLERANCE))
    if best:
        best = pd.DataFrame(best).groupby(keys).agg(best_layer_within_1pt=("agree", "mean"),
                                                      best_layer_regret=("regret", "mean")).reset_index()
        table = table.merge(best, on=keys, how="left")
    return table


def by_draw_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, pool, multiple, draw, method): the mean absolute error over the layers and the share of layers
    whose interval covers the truth, against the validation-selected truth (``mae``, ``coverage``) and the test-best
    one (``mae_test_best``, ``coverage_test_best``), and the layers; the units of the paired comparisons of
    :mod:`paper_figures.predictor_claims` (pool draws are independent; the layers of one draw are not).

    Parameters
    ----------
    raw : DataFrame
        Rows of :func:`evaluate_setting` with ``dataset``, ``layer``, ``pool``, ``draw``.

    Returns
    -------
    DataFrame
        Columns ``dataset, pool, multiple, draw, method, mae, coverage, mae_test_best, coverage_test_best,
        layers``.
    """
    raw = _errors(raw)
    raw = raw.assign(error=raw.error.abs(), covered=raw.covered.astype(float),
                     error_test_best=raw.error_test_best.abs(), covered_test_best=raw.covered_test_best.astype(float))
    return (raw.groupby(["dataset", "pool", "multiple", "draw", "method"], sort=False)
            .agg(mae=("error", "mean"), coverage=("covered", "mean"), mae_test_best=("error_test_best", "mean"),
                 coverage_test_best=("covered_test_best", "mean"), layers=("layer", "nunique")).reset_index())


@draws_figures
def plot_summary(table: pd.DataFrame, out: Path, pool=None, by_draw: pd.DataFrame | None = None,
                 raw: pd.DataFrame | None = None) -> Path:
    """MAE against the multiple, one panel per dataset, at one pool size (default: 400 if run, else the middle),
    with 95 % intervals over the pool draws when ``by_draw`` is given; with ``raw``, a second row of panels shows
    the accuracies themselves: the primary truth (validation-selected C, black), the test-best truth (grey,
    dashed) and each method's prediction with its 90 % interval (means over layers and draws).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`summary_table`.
    out : path
        Output root (the figure goes to ``out/figures/learning_curves.png|pdf``).
    pool : int, optional
        Pool size shown (default: 400 if run, else the middle one of those run).
    by_draw : pandas.DataFrame, optional
        :func:`by_draw_table`: the MAE per pool draw, for a t interval over the draws at each point (the draws'
        pools overlap, so the interval is a lower bound on the uncertainty).
    raw : pandas.DataFrame, optional
        Rows of :func:`evaluate_setting` (``evaluations.csv``): the accuracy panels.

    Returns
    -------
    Path
        The PNG's path.
    """
    from matplotlib.ticker import NullFormatter, NullLocator

    pools = sorted(table.pool.unique())
    pool = pool if pool is not None else (400 if 400 in pools else pools[len(pools) // 2])
    names = list(dict.fromkeys(table.dataset))
    methods = list(dict.fromkeys(table.method))
    fig, axes = plt.subplots(1 if raw is None else 2, len(names), figsize=(max(2.6 * len(names) + 0.6, 4.5),
                                                                            2.8 if raw is None else 5.6),
                             squeeze=False, sharey="row")
    for ax, name in zip(axes[0], names):
        part = table[(table.dataset == name) & (table.pool == pool)]
        for k, (method, g) in enumerate(part.groupby("method", sort=False)):
            g = g.sort_values("multiple")
            shift = 1.0 + 0.04 * (k - (len(methods) - 1) / 2)  # side by side on the log axis
            color = series_color(methods.index(method))
            if by_draw is not None:
                d = by_draw[(by_draw.dataset == name) & (by_draw.pool == pool) & (by_draw.method == method)]
                stats_ = [mean_interval(d.loc[d.multiple == m, "mae"]) for m in g.multiple]
                low = [mae - lo if np.isfinite(lo) else 0.0 for mae, (_, lo, _) in zip(g.mae, stats_)]
                high = [hi - mae if np.isfinite(hi) else 0.0 for mae, (_, _, hi) in zip(g.mae, stats_)]
                ax.errorbar(g.multiple * shift, g.mae, yerr=[np.clip(low, 0, None), np.clip(high, 0, None)],
                            fmt="o-", ms=3, capsize=2, label=method, color=color)
            else:
                ax.plot(g.multiple, g.mae, "o-", label=method, color=color)
        ax.set(title=name, xlabel="target n / pool", xscale="log", xticks=sorted(part.multiple.unique()))
        ax.set_xticklabels([f"{m}x" for m in sorted(part.multiple.unique())])
        ax.xaxis.set_minor_locator(NullLocator())  # no "3 x 10^0" minor labels between 2x, 4x and 8x
        ax.xaxis.set_minor_formatter(NullFormatter())
    axes[0][0].set_ylabel(f"MAE (pool {pool})")
    axes[0][-1].legend(fontsize=7)
    if raw is not None:
        for ax, name in zip(axes[1], names):
            part = raw[(raw.dataset == name) & (raw.pool == pool)]
            truth = part.drop_duplicates(["layer", "draw", "multiple"]).groupby("multiple")
            ax.plot(truth.truth.mean().index, truth.truth.mean(), "k-", lw=1.5, label="truth (validation-selected C)")
            ax.plot(truth.truth_test_best.mean().index, truth.truth_test_best.mean(), "--", color="0.6", lw=1,
                    label="truth (test-best C)")
            for k, (method, g) in enumerate(part.groupby("method", sort=False)):
                m = g.groupby("multiple")[["accuracy", "low", "high"]].mean()
                shift = 1.0 + 0.04 * (k - (len(methods) - 1) / 2)
                ax.errorbar(m.index * shift, m.accuracy, yerr=[m.accuracy - m.low, m.high - m.accuracy], fmt="o",
                            ms=3, capsize=2, color=series_color(methods.index(method)), label=method)
            ax.set(xlabel="target n / pool", xscale="log", xticks=sorted(part.multiple.unique()))
            ax.set_xticklabels([f"{m}x" for m in sorted(part.multiple.unique())])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
        axes[1][0].set_ylabel("test accuracy (bars: 90 % interval)")
        axes[1][-1].legend(fontsize=6)
    if by_draw is not None:
        fig.suptitle("bars: 95 % t intervals over the pool draws", fontsize=8, y=1.04)
    return save_figure(fig, out, "learning_curves")


def run(out, hidden, *, pools=POOLS, draws=DRAWS, multiples=MULTIPLES, layer_step=LAYER_STEP, teachers=TEACHERS,
        n_boot=200, n_test=TEST_ROWS, n_jobs=1, progress=False, separability=True) -> pd.DataFrame:
    """Evaluate every (dataset, layer, pool size, draw), save the table and figure; returns the summary table.

    Parameters
    ----------
    out : path
        Output root.
    hidden : dict
        name -> (hidden states (L + 1, n, p), labels, groups or None) (:func:`load_hidden`).
    pools, draws, multiples, layer_step, teachers, n_boot, n_test
        The protocol (module docstring; ``QUICK`` for ``--quick``); the layers evaluated are 1, 1 + layer_step,
        1 + 2 layer_step, ... (layer 0, the embeddings, never).
    n_jobs : int
        Parallel evaluations (each single-threaded).
    progress : bool
        Accepted but not used (the evaluations show no progress bar).
    separability : bool
        Also test separability at the layers evaluated where it can be decided (:func:`separability_rows`;
        tables ``separability_large_<dataset>`` and ``separability_large_summary``, read by the separability
        claim).

    Returns
    -------
    DataFrame
        :func:`summary_table`.
    """
    n_jobs = check_n_jobs(n_jobs)
    raw_dir = Path(out) / "learning_curves" / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    kw = dict(multiples=tuple(multiples), teachers=tuple(teachers), n_boot=int(n_boot))
    signature = dict(kw, cs=[float(c) for c in PLAN_CS], truth="validation-selected C", val_fraction=VAL_FRACTION,
                     interval="profile + pool backtest", row_fields=["n_test", "pool_accuracy"],
                     methods=["spectral", "isotropic", "no_gain", *POOL_CURVE_METHODS, CAPPED_POWER_LAW])  # an
    # older record lacks one
    jobs, separable = [], []
    for name, (H, labels, groups) in hidden.items():
        y = np.where(np.asarray(labels) > 0, 1.0, -1.0)
        own = SMALL_DATASETS.get(name, {})
        test = fixed_test_rows(y, groups, own.get("n_test", n_test))
        if separability:
            separable.append(_separability_cached(out, name, H, y, test, list(range(1, H.shape[0], layer_step)),
                                                  n_jobs))
        kw_name = dict(kw, signature=dict(signature, n_test=int(own.get("n_test", n_test))))
        for layer in range(1, H.shape[0], layer_step):
            for pool_size in own.get("pools", pools):
                for draw in range(draws):
                    jobs.append((raw_dir, name, layer, pool_size, draw, H[layer], y, test, kw_name))
    done = Parallel(n_jobs=n_jobs)(delayed(_evaluate_cached)(*job) for job in jobs)
    raw = pd.DataFrame([row for rows in done for row in rows])
    if raw.empty:
        raise ValueError("learning_curves: no (pool, multiple) fits in any dataset outside its test rows; use smaller "
                         "pools or multiples")
    raw = held_out_intervals(raw)  # the forecaster's interval: calibrated on the other datasets only
    save_table(calibration_table(raw), out, "forecast_calibration")
    save_table(forecaster_table(raw), out, "forecasters")
    files.write_csv(Path(out) / "learning_curves" / "evaluations.csv", raw)
    table = summary_table(raw)
    save_table(table, out, "learning_curves")
    by_draw = by_draw_table(raw)
    save_table(by_draw, out, "learning_curves_by_draw")
    if separable:
        save_table(separability_control_summary(pd.concat(separable, ignore_index=True)), out,
                   "separability_large_summary")
    goal = table[(table["pool"] == GOAL_POOL) & (table["multiple"] == GOAL_MULTIPLE)]
    if len(goal):
        save_table(goal, out, "learning_curves_goal")
    plot_summary(table, out, by_draw=by_draw, raw=raw)
    return table
