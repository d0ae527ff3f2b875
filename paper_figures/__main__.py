"""Regenerate every theory-versus-empirical figure and table of the paper.

    python -m paper_figures --out figures              # everything, default model and data
    python -m paper_figures --out figures --quick      # fast look (small caps, fewer replicates)
    python -m paper_figures --only theory stability    # a subset of the sections

Sections: ``theory`` (fixed point vs simulation, phase diagram, optimal lambda), ``stability``
(ablation-stability theory vs simulation), ``empirical`` (per-layer RAPTOR vs baselines on the default
model SmolLM2-135M-Instruct: accuracy table and layerwise curves, directional stability, training cost,
separability, steering, delta-sweep structure predictor, predicted vs measured stability across layers),
``spectral`` (the spectral theory and the trivial pool_cv predictor against real probes: the three stability
datasets, every fourth layer, the best layer on five split seeds; the evaluation on every dataset and layer is
``spectral_figures.run(out, hidden)``, docs/spectral_theory.md),
``steering_text`` (what steering does to the generated text: concept shift vs fluency per setting and method,
docs/steering.md), ``learning_curves`` (accuracy at 2-8x more labels predicted from pools of 200-800 labels, the
spectral theory against a power-law learning curve and "no gain", docs/learning_curves.md).
Default: every section but ``steering_text`` (under an hour on two cores after the empirical section, by its
timing model's upper bound ``section_seconds("steering_text")``: docs/steering.md, Cost) and
``learning_curves`` (extractions at the Concept-Depth sizes, hours of fits); add them with ``--only``.
Outputs: ``OUT/RESULTS.md`` (the paper's claims checked, with 95 % intervals, and every figure explained),
``OUT/figures/*.png|pdf``, ``OUT/tables/*.csv|md`` (the numbers behind every figure) and an index
``OUT/README.md``.  Hidden states are cached (see ``empirical.llm._extract``) and every step's table is saved
as soon as it is done, so an interrupted run resumes where it stopped; ``--force`` redoes the steps.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

from empirical.common.cli_args import (
    add_version,
    available_cores,
    enforce_options,
    holding_outputs,
    int_in,
    nonempty_path,
    output_path,
    worker_count,
)
from empirical.common.cli_errors import debug_requested, run_command
from empirical.common.files import atomic_write_text, read_json, refuse_overwriting_inputs
from empirical.llm import datasets
from empirical.llm.datasets import resolve_data_dir

from . import (
    empirical_figures,
    empirical_plots,
    grid,
    learning_curves,
    output,
    spectral_figures,
    stability,
    steering_text,
    style,
    theory,
)
from .doc_blocks import BLOCKS, sync_blocks
from .progress import RunProgress, silence_libraries
from .publish import check_complete, publish, sync_readme
from .results import write_results
from .run_record import utc_now

SECTIONS = ("theory", "stability", "empirical", "spectral", "steering_text", "learning_curves")
#: What a plain ``python -m paper_figures`` runs (``steering_text`` takes up to ``section_seconds("steering_text")``
#: more on two cores (its timing model: docs/steering.md), ``learning_curves`` needs the large extractions; ask for
#: them with ``--only``).
DEFAULT_SECTIONS = ("theory", "stability", "empirical", "spectral")
#: Expected seconds of the sections other than ``empirical`` on two cores (the progress ETA; ``steering_text``:
#: computed by ``paper_figures.steering_text.full_run_seconds()``, the timing model's upper bound; ``learning_curves``:
#: the earlier 14,400 s plus the validation-selected truth and the profile bounds, ~7 % of an evaluation (58 s, of
#: which 3.7 s profile and 0.7 s validation paths, measured at p = 576 on a shared core), and the separability LPs,
#: 60 layers x 2 at ~14 s each on 1,443 rows: 14,400 x 1.07 + 1,700 ~ 17,100 s), then the pools' backtests
#: (``pool_backtest_errors``: 33 of 110 CPU s of the evaluations of 10 Common layers at pool 400, i.e. x 1.43 on the
#: evaluations): 14,400 x 1.07 x 1.43 + 1,700 ~ 23,700 s; then the LCDB families beside the power law
#: (``pool_curves``: +5.5 s on the 83 s of an evaluation at pool 400, p = 576, x 1.066): ~25,200 s;
#: ``--learning-scale goal`` runs a third of the evaluations, ~9,500 s (was ~6,800 without the backtests).
SECTION_SECONDS = {"theory": 60, "stability": 20, "spectral": 1100, "learning_curves": 25200}


def section_seconds(section: str) -> float:
    """Expected seconds of ``section`` on two cores (:data:`SECTION_SECONDS`; ``steering_text``: its timing model,
    computed when asked, since the model imports the LLM stack, which a run without the ``[llm]`` extra lacks)."""
    if section == "steering_text":
        return round(steering_text.full_run_seconds())
    return SECTION_SECONDS[section]


#: ``--out`` and ``--publish``: a directory the run writes (non-empty, an output: two of them must differ)
_dir_path = output_path("directory", convert=Path)


#: which options apply in which mode and which exclude each other
#: (enforced by empirical.common.cli_args.enforce_options)
OPTIONS = {
    "excludes": [("--results-only", "--force"), ("--results-only", "--only"), ("--results-only", "--quick"),
                 ("--results-only", "--datasets"), ("--model", "--models"), ("--results-only", "--models")],
    "needs": {"--allow-mixed-commits": "--publish", "--allow-partial": "--publish", "--sync-readme": "--publish"},
    "distinct": ["--only", "--datasets", "--models"],
    "nonempty": ["--model"],
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m paper_figures", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=_dir_path, default=Path("figures"),
                   help="output directory (default: figures)")
    p.add_argument("--only", nargs="+", choices=SECTIONS, default=list(DEFAULT_SECTIONS),
                   help=f"sections to run (default: {' '.join(DEFAULT_SECTIONS)})")
    p.add_argument("--quick", action="store_true", help="small caps and few replicates for a fast look")
    p.add_argument("--model", default="smollm2", help="model name or path (default: smollm2)")
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="the paper's grid: run the empirical section on each model (names or paths, loaded one at a "
                        "time) into OUT/models/<model>/ and write the grid's tables and figures (accuracy table, "
                        "differences, cost, claims counted over model x dataset settings) to OUT; the other "
                        "sections run on the first model; each entry a different model (two spellings or copies of "
                        "one model are refused before anything runs)")
    p.add_argument("--data-dir", type=nonempty_path, default=None,
                   help="dataset directory (default: $RAPTOR_DATA or ../shared/datasets)")
    p.add_argument("--max-per-class", type=int_in(1), default=None,
                   help="cap examples per class for the empirical and steering sections (default: 500; --quick: "
                        f"{empirical_figures.QUICK_MAX_PER_CLASS}) and for learning_curves (default there: the "
                        "Concept-Depth benchmark's sizes)")
    p.add_argument("--n-jobs", type=worker_count(), default=available_cores(),
                   help="parallel workers for simulations, layer fits and stability runs (default and maximum: "
                        "all cores)")
    p.add_argument("--force", action="store_true",
                   help="redo every step of the selected sections (default: resume, skipping saved tables)")
    p.add_argument("--results-only", action="store_true",
                   help="only rebuild RESULTS.md, the index and the empirical figures from the tables of an earlier "
                        "run")
    p.add_argument("--publish", type=_dir_path, default=None, metavar="DIR",
                   help="also write a small committable copy of the run that rebuilds itself (RESULTS.md, "
                        "claims.csv, every table they read with its checksum, every cited figure as a small PNG) to "
                        "DIR, e.g. docs/results (a new or empty folder, or one an earlier --publish wrote: only "
                        "what its manifest lists is replaced or removed); refused unless every invocation of the "
                        "run ran at one commit on a clean tree")
    p.add_argument("--sync-readme", action="store_true",
                   help="with --publish: also regenerate the claims table of the repository's README.md and the "
                        "generated blocks of its docs/*.md from the publication; refused unless the run is complete "
                        "(every default section finished in full mode, no --quick invocation)")
    p.add_argument("--allow-mixed-commits", action="store_true",
                   help="with --publish: publish a run whose invocations ran at several commits or with uncommitted "
                        "changes (RESULTS.md's run lines show them)")
    p.add_argument("--allow-partial", action="store_true",
                   help="let --publish replace published results although this run leaves some of their tested "
                        "claims untested (default: refused, exit 2)")
    p.add_argument("--datasets", nargs="+", default=None, metavar="NAME",
                   help="datasets of the steering_text and learning_curves sections (default: each section's own "
                        "list); the other sections always run every registered dataset")
    p.add_argument("--learning-scale", choices=sorted(learning_curves.SCALES), default="full",
                   help="protocol of the learning_curves section: full (pools of 200, 400 and 800 labels, "
                        "docs/learning_curves.md) or goal (the pool of 400 only: the goal cell, a third of "
                        "the work); --quick overrides both")
    p.add_argument("--no-progress", action="store_true", help="no progress display (nothing but the final paths)")
    p.add_argument("--debug", action="store_true",
                   help="show the full traceback of an error (also: environment variable RAPTOR_DEBUG=1)")
    add_version(p)
    return p


def write_index(out: Path) -> Path:
    """List every figure and table produced so far in ``out/README.md``."""
    lines = ["# RAPTOR paper figures", "", "Generated by `python -m paper_figures`; the results, with the paper's "
             "claims checked, are in [RESULTS.md](RESULTS.md).", "", "## Figures", ""]
    for f in sorted((out / "figures").glob("*.png")):
        lines.append(f"- [{f.stem}](figures/{f.name}) ([pdf](figures/{f.stem}.pdf))")
    lines += ["", "## Tables", ""]
    for f in sorted((out / "tables").glob("*.md")):
        lines.append(f"### {f.stem}\n\n" + f.read_text())
    path = out / "README.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def _earlier_invocations(out: Path) -> list:
    """The invocations recorded in ``out/tables/run_info.json`` so far, oldest first (an unreadable file:
    none, with a warning)."""
    path = out / "tables" / "run_info.json"
    if not path.exists():
        return []
    try:
        last = read_json(path)
    except ValueError as exc:
        warnings.warn(f"{exc}; earlier timings are not kept", RuntimeWarning, stacklevel=2)
        return []
    if not isinstance(last, dict) or not isinstance(last.get("earlier_invocations", []), list):
        warnings.warn(f"{str(path)!r} is not a run record; earlier timings are not kept", RuntimeWarning, stacklevel=2)
        return []
    earlier = last.pop("earlier_invocations", [])
    return [*earlier, last]


def _git_state() -> dict:
    """The commit of the code that ran (``git_commit``) and whether the work tree had uncommitted changes
    (``git_dirty``); ``unknown`` outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": "unknown", "git_dirty": None}
    return {"git_commit": commit, "git_dirty": dirty}


def _total_seconds(args, cap) -> float:
    total = 0.0
    for section in args.only:
        if section == "empirical":
            total += empirical_figures.plan(args.quick, cap) * len(args.models or [args.model])
        else:
            total += section_seconds(section) * (0.2 if args.quick else 1.0)
    return total


def main(argv=None) -> int:
    """Run the main job; returns the exit code (0 success, 2 bad input, 130 interrupted).

    A ``ValueError`` or ``OSError`` (missing data directory, bad argument, damaged file) becomes one line on
    stderr and exit code 2; ``--debug`` or ``RAPTOR_DEBUG=1`` shows the traceback instead."""
    parser = build_parser()
    args = parser.parse_args(argv)
    enforce_options(parser, args, OPTIONS)
    return run_command(lambda: holding_outputs(parser, args, lambda: _run(args)), "python -m paper_figures",
                       debug=debug_requested(args.debug, "RAPTOR_DEBUG"),
                       interrupted="interrupted (every finished step is saved; a re-run resumes)")


def _refuse_writing_into_the_data(args) -> None:
    """``--out`` and ``--publish`` must not be the data directory: the run's files would mix with, or replace, the
    files it reads (that they are not each other is :func:`enforce_options`' check of every command's outputs)."""
    try:
        data = [("--data-dir", resolve_data_dir(args.data_dir))]
    except FileNotFoundError:  # no data directory: the sections that need one say so
        data = []
    publish = [("--publish", args.publish)] if args.publish is not None else []
    refuse_overwriting_inputs([("--out", args.out), *publish], data)  # --out and --publish: enforce_options


def _run(args) -> int:
    _refuse_writing_into_the_data(args)
    if args.sync_readme and args.quick:  # known before any work: the README is regenerated only from a full run
        raise ValueError("--sync-readme regenerates the README's claims table only from a complete run, and --quick "
                         "runs are not; publish without --sync-readme")
    for name in args.datasets or ():  # an unknown name fails before any work, listing the known ones
        datasets.get_dataset(name)
    if args.models and (len(args.models) < 2 or "empirical" not in args.only):
        raise ValueError("--models runs the empirical section on two or more models: give at least two and keep "
                         "'empirical' in --only")
    if args.models:  # a blank name, or two entries that are one model (or share a folder), fail before any work
        grid.check_models(args.models, "--models")
    out = args.out
    if args.results_only and not any((out / "tables").glob("*.csv")):
        raise ValueError(f"--results-only: {str(out / 'tables')!r} holds no tables of an earlier run; run the "
                         "sections first (without --results-only) or give the --out of that run")
    (out / "figures").mkdir(parents=True, exist_ok=True)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    if args.models:
        args.model = args.models[0]  # the sections other than the grid's empirical one run on the first model
    if args.results_only:
        style.apply()
        with output.rebuilding():  # a rebuild never changes a checksummed table
            empirical_plots.plot_all(out)  # redrawn from the saved tables (seconds)
            grid.plot_grid(out)
            print(f"[paper_figures] results: {write_results(out)}; index: {write_index(out)}")
        if args.publish is not None:
            _publish(out, args.publish, args.allow_mixed_commits, args.allow_partial, args.sync_readme)
        return 0
    silence_libraries()
    style.apply()
    output.force_recompute(time.time() if args.force else None)
    default_cap = empirical_figures.QUICK_MAX_PER_CLASS if args.quick else 500
    cap = args.max_per_class if args.max_per_class is not None else default_cap
    steps = RunProgress(_total_seconds(args, cap), enabled=not args.no_progress,
                        on_step=lambda: record("interrupted"))  # every finished step is in the record at once
    t_start = time.perf_counter()
    started = utc_now()  # wall-clock stamps: the order and overlap of the invocations can be checked
    timings = {}
    earlier = _earlier_invocations(out)  # a resumed run keeps what the earlier ones measured

    def record(status: str) -> None:
        """Save this invocation in the run record now, so that an interrupted one is recorded too (with its start,
        its end once it completes and the time of this save: :mod:`paper_figures.run_record`)."""
        now = utc_now()
        info = dict(mode="quick" if args.quick else "full", sections=list(args.only), n_jobs=args.n_jobs,
                    status=status, started_utc=started, ended_utc=None if status == "interrupted" else now,
                    recorded_utc=now, **git_state, cpus=os.cpu_count(),
                    machine=f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
                    minutes=round((time.perf_counter() - t_start) / 60, 2), section_seconds=dict(timings),
                    step_seconds={k: round(v, 1) for k, v in steps.timings.items()}, current_step=steps.current,
                    unfinished_step=steps.unfinished, earlier_invocations=earlier)
        output.save_json(info, out, "run_info")

    git_state = _git_state()
    record("interrupted")  # until it finishes: a run killed midway stays in the record
    try:
        for section in SECTIONS:
            if section not in args.only:
                continue
            t0 = time.perf_counter()
            if section == "theory":
                with steps.step("theory: fixed point vs simulation",
                                section_seconds("theory") * (0.2 if args.quick else 1)):
                    theory.run(out, quick=args.quick, progress=False, n_jobs=args.n_jobs)
            elif section == "stability":
                with steps.step("stability theory vs simulation",
                                section_seconds("stability") * (0.2 if args.quick else 1)):
                    stability.run(out, quick=args.quick, progress=False, n_jobs=args.n_jobs)
            elif section == "empirical" and args.models:
                grid.run(out, args.models, data_dir=args.data_dir, max_per_class=cap, quick=args.quick, steps=steps,
                         n_jobs=args.n_jobs)
            elif section == "empirical":
                empirical_figures.run(out, model=args.model, data_dir=args.data_dir, max_per_class=cap,
                                      quick=args.quick, steps=steps, n_jobs=args.n_jobs)
            elif section == "spectral":
                with steps.step("spectral theory on real probes",
                                section_seconds("spectral") * (0.2 if args.quick else 1)):
                    names = empirical_figures.STABILITY_DATASETS
                    hidden = spectral_figures.load_hidden(args.model, args.data_dir, cap, progress=False,
                                                          names=names[:1] if args.quick else names)
                    n_layers = next(iter(hidden.values()))[0].shape[0]
                    # every 4th layer on the paper's split and on 4 more split seeds (5 in all), so that the
                    # agreement statistics, the across-layer ones included, get seed intervals (--quick: the first
                    # dataset's middle layer on the paper's split)
                    layers = [n_layers // 2] if args.quick else list(range(1, n_layers, 4))
                    spectral_figures.run(out, hidden, layers=layers, extra_seeds=0 if args.quick else 4,
                                         seed_layers=() if args.quick else layers, progress=False,
                                         monte_carlo=False, n_jobs=args.n_jobs)
            elif section == "steering_text":
                with steps.step("steering: generated text",
                                section_seconds("steering_text") * (0.2 if args.quick else 1)):
                    steering_text.run(out, model=args.model, data_dir=args.data_dir, max_per_class=cap,
                                      quick=args.quick, progress=False, n_jobs=args.n_jobs, names=args.datasets)
            elif section == "learning_curves":
                with steps.step("learning curves from small pools",
                                section_seconds("learning_curves") * (0.2 if args.quick else 1)):
                    hidden = learning_curves.load_hidden(
                        args.model, args.data_dir, progress=False, names=args.datasets or learning_curves.DATASETS,
                        max_per_class="reference" if args.max_per_class is None else args.max_per_class)
                    learning_curves.run(out, hidden, n_jobs=args.n_jobs,
                                        **learning_curves.SCALES["quick" if args.quick else args.learning_scale])
            timings[section] = round(time.perf_counter() - t0, 1)
            steps.write(f"[paper_figures] {section} done in {timings[section]:.0f} s")
            record("interrupted")
            write_index(out)
    finally:
        steps.close()
        output.force_recompute(None)
    minutes = (time.perf_counter() - t_start) / 60
    record("complete")
    results, index = write_results(out), write_index(out)
    print(f"[paper_figures] {minutes:.1f} min; results: {results}; index: {index}")
    if args.publish is not None:
        _publish(out, args.publish, args.allow_mixed_commits, args.allow_partial, args.sync_readme)
    return 0


#: The repository's README, whose claims table ``--sync-readme`` regenerates.
README = Path(__file__).resolve().parent.parent / "README.md"


def _publish(out: Path, target: Path, allow_mixed_commits: bool = False, allow_partial: bool = False,
             sync: bool = False) -> None:
    """``--publish``: the committable copy (a partial run over complete published results only with
    ``--allow-partial``), and, only with ``--sync-readme`` and from a complete run, the README's claims table
    regenerated from it (checked before anything is published), and the docs' generated blocks beside the README
    (:func:`paper_figures.doc_blocks.sync_blocks`: docs/*.md's numbers of the published run)."""
    readme = README
    if sync:
        check_complete(output.load_json(out, "run_info") or {}, DEFAULT_SECTIONS, out)
    written = publish(out, target, allow_mixed_commits=allow_mixed_commits, allow_partial=allow_partial)
    print(f"[paper_figures] published to {target}: {len(written)} files")
    if sync and readme.exists():
        print(f"[paper_figures] claims table of {sync_readme(readme, Path(target) / 'claims.csv')} regenerated")
        docs = [name for name, (document, _) in BLOCKS.items() if document != readme.name]
        for path in sync_blocks(readme.parent, target, names=docs):
            print(f"[paper_figures] generated blocks of {path} regenerated")


if __name__ == "__main__":
    sys.exit(main())
