"""Lesson 14, forward mode and torch.func: its exercises and its predictions.

Both exercises are method checks: the numbers alone do not show how they were
reached, so the checks count passes with `count_autograd`.

- Exercise 1 (``l14-jvp``): ``jacobian_column(f, x, direction)`` must give
  ``J v`` with ONE forward-mode pass: no reverse pass, no full Jacobian
  (``jacfwd``, ``hessian``), no finite differences, no column-by-column loop.
- Exercise 3 (``l14-per-sample``): ``per_example_norms(model, X, Y)`` must
  give every example's gradient norm in one batched pass, not a loop of
  backward calls; each typical slip is named when the learner's result equals
  it.

The predictions run the lesson's experiments again: the pass counts of the
table, of lesson 08's Jacobian, and of the three functions of Exercise 2.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import jvp, vjp

from ._spec import Method, Prediction, attempt, compare, count_autograd, passed
from ._spec import failed as _fail

# --------------------------------------------------------------------------- Exercise 1


def new_problem(gen, n, m):
    """A random f: R^n -> R^m, a point and a direction."""
    A = torch.randn(m, n, generator=gen, dtype=torch.float64)
    c = torch.randn(m, generator=gen, dtype=torch.float64)

    def f_new(t):
        return torch.sin(A @ t) * (t**2).sum() + c * t[0]

    x = torch.randn(n, generator=gen, dtype=torch.float64)
    return f_new, x, torch.randn(n, generator=gen, dtype=torch.float64)




def _compared(name, got, want, advice, praise=None):
    """`compare`'s verdict, with advice that fits the exercise when the numbers differ
    (and the sentence ``praise`` when they agree)."""
    result = compare(name, got, want)
    if result.ok:
        return passed(name, praise) if praise else result
    check = result[0]
    numbers = check.message.split("\n", 1)[1].strip() if "\n" in check.message else ""
    head = check.message.split("\n", 1)[0]
    text = (head.split(". Likely mistake:")[0] if check.diagnosis else "your numbers differ")
    return _fail(name, f"{text}. {advice}" + (f"\n  {numbers}" if numbers else ""),
                 check.verdict)


def _check_column(answer, seed):
    name = "jacobian_column"
    if not callable(answer):
        return _fail(name, f"expected a function (f, x, direction) -> J v, got "
                           f"{type(answer).__name__}")
    gen = torch.Generator().manual_seed(seed)
    problems = [new_problem(gen, n, m) for n, m in ((3, 5), (6, 2), (4, 4))]
    answers, seen = [], []
    for f_new, x, direction in problems:
        with count_autograd() as counts:
            column, failure = attempt(name, answer, f_new, x.clone(), direction.clone(),
                                      what="it", raised=lambda err: f"raised "
                                      f"{type(err).__name__}: {str(err).splitlines()[0]}")
        if failure is not None:
            return failure
        answers.append(column)
        seen.append(counts)

    if len(answers) > 1 and all(isinstance(a, torch.Tensor) and a.shape == answers[0].shape
                                and torch.equal(a, answers[0]) for a in answers):
        return _fail(name, "it returned the same tensor for three different functions, points "
                           "and directions: it looks hard-coded. Compute J v from the f, x and "
                           "direction it is given", "hard-coded")
    for (f_new, x, direction), got, counts in zip(problems, answers, seen, strict=True):
        m, n = len(f_new(x)), len(x)
        if counts.reverse:
            return _fail(name, f"{counts.reverse} reverse pass(es): that is reverse mode (vjp, "
                               "backward, grad, jacrev), and reverse mode gives rows u^T J. A "
                               "column J v is forward mode's job: one jvp along the direction")
        full = [call for call in counts.calls if call.endswith(("jacfwd", "hessian"))]
        if full:
            return _fail(name, f"your function called {full[0]}: that builds the whole {m} x {n} "
                               "Jacobian (one tangent per input, all of them batched by vmap) "
                               "and then throws away all but one combination of its columns. "
                               "One jvp along the direction gives J v directly")
        if counts.forward == 0:
            return _fail(name, "no forward-mode pass at all (finite differences?): they only "
                               "approximate J v. Use jvp, which carries the direction through f "
                               "exactly")
        if counts.forward > 1:
            return _fail(name, f"{counts.forward} forward passes for one column of a {m} x {n} "
                               "Jacobian: building J column by column and multiplying costs one "
                               "pass per input. One JVP along the direction gives J v directly")
        if not (isinstance(got, torch.Tensor) and got.shape == (m,)):
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            return _fail(name, f"expected a column of {m} numbers (one per output of f), got "
                               f"{shape}", "shape")
        J = torch.autograd.functional.jacobian(f_new, x)
        for slip, wrong in {
            "J times a vector of ones: the tangent must be the given direction": J.sum(1),
            "the first column J e_0: a one-hot tangent, not the given direction": J[:, 0],
        }.items():
            if torch.allclose(got, wrong, rtol=1e-9, atol=1e-12):
                return _fail(name, f"your column is {slip}")
        result = _compared(f"J v for a {m} x {n} Jacobian", got, J @ direction,
                           "The tangent of jvp is the direction itself, and the answer is the "
                           "second thing jvp returns (the first is f(x))")
        if not result.ok:
            return result
    return passed(name, f"one forward-mode pass per call and the right J v on {len(problems)} "
                         "new functions, points and directions")


# --------------------------------------------------------------------------- Exercise 3


def _new_net(seed):
    """A small model whose inputs are 2 x 3 grids, with a batch of 7 examples."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = nn.Sequential(nn.Flatten(), nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    X = torch.randn(7, 2, 3, generator=gen, dtype=torch.float64)
    Y = torch.randn(7, 2, generator=gen, dtype=torch.float64)
    return net, X, Y


def _per_sample_error(err: Exception) -> str:
    if isinstance(err, RuntimeError):
        hint = (" Inside vmap your function sees one example without its batch dimension "
                "(2 x 3, not 1 x 2 x 3): unsqueeze(0) it before calling the model"
                if "shape" in str(err) else "")
        return f"it raised RuntimeError: {str(err).splitlines()[0]}.{hint}"
    return f"it raised {type(err).__name__}: {str(err).splitlines()[0]}"


def _check_per_sample(answer, seed):
    name = "per-example gradient norms"
    if not callable(answer):
        return _fail(name, f"expected a function (model, X, Y) -> norms, got "
                           f"{type(answer).__name__}")
    net, X, Y = _new_net(seed + 15)
    with count_autograd() as seen:
        norms, failure = attempt(name, answer, net, X.clone(), Y.clone(), what="it",
                                 raised=_per_sample_error)
    if failure is not None:
        return failure
    backward_calls = seen.calls.count("Tensor.backward()")
    if backward_calls > 1:
        return _fail(name, f"{backward_calls} calls of .backward() for {len(X)} examples: that "
                           "is a loop of backward calls, which vmap(grad(...)) replaces with one "
                           "batched pass")
    if seen.reverse > 1:
        return _fail(name, f"{seen.reverse} reverse passes for {len(X)} examples: a Python loop "
                           "over the examples; vmap(grad(...)) batches them into one pass")

    # The check's own loop: one backward per example.
    expected, per_param = [], []
    for xi, yi in zip(X, Y, strict=True):
        net.zero_grad()
        ((net(xi.unsqueeze(0)) - yi.unsqueeze(0)) ** 2).mean().backward()
        per_param.append(torch.stack([p.grad.norm() for p in net.parameters()]))
        expected.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]).norm())
    expected, per_param = torch.stack(expected), torch.stack(per_param)
    net.zero_grad()
    ((net(X) - Y) ** 2).mean().backward()
    batch_norm = torch.cat([p.grad.reshape(-1) for p in net.parameters()]).norm()
    net.zero_grad()

    if not (isinstance(norms, torch.Tensor) and norms.shape == (len(X),)):
        shape = tuple(norms.shape) if isinstance(norms, torch.Tensor) else f"{norms!r:.40}"
        return _fail(name, f"expected one norm per example, a tensor of shape ({len(X)},), got "
                           f"{shape}", "shape")
    for slip, wrong in {
        "the norm of the batch gradient, repeated: one gradient for the whole batch, not one "
        "per example": batch_norm.expand(len(X)),
        "each parameter's gradient norm, added up: the norm over all parameters is the square "
        "root of the sum of all the squares": per_param.sum(1),
        "the squared norm: the square root is missing": expected**2,
        "the norm of the first parameter's gradient only: every parameter counts":
            per_param[:, 0],
    }.items():
        if torch.allclose(norms.detach(), wrong, rtol=1e-9, atol=1e-12):
            return _fail(name, f"your result is {slip}")
    return _compared(name, norms.detach(), expected,
                     "Each example's loss is ((model(x_i) - y_i) ** 2).mean() on a batch of one; "
                     "its gradient has an entry for every parameter, and the norm is the square "
                     "root of the sum of the squares of all of them",
                     praise=f"the same as a loop of {len(X)} backward calls on a new model, "
                            "from one batched pass")


EXERCISES = {
    "l14-jvp": Method(check=_check_column),
    "l14-per-sample": Method(check=_check_per_sample),
}

# --------------------------------------------------------------------------- predictions


def passes_for(in_shape, out_shape, seed=0):
    """Both modes' passes for the full Jacobian of a random f with these shapes:
    (JVPs, one per input element; VJPs, one per output element)."""
    gen = torch.Generator().manual_seed(seed)
    n, m = torch.Size(in_shape).numel(), torch.Size(out_shape).numel()
    A = torch.randn(m, n, generator=gen, dtype=torch.float64)

    def f_new(t):
        return torch.tanh(A @ t.reshape(-1)).reshape(out_shape)

    x = torch.randn(in_shape, generator=gen, dtype=torch.float64)
    with count_autograd() as forward:
        for e in torch.eye(n, dtype=torch.float64):
            jvp(f_new, (x,), (e.reshape(in_shape),))
    with count_autograd() as reverse:
        _, pullback = vjp(f_new, x)
        for e in torch.eye(m, dtype=torch.float64):
            pullback(e.reshape(out_shape))
    return forward.forward, reverse.reverse


def _loss_row_answer():
    return passes_for((64,), ())


def _lesson05_answer():
    from torch.func import jacfwd, jacrev

    inp = torch.eye(4, 5, dtype=torch.float64)

    def square_t(t):
        return (t + 1).pow(2).t()

    with count_autograd() as seen_05:
        torch.autograd.functional.jacobian(square_t, inp)
    with count_autograd() as seen_rev:
        jacrev(square_t)(inp)
    with count_autograd() as seen_fwd:
        jacfwd(square_t)(inp)
    return seen_05.reverse, seen_rev.reverse, seen_fwd.forward


SHAPES = {"a": ((28, 28), (10,)), "b": ((2,), (50, 3)), "c": ((100,), ())}


def _modes_answer():
    counted = {k: passes_for(*shapes) for k, shapes in SHAPES.items()}
    return tuple("jacfwd" if fw < rv else "jacrev" for fw, rv in counted.values())


PREDICTIONS = {
    "l14-predict-loss-row": Prediction(
        question="(forward-mode passes, reverse-mode passes) for the full Jacobian, n = 64, "
                 "m = 1",
        answer=_loss_row_answer,
        hint="one forward-mode pass fills one column of J, one reverse-mode pass one row: what "
             "shape is the Jacobian of a function with n inputs and m outputs?",
        why="forward mode needs one JVP per input (a column each), reverse mode one VJP per "
            "output (a row each); a loss has 64 inputs and 1 output, so {answer}",
    ),
    "l14-predict-lesson08": Prediction(
        question="(reverse passes of lesson 08's jacobian, reverse passes of jacrev, forward "
                 "passes of jacfwd)",
        answer=_lesson05_answer,
        hint="torch.autograd.functional.jacobian (without vectorize=True) runs one VJP per "
             "output element in a Python loop; jacrev and jacfwd batch all their one-hot "
             "vectors with vmap.",
        why="lesson 08's jacobian loops over the 20 output elements, one backward each; "
            "jacrev and jacfwd push all 20 one-hot vectors through at once, as one batched "
            "pass: {answer}",
    ),
    "l14-predict-modes": Prediction(
        question="the cheaper mode for (a), (b), (c)",
        answer=_modes_answer,
        hint="forward mode needs one pass per input element, reverse mode one per output "
             "element: count both sides for each function.",
        why="counted, forward vs reverse passes: (a) 784 vs 10, (b) 2 vs 150, (c) 100 vs 1; "
            "the side with fewer passes wins: {answer}",
    ),
}
