"""The nbgrader route, end to end, with the real nbgrader (the `course` extra).

A throwaway course directory gets every lesson as one assignment:
`nbgrader generate_assignment` must produce the same student cells as
`backproplab release`. The class is autograded by one `nbgrader autograde` over
a few lessons of each student (nbgrader's own scores: every point for the solutions,
and every check cell of the blank version fails, predictions included; strict nbval
runs every lesson's solutions with their hidden tests), then every lesson of every
student is graded by one `backproplab grade --nbgrader`, which writes each exercise's
score into the gradebook: the solution version full marks, the
blank student version none, numerical estimates and shortcuts nothing on any
by-hand exercise (mallory's shortcuts are graded without nbgrader running them: the
grade enters her submission itself). A fourth student, eve, answers with a table of
the check's inputs built in her kernel: the kernel's check is fooled (autograde scores
it), the grade is not.

nbgrader is optional locally (the test skips without it) but required in CI:
when the CI variable is set a missing nbgrader is a failure.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from backproplab.__main__ import main
from backproplab.course import assignment as course
from backproplab.course.audit import audit
from backproplab.course.byhand import ByHand
from backproplab.course.grading import find_exercise

try:
    from nbgrader.api import Gradebook
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip(
        "nbgrader is not installed (pip install 'backproplab[course]')", allow_module_level=True
    )

# nbgrader executes a few lessons of three students, then the grade runs four whole
# courses: on two busy cores that can come near the suite's default limit of 900 s.
pytestmark = [pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "course" / "00-fixture.ipynb"
COURSE_ID = "backproplab"
ASSIGNMENT = "ps1"


def _lessons() -> list[Path]:
    """Every lesson (one assignment holds them all), or the fixture when there are none."""
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")) or [FIXTURE]


def _run_by_nbgrader() -> list[Path]:
    """The lessons nbgrader executes, of alice's solutions and of bob's blanks: the first,
    the last and the one with the most graded cells. Every lesson's solutions, hidden tests
    in, run cell by cell under strict nbval (the cells nbgrader's autograde would execute
    for alice), and every lesson's blank meets the hidden tests of every check in the live
    run (tests/lessons/test_exercises.py), where it costs a check cell instead of a whole
    execution of the lesson; here nbgrader's own steps are shown on both. Their other
    lessons join the submissions after autograde, as mallory's do, and `backproplab grade`
    enters them."""
    lessons = _lessons()
    most = max(lessons, key=lambda p: sum(
        1 for c in course.read_notebook(p).cells if c.metadata.get("nbgrader", {}).get("grade")))
    return sorted({lessons[0], most, lessons[-1]})


def _alice_by_nbgrader() -> list[Path]:
    """alice's lessons nbgrader executes: those of `_run_by_nbgrader`, and lesson 02, where
    her answer makes torch print a warning."""
    warned = [p for p in _lessons() if p.name.startswith("02-")]
    return sorted(set(_run_by_nbgrader()) | set(warned))


def _env(course_dir: Path) -> dict[str, str]:
    # A private config dir keeps a user's own nbgrader/jupyter config out. nbgrader
    # starts `alembic` by name, so the interpreter's own bin folder goes first on PATH:
    # a course's CI often runs a venv's python by its path, without activating the venv.
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(course_dir / ".jupyter"),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
    }


def _nbgrader(course_dir: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course_dir,
        env=_env(course_dir),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def _configure(root: Path) -> None:
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        # lessons import torch; a loaded machine can be slow to start a kernel
        "c.Execute.timeout = 300\n"
        "c.Execute.startup_timeout = 300\n"
        # Kernels on Unix sockets: students graded at once never race for a TCP port.
        "c.Execute.kernel_manager_class = "
        "'backproplab.course.kernels.AsyncIPCKernelManager'\n"
        # A notebook's kernel is stopped once its last cell has run, not asked to exit
        # (which takes a second with torch loaded): its outputs are all in by then.
        "c.Execute.shutdown_kernel = 'immediate'\n"
    )


def _sources(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def _cheats() -> dict[str, list[tuple[str, str]]]:
    """Every lesson's shortcuts (tests/cheats/lessonNN.py), by grade_id."""
    table: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((ROOT / "tests" / "cheats").glob("lesson*.py")):
        spec = importlib.util.spec_from_file_location(f"cheats_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for key, value in getattr(module, "CHEATS", {}).items():
            table.setdefault(key, []).extend([value] if isinstance(value, tuple) else value)
    return table


def _swapped(lesson: Path, cheats: dict, turn) -> tuple[nbformat.NotebookNode, set[str]]:
    """The solution version with every by-hand answer replaced by a numerical estimate:
    finite differences ("numerical estimate") and bl.numerical_grad ("numerical_grad")
    in turn; and the grade_ids of the checks that must then fail."""
    nb = course.read_notebook(lesson)
    failing = set()
    cells = nb.cells
    for i, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        table = cheats.get(meta.get("grade_id"), [])
        found = {fragment: src for src, fragment in reversed(table)
                 if fragment in ("numerical estimate", "numerical_grad")}
        if meta.get("solution") and found:
            kind = ("numerical estimate", "numerical_grad")[next(turn) % 2]
            cell.source = found.get(kind) or next(iter(found.values()))
            check = next(c for c in cells[i + 1:] if c.cell_type == "code")
            failing.add(check.metadata["nbgrader"]["grade_id"])
    return nb, failing


WARNING_LINE = "    x = torch.tensor(x)  # torch warns: copy-constructing a tensor from a tensor"


def _with_a_warning(lesson: Path) -> nbformat.NotebookNode:
    """The solutions, with lesson 02's cubic answer made to raise a torch warning."""
    nb = course.read_notebook(lesson)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "l02-cubic":
            lines = cell.source.split("\n")
            at = next(k for k, line in enumerate(lines) if "BEGIN SOLUTION" in line)
            cell.source = "\n".join(lines[:at + 1] + [WARNING_LINE] + lines[at + 1:])
    return nb


def _shortcuts():
    spec = importlib.util.spec_from_file_location("shortcuts", ROOT / "tests" / "cheats"
                                                  / "shortcuts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _by_hand(grade_id: str | None) -> bool:
    try:
        return isinstance(find_exercise(grade_id), ByHand)
    except (TypeError, ValueError):
        return False


def _shortcut_answers(lesson: Path, turn) -> tuple[nbformat.NotebookNode, set[str]]:
    """The solution version with every by-hand answer replaced by a shortcut of
    tests/cheats/shortcuts.py, the kinds taking turns; and the checks that must fail."""
    shortcuts = _shortcuts()
    nb = course.read_notebook(lesson)
    failing = set()
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if not (meta.get("solution") and _by_hand(meta.get("grade_id"))):
            continue
        name = cell.source.split("def ", 1)[1].split("(", 1)[0]
        shortcut = shortcuts.SHORTCUTS[next(turn) % len(shortcuts.SHORTCUTS)]
        cell.source = (shortcuts.PRELUDE + shortcut.source.replace("{key}", meta["grade_id"])
                       + f"\n\n{name} = answer\n")
        check = next(c for c in nb.cells[i + 1:] if c.cell_type == "code")
        failing.add(check.metadata["nbgrader"]["grade_id"])
        if shortcut.audit:  # what the audit reads in its source (the rest fails as it runs)
            LISTED.add(check.metadata["nbgrader"]["grade_id"])
    return nb, failing


STUDENTS = ("alice", "bob", "mallory", "eve")
AUTOGRADED_BY_NBGRADER = ("alice", "bob", "eve")
SECRET = "the instructor's"


def _eve(root: Path) -> set[str]:
    """Lesson 04 only, its first exercise answered from a table of the checks' inputs
    built in the kernel (with the environment's secret, or the public seeds when the
    kernel has none, as an instructor following the README leaves it; shapes.py)."""
    spec = importlib.util.spec_from_file_location("shapes", ROOT / "tests" / "cheats"
                                                  / "shapes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = next(src for kind, src in module.SHAPES if "secret" in kind)
    lesson = next(p for p in _lessons() if p.name.startswith("04-"))
    nb = course.read_notebook(lesson)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "l04-grads":
            cell.source = table
    folder = root / "submitted" / "eve" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / lesson.name)
    return {"l04-grads-check"}


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A course with every lesson as one assignment, released by nbgrader."""
    root = tmp_path_factory.mktemp("nbgrader") / "course"
    (root / "source" / ASSIGNMENT).mkdir(parents=True)
    (root / ".jupyter").mkdir()
    _configure(root)
    for lesson in _lessons():
        shutil.copy(lesson, root / "source" / ASSIGNMENT / lesson.name)
    _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return root


def test_nbgrader_releases_what_backproplab_releases(released: Path) -> None:
    for lesson in _lessons():
        theirs = nbformat.read(released / "release" / ASSIGNMENT / lesson.name, as_version=4)
        ours, exercises, _ = course.student_version(course.read_notebook(lesson))
        # nbgrader adds its own metadata (checksums, locks); the text must agree.
        assert _sources(theirs) == _sources(ours), lesson.name
        assert exercises == sum(
            1 for c in theirs.cells if c.metadata.get("nbgrader", {}).get("solution")
        ), lesson.name
        # What follows each reveal stays folded in the lab: JupyterLab's flag survives.
        folds = course.after_reveal_folds(theirs.cells)
        assert folds and folds == course.after_reveal_folds(ours.cells), lesson.name
        assert all(theirs.cells[f].metadata.get("jp-MarkdownHeadingCollapsed") is True
                   for f, _ in folds), lesson.name


def _checks() -> dict[str, int]:
    return {
        c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
        for lesson in _lessons()
        for c in course.read_notebook(lesson).cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }


def _submit(root: Path, student: str, lessons: list[Path] | None = None) -> set[str]:
    """Write ``student``'s submission of ``lessons`` (all by default); return the
    grade_ids of the checks it must fail.

    alice: the solutions, with one honest answer that makes torch print a warning;
    bob: the untouched student versions; eve: see `_eve`; mallory: every by-hand answer a
    shortcut, lesson by lesson in turn either a numerical estimate (her own finite
    differences and bl.numerical_grad taking turns; every exercise meets both in
    tests/cheats/, run by test_exercises.py) or one of the shortcuts of
    tests/cheats/shortcuts.py."""
    if student == "eve":
        return _eve(root)
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    cheats, turn, failing = _cheats(), iter(range(10_000)), set()
    for k, lesson in enumerate(_lessons()):
        if lessons is not None and lesson not in lessons:
            continue
        if student == "alice":
            nbformat.write(_with_a_warning(lesson), folder / lesson.name)
        elif student == "bob":
            shutil.copy(root / "release" / ASSIGNMENT / lesson.name, folder / lesson.name)
        elif k % 2:
            nb, fails = _shortcut_answers(lesson, turn)
            failing |= fails
            nbformat.write(nb, folder / lesson.name)
        else:
            nb, fails = _swapped(lesson, cheats, turn)
            failing |= fails
            nbformat.write(nb, folder / lesson.name)
    return failing


AUTOGRADED: dict[str, dict[tuple[str, str], float]] = {}  # nbgrader's own scores, per cell
LISTED: set[str] = set()  # mallory's checks whose shortcut the audit must list


def _scores(root: Path, student: str) -> dict[tuple[str, str], float]:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        return {(g.cell.name, nb.name): g.score
                for nb in gb.find_submission(ASSIGNMENT, student).notebooks
                for g in nb.grades}


def _run(root: Path, args: list[str], log: Path) -> str:
    """Run a command of the course in `root`, its output kept in `log`; the output."""
    with log.open("w") as out:
        done = subprocess.run(args, cwd=root, env=_env(root), stdout=out,
                              stderr=subprocess.STDOUT, timeout=2000)
    text = log.read_text()
    assert done.returncode == 0, f"{' '.join(args[1:])} failed:\n{text}"
    return text


@pytest.fixture(scope="module")
def graded(released: Path) -> tuple[Path, dict[str, set[str]], str]:
    """The class, graded once and read by every test: alice (the lessons of
    `_alice_by_nbgrader`), bob (those of `_run_by_nbgrader`) and eve autograded by nbgrader
    in one run (with no secret in the kernels' environment, as the README says); then
    mallory's submission and alice's and bob's other lessons added, which nbgrader never
    runs, and the whole class graded by one `backproplab grade --nbgrader`, with the
    secret: it enters what nbgrader did not run in the gradebook itself. The course
    folder, the checks each student's submission must fail, and nbgrader's log."""
    root = released
    first = {"alice": _alice_by_nbgrader(), "bob": _run_by_nbgrader()}
    failing = {student: _submit(root, student, first.get(student))
               for student in AUTOGRADED_BY_NBGRADER}
    log = _run(root, [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--create",
                      "--force"], root / "autograde.log")
    for student in AUTOGRADED_BY_NBGRADER:
        AUTOGRADED[student] = _scores(root, student)
    failing.update({student: _submit(root, student) for student in STUDENTS
                    if student not in AUTOGRADED_BY_NBGRADER})
    for student, lessons in first.items():
        later = [p for p in _lessons() if p not in lessons]
        if later:
            failing[student] |= _submit(root, student, later)
    (root / "secret").write_text(SECRET)
    _run(root, [sys.executable, "-m", "backproplab", "grade", str(root / "submitted"),
                "--against", str(root / "source" / ASSIGNMENT), "-j", "2",
                "--csv", str(root / "backproplab-grades.csv"),
                "--secret-file", str(root / "secret"),
                "--nbgrader", str(root / "gradebook.db"), "--course-id", COURSE_ID],
         root / "grade.log")
    return root, failing, log


@pytest.mark.parametrize("student", STUDENTS)
def test_nbgrader_autograde(graded: tuple, student: str) -> None:
    root, failing, log = graded
    failing = failing[student]
    # A check cell whose value were a number would be read as partial credit.
    assert "partial credit" not in log

    checks = _checks()
    if student == "eve":
        lesson04 = next(p for p in _lessons() if p.name.startswith("04-"))
        checks = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
                  for c in course.read_notebook(lesson04).cells
                  if c.metadata.get("nbgrader", {}).get("grade")}
        # The kernel's check was fooled by the table (autograde scored it); the grade was not.
        assert AUTOGRADED["eve"][("l04-grads-check", lesson04.stem)] == 1
    points = sum(checks.values())
    lost = sum(checks[g] for g in failing & set(checks))
    expected = {"alice": points, "bob": 0, "mallory": points - lost,
                "eve": points - lost}[student]
    if student == "mallory" and _lessons() != [FIXTURE]:
        # Numerical estimates lose every by-hand point, and a prediction is worth nothing.
        assert len(failing) >= len(_lessons())
        assert all(points == 0 for g, points in checks.items() if "predict" in g)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        score = gb.find_submission(ASSIGNMENT, student).score
    per_cell = _scores(root, student)
    # backproplab grade's CSV says the same as the gradebook it wrote.
    rows = [r for r in csv.DictReader((root / "backproplab-grades.csv").open())
            if r["student"] == student]
    assert sum(float(r["points"]) for r in rows) == score
    if student in ("mallory", "eve"):
        wrong_cells = [k for k, score in per_cell.items() if k[0] in failing and score]
        assert not wrong_cells, f"shortcuts earned points in {wrong_cells}"
    assert score == expected

    autograded = root / "autograded" / student / ASSIGNMENT
    if student == "bob":
        _assert_blank_fails_everywhere(autograded)
        # The grade read every lesson of his, those nbgrader did not run included.
        assert {Path(r["notebook"]).name for r in rows} == {p.name for p in _lessons()}
        assert all(r["verdict"] == "missing" for r in rows if "predict" not in r["exercise"])
    if student == "alice":
        # nbgrader's own autograde gave every check of the lessons it ran its points.
        ran = {p.stem for p in _alice_by_nbgrader()}
        given = {k: v for k, v in AUTOGRADED["alice"].items() if k[1] in ran and k[0] in checks}
        assert {k[1] for k in given} == ran
        short = {k: v for k, v in given.items() if v != checks[k[0]]}
        assert not short, f"nbgrader's autograde took points from the solutions: {short}"
        assert sorted(p.name for p in autograded.glob("*.ipynb")) == sorted(
            p.name for p in _alice_by_nbgrader())
        # The grade read every lesson of hers, those nbgrader did not run included.
        assert {Path(r["notebook"]).name for r in rows} == {p.name for p in _lessons()}
        # The audit finds nothing in honest work.
        honest = root / "submitted" / "alice"
        assert main(["audit", str(honest), "--against", str(root / "source" / ASSIGNMENT)]) == 0
        # The README's last two steps: feedback per student, and the grades as CSV.
        _nbgrader(root, "generate_feedback", ASSIGNMENT, "--student", "alice", "--force")
        assert (root / "feedback" / "alice" / ASSIGNMENT).is_dir()
        _nbgrader(root, "export")
        assert "alice" in (root / "grades.csv").read_text()
    if student == "mallory" and failing:
        # The audit lists mallory's work (bl.numerical_grad among it) ...
        assert main(["audit", str(root / "submitted" / "mallory")]) == 1
        # ... and every by-hand cell written from tests/cheats/shortcuts.py, with its line.
        listed = {f.grade_id for f in audit(root / "submitted" / "mallory",
                                            against=root / "source" / ASSIGNMENT)
                  if "vocabulary" in f.what and f.line}
        assert LISTED and {g.removesuffix("-check") for g in LISTED} <= listed


def _assert_blank_fails_everywhere(graded: Path) -> None:
    """bob's notebooks as nbgrader executed them: every check cell, predictions (worth 0
    points, so not in the score) included, ends in an error, and nothing errs before the
    first exercise."""
    assert sorted(p.name for p in graded.glob("*.ipynb")) == [
        p.name for p in _run_by_nbgrader()]
    for lesson in _run_by_nbgrader():
        cells = nbformat.read(graded / lesson.name, as_version=4).cells
        meta = [c.metadata.get("nbgrader", {}) for c in cells]
        passing = [m["grade_id"] for c, m in zip(cells, meta, strict=True)
                   if m.get("grade") and not _errors(c)]
        assert not passing, f"{lesson.name}: checks pass on the blank version: {passing}"
        first = next(i for i, m in enumerate(meta) if m.get("solution"))
        early = [i for i, c in enumerate(cells[:first]) if _errors(c)
                 and "raises-exception" not in c.metadata.get("tags", [])]
        assert not early, f"{lesson.name}: cells {early} fail before the first exercise"


def _errors(cell) -> list:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
