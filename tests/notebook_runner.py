"""Run a notebook in a fresh kernel of the current environment.

Shared by the tests that execute lessons in altered forms (wrong answers,
student versions), so they all start kernels the same way as nbval does.

Run as a script, it re-executes lessons for commit, outputs stored::

    python tests/notebook_runner.py notebooks/08-non-scalar-backward.ipynb

Errors are allowed only in cells tagged ``raises-exception``. Their stored
tracebacks keep the learner's own frames (``Cell In[3], line 1``) and the
error line; the frames inside installed packages are replaced by one line
naming the package, so a saved lesson shows no path of the machine that ran it.
Cells keep no run timestamps, and printed text that arrived in several pieces
is stored as one, so re-running a lesson whose outputs did not change leaves
its file unchanged.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from backproplab.course.kernels import AsyncIPCKernelManager
from backproplab.tracebacks import fold_frames, frame_file

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

_FOLDED = re.compile(r"\[\d+ frames? inside ")


def run(nb: nbformat.NotebookNode, cwd: Path = NOTEBOOKS, *, allow_errors: bool = True,
        timeout: int = 180) -> nbformat.NotebookNode:
    """Execute ``nb`` in place and return it; errors stay in the cell outputs."""
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        kernel_manager_class=AsyncIPCKernelManager,  # no TCP port to race for (README)
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
        # Once the last cell has run, the kernel has nothing left to say: stopped at once
        # rather than asked to exit (a second, for a kernel that imported torch).
        shutdown_kernel="immediate",
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
    return frame_file(entry)


def trim_tracebacks(nb: nbformat.NotebookNode) -> int:
    """Fold the frames inside packages in the stored tracebacks, exactly as
    ``bl.short_tracebacks()`` does live; return how many frames were dropped."""
    dropped = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                before = out.traceback
                out.traceback = fold_frames(before)
                dropped += _frames(before) - _frames(out.traceback)
    return dropped


def _frames(entries: list[str]) -> int:
    """Entries that are not already a folded "[n frames inside ...]" line."""
    return sum(1 for e in entries if not _FOLDED.search(e))


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def keep_still_pictures(nb: nbformat.NotebookNode) -> None:
    """Store a widget as the picture it carries, not as a live view.

    A live view needs the kernel that made it; opened before it is run, a
    saved lesson would show "Error displaying widget: model not found". The
    widgets of backproplab carry a PNG and a line of text for exactly this.
    Widget state in the notebook metadata goes too.
    """
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data:
                if "image/png" not in data:
                    raise ValueError(
                        "a widget without a still picture cannot be stored: "
                        f"{data.get('text/plain', '')[:60]}"
                    )
                del data[WIDGET_VIEW]


def join_streams(nb: nbformat.NotebookNode) -> None:
    """Store consecutive printed pieces of one stream as one output.

    How the kernel splits a cell's printing into messages depends on timing;
    the text does not, and neither should the stored file.
    """
    for cell in nb.cells:
        joined: list[nbformat.NotebookNode] = []
        for out in cell.get("outputs", []):
            last = joined[-1] if joined else None
            if (out.output_type == "stream" and last is not None
                    and last.output_type == "stream" and last.name == out.name):
                last.text += out.text
            else:
                joined.append(out)
        if "outputs" in cell:
            cell.outputs = joined


def execute(path: Path, timeout: int = 120) -> nbformat.NotebookNode:
    """Run the lesson at ``path`` top to bottom in a fresh kernel, trim its
    tracebacks and write it back with its outputs."""
    # One torch thread, as under the tests (tests/conftest.py): outputs are the same, runs faster.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    nb = nbformat.read(path, as_version=4)
    run(nb, path.resolve().parent, allow_errors=False, timeout=timeout)
    trim_tracebacks(nb)
    keep_still_pictures(nb)
    join_streams(nb)
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
