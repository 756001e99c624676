"""How long each lesson takes under nbval, against a floor measured in the same run.

The floor is a notebook that only imports torch and backproplab: what any
lesson pays for pytest, a fresh kernel and the imports. Each notebook runs in
its own pytest process, exactly as the test suite runs it, ``--repeat`` times;
the best time counts, because the machine is shared and noise only adds.

    python benchmarks/notebooks.py [--repeat 2] [notebooks/02-*.ipynb ...]

Targets: the whole suite takes at most 2 x (number of notebooks x floor), and
no single notebook takes over 20 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SINGLE_LIMIT_S = 20.0
SUITE_FACTOR = 2.0
# The thread count the test suite gives nbval's kernels (tests/rounds.py,
# LessonKernelManager): torch's default, idle threads sleeping instead of spinning.
ENV = {**{k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"},
       "OMP_WAIT_POLICY": "PASSIVE"}


def nbval_seconds(path: Path, repeat: int) -> float:
    """Best wall time of ``pytest --nbval`` on one notebook, failing loudly."""
    # The project's config is named explicitly: for the floor notebook, which
    # lives in a temporary folder, pytest would not find it by itself.
    # One process: the suite's workers would only add their start-up to each lesson.
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-c",
           str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), str(path)]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"{path.name} failed under nbval:\n{done.stdout[-3000:]}")
        best = min(best, elapsed)
    return best


def floor_notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    cell = nbformat.v4.new_code_cell("import torch\nimport backproplab as bl", execution_count=1)
    nb.cells = [cell]
    path = folder / "floor.ipynb"
    nbformat.write(nb, path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    if not notebooks:
        sys.exit("no notebooks found")

    with tempfile.TemporaryDirectory() as tmp:
        floor = nbval_seconds(floor_notebook(Path(tmp)), args.repeat)
    times = {nb.name: nbval_seconds(nb, args.repeat) for nb in notebooks}

    width = max(len(n) for n in times) + 2
    print(f"{'notebook':<{width}}{'seconds':>9}{'x floor':>9}  target")
    print(f"{'floor (imports only)':<{width}}{floor:>9.2f}{1:>9.2f}")
    ok = True
    for name, seconds in times.items():
        passed = seconds <= SINGLE_LIMIT_S
        ok &= passed
        verdict = "PASS" if passed else "FAIL"
        print(f"{name:<{width}}{seconds:>9.2f}{seconds / floor:>9.2f}"
              f"  <= {SINGLE_LIMIT_S:.0f} s {verdict}")
    total = sum(times.values())
    budget = SUITE_FACTOR * len(times) * floor
    suite_ok = total <= budget
    ok &= suite_ok
    print(f"{'whole suite':<{width}}{total:>9.2f}{total / floor:>9.2f}"
          f"  <= {SUITE_FACTOR:.0f} x {len(times)} x floor = {budget:.1f} s "
          f"{'PASS' if suite_ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
