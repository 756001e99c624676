"""Handing the lessons out: ``backproplab release`` and ``backproplab learn``.

Both write versions of the lessons made by :mod:`backproplab.course.assignment` to a
folder, and both put never losing work first: every notebook is converted
before any is written, files go to temporary names and are renamed into
place only when all are written, and nothing that is not a version this
module wrote earlier, unedited since, is ever replaced (a lesson that still
holds its solutions not even with ``force``).

Only ``nbformat`` is needed here: handing out never imports torch.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from .assignment import (
    CHECKPOINTS,
    SOLUTION,
    STUDENT_MARK,
    CourseError,
    fingerprint,
    learner_version,
    read_notebook,
    regions,
    student_version,
)

__all__ = ["Released", "find_notebooks", "is_student_version", "learn", "release"]


@dataclass(frozen=True)
class Released:
    """What :func:`release` did to one notebook.

    ``exercises`` counts the answers blanked whose check is worth points (the rows
    the grade's CSV has); ``predictions``, those whose check is worth none (a
    "predict, then run" guess: feedback, never a grade).

    >>> Released(Path("a.ipynb"), Path("out/a.ipynb"), 2, 1, predictions=3).summary()
    'released a.ipynb: 2 graded exercises, 3 predictions (0 points), 1 hidden test block removed'
    """

    source: Path
    dest: Path
    exercises: int
    hidden_blocks: int
    predictions: int = 0

    def summary(self) -> str:
        """One progress line, as the command line prints it."""
        ex = _plural(self.exercises, "graded exercise")
        guesses = (f"{_plural(self.predictions, 'prediction')} (0 points), "
                   if self.predictions else "")
        hidden = _plural(self.hidden_blocks, "hidden test block")
        return f"released {self.source.name}: {ex}, {guesses}{hidden} removed"


def _worth_nothing(nb: nbformat.NotebookNode) -> int:
    """How many answer cells are checked by a cell worth 0 points (predictions)."""
    meta = [c.get("metadata", {}).get("nbgrader", {}) for c in nb.cells]
    count = 0
    for i, m in enumerate(meta):
        if m.get("solution") and not m.get("grade"):
            check = next((n for n in meta[i + 1:] if n.get("grade")), None)
            count += check is not None and not check.get("points")
    return count


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def find_notebooks(src: str | Path) -> list[Path]:
    """The notebooks under a folder (sorted, checkpoints skipped), or ``[src]`` for a file."""
    src = _as_path(src, "src")
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise CourseError(f"{src}: no such folder or notebook")
    found = (p for p in src.rglob("*.ipynb") if CHECKPOINTS not in p.relative_to(src).parts)
    return sorted(p for p in found if p.is_file())




def is_student_version(path: Path) -> bool:
    """Whether the notebook at ``path`` was written by :func:`release` (or ``learn``)."""
    return _mark(_read_or_none(path)) is not None


def _read_or_none(path: Path) -> NotebookNode | None:
    try:
        return nbformat.read(path, as_version=4)
    except Exception:  # unreadable or not a notebook: certainly not ours
        return None


def _mark(nb: NotebookNode | None) -> dict | None:
    """The mark release and learn leave in a notebook's metadata, if it has one."""
    mark = nb.get("metadata", {}).get(STUDENT_MARK) if nb is not None else None
    return mark if isinstance(mark, dict) and mark.get("student_version") is True else None


def _edited_since_written(nb: NotebookNode) -> bool:
    """Whether a student version written by release was changed since (a student's work)."""
    mark = _mark(nb)
    return mark is not None and mark.get("fingerprint") not in (None, fingerprint(nb))


def _holds_solutions(nb: NotebookNode | None) -> bool:
    """Whether a notebook is an instructor's: solution regions still in it."""
    return nb is not None and any(regions(c.get("source", ""), SOLUTION)
                                  for c in nb.get("cells", []) if c.get("cell_type") == "code")


def _start(src: object, dest: object, log: object) -> tuple[Path, Path, list[Path]]:
    """The checked arguments of release and learn, and the notebooks to copy."""
    if log is not None and not callable(log):
        raise TypeError(
            f"log: expected a function taking one str, or None, got {type(log).__name__}"
        )
    src, dest = _as_path(src, "src"), _as_path(dest, "dest")
    notebooks = find_notebooks(src)
    if not notebooks:
        raise CourseError(f"{src}: no notebooks (*.ipynb) in this folder")
    return src, dest, notebooks


def _targets(
    src: Path, dest: Path, notebooks: Sequence[Path], force: bool, keep_existing: bool = False
) -> list[Path]:
    """Where each copy goes; refuses anything that could lose work.

    ``keep_existing`` (learn) skips the checks on files already there, which
    are the learner's and will be left alone.
    """
    if src.is_file():
        # A single notebook goes into DEST (a folder) unless DEST names a notebook.
        targets = [dest if dest.suffix == ".ipynb" else dest / src.name]
    else:
        rs, rd = src.resolve(), dest.resolve()
        if rd == rs or rs in rd.parents:
            raise CourseError(
                f"{dest}: refusing to write student notebooks inside the source folder {src}"
            )
        targets = [dest / p.relative_to(src) for p in notebooks]
    sources = {p.resolve() for p in notebooks}
    for target in targets:
        for parent in reversed(target.parents):
            if parent.exists() and not parent.is_dir():
                raise CourseError(f"{target}: cannot write here: {parent} is a file, not a folder")
        if target.resolve() in sources:
            raise CourseError(f"{target}: refusing to overwrite a source notebook")
        if target.is_dir():
            raise CourseError(f"{target}: is a folder, not a notebook: refusing to replace it")
        if keep_existing:
            continue
        existing = _read_or_none(target) if target.exists() else None
        if _holds_solutions(existing):
            raise CourseError(f"{target}: is a lesson with its solutions: refusing to "
                              "overwrite it, even with --force")
        if target.exists() and not force and _mark(existing) is None:
            raise CourseError(
                f"{target}: exists and is not a student version written by backproplab: "
                "refusing to overwrite it (pass --force to replace it anyway)"
            )
        if existing is not None and not force and _edited_since_written(existing):
            raise CourseError(
                f"{target}: was edited after backproplab wrote it (someone's work?): "
                "refusing to overwrite it (pass --force to replace it anyway)"
            )
    return targets


def _write_all(files: Sequence[tuple[Path, str]]) -> None:
    """Write every file or none: each goes to a temporary file beside its target
    first, and only when all of them are written are they renamed into place."""
    made_dirs: list[Path] = []
    temps: list[tuple[Path, Path]] = []
    try:
        for target, text in files:
            for parent in reversed(target.parents):
                if not parent.exists():
                    parent.mkdir()
                    made_dirs.append(parent)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            temps.append((Path(tmp), target))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; a notebook is for others to read
        for tmp, target in temps:
            os.replace(tmp, target)
    except OSError as err:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        for folder in reversed(made_dirs):
            with contextlib.suppress(OSError):
                folder.rmdir()
        where = err.filename or (files[len(temps) - 1][0] if temps else files[0][0])
        raise CourseError(f"{where}: cannot write: {err.strerror or err}") from None


def release(
    src: str | Path,
    dest: str | Path,
    *,
    log: Callable[[str], object] | None = None,
    force: bool = False,
) -> list[Path]:
    """Write student versions of the notebooks in ``src`` (a folder or one notebook) to ``dest``.

    Returns the paths written. It is all or nothing: every notebook is read,
    checked and converted before anything is written, and the files are
    written to temporary names first, so a failure leaves ``dest`` as it was.
    It never replaces a source notebook or any notebook that still holds its
    solutions (not even with ``force=True``), a folder, a file that is not a
    student version it wrote earlier, or one that was edited since it wrote
    it (``force=True`` allows the last two). Files are written 0644.
    ``log`` receives one progress line per notebook once all are written.

    Usage (it writes files, so this is not run as a doctest)::

        release("notebooks", "student", log=print)
        # released 02-chain-rule.ipynb: 3 graded exercises, 0 hidden test blocks removed
        # -> [PosixPath('student/02-chain-rule.ipynb'), ...]

    Raises CourseError for a missing SRC, an empty folder, a file that is
    not a notebook, unbalanced markers, a DEST that could overwrite SRC or
    another file, or a DEST that cannot be written.
    """
    src, dest, notebooks = _start(src, dest, log)
    targets = _targets(src, dest, notebooks, force)

    done: list[tuple[str, Released]] = []
    for path, target in zip(notebooks, targets, strict=True):
        source = read_notebook(path)
        student, exercises, hidden = student_version(source, name=str(path))
        student.metadata[STUDENT_MARK] = {"student_version": True, "source": path.name,
                                          "fingerprint": fingerprint(student)}
        guesses = _worth_nothing(source)
        done.append((nbformat.writes(student),
                     Released(path, target, exercises - guesses, hidden, guesses)))

    _write_all([(info.dest, text) for text, info in done])
    if log is not None:
        for _, info in done:
            log(info.summary())
    return [info.dest for _, info in done]


def _as_path(value: object, arg: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{arg}: expected a path (str or Path), got {type(value).__name__}")
    return Path(value)


def learn(
    src: str | Path,
    dest: str | Path,
    *,
    log: Callable[[str], object] | None = None,
) -> list[Path]:
    """Write learner copies of the lessons in ``src`` to ``dest``, keeping existing ones.

    Each copy has blank exercises (as `release` makes them) and a collapsed
    worked solution after each. A copy that already exists in ``dest`` is the
    learner's work and is never touched; only lessons not there yet are
    added. Returns the paths written.
    """
    src, dest, notebooks = _start(src, dest, log)
    targets = _targets(src, dest, notebooks, force=False, keep_existing=True)
    todo, kept = [], []
    for path, target in zip(notebooks, targets, strict=True):
        if target.exists():
            kept.append(target)
            continue
        book, exercises = learner_version(read_notebook(path), name=str(path))
        todo.append((target, nbformat.writes(book), exercises))
    _write_all([(target, text) for target, text, _ in todo])
    if log is not None:
        for target, _, exercises in todo:
            log(f"added {target.name}: {_plural(exercises, 'exercise')}")
        for target in kept:
            log(f"kept your {target.name} as it is")
    return [target for target, _, _ in todo]
