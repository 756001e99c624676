"""Command line: ``backproplab learn``, ``release``, ``validate``, ``audit`` and ``site``.

Also runs as ``python -m backproplab``. Problems with the input are reported
on stderr in one line each, with exit code 2 and no traceback.

    $ backproplab release notebooks/ student/
    released 01-graph.ipynb: 2 exercises, 0 hidden test blocks removed
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
