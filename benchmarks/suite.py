"""How long the whole test command takes, and where the time goes.

Command (from the repository root, in the project venv, nothing else running):

    python benchmarks/suite.py            # runs `python -m pytest` (README command (b))
    python benchmarks/suite.py --from report.xml   # reads a JUnit report instead

It runs the README's test command as it is (every core, pytest-xdist) with a
JUnit report, then prints its wall time and the time its tests took, summed
by part. With two workers the parts add up to about twice the wall time: they
are worker-seconds, and the ratio between wall time and their sum shows how
well the two cores were kept busy.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (part, test that belongs to it): the first match names a test's part.
PARTS = (
    ("lessons under strict nbval, with the exercise rounds in its kernels (wrong answers, "
     "cheats, blanks)", (".ipynb", "test_exercises.test_lesson_matches",
                         "test_exercises.test_checks_reject",
                         "test_exercises.test_student_version")),
    ("browser tests (JupyterLab in Chromium)", ("test_browser", "test_prediction_screens")),
    ("the real nbgrader course", ("test_nbgrader",)),
    ("the site, built and opened", ("test_site",)),
    ("packaging (wheel and sdist installed)", ("test_packaging",)),
    ("processes (distributed launcher)", ("test_distributed",)),
    ("release, learn and their commands", ("test_release_safety", "test_learn", "test_readme")),
)


def part_of(classname: str, name: str) -> str:
    where = f"{classname}.{name}"
    return next((part for part, keys in PARTS if any(k in where for k in keys)),
                "everything else (unit tests, doctests, facts, bad input)")


def run_suite(report: Path) -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={report}"], cwd=ROOT)
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, help="a JUnit report to read")
    args = parser.parse_args(argv)
    wall = None
    report = args.source
    if report is None:
        report = Path(tempfile.mkdtemp()) / "report.xml"
        wall = run_suite(report)
    tree = ET.parse(report)
    seconds: dict[str, float] = defaultdict(float)
    tests = defaultdict(int)
    for case in tree.iter("testcase"):
        part = part_of(case.get("classname", ""), case.get("name", ""))
        seconds[part] += float(case.get("time", 0))
        tests[part] += 1
    total = sum(seconds.values())
    if wall is not None:
        print(f"wall time: {wall / 60:.1f} min ({sum(tests.values())} tests)")
    print(f"tests' own time, summed over workers: {total / 60:.1f} min\n")
    print("| part | tests | minutes | share |")
    print("|---|---:|---:|---:|")
    for part, secs in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"| {part} | {tests[part]} | {secs / 60:.1f} | {secs / total:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
