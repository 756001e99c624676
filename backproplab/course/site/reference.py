"""The package reference: a page per public module, made from its docstrings."""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Sequence

__all__ = ["public_modules", "reference_pages"]


def reference_pages(modules: Sequence[str]) -> dict[str, str]:
    """reST pages: an index with a table of the modules, and one page per module."""
    pages = {}
    lines = [
        "Package reference", "=================", "",
        "The helper package the lessons import as ``bl`` (``import backproplab as bl``), "
        "module by module in the order the lessons meet them. Every public name is also "
        "available from the package itself: ``bl.check_by_hand`` is "
        ":func:`backproplab.course.byhand.check_by_hand`. The examples in these docstrings "
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
