"""By hand is judged by what the code says and does: every shortcut of
tests/cheats/shortcuts.py is refused by the feedback of every by-hand exercise of the
registry, naming it, and listed by the audit when written into a submission (a numerical
estimate shows only when it runs); honest answers in many styles pass and are not listed."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from cells import run_cell

import backproplab as bl
from backproplab.course import exercises, rules, secret
from backproplab.course.audit import findings_in
from backproplab.course.grading import ByHand, check_by_hand, find_exercise

HERE = Path(__file__).parents[1]
_spec = importlib.util.spec_from_file_location("shortcuts", HERE / "cheats" / "shortcuts.py")
shortcuts = importlib.util.module_from_spec(_spec)
sys.modules["shortcuts"] = shortcuts
_spec.loader.exec_module(shortcuts)


def _by_hand() -> list[str]:
    """Every by-hand exercise's id, from the registry (whatever the lessons are numbered)."""
    found = []
    for info in pkgutil.iter_modules(exercises.__path__):
        if info.name.startswith("lesson"):
            module = importlib.import_module(f"{exercises.__name__}.{info.name}")
            found += [k for k, v in module.EXERCISES.items() if isinstance(v, ByHand)]
    return sorted(found)


BY_HAND = _by_hand()


def _answer(source: str, key: str = ""):
    """The ``answer`` a shortcut's source defines, run as a cell of a learner's notebook."""
    namespace = {"torch": torch, "F": F, "bl": bl, "__name__": "__main__"}
    run_cell(shortcuts.PRELUDE + source.replace("{key}", key), namespace)
    return namespace["answer"]


def test_the_registry_has_by_hand_exercises():
    assert len(BY_HAND) >= 30


def test_every_kind_of_the_issue_has_a_shortcut():
    kinds = " | ".join(s.kind for s in shortcuts.SHORTCUTS)
    for word in ("_getframe", "inspect.stack", "gc.get_objects", "private dual", "engine",
                 "backward nodes", "process pool", "multiprocessing", "subprocess", "sympy",
                 "central", "h = 1", "5-point", "7-point", "9-point", "Richardson", "Ridders",
                 "mpmath", "long double", "complex step", "decompositions",
                 "kernels called from a thread", "setprofile", "captured at import",
                 "make_fx", "TorchScript", "table of the hidden", "Tensor subclass"):
        assert word in kinds, word


@pytest.mark.parametrize("shortcut", [s for s in shortcuts.SHORTCUTS if "table" not in s.kind],
                         ids=lambda s: s.kind)
def test_each_shortcut_is_refused_by_every_by_hand_check_naming_it(shortcut):
    missed = []
    for key in BY_HAND:
        report = find_exercise(key).check(_answer(shortcut.source, key), 0)
        message = " ".join(str(report).split())
        if report.ok or shortcut.check not in message:
            missed.append(f"{key}: {message[:300]}")
    assert not missed, "\n".join(missed)


def test_a_table_of_the_public_seeds_is_worth_nothing_once_the_instructor_sets_a_secret(
        monkeypatch):
    table = next(s for s in shortcuts.SHORTCUTS if "table" in s.kind)
    monkeypatch.delenv(secret.SECRET_VARIABLE, raising=False)
    for key in BY_HAND[::6]:
        answer = _answer(table.source, key)
        bl.check_exercise(key, answer)  # visible: the table knows seed 0
        bl.check_exercise(key, answer, seed=777)  # no secret: the written seed, public
    monkeypatch.setenv(secret.SECRET_VARIABLE, "only the instructor knows")
    for key in BY_HAND[::6]:
        answer = _answer(table.source, key)
        bl.check_exercise(key, answer)  # the visible check keeps its seed
        with pytest.raises(AssertionError, match=table.check):
            bl.check_exercise(key, answer, seed=777)


def test_a_secret_from_a_file(monkeypatch, tmp_path):
    monkeypatch.delenv(secret.SECRET_VARIABLE, raising=False)
    path = tmp_path / "secret.txt"
    path.write_text("words\n")
    monkeypatch.setenv(secret.SECRET_FILE_VARIABLE, str(path))
    assert secret.grading_seed("l02-cubic", 6211) != 6211
    assert secret.grading_seed("l02-cubic", 6211) != secret.grading_seed("l02-chain", 6211)
    path.write_text("")
    with pytest.raises(RuntimeError, match="BACKPROPLAB_SECRET_FILE"):
        secret.grading_seed("l02-cubic", 6211)


def _submission(source: str) -> nbformat.NotebookNode:
    """One by-hand answer cell per exercise, each holding ``source``, and its check."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import torch\nimport backproplab as bl"))
    base = {"locked": False, "schema_version": 3, "task": False}
    for key in BY_HAND:
        cell = nbformat.v4.new_code_cell(shortcuts.PRELUDE + source.replace("{key}", key))
        cell.metadata["nbgrader"] = {**base, "grade": False, "grade_id": key, "solution": True}
        check = nbformat.v4.new_code_cell(f'bl.check_exercise("{key}", answer)')
        check.metadata["nbgrader"] = {**base, "grade": True, "grade_id": f"{key}-check",
                                      "points": 1, "solution": False, "locked": True}
        nb.cells += [cell, check]
    return nb


@pytest.mark.parametrize("shortcut", [s for s in shortcuts.SHORTCUTS if s.audit],
                         ids=lambda s: s.kind)
def test_the_audit_lists_each_shortcut_in_every_by_hand_cell(shortcut):
    found = findings_in(_submission(shortcut.source), "cheater.ipynb")
    listed = {f.grade_id for f in found if "vocabulary" in f.what
              and shortcut.audit in f.what and f.line > 0}
    assert listed == set(BY_HAND), [str(f) for f in found][:5]


HONEST = {
    "einsum": "def answer(W, x):\n    return torch.einsum('ij,j->i', W, x) * 2\n",
    "where": "def answer(W, x):\n    y = W @ x\n    return torch.where(y > 0, 2 * y, 2 * y)\n",
    "loops": ("def answer(W, x):\n    out = torch.zeros(W.shape[0], dtype=W.dtype)\n"
              "    for i in range(W.shape[0]):\n        for j in range(len(x)):\n"
              "            out[i] += 2 * W[i, j] * x[j]\n    return out\n"),
    "scatter_add": ("def answer(W, x):\n    rows = torch.arange(W.shape[0]).repeat_interleave("
                    "W.shape[1])\n    return torch.zeros(W.shape[0], dtype=x.dtype)"
                    ".scatter_add_(0, rows, (2 * W * x).reshape(-1))\n"),
    "index_put": ("def answer(W, x):\n    out = torch.zeros_like(W[:, 0])\n"
                  "    out.index_put_((torch.arange(len(out)),), 2 * (W @ x))\n    return out\n"),
    "own helpers": ("def double(t):\n    return t + t\n\n\ndef mv(A, v):\n"
                    "    return (A * v).sum(dim=1)\n\n\ndef answer(W, x):\n"
                    "    return double(mv(W, x))\n"),
    "math and F": ("import_free = 1\n\ndef answer(W, x):\n    scale = math.sqrt(4.0)\n"
                   "    return scale * F.linear(x, W)\n"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_answers_in_many_styles_pass_and_are_not_listed(name):
    """d/dW... here simply 2 W x: each style computes it exactly, autograd off."""
    namespace = {"torch": torch, "F": F, "math": __import__("math")}
    run_cell(HONEST[name], namespace)
    report = check_by_hand(
        namespace["answer"], reference=lambda W, x: 2 * (W @ x),
        make_inputs=lambda gen: (torch.randn(3, 4, generator=gen), torch.randn(4, generator=gen)),
        name=name, vocabulary=rules.BY_HAND)
    assert report.ok, str(report)
    tree = ast.parse("import math\nimport torch\nimport torch.nn.functional as F\n"
                     + HONEST[name])
    assert rules.read([tree], rules.BY_HAND) == []


def test_the_reference_is_computed_once_the_answer_has_returned():
    order = []

    def reference(x):
        order.append("reference")
        return 2 * x

    def answer(x):
        order.append("answer")
        return 2 * x

    report = check_by_hand(answer, reference, lambda gen: (torch.randn(3, generator=gen),),
                           trials=2)
    assert report.ok and order == ["answer", "reference", "answer", "reference"]


def test_a_tensor_subclass_result_is_refused_by_name():
    class Agreeable(torch.Tensor):
        pass

    report = check_by_hand(lambda x: (2 * x).as_subclass(Agreeable), lambda x: 2 * x,
                           lambda gen: (torch.randn(3, generator=gen),))
    assert not report.ok and "Agreeable, a subclass of torch.Tensor" in str(report)


def test_the_contract_names_a_wrong_dtype():
    report = check_by_hand(lambda x: (2 * x).round().long(), lambda x: 2 * x,
                           lambda gen: (torch.randn(3, generator=gen),))
    assert not report.ok
    assert "dtype int64 where the task asks for float64" in " ".join(str(report).split())


def test_a_refusal_says_what_is_allowed_and_how_to_report_a_wrong_one():
    report = find_exercise(BY_HAND[0]).check(lambda *a: eval("a[0]"), 0)
    message = " ".join(str(report).split())
    assert "eval (a name or attribute built from a string)" in message
    assert "tensor arithmetic" in message and "tell your instructor" in message


def test_an_unknown_attribute_of_torch_is_refused():
    assert rules.qualified_reason("torch.some_new_thing", rules.BY_HAND) is not None
    assert rules.qualified_reason("torch.some_new_thing", rules.METHOD) is None
    found = rules.read([ast.parse("import torch\nf = lambda x: x.some_new_method()")],
                       rules.BY_HAND)
    assert [f.used for f in found] == [".some_new_method"]


@pytest.mark.parametrize("vocabulary", [rules.BY_HAND, rules.METHOD], ids=["by-hand", "method"])
def test_reading_a_name_is_not_machinery_but_climbing_the_class_is(vocabulary):
    honest = "def is_leaf(node):\n    return type(node).__name__ == 'AccumulateGrad'\n"
    assert rules.read([ast.parse(honest)], vocabulary) == []
    climbing = "def base(x):\n    return x.__class__.__mro__\n"
    found = rules.read([ast.parse(climbing)], vocabulary)
    assert {f.used for f in found} == {".__class__", ".__mro__"}
    assert all(f.why == "dunder" for f in found)


def test_a_derivation_may_shift_an_input_once_an_estimate_may_not():
    from backproplab.course.nudges import Nudges, NudgeSeen

    x, var = torch.randn(4, dtype=torch.float64), torch.rand(4, dtype=torch.float64)
    with Nudges([x, var, 1e-5]) as seen:  # 1/(1 + x), (var + eps) ** -1.5, x - mean
        _ = 1 / (1 + x) + (var + 1e-5) ** -1.5 + (x - x.mean()) + (1 - x)
    assert seen.nudged() is None
    for step in ("x + 1.0, x - 1.0", "x + 1e-7, x", "x + torch.eye(4, dtype=x.dtype)[1]"):
        with pytest.raises(NudgeSeen), Nudges([x, var, 1e-5]) as seen:
            _ = [t.sin() for t in eval(f"({step},)", {"x": x, "torch": torch})]
        assert seen.nudged() == 0, step
