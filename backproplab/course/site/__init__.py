"""The course as a website: ``backproplab site DEST``.

Builds a folder of static HTML pages from a checkout: every lesson with the
outputs it has stored (nothing is run again), the README's lesson table as
the landing page, and the package reference made from the docstrings. The
pages need no network: math is typeset by a copy of MathJax served from the
site itself, and no page loads a script or a stylesheet from elsewhere.

The pages are made by Sphinx with MyST-NB, the Sphinx reader for executed
notebooks, and the Sphinx Book Theme; MathJax comes from the
``sphinx-mathjax-offline`` package. All four are the ``site`` extra:
``pip install "backproplab[site]"``.

What the site changes on its way from ``notebooks/`` (on copies; the lessons
are never written to):

- each worked solution sits in a collapsed "Show a solution" block, as in a
  learner's copy, with the solution marker lines left out;
- a check's hidden-test marker lines become the plain comment a learner's
  copy shows;
- a README section the landing page links to gets a page of its own, so the
  link stays inside the site;
- each lesson gets a box near its top with a link to download the notebook
  and the command that makes a copy with blank exercises;
- a widget's stored still picture gets a note that it is live in JupyterLab.

This module is the command: it checks the paths, writes the pages' sources
into a temporary folder and puts the built site in place. The parts it
calls each make one kind of page or do one step: ``readme`` (the landing
page and the README sections it links to), ``lessons`` (a lesson's page),
``reference`` (the package reference) and ``builder`` (Sphinx's settings,
the site's style sheet and MathJax, and the run).

The landing page is read from the README, so the table there and the site
always agree:

>>> readme = '''# demo
...
... A short course.
...
... ## Lessons
...
... | # | Lesson | What you learn |
... |---|--------|----------------|
... | 1 | [The graph](notebooks/01-graph.ipynb) | Leaves and `grad_fn` |
...
... ## Installing
... '''
>>> page = read_readme(readme)
>>> page.title, [(row.number, row.notebook, row.title) for row in page.lessons]
('demo', [('1', '01-graph.ipynb', 'The graph')])
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

from ..assignment import CourseError, read_notebook
from .builder import CSS, copy_mathjax, run_sphinx
from .errors import INSTALL_HINT, SiteError
from .lessons import site_notebook
from .readme import LessonRow, Readme, read_readme, write_guide
from .reference import public_modules, reference_pages

__all__ = ["LessonRow", "Readme", "SiteError", "build_site", "public_modules", "read_readme",
           "site_notebook"]

# The packages the build needs: import name -> distribution name.
NEEDED = {
    "sphinx": "sphinx",
    "myst_nb": "myst-nb",
    "sphinx_book_theme": "sphinx-book-theme",
}

# A file in every folder this command writes, so that it knows later that
# the folder holds a site it built and may be replaced.
MARKER = ".backproplab-site"

LESSON_GLOB = "[0-9][0-9]-*.ipynb"


def _check_tools() -> None:
    missing = [dist for module, dist in NEEDED.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise SiteError(f"{', '.join(missing)} not installed; {INSTALL_HINT}")


def _check_paths(lessons: Path, readme: Path, dest: Path, force: bool) -> None:
    if not lessons.is_dir():
        raise SiteError(f"--lessons: {lessons} is not a folder of lessons")
    if not readme.is_file():
        raise SiteError(f"--readme: {readme} is not a file")
    if dest.exists() and not dest.is_dir():
        raise SiteError(f"DEST: {dest} is a file, not a folder")
    real_dest, real_lessons = dest.resolve(), lessons.resolve()
    if real_dest == real_lessons or real_lessons in real_dest.parents:
        raise SiteError(f"DEST: {dest} is inside the lessons folder {lessons}")
    # Replacing DEST removes what is in it: never a folder holding the sources.
    if real_dest in real_lessons.parents or real_dest in readme.resolve().parents:
        raise SiteError(f"DEST: {dest} holds the lessons or the README; choose an empty folder")
    if (dest / ".git").exists():
        raise SiteError(f"DEST: {dest} is a git checkout; choose an empty folder")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).is_file() and not force:
        raise SiteError(
            f"DEST: {dest} is not empty and not a site built before; "
            "choose an empty folder, or use --force to replace what is in it"
        )


def build_site(
    dest: str | os.PathLike[str],
    lessons: str | os.PathLike[str] = "notebooks",
    readme: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    log: Callable[[str], object] | None = None,
) -> list[str]:
    """Build the website into ``dest``; returns Sphinx's warnings (none expected).

    ``lessons`` is the folder of ``NN-topic.ipynb`` notebooks; ``readme``
    (default: README.md beside that folder) gives the landing page. ``dest``
    is created if missing; a folder built by this function before is
    replaced, any other non-empty folder only with ``force``. The build goes
    to a temporary folder beside ``dest`` first, so a failed build leaves
    ``dest`` as it was.
    """
    for value, arg in ((dest, "DEST"), (lessons, "--lessons"), (readme, "--readme")):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{arg}: expected a path (str or Path), got {type(value).__name__}")
    dest, lessons = Path(dest), Path(lessons)
    readme = Path(readme) if readme is not None else lessons.resolve().parent / "README.md"
    _check_paths(lessons, readme, dest, force)
    notebooks = sorted(lessons.glob(LESSON_GLOB))
    if not notebooks:
        raise SiteError(f"--lessons: {lessons} has no NN-topic.ipynb lessons")
    page = read_readme(readme.read_text(encoding="utf-8"), str(readme))
    names = {path.name for path in notebooks}
    for row in page.lessons:
        if row.notebook not in names:
            raise SiteError(f"{readme}: lesson {row.number} links notebooks/{row.notebook}, "
                            f"which is not in {lessons}")
    # Lessons in the README's order; one it does not list goes by its number.
    order = {row.notebook: i for i, row in enumerate(page.lessons)}
    notebooks.sort(key=lambda path: (path.name[:2], order.get(path.name, len(order)), path.name))
    _check_tools()
    started = time.perf_counter()

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".site-", dir=dest.parent) as tmp:
        work = Path(tmp)
        src, out = work / "src", work / "html"
        (src / "lessons").mkdir(parents=True)
        (src / "_notebooks").mkdir()
        for path in notebooks:
            # The page is made from the very copy it offers for download.
            original = src / "_notebooks" / path.name
            shutil.copyfile(path, original)
            try:
                lesson = read_notebook(original)
            except CourseError as err:
                raise SiteError(str(err).replace(str(original), str(path))) from None
            book = site_notebook(lesson, path.name, f"../_notebooks/{path.name}")
            nbformat.write(book, src / "lessons" / path.name)
        write_guide(src, readme.read_text(encoding="utf-8"), page, notebooks)
        (src / "reference").mkdir()
        for name, text in reference_pages(public_modules()).items():
            (src / "reference" / f"{name}.rst").write_text(text, encoding="utf-8")
        (src / "_static").mkdir()
        (src / "_static" / "backproplab.css").write_text(CSS, encoding="utf-8")
        copy_mathjax(src / "_static" / "mathjax")

        warned = run_sphinx(src, out, work)
        (out / ".buildinfo").unlink(missing_ok=True)
        # The themes copy Jinja macro files into _static; they are not pages.
        for macros in (out / "_static").glob("*macros.html"):
            macros.unlink()
        (out / MARKER).write_text("A website built by `backproplab site`; "
                                  "the next build replaces this folder.\n")
        _replace(dest, out, work)
    if log is not None:
        for line in warned:
            log(f"warning: {line}")
        log(f"built {len(notebooks)} lessons and the package reference into {dest} "
            f"in {time.perf_counter() - started:.0f} s; open {dest / 'index.html'}")
    return warned


def _replace(dest: Path, new: Path, work: Path) -> None:
    """Put the folder ``new`` where ``dest`` is, removing the old content only at the end."""
    if not dest.exists():
        new.rename(dest)
        return
    old = work / "old"
    dest.rename(old)
    try:
        new.rename(dest)
    except OSError:
        old.rename(dest)
        raise
