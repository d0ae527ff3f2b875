"""The distribution exposes its four import packages."""
import importlib

import pytest


@pytest.mark.parametrize("name", ["cgmt", "sims", "empirical", "paper_figures"])
def test_package_imports(name):
    assert importlib.import_module(name) is not None


def test_floors_constraints_match_the_declared_lower_bounds():
    """.ci/constraints-floors.txt pins exactly the `>=` bounds of pyproject.toml: every runtime dependency is
    pinned there, and every pin equals its declared floor (docs/dependencies.md)."""
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    floors = {}
    for group, reqs in [("dependencies", project["dependencies"]), *project["optional-dependencies"].items()]:
        for req in map(Requirement, reqs):
            bound = [s.version for s in req.specifier if s.operator == ">="]
            if bound:
                floors[canonicalize_name(req.name)] = (group, Version(bound[0]))
    pins = {}
    for line in (root / ".ci" / "constraints-floors.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f".ci/constraints-floors.txt: {line!r} is not a name==version pin"
            pins[canonicalize_name(name)] = Version(version)
    runtime = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    assert runtime <= set(pins), f"runtime dependencies without a tested floor: {sorted(runtime - set(pins))}"
    for name, version in pins.items():
        assert name in floors, f".ci/constraints-floors.txt pins {name}, which pyproject.toml does not bound below"
        assert floors[name][1] == version, (
            f"{name}: pyproject.toml ({floors[name][0]}) says >={floors[name][1]}, "
            f"the floors environment pins {version}")
