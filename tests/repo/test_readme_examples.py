"""The README's examples are the real thing: code copied from the lessons, real output.

When a lesson's exercise or the release command's output changes, these tests
fail until the README says the same again.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from backproplab.course import handout

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TEACHING = README[README.index("## Teaching with backproplab"):]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)\n```", text, flags=re.S)


def _cell(lesson: str, grade_id: str):
    nb = nbformat.read(ROOT / "notebooks" / lesson, as_version=4)
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def test_the_exercise_example_is_lesson_2s_cells():
    python = _blocks(TEACHING, "python")
    solution, check = _cell("02-chain-rule.ipynb", "l02-cubic"), _cell(
        "02-chain-rule.ipynb", "l02-cubic-check")
    assert python[0] == solution.source
    assert python[1] == check.source
    metadata = [json.loads(block) for block in _blocks(TEACHING, "json")[:2]]
    assert metadata == [{"nbgrader": dict(solution.metadata["nbgrader"])},
                        {"nbgrader": dict(check.metadata["nbgrader"])}]


def test_the_hidden_test_example_is_a_lessons_check_cell():
    hidden = next(b for b in _blocks(_section("Hidden tests"), "python") if "HIDDEN TESTS" in b)
    assert hidden == _cell("02-chain-rule.ipynb", "l02-rule-check").source


def test_the_release_output_is_what_release_prints(tmp_path: Path):
    shown = re.search(r"```\n(released .*?)\n```", TEACHING, flags=re.S).group(1)
    lines = []
    handout.release(ROOT / "notebooks", tmp_path / "student", log=lines.append)
    expected = [line for line in shown.splitlines() if line != "..."]
    assert lines[: len(expected)] == expected
    shutil.rmtree(tmp_path / "student")


def _commands(section: str) -> list[str]:
    """The shell commands of a README section, comments and heredoc bodies left out, a line
    continued with a backslash joined to the next."""
    lines, heredoc = [], None
    for block in _blocks(section, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            if heredoc is not None:
                heredoc = None if line.strip() == heredoc else heredoc
                continue
            if "<<'" in line:
                heredoc = line.split("<<'", 1)[1].split("'", 1)[0]
            command = line.split("  #", 1)[0].strip()
            if command:
                lines.append(command)
    return lines


def _section(title: str) -> str:
    """One ### subsection of the Teaching section (marker lines in code are not headings)."""
    return re.split(r"\n### (?!BEGIN|END)", TEACHING.split(f"\n### {title}", 1)[1], maxsplit=1)[0]


@pytest.mark.slow
def test_route_1_commands_run_as_written(tmp_path: Path):
    """Release, the grading command (with the instructor's secret) and the audit, verbatim."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    commands = _commands(_section("Route 1: `backproplab release`"))
    install = [c for c in commands if c.startswith("pip install")]
    assert install == ["pip install -c .ci/constraints.txt -e ."]  # what CI installs, too
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def sh(command: str) -> subprocess.CompletedProcess:
        done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
        return done

    release = next(c for c in commands if c.startswith("backproplab release"))
    sh(release)
    assert (tmp_path / "student" / "02-chain-rule.ipynb").exists()
    grade = next(c for c in commands if c.startswith("backproplab grade"))
    # An honest submission: lesson 2 with its solutions, in a folder of its student's.
    (tmp_path / "returned" / "alice").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "02-chain-rule.ipynb",
                tmp_path / "returned" / "alice" / "02-chain-rule.ipynb")
    shutil.copy(ROOT / "notebooks" / "02-chain-rule.ipynb", tmp_path / "submission.ipynb")
    (tmp_path / "backproplab-secret").write_text("words only the instructor knows\n")
    env["HOME"] = str(tmp_path)  # where the command's ~/backproplab-secret is
    sh(grade)
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    assert rows and all(r["student"] == "alice" and r["verdict"] == "pass" for r in rows), rows
    audit = _commands(_section("What the audit lists"))
    assert audit == ["backproplab audit submitted/ --against source/ps02"]
    (tmp_path / "submitted" / "alice" / "ps02").mkdir(parents=True)
    (tmp_path / "source").mkdir()
    shutil.copytree(ROOT / "notebooks", tmp_path / "source" / "ps02")
    shutil.copy(tmp_path / "submission.ipynb",
                tmp_path / "submitted" / "alice" / "ps02" / "02-chain-rule.ipynb")
    assert "no tampering found" in sh(audit[0]).stdout


def test_every_teaching_command_is_run_by_a_test():
    """Route 1 runs verbatim above; nbgrader's commands are the ones test_nbgrader runs."""
    tested = (ROOT / "tests" / "course" / "test_nbgrader.py").read_text()
    for command in _commands(_section("Route 2: nbgrader")):
        words = command.split()
        if words[0] == "nbgrader":
            assert f'"{words[1]}"' in tested, f"no test runs {command!r}"
        elif words[0] == "backproplab":
            assert words[1] in ("audit", "grade") and f'"{words[1]}"' in tested, command
        else:
            assert words[0] in ("pip", "mkdir", "cd", "cat", "cp"), command
    validate = _commands(_section("How an exercise is written"))
    assert validate == ["backproplab validate notebooks/"]
