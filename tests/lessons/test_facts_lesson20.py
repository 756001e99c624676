"""Lesson 20's claims, computed again on the locked torch: which expressions return views
(and their strides), one version counter for a tensor, its views and detach(), a write into a
view giving the base CopySlices and the view AsStridedBackward0 (with the gradients the trace
shows), `y[1:3] *= w` as two writes, a buffer that starts to need a gradient, the saved view
written over, index_put_'s backward with and without accumulate, the four refusals,
mark_dirty on a view, the .grad layout contract, the worked example of exercise 1 and the
engine of exercise 2 (the notebook's cells are the check's engine)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import warnings
from pathlib import Path

import nbformat
import pytest
import torch
from stored import printed

from backproplab.course.exercises import lesson20
from backproplab.course.exercises.lesson20.engine_source import ENGINE_CELLS

LESSON = Path(__file__).parents[2] / "notebooks" / "20-views-and-in-place.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}


def _prose(cells, *ids) -> str:
    return " ".join(" ".join(cells[i].source.split()) for i in ids)


def _name(node) -> str:
    """A node's name without the C++ namespace: CopySlices, not torch::autograd::CopySlices."""
    return node.name().rsplit("::", 1)[-1]


def _x() -> torch.Tensor:
    return torch.arange(12.0).reshape(3, 4).clone()


# --------------------------------------------------------------------------- 1. views


def test_which_expressions_are_views_and_their_strides(cells):
    x = _x()
    made = dict(zip(lesson20.VIEW_CANDIDATES, lesson20._candidates(x), strict=True))
    views = [name for name, t in made.items() if t._base is x]
    assert views == ["x.t()", "x[:, 1]", "x.expand(2, 3, 4)", "x.reshape(2, 6)"]
    assert lesson20.PREDICTIONS["l20-predict-views"].answer() == [1, 3, 4, 7]
    assert [t._is_view() for t in made.values()] == [t._base is x for t in made.values()]
    out = printed(cells["l20-05"])
    for name, t in made.items():
        kind = "view" if t._base is x else "copy"
        assert f"{name:<19} {kind}  shape {str(tuple(t.shape)):<10} strides {t.stride()}" in out
    # the question lists the expressions in the order the check numbers them
    question = _prose(cells, "l20-04")
    assert all(f"{n}. `{name}`" in question for n, name in enumerate(lesson20.VIEW_CANDIDATES, 1))
    # a view of a view names the first owner; view refuses where reshape copies
    assert x.t()[0]._base is x and x[1]._base is x
    with pytest.raises(RuntimeError):
        x.t().view(12)
    with pytest.raises(RuntimeError):  # no negative strides for flip to use
        torch.as_strided(x, (3,), (-1,), 2)
    assert x[1].stride() == (1,) and x[1].storage_offset() == 4


def test_one_version_counter_for_a_tensor_its_views_and_detach(cells):
    x = _x()
    col, d = x[:, 1], x.detach()
    col.mul_(2)
    assert (x._version, col._version, d._version) == (1, 1, 1)
    d.zero_()
    assert (x._version, col._version, d._version) == (2, 2, 2)
    assert not d._is_view() and d.data_ptr() == x.data_ptr()
    assert "after d.zero_(): 2 2 2" in " ".join(printed(cells["l20-09"]).split())
    a = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    s = a.sigmoid()
    s[0] = 0.0
    with pytest.raises(RuntimeError, match="output 0 of Sigmoid, is at version 1"):
        s.sum().backward()


# --------------------------------------------------------------------------- 2. CopySlices


def test_a_write_into_a_view_rewrites_the_base_history(cells):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    w = torch.tensor([5.0, 6.0], requires_grad=True)
    y = x * 2
    v = y[1:3]
    assert v.grad_fn.name() == "SliceBackward0"
    old = y.grad_fn
    v.mul_(w)
    assert _name(y.grad_fn) == "CopySlices" and v.grad_fn.name() == "AsStridedBackward0"
    assert y.grad_fn.next_functions[0][0] is old  # the old node, kept as the first input
    assert v.grad_fn.next_functions[0][0] is y.grad_fn  # the view goes through the base
    assert y._version == v._version == 1
    y.sum().backward()
    assert w.grad.tolist() == [4.0, 6.0] and x.grad.tolist() == [2.0, 10.0, 12.0, 2.0]
    assert "leaf grads: x = [2, 10, 12, 2], w = [4, 6]" in printed(cells["l20-18"])
    # a view taken before the write gets a node made anew when asked after it
    y = x * 2
    m = y.view(2, 2)
    assert m.grad_fn.name() == "ViewBackward0"
    y[0] = 0.0
    assert m.grad_fn.name() == "AsStridedBackward0"


def test_augmented_assignment_into_a_slice_is_two_writes(cells):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    w = torch.tensor([5.0, 6.0], requires_grad=True)
    y = x * 2
    y[1:3] *= w
    assert y._version == 2
    assert _name(y.grad_fn) == "CopySlices"
    assert _name(y.grad_fn.next_functions[0][0]) == "CopySlices"
    y.sum().backward()  # the second write, of the view onto itself, changes nothing
    assert w.grad.tolist() == [4.0, 6.0] and x.grad.tolist() == [2.0, 10.0, 12.0, 2.0]
    assert "`y` ends at version 2 with two `CopySlices`" in _prose(cells, "l20-21")


def test_a_buffer_needs_a_gradient_once_one_is_written_into_it(cells):
    s = torch.tensor(3.0, requires_grad=True)
    out = torch.zeros(3)
    assert not out.requires_grad and out.grad_fn is None
    out[1] = s * 2
    assert out.requires_grad and _name(out.grad_fn) == "CopySlices"
    out.sum().backward()
    assert s.grad.item() == 2.0 and "s.grad: tensor(2.)" in printed(cells["l20-22"])


def test_a_saved_view_written_over_and_the_clone_that_fixes_it(cells):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], requires_grad=True)
    b = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.clone()
    y[2:5] = b * y[1:4]
    with pytest.raises(RuntimeError, match="output 0 of AsStrided, is at version 1"):
        y.sum().backward()
    y = x.clone()
    y[2:5] = b * y[1:4].clone()
    y.sum().backward()
    # the overwritten window 2:5 sends nothing; the read window 1:4 gets b
    assert x.grad.tolist() == [1.0, 2.0, 2.0, 3.0, 0.0, 1.0]
    assert b.grad.tolist() == [2.0, 3.0, 4.0]


# --------------------------------------------------------------------------- 3. index_put_


def test_index_put_backward_and_repeated_indices(cells):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    v = torch.tensor([10.0, 20.0], requires_grad=True)
    g = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    y = x * 1
    y[torch.tensor([3, 0])] = v
    assert y.grad_fn.name() == "IndexPutBackward0"
    y.backward(g)
    assert x.grad.tolist() == [0.0, 2.0, 3.0, 0.0, 5.0] and v.grad.tolist() == [4.0, 1.0]
    assert lesson20.PREDICTIONS["l20-predict-duplicates"].answer() == [2.0, 2.0]
    for accumulate, x_grad in ((False, [1.0, 0.0, 3.0, 4.0, 5.0]),
                               (True, [1.0, 2.0, 3.0, 4.0, 5.0])):
        x.grad = v.grad = None
        y = x * 1
        y.index_put_((torch.tensor([1, 1]),), v, accumulate=accumulate)
        y.backward(g)
        assert x.grad.tolist() == x_grad and v.grad.tolist() == [2.0, 2.0]
        assert y[1].item() in ((10.0, 20.0) if not accumulate else (32.0,))
    # what the prose before the question says gives the answer away nowhere
    before = _prose(cells, "l20-25", "l20-27")
    assert "g[idx]" not in before and "gathers" not in before


# --------------------------------------------------------------------------- 4. refusals


def test_the_writes_torch_refuses():
    w = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[0] = 0.0
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w.mul_(2)
    y = w * 1
    with torch.no_grad():
        tail = y[1:]
    with pytest.raises(RuntimeError, match="created in no_grad mode"):
        tail.mul_(2)
    with torch.no_grad():  # both inside no_grad: allowed
        tail.mul_(2)
    first, _, _ = (w * 1).unbind()
    with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view"):
        first.mul_(2)
    y = w * 1
    head, _ = y.split(2)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="Output 0 of Split is a view"):
        head.grad_fn  # noqa: B018 - reading the node is what raises
    two = (w * 1)[:2]  # indexing makes one view per call: it may be written
    two.mul_(2)
    assert two.grad_fn.name() == "AsStridedBackward0"


def test_mark_dirty_on_a_view_is_wrapped_in_copy_slices():
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.mark_dirty(t)
            return t.mul_(2)

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    x = torch.ones(4, requires_grad=True)
    y = x * 1
    Double.apply(y[1:3])
    assert _name(y.grad_fn) == "CopySlices"
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 2.0, 1.0]


# --------------------------------------------------------------------------- 5. .grad layout


def test_the_grad_layout_contract(cells):
    params = {
        "contiguous": torch.randn(4, 6),
        "transposed": torch.randn(6, 4).t(),
        "channels last": torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
        "every other column": torch.randn(4, 12)[:, ::2],
        "expanded": torch.randn(4, 1).expand(4, 6),
    }
    kept = []
    for name, data in params.items():
        p = data.detach().requires_grad_()
        (p * 2).sum().backward()
        if p.grad.stride() == p.stride():
            kept.append(name)
        else:
            assert p.grad.is_contiguous()
    assert kept == ["contiguous", "transposed", "channels last"]
    p = torch.randn(6, 4).t().detach().requires_grad_()
    p.grad = torch.zeros(4, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (p * 2).sum().backward()
    assert p.grad.stride() == (6, 1) and torch.equal(p.grad, torch.full((4, 6), 2.0))
    assert any("gradient layout contract" in str(w.message) for w in caught)


# --------------------------------------------------------------------------- exercises


def test_exercise_1_worked_example_and_its_graph(cells):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], requires_grad=True)
    a = torch.tensor([2.0, 3.0, 4.0], requires_grad=True)
    b = torch.tensor([10.0, 20.0, 30.0], requires_grad=True)
    y = lesson20.two_writes(x, a, b, 1, 2)
    assert y.tolist() == [1.0, 4.0, 40.0, 180.0, 480.0, 6.0]
    assert _name(y.grad_fn) == "CopySlices"
    assert _name(y.grad_fn.next_functions[0][0]) == "CopySlices"
    assert "y = tensor([  1.,   4.,  40., 180., 480.,   6.])" in printed(cells["l20-41"])
    # the lesson's own two_writes is the check's (docstring and comments aside)
    shown = next(n for n in ast.parse(cells["l20-41"].source).body
                 if isinstance(n, ast.FunctionDef) and n.name == "two_writes")
    kept = ast.parse(textwrap.dedent(inspect.getsource(lesson20.two_writes))).body[0]
    assert ast.dump(ast.Module(shown.body, [])) == ast.dump(ast.Module(kept.body[1:], []))
    # the by-hand steps, every slip off, agree with autograd on fresh trials
    for seed in range(5):
        inputs = lesson20._windows_inputs(torch.Generator().manual_seed(seed))
        for mine, torch_s in zip(lesson20._windows(*inputs), lesson20._windows_reference(*inputs),
                                 strict=True):
            assert torch.allclose(mine, torch_s, rtol=1e-12, atol=1e-12)


def test_exercise_2_engine_cells_are_the_checks_engine(cells):
    def code(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if line.strip())

    assert code(cells["l20-44"].source) == code(ENGINE_CELLS[0])
    assert code(cells["l20-45"].source) == code(ENGINE_CELLS[1])
    assert "equal to round-off: True" in printed(cells["l20-46"])
