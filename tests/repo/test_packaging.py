"""The release files: built, checked, installed in fresh venvs and tested there.

`python -m build` makes the wheel and the sdist once per run (offline: with
--no-isolation it uses the setuptools of this environment, pinned in the
lock). Each install goes into a fresh venv that sees this environment's
packages through a folder of links, backproplab's own files left out, so
nothing is downloaded and the code under test is the installed copy. The
wheel's install runs the unit tests; the sdist's install is checked to put the
same files in place, byte for byte, so they are not run again.
"""

from __future__ import annotations

import ast
import email
import os
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from test_environment import PROJECT, readme_tested_torch_versions

ROOT = Path(__file__).parents[2]
SITE = Path(sysconfig.get_paths()["purelib"])
# Unit tests run against each installed copy: quick ones that reach most of
# the package (graph reading, tracing, checks, data), and every doctest.
UNIT_TESTS = ["lab/test_data.py", "lab/test_check.py", "lab/test_trace.py"]

pytestmark = pytest.mark.slow


def _version_literal() -> str:
    tree = ast.parse((ROOT / "backproplab" / "__init__.py").read_text())
    (value,) = [
        node.value.value for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
    ]
    return value


VERSION = _version_literal()


def _offline_env() -> dict[str, str]:
    """pip with no configuration file, no index and no settings from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.pop("PYTHONPATH", None)
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    return env


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          env=_offline_env(), timeout=600, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _top_level_entries(name: str) -> set[str]:
    """The entries of this site-packages that belong to one installed distribution."""
    found = set()
    for dist in metadata.distributions(path=[str(SITE)], name=name):
        found |= {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}
    assert found, f"{name} is not installed in {SITE}"
    return found


def fresh_venv(path: Path, hide: tuple[str, ...] = ("backproplab",)) -> tuple[Path, Path]:
    """A venv that sees this environment's packages except the distributions in hide.

    Returns its python and its own site-packages, which come first on sys.path,
    so what is installed there wins over the shared folder.
    """
    venv.create(path, with_pip=False, symlinks=True)
    python = path / "bin" / "python"
    own = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
               .stdout.strip())
    hidden = set().union(*(_top_level_entries(name) for name in hide))
    shared = path / "shared" / "site-packages"  # a site folder, which the grade's sandbox shows
    shared.mkdir(parents=True)
    for entry in SITE.iterdir():
        if entry.name not in hidden and entry.suffix != ".pth":
            (shared / entry.name).symlink_to(entry)
    (own / "shared.pth").write_text(f"{shared}\n")
    return python, own


def run_unit_tests(python: Path, own: Path, tmp: Path) -> str:
    """The unit tests and the installed package's doctests, run from outside the checkout."""
    (tmp / "pytest.ini").write_text("[pytest]\n")
    (tmp / "test_installed_copy.py").write_text(
        "import backproplab\n\n\n"
        "def test_the_installed_copy_is_under_test():\n"
        f"    assert backproplab.__file__.startswith({str(own)!r}), backproplab.__file__\n"
    )
    done = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", tmp / "pytest.ini",
                 "--rootdir", tmp, "--doctest-modules", tmp / "test_installed_copy.py",
                 own / "backproplab", *(ROOT / "tests" / name for name in UNIT_TESTS)], cwd=tmp)
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT])
    (wheel,) = out.glob("backproplab-*.whl")
    (sdist,) = out.glob("backproplab-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_build_names_the_files_after_the_one_version(dist):
    assert dist["wheel"].name == f"backproplab-{VERSION}-py3-none-any.whl"
    assert dist["sdist"].name == f"backproplab-{VERSION}.tar.gz"


def test_metadata_renders_as_pypi_requires(dist):
    done = _run([sys.executable, "-m", "twine", "check", "--strict", dist["wheel"], dist["sdist"]])
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_wheel_metadata_matches_pyproject(dist):
    with zipfile.ZipFile(dist["wheel"]) as whl:
        meta = email.message_from_string(
            whl.read(f"backproplab-{VERSION}.dist-info/METADATA").decode("utf-8"))
        entry_points = whl.read(f"backproplab-{VERSION}.dist-info/entry_points.txt").decode()
        files = set(whl.namelist())
    assert Version(meta["Version"]) == Version(VERSION)
    assert meta["License-Expression"] == "MIT"
    assert meta["Requires-Python"] == PROJECT["requires-python"]
    runtime = [Requirement(r) for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(map(str, runtime)) == sorted(str(Requirement(r)) for r in PROJECT["dependencies"])
    assert meta.get_payload().strip() == (ROOT / "README.md").read_text().strip()
    assert "backproplab = backproplab.__main__:main" in entry_points
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "backproplab").rglob("*.py")}
    info = {f"backproplab-{VERSION}.dist-info/{name}" for name in (
        "METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt", "licenses/LICENSE")}
    assert files == package | info


def test_sdist_holds_the_package_readme_and_licence_and_nothing_else(dist):
    with tarfile.open(dist["sdist"]) as tar:
        files = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "backproplab").rglob("*.py")}
    needed = package | {"README.md", "LICENSE", "pyproject.toml", "PKG-INFO"}
    assert needed <= files, f"missing from the sdist: {sorted(needed - files)}"
    # Besides: setuptools' build metadata, and the tests/test*.py files it adds
    # to every sdist by default. No notebook, venv, cache, CI script or
    # stray build output.
    extra = files - needed
    allowed = {f for f in extra if f == "setup.cfg" or f.startswith("backproplab.egg-info/")
               or (f.startswith("tests/test") and f.endswith(".py"))}
    assert extra == allowed, f"unexpected files in the sdist: {sorted(extra - allowed)}"


def _install(release: Path, tmp_path: Path) -> tuple[Path, Path]:
    """``release`` installed in a fresh venv whose `backproplab` command answers with the
    version; the venv's python and its own site-packages."""
    python, own = fresh_venv(tmp_path / "venv")
    _run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", release])
    assert (own / "backproplab" / "__init__.py").is_file()
    version = _run([tmp_path / "venv" / "bin" / "backproplab", "--version"]).stdout
    assert version.strip() == f"backproplab {VERSION}"
    return python, own


# What an install of the release puts in place: the package, and the metadata pip reads.
_INSTALLED = ("backproplab/", f"backproplab-{VERSION}.dist-info/METADATA",
              f"backproplab-{VERSION}.dist-info/entry_points.txt")


def _installed_files(own: Path) -> dict[str, bytes]:
    """The files of an install under ``own`` (bytecode pip compiled left out)."""
    return {path.relative_to(own).as_posix(): path.read_bytes()
            for path in own.rglob("*") if path.is_file() and "__pycache__" not in path.parts
            and path.relative_to(own).as_posix().startswith(_INSTALLED)}


def test_installed_wheel_passes_the_unit_tests(dist, tmp_path):
    python, own = _install(dist["wheel"], tmp_path)
    report = run_unit_tests(python, own, tmp_path)
    assert " passed" in report and "failed" not in report, report


def test_installed_sdist_is_the_tested_wheel(dist, tmp_path):
    """pip builds a wheel from the sdist and installs that: what lands on disk is, byte
    for byte, what the wheel holds, whose installed copy passes the unit tests (so they
    are not run a second time), and the package imports from its installed place."""
    python, own = _install(dist["sdist"], tmp_path)
    with zipfile.ZipFile(dist["wheel"]) as whl:
        wheel = {name: whl.read(name) for name in whl.namelist() if name.startswith(_INSTALLED)}
    installed = _installed_files(own)
    assert sorted(installed) == sorted(wheel)
    assert [name for name in wheel if installed[name] != wheel[name]] == []
    done = _run([python, "-c", "import backproplab.course.grading as g; print(g.__file__)"],
                cwd=tmp_path)
    assert done.stdout.startswith(str(own)), done.stdout


def test_plain_pip_install_keeps_the_torch_already_installed(dist, tmp_path):
    # A course environment with the newest torch the README lists as tested
    # (here only its metadata: pip decides from that). backproplab installs
    # with plain `pip install`, dependencies resolved, and must keep it.
    newest = max(readme_tested_torch_versions(), key=Version)
    python, own = fresh_venv(tmp_path / "venv", hide=("backproplab", "torch"))
    info = own / f"torch-{newest}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {newest}\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")
    done = _run([python, "-m", "pip", "install", dist["wheel"]])
    assert "Requirement already satisfied: torch" in done.stdout, done.stdout
    kept = _run([python, "-c", "from importlib.metadata import version; print(version('torch'))"])
    assert kept.stdout.strip() == newest
    assert (own / "backproplab" / "__init__.py").is_file()
