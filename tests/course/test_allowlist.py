"""By hand is judged by what the code says and does: every shortcut of
tests/cheats/shortcuts.py is refused by the feedback of every by-hand exercise of the
registry, naming it, and listed by the audit when written into a submission (a numerical
estimate shows only when it runs); honest answers in many styles pass and are not listed."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from cells import run_cell
from registry import exercises_of, with_tensor_inputs

import backproplab as bl
from backproplab.course import allowlist, grading, rules, sources
from backproplab.course.audit import findings_in
from backproplab.course.byhand import ByHand, check_by_hand
from backproplab.course.grading import find_exercise

HERE = Path(__file__).parents[1]
_spec = importlib.util.spec_from_file_location("shortcuts", HERE / "cheats" / "shortcuts.py")
shortcuts = importlib.util.module_from_spec(_spec)
sys.modules["shortcuts"] = shortcuts
_spec.loader.exec_module(shortcuts)


BY_HAND = with_tensor_inputs(exercises_of(ByHand))


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
    monkeypatch.delenv(grading.SECRET_VARIABLE, raising=False)
    for key in BY_HAND[::6]:
        answer = _answer(table.source, key)
        bl.check_exercise(key, answer)  # visible: the table knows seed 0
        bl.check_exercise(key, answer, seed=777)  # no secret: the written seed, public
    monkeypatch.setenv(grading.SECRET_VARIABLE, "only the instructor knows")
    for key in BY_HAND[::6]:
        answer = _answer(table.source, key)
        bl.check_exercise(key, answer)  # the visible check keeps its seed
        with pytest.raises(AssertionError, match=table.check):
            bl.check_exercise(key, answer, seed=777)


def test_a_secret_from_a_file(monkeypatch, tmp_path):
    monkeypatch.delenv(grading.SECRET_VARIABLE, raising=False)
    path = tmp_path / "secret.txt"
    path.write_text("words\n")
    monkeypatch.setenv(grading.SECRET_FILE_VARIABLE, str(path))
    assert grading.grading_seed("l02-cubic", 6211) != 6211
    assert grading.grading_seed("l02-cubic", 6211) != grading.grading_seed("l02-chain", 6211)
    path.write_text("")
    with pytest.raises(RuntimeError, match="BACKPROPLAB_SECRET_FILE"):
        grading.grading_seed("l02-cubic", 6211)


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
    assert "eval (code run from a string or a file" in message
    assert "tensor arithmetic" in message and "tell your instructor" in message


def test_an_unknown_attribute_of_torch_is_refused():
    """Whatever the kind: a method answer's torch is a list of modules, not "anything
    without an underscore"."""
    assert rules.qualified_reason("torch.some_new_thing", rules.BY_HAND) == "other"
    assert rules.qualified_reason("torch.some_new_thing", rules.METHOD) == "unlisted"
    found = rules.read([ast.parse("import torch\nf = lambda x: x.some_new_method()")],
                       rules.BY_HAND)
    assert [f.used for f in found] == [".some_new_method"]


def test_a_dtypes_attributes_are_data_its_machinery_is_not():
    assert rules.qualified_reason("torch.float32.itemsize", rules.BY_HAND) is None
    assert rules.qualified_reason("torch.float16.is_floating_point", rules.BY_HAND) is None
    assert rules.qualified_reason("torch.float32.__reduce_ex__", rules.BY_HAND) == "dunder"
    assert rules.qualified_reason("torch.where.itemsize", rules.BY_HAND) == "other"


def test_torchs_makers_in_place_forms_and_a_fakes_checks_are_allowed():
    for name in ("torch.vander", "torch.triu_indices", "torch.asarray", "torch.sigmoid_",
                 "torch.exp_", "re.sub", "time.perf_counter", "warnings.catch_warnings"):
        assert rules.qualified_reason(name, rules.BY_HAND) is None, name
        assert rules.qualified_reason(name, rules.METHOD) is None, name
    assert rules.qualified_reason("torch._check", rules.METHOD) is None
    assert rules.qualified_reason("torch._check", rules.BY_HAND) == "private"
    assert rules.qualified_reason("torch.backward_", rules.BY_HAND) == "autograd"


def test_an_enums_members_hold_a_name_and_a_value():
    enum = ("import enum\n\nclass Kept(enum.Enum):\n    relu = 1\n\n"
            "def per(name):\n    return Kept[name].value\n")
    assert rules.read([ast.parse(enum)], rules.BY_HAND) == []
    plain = "class Kept:\n    relu = 1\n\ndef per(k):\n    return k.value\n"
    assert [f.used for f in rules.read([ast.parse(plain)], rules.BY_HAND)] == [".value"]


@pytest.mark.parametrize("source", [
    "import warnings\n\ndef f(x):\n    warnings.warn('w', UserWarning)\n"
    "    try:\n        return x.lower()\n    except AttributeError:\n        return x\n",
    "from typing import Annotated, Literal\n\ndef f(x: Annotated[int, '(n,)'],"
    " mode: Literal['all', 'any']) -> int:\n    return x\n",
    "from dataclasses import make_dataclass\nP = make_dataclass('P', ['value', ('change', int)])"
    "\n\ndef f(p):\n    return p.value + p.change\n",
    "from typing import NamedTuple\nP = NamedTuple('P', [('value', int), ('change', int)])\n\n"
    "def f(p):\n    return p._replace(value=1)._asdict(), p.change\n",
    "from collections import namedtuple\nP = namedtuple('P', field_names=['value'])\n\n"
    "def f(p):\n    return p.value\n",
    "from abc import ABC, abstractmethod\n\nclass Rule(ABC):\n    @abstractmethod\n"
    "    def left(self, node): ...\n",
    "from types import SimpleNamespace\n\ndef f(x):\n    s = SimpleNamespace(x=x)\n"
    "    return s.x\n",
    "def f(y, i, k):\n    if torch.is_complex(y):\n        raise TypeError('real only')\n"
    "    w = slice(i, i + k)\n    return y[w.start:w.stop], set(range(k)).intersection({1}), "
    "dict.fromkeys('ab'), 'A'.casefold(), '{}'.format(k)\n",
    "class Buffers(dict):\n    def __missing__(self, key):\n        self[key] = []\n"
    "        return self[key]\n",
], ids=["exceptions and warnings", "Literal and Annotated", "make_dataclass",
        "NamedTuple called", "namedtuple field_names=", "abc", "SimpleNamespace",
        "predicates and methods of plain objects", "__missing__"])
def test_ordinary_python_is_read_as_allowed(source):
    assert _reasons(source, rules.BY_HAND) == {}


@pytest.mark.parametrize("vocabulary", [rules.BY_HAND, rules.METHOD], ids=["by-hand", "method"])
def test_reading_a_name_is_not_machinery_but_climbing_the_class_is(vocabulary):
    honest = "def is_leaf(node):\n    return type(node).__name__ == 'AccumulateGrad'\n"
    assert rules.read([ast.parse(honest)], vocabulary) == []
    climbing = "def base(x):\n    return x.__class__.__mro__\n"
    found = rules.read([ast.parse(climbing)], vocabulary)
    assert [(f.used, f.why) for f in found] == [(".__mro__", "dunder")]
    # x.__class__ is type(x), read; set, or defined by a class, it is refused
    honest = "def name(x):\n    return f'{x.__class__.__name__}()'\n"
    assert rules.read([ast.parse(honest)], vocabulary) == []
    for spoof in ("def f(x):\n    x.__class__ = int\n",
                  "class A:\n    @property\n    def __class__(self):\n        return int\n"):
        assert [f.why for f in rules.read([ast.parse(spoof)], vocabulary)] == ["dunder"]


def test_a_derivation_may_shift_an_input_once_an_estimate_may_not():
    from backproplab.course.nudges import Nudges, NudgeSeen

    x, var = torch.randn(4, dtype=torch.float64), torch.rand(4, dtype=torch.float64)
    with Nudges([x, var, 1e-5]) as seen:  # 1/(1 + x), (var + eps) ** -1.5, x - mean
        _ = 1 / (1 + x) + (var + 1e-5) ** -1.5 + (x - x.mean()) + (1 - x)
    assert seen.nudged() is None
    # One function at two points: a step of any size, a tiny one, a one-hot direction.
    for step in ("x + 1.0, x - 1.0", "x + 1e-7, x", "x + torch.eye(4, dtype=x.dtype)[1], x"):
        with pytest.raises(NudgeSeen), Nudges([x, var, 1e-5]) as seen:
            _ = [t.sin() for t in eval(f"({step},)", {"x": x, "torch": torch})]
        assert seen.nudged() == 0, step


# --------------------------------------------------------------------------
# The escape families: every shape refused, by a reason that names the shape


_shapes_spec = importlib.util.spec_from_file_location("shapes", HERE / "cheats" / "shapes.py")
shapes = importlib.util.module_from_spec(_shapes_spec)
_shapes_spec.loader.exec_module(shapes)


def _reasons(source: str, vocabulary: rules.Vocabulary) -> dict[str, str]:
    """What the reading refuses in ``source`` (after ``import torch``): used -> why."""
    found = rules.read([ast.parse("import torch\n" + source)], vocabulary)
    return {f.used: f.why for f in found}


@pytest.mark.parametrize(("kind", "source", "why"), shapes.ESCAPES,
                         ids=[e[0] for e in shapes.ESCAPES])
@pytest.mark.parametrize("vocabulary", [rules.BY_HAND, rules.METHOD], ids=["by-hand", "method"])
def test_each_escape_is_refused_by_its_shape(kind, source, why, vocabulary):
    refused = _reasons(source, vocabulary)
    assert why in refused.values(), refused
    message = rules.refusal(rules.read([ast.parse("import torch\n" + source)], vocabulary),
                            vocabulary)
    assert rules.REASONS[why] in message


@pytest.mark.parametrize(("kind", "source", "why"), shapes.METHOD_ESCAPES,
                         ids=[e[0] for e in shapes.METHOD_ESCAPES])
def test_each_method_escape_is_refused_by_what_it_reaches(kind, source, why):
    refused = _reasons(source, rules.METHOD)
    assert why in refused.values(), refused


def test_a_torch_name_is_judged_by_what_it_is():
    method = rules.METHOD
    assert rules.qualified_reason("torch.os.system", method) == "system"
    assert rules.qualified_reason("torch.nn.functional.torch.load", method) == "runs-code"
    assert rules.qualified_reason("typing.sys.modules", rules.BY_HAND) == "introspection"
    assert rules.qualified_reason("torch.nn.functional.np.sin", rules.BY_HAND) == "library"
    found = _reasons("def f(x):\n    return torch.os.getcwd()\n", method)
    assert found == {"torch.os.getcwd, which is os.getcwd": "system"}


@pytest.mark.parametrize("name", [
    "torch.autograd.grad", "torch.autograd.Function", "torch.autograd.graph.saved_tensors_hooks",
    "torch.nn.Linear", "torch.nn.functional.mse_loss", "torch.optim.SGD", "torch.func.vmap",
    "torch.utils.checkpoint.checkpoint", "torch.enable_grad", "torch.float16",
    "torch.linalg.solve", "torch.Tensor.register_hook", "torch.random.fork_rng",
    "torch.cuda.is_available", "math.prod", "functools.partial"])
def test_a_method_answer_may_use_the_modules_a_method_works_with(name):
    assert rules.qualified_reason(name, rules.METHOD) is None


@pytest.mark.parametrize(("name", "why"), [
    ("torch.load", "runs-code"), ("torch.save", "unlisted"), ("torch.hub.load", "runs-code"),
    ("torch.utils.cpp_extension.load_inline", "runs-code"), ("torch.ops.aten.mm", "kernels"),
    ("torch.distributed.all_reduce", "unlisted"), ("torch.library.custom_op", "unlisted"),
    ("torch._C._autograd", "private"), ("torch.multiprocessing.spawn", "concurrency"),
    ("typing.get_type_hints", "runs-code"), ("typing.ForwardRef", "runs-code"),
    ("string.Formatter", "by-name"), ("typing._eval_type", "private")])
def test_a_method_answer_may_not_use_the_rest_of_torch(name, why):
    assert rules.qualified_reason(name, rules.METHOD) == why


def test_an_exercise_adds_the_torch_modules_it_needs():
    """Lesson 23 works across processes, 18 with the compiler, 24 with torch.library."""
    across = find_exercise("l23-shard-mean").vocabulary
    assert rules.qualified_reason("torch.distributed.all_reduce", across) is None
    assert rules.qualified_reason("torch.distributed.os.system", across) == "system"
    assert rules.qualified_reason("torch.distributed._functional_collectives", across) \
        == "private"
    compiler = find_exercise("l25-flop-compiler").vocabulary
    assert rules.qualified_reason("functorch.compile.aot_function", compiler) is None
    assert rules.qualified_reason("torch.ops.aten.mm.default", compiler) is None
    assert rules.qualified_reason("torch.library.custom_op",
                                  find_exercise("l27-rms-norm-op").vocabulary) is None


def test_an_exercise_may_name_a_private_module_and_the_class_hook_it_needs():
    """Lesson 28's dispatch mode: torch.utils._python_dispatch is allowed with its
    underscore, never the private names inside it, and __torch_dispatch__ may be defined
    there alone."""
    mode = find_exercise("l28-ops-by-node").vocabulary
    for name in ("torch.utils._python_dispatch", "torch.utils._python_dispatch.TorchDispatchMode"):
        assert rules.qualified_reason(name, mode) is None
        assert rules.qualified_reason(name, rules.METHOD) == "private"
    assert rules.qualified_reason("torch.utils._python_dispatch._get_current_dispatch_mode",
                                  mode) == "private"
    assert rules.qualified_reason("torch.utils._pytree", mode) == "private"
    source = ("class Mode:\n    def __torch_dispatch__(self, func, types, args=(), kwargs=None):"
              "\n        return func(*args, **(kwargs or {}))\n")
    assert not [f for f in rules.read([ast.parse(source)], mode) if f.why == "class-hook"]
    assert [f for f in rules.read([ast.parse(source)], rules.METHOD) if f.why == "class-hook"]


def test_own_attribute_names_open_nothing_refused_elsewhere():
    """A class attribute named like a module or an entry point (sys, modules, exec) is
    refused where it is defined and opens nothing on other values."""
    source = ("class Names:\n    sys = modules = get = exec = 0\n\n\n"
              "def f(x):\n    return x.modules\n")
    assert _reasons(source, rules.BY_HAND) == {
        "Names.sys": "own-name", "Names.modules": "own-name", "Names.exec": "own-name",
        ".modules": "other"}
    assert _reasons("def f(x):\n    x.sys = 1\n", rules.METHOD) == {".sys": "own-name"}
    honest = ("class Layer:\n    def forward(self, input):\n        self.input = input\n"
              "        return input.sum()\n\n    def backward(self):\n"
              "        return self.input * 0 + 1\n")
    assert _reasons(honest, rules.BY_HAND) == {}


@pytest.mark.parametrize(("source", "used"), [
    ("def f(x):\n    return x.__self__\n", ".__self__"),
    ("def f(x):\n    match x:\n        case object(__dict__=k):\n            return k\n",
     "case object(__dict__=...)"),
    ("def f(x):\n    return getattr(x, '__dict__')\n", "getattr(..., '__dict__')"),
    ("def f(x):\n    return '{0.__class__}'.format(x)\n", ".format(...)"),
    ("class A:\n    __match_args__ = ('__self__',)\n", "A.__match_args__"),
    ("class A:\n    def __format__(self, spec):\n        return ''\n", "A.__format__"),
])
@pytest.mark.parametrize("vocabulary", [rules.BY_HAND, rules.METHOD], ids=["by-hand", "method"])
def test_a_dunder_anywhere_is_refused(source, used, vocabulary):
    assert used in _reasons(source, vocabulary)


def test_class_patterns_read_what_plain_code_may_read():
    honest = ("class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n\n"
              "def f(p):\n    match p:\n        case Point(x=0, y=y):\n            return y\n"
              "        case float(v) | int(v):\n            return v\n"
              "        case [first, *rest]:\n            return first\n    return p.sum()\n")
    assert _reasons(honest, rules.BY_HAND) == {}
    by_position = "def f(t):\n    match t:\n        case torch.Size(n):\n            return n\n"
    assert _reasons(by_position, rules.BY_HAND) == {"case torch.Size(...), by position": "pattern"}


def test_a_module_is_only_imported_read_through_or_named():
    honest = ("import torch.nn.functional as F\nnn = torch.nn\n\n\ndef f(x, F=None):\n"
              "    act = nn.functional\n    return act.relu(x) + torch.sin(x)\n")
    assert _reasons(honest, rules.BY_HAND) == {}
    for value in ("[torch]", "print(torch)", "lambda: torch", "torch if x else None",
                  "{'t': torch}", "(torch,)[0]", "torch.nn"):
        found = _reasons(f"def f(x):\n    return {value}\n", rules.METHOD)
        assert "module-value" in found.values(), value
    assert _reasons("class A:\n    T = torch\n", rules.METHOD) == {"torch": "module-value"}
    rebound = _reasons("F = torch.nn.functional\nF = torch\n", rules.METHOD)
    assert rebound == {"F, bound to torch.nn.functional and to torch": "module-value"}
    classes = _reasons("T = torch.Tensor\nT = torch.nn.Module\n", rules.METHOD)
    assert classes == {"T, bound to torch.Tensor and to torch.nn.Module": "module-value"}
    # values bound one way, then another (a dtype, a function picked by an if): each read
    # where it is bound, nothing else read through them
    values = ("def f(x, up):\n    wide = torch.float64\n    if not up:\n"
              "        wide = torch.float32\n    rounding = torch.ceil if up else None\n"
              "    rounding = torch.floor\n    return rounding(x).to(wide)\n")
    assert _reasons(values, rules.BY_HAND) == {}


def test_a_refused_builtin_is_refused_however_it_is_bound():
    """A parameter or a local of that name is the learner's; a cell-level one cannot be
    told from the builtin (``open = open``), nor a default that reads it."""
    honest = ("def f(input, dir=1):\n    vars = input * dir\n    return vars\n")
    assert _reasons(honest, rules.BY_HAND) == {}
    assert _reasons("open = open\n\n\ndef f(x):\n    return open(x)\n", rules.METHOD) \
        == {"open": "shadow"}
    assert _reasons("def f(x, eval=eval):\n    return eval(x)\n", rules.METHOD) \
        == {"eval": "shadow"}
    assert _reasons("def f(x):\n    return [eval for eval in (eval,)]\n", rules.METHOD) \
        == {"eval": "shadow"}
    assert _reasons("def f(x):\n    return eval(x)\n", rules.METHOD) == {"eval": "runs-code"}


def test_string_annotations_are_refused_and_plain_ones_read():
    assert _reasons("def f(x: torch.Tensor) -> torch.Tensor:\n    return x\n",
                    rules.BY_HAND) == {}
    assert _reasons("def f(x: 'Tensor'):\n    return x\n", rules.METHOD) \
        == {"the annotation 'Tensor'": "annotation"}
    assert _reasons("x: 'list[int]' = []\n", rules.METHOD) \
        == {"the annotation 'list[int]'": "annotation"}


@pytest.mark.parametrize("source", [
    "def f(x):\n    if x.requires_grad:\n        x = x.detach()\n    return 2 * x\n",
    "def f(x):\n    with torch.set_grad_enabled(False):\n        return 2 * x\n",
    "def f(x):\n    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    "    return (2 * x.to(device)).cpu()\n",
    "import warnings\n\n\ndef f(x):\n    warnings.warn('checked')\n    return 2 * x\n",
])
def test_ordinary_boilerplate_is_arithmetic_enough(source):
    assert _reasons(source, rules.BY_HAND) == {}


@pytest.mark.parametrize(("kind", "source", "why"), shapes.ESCAPES,
                         ids=[e[0] for e in shapes.ESCAPES])
def test_each_escape_is_refused_by_the_kernels_feedback_before_it_runs(kind, source, why):
    namespace = {"torch": torch, "__name__": "__main__"}
    run_cell(source, namespace)
    report = find_exercise("l04-grads").check(namespace["nll_grads"], 0)
    assert not report.ok and rules.REASONS[why] in " ".join(str(report).split()), str(report)
    assert namespace["SPACE"] == {}  # the payload never ran


def test_an_everyday_word_is_the_learners_own_attribute_once_their_class_sets_it():
    """``self.open`` (a gate's flag) was refused as an operating-system name: an everyday
    word refused on any value is the learner's once their own class sets it; on other
    values it is still refused, and a module's name stays refused as one's own."""
    gate = ("class Gate:\n    def __init__(self):\n        self.open = True\n"
            "        self.system = 'linear'\n\n\n"
            "def f(x):\n    g = Gate()\n    return x * 2 if g.open and g.system else x\n")
    assert rules.read([ast.parse(gate)], rules.METHOD) == []
    reads = "def f(x):\n    return x.open('/etc/passwd'), x.system('ls')\n"
    assert [(f.used, f.why) for f in rules.read([ast.parse(reads)], rules.METHOD)] \
        == [(".open", "system"), (".system", "system")]
    module_name = "class Names:\n    sys = 0\n\n\ndef f(x):\n    return x.sys\n"
    assert ("Names.sys", "own-name") in [
        (f.used, f.why) for f in rules.read([ast.parse(module_name)], rules.METHOD)]


def test_what_is_imported_for_a_type_checker_only_is_not_read():
    """``if TYPE_CHECKING:`` never runs: what it imports names hints only. Its ``else``
    runs, and is read."""
    hints = ("from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
             "if TYPE_CHECKING:\n    from torch._ops import OpOverload\n\n\n"
             "def f(op: OpOverload, x):\n    return torch.sin(x)\n")
    assert _reasons(hints, rules.METHOD) == {}
    other = ("import typing\n\nif typing.TYPE_CHECKING:\n    import numpy\nelse:\n"
             "    import sys\n")
    assert _reasons(other, rules.METHOD) == {"import sys": "introspection"}


def test_functorch_is_torch_func_under_its_old_name():
    """A version fallback (``except ImportError: from functorch import grad``) names what
    torch.func holds; functorch's other parts stay outside a method's modules."""
    assert allowlist.qualified_reason("functorch.vmap", rules.METHOD) is None
    assert allowlist.qualified_reason("functorch.grad", rules.BY_HAND) == "autograd"
    assert allowlist.qualified_reason("functorch.compile.aot_function", rules.METHOD) \
        == "unlisted"


def test_a_star_import_binds_each_name_of_the_module_and_each_is_read_where_used():
    """``from math import *`` is read as if every name were listed: the grade takes the
    statement for ``prod`` (it was dropped, and the answer failed with a NameError), and
    each name is judged where it is used; a module that is refused stays refused."""
    assert _reasons("from math import *\n\n\ndef f(x):\n    return prod(x.shape) * x\n",
                    rules.BY_HAND) == {}
    assert _reasons("from os import *\n\n\ndef f(x):\n    return x\n", rules.METHOD) \
        == {"import os": "system"}
    cells = ["from math import *", "def f(x):\n    return prod(x.shape) * x"]
    assert [p.cell for p in sources.from_notebook(cells, ["f"])] == [0, 1]
