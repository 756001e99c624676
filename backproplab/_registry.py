"""Finding a lesson's exercise or question by its id: ``l02-cubic`` lives in
``backproplab/lessons/lesson02.py``. Each lesson module is imported on first use."""

from __future__ import annotations

import importlib
import re
from typing import Any

from ._diagnose import _type_name

_ID = re.compile(r"^l(\d\d)-")


def _module(key: object, arg: str) -> Any:
    if not isinstance(key, str):
        raise TypeError(f"{arg}: expected an id such as 'l02-cubic', got {_type_name(key)}")
    found = _ID.match(key)
    if found is None:
        raise ValueError(f"{arg}: expected an id starting with l and a two-digit lesson "
                         f"number, such as 'l02-cubic', got {key!r}")
    try:
        return importlib.import_module(f"backproplab.lessons.lesson{found.group(1)}")
    except ModuleNotFoundError:
        raise ValueError(f"{arg}: lesson {found.group(1)} has no checks here ({key!r})") from None


def find_exercise(key: str) -> Any:
    """The exercise (a ByHand or Method) with grade id ``key``."""
    table = getattr(_module(key, "key"), "EXERCISES", {})
    if key not in table:
        raise ValueError(f"key: no exercise {key!r}; this lesson has "
                         f"{', '.join(sorted(table)) or 'none'}")
    return table[key]


def find_prediction(key: str) -> Any:
    """The "predict, then run" question (a Prediction) with id ``key``."""
    table = getattr(_module(key, "prediction"), "PREDICTIONS", {})
    if key not in table:
        raise ValueError(f"prediction: no question {key!r}; this lesson has "
                         f"{', '.join(sorted(table)) or 'none'}")
    return table[key]
