"""The hidden tests' inputs come from the instructor, not from the repository.

A lesson's check cell runs its exercise's check twice: the visible check on
seed 0, and, between the hidden-test markers, a hidden check on another seed
written in the cell (``seed=6211``). Those numbers are public (the lessons
are), so an answer could be a table of the inputs they make. An instructor
therefore sets a secret before grading, in the environment of the kernels that
grade:

    export BACKPROPLAB_SECRET='any words only the instructor knows'
    nbgrader autograde ps1

(or ``BACKPROPLAB_SECRET_FILE=/path/to/a/file`` holding it). Every hidden
seed is then replaced by one derived from the secret, the exercise id and the
written seed, which no one without the secret can compute. Seed 0, the
visible check, never changes, so a self-learner's notebook prints what it
printed when it was stored; without a secret the written seeds are used as
they are (a self-learner's hidden tests still run on other inputs than the
visible ones, but those are not secret).

>>> import os
>>> os.environ.pop(SECRET_VARIABLE, None) and None
>>> grading_seed("l02-cubic", 6211), grading_seed("l02-cubic", 0)
(6211, 0)
>>> os.environ[SECRET_VARIABLE] = "example"
>>> grading_seed("l02-cubic", 6211) != 6211, grading_seed("l02-cubic", 0)
(True, 0)
>>> del os.environ[SECRET_VARIABLE]
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["SECRET_FILE_VARIABLE", "SECRET_VARIABLE", "grading_seed", "instructor_secret",
           "read_secret_file"]

SECRET_VARIABLE = "BACKPROPLAB_SECRET"
SECRET_FILE_VARIABLE = "BACKPROPLAB_SECRET_FILE"
_SEEDS = 2**31 - 10_000  # derived seeds stay far from overflow when a check adds to them


def instructor_secret() -> str | None:
    """The secret the instructor set, or None (a self-learner's kernel)."""
    text = os.environ.get(SECRET_VARIABLE)
    if text:
        return text
    path = os.environ.get(SECRET_FILE_VARIABLE)
    return read_secret_file(path, SECRET_FILE_VARIABLE) if path else None


def read_secret_file(path: str, arg: str) -> str:
    """The secret held in the file at ``path`` (``arg`` names where the path came from)."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise RuntimeError(f"{arg}: cannot read the secret from {path!r} "
                           f"({err.strerror})") from None
    if not text:
        raise RuntimeError(f"{arg}: the file {path!r} is empty")
    return text


def grading_seed(key: str, seed: int, secret: str | None = None) -> int:
    """The seed a check of exercise ``key`` really uses for the written ``seed``: seed 0
    (the visible check) as it is, a hidden seed derived from the instructor's secret when
    one is set (``secret``, else the environment's), else as written."""
    secret = secret if secret is not None else instructor_secret()
    if seed == 0 or secret is None:
        return seed
    digest = hashlib.sha256(f"{secret}\0{key}\0{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % _SEEDS + 1
