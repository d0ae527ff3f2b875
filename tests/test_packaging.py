"""The distribution exposes its four import packages."""
import importlib

import pytest


@pytest.mark.parametrize("name", ["cgmt", "sims", "empirical", "paper_figures"])
def test_package_imports(name):
    assert importlib.import_module(name) is not None
