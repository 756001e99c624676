"""Command line: ``backproplab release SRC DEST`` and ``backproplab validate SRC``.

Also runs as ``python -m backproplab``. Problems with the input are reported
on stderr in one line each, with exit code 2 and no traceback.

    $ backproplab release notebooks/ student/
    released 01-graph.ipynb: 2 exercises, 0 hidden test blocks removed
    ...
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .course import CourseError, find_notebooks, release, validate_course


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backproplab",
        description="Course tools for the backproplab notebooks.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
        "dest",
        metavar="DEST",
        help=(
            "output folder (created if missing; must not be inside SRC), "
            "or a .ipynb path when SRC is one notebook"
        ),
    )

    val = commands.add_parser(
        "validate",
        help="check the exercise format of notebooks",
        description="Check solution/check cells, markers and grade_ids; exit 1 on any problem.",
    )
    val.add_argument("src", metavar="SRC", help="a folder of notebooks or one .ipynb file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 format problems, 2 bad input)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "release":
            release(args.src, args.dest, log=print)
            return 0
        problems = validate_course(find_notebooks(args.src))
    except CourseError as err:
        print(f"backproplab {args.command}: error: {err}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
