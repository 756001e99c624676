"""`backproplab audit` lists every tamper in tests/cheats/tampers.py and reads each graded
answer against its own exercise's vocabulary; no tamper changes what `backproplab grade`
gives, since the grade never runs them."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from notebook_runner import error_of, run

from backproplab.__main__ import main
from backproplab.course import assignment as course
from backproplab.course import grade
from backproplab.course.audit import audit, findings_in

HERE = Path(__file__).parents[1]
LESSONS = HERE.parent / "notebooks"
FIXTURE = HERE / "fixtures" / "course" / "00-fixture.ipynb"
_spec = importlib.util.spec_from_file_location("tampers", HERE / "cheats" / "tampers.py")
_tampers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tampers)
TAMPERS = _tampers.TAMPERS


def _lesson() -> nbformat.NotebookNode:
    """A small lesson in the course's format: one by-hand exercise, checked by id."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch\n\nimport backproplab as bl"),
        nbformat.v4.new_code_cell(
            "def cubic_slope(x):\n    ### BEGIN SOLUTION\n    return 3 * x**2 - 8 * x\n"
            "    ### END SOLUTION"),
        nbformat.v4.new_code_cell(
            'bl.check_exercise("l02-cubic", cubic_slope)\n### BEGIN HIDDEN TESTS\n'
            'bl.check_exercise("l02-cubic", cubic_slope, seed=7013)\n### END HIDDEN TESTS'),
    ]
    base = {"schema_version": 3, "locked": False}
    nb.cells[1].metadata["nbgrader"] = {**base, "grade_id": "l02-cubic", "solution": True,
                                        "grade": False}
    nb.cells[2].metadata["nbgrader"] = {**base, "grade_id": "l02-cubic-check", "points": 1,
                                        "solution": False, "grade": True, "locked": True}
    return nb


def _tampered(source: str) -> nbformat.NotebookNode:
    """The student version with the exercise left blank and the tamper in its place."""
    nb, _, _ = course.student_version(_lesson())
    nb.cells[1].source = "def cubic_slope(x):\n    return x\n\n" + source
    return nb


def test_the_lesson_used_here_is_valid_and_passes_honestly():
    assert course.validate(_lesson(), "02") == []
    nb = run(_lesson())
    assert error_of(nb.cells[2]) is None


@pytest.mark.parametrize(("name", "source", "listed"), TAMPERS, ids=[t[0] for t in TAMPERS])
def test_audit_lists_every_tamper(name, source, listed):
    handed_out, _, _ = course.student_version(_lesson())
    found = [f.what for f in findings_in(_tampered(source), "x.ipynb", handed_out)]
    assert listed in found, f"{name}: {found}"


def test_audit_lists_nothing_in_honest_work():
    handed_out, _, _ = course.student_version(_lesson())
    assert findings_in(_lesson(), "x.ipynb", [_lesson(), handed_out]) == []
    honest = _tampered("def helper(t):\n    return torch.where(t > 0, t, 0.0).sum(0)\n")
    assert findings_in(honest, "x.ipynb", handed_out) == []


def test_audit_reads_an_answer_against_its_exercises_vocabulary():
    handed_out, _, _ = course.student_version(_lesson())
    nb, _, _ = course.student_version(_lesson())
    nb.cells[1].source = ("import numpy as np\n\n\ndef cubic_slope(x):\n"
                          "    return torch.as_tensor(3 * np.square(x.tolist())) - 8 * x\n")
    found = [(f.line, f.what) for f in findings_in(nb, "x.ipynb", handed_out)]
    assert (1, "outside l02-cubic's vocabulary: import numpy (another numeric or symbolic "
               "library)") in found
    assert (5, "outside l02-cubic's vocabulary: np.square, which is numpy.square (another "
               "numeric or symbolic library)") in found


def test_a_walk_of_the_graph_is_not_listed_where_the_exercise_asks_for_one():
    """Lesson 02's rule read from a node's saved tensors is what l02-rule asks for."""
    lesson = LESSONS / "02-chain-rule.ipynb"
    nb = course.read_notebook(lesson)
    handed_out = [nb, course.student_version(nb)[0]]
    assert findings_in(course.read_notebook(lesson), "02.ipynb", handed_out) == []


@pytest.mark.slow
def test_no_tamper_changes_the_grade(tmp_path):
    """In the kernel a tamper may turn a wrong answer's ✗ into ✓; the grade never runs it."""
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nbformat.write(_lesson(), lessons / "02-x.ipynb")
    # Each tampered notebook is an assignment of one of two students graded at once: two
    # containers, whose runner forks each answer's child from a state no answer changes
    # (l02-cubic is by hand, and lesson 02 preloads no module), so each answer meets
    # what it would meet in a container of its own.
    for k, (_, source, _) in enumerate(TAMPERS):
        folder = tmp_path / "submitted" / f"class{k % 2}" / f"student{k}"
        folder.mkdir(parents=True)
        nbformat.write(_tampered(source), folder / "02-x.ipynb")
    verdicts = grade.grade(tmp_path / "submitted", lessons, jobs=2)
    assert sorted(v.assignment for v in verdicts) == sorted(
        f"student{k}" for k in range(len(TAMPERS)))
    assert [v.points for v in verdicts] == [0.0] * len(TAMPERS), verdicts
    # Each was judged on what its answer returned, none lost to a container left broken.
    assert {v.verdict for v in verdicts} == {"mismatch"}, verdicts


def test_audit_command_names_student_cell_and_line(tmp_path, capsys):
    submitted = tmp_path / "submitted"
    handed = tmp_path / "release"
    handed.mkdir()
    nbformat.write(course.student_version(_lesson())[0], handed / "02-x.ipynb")
    for student, source in (("alice", None), ("mallory", TAMPERS[0][1])):
        folder = submitted / student / "ps1"
        folder.mkdir(parents=True)
        nb = _lesson() if source is None else _tampered(source)
        nbformat.write(nb, folder / "02-x.ipynb")
    edited = nbformat.read(submitted / "alice" / "ps1" / "02-x.ipynb", as_version=4)
    edited.cells[2].source = "pass"
    nbformat.write(edited, submitted / "alice" / "ps1" / "02-x.ipynb")

    assert main(["audit", str(submitted), "--against", str(handed)]) == 1
    out = capsys.readouterr().out
    assert "alice/ps1/02-x.ipynb cell 2 (l02-cubic-check): the check cell was edited" in out
    assert "mallory/ps1/02-x.ipynb cell 1 (l02-cubic), line 4: rebinds bl.check_by_hand" in out
    assert out.strip().endswith("2 findings in 2 notebooks")


def test_audit_command_on_clean_work_exits_0(tmp_path, capsys):
    (tmp_path / "bob").mkdir()
    nbformat.write(_lesson(), tmp_path / "bob" / "02-x.ipynb")
    assert main(["audit", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "no tampering found"


def test_audit_command_bad_input_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "backproplab", "audit", str(tmp_path / "no")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "SUBMITTED" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_audit_reads_the_lessons_without_findings(tmp_path):
    """The lessons' own solutions, audited against their own student versions, are clean."""
    lessons = sorted((HERE.parent / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    student = tmp_path / "s"
    student.mkdir()
    for lesson in lessons:
        shutil.copy(lesson, student / lesson.name)
    found = audit(student, HERE.parent / "notebooks")
    assert found == [], "\n".join(map(str, found))


_shapes_spec = importlib.util.spec_from_file_location("shapes", HERE / "cheats" / "shapes.py")
_shapes = importlib.util.module_from_spec(_shapes_spec)
_shapes_spec.loader.exec_module(_shapes)
# How the audit lists each reason key an escape must get, by the shape it has.
_LISTED = {"pattern": "reads an attribute through a class pattern",
           "module-value": "uses a module as a value",
           "annotation": "writes a string annotation",
           "runs-code": "runs code from a string or a file"}


@pytest.mark.parametrize(("kind", "source", "why"),
                         [e for e in _shapes.ESCAPES if e[2] in _LISTED],
                         ids=[e[0] for e in _shapes.ESCAPES if e[2] in _LISTED])
def test_audit_lists_each_escape_by_its_shape(kind, source, why):
    """Listed by shape, not by the words of the payload: no word of the words rules
    (``_execution_engine``, ``find_exercise``, ``exec(``) needs to appear."""
    handed_out, _, _ = course.student_version(_lesson())
    found = [f.what for f in findings_in(_tampered(source), "x.ipynb", handed_out)]
    assert any(what.startswith(_LISTED[why]) for what in found), found


def test_audit_lists_shapes_in_any_cell_with_what_other_cells_import():
    handed_out, _, _ = course.student_version(_lesson())
    nb = _tampered("")
    nb.cells.insert(2, nbformat.v4.new_code_cell(
        "class Names:\n    sys = 0\n\n\nT, _ = torch, 0\nsplit = 'ex' + 'ec'\n"))
    found = {(f.cell, f.line, f.what) for f in findings_in(nb, "x.ipynb", handed_out)}
    assert (2, 2, "gives an attribute of its own a refused name: Names.sys") in found
    assert (2, 5, "uses a module as a value: torch") in found
