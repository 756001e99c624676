"""The whole tree, lessons included, is ruff-clean (config in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_ruff_is_clean_on_code_and_notebooks():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_covers_the_notebooks():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--show-files", "."],
        cwd=ROOT, capture_output=True, text=True,
    )
    linted = {Path(line.strip()).name for line in done.stdout.splitlines()}
    lessons = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert lessons and lessons <= linted
