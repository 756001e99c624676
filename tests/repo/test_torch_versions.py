""".ci/torch-versions and .ci/run-lessons: the calls they accept, and how run-lessons
judges a lesson run on another torch against its stored outputs.

The scripts themselves install torch releases (gigabytes); these tests stop short of
that: a wrong call must fail before anything is made, and the judging is plain code.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook, new_output

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / ".ci" / "torch-versions"
USAGE = ".ci/torch-versions VERSION [--lowest] [--lessons | --lessons-only]"


def _load_run_lessons():
    path = str(ROOT / ".ci" / "run-lessons")
    loader = importlib.machinery.SourceFileLoader("run_lessons", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    sys.modules[loader.name] = module  # its dataclass looks its module up there
    loader.exec_module(module)
    return module


run_lessons = _load_run_lessons()


def _call(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(tmp_path), **env}, timeout=60)


@pytest.mark.parametrize("args", [
    [], ["--lessons"], ["2.15.0", "--bogus"], ["2.15.0", "lessons"],
    ["2.15.0", "--lessons", "--lessons-only"], ["2.15.0", "--lessons", "--lessons"],
    ["2.15.0", "--lowest", "--lowest"],
    ["2.15.0", str(ROOT / "notebooks" / "01-computational-graph.ipynb")],  # no --lessons
])
def test_a_wrong_call_prints_the_usage_and_makes_nothing(args, tmp_path):
    done = _call(args, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert USAGE in done.stderr and "--lessons-only executes the lessons" in done.stderr
    assert not list(tmp_path.iterdir()), "a wrong call must stop before the venv is made"


@pytest.mark.parametrize("args", [
    ["2.15.0"], ["2.15.0", "--lessons"], ["2.15.0", "--lessons-only"],
    ["2.15.0", "--lowest", "--lessons"], ["2.15.0", "--lessons-only", "--lowest"],
    ["2.15.0", "--lessons-only", str(ROOT / "notebooks" / "01-computational-graph.ipynb")],
])
def test_every_call_the_usage_shows_gets_past_the_argument_check(args, tmp_path):
    # PYTHON=false: making the venv fails at once, after the arguments were accepted.
    done = _call(args, tmp_path, PYTHON="false")
    assert done.returncode == 1 and USAGE not in done.stderr, done.stdout + done.stderr


def test_the_readme_shows_a_call_the_script_accepts(tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Tested PyTorch versions", 1)[1].split("\n### ", 1)[0]
    shown = [line.split() for line in re.findall(r"```bash\n(.*?)\n```", section, re.DOTALL)]
    assert shown and all(words[0] == ".ci/torch-versions" for words in shown), shown
    for words in shown:
        done = _call(words[1:], tmp_path, PYTHON="false")
        assert done.returncode == 1 and USAGE not in done.stderr, done.stdout + done.stderr


def _cell(text: str = "", *, stderr: str = "", error: tuple[str, str] | None = None,
          tags: tuple[str, ...] = (), cell_id: str = "l99-01"):
    cell = new_code_cell("...", id=cell_id, metadata={"tags": list(tags)} if tags else {})
    cell.execution_count = 1
    if text:
        cell.outputs.append(new_output("stream", name="stdout", text=text))
    if stderr:
        cell.outputs.append(new_output("stream", name="stderr", text=stderr))
    if error:
        cell.outputs.append(new_output("error", ename=error[0], evalue=error[1], traceback=[]))
    return cell


def test_a_tick_turned_cross_fails_and_a_stored_cross_may_stay():
    stored = _cell("✗ wrong on purpose\n✓ the fix\n")
    failures, _ = run_lessons.compare_cell(stored, _cell("✗ wrong on purpose\n✓ the fix\n"))
    assert failures == []
    failures, _ = run_lessons.compare_cell(stored, _cell("✗ wrong on purpose\n✗ the fix: off\n"))
    assert failures == ["✗ where the stored lesson shows ✓: ✗ the fix: off"]
    failures, _ = run_lessons.compare_cell(_cell("no check here\n"), _cell("✗ new cross\n"))
    assert failures == ["✗ where the stored lesson shows no mark: ✗ new cross"]


def test_errors_fail_outside_raises_exception_cells_only():
    compare = run_lessons.compare_cell
    failures, _ = compare(_cell("✓ fine\n"),
                          _cell(error=("AssertionError", "dz/dx is off\nmore lines")))
    assert failures == ["AssertionError: dz/dx is off"]
    tagged = _cell(error=("RuntimeError", "Trying to backward through the graph a second time"),
                   tags=("raises-exception",))
    assert compare(tagged, _cell(error=("RuntimeError", "reworded"))) == ([], [])
    failures, _ = compare(tagged, _cell("it ran"))
    assert failures == ["tagged raises-exception, raised nothing (stored: RuntimeError)"]
    failures, _ = compare(tagged, _cell(error=("TypeError", "other")))
    assert failures == ["raised TypeError: other (stored: RuntimeError)"]


def test_a_check_that_raises_its_cross_fails_where_the_stored_one_passed():
    """A failed check raises AssertionError with a message that starts with a blank line
    and then its ✗ line: the failure names that line, and the ✗ counts as a mark."""
    message = "\n✗ dz/dx: off by a factor of 2\n  worst entry ..."
    failures, _ = run_lessons.compare_cell(_cell("✓ dz/dx: exact\n"),
                                           _cell(error=("AssertionError", message)))
    assert failures == ["AssertionError: ✗ dz/dx: off by a factor of 2",
                        "✗ where the stored lesson shows ✓: ✗ dz/dx: off by a factor of 2"]
    tagged = _cell(error=("AssertionError", message), tags=("raises-exception",))
    assert run_lessons.compare_cell(tagged, _cell(error=("AssertionError", message))) == ([], [])


def test_a_version_without_a_build_matches_every_build_of_it():
    same = run_lessons.same_torch
    assert same("2.15.0+cu132", "2.15.0") and same("2.15.0", "2.15.0")
    assert same("2.13.0+cpu", "2.13.0+cpu") and not same("2.13.0+cu128", "2.13.0+cpu")
    assert not same("2.15.1", "2.15.0") and not same("2.15.0rc1", "2.15.0")


def test_new_stderr_is_a_note_with_the_path_inside_packages_left_out():
    warning = ("/tmp/v/lib/python3.11/site-packages/torch/jit/_script.py:1480: FutureWarning: "
               "torch.jit.script is deprecated\n  warnings.warn(\n")
    failures, notes = run_lessons.compare_cell(_cell("✓ ok\n"), _cell("✓ ok\n", stderr=warning))
    assert failures == []
    assert notes == ["stderr: torch/jit/_script.py:1480: FutureWarning: "
                     "torch.jit.script is deprecated"]


@pytest.mark.slow
def test_run_lessons_runs_a_lesson_in_a_kernel_and_reports_by_cell(tmp_path):
    stored = new_notebook(cells=[
        _cell("✓ one\n", cell_id="l99-01"),
        _cell(error=("ZeroDivisionError", "division by zero"), tags=("raises-exception",),
              cell_id="l99-02"),
        _cell("✓ two\n", cell_id="l99-03"),
        _cell("", cell_id="l99-04"),
    ])
    sources = ['print("✓ one")', "1 / 0", 'print("✗ two")', 'raise AssertionError("off by 2")']
    for cell, source in zip(stored.cells, sources, strict=True):
        cell.source = source
    lesson = tmp_path / "99-judged.ipynb"
    nbformat.write(stored, lesson)
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "run-lessons"), "--torch", torch.__version__,
         str(lesson)], capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"kernels run torch and Python {torch.__version__}" in done.stdout
    assert "99-judged.ipynb" in done.stdout and "4 cells" in done.stdout
    assert "FAILED (2)" in done.stdout
    assert "FAIL l99-03: ✗ where the stored lesson shows ✓: ✗ two" in done.stdout
    assert "FAIL l99-04: AssertionError: off by 2" in done.stdout
    assert "l99-02" not in done.stdout  # it raised, as its tag says
    assert nbformat.read(lesson, as_version=4) == stored, "run-lessons writes nothing back"
