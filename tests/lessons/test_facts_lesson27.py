"""Lesson 27's facts, read from its stored outputs and, where it is cheap, measured again with
the locked torch: a custom op with no formula refuses backward, its fake lets FakeTensors
through without running the body, what each of opcheck's tests catches (and that a wrong
formula passes all four), the op as one node of a compiled graph with no break, the same
numpy body as an autograd.Function traced through and a Python loop breaking the graph,
vmap's per-example loop against a vmap rule, torch.func.grad refused on torch 2.13 and
forward mode's silent zero tangent through the op, and a Function that every transform reaches.
"""

from __future__ import annotations

import itertools
import logging
import re
import warnings
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from stored import flat_text as _text
from stored import printed

from backproplab.course.exercises import lesson27

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "27-custom-ops.ipynb"
_NAMES = itertools.count(1)


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}


def _cell(cells, needle: str) -> nbformat.NotebookNode:
    """The one code cell whose source holds ``needle`` (ids move when cells are added)."""
    found = [c for c in cells.values() if c.cell_type == "code" and needle in c.source]
    assert len(found) == 1, (needle, [c.id for c in found])
    return found[0]


@pytest.fixture(scope="module")
def quiet():
    torch._logging.set_logs(dynamo=logging.ERROR, aot=logging.ERROR, inductor=logging.ERROR)
    yield
    torch._logging.set_logs()


# The lesson's swish (the check's own copy), registered here under names of the test's own.
swish_numpy = lesson27.swish_numpy
_setup_context = lesson27._swish_setup_context
_backward = lesson27._swish_backward


def _op(fake=lambda x, beta: torch.empty_like(x), backward=_backward):
    op = torch.library.custom_op(f"l24facts::swish_{next(_NAMES)}", swish_numpy,
                                 mutates_args=())
    op.register_fake(fake)
    op.register_autograd(backward, setup_context=_setup_context)
    return op


def _failing(op) -> list[str]:
    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = torch.library.opcheck(op, (x, 1.5), raise_exception=False)
    return [test for test, result in results.items() if result != "SUCCESS"]


def test_the_op_and_its_missing_formula(cells):
    made = _text(_cell(cells, 'swish = torch.library.custom_op("l24::swish"'))
    assert "schema: l24::swish(Tensor x, float beta) -> Tensor" in made
    assert "equals x * sigmoid(1.5 x): True" in made
    refused = _text(_cell(cells, "y.sum().backward()"))
    assert "node: GeneratedBackwardFor_l24_swish_defaultBackward" in refused
    assert "no autograd formula was registered" in refused
    saved = _text(_cell(cells, "swish.register_autograd(swish_backward"))
    assert "saved: saved_tensors[0] (float64, (7,))" in saved
    checked = _text(_cell(cells, 'print("gradcheck:"'))
    assert "gradcheck: True" in checked and "✓ d swish/dx" in checked


def test_the_fake_answers_for_the_body(cells):
    before = _text(_cell(cells, "big = torch.empty(1000, 1000, dtype=torch.float64)  # no"))
    assert "FakeTensor(..., size=(1000, 1000), dtype=torch.float64)" in before
    assert "swish: There was no fake impl registered" in before
    after = _text(_cell(cells, "swish.register_fake(swish_fake)"))
    assert "calls of the numpy body: 0" in after


def test_what_each_opcheck_test_caught(cells):
    assert printed(_cell(cells, "for test, result in opcheck(swish, (x, 1.5))")).count(
        "SUCCESS") == 4
    table = printed(_cell(cells, "def break_one(")).splitlines()
    rows = {line[:23].strip(): line[23:].split() for line in table[1:]}
    assert table[0].split() == ["schema", "autograd_reg", "faketensor", "aot_dynamic",
                                "gradcheck"]
    ok, no = "✓", "✗"
    assert rows == {
        "fake returns float32": [ok, ok, no, ok, ok],
        "fake drops a dimension": [ok, ok, no, no, ok],
        "fake runs the body": [ok, ok, no, no, ok],
        "no fake": [ok, ok, no, no, ok],
        "body writes into x": [no, ok, ok, ok, no],
        "no backward": [ok, ok, ok, no, no],
        "saves nothing": [ok, ok, ok, no, no],
        "backward in numpy": [ok, ok, ok, no, ok],
        "backward formula wrong": [ok, ok, ok, ok, no],
    }
    old_route = _text(_cell(cells, 'torch.library.define("l24::swish_cpu"'))
    assert "node: MulBackward0" in old_route
    assert "test_autograd_registration AssertionError" in old_route
    assert "test_aot_dispatch_dynamic AssertionError" in old_route
    assert "test_faketensor SUCCESS" in old_route


def test_opcheck_measured_again(quiet):
    assert _failing(_op()) == []
    assert _failing(_op(fake=lambda x, beta: torch.empty(x.shape))) == ["test_faketensor"]

    def wrong(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(ctx.beta * x), None

    op = _op(backward=wrong)
    assert _failing(op) == []  # opcheck does not judge the formula ...
    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    assert not torch.autograd.gradcheck(lambda u: op(u, 1.5), (x,), raise_exception=False)


def test_the_op_compiles_into_one_node(cells):
    compiled = _text(_cell(cells, "def f(x):"))
    assert "calls of the numpy body, compiling and running once: 1" in compiled
    assert "forward graph: sin, l24.swish, sum" in compiled
    backward = ("backward graph: expand, mul, sigmoid, mul, mul, rsub, mul, add, mul, cos, "
                "mul")
    assert backward in compiled
    assert "kept for the backward: primals_1, sin" in compiled
    same = _text(_cell(cells, "compiled_grad = x.grad.clone()"))
    assert "df/dx, compiled against eager: exact match" in same
    assert "graphs: 1, graph breaks: 0" in same
    function = _text(_cell(cells, "explained = torch._dynamo.explain(g)(x)"))
    assert "graphs: 1, graph breaks: 0" in function
    assert "forward graph: sin, detach, view, mul, exp, lift_fresh_copy, add, div, sum" in function
    assert backward in function  # the Function's backward, traced: the one f got
    reveal = _text(_cell(cells, 'bl.reveal("l27-predict-function-breaks")'))
    assert "the answer is 0" in reveal


def test_a_python_loop_breaks_the_function_not_the_op(cells):
    loop = _text(_cell(cells, "class SwishLoopFunction"))
    assert "Function: graphs 4, graph breaks 3" in loop
    assert "their operations: sin | detach, reshape | tensor, reshape | sum" in loop
    assert "with fullgraph=True: Unsupported: Tensor.tolist() with non-integer tensor" in loop
    assert "custom op: graphs 1, graph breaks 0" in loop
    assert "their operations: sin, l24.swish_loop, sum with fullgraph=True: compiles" in loop


def test_numpy_in_a_function_is_traced_measured_again(quiet):
    import torch._dynamo

    class SwishFunction(torch.autograd.Function):
        forward = staticmethod(swish_numpy)
        setup_context = staticmethod(_setup_context)
        backward = staticmethod(_backward)

    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda t: SwishFunction.apply(t.sin(), 1.5).sum())(x)
    torch._dynamo.reset()
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


def test_vmap_loops_without_a_rule(cells):
    looped = _text(_cell(cells, "looped = torch.vmap(swish"))
    assert "calls of the body: [(3,), (3,), (3,), (3,)]" in looped
    assert "equals swish on the whole batch: True" in looped
    assert "hit the vmap fallback which is currently disabled" in looped
    ruled = _text(_cell(cells, "swish.register_vmap(swish_vmap)"))
    assert "calls of the body: [(4, 3)] equal to the loop's: True" in ruled
    decomposed = _text(_cell(cells, 'library.define("swish_torch'))
    assert "CompositeImplicitAutograd: [(3,), (3,), (3,), (3,)]" in decomposed
    assert "and FuncTorchBatchedDecomposition: [(3,)]" in decomposed
    assert "its node in autograd's graph: MulBackward0" in decomposed
    assert "compiled forward graph: mul, sigmoid, detach, mul, sum" in decomposed
    refused = _text(_cell(cells, "torch.func.grad(lambda t: swish(t, 1.5).sum())"))
    assert "must override the setup_context staticmethod" in refused


def test_vmap_measured_again():
    calls = []

    def body(x: torch.Tensor, beta: float) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return swish_numpy(x, beta)

    op = torch.library.custom_op(f"l24facts::counted_{next(_NAMES)}", body, mutates_args=())
    op.register_fake(lambda x, beta: torch.empty_like(x))
    batch = torch.randn(4, 3, dtype=torch.float64)
    was = torch._C._functorch._set_vmap_fallback_warning_enabled
    was(False)
    try:
        looped = torch.vmap(op, in_dims=(0, None))(batch, 1.5)
        assert calls == [(3,)] * 4
        op.register_vmap(lambda info, in_dims, x, beta: (op(x, beta), in_dims[0]))
        calls.clear()
        assert torch.equal(torch.vmap(op, in_dims=(0, None))(batch, 1.5), looped)
        assert calls == [(4, 3)]
    finally:
        was(True)


def test_the_prediction_about_a_float32_fake_and_the_exercise(cells):
    reveal = _text(_cell(cells, 'bl.reveal("l27-predict-fake-dtype")'))
    assert "the answer is 'test_faketensor'" in reveal
    check = _text(_cell(cells, 'bl.check_exercise("l27-rms-norm-op", pieces)'))
    assert check.count("✓ rms_norm op:") == 2  # the visible check and the hidden one
    assert check.count("opcheck: all four tests pass, in float64 and float32") == 2
    assert check.count("no graph break, gradients equal to eager autograd's") == 2
    forward = _text(_cell(cells, "def rms_norm_forward("))
    assert "equals torch's rms_norm: True" in forward


def _outcomes(text: str) -> dict[str, list[str]]:
    """A printed table of transforms: each row's outcomes, by the transform's name."""
    names = ("vmap of grad", "grad", "vjp", "jacrev", "jvp", "jacfwd", "linearize", "vmap")
    rows = {}
    for line in text.splitlines():
        name = next((n for n in names if line.startswith(n + " ")), None)
        if name is not None:
            rows[name] = re.findall(r"WRONG, no error|RuntimeError|NotImplementedError|right",
                                    line[len(name):])
    return rows


def test_every_transform_on_the_op_and_on_two_functions(cells):
    """Sections 7 and 8: on the op, the backward transforms raise, vmap is right, and forward
    mode is wrong without an error (a zero tangent, printed); section 6's Function reaches
    the backward transforms and raises on forward mode and batching; the Function with jvp
    and vmap is right everywhere."""
    op = _outcomes(_cell(cells, "def transforms(f):").outputs[0]["text"])
    assert op == {"grad": ["RuntimeError"], "vjp": ["RuntimeError"], "jacrev": ["RuntimeError"],
                  "vmap of grad": ["RuntimeError"], "jvp": ["WRONG, no error"],
                  "jacfwd": ["WRONG, no error"], "linearize": ["WRONG, no error"],
                  "vmap": ["right"]}
    zeros = _text(_cell(cells, 'print("jvp of the op:'))
    assert "jvp of the op: tensor([0., 0., 0., 0., 0., 0., 0.]" in zeros
    table = _outcomes(_cell(cells, "class SwishEverywhere(").outputs[0]["text"])
    assert {name: row[0] for name, row in table.items()} == {
        name: row[0] for name, row in op.items()}
    assert [table[n][1] for n in ("grad", "vjp", "jacrev")] == ["right"] * 3
    assert [table[n][1] for n in ("jvp", "linearize")] == ["NotImplementedError"] * 2
    assert [table[n][1] for n in ("vmap", "vmap of grad", "jacfwd")] == ["RuntimeError"] * 3
    assert all(row[2] == "right" for row in table.values()) and len(table) == 8


def test_forward_mode_through_a_custom_op_is_a_zero_tangent_measured_again():
    """The locked torch still gives a custom op's output no tangent under forward mode, with
    no error; a torch that fixes it makes section 7's text wrong, and this test says so."""
    op = _op()
    point = torch.linspace(-3, 3, 7, dtype=torch.float64)
    direction = torch.linspace(0.5, 2.0, 7, dtype=torch.float64)
    _, tangent = torch.func.jvp(lambda v: op(v, 1.5), (point,), (direction,))
    assert torch.equal(tangent, torch.zeros(7, dtype=torch.float64))
    _, right = torch.func.jvp(lambda v: v * torch.sigmoid(1.5 * v), (point,), (direction,))
    assert not torch.equal(right, tangent)


def test_the_function_shown_in_exercise_2_carries_the_solution_into_forward_mode(cells):
    """The Function the prompt of Exercise 2 shows, run with the solution's rms_norm_jvp and
    the lesson's numpy forward, gives torch.func.jvp what torch's own rms_norm gives."""
    from backproplab.course.exercises.lesson27.op import rms_norm_forward

    prompt = next(c.source for c in cells.values()
                  if c.cell_type == "markdown" and "### Exercise 2" in c.source)
    shown = re.search(r"```python\n(.*?)```", prompt, re.S).group(1)
    solution = next(c.source for c in cells.values()
                    if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                    == "l27-rms-norm-jvp")
    space = {"torch": torch, "rms_norm_forward": rms_norm_forward}
    exec(solution, space)  # noqa: S102 - the lesson's own solution cell
    exec(shown, space)  # noqa: S102 - the Function the prompt shows
    gen = torch.Generator().manual_seed(24)
    x, x_t = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64)
    w, w_t = torch.randn(2, 5, generator=gen, dtype=torch.float64)
    function = space["RMSNormFunction"]
    got = torch.func.jvp(lambda a, b: function.apply(a, b, 0.5), (x, w), (x_t, w_t))[1]
    want = torch.func.jvp(lambda a, b: torch.nn.functional.rms_norm(a, (5,), b, 0.5),
                          (x, w), (x_t, w_t))[1]
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def _vmap_answer(source: str):
    """An answer to Exercise 3, defined beside the lesson's numpy forward, as the notebook
    defines both."""
    space = {"torch": torch, "np": np}
    exec(compile(_FORWARD + "\n\n" + source, "<exercise 3>", "exec"), space)
    return space["rms_norm_vmap"]


_FORWARD = '''
def rms_norm_forward(x, w, eps):
    a, b = x.detach().numpy(), w.detach().numpy()
    r = 1.0 / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps)
    return torch.from_numpy(a * r * b)
'''


def test_the_vmap_rule_check_on_many_seeds(cells):
    """Exercise 3's check runs a few seeds in the sweep (it registers ops, which the grade's
    sandbox treats as costly): here the solution passes on 12 seeds and every kept wrong
    answer fails on each of them, with its words."""
    import importlib.util

    from backproplab.course.exercises import find_exercise

    solution = "\n".join(line for line in _cell(cells, "def rms_norm_vmap(").source.splitlines()
                         if "### " not in line)
    spec = importlib.util.spec_from_file_location(
        "wrong27", Path(__file__).parents[1] / "wrong_answers" / "lesson27.py")
    wrong = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrong)
    exercise = find_exercise("l27-rms-norm-vmap")
    for seed in range(12):
        assert exercise.check(_vmap_answer(solution), seed=seed).ok
        for source, fragment in wrong.WRONG["l27-rms-norm-vmap"]:
            report = exercise.check(_vmap_answer(source), seed=seed)
            assert not report.ok, (seed, fragment)
            assert fragment.lower() in " ".join(str(report).split()).lower(), (seed, str(report))
