"""Errors in a notebook that show your code, not torch's insides.

When a lesson runs a cell that fails on purpose, IPython prints every frame
on the way down, many of them deep inside torch. `short_tracebacks` keeps the
frames of your cells and the error line, and folds each run of frames inside
installed packages into one line such as ``[3 frames inside torch]``. The
lessons' stored outputs are folded by the same function (`fold_frames`), so
what you see when you run a lesson is what the saved lesson shows.

>>> fold_frames([
...     "Cell In[3], line 1\\n----> 1 y.backward()",
...     "File /usr/lib/python3/site-packages/torch/_tensor.py:625, in Tensor.backward()",
...     "File /usr/lib/python3/site-packages/torch/autograd/__init__.py:354, in backward()",
...     "RuntimeError: element 0 of tensors does not require grad",
... ])[1]
'\\x1b[36m[2 frames inside torch]\\x1b[39m'
"""

from __future__ import annotations

import re
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["fold_frames", "frame_file", "short_tracebacks"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# IPython's header for a frame in a file: "File /path/to/module.py:623, in f(...)".
_FILE_FRAME = re.compile(r"File (\S+?):\d+")
_PACKAGE_DIR = Path(__file__).resolve().parent
_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


def frame_file(entry: str) -> str | None:
    """The file path of a traceback entry that is a frame in a file, else None."""
    match = _FILE_FRAME.match(_ANSI.sub("", entry))
    return match.group(1) if match else None


def _package_of(path: str) -> str | None:
    """The installed package (or "python" for the standard library) a file belongs to."""
    p = Path(path)
    for marker in ("site-packages", "dist-packages"):
        if marker in p.parts:
            return p.parts[p.parts.index(marker) + 1].removesuffix(".py")
    resolved = p.resolve()
    if resolved.is_relative_to(_PACKAGE_DIR):
        return _PACKAGE_DIR.name
    if resolved.is_relative_to(_STDLIB):
        return "python"
    return None  # the learner's own file: keep it


def fold_frames(entries: Sequence[str]) -> list[str]:
    """Fold each run of frames inside packages into one line naming them."""
    kept: list[str] = []
    run: list[str] = []
    for entry in [*entries, None]:
        package = None if entry is None else _package_of_entry(entry)
        if package is not None:
            run.append(package)
            continue
        if run:
            names = ", ".join(dict.fromkeys(run))
            frames = "frame" if len(run) == 1 else "frames"
            kept.append(f"\x1b[36m[{len(run)} {frames} inside {names}]\x1b[39m")
            run = []
        if entry is not None:
            kept.append(entry)
    return kept


def _package_of_entry(entry: str) -> str | None:
    path = frame_file(entry)
    return None if path is None else _package_of(path)


def _without_hidden(tb: TracebackType | None) -> TracebackType | None:
    """The traceback minus frames that set ``__tracebackhide__`` (a checker's
    own ``assert_ok``, say). IPython skips such frames too, except the frame
    that raised, which is exactly the one a failed check does not need."""
    frames = []
    while tb is not None:
        if not tb.tb_frame.f_locals.get("__tracebackhide__"):
            frames.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for t in reversed(frames):
        rebuilt = TracebackType(rebuilt, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return rebuilt


def _show_short(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset=None):
    tb = _without_hidden(tb) or tb
    stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    stb = fold_frames(stb)
    shell._showtraceback(etype, value, stb)
    return stb


def short_tracebacks() -> bool:
    """Fold the frames inside installed packages out of notebook tracebacks.

    Call it once in a notebook (the lessons do, in their first cell). It
    changes only how errors are shown, never which errors happen. Frames of
    your own cells are always kept. Returns True when it took effect, False
    outside IPython, where it does nothing.

    >>> short_tracebacks()   # a plain Python session: nothing to do
    False
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    shell.set_custom_exc((Exception,), _show_short)
    return True
