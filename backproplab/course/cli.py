"""Command line: ``backproplab learn``, ``release``, ``validate``, ``grade``, ``audit``, ``site``.

Also runs as ``python -m backproplab``. Problems with the input are reported
on stderr in one line each, with exit code 2 and no traceback.

    $ backproplab release notebooks/ student/
    released 01-graph.ipynb: 2 graded exercises, 0 hidden test blocks removed
    ...

Each command imports what it needs when it runs: ``backproplab --help``
waits for neither nbformat nor torch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backproplab",
        description="Course tools for the backproplab notebooks.",
    )
    parser.add_argument("--version", action="version", version=f"backproplab {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _handing_out(commands)
    _checking(commands)
    _site(commands)
    return parser


def _handing_out(commands: Any) -> None:
    """``release`` and ``learn``: versions of the lessons written to a folder."""
    rel = commands.add_parser(
        "release",
        help="write student versions of the lesson notebooks",
        description=(
            "Write student versions of notebooks: solution regions become "
            "'# YOUR CODE HERE' / 'raise NotImplementedError()', hidden tests are "
            "removed, outputs are cleared. Only notebooks are written."
        ),
    )
    rel.add_argument(
        "src", metavar="SRC", help="a folder of notebooks (searched recursively) or one .ipynb file"
    )
    rel.add_argument(
        "--force",
        action="store_true",
        help="replace existing files in DEST even if they are not student versions",
    )
    rel.add_argument(
        "dest",
        metavar="DEST",
        help=(
            "output folder (created if missing; must not be inside SRC), "
            "or a .ipynb path when SRC is one notebook"
        ),
    )

    lrn = commands.add_parser(
        "learn",
        help="copy the lessons for working through them yourself",
        description=(
            "Write learner copies of the lessons: exercises blank, each worked solution "
            "behind a 'Show a solution' block. Copies already in DEST are kept as they are, "
            "so running it again only adds new lessons."
        ),
    )
    lrn.add_argument("src", metavar="SRC", help="the lessons: a folder or one .ipynb file")
    lrn.add_argument("dest", metavar="DEST", help="your folder (created if missing)")


def _checking(commands: Any) -> None:
    """``validate`` and ``audit``: reading notebooks, writing nothing."""
    val = commands.add_parser(
        "validate",
        help="check the exercise format of notebooks",
        description="Check solution/check cells, markers and grade_ids; exit 1 on any problem.",
    )
    val.add_argument("src", metavar="SRC", help="a folder of notebooks or one .ipynb file")

    grd = commands.add_parser(
        "grade",
        help="grade submitted notebooks outside the students' kernels",
        description=(
            "Grade every submitted notebook: each graded exercise's answer is taken from its "
            "source (the definitions above the check cell), read against the exercise's "
            "vocabulary and run in the student's bubblewrap sandbox (no network, none of "
            "your files, nothing left running after the student's turn), on inputs made "
            "from the instructor's secret; every verdict is made here from what comes back. "
            "Writes one CSV row per exercise."
        ),
    )
    grd.add_argument("submitted", metavar="SUBMITTED",
                     help="folder of submissions: <student>/<assignment>/<lesson>.ipynb "
                          "(nbgrader's submitted/) or <student>/<lesson>.ipynb")
    grd.add_argument("--against", metavar="LESSONS", required=True,
                     help="the instructor's lessons (with solutions and hidden tests): "
                          "which exercises are graded, their points and seeds")
    grd.add_argument("--csv", metavar="FILE", required=True, help="where to write the grades")
    grd.add_argument("--secret-file", metavar="FILE",
                     help="a file holding the instructor's secret (else BACKPROPLAB_SECRET or "
                          "BACKPROPLAB_SECRET_FILE); hidden tests' inputs derive from it")
    grd.add_argument("-j", "--jobs", metavar="N", type=int, default=1,
                     help="students graded at once, each in a sandbox of their own (default 1)")
    grd.add_argument("--timeout", metavar="S", type=float, default=300.0,
                     help="seconds an answer may run, all its checks together (default 300)")
    grd.add_argument("--memory", metavar="MB", type=int, default=4096,
                     help="memory an answer's process may add, in MB (default 4096)")
    grd.add_argument("--nbgrader", metavar="GRADEBOOK",
                     help="also write each score into this nbgrader gradebook (gradebook.db "
                          "or a database URL) as the score of the exercise's check cell")
    grd.add_argument("--course-id", metavar="ID", default="default_course",
                     help="the nbgrader course id (default: nbgrader's default_course)")
    grd.add_argument("--exercise", metavar="ID", action="append", dest="exercises",
                     help="grade only this exercise (e.g. l02-cubic); repeat for more")
    grd.add_argument("--no-isolation", action="store_true",
                     help="run the answers without bubblewrap, as you: they can then read your "
                          "files, use the network and leave processes behind. Every CSV row "
                          "says isolation=none")

    aud = commands.add_parser(
        "audit",
        help="list what tampers with the grading in submitted notebooks",
        description=(
            "Read every submitted notebook and list, per notebook and cell, the lines that "
            "replace or patch the grading functions, reach into the kernel, or take a "
            "gradient from torch's machinery. Exit 1 when anything is found."
        ),
    )
    aud.add_argument("submitted", metavar="SUBMITTED",
                     help="folder of submissions, e.g. nbgrader's submitted/")
    aud.add_argument("--against", metavar="LESSONS",
                     help="the lessons as handed out (or their instructor versions): cells "
                          "left as handed out are skipped, edited check cells are listed")


def _site(commands: Any) -> None:
    web = commands.add_parser(
        "site",
        help="build the course as a static website",
        description=(
            "Build a folder of static HTML pages: every lesson with its stored outputs, "
            "the README's lesson table as the landing page, and the package reference. "
            "Nothing is run again and nothing is fetched from the network. "
            'Needs the site extra: pip install "backproplab[site]".'
        ),
    )
    web.add_argument(
        "dest", metavar="DEST",
        help="output folder (created if missing; a site built here before is replaced)",
    )
    web.add_argument(
        "--lessons", metavar="DIR", default="notebooks",
        help="the folder of NN-topic.ipynb lessons (default: notebooks)",
    )
    web.add_argument(
        "--readme", metavar="FILE",
        help="the README whose lesson table is the landing page (default: the one beside DIR)",
    )
    web.add_argument(
        "--force", action="store_true",
        help="replace the content of a non-empty DEST that is not a site built before",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 format problems, 2 bad input)."""
    # A terminal that cannot show a character (PYTHONIOENCODING=ascii) must not
    # turn a finished release into a traceback.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `backproplab`: say what it can do
        parser.print_help()
        return 0
    # Imported only now: `backproplab --help` must not wait for nbformat (or torch).
    from .assignment import CourseError, validate_course
    from .handout import find_notebooks, learn, release

    try:
        if args.command == "release":
            release(args.src, args.dest, log=print, force=args.force)
            return 0
        if args.command == "learn":
            learn(args.src, args.dest, log=print)
            return 0
        if args.command == "site":
            from .site import build_site  # its own module: the other commands never need it

            build_site(args.dest, args.lessons, args.readme, force=args.force, log=print)
            return 0
        if args.command == "audit":
            return _audit(args.submitted, args.against)
        if args.command == "grade":
            return _grade(args)
        checked = find_notebooks(args.src)
        problems = validate_course(checked)
    except CourseError as err:
        print(f"backproplab {args.command}: error: {err}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    if not problems:
        print(f"{len(checked)} notebook{'' if len(checked) == 1 else 's'} checked: no problems")
    return 1 if problems else 0


def _grade(args: Any) -> int:
    import os

    from . import grade, grading  # their own modules: the other commands never need them
    from .assignment import CourseError

    try:
        text = (grading.read_secret_file(args.secret_file, "--secret-file") if args.secret_file
                else grading.instructor_secret())
    except RuntimeError as err:
        raise CourseError(str(err)) from None
    # The answers' processes start from this one: the secret stays here.
    for name in (grading.SECRET_VARIABLE, grading.SECRET_FILE_VARIABLE):
        os.environ.pop(name, None)
    if text is None:
        print("backproplab grade: no secret set (--secret-file or BACKPROPLAB_SECRET): hidden "
              "tests run on the seeds written in the lessons, which anyone can read",
              file=sys.stderr)

    def shown(v: Any) -> None:
        mark = "✓" if v.points else "✗"
        print(f"{mark} {grade.plain_text(v.student) or '-'} {v.notebook} {v.exercise}: "
              f"{v.points:g}/{v.max_points:g} {v.verdict}"
              + (f" ({v.reason[:100]})" if v.reason else ""), flush=True)

    if args.no_isolation:
        print("backproplab grade: --no-isolation: the answers run as you, without a sandbox: "
              "they can read and write your files (the secret, the lessons, the other "
              "submissions, this CSV), reach the network and leave processes behind. Every "
              "row of the CSV is marked isolation=none.", file=sys.stderr)
    verdicts = grade.grade(args.submitted, args.against, secret=text, jobs=args.jobs,
                           timeout=args.timeout, memory=args.memory << 20,
                           isolation=not args.no_isolation, progress=shown,
                           only=set(args.exercises) if args.exercises else None)
    grade.write_csv(verdicts, args.csv)
    students = sorted({v.student for v in verdicts})
    for student in students:
        mine = [v for v in verdicts if v.student == student]
        print(f"{grade.plain_text(student) or '-'}: {sum(v.points for v in mine):g} of "
              f"{sum(v.max_points for v in mine):g} points")
    if args.nbgrader:
        written = grade.write_gradebook(verdicts, args.nbgrader, args.course_id)
        print(f"wrote {written} scores into {args.nbgrader}")
    print(f"graded {len(verdicts)} exercises of {len(students)} students: {args.csv}")
    return 0


def _audit(submitted: str, against: str | None) -> int:
    from .audit import audit  # its own module: the other commands never need it

    findings = audit(submitted, against)
    for finding in findings:
        print(finding)
    notebooks = len({f.notebook for f in findings})
    if findings:
        print(f"{len(findings)} finding{'' if len(findings) == 1 else 's'} in {notebooks} "
              f"notebook{'' if notebooks == 1 else 's'}")
        return 1
    print("no tampering found")
    return 0
