"""The public API of the packages, for the tests that go over all of it (``test_docstrings``, ``test_contract``).

``public_objects()`` enumerates every function and class named in an ``__all__`` of ``cgmt``, ``sims``,
``empirical`` and ``paper_figures``; ``sections`` / ``entries`` read numpydoc sections (no numpydoc needed).
"""
import importlib
import inspect
import re
import textwrap
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cgmt", "sims", "empirical", "paper_figures")
#: entry points whose import runs a program
SKIP_MODULES = {"cgmt.__main__", "paper_figures.__main__"}
#: optional dependencies (as in test_doctests): a module that needs a missing one is left out, not failed
OPTIONAL = {"torch", "transformers", "gguf", "accelerate", "xrfm", "dask", "distributed", "vaderSentiment"}
#: ``paper_figures`` is an application, not a library, so its modules have no ``__all__`` (docs/architecture.md,
#: "The public surface"); the suite still drives these functions of it as it drives the API (docstrings, hostile input)
APPLICATION_ENTRIES = {
    'paper_figures.doc_blocks': (
        'BLOCKS', 'HAND_TYPED', 'block_markers', 'generated_blocks', 'coinflip_block', 'spectral_block',
        'hand_typed_results', 'sync_blocks',
    ),
    'paper_figures.grid': (
        'model_slug', 'model_dir', 'check_models', 'run', 'grid_tables', 'grid_claims', 'plot_grid',
        'grid_markdown',
    ),
    'paper_figures.learning_curves': (
        'run', 'load_hidden', 'fixed_test_rows', 'evaluate_setting', 'summary_table', 'by_draw_table',
        'plot_summary', 'truth_accuracies', 'separability_rows', 'DATASETS', 'POOLS', 'DRAWS', 'MULTIPLES',
        'LAYER_STEP', 'TEST_ROWS', 'TEACHERS', 'QUICK', 'LEVEL', 'SCALES', 'GOAL_POOL', 'GOAL_MULTIPLE',
    ),
    'paper_figures.predictor_claims': (
        'predictor_claims', 'paired_interval', 'mean_interval', 'bootstrap_median',
    ),
    'paper_figures.run_record': (
        'TIMESTAMP_FORMAT', 'utc_now', 'invocations', 'invocation_span', 'overlapping_invocations',
    ),
    'paper_figures.separability_tables': (
        'separability_row', 'separability_table', 'control_row', 'separability_control_table',
        'separability_control_summary',
    ),
    'paper_figures.spectral_figures': (
        'run', 'evaluate_all', 'agreement_by_seed', 'agreement_table', 'plot_dataset', 'monte_carlo_table',
        'semi_synthetic_table', 'paper_predictor_table', 'dataset_curves', 'PREDICTORS', 'THEORIES',
        'AGREEMENT_METRICS', 'STABILITY_PROTOCOL',
    ),
    'paper_figures.stability': (
        'stability_curves', 'simulate_stability', 'plot_stability_vs_lambda', 'plot_real_embedding_stability',
        'make_stability_figures', 'run', 'DEFAULT_SETTINGS',
    ),
    'paper_figures.verdicts': (
        'seed_interval', 'mean_interval', 'clip_interval', 'wilson_interval', 'TEST_TRAIN_RATIO', 'Test',
        'superiority', 'non_inferiority', 'majority', 'every_setting', 'holm', 'apply_holm', 'sign_test_mde',
        't_test_from_interval', 'in_families', 'MARGINS', 'LEVEL', 'ALPHA', 'POWER', 'FAMILIES', 'HOLDS', 'FAILS',
        'INCONCLUSIVE', 'UNTESTED',
    ),
}
SECTION = re.compile(r"^(?P<title>[A-Z][A-Za-z ]+)\n-{3,}$", re.MULTILINE)


def _module_names():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if name not in SKIP_MODULES:
                yield name


def public_objects():
    """``{(defining module, qualname): object}`` for every function and class in an ``__all__`` of ours (and the
    application's entries, :data:`APPLICATION_ENTRIES`)."""
    found = {}
    for name in _module_names():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an import-time warning of an optional dependency
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if (exc.name or "").split(".")[0] not in OPTIONAL:
                    raise
                continue
            for attr in getattr(module, "__all__", None) or APPLICATION_ENTRIES.get(name, ()):
                try:
                    obj = getattr(module, attr)  # a front door's lazily loaded name imports its module now
                except ModuleNotFoundError as exc:
                    if (exc.name or "").split(".")[0] not in OPTIONAL:
                        raise
                    continue
                if not (inspect.isclass(obj) or callable(obj)) or inspect.ismodule(obj):
                    continue
                home = getattr(obj, "__module__", None) or name
                if home.split(".")[0] not in PACKAGES:  # a re-export from another project (ConvergenceWarning)
                    continue
                found[(home, getattr(obj, "__qualname__", attr))] = obj
    return found


def sections(doc):
    """``{title: body}`` of a numpydoc docstring (``doc`` already dedented)."""
    marks = list(SECTION.finditer(doc))
    return {m["title"].strip(): doc[m.end(): marks[i + 1].start() if i + 1 < len(marks) else len(doc)]
            for i, m in enumerate(marks)}


def entries(body):
    """``[(names, type, has description)]`` of a Parameters-like section body (``a, b : type``: a and b)."""
    out = []
    for line in textwrap.dedent(body.strip("\n")).splitlines():
        if line and not line[0].isspace():
            head, _, kind = line.partition(" : ")
            out.append(([n.strip().lstrip("*") for n in head.split(",") if n.strip()], kind.strip(), False))
        elif line.strip() and out:
            out[-1] = (*out[-1][:2], True)
    return out


def documented_names(body):
    """Names of the entries of a Parameters-like section body."""
    return [name for names, _, _ in entries(body) for name in names]


