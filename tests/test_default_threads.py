"""The stored outputs are what a learner sees, whatever torch's thread count.

The suite runs the lessons with one torch thread (tests/conftest.py) because
it is faster on a small machine. A learner's lab runs with torch's default,
one thread per core. A printed number that depends on the thread count (a
reduction order, or a memory address reused by the allocator) would pass here
and differ there; lesson 15 once counted float16 copies by storage address
and printed a different total with two threads. This runs every lesson under
strict nbval once more, with the default thread count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(900)
def test_lessons_match_their_stored_outputs_with_default_threads():
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "notebooks"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=880,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    lessons = len(list((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")))
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= lessons, f"only {passed} cells ran for {lessons} lessons: {summary}"
