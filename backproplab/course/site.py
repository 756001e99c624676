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

import copy
import importlib
import importlib.util
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from .assignment import (
    HIDDEN,
    HIDDEN_KEPT,
    SOLUTION,
    CourseError,
    after_reveal_folds,
    read_notebook,
    regions,
)
from .assignment import _unmark_regions as unmark_regions

__all__ = ["LessonRow", "Readme", "SiteError", "build_site", "public_modules", "read_readme",
           "site_notebook"]

# The packages the build needs: import name -> distribution name.
NEEDED = {
    "sphinx": "sphinx",
    "myst_nb": "myst-nb",
    "sphinx_book_theme": "sphinx-book-theme",
}
MATHJAX_DIST = "sphinx-mathjax-offline"
INSTALL_HINT = 'install the site extra: pip install "backproplab[site]"'

# A file in every folder this command writes, so that it knows later that
# the folder holds a site it built and may be replaced.
MARKER = ".backproplab-site"

HOMEPAGE = "https://github.com/backproplab/backproplab"

LESSON_GLOB = "[0-9][0-9]-*.ipynb"


class SiteError(CourseError):
    """A path or a file the site cannot be built from; the message names it."""


# --------------------------------------------------------------------------
# The landing page, from the README


@dataclass(frozen=True)
class LessonRow:
    """One row of the README's lesson table."""

    number: str  # as the table writes it: "5", "5b"
    title: str
    notebook: str  # the file name, e.g. "02-chain-rule.ipynb"
    summary: str


@dataclass(frozen=True)
class Readme:
    """What the landing page takes from the README."""

    title: str
    intro: str  # the text between the title and the lesson section
    lessons_section: str  # the whole "## Lessons" section, table included
    lessons: tuple[LessonRow, ...]


_ROW = re.compile(
    r"^\|\s*(?P<number>[^|]*?)\s*\|\s*\[(?P<title>[^\]]+)\]\(notebooks/(?P<file>[^)\s]+\.ipynb)\)"
    r"\s*\|\s*(?P<summary>.*?)\s*\|\s*$"
)


def read_readme(text: str, name: str = "README") -> Readme:
    """Split the README into the parts the landing page shows.

    The lesson section is the one whose heading starts with "Lessons"; its
    table rows link to ``notebooks/NN-topic.ipynb``. ``name`` is the file
    named in errors.
    """
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise SiteError(f"{name}: the first line must be the title ('# name')")
    title = lines[0][2:].strip()
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    start = next((i for i in headings if lines[i][3:].strip().startswith("Lessons")), None)
    if start is None:
        raise SiteError(f"{name}: no '## Lessons' section with the lesson table")
    end = next((i for i in headings if i > start), len(lines))
    section = lines[start:end]
    rows = []
    for line in section:
        found = _ROW.match(line)
        if found:
            rows.append(LessonRow(found["number"], found["title"], found["file"],
                                  found["summary"]))
    if not rows:
        raise SiteError(f"{name}: the Lessons section has no table row linking a notebook")
    return Readme(
        title=title,
        intro="\n".join(lines[1:start]).strip(),
        lessons_section="\n".join(section).strip(),
        lessons=tuple(rows),
    )


def _rewrite_links(markdown: str, lessons: dict[str, str],
                   anchors: dict[str, str] | None = None, up: str = "") -> str:
    """Point README links at the site: lessons to their pages, a README section the site
    shows (``anchors``: anchor -> page path) to its page, the rest to the repository.
    ``up`` leads from the page being written to the site's root ("../" from a folder)."""
    anchors = anchors or {}

    def fix(found: re.Match[str]) -> str:
        text, target = found["text"], found["target"]
        if target.startswith("notebooks/") and target[len("notebooks/"):] in lessons:
            return f"[{text}]({up}lessons/{target[len('notebooks/'):]})"
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            return found[0]
        if target.startswith("#") and target[1:] in anchors:
            return f"[{text}]({up}{anchors[target[1:]]})"
        if target.startswith("#"):
            return f"[{text}]({HOMEPAGE}{target})"
        return f"[{text}]({HOMEPAGE}/blob/main/{target})"

    return re.sub(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)", fix, markdown)


def _slug(heading: str) -> str:
    """The anchor GitHub (and MyST) give a heading: lower case, punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _readme_sections(text: str) -> dict[str, tuple[str, list[str]]]:
    """The README's "## " sections: slug -> (the section's text, the slugs of its headings).

    >>> sections = _readme_sections("# t\\n\\n## Use it\\n\\ntext\\n\\n### In a lab\\n")
    >>> sections["use-it"][1]
    ['use-it', 'in-a-lab']
    """
    found: dict[str, tuple[list[str], list[str]]] = {}
    lines: list[str] = []
    slugs: list[str] = []
    fenced = False  # a "## " line inside a code block is code, not a heading
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"(#{2,4}) (.*)", line)
        if heading and heading[1] == "##":
            lines, slugs = [], []
            found[_slug(heading[2])] = (lines, slugs)
        if heading and found:
            slugs.append(_slug(heading[2]))
        lines.append(line)
    return {slug: ("\n".join(part), heads) for slug, (part, heads) in found.items()}


def _section_pages(readme_text: str, start: str) -> dict[str, str]:
    """The README sections the landing page links to (and those they link to), as pages:
    slug -> page path without suffix, e.g. "guide/teaching-with-backproplab"."""
    sections = _readme_sections(readme_text)
    owner = {anchor: slug for slug, (_, slugs) in sections.items() for anchor in slugs}
    wanted: list[str] = []
    todo = [start]
    while todo:
        for target in re.findall(r"\]\(#([\w-]+)\)", todo.pop()):
            slug = owner.get(target)
            if slug and slug not in wanted and slug != "lessons":
                wanted.append(slug)
                todo.append(sections[slug][0])
    return {slug: f"guide/{slug}" for slug in wanted}


def _section_page(section: str, anchors: dict[str, str], lessons: dict[str, str]) -> str:
    """A README section as a page of its own: its headings one level up, its links fixed."""
    lines, fenced = [], False
    for line in section.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append(line[1:] if not fenced and re.match(r"#{2,4} ", line) else line)
    return _rewrite_links("\n".join(lines), lessons, anchors, up="../") + "\n"


def _landing_page(readme: Readme, lessons: Sequence[Path], anchors: dict[str, str] | None = None,
                  guide: Sequence[str] = ()) -> str:
    """The landing page's MyST source; ``anchors`` maps a README anchor to the site page
    that shows its section, ``guide`` lists those pages."""
    names = {path.name: path.stem for path in lessons}
    listed = {row.notebook for row in readme.lessons}
    section = readme.lessons_section
    # A lesson the README does not list yet still gets a row, so nothing is hidden.
    extra = [
        f"| {path.name[:2].lstrip('0')} | [{_notebook_title(path)}](notebooks/{path.name}) | |"
        for path in lessons if path.name not in listed
    ]
    if extra:
        table_end = max(i for i, line in enumerate(section.splitlines()) if line.startswith("|"))
        parts = section.splitlines()
        section = "\n".join(parts[: table_end + 1] + extra + parts[table_end + 1 :])
    first = lessons[0]
    return "\n\n".join([
        f"# {readme.title}",
        _rewrite_links(readme.intro, names, anchors),
        f'<p class="bl-start"><a class="bl-start-button" href="lessons/{first.stem}.html">'
        f"Start with lesson {first.name[:2].lstrip('0')} &rarr;</a>"
        '<a class="bl-start-link" href="reference/index.html">Package reference</a></p>',
        _rewrite_links(section, names, anchors),
        "## Reading this site\n\n"
        "Each lesson is shown as it ran, every output and figure included, from the "
        "notebooks the tests check. Exercises show a worked solution behind a "
        "**Show a solution** block: try the exercise first. Interactive widgets "
        "appear as still pictures; they respond to their controls in JupyterLab. "
        "To run a lesson, download it from the top of its page and make your own copy "
        "with blank exercises:\n\n" + _learn_commands(first.name),
        _toctree("Lessons", [f"lessons/{path.stem}" for path in lessons]),
        _toctree("Reference", ["reference/index"]),
        *([_toctree("From the README", guide)] if guide else []),
    ]) + "\n"


def _write_guide(src: Path, readme_text: str, readme: Readme, lessons: Sequence[Path]) -> None:
    """The landing page, and a page for each README section it links to (so that such a
    link stays inside the site)."""
    names = {path.name: path.stem for path in lessons}
    pages = _section_pages(readme_text, readme.intro + "\n" + readme.lessons_section)
    sections = _readme_sections(readme_text)
    anchors = {anchor: f"{page}.md" + ("" if anchor == slug else f"#{anchor}")
               for slug, page in pages.items() for anchor in sections[slug][1]}
    for slug, page in pages.items():
        (src / page).parent.mkdir(parents=True, exist_ok=True)
        (src / f"{page}.md").write_text(_section_page(sections[slug][0], anchors, names),
                                        encoding="utf-8")
    (src / "index.md").write_text(_landing_page(readme, lessons, anchors, list(pages.values())),
                                  encoding="utf-8")


def _toctree(caption: str, entries: Sequence[str]) -> str:
    return "```{toctree}\n:hidden:\n:caption: " + caption + "\n\n" + "\n".join(entries) + "\n```"


def _notebook_title(path: Path) -> str:
    """The first heading of a notebook, without its "NN · " prefix."""
    for cell in read_notebook(path).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return re.sub(r"^\d+\S*\s*·\s*", "", line[2:].strip())
    return path.stem


# --------------------------------------------------------------------------
# The lessons


def site_notebook(nb: NotebookNode, filename: str, download: str) -> NotebookNode:
    """The lesson as the site shows it (a new notebook; ``nb`` is not changed).

    Solution cells lose their marker lines and are collapsed behind "Show a
    solution"; a prediction's check and reveal outputs are folded behind "Show
    the answer", and the cells the lesson folds after a reveal behind "After the
    reveal"; hidden-test marker lines become the comment a learner's copy has; a
    box after the first cell links ``download`` (a path from the page to the
    original notebook) and gives the learner-copy command; widget cells get a
    note saying they are live in JupyterLab.
    """
    out = copy.deepcopy(nb)
    # The lessons are Python; a notebook that does not say so is highlighted as Python.
    out.metadata.setdefault("language_info", {"name": "python"})
    cells = []
    for index, cell in enumerate(out.cells):
        cells.append(cell)
        if index == 0:
            cells.append(_new_markdown(_download_box(filename, download), "site-download"))
        if cell.cell_type == "markdown":
            # An HTML anchor JupyterLab jumps to becomes a target MyST knows.
            cell.source = _ANCHOR.sub(r"(\1)=", cell.source)
        if cell.cell_type != "code":
            continue
        hidden = regions(cell.source, HIDDEN)
        if hidden:
            # As in a learner's copy: the marker lines give way to a plain comment.
            cell.source = unmark_regions(cell.source, hidden, HIDDEN_KEPT)
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            _collapse_solution(cell)
        if _ANSWERS.search(cell.source):
            _fold_answer(cell)
        note = _widget_note(cell)
        if note:
            cells.append(_new_markdown(note, f"{cell.get('id', index)}-still"))
    out.cells = _fold_after_reveals(cells)
    return out


def _fold_after_reveals(cells: list[NotebookNode]) -> list[NotebookNode]:
    """What a lesson folds under "After the reveal" (it discusses the answer), inside
    one collapsed block on the page: the fold's heading becomes the block's opening
    tag, and the block closes before the next heading."""
    for fold, end in reversed(after_reveal_folds(cells)):
        name = cells[fold].get("id", f"fold-{fold}")
        cells.insert(end, _new_markdown("</details>", f"{name}-end"))
        cells[fold] = _new_markdown(
            '<details class="bl-after-reveal">\n<summary>After the reveal</summary>', name)
    return cells


_ANCHOR = re.compile(r'^<a id="([\w-]+)"></a>[ \t]*$', re.MULTILINE)


def _new_markdown(source: str, cell_id: str) -> NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    cell.id = cell_id[:64]
    return cell


def _collapse_solution(cell: NotebookNode) -> None:
    cell.source = "\n".join(
        line for line in cell.source.split("\n")
        if SOLUTION[0] not in line and SOLUTION[1] not in line
    )
    tags = cell.metadata.setdefault("tags", [])
    # hide-input folds the code; a solution that prints folds its output too.
    tags += ["hide-cell" if cell.get("outputs") else "hide-input", "solution"]
    cell.metadata["mystnb"] = {
        "code_prompt_show": "Show a solution",
        "code_prompt_hide": "Hide the solution",
    }


# A prediction's check and its reveal print the answer: on a page they stay folded
# until the reader asks, as the learner's copy keeps them unrun until the guess is in.
_ANSWERS = re.compile(r"\bbl\.(?:check_prediction|reveal)\(")


def _fold_answer(cell: NotebookNode) -> None:
    cell.metadata.setdefault("tags", []).append("hide-output")
    cell.metadata["mystnb"] = {
        "code_prompt_show": "Show the answer",
        "code_prompt_hide": "Hide the answer",
    }


def _learn_commands(filename: str) -> str:
    """How to make a learner copy: the package comes from a clone of the course, installed
    through its lock (it is not published on PyPI)."""
    return (
        "```bash\n"
        "# in a clone of the course's repository (README, Quickstart):\n"
        "pip install -c .ci/constraints.txt -e .\n"
        f"backproplab learn {filename} my-lessons/\n"
        "jupyter lab my-lessons/\n"
        "```"
    )


def _download_box(filename: str, download: str) -> str:
    return (
        ":::{admonition} Run this lesson yourself\n"
        ":class: tip bl-download\n\n"
        "This page shows the lesson as it ran, with its outputs and worked solutions. "
        f"To do the exercises yourself, download {{download}}`{filename} <{download}>` "
        "and make your own copy, with blank exercises and each solution one click away:\n\n"
        f"{_learn_commands(filename)}\n"
        ":::"
    )


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _widget_note(cell: NotebookNode) -> str | None:
    outputs = cell.get("outputs", [])
    data = [output.get("data", {}) for output in outputs]
    is_widget = any(_WIDGET_VIEW in d for d in data) or re.search(r"\bwidgets\.\w+\(", cell.source)
    if not is_widget or not outputs:
        return None
    still = any("image/png" in d or "image/svg+xml" in d for d in data)
    what = "The picture above is a still of an interactive widget" if still else (
        "Here the lesson shows an interactive widget, which a static page cannot run")
    return (
        ":::{note}\n:class: bl-widget-note\n"
        f"{what}. Run the lesson in JupyterLab to move its controls.\n:::"
    )


# --------------------------------------------------------------------------
# The package reference


def _reference_pages(modules: Sequence[str]) -> dict[str, str]:
    """reST pages: an index with a table of the modules, and one page per module."""
    pages = {}
    lines = [
        "Package reference", "=================", "",
        "The helper package the lessons import as ``bl`` (``import backproplab as bl``), "
        "module by module in the order the lessons meet them. Every public name is also "
        "available from the package itself: ``bl.check_by_hand`` is "
        ":func:`backproplab.course.grading.check_by_hand`. The examples in these docstrings "
        "are run by the test suite.", "",
        ".. list-table::", "   :widths: 1 4", "",
    ]
    for name in modules:
        lines += [f"   * - :doc:`{name}`", f"     - {_first_line(f'backproplab.{name}')}"]
        title = f"backproplab.{name}"
        pages[name] = "\n".join([
            title, "=" * len(title), "",
            f".. automodule:: backproplab.{name}", "   :members:", "",
        ])
    lines += ["", ".. toctree::", "   :hidden:", "", *(f"   {name}" for name in modules)]
    pages["index"] = "\n".join(lines) + "\n"
    return pages


def _first_line(module: str) -> str:
    """The first sentence of a module's docstring, without a leading "name:"."""
    doc = importlib.import_module(module).__doc__ or ""
    paragraph = " ".join(doc.strip().split("\n\n", 1)[0].split())
    sentence = re.split(r"(?<=\.)\s", paragraph, maxsplit=1)[0].rstrip(".")
    sentence = re.sub(r"^[\w.]+:\s*", "", sentence) or module
    return sentence[0].upper() + sentence[1:]


def public_modules() -> list[str]:
    """The modules the package lists in its docstring, in the order the lessons meet them
    (the lab's, then the course's, as ``course.grading``)."""
    import backproplab

    listed = re.findall(r"^- ``([\w.]+)``", backproplab.__doc__ or "", re.MULTILINE)
    found = [name for name in listed
             if importlib.util.find_spec(f"backproplab.{name}") is not None]
    # Should the docstring stop listing them, every public module still gets a page.
    return found or sorted(
        name for name in backproplab.__all__
        if importlib.util.find_spec(f"backproplab.{name}") is not None
    )


# --------------------------------------------------------------------------
# Sphinx


def _mathjax_folder() -> Path:
    from importlib import metadata

    try:
        dist = metadata.distribution(MATHJAX_DIST)
    except metadata.PackageNotFoundError:
        raise SiteError(f"{MATHJAX_DIST} is not installed; {INSTALL_HINT}") from None
    folder = Path(str(dist.locate_file(f"{MATHJAX_DIST}/static/mathjax")))
    if not (folder / "tex-chtml.js").is_file():
        raise SiteError(f"{MATHJAX_DIST} has no static/mathjax/tex-chtml.js; {INSTALL_HINT}")
    return folder


def _check_tools() -> None:
    missing = [dist for module, dist in NEEDED.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise SiteError(f"{', '.join(missing)} not installed; {INSTALL_HINT}")


# The parts of MathJax 3 that the chtml renderer loads: the combined
# component, TeX extensions it loads on demand, fonts, the menu and its
# accessibility tools. The other combined components are left out.
_MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml.js", "output/chtml", "ui", "a11y",
                  "adaptors", "sre")


def _copy_mathjax(dest: Path) -> None:
    source = _mathjax_folder()
    for part in _MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, dest / part)
        elif (source / part).is_file():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, dest / part)


CSS = """\
/* backproplab: a few touches on top of the Sphinx Book Theme. */
/* The theme's top bar only repeats the sidebar's search box. */
.bd-header.bd-navbar { display: none; }
.bl-start { display: flex; gap: 1.2rem; align-items: center; flex-wrap: wrap; margin: 1.5rem 0; }
.bl-start-button {
  background: var(--pst-color-primary); color: #fff !important; border-radius: .4rem;
  padding: .55rem 1.1rem; font-weight: 600; text-decoration: none !important;
}
.bl-start-button:hover { filter: brightness(1.1); }
/* A page without a contents column (the landing page) uses its width. */
.bd-content:not(:has(#pst-secondary-sidebar)) .bd-article-container { max-width: 60rem; }
/* The landing page: the README's first sentence as a lead. */
section#backproplab > p:first-of-type { font-size: 1.3rem; line-height: 1.5; }
/* The lesson table: the number narrow, the title never squeezed. */
article table { width: 100%; }
article table td:first-child { text-align: right; width: 4.5rem; }
article table td:nth-child(2) { min-width: 11rem; font-weight: 600; }
/* Printed output wraps, as in JupyterLab. */
div.cell_output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
/* A collapsed solution, or what follows a reveal: a clear bar to click. */
.tag_solution details.hide > summary, details.bl-after-reveal > summary {
  font-weight: 600; color: var(--pst-color-primary); background: var(--pst-color-surface);
  border: 1px solid var(--pst-color-border); border-radius: .3rem; padding: .35rem .8rem;
}
"""


CONFIG: dict[str, object] = {
    "project": "backproplab",
    "author": "the backproplab contributors",
    "html_title": "backproplab",
    "extensions": ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax"],
    "exclude_patterns": ["_notebooks", "_static"],
    # Render the outputs the notebooks store; never run them.
    "nb_execution_mode": "off",
    # Widget views need a widget manager from the internet: show their stored
    # still picture instead, and load no widget scripts.
    "nb_ipywidgets_js": {},
    "myst_enable_extensions": ["dollarmath", "amsmath", "colon_fence"],
    "myst_heading_anchors": 3,
    # MathJax from this site, never from a CDN.
    "mathjax_path": "mathjax/tex-chtml.js",
    "html_theme": "sphinx_book_theme",
    "html_theme_options": {
        "repository_url": HOMEPAGE,
        "use_repository_button": True,
        "use_download_button": False,
        "home_page_in_toc": True,
        "show_toc_level": 2,
        # The landing page is one table: it needs the width more than a contents list.
        "secondary_sidebar_items": {"**": ["page-toc"], "index": []},
        "extra_footer": "<p>Code under the MIT licence; lesson text under CC BY 4.0.</p>",
    },
    # Light unless the reader's browser asks for dark.
    "html_context": {"default_mode": "auto"},
    "html_static_path": ["_static"],
    "html_css_files": ["backproplab.css"],
    "html_copy_source": False,
    "html_show_sourcelink": False,
    "html_show_sphinx": False,
    "html_last_updated_fmt": None,
    # `name` in a docstring links to that name where it is documented.
    "default_role": "py:obj",
    "autodoc_member_order": "bysource",
    # Signatures show names and defaults; the docstrings say what each one is.
    "autodoc_typehints": "none",
    "add_module_names": False,
}


def _plain_bars(
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """Keep ``|grad|`` (an absolute value in a docstring) from being read as a reST substitution."""
    for i, line in enumerate(lines):
        if not line.lstrip().startswith((">>>", "...")):
            lines[i] = re.sub(r"(?<![\\`])\|(\w[\w ]*)\|", r"\\|\1\\|", line)


def _run_sphinx(src: Path, out: Path, work: Path) -> list[str]:
    """Build ``src`` into ``out`` with Sphinx; returns the warnings it printed."""
    from sphinx.application import Sphinx
    from sphinx.util import console
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    warned = StringIO()
    status = StringIO()
    console.nocolor()  # plain text in the warnings it returns
    # Python's deprecation warnings from inside the tools are theirs, not the site's.
    with warnings.catch_warnings(), patch_docutils(None), docutils_namespace():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        app = Sphinx(
            srcdir=src, confdir=None, outdir=out, doctreedir=work / "doctrees",
            buildername="html", confoverrides=copy.deepcopy(CONFIG),
            status=status, warning=warned, freshenv=True,
        )
        app.connect("autodoc-process-docstring", _plain_bars)
        app.build()
        if app.statuscode:
            raise SiteError(f"Sphinx failed: {warned.getvalue().strip() or status.getvalue()}")
    return [line for line in warned.getvalue().splitlines() if line.strip()]


# --------------------------------------------------------------------------
# The command


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
        _write_guide(src, readme.read_text(encoding="utf-8"), page, notebooks)
        (src / "reference").mkdir()
        for name, text in _reference_pages(public_modules()).items():
            (src / "reference" / f"{name}.rst").write_text(text, encoding="utf-8")
        (src / "_static").mkdir()
        (src / "_static" / "backproplab.css").write_text(CSS, encoding="utf-8")
        _copy_mathjax(src / "_static" / "mathjax")

        warned = _run_sphinx(src, out, work)
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
