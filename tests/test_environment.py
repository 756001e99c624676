"""environment.yml installs from pyproject.toml, so the two cannot drift."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ENV = yaml.safe_load((ROOT / "environment.yml").read_text())


def _conda_deps() -> list[str]:
    return [d for d in ENV["dependencies"] if isinstance(d, str)]


def _pip_deps() -> list[str]:
    pip = [d for d in ENV["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip: section"
    return pip[0]["pip"]


def test_python_version_is_inside_requires_python():
    requires = SpecifierSet(PYPROJECT["project"]["requires-python"])
    pythons = [d for d in _conda_deps() if re.match(r"python\b", d)]
    assert len(pythons) == 1, f"expected one python pin, got {pythons}"
    version = Version(re.split(r"[=<>~! ]+", pythons[0], maxsplit=1)[1].strip("="))
    assert version in requires, f"{pythons[0]} is outside requires-python {requires}"


def test_pip_section_installs_this_package_from_pyproject():
    pip = _pip_deps()
    local = [d for d in pip if re.match(r"(-e\s+)?\.(\[|$)", d)]
    assert len(local) == 1, f"expected one install of '.', got {pip}"
    extras = re.search(r"\[(.*)\]", local[0])
    declared = set(PYPROJECT["project"]["optional-dependencies"])
    assert extras is None or set(extras.group(1).split(",")) <= declared


def test_no_second_dependency_list():
    # Apart from python and pip, conda may add nothing; pip may add only the
    # torch pin, which must be the one pyproject asks for.
    assert sorted(re.split(r"[=<> ]", d)[0] for d in _conda_deps()) == ["pip", "python"]
    runtime = {Requirement(r).name: Requirement(r) for r in PYPROJECT["project"]["dependencies"]}
    for line in _pip_deps():
        if line.startswith(("-e", ".")):
            continue
        req = Requirement(line)
        assert req.name in runtime, f"{line} is not a dependency in pyproject.toml"
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        for version in pinned:
            assert Version(version) in runtime[req.name].specifier, (
                f"environment.yml pins {line}, pyproject says {runtime[req.name]}"
            )


def test_torch_is_pinned_exactly():
    torch = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    torch = [r for r in torch if r.name == "torch"]
    assert [str(r.specifier) for r in torch] == ["==2.13.0"]
