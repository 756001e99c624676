"""How fast ``backproplab grade`` grades a class: submissions a minute, by -j.

Command (from the repository root, in the project venv, nothing else running):

    python benchmarks/grade.py [--students 4] [--jobs 1 2]

A class of honest students (each a copy of every lesson with its solutions,
so every exercise runs to the end in its sandbox: the slowest case) is graded
with each ``-j``; one submission is one student's whole assignment (every
lesson). Prints a table of wall time, exercises a second and submissions a
minute, and what a class of 300 would take at that rate.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"


def make_class(folder: Path, students: int) -> None:
    """``students`` submissions of every lesson, nbgrader's layout."""
    for k in range(students):
        target = folder / f"student{k:03d}" / "ps1"
        target.mkdir(parents=True)
        for lesson in sorted(LESSONS.glob("[0-9][0-9]-*.ipynb")):
            shutil.copy(lesson, target / lesson.name)


def measure(folder: Path, jobs: int) -> tuple[float, int]:
    """(seconds, exercises graded) for grading ``folder`` with ``jobs`` at once."""
    from backproplab.course import grade

    start = time.perf_counter()
    verdicts = grade.grade(folder, LESSONS, secret="benchmark", jobs=jobs)
    seconds = time.perf_counter() - start
    lost = [v for v in verdicts if v.points != v.max_points]
    if lost:
        sys.exit(f"grade.py: an honest submission lost points: {lost[0]}")
    return seconds, len(verdicts)


def render(students: int, rows: list[tuple[int, float, int]]) -> str:
    lines = ["| -j | students | exercises | wall time | exercises/s | submissions/min | "
             "a class of 300 |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for jobs, seconds, exercises in rows:
        per_minute = students / seconds * 60
        lines.append(f"| {jobs} | {students} | {exercises} | {seconds:.0f} s | "
                     f"{exercises / seconds:.1f} | {per_minute:.2f} | "
                     f"{300 / per_minute:.0f} min |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=4)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bl-grade-bench-") as tmp:
        folder = Path(tmp) / "submitted"
        make_class(folder, args.students)
        measure(folder, max(args.jobs))  # warm-up: the fork server, the lesson modules
        rows = []
        for jobs in args.jobs:
            seconds, exercises = measure(folder, jobs)
            rows.append((jobs, seconds, exercises))
    print(render(args.students, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
