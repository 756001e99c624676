"""What lesson 19's checks share: calling a learner's Function the way autograd would, and
recording what it did as plain data, so that the verdict can be made elsewhere; and the
check of Exercise 5, which extends those calls to forward mode.

Each exercise's observation step (run where the answer lives: the learner's kernel, or
the grade's sandbox) calls forward (and setup_context) with a stand-in ``ctx``, then
backward alone, as plain Python functions with autograd off and refused (`run_answer`,
the runner of a by-hand answer); it runs the Function through real autograd once to
catch a structural slip; and it notes what torch's own tests (gradcheck, gradgradcheck)
make of it. The judgement is made from these records: `judged_by_hand` replays the
backward calls into `judge_by_hand`, the judge of every by-hand exercise, which names a
slip only where it holds on every trial, and `words` turns its report into the sentence
the learner reads.

Exercise 5 (``l19-gate-jvp``): the learner's ``Gate`` computes f(x, g) = x * sigmoid(g) in
the form torch.func needs (section 8): ``forward(x, g)``, ``setup_context``, ``backward``
and ``jvp`` (derived by hand), with ``generate_vmap_rule``. Its observation runs the
Function through autograd once; calls ``jvp`` alone and ``backward`` alone in that way on
three trials, jvp getting the tangents of x and g and seeing in ``ctx.saved_tensors``
only what setup_context saved with ``save_for_forward``, as in torch; and notes what
torch's own transforms make of it: the output tangent of ``torch.func.jvp``, and whether
``jacfwd`` (forward mode, batched by vmap) agrees with ``jacrev``. The judge holds jvp
and backward to the derivative as a by-hand answer is held, then the transforms' results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...byhand import run_answer
from .._spec import Method, Report, failure, is_failure, judge_runs, seeded
from .._spec import first_line as _first_line


class StandInContext:
    """What autograd's ``ctx`` offers a Function, so forward and backward can be
    called directly as plain functions (with autograd off) and backward checked alone."""

    def __init__(self, inputs: tuple[Any, ...]):
        self.needs_input_grad = tuple(
            isinstance(t, torch.Tensor) and t.is_floating_point() for t in inputs)
        self.saved_tensors: tuple[torch.Tensor, ...] = ()
        self.for_forward: tuple[torch.Tensor, ...] = ()  # what jvp will see as saved_tensors

    def save_for_backward(self, *tensors: torch.Tensor) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors: torch.Tensor) -> None:
        self.for_forward = tensors

    def mark_dirty(self, *tensors: torch.Tensor) -> None:
        pass

    def mark_non_differentiable(self, *tensors: torch.Tensor) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def uses_setup_context(fn_class: type) -> bool:
    """Whether the Function has the form torch.func needs: forward(*inputs) plus
    setup_context(ctx, inputs, output)."""
    return fn_class.setup_context is not torch.autograd.Function.setup_context


def forward_directly(fn_class: type, inputs: tuple[Any, ...]) -> StandInContext:
    """Run forward (and setup_context) as plain functions; the ctx backward will get."""
    ctx = StandInContext(inputs)
    if uses_setup_context(fn_class):
        output = fn_class.forward(*inputs)
        fn_class.setup_context(ctx, inputs, output)
    else:
        fn_class.forward(ctx, *inputs)
    return ctx


def call_directly(fn_class: type, inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]):
    """backward's result for ``grad_outputs``, by calling forward then backward the way
    autograd would, but as plain Python functions: a tuple, one entry per input."""
    ctx = forward_directly(fn_class, inputs)
    grads = fn_class.backward(ctx, *grad_outputs)
    return grads if isinstance(grads, tuple) else (grads,)


# --------------------------------------------------------------------------
# What the observation steps record
# --------------------------------------------------------------------------


def not_a_function(answer: Any) -> dict | None:
    """The `failure` of an answer that is not a Function class, or None."""
    if isinstance(answer, type) and issubclass(answer, torch.autograd.Function):
        return None
    what = answer.__name__ if isinstance(answer, type) else type(answer).__name__
    return failure("fail", f"expected a subclass of torch.autograd.Function (the class itself, "
                           f"not an instance or the result of .apply), got {what}")


def real_run(fn_class: type, inputs: tuple[Any, ...], labels: list[str]) -> dict | None:
    """Run the Function through autograd once: the `failure` of a structural slip (one
    gradient per input of forward, None for a plain number), or None."""
    ran = through_autograd(fn_class, inputs, labels)
    return ran if is_failure(ran) else None


def through_autograd(fn_class: type, inputs: tuple[Any, ...], labels: list[str],
                     grad_output: torch.Tensor | None = None, constant: str | None = None
                     ) -> dict[str, Any]:
    """Run the Function through autograd once, every tensor input requiring grad except the
    one labelled ``constant`` (then ``ctx.needs_input_grad`` is False in its place, as for y
    in section 5's ScaledProduct): {label: the gradient that reached that input (None when
    none came)} for each input that requires grad, ``grad_output`` (ones when None) sent
    back; or the `failure` of a structural slip (one gradient per input of forward, None
    for a plain number)."""
    xs = tuple(t.detach().clone().requires_grad_(label != constant)
               if isinstance(t, torch.Tensor) else t for t, label in zip(inputs, labels,
                                                                         strict=True))
    wanted = [label for t, label in zip(xs, labels, strict=True)
              if isinstance(t, torch.Tensor) and t.requires_grad]
    wrt = [t for t in xs if isinstance(t, torch.Tensor) and t.requires_grad]
    when = (f"with {constant} not requiring grad (ctx.needs_input_grad[{labels.index(constant)}] "
            "False), " if constant else "")
    try:
        out = fn_class.apply(*xs)
        if not isinstance(out, torch.Tensor) or out.grad_fn is None:
            return failure("fail", f"{when}forward must return a tensor computed from the "
                                   f"inputs; got {type(out).__name__}")
        sent = torch.ones_like(out) if grad_output is None else grad_output.clone()
        grads = torch.autograd.grad(out, wrt, sent, allow_unused=True, retain_graph=True)
    except NotImplementedError:
        return failure("missing", "not written yet: a method still raises NotImplementedError.")
    except RuntimeError as err:
        text = _first_line(err)
        if "incorrect number of gradients" in text:
            got = text.rsplit("got ", 1)[-1].rstrip(")")
            return failure("error", f"{when}backward returned {got} entries, but forward has "
                                    f"{len(inputs)} inputs ({', '.join(labels)}): return one "
                                    "entry per input, None for the plain number"
                                    + (f", and for {constant} None or its gradient (autograd "
                                       "drops it)." if constant else "."))
        if "different than None" in text:
            return failure("error", f"{when}backward returned a gradient for a plain number "
                                    f"({text}): return None in the place of every input that "
                                    "is not a tensor.")
        return failure("error", f"{when}raised RuntimeError: {text}")
    except Exception as err:  # the learner's bug, reported as a failed check
        return failure("error", f"{when}raised {type(err).__name__}: {_first_line(err)}")
    return {label: plain(g) for label, g in zip(wanted, grads, strict=True)}


def kept_on_ctx(node: Any) -> list[str]:
    """The names under which a Function's node keeps tensors as plain ctx attributes, not
    through save_for_backward (section 3): autograd neither frees them after backward nor
    notices an in-place change to them before it."""
    return [key for key, value in vars(node).items() if isinstance(value, torch.Tensor) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value))]


def kept_when_applied(fn_class: type, inputs: tuple[Any, ...]) -> list[str]:
    """`kept_on_ctx` of the node that applying the Function to ``inputs`` makes."""
    return kept_on_ctx(fn_class.apply(*(t.detach().clone().requires_grad_()
                                         if isinstance(t, torch.Tensor) else t
                                         for t in inputs)).grad_fn)


def stash_caution(got: dict[str, Any]) -> str | None:
    """The warning for a Function that keeps tensors on ctx, which is right but fragile."""
    kept = got.get("kept") or []
    return (f"the Function keeps {', '.join('ctx.' + k for k in kept)} as plain ctx "
            "attributes: right here, but autograd neither frees them after backward nor notices an "
            "in-place change to them before it. Keep tensors with ctx.save_for_backward(...) "
            "(section 3).") if kept else None


def plain(value: Any, depth: int = 0) -> Any:
    """A result as plain data: tensors (detached copies), numbers, strings, None and
    tuples of them; anything else as the words of what it is."""
    if isinstance(value, torch.Tensor) and type(value) is torch.Tensor:
        return value.detach().clone()
    if value is None or type(value) in (bool, int, float, complex, str):
        return value
    if type(value) in (tuple, list) and depth < 4:
        return tuple(plain(v, depth + 1) for v in value)
    return f"<a {type(value).__name__} object>"


def backward_runs(backward_alone: Callable[..., Any], trials: Sequence[Sequence[Any]]
                  ) -> list[list[Any]]:
    """``backward_alone`` run on each trial's inputs as a by-hand answer is run (autograd
    off and refused, estimates watched): each `Ran` as plain data."""
    runs = []
    for inputs in trials:
        ran = run_answer(backward_alone, [t.detach().clone() if isinstance(t, torch.Tensor)
                                          else t for t in inputs])
        runs.append([plain(ran.got), ran.failure, ran.detail, ran.nudged, list(ran.warnings),
                     ran.largest])
    return runs


def by_hand_trials(make: Callable[[torch.Generator], Any], gen: torch.Generator
                   ) -> list[list[Any]]:
    """The inputs of the three by-hand trials of backward alone, made by ``make`` from the
    check's seed and the two after it (the first is also where the Function runs through
    autograd)."""
    seed = gen.initial_seed()
    return [list(make(torch.Generator().manual_seed(seed + k))) for k in range(3)]


def stopped(runs: Sequence[Sequence[Any]]) -> bool:
    """Whether a recorded backward call failed to give a result (it raised, called
    autograd, made an estimate): the verdict is then that, and nothing after it is run."""
    return any(ran[1] is not None for ran in runs)


def torch_check(test: Callable[..., Any], apply: Callable[..., Any],
                inputs: Sequence[Any]) -> list[Any]:
    """[passed, what it raised ('' if nothing)] of gradcheck or gradgradcheck on ``apply``,
    the floating tensors of ``inputs`` as float64 leaves."""
    xs = tuple(t.detach().clone().double().requires_grad_()
               if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)
    # gradgradcheck draws its grad_outputs from the global generator: seeded here, so that
    # a verdict depends on the inputs alone, not on what ran before it.
    with seeded(0):
        try:
            return [bool(test(apply, xs, raise_exception=False)), ""]
        except Exception as err:  # the learner's backward raising under the test
            return [False, f"{type(err).__name__}: {_first_line(err)}"]


# --------------------------------------------------------------------------
# Judging from the records
# --------------------------------------------------------------------------


def judged_by_hand(runs: Sequence[Sequence[Any]], trials: Sequence[Sequence[Any]],
                   references: Sequence[Any], **options: Any) -> Report:
    """`judge_by_hand`'s report on recorded backward calls (`backward_runs`): each trial's
    inputs and the reference's result, replayed in turn. ``options`` are its keywords
    (``name``, ``outputs``, ``mistakes``, ``advice``, ``params``)."""
    answers = iter(references)
    return judge_runs(list(runs), lambda *args: next(answers), [tuple(t) for t in trials],
                      **options)


def words(report: Report, name: str) -> str | None:
    """The sentence of a report's first failed check (its name first, unless it is the
    exercise's own), or None when every check passed."""
    bad = next((c for c in report.checks if not c.ok), None)
    if bad is None:
        return None
    return bad.message if bad.name == name else f"{bad.name}: {bad.message}"


def randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def shape_of(t: Any) -> tuple[int, ...]:
    return tuple(t.shape)


# --------------------------------------------------------------------------
# Exercise 5: forward mode through a Function, its jvp derived by hand
# --------------------------------------------------------------------------

_GATE = "Gate"
_PARAMS = ("x", "g", "x_t", "g_t", "grad_output")


def gate_inputs(gen: torch.Generator):
    """(x, g, x_t, g_t, grad_output), all of one new shape, float64."""
    shape = (int(torch.randint(2, 6, (1,), generator=gen)),)
    if int(torch.randint(2, (1,), generator=gen)):
        shape = (*shape, int(torch.randint(2, 4, (1,), generator=gen)))
    x, g, x_t, g_t, grad_output = (torch.randn(shape, generator=gen, dtype=torch.float64)
                                   for _ in range(5))
    return x, g * 2, x_t, g_t, grad_output


def _tangent(x, g, x_t, g_t, grad_output=None):
    """The output's tangent: each input's tangent times that input's partial derivative."""
    s = torch.sigmoid(g)
    return x_t * s + x * s * (1 - s) * g_t


def _grads(x, g, x_t, g_t, grad_output):
    s = torch.sigmoid(g)
    return grad_output * s, grad_output * x * s * (1 - s)


def _s(g):
    return torch.sigmoid(g)


_JVP_SLIPS = {
    "jvp ignores the tangents: the output's tangent is x_t times df/dx plus g_t times df/dg, "
    "not the sum of the partial derivatives":
        lambda x, g, xt, gt, go: _s(g) + x * _s(g) * (1 - _s(g)),
    "only x's tangent counts: g is an input too, and its tangent g_t reaches the output "
    "through df/dg = x * sigmoid(g) * (1 - sigmoid(g))": lambda x, g, xt, gt, go: xt * _s(g),
    "only g's tangent counts: x is an input too, and its tangent x_t reaches the output "
    "through df/dx = sigmoid(g)": lambda x, g, xt, gt, go: x * _s(g) * (1 - _s(g)) * gt,
    "the derivative of sigmoid is sigmoid(g) * (1 - sigmoid(g)), not sigmoid(g)":
        lambda x, g, xt, gt, go: xt * _s(g) + x * _s(g) * gt,
    "the factor x is missing from g's term: df/dg = x * sigmoid(g) * (1 - sigmoid(g))":
        lambda x, g, xt, gt, go: xt * _s(g) + _s(g) * (1 - _s(g)) * gt,
    "the tangents are swapped: x_t goes with df/dx = sigmoid(g), g_t with df/dg":
        lambda x, g, xt, gt, go: gt * _s(g) + x * _s(g) * (1 - _s(g)) * xt,
}
_BACKWARD_SLIPS = {
    "backward ignores grad_output: the chain rule multiplies each local derivative by the "
    "incoming gradient": lambda x, g, xt, gt, go: (_s(g), x * _s(g) * (1 - _s(g))),
    "the two gradients are swapped: backward returns x's gradient first, then g's":
        lambda x, g, xt, gt, go: (go * x * _s(g) * (1 - _s(g)), go * _s(g)),
    "the derivative of sigmoid is sigmoid(g) * (1 - sigmoid(g)), not sigmoid(g)":
        lambda x, g, xt, gt, go: (go * _s(g), go * x * _s(g)),
}


# ----------------------------------------------------------------- the observation


def _jvp_alone(gate: type):
    def run(x, g, x_t, g_t, grad_output):
        ctx = forward_directly(gate, (x, g))
        ctx.saved_tensors = ctx.for_forward  # what jvp sees, as in torch
        return gate.jvp(ctx, x_t, g_t)
    return run


def _backward_alone(gate: type):
    def run(x, g, x_t, g_t, grad_output):
        grads = gate.backward(forward_directly(gate, (x, g)), grad_output)
        return tuple(grads) if isinstance(grads, (tuple, list)) else grads
    return run


def _transforms(gate: type, x: torch.Tensor, g: torch.Tensor, x_t: torch.Tensor,
                g_t: torch.Tensor) -> dict[str, Any]:
    """What torch.func's forward-mode transforms make of the Function: the output tangent
    of jvp, and whether jacfwd agrees with jacrev (a sentence where one raised)."""
    seen: dict[str, Any] = {}
    try:
        seen["jvp"] = plain(torch.func.jvp(gate.apply, (x, g), (x_t, g_t))[1])
    except Exception as err:  # the learner's Function failing under the transform
        seen["jvp"] = f"{type(err).__name__}: {_first_line(err)}"
    try:
        forward = torch.func.jacfwd(gate.apply, argnums=(0, 1))(x, g)
        reverse = torch.func.jacrev(gate.apply, argnums=(0, 1))(x, g)
        seen["jacfwd"] = all(bool(torch.allclose(a, b)) for a, b in zip(forward, reverse,
                                                                          strict=True))
    except Exception as err:
        seen["jacfwd"] = f"{type(err).__name__}: {_first_line(err)}"
    return seen


def _observe(gate: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    failed = not_a_function(gate)
    if failed is not None:
        return failed
    if not uses_setup_context(gate):
        return failure("fail", "Gate takes ctx in forward: torch.func's transforms need the "
                               "form of section 8, forward(x, g) without ctx and "
                               "setup_context(ctx, inputs, output) to save what backward and "
                               "jvp read.")
    x, g, x_t, g_t, _ = inputs["trials"][0]
    failed = real_run(gate, (x, g), ["x", "g"])
    if failed is not None:
        return failed
    seen: dict[str, Any] = {"jvp": backward_runs(_jvp_alone(gate), inputs["trials"])}
    if stopped(seen["jvp"]):
        ctx = forward_directly(gate, (x, g))
        seen["for_forward"] = len(ctx.for_forward)
        return seen
    seen["backward"] = backward_runs(_backward_alone(gate), inputs["trials"])
    if not stopped(seen["backward"]):
        seen["real"] = _transforms(gate, x, g, x_t, g_t)
        seen["kept"] = kept_when_applied(gate, (x, g))
    return seen


# ----------------------------------------------------------------- the judge's side


def _reference(inputs: dict[str, Any]) -> dict[str, Any]:
    trials = inputs["trials"]
    return {"trials": trials, "jvp": [(_tangent(*t),) for t in trials],
            "grads": [_grads(*t) for t in trials]}


def _slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    jvp = words(judged_by_hand(
        got["jvp"], want["trials"], [t[0] for t in want["jvp"]], name="Gate.jvp",
        outputs=["tangent of the output"], mistakes=_JVP_SLIPS, params=_PARAMS,
        advice="The output's tangent is x_t * df/dx + g_t * df/dg, with df/dx = sigmoid(g) "
               "and df/dg = x * sigmoid(g) * (1 - sigmoid(g))."), _GATE)
    if jvp is not None:
        if got.get("for_forward") == 0:
            jvp += (" (setup_context saved nothing with ctx.save_for_forward: jvp sees only "
                    "what is saved that way in ctx.saved_tensors; save_for_backward keeps "
                    "tensors for backward alone)")
        return jvp
    backward = words(judged_by_hand(
        got["backward"], want["trials"], want["grads"], name="Gate.backward",
        outputs=["gradient for x", "gradient for g"], mistakes=_BACKWARD_SLIPS,
        params=_PARAMS, advice="Each gradient is grad_output times that input's partial "
                               "derivative."), _GATE)
    if backward is not None:
        return backward
    real, x, g, x_t, g_t, _ = got["real"], *want["trials"][0]
    if isinstance(real["jvp"], str):
        return f"torch.func.jvp through Gate raised {real['jvp']}"
    if not torch.allclose(real["jvp"], _tangent(x, g, x_t, g_t)):
        return ("jvp is right when called alone, but torch.func.jvp through Gate gives "
                "another tangent: does setup_context save for forward what jvp reads?")
    if isinstance(real["jacfwd"], str):
        hint = (" jacfwd batches jvp with vmap: set generate_vmap_rule = True (section 8)."
                if "vmap" in real["jacfwd"] else "")
        return f"torch.func.jacfwd through Gate raised {real['jacfwd']}.{hint}"
    if not real["jacfwd"]:
        return "jacfwd (forward mode) and jacrev (reverse mode) give different Jacobians"
    return None


GATE = Method(
    name=_GATE,
    make_inputs=lambda gen: {"trials": by_hand_trials(gate_inputs, gen)},
    observe=_observe,
    reference=_reference,
    wrong=_slip,
    caution=stash_caution,
    trials=1,
    passed="jvp's tangent and backward's gradients match the derivative on 3 new random "
           "inputs; torch.func.jvp agrees, and jacfwd equals jacrev",
)
