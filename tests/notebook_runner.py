"""Run a notebook in a fresh kernel of the current environment.

Shared by the tests that execute lessons in altered forms (wrong answers,
student versions), so they all start kernels the same way as nbval does.

Run as a script, it re-executes lessons for commit, outputs stored::

    python tests/notebook_runner.py notebooks/05-non-scalar-backward.ipynb

Errors are allowed only in cells tagged ``raises-exception``. Their stored
tracebacks keep the learner's own frames (``Cell In[3], line 1``) and the
error line; the frames inside installed packages are replaced by one line
naming the package, so a saved lesson shows no path of the machine that ran it.
Cells keep no run timestamps, so re-running a lesson whose outputs did not
change leaves its file unchanged.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# IPython's frame header for a file: "File /path/to/module.py:623, in f(...)".
_FILE_FRAME = re.compile(r"File (\S+?):\d+")


def run(nb: nbformat.NotebookNode, cwd: Path = NOTEBOOKS, *, allow_errors: bool = True,
        timeout: int = 180) -> nbformat.NotebookNode:
    """Execute ``nb`` in place and return it; errors stay in the cell outputs."""
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return nb


def error_of(cell: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    """The error output of a code cell, or None when it ran cleanly."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return out
    return None


def grade_id(cell: nbformat.NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def file_frame(entry: str) -> str | None:
    """The file path of a traceback entry that is a frame in a file, else None."""
    match = _FILE_FRAME.match(_ANSI.sub("", entry))
    return match.group(1) if match else None


def _package(path: str) -> str:
    parts = Path(path).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return parts[parts.index(marker) + 1].removesuffix(".py")
    if Path(path).is_relative_to(ROOT):
        return Path(path).relative_to(ROOT).parts[0]
    return Path(path).name


def trim_tracebacks(nb: nbformat.NotebookNode) -> int:
    """Replace each run of file frames in the stored tracebacks by one line
    naming their packages; return how many frames were dropped."""
    dropped = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            kept: list[str] = []
            run_of: list[str] = []
            for entry in [*out.traceback, None]:
                path = None if entry is None else file_frame(entry)
                if path is not None:
                    run_of.append(_package(path))
                    continue
                if run_of:
                    names = ", ".join(dict.fromkeys(run_of))
                    frames = "frame" if len(run_of) == 1 else "frames"
                    kept.append(f"\x1b[36m[{len(run_of)} {frames} inside {names}]\x1b[39m")
                    dropped += len(run_of)
                    run_of = []
                if entry is not None:
                    kept.append(entry)
            out.traceback = kept
    return dropped


def execute(path: Path, timeout: int = 120) -> nbformat.NotebookNode:
    """Run the lesson at ``path`` top to bottom in a fresh kernel, trim its
    tracebacks and write it back with its outputs."""
    # One torch thread, as under the tests (tests/conftest.py): outputs are the same, runs faster.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    nb = nbformat.read(path, as_version=4)
    run(nb, path.resolve().parent, allow_errors=False, timeout=timeout)
    trim_tracebacks(nb)
    for cell in nb.cells:  # run timestamps: they would change on every re-run
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    return nb


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python tests/notebook_runner.py NOTEBOOK.ipynb [...]", file=sys.stderr)
        return 2
    for arg in argv:
        execute(Path(arg))
        print(f"executed {arg}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
