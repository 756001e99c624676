"""How fast ``backproplab grade`` grades a class: submissions a minute, by -j.

Command (from the repository root, in the project venv, nothing else running):

    python benchmarks/grade.py [--students 3] [--jobs 1 2]

A class of honest students (each a copy of every lesson with its solutions,
so every exercise runs to the end in its sandbox: the slowest case) is graded
with each ``-j``; one submission is one student's whole assignment (every
lesson). The grader computes each reference once per class, so the first
students cost more than the rest: each ``-j`` grades ``--students`` and then
twice as many, and the difference gives what one more student costs. Prints a
table of wall times, submissions a minute at that marginal rate, and what a
class of 300 would take (the smaller class's time, plus the marginal rate for
the rest).
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


def render(students: int, rows: list[tuple[int, float, float, int]]) -> str:
    lines = [f"| -j | {students} students | {2 * students} students | exercises | "
             "one more student | submissions/min | a class of 300 |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for jobs, small, large, exercises in rows:
        each = (large - small) / students
        per_minute = 60 / each
        whole = small + (300 - students) * each
        lines.append(f"| {jobs} | {small:.0f} s | {large:.0f} s | {exercises} | {each:.1f} s | "
                     f"{per_minute:.2f} | {whole / 60:.0f} min |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bl-grade-bench-") as tmp:
        small, large = Path(tmp) / "small", Path(tmp) / "large"
        make_class(small, args.students)
        make_class(large, 2 * args.students)
        measure(small, max(args.jobs))  # warm-up: files in the page cache, modules compiled
        rows = []
        for jobs in args.jobs:
            seconds_small, exercises = measure(small, jobs)
            seconds_large, _ = measure(large, jobs)
            rows.append((jobs, seconds_small, seconds_large, exercises // args.students))
    print(render(args.students, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
