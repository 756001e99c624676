"""pyproject.toml, the lock (.ci/constraints.txt) and environment.yml agree.

pyproject.toml is the one list of dependencies and states ranges; the lock
pins one version of each package inside those ranges; environment.yml only
picks a Python and installs the project through the lock.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
ENV = yaml.safe_load((ROOT / "environment.yml").read_text())
LOCK_PATH = ROOT / ".ci" / "constraints.txt"
LOCKED_TORCH = "2.13.0"  # the torch that made the stored notebook outputs


def lock() -> dict[str, Version]:
    """Canonical name -> pinned version; every line must be an exact pin."""
    pins: dict[str, Version] = {}
    for number, line in enumerate(LOCK_PATH.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==" and not req.marker, (
            f"constraints.txt line {number}: {line!r} is not a plain name==version pin"
        )
        name = canonicalize_name(req.name)
        assert name not in pins, f"constraints.txt pins {req.name} twice"
        pins[name] = Version(specs[0].version)
    return pins


def requirements() -> list[Requirement]:
    """Runtime requirements and those of every extra.

    An extra may name another of the project's own extras
    ("backproplab[site]"); the project itself is not pinned.
    """
    lines = list(PROJECT["dependencies"])
    for extra in PROJECT["optional-dependencies"].values():
        lines += extra
    own = canonicalize_name(PROJECT["name"])
    return [req for req in map(Requirement, lines) if canonicalize_name(req.name) != own]


def _conda_deps() -> list[str]:
    return [d for d in ENV["dependencies"] if isinstance(d, str)]


def _pip_lines() -> list[str]:
    pip = [d for d in ENV["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip: section"
    return pip[0]["pip"]


def env_python() -> Version:
    pythons = [d for d in _conda_deps() if re.match(r"python\b", d)]
    assert len(pythons) == 1, f"expected one python pin, got {pythons}"
    return Version(re.split(r"[=<>~! ]+", pythons[0], maxsplit=1)[1].strip("="))


def test_every_requirement_is_pinned_inside_its_range():
    # Markers are evaluated for the Python the lock was made with, the one
    # environment.yml installs (a marker such as python_version < '3.11' may
    # leave a requirement out).
    python = str(env_python())
    pins = lock()
    missing, outside = [], []
    for req in requirements():
        if req.marker and not req.marker.evaluate({"python_version": python, "extra": ""}):
            continue
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            missing.append(str(req))
        elif not req.specifier.contains(pinned, prereleases=True):
            outside.append(f"{req} (locked {pinned})")
    assert not missing, f"not pinned in .ci/constraints.txt: {missing}"
    assert not outside, f"locked outside the range pyproject.toml allows: {outside}"


def test_lock_pins_the_torch_of_the_stored_outputs():
    assert lock()["torch"] == Version(LOCKED_TORCH)


def lock_python() -> Version:
    found = re.search(r"^# Made with Python (\d+\.\d+) ", LOCK_PATH.read_text(), re.MULTILINE)
    assert found, "constraints.txt does not say which Python it was made with"
    return Version(found.group(1))


def test_conda_python_is_the_python_of_the_lock():
    # Some pins (numpy 2.4, for one) need the Python the lock was made with.
    assert env_python() == lock_python()


def test_lock_says_what_it_is_and_how_to_regenerate_it():
    header = LOCK_PATH.read_text().split("\n\n", 1)[0]
    assert "README commands (a) and (b)" in header
    assert "python .ci/lock" in header


def test_runtime_requirements_are_ranges_not_pins():
    for line in PROJECT["dependencies"]:
        req = Requirement(line)
        assert not any(s.operator in ("==", "===", "~=") for s in req.specifier), (
            f"{line}: a pin would replace the version a learner already has; "
            "pin in .ci/constraints.txt instead"
        )


def test_torch_range_admits_the_locked_and_the_tested_versions():
    (torch,) = [Requirement(r) for r in PROJECT["dependencies"] if r.startswith("torch")]
    tested = readme_tested_torch_versions()
    assert LOCKED_TORCH in tested, "the README's table must list the locked torch"
    for version in tested:
        assert Version(version) in torch.specifier, f"tested torch {version} outside {torch}"
    # The oldest tested release is the lower bound; the next major is excluded.
    assert min(map(Version, tested)) == min(
        Version(s.version) for s in torch.specifier if s.operator == ">="
    )
    assert Version("3.0") not in torch.specifier


def readme_tested_torch_versions() -> list[str]:
    """torch versions from the README's table of .ci/torch-versions runs."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Installing", 1)[1].split("\n## ", 1)[0]
    # | torch | build | Python | unit tests | ...: rows whose unit tests passed
    row = r"^\| *(\d+\.\d+\.\d+) *\|[^|]*\|[^|]*\|[^|]*\bpassed\b"
    rows = re.findall(row, section, re.MULTILINE)
    assert rows, "README, Installing: no table row of a tested torch version"
    return rows


def test_version_has_one_source():
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "backproplab.__version__"
    # setuptools reads it without importing the package: it must be a literal.
    tree = ast.parse((ROOT / "backproplab" / "__init__.py").read_text())
    literals = [
        node.value.value for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert len(literals) == 1 and Version(literals[0])
    # The README names release files; they must carry the same version.
    named = set(re.findall(r"backproplab-(\d[^-\s]*?)(?:-py3|\.tar\.gz)",
                           (ROOT / "README.md").read_text()))
    assert named <= {literals[0]}, f"README names backproplab {named}, the package is {literals}"


def test_conda_python_is_inside_requires_python():
    requires = SpecifierSet(PROJECT["requires-python"])
    assert env_python() in requires, f"environment.yml's Python is outside {requires}"


def test_conda_installs_the_project_through_the_lock():
    lines = _pip_lines()
    constraints = [line for line in lines if line.startswith("-c ")]
    assert constraints == ["-c .ci/constraints.txt"], lines
    # conda runs pip from the folder of environment.yml: the path must resolve there.
    assert (ROOT / constraints[0][3:]).is_file()
    local = [line for line in lines if re.match(r"(-e\s+)?\.(\[|$)", line)]
    assert len(local) == 1, f"expected one install of '.', got {lines}"
    extras = re.search(r"\[(.*)\]", local[0])
    assert extras and set(extras.group(1).split(",")) <= set(PROJECT["optional-dependencies"])


def test_no_second_dependency_list():
    # conda adds only python and pip; pip's section names no package of its own.
    assert sorted(re.split(r"[=<> ]", d)[0] for d in _conda_deps()) == ["pip", "python"]
    others = [
        line for line in _pip_lines()
        if not (line.startswith("-c ") or re.match(r"(-e\s+)?\.(\[|$)", line))
    ]
    assert not others, f"environment.yml's pip section lists packages of its own: {others}"
    assert not list(ROOT.glob("requirements*.txt")), "pyproject.toml is the one dependency list"
