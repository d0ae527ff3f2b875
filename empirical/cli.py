"""``raptor`` command line: extract | probe | stability | steer | sweep | plan | export.

Every subcommand reads a concept dataset (``--dataset NAME`` or ``--table FILE --text-column ...
--label-column ...``), loads a model (``--model``, default SmolLM2-135M-Instruct), gets last-token
hidden states from the extraction cache (computing them once), and writes CSV/JSON tables and PNG
plots into ``--out``. Layers follow the package convention: layer l = output of decoder block l
(1..L); layer 0 = embeddings. Splits follow the paper: stratified test 20 %, validation 20 %,
train 60 % (seed 42).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from empirical.common.cli_args import (
    add_version,
    check_output_suffix,
    enforce_options,
    holding_outputs,
    int_in,
    nonempty_path,
    number_in,
    number_list,
    output_path,
    subparser,
    worker_count,
)
from empirical.common.cli_errors import debug_requested, run_command

from . import llm  # the front door: its torch side loads on first use (_llm)
from .common.arrays import C_MAX, C_MIN
from .common.files import check_write_target, output_lock, refuse_overwriting_inputs, write_csv, write_json
from .common.resources import resolve_device  # imports torch only when it resolves a device
from .llm import MIN_RANDOM, STORAGES, ExtractionCache, SteeringProtocol, below_tau, datasets, reliable_layers
from .probes import (
    PAPER_SPLIT_SEED,
    RaptorProbe,
    export_control_vector,
    export_directions,
    file_pair,
    fit_layers,
    get_method,
    load_concept_vectors,
    method_names,
    methods,
    paper_split,
    save_concept_vectors,
    stability,
)
from .probes.planning import FORECASTERS, PLAN_FOLDS, check_forecast_level, label_pool, plan_labels
from .probes.structure import MAX_SEEDS, delta_sweep
from .reporting import plot_delta_sweep, plot_plan, plot_probe_accuracy, plot_stability

#: Largest --target-n (labelled rows): beyond any dataset, and n/p inside the theory's domain for p >= 100.
TARGET_N_MAX = 10 ** 8

#: most layers a --layers range may name (a typo such as '1-1000000000' is refused, not allocated)
MAX_LAYER_RANGE = 10_000
#: most refits ``raptor stability --K`` runs (the interval of the mean |cos| is stable long before)
MAX_REFITS = 1000
#: largest ``--seed`` (numpy seeds are 32-bit here)
MAX_SEED = 2**32 - 1

#: ``raptor steer``'s defaults are the protocol's (a new steering option is one SteeringProtocol field)
STEER_DEFAULTS = SteeringProtocol()


def _llm():
    """The torch side of :mod:`empirical.llm`'s front door (model loading, extraction, steering), loaded when a
    command needs it: torch and transformers are the optional ``[llm]`` extra, and ``raptor --help`` should not wait
    for them."""
    try:
        llm.load_model  # noqa: B018 - the front door loads the torch side on first use
    except ImportError as exc:
        raise SystemExit(f"raptor needs the [llm] extra (pip install 'raptor-probes[llm]'): {exc}") from None
    return llm


# --------------------------------------------------------------------------- argument helpers
def _layers_arg(spec):
    """'all' | '1-30' | '5,10,20' | '3' -> list or 'all' (validated against L later)."""
    if spec is None:
        return None
    spec = str(spec).strip()
    if spec == "all":
        return "all"
    out = []
    try:
        for part in spec.split(","):
            if "-" in part:
                a, b = (int(x) for x in part.split("-"))
                if a > b or b - a >= MAX_LAYER_RANGE:
                    raise argparse.ArgumentTypeError(f"layer range {part!r} must go up (a <= b) and name at most "
                                                     f"{MAX_LAYER_RANGE} layers")
                out.extend(range(a, b + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"layers must look like 'all', '1-30' or '5,10,20', got {spec!r}") from None
    repeated = sorted({layer for layer in out if out.count(layer) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"layers must be distinct, got {repeated} more than once in {spec!r}")
    return sorted(out)


def _max_per_class(v):
    """``--max-per-class``: 'reference', 'all' or a positive int."""
    if v in ("reference", "all"):
        return v
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--max-per-class must be 'reference', 'all' or a positive int, got {v!r}")
    if n < 1:
        raise argparse.ArgumentTypeError("--max-per-class must be >= 1")
    return n


def _add_common(p, multi_dataset=False):
    d = p.add_argument_group("data")
    if multi_dataset:
        d.add_argument("--dataset", nargs="+", metavar="NAME",
                       help=f"one or more of {' '.join(datasets.dataset_names())}, or 'all'")
    else:
        d.add_argument("--dataset", metavar="NAME", help=" | ".join(datasets.dataset_names()))
    d.add_argument("--table", type=nonempty_path, metavar="FILE", help="your own CSV/TSV/JSONL instead of --dataset")
    d.add_argument("--text-column", help="text column of --table")
    d.add_argument("--label-column", help="label column of --table (0/1, True/False, yes/no)")
    d.add_argument("--positive-label", help="label value meaning 'concept present' (other values -> 0)")
    d.add_argument("--template", help="prompt template with {text} (default: the dataset's own / plain text)")
    d.add_argument("--data-dir", type=nonempty_path,
                   help="dataset directory (default $RAPTOR_DATA, then ../shared/datasets)")
    d.add_argument("--max-per-class", type=_max_per_class, default="reference",
                   help="'reference' (Concept-Depth caps, default), 'all', or N first examples per class")
    d.add_argument("--quick", type=int_in(1), nargs="?", const=100, metavar="N",
                   help="fast look: at most N examples per class (default N=100)")
    d.add_argument("--no-verify", action="store_true", help="skip the SHA256SUMS check")
    m = p.add_argument_group("model")
    m.add_argument("--model", default="smollm2", help="'smollm2' (default) or a local model directory / hub id")
    m.add_argument("--device", type=nonempty_path,
                   help="cpu, cuda, cuda:N, auto (default: the model on cuda if available); given to 'raptor "
                        "probe' as a CUDA device, the probes are fitted there too, all layers at once on the batched "
                        "engine (on the CPU the numpy solver is faster, measured in docs/probe.md)")
    m.add_argument("--dtype", help="float32 (default), bfloat16, float16, float64")
    m.add_argument("--batch-size", type=int_in(1), default=32)
    m.add_argument("--threads", type=worker_count("torch threads"),
                   help="torch threads, at most the CPU cores (default: torch's choice)")
    m.add_argument("--chat", action="store_true", help="wrap prompts in the tokenizer's chat template")
    m.add_argument("--pooling", choices=["last", "mean", "first"],
                   help="token pooling of the hidden states (default: last for decoders, mean for encoders)")
    m.add_argument("--cache-dir", type=nonempty_path, help="cache root (default $RAPTOR_CACHE or ~/.cache/raptor)")
    m.add_argument("--no-cache", action="store_true", help="do not read or write the hidden-state cache")
    m.add_argument("--cache-dtype", choices=STORAGES, default="float32",
                   help="dtype of cached hidden states: float16 halves disk and memory at a measured accuracy cost "
                        "(docs/llm.md, 'Cache storage'; default float32)")
    p.add_argument("--out", type=output_path("directory"), default="raptor_out", help="output directory (created)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--debug", action="store_true",
                   help="show the full traceback of an error (also: environment variable RAPTOR_DEBUG=1)")


def _load_datasets(args, names):
    cap = args.max_per_class
    cap = None if cap == "all" else cap
    if args.quick:
        cap = args.quick
    if args.table:
        if names:
            raise ValueError(f"give either --dataset or --table, not both (got --dataset {' '.join(names)} and "
                             f"--table {args.table})")
        if not (args.text_column and args.label_column):
            raise ValueError("--table needs --text-column and --label-column")
        return [datasets.load_table(args.table, args.text_column, args.label_column, args.template,
                                    positive_label=args.positive_label,
                                    max_per_class=None if cap == "reference" else cap)]
    for option in ("text_column", "label_column", "positive_label"):
        if getattr(args, option):
            raise ValueError(f"--{option.replace('_', '-')} only applies to --table")
    if not names:
        raise ValueError("give --dataset NAME (or --table FILE --text-column ... --label-column ...)")
    names = list(datasets.dataset_names()) if names == ["all"] else names
    return [datasets.load(n, args.data_dir, max_per_class=cap, verify=not args.no_verify, template=args.template)
            for n in names]


def _load_model(args):
    if args.no_progress:  # transformers' own "Loading weights" bar too (one command per process)
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
    return _llm().load_model(args.model, device=args.device, dtype=args.dtype, cache_dir=args.cache_dir)


def _hidden(args, model, tok, ds, layers="all"):
    cache = False if args.no_cache else ExtractionCache(
        (Path(args.cache_dir).expanduser() / "hidden") if args.cache_dir else None, storage=args.cache_dtype)
    return _llm().extract_dataset(model, tok, ds, layers=layers, batch_size=args.batch_size, cache=cache,
                                     chat=args.chat, num_threads=args.threads, pooling=args.pooling,
                                     progress=not args.no_progress)


def _input_files(args) -> list:
    """The files a command reads that a user names (``--table``, both files of ``--probe-file``), as
    ``(option, path)`` for :func:`empirical.common.files.refuse_overwriting_inputs`."""
    inputs = []
    if getattr(args, "table", None):
        inputs.append(("--table", args.table))
    if getattr(args, "probe_file", None):
        inputs += [("--probe-file", f) for f in file_pair(Path(args.probe_file).expanduser())]
    return inputs


def _out(args, names=()) -> Path:
    """The output directory, created and checked writable before any work, and the files the command
    will write (``names``; glob patterns for names known only later) checked not to be directories and
    not to be, or alias, an input file (``--table``, ``--probe-file``), so no computed result is lost at
    the end and no input is overwritten."""
    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".raptor-write-check-"):
            pass
    except OSError as exc:
        raise ValueError(f"--out {str(out)!r} is not a writable directory ({exc.strerror or exc})") from None
    targets = []
    for name in names:
        targets += sorted(out.glob(name)) if any(c in name for c in "*?[") else [out / name]
    for target in targets:
        if target.is_dir():
            raise ValueError(f"cannot write {str(target)!r}: a directory of that name exists")
        check_write_target(target)  # a device, FIFO or socket is never replaced by a regular file
    refuse_overwriting_inputs([("--out", target) for target in targets], _input_files(args))
    return out


def _draw(plot, table, path, **labels):
    """Draw one figure, ``plot(table, path, **labels)`` (a function of :mod:`empirical.reporting`); a drawing or
    saving error becomes a warning naming the figure, so a failed plot never loses the tables written before it."""
    try:
        plot(table, path, **labels)
    except Exception as exc:  # noqa: BLE001 -- any plotting failure; the tables are already written
        print(f"raptor: warning: could not draw {path} ({type(exc).__name__}: {exc}); the tables are saved",
              file=sys.stderr)


def _select_layers(spec, L, default):
    if spec is None:
        return default
    return _llm().resolve_layers(spec, L)


def _probe_table(fit) -> "pd.DataFrame":
    """The per-layer table of ``raptor probe`` from a :class:`PerLayerFit`."""
    table = fit.summary.rename(columns={"lambda_": "lambda_star", "C": "C_star"}).drop(columns=["best"])
    table["n_train"], table["n_val"], table["n_test"] = (len(rows) for rows in fit.split)
    return table


# --------------------------------------------------------------------------- subcommands
def cmd_extract(args):
    dsets = _load_datasets(args, args.dataset)
    out = _out(args, ["extract_summary.json"])
    model, tok = _load_model(args)
    summary = []
    for ds in dsets:
        t = time.perf_counter()
        H = _hidden(args, model, tok, ds)
        rec = dict(dataset=ds.name, n=len(ds), class_counts=ds.class_counts(), shape=list(H.shape),
                   layers="0..L (0 = embeddings, l = output of decoder block l)",
                   cache_file=getattr(H, "filename", None), seconds=round(time.perf_counter() - t, 2))
        summary.append(rec)
        print(f"{ds.name}: {len(ds)} prompts -> {tuple(H.shape)} in {rec['seconds']} s"
              + (f"  [{rec['cache_file']}]" if rec["cache_file"] else ""))
    write_json(out / "extract_summary.json", summary)
    return 0


def probe_device(device):
    """Where ``raptor probe`` fits its probes: the batched engine on a CUDA ``--device``; the numpy solver
    otherwise (None), which is faster than the engine on the CPU (docs/probe.md, "The batched engine")."""
    if device is None:
        return None
    return device if resolve_device(device).type == "cuda" else None


def cmd_probe(args):
    dsets = _load_datasets(args, args.dataset)
    baselines = _baselines(args.baselines)
    out = _out(args, ["probe_summary.csv", *(f"{stem}_{ds.name}.{ext}" for ds in dsets
                                             for stem, ext in (("probe", "csv"), ("probe", "json"), ("probe", "png"),
                                                               ("probes", "safetensors"), ("probes", "json")))])
    model, tok = _load_model(args)
    overview = []
    for ds in dsets:
        H = _hidden(args, model, tok, ds)
        L = H.shape[0] - 1
        layers = _select_layers(args.layers, L, list(range(1, L + 1)))
        fit = fit_layers(H, ds.labels, layers=layers, random_state=PAPER_SPLIT_SEED, n_jobs=args.jobs,
                         progress=not args.no_progress, device=probe_device(args.device))
        table = _probe_table(fit)
        val_best = fit.best_layer
        if baselines:
            table = table.merge(_baseline_table(H, ds.labels, layers, fit.split, baselines, not args.no_progress),
                                on="layer")
        write_csv(out / f"probe_{ds.name}.csv", table)
        save_concept_vectors(out / f"probes_{ds.name}",
                             fit.concept_vectors(model=_llm().model_identity(model), metadata=dict(dataset=ds.name)))
        best = table.loc[table["test_accuracy"].idxmax()]
        vb = table.set_index("layer").loc[val_best]
        rec = dict(dataset=ds.name, n=len(ds), class_counts=ds.class_counts(), best_layer=int(best.layer),
                   best_test_accuracy=float(best.test_accuracy), lambda_star=float(best.lambda_star),
                   mean_test_accuracy=float(table.test_accuracy.mean()),
                   val_selected_layer=int(val_best),
                   val_selected_test_accuracy=float(vb.test_accuracy),
                   median_fit_time_s=float(table.fit_time_s.median()))
        overview.append(rec)
        write_json(out / f"probe_{ds.name}.json", rec)
        _draw(plot_probe_accuracy, table, out / f"probe_{ds.name}.png", dataset=ds.name, n_examples=len(ds),
              labels={m.cli_name: m.name for m in methods()})
        print(f"{ds.name}: best layer {rec['best_layer']}  test acc {rec['best_test_accuracy']:.3f}  "
              f"lambda* {rec['lambda_star']:.3g}  (mean over layers {rec['mean_test_accuracy']:.3f})")
    write_csv(out / "probe_summary.csv", pd.DataFrame(overview))
    return 0


def _baselines(names) -> list:
    """The registry's entries of ``--baselines`` (any method but RAPTOR, by name or short name:
    :mod:`empirical.probes._registry`); ``ValueError`` naming the option and the choices otherwise."""
    choices = [m.cli_name for m in methods() if m.name != "RAPTOR"]
    specs = []
    for name in names:
        try:
            spec = get_method(name)
        except ValueError:
            spec = None
        if spec is None or spec.name == "RAPTOR":
            raise ValueError(f"unknown baseline {name!r} for --baselines; choose from {', '.join(choices)}")
        specs.append(spec)
    return specs


def _baseline_table(H, y, layers, split, specs, progress):
    """Test accuracy and fit seconds of each baseline (registry entries) per layer, on the split the RAPTOR probes
    used; columns ``<cli_name>_test_accuracy`` and ``<cli_name>_fit_time_s``."""
    table = None
    for spec in specs:
        name = spec.cli_name
        fit = fit_layers(H, y, layers=layers, estimator=spec.estimator(), split=split, progress=progress)
        part = fit.summary[["layer", "fit_time_s", "test_accuracy"]].rename(
            columns={"fit_time_s": f"{name}_fit_time_s", "test_accuracy": f"{name}_test_accuracy"})
        table = part if table is None else table.merge(part, on="layer")
    return table


def cmd_stability(args):
    dsets = _load_datasets(args, [args.dataset] if args.dataset else None)
    out = _out(args, [f"stability_{ds.name}.{ext}" for ds in dsets for ext in ("csv", "png")])
    model, tok = _load_model(args)
    for ds in dsets:
        H = _hidden(args, model, tok, ds)
        L = H.shape[0] - 1
        layers = _select_layers(args.layers, L, list(range(max(1, L // 4), L + 1, max(1, L // 4))))
        tr, va, te = paper_split(ds.labels, random_state=PAPER_SPLIT_SEED)
        pool = np.sort(np.r_[tr, va])
        rows = []
        for layer in tqdm(layers, desc="stability layers", disable=args.no_progress, leave=False):
            X = np.asarray(H[layer], dtype=np.float64)
            res = stability(RaptorProbe(), X[pool], ds.labels[pool], K=args.K, drop=args.drop, seed=args.seed)
            rows.append(dict(layer=layer, mean_abs_cos=float(res.mean_abs_cos), ci_low=float(res.ci[0]),
                             ci_high=float(res.ci[1]), median_fit_time_s=float(np.median(res.fit_times)),
                             K=args.K, drop=args.drop))
        table = pd.DataFrame(rows)
        write_csv(out / f"stability_{ds.name}.csv", table)
        _draw(plot_stability, table, out / f"stability_{ds.name}.png", dataset=ds.name)
        print(table.to_string(index=False))
    return 0


def _steer_settings(args, settings):
    """The settings ``raptor steer`` measures: the named one (``--setting``, default the paper's protocol) or, with
    ``--sweep``, the strength sweep over ``--strengths``; ``--positions`` overrides the edited positions."""
    positions = [args.positions] if args.positions else None
    if args.sweep:
        return settings.sweep_settings(k_grid=args.strengths, positions=positions or ("answer",))
    name = args.setting or settings.DEFAULT_SETTING
    setting = settings.named_setting(name)
    if positions:
        setting = settings.SteeringSetting(setting.kind, setting.layers, setting.strength, positions[0],
                                           name=f"{name}-{positions[0]}")
    return [setting]


def _given_vectors(steering, probes, H, labels, layers):
    """``--probe-file`` vectors restricted to ``layers`` (:meth:`~empirical.probes.ConceptVectors.select`), each
    probe with its validation accuracy (:func:`empirical.llm.given_vectors`)."""
    if not set(probes.layers) & set(layers):
        raise ValueError(f"--probe-file has probes for layers {probes.layers}, none of them among the steered layers "
                         f"{layers[0]}..{layers[-1]}")
    return steering.given_vectors(probes.select(layers), H, labels,
                                  paper_split(labels, random_state=PAPER_SPLIT_SEED))


def cmd_steer(args):
    steering = _llm()
    dsets = _load_datasets(args, [args.dataset] if args.dataset else None)
    probes_given = load_concept_vectors(args.probe_file) if args.probe_file else None  # a bad file fails first
    words = {ds.name: steering.check_answer_words(ds.name, args.answer_words) for ds in dsets}
    settings = _steer_settings(args, steering)
    # an invalid combination fails before the model loads
    protocol = SteeringProtocol(stem=args.stem, directions=("towards", "away") if args.direction == "both"
                                else (args.direction,), n_random=args.n_random, seed=args.seed,
                                n_generate=args.generate, max_new_tokens=args.max_new_tokens,
                                batch_size=args.batch_size, n_prompts=args.n_prompts)
    out = _out(args, ["steer_metrics.csv", "steer_selected.csv"])
    model, tok = _load_model(args)
    if probes_given is not None:  # another model's vectors are refused before any extraction
        probes_given.check_provenance(f"--probe-file {args.probe_file!r}", model=_llm().model_identity(model),
                                      n_features=getattr(model.config, "hidden_size", None))
    positions = _llm().model_positions(model)
    if args.generate and positions and args.max_new_tokens >= positions:
        raise ValueError(f"--max-new-tokens must be below the model's {positions} positions (minus each prompt's "
                         f"length), got {args.max_new_tokens}")
    for ds in dsets:
        steering.answer_token_ids(tok, words[ds.name])
    tables = []
    for ds in dsets:
        H = _hidden(args, model, tok, ds)
        L = H.shape[0] - 1
        layers = _select_layers(args.layers, L, list(range(1, L + 1)))
        if probes_given is not None:
            probes_given.check_provenance(f"--probe-file {args.probe_file!r}", dataset=ds.name)  # a warning
            vectors = _given_vectors(steering, probes_given, H, ds.labels, layers)
        else:
            vectors = steering.method_vectors(H, ds.labels, paper_split(ds.labels, random_state=PAPER_SPLIT_SEED),
                                              methods=args.methods, layers=layers, progress=not args.no_progress)
        vectors = _tau_filter(vectors, args.tau)
        # a dataset with its own held-out file (stsa.binary.test) is steered on it
        eval_ds = datasets.load(ds.name, args.data_dir, max_per_class=None, verify=not args.no_verify, split="test") \
            if not args.table and datasets.get_dataset(ds.name).test_files else None
        run = steering.SteeringRun(eval_dataset=eval_ds, answer_words=words[ds.name], progress=not args.no_progress)
        table, _ = steering.evaluate_dataset(model, tok, ds, H, settings, protocol=protocol, vectors=vectors, run=run)
        tables.append(table)
    table = pd.concat(tables, ignore_index=True)
    write_csv(out / "steer_metrics.csv", table)
    selected = steering.select_operating_points(table)
    write_csv(out / "steer_selected.csv", selected)
    cols = ["dataset", "method", "setting", "direction", "half", "answer_logodds_shift", "random_control_shift",
            "concept_specific_shift", "concept_specific_low", "concept_specific_high", "answer_mass_steered",
            "perplexity_ratio", "auc_unsteered", "measurable"]
    with pd.option_context("display.width", 220, "display.max_colwidth", 40):
        print(table[table.half == "report"][cols].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if not table.measurable.any():
        print("\nThe unsteered answer does not track the concept (AUC < "
              f"{steering.MIN_AUC}, not above chance at one-sided p <= {steering.MAX_AUC_P}, or answer mass < "
              f"{steering.MIN_MASS}): not measurable here.")
    return 0


def _tau_filter(vectors, tau):
    """Keep each method's layers whose *validation* accuracy reaches ``--tau`` (the paper's reliability threshold,
    read on the validation rows: the steering prompts come from the test split, so the layer rule never reads it);
    an error naming the best layer when none does."""
    if tau is None:
        return vectors
    kept = {}
    for method, cv in vectors.items():
        acc = {layer: probe.validation_accuracy for layer, probe in cv.items()}
        reliable, below = reliable_layers(acc, tau, what="validation accuracy")
        if not reliable:
            raise ValueError(f"no layer can be steered for {method}: "
                             f"{below_tau(acc, tau, below, what='validation accuracy')}; lower --tau")
        kept[method] = cv.select(reliable)
    return kept


def cmd_sweep(args):
    dsets = _load_datasets(args, [args.dataset] if args.dataset else None)
    out = _out(args, [f"sweep_{ds.name}_L{args.layer if args.layer is not None else '*'}{ext}" for ds in dsets
                      for ext in ("_table.csv", "_summary.csv", "_fixed.json", ".png")])
    fractions, Cs = args.fractions, args.Cs
    model, tok = _load_model(args)
    for ds in dsets:
        H = _hidden(args, model, tok, ds)
        L = H.shape[0] - 1
        layer = args.layer if args.layer is not None else max(1, L // 2)
        if not 1 <= layer <= L:
            raise ValueError(f"--layer must be in 1..{L} for this model, got {layer}")
        tr, va, te = paper_split(ds.labels, random_state=PAPER_SPLIT_SEED)
        pool = np.sort(np.r_[tr, va])
        X = np.asarray(H[layer], dtype=np.float64)
        kw = dict(seeds=args.seeds, n_jobs=args.jobs, progress=not args.no_progress)
        if fractions:
            kw["fractions"] = fractions
        if Cs:
            kw["Cs"] = Cs
        res = delta_sweep(X[pool], ds.labels[pool], X[te], ds.labels[te], **kw)
        stem = f"sweep_{ds.name}_L{layer}"
        write_csv(out / f"{stem}_table.csv", res.table)
        write_csv(out / f"{stem}_summary.csv", res.summary)
        write_json(out / f"{stem}_fixed.json", dict(dataset=ds.name, layer=layer, **res.fixed))
        _draw(plot_delta_sweep, res.table, out / f"{stem}.png", C=res.fixed["C"], lam=res.fixed["lam"],
              dataset=ds.name, layer=layer)
        print(res.summary.to_string(index=False))
        f = res.fixed
        undefined = [k for k in ("rho_s", "r", "baseline_rho_s", "baseline_r") if not np.isfinite(f[k])]
        if undefined:  # the files are written (nothing is lost), but a NaN in them must not pass silently
            raise ValueError(f"{out / (stem + '_fixed.json')}: {', '.join(undefined)} undefined (written as NaN): "
                             "the true or predicted accuracy is the same at every fraction of --fractions "
                             f"{list(res.summary['fraction'].unique()) if 'fraction' in res.summary else ''}; "
                             "choose fractions over which the accuracy changes")
        print(f"C fixed in advance ({f['C_source']}): lambda={f['lam']:.3g}  Spearman {f['rho_s']:.3f}  Pearson "
              f"{f['r']:.3f}  MAE {f['mae']:.3f}; power-law baseline: Spearman {f['baseline_rho_s']:.3f}  "
              f"MAE {f['baseline_mae']:.3f}")
    return 0


def cmd_plan(args):
    """How many labels does the concept need: per layer, the accuracy predicted at --target-n from --labels rows."""
    if args.target_n <= args.labels:
        raise ValueError(f"--target-n must be larger than --labels ({args.labels}; the pool's own accuracy is "
                         f"measured, not predicted), got {args.target_n}")
    if args.forecaster != "spectral":  # before the model loads
        check_forecast_level(args.level, f"--level (with --forecaster {args.forecaster}; spectral takes any)")
    dsets = _load_datasets(args, [args.dataset] if args.dataset else None)
    pools = [label_pool(ds.labels, args.labels, args.seed, dataset=ds.name) for ds in dsets]  # before any model work
    out = _out(args, [f"plan_{ds.name}.{ext}" for ds in dsets for ext in ("csv", "json", "png")])
    model, tok = _load_model(args)
    for ds, pool in zip(dsets, pools):
        H = _hidden(args, model, tok, ds)
        L = H.shape[0] - 1
        layers = _select_layers(args.layers, L, list(range(1, L + 1)))
        plan = plan_labels(H, ds.labels, pool, args.target_n, layers=layers, forecaster=args.forecaster,
                           teacher=args.teacher, level=args.level, n_boot=args.n_boot,
                           target_accuracy=args.target_accuracy, random_state=args.seed,
                           progress=not args.no_progress)
        table = plan.table
        write_csv(out / f"plan_{ds.name}.csv", table)
        rec = dict(dataset=ds.name, labels=args.labels, target_n=args.target_n, best_layer=plan.best_layer,
                   predicted_accuracy=plan.predicted_accuracy, interval=[plan.low, plan.high], level=args.level,
                   C_star=plan.C_star, forecaster=args.forecaster,
                   held_out_error=float(table.held_out_error.iloc[0]), teacher=args.teacher, seed=args.seed,
                   accuracy=f"test accuracy of a probe trained on target_n labelled rows ({args.forecaster})")
        if args.target_accuracy is not None:
            rec.update(target_accuracy=args.target_accuracy, reachable_within=plan.reachable_within,
                       fewest_labels_layer=plan.fewest_labels_layer, fewest_labels=plan.fewest_labels)
        write_json(out / f"plan_{ds.name}.json", rec)
        _draw(plot_plan, table, out / f"plan_{ds.name}.png", dataset=ds.name, labels=args.labels,
              target_n=args.target_n, level=args.level, target_accuracy=args.target_accuracy)
        with pd.option_context("display.width", 200):
            print(table.drop(columns=["teacher", "level", "labels", "target_n", "forecaster",
                                      "held_out_error"]).to_string(
                index=False, float_format=lambda x: f"{x:.3f}"))
        print(f"{ds.name}: predicted best layer at n = {args.target_n}: {plan.best_layer} "
              f"(accuracy {plan.predicted_accuracy:.3f} [{plan.low:.3f}, {plan.high:.3f}], C = {plan.C_star:.3g})")
        error = table.held_out_error.iloc[0]
        print(f"{ds.name}: forecaster {args.forecaster}" + (
            f": mean absolute error {error:.3f} on held-out datasets near this multiple; the {args.level:g} interval "
            "was calibrated on them (docs/learning_curves.md)" if np.isfinite(error) else
            ": the spectral theory alone (its interval: bootstrap, profile bounds and this pool's backtest)"))
        if args.target_accuracy is not None:
            print(f"{ds.name}: labels to reach {args.target_accuracy:g}: " + (
                f"{plan.fewest_labels:.0f} at layer {plan.fewest_labels_layer}" if plan.fewest_labels is not None
                else f"not reached by any layer within {plan.reachable_within:.0f} labels"))
    return 0


EXPORT_SUFFIX = {"gguf": ".gguf", "safetensors": ".safetensors"}


def cmd_export(args):
    """Concept vectors saved by ``raptor probe`` (or ``save_concept_vectors``) -> a llama.cpp control
    vector (GGUF) or a plain ``{block index: direction}`` safetensors file (repeng, steering-vectors)."""
    vectors = load_concept_vectors(args.probe_file)
    stem = file_pair(args.probe_file)[0].removesuffix(".safetensors")  # 'probes_reviews.v2' keeps its '.v2'
    target = Path(args.out).expanduser() if args.out else Path(
        stem + ("_control" if args.format == "gguf" else "_directions") + EXPORT_SUFFIX[args.format])
    if target.is_dir():
        raise ValueError(f"--out {str(target)!r} is a directory; give the file to write")
    check_write_target(target)  # a device or FIFO is refused, never replaced by a regular file
    refuse_overwriting_inputs([("--out", target)], _input_files(args))
    check_output_suffix("--out", target, [EXPORT_SUFFIX[args.format]])  # GGUF is not written to a .safetensors name
    if args.out is None:  # the name derived from --probe-file is an output too (a given --out is locked by main)
        with output_lock(target, "--out (derived from --probe-file)"):
            return _export(args, vectors, target)
    return _export(args, vectors, target)


def _export(args, vectors, target) -> int:
    """The write of :func:`cmd_export` (its output checked and locked)."""
    layers = None if args.layers in (None, "all") else args.layers
    if args.format == "gguf":
        if layers is None and min(vectors.layers) < 2:
            layers = [layer for layer in vectors.layers if layer >= 2]
            print(f"raptor export: layer(s) {[layer for layer in vectors.layers if layer < 2]} skipped: "
                  "llama.cpp cannot address the output of block 1 (direction.0)", file=sys.stderr)
        path = export_control_vector(target, vectors, scale=args.scale, layers=layers, model_hint=args.model_hint)
    else:
        path = export_directions(target, vectors, scale=args.scale, layers=layers)
    exported = vectors.layers if layers is None else sorted(set(layers))  # what was written, nothing else
    print(f"wrote {path}: {len(exported)} direction(s), RAPTOR layers {exported[0]}..{exported[-1]} -> block "
          f"indices {exported[0] - 1}..{exported[-1] - 1}, scale {args.scale:g}")
    return 0


# --------------------------------------------------------------------------- parser
#: per subcommand: which options apply in which mode and which exclude each other
#: (empirical.common.cli_args.enforce_options)
#: The data options every command with a data group shares (``_add_common``): a table or a built-in dataset, the
#: table's columns only with ``--table``, the built-in files' options only with ``--dataset``, one size cap, and the
#: cache's dtype only with a cache.
DATA_OPTIONS = {"excludes": [("--dataset", "--table"), ("--quick", "--max-per-class"), ("--no-cache", "--cache-dtype")],
                "needs": {"--text-column": "--table", "--label-column": "--table", "--positive-label": "--table",
                          "--no-verify": "--dataset", "--data-dir": "--dataset"}}


def _with_data(table: dict) -> dict:
    """``table`` with :data:`DATA_OPTIONS` added."""
    return {"excludes": [*DATA_OPTIONS["excludes"], *table.get("excludes", ())],
            "needs": {**DATA_OPTIONS["needs"], **table.get("needs", {})},
            **{k: v for k, v in table.items() if k not in ("excludes", "needs")}}


#: Every subcommand declares its table (an empty one: no option depends on or excludes another), so that a new
#: subcommand or option is a decision, not an omission (tests/test_options_and_degenerate_work.py walks them).
OPTIONS = {
    "extract": _with_data({}),
    "probe": _with_data({"distinct": ["--baselines"]}),
    "stability": _with_data({}),
    "steer": _with_data({"excludes": [("--setting", "--sweep")], "needs": {"--strengths": "--sweep"},
                         "distinct": ["--methods"], "nonempty": ["--setting"]}),
    "sweep": _with_data({}),
    "plan": _with_data({}),
    "export": {"nonempty": ["--model-hint"]},
}


def build_parser():
    ap = argparse.ArgumentParser(prog="raptor", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(ap)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("extract", help="hidden states of a dataset into the cache",
                       description="Extract last-token hidden states (layers 0..L) of one or more datasets into "
                                   "the cache.")
    _add_common(p, multi_dataset=True)
    p.set_defaults(func=cmd_extract)

    p = sub.add_parser("probe", help="per-layer RAPTOR probes (+ baselines), summary table and plot",
                       description="Fit RAPTOR at every layer on the paper's split; write per-layer CSV, summary "
                                   "JSON, the concept vectors (probes_<dataset>.safetensors + .json) and a "
                                   "layer-wise accuracy plot.")
    _add_common(p, multi_dataset=True)
    p.add_argument("--layers", type=_layers_arg, help="'all', '1-30' or '5,10' (default 1..L)")
    p.add_argument("--baselines", nargs="*", default=[], metavar="NAME",
                   help="also fit baselines, by short name: " + ", ".join(
                       f"{m.cli_name} ({m.name})" for m in methods() if m.name != "RAPTOR"))
    p.add_argument("--jobs", type=worker_count("layer fits"), default=1,
                   help="parallel layer fits (joblib), at most the CPU cores")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("stability", help="directional stability of RAPTOR concept vectors",
                       description="Drop a fraction of train+val, re-split, refit K times; mean |cos| per layer.")
    _add_common(p)
    p.add_argument("--layers", type=_layers_arg, help="layers (default every L/4)")
    p.add_argument("--K", type=int_in(2, MAX_REFITS), default=20, help=f"refits (2..{MAX_REFITS})")
    p.add_argument("--drop", type=number_in(0.0, 1.0, high_open=True), default=0.2,
                   help="fraction of train+val dropped per refit, in [0, 1)")
    p.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, help="seed of the refits' splits (>= 0)")
    p.set_defaults(func=cmd_stability)

    p = sub.add_parser("steer", help="steering measured by the model's answer (docs/steering.md)",
                       description="Fit (or load) concept vectors, steer held-out prompts towards/away from the "
                                   "concept and read the answer log-odds after a fixed stem, against random "
                                   "directions of the same strength; fluency from KL, perplexity and distinct-2 "
                                   "(docs/steering.md).")
    _add_common(p)
    p.add_argument("--layers", type=_layers_arg, help="layers that may be steered (default 1..L)")
    p.add_argument("--direction", choices=["towards", "away", "both"], default="both")
    p.add_argument("--tau", type=number_in(0.0, 1.0),
                   help="skip layers whose probe validation accuracy is below tau (in [0, 1]; the paper reads test "
                        "accuracy, but the steering prompts come from the test split)")
    p.add_argument("--setting",
                   help="steering setting (docs/steering.md): default paper (the paper's protocol: the published "
                        "full measurement found no RAPTOR setting that beats random directions on every measurable "
                        "dataset and direction; a test keeps this text equal to DEFAULT_SETTING); a preset: paper, "
                        "all-0.99, top3-0.99, best-0.9999, "
                        "best-0.99, best-0.9 (best = validation-best layer), additive-0.1, additive-0.3 (k x median "
                        "hidden-state norm); or any sweep setting by name, e.g. additive-best-k0.2-answer")
    p.add_argument("--sweep", action="store_true",
                   help="measure the strength sweep (GCAV p* 0.9/0.99/0.9999 on all/best/top3 layers, additive "
                        "--strengths on best/top3) and select the operating point on half of the prompts")
    p.add_argument("--strengths", type=number_list(0.0, 10.0, low_open=True, sort=True),
                   default=[0.05, 0.1, 0.2, 0.4, 0.8],
                   help="additive multiples k of the median hidden-state norm for --sweep, in (0, 10]")
    p.add_argument("--methods", nargs="+", choices=method_names("steering"), default=["RAPTOR"],
                   help="concept vectors compared (xRFM: additive settings only)")
    p.add_argument("--positions", choices=["prompt", "answer", "all"], help="override the setting's edited positions")
    p.add_argument("--answer-words", help="concept word and its opposite, e.g. 'Yes,No' (default: the dataset's pair)")
    p.add_argument("--stem", default=STEER_DEFAULTS.stem, help="answer stem appended to each prompt")
    p.add_argument("--n-random", type=int_in(MIN_RANDOM, 1000), default=STEER_DEFAULTS.n_random,
                   help=f"null (random) directions per setting, direction and half, even: antithetic pairs "
                        f"({MIN_RANDOM}..1000; {MIN_RANDOM} is the least whose rank p can reach 0.025)")
    p.add_argument("--seed", type=int_in(0, MAX_SEED), default=STEER_DEFAULTS.seed,
                   help="seed of the random directions")
    p.add_argument("--n-prompts", type=int_in(2), default=STEER_DEFAULTS.n_prompts,
                   help="held-out prompts (classes alternating)")
    p.add_argument("--probe-file", type=nonempty_path,
                   help="concept vectors written by 'raptor probe' (probes_<dataset>.json; skips fitting)")
    p.add_argument("--generate", type=int_in(0), default=STEER_DEFAULTS.n_generate,
                   help="prompts continued per setting for perplexity / distinct-2 (sentiment: VADER); 0 = none")
    p.add_argument("--max-new-tokens", type=int_in(1), default=STEER_DEFAULTS.max_new_tokens,
                   help="tokens generated per prompt (at most the model's positions minus the prompt's length)")
    p.set_defaults(func=cmd_steer)

    p = sub.add_parser("sweep", help="delta-sweep structure predictor at one layer",
                       description="Subsample the train+val pool at several fractions, fit RAPTOR at the C it "
                                   "selects on the pool (plus any --Cs as diagnostics), compare Acc_pred (theory) "
                                   "and a power-law learning curve of the pool with Acc_true.")
    _add_common(p)
    p.add_argument("--layer", type=int_in(1), help="layer (default L/2)")
    p.add_argument("--fractions", type=number_list(0.0, 1.0, low_open=True, min_count=3, sort=True),
                   help="comma-separated distinct fractions of the pool in (0, 1], at least 3")
    p.add_argument("--Cs", type=number_list(C_MIN, C_MAX, sort=True),
                   help=f"comma-separated distinct inverse ridge strengths in [{C_MIN:g}, {C_MAX:g}], evaluated as "
                        "diagnostics (the reported C is RAPTOR's validation-selected C on the pool)")
    p.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=5, help=f"subsamples per fraction (1..{MAX_SEEDS})")
    p.add_argument("--jobs", type=worker_count(), default=1, help="parallel fits, at most the CPU cores")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("plan", help="how many labels: accuracy predicted at more labels, per layer",
                       description="Draw --labels labelled rows of the dataset (the rest count as unlabelled), "
                                   "forecast per layer the test accuracy a probe reaches with --target-n labels "
                                   "(with an interval; by default the pool's learning curve under the spectral "
                                   "theory's ceiling, its interval calibrated on held-out datasets), the best layer "
                                   "and the theory's best C, and the labels needed for --target-accuracy. See "
                                   "docs/learning_curves.md.")
    _add_common(p)
    p.add_argument("--layers", type=_layers_arg, help="'all', '1-30' or '5,10' (default 1..L)")
    p.add_argument("--labels", type=int_in(2 * PLAN_FOLDS), default=300, help="labelled rows of the pool (default 300)")
    p.add_argument("--target-n", type=int_in(2 * PLAN_FOLDS + 1, TARGET_N_MAX, "the documented maximum"),
                   default=3000,
                   help=f"labelled rows to predict the accuracy at (> --labels, at most {TARGET_N_MAX:g}; default "
                        "3000)")
    p.add_argument("--target-accuracy", type=number_in(0.5, 1.0, low_open=True, high_open=True),
                   help="also predict the labels needed to reach this accuracy, in (0.5, 1)")
    p.add_argument("--forecaster", choices=list(FORECASTERS), default=FORECASTERS[0],
                   help="capped_power_law (default: the pool's learning curve capped at the theory's ceiling, the "
                        "held-out winner) or spectral (the theory alone); docs/learning_curves.md")
    p.add_argument("--teacher", choices=["calibrated", "deconvolved"], default="calibrated",
                   help="teacher estimator of the pool model (docs/spectral_theory.md)")
    p.add_argument("--level", type=number_in(0.0, 1.0, low_open=True, high_open=True), default=0.9,
                   help="coverage of the prediction intervals, in (0, 1); 0.8, 0.9 or 0.95 with the default "
                        "forecaster (the levels its interval was calibrated at)")
    p.add_argument("--n-boot", type=int_in(0, 10_000), default=200,
                   help="bootstrap replicates of the pool model (the spectral forecaster's interval)")
    p.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, help="seed of the pool draw and its folds")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("export", help="concept vectors as a llama.cpp control vector or plain safetensors",
                       description="Write the concept vectors of a probes_<dataset>.json file as a llama.cpp "
                                   "control vector (--format gguf: direction.N = scale * unit vector of RAPTOR "
                                   "layer N+1) or a {block index: direction} safetensors file for repeng and "
                                   "steering-vectors (--format safetensors). See docs/interop.md.")
    p.add_argument("--probe-file", type=nonempty_path, required=True,
                   help="concept vectors written by 'raptor probe' (.json or .safetensors)")
    p.add_argument("--format", choices=sorted(EXPORT_SUFFIX), default="gguf")
    p.add_argument("--out", type=output_path("file"),
                   help="file to write, named in the format of --format (.gguf or .safetensors; default: next to "
                        "--probe-file)")
    p.add_argument("--scale", type=number_in(), default=1.0,
                   help="factor on the unit vectors (hidden-state units; llama.cpp multiplies by its strength)")
    p.add_argument("--layers", type=_layers_arg, help="RAPTOR layers to export (default all)")
    p.add_argument("--model-hint", help="controlvector.model_hint (default: the model the vectors came from)")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    p.set_defaults(func=cmd_export)
    return ap


def main(argv=None):
    """Run the ``raptor`` command; returns the exit code (0 success, 2 bad input, 130 interrupted).

    A library ``ValueError`` or ``OSError`` (bad argument, missing or damaged file) becomes one line on
    stderr and exit code 2; ``--debug`` or ``RAPTOR_DEBUG=1`` shows the traceback instead."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command = subparser(parser, args.command)
    enforce_options(command, args, OPTIONS.get(args.command, {}))
    return run_command(lambda: holding_outputs(command, args, lambda: args.func(args)), f"raptor {args.command}",
                       debug=debug_requested(getattr(args, "debug", False), "RAPTOR_DEBUG"),
                       interrupted="interrupted (hidden states extracted so far stay in the cache; a re-run resumes)")


if __name__ == "__main__":
    sys.exit(main())
