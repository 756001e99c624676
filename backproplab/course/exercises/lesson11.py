"""Lesson 11, pitfalls and tools: its exercises and its predictions.

Both exercises are method checks: the answer is not a gradient but code that
autograd runs, a tensor hook (Exercise 1), and a search with hooks for the
layer where the gradient vanishes in a broken network (Exercise 2). Each check
builds new tensors or networks from its seed, runs a real backward pass
through the learner's code and names the slip it sees, when one fits. The
second counts the hooks registered, the backward passes and the hooks left
behind, and knows the slips of a hunt for a vanishing gradient: .grad read on a
non-leaf, the walk started from the input, grad_output taken for grad_input.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections import OrderedDict
from collections.abc import Iterator

import torch
from torch import nn

from ._spec import Method, Prediction, Report, attempt, count_autograd, passed
from ._spec import failed as _fail

# --------------------------------------------------------------------------- Exercise 1

CLIP = "clip_hook"




def clip_cases(seed: int) -> list[tuple[torch.Tensor, float]]:
    """Gradients (float64) to send through the hook, each with its max_norm: two whose norm
    is above max_norm and one below, in a new order and of new sizes for every seed."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for scale in (5.0, 0.05, 3.0):
        n = int(torch.randint(3, 8, (1,), generator=gen))
        max_norm = 0.5 + float(torch.rand((), generator=gen))
        grad = torch.randn(n, generator=gen, dtype=torch.float64)
        cases.append((grad * (scale * max_norm / grad.norm()), max_norm))
    order = torch.randperm(3, generator=gen).tolist()
    return [cases[i] for i in order]


def _clipped(grad: torch.Tensor, max_norm: float) -> torch.Tensor:
    norm = grad.norm()
    return grad * (max_norm / norm) if norm > max_norm else grad


def _through_hook(hook, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Register ``hook`` on an intermediate tensor whose incoming gradient is ``grad``;
    return (what the hook passed on, the hook's argument after the call)."""
    x = torch.ones_like(grad, requires_grad=True)
    feature = x * 2
    seen = []
    feature.register_hook(lambda g: seen.append(g) or None)  # runs before the learner's
    feature.register_hook(hook)
    (feature * grad).sum().backward()
    return x.grad / 2, seen[0]


def _check_clip_hook(clip_hook, seed: int) -> Report:
    if not callable(clip_hook):
        return _fail(CLIP, f"expected the function clip_hook(max_norm), got "
                           f"{type(clip_hook).__name__}.")
    for grad, max_norm in clip_cases(seed):
        where = f"(a gradient of norm {grad.norm().item():.3g}, max_norm {max_norm:.3g})"
        hook, failure = attempt(CLIP, clip_hook, max_norm, what="clip_hook", raised=lambda err,
                                max_norm=max_norm: f"clip_hook({max_norm:.3g}) raised "
                                f"{type(err).__name__}: {err}.")
        if failure is not None:
            return failure
        if not callable(hook):
            return _fail(CLIP, f"clip_hook(max_norm) returned {type(hook).__name__}; it should "
                               "return the hook, a function of grad.")
        try:
            passed_on, argument = _through_hook(hook, grad.clone())
        except Exception as err:
            return _fail(CLIP, f"the hook raised {type(err).__name__}: {err} {where}.", "error")
        want = _clipped(grad, max_norm)
        big = grad.norm() > max_norm
        if not torch.equal(argument, grad):
            slip = ("it changes the gradient it is given in place. A hook must leave its "
                    "argument alone and return the new gradient")
        elif torch.allclose(passed_on, want, rtol=1e-5, atol=1e-12):
            continue
        elif big and torch.equal(passed_on, grad):
            slip = ("the gradient went on unchanged although its norm is above max_norm: the "
                    "hook must return the rescaled gradient (a hook that returns None, or "
                    "rebinds grad without returning it, changes nothing)")
        elif torch.allclose(passed_on, grad.clamp(-max_norm, max_norm)):
            slip = ("it clamps each entry to ±max_norm, which is clip_grad_value_; the task "
                    "rescales the whole gradient by one factor, so that its norm becomes "
                    "max_norm")
        elif not big and torch.allclose(passed_on, grad * (max_norm / grad.norm())):
            slip = ("it rescales a gradient whose norm is already below max_norm; those must "
                    "pass unchanged")
        elif big and torch.allclose(passed_on, grad / grad.norm()):
            slip = "it rescales to norm 1 instead of max_norm"
        else:
            norm = passed_on.norm().item() if passed_on.shape == grad.shape else float("nan")
            slip = (f"the gradient passed on has norm {norm:.4g}; expected "
                    f"{want.norm().item():.4g}, pointing the same way as the original")
        return _fail(CLIP, f"{where}: {slip}.")
    return passed(CLIP, "clipped when the norm is above max_norm, "
                                              "untouched otherwise, on 3 new gradients")


# --------------------------------------------------------------------------- Exercise 2

VANISH = "first_vanishing_layer"


class Gate(nn.Module):
    """Multiplies its input by a fixed factor: open at 1, shut at 0 (then nothing gets back).

    >>> Gate(0.0)(torch.ones(2))
    tensor([0., 0.])
    """

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor

    def extra_repr(self) -> str:
        return f"factor={self.factor}"


def _randint(low: int, high: int, gen: torch.Generator) -> int:
    return int(torch.randint(low, high, (1,), generator=gen))


def _draft(gen: torch.Generator, kind: str) -> tuple[nn.Sequential, torch.Tensor, float]:
    """One random network of Linear -> tanh or sigmoid blocks with an open gate somewhere;
    ``kind`` breaks it: "gate" shuts a gate, "sigmoid" or "tanh" saturates a block's
    activation (a huge bias in front of it), "healthy" leaves it whole."""
    blocks, width, d_in = _randint(3, 6, gen), _randint(3, 7, gen), _randint(2, 5, gen)
    broken = _randint(2, blocks + 1, gen)  # never the first block: something lies below
    gate_after = _randint(1, blocks + 1, gen)
    layers, prev = [], d_in
    for k in range(1, blocks + 1):
        fc = nn.Linear(prev, width).double()
        with torch.no_grad():
            fc.weight.copy_(torch.randn(width, prev, generator=gen, dtype=torch.float64)
                            / prev**0.5)
            fc.bias.copy_(0.1 * torch.randn(width, generator=gen, dtype=torch.float64))
        sigmoid = bool(torch.rand((), generator=gen) < 0.3)
        if kind in ("sigmoid", "tanh") and k == broken:
            sigmoid = kind == "sigmoid"
            with torch.no_grad():
                fc.weight.mul_(0.05)
                signs = torch.randint(0, 2, (width,), generator=gen).double() * 2 - 1
                fc.bias.copy_(signs * (25 + 10 * torch.rand(width, generator=gen,
                                                            dtype=torch.float64)))
        layers += [(f"fc{k}", fc), (f"act{k}", nn.Sigmoid() if sigmoid else nn.Tanh())]
        if k == gate_after:
            layers.append((f"gate{k}", Gate(0.0 if kind == "gate" and k > 1 else 1.0)))
        prev = width
    out = nn.Linear(prev, 1).double()
    with torch.no_grad():
        out.weight.copy_(torch.randn(1, prev, generator=gen, dtype=torch.float64))
    layers.append(("out", out))
    x = torch.randn(_randint(4, 9, gen), d_in, generator=gen, dtype=torch.float64)
    threshold = 10 ** -(6 + 2 * float(torch.rand((), generator=gen)))
    return nn.Sequential(OrderedDict(layers)), x, threshold


def input_grad_norms(model: nn.Sequential, x: torch.Tensor) -> dict[str, float]:
    """Each layer's gradient with respect to its input, as a norm, for model(x).sum():
    full backward hooks, removed afterwards."""
    norms, handles = {}, []
    for name, layer in model.named_children():
        def record(module, grad_input, grad_output, name=name):
            norms[name] = grad_input[0].norm().item()
        handles.append(layer.register_full_backward_hook(record))
    try:
        model(x.detach().clone().requires_grad_()).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    model.zero_grad()
    return norms


def _culprit(norms: dict[str, float], names: list[str], threshold: float) -> str | None:
    return next((n for n in reversed(names) if norms[n] < threshold), None)


def broken_network(gen: torch.Generator, kind: str) -> tuple[nn.Sequential, torch.Tensor,
                                                               float, str | None, dict]:
    """(model, x, threshold, the layer that kills the gradient or None, every layer's input
    gradient norm): drafts until the gradient is far above the threshold down to the
    culprit and far below it there."""
    while True:
        model, x, threshold = _draft(gen, kind)
        names = [n for n, _ in model.named_children()]
        norms = input_grad_norms(model, x)
        culprit = _culprit(norms, names, threshold)
        above = names[names.index(culprit) + 1:] if culprit else names
        clear = all(norms[n] > 100 * threshold for n in above) and (
            culprit is None or norms[culprit] < threshold / 100)
        if clear and (culprit is None) == (kind == "healthy"):
            return model, x, threshold, culprit, norms


def _left_hooks(model: nn.Module, x: torch.Tensor) -> int:
    """How many hooks are still on the model, its parameters and the input."""
    count = 0
    for module in model.modules():
        for table in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                      "_backward_pre_hooks"):
            count += len(getattr(module, table, None) or {})
    for t in [*model.parameters(), x]:
        count += len(t._backward_hooks or {})
        count += len(getattr(t, "_post_accumulate_grad_hooks", None) or {})
    return count


_REGISTERS = [
    (torch.Tensor, "register_hook"),
    (torch.Tensor, "register_post_accumulate_grad_hook"),
    (nn.Module, "register_full_backward_hook"),
    (nn.Module, "register_full_backward_pre_hook"),
    (nn.Module, "register_backward_hook"),
    (nn.Module, "register_forward_hook"),
    (nn.Module, "register_forward_pre_hook"),
]


@contextlib.contextmanager
def _counting_registrations() -> Iterator[list[str]]:
    """Count the tensor and module hooks registered inside the block."""
    made: list[str] = []
    originals = [(owner, name, getattr(owner, name)) for owner, name in _REGISTERS]

    def counted(name, method):
        @functools.wraps(method)
        def register(*args, **kwargs):
            made.append(name)
            return method(*args, **kwargs)
        return register

    for owner, name, method in originals:
        setattr(owner, name, counted(name, method))
    try:
        yield made
    finally:
        for owner, name, method in originals:
            setattr(owner, name, method)


def _run_learner(answer, model, x, threshold):
    """(its answer, hooks registered, backward passes, read a non-leaf .grad, or a report)."""
    with warnings.catch_warnings(record=True) as caught, _counting_registrations() as made:
        warnings.simplefilter("always")
        with count_autograd() as seen:
            got, failure = attempt(VANISH, answer, model, x, threshold,
                                   what="first_vanishing_layer")
    non_leaf = any("not a leaf Tensor is being accessed" in str(w.message) for w in caught)
    return got, failure, len(made), seen.reverse, non_leaf


def _check_vanishing(answer, seed: int) -> Report:
    gen = torch.Generator().manual_seed(seed)
    kinds = [("gate", "sigmoid", "tanh")[i] for i in torch.randperm(3, generator=gen).tolist()]
    for kind in [*kinds, "healthy"]:
        model, x, threshold, culprit, norms = broken_network(gen, kind)
        names = [n for n, _ in model.named_children()]
        learner_x = x.clone().requires_grad_()
        where = (f"on a new network of {len(names)} layers ({', '.join(names)}), "
                 f"threshold {threshold:.1e}")
        got, failure, made, passes, non_leaf = _run_learner(answer, model, learner_x, threshold)
        if non_leaf:
            return _fail(VANISH, f"{where}: your code read .grad of a non-leaf tensor (a layer's "
                                 "input or output). It stays None (section 3): backward passes "
                                 "an intermediate's gradient on without storing it. Let a hook "
                                 "receive it as it passes.")
        if failure is not None:
            return failure
        if made == 0:
            return _fail(VANISH, f"{where}: no hook was registered. The exercise asks for "
                                 "hooks that record every layer's gradient as backward passes "
                                 "through it (register_full_backward_hook on each layer, or "
                                 "register_hook on each layer's input).")
        if passes != 1:
            return _fail(VANISH, f"{where}: your function ran {passes} backward passes; one is "
                                 "enough, with a hook on every layer recording as it passes.")
        left = _left_hooks(model, learner_x)
        if left:
            return _fail(VANISH, f"{where}: {left} hook(s) are still registered when your "
                                 "function returns. A hook stays until its handle removes it "
                                 "(section 4): keep the handles and call .remove() on each, "
                                 "or the next backward through this model runs them again.")
        if got is not None and not isinstance(got, str):
            return _fail(VANISH, f"returned {type(got).__name__}; expected a layer's name (a "
                                 "str, as model.named_children() gives it) or None.")
        if got == culprit:
            continue
        if culprit is None:
            return _fail(VANISH, f"{where}: the gradient stays above the threshold at every "
                                 f"layer here, yet you returned {got!r}; expected None.")
        bottom = next(n for n in names if norms[n] < threshold)
        before = names[names.index(culprit) - 1]
        if got == bottom:
            slip = ("the walk went the wrong way: from the input up. Once the gradient has "
                    "vanished, every layer below gets almost nothing too, so the first small "
                    "one from the input is merely downstream of the damage. Walk from the "
                    "loss down (the last layer first), as backward does, and stop at the "
                    "first layer whose input gradient is under the threshold")
        elif got == before:
            slip = ("you found the layer just below the culprit: you measured the gradient "
                    "arriving at each layer's output (grad_output). The layer that kills the "
                    "gradient receives a healthy one and sends back a tiny one: measure what "
                    "each layer sends back to its input (grad_input)")
        elif got is None:
            slip = "you returned None, but the gradient does vanish in this network"
        elif got not in norms:
            slip = f"{got!r} is not a layer of this network"
        else:
            slip = (f"the gradient {got!r} sends back to its input has norm "
                    f"{norms[got]:.2e}, and the layers between it and the loss are not all "
                    "above the threshold: it is not the first one, walking back from the loss")
        return _fail(VANISH, f"{where}: {slip}.")
    return passed(VANISH, "the right layer on 3 new broken networks (a shut gate, a "
                          "saturated sigmoid, a saturated tanh) and None on a healthy one; "
                          "one backward pass, every hook removed")


EXERCISES = {
    "l11-reverse": Method(check=_check_clip_hook),
    "l11-vanishing": Method(check=_check_vanishing),
}

# --------------------------------------------------------------------------- predictions


def _inplace_answer():
    """Which in-place change breaks backward: after x + 1 or after x.sigmoid()?"""

    def fails(make_y):
        leaf = torch.tensor([1.0, 2.0], requires_grad=True)
        out = make_y(leaf)
        out.mul_(2)
        try:
            out.sum().backward()
            return False
        except RuntimeError:
            return True

    return "sigmoid" if fails(torch.sigmoid) else "add"


def _pileup_answer():
    """w.grad at step 3 when a doubling hook is registered on w inside the loop."""
    w = torch.tensor(1.0, requires_grad=True)
    for _step in range(3):
        w.register_hook(lambda grad: grad * 2)
        w.grad = None
        (3 * w).backward()
    return w.grad.item()


PREDICTIONS = {
    "l11-predict-inplace": Prediction(
        question="which in-place change breaks backward, the add (y = x + 1) or the sigmoid?",
        answer=_inplace_answer,
        hint="the version counter only matters for tensors a backward node saved. Which of the "
             "two backward formulas needs the value of y itself?",
        why="SigmoidBackward0 saved its output y to compute y(1 − y), and mul_ changed y after "
            "it was saved; the addition saved nothing. So the {answer} cell fails",
        choices=("add", "sigmoid"),
    ),
    "l11-predict-pileup": Prediction(
        question="w.grad at step 3, with the doubling hook registered inside the loop",
        answer=_pileup_answer,
        hint="register_hook adds a hook; it does not replace the ones already on w. How many "
             "hooks does w carry during the third backward, and what does each one do?",
        why="each step adds one more hook, so the third backward runs three of them: "
            "3 · 2 · 2 · 2 = {answer}",
    ),
}
