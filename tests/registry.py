"""The course's exercises as the tests find them: from the registry, whatever the lessons
are numbered, with the wrong answers kept for each and the lesson that grades it."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path
from typing import Any

import nbformat
import torch

from backproplab.course import exercises, grade

ROOT = Path(__file__).parents[1]


def exercises_of(kind: type) -> dict[str, Any]:
    """Every exercise of the registry that is a ``kind`` (`ByHand`, `Method`), by id."""
    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(exercises.__path__):
        if info.name.startswith("lesson"):
            module = importlib.import_module(f"{exercises.__name__}.{info.name}")
            found |= {k: v for k, v in module.EXERCISES.items() if isinstance(v, kind)}
    return dict(sorted(found.items()))


def tells(message: str, fragment: str) -> bool:
    """Whether a check's message says a kept answer's fragment: in any case, and across the
    line breaks the lab wraps its messages at."""
    return re.search(re.escape(fragment), " ".join(message.split()), re.IGNORECASE) is not None


def with_tensor_inputs(found: dict[str, Any]) -> list[str]:
    """The ids among ``found`` whose inputs hold a tensor: those a shortcut can
    differentiate (lesson 16's byte count, a formula of a network's sizes, has none)."""
    return [k for k, v in found.items()
            if any(torch.is_tensor(a) for a in v.make_inputs(torch.Generator().manual_seed(0)))]


def wrong_answers(key: str) -> list[tuple[str, str]]:
    """The (source, message fragment) pairs kept for exercise ``key``."""
    path = ROOT / "tests" / "wrong_answers" / f"lesson{key[1:3]}.py"
    spec = importlib.util.spec_from_file_location(f"wrong_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.WRONG.get(key, [])
    return [table] if isinstance(table, tuple) else list(table)


def lesson_of(key: str) -> tuple[nbformat.NotebookNode, grade.Graded]:
    """The notebook that grades exercise ``key``, and its graded cell."""
    for path in sorted((ROOT / "notebooks").glob(f"{key[1:3]}-*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        graded = [g for g in grade.graded_exercises(nb) if g.key == key]
        if graded:
            return nb, graded[0]
    raise LookupError(key)
