"""`check_graph`: a quiz on the nodes of a graph, before it is drawn.

The learner's prediction (a list, or one string split on newlines, commas or
``->``) is compared with the real node names as two multisets (missing and
extra nodes, with a "did you mean" for near-misses) and as two sequences
(nodes outside a longest common subsequence are out of order).
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch

from .check import Check, Report

__all__ = ["check_graph"]


def _parse_names(prediction: Any) -> list[str]:
    if isinstance(prediction, str):
        parts = re.split(r"->|→|,|\n", prediction)
    elif isinstance(prediction, (list, tuple)) and all(isinstance(p, str) for p in prediction):
        parts = list(prediction)
    else:
        raise TypeError(
            "prediction: expected a list of node names or one string separated by newlines, "
            f"commas or '->', got {type(prediction).__name__}"
        )
    return [p.strip() for p in parts if p.strip()]


def _actual_names(output: Any) -> list[str]:
    if isinstance(output, torch.Tensor):
        from .graph import describe  # lazy: graph.py is a sibling module, imported on use

        return list(describe(output).names())
    names = getattr(output, "names", None)
    if callable(names):
        return list(names())
    if isinstance(output, (list, tuple)) and all(isinstance(n, str) for n in output):
        return list(output)
    raise TypeError(
        "output: expected a torch.Tensor, a Graph or a list of node names, got "
        f"{type(output).__name__}"
    )


def check_graph(prediction: str | Sequence[str], output: Any) -> Report:
    """Diff a learner's list of graph node names against the real graph.

    ``prediction`` lists node names in the order ``Graph.names()`` gives
    (topological, from the root), as a list or one string separated by
    newlines, commas or ``->``. ``output`` is the tensor whose graph is meant,
    a ``Graph``, or a plain list of names. The report says which nodes are
    missing, which are extra (with a "did you mean" for near-misses) and
    which are out of order.

    >>> print(check_graph("MulBackward0 -> AccumulateGrad -> AddBackward0",
    ...                   ["MulBackward0", "AddBackward0", "AccumulateGrad"]))
    ✓ nodes: all 3 nodes named
    ✗ order: AccumulateGrad is out of order: it comes after AddBackward0
    """
    predicted = _parse_names(prediction)
    actual = _actual_names(output)
    want, got = Counter(actual), Counter(predicted)
    missing, extra = want - got, got - want

    def listing(c: Counter[str]) -> str:
        return ", ".join(n if k == 1 else f"{n} (×{k})" for n, k in c.items())

    checks = []
    if not missing and not extra:
        checks.append(Check("nodes", True, "pass", f"all {len(actual)} nodes named"))
    else:
        parts = []
        if missing:
            parts.append(f"missing {listing(missing)}")
        if extra:
            hints = []
            unused = list(missing)
            for name in extra:
                close = [m for m in unused if m.lower().startswith(name.lower())]
                if not close:
                    # Compare stems: a shared "Backward0" suffix says nothing.
                    stems = {_stem(m): m for m in unused}
                    near = difflib.get_close_matches(_stem(name), list(stems), n=1, cutoff=0.75)
                    close = [stems[n] for n in near]
                if close:
                    unused.remove(close[0])
                hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
            parts.append("extra " + ", ".join(hints))
        checks.append(Check("nodes", False, "fail", "; ".join(parts)))

    # Order: among the names both lists share, keep a longest common
    # subsequence; whatever falls outside it is out of order.
    shared = _within(predicted, want)
    actual_shared = _within(actual, got)
    keep = _lcs_mask(shared, actual_shared)
    wrong = [name for name, k in zip(shared, keep, strict=False) if not k]
    if not wrong:
        checks.append(Check("order", True, "pass", "the nodes are in the right order"))
    else:
        lines = []
        for name in dict.fromkeys(wrong):
            pos = actual_shared.index(name)
            after = f"it comes after {actual_shared[pos - 1]}" if pos else "it comes first"
            lines.append(f"{name} is out of order: {after}")
        checks.append(Check("order", False, "fail", "; ".join(lines)))
    return Report(tuple(checks))


def _stem(name: str) -> str:
    return re.sub(r"Backward\d*$", "", name).lower()


def _within(names: list[str], allowed: Counter) -> list[str]:
    """``names`` in order, each kept at most as often as ``allowed`` counts it."""
    left = Counter(allowed)
    kept = []
    for name in names:
        if left[name] > 0:
            kept.append(name)
            left[name] -= 1
    return kept


def _lcs_mask(a: list[str], b: list[str]) -> list[bool]:
    """For each item of ``a``: is it part of a longest common subsequence with ``b``?

    The common start and end are matched directly, so a prediction that is
    right except in a few places costs time in proportion to its length; only
    the differing middle goes through the table.
    """
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    middle_a, middle_b = a[start:len(a) - end], b[start:len(b) - end]
    return [True] * start + _middle_mask(middle_a, middle_b) + [True] * end


def _middle_mask(a: list[str], b: list[str]) -> list[bool]:
    n, m = len(a), len(b)
    if n * m > 4_000_000:
        # Too big for the table: match greedily in order (not always the longest,
        # but linear, and every name it marks really is in order).
        places: dict[str, list[int]] = {}
        for k, name in enumerate(b):
            places.setdefault(name, []).append(k)
        mask, j = [False] * n, 0
        for i, name in enumerate(a):
            where = places.get(name, [])
            k = bisect.bisect_left(where, j)
            if k < len(where):
                mask[i], j = True, where[k] + 1
        return mask
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = (
                table[i + 1][j + 1] + 1 if a[i] == b[j] else max(table[i + 1][j], table[i][j + 1])
            )
    mask = [False] * n
    i = j = 0
    while i < n and j < m:
        if a[i] == b[j]:
            mask[i] = True
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return mask
