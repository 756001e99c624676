"""Checks that mean what they say: "by hand" refuses every shortcut, a mistake is
named only when it holds, warnings never reach stderr.

Shortcuts kept as data for the lessons are in tests/cheats/; this file tests the
machinery on small functions of its own.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import backproplab as bl
from backproplab.course import rules, slips
from backproplab.course.grading import Method


def _cube(x):
    return (x**3 - 4 * x**2 + 5).sum()


def _reference(x):
    x = x.requires_grad_()
    _cube(x).backward()
    return x.grad


def _inputs(gen):
    n = int(torch.randint(2, 6, (1,), generator=gen))
    return (torch.randn(n, generator=gen) * 3,)


def _check(answer, **kw):
    return bl.check_by_hand(answer, _reference, _inputs, name="d/dx", **kw)


def _right(x):
    return 3 * x**2 - 8 * x


# --------------------------------------------------------------------------
# "By hand" means by hand
# --------------------------------------------------------------------------


def test_a_derived_formula_passes_at_round_off():
    report = _check(_right)
    assert report.ok and "matches autograd" in str(report)


def _central_differences(x, h=1e-6):
    def f(t):
        return t**3 - 4 * t**2 + 5

    return (f(x + h) - f(x - h)) / (2 * h)


def _grad_fn_call(x):
    with torch.enable_grad():
        x.requires_grad_()
        y = x**3 - 4 * x**2 + 5
        return y.grad_fn(torch.ones_like(y))


def _complex_step(x):
    z = x.to(torch.complex128) + 1e-20j
    return (z**3 - 4 * z**2 + 5).imag / 1e-20


@pytest.mark.parametrize(
    ("shortcut", "named"),
    [
        (_central_differences, "numerical estimate"),
        (lambda x: _central_differences(x, 1e-4), "numerical estimate"),
        (lambda x: bl.numerical_grad(_cube, x)[0], "bl.numerical_grad"),
        (lambda x: importlib.import_module("torch.autograd.gradcheck").get_numerical_jacobian(
            lambda t: _cube(t).reshape(1), (x,))[0].reshape(x.shape), "importlib"),
        (_grad_fn_call, "torch.enable_grad"),
        (lambda x: torch.ops.aten.tanh_backward(torch.ones_like(x), x) * 0 + _right(x),
         "torch.ops.aten.tanh_backward"),
        (_complex_step, "complex numbers"),
    ],
    ids=["finite-differences", "fd-1e-4", "numerical_grad", "gradcheck-jacobian", "grad_fn",
         "aten-backward", "complex-step"],
)
def test_numerical_estimates_and_torchs_own_backward_fail(shortcut, named):
    report = _check(shortcut, vocabulary=rules.BY_HAND)
    assert not report.ok
    assert named in " ".join(str(report).split())


def test_a_float32_result_is_named_as_such():
    report = _check(lambda x: _right(x).float())
    assert not report.ok and "your result is float32" in str(report)


@pytest.mark.parametrize("factor", [2.0, 0.5, 3.0, 1 / 3])
def test_a_by_hand_factor_is_never_blamed_on_backward_passes_adding_up(factor):
    """The reference of a by-hand check is the check's own: no .grad of it accumulated."""
    text = " ".join(str(_check(lambda x: factor * _right(x))).split())
    assert "exactly" in text and "accumulated" not in text and "backward passes" not in text


def test_nothing_in_a_by_hand_message_recommends_a_forbidden_tool():
    for wrong in (lambda x: x * 0.37 + 1, lambda x: 3 * x**2, _central_differences):
        assert "numerical_grad" not in str(_check(wrong))


# --------------------------------------------------------------------------
# A named mistake holds on every trial
# --------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.2, 5.0), st.booleans())
def test_no_constant_factor_or_sign_claim_unless_it_holds_on_every_trial(seed, scale, flip):
    """A wrong answer whose factor differs per entry (and per trial) must never be told
    it is off by a constant factor or has its sign flipped."""
    def wrong(x):
        gen = torch.Generator().manual_seed(seed + int(x.numel()) + int(1000 * x[0].item()))
        factors = scale * (0.5 + torch.rand(x.shape, generator=gen, dtype=x.dtype))
        return (-1 if flip else 1) * factors * _right(x)

    text = str(_check(wrong))
    assert "constant factor" not in text and "exactly" not in text
    assert "sign is flipped" not in text


def test_a_factor_that_differs_per_trial_is_not_named():
    # Right up to a factor, but another factor on each trial (one scalar entry each).
    def wrong(x):
        return _right(x) * (1.5 + x.abs().sum().item() % 1)

    text = str(bl.check_by_hand(wrong, _reference, lambda g: (torch.randn(1, generator=g),),
                                name="d/dx"))
    assert "factor" not in text and "no single common mistake" in text


def test_a_factor_that_holds_on_every_trial_is_named():
    assert "factor" in str(_check(lambda x: 2 * _right(x)))


def test_a_slip_is_named_only_when_it_holds_on_every_trial():
    # This slip equals the learner's answer only where x > 0.
    slips = {"the slip": lambda x: torch.where(x > 0, 3 * x**2, _right(x))}
    text = str(_check(lambda x: 3 * x**2, mistakes=slips))
    assert "the slip" not in text
    text = str(_check(lambda x: 3 * x**2, mistakes={"the power rule alone": lambda x: 3 * x**2}))
    assert "the power rule alone" in text


def test_an_answer_right_on_some_trials_is_told_which():
    def sometimes(x):
        return _right(x) if x.numel() % 2 else -_right(x)

    text = str(bl.check_by_hand(
        sometimes, _reference, lambda g: (torch.randn(2 + int(g.initial_seed()), generator=g),),
        name="d/dx", trials=3))
    assert "matches on 2 of 3 new inputs" in text or "matches on 1 of 3 new inputs" in text


def test_a_wrong_shape_on_some_trials_is_said_first_with_its_inputs():
    def sometimes(x):
        return _right(x) if x.numel() % 2 else _right(x)[:-1]

    report = bl.check_by_hand(
        sometimes, _reference, lambda g: (torch.randn(2 + int(g.initial_seed()), generator=g),),
        name="d/dx", trials=3)
    text = " ".join(str(report).split())
    assert [c.verdict for c in report.checks if not c.ok] == ["shape"]
    assert "has shape (1,); expected (2,); it matches on 1 of 3 new inputs" in text
    assert "on new inputs (x of shape 2)" in text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.3, 3.0), min_size=3, max_size=8))
def test_diagnose_claims_no_constant_factor_between_differently_scaled_entries(factors):
    ref = torch.arange(1.0, len(factors) + 1, dtype=torch.float64)
    wrong = ref * torch.tensor(factors, dtype=torch.float64)
    spread = max(factors) / min(factors)
    d = bl.diagnose(wrong, ref)
    text = str(d)
    if spread > 1.01:
        assert "constant factor" not in text and "exactly" not in text
        assert d is None or "factor" not in d.kind


# --------------------------------------------------------------------------
# Warnings are shown, never written to stderr
# --------------------------------------------------------------------------


def test_a_warning_from_the_answer_is_a_line_of_the_report_not_stderr(capfd):
    def noisy(x):
        warnings.warn("To copy construct from a tensor, use clone()", UserWarning, stacklevel=1)
        return _right(x)

    report = _check(noisy)
    assert report.ok
    assert "⚠" in str(report) and "To copy construct" in str(report)
    report.assert_ok()
    assert capfd.readouterr().err == ""


def test_assert_ok_returns_nothing_for_nbgrader_to_read_as_a_score():
    assert _check(_right).assert_ok() is None


# --------------------------------------------------------------------------
# Tampering is noticed
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# The lessons' checks
# --------------------------------------------------------------------------


def test_check_exercise_runs_a_lesson_check_and_returns_nothing(capsys):
    assert bl.check_exercise("l02-cubic", _right) is None
    assert "matches autograd" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"numerical\s+estimate"):
        bl.check_exercise("l02-cubic", _central_differences)


def _coin_slope(x):
    """Right, or off by one everywhere, as torch's generator decides."""
    return 3 * x**2 - 8 * x + (torch.rand(()) < 0.5)


def _coin_method() -> Method:
    """A method exercise whose answer draws: a number under 0.5 passes."""
    return Method(name="coin", make_inputs=lambda gen: {"n": 3},
                  observe=lambda answer, inputs: float(answer(inputs["n"])),
                  reference=lambda inputs: 0.5, explain=lambda inputs, got, want: "too big",
                  agree=lambda got, want: got < want)


@pytest.mark.parametrize("run", [lambda: _check(_coin_slope),
                                 lambda: _coin_method().check(lambda n: torch.rand(()))],
                         ids=["by hand", "method"])
def test_an_answer_that_draws_gets_one_verdict_and_leaves_the_learners_generator(run):
    # The answer runs with torch's generator seeded, in the kernel as in the sandbox: its
    # verdict does not depend on what the learner drew before, and the learner's next
    # draws are those they would have had without the check.
    verdicts = set()
    for before in range(8):
        torch.manual_seed(before)
        state = torch.get_rng_state()
        verdicts.add(run().ok)
        assert torch.equal(torch.get_rng_state(), state)
    assert len(verdicts) == 1


@pytest.mark.parametrize("key", ["l10-predict-layer", "l10-predict-std"])
def test_a_prediction_built_from_seeded_layers_leaves_the_learners_generator(key):
    torch.manual_seed(5)
    state = torch.get_rng_state()
    bl.reveal(key)
    assert torch.equal(torch.get_rng_state(), state)


def test_hidden_seeds_defeat_a_table_of_the_visible_inputs():
    make = bl.course.exercises.find_exercise("l02-cubic").make_inputs
    table = {}
    for k in range(3):
        (x,) = make(torch.Generator().manual_seed(k))
        x = x.double()
        table[tuple(x.tolist())] = _right(x)

    def lookup(x):
        return table.get(tuple(x.tolist()), torch.zeros_like(x))

    bl.check_exercise("l02-cubic", lookup)  # the visible seeds: the table works
    with pytest.raises(AssertionError):
        bl.check_exercise("l02-cubic", lookup, seed=7013)


def test_scale_helper_ignores_non_finite_entries():
    assert slips._scale(torch.tensor([1.0, math.inf, -3.0])) == 3.0


def test_numerical_grad_on_an_input_holding_nan_is_not_told_it_changed_its_input():
    x = torch.tensor([1.0, float("nan"), 2.0])
    (grad,) = bl.numerical_grad(lambda t: (t * 2).sum(), x)  # NaN != NaN: no false alarm
    assert grad.shape == x.shape and grad.isnan().all()


def test_torchs_backward_kernels_are_refused_by_name_whatever_they_are_made_of():
    """gather_backward is composite (the dispatcher sees only its scatter-add inside):
    the answer's source names it, and that is where it is refused."""
    import ast

    tree = ast.parse("import torch\ndef f(g, x, i):\n"
                     "    return torch.ops.aten.gather_backward(g, x, 0, i, False)\n")
    (found,) = rules.read([tree], rules.BY_HAND)
    assert found.used == "torch.ops.aten.gather_backward" and found.why == "kernels"


def test_a_slip_that_is_a_constant_is_named_before_hard_coded():
    slips = {"the ~0 of the max trick taken for an exact 0": lambda x: torch.zeros_like(x)}
    text = str(_check(lambda x: torch.zeros_like(x), mistakes=slips))
    assert "taken for an exact 0" in text and "hard-coded" not in text
    assert "hard-coded" in str(_check(lambda x: torch.zeros_like(x)))


def test_a_methods_wrong_stands_for_agree_and_explain():
    def too_big(got, want):
        return "too big" if got > want else None

    coin = Method(name="coin", make_inputs=lambda gen: {"n": 3},
                  observe=lambda answer, inputs: float(answer(inputs["n"])),
                  reference=lambda inputs: 0.5, wrong=too_big)
    assert coin.check(lambda n: 0.25)
    report = coin.check(lambda n: 0.75)
    assert not report and report[0].message == "too big"
    with pytest.raises(TypeError, match="wrong: expected a function .* got str"):
        dataclasses.replace(coin, wrong="too big", agree=None, explain=None)
    # a copy keeps the judgement (the grade copies an exercise to wrap its functions)
    copy = dataclasses.replace(coin, name="coin copy")
    assert copy.check(lambda n: 0.25)
    report = copy.check(lambda n: 0.75)
    assert not report and report[0].message == "too big"


def test_a_methods_caution_is_a_warning_beside_the_pass_and_keeps_it_a_pass():
    def loud(got):
        return "right, but loud" if got > 0.4 else None

    coin = Method(name="coin", make_inputs=lambda gen: {"n": 3},
                  observe=lambda answer, inputs: float(answer(inputs["n"])),
                  reference=lambda inputs: 0.5,
                  wrong=lambda got, want: "too small" if got < want - 0.2 else None,
                  caution=loud)
    quiet = coin.check(lambda n: 0.35)
    assert quiet.ok and [c.verdict for c in quiet.checks] == ["pass"]
    warned = coin.check(lambda n: 0.5)
    assert warned.ok and [c.verdict for c in warned.checks] == ["pass", "warning"]
    assert "⚠ coin: right, but loud" in str(warned)
    assert not coin.check(lambda n: 0.1)  # a failing answer is told its failure, not the caution
    with pytest.raises(TypeError, match="caution: expected a function .* got str"):
        dataclasses.replace(coin, caution="loud")
