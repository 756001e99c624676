"""Notebook hygiene rules, one function each.

Every rule takes a parsed notebook and returns a list of problems (empty
when the notebook is clean), so a test can show each rule failing on a
notebook broken in exactly that way.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import nbformat
from notebook_runner import file_frame

Problems = list[str]

# "0x7f3a2c1b9d60" style ids: object reprs and some torch messages carry them,
# and they differ on every run, so nbval would fail on them.
ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
# Editing the import path hides a missing install; lessons import the package.
SYS_PATH = re.compile(
    r"sys\.path\s*(\.\s*(append|insert|extend|remove|pop|clear)\b|\[[^\]]*\]\s*=|\+?=)"
    r"|PYTHONPATH"
)


def _code_cells(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def check_valid(nb: nbformat.NotebookNode) -> Problems:
    """nbformat 4, schema-valid, with a python3 kernelspec."""
    problems = []
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        problems.append(f"invalid nbformat: {exc.message}")
    if nb.get("nbformat") != 4:
        problems.append(f"expected nbformat 4, got {nb.get('nbformat')!r}")
    spec = nb.get("metadata", {}).get("kernelspec", {})
    if spec.get("name") != "python3" or spec.get("language", "python") != "python":
        problems.append(f"expected a python3 kernelspec, got {dict(spec)!r}")
    return problems


def check_execution_order(nb: nbformat.NotebookNode) -> Problems:
    """Code cells with source were run top to bottom in one kernel: counts 1..n."""
    problems = []
    expected = 1
    for i, cell in _code_cells(nb):
        if not cell.source.strip():
            continue
        count = cell.get("execution_count")
        if count is None:
            problems.append(f"cell {i} was never executed")
        elif count != expected:
            problems.append(f"cell {i} has execution count {count}; expected {expected}")
            expected = count
        expected += 1
    return problems


def check_errors(nb: nbformat.NotebookNode) -> Problems:
    """No error output except in cells tagged raises-exception."""
    problems = []
    for i, cell in _code_cells(nb):
        if "raises-exception" in _tags(cell):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"cell {i} shows {out.get('ename')}: {out.get('evalue')}")
    return problems


def _output_texts(cell: nbformat.NotebookNode):
    for out in cell.get("outputs", []):
        if "text" in out:
            yield out["text"]
        for key, value in out.get("data", {}).items():
            if key.startswith("text/") and isinstance(value, str):
                yield value
        if out.get("output_type") == "error":
            yield out.get("evalue", "")
            yield from out.get("traceback", [])


def check_addresses(nb: nbformat.NotebookNode) -> Problems:
    """No output text carries a memory address."""
    problems = []
    for i, cell in _code_cells(nb):
        for text in _output_texts(cell):
            match = ADDRESS.search(text)
            if match:
                problems.append(f"cell {i} prints a memory address: {match.group(0)}")
    return problems


def check_sys_path(nb: nbformat.NotebookNode) -> Problems:
    """No cell edits sys.path or PYTHONPATH."""
    return [
        f"cell {i} manipulates the import path: {SYS_PATH.search(cell.source).group(0)}"
        for i, cell in _code_cells(nb)
        if SYS_PATH.search(cell.source)
    ]


def check_install_paths(nb: nbformat.NotebookNode) -> Problems:
    """No stored traceback shows a frame by its file path on the machine that
    ran it (tests/notebook_runner.py trims those frames when re-executing)."""
    problems = []
    for i, cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            for entry in out.get("traceback", []) if out.get("output_type") == "error" else []:
                path = file_frame(entry)
                if path is not None:
                    problems.append(
                        f"cell {i} stores a traceback frame in {path}: re-execute it with "
                        "python tests/notebook_runner.py"
                    )
    return problems


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Printed lines longer than this wrap (mid-word) in a default JupyterLab window.
MAX_WIDTH = 88
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def check_widget_views(nb: nbformat.NotebookNode) -> Problems:
    """No stored live widget view or widget state: opened before it is run, a
    lesson would show "Error displaying widget" (the runner keeps the picture)."""
    problems = []
    if "widgets" in nb.get("metadata", {}):
        problems.append("the notebook stores widget state: re-execute it with "
                        "python tests/notebook_runner.py")
    for i, cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):
                problems.append(f"cell {i} stores a live widget view: re-execute it with "
                                "python tests/notebook_runner.py")
    return problems


def check_width(nb: nbformat.NotebookNode) -> Problems:
    """What the lesson prints (stdout, text results, the checks' failure
    messages) stays within MAX_WIDTH. Torch's own errors and warnings are
    left as torch writes them."""
    problems = []
    for i, cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            texts = [out.get("text", "")] if out.get("name") != "stderr" else []
            if "image/png" not in out.get("data", {}):  # a figure's text/plain is never shown
                texts.append(out.get("data", {}).get("text/plain", ""))
            if out.get("output_type") == "error" and out.get("ename") == "AssertionError":
                texts.append(f"{out.get('ename')}: {out.get('evalue')}")
            for text in texts:
                for line in _ANSI.sub("", text).splitlines():
                    if len(line) > MAX_WIDTH:
                        problems.append(
                            f"cell {i} prints a line of {len(line)} characters (at most "
                            f"{MAX_WIDTH}): {line[:50]}..."
                        )
    return problems


RULES: dict[str, Callable[[nbformat.NotebookNode], Problems]] = {
    "widget-views": check_widget_views,
    "width": check_width,
    "valid": check_valid,
    "execution-order": check_execution_order,
    "errors": check_errors,
    "addresses": check_addresses,
    "sys-path": check_sys_path,
    "install-paths": check_install_paths,
}
