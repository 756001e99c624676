"""The checks take complex numbers: a complex gradient by hand is judged to round-off like a
real one, a numerical estimate on a complex input is still an estimate, and a prediction
whose answer is a complex number takes a Python complex as the guess."""

from __future__ import annotations

import pytest
import torch
from cells import run_cell

import backproplab as bl
from backproplab.course.byhand import check_by_hand
from backproplab.course.grading import Prediction, prediction_report
from backproplab.course.nudges import Nudges, NudgeSeen


def _inputs(gen):
    n = int(torch.randint(2, 6, (1,), generator=gen))
    z = torch.complex(torch.randn(n, generator=gen, dtype=torch.float64),
                      torch.randn(n, generator=gen, dtype=torch.float64))
    g = torch.complex(torch.randn(n, generator=gen, dtype=torch.float64),
                      torch.randn(n, generator=gen, dtype=torch.float64))
    return z, g


def _reference(z, g):
    """autograd's VJP of exp at z, given the gradient g at its output."""
    z = z.requires_grad_()
    return torch.autograd.grad(torch.exp(z), z, g)[0]


def _check(answer, **kw):
    return check_by_hand(answer, _reference, _inputs, name="exp's VJP", **kw)


def test_a_complex_formula_passes_at_round_off():
    report = _check(lambda z, g: g * torch.exp(z).conj())
    assert report.ok, str(report)


def test_a_complex_answer_a_little_off_is_not_a_pass():
    """complex128's default tolerance (1e-7) is an estimate's; by hand asks for round-off."""
    report = _check(lambda z, g: g * torch.exp(z).conj() * (1 + 1e-9))
    assert not report.ok
    assert "numerical estimate" in " ".join(str(report).split())


def test_a_slip_in_a_complex_answer_is_named_when_it_holds():
    report = _check(lambda z, g: g * torch.exp(z),
                    mistakes={"no conjugate": lambda z, g: g * torch.exp(z)})
    assert not report.ok and "no conjugate" in str(report)


def test_central_differences_on_a_complex_input_are_an_estimate():
    def estimate(z, g, h=1e-6):
        return g * ((torch.exp(z + h) - torch.exp(z - h)) / (2 * h)).conj()

    report = _check(estimate)
    assert not report.ok
    assert "numerical estimate" in " ".join(str(report).split())


def test_a_complex_step_on_a_real_input_is_a_nudge():
    x = torch.randn(3, dtype=torch.float64)
    with pytest.raises(NudgeSeen), Nudges([x]) as seen:
        _ = (x.to(torch.complex128) + 1e-20j).sin()
    assert seen.nudged() == 0
    with Nudges([x]) as seen:  # one shift by a number is a derivation's, complex or not
        _ = (x + 2j) * x
    assert seen.nudged() is None


def test_a_complex64_answer_is_told_its_dtype():
    report = _check(lambda z, g: (g * torch.exp(z).conj()).to(torch.complex64))
    assert not report.ok
    assert "complex64 where the task asks for complex128" in " ".join(str(report).split())


def test_compare_takes_a_python_complex():
    assert bl.compare("z.grad", 2 + 4j, torch.tensor(2 + 4j, dtype=torch.complex128)).ok
    assert not bl.compare("z.grad", 2 - 4j, torch.tensor(2 + 4j, dtype=torch.complex128)).ok


def test_a_prediction_with_a_complex_answer():
    q = Prediction("z.grad", answer=lambda: 2 + 4j, hint="think", why="it is {answer}")
    assert prediction_report(q, 2 + 4j).ok
    assert prediction_report(q, complex(2, 4)).ok
    assert not prediction_report(q, 1 + 2j).ok
    assert not prediction_report(q, 2.0).ok


def test_a_complex_step_on_the_real_input_of_a_complex_exercise_is_an_estimate():
    """With a complex input complex arithmetic is allowed; a real input moved by a tiny
    imaginary step is still the complex-step trick."""
    def inputs(gen):
        z, g = _inputs(gen)
        return z, torch.randn(z.shape, generator=gen, dtype=torch.float64)

    def reference(z, r):  # d/dr of (r * |z|²).sum() is |z|²
        return z.abs() ** 2

    def complex_step(z, r):
        h = 1e-20
        return ((r + h * 1j) * z.abs() ** 2).imag / h

    report = check_by_hand(complex_step, reference, inputs, name="d/dr")
    assert not report.ok
    assert "numerical estimate" in " ".join(str(report).split())
    assert check_by_hand(lambda z, r: (z * z.conj()).real, reference, inputs, name="d/dr").ok


def test_an_exercise_may_allow_complex_numbers():
    """A by-hand exercise about complex gradients needs z.conj(); its vocabulary allows
    complex numbers for it alone, and every other refusal stays."""
    from backproplab.course.byhand import ByHand
    from backproplab.course.rules import BY_HAND

    def make(vocabulary):
        return ByHand(name="exp's VJP", reference=_reference, make_inputs=_inputs,
                      vocabulary=vocabulary)

    space = run_cell("def right(z, g):\n    return g * torch.exp(z).conj()\n\n\n"
                     "def still(z, g):\n    return eval('g') * torch.exp(z).conj()\n",
                     {"torch": torch})
    assert not make(BY_HAND).check(space["right"])
    assert "complex numbers" in str(make(BY_HAND).check(space["right"]))
    complex_ok = BY_HAND.allowing(complex_numbers=True)
    assert make(complex_ok).check(space["right"])
    refused = make(complex_ok).check(space["still"])
    assert not refused and "eval" in str(refused)


def test_the_audit_allows_the_same_for_the_same_exercises():
    """A complex answer's z.conj() is not listed for an exercise whose vocabulary allows
    complex numbers (lesson 22's complex VJPs), and is listed for one that does not."""
    import nbformat

    from backproplab.course.audit import findings_in

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import torch\nimport backproplab as bl"))
    base = {"locked": False, "schema_version": 3, "task": False}
    for key, name in (("l22-complex-vjps", "vjps"), ("l22-hinge-kinks", "kinks")):
        cell = nbformat.v4.new_code_cell(f"def {name}(z, g):\n    return g * z.conj()\n")
        cell.metadata["nbgrader"] = {**base, "grade": False, "grade_id": key, "solution": True}
        check = nbformat.v4.new_code_cell(f'bl.check_exercise("{key}", {name})')
        check.metadata["nbgrader"] = {**base, "grade": True, "grade_id": f"{key}-check",
                                      "points": 1, "solution": False, "locked": True}
        nb.cells += [cell, check]
    listed = {f.grade_id for f in findings_in(nb, "student.ipynb")
              if "vocabulary" in f.what and "complex numbers" in f.what}
    assert listed == {"l22-hinge-kinks"}
