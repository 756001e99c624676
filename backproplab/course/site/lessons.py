"""A lesson as the site shows it: `site_notebook`.

Solutions fold behind "Show a solution", a prediction's answer behind "Show the
answer", what a lesson discusses after a reveal behind "After the reveal"; a box near
the top offers the notebook for download with the command that makes a learner's copy;
a widget's stored still gets a note that it is live in JupyterLab.
"""

from __future__ import annotations

import copy
import re

import nbformat
from nbformat import NotebookNode

from ..assignment import HIDDEN, HIDDEN_KEPT, SOLUTION, after_reveal_folds, regions
from ..assignment import _unmark_regions as unmark_regions

__all__ = ["learn_commands", "site_notebook"]


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


def learn_commands(filename: str) -> str:
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
        f"{learn_commands(filename)}\n"
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
