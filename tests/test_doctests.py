"""Every docstring example of the project runs (doctest), so the documentation cannot drift from the code."""
import doctest
import importlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cgmt", "sims", "empirical", "paper_figures")
#: entry points whose import runs a program
SKIP = {"cgmt.__main__", "paper_figures.__main__"}
#: optional dependencies (pyproject.toml extras): a module that needs a missing one is skipped, not failed
OPTIONAL = {"torch", "transformers", "gguf", "accelerate", "xrfm", "dask", "distributed", "vaderSentiment"}
#: modules that import without their optional dependency but whose examples use it (prefix -> dependency)
EXAMPLES_NEED = {"empirical.llm": "transformers", "empirical.probes._interop": "gguf"}


def _module_names():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if name not in SKIP:
                yield name


@pytest.mark.parametrize("name", list(_module_names()))
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in OPTIONAL:
            raise
        pytest.skip(f"{name} needs the optional dependency {exc.name}")
    for prefix, dependency in EXAMPLES_NEED.items():
        if name == prefix or name.startswith(prefix + "."):
            pytest.importorskip(dependency)
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    monkeypatch.setenv("RAPTOR_CACHE", os.fspath(tmp_path / "cache"))
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_public_api_has_examples():
    """The main entry points show how they are called."""
    missing = []
    for name in ("empirical.probes._raptor", "empirical.probes._layers", "empirical.probes._stability",
                 "empirical.probes._persistence", "empirical.probes._concept_vectors", "empirical.probes._baselines",
                 "empirical.common.arrays", "empirical.numerics"):
        module = importlib.import_module(name)
        tests = doctest.DocTestFinder().find(module)
        if not any(t.examples for t in tests):
            missing.append(name)
    assert missing == []
