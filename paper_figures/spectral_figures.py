"""Section ``spectral``: the spectral (Gaussian covariate) theory against real SmolLM2 probes.

Per dataset and layer (seed 42 = the paper's split) :func:`empirical.probes.spectral_evaluation.evaluate_split`
measures RAPTOR's test accuracy along its C grid, the delta-sweep and the ablation stability, and
predicts them from the training pool alone with the spectral theory (teacher estimators ``deconvolved``,
``calibrated``, ``pool_fit``), the isotropic theory (kappa-hat route) and the trivial predictor ``pool_cv``
(the pool's own cross-validated accuracy at the same training size and C: the calibrated teachers are
fitted to that accuracy, so a theory adds something along lambda and delta only where it beats it).  The
stability is the protocol RESULTS.md reports (``stability_protocol="raptor"``: ``RaptorProbe()`` runs that
re-select C, K = 20, 20 % dropped, on the train + validation pool), predicted at the split's C* with the
refit fractions.  Extra split seeds (``extra_seeds``) repeat the best layer (highest validation accuracy
on the paper's split) and the layers ``seed_layers``, so that every agreement statistic gets one value per
seed and an interval.  Every evaluation is saved as it finishes (``OUT/spectral/raw/*.json``), so an
interrupted run resumes where it stopped.

Outputs: ``tables/spectral_agreement_by_seed.csv|md`` (:func:`agreement_by_seed`: one row per dataset,
split seed and predictor: MAE and Spearman along lambda and delta at the best layer, the MAE gain over
``pool_cv``, and across the layers evaluated at that seed the MAE and Spearman of the best accuracy and of
the stability), ``tables/spectral_agreement.csv|md`` (:func:`agreement_table`: per dataset and predictor
the mean over seeds of every statistic with its 95 % interval, ``<metric>_low`` / ``<metric>_high``),
``figures/spectral_<dataset>.png|pdf`` (accuracy vs lambda and vs delta at the best layer, predicted vs
measured stability across layers) with its numbers in ``tables/spectral_<dataset>.csv|md``.
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from joblib import Parallel, delayed  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from cgmt import Spectrum  # noqa: E402
from empirical.common import files  # noqa: E402
from empirical.common.resources import check_n_jobs
from empirical.llm import datasets  # noqa: E402
from empirical.numerics import constant_to_rounding  # noqa: E402
from empirical.probes import (  # noqa: E402
    PAPER_SPLIT_SEED,
    estimate_pool_model,  # noqa: E402
    paper_split,
)
from empirical.probes.spectral_evaluation import PATH_CS, evaluate_split, semi_synthetic_path  # noqa: E402
from empirical.probes.structure import delta_sweep  # noqa: E402
from sims import compare_spectral  # noqa: E402

from .output import draws_figures, save_figure, save_table  # noqa: E402
from .style import method_color, series_color  # noqa: E402
from .verdicts import clip_interval, seed_interval  # noqa: E402

#: the theories compared (the spectral theory with three teacher estimators, the isotropic theory)
THEORIES = ("spectral/deconvolved/sample", "spectral/calibrated/sample", "spectral/pool_fit/sample", "isotropic")
#: every predictor of the tables: the theories and the trivial predictor (no stability prediction)
PREDICTORS = THEORIES + ("pool_cv",)
#: the measured stability: the protocol of RESULTS.md's stability tables (``evaluate_split``'s ``"raptor"``)
STABILITY_PROTOCOL = "raptor"
#: what the ``protocol`` column of the agreement tables says about each measured stability protocol
PROTOCOL_LABELS = {"raptor": "RaptorProbe() runs re-selecting C, refit on train+val (as RESULTS.md); theory at C*",
                   "subsample_refit": "RaptorProbe(Cs=[C*]) runs refit on train+val; theory at C*",
                   "subsample": "runs at C* fitted on their train rows only; theory at C*"}
#: the statistics of the agreement tables (per seed, then mean and interval over seeds)
AGREEMENT_METRICS = ("mae_lambda", "spearman_lambda", "mae_delta", "spearman_delta", "mae_gain_vs_pool_cv_lambda",
                     "mae_gain_vs_pool_cv_delta", "stability_abs_error_best_layer",
                     "stability_fixed_C_abs_error_best_layer", "mae_best_acc_layers",
                     "spearman_best_acc_layers", "mae_stability_layers", "spearman_stability_layers",
                     "c_star_within_decade")


def _to_json(r):
    def conv(v):
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, (np.floating, np.integer)):
            return v.item()
        return v
    return json.dumps(conv(r))


def _evaluate_cached(raw_dir, name, layer, seed, H, y, **kw):
    path = raw_dir / f"{name}_L{layer:02d}_s{seed}.json"
    try:
        if files.verify_checksum(path):
            rec = json.loads(files.read_input_text(path, files.MAX_JSON_BYTES))
            # a record of an older protocol (no trivial predictor, another stability protocol) is recomputed
            if (rec.get("stability_protocol") == STABILITY_PROTOCOL and "pool_cv" in rec.get("pred", {})
                    and "stability_fixed_C" in rec):
                return rec
    except files.ChecksumError as exc:  # a damaged file is recomputed, never trusted
        warnings.warn(f"{exc}; recomputing it", RuntimeWarning, stacklevel=2)
    text = _to_json(evaluate_split(H, y, seed, teachers=("deconvolved", "calibrated", "pool_fit"),
                                   covariances=("sample",), stability_protocol=STABILITY_PROTOCOL, **kw))
    files.write_checksum(files.atomic_write_text(path, text))
    return json.loads(text)


def _evaluate_single_threaded(*args):
    with threadpool_limits(1):
        return _evaluate_cached(*args)


def evaluate_all(out, hidden, layers, extra_seeds=4, seed_layers=(), progress=True, n_jobs=1) -> dict:
    """Evaluate every (dataset, layer) at the paper's split, then the best layer and ``seed_layers`` at
    ``extra_seeds`` more split seeds (``PAPER_SPLIT_SEED + 1, ...``).

    Parameters
    ----------
    out : path
        Output root (raw results in ``out/spectral/raw``).
    hidden : dict
        dataset name -> (H (L+1, n, p), y).
    layers : sequence of int
        Layers to evaluate on the paper's split.
    extra_seeds : int, default=4
        Additional split seeds.
    seed_layers : sequence of int, default=()
        Layers evaluated at the extra seeds besides the best one (the across-layer statistics of a seed
        use the layers it has).
    progress : bool, default=True
        Show progress bars.
    n_jobs : int, default=1
        joblib workers over layers (each single-threaded).

    Returns
    -------
    dict
        name -> {"layers": {layer: record} (paper's split), "best": layer, "seeds": {seed: {layer: record}},
        "best_seeds": [best layer's record at every seed, paper's split first]}.
    """
    n_jobs = check_n_jobs(n_jobs)
    raw = Path(out) / "spectral" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, (H, y) in hidden.items():
        it = tqdm(layers, desc=f"spectral {name}", disable=not progress, leave=False)
        done = Parallel(n_jobs=n_jobs)(delayed(_evaluate_single_threaded)(raw, name, layer, PAPER_SPLIT_SEED,
                                                                          np.asarray(H[layer]), y) for layer in it)
        recs = dict(zip(layers, done))
        best = max(recs, key=lambda layer: max(recs[layer]["val_path"]))
        extra = [PAPER_SPLIT_SEED + k for k in range(1, extra_seeds + 1)]
        seeded = [layer for layer in seed_layers if layer in recs]
        jobs = [(seed, layer) for seed in extra for layer in sorted({best, *seeded})]
        more = Parallel(n_jobs=n_jobs)(delayed(_evaluate_single_threaded)(raw, name, layer, seed, np.asarray(H[layer]),
                                                                          y) for seed, layer in jobs)
        by_seed = {PAPER_SPLIT_SEED: recs}
        for (seed, layer), rec in zip(jobs, more):
            by_seed.setdefault(seed, {})[layer] = rec
        results[name] = {"layers": recs, "best": best, "seeds": by_seed,
                         "best_seeds": [by_seed[seed][best] for seed in by_seed]}
    return results


def _spearman(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if constant_to_rounding(a) or constant_to_rounding(b):
        return float("nan")
    return float(spearmanr(a, b).statistic)


def _at_c_star(rec, pred=None):
    Cs = np.asarray(rec["Cs"])
    if pred is None:
        return float(np.asarray(rec["path"])[np.argmin(np.abs(Cs - rec["C_star"]))])
    return float(np.asarray(pred["path"])[np.argmin(np.abs(Cs - pred["C_star"]))])


def _stability(rec, pname):
    return float(rec["pred"][pname].get("stability", np.nan))


def agreement_by_seed(results) -> pd.DataFrame:
    """One row per dataset, split seed and predictor (:data:`PREDICTORS`).

    Along lambda and delta (at the best layer): ``mae_*`` (mean absolute error over the curve's points) and
    ``spearman_*`` against the measured curve of that seed, and ``mae_gain_vs_pool_cv_*`` = the trivial
    predictor's MAE minus this predictor's (> 0: the predictor is closer than the pool's own CV accuracy).
    ``stability_abs_error_best_layer``: |predicted - measured| stability at the best layer;
    ``stability_fixed_C_abs_error_best_layer``: the same against the runs at the fixed C* (the protocol the
    theories model; the gap between the two is the cost of re-selecting C in every run).  Across the
    ``layers`` evaluated at that seed (NaN with fewer than 3): MAE and Spearman of the accuracy at the
    (predicted) C* and of the stability, and the share of layers whose predicted C* is within a decade.
    ``protocol`` names the measured stability protocol.

    Parameters
    ----------
    results : dict
        From :func:`evaluate_all`.

    Returns
    -------
    pandas.DataFrame
        The rows described above (also ``best_layer`` and ``layers``, the number of layers at that seed).
    """
    rows = []
    for name, res in results.items():
        best = res["best"]
        for seed, recs in res["seeds"].items():
            rec = recs[best]
            layer_recs = [recs[layer] for layer in sorted(recs, key=int)]
            enough = len(layer_recs) >= 3
            truth_path, truth_sweep = np.asarray(rec["path"]), np.asarray(rec["sweep"])

            def mae(pname, key, truth):
                return float(np.mean(np.abs(np.asarray(rec["pred"][pname][key]) - truth)))

            base_lambda, base_delta = mae("pool_cv", "path", truth_path), mae("pool_cv", "sweep", truth_sweep)
            for pname in PREDICTORS:
                pred = rec["pred"][pname]
                row = {"dataset": name, "seed": int(seed), "predictor": pname, "best_layer": int(best),
                       "layers": len(layer_recs),
                       "protocol": PROTOCOL_LABELS.get(rec.get("stability_protocol"), rec.get("stability_protocol")),
                       "mae_lambda": mae(pname, "path", truth_path),
                       "spearman_lambda": _spearman(pred["path"], truth_path),
                       "mae_delta": mae(pname, "sweep", truth_sweep),
                       "spearman_delta": _spearman(pred["sweep"], truth_sweep)}
                row["mae_gain_vs_pool_cv_lambda"] = base_lambda - row["mae_lambda"]
                row["mae_gain_vs_pool_cv_delta"] = base_delta - row["mae_delta"]
                row["stability_abs_error_best_layer"] = abs(_stability(rec, pname)
                                                            - float(rec.get("stability", np.nan)))
                row["stability_fixed_C_abs_error_best_layer"] = abs(_stability(rec, pname)
                                                                    - float(rec.get("stability_fixed_C", np.nan)))
                best_true = [_at_c_star(r) for r in layer_recs]
                best_pred = [_at_c_star(r, r["pred"][pname]) for r in layer_recs]
                st_true = np.array([float(r.get("stability", np.nan)) for r in layer_recs])
                st_pred = np.array([_stability(r, pname) for r in layer_recs])
                st_err = np.abs(st_pred - st_true)
                decade = [abs(math.log10(r["pred"][pname]["C_star"] / r["C_star"])) <= 1.0 for r in layer_recs]
                row.update(
                    mae_best_acc_layers=float(np.mean(np.abs(np.subtract(best_pred, best_true)))) if enough else np.nan,
                    spearman_best_acc_layers=_spearman(best_pred, best_true) if enough else np.nan,
                    mae_stability_layers=float(np.mean(st_err)) if enough and np.isfinite(st_err).all() else np.nan,
                    spearman_stability_layers=_spearman(st_pred, st_true) if enough else np.nan,
                    c_star_within_decade=float(np.mean(decade)) if enough else np.nan)
                rows.append(row)
    return pd.DataFrame(rows)


def agreement_table(results, by_seed=None) -> pd.DataFrame:
    """Per dataset and predictor: every statistic of :func:`agreement_by_seed` as its mean over the split seeds
    with a 95 % interval (``<metric>_low``, ``<metric>_high``: the corrected resampled t-interval of
    :func:`paper_figures.verdicts.seed_interval`, since the seeds' training sets overlap, clipped to [-1, 1] for a
    Spearman and to >= 0 for an error; NaN with fewer than 2 finite seeds), the number of seeds, and the noise floor of
    the MAE along lambda and delta (``truth_se_*``: the standard error over the seeds of the measured curve, averaged
    over its points).

    Parameters
    ----------
    results : dict
        From :func:`evaluate_all`.
    by_seed : pandas.DataFrame, optional
        :func:`agreement_by_seed` of ``results`` when already computed.

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, predictor), the metrics of :data:`AGREEMENT_METRICS` with their intervals.
    """
    by_seed = agreement_by_seed(results) if by_seed is None else by_seed
    rows = []
    for (name, pname), g in by_seed.groupby(["dataset", "predictor"], sort=False):
        seeds = results[name]["best_seeds"]
        k = len(seeds)
        row = {"dataset": name, "predictor": pname, "best_layer": int(g.best_layer.iloc[0]), "seeds": k,
               "layers": int(g.layers.max()), "protocol": g.protocol.iloc[0]}
        for key, col in (("path", "truth_se_lambda"), ("sweep", "truth_se_delta")):
            vals = np.array([r[key] for r in seeds])
            row[col] = float(np.mean(vals.std(axis=0, ddof=1)) / math.sqrt(k)) if k > 1 else np.nan
        for metric in AGREEMENT_METRICS:
            mean, low, high = seed_interval(g[metric].to_numpy(float))
            # a correlation lies in [-1, 1], an error or a share is >= 0 (the gains are differences: not clipped)
            bounds = (-1.0, 1.0) if metric.startswith("spearman") else (None, None) if "gain" in metric else (0.0, None)
            row[metric], row[f"{metric}_low"], row[f"{metric}_high"] = mean, *clip_interval(low, high, bounds)
        rows.append(row)
    return pd.DataFrame(rows)


#: predictor -> (colour, line style, label); the measured RAPTOR values take RAPTOR's colour, so the
#: predictors skip the palette's blues
_STYLE = {"spectral/deconvolved/sample": (series_color(1), "-", "spectral theory (deconvolved teacher)"),
          "spectral/calibrated/sample": (series_color(2), "--", "spectral theory (calibrated teacher)"),
          "spectral/pool_fit/sample": (series_color(3), ":", "spectral theory (pool fit as is)"),
          "isotropic": (series_color(5), "-.", "isotropic theory (κ̂)"),
          "pool_cv": ("0.45", (0, (1, 1)), "trivial: the pool's own CV accuracy (pool_cv)")}


def dataset_curves(name, res) -> pd.DataFrame:
    """The numbers behind :func:`plot_dataset`: one row per point of its three panels (``panel`` = lambda,
    delta or layer; ``x``), the measured value (mean over the split seeds, ``measured_se`` its standard error,
    NaN with one seed) and one column per predictor (``PREDICTORS``).

    Parameters
    ----------
    name : str
        The dataset.
    res : dict
        Its entry of :func:`evaluate_all`'s result.

    Returns
    -------
    pandas.DataFrame
        The rows described above; lambda = 1/(C n_train), delta = fraction n_pool / p, the layer panel at the
        paper's split only (``seeds`` = 1).
    """
    seeds = res["best_seeds"]
    rec = seeds[0]
    k = len(seeds)

    def se(a):
        return a.std(axis=0, ddof=1) / math.sqrt(k) if k > 1 else np.full(a.shape[1], np.nan)

    frames = []
    for panel, key, x in (("lambda", "path", 1.0 / (np.asarray(rec["Cs"]) * rec["n_train"])),
                          ("delta", "sweep", np.asarray(rec["fractions"]) * rec["n_pool"] / rec["p"])):
        vals = np.array([r[key] for r in seeds])
        cols = dict(dataset=name, layer=int(res["best"]), panel=panel, x=x, measured=vals.mean(axis=0),
                    measured_se=se(vals), seeds=k)
        cols.update({pname: np.mean([r["pred"][pname][key] for r in seeds], axis=0) for pname in PREDICTORS})
        frames.append(pd.DataFrame(cols))
    layers = sorted(res["layers"], key=int)
    # every split seed that evaluated a layer (the paper's split always; more with ``seed_layers``): mean and s.e.
    per_layer = [[recs[layer] for recs in res.get("seeds", {0: res["layers"]}).values() if layer in recs]
                 for layer in layers]
    measured = [np.array([float(r["stability"]) for r in recs]) for recs in per_layer]
    cols = dict(dataset=name, layer=[int(layer) for layer in layers], panel="layer",
                x=[float(layer) for layer in layers], measured=[m.mean() for m in measured],
                measured_se=[m.std(ddof=1) / math.sqrt(m.size) if m.size > 1 else np.nan for m in measured],
                seeds=[m.size for m in measured])
    cols.update({pname: [float(np.mean([_stability(r, pname) for r in recs])) for recs in per_layer]
                 for pname in PREDICTORS})
    frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)


@draws_figures
def plot_dataset(name, res, out):
    """Accuracy vs lambda and vs delta at the best layer; stability across layers.  Saves the figure
    ``spectral_<name>`` and its numbers (:func:`dataset_curves`) as the table of the same name.

    Parameters
    ----------
    name : str
        The dataset.
    res : dict
        Its entry of :func:`evaluate_all`'s result.
    out : path-like
        The run's output directory.

    Returns
    -------
    pathlib.Path
        The PNG written (``out/figures/spectral_<name>.png``; a PDF beside it).
    """
    rec = res["best_seeds"][0]
    k = len(res["best_seeds"])
    curves = dataset_curves(name, res)
    save_table(curves, out, f"spectral_{name}")
    raptor = method_color("RAPTOR")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    measured = {"lambda": f"RAPTOR, measured (mean ± s.e. over {k} splits)" if k > 1 else "RAPTOR, measured",
                "delta": f"RAPTOR, measured (mean ± s.e. over {k} splits)" if k > 1 else "RAPTOR, measured",
                "layer": "RAPTOR, measured (paper's split; RESULTS.md's protocol)"
                if curves[curves.panel == "layer"].seeds.max() == 1 else
                "RAPTOR, measured (mean ± s.e. over the split seeds; RESULTS.md's protocol)"}
    for ax, panel in zip(axes, ("lambda", "delta", "layer")):
        c = curves[curves.panel == panel]
        yerr = None if c.measured_se.isna().all() else c.measured_se
        ax.errorbar(c.x, c.measured, yerr=yerr, fmt="o", ms=4, capsize=2, color=raptor, label=measured[panel],
                    zorder=3)
        for pname, (col, ls, lab) in _STYLE.items():
            ax.plot(c.x, c[pname], color=col, ls=ls, label=lab, marker="." if panel == "layer" else None)
    axes[0].set(xscale="log", xlabel="ridge strength λ = 1/(C n_train) (dimensionless)", ylabel="test accuracy",
                title=f"ridge path at layer {res['best']} (n_train = {rec['n_train']}, p = {rec['p']})")
    axes[1].set(xlabel="δ = n/p (dimensionless; pool fractions)", ylabel="test accuracy",
                title="δ-sweep at the validation-selected C*")
    axes[2].set(xlabel="layer (block output index, 0 = embeddings)",
                ylabel="stability: mean |cos| (dimensionless)",
                title="ablation stability per layer (K = 20 RaptorProbe() runs, C re-selected)")
    axes[2].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{name}: spectral and isotropic theory (lines) against measured RAPTOR probes (markers)")
    fig.tight_layout()
    return save_figure(fig, out, f"spectral_{name}")


def _layer_model(hidden, name, layer):
    H, y = hidden[name]
    Hl = np.asarray(H[layer])
    # the pool of the paper's split (train + val); the teacher is the deconvolved estimate
    tr, va, _ = paper_split(y, random_state=PAPER_SPLIT_SEED)
    pool = np.concatenate([tr, va])
    return Hl, y, pool, estimate_pool_model(Hl[pool], y[pool], teacher="deconvolved")


def monte_carlo_table(hidden, *, replicates=8, p=1000, dataset="stsa", layer=16, progress=True) -> pd.DataFrame:
    """Theory vs Monte Carlo (exact fits) on a power law, a spiked spectrum (teacher on the spikes) and the
    empirical spectrum and estimated teacher of a real SmolLM2 layer (dimension = the model's width).

    Parameters
    ----------
    hidden : dict
        dataset name -> (H (L+1, n, p), y).
    replicates : int, default=8
        Monte Carlo replicates per point.
    p : int, default=1000
        Dimension of the two synthetic spectra.
    dataset : str, default="stsa"
        The dataset whose layer gives the real spectrum.
    layer : int, default=16
        That layer.
    progress : bool, default=True
        Show progress bars.

    Returns
    -------
    pandas.DataFrame
        :func:`sims.compare_spectral`'s rows for each spectrum at (delta, lam) = (0.5, 0.1) and
        (1.5, 0.01).
    """
    Hl, y, pool, model = _layer_model(hidden, dataset, layer)
    spectra = {"power law 1/i": (Spectrum.power_law(p, 1.0, 2.0, teacher_exponent=0.5), None),
               "spiked 5x25, teacher on spikes": (Spectrum.spiked(p, kappa=2.0, teacher="spikes"), None),
               f"SmolLM2 {dataset} layer {layer}": (model.spectrum, model.feature_scale)}
    frames = []
    for name, (spec, scale) in spectra.items():
        for delta, lam in ((0.5, 0.1), (1.5, 0.01)):
            frames.append(compare_spectral(delta, lam, spec, replicates, seed=1, name=name, progress=progress,
                                           feature_scale=scale if scale is not None else np.linspace(0.5, 2.0, spec.p)))
    return pd.concat(frames, ignore_index=True)


def _semi_synthetic_row(hidden, results, name, repeats) -> dict:
    with threadpool_limits(1):  # one core per worker
        best = int(results[name]["best"])
        Hl, y, pool, model = _layer_model(hidden, name, best)
        r = semi_synthetic_path(Hl, model, int(round(0.6 * len(y))), PATH_CS, repeats=repeats)
    meas = r["measured"].mean(axis=0)
    seeds = results[name]["best_seeds"]
    real_truth = np.mean([s["path"] for s in seeds], axis=0)
    real_pred = np.mean([s["pred"]["spectral/deconvolved/sample"]["path"] for s in seeds], axis=0)
    return {"dataset": name, "layer": best, "kappa_teacher": r["kappa"],
            "semi_synthetic_mae_lambda": float(np.mean(np.abs(meas - r["predicted"]))),
            "semi_synthetic_se": float(np.mean(r["measured"].std(axis=0, ddof=1) / math.sqrt(repeats))),
            "semi_synthetic_spearman": _spearman(meas, r["predicted"]),
            "real_labels_mae_lambda": float(np.mean(np.abs(real_truth - real_pred))),
            "real_labels_spearman": _spearman(real_truth, real_pred)}


def semi_synthetic_table(hidden, results, *, repeats=5, progress=True, n_jobs=1) -> pd.DataFrame:
    """Per dataset at its best layer: the theory on real features with a known teacher vs on real labels
    (``n_jobs`` datasets in parallel; the rows do not depend on it).

    Parameters
    ----------
    hidden : dict
        dataset name -> (H (L+1, n, p), y).
    results : dict
        From :func:`evaluate_all`.
    repeats : int, default=5
        Label draws of :func:`empirical.probes.spectral_evaluation.semi_synthetic_path`.
    progress : bool, default=True
        Show a progress bar.
    n_jobs : int, default=1
        joblib workers (at most one per dataset).

    Returns
    -------
    pandas.DataFrame
        One row per dataset: the semi-synthetic MAE, standard error and Spearman along lambda, and the same
        theory's MAE and Spearman on the real labels.
    """
    n_jobs = check_n_jobs(n_jobs)
    names = list(hidden)
    jobs = (delayed(_semi_synthetic_row)(hidden, results, name, repeats) for name in names)
    return pd.DataFrame(Parallel(n_jobs=min(n_jobs, len(names)))(
        tqdm(jobs, desc="semi-synthetic", total=len(names), disable=not progress, leave=False)))


def paper_predictor_table(hidden, results, *, seeds=3, progress=True) -> pd.DataFrame:
    """The paper's calibrated delta-sweep predictor (:func:`empirical.probes.structure.delta_sweep`, with its
    power-law learning-curve baseline) next to the spectral and isotropic theories and ``pool_cv``, on the same
    sweep (best layer, paper's split, C = the split's validation-selected C*; the theories' MAE is against the
    spectral evaluation's own draw of the sweep, the paper predictor's against ``delta_sweep``'s).

    Parameters
    ----------
    hidden : dict
        dataset name -> (H (L+1, n, p), y).
    results : dict
        From :func:`evaluate_all`.
    seeds : int, default=3
        Subsamples per fraction of ``delta_sweep``.
    progress : bool, default=True
        Show a progress bar.

    Returns
    -------
    pandas.DataFrame
        One row per dataset: the paper predictor's and the power-law baseline's MAE (and Spearman) along delta,
        and each of :data:`PREDICTORS`' MAE and Spearman on the spectral evaluation's sweep.
    """
    rows = []
    for name in tqdm(list(hidden), desc="paper delta-sweep predictor", disable=not progress, leave=False):
        best = int(results[name]["best"])
        rec = results[name]["best_seeds"][0]
        H, y = hidden[name]
        Hl = np.asarray(H[best])
        tr, va, te = paper_split(y, random_state=PAPER_SPLIT_SEED)
        pool = np.concatenate([tr, va])
        res = delta_sweep(Hl[pool], y[pool], Hl[te], y[te], C=rec["C_star"], seeds=seeds,
                          fractions=tuple(rec["fractions"]), theory=False, progress=False)
        means = res.table.groupby("fraction")[["Acc_true", "Acc_pred", "Acc_baseline"]].mean()
        truth = means["Acc_true"].to_numpy()
        row = {"dataset": name, "layer": best, "C_star": rec["C_star"],
               "paper_predictor_mae_delta": float(np.mean(np.abs(means["Acc_pred"] - truth))),
               "paper_predictor_spearman_delta": _spearman(means["Acc_pred"], truth),
               "power_law_baseline_mae_delta": float(np.mean(np.abs(means["Acc_baseline"] - truth)))}
        for pname in PREDICTORS:
            pred = np.asarray(rec["pred"][pname]["sweep"])
            row[f"{pname}_mae_delta"] = float(np.mean(np.abs(pred - truth)))
            row[f"{pname}_spearman_delta"] = _spearman(pred, truth)
        rows.append(row)
    return pd.DataFrame(rows)


def run(out, hidden, *, layers=None, extra_seeds=4, seed_layers=(), progress=True, monte_carlo=True, n_jobs=1):
    """Evaluate, tabulate and plot (see the module docstring); ``hidden``: name -> (H, y); ``extra_seeds``
    split seeds beyond the paper's repeat the best layer and ``seed_layers``.

    Parameters
    ----------
    out : path-like
        The run's output directory.
    hidden : dict
        dataset name -> (H (L+1, n, p), y), H indexed by layer (0 = embeddings).
    layers : sequence of int, optional
        Layers evaluated on the paper's split (default 1 .. L).
    extra_seeds, seed_layers, progress, n_jobs
        As for :func:`evaluate_all`.
    monte_carlo : bool, default=True
        Also write ``spectral_monte_carlo`` (:func:`monte_carlo_table`, on ``stsa`` if present, layer
        min(16, L)).

    Returns
    -------
    pandas.DataFrame
        The agreement table (:func:`agreement_table`), also saved as ``spectral_agreement``.
    """
    n_jobs = check_n_jobs(n_jobs)
    out = Path(out)
    n_layers = next(iter(hidden.values()))[0].shape[0]
    layers = list(range(1, n_layers)) if layers is None else list(layers)
    results = evaluate_all(out, hidden, layers, extra_seeds=extra_seeds, seed_layers=seed_layers, progress=progress,
                           n_jobs=n_jobs)
    by_seed = agreement_by_seed(results)
    save_table(by_seed, out, "spectral_agreement_by_seed")
    table = agreement_table(results, by_seed)
    save_table(table, out, "spectral_agreement")
    for name, res in results.items():
        plot_dataset(name, res, out)
    save_table(semi_synthetic_table(hidden, results, progress=progress, n_jobs=n_jobs), out, "spectral_semi_synthetic")
    save_table(paper_predictor_table(hidden, results, progress=progress), out, "spectral_vs_paper_predictor")
    if monte_carlo:
        name = "stsa" if "stsa" in hidden else next(iter(hidden))
        save_table(monte_carlo_table(hidden, dataset=name, layer=min(16, n_layers - 1), progress=progress), out,
                   "spectral_monte_carlo")
    return table


def load_hidden(model="smollm2", data_dir=None, max_per_class=500, names=None, progress=True) -> dict:
    """name -> (hidden states of every layer, labels), through the extraction cache.

    Parameters
    ----------
    model : str, default="smollm2"
        Passed to :func:`empirical.llm.load_model`.
    data_dir : path-like, optional
        The datasets' directory (:func:`empirical.llm.datasets.resolve_data_dir`).
    max_per_class : int, default=500
        Per-class cap of :func:`empirical.llm.datasets.load`.
    names : sequence of str, optional
        Datasets (default every registered one).
    progress : bool, default=True
        Show progress bars.

    Returns
    -------
    dict
        name -> (H of shape (L+1, n, p), layers 0..L, labels 0/1).
    """
    from empirical.llm import (
        extract_dataset,  # torch side, imported when the section runs
        load_model,
    )

    mdl, tok = load_model(model)
    hidden = {}
    for name in names or datasets.dataset_names():
        ds = datasets.load(name, data_dir, max_per_class=max_per_class)
        hidden[name] = (extract_dataset(mdl, tok, ds, layers="all", progress=progress), np.asarray(ds.labels))
    return hidden
