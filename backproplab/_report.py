"""The result objects every checker returns: :class:`Check` and :class:`Report`.

A :class:`Check` is one line of verdict; a :class:`Report` is a list of them
that prints one line each, renders as HTML in Jupyter, is truthy when every
check passed and has ``assert_ok()`` for graded cells. Both are re-exported by
:mod:`backproplab.check`, which is where learners meet them.
"""

from __future__ import annotations

import html
import sys
import textwrap
from dataclasses import dataclass

_SYMBOL = {True: "✓", False: "✗"}
# Longer lines wrap, mid-word, in a default JupyterLab window.
WIDTH = 88


def _wrap(text: str) -> str:
    """Each line of ``text`` wrapped at word boundaries, continuation lines indented."""
    return "\n".join(
        textwrap.fill(line, WIDTH, subsequent_indent=" " * (len(line) - len(line.lstrip()) + 2),
                      break_long_words=False, break_on_hyphens=False)
        for line in text.split("\n")
    )


@dataclass(frozen=True)
class Check:
    """One checked item: a name, a verdict and a sentence explaining it.

    ``verdict`` is one of ``"exact"``, ``"close"``, ``"mismatch"``,
    ``"shape"``, ``"missing"`` (no answer: None), ``"error"``, ``"pass"``,
    ``"fail"``, ``"warning"``.
    A ``"warning"`` is ``ok`` but printed with ``⚠`` so it is not missed.

    >>> str(Check("dx", True, "exact", "exact match"))
    '✓ dx: exact match'
    """

    name: str
    ok: bool
    verdict: str
    message: str
    diagnosis: str | None = None
    max_abs_diff: float | None = None
    rel_error: float | None = None

    @property
    def symbol(self) -> str:
        return "⚠" if self.verdict == "warning" else _SYMBOL[self.ok]

    def __str__(self) -> str:
        return _wrap(f"{self.symbol} {self.name}: {self.message}")


@dataclass(frozen=True)
class Report:
    """A list of checks, printed one line per check.

    >>> r = Report((Check("dx", True, "exact", "exact match"),))
    >>> bool(r), str(r)
    (True, '✓ dx: exact match')
    >>> r.assert_ok()
    ✓ dx: exact match
    """

    checks: tuple[Check, ...]
    title: str = ""

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = [self.title] if self.title else []
        lines += [str(c) for c in self.checks]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def __getitem__(self, key: int | str) -> Check:
        """A check by position or by name."""
        if isinstance(key, str):
            for c in self.checks:
                if c.name == key:
                    return c
            raise KeyError(key)
        return self.checks[key]

    def __len__(self) -> int:
        return len(self.checks)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` carrying the report text unless all passed; show it if so.

        It returns None on purpose: a graded cell ending in ``.assert_ok()`` then has no
        value, which nbgrader would try to read as a partial score.
        """
        __tracebackhide__ = True  # the learner's cell is the place to look, not this frame
        from ._integrity import verify

        verify()
        if not self.ok:
            # The report starts on a line of its own: the lab shows "AssertionError: " before
            # the message, and the report's lines are already as wide as the lab allows.
            raise AssertionError("\n" + str(self)) from None
        _show(self)

    def _repr_html_(self) -> str:
        colours = {"✓": "#1a7f37", "✗": "#cf222e", "⚠": "#9a6700"}
        rows = []
        if self.title:
            rows.append(f"<div><b>{html.escape(self.title)}</b></div>")
        for c in self.checks:
            colour = colours[c.symbol]
            rows.append(
                f'<div style="color:{colour};font-family:monospace;white-space:pre-wrap">'
                f"{c.symbol} <b>{html.escape(c.name)}</b>: {html.escape(c.message)}</div>"
            )
        return "<div>" + "".join(rows) + "</div>"


def _show(report: Report) -> None:
    """Display a report: as HTML in a notebook, as text elsewhere."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        from IPython.display import display

        display(report)
    else:
        print(report)


# Checked by `_integrity.verify` before a grade is given (imported here, at the end, so
# the originals are taken as soon as this module exists).
from . import _integrity  # noqa: E402

_integrity.protect(__name__, "Report.assert_ok", "Report.ok", "Report.__bool__", "Report.__init__",
                   "_show")
