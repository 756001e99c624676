"""Unit tests of backproplab.course.grading: the helpers every graded check is built on.

The lessons' own checks are tested against recorded wrong answers in
test_exercises.py; here each helper is tested by itself, on answers made up
for the test, so a change to a helper cannot hide behind a lesson.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.autograd.variable import Variable
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

import backproplab as bl
from backproplab.course import grading
from backproplab.watch import AutogradForbidden


def _square_sum_grad(x):
    return torch.func.grad(lambda t: (t**2).sum())(x)


def _inputs(gen):
    n = int(torch.randint(2, 6, (1,), generator=gen))  # new shapes too
    return (torch.randn(n, generator=gen, dtype=torch.float64),)


def _check(answer, **kwargs):
    return bl.check_by_hand(answer, reference=_square_sum_grad, make_inputs=_inputs,
                            name="dz/dx", **kwargs)


# --------------------------------------------------------------------------
# check_by_hand
# --------------------------------------------------------------------------


def test_a_correct_formula_passes_on_every_trial():
    report = _check(lambda x: 2 * x, trials=5)
    assert report.ok
    assert str(report) == "✓ dz/dx: matches autograd on 5 new random inputs"


def test_the_answer_sees_fresh_inputs_each_trial():
    seen = []

    def answer(x):
        seen.append(x.clone())
        return 2 * x

    assert _check(answer, trials=4).ok
    assert len(seen) == 4
    assert len({tuple(x.tolist()) for x in seen}) == 4


def test_the_answer_runs_with_torchs_default_dtype_whatever_the_notebook_set():
    """The grade runs an answer in a fresh process, where torch's default dtype is float32:
    the kernel's feedback runs it so too, and leaves the notebook's setting as it was."""
    def made_without_dtype(x):
        out = torch.zeros(x.shape)
        out += 2 * x  # written into a tensor of the default dtype
        return out

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        report = _check(made_without_dtype)
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(before)
    assert not report.ok
    assert "float32 while the inputs are float64" in " ".join(str(report).split())


@pytest.mark.parametrize(
    "hard_coded",
    [
        lambda x: torch.tensor([0.5, -1.25, 3.0], dtype=torch.float64),  # one point's numbers
        lambda x: torch.full_like(x, 2.0),  # one number broadcast to the shape
        lambda x: 4.0,
    ],
    ids=["tensor", "broadcast", "float"],
)
def test_a_hard_coded_answer_fails_and_says_so(hard_coded):
    report = _check(hard_coded)
    assert not report.ok
    assert report[0].verdict == "hard-coded"
    assert "looks hard-coded" in str(report)


@pytest.mark.parametrize(
    ("shortcut", "named"),
    [
        (lambda x: torch.autograd.grad((x.requires_grad_() ** 2).sum(), x)[0],
         "torch.autograd.grad"),
        (lambda x: _backward_then_grad(x), "Tensor.backward()"),
        (lambda x: torch.func.grad(lambda t: (t**2).sum())(x), "torch.func.grad"),
        (lambda x: jacrev(lambda t: (t**2).sum())(x), "torch.func.jacrev"),
        (lambda x: jvp(lambda t: (t**2).sum(), (x,), (torch.ones_like(x),))[1] * 0 + 2 * x,
         "torch.func.jvp"),
        (lambda x: torch.autograd.functional.jacobian(lambda t: (t**2).sum(), x),
         "torch.autograd.functional.jacobian"),
    ],
    ids=["autograd.grad", "backward", "func.grad", "jacrev", "jvp", "functional"],
)
def test_calling_autograd_fails_and_names_the_call(shortcut, named):
    report = _check(shortcut)
    assert not report.ok
    assert report[0].verdict == "autograd"
    assert named in str(report)
    assert "asks for the gradient by hand" in str(report)


def _backward_then_grad(x):
    x.requires_grad_()
    (x**2).sum().backward()
    return x.grad


def test_a_slip_is_named_when_a_mistake_matches():
    report = _check(lambda x: x, mistakes={"the factor 2 of the power rule is missing":
                                           lambda x: x})
    assert not report.ok
    assert "the factor 2 of the power rule is missing" in str(report)


def test_no_slip_is_named_when_none_matches():
    report = _check(lambda x: 3 * x + 1, mistakes={"the sign is flipped": lambda x: -2 * x})
    assert not report.ok
    assert "sign" not in str(report)


def test_an_unwritten_or_crashing_answer_is_a_failed_check_not_a_crash():
    def unwritten(x):
        raise NotImplementedError

    assert _check(unwritten)[0].verdict == "missing"
    crashed = _check(lambda x: x @ torch.ones(99, dtype=x.dtype))
    assert crashed[0].verdict == "error"
    assert "RuntimeError" in str(crashed)


def test_a_number_instead_of_a_function_is_refused_with_the_reason():
    report = _check(4.0)
    assert not report.ok
    assert "expected a function" in str(report)


def test_the_answer_cannot_change_what_the_reference_sees():
    def vandal(x):
        x.mul_(0)
        return 2 * x

    # The reference runs on its own copy, so the mismatch is the vandal's
    # zeros against the true 2x, not zeros against zeros.
    assert not _check(vandal).ok


def test_several_outputs_are_checked_and_named():
    def ref(x, w):
        return w.detach().clone(), x.detach().clone()  # d(x*w)/dx, d(x*w)/dw

    def make(gen):
        return torch.randn(3, generator=gen), torch.randn(3, generator=gen)

    ok = bl.check_by_hand(lambda x, w: (w, x), ref, make, outputs=["dx", "dw"])
    assert ok.ok and [c.name for c in ok] == ["dx", "dw"]
    swapped = bl.check_by_hand(lambda x, w: (x, w), ref, make, outputs=["dx", "dw"])
    assert not swapped.ok and swapped[0].name == "dx"


# --------------------------------------------------------------------------
# forbid_autograd and count_autograd
# --------------------------------------------------------------------------


def test_forbid_restores_autograd_after_an_error():
    engine, make_dual = Variable._execution_engine, fwAD.make_dual
    x = torch.tensor(2.0, requires_grad=True)
    with pytest.raises(AutogradForbidden, match=r"Tensor\.backward\(\)"):
        with bl.forbid_autograd():
            (x * x).backward()
    assert Variable._execution_engine is engine
    assert fwAD.make_dual is make_dual
    (x * x).backward()
    assert x.grad.item() == 4.0


def test_forbid_refuses_dual_numbers_and_says_so():
    with pytest.raises(AutogradForbidden, match="forward_ad.make_dual"):
        with bl.forbid_autograd("no tangents here"), fwAD.dual_level():
            fwAD.make_dual(torch.ones(2), torch.ones(2))


def test_forbid_says_how_in_the_exercises_words_and_refuses_words_that_are_not():
    x = torch.tensor(2.0, requires_grad=True)
    with pytest.raises(AutogradForbidden, match=r"called Tensor\.backward\(\)\. Count them\.$"):
        with bl.forbid_autograd("count the paths yourself", how="Count them."):
            (x * x).backward()
    for bad in ({"how": None}, {"reason": 3}):
        with pytest.raises(TypeError, match=f"forbid_autograd: {next(iter(bad))} must be a str"):
            with bl.forbid_autograd(**bad):
                pass


def test_forbid_leaves_plain_tensor_code_alone():
    with bl.forbid_autograd():
        y = torch.tanh(torch.linspace(-1, 1, 5))
        dy = 1 - y**2
    assert dy.shape == (5,)


def test_count_autograd_counts_each_backward_call():
    x = torch.tensor(3.0, requires_grad=True)
    with bl.count_autograd() as seen:
        y = x * x
        y.backward(retain_graph=True)
        y.backward()
    assert (seen.reverse, seen.forward) == (2, 0)
    assert seen.calls == ["Tensor.backward()", "Tensor.backward()"]
    assert x.grad.item() == 12.0  # the counting did not change the result


@pytest.mark.parametrize(
    ("run", "reverse", "forward", "named"),
    [
        (lambda f, x, v: jvp(f, (x,), (v,)), 0, 1, "torch.func.jvp"),
        (lambda f, x, v: jacfwd(f)(x) @ v, 0, 1, "torch.func.jacfwd"),
        (lambda f, x, v: vjp(f, x)[1](v), 1, 0, "torch.func.vjp"),
        (lambda f, x, v: jacrev(f)(x), 1, 0, "torch.func.jacrev"),
        (lambda f, x, v: grad(lambda t: f(t).sum())(x), 1, 0, "torch.func.grad"),
        (lambda f, x, v: vmap(grad(lambda t: f(t).sum()))(x.expand(2, 3)), 1, 0,
         "torch.func.vmap"),
        # the learner's own function between vmap and grad: still batched by the vmap
        (lambda f, x, v: vmap(lambda row: grad(lambda t: f(t).sum())(row))(x.expand(2, 3)),
         1, 0, "torch.func.vmap"),
    ],
    ids=["jvp", "jacfwd", "vjp", "jacrev", "grad", "vmap", "vmap of a closure"],
)
def test_count_autograd_names_the_transform_the_code_called(run, reverse, forward, named):
    x = torch.randn(3, dtype=torch.float64)
    with bl.count_autograd() as seen:
        run(torch.sin, x, torch.ones(3, dtype=torch.float64))
    assert (seen.reverse, seen.forward) == (reverse, forward)
    assert set(seen.calls) == {named}


def test_a_hessian_shows_both_modes():
    with bl.count_autograd() as seen:
        hessian(lambda t: (t**3).sum())(torch.randn(3, dtype=torch.float64))
    assert seen.reverse >= 1 and seen.forward >= 1


# --------------------------------------------------------------------------
# check_prediction
# --------------------------------------------------------------------------


def _question(answer, **kw):
    return bl.Prediction("guess", answer=lambda: answer, hint="look again", why="the reason",
                         **kw)


@pytest.mark.parametrize(
    ("prediction", "answer", "right"),
    [
        (4, 4.0, True),
        (4, torch.tensor(4.0), True),
        ([2, 2], torch.tensor([2.0, 2.0]), True),
        (3, 4.0, False),
        (" Jacrev ", "jacrev", True),
        ("jacfwd", "jacrev", False),
        (("jacrev", "JACFWD"), ("jacrev", "jacfwd"), True),
        (("jacrev",), ("jacrev", "jacfwd"), False),
        ("jacrev", ("jacrev", "jacfwd"), False),
        (True, True, True),
        (1, True, False),  # a bool question wants a bool
        ("4", 4.0, False),
        (None, "None", True),  # Python's None means the word
        ("none", None, True),
        (None, 0.0, False),
    ],
)
def test_check_prediction_grades_without_giving_the_answer(prediction, answer, right):
    report = grading.prediction_report(_question(answer), prediction)
    assert report.ok is right
    assert "the reason" not in str(report)  # the why is for reveal()
    if not right:
        assert "not quite" in str(report) and "look again" in str(report)
        assert repr(answer) not in str(report).replace(repr(prediction), "")


def test_no_prediction_yet_is_the_ellipsis():
    report = grading.prediction_report(_question(2.0), ...)
    assert not report.ok and report[0].verdict == "missing"
    assert "no prediction yet" in str(report)


def test_a_guess_outside_the_choices_is_told_the_choices():
    report = grading.prediction_report(_question("add", choices=("add", "sigmoid")), "mul")
    assert not report.ok and "'add', 'sigmoid'" in str(report)


def test_reveal_gives_the_answer_why_and_the_first_guess(capsys):
    q = _question(4.0)
    with pytest.raises(AssertionError, match="not quite"):
        bl.check_prediction(q, 3)
    assert bl.check_prediction(q, 4) is None
    bl.reveal(q)
    out = capsys.readouterr().out
    assert "the answer is 4.0" in out and "the reason" in out
    assert "first checked guess was 3: not right" in out
    assert "after the answer was revealed" in str(grading.prediction_report(q, 4))
