"""The shape of the code base: package map, no import cycles, no private names across modules.

These are the rules of docs/architecture.md, checked on the source (``ast``), so a change that breaks
one fails here with the offending module named.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cgmt", "sims", "empirical", "paper_figures")
#: the torch side of the pipeline, which the CLI and the main job import only when a command needs it
TORCH_SIDE = {"empirical.llm", "empirical.llm._extract", "empirical.llm._models", "empirical.llm._steering",
              "empirical.llm._steering_eval", "empirical.llm._edits", "empirical.llm._generation",
              "empirical.llm._answer_readout", "empirical.llm._prompts", "empirical.llm._cached_passes",
              "empirical.llm._steering_target",
              "empirical.logistic.batched"}
#: optional heavy dependencies that a function may import on purpose (deferred)
DEFERRED_OK = {"torch", "transformers", "xrfm", "gguf", "accelerate", "matplotlib", "tokenizers", "dask",
               "distributed", "vaderSentiment", "jinja2",
               "huggingface_hub",  # the [llm] extra's (transformers'), read only to find a local snapshot
               "fcntl",  # POSIX only: files.exclusive_lock imports it when it locks, so the floor imports everywhere
               "sklearn",  # cgmt.ablation draws its stratified split with it only when called (import cgmt: light)
               "scipy.stats", "pandas"}  # cgmt's hypergeometric weights and sweep table (0.65 s and 0.3 s of import)
#: which project packages each package may import (the package map of docs/architecture.md)
ALLOWED = {
    # the ground floor imports no part of the project; every package may import it
    "empirical.common": {"empirical.common"},
    "cgmt": {"cgmt"},
    "empirical.logistic": {"empirical.logistic"},
    "empirical.numerics": set(),
    "empirical.reporting": set(),
    "empirical.testing": {"empirical.logistic", "empirical.numerics"},
    "empirical.probes": {"empirical.probes", "empirical.logistic", "empirical.numerics", "cgmt"},
    # (the one torch device resolver is the floor's: empirical.common.resources.resolve_device)
    "empirical.llm": {"empirical.llm", "empirical.probes"},
    "empirical": {"empirical"},
    "sims": {"sims", "cgmt", "empirical.logistic"},
    "paper_figures": {"paper_figures", "empirical", "cgmt", "sims"},
}
# every package may import the ground floor (docs/architecture.md, "The ground floor")
ALLOWED = {package: allowed | {"empirical.common"} for package, allowed in ALLOWED.items()}


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path


MODULES = dict(_modules())


def _resolve(module, node):
    """Absolute module name of an ``import``/``from`` node inside ``module``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        return [node.module]
    package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return [".".join(base + ([node.module] if node.module else []))]


def _imports(module):
    """(imported module, names, at module level?) for every import statement of ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    function_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                      for n in ast.walk(f)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            for target in _resolve(module, node):
                out.append((target, names, id(node) not in function_nodes))
    return out


def _project_module(target):
    """The project module an import refers to (a ``from package import module`` counts as the module)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _owner(module):
    for prefix in sorted(ALLOWED, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    raise AssertionError(f"{module} is in no package of the map")


def _graph():
    graph = {m: set() for m in MODULES}
    for module in MODULES:
        for target, names, _ in _imports(module):
            dep = _project_module(target)
            if dep is None:
                continue
            subs = [f"{dep}.{n}" for n in names if f"{dep}.{n}" in MODULES]
            for d in subs or [dep]:
                if d != module:
                    graph[module].add(d)
    return graph


def test_no_import_cycles():
    graph = _graph()
    # a package __init__ that re-exports its own modules is not a cycle with them
    edges = {m: {d for d in deps if not (MODULES[d].name == "__init__.py" and m.startswith(d + "."))}
             for m, deps in graph.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    assert cycles == []


def test_packages_import_only_what_the_map_allows():
    bad = []
    for module, deps in _graph().items():
        allowed = ALLOWED[_owner(module)]
        for dep in deps:
            if not any(dep == a or dep.startswith(a + ".") for a in allowed):
                bad.append(f"{module} -> {dep}")
    assert bad == [], bad


def _package_of(module):
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def test_no_private_names_across_modules():
    """A private name, or a module with a leading underscore, is used only inside its own package: a package's
    underscored implementation modules (``empirical.llm.datasets._registry``) are its business, as in SciPy, and the
    package's ``__init__`` says what the API is."""
    bad = []
    for module in MODULES:
        for target, names, _ in _imports(module):
            dep = _project_module(target)
            if dep is None or dep == module:
                continue
            if dep.rpartition(".")[2].startswith("_") and dep.rpartition(".")[0] == _package_of(module):
                continue  # a private module of the importer's own package
            private = [n for n in names if n.startswith("_") and not n.endswith("__")]
            if private or any(part.startswith("_") and part != "__init__" for part in target.split(".")):
                bad.append(f"{module}: from {target} import {', '.join(names)}")
    assert bad == [], bad


def test_function_level_imports_only_for_deferred_heavy_dependencies():
    bad = []
    for module in MODULES:
        for target, names, module_level in _imports(module):
            if module_level or target.split(".")[0] in DEFERRED_OK or target in DEFERRED_OK:
                continue
            if module.split(".")[0] in ("empirical", "paper_figures") and target in TORCH_SIDE:
                continue  # deferred on purpose: torch is the optional [llm] extra (see empirical.cli._llm)
            bad.append(f"{module}: {target}")
    assert bad == [], bad


def test_empirical_draws_only_in_its_reporting_module():
    """The ``raptor`` CLI parses arguments, calls library functions and writes outputs: its figures are drawn by
    ``empirical.reporting`` (and saved by ``empirical.common.files.save_figure``), no other module of ``empirical``
    imports matplotlib."""
    drawing = {module for module in MODULES if module.split(".")[0] == "empirical"
               and any(target.split(".")[0] == "matplotlib" for target, _, _ in _imports(module))}
    assert drawing == {"empirical.reporting", "empirical.common.files"}


def test_kernel_modules_keep_their_jobs():
    """The logistic kernel split by job: the direct Newton oracle in ``newton``, the Newton-PCG path kernel in ``pcg``
    (which may take the family's loss terms and status table from ``newton``, never the reverse, and the structured
    products from ``factors``, which import nothing of the family)."""
    graph = _graph()
    assert "empirical.logistic._pcg" not in graph["empirical.logistic._newton"]
    assert {m for m in graph["empirical.logistic._pcg"] if not m.startswith("empirical.common")} == {
        "empirical.logistic._newton", "empirical.logistic._factors"}
    assert not {m for m in graph["empirical.logistic._factors"] if m.startswith("empirical")}


@pytest.mark.parametrize("imports", [
    "import cgmt, sims, empirical, empirical.probes, empirical.logistic",
    "import empirical.llm.datasets, empirical.llm._cache, empirical.common.files, empirical.common.arrays, "
    "empirical.numerics",
    # choosing an operating point or estimating a run's time from a saved table needs no torch
    "import empirical.llm._steering_protocol, empirical.llm._steering_selection, empirical.llm._steering_cost, "
    "empirical.llm._steering_settings, empirical.llm._gcav, empirical.llm._edit_kinds",
    # the null directions, the rank test and the report's rows are numpy / pandas
    "import empirical.llm._steering_null, empirical.llm._steering_report",
    # empirical.llm's front door loads a name on first use: its torch-free names come without torch
    "from empirical.llm import (SteeringProtocol, ExtractionCache, reliable_layers, select_operating_points, "
    "estimate_seconds, sweep_settings, EDIT_KINDS, datasets); datasets.dataset_names()",
])
def test_numpy_side_never_loads_torch(imports):
    code = f"{imports}; import sys; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("package", ["empirical", "empirical.llm", "empirical.probes"])
def test_every_front_door_name_resolves(package):
    """A name a front door declares is there: a lazily loaded name that its module does not define would fail only
    when a user first reached for it.  Where an optional dependency is not installed (the floors environment has no
    [llm] extra), a name that needs it may be absent, and only because that dependency is."""
    from _public_api import OPTIONAL

    code = (f"import importlib, importlib.util; m = importlib.import_module({package!r})\n"
            "missing = []\n"
            "for n in m.__all__:\n"
            "    try:\n"
            "        getattr(m, n)\n"
            "    except ModuleNotFoundError as exc:\n"
            "        top = (exc.name or '').split('.')[0]\n"
            f"        if top not in {sorted(OPTIONAL)!r} or importlib.util.find_spec(top) is not None:\n"
            "            missing.append((n, exc.name))\n"
            "    except AttributeError:\n"
            "        missing.append(n)\n"
            "assert not missing, missing\n"
            "assert sorted(set(m.__all__)) == sorted(m.__all__), 'a name is declared twice'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_name_that_needs_the_llm_extra_says_so():
    """Without transformers (the numpy-side install), ``import empirical.llm`` works and its datasets load; a name
    whose module imports transformers raises ModuleNotFoundError naming itself and the extra to install, not a bare
    'No module named'."""
    code = ("import sys; sys.modules['transformers'] = None\n"
            "import empirical.llm as llm\n"
            "assert callable(llm.reliable_layers) and llm.datasets is not None\n"
            "try:\n"
            "    llm.hidden_states\n"
            "except ModuleNotFoundError as exc:\n"
            "    assert exc.name == 'transformers', exc.name\n"
            "    assert 'empirical.llm.hidden_states needs the [llm] extra' in str(exc), exc\n"
            "    assert \"pip install 'raptor-probes[llm]'\" in str(exc), exc\n"
            "else:\n"
            "    raise AssertionError('hidden_states resolved without transformers')\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_kept_public_names_and_module_paths():
    code = ("import cgmt, sims, empirical\n"
            "from empirical import RaptorProbe, fit_layers, stability\n"
            "for name in ('solve', 'mle', 'stability', 'sweep', 'separability_threshold', 'optimal_lambda'):\n"
            "    assert callable(getattr(cgmt, name)), name\n"
            "assert callable(sims.compare)\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_steering_modules_keep_their_jobs():
    """The steering code split by job (docs/architecture.md): the edits know nothing of what is measured, the
    probe-coordinate protocol and the answer read-out build on the edits, and the choices made from a measured table
    (operating point, default, cost) come after the measurement, never before it."""
    graph = _graph()
    llm = "empirical.llm._"
    assert not {llm + m for m in ("steering", "steering_eval", "generation", "answer_readout", "steering_settings",
                                  "steering_selection", "steering_cost", "prompts")} & graph[llm + "edits"]
    assert {llm + "edits"} <= graph[llm + "steering"] and {llm + "edits"} <= graph[llm + "generation"]
    for chooser in ("steering_selection", "steering_cost"):
        assert llm + chooser not in graph[llm + "steering_eval"]
    assert not {llm + "steering_eval", llm + "edits"} & graph[llm + "answer_readout"]
    assert llm + "steering_eval" not in graph[llm + "cached_passes"]  # the passes know nothing of the measurement
    # the measurement, its null and its report apart (issue 55 section 3): the null and the report read a
    # measurement's values and run no pass; the null knows nothing of the report; the target is read by the
    # measurement, never the reverse
    assert {llm + m for m in ("steering_null", "steering_report", "steering_target")} <= graph[llm + "steering_eval"]
    for part in ("steering_null", "steering_report", "steering_target"):
        assert not {llm + m for m in ("steering_eval", "cached_passes", "edits")} & graph[llm + part], part
    assert llm + "steering_report" not in graph[llm + "steering_null"]


def test_no_name_is_kept_alive_by_a_shim():
    """0.1.0 was never released and nothing outside this repository imports the project, so a rename changes every
    caller here and keeps no old home (issue 55: 113 moved names were kept alive by shims).  No module of the
    project answers unknown names through a module ``__getattr__`` (PEP 562) except a package's lazy loader of
    its own public names, none warns ``DeprecationWarning``, and no module is only a re-export of another."""
    lazy_loaders = {"empirical", "empirical.llm"}  # their public names, loaded on first use (lazy_loader.attach)
    offenders = []
    for module, path in MODULES.items():
        source = path.read_text()
        tree = ast.parse(source)
        getattr_defined = any(
            (isinstance(node, ast.FunctionDef) and node.name == "__getattr__")
            or (isinstance(node, ast.Assign) and any(
                "__getattr__" in {n.id for n in ast.walk(tg) if isinstance(n, ast.Name)} for tg in node.targets))
            for node in tree.body)
        if getattr_defined and module not in lazy_loaders:
            offenders.append(f"{module}: module __getattr__")
        if "DeprecationWarning" in source:
            offenders.append(f"{module}: DeprecationWarning")
        if any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) for node in tree.body):
            offenders.append(f"{module}: re-exports with import *")
    assert not offenders, offenders


#: one name per knob (issue 55): the names that a public signature may not use, and the one it uses instead
KNOB_NAMES = {"maxiter": "max_iter", "max_iters": "max_iter", "n_iter": "max_iter", "order": "quad_order",
              "quadrature_order": "quad_order"}
#: a Gauss rule's constructor takes the rule's order (numpy's leggauss(deg) likewise): not the solvers' knob
RULE_CONSTRUCTORS = {"cgmt.quadrature.gauss_legendre", "cgmt.quadrature.gauss_hermite", "cgmt.quadrature.gaussian_rule"}


def test_one_name_per_knob():
    """Every public signature names an iteration limit ``max_iter`` (cgmt's solvers, the logistic kernel and the
    estimators alike) and a quadrature order ``quad_order``; the difference-of-means method is ``DiffMeans`` as a
    class, a table name and (lower case) a command-line name."""
    import inspect

    from _public_api import public_objects

    from empirical.probes._registry import get_method

    bad = []
    for (module, qualname), obj in public_objects().items():
        if f"{module}.{qualname}" in RULE_CONSTRUCTORS:
            continue
        try:
            parameters = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        bad += [f"{module}.{qualname}({name}=): use {KNOB_NAMES[name]}" for name in parameters if name in KNOB_NAMES]
    assert bad == [], bad
    spec = get_method("DiffMeans")
    assert spec.factory.__name__ == spec.name and spec.cli_name == spec.name.lower()


def test_every_public_solver_has_the_one_failure_convention():
    """A public function that returns SciPy's result object (``OptimizeResult``, ``CGMTResult``) is a solver, and
    every solver fails the one way (issue 55: 9 public solvers returned ``success=False`` silently): a ``strict``
    switch, and :func:`empirical.common.failures.report` (warn ``ConvergenceWarning`` or raise
    ``ConvergenceError``).  Checked on the signatures and, for the warning, by calling each with a budget it
    cannot meet in ``tests/test_failure_convention.py``."""
    import inspect

    from _public_api import public_objects

    bad = []
    for (module, qualname), obj in public_objects().items():
        if inspect.isclass(obj) or module.rsplit(".", 1)[-1] in PRIVATE_KERNELS:
            continue
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            continue
        returns = str(signature.return_annotation)
        if ("OptimizeResult" in returns or "CGMTResult" in returns) and "strict" not in signature.parameters:
            bad.append(f"{module}.{qualname}")
    assert bad == [], bad


#: implementation modules whose solvers are kernels of a public one (reached through its ``method``), not API
PRIVATE_KERNELS = {"_pcg", "_newton"}


#: the public modules of the library packages whose API is their ``__init__`` (docs/architecture.md, "The public
#: surface"); every other module of these packages has a leading underscore.  Adding a module means choosing here.
PUBLIC_MODULES = {
    "cgmt": {"prox", "quadrature", "equations", "conventions", "reference", "spectral_reference", "stability",
             "ablation", "validation", "result"},
    "sims": set(),
    "empirical.logistic": {"batched"},
    # the paper's analyses with their own API (docs/architecture.md, "Public modules")
    "empirical.probes": {"learning_curves", "planning", "structure", "spectral_evaluation", "real_embedding"},
    "empirical.llm": {"datasets"},
}


@pytest.mark.parametrize("package", sorted(PUBLIC_MODULES))
def test_a_module_is_public_only_by_decision(package):
    """SciPy 1.8's rule: implementation modules have a leading underscore, and their names reach users through the
    package's ``__all__`` (which holds no underscored name)."""
    import importlib

    modules = {m.rpartition(".")[2] for m in MODULES if m.rpartition(".")[0] == package} - {"__main__"}
    public = {m for m in modules if not m.startswith("_")}
    assert public == PUBLIC_MODULES[package]
    exported = importlib.import_module(package).__all__
    assert exported and not [n for n in exported if n.startswith("_")]


def test_the_application_declares_no_api():
    """``paper_figures`` is an application (``python -m paper_figures``), not a library: none of its modules declares
    an ``__all__`` (it held 95 names in 9 modules, a fifth of the project's declared names); the suite drives its
    functions from tests/_public_api.py's ``APPLICATION_ENTRIES`` instead."""
    declaring = sorted(module for module, path in MODULES.items() if module.split(".")[0] == "paper_figures"
                       and any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                                    for t in node.targets)
                               for node in ast.parse(path.read_text()).body))
    assert declaring == []


def test_import_cgmt_loads_neither_scikit_learn_torch_nor_the_probes():
    """A theorist who solves one fixed point does not pay for the probing stack: ``import cgmt`` (and the floor it
    stands on) loads neither scikit-learn (0.78 s of a 0.99 s import while the floor took scikit-learn's
    ConvergenceWarning), torch, nor ``empirical.probes``/``empirical.llm``, nor scipy.stats and pandas (0.65 s and
    0.3 s, loaded when an ablation's hypergeometric weights or a sweep's table need them)."""
    code = ("import sys; import cgmt, empirical.common.failures, empirical.common.resources, cgmt.ablation\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'torch', 'pandas') or "
            "m == 'scipy.stats' or "
            "m.startswith(('empirical.probes', 'empirical.llm', 'empirical.logistic')))\n"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_non_convergence_warns_convergence_warning_not_runtime_warning():
    """One vocabulary: a fit or fixed point of the project that did not converge warns the project's
    ``ConvergenceWarning`` (``empirical.common.failures``; scikit-learn's class only filters scikit-learn's fits)."""
    bad = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "ConvergenceWarning" and a.asname is None
                                                        for a in node.names):
                if not (node.module or "").endswith("common.failures"):
                    bad.append(f"{module}:{node.lineno} takes ConvergenceWarning from {node.module}")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "warn"):
                continue
            category = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "category"), None)
            text = ast.unparse(node.args[0]).lower() if node.args else ""
            if isinstance(category, ast.Name) and category.id == "RuntimeWarning" and "converge" in text:
                bad.append(f"{module}:{node.lineno}")
    assert bad == [], bad


def test_one_cgmt_driver():
    """Every fixed point of cgmt is driven by cgmt._newton: the stage functions (continuation, march_lambda) and the
    root finder (brentq) are called nowhere else in cgmt, and the isotropic and spectral solvers both call drive
    and build their result with its finish.
    (Outside the driver, Newton runs only as the quadrature check's re-solve on a finer rule.)"""
    calls = {}
    for module, path in MODULES.items():
        if not module.startswith("cgmt."):
            continue
        tree = ast.parse(path.read_text())
        names = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None)
                 for n in ast.walk(tree) if isinstance(n, ast.Call)}
        calls[module] = names
    outside = {m: sorted(names & {"continuation", "march_lambda", "brentq"}) for m, names in calls.items()
               if m != "cgmt._newton" and names & {"continuation", "march_lambda", "brentq"}}
    assert outside == {}
    assert "drive" in calls["cgmt._solver"] and "drive" in calls["cgmt._spectral"]
    # one finish: both solvers build their result with cgmt._newton.finish; only it, and the max-margin limit (a
    # one-dimensional root with gamma = inf, no Newton), build a CGMTResult
    assert "finish" in calls["cgmt._solver"] and "finish" in calls["cgmt._spectral"]
    builders = sorted(m for m, names in calls.items() if "CGMTResult" in names)
    assert builders == ["cgmt._max_margin", "cgmt._newton"], builders


def test_every_pyplot_drawing_closes_its_figures_when_it_fails():
    """Every function of paper_figures that opens a pyplot figure (plt.subplots, plt.figure) carries
    paper_figures.output.draws_figures, which closes the figures it opened when it raises: a failed drawing leaves
    no open figure in pyplot's process-wide registry (one CI run failed on figures another test left open)."""
    missing = []
    for module, path in MODULES.items():
        if not module.startswith("paper_figures"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            opens = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr in ("subplots", "figure") and isinstance(n.func.value, ast.Name)
                        and n.func.value.id == "plt" for n in ast.walk(node))
            decorated = any(getattr(d, "id", getattr(d, "attr", None)) == "draws_figures" for d in node.decorator_list)
            if opens and not decorated:
                missing.append(f"{module}.{node.name}")
    assert missing == []


def test_a_failed_drawing_leaves_no_open_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from paper_figures.output import draws_figures

    @draws_figures
    def fails():
        plt.subplots()
        raise ValueError("drawing failed")

    before = set(plt.get_fignums())
    with pytest.raises(ValueError, match="drawing failed"):
        fails()
    assert set(plt.get_fignums()) == before


def _status_like(node) -> bool:
    """A name, attribute or subscript that holds a status of the project's table (``status``, ``res.status``,
    ``status[active]``, ``status2``, the march's ``st``)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("status", "st") or name.startswith("status")


def _status_literals(node):
    """The integer literals of an expression that yields a status (through ``a if c else b`` and ``torch.where``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node]
    if isinstance(node, ast.IfExp):
        return _status_literals(node.body) + _status_literals(node.orelse)
    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "where":
        return [lit for arg in node.args[1:] for lit in _status_literals(arg)]
    if isinstance(node, ast.Tuple):  # a stage's (..., status) result: the status is the last element
        return _status_literals(node.elts[-1]) if node.elts else []
    return []


#: status codes of other libraries, compared where the project reads them (HiGHS: 0 optimal, 1 iteration limit)
FOREIGN_STATUS = {("empirical.probes._separability", "res.status")}


def test_status_codes_are_named_and_success_has_one_rule():
    """Every status the project's solvers set, return or compare is one of the named codes of
    ``empirical.common.failures`` (CONVERGED, ITERATION_LIMIT, ...), never a bare number; a result's ``success`` is
    ``is_success(status)`` or ``status == CONVERGED``."""
    bad = []
    for module, path in MODULES.items():
        if module == "empirical.common.failures":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            literals = []
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                last = [t.elts[-1] for t in targets if isinstance(t, ast.Tuple) and t.elts]
                if any(map(_status_like, targets + last)) and node.value is not None:
                    literals = _status_literals(node.value)
            elif isinstance(node, ast.Compare) and any(map(_status_like, [node.left, *node.comparators])):
                if (module, ast.unparse(node.left)) in FOREIGN_STATUS:
                    continue
                literals = [c for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)
                            and type(c.value) is int]
            elif isinstance(node, ast.keyword) and node.arg == "status":
                literals = _status_literals(node.value)
            bad += [f"{module}:{lit.lineno}: status {lit.value}" for lit in literals]
    assert bad == [], bad


#: the names of the edit kinds (issue 55 section 3), which only their registry may test a kind against
EDIT_KIND_NAMES = {"additive", "gcav"}


def _kind_name_literals(node):
    """The edit-kind names among the string literals of ``node`` (a constant, or a tuple/list/set of them)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [c.value for c in items if isinstance(c, ast.Constant) and c.value in EDIT_KIND_NAMES]


def test_only_the_edit_kind_registry_tests_a_kind_by_name():
    """A steering edit kind is one class and one entry of ``empirical.llm.EDIT_KINDS`` (issue 55
    section 3): no other module of ``empirical`` or ``paper_figures`` compares a kind to a literal name
    (``kind == "gcav"``, ``setting.kind in ("gcav", "additive")``), so a new kind cannot be steered silently as
    another one by a branch that forgot it."""
    bad = []
    for module, path in MODULES.items():
        if module.split(".")[0] not in ("empirical", "paper_figures") or module == "empirical.llm._edit_kinds":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            others = [operand for operand in operands if not _kind_name_literals(operand)]
            if len(others) < len(operands) and any("kind" in ast.unparse(operand) for operand in others):
                bad.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert bad == [], bad


def test_a_new_edit_kind_is_one_registry_entry(monkeypatch):
    """Registering a third kind in ``EDIT_KINDS`` (and nothing else) makes it a valid setting: its strength domain,
    the letter of its name and its candidate layers come from its class."""
    from empirical.llm._edit_kinds import EDIT_KINDS, EditKind
    from empirical.llm._steering_settings import SteeringSetting, choose_layers

    class ToyEdit(EditKind):
        name = "toy"
        prefix = "t"
        strength_label = "toy units"
        strength_bounds = dict(low=1.0, high=5.0)

        def candidate_layers(self, probes, n_layers):
            return [2, 3]

    with pytest.raises(ValueError, match="kind must be 'gcav' or 'additive', got 'toy'"):
        SteeringSetting("toy", "all", 3.0, "answer")
    monkeypatch.setitem(EDIT_KINDS, "toy", ToyEdit())
    setting = SteeringSetting("toy", "all", 3.0, "answer")
    assert setting.name == "toy-all-t3-answer" and setting.edit_kind is EDIT_KINDS["toy"]
    assert choose_layers(setting, {}, n_layers=4) == [2, 3]
    with pytest.raises(ValueError, match=r"strength \(toy units\)"):
        SteeringSetting("toy", "all", 7.0, "answer")  # within additive's domain, outside the toy's
    with pytest.raises(ValueError, match="kind must be 'gcav' or 'additive' or 'toy', got 'other'"):
        SteeringSetting("other")


#: The steering measurement's modules (issue 55 section 3) and the functions of ``raptor steer``
STEERING_MEASUREMENT = ("empirical/llm/_steering_eval.py", "empirical/llm/_steering_null.py",
                        "empirical/llm/_steering_report.py", "empirical/llm/_steering_target.py",
                        "empirical/llm/_steering_protocol.py", "empirical/llm/_steering_settings.py",
                        "empirical/llm/_steering_selection.py", "empirical/llm/_steering_cost.py",
                        "empirical/llm/_cached_passes.py", "empirical/llm/_edit_kinds.py",
                        "empirical/llm/_answer_readout.py", "empirical/llm/_prompts.py",
                        "empirical/llm/_steering.py", "empirical/llm/_generation.py", "empirical/llm/_edits.py",
                        "empirical/llm/_gcav.py", "paper_figures/steering_text.py")
STEER_COMMAND = ("cmd_steer", "_steer_settings", "_given_vectors", "_tau_filter")
#: the most parameters a function of the steering measurement takes (self and cls not counted)
MAX_STEERING_PARAMETERS = 8


def _parameter_counts(path, names=None) -> dict:
    """``{"path:line name": parameters}`` of every function and method of ``path`` (all of ``names`` if given),
    counting positional, keyword-only, ``*args`` and ``**kwargs`` but not a method's ``self`` or ``cls``."""
    counts = {}
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (names and node.name not in names):
            continue
        a = node.args
        params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + [p.arg for p in (a.vararg, a.kwarg) if p]
        counts[f"{path}:{node.lineno} {node.name}"] = len(params) - (params[:1] in (["self"], ["cls"]))
    return counts


def test_no_steering_function_takes_more_than_eight_parameters():
    """Issue 55 section 3: the steering measurement's inputs travel as objects (``SteeringTarget``,
    ``ConceptVectors`` whose probes carry their validation accuracy and hidden-state norm, ``SteeringProtocol``,
    ``SteeringRun``), not as parallel dicts and long signatures: no function or method of its modules, of
    ``paper_figures.steering_text`` or of ``raptor steer`` takes more than eight (the old code had 20, 19, 19, 16, 15
    and 12; ``steer_prompts`` and ``compare_generations`` took 10 before GCAV's direction, target, threshold and
    positions became one :class:`~empirical.llm.GcavRule`)."""
    counts = {}
    for path in STEERING_MEASUREMENT:
        counts.update(_parameter_counts(path))
    counts.update(_parameter_counts("empirical/cli.py", STEER_COMMAND))
    assert {name.split()[-1] for name in counts} >= {"evaluate_dataset", "evaluate_staged", "evaluate_steering",
                                                     "estimate_seconds", "dataset_table", "cmd_steer", "steer_prompts",
                                                     "compare_generations", "gcav_steering"}
    over = {name: n for name, n in counts.items() if n > MAX_STEERING_PARAMETERS}
    assert over == {}, over
