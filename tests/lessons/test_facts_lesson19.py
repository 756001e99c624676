"""Lesson 19's corrected facts, read from the stored outputs, so that an edit cannot bring
back the old claims: once_differentiable drops a Function's second-order part silently when
the first gradient has another path ([6, 12] instead of [8, 14]); the naive softplus's NaN is
0 · inf in ExpBackward0, not inf / inf; Functions in the forward(ctx, ...) form raise under
torch.func while the setup_context form works; mark_dirty and mark_non_differentiable; no
stale grade ids."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import torch
from stored import output_text as _text

ROOT = Path(__file__).parents[2]
LESSON = ROOT / "notebooks" / "19-custom-functions.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}




def _markdown(cells) -> str:
    return "\n".join(c.source for c in cells.values() if c.cell_type == "markdown")


def test_once_differentiable_drops_the_second_order_part_silently(cells):
    text = _text(cells["l19-51"])
    assert "first derivative:  tensor([ 5., 16.])" in text
    assert "second derivative: tensor([ 6., 12.])" in text
    assert "truth 2 + 6x = tensor([ 8., 14.])" in text
    assert "Error" not in text and "error" not in text
    assert "[6.0, 12.0]" in _text(cells["l19-predict-once-reveal"])
    assert "say so openly" not in _markdown(cells)


def test_once_differentiable_alone_raises(cells):
    assert "does not require grad" in _text(cells["l19-27"])


def test_softplus_nan_is_zero_times_inf_in_exp_backward(cells):
    rows = {line.split()[2]: line for line in _text(cells["l19-55"]).splitlines()
            if line.strip()[:1].isdigit()}
    assert "nan" not in rows["LogBackward0"] and "0]" in rows["LogBackward0"]
    assert rows["ExpBackward0"].rstrip().endswith("[0.5, nan]")
    prose = _markdown(cells)
    assert "inf / inf" not in prose and "0 · inf = NaN" in prose


def test_old_form_raises_under_torch_func_and_new_form_works(cells):
    assert "must override the setup_context staticmethod" in _text(cells["l19-61"])
    text = _text(cells["l19-64"])
    assert "torch.func.grad:         tensor([2., 4., 6.])" in text
    assert "torch.func.vmap:         [[1.0, 4.0], [9.0, 16.0]]" in text
    assert "vmap of grad, per row:   [[2.0, 4.0], [6.0, 8.0]]" in text
    assert "generate_vmap_rule = True" in cells["l19-63"].source


def test_mark_dirty_and_mark_non_differentiable(cells):
    marked = _text(cells["l19-67"])
    assert "same tensor: True  b.grad_fn: DoubleInPlaceBackward" in marked
    assert "a.grad = tensor([16., 24.])" in marked
    unmarked = _text(cells["l19-69"])
    assert "b.grad_fn: AddBackward0" in unmarked and "a.grad = tensor([ 8., 12.])" in unmarked
    indices = _text(cells["l19-71"])
    assert "indices: tensor([1, 0]) requires_grad: False" in indices
    assert "values: tensor([5., 4.]) requires_grad: True" in indices


def test_the_engine_sums_a_broadcast_shaped_gradient(cells):
    """Moved here from lesson 09, which uses no custom Function."""
    printed = " ".join(_text(cells["l19-78"]).split())
    assert "backward returns shapes (3, 4) and (3, 4)" in printed
    assert "x.grad (3, 1) y.grad (1, 4)" in printed
    assert "l08-broadcast-function" not in _markdown(cells)


def test_logsumexp_exercise_is_checked_far_from_zero_and_twice(cells):
    text = " ".join(_text(cells["l19-logsumexp-check"]).split())  # as wrapped to the lab's width
    assert text.count("far from 0: forward and backward finite and right") == 2
    assert text.count("gradgradcheck: passed") == 2


def test_recap_cites_only_what_the_lesson_shows(cells):
    assert "sigmoid" not in cells["l19-36"].source.lower()
    assert "[6, 12]" in cells["l19-36"].source and "[8, 14]" in cells["l19-36"].source


@pytest.mark.parametrize("stale", ["l19-cube", "l19-sigmoid", "l14-reverse", "l19-tanh-output"])
def test_no_stale_grade_ids(stale):
    checks = sorted((ROOT / "backproplab" / "course" / "exercises" / "lesson19").glob("*.py"))
    assert checks, "the lesson's checks were not found"
    for path in (LESSON, *checks, ROOT / "tests" / "wrong_answers" / "lesson19.py",
                 ROOT / "tests" / "cheats" / "lesson19.py"):
        text = path.read_text()
        assert stale not in text, f"{path.name} still names {stale}"
    ids = [json.dumps(c.get("metadata", {})) + c.get("id", "")
           for c in json.loads(LESSON.read_text())["cells"]]
    assert not [i for i in ids if stale in i]


def test_once_differentiable_error_node_raises_in_backward_and_is_skipped_by_grad(cells):
    """With an incoming gradient that requires grad, the results get an Error node:
    .backward() raises through it, autograd.grad leaves it out and returns a part."""
    text = _text(cells["l19-75"])
    assert "first derivative, 3x² (right): tensor([ 3., 12.])" in text
    assert "the nodes below it: ['MulBackward0', 'torch::autograd::Error']" in text
    assert "torch.autograd.grad, second derivative: tensor([2., 4.])" in text
    assert "truth 6x: tensor([ 6., 12.])" in text
    assert "raises-exception" in cells["l19-76"].metadata.get("tags", [])
    assert "trying to differentiate twice" in _text(cells["l19-76"])
    prose = cells["l19-77"].source
    assert "`Error` node" in prose and "2x instead of 6x" in prose
    assert "raises only in some cases" not in _markdown(cells)


def test_an_output_stashed_on_ctx_is_freed_late_not_leaked(cells):
    """The cycle output -> node -> ctx -> output survives `del` and goes at gc.collect()."""
    rows = _text(cells["l19-73"]).splitlines()
    assert rows == [
        "Exp        output alive after del: False  after gc.collect(): False",
        "StashedExp output alive after del: True   after gc.collect(): False",
    ]
    prose = _markdown(cells)
    assert "can leak memory" not in prose and "not a leak" in prose


def test_the_in_place_exercise_saves_the_output_and_is_checked_far_from_zero(cells):
    text = " ".join(_text(cells["l19-softplus-in-place-check"]).split())
    assert text.count("in place: softplus written into x, declared with mark_dirty") == 2
    assert text.count("far from 0: forward and backward finite and right") == 2
    solution = cells["l19-softplus-in-place"].source
    assert "mark_dirty" in solution and "save_for_backward(output)" in solution


def test_gradgradcheck_in_a_check_does_not_depend_on_what_ran_before():
    """gradgradcheck draws its grad_outputs from the global generator: inside a check it is
    seeded, so a backward that detaches fails whatever state the learner's kernel is in."""
    import torch

    from backproplab.course.exercises.lesson19.calling import torch_check

    class Detached(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = torch.logsumexp(x, -1)
            ctx.save_for_backward(x, out)
            return out

        @staticmethod
        def backward(ctx, g):
            x, out = ctx.saved_tensors
            return g.unsqueeze(-1) * torch.exp(x - out.unsqueeze(-1)).detach()

    # Seed 30's input: one entry far above the others, so the part the detach loses is
    # small, and some grad_outputs gradgradcheck could draw let it through.
    x = torch.tensor([-0.8441, 6.0562, -0.4023, -4.8006], dtype=torch.float64)
    seen = set()
    for state in (0, 105, 161, 203, 231):  # 105 and after: states that let it through
        torch.manual_seed(state)
        seen.add(tuple(torch_check(torch.autograd.gradgradcheck, Detached.apply, (x,))))
    assert seen == {(False, "")}


class _StashedPower(torch.autograd.Function):
    """Exercise 1's PowerMix with its tensors kept as ctx attributes: right, but fragile."""

    @staticmethod
    def forward(ctx, x, y, p):
        ctx.x, ctx.y, ctx.p = x, y, p
        return x**p * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y, p = ctx.x, ctx.y, ctx.p
        return grad_output * p * x ** (p - 1) * y, grad_output * x**p, None


class _SavedPower(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, p):
        ctx.save_for_backward(x, y)
        ctx.p = p  # a plain number: nothing for autograd to track
        return x**p * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return grad_output * ctx.p * x ** (ctx.p - 1) * y, grad_output * x**ctx.p, None


def test_a_function_keeping_tensors_on_ctx_passes_with_the_warning_section_3_promises(cells):
    from backproplab.course.grading import find_exercise

    assert "The checker warns about it." in _markdown(cells)
    kept = find_exercise("l19-power-mix").check(_StashedPower)
    assert kept.ok and [c.verdict for c in kept.checks] == ["pass", "warning"]
    assert "keeps ctx.x, ctx.y as plain ctx attributes" in str(kept)
    saved = find_exercise("l19-power-mix").check(_SavedPower)
    assert saved.ok and [c.verdict for c in saved.checks] == ["pass"]
    # Without the warning, the in-place change section 3 speaks of goes unnoticed.
    x, y = torch.rand(3, dtype=torch.float64) + 0.5, torch.rand(3, dtype=torch.float64)
    for fn, noticed in ((_SavedPower, True), (_StashedPower, False)):
        xi, yg = x * 1, y.clone().requires_grad_()
        out = fn.apply(xi, yg, 2.0)
        xi.add_(1.0)
        try:
            torch.autograd.grad(out.sum(), yg)
            raised = False
        except RuntimeError:
            raised = True
        assert raised is noticed
